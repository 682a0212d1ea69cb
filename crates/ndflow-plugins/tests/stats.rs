//! NDPluginStats against plain f64 reference loops (areaDetector's definitions), for all ten
//! pixel types, plus known images and the plugin's parameter table.

use std::sync::Arc;

use ndflow_core::{ArrayValue, Codec, ColorMode, DataType, NDArray, ParamValue, Pixel, Pool};
use ndflow_plugins::stats::{StatsPlugin, STATS_PARAMS};
use ndflow_runtime::{Plugin, PluginHarness};
use rand::{Rng, SeedableRng};

// ---------------------------------------------------------------- reference

/// Everything the plugin computes, by the most direct loops.
#[derive(Debug, Default)]
struct Expected {
    min: f64,
    max: f64,
    min_xy: (f64, f64),
    max_xy: (f64, f64),
    mean: f64,
    sigma: f64,
    total: f64,
    net: f64,
    /// CentroidTotal, X, Y, SigmaX, SigmaY, SigmaXY, SkewX, SkewY, KurtosisX, KurtosisY,
    /// Eccentricity, Orientation.
    centroid: [f64; 12],
}

const CENTROID_NAMES: [&str; 12] = [
    "CentroidTotal",
    "CentroidX",
    "CentroidY",
    "SigmaX",
    "SigmaY",
    "SigmaXY",
    "SkewX",
    "SkewY",
    "KurtosisX",
    "KurtosisY",
    "Eccentricity",
    "Orientation",
];

/// Border multiplicity of element `i`: per dim, 1 for being in the first `w` and 1 for
/// being in the last `w` (areaDetector sums the two slabs of every dim separately).
fn border_weight(i: usize, sizes: &[usize], w: usize) -> usize {
    let mut rest = i;
    let mut weight = 0;
    for &n in sizes {
        let c = rest % n;
        rest /= n;
        let w = w.min(n);
        weight += usize::from(c < w) + usize::from(c >= n - w);
    }
    weight
}

fn reference(v: &[f64], sizes: &[usize], x_size: usize, thr: f64, bgd: usize) -> Expected {
    let n = v.len() as f64;
    let mut e = Expected {
        min: v[0],
        max: v[0],
        ..Default::default()
    };
    let (mut imin, mut imax, mut sum2) = (0, 0, 0.0);
    for (i, &x) in v.iter().enumerate() {
        if x < e.min {
            e.min = x;
            imin = i;
        }
        if x > e.max {
            e.max = x;
            imax = i;
        }
        e.total += x;
        sum2 += x * x;
    }
    e.min_xy = ((imin % x_size) as f64, (imin / x_size) as f64);
    e.max_xy = ((imax % x_size) as f64, (imax / x_size) as f64);
    e.mean = e.total / n;
    e.sigma = (sum2 / n - e.mean * e.mean).sqrt();
    e.net = e.total;
    if bgd > 0 {
        let (mut counts, mut pixels) = (0.0, 0usize);
        for (i, &x) in v.iter().enumerate() {
            let w = border_weight(i, sizes, bgd);
            counts += x * w as f64;
            pixels += w;
        }
        e.net = e.total - counts / pixels as f64 * n;
    }
    if sizes.len() <= 2 {
        let nx = sizes[0];
        let mut m = [[0.0f64; 5]; 5];
        for (i, &x) in v.iter().enumerate() {
            if x >= thr {
                let (px, py) = ((i % nx) as f64, (i / nx) as f64);
                for (p, row) in m.iter_mut().enumerate() {
                    for (q, mpq) in row.iter_mut().enumerate() {
                        if p + q <= 4 && (p == 0 || q == 0 || p + q == 2) {
                            *mpq += x * px.powi(p as i32) * py.powi(q as i32);
                        }
                    }
                }
            }
        }
        e.centroid = centroid_from(&m);
    }
    e
}

/// areaDetector's doComputeCentroid from raw moments m[p][q] = Σ x^p y^q w.
fn centroid_from(m: &[[f64; 5]; 5]) -> [f64; 12] {
    let m00 = m[0][0];
    if m00 <= 0.0 {
        return [0.0; 12];
    }
    let (cx, cy) = (m[1][0] / m00, m[0][1] / m00);
    // Central moments straight from their definition, via the binomial expansion.
    let mu20 = m[2][0] / m00 - cx * cx;
    let mu02 = m[0][2] / m00 - cy * cy;
    let mu11 = m[1][1] / m00 - cx * cy;
    let mu30 = m[3][0] / m00 - 3.0 * cx * m[2][0] / m00 + 2.0 * cx.powi(3);
    let mu03 = m[0][3] / m00 - 3.0 * cy * m[0][2] / m00 + 2.0 * cy.powi(3);
    let mu40 =
        m[4][0] / m00 - 4.0 * cx * m[3][0] / m00 + 6.0 * cx * cx * m[2][0] / m00 - 3.0 * cx.powi(4);
    let mu04 =
        m[0][4] / m00 - 4.0 * cy * m[0][3] / m00 + 6.0 * cy * cy * m[0][2] / m00 - 3.0 * cy.powi(4);
    let (sx, sy) = (mu20.sqrt(), mu02.sqrt());
    let sxy = if sx != 0.0 && sy != 0.0 {
        mu11 / (sx * sy)
    } else {
        0.0
    };
    let (skx, kx) = if mu20 != 0.0 {
        (mu30 / mu20.powf(1.5), mu40 / (mu20 * mu20) - 3.0)
    } else {
        (0.0, 0.0)
    };
    let (sky, ky) = if mu02 != 0.0 {
        (mu03 / mu02.powf(1.5), mu04 / (mu02 * mu02) - 3.0)
    } else {
        (0.0, 0.0)
    };
    let ecc = if mu20 + mu02 != 0.0 {
        ((mu20 - mu02).powi(2) - 4.0 * mu11 * mu11) / (mu20 + mu02).powi(2)
    } else {
        0.0
    };
    let orient = (0.5 * (2.0 * mu11).atan2(mu20 - mu02)).to_degrees();
    [m00, cx, cy, sx, sy, sxy, skx, sky, kx, ky, ecc, orient]
}

// ---------------------------------------------------------------- helpers

fn close(name: &str, got: f64, want: f64, scale: f64) {
    let tol = 1e-9 * got.abs().max(want.abs()).max(scale);
    assert!(
        (got - want).abs() <= tol || (got.is_nan() && want.is_nan()),
        "{name}: got {got}, want {want} (tolerance {tol})"
    );
}

fn frame<T: Pixel>(sizes: &[usize], data: &[T]) -> NDArray {
    NDArray::from_pixels(&Pool::unlimited(), sizes, data).expect("test frame")
}

fn harness(settings: &[(&str, &str)]) -> PluginHarness<StatsPlugin> {
    let h = PluginHarness::new(StatsPlugin::new());
    for (name, v) in settings {
        h.put(name, *v)
            .unwrap_or_else(|e| panic!("put {name}={v}: {e}"));
    }
    h
}

fn array(h: &PluginHarness<StatsPlugin>, name: &str) -> Vec<f64> {
    let a: ArrayValue = match h.get(name) {
        ParamValue::Array(a) if a.data_type == DataType::Float64 => a,
        other => panic!("{name} is not a Float64 array: {other:?}"),
    };
    a.bytes()
        .chunks_exact(8)
        .map(|b| f64::from_ne_bytes(b.try_into().unwrap()))
        .collect()
}

fn random<T: Pixel>(rng: &mut impl Rng, n: usize) -> Vec<T> {
    let (lo, hi) = if T::DATA_TYPE.is_float() {
        (-1000.0, 1000.0)
    } else {
        (T::MIN_F64, T::MAX_F64)
    };
    (0..n)
        .map(|_| T::from_f64(rng.random_range(lo..=hi)))
        .collect()
}

fn check_against_reference(h: &PluginHarness<StatsPlugin>, f: &NDArray, e: &Expected, what: &str) {
    let g = |n: &str| h.get_f64(n);
    let scale = e.max.abs().max(e.min.abs());
    close(&format!("{what} MinValue"), g("MinValue"), e.min, 0.0);
    close(&format!("{what} MaxValue"), g("MaxValue"), e.max, 0.0);
    assert_eq!((g("MinX"), g("MinY")), e.min_xy, "{what} min position");
    assert_eq!((g("MaxX"), g("MaxY")), e.max_xy, "{what} max position");
    close(&format!("{what} MeanValue"), g("MeanValue"), e.mean, scale);
    close(&format!("{what} Sigma"), g("Sigma"), e.sigma, scale);
    let n = f.n_elements() as f64;
    close(&format!("{what} Total"), g("Total"), e.total, scale * n);
    close(&format!("{what} Net"), g("Net"), e.net, scale * n);
    for (i, name) in CENTROID_NAMES.iter().enumerate() {
        let s = if i == 0 { scale * n } else { 1.0 };
        close(&format!("{what} {name}"), g(name), e.centroid[i], s);
    }
}

// ---------------------------------------------------------------- tests

fn all_stats_for<T: Pixel>(seed: u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for (sizes, bgd) in [
        (vec![37, 23], 2),
        (vec![1100, 3], 1),
        (vec![5, 4, 3], 1),
        (vec![41], 3),
    ] {
        let n: usize = sizes.iter().product();
        let data = random::<T>(&mut rng, n);
        let f = frame(&sizes, &data);
        let v: Vec<f64> = data.iter().map(|x| x.to_f64()).collect();
        // A threshold inside the data range, fractional to test the integer rounding.
        let mut sorted = v.clone();
        sorted.sort_by(f64::total_cmp);
        let thr = sorted[n / 3] + 0.5;
        let h = harness(&[("ComputeCentroid", "Yes"), ("BgdWidth", &bgd.to_string())]);
        h.put("CentroidThreshold", thr).unwrap();
        let out = h.process(f.clone()).unwrap();
        assert_eq!(out.len(), 1);
        let e = reference(&v, &sizes, f.info().x_size, thr, bgd);
        let what = format!("{} {sizes:?}", T::DATA_TYPE);
        check_against_reference(&h, &f, &e, &what);
        if sizes.len() <= 2 {
            assert!(e.centroid[0] != 0.0, "{what}: test threshold passes pixels");
        }
    }
}

#[test]
fn all_types_match_reference() {
    all_stats_for::<i8>(1);
    all_stats_for::<u8>(2);
    all_stats_for::<i16>(3);
    all_stats_for::<u16>(4);
    all_stats_for::<i32>(5);
    all_stats_for::<u32>(6);
    all_stats_for::<i64>(7);
    all_stats_for::<u64>(8);
    all_stats_for::<f32>(9);
    all_stats_for::<f64>(10);
}

/// More rows than a 16-bit column accumulator holds: the columns are flushed on the way.
#[test]
fn tall_16_bit_images_flush_column_sums() {
    fn tall<T: Pixel>() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let sizes = [2, 70_000];
        let data = random::<T>(&mut rng, 140_000);
        let f = frame(&sizes, &data);
        let v: Vec<f64> = data.iter().map(|x| x.to_f64()).collect();
        let h = harness(&[("ComputeCentroid", "Yes"), ("ComputeProfiles", "Yes")]);
        h.put("CentroidThreshold", 0.0).unwrap();
        h.process(f.clone()).unwrap();
        let e = reference(&v, &sizes, 2, 0.0, 1);
        check_against_reference(&h, &f, &e, &format!("tall {}", T::DATA_TYPE));
        let thr_x = array(&h, "ProfileThresholdX");
        for (x, &got) in thr_x.iter().enumerate() {
            let want: f64 = v
                .iter()
                .skip(x)
                .step_by(2)
                .filter(|&&p| p >= 0.0)
                .sum::<f64>()
                / 70_000.0;
            close("ProfileThresholdX", got, want, 1.0);
        }
    }
    tall::<u16>();
    tall::<i16>();
}

#[test]
fn sim_ramp_512_matches_the_2013_screen() {
    // The simDetector ramp seen through ROI1 in the 2013 benchmark: MinX 181, MaxX 180.
    let (nx, ny) = (512, 512);
    let data: Vec<u8> = (0..nx * ny)
        .map(|i| ((i % nx + i / nx + 75) % 256) as u8)
        .collect();
    let h = harness(&[("ComputeCentroid", "Yes")]);
    let out = h.process(frame(&[nx, ny], &data)).unwrap();
    assert_eq!(out.len(), 1);
    let g = |n: &str| h.get_f64(n);
    assert_eq!((g("MinValue"), g("MaxValue")), (0.0, 255.0));
    assert_eq!(
        (g("MinX"), g("MinY"), g("MaxX"), g("MaxY")),
        (181.0, 0.0, 180.0, 0.0)
    );
    assert_eq!(g("Total"), 33_423_360.0);
    assert_eq!(g("Net"), 0.0, "BgdWidth 1: border mean equals the mean");
    assert_eq!(g("MeanValue"), 127.5);
    assert!((g("Sigma") - 73.9).abs() < 0.05, "sigma {}", g("Sigma"));
    assert_eq!((g("CentroidX"), g("CentroidY")), (255.5, 255.5));
    assert!(
        (g("SigmaX") - 147.8).abs() < 0.05,
        "sigma x {}",
        g("SigmaX")
    );
    assert!(
        (g("SigmaY") - 147.8).abs() < 0.05,
        "sigma y {}",
        g("SigmaY")
    );
    // The screen shows Sigma XY 0.043.
    assert!(
        (g("SigmaXY") - 0.0433).abs() < 5e-4,
        "sigma xy {}",
        g("SigmaXY")
    );
    let v: Vec<f64> = data.iter().map(|&x| x as f64).collect();
    let e = reference(&v, &[nx, ny], nx, 1.0, 1);
    close("SigmaXY", g("SigmaXY"), e.centroid[5], 1.0);
}

#[test]
fn single_hot_pixel() {
    let (nx, ny) = (64, 48);
    let mut data = vec![0u16; nx * ny];
    data[17 * nx + 40] = 1000;
    let h = harness(&[("ComputeCentroid", "Yes"), ("BgdWidth", "0")]);
    h.process(frame(&[nx, ny], &data)).unwrap();
    let g = |n: &str| h.get_f64(n);
    assert_eq!((g("MaxValue"), g("MaxX"), g("MaxY")), (1000.0, 40.0, 17.0));
    assert_eq!((g("MinValue"), g("MinX"), g("MinY")), (0.0, 0.0, 0.0));
    assert_eq!((g("Total"), g("Net")), (1000.0, 1000.0));
    assert_eq!(
        (g("CentroidX"), g("CentroidY"), g("CentroidTotal")),
        (40.0, 17.0, 1000.0)
    );
    // Zero variance: sigmas 0, and the results areaDetector leaves at 0.
    for name in [
        "SigmaX",
        "SigmaY",
        "SigmaXY",
        "SkewX",
        "KurtosisX",
        "Eccentricity",
        "Orientation",
    ] {
        assert_eq!(g(name), 0.0, "{name}");
    }
}

#[test]
fn uniform_image() {
    let data = vec![7.25f32; 30 * 20];
    let h = harness(&[("ComputeCentroid", "Yes"), ("BgdWidth", "3")]);
    h.process(frame(&[30, 20], &data)).unwrap();
    let g = |n: &str| h.get_f64(n);
    assert_eq!(
        (g("MinValue"), g("MaxValue"), g("MeanValue")),
        (7.25, 7.25, 7.25)
    );
    assert_eq!(g("Sigma"), 0.0, "never NaN from rounding");
    assert_eq!(g("Net"), 0.0);
    close("CentroidX", g("CentroidX"), 14.5, 1.0);
    close("CentroidY", g("CentroidY"), 9.5, 1.0);
    close(
        "SigmaX",
        g("SigmaX"),
        ((30.0f64 * 30.0 - 1.0) / 12.0).sqrt(),
        1.0,
    );
    close(
        "KurtosisX",
        g("KurtosisX"),
        -1.2 - 2.4 / (30.0 * 30.0 - 1.0),
        1.0,
    );
}

#[test]
fn net_uses_border_mean_with_corners_twice() {
    // Border of width 1 on a 4x3 image: row 0, row 2, column 0, column 3.
    #[rustfmt::skip]
    let data: [i32; 12] = [
        1, 2, 3, 4,
        5, 100, 200, 8,
        9, 10, 11, 12,
    ];
    let h = harness(&[("BgdWidth", "1")]);
    h.process(frame(&[4, 3], &data)).unwrap();
    let rows = (1 + 2 + 3 + 4) + (9 + 10 + 11 + 12);
    let cols = (1 + 5 + 9) + (4 + 8 + 12);
    let avg = (rows + cols) as f64 / 14.0;
    let total: f64 = data.iter().map(|&v| v as f64).sum();
    close("Net", h.get_f64("Net"), total - avg * 12.0, total);
    // Wider than the image: every slab is the whole array.
    h.put("BgdWidth", 10).unwrap();
    h.process(frame(&[4, 3], &data)).unwrap();
    close("Net", h.get_f64("Net"), 0.0, total);
    // 0: Net = Total.
    h.put("BgdWidth", 0).unwrap();
    h.process(frame(&[4, 3], &data)).unwrap();
    assert_eq!(h.get_f64("Net"), total);
}

#[test]
fn threshold_edges() {
    let data: Vec<u8> = vec![0, 5, 10, 255, 10, 5];
    let h = harness(&[("ComputeCentroid", "Yes"), ("ComputeStatistics", "No")]);
    // Inclusive: value >= threshold.
    h.put("CentroidThreshold", 10.0).unwrap();
    h.process(frame(&[3, 2], &data)).unwrap();
    assert_eq!(h.get_f64("CentroidTotal"), 275.0);
    h.put("CentroidThreshold", 9.5).unwrap();
    h.process(frame(&[3, 2], &data)).unwrap();
    assert_eq!(h.get_f64("CentroidTotal"), 275.0);
    // Above every value (even the type's maximum): nothing passes, all results 0.
    h.put("CentroidThreshold", 1000.0).unwrap();
    h.process(frame(&[3, 2], &data)).unwrap();
    for name in CENTROID_NAMES {
        assert_eq!(h.get_f64(name), 0.0, "{name}");
    }
    // Below every value: all pixels weigh.
    h.put("CentroidThreshold", -1e30).unwrap();
    h.process(frame(&[3, 2], &data)).unwrap();
    assert_eq!(h.get_f64("CentroidTotal"), 285.0);
    assert_eq!(h.get_f64("MinValue"), 0.0, "statistics off: not written");
    // f32: a threshold between two f32 values.
    let f: Vec<f32> = vec![1.0, 1.0 + f32::EPSILON, 2.0];
    h.put("CentroidThreshold", 1.0 + f32::EPSILON as f64 / 2.0)
        .unwrap();
    h.process(frame(&[3], &f)).unwrap();
    close(
        "CentroidTotal",
        h.get_f64("CentroidTotal"),
        3.0 + f32::EPSILON as f64,
        1.0,
    );
}

fn profiles_for<T: Pixel>(seed: u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let (nx, ny) = (29, 17);
    let data = random::<T>(&mut rng, nx * ny);
    let v: Vec<f64> = data.iter().map(|x| x.to_f64()).collect();
    let mut sorted = v.clone();
    sorted.sort_by(f64::total_cmp);
    let thr = sorted[nx * ny / 2];
    let h = harness(&[
        ("ComputeProfiles", "Yes"),
        ("CursorX", "5"),
        ("CursorY", "300"),
    ]);
    h.put("CentroidThreshold", thr).unwrap();
    h.process(frame(&[nx, ny], &data)).unwrap();
    let at = |x: usize, y: usize| v[y * nx + x];
    let e = reference(&v, &[nx, ny], nx, thr, 0);
    let cx = ((e.centroid[1] + 0.5) as usize).min(nx - 1);
    let cy = ((e.centroid[2] + 0.5) as usize).min(ny - 1);
    let what = T::DATA_TYPE;
    assert_eq!(h.get_f64("ProfileSizeX"), nx as f64);
    assert_eq!(h.get_f64("ProfileSizeY"), ny as f64);
    let cursor_y = ny - 1; // 300 clamped
    assert_eq!(h.get_f64("CursorVal"), at(5, cursor_y), "{what} CursorVal");
    let scale = sorted[nx * ny - 1].abs().max(sorted[0].abs());
    let expect_x = |name: &str, f: &dyn Fn(usize) -> f64| {
        let got = array(&h, name);
        assert_eq!(got.len(), nx, "{what} {name}");
        for (x, &g) in got.iter().enumerate() {
            close(&format!("{what} {name}[{x}]"), g, f(x), scale);
        }
    };
    expect_x("ProfileAverageX", &|x| {
        (0..ny).map(|y| at(x, y)).sum::<f64>() / ny as f64
    });
    expect_x("ProfileThresholdX", &|x| {
        (0..ny).map(|y| at(x, y)).filter(|&p| p >= thr).sum::<f64>() / ny as f64
    });
    expect_x("ProfileCentroidX", &|x| at(x, cy));
    expect_x("ProfileCursorX", &|x| at(x, cursor_y));
    let expect_y = |name: &str, f: &dyn Fn(usize) -> f64| {
        let got = array(&h, name);
        assert_eq!(got.len(), ny, "{what} {name}");
        for (y, &g) in got.iter().enumerate() {
            close(&format!("{what} {name}[{y}]"), g, f(y), scale);
        }
    };
    expect_y("ProfileAverageY", &|y| {
        (0..nx).map(|x| at(x, y)).sum::<f64>() / nx as f64
    });
    expect_y("ProfileThresholdY", &|y| {
        (0..nx).map(|x| at(x, y)).filter(|&p| p >= thr).sum::<f64>() / nx as f64
    });
    expect_y("ProfileCentroidY", &|y| at(cx, y));
    expect_y("ProfileCursorY", &|y| at(5, y));
    // Centroid results are not published when only profiles are asked for.
    assert_eq!(h.get_f64("CentroidX"), 0.0);
}

#[test]
fn profiles_all_types() {
    profiles_for::<i8>(21);
    profiles_for::<u8>(22);
    profiles_for::<i16>(23);
    profiles_for::<u16>(24);
    profiles_for::<i32>(25);
    profiles_for::<u32>(26);
    profiles_for::<i64>(27);
    profiles_for::<u64>(28);
    profiles_for::<f32>(29);
    profiles_for::<f64>(30);
}

/// The histogram by areaDetector's formula, element by element.
fn reference_histogram(v: &[f64], size: usize, min: f64, max: f64) -> (Vec<f64>, i64, i64, f64) {
    let max = if max > min { max } else { min + 1.0 };
    let scale = (size - 1) as f64 / (max - min);
    let (mut h, mut below, mut above) = (vec![0.0; size], 0, 0);
    for &x in v {
        let bin = ((x - min) * scale + 0.5) as i64;
        if bin < 0 || x < min {
            below += 1;
        } else if bin > size as i64 - 1 || x > max {
            above += 1;
        } else {
            h[bin as usize] += 1.0;
        }
    }
    let entropy = -h
        .iter()
        .map(|&c: &f64| if c > 0.0 { c * c.ln() } else { 0.0 })
        .sum::<f64>()
        / v.len() as f64;
    (h, below, above, entropy)
}

fn histogram_for<T: Pixel>(seed: u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let data = random::<T>(&mut rng, 1000);
    let v: Vec<f64> = data.iter().map(|x| x.to_f64()).collect();
    let mut sorted = v.clone();
    sorted.sort_by(f64::total_cmp);
    let (min, max) = (sorted[100], sorted[900]);
    let h = harness(&[
        ("ComputeHistogram", "Yes"),
        ("ComputeStatistics", "No"),
        ("HistSize", "37"),
    ]);
    h.put("HistMin", min).unwrap();
    h.put("HistMax", max).unwrap();
    h.process(frame(&[10, 10, 10], &data)).unwrap();
    let (counts, below, above, entropy) = reference_histogram(&v, 37, min, max);
    let what = T::DATA_TYPE;
    assert_eq!(array(&h, "Histogram"), counts, "{what}");
    assert_eq!(h.get_f64("HistBelow"), below as f64, "{what}");
    assert_eq!(h.get_f64("HistAbove"), above as f64, "{what}");
    assert!(
        below > 0 && above > 0,
        "{what}: the test range cuts both ends"
    );
    close(
        &format!("{what} HistEntropy"),
        h.get_f64("HistEntropy"),
        entropy,
        1.0,
    );
}

#[test]
fn histogram_all_types() {
    histogram_for::<i8>(41);
    histogram_for::<u8>(42);
    histogram_for::<i16>(43);
    histogram_for::<u16>(44);
    histogram_for::<i32>(45);
    histogram_for::<u32>(46);
    histogram_for::<i64>(47);
    histogram_for::<u64>(48);
    histogram_for::<f32>(49);
    histogram_for::<f64>(50);
}

#[test]
fn histogram_known_values_and_x_axis() {
    // Bins of width 1 over 0..=3 (4 bins): values round to the nearest bin.
    let data: Vec<f64> = vec![-1.0, 0.0, 0.4, 0.6, 1.0, 3.0, 3.2, 9.0, f64::NAN];
    let h = harness(&[
        ("ComputeHistogram", "Yes"),
        ("HistSize", "4"),
        ("HistMin", "0"),
        ("HistMax", "3"),
    ]);
    assert_eq!(
        array(&h, "HistogramX"),
        vec![0.0, 0.75, 1.5, 2.25],
        "set on write"
    );
    h.process(frame(&[9], &data)).unwrap();
    assert_eq!(array(&h, "Histogram"), vec![2.0, 2.0, 0.0, 1.0]);
    assert_eq!(h.get_f64("HistBelow"), 2.0, "-1 and NaN");
    assert_eq!(h.get_f64("HistAbove"), 2.0, "3.2 and 9");
    let want = -(2.0 * 2f64.ln() + 2.0 * 2f64.ln()) / 9.0;
    close("HistEntropy", h.get_f64("HistEntropy"), want, 1.0);
    // HistMax <= HistMin is taken as HistMin + 1.
    h.put("HistMax", -5.0).unwrap();
    h.process(frame(&[9], &data)).unwrap();
    assert_eq!(array(&h, "Histogram"), vec![1.0, 1.0, 1.0, 1.0]);
    assert_eq!(h.get_f64("HistAbove"), 3.0);
}

#[test]
fn passes_the_input_on_unchanged() {
    let data: Vec<u8> = (0..=255).collect();
    let f = Arc::new(frame(&[16, 16], &data));
    let h = harness(&[
        ("ComputeCentroid", "Yes"),
        ("ComputeProfiles", "Yes"),
        ("ComputeHistogram", "Yes"),
    ]);
    let out = h.process_arc(&f).unwrap();
    assert_eq!(out.len(), 1);
    assert!(Arc::ptr_eq(&out[0], &f), "the same frame, not a copy");
}

#[test]
fn rgb_and_n_d_arrays() {
    // 3-D: statistics over all elements, positions by index % xSize; no centroid.
    let mut data = vec![10u16; 3 * 8 * 6];
    data[3 * 8 * 2 + 3 * 5 + 1] = 99; // x 5, y 2, colour 1 of an RGB1 frame
    data[7] = 1; // x 2, colour 1, y 0
    let mut f = frame(&[3, 8, 6], &data);
    f.set_color_mode(ColorMode::RGB1);
    let h = harness(&[("ComputeCentroid", "Yes"), ("ComputeProfiles", "Yes")]);
    h.process(f.clone()).unwrap();
    let xs = f.info().x_size;
    assert_eq!(xs, 8);
    let imax = 3 * 8 * 2 + 3 * 5 + 1;
    assert_eq!(h.get_f64("MaxX"), (imax % xs) as f64);
    assert_eq!(h.get_f64("MaxY"), (imax / xs) as f64);
    assert_eq!((h.get_f64("MinX"), h.get_f64("MinY")), (7.0, 0.0));
    assert_eq!(h.get_f64("CentroidTotal"), 0.0, "centroid needs 1-D/2-D");
    assert_eq!(h.get_f64("ProfileSizeX"), 3.0);
    assert_eq!(array(&h, "ProfileAverageX"), vec![0.0; 3]);
}

#[test]
fn refuses_compressed_and_keeps_going() {
    let data = vec![1u8; 16];
    let mut f = frame(&[4, 4], &data);
    f.codec = Codec {
        name: "lz4".into(),
        ..Codec::default()
    };
    let h = harness(&[]);
    assert!(h.process(f).is_err());
    assert!(h.process(frame(&[4, 4], &data)).is_ok());
    assert_eq!(h.get_f64("Total"), 16.0);
}

#[test]
fn parameter_table_and_pv_names() {
    let p = StatsPlugin::new();
    assert_eq!(p.plugin_type(), "NDPluginStats");
    assert!((1..=8).contains(&p.max_threads()));
    let h = harness(&[]);
    let pvs = h.params.to_json();
    for pv in [
        "ComputeStatistics",
        "ComputeStatistics_RBV",
        "BgdWidth_RBV",
        "MinValue_RBV",
        "MaxX_RBV",
        "Sigma_RBV",
        "Net_RBV",
        "CentroidThreshold",
        "CentroidX_RBV",
        "SigmaXY_RBV",
        "Orientation_RBV",
        "CursorX",
        "CursorVal",
        "ProfileSizeX_RBV",
        "ProfileAverageX_RBV",
        "ProfileCursorY_RBV",
        "HistSize",
        "HistMin_RBV",
        "HistBelow_RBV",
        "HistEntropy_RBV",
        "Histogram_RBV",
        "HistogramX_RBV",
    ] {
        assert!(pvs.contains_key(pv), "missing PV {pv}");
    }
    // NDStats.template serves results under both names (ao MinValue, ai MinValue_RBV); both are
    // read-only here, and SigmaValue is the template's name beside Sigma_RBV.
    assert!(pvs.contains_key("MinValue") && pvs.contains_key("SigmaValue"));
    assert_eq!(pvs["ComputeCentroid_RBV"], "No");
    assert_eq!(pvs["BgdWidth_RBV"], 1);
    assert_eq!(pvs["CursorX_RBV"], 256);
    assert_eq!(pvs["HistMax_RBV"], 255.0);
    assert!(h.put("MeanValue", 1.0).is_err());
    assert!(h.put("HistSize", 0).is_err());
    assert!(h.put("BgdWidth", -1).is_err());
    let dups = ndflow_core::ParamStore::duplicate_names(&[
        ndflow_runtime::port_params::ARRAY_BASE_PARAMS,
        ndflow_runtime::port_params::PLUGIN_BASE_PARAMS,
        STATS_PARAMS,
    ]);
    assert!(dups.is_empty(), "{dups:?}");
}

#[test]
fn concurrent_frames_are_independent() {
    let h = Arc::new(harness(&[("ComputeCentroid", "Yes")]));
    let frames: Vec<Arc<NDArray>> = (0..4)
        .map(|k| {
            let mut d = vec![0u8; 32 * 32];
            d[k * 33 + 100] = 200;
            Arc::new(frame(&[32, 32], &d))
        })
        .collect();
    std::thread::scope(|s| {
        for f in &frames {
            let h = h.clone();
            s.spawn(move || {
                for _ in 0..50 {
                    h.process_arc(f).unwrap();
                }
            });
        }
    });
    // Whatever frame was last, its results are self-consistent.
    let (x, y) = (h.get_f64("CentroidX"), h.get_f64("CentroidY"));
    assert_eq!((h.get_f64("MaxX"), h.get_f64("MaxY")), (x, y));
}

/// The type's extreme values on shapes past every accumulator limit (row chunks, row
/// groups, super-blocks): debug builds would panic on an overflow.
#[test]
fn extreme_values_stay_exact() {
    fn extremes<T: Pixel>() {
        for (nx, ny) in [(600, 500), (8, 8200), (66_000, 2)] {
            for v in [T::from_f64(T::MAX_F64), T::from_f64(T::MIN_F64)] {
                let data = vec![v; nx * ny];
                let h = harness(&[("ComputeCentroid", "Yes"), ("ComputeProfiles", "Yes")]);
                h.put("CentroidThreshold", -1e300).unwrap();
                h.process(frame(&[nx, ny], &data)).unwrap();
                let (vf, n) = (v.to_f64(), (nx * ny) as f64);
                let what = format!("{} {nx}x{ny} of {vf}", T::DATA_TYPE);
                assert_eq!(
                    (h.get_f64("MinValue"), h.get_f64("MaxValue")),
                    (vf, vf),
                    "{what}"
                );
                close(&format!("{what} Total"), h.get_f64("Total"), vf * n, 0.0);
                close(&format!("{what} Sigma"), h.get_f64("Sigma"), 0.0, vf.abs());
                let thr_x = array(&h, "ProfileThresholdX");
                assert!(thr_x.iter().all(|&t| t == vf), "{what}: ProfileThresholdX");
                let thr_y = array(&h, "ProfileThresholdY");
                assert!(thr_y.iter().all(|&t| t == vf), "{what}: ProfileThresholdY");
                if vf > 0.0 {
                    close(
                        &format!("{what} CentroidTotal"),
                        h.get_f64("CentroidTotal"),
                        vf * n,
                        0.0,
                    );
                    close(
                        &format!("{what} X"),
                        h.get_f64("CentroidX"),
                        (nx - 1) as f64 / 2.0,
                        1.0,
                    );
                    close(
                        &format!("{what} Y"),
                        h.get_f64("CentroidY"),
                        (ny - 1) as f64 / 2.0,
                        1.0,
                    );
                    let sxy = h.get_f64("SigmaXY");
                    assert!(sxy.abs() < 1e-9, "{what}: SigmaXY {sxy}");
                }
            }
        }
    }
    extremes::<u8>();
    extremes::<i8>();
    extremes::<u16>();
    extremes::<i16>();
    extremes::<u32>();
    extremes::<i32>();
}
