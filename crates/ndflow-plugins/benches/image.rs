//! Image plugin kernels (Transform, ColorConvert, BadPixel Set, FFT, Overlay) on 1024×1024 frames,
//! next to a memcpy of the same bytes (throughput = input bytes).
//!
//! Run: `cargo bench -p ndflow-plugins --bench image -- --quick`

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ndflow_core::{ColorMode, NDArray, Pixel};
use ndflow_plugins::bad_pixel::BadPixelPlugin;
use ndflow_plugins::color_convert::ColorConvertPlugin;
use ndflow_plugins::fft::FftPlugin;
use ndflow_plugins::overlay::OverlayPlugin;
use ndflow_plugins::transform::TransformPlugin;
use ndflow_runtime::{Plugin, PluginHarness};

const W: usize = 1024;

fn frame<T: Pixel, P: Plugin>(
    h: &PluginHarness<P>,
    sizes: &[usize],
    mode: ColorMode,
) -> Arc<NDArray> {
    let n: usize = sizes.iter().product();
    let data: Vec<T> = (0..n).map(|i| T::from_f64((i % 251) as f64)).collect();
    match NDArray::from_pixels(&h.pool, sizes, &data) {
        Ok(mut f) => {
            f.set_color_mode(mode);
            Arc::new(f)
        }
        Err(e) => panic!("bench frame: {e}"),
    }
}

fn harness<P: Plugin>(p: P, puts: &[(&str, i64)]) -> PluginHarness<P> {
    let h = PluginHarness::new(p);
    for (k, v) in puts {
        if let Err(e) = h.put(k, *v) {
            panic!("bench setup {k}: {e}");
        }
    }
    h
}

/// Eight overlays, two of each shape, spread over a 1024x1024 frame; text with a time stamp.
fn overlay_harness() -> PluginHarness<OverlayPlugin> {
    let h = harness(OverlayPlugin::new(), &[]);
    for n in 1..=8i64 {
        let puts = [
            ("Use", 1),
            ("Shape", (n - 1) % 4),
            ("DrawMode", n % 2),
            ("SizeX", 200),
            ("SizeY", 150),
            ("PositionX", 100 * n),
            ("PositionY", 90 * n),
            ("WidthX", 3),
            ("WidthY", 3),
        ];
        for (k, v) in puts {
            if let Err(e) = h.put(&format!("{n}:{k}"), v) {
                panic!("bench setup {k}: {e}");
            }
        }
        if let Err(e) = h.put(&format!("{n}:DisplayText"), "ndflow overlay ") {
            panic!("bench setup: {e}");
        }
    }
    h
}

fn run<P: Plugin>(h: &PluginHarness<P>, f: &Arc<NDArray>) {
    match h.process_arc(f) {
        Ok(out) => drop(black_box(out)),
        Err(e) => panic!("bench process: {e}"),
    }
}

fn memcpy(g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>, bytes: usize) {
    let src = vec![7u8; bytes];
    let mut dst = vec![0u8; bytes];
    g.throughput(Throughput::Bytes(bytes as u64));
    g.bench_function(format!("memcpy_{}KiB", bytes / 1024), |b| {
        b.iter(|| {
            dst.copy_from_slice(black_box(&src));
            black_box(&mut dst);
        })
    });
}

fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("image");
    memcpy(&mut g, W * W * 2);
    g.throughput(Throughput::Bytes((W * W * 2) as u64));
    for (kind, name) in [
        (1, "rot90"),
        (3, "rot270"),
        (4, "mirror"),
        (5, "transpose"),
        (6, "rot180mirror"),
        (7, "rot270mirror"),
    ] {
        let h = harness(TransformPlugin::new(), &[("Type", kind)]);
        let f = frame::<u16, _>(&h, &[W, W], ColorMode::Mono);
        g.bench_function(format!("transform_{name}_1024_u16"), |b| {
            b.iter(|| run(&h, &f))
        });
    }
    let h = harness(ColorConvertPlugin::new(), &[("ColorModeOut", 2)]);
    let f = frame::<u16, _>(&h, &[W, W], ColorMode::Mono);
    g.bench_function("colorconvert_mono_to_rgb1_1024_u16", |b| {
        b.iter(|| run(&h, &f))
    });
    let h = harness(BadPixelPlugin::new(), &[]);
    let path =
        std::env::temp_dir().join(format!("ndflow-bench-badpixel-{}.json", std::process::id()));
    let list: Vec<String> = (0..100)
        .map(|i| format!("{{\"Pixel\": [{}, {}], \"Set\": 0}}", i * 10, i * 7))
        .collect();
    if let Err(e) = std::fs::write(&path, format!("{{\"Bad pixels\": [{}]}}", list.join(","))) {
        panic!("bench file: {e}");
    }
    if let Err(e) = h.put("FileName", path.to_string_lossy().as_ref()) {
        panic!("bench setup: {e}");
    }
    let f = frame::<u16, _>(&h, &[W, W], ColorMode::Mono);
    g.bench_function("badpixel_set100_1024_u16", |b| b.iter(|| run(&h, &f)));
    let h = overlay_harness();
    let f = frame::<u16, _>(&h, &[W, W], ColorMode::Mono);
    g.bench_function("overlay_8shapes_1024_u16", |b| b.iter(|| run(&h, &f)));
    let h = harness(FftPlugin::new(), &[]);
    let f = frame::<u16, _>(&h, &[W, W], ColorMode::Mono);
    g.bench_function("fft_2d_1024_u16", |b| b.iter(|| run(&h, &f)));

    memcpy(&mut g, W * W * 3);
    g.throughput(Throughput::Bytes((W * W * 3) as u64));
    for (out, name) in [(4, "rgb3"), (3, "rgb2"), (0, "mono")] {
        let h = harness(ColorConvertPlugin::new(), &[("ColorModeOut", out)]);
        let f = frame::<u8, _>(&h, &[3, W, W], ColorMode::RGB1);
        g.bench_function(format!("colorconvert_rgb1_to_{name}_1024_u8"), |b| {
            b.iter(|| run(&h, &f))
        });
    }
    for (mode, sizes, name) in [
        (ColorMode::RGB3, [W, W, 3], "rgb3"),
        (ColorMode::RGB2, [W, 3, W], "rgb2"),
    ] {
        let h = harness(ColorConvertPlugin::new(), &[("ColorModeOut", 2)]);
        let f = frame::<u8, _>(&h, &sizes, mode);
        g.bench_function(format!("colorconvert_{name}_to_rgb1_1024_u8"), |b| {
            b.iter(|| run(&h, &f))
        });
    }
    let h = overlay_harness();
    let f = frame::<u8, _>(&h, &[3, W, W], ColorMode::RGB1);
    g.bench_function("overlay_8shapes_1024_rgb1_u8", |b| b.iter(|| run(&h, &f)));

    memcpy(&mut g, W * W * 6);
    g.throughput(Throughput::Bytes((W * W * 6) as u64));
    for (out, name) in [(4, "rgb3"), (0, "mono")] {
        let h = harness(ColorConvertPlugin::new(), &[("ColorModeOut", out)]);
        let f = frame::<u16, _>(&h, &[3, W, W], ColorMode::RGB1);
        g.bench_function(format!("colorconvert_rgb1_to_{name}_1024_u16"), |b| {
            b.iter(|| run(&h, &f))
        });
    }
    g.finish();
}

criterion_group!(image_benches, benches);
criterion_main!(image_benches);
