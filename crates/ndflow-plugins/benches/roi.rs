//! NDPluginROI micro-benchmarks: the 2013 benchmark's quadrant extraction (a 512×512
//! quadrant of a 1024×1024 UInt8 frame, and all four per frame), 2×2 binning of a UInt16
//! frame, and a plain memcpy of the quadrant's bytes as the floor.
//!
//! Run: `cargo bench -p ndflow-plugins --bench roi -- --quick`

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ndflow_core::{NDArray, Pixel};
use ndflow_plugins::roi::RoiPlugin;
use ndflow_runtime::PluginHarness;

const W: usize = 1024;
const Q: usize = 512;

fn frame<T: Pixel>(h: &PluginHarness<RoiPlugin>) -> Arc<NDArray> {
    let data: Vec<T> = (0..W * W).map(|i| T::from_f64((i % 251) as f64)).collect();
    match NDArray::from_pixels(&h.pool, &[W, W], &data) {
        Ok(f) => Arc::new(f),
        Err(e) => panic!("bench frame: {e}"),
    }
}

fn roi(puts: &[(&str, i64)]) -> PluginHarness<RoiPlugin> {
    let h = PluginHarness::new(RoiPlugin::new());
    for (name, v) in puts {
        if let Err(e) = h.put(name, *v) {
            panic!("bench setup {name}: {e}");
        }
    }
    h
}

fn quadrant(x: i64, y: i64) -> PluginHarness<RoiPlugin> {
    roi(&[
        ("MinX", x),
        ("MinY", y),
        ("SizeX", Q as i64),
        ("SizeY", Q as i64),
    ])
}

fn run(h: &PluginHarness<RoiPlugin>, f: &Arc<NDArray>) {
    match h.process_arc(f) {
        Ok(out) => drop(black_box(out)),
        Err(e) => panic!("bench process: {e}"),
    }
}

fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("roi");

    let h = quadrant(Q as i64, Q as i64);
    let f = frame::<u8>(&h);
    g.throughput(Throughput::Bytes((Q * Q) as u64));
    g.bench_function("quadrant_512_of_1024_u8", |b| b.iter(|| run(&h, &f)));

    let src = vec![7u8; Q * Q];
    let mut dst = vec![0u8; Q * Q];
    g.bench_function("memcpy_256KiB", |b| {
        b.iter(|| {
            dst.copy_from_slice(black_box(&src));
            black_box(&mut dst);
        })
    });

    let quads: Vec<_> = [(0, 0), (Q, 0), (0, Q), (Q, Q)]
        .iter()
        .map(|&(x, y)| quadrant(x as i64, y as i64))
        .collect();
    g.throughput(Throughput::Bytes((W * W) as u64));
    g.bench_function("four_quadrants_1024_u8", |b| {
        b.iter(|| quads.iter().for_each(|h| run(h, &f)))
    });

    let h = roi(&[("BinX", 2), ("BinY", 2)]);
    let f = frame::<u16>(&h);
    g.throughput(Throughput::Bytes((W * W * 2) as u64));
    g.bench_function("bin2x2_1024_u16", |b| b.iter(|| run(&h, &f)));

    g.finish();
}

criterion_group!(roi_benches, benches);
criterion_main!(roi_benches);
