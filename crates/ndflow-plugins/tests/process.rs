//! NDPluginProcess against a plain reference: areaDetector's processCallbacks loop written
//! out per pixel in f64 (no fast paths), for every data type where a step is type-generic.

use std::sync::Arc;

use ndflow_core::{
    convert_slice, with_pixel_type, AttrValue, Codec, ColorMode, DataType, Dim, NDArray,
    NDAttribute, ParamValue, Pixel,
};
use ndflow_plugins::process::ProcessPlugin;
use ndflow_runtime::{Plugin, PluginHarness};
use rand::{Rng, SeedableRng};

type H = PluginHarness<ProcessPlugin>;

const SIZES: [usize; 2] = [7, 5];
const N: usize = 35;

fn harness() -> H {
    PluginHarness::new(ProcessPlugin::new())
}

fn put(h: &H, name: &str, v: impl Into<ParamValue>) {
    if let Err(e) = h.put(name, v) {
        panic!("put {name}: {e}");
    }
}

/// A frame of type `dt` holding `vals` (each exactly representable in `dt`).
fn frame(h: &H, dt: DataType, sizes: &[usize], vals: &[f64]) -> NDArray {
    with_pixel_type!(dt, T => {
        let px: Vec<T> = vals.iter().map(|v| T::from_f64(*v)).collect();
        NDArray::from_pixels(&h.pool, sizes, &px).unwrap()
    })
}

fn values(f: &NDArray) -> Vec<f64> {
    with_pixel_type!(f.data_type, T => f.pixels::<T>().unwrap().iter().map(|v| v.to_f64()).collect())
}

/// Values safely inside `dt` (integers for integer types, multiples of 1/8 for floats).
fn random(dt: DataType, n: usize, seed: u64) -> Vec<f64> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let (lo, hi) = span(dt);
    (0..n)
        .map(|_| {
            let v = rng.random_range(lo..=hi);
            if dt.is_float() {
                (v * 8.0).round() / 8.0
            } else {
                v.round()
            }
        })
        .collect()
}

fn span(dt: DataType) -> (f64, f64) {
    match dt {
        DataType::Int8 => (-120.0, 120.0),
        DataType::UInt8 => (0.0, 250.0),
        DataType::Int16 => (-30000.0, 30000.0),
        DataType::UInt16 => (0.0, 60000.0),
        DataType::Int32 | DataType::Int64 => (-1.0e6, 1.0e6),
        DataType::UInt32 | DataType::UInt64 => (0.0, 2.0e6),
        DataType::Float32 | DataType::Float64 => (-1.0e4, 1.0e4),
    }
}

fn one(out: Vec<Arc<NDArray>>) -> Arc<NDArray> {
    assert_eq!(out.len(), 1, "expected one output frame");
    out.into_iter().next().unwrap()
}

fn run(h: &H, f: NDArray) -> Arc<NDArray> {
    one(h.process(f).unwrap())
}

/// The output equals `expected` converted to its type with `as` (saturating).
fn assert_out(out: &NDArray, expected: &[f64], what: &str) {
    let got = values(out);
    assert_eq!(got.len(), expected.len(), "{what}: length");
    with_pixel_type!(out.data_type, T => {
        for (i, (g, e)) in got.iter().zip(expected).enumerate() {
            let want = T::from_f64(*e).to_f64();
            assert!(*g == want, "{what} ({}): pixel {i}: got {g}, want {want} (from {e})", out.data_type);
        }
    });
}

// ---- steps 1-4 and 6 for every data type --------------------------------------------------

#[test]
fn background_subtraction_all_types() {
    for dt in DataType::ALL {
        let h = harness();
        let (bg, x) = (random(dt, N, 1), random(dt, N, 2));
        assert_eq!(h.get_f64("ValidBackground"), 0.0);
        assert_out(&run(&h, frame(&h, dt, &SIZES, &bg)), &bg, "pass-through");
        put(&h, "SaveBackground", 1);
        assert_eq!(h.get_f64("ValidBackground"), 1.0, "{dt}");
        assert_eq!(h.get_f64("SaveBackground"), 0.0, "command reads back done");
        put(&h, "EnableBackground", "Enable");
        let out = run(&h, frame(&h, dt, &SIZES, &x));
        let want: Vec<f64> = x.iter().zip(&bg).map(|(x, b)| x - b).collect();
        assert_out(&out, &want, "background");
        assert_eq!(out.data_type, dt);
    }
}

#[test]
fn flat_field_all_types() {
    for dt in DataType::ALL {
        let h = harness();
        let mut flat = random(dt, N, 3);
        flat[4] = 0.0; // areaDetector leaves such pixels undivided
        let x = random(dt, N, 4);
        run(&h, frame(&h, dt, &SIZES, &flat));
        put(&h, "SaveFlatField", 1);
        assert_eq!(h.get_f64("ValidFlatField"), 1.0);
        put(&h, "EnableFlatField", "Enable");
        put(&h, "ScaleFlatField", 7.5);
        let want: Vec<f64> = x
            .iter()
            .zip(&flat)
            .map(|(x, f)| if *f != 0.0 { x * (7.5 / f) } else { *x })
            .collect();
        assert_out(&run(&h, frame(&h, dt, &SIZES, &x)), &want, "flat");
        put(&h, "DataTypeOut", "Float64");
        let out = run(&h, frame(&h, dt, &SIZES, &x));
        assert_eq!(out.data_type, DataType::Float64);
        assert_eq!(values(&out), want, "{dt}: flat in f64");
    }
}

#[test]
fn offset_scale_all_types() {
    for dt in DataType::ALL {
        let h = harness();
        put(&h, "EnableOffsetScale", "Enable");
        put(&h, "Offset", 3.25);
        put(&h, "Scale", 1.5);
        let x = random(dt, N, 5);
        let want: Vec<f64> = x.iter().map(|x| (x + 3.25) * 1.5).collect();
        // Saturates at the type's limits (e.g. UInt8 250 -> 380 -> 255).
        assert_out(&run(&h, frame(&h, dt, &SIZES, &x)), &want, "offset/scale");
    }
}

#[test]
fn clipping_all_types_high_before_low() {
    for dt in DataType::ALL {
        let h = harness();
        let (lo, hi) = span(dt);
        let at = |q: f64| (lo + (hi - lo) * q).round();
        let (lt, lv, ht, hv) = (at(0.3), at(0.5), at(0.7), at(0.1));
        put(&h, "EnableLowClip", "Enable");
        put(&h, "LowClipThresh", lt);
        put(&h, "LowClipValue", lv);
        put(&h, "EnableHighClip", "Enable");
        put(&h, "HighClipThresh", ht);
        put(&h, "HighClipValue", hv);
        let mut x = random(dt, N, 6);
        x[0] = lt; // equal to a threshold: kept
        x[1] = ht;
        let want: Vec<f64> = x
            .iter()
            .map(|&v| {
                let v = if v > ht { hv } else { v };
                if v < lt {
                    lv
                } else {
                    v
                }
            })
            .collect();
        assert_out(&run(&h, frame(&h, dt, &SIZES, &x)), &want, "clip");
    }
}

#[test]
fn output_type_every_pair() {
    for din in DataType::ALL {
        for (k, dout) in DataType::ALL.iter().enumerate() {
            let x = random(din, N, 7 + k as u64);
            // Nothing enabled: a direct `as` cast, as NDArrayPool::convert does.
            let h = harness();
            put(&h, "DataTypeOut", dout.name());
            let input = frame(&h, din, &SIZES, &x);
            let want = with_pixel_type!(din, I => with_pixel_type!(*dout, O => {
                let mut d = vec![O::default(); N];
                convert_slice::<I, O>(input.pixels::<I>().unwrap(), &mut d);
                d.iter().map(|v| v.to_f64()).collect::<Vec<f64>>()
            }));
            let out = run(&h, input);
            assert_eq!(out.data_type, *dout);
            assert_eq!(values(&out), want, "{din} -> {dout} (copy)");
            // Processing on: through f64, saturating.
            put(&h, "EnableOffsetScale", "Enable");
            assert_out(&run(&h, frame(&h, din, &SIZES, &x)), &x, "via f64");
        }
    }
}

#[test]
fn nothing_enabled_shares_pixels_and_keeps_metadata() {
    let h = harness();
    let mut f = frame(
        &h,
        DataType::UInt16,
        &[4, 3, 2],
        &random(DataType::UInt16, 24, 8),
    );
    f.unique_id = 4242;
    f.time_stamp = 12.5;
    f.dims[0] = Dim {
        size: 4,
        offset: 10,
        binning: 2,
        reverse: true,
    };
    f.set_attribute(NDAttribute::new("Gain", "gain", AttrValue::Float64(3.5)));
    f.set_color_mode(ColorMode::RGB3);
    let input = Arc::new(f);
    let out = one(h.process_arc(&input).unwrap());
    assert!(out.buffer.ptr_eq(&input.buffer));
    for out in [out, {
        put(&h, "EnableFilter", "Enable");
        one(h.process_arc(&input).unwrap())
    }] {
        assert_eq!(out.unique_id, 4242);
        assert_eq!(out.time_stamp, 12.5);
        assert_eq!(out.dims, input.dims);
        assert_eq!(out.color_mode(), ColorMode::RGB3);
        assert_eq!(out.attribute("Gain").unwrap().value.as_f64(), Some(3.5));
        assert_eq!(values(&out), values(&input));
    }
}

// ---- step 5: the recursive filter ---------------------------------------------------------

/// Filter coefficients: OOffset, OScale, OC1..4 | FOffset, FScale, FC1..4 | ROffset, RC1, RC2.
#[derive(Debug, Clone, Copy)]
struct Coef {
    o: [f64; 6],
    f: [f64; 6],
    r: [f64; 3],
}

/// areaDetector's filter state and loop (NDPluginProcess.cpp), verbatim in spirit.
#[derive(Default)]
struct RefFilter {
    f: Option<Vec<f64>>,
    n: usize,
}

impl RefFilter {
    fn step(&mut self, x: &[f64], c: &Coef, num: usize, auto_reset: bool, reset: bool) -> Vec<f64> {
        let mut reset = reset;
        if self.f.as_ref().is_none_or(|f| f.len() != x.len()) {
            self.f = Some(x.to_vec());
            reset = true;
        }
        if self.n >= num && auto_reset {
            reset = true;
        }
        let f = self.f.as_mut().unwrap();
        if reset {
            for (fi, xi) in f.iter_mut().zip(x) {
                let mut v = c.r[0];
                if c.r[1] != 0.0 {
                    v += c.r[1] * *fi;
                }
                if c.r[2] != 0.0 {
                    v += c.r[2] * xi;
                }
                *fi = v;
            }
            self.n = 0;
        }
        if self.n < num {
            self.n += 1;
        }
        let n = self.n as f64;
        let o1 = c.o[1] * (c.o[2] + c.o[3] / n);
        let o2 = c.o[1] * (c.o[4] + c.o[5] / n);
        let f1 = c.f[1] * (c.f[2] + c.f[3] / n);
        let f2 = c.f[1] * (c.f[4] + c.f[5] / n);
        let mut out = Vec::new();
        for (fi, xi) in f.iter_mut().zip(x) {
            let mut o = c.o[0];
            if o1 != 0.0 {
                o += o1 * *fi;
            }
            if o2 != 0.0 {
                o += o2 * xi;
            }
            let mut nf = c.f[0];
            if f1 != 0.0 {
                nf += f1 * *fi;
            }
            if f2 != 0.0 {
                nf += f2 * xi;
            }
            out.push(o);
            *fi = nf;
        }
        out
    }
}

/// NDProcess.template's presets (OC1..4, FC1..4, RC1, RC2); Average takes 1/NumFilter.
fn preset(name: &str, num: f64) -> [f64; 10] {
    let r = 1.0 / num;
    match name {
        "RecursiveAve" => [1.0, -1.0, 0.0, 1.0, 1.0, -1.0, 0.0, 1.0, 0.0, 1.0],
        "Average" => [1.0, 0.0, r, 0.0, 1.0, 0.0, r, 0.0, 0.0, 0.0],
        "Sum" => [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0],
        "Difference" => [-1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0],
        "RecursiveAveDiff" => [-1.0, 0.0, 1.0, 0.0, 1.0, -1.0, 0.0, 1.0, 0.0, 1.0],
        "CopyToFilter" => [0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0],
        _ => panic!("no preset {name}"),
    }
}

const PRESETS: [&str; 6] = [
    "RecursiveAve",
    "Average",
    "Sum",
    "Difference",
    "RecursiveAveDiff",
    "CopyToFilter",
];
const COEF_NAMES: [&str; 10] = [
    "OC1", "OC2", "OC3", "OC4", "FC1", "FC2", "FC3", "FC4", "RC1", "RC2",
];

fn coef(p: [f64; 10], o: [f64; 2], f: [f64; 2], roff: f64) -> Coef {
    Coef {
        o: [o[0], o[1], p[0], p[1], p[2], p[3]],
        f: [f[0], f[1], p[4], p[5], p[6], p[7]],
        r: [roff, p[8], p[9]],
    }
}

#[test]
fn every_preset_matches_the_formulas() {
    let num = 4;
    // Default offsets/scales, then custom ones (presets leave them alone) with AutoReset.
    let variants: [([f64; 2], [f64; 2], f64, bool); 2] = [
        ([0.0, 1.0], [0.0, 1.0], 0.0, false),
        ([0.5, 2.0], [0.25, 0.5], 1.5, true),
    ];
    for name in PRESETS {
        for (o, f, roff, auto_reset) in variants {
            let h = harness();
            put(&h, "EnableFilter", "Enable");
            put(&h, "NumFilter", num as i32);
            put(&h, "FilterType", name);
            put(&h, "DataTypeOut", "Float64");
            put(&h, "OOffset", o[0]);
            put(&h, "OScale", o[1]);
            put(&h, "FOffset", f[0]);
            put(&h, "FScale", f[1]);
            put(&h, "ROffset", roff);
            put(&h, "AutoResetFilter", if auto_reset { "Yes" } else { "No" });
            let p = preset(name, num as f64);
            for (pv, n) in p.iter().zip(COEF_NAMES) {
                assert_eq!(h.get_f64(n), *pv, "{name}: {n}");
            }
            let c = coef(p, o, f, roff);
            let mut reference = RefFilter::default();
            for k in 0..9u64 {
                let x = random(DataType::UInt16, N, 100 + k);
                let want = reference.step(&x, &c, num, auto_reset, false);
                let out = run(&h, frame(&h, DataType::UInt16, &SIZES, &x));
                assert_eq!(
                    values(&out),
                    want,
                    "{name} frame {k} (auto reset {auto_reset})"
                );
                assert_eq!(h.get_f64("NumFiltered") as usize, reference.n, "{name} N");
            }
        }
    }
}

#[test]
fn filter_output_all_types() {
    for dt in DataType::ALL {
        for name in ["RecursiveAve", "RecursiveAveDiff"] {
            let h = harness();
            put(&h, "EnableFilter", "Enable");
            put(&h, "NumFilter", 3);
            put(&h, "FilterType", name);
            put(&h, "OOffset", 1.5);
            let c = coef(preset(name, 3.0), [1.5, 1.0], [0.0, 1.0], 0.0);
            let mut reference = RefFilter::default();
            for k in 0..5u64 {
                let x = random(dt, N, 200 + k);
                let want = reference.step(&x, &c, 3, false, false);
                let out = run(&h, frame(&h, dt, &SIZES, &x));
                assert_eq!(out.data_type, dt);
                assert_out(&out, &want, name);
            }
        }
    }
}

#[test]
fn filter_combined_with_point_steps() {
    let h = harness();
    let dt = DataType::Int16;
    let bg = random(dt, N, 300);
    run(&h, frame(&h, dt, &SIZES, &bg));
    put(&h, "SaveBackground", 1);
    for (k, v) in [
        ("EnableBackground", "Enable"),
        ("EnableOffsetScale", "Enable"),
        ("Offset", "10"),
        ("Scale", "0.5"),
        ("EnableHighClip", "Enable"),
        ("HighClipThresh", "9000"),
        ("HighClipValue", "9000"),
        ("EnableFilter", "Enable"),
        ("NumFilter", "3"),
        ("FilterType", "RecursiveAve"),
        ("DataTypeOut", "Float32"),
    ] {
        put(&h, k, v);
    }
    let c = coef(preset("RecursiveAve", 3.0), [0.0, 1.0], [0.0, 1.0], 0.0);
    let mut reference = RefFilter::default();
    for k in 0..5u64 {
        let x = random(dt, N, 301 + k);
        let pre: Vec<f64> = x
            .iter()
            .zip(&bg)
            .map(|(x, b)| ((x - b + 10.0) * 0.5).min(9000.0))
            .collect();
        let want = reference.step(&pre, &c, 3, false, false);
        assert_out(&run(&h, frame(&h, dt, &SIZES, &x)), &want, "combined");
    }
}

#[test]
fn zero_coefficient_skips_non_finite_values() {
    // CopyToFilter: O = F = I, with OC1 = FC1 = 0, so a NaN in F must not leak into the
    // next frame (areaDetector skips terms whose coefficient is 0).
    let h = harness();
    put(&h, "EnableFilter", "Enable");
    put(&h, "FilterType", "CopyToFilter");
    let mut x = vec![1.5; N];
    x[0] = f64::NAN;
    x[1] = f64::INFINITY;
    run(&h, frame(&h, DataType::Float64, &SIZES, &x));
    let y = random(DataType::Float64, N, 13);
    let out = run(&h, frame(&h, DataType::Float64, &SIZES, &y));
    assert_eq!(values(&out), y);
}

#[test]
fn num_filtered_grows_to_num_filter() {
    let h = harness();
    put(&h, "EnableFilter", "Enable");
    put(&h, "NumFilter", 3);
    let x = random(DataType::UInt8, N, 9);
    let mut seen = Vec::new();
    for _ in 0..5 {
        run(&h, frame(&h, DataType::UInt8, &SIZES, &x));
        seen.push(h.get_f64("NumFiltered"));
    }
    assert_eq!(seen, [1.0, 2.0, 3.0, 3.0, 3.0]);
}

#[test]
fn auto_reset_restarts_the_sum() {
    let h = harness();
    put(&h, "EnableFilter", "Enable");
    put(&h, "NumFilter", 3);
    put(&h, "FilterType", "Sum");
    put(&h, "AutoResetFilter", "Yes");
    let ones = vec![1.0; N];
    let mut got = Vec::new();
    for _ in 0..7 {
        let out = run(&h, frame(&h, DataType::UInt16, &SIZES, &ones));
        got.push((values(&out)[0], h.get_f64("NumFiltered")));
    }
    let want = [1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 1.0];
    assert_eq!(got, want.iter().map(|v| (*v, *v)).collect::<Vec<_>>());
}

#[test]
fn array_n_only_emits_the_nth_average() {
    let h = harness();
    put(&h, "EnableFilter", "Enable");
    put(&h, "NumFilter", 4);
    put(&h, "FilterType", "Average");
    put(&h, "AutoResetFilter", "Yes");
    put(&h, "FilterCallbacks", "Array N only");
    put(&h, "DataTypeOut", "Float64");
    let c = coef(preset("Average", 4.0), [0.0, 1.0], [0.0, 1.0], 0.0);
    let mut reference = RefFilter::default();
    for k in 0..8u64 {
        let x = random(DataType::UInt8, N, 400 + k);
        let want = reference.step(&x, &c, 4, true, false);
        let out = h.process(frame(&h, DataType::UInt8, &SIZES, &x)).unwrap();
        if k % 4 == 3 {
            assert_eq!(values(&one(out)), want, "frame {k}");
        } else {
            assert!(out.is_empty(), "frame {k} must not be emitted");
        }
    }
}

#[test]
fn reset_filter_command() {
    let h = harness();
    put(&h, "EnableFilter", "Enable");
    put(&h, "NumFilter", 10);
    put(&h, "FilterType", "Sum");
    let twos = vec![2.0; N];
    for _ in 0..3 {
        run(&h, frame(&h, DataType::UInt8, &SIZES, &twos));
    }
    put(&h, "ResetFilter", 1);
    assert_eq!(
        h.get_f64("ResetFilter"),
        1.0,
        "pending until the next frame"
    );
    let out = run(&h, frame(&h, DataType::UInt8, &SIZES, &twos));
    assert_eq!(values(&out)[0], 2.0);
    assert_eq!(h.get_f64("NumFiltered"), 1.0);
    assert_eq!(h.get_f64("ResetFilter"), 0.0);
}

#[test]
fn shape_or_type_change_recreates_the_filter() {
    let h = harness();
    put(&h, "EnableFilter", "Enable");
    put(&h, "NumFilter", 10);
    put(&h, "FilterType", "Sum");
    let ones = vec![1.0; N];
    for _ in 0..3 {
        run(&h, frame(&h, DataType::UInt8, &SIZES, &ones));
    }
    assert_eq!(h.get_f64("NumFiltered"), 3.0);
    // Same element count, other shape.
    let out = run(&h, frame(&h, DataType::UInt8, &[5, 7], &ones));
    assert_eq!(values(&out), ones);
    assert_eq!(h.get_f64("NumFiltered"), 1.0);
    run(&h, frame(&h, DataType::UInt8, &[5, 7], &ones));
    // Other type.
    let out = run(&h, frame(&h, DataType::Int16, &[5, 7], &ones));
    assert_eq!(values(&out), ones);
    assert_eq!(h.get_f64("NumFiltered"), 1.0);
    // Other size.
    let out = run(&h, frame(&h, DataType::Int16, &[3], &[1.0, 1.0, 1.0]));
    assert_eq!(values(&out), [1.0, 1.0, 1.0]);
}

#[test]
fn num_filter_reloads_the_preset() {
    let h = harness();
    put(&h, "FilterType", "Average");
    put(&h, "NumFilter", 4);
    assert_eq!((h.get_f64("OC3"), h.get_f64("FC3")), (0.25, 0.25));
    put(&h, "NumFilter", 5);
    assert_eq!((h.get_f64("OC3"), h.get_f64("FC3")), (0.2, 0.2));
    assert!(h.put("NumFilter", 0).is_err(), "NumFilter must be >= 1");
    // Defaults are the RecursiveAve preset.
    let h = harness();
    for (n, v) in COEF_NAMES.iter().zip(preset("RecursiveAve", 1.0)) {
        assert_eq!(h.get_f64(n), v, "{n}");
    }
}

#[test]
fn auto_offset_scale_spans_the_output_type() {
    let h = harness();
    put(&h, "DataTypeOut", "UInt8");
    let mut x = random(DataType::UInt16, N, 10);
    for v in x.iter_mut() {
        *v = 100.0 + (*v % 1000.0);
    }
    x[3] = 100.0;
    x[9] = 1100.0;
    put(&h, "AutoOffsetScale", 1);
    let out = run(&h, frame(&h, DataType::UInt16, &SIZES, &x));
    let scale = 255.0 / 1000.0;
    assert_eq!(h.get_f64("Offset"), -100.0);
    assert_eq!(h.get_f64("Scale"), scale);
    assert_eq!(h.get_f64("EnableOffsetScale"), 1.0);
    assert_eq!(h.get_f64("EnableLowClip"), 1.0);
    assert_eq!(h.get_f64("EnableHighClip"), 1.0);
    assert_eq!(h.get_f64("HighClipThresh"), 255.0);
    assert_eq!(h.get_f64("AutoOffsetScale"), 0.0, "one-shot");
    let want: Vec<f64> = x
        .iter()
        .map(|v| ((v - 100.0) * scale).clamp(0.0, 255.0))
        .collect();
    assert_out(&out, &want, "auto offset/scale");
    let got = values(&out);
    assert_eq!((got[3], got[9]), (0.0, 255.0));
    // Signed output: 0..=127.
    let h = harness();
    put(&h, "DataTypeOut", "Int8");
    put(&h, "AutoOffsetScale", "Calculating");
    let out = run(&h, frame(&h, DataType::UInt16, &SIZES, &x));
    assert_eq!(h.get_f64("Scale"), 127.0 / 1000.0);
    assert_eq!((values(&out)[3], values(&out)[9]), (0.0, 127.0));
}

// ---- commands, parameters, refusals --------------------------------------------------------

#[test]
fn save_without_a_frame_is_invalid_and_sizes_must_match() {
    let h = harness();
    put(&h, "SaveBackground", 1);
    assert_eq!(h.get_f64("ValidBackground"), 0.0);
    put(&h, "EnableBackground", "Enable");
    let x = random(DataType::UInt8, N, 11);
    run(&h, frame(&h, DataType::UInt8, &SIZES, &x));
    put(&h, "SaveBackground", 1);
    assert_eq!(h.get_f64("ValidBackground"), 1.0);
    // Another shape: background not applied, readback Invalid.
    let y = random(DataType::UInt8, 12, 12);
    let out = run(&h, frame(&h, DataType::UInt8, &[12], &y));
    assert_eq!(values(&out), y);
    assert_eq!(h.get_f64("ValidBackground"), 0.0);
}

#[test]
fn refused_output_buffer_leaves_the_filter_untouched() {
    let h = harness();
    put(&h, "EnableFilter", "Enable");
    put(&h, "NumFilter", 5);
    put(&h, "FilterType", "Sum");
    let pool = ndflow_core::Pool::new(128); // two 64-byte buffers
    let px = vec![3u8; N];
    let input = Arc::new(NDArray::from_pixels(&pool, &SIZES, &px).unwrap());
    let blocker = pool.alloc(64).unwrap();
    assert!(h.process_arc(&input).is_err(), "no room for the output");
    assert_eq!(h.get_f64("NumFiltered"), 0.0);
    drop(blocker);
    let out = one(h.process_arc(&input).unwrap());
    assert_eq!(values(&out), vec![3.0; N]);
    assert_eq!(h.get_f64("NumFiltered"), 1.0);
}

#[test]
fn compressed_input_is_refused() {
    let h = harness();
    let mut f = frame(&h, DataType::UInt8, &SIZES, &[1.0; N]);
    f.codec = Codec {
        name: "lz4".into(),
        ..Codec::default()
    };
    assert!(h.process(f).is_err());
}

#[test]
fn names_and_enum_strings_follow_ndprocess_template() {
    let h = harness();
    assert_eq!(h.plugin.plugin_type(), "NDPluginProcess");
    assert_eq!(h.plugin.max_threads(), 1);
    let j = h.params.to_json();
    for (pv, v) in [
        ("ValidBackground_RBV", "Invalid"),
        ("ValidFlatField_RBV", "Invalid"),
        ("EnableBackground_RBV", "Disable"),
        ("EnableFilter", "Disable"),
        ("AutoResetFilter", "No"),
        ("FilterCallbacks", "Every array"),
        ("FilterType", "RecursiveAve"),
        ("DataTypeOut", "Automatic"),
        ("AutoOffsetScale", "Done"),
        ("SaveFlatField", "No"),
    ] {
        assert_eq!(j[pv], v, "{pv}");
    }
    assert_eq!(j["ScaleFlatField"], 255.0);
    assert!(j.contains_key("NumFiltered_RBV") && !j.contains_key("NumFiltered"));
    assert!(h.put("ValidBackground", 1).is_err(), "read-only");
    assert!(h.put("FilterType", "Median").is_err());
}

// ---- FilterPrecision = Float32 (ndflow's own) ----------------------------------------------

/// [`RefFilter`] in f32: F stored as f32, the input converted to f32, the coefficients
/// folded for N in f64 (as for Float64) and cast to f32 once, then the same formulas in the
/// same order in f32 — so the plugin must match it exactly.
#[derive(Default)]
struct RefFilter32 {
    f: Option<Vec<f32>>,
    n: usize,
}

impl RefFilter32 {
    fn step(&mut self, x: &[f64], c: &Coef, num: usize, auto_reset: bool) -> Vec<f32> {
        let x: Vec<f32> = x.iter().map(|v| *v as f32).collect();
        let mut reset = false;
        if self.f.as_ref().is_none_or(|f| f.len() != x.len()) {
            self.f = Some(x.clone());
            reset = true;
        }
        if self.n >= num && auto_reset {
            reset = true;
        }
        let f = self.f.as_mut().unwrap();
        let term = |c: f32, v: f32| if c != 0.0 { c * v } else { 0.0 };
        if reset {
            let [r0, r1, r2] = c.r.map(|v| v as f32);
            for (fi, xi) in f.iter_mut().zip(&x) {
                *fi = r0 + term(r1, *fi) + term(r2, *xi);
            }
            self.n = 0;
        }
        if self.n < num {
            self.n += 1;
        }
        let n = self.n as f64;
        let o0 = c.o[0] as f32;
        let o1 = (c.o[1] * (c.o[2] + c.o[3] / n)) as f32;
        let o2 = (c.o[1] * (c.o[4] + c.o[5] / n)) as f32;
        let f0 = c.f[0] as f32;
        let f1 = (c.f[1] * (c.f[2] + c.f[3] / n)) as f32;
        let f2 = (c.f[1] * (c.f[4] + c.f[5] / n)) as f32;
        let mut out = Vec::new();
        for (fi, xi) in f.iter_mut().zip(&x) {
            out.push(o0 + term(o1, *fi) + term(o2, *xi));
            *fi = f0 + term(f1, *fi) + term(f2, *xi);
        }
        out
    }
}

fn widen(v: &[f32]) -> Vec<f64> {
    v.iter().map(|x| f64::from(*x)).collect()
}

#[test]
fn float32_filter_every_preset_matches_f32_formulas() {
    let num = 4;
    let variants: [([f64; 2], [f64; 2], f64, bool); 2] = [
        ([0.0, 1.0], [0.0, 1.0], 0.0, false),
        ([0.5, 2.0], [0.25, 0.5], 1.5, true),
    ];
    let types = [
        DataType::UInt8,
        DataType::UInt16,
        DataType::Int16,
        DataType::Float32,
    ];
    for dt in types {
        for name in PRESETS {
            for (o, f, roff, auto_reset) in variants {
                // The same frames into a Float64 output (F's f32 values, exactly) and into the
                // input type (converted with `as`, saturating).
                let hs = ["Float64", "Automatic"].map(|out| {
                    let h = harness();
                    put(&h, "FilterPrecision", "Float32");
                    put(&h, "EnableFilter", "Enable");
                    put(&h, "NumFilter", num as i32);
                    put(&h, "FilterType", name);
                    put(&h, "DataTypeOut", out);
                    put(&h, "OOffset", o[0]);
                    put(&h, "OScale", o[1]);
                    put(&h, "FOffset", f[0]);
                    put(&h, "FScale", f[1]);
                    put(&h, "ROffset", roff);
                    put(&h, "AutoResetFilter", if auto_reset { "Yes" } else { "No" });
                    h
                });
                let c = coef(preset(name, num as f64), o, f, roff);
                let mut reference = RefFilter32::default();
                for k in 0..9u64 {
                    let x = random(dt, N, 500 + k);
                    let want = widen(&reference.step(&x, &c, num, auto_reset));
                    let what = format!("{dt} {name} frame {k} (auto reset {auto_reset})");
                    let out = run(&hs[0], frame(&hs[0], dt, &SIZES, &x));
                    assert_eq!(out.data_type, DataType::Float64);
                    assert_eq!(values(&out), want, "{what}");
                    let out = run(&hs[1], frame(&hs[1], dt, &SIZES, &x));
                    assert_eq!(out.data_type, dt);
                    assert_out(&out, &want, &what);
                    assert_eq!(hs[1].get_f64("NumFiltered") as usize, reference.n, "{what}");
                }
            }
        }
    }
}

#[test]
fn float32_filter_rounds_in_f32() {
    // Sum of 2^24 and 1: exact in f64, rounds back to 2^24 in f32.
    let big = [16_777_216.0; N];
    let ones = [1.0; N];
    for (precision, want) in [("Float64", 16_777_217.0), ("Float32", 16_777_216.0)] {
        let h = harness();
        put(&h, "FilterPrecision", precision);
        put(&h, "EnableFilter", "Enable");
        put(&h, "NumFilter", 10);
        put(&h, "FilterType", "Sum");
        put(&h, "DataTypeOut", "Float64");
        run(&h, frame(&h, DataType::Float32, &SIZES, &big));
        let out = run(&h, frame(&h, DataType::Float32, &SIZES, &ones));
        assert_eq!(values(&out), vec![want; N], "{precision}");
    }
    let h = harness();
    assert_eq!(h.params.to_json()["FilterPrecision"], "Float64", "default");
    assert!(h.put("FilterPrecision", "Float16").is_err());
}

#[test]
fn switching_precision_resets_the_filter() {
    let h = harness();
    put(&h, "EnableFilter", "Enable");
    put(&h, "NumFilter", 10);
    put(&h, "FilterType", "Sum");
    let twos = vec![2.0; N];
    let step = |expect: f64, n: f64, what: &str| {
        let out = run(&h, frame(&h, DataType::UInt8, &SIZES, &twos));
        assert_eq!(values(&out), vec![expect; N], "{what}");
        assert_eq!(h.get_f64("NumFiltered"), n, "{what}");
    };
    for k in 1..=3 {
        step(2.0 * k as f64, k as f64, "Float64");
    }
    put(&h, "FilterPrecision", "Float32");
    step(2.0, 1.0, "after switching to Float32");
    step(4.0, 2.0, "Float32 accumulates");
    put(&h, "FilterPrecision", "Float32");
    step(6.0, 3.0, "rewriting the same value keeps F");
    put(&h, "FilterPrecision", "Float64");
    step(2.0, 1.0, "after switching back to Float64");
}

#[test]
fn float32_filter_with_point_steps_and_array_n_only() {
    // Steps 1-4 in f64, then the filter in f32 (its input narrowed to f32).
    let h = harness();
    let dt = DataType::Int16;
    let bg = random(dt, N, 600);
    run(&h, frame(&h, dt, &SIZES, &bg));
    put(&h, "SaveBackground", 1);
    for (k, v) in [
        ("FilterPrecision", "Float32"),
        ("EnableBackground", "Enable"),
        ("EnableOffsetScale", "Enable"),
        ("Offset", "10"),
        ("Scale", "0.3"),
        ("EnableLowClip", "Enable"),
        ("LowClipThresh", "-5000"),
        ("LowClipValue", "-5000"),
        ("EnableFilter", "Enable"),
        ("NumFilter", "3"),
        ("FilterType", "Average"),
        ("AutoResetFilter", "Yes"),
        ("FilterCallbacks", "Array N only"),
        ("DataTypeOut", "Float32"),
    ] {
        put(&h, k, v);
    }
    let c = coef(preset("Average", 3.0), [0.0, 1.0], [0.0, 1.0], 0.0);
    let mut reference = RefFilter32::default();
    for k in 0..7u64 {
        let x = random(dt, N, 601 + k);
        let pre: Vec<f64> = x
            .iter()
            .zip(&bg)
            .map(|(x, b)| ((x - b + 10.0) * 0.3).max(-5000.0))
            .collect();
        let want = widen(&reference.step(&pre, &c, 3, true));
        let out = h.process(frame(&h, dt, &SIZES, &x)).unwrap();
        if k % 3 == 2 {
            assert_eq!(values(&one(out)), want, "frame {k}");
        } else {
            assert!(out.is_empty(), "frame {k} must not be emitted");
        }
    }
}
