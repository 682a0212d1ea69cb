//! NDPluginROIStat against a per-pixel reference (areaDetector's definitions) on random
//! frames of all ten types, clamping at the edges, resets and the per-ROI time series.

use ndflow_core::{AttrValue, DataType, NDArray, ParamValue, Pixel, Pool};
use ndflow_plugins::roistat::{RoiStatPlugin, ROISTAT_PARAMS};
use ndflow_runtime::{Plugin, PluginHarness};
use rand::{Rng, SeedableRng};

/// A requested ROI: MinX, MinY, SizeX, SizeY, BgdWidth.
type Req = [i64; 5];

#[derive(Debug, Default)]
struct Want {
    geometry: [usize; 4],
    min: f64,
    max: f64,
    mean: f64,
    total: f64,
    net: f64,
}

/// The plainest reading of NDPluginROIStat.cpp: clamp, then visit every pixel of the ROI;
/// a pixel's background weight is how many of the border loops (top rows, bottom rows, or
/// for the rows between, left and right columns) visit it.
fn reference(v: &[f64], sizes: &[usize], r: Req) -> Want {
    let clamp = |d: usize, min: i64, size: i64| -> (usize, usize) {
        let n = sizes.get(d).copied().unwrap_or(1) as i64;
        let mut x0 = min.max(0);
        if x0 > n - 1 {
            x0 = n - 1;
        }
        let mut nx = size.max(1);
        if nx > n - x0 {
            nx = n - x0;
        }
        (x0 as usize, nx as usize)
    };
    let (x0, nx) = clamp(0, r[0], r[2]);
    let (y0, ny) = if sizes.len() == 2 {
        clamp(1, r[1], r[3])
    } else {
        (0, 1)
    };
    let w = sizes[0];
    let bgd = r[4].max(0) as usize;
    let (bx, by) = (bgd.min(nx), bgd.min(ny));
    let mut want = Want {
        geometry: [x0, y0, nx, ny],
        min: f64::INFINITY,
        max: f64::NEG_INFINITY,
        ..Default::default()
    };
    let (mut bsum, mut bn) = (0.0, 0.0);
    for y in 0..ny {
        for x in 0..nx {
            let val = v[(y0 + y) * w + x0 + x];
            want.min = want.min.min(val);
            want.max = want.max.max(val);
            want.total += val;
            if bgd == 0 {
                continue;
            }
            let rows = if sizes.len() == 2 {
                usize::from(y < by) + usize::from(y >= ny - by)
            } else {
                0
            };
            let weight = if rows > 0 {
                rows
            } else {
                usize::from(x < bx) + usize::from(x >= nx - bx)
            };
            bsum += weight as f64 * val;
            bn += weight as f64;
        }
    }
    let n = (nx * ny) as f64;
    want.mean = want.total / n;
    want.net = if bn > 0.0 {
        want.total - bsum / bn * n
    } else {
        want.total
    };
    want
}

fn close(what: &str, got: f64, want: f64) {
    let tol = 1e-9 * want.abs().max(1.0);
    assert!((got - want).abs() <= tol, "{what}: got {got}, want {want}");
}

fn random<T: Pixel>(rng: &mut impl Rng, n: usize) -> Vec<T> {
    let (lo, hi) = if T::DATA_TYPE.is_float() {
        (-1000.0, 1000.0)
    } else {
        (T::MIN_F64.max(-1e12), T::MAX_F64.min(1e12))
    };
    (0..n)
        .map(|_| T::from_f64(rng.random_range(lo..=hi)))
        .collect()
}

fn put(h: &PluginHarness<RoiStatPlugin>, name: &str, v: impl Into<ParamValue>) {
    let v = v.into();
    h.put(name, v.clone())
        .unwrap_or_else(|e| panic!("put {name}={v}: {e}"));
}

fn set_roi(h: &PluginHarness<RoiStatPlugin>, n: usize, r: Req) {
    put(h, &format!("{n}:Use"), "Yes");
    for (k, name) in ["MinX", "MinY", "SizeX", "SizeY", "BgdWidth"]
        .iter()
        .enumerate()
    {
        put(h, &format!("{n}:{name}"), r[k]);
    }
}

fn array(h: &PluginHarness<RoiStatPlugin>, name: &str) -> Vec<f64> {
    match h.get(name) {
        ParamValue::Array(a) if a.data_type == DataType::Float64 => a
            .bytes()
            .chunks_exact(8)
            .map(|b| f64::from_ne_bytes(b.try_into().expect("8 bytes")))
            .collect(),
        other => panic!("{name} is not a Float64 array: {other:?}"),
    }
}

fn check(h: &PluginHarness<RoiStatPlugin>, out: &NDArray, n: usize, want: &Want, what: &str) {
    let g = |name: &str| h.get_f64(&format!("{n}:{name}"));
    let geo = [g("MinX"), g("MinY"), g("SizeX"), g("SizeY")];
    let wg = want.geometry.map(|v| v as f64);
    assert_eq!(geo[0], wg[0], "{what} MinX");
    assert_eq!(geo[2], wg[2], "{what} SizeX");
    if out.ndims() == 2 {
        assert_eq!((geo[1], geo[3]), (wg[1], wg[3]), "{what} MinY/SizeY");
    }
    let vals = [want.min, want.max, want.mean, want.total, want.net];
    for (name, w) in ["MinValue", "MaxValue", "MeanValue", "Total", "Net"]
        .iter()
        .zip(vals)
    {
        close(&format!("{what} ROI {n} {name}"), g(name), w);
        match out.attribute(&format!("ROI{n}{name}")).map(|a| &a.value) {
            Some(AttrValue::Float64(v)) => close(&format!("{what} attribute ROI{n}{name}"), *v, w),
            other => panic!("{what}: attribute ROI{n}{name} is {other:?}"),
        }
    }
}

fn random_rois_for<T: Pixel>(seed: u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for sizes in [vec![37usize, 23], vec![101]] {
        let h = PluginHarness::new(RoiStatPlugin::new());
        let n: usize = sizes.iter().product();
        for _round in 0..3 {
            let reqs: Vec<Req> = (1..=8)
                .map(|_| {
                    [
                        rng.random_range(-5..40),
                        rng.random_range(-5..26),
                        rng.random_range(-2..45),
                        rng.random_range(-2..30),
                        rng.random_range(0..5),
                    ]
                })
                .collect();
            for (k, r) in reqs.iter().enumerate() {
                set_roi(&h, k + 1, *r);
            }
            let data = random::<T>(&mut rng, n);
            let f = NDArray::from_pixels(&Pool::unlimited(), &sizes, &data).expect("frame");
            let out = h.process(f.clone()).expect("process");
            assert_eq!(out.len(), 1);
            assert!(
                out[0].buffer.ptr_eq(&f.buffer),
                "pixels are passed on, not copied"
            );
            let v: Vec<f64> = data.iter().map(|x| x.to_f64()).collect();
            for (k, r) in reqs.iter().enumerate() {
                let want = reference(&v, &sizes, *r);
                check(
                    &h,
                    &out[0],
                    k + 1,
                    &want,
                    &format!("{:?} {sizes:?}", T::DATA_TYPE),
                );
                let max_y = if sizes.len() == 2 { sizes[1] } else { 0 };
                assert_eq!(h.get_f64(&format!("{}:MaxSizeX", k + 1)), sizes[0] as f64);
                assert_eq!(h.get_f64(&format!("{}:MaxSizeY", k + 1)), max_y as f64);
            }
        }
    }
}

#[test]
fn all_types_match_the_reference() {
    random_rois_for::<i8>(1);
    random_rois_for::<u8>(2);
    random_rois_for::<i16>(3);
    random_rois_for::<u16>(4);
    random_rois_for::<i32>(5);
    random_rois_for::<u32>(6);
    random_rois_for::<i64>(7);
    random_rois_for::<u64>(8);
    random_rois_for::<f32>(9);
    random_rois_for::<f64>(10);
}

#[test]
fn long_rows_use_every_lane() {
    // Rows longer than the kernel's 16 lanes, with the extremes in the remainder.
    let (w, hgt) = (203usize, 5usize);
    let mut data: Vec<u16> = (0..w * hgt).map(|i| (i % 1000) as u16 + 10).collect();
    data[2 * w + 201] = 0;
    data[3 * w + 200] = 65535;
    let h = PluginHarness::new(RoiStatPlugin::new());
    set_roi(&h, 1, [0, 0, 1000, 1000, 2]);
    let f = NDArray::from_pixels(&Pool::unlimited(), &[w, hgt], &data).expect("frame");
    let out = h.process(f).expect("process");
    let v: Vec<f64> = data.iter().map(|&x| x as f64).collect();
    check(
        &h,
        &out[0],
        1,
        &reference(&v, &[w, hgt], [0, 0, 1000, 1000, 2]),
        "long rows",
    );
    assert_eq!(h.get_f64("1:MinValue"), 0.0);
    assert_eq!(h.get_f64("1:MaxValue"), 65535.0);
}

#[test]
fn rois_are_clamped_to_the_frame() {
    let data: Vec<u8> = (0..80).collect();
    let h = PluginHarness::new(RoiStatPlugin::new());
    set_roi(&h, 1, [8, 6, 10, 10, 0]); // past the right and bottom edges
    set_roi(&h, 2, [-3, -2, 4, 3, 0]); // before the left and top edges
    set_roi(&h, 3, [20, 20, 0, 0, 0]); // outside: the last pixel, size 1
    let f = NDArray::from_pixels(&Pool::unlimited(), &[10, 8], &data).expect("frame");
    h.process(f).expect("process");
    let geo = |n: usize| {
        ["MinX", "MinY", "SizeX", "SizeY"].map(|k| h.get_f64(&format!("{n}:{k}")) as i64)
    };
    assert_eq!(geo(1), [8, 6, 2, 2]);
    assert_eq!(geo(2), [0, 0, 4, 3]);
    assert_eq!(geo(3), [9, 7, 1, 1]);
    // ROI 1: pixels 68, 69, 78, 79.
    assert_eq!(h.get_f64("1:Total"), 68.0 + 69.0 + 78.0 + 79.0);
    assert_eq!(h.get_f64("1:MinValue"), 68.0);
    assert_eq!(h.get_f64("3:Total"), 79.0);
    assert_eq!(h.get_f64("3:Net"), 79.0);
    // The clamped values are written back, as ADCore does.
    assert_eq!(h.get_f64("1:SizeX"), 2.0);
}

#[test]
fn net_of_a_known_image() {
    // 6x5 background of 10 with a 2x1 peak of 110 inside: border mean 10, so net = 200.
    let mut data = vec![10u16; 30];
    data[2 * 6 + 2] = 110;
    data[2 * 6 + 3] = 110;
    let h = PluginHarness::new(RoiStatPlugin::new());
    set_roi(&h, 1, [0, 0, 6, 5, 1]);
    h.process(NDArray::from_pixels(&Pool::unlimited(), &[6, 5], &data).expect("frame"))
        .expect("process");
    assert_eq!(h.get_f64("1:Total"), 500.0);
    assert_eq!(h.get_f64("1:Net"), 200.0);
    assert_eq!(h.get_f64("1:MeanValue"), 500.0 / 30.0);
}

#[test]
fn reset_and_reset_all_zero_the_results() {
    let h = PluginHarness::new(RoiStatPlugin::new());
    set_roi(&h, 1, [0, 0, 4, 4, 0]);
    set_roi(&h, 2, [1, 1, 2, 2, 0]);
    let data: Vec<f32> = (1..=16).map(|v| v as f32).collect();
    h.process(NDArray::from_pixels(&Pool::unlimited(), &[4, 4], &data).expect("frame"))
        .expect("process");
    assert_eq!(h.get_f64("1:Total"), 136.0);
    assert_eq!(h.get_f64("2:Total"), 6.0 + 7.0 + 10.0 + 11.0);
    put(&h, "1:Reset", 1);
    assert_eq!(h.get_f64("1:Total"), 0.0);
    assert_eq!(h.get_f64("1:MaxValue"), 0.0);
    assert_eq!(h.get_f64("2:Total"), 34.0);
    put(&h, "ResetAll", 1);
    for name in ["MinValue", "MaxValue", "MeanValue", "Total", "Net"] {
        assert_eq!(h.get_f64(&format!("2:{name}")), 0.0, "{name}");
    }
}

#[test]
fn time_series_start_stop_erase() {
    let h = PluginHarness::new(RoiStatPlugin::new());
    set_roi(&h, 1, [0, 0, 3, 1, 0]);
    set_roi(&h, 3, [1, 0, 2, 1, 0]);
    put(&h, "TSNumPoints", 5);
    let frame = |k: u32| {
        let mut f =
            NDArray::from_pixels(&Pool::unlimited(), &[3], &[k, 2 * k, 3 * k]).expect("frame");
        f.time_stamp = 100.0 + k as f64;
        f
    };
    // Not acquiring: nothing recorded.
    h.process(frame(50)).expect("process");
    assert_eq!(h.get_f64("TSCurrentPoint"), 0.0);
    put(&h, "TSControl", "Erase/Start");
    assert_eq!(h.get_f64("TSAcquiring"), 1.0);
    for k in 1..=3 {
        h.process(frame(k)).expect("process");
    }
    assert_eq!(h.get_f64("TSCurrentPoint"), 3.0);
    put(&h, "TSControl", "Stop");
    assert_eq!(h.get_f64("TSAcquiring"), 0.0);
    assert_eq!(array(&h, "1:TSTotal"), vec![6.0, 12.0, 18.0]);
    assert_eq!(array(&h, "1:TSMinValue"), vec![1.0, 2.0, 3.0]);
    assert_eq!(array(&h, "3:TSMaxValue"), vec![3.0, 6.0, 9.0]);
    assert_eq!(array(&h, "3:TSMeanValue"), vec![2.5, 5.0, 7.5]);
    assert_eq!(array(&h, "3:TSNet"), vec![5.0, 10.0, 15.0]);
    assert_eq!(array(&h, "1:TSTimestamp"), vec![101.0, 102.0, 103.0]);
    // Unused ROIs record zeros.
    assert_eq!(array(&h, "2:TSTotal"), vec![0.0; 3]);
    h.process(frame(9)).expect("process");
    assert_eq!(h.get_f64("TSCurrentPoint"), 3.0, "stopped: not recorded");
    // Start resumes; the fifth point fills the series, which stops and is published.
    put(&h, "TSControl", "Start");
    for k in 4..=7 {
        h.process(frame(k)).expect("process");
    }
    assert_eq!(h.get_f64("TSAcquiring"), 0.0);
    assert_eq!(h.get_f64("TSCurrentPoint"), 5.0);
    assert_eq!(array(&h, "1:TSTotal"), vec![6.0, 12.0, 18.0, 24.0, 30.0]);
    // Start on a full series does not restart it.
    put(&h, "TSControl", "Start");
    assert_eq!(h.get_f64("TSAcquiring"), 0.0);
    put(&h, "TSControl", "Erase");
    assert_eq!(h.get_f64("TSCurrentPoint"), 0.0);
    assert!(array(&h, "1:TSTotal").is_empty());
}

#[test]
fn time_series_circular_and_read() {
    let h = PluginHarness::new(RoiStatPlugin::new());
    set_roi(&h, 1, [0, 0, 1, 1, 0]);
    put(&h, "TSNumPoints", 3);
    put(&h, "TSAcquireMode", "Circ. buffer");
    put(&h, "TSControl", "Erase/Start");
    for k in 1..=5i16 {
        h.process(NDArray::from_pixels(&Pool::unlimited(), &[1], &[k]).expect("frame"))
            .expect("process");
    }
    assert_eq!(h.get_f64("TSAcquiring"), 1.0);
    put(&h, "TSRead", 1);
    assert_eq!(array(&h, "1:TSTotal"), vec![3.0, 4.0, 5.0]);
}

#[test]
fn refuses_3d_frames() {
    let h = PluginHarness::new(RoiStatPlugin::new());
    set_roi(&h, 1, [0, 0, 2, 2, 0]);
    let f = NDArray::from_pixels(&Pool::unlimited(), &[3, 2, 2], &[0u8; 12]).expect("frame");
    assert!(h.process(f).is_err());
}

#[test]
fn parameter_table() {
    let p = RoiStatPlugin::new();
    assert_eq!(p.plugin_type(), "NDPluginROIStat");
    let h = PluginHarness::new(RoiStatPlugin::new());
    let pvs = h.params.to_json();
    for pv in [
        "ResetAll",
        "TSControl",
        "TSRead",
        "TSNumPoints",
        "TSCurrentPoint",
        "TSAcquiring",
        "1:Use",
        "1:Use_RBV",
        "1:Name",
        "1:Reset",
        "1:BgdWidth_RBV",
        "1:MinX_RBV",
        "1:SizeY_RBV",
        "1:MaxSizeX_RBV",
        "1:MaxSizeY_RBV",
        "1:MinValue_RBV",
        "1:Net_RBV",
        "1:TSMinValue",
        "1:TSNet",
        "1:TSTimestamp",
        "8:TSTotal",
    ] {
        assert!(pvs.contains_key(pv), "missing PV {pv}");
    }
    assert!(!pvs.contains_key("9:Use"), "8 ROIs by default");
    assert_eq!(pvs["TSNumPoints_RBV"], 2048);
    let big = PluginHarness::new(RoiStatPlugin::with_rois(32));
    assert!(big.params.to_json().contains_key("32:TSTimestamp"));
    assert_eq!(big.plugin.params().len(), ROISTAT_PARAMS.len());
    let dups = ndflow_core::ParamStore::duplicate_names(&[
        ndflow_runtime::port_params::ARRAY_BASE_PARAMS,
        ndflow_runtime::port_params::PLUGIN_BASE_PARAMS,
        ROISTAT_PARAMS,
    ]);
    assert!(dups.is_empty(), "{dups:?}");
}
