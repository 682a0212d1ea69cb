//! NDPluginROIStat per-frame time (8 ROIs, 1024x1024 UInt16), through the plugin API, against
//! a memcpy of the same frame as the floor.
//!
//! `cargo bench -p ndflow-plugins --bench roistat -- --quick`

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ndflow_core::{NDArray, Pool};
use ndflow_plugins::roistat::{scan, scan_portable, Rect, RoiStatPlugin};
use ndflow_runtime::PluginHarness;
use rand::{Rng, SeedableRng};

const N: usize = 1024;

fn frame() -> Arc<NDArray> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let data: Vec<u16> = (0..N * N).map(|_| rng.random_range(0..4096)).collect();
    match NDArray::from_pixels(&Pool::unlimited(), &[N, N], &data) {
        Ok(f) => Arc::new(f),
        Err(e) => panic!("bench frame: {e}"),
    }
}

/// 8 ROIs: `bands` = 8 horizontal bands tiling the frame (each pixel in one ROI), else 8
/// full-frame ROIs (each pixel in all 8); BgdWidth 4.
fn harness(bands: bool) -> PluginHarness<RoiStatPlugin> {
    let h = PluginHarness::new(RoiStatPlugin::new());
    for n in 1..=8usize {
        let (y0, sy) = if bands {
            ((n - 1) * N / 8, N / 8)
        } else {
            (0, N)
        };
        for (k, v) in [
            ("Use", 1),
            ("MinX", 0),
            ("MinY", y0 as i64),
            ("SizeX", N as i64),
            ("SizeY", sy as i64),
            ("BgdWidth", 4),
        ] {
            if let Err(e) = h.put(&format!("{n}:{k}"), v) {
                panic!("bench setup: {e}");
            }
        }
    }
    h
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("roistat");
    let f = frame();
    g.throughput(Throughput::Bytes(f.total_bytes() as u64));

    let src = f.data_bytes().to_vec();
    let mut dst = vec![0u8; src.len()];
    g.bench_function("memcpy_2MiB", |b| {
        b.iter(|| {
            dst.copy_from_slice(black_box(&src));
            black_box(&dst);
        })
    });
    for (name, bands) in [
        ("8_bands_u16_1024x1024", true),
        ("8_full_frame_u16_1024x1024", false),
    ] {
        let h = harness(bands);
        g.bench_function(name, |b| {
            b.iter(|| black_box(h.process_arc(black_box(&f))));
        });
    }
    // The kernel alone: dispatched (AVX2 where available) against the baseline build.
    let px = f.pixels::<u16>().unwrap_or_default();
    let rects: Vec<Rect> = (0..8)
        .map(|k| Rect {
            x0: 0,
            nx: N,
            y0: k * N / 8,
            ny: N / 8,
            bgd: 4,
        })
        .collect();
    g.bench_function("kernel_8_bands_dispatched", |b| {
        b.iter(|| black_box(scan(black_box(px), N, false, &rects)))
    });
    g.bench_function("kernel_8_bands_portable", |b| {
        b.iter(|| black_box(scan_portable(black_box(px), N, false, &rects)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
