//! NDPluginOverlay: each shape's pixels at known positions (ADCore's geometry), Set/XOR,
//! Mono and RGB1/2/3, every data type, text boxes of the four fonts, the position/centre
//! link, the records of NDOverlay + NDOverlayN, refusals and a pipeline's accounting.

use crate::common;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use ndflow_core::{
    with_pixel_type, ColorMode, DataType, NDArray, ParamDef, ParamStore, Pixel, Pool,
};
use ndflow_plugins::overlay::{OverlayPlugin, OVERLAY_PARAMS};
use ndflow_runtime::{Driver, DriverError, DropReason, Graph, PluginError, PluginHarness};
use rand::{Rng, SeedableRng};

const W: usize = 40;
const H: usize = 30;

type Harness = PluginHarness<OverlayPlugin>;

/// A harness with overlay 1 in use: `shape`, box at (px, py) of (sx, sy), widths (wx, wy).
fn one(shape: i64, xor: bool, pos: (i64, i64), size: (i64, i64), width: (i64, i64)) -> Harness {
    let h = PluginHarness::new(OverlayPlugin::new());
    let put = |n: &str, v: i64| h.put(&format!("1:{n}"), v).unwrap();
    put("Use", 1);
    put("Shape", shape);
    put("DrawMode", xor as i64);
    put("SizeX", size.0);
    put("SizeY", size.1);
    put("PositionX", pos.0);
    put("PositionY", pos.1);
    put("WidthX", width.0);
    put("WidthY", width.1);
    put("Red", 10);
    put("Green", 20);
    put("Blue", 30);
    h
}

/// The (x, y) pixels that differ from `base` in a Mono W×H u16 output.
fn drawn(h: &Harness) -> BTreeSet<(usize, usize)> {
    let f = NDArray::from_pixels(&h.pool, &[W, H], &vec![0u16; W * H]).unwrap();
    let out = h.process(f).unwrap();
    let px = out[0].pixels::<u16>().unwrap();
    (0..W * H)
        .filter(|&i| px[i] != 0)
        .map(|i| (i % W, i / W))
        .collect()
}

fn rect(x0: usize, x1: usize, y0: usize, y1: usize) -> BTreeSet<(usize, usize)> {
    (y0..=y1)
        .flat_map(|y| (x0..=x1).map(move |x| (x, y)))
        .collect()
}

#[test]
fn rectangle_outline_and_thick_edges() {
    // ADCore draws PositionX..=PositionX+SizeX.
    let got = drawn(&one(1, false, (2, 3), (5, 4), (1, 1)));
    let want: BTreeSet<_> = rect(2, 7, 3, 7)
        .difference(&rect(3, 6, 4, 6))
        .copied()
        .collect();
    assert_eq!(got, want);
    let thick = drawn(&one(1, false, (2, 3), (8, 8), (2, 3)));
    let want: BTreeSet<_> = rect(2, 10, 3, 11)
        .difference(&rect(4, 8, 6, 8))
        .copied()
        .collect();
    assert_eq!(thick, want);
}

#[test]
fn cross_bars_centred_in_the_box() {
    // Centre (7, 7); width 1 -> one-pixel bars from 4 to 10.
    let got = drawn(&one(0, false, (4, 4), (6, 6), (1, 1)));
    let want: BTreeSet<_> = rect(4, 10, 7, 7)
        .union(&rect(7, 7, 4, 10))
        .copied()
        .collect();
    assert_eq!(got, want);
    // WidthX 3 / WidthY 5: bars of half-widths 1 and 2.
    let got = drawn(&one(0, false, (10, 10), (10, 10), (3, 5)));
    let want: BTreeSet<_> = rect(10, 20, 13, 17)
        .union(&rect(14, 16, 10, 20))
        .copied()
        .collect();
    assert_eq!(got, want);
}

#[test]
fn ellipse_touches_its_axes_and_stays_on_the_curve() {
    let got = drawn(&one(2, false, (5, 5), (16, 10), (1, 1)));
    let (xc, yc, rx, ry) = (13.0, 10.0, 8.0, 5.0);
    for p in [(21, 10), (5, 10), (13, 15), (13, 5)] {
        assert!(got.contains(&p), "{p:?}");
    }
    for &(x, y) in &got {
        let (dx, dy) = ((x as f64 - xc) / rx, (y as f64 - yc) / ry);
        let r = (dx * dx + dy * dy).sqrt();
        assert!((r - 1.0).abs() < 0.25, "({x}, {y}) at r {r}");
    }
    // Symmetric about both axes.
    for &(x, y) in &got {
        assert!(got.contains(&(26 - x, y)) && got.contains(&(x, 20 - y)));
    }
}

#[test]
fn shapes_are_clipped_to_the_image() {
    for shape in 0..4 {
        let h = one(shape, false, (-5, -5), (30, 30), (2, 2));
        h.put("1:DisplayText", "clipped").unwrap();
        assert!(!drawn(&h).is_empty(), "shape {shape}");
    }
}

/// Text pixels lie in the font's cells: (len × cell width) × cell height from the position.
#[test]
fn text_fills_the_font_cells() {
    for (font, (cw, ch)) in [(6, 13), (6, 13), (9, 15), (9, 15)].into_iter().enumerate() {
        let h = one(3, false, (3, 2), (1000, 1000), (1, 1));
        h.put("1:Font", font as i64).unwrap();
        h.put("1:TimeStampFormat", "").unwrap();
        h.put("1:DisplayText", "AB").unwrap();
        let got = drawn(&h);
        assert!(got.len() > 10, "font {font}");
        let cells = rect(3, 3 + 2 * cw - 1, 2, 2 + ch - 1);
        assert!(got.is_subset(&cells), "font {font}: {got:?}");
        // Both characters have ink.
        assert!(got.iter().any(|p| p.0 < 3 + cw) && got.iter().any(|p| p.0 >= 3 + cw));
        // SizeX/SizeY clip the text box.
        h.put("1:SizeX", cw as i64).unwrap();
        h.put("1:SizeY", 5).unwrap();
        let clipped = drawn(&h);
        assert!(clipped.is_subset(&rect(3, 3 + cw - 1, 2, 6)), "font {font}");
        assert!(!clipped.is_empty());
    }
    // Bold differs from regular; the time stamp adds characters.
    let ink = |font: i64, fmt: &str| {
        let h = one(3, false, (0, 0), (1000, 1000), (1, 1));
        h.put("1:Font", font).unwrap();
        h.put("1:TimeStampFormat", fmt).unwrap();
        h.put("1:DisplayText", "Ab").unwrap();
        drawn(&h)
    };
    assert_ne!(ink(0, ""), ink(1, ""));
    assert!(ink(0, "%Y").iter().any(|p| p.0 >= 12));
}

fn noise<T: Pixel>(n: usize, seed: u64) -> Vec<T> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    // Whole numbers, so XOR through an integer is exact for floats too.
    let (lo, hi) = (T::MIN_F64.max(-1e6), T::MAX_F64.min(1e6));
    (0..n)
        .map(|_| T::from_f64(rng.random_range(lo..=hi).round()))
        .collect()
}

fn dims(mode: ColorMode) -> Vec<usize> {
    match mode {
        ColorMode::RGB1 => vec![3, W, H],
        ColorMode::RGB2 => vec![W, 3, H],
        ColorMode::RGB3 => vec![W, H, 3],
        _ => vec![W, H],
    }
}

/// Element of colour `c` at (x, y).
fn element(mode: ColorMode, x: usize, y: usize, c: usize) -> usize {
    match mode {
        ColorMode::RGB1 => c + 3 * (x + y * W),
        ColorMode::RGB2 => x + c * W + 3 * W * y,
        ColorMode::RGB3 => x + y * W + c * W * H,
        _ => x + y * W,
    }
}

const MODES: [ColorMode; 4] = [
    ColorMode::Mono,
    ColorMode::RGB1,
    ColorMode::RGB2,
    ColorMode::RGB3,
];

/// Every shape × Set/XOR × colour layout for one type: Set writes the colour at a known
/// pixel and leaves the rest alone; XOR twice gives the input back.
fn check_type<T: Pixel>() {
    for mode in MODES {
        for shape in 0..4 {
            for xor in [false, true] {
                let h = one(shape, xor, (4, 4), (12, 10), (1, 1));
                h.put("1:DisplayText", "Hi").unwrap();
                h.put("1:TimeStampFormat", "").unwrap();
                let data = noise::<T>(dims(mode).iter().product(), shape as u64);
                let mut f = NDArray::from_pixels(&h.pool, &dims(mode), &data).unwrap();
                f.set_color_mode(mode);
                let out = h.process(f).unwrap();
                let px = out[0].pixels::<T>().unwrap();
                let ctx = format!("{} {mode:?} shape {shape} xor {xor}", T::DATA_TYPE);
                assert_ne!(px, &data[..], "{ctx}: nothing drawn");
                assert_eq!(out[0].sizes(), dims(mode), "{ctx}");
                if !xor && shape != 3 {
                    // (4, 4) is on the rectangle; (10, 9) is the cross's and (16, 9) the
                    // ellipse's rightmost point.
                    let (x, y) = [(10, 9), (4, 4), (16, 9)][shape as usize];
                    let colours: &[(usize, f64)] = if mode == ColorMode::Mono {
                        &[(0, 20.0)]
                    } else {
                        &[(0, 10.0), (1, 20.0), (2, 30.0)]
                    };
                    for &(c, v) in colours {
                        assert_eq!(px[element(mode, x, y, c)].to_f64(), v, "{ctx}");
                    }
                    // Far from the shape: untouched.
                    let far = element(mode, W - 1, H - 1, 0);
                    assert_eq!(px[far], data[far], "{ctx}");
                }
                if xor {
                    let again = NDArray::from_pixels(&h.pool, &dims(mode), px).unwrap();
                    let mut again = again;
                    again.set_color_mode(mode);
                    let back = h.process(again).unwrap();
                    assert_eq!(back[0].pixels::<T>().unwrap(), &data[..], "{ctx}");
                }
            }
        }
    }
}

#[test]
fn every_shape_mode_layout_and_type() {
    for dt in DataType::ALL {
        with_pixel_type!(dt, T => check_type::<T>());
    }
}

#[test]
fn set_casts_like_c() {
    // 300 in a u8 wraps to 44 (C's int-to-uint8 conversion).
    let h = one(1, false, (0, 0), (3, 3), (1, 1));
    h.put("1:Green", 300).unwrap();
    let f = NDArray::from_pixels(&h.pool, &[8, 8], &[0u8; 64]).unwrap();
    assert_eq!(h.process(f).unwrap()[0].pixels::<u8>().unwrap()[0], 44);
}

#[test]
fn overlays_draw_in_order_and_unused_pass_the_frame() {
    let h = PluginHarness::new(OverlayPlugin::new());
    let f = Arc::new(NDArray::from_pixels(&h.pool, &[8, 8], &[5u16; 64]).unwrap());
    let out = h.process_arc(&f).unwrap();
    assert!(out[0].buffer.ptr_eq(&f.buffer));
    for (n, g) in [(1, 100), (8, 200)] {
        for (k, v) in [("Use", 1), ("SizeX", 3), ("SizeY", 3), ("Green", g)] {
            h.put(&format!("{n}:{k}"), v).unwrap();
        }
    }
    // Unpinned, SizeX 3 moved PositionX to CenterX - 1 = -1: the box is -1..=2.
    let out = h.process_arc(&f).unwrap();
    assert_eq!(out[0].pixels::<u16>().unwrap()[2 + 2 * 8], 200);
    assert_eq!(
        f.pixels::<u16>().unwrap()[2 + 2 * 8],
        5,
        "the input is not drawn on"
    );
    assert_eq!(h.get_f64("MaxSizeX"), 8.0);
    assert_eq!(h.get_f64("3:MaxSizeY"), 8.0);
}

#[test]
fn position_centre_and_size_are_linked() {
    let h = PluginHarness::new(OverlayPlugin::new());
    let get = |n: &str| h.get_f64(&format!("2:{n}")) as i64;
    h.put("2:SizeX", 10).unwrap();
    h.put("2:PositionX", 5).unwrap();
    assert_eq!(get("CenterX"), 10);
    // The position was written last: a new size moves the centre.
    h.put("2:SizeX", 20).unwrap();
    assert_eq!((get("PositionX"), get("CenterX")), (5, 15));
    // The centre was written last: a new size moves the position.
    h.put("2:CenterX", 50).unwrap();
    assert_eq!(get("PositionX"), 40);
    h.put("2:SizeX", 4).unwrap();
    assert_eq!((get("PositionX"), get("CenterX")), (48, 50));
    // Y through the Link records.
    h.put("2:SizeYLink", 6).unwrap();
    h.put("2:CenterYLink", 30).unwrap();
    assert_eq!(
        (get("SizeY"), get("CenterY"), get("PositionY")),
        (6, 30, 27)
    );
    h.put("2:PositionYLink", 0).unwrap();
    assert_eq!(get("CenterY"), 3);
    // Overlay 1 untouched.
    assert_eq!(h.get_f64("1:PositionX"), 0.0);
}

#[test]
fn unsupported_inputs_are_errors_not_panics() {
    let h = one(1, false, (0, 0), (2, 2), (1, 1));
    let pool = Pool::unlimited();
    let mut bayer = NDArray::from_pixels(&pool, &[4, 4], &[0u8; 16]).unwrap();
    bayer.set_color_mode(ColorMode::Bayer);
    let one_d = NDArray::from_pixels(&pool, &[16], &[0u8; 16]).unwrap();
    let plain_3d = NDArray::from_pixels(&pool, &[4, 2, 2], &[0u8; 16]).unwrap();
    let mut bad_rgb = NDArray::from_pixels(&pool, &[4, 2, 2], &[0u8; 16]).unwrap();
    bad_rgb.set_color_mode(ColorMode::RGB1);
    let mut compressed = NDArray::from_pixels(&pool, &[4, 4], &[0u8; 16]).unwrap();
    compressed.codec.name = "lz4".into();
    for f in [bayer, one_d, plain_3d, bad_rgb, compressed] {
        let e = h.process(f).unwrap_err();
        assert!(
            matches!(e, PluginError::Unsupported(ref m) if !m.is_empty()),
            "{e}"
        );
    }
}

/// Every record of NDOverlay (port) and NDOverlayN (under `1:` .. `8:`), menus in order.
#[test]
fn every_template_record_is_served() {
    use ndflow_runtime::port_params::{ARRAY_BASE_PARAMS, PLUGIN_BASE_PARAMS};
    let tables = [ARRAY_BASE_PARAMS, PLUGIN_BASE_PARAMS, OVERLAY_PARAMS];
    let overlays: Vec<String> = (1..=8).map(|n| format!("{n}:")).collect();
    let overlays: Vec<&str> = overlays.iter().map(String::as_str).collect();
    // The base tables hold one menu for a record pair whose _RBV strings differ in the
    // templates (Acquire_RBV: Acquiring); menus are checked for the overlay's own records.
    common::check_records("NDArrayBase", &tables, &[""], false);
    common::check_records("NDPluginBase", &tables, &[""], false);
    common::check_records("NDOverlay", &tables, &[""], true);
    common::check_records("NDOverlayN", &tables, &overlays, true);
}

/// UInt16 Mono frames; every third one Bayer (refused).
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
        let mut f = NDArray::from_pixels(pool, &[16, 12], &[self.n; 192])?;
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
    g.add_plugin("OV", Arc::new(OverlayPlugin::new())).unwrap();
    g.put("OV", "NDArrayPort", "DRV").unwrap();
    g.put("OV", "QueueSize", 1000).unwrap();
    g.put("OV", "1:Use", 1).unwrap();
    g.put("OV", "1:SizeX", 4).unwrap();
    g.put("OV", "1:SizeY", 4).unwrap();
    g.put("DRV", "AcquireTime", 0.0).unwrap();
    g.put("DRV", "AcquirePeriod", 0.0).unwrap();
    g.put("DRV", "ImageMode", "Multiple").unwrap();
    g.put("DRV", "NumImages", 90).unwrap();
    g.put("DRV", "Acquire", 1).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert!(g.wait_idle(Duration::from_secs(30)));
    let a = g.plugin("OV").unwrap().accounting();
    assert!(a.is_conserved());
    assert_eq!(a.offered, 90);
    assert_eq!(a.processed, 60);
    let refused = a.dropped(DropReason::Unsupported) + a.dropped(DropReason::Error);
    assert_eq!(refused, 30);
    g.shutdown();
}
