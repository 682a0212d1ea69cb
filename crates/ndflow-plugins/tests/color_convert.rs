//! NDPluginColorConvert against plain per-pixel loops, for every data type and colour mode.

use crate::common;
use std::sync::Arc;

use ndflow_core::{with_pixel_type, AttrValue, ColorMode, DataType, NDArray, NDAttribute, Pixel};
use ndflow_plugins::color_convert::{
    false_colour, ColorConvertPlugin, FalseColor, COLOR_CONVERT_PARAMS,
};
use ndflow_runtime::{PluginError, PluginHarness};
use rand::{Rng, SeedableRng};

const W: usize = 6;
const H: usize = 5;
const RGB: [ColorMode; 3] = [ColorMode::RGB1, ColorMode::RGB2, ColorMode::RGB3];

fn idx(mode: ColorMode, x: usize, y: usize, c: usize) -> usize {
    match mode {
        ColorMode::RGB1 => c + 3 * x + 3 * W * y,
        ColorMode::RGB2 => x + W * c + 3 * W * y,
        ColorMode::RGB3 => x + W * y + W * H * c,
        _ => x + W * y,
    }
}

fn sizes(mode: ColorMode) -> Vec<usize> {
    match mode {
        ColorMode::RGB1 => vec![3, W, H],
        ColorMode::RGB2 => vec![W, 3, H],
        ColorMode::RGB3 => vec![W, H, 3],
        _ => vec![W, H],
    }
}

fn noise<T: Pixel>(n: usize, seed: u64) -> Vec<T> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let (lo, hi) = (T::MIN_F64.max(0.0), T::MAX_F64.min(60000.0));
    (0..n)
        .map(|_| T::from_f64(rng.random_range(lo..=hi)))
        .collect()
}

fn run<T: Pixel>(
    mode_in: ColorMode,
    out: ColorMode,
    data: &[T],
    puts: &[(&str, i64)],
) -> Arc<NDArray> {
    let h = PluginHarness::new(ColorConvertPlugin::new());
    h.put("ColorModeOut", out as i64).unwrap();
    for (k, v) in puts {
        h.put(k, *v).unwrap();
    }
    let mut f = NDArray::from_pixels(&h.pool, &sizes(mode_in), data).unwrap();
    f.set_color_mode(mode_in);
    let mut o = h.process(f).unwrap();
    assert_eq!(o.len(), 1);
    let o = o.remove(0);
    assert_eq!(o.sizes(), sizes(out), "{mode_in:?} -> {out:?}");
    assert_eq!(o.color_mode(), out);
    o
}

fn check_type<T: Pixel>() {
    let ctx = T::DATA_TYPE;
    let mono = noise::<T>(W * H, 1);
    let rgb_src = noise::<T>(3 * W * H, 2);
    for m in RGB {
        // Mono -> RGBn: every colour is the mono value.
        let o = run(ColorMode::Mono, m, &mono, &[]);
        let px = o.pixels::<T>().unwrap();
        for (y, x, c) in iter3() {
            assert_eq!(px[idx(m, x, y, c)], mono[x + W * y], "{ctx} {m:?}");
        }
        // RGBn -> Mono: (R+G+B)/3 in f64, `as`.
        let o = run(m, ColorMode::Mono, &rgb_src, &[]);
        let px = o.pixels::<T>().unwrap();
        for (y, x, _) in iter3().filter(|t| t.2 == 0) {
            let s: f64 = (0..3).map(|c| rgb_src[idx(m, x, y, c)].to_f64()).sum();
            assert_eq!(px[x + W * y], T::from_f64(s / 3.0), "{ctx} {m:?}");
        }
        // RGBn -> RGBm: the same pixels in another layout.
        for m2 in RGB.into_iter().filter(|m2| *m2 != m) {
            let o = run(m, m2, &rgb_src, &[]);
            let px = o.pixels::<T>().unwrap();
            for (y, x, c) in iter3() {
                assert_eq!(
                    px[idx(m2, x, y, c)],
                    rgb_src[idx(m, x, y, c)],
                    "{ctx} {m2:?}"
                );
            }
        }
    }
    // Round trip RGB1 -> RGB3 -> RGB1 is exact.
    let o = run(ColorMode::RGB1, ColorMode::RGB3, &rgb_src, &[]);
    let back = run(
        ColorMode::RGB3,
        ColorMode::RGB1,
        o.pixels::<T>().unwrap(),
        &[],
    );
    assert_eq!(
        back.pixels::<T>().unwrap(),
        &rgb_src[..],
        "{ctx} round trip"
    );
}

fn iter3() -> impl Iterator<Item = (usize, usize, usize)> {
    (0..H).flat_map(|y| (0..W).flat_map(move |x| (0..3).map(move |c| (y, x, c))))
}

#[test]
fn conversions_match_plain_loops_for_every_type() {
    for dt in DataType::ALL {
        with_pixel_type!(dt, T => check_type::<T>());
    }
}

#[test]
fn false_colour_maps_match_adcore_values() {
    // Spot values of ADCore's colorMaps.h tables.
    assert_eq!(false_colour(FalseColor::Rainbow, 0), [0, 0, 0]);
    assert_eq!(false_colour(FalseColor::Rainbow, 11), [0, 0, 45]);
    assert_eq!(false_colour(FalseColor::Rainbow, 128), [4, 255, 251]);
    assert_eq!(false_colour(FalseColor::Rainbow, 160)[0], 131);
    assert_eq!(false_colour(FalseColor::Rainbow, 254), [255, 4, 0]);
    assert_eq!(false_colour(FalseColor::Rainbow, 255), [255, 255, 255]);
    assert_eq!(false_colour(FalseColor::Iron, 4), [6, 2, 6]);
    assert_eq!(false_colour(FalseColor::Iron, 10), [15, 5, 17]);
    assert_eq!(false_colour(FalseColor::Iron, 72), [108, 36, 120]);
    assert_eq!(false_colour(FalseColor::Iron, 130), [192, 67, 64]);
    assert_eq!(false_colour(FalseColor::Iron, 254), [192, 253, 64]);
    // Through the plugin, UInt8 and Int8 (bytes reinterpreted), every layout.
    let bytes: Vec<u8> = (0..(W * H) as u8).map(|i| i.wrapping_mul(9)).collect();
    for (fc, map) in [(1, FalseColor::Rainbow), (2, FalseColor::Iron)] {
        for m in RGB {
            let o = run(ColorMode::Mono, m, &bytes, &[("FalseColor", fc)]);
            let px = o.pixels::<u8>().unwrap();
            let signed: Vec<i8> = bytes.iter().map(|b| *b as i8).collect();
            let os = run(ColorMode::Mono, m, &signed, &[("FalseColor", fc)]);
            let ps = os.pixels::<i8>().unwrap();
            for (y, x, c) in iter3() {
                let want = false_colour(map, bytes[x + W * y])[c];
                assert_eq!(px[idx(m, x, y, c)], want);
                assert_eq!(ps[idx(m, x, y, c)], want as i8);
            }
        }
    }
    // Other types ignore FalseColor.
    let v: Vec<u16> = (0..(W * H) as u16).collect();
    let o = run(ColorMode::Mono, ColorMode::RGB1, &v, &[("FalseColor", 1)]);
    assert_eq!(o.pixels::<u16>().unwrap()[3..6], [1, 1, 1]);
}

/// ADCore's Bayer interpolation, written out per pixel.
fn bayer_ref<T: Pixel>(
    d: &[T],
    w: usize,
    h: usize,
    pat: usize,
    off: (usize, usize),
) -> Vec<[f64; 3]> {
    let int = !T::DATA_TYPE.is_float();
    let q = |s: f64, n: f64| if int { (s / n).trunc() } else { s / n };
    let v = |x: usize, y: usize| d[x + w * y].to_f64();
    let mut out = Vec::new();
    for y in 0..h {
        for x in 0..w {
            let bx = x + off.0 + (pat >> 1 & 1);
            let by = y + off.1 + (pat & 1);
            let mut c = [0.0; 3];
            let own = if bx.is_multiple_of(2) && by.is_multiple_of(2) {
                0
            } else if bx % 2 == 1 && by % 2 == 1 {
                2
            } else {
                1
            };
            c[own] = v(x, y);
            if x > 0 && y > 0 && x < w - 1 && y < h - 1 {
                let diag = v(x - 1, y - 1) + v(x + 1, y - 1) + v(x - 1, y + 1) + v(x + 1, y + 1);
                let cross = v(x, y - 1) + v(x - 1, y) + v(x + 1, y) + v(x, y + 1);
                let lr = v(x - 1, y) + v(x + 1, y);
                let ud = v(x, y - 1) + v(x, y + 1);
                if own == 0 {
                    c[2] = q(diag, 4.0);
                    c[1] = q(cross, 4.0);
                } else if own == 2 {
                    c[0] = q(diag, 4.0);
                    c[1] = q(cross, 4.0);
                } else if bx % 2 == 1 {
                    c[0] = q(lr, 2.0);
                    c[2] = q(ud, 2.0);
                } else {
                    c[2] = q(lr, 2.0);
                    c[0] = q(ud, 2.0);
                }
            }
            out.push(c);
        }
    }
    out
}

fn bayer_frame<T: Pixel>(
    h: &PluginHarness<ColorConvertPlugin>,
    d: &[T],
    pat: i32,
    off: (usize, usize),
) -> NDArray {
    let mut f = NDArray::from_pixels(&h.pool, &[W, H], d).unwrap();
    f.set_color_mode(ColorMode::Bayer);
    f.set_attribute(NDAttribute::new("BayerPattern", "", AttrValue::Int32(pat)));
    f.dims[0].offset = off.0;
    f.dims[1].offset = off.1;
    f
}

fn check_bayer<T: Pixel>() {
    let data = noise::<T>(W * H, 5);
    for pat in 0..4 {
        for off in [(0, 0), (1, 0), (0, 1), (3, 5)] {
            let want = bayer_ref(&data, W, H, pat as usize, off);
            for out in [
                ColorMode::Mono,
                ColorMode::RGB1,
                ColorMode::RGB2,
                ColorMode::RGB3,
            ] {
                let h = PluginHarness::new(ColorConvertPlugin::new());
                h.put("ColorModeOut", out as i64).unwrap();
                let o = h.process(bayer_frame(&h, &data, pat, off)).unwrap();
                let px = o[0].pixels::<T>().unwrap();
                let ctx = format!("{} pattern {pat} offset {off:?} {out:?}", T::DATA_TYPE);
                for (y, x, c) in iter3() {
                    let w = want[x + W * y];
                    if out == ColorMode::Mono {
                        let int = !T::DATA_TYPE.is_float();
                        let s = (w[0] + w[1] + w[2]) / 3.0;
                        let s = if int { s.trunc() } else { s };
                        assert_eq!(px[x + W * y], T::from_f64(s), "{ctx}");
                    } else {
                        assert_eq!(px[idx(out, x, y, c)], T::from_f64(w[c]), "{ctx}");
                    }
                }
            }
        }
    }
}

#[test]
fn bayer_matches_the_plain_interpolation_for_every_type() {
    for dt in DataType::ALL {
        with_pixel_type!(dt, T => check_bayer::<T>());
    }
}

#[test]
fn bayer_of_a_known_uniform_scene_recovers_its_colour() {
    // A flat (R, G, B) = (200, 100, 40) scene seen through each mosaic.
    let colour = [200u16, 100, 40];
    for pat in 0..4usize {
        let mosaic: Vec<u16> = (0..W * H)
            .map(|i| {
                let (x, y) = (i % W + (pat >> 1 & 1), i / W + (pat & 1));
                match (x % 2, y % 2) {
                    (0, 0) => colour[0],
                    (1, 1) => colour[2],
                    _ => colour[1],
                }
            })
            .collect();
        let h = PluginHarness::new(ColorConvertPlugin::new());
        h.put("ColorModeOut", ColorMode::RGB1 as i64).unwrap();
        let o = h
            .process(bayer_frame(&h, &mosaic, pat as i32, (0, 0)))
            .unwrap();
        let px = o[0].pixels::<u16>().unwrap();
        for y in 1..H - 1 {
            for x in 1..W - 1 {
                assert_eq!(
                    &px[3 * (x + W * y)..][..3],
                    &colour,
                    "pattern {pat} ({x},{y})"
                );
            }
        }
    }
}

#[test]
fn unsupported_conversions_are_refused() {
    let h = PluginHarness::new(ColorConvertPlugin::new());
    let mono = |h: &PluginHarness<ColorConvertPlugin>| {
        NDArray::from_pixels(&h.pool, &[W, H], &[0u8; W * H]).unwrap()
    };
    let mut cases = Vec::new();
    for out in [
        ColorMode::Bayer,
        ColorMode::YUV444,
        ColorMode::YUV422,
        ColorMode::YUV411,
    ] {
        let mut f = NDArray::from_pixels(&h.pool, &[3, W, H], &[0u8; 3 * W * H]).unwrap();
        f.set_color_mode(ColorMode::RGB1);
        cases.push((out, f));
        cases.push((out, mono(&h)));
    }
    let mut yuv = mono(&h);
    yuv.set_color_mode(ColorMode::YUV422);
    cases.push((ColorMode::RGB1, yuv));
    let mut bad_rgb = mono(&h);
    bad_rgb.set_color_mode(ColorMode::RGB1);
    cases.push((ColorMode::Mono, bad_rgb));
    let three_d = NDArray::from_pixels(&h.pool, &[2, W, H], &[0u8; 2 * W * H]).unwrap();
    cases.push((ColorMode::RGB1, three_d));
    let mut compressed = mono(&h);
    compressed.codec.name = "zlib".into();
    cases.push((ColorMode::RGB1, compressed));
    for (out, f) in cases {
        h.put("ColorModeOut", out as i64).unwrap();
        let e = h.process(f).unwrap_err();
        assert!(matches!(e, PluginError::Unsupported(_)), "{e}");
    }
    // Same mode in and out: passed on, pixels shared.
    h.put("ColorModeOut", ColorMode::Mono as i64).unwrap();
    let f = Arc::new(mono(&h));
    assert!(h.process_arc(&f).unwrap()[0].buffer.ptr_eq(&f.buffer));
}

#[test]
fn every_template_record_is_served() {
    use ndflow_runtime::port_params::{ARRAY_BASE_PARAMS, PLUGIN_BASE_PARAMS};
    let tables = [ARRAY_BASE_PARAMS, PLUGIN_BASE_PARAMS, COLOR_CONVERT_PARAMS];
    common::check_records("NDColorConvert", &tables, &[""], true);
}

/// Rows wider than the 16-pixel blocks of the interleaved kernels (plus a ragged tail), full
/// value range (negative sums for signed types): RGB1 -> Mono and RGB1 -> RGB2/RGB3.
fn check_wide<T: Pixel>() {
    let (w, h) = (37, 3);
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    let (lo, hi) = (T::MIN_F64.max(-1e9), T::MAX_F64.min(1e9));
    let data: Vec<T> = (0..3 * w * h)
        .map(|_| T::from_f64(rng.random_range(lo..=hi)))
        .collect();
    let harness = |out: ColorMode| {
        let hn = PluginHarness::new(ColorConvertPlugin::new());
        hn.put("ColorModeOut", out as i64).unwrap();
        let mut f = NDArray::from_pixels(&hn.pool, &[3, w, h], &data).unwrap();
        f.set_color_mode(ColorMode::RGB1);
        hn.process(f).unwrap().remove(0)
    };
    let mono = harness(ColorMode::Mono);
    for (i, m) in mono.pixels::<T>().unwrap().iter().enumerate() {
        let s: f64 = data[3 * i..3 * i + 3].iter().map(|v| v.to_f64()).sum();
        assert_eq!(*m, T::from_f64(s / 3.0), "{} pixel {i}", T::DATA_TYPE);
    }
    let rgb3 = harness(ColorMode::RGB3);
    let rgb2 = harness(ColorMode::RGB2);
    let (p3, p2) = (rgb3.pixels::<T>().unwrap(), rgb2.pixels::<T>().unwrap());
    for y in 0..h {
        for x in 0..w {
            for c in 0..3 {
                let v = data[c + 3 * (x + w * y)];
                assert_eq!(p3[x + w * y + w * h * c], v, "{}", T::DATA_TYPE);
                assert_eq!(p2[x + w * c + 3 * w * y], v, "{}", T::DATA_TYPE);
            }
        }
    }
}

#[test]
fn wide_interleaved_rows_match_plain_loops() {
    for dt in DataType::ALL {
        with_pixel_type!(dt, T => check_wide::<T>());
    }
}
