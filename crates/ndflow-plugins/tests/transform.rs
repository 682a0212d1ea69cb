//! NDPluginTransform against ADCore's index mapping (NDPluginTransform.cpp, Mono loops),
//! for every type, every colour layout and every data type, on a non-square noise image.

use crate::common;
use std::sync::Arc;
use std::time::Duration;

use ndflow_core::{
    with_pixel_type, ColorMode, DataType, Dim, NDArray, ParamDef, ParamStore, Pixel, Pool,
};
use ndflow_plugins::transform::{TransformPlugin, TRANSFORM_PARAMS, TRANSFORM_TYPES};
use ndflow_runtime::{Driver, DriverError, DropReason, Graph, PluginHarness};
use rand::{Rng, SeedableRng};

const W: usize = 7;
const H: usize = 5;

/// ADCore's Mono loops: output element index of input pixel (x, y) of a `w`×`h` image.
fn adcore_index(kind: usize, x: usize, y: usize, w: usize, h: usize) -> usize {
    match kind {
        0 => x + y * w,
        1 => (h - 1 - y) + x * h,
        2 => (w - 1 - x) + (h - 1 - y) * w,
        3 => y + (w - 1 - x) * h,
        4 => (w - 1 - x) + y * w,
        5 => y + x * h,
        6 => x + (h - 1 - y) * w,
        7 => (h - 1 - y) + (w - 1 - x) * h,
        _ => unreachable!(),
    }
}

/// Element index of colour `c` of pixel (x, y) in a `w`×`h` frame of `mode`.
fn element(mode: ColorMode, x: usize, y: usize, c: usize, w: usize, h: usize) -> usize {
    match mode {
        ColorMode::RGB1 => c + 3 * (x + y * w),
        ColorMode::RGB2 => x + c * w + 3 * w * y,
        ColorMode::RGB3 => x + y * w + c * w * h,
        _ => x + y * w,
    }
}

fn sizes(mode: ColorMode, w: usize, h: usize) -> Vec<usize> {
    match mode {
        ColorMode::RGB1 => vec![3, w, h],
        ColorMode::RGB2 => vec![w, 3, h],
        ColorMode::RGB3 => vec![w, h, 3],
        _ => vec![w, h],
    }
}

fn reference<T: Pixel>(kind: usize, mode: ColorMode, data: &[T]) -> (Vec<T>, usize, usize) {
    let (wo, ho) = if matches!(kind, 1 | 3 | 5 | 7) {
        (H, W)
    } else {
        (W, H)
    };
    let colours = if mode == ColorMode::Mono { 1 } else { 3 };
    let mut out = vec![T::default(); data.len()];
    for y in 0..H {
        for x in 0..W {
            let o = adcore_index(kind, x, y, W, H);
            let (xo, yo) = (o % wo, o / wo);
            for c in 0..colours {
                out[element(mode, xo, yo, c, wo, ho)] = data[element(mode, x, y, c, W, H)];
            }
        }
    }
    (out, wo, ho)
}

fn noise<T: Pixel>(n: usize, seed: u64) -> Vec<T> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let (lo, hi) = (T::MIN_F64.max(-1e6), T::MAX_F64.min(1e6));
    (0..n)
        .map(|_| T::from_f64(rng.random_range(lo..=hi)))
        .collect()
}

fn check_type<T: Pixel>() {
    for mode in [
        ColorMode::Mono,
        ColorMode::RGB1,
        ColorMode::RGB2,
        ColorMode::RGB3,
    ] {
        for (kind, name) in TRANSFORM_TYPES.iter().enumerate() {
            let h = PluginHarness::new(TransformPlugin::new());
            h.put("Type", kind as i64).unwrap();
            let dims = sizes(mode, W, H);
            let data = noise::<T>(dims.iter().product(), kind as u64);
            let mut f = NDArray::from_pixels(&h.pool, &dims, &data).unwrap();
            f.set_color_mode(mode);
            let out = h.process(f).unwrap();
            assert_eq!(out.len(), 1);
            let (want, wo, ho) = reference(kind, mode, &data);
            let ctx = format!("{} {mode:?} {name}", T::DATA_TYPE);
            assert_eq!(out[0].sizes(), sizes(mode, wo, ho), "{ctx}");
            assert_eq!(out[0].pixels::<T>().unwrap(), &want[..], "{ctx}");
            assert_eq!(out[0].color_mode(), mode, "{ctx}");
        }
    }
}

#[test]
fn eight_types_match_adcore_for_every_type_and_colour_mode() {
    for dt in DataType::ALL {
        with_pixel_type!(dt, T => check_type::<T>());
    }
}

#[test]
fn larger_than_a_tile_matches_the_mapping() {
    // 70x45 crosses the 32x32 tiles of the transposing kernel, with partial tiles.
    let (w, h) = (70, 45);
    for kind in 0..8usize {
        let hn = PluginHarness::new(TransformPlugin::new());
        hn.put("Type", kind as i64).unwrap();
        let data = noise::<u16>(w * h, 3);
        let out = hn
            .process(NDArray::from_pixels(&hn.pool, &[w, h], &data).unwrap())
            .unwrap();
        let px = out[0].pixels::<u16>().unwrap();
        for y in 0..h {
            for x in 0..w {
                assert_eq!(
                    px[adcore_index(kind, x, y, w, h)],
                    data[x + y * w],
                    "{kind}"
                );
            }
        }
    }
}

#[test]
fn dims_metadata_follow_the_transform() {
    let h = PluginHarness::new(TransformPlugin::new());
    let pool = Pool::unlimited();
    let mut f = NDArray::from_pixels(&pool, &[W, H], &[0u8; W * H]).unwrap();
    let dx = Dim {
        size: W,
        offset: 10,
        binning: 2,
        reverse: false,
    };
    let dy = Dim {
        size: H,
        offset: 20,
        binning: 4,
        reverse: true,
    };
    f.dims = vec![dx, dy];
    let f = Arc::new(f);
    let flip = |d: Dim| Dim {
        reverse: !d.reverse,
        ..d
    };
    let want = [
        [dx, dy],
        [flip(dy), dx],
        [flip(dx), flip(dy)],
        [dy, flip(dx)],
        [flip(dx), dy],
        [dy, dx],
        [dx, flip(dy)],
        [flip(dy), flip(dx)],
    ];
    for (kind, w) in want.iter().enumerate() {
        h.put("Type", kind as i64).unwrap();
        let out = h.process_arc(&f).unwrap();
        assert_eq!(out[0].dims, w.to_vec(), "{}", TRANSFORM_TYPES[kind]);
    }
}

#[test]
fn none_shares_the_pixels() {
    let h = PluginHarness::new(TransformPlugin::new());
    let f = Arc::new(NDArray::from_pixels(&h.pool, &[4, 3], &[1u16; 12]).unwrap());
    let out = h.process_arc(&f).unwrap();
    assert!(out[0].buffer.ptr_eq(&f.buffer));
}

#[test]
fn unsupported_inputs_are_errors_not_panics() {
    let h = PluginHarness::new(TransformPlugin::new());
    h.put("Type", 1).unwrap();
    let pool = Pool::unlimited();
    let mut bayer = NDArray::from_pixels(&pool, &[4, 4], &[0u8; 16]).unwrap();
    bayer.set_color_mode(ColorMode::Bayer);
    let one_d = NDArray::from_pixels(&pool, &[16], &[0u8; 16]).unwrap();
    let four_d = NDArray::from_pixels(&pool, &[2, 2, 2, 2], &[0u8; 16]).unwrap();
    let plain_3d = NDArray::from_pixels(&pool, &[4, 2, 2], &[0u8; 16]).unwrap();
    let mut compressed = NDArray::from_pixels(&pool, &[4, 4], &[0u8; 16]).unwrap();
    compressed.codec.name = "lz4".into();
    for f in [bayer, one_d, four_d, plain_3d, compressed] {
        let e = h.process(f).unwrap_err();
        assert!(
            matches!(e, ndflow_runtime::PluginError::Unsupported(_)),
            "{e}"
        );
    }
}

#[test]
fn every_template_record_is_served() {
    use ndflow_runtime::port_params::{ARRAY_BASE_PARAMS, PLUGIN_BASE_PARAMS};
    let tables = [ARRAY_BASE_PARAMS, PLUGIN_BASE_PARAMS, TRANSFORM_PARAMS];
    common::check_records("NDTransform", &tables, &[""], true);
}

/// Frames of `w`×`h` UInt16, Mono; every third one Bayer (unsupported by Transform).
struct Source {
    n: u16,
}

impl Driver for Source {
    fn driver_type(&self) -> &'static str {
        "testSource"
    }
    fn params(&self) -> &'static [ParamDef] {
        &[]
    }
    fn init(&mut self, _params: &ParamStore) -> Result<(), DriverError> {
        Ok(())
    }
    fn acquire(&mut self, _params: &ParamStore, pool: &Pool) -> Result<NDArray, DriverError> {
        self.n = self.n.wrapping_add(1);
        let mut f = NDArray::from_pixels(pool, &[6, 4], &[self.n; 24])?;
        if self.n.is_multiple_of(3) {
            f.set_color_mode(ColorMode::Bayer);
        }
        Ok(f)
    }
}

#[test]
fn pipeline_counts_every_frame() {
    let g = Graph::new(2);
    g.add_driver("DRV", Box::new(Source { n: 0 })).unwrap();
    g.add_plugin("TR", Arc::new(TransformPlugin::new()))
        .unwrap();
    g.put("TR", "NDArrayPort", "DRV").unwrap();
    g.put("TR", "QueueSize", 1000).unwrap();
    g.put("TR", "Type", 1).unwrap();
    g.put("DRV", "AcquireTime", 0.0).unwrap();
    g.put("DRV", "AcquirePeriod", 0.0).unwrap();
    g.put("DRV", "ImageMode", "Multiple").unwrap();
    g.put("DRV", "NumImages", 90).unwrap();
    g.put("DRV", "Acquire", 1).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert!(g.wait_idle(Duration::from_secs(30)));
    let a = g.plugin("TR").unwrap().accounting();
    assert!(a.is_conserved());
    assert_eq!(a.offered, 90);
    assert_eq!(a.processed, 60);
    // The Bayer frames are refused with PluginError::Unsupported; the runtime decides the
    // reason it is counted under.
    let refused = a.dropped(DropReason::Unsupported) + a.dropped(DropReason::Error);
    assert_eq!(refused, 30);
    g.shutdown();
}

/// RGB1 (a pixel's three values move as one element) and RGB3 frames bigger than the 8x8
/// blocks, with ragged edges, for every type.
#[test]
fn larger_rgb_frames_match_the_mapping() {
    fn check<T: Pixel>() {
        let (w, h) = (29, 19);
        for (mode, at) in [
            (
                ColorMode::RGB1,
                (|x, y, c, w, _h| c + 3 * (x + y * w))
                    as fn(usize, usize, usize, usize, usize) -> usize,
            ),
            (ColorMode::RGB3, |x, y, c, w, h| x + y * w + c * w * h),
        ] {
            let dims = match mode {
                ColorMode::RGB1 => vec![3, w, h],
                _ => vec![w, h, 3],
            };
            let data = noise::<T>(3 * w * h, 5);
            for kind in 0..8usize {
                let hn = PluginHarness::new(TransformPlugin::new());
                hn.put("Type", kind as i64).unwrap();
                let mut f = NDArray::from_pixels(&hn.pool, &dims, &data).unwrap();
                f.set_color_mode(mode);
                let out = hn.process(f).unwrap();
                let px = out[0].pixels::<T>().unwrap();
                let (wo, ho) = if matches!(kind, 1 | 3 | 5 | 7) {
                    (h, w)
                } else {
                    (w, h)
                };
                for y in 0..h {
                    for x in 0..w {
                        let o = adcore_index(kind, x, y, w, h);
                        for c in 0..3 {
                            let got = px[at(o % wo, o / wo, c, wo, ho)];
                            assert_eq!(got, data[at(x, y, c, w, h)], "{mode:?} {kind}");
                        }
                    }
                }
            }
        }
    }
    for dt in DataType::ALL {
        with_pixel_type!(dt, T => check::<T>());
    }
}
