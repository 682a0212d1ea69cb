//! NDPluginStats per-frame time, through the plugin API (parameters read and written,
//! input passed on), against a memcpy of the same frame as the floor.
//!
//! `cargo bench -p ndflow-plugins --bench stats -- --quick`

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ndflow_core::{NDArray, Pixel, Pool};
use ndflow_plugins::stats::StatsPlugin;
use ndflow_runtime::PluginHarness;
use rand::{Rng, SeedableRng};

fn frame<T: Pixel>(nx: usize, ny: usize, max: f64) -> Arc<NDArray> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let data: Vec<T> = (0..nx * ny)
        .map(|_| T::from_f64(rng.random_range(0.0..max)))
        .collect();
    let pool = Pool::unlimited();
    match NDArray::from_pixels(&pool, &[nx, ny], &data) {
        Ok(f) => Arc::new(f),
        Err(e) => panic!("bench frame: {e}"),
    }
}

fn harness(centroid: bool, profiles: bool, histogram: bool) -> PluginHarness<StatsPlugin> {
    let h = PluginHarness::new(StatsPlugin::new());
    let yes_no = |b: bool| if b { "Yes" } else { "No" };
    for (name, v) in [
        ("ComputeStatistics", "Yes"),
        ("ComputeCentroid", yes_no(centroid)),
        ("ComputeProfiles", yes_no(profiles)),
        ("ComputeHistogram", yes_no(histogram)),
    ] {
        if let Err(e) = h.put(name, v) {
            panic!("bench setup: {e}");
        }
    }
    h
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("stats");
    let f8 = frame::<u8>(1024, 1024, 256.0);
    g.throughput(Throughput::Bytes(f8.total_bytes() as u64));

    let src = f8.data_bytes().to_vec();
    let mut dst = vec![0u8; src.len()];
    g.bench_function("memcpy_1MiB", |b| {
        b.iter(|| {
            dst.copy_from_slice(black_box(&src));
            black_box(&dst);
        })
    });

    let cases = [
        ("basic_u8_1024x1024", false, false, false),
        ("basic_centroid_u8_1024x1024", true, false, false),
        ("all_u8_1024x1024", true, true, true),
    ];
    for (name, centroid, profiles, histogram) in cases {
        let h = harness(centroid, profiles, histogram);
        g.bench_function(name, |b| b.iter(|| h.process_arc(black_box(&f8))));
    }

    let roi = frame::<u8>(512, 512, 256.0);
    let h = harness(true, false, false);
    g.throughput(Throughput::Bytes(roi.total_bytes() as u64));
    g.bench_function("basic_centroid_u8_512x512", |b| {
        b.iter(|| h.process_arc(black_box(&roi)))
    });

    let f16 = frame::<u16>(1024, 1024, 65536.0);
    g.throughput(Throughput::Bytes(f16.total_bytes() as u64));
    g.bench_function("basic_centroid_u16_1024x1024", |b| {
        b.iter(|| h.process_arc(black_box(&f16)))
    });
    let f32f = frame::<f32>(1024, 1024, 1000.0);
    g.throughput(Throughput::Bytes(f32f.total_bytes() as u64));
    g.bench_function("basic_centroid_f32_1024x1024", |b| {
        b.iter(|| h.process_arc(black_box(&f32f)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
