//! NDPluginProcess frame time for the 2013 benchmark's PROC1 (1024×1024 UInt8, Average of
//! 100 frames, output Automatic) against a memcpy of the same frame; `average100_f32` is the
//! same with FilterPrecision = Float32 (F in f32: half the memory traffic).
//!
//! `cargo bench -p ndflow-plugins --bench process -- --quick`

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ndflow_core::NDArray;
use ndflow_plugins::process::ProcessPlugin;
use ndflow_runtime::PluginHarness;

const W: usize = 1024;
const H: usize = 1024;

fn frame(h: &PluginHarness<ProcessPlugin>, seed: usize) -> Arc<NDArray> {
    let px: Vec<u8> = (0..W * H)
        .map(|i| ((i * 7 + seed * 13) % 251) as u8)
        .collect();
    match NDArray::from_pixels(&h.pool, &[W, H], &px) {
        Ok(f) => Arc::new(f),
        Err(e) => panic!("frame: {e}"),
    }
}

fn harness(setup: &[(&str, &str)]) -> PluginHarness<ProcessPlugin> {
    let h = PluginHarness::new(ProcessPlugin::new());
    for (name, value) in setup {
        if let Err(e) = h.put(name, *value) {
            panic!("{name}: {e}");
        }
    }
    h
}

fn run(h: &PluginHarness<ProcessPlugin>, f: &Arc<NDArray>) {
    match h.process_arc(f) {
        Ok(out) => drop(black_box(out)),
        Err(e) => panic!("process: {e}"),
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("process_1024x1024_u8");
    g.throughput(Throughput::Bytes((W * H) as u64));

    let src = vec![7u8; W * H];
    let mut dst = vec![0u8; W * H];
    g.bench_function("memcpy", |b| {
        b.iter(|| dst.copy_from_slice(black_box(&src)));
    });

    let cases: &[(&str, &[(&str, &str)])] = &[
        (
            "average100",
            &[
                ("EnableFilter", "Enable"),
                ("NumFilter", "100"),
                ("FilterType", "Average"),
            ],
        ),
        (
            "average100_f32",
            &[
                ("EnableFilter", "Enable"),
                ("NumFilter", "100"),
                ("FilterType", "Average"),
                ("FilterPrecision", "Float32"),
            ],
        ),
        (
            "recursive_ave_diff100",
            &[
                ("EnableFilter", "Enable"),
                ("NumFilter", "100"),
                ("FilterType", "RecursiveAveDiff"),
                ("OOffset", "128"),
            ],
        ),
        (
            "offset_scale_clip_average100",
            &[
                ("EnableFilter", "Enable"),
                ("NumFilter", "100"),
                ("FilterType", "Average"),
                ("EnableOffsetScale", "Enable"),
                ("Scale", "2"),
                ("EnableHighClip", "Enable"),
                ("HighClipThresh", "200"),
                ("HighClipValue", "200"),
            ],
        ),
        ("passthrough", &[]),
        ("convert_to_uint16", &[("DataTypeOut", "UInt16")]),
    ];
    for (name, setup) in cases {
        let h = harness(setup);
        let f = frame(&h, 1);
        // Fill the filter so N = NumFilter: the steady state of a long acquisition.
        for _ in 0..100 {
            run(&h, &f);
        }
        g.bench_function(*name, |b| b.iter(|| run(&h, &f)));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
