//! NDPluginROI against a plain reference: every output pixel is recomputed from its
//! multi-index, summing its whole binning block, with no fast paths.

use std::sync::Arc;

use ndflow_core::{
    with_pixel_type, AttrValue, ColorMode, DataType, Dim, NDArray, NDAttribute, ParamStore,
    ParamValue, Pixel,
};
use ndflow_plugins::roi::{RoiPlugin, ROI_PARAMS};
use ndflow_runtime::port_params::{ARRAY_BASE_PARAMS, PLUGIN_BASE_PARAMS};
use ndflow_runtime::{Plugin, PluginHarness};
use num_traits::AsPrimitive;
use rand::{Rng, SeedableRng};

/// One output dim of the reference: input `start + (o or out-1-o) * bin + b`.
#[derive(Debug, Clone, Copy)]
struct R {
    start: usize,
    out: usize,
    bin: usize,
    rev: bool,
}

const fn r(start: usize, out: usize, bin: usize, rev: bool) -> R {
    R {
        start,
        out,
        bin,
        rev,
    }
}

const fn whole(n: usize) -> R {
    r(0, n, 1, false)
}

fn reference<S, D>(sizes: &[usize], data: &[S], plan: &[R], scale: Option<f64>) -> Vec<D>
where
    S: Pixel + AsPrimitive<D>,
    D: Pixel,
{
    let n_out: usize = plan.iter().map(|p| p.out).product();
    let n_block: usize = plan.iter().map(|p| p.bin).product();
    let plain = n_block == 1 && scale.is_none();
    let mut out = Vec::with_capacity(n_out);
    for o in 0..n_out {
        let mut oi = Vec::new();
        let mut rem = o;
        for p in plan {
            oi.push(rem % p.out);
            rem /= p.out;
        }
        let mut sum = 0.0;
        let mut last = S::default();
        for b in 0..n_block {
            let (mut rem, mut flat, mut stride) = (b, 0, 1);
            for (d, p) in plan.iter().enumerate() {
                let bd = rem % p.bin;
                rem /= p.bin;
                let od = if p.rev { p.out - 1 - oi[d] } else { oi[d] };
                let idx = p.start + od * p.bin + bd;
                assert!(idx < sizes[d], "reference plan outside the input");
                flat += idx * stride;
                stride *= sizes[d];
            }
            sum += data[flat].to_f64();
            last = data[flat];
        }
        out.push(if plain {
            last.as_()
        } else {
            D::from_f64(sum / scale.unwrap_or(1.0))
        });
    }
    out
}

/// Integer-valued pixels spanning the type (up to ±1000) so that conversions wrap/saturate.
fn pixels<T: Pixel>(n: usize, seed: u64) -> Vec<T> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let lo = T::MIN_F64.max(-1000.0);
    let hi = T::MAX_F64.min(1000.0);
    (0..n)
        .map(|_| T::from_f64(rng.random_range(lo..=hi).round()))
        .collect()
}

fn harness(puts: &[(&str, ParamValue)]) -> PluginHarness<RoiPlugin> {
    let h = PluginHarness::new(RoiPlugin::new());
    for (name, v) in puts {
        h.put(name, v.clone()).unwrap();
    }
    h
}

fn run_one(h: &PluginHarness<RoiPlugin>, frame: NDArray) -> Arc<NDArray> {
    let mut out = h.process(frame).unwrap();
    assert_eq!(out.len(), 1);
    out.remove(0)
}

/// Runs one case for input type `S`, output type `D`, and checks sizes and pixels.
fn check<S, D>(sizes: &[usize], puts: &[(&str, ParamValue)], plan: &[R], scale: Option<f64>)
where
    S: Pixel + AsPrimitive<D>,
    D: Pixel,
{
    let h = harness(puts);
    let data = pixels::<S>(sizes.iter().product(), 7);
    let frame = NDArray::from_pixels(&h.pool, sizes, &data).unwrap();
    let out = run_one(&h, frame);
    let want_sizes: Vec<usize> = plan.iter().map(|p| p.out).collect();
    let ctx = format!("{} -> {} {puts:?}", S::DATA_TYPE, D::DATA_TYPE);
    assert_eq!(out.sizes(), want_sizes, "{ctx}");
    assert_eq!(out.data_type, D::DATA_TYPE, "{ctx}");
    let want = reference::<S, D>(sizes, &data, plan, scale);
    assert_eq!(out.pixels::<D>().unwrap(), &want[..], "{ctx}");
}

fn p(v: impl Into<ParamValue>) -> ParamValue {
    v.into()
}

/// Same-type cases, all 10 types: copy, reverse, binning, scale, 1-D, 3-D, 4-D, auto size.
#[test]
fn all_types_against_reference() {
    for dt in DataType::ALL {
        with_pixel_type!(dt, T => {
            // Plain region (row copy path).
            check::<T, T>(&[7, 5], &[("MinX", p(1)), ("SizeX", p(5)), ("MinY", p(1)), ("SizeY", p(4))],
                &[r(1, 5, 1, false), r(1, 4, 1, false)], None);
            // Reversed in both dims.
            check::<T, T>(&[7, 5], &[("MinX", p(2)), ("SizeX", p(4)), ("ReverseX", p("Yes")), ("ReverseY", p(1))],
                &[r(2, 4, 1, true), r(0, 5, 1, true)], None);
            // Binning with partial bins dropped: 5/2 = 2, 4/3 = 1.
            check::<T, T>(&[7, 5], &[("MinX", p(1)), ("SizeX", p(5)), ("BinX", p(2)), ("MinY", p(1)),
                ("SizeY", p(4)), ("BinY", p(3)), ("ReverseX", p(1))],
                &[r(1, 2, 2, true), r(1, 1, 3, false)], None);
            // Scale (divide) with binning.
            check::<T, T>(&[6, 6], &[("BinX", p(2)), ("BinY", p(2)), ("EnableScale", p("Enable")), ("Scale", p(4.0))],
                &[r(0, 3, 2, false), r(0, 3, 2, false)], Some(4.0));
            // Scale without binning.
            check::<T, T>(&[5, 3], &[("EnableScale", p(1)), ("Scale", p(3.0))],
                &[whole(5), whole(3)], Some(3.0));
            // 1-D.
            check::<T, T>(&[13], &[("MinX", p(3)), ("SizeX", p(8)), ("BinX", p(3)), ("MinY", p(5))],
                &[r(3, 2, 3, false)], None);
            // 3-D: Z binned and reversed, Y disabled (whole, MinY ignored).
            check::<T, T>(&[6, 5, 4], &[("MinX", p(1)), ("SizeX", p(3)), ("MinY", p(2)), ("SizeY", p(1)),
                ("EnableY", p("Disable")), ("MinZ", p(1)), ("SizeZ", p(2)), ("BinZ", p(2)), ("ReverseZ", p(1))],
                &[r(1, 3, 1, false), whole(5), r(1, 1, 2, true)], None);
            // 4-D: the 4th dim is taken whole.
            check::<T, T>(&[4, 3, 2, 3], &[("MinX", p(1)), ("SizeX", p(2)), ("SizeY", p(2)), ("MinZ", p(1))],
                &[r(1, 2, 1, false), r(0, 2, 1, false), r(1, 1, 1, false), whole(3)], None);
            // AutoSize: size = input - min, whatever SizeX says.
            check::<T, T>(&[7, 2], &[("MinX", p(2)), ("SizeX", p(1)), ("AutoSizeX", p("Yes"))],
                &[r(2, 5, 1, false), whole(2)], None);
        });
    }
}

/// Every input type into every output type: plain conversion (`as`) and binned + scaled.
#[test]
fn all_type_conversions() {
    for din in DataType::ALL {
        for (i, dout) in DataType::ALL.into_iter().enumerate() {
            with_pixel_type!(din, S => with_pixel_type!(dout, D => {
                let out_type = p(DataType::NAMES[i]);
                check::<S, D>(&[9, 4], &[("DataTypeOut", out_type.clone()), ("MinX", p(1)), ("SizeX", p(7)),
                    ("ReverseX", p(1)), ("MinY", p(1))],
                    &[r(1, 7, 1, true), r(1, 3, 1, false)], None);
                check::<S, D>(&[9, 4], &[("DataTypeOut", out_type), ("BinX", p(3)), ("BinY", p(2)),
                    ("ReverseY", p(1)), ("EnableScale", p(1)), ("Scale", p(2.5))],
                    &[r(0, 3, 3, false), r(0, 2, 2, true)], Some(2.5));
            }));
        }
    }
}

/// Values that overflow the output type: binning sums in f64 and saturates once.
#[test]
fn binning_sums_without_wrapping() {
    let h = harness(&[("BinX", p(2)), ("BinY", p(2))]);
    let frame = NDArray::from_pixels(&h.pool, &[2, 2], &[200u8, 100, 50, 1]).unwrap();
    assert_eq!(run_one(&h, frame).pixels::<u8>().unwrap(), &[255]);
    h.put("DataTypeOut", "UInt16").unwrap();
    let frame = NDArray::from_pixels(&h.pool, &[2, 2], &[200u8, 100, 50, 1]).unwrap();
    assert_eq!(run_one(&h, frame).pixels::<u16>().unwrap(), &[351]);
    // areaDetector's example: all ones binned 3x3 and divided by 9 stay 1.
    let h = harness(&[
        ("BinX", p(3)),
        ("BinY", p(3)),
        ("EnableScale", p(1)),
        ("Scale", p(9.0)),
    ]);
    let frame = NDArray::from_pixels(&h.pool, &[3, 3], &[1u16; 9]).unwrap();
    assert_eq!(run_one(&h, frame).pixels::<u16>().unwrap(), &[1]);
}

#[test]
fn collapse_dims() {
    let data: Vec<u16> = (0..24).collect();
    let h = harness(&[("MinY", p(2)), ("SizeY", p(1))]);
    let frame = NDArray::from_pixels(&h.pool, &[4, 3, 2], &data).unwrap();
    assert_eq!(run_one(&h, frame.clone()).sizes(), vec![4, 1, 2]);
    h.put("CollapseDims", "Enable").unwrap();
    let out = run_one(&h, frame.clone());
    assert_eq!(out.sizes(), vec![4, 2]);
    assert_eq!(
        out.pixels::<u16>().unwrap(),
        &[8, 9, 10, 11, 20, 21, 22, 23]
    );
    assert_eq!(out.dims[0].offset, 0);
    assert_eq!(out.dims[1].size, 2);
    // Everything size 1: one dim stays (the last, as areaDetector).
    for (k, v) in [("SizeX", 1), ("MinX", 3), ("MinZ", 1), ("SizeZ", 1)] {
        h.put(k, v).unwrap();
    }
    let out = run_one(&h, frame);
    assert_eq!(out.sizes(), vec![1]);
    assert_eq!(out.dims[0].offset, 1);
    assert_eq!(out.pixels::<u16>().unwrap(), &[23]);
}

#[test]
fn clamps_to_the_input_and_reports_max_sizes() {
    let data: Vec<i32> = (0..48).collect();
    // MinX beyond the input -> last column; size 0 -> 1; bin larger than size -> size.
    let h = harness(&[
        ("MinX", p(10)),
        ("SizeX", p(0)),
        ("MinY", p(2)),
        ("SizeY", p(100)),
        ("BinY", p(10)),
    ]);
    let frame = NDArray::from_pixels(&h.pool, &[8, 6], &data).unwrap();
    let out = run_one(&h, frame);
    assert_eq!(out.sizes(), vec![1, 1]);
    assert_eq!(out.pixels::<i32>().unwrap(), &[23 + 31 + 39 + 47]);
    assert_eq!(
        (out.dims[0].offset, out.dims[1].offset, out.dims[1].binning),
        (7, 2, 4)
    );
    assert_eq!(h.get_f64("MaxSizeX"), 8.0);
    assert_eq!(h.get_f64("MaxSizeY"), 6.0);
    assert_eq!(h.get_f64("MaxSizeZ"), 0.0);
    assert_eq!(h.get_f64("ArraySizeX"), 1.0);
    // The requested values are kept (not overwritten by the clamped ones).
    assert_eq!(h.get_f64("MinX"), 10.0);
    // Refused writes: negative start, zero binning.
    assert!(h.put("MinX", -1).is_err());
    assert!(h.put("BinX", 0).is_err());
    assert!(h.put("DataTypeOut", "UInt9").is_err());
}

#[test]
fn whole_frame_shares_pixels_and_keeps_metadata() {
    let h = harness(&[]);
    let mut frame = NDArray::from_pixels(&h.pool, &[5, 4], &[3u16; 20]).unwrap();
    frame.unique_id = 42;
    frame.time_stamp = 12.5;
    frame.epics_ts.sec = 9;
    frame.set_attribute(NDAttribute::new("Gain", "", AttrValue::Float64(2.0)));
    frame.dims[0].offset = 10;
    frame.dims[0].binning = 2;
    let input = Arc::new(frame);
    let out = h.process_arc(&input).unwrap().remove(0);
    assert!(out.buffer.ptr_eq(&input.buffer));
    assert_eq!(out.dims, input.dims);
    assert_eq!(
        (out.unique_id, out.time_stamp, out.epics_ts.sec),
        (42, 12.5, 9)
    );
    assert_eq!(out.attribute("Gain").unwrap().value.as_f64(), Some(2.0));
    // A real region copies into a pool buffer but keeps the same metadata.
    h.put("SizeX", 2).unwrap();
    let out = h.process_arc(&input).unwrap().remove(0);
    assert!(!out.buffer.ptr_eq(&input.buffer));
    assert_eq!((out.unique_id, out.time_stamp), (42, 12.5));
    assert!(out.attribute("Gain").is_some());
    assert_eq!(out.total_bytes(), 2 * 4 * 2);
    assert_eq!(out.compressed_size, 16);
}

/// Offsets (unbinned detector pixels), binning and reversal accumulate through two ROIs,
/// and the pixels match one reference pass with the composed region.
#[test]
fn dims_metadata_through_a_chain() {
    let data = pixels::<u32>(20 * 10, 3);
    let first = harness(&[
        ("MinX", p(2)),
        ("SizeX", p(16)),
        ("BinX", p(2)),
        ("ReverseX", p(1)),
        ("MinY", p(1)),
        ("SizeY", p(8)),
    ]);
    let second = harness(&[
        ("MinX", p(1)),
        ("SizeX", p(6)),
        ("BinX", p(3)),
        ("MinY", p(2)),
        ("SizeY", p(4)),
        ("BinY", p(2)),
        ("ReverseY", p(1)),
    ]);
    let mut frame = NDArray::from_pixels(&first.pool, &[20, 10], &data).unwrap();
    frame.dims[1].offset = 100;
    frame.dims[1].binning = 3;
    frame.dims[1].reverse = true;
    let mid = run_one(&first, frame);
    assert_eq!(
        mid.dims[0],
        Dim {
            size: 8,
            offset: 2,
            binning: 2,
            reverse: true
        }
    );
    assert_eq!(
        mid.dims[1],
        Dim {
            size: 8,
            offset: 103,
            binning: 3,
            reverse: true
        }
    );
    let out = second.process_arc(&mid).unwrap().remove(0);
    assert_eq!(
        out.dims[0],
        Dim {
            size: 2,
            offset: 4,
            binning: 6,
            reverse: true
        }
    );
    assert_eq!(
        out.dims[1],
        Dim {
            size: 2,
            offset: 109,
            binning: 6,
            reverse: false
        }
    );
    // Second pass on the first pass's pixels, by the reference.
    let mid_px = mid.pixels::<u32>().unwrap();
    let want_mid = reference::<u32, u32>(
        &[20, 10],
        &data,
        &[r(2, 8, 2, true), r(1, 8, 1, false)],
        None,
    );
    assert_eq!(mid_px, &want_mid[..]);
    let want = reference::<u32, u32>(
        &[8, 8],
        mid_px,
        &[r(1, 2, 3, false), r(2, 2, 2, true)],
        None,
    );
    assert_eq!(out.pixels::<u32>().unwrap(), &want[..]);
}

fn rgb_frame(h: &PluginHarness<RoiPlugin>, sizes: &[usize], mode: ColorMode) -> (NDArray, Vec<u8>) {
    let data = pixels::<u8>(sizes.iter().product(), 11);
    let mut f = NDArray::from_pixels(&h.pool, sizes, &data).unwrap();
    f.set_color_mode(mode);
    (f, data)
}

/// RGB1 [3, X, Y] and RGB2 [X, 3, Y]: X/Y act on the image axes, Z on the colour axis.
#[test]
fn colour_frames_map_xyz_to_image_axes() {
    // RGB1: region in X and Y keeps all colours and the colour mode.
    let h = harness(&[
        ("MinX", p(1)),
        ("SizeX", p(4)),
        ("MinY", p(1)),
        ("SizeY", p(2)),
        ("ReverseX", p(1)),
    ]);
    let (f, data) = rgb_frame(&h, &[3, 6, 4], ColorMode::RGB1);
    let out = run_one(&h, f);
    assert_eq!(out.sizes(), vec![3, 4, 2]);
    assert_eq!(out.color_mode(), ColorMode::RGB1);
    let want = reference::<u8, u8>(
        &[3, 6, 4],
        &data,
        &[whole(3), r(1, 4, 1, true), r(1, 2, 1, false)],
        None,
    );
    assert_eq!(out.pixels::<u8>().unwrap(), &want[..]);
    assert_eq!(
        (
            h.get_f64("MaxSizeX"),
            h.get_f64("MaxSizeY"),
            h.get_f64("MaxSizeZ")
        ),
        (6.0, 4.0, 3.0)
    );
    assert_eq!(
        (
            h.get_f64("ArraySizeX"),
            h.get_f64("ArraySizeY"),
            h.get_f64("ArraySizeZ")
        ),
        (4.0, 2.0, 3.0)
    );

    // RGB1, one colour (green): collapsed to a Mono [X, Y] image.
    h.put("MinZ", 1).unwrap();
    h.put("SizeZ", 1).unwrap();
    let (f, data) = rgb_frame(&h, &[3, 6, 4], ColorMode::RGB1);
    let out = run_one(&h, f);
    assert_eq!(out.sizes(), vec![4, 2]);
    assert_eq!(out.color_mode(), ColorMode::Mono);
    let want = reference::<u8, u8>(
        &[3, 6, 4],
        &data,
        &[r(1, 1, 1, false), r(1, 4, 1, true), r(1, 2, 1, false)],
        None,
    );
    assert_eq!(out.pixels::<u8>().unwrap(), &want[..]);

    // RGB2: two colours -> stays 3-D but is no longer RGB.
    let h = harness(&[
        ("MinX", p(2)),
        ("SizeX", p(3)),
        ("SizeZ", p(2)),
        ("BinY", p(2)),
    ]);
    let (f, data) = rgb_frame(&h, &[6, 3, 4], ColorMode::RGB2);
    let out = run_one(&h, f);
    assert_eq!(out.sizes(), vec![3, 2, 2]);
    assert_eq!(out.color_mode(), ColorMode::Mono);
    let want = reference::<u8, u8>(
        &[6, 3, 4],
        &data,
        &[r(2, 3, 1, false), r(0, 2, 1, false), r(0, 2, 2, false)],
        None,
    );
    assert_eq!(out.pixels::<u8>().unwrap(), &want[..]);

    // RGB3 [X, Y, 3] is already in X/Y/Z order; one colour collapses.
    let h = harness(&[("MinZ", p(2)), ("SizeZ", p(1))]);
    let (f, data) = rgb_frame(&h, &[5, 4, 3], ColorMode::RGB3);
    let out = run_one(&h, f);
    assert_eq!(out.sizes(), vec![5, 4]);
    assert_eq!(out.color_mode(), ColorMode::Mono);
    assert_eq!(out.pixels::<u8>().unwrap(), &data[40..60]);
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let h = harness(&[]);
    let mut f = NDArray::from_pixels(&h.pool, &[4], &[1u8, 2, 3, 4]).unwrap();
    f.codec.name = "lz4".into();
    assert!(h.process(f).is_err());
    let empty = NDArray::from_pixels::<u8>(&h.pool, &[0, 4], &[]).unwrap();
    assert!(h.process(empty).is_err());
    // Dims claiming more pixels than the buffer holds.
    h.put("SizeX", 2).unwrap();
    let mut short = NDArray::from_pixels(&h.pool, &[4], &[1u8, 2, 3, 4]).unwrap();
    short.dims[0].size = 400;
    assert!(h.process(short).is_err());
}

#[test]
fn declares_itself() {
    let p = RoiPlugin::new();
    assert_eq!(p.plugin_type(), "NDPluginROI");
    assert!(p.max_threads() > 1 && !p.accepts_compressed());
    let tables = [ARRAY_BASE_PARAMS, PLUGIN_BASE_PARAMS, ROI_PARAMS];
    assert!(ParamStore::duplicate_names(&tables).is_empty());
    let h = harness(&[]);
    assert_eq!(h.get("DataTypeOut"), ParamValue::Int(10));
    let pvs = h.params.to_json();
    for pv in [
        "MinX",
        "SizeY_RBV",
        "BinZ",
        "EnableX",
        "AutoSizeY",
        "MaxSizeX_RBV",
        "Scale",
        "CollapseDims",
    ] {
        assert!(pvs.contains_key(pv), "{pv}");
    }
    assert_eq!(pvs["DataTypeOut_RBV"], "Automatic");
    assert!(!pvs.contains_key("MaxSizeX"));
}

/// Several threads through one plugin instance (per-thread accumulators, shared indices).
#[test]
fn concurrent_frames() {
    let h = harness(&[
        ("BinX", p(2)),
        ("BinY", p(2)),
        ("DataTypeOut", p("Float64")),
    ]);
    std::thread::scope(|s| {
        for t in 0..4usize {
            let h = &h;
            s.spawn(move || {
                for i in 0..20 {
                    let w = 4 + 2 * ((t + i) % 5);
                    let data = pixels::<i16>(w * 6, (t * 100 + i) as u64);
                    let f = NDArray::from_pixels(&h.pool, &[w, 6], &data).unwrap();
                    let out = h.process(f).unwrap().remove(0);
                    let want = reference::<i16, f64>(
                        &[w, 6],
                        &data,
                        &[r(0, w / 2, 2, false), r(0, 3, 2, false)],
                        None,
                    );
                    assert_eq!(out.pixels::<f64>().unwrap(), &want[..]);
                }
            });
        }
    });
}
