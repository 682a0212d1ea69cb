//! SimDetector against plain reference implementations of simDetector's formulas.

use ndflow_core::{
    with_pixel_type, ColorMode, DataType, NDArray, ParamStore, ParamValue, Pixel, Pool,
};
use ndflow_runtime::port_params::{ARRAY_BASE_PARAMS, DRIVER_PARAMS};
use ndflow_runtime::Driver;
use ndflow_sim::{SimDetector, SIM_PARAMS};

struct Sim {
    det: SimDetector,
    store: ParamStore,
    pool: Pool,
}

impl Sim {
    fn new(mx: usize, my: usize) -> Sim {
        let store = ParamStore::new(&[ARRAY_BASE_PARAMS, DRIVER_PARAMS, SIM_PARAMS]);
        let mut det = SimDetector::new(mx, my);
        det.init(&store).unwrap();
        Sim {
            det,
            store,
            pool: Pool::unlimited(),
        }
    }
    fn put(&self, name: &str, v: impl Into<ParamValue>) -> &Sim {
        self.store.put(name, v.into()).unwrap();
        self
    }
    /// An internal write that skips validation (what a bad config or a bug could leave).
    fn force(&self, name: &str, v: impl Into<ParamValue>) {
        self.store.set_by_name(name, v).unwrap();
    }
    fn get(&self, name: &str) -> ParamValue {
        self.store.get_by_name(name).unwrap()
    }
    fn frame(&mut self) -> NDArray {
        self.det.acquire(&self.store, &self.pool).unwrap()
    }
}

fn values(f: &NDArray) -> Vec<f64> {
    with_pixel_type!(f.data_type, T => f.pixels::<T>().unwrap().iter().map(|v| v.to_f64()).collect())
}

/// What a C cast of `v` to `dt` gives on x86: integers keep the low bits.
fn wrap(dt: DataType, v: f64) -> f64 {
    match dt {
        DataType::Float32 => v as f32 as f64,
        DataType::Float64 => v,
        _ => {
            let m = 1i128 << (dt.size() * 8);
            let t = (v.trunc() as i128).rem_euclid(m);
            let signed = matches!(
                dt,
                DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64
            );
            (if signed && t >= m / 2 { t - m } else { t }) as f64
        }
    }
}

/// Pixel (x, y, c) of a frame through its own layout description.
fn at(f: &NDArray, v: &[f64], x: usize, y: usize, c: usize) -> f64 {
    let i = f.info();
    v[x * i.x_stride + y * i.y_stride + c * i.color_stride]
}

const COLOR_MODES: [ColorMode; 4] = [
    ColorMode::Mono,
    ColorMode::RGB1,
    ColorMode::RGB2,
    ColorMode::RGB3,
];

#[test]
fn init_sets_identity_and_sizes() {
    let s = Sim::new(640, 480);
    assert_eq!(
        s.get("Manufacturer"),
        ParamValue::Str("Simulated detector".into())
    );
    assert_eq!(s.get("Model"), ParamValue::Str("Basic simulator".into()));
    for (name, v) in [
        ("MaxSizeX", 640),
        ("MaxSizeY", 480),
        ("SizeX", 640),
        ("SizeY", 480),
        ("ArraySizeX", 640),
    ] {
        assert_eq!(s.get(name), ParamValue::Int(v), "{name}");
    }
    let j = s.store.to_json();
    assert_eq!(j["SimMode_RBV"], "LinearRamp");
    assert_eq!(j["XSineOperation"], "Add");
    assert_eq!(j["PeakWidthY_RBV"], 20);
}

#[test]
fn linear_ramp_uint8_wraps_and_moves() {
    let mut s = Sim::new(300, 200);
    let f1 = s.frame();
    assert_eq!(f1.sizes(), vec![300, 200]);
    assert_eq!(f1.data_type, DataType::UInt8);
    let p1 = f1.pixels::<u8>().unwrap();
    let f2 = s.frame();
    let p2 = f2.pixels::<u8>().unwrap();
    for y in 0..200 {
        for x in 0..300 {
            assert_eq!(p1[y * 300 + x], ((x + y) % 256) as u8);
            assert_eq!(p2[y * 300 + x], ((x + y + 1) % 256) as u8);
        }
    }
    assert_eq!(s.det.frames_since_reset(), 2);
}

#[test]
fn linear_ramp_gains_exact() {
    let mut s = Sim::new(50, 40);
    s.put("Gain", 3.0)
        .put("GainX", 2.0)
        .put("GainY", 0.5)
        .put("DataType", "UInt16");
    for k in 0..3 {
        let f = s.frame();
        let p = f.pixels::<u16>().unwrap();
        for y in 0..40 {
            for x in 0..50 {
                let base = (3.0 * (2.0 * x as f64 + 0.5 * y as f64)) as u16;
                assert_eq!(p[y * 50 + x], base + 3 * k, "({x},{y}) frame {k}");
            }
        }
    }
}

#[test]
fn linear_ramp_all_types() {
    for dt in DataType::ALL {
        let mut s = Sim::new(90, 70);
        s.put("DataType", dt.name())
            .put("Gain", 2.0)
            .put("GainX", 1.0)
            .put("GainY", 1.0);
        for k in 0..3 {
            let f = s.frame();
            assert_eq!(f.data_type, dt);
            let v = values(&f);
            for y in 0..70 {
                for x in 0..90 {
                    let base = wrap(dt, 2.0 * (x + y) as f64);
                    let want = wrap(dt, base + 2.0 * k as f64);
                    assert_eq!(v[y * 90 + x], want, "{dt} ({x},{y}) frame {k}");
                }
            }
        }
    }
}

#[test]
fn rgb_layouts_and_colour_gains() {
    for mode in [ColorMode::RGB1, ColorMode::RGB2, ColorMode::RGB3] {
        let mut s = Sim::new(20, 10);
        s.put("ColorMode", mode.name()).put("DataType", "UInt16");
        s.put("GainRed", 1.0)
            .put("GainGreen", 2.0)
            .put("GainBlue", 3.0);
        let f1 = s.frame();
        let want_sizes = match mode {
            ColorMode::RGB1 => vec![3, 20, 10],
            ColorMode::RGB2 => vec![20, 3, 10],
            _ => vec![20, 10, 3],
        };
        assert_eq!(f1.sizes(), want_sizes, "{mode:?}");
        assert_eq!(f1.color_mode(), mode);
        let f2 = s.frame();
        let (v1, v2) = (values(&f1), values(&f2));
        for y in 0..10 {
            for x in 0..20 {
                for c in 0..3 {
                    let g = (c + 1) as f64;
                    assert_eq!(at(&f1, &v1, x, y, c), g * (x + y) as f64, "{mode:?}");
                    assert_eq!(at(&f2, &v2, x, y, c), g * (x + y) as f64 + g, "{mode:?}");
                }
            }
        }
    }
}

/// (min, size, bin, reverse) per axis.
type RegionCase = ([usize; 2], [usize; 2], [usize; 2], [bool; 2]);

/// Reference readout: region, binning (sum, wrapped to the type), reverse after binning.
#[allow(clippy::too_many_arguments)]
fn reference_region(
    full: &NDArray,
    fv: &[f64],
    min: [usize; 2],
    size: [usize; 2],
    bin: [usize; 2],
    rev: [bool; 2],
    ox: usize,
    oy: usize,
    c: usize,
) -> f64 {
    let (nx, ny) = (size[0] / bin[0], size[1] / bin[1]);
    let bx = if rev[0] { nx - 1 - ox } else { ox };
    let by = if rev[1] { ny - 1 - oy } else { oy };
    let mut sum = 0.0;
    for y in 0..bin[1] {
        for x in 0..bin[0] {
            sum += at(
                full,
                fv,
                min[0] + bx * bin[0] + x,
                min[1] + by * bin[1] + y,
                c,
            );
        }
    }
    wrap(full.data_type, sum)
}

#[test]
fn region_binning_reverse_match_reference() {
    let cases: [RegionCase; 6] = [
        ([0, 0], [37, 23], [1, 1], [false, false]),
        ([5, 3], [20, 11], [1, 1], [false, false]),
        ([5, 3], [20, 11], [1, 1], [true, false]),
        ([2, 1], [33, 21], [3, 2], [false, true]),
        ([0, 0], [37, 23], [4, 5], [true, true]),
        ([36, 22], [1, 1], [1, 1], [false, false]),
    ];
    let types = [
        DataType::UInt8,
        DataType::Int16,
        DataType::UInt32,
        DataType::Float32,
        DataType::Float64,
    ];
    for mode in COLOR_MODES {
        for dt in types {
            for (min, size, bin, rev) in cases {
                let setup = |s: &Sim| {
                    s.put("ColorMode", mode.name()).put("DataType", dt.name());
                    s.put("Gain", 5.0)
                        .put("GainX", 3.0)
                        .put("GainY", 7.0)
                        .put("GainGreen", 2.0);
                };
                let mut full = Sim::new(37, 23);
                setup(&full);
                let mut roi = Sim::new(37, 23);
                setup(&roi);
                roi.put("MinX", min[0] as i32).put("MinY", min[1] as i32);
                roi.put("SizeX", size[0] as i32)
                    .put("SizeY", size[1] as i32);
                roi.put("BinX", bin[0] as i32).put("BinY", bin[1] as i32);
                roi.put("ReverseX", rev[0] as i32)
                    .put("ReverseY", rev[1] as i32);
                for _ in 0..2 {
                    let (f, r) = (full.frame(), roi.frame());
                    let (fv, rv) = (values(&f), values(&r));
                    let i = r.info();
                    assert_eq!((i.x_size, i.y_size), (size[0] / bin[0], size[1] / bin[1]));
                    let (xd, yd) = (i.x_dim, i.y_dim);
                    assert_eq!(r.dims[xd].offset, min[0]);
                    assert_eq!(r.dims[yd].offset, min[1]);
                    assert_eq!((r.dims[xd].binning, r.dims[yd].binning), (bin[0], bin[1]));
                    assert_eq!((r.dims[xd].reverse, r.dims[yd].reverse), (rev[0], rev[1]));
                    for oy in 0..i.y_size {
                        for ox in 0..i.x_size {
                            for c in 0..i.color_size {
                                let want =
                                    reference_region(&f, &fv, min, size, bin, rev, ox, oy, c);
                                assert_eq!(
                                    at(&r, &rv, ox, oy, c),
                                    want,
                                    "{mode:?} {dt} {min:?} {size:?} {bin:?} {rev:?} ({ox},{oy},{c})"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn bad_region_is_clamped_and_written_back() {
    let mut s = Sim::new(100, 80);
    s.force("MinX", -5);
    s.force("MinY", 500);
    s.force("SizeX", 1000);
    s.force("SizeY", 0);
    s.force("BinX", 0);
    s.force("BinY", 4);
    s.force("ColorMode", ColorMode::Bayer as i64);
    let f = s.frame();
    assert_eq!(s.get("MinX"), ParamValue::Int(0));
    assert_eq!(s.get("MinY"), ParamValue::Int(79));
    assert_eq!(s.get("SizeX"), ParamValue::Int(100));
    assert_eq!(s.get("SizeY"), ParamValue::Int(1));
    assert_eq!(s.get("BinX"), ParamValue::Int(1));
    assert_eq!(s.get("BinY"), ParamValue::Int(1));
    assert_eq!(s.get("ColorMode"), ParamValue::Int(0));
    assert_eq!(f.sizes(), vec![100, 1]);
    assert_eq!(f.dims[1].offset, 79);
    assert_eq!(f.pixels::<u8>().unwrap()[10], 10 + 79);
    // A region that runs past the sensor is cut at its edge.
    s.put("MinY", 70).put("SizeY", 80);
    let f = s.frame();
    assert_eq!(s.get("SizeY"), ParamValue::Int(10));
    assert_eq!(f.sizes(), vec![100, 10]);
}

#[test]
fn peaks_centre_shape_and_grid() {
    let mut s = Sim::new(120, 100);
    s.put("SimMode", "Peaks")
        .put("DataType", "UInt16")
        .put("Gain", 1000.0);
    s.put("PeakStartX", 30)
        .put("PeakStartY", 40)
        .put("PeakWidthX", 3)
        .put("PeakWidthY", 4);
    let f = s.frame();
    let p = f.pixels::<u16>().unwrap();
    let px = |x: usize, y: usize| p[y * 120 + x];
    assert_eq!(px(30, 40), 1000);
    let g = |d: f64, w: f64| (-(d / w).powi(2) / 2.0).exp();
    assert_eq!(px(31, 40), (1000.0 * g(1.0, 3.0)) as u16);
    assert_eq!(px(30, 42), (1000.0 * g(2.0, 4.0)) as u16);
    assert_eq!(px(33, 36), (1000.0 * g(3.0, 3.0) * g(4.0, 4.0)) as u16);
    // Drawn over ±4σ only, zero elsewhere (Offset and Noise are 0).
    assert_eq!(px(30 + 13, 40), 0);
    assert_eq!(px(0, 0), 0);
    assert_eq!(px(119, 99), 0);
    let max = p.iter().copied().max().unwrap();
    assert_eq!(max, 1000);

    s.put("PeakNumX", 2)
        .put("PeakNumY", 2)
        .put("PeakStepX", 50)
        .put("PeakStepY", 30);
    let f = s.frame();
    let p = f.pixels::<u16>().unwrap();
    for (x, y) in [(30, 40), (80, 40), (30, 70), (80, 70)] {
        assert_eq!(p[y * 120 + x], 1000, "peak at ({x},{y})");
    }
    assert_eq!(p[55 * 120 + 55], 0);
}

#[test]
fn peaks_rgb_colour_gains_and_variation() {
    let mut s = Sim::new(64, 64);
    s.put("SimMode", "Peaks")
        .put("ColorMode", "RGB2")
        .put("DataType", "Float64")
        .put("Gain", 100.0);
    s.put("PeakStartX", 20)
        .put("PeakStartY", 30)
        .put("GainRed", 1.0)
        .put("GainGreen", 0.5)
        .put("GainBlue", 2.0);
    let f = s.frame();
    let v = values(&f);
    assert_eq!(at(&f, &v, 20, 30, 0), 100.0);
    assert_eq!(at(&f, &v, 20, 30, 1), 50.0);
    assert_eq!(at(&f, &v, 20, 30, 2), 200.0);
    // PeakVariation 20%: each frame's height lies in 100·[0.9, 1.1] and changes.
    s.put("PeakVariation", 20.0).put("ColorMode", "Mono");
    let heights: Vec<f64> = (0..8)
        .map(|_| {
            let f = s.frame();
            values(&f)[30 * 64 + 20]
        })
        .collect();
    assert!(
        heights.iter().all(|h| (90.0..=110.0).contains(h)),
        "{heights:?}"
    );
    assert!(heights.windows(2).any(|w| w[0] != w[1]));
}

fn sine(amp: f64, freq: f64, phase: f64, t: f64) -> f64 {
    amp * ((t * freq + phase / 360.0) * 2.0 * std::f64::consts::PI).sin()
}

#[test]
fn sine_add_and_multiply_mono() {
    let (nx, ny) = (64usize, 32usize);
    for multiply in [false, true] {
        let mut s = Sim::new(nx, ny);
        s.put("SimMode", "Sine")
            .put("DataType", "Float64")
            .put("Gain", 2.0);
        s.put("XSine2Amplitude", 0.5)
            .put("YSine1Frequency", 3.0)
            .put("YSine2Phase", 45.0);
        let op = if multiply { "Multiply" } else { "Add" };
        s.put("XSineOperation", op).put("YSineOperation", op);
        s.put("XSine1Frequency", 0.5); // non-integer: drifts from frame to frame
        for frame in 0..2u64 {
            let f = s.frame();
            let v = values(&f);
            for (x, y) in [(0, 0), (5, 7), (31, 16), (63, 31)] {
                let tx = (frame * nx as u64 + x as u64) as f64 / nx as f64;
                let ty = (frame * ny as u64 + y as u64) as f64 / ny as f64;
                let (x1, x2) = (sine(1.0, 0.5, 0.0, tx), sine(0.5, 2.0, 90.0, tx));
                let (y1, y2) = (sine(1.0, 3.0, 0.0, ty), sine(1.0, 2.0, 45.0, ty));
                let (xv, yv) = if multiply {
                    (x1 * x2, y1 * y2)
                } else {
                    (x1 + x2, y1 + y2)
                };
                let want = 2.0 * (yv + xv);
                assert!(
                    (v[y * nx + x] - want).abs() < 1e-9,
                    "{op} frame {frame} ({x},{y})"
                );
            }
        }
    }
}

#[test]
fn sine_rgb_channels() {
    let (nx, ny) = (40usize, 30usize);
    let mut s = Sim::new(nx, ny);
    s.put("SimMode", "Sine")
        .put("ColorMode", "RGB3")
        .put("DataType", "Float32")
        .put("Gain", 10.0);
    s.put("GainRed", 1.0)
        .put("GainGreen", 2.0)
        .put("GainBlue", 3.0);
    let f = s.frame();
    let v = values(&f);
    for (x, y) in [(0, 0), (7, 3), (39, 29)] {
        let tx = x as f64 / nx as f64;
        let ty = y as f64 / ny as f64;
        let red = 10.0 * sine(1.0, 1.0, 0.0, tx);
        let green = 10.0 * 2.0 * sine(1.0, 1.0, 0.0, ty);
        let blue = 10.0 * 3.0 * (sine(1.0, 2.0, 90.0, tx) + sine(1.0, 2.0, 90.0, ty)) / 2.0;
        for (c, want) in [red, green, blue].into_iter().enumerate() {
            assert!(
                (at(&f, &v, x, y, c) - want as f32 as f64).abs() < 1e-4,
                "c{c} ({x},{y})"
            );
        }
    }
}

#[test]
fn sine_integer_type_wraps_negative_values() {
    let mut s = Sim::new(16, 16);
    s.put("SimMode", "Sine")
        .put("DataType", "UInt8")
        .put("Gain", 20.0);
    let f = s.frame();
    let p = f.pixels::<u8>().unwrap();
    for (x, y) in [(0usize, 0usize), (4, 0), (12, 12)] {
        let (tx, ty) = (x as f64 / 16.0, y as f64 / 16.0);
        let xv = sine(1.0, 1.0, 0.0, tx) + sine(1.0, 2.0, 90.0, tx);
        let yv = sine(1.0, 1.0, 0.0, ty) + sine(1.0, 2.0, 90.0, ty);
        assert_eq!(
            p[y * 16 + x] as f64,
            wrap(DataType::UInt8, 20.0 * (yv + xv))
        );
    }
}

#[test]
fn offset_and_noise_bounds_all_types() {
    for dt in DataType::ALL {
        let mut s = Sim::new(64, 48);
        s.put("SimMode", "Offset&Noise").put("DataType", dt.name());
        s.put("Offset", 20.0).put("Noise", 50.0);
        let frames: Vec<Vec<f64>> = (0..3).map(|_| values(&s.frame())).collect();
        for v in &frames {
            assert!(v.iter().all(|&p| (20.0..=70.0).contains(&p)), "{dt}");
            // Noise, not a constant.
            assert!(v.iter().any(|&p| p != v[0]), "{dt}");
        }
        // The same noise frame, copied from a different start.
        let mut a = frames[0].clone();
        let mut b = frames[1].clone();
        a.sort_by(f64::total_cmp);
        b.sort_by(f64::total_cmp);
        assert_eq!(a, b, "{dt}");
        assert_ne!(frames[0], frames[1], "{dt}");
    }
    // Offset only: a flat frame.
    let mut s = Sim::new(10, 10);
    s.put("SimMode", "Offset&Noise").put("Offset", 7.0);
    assert!(s.frame().pixels::<u8>().unwrap().iter().all(|&p| p == 7));
    // Neither: zeros.
    s.put("Offset", 0.0);
    assert!(s.frame().pixels::<u8>().unwrap().iter().all(|&p| p == 0));
}

#[test]
fn ramp_on_offset_background() {
    let mut s = Sim::new(30, 20);
    s.put("Offset", 100.0);
    for k in 0..2 {
        let f = s.frame();
        let p = f.pixels::<u8>().unwrap();
        for y in 0..20 {
            for x in 0..30 {
                assert_eq!(p[y * 30 + x] as usize, (x + y + k + 100) % 256);
            }
        }
    }
}

#[test]
fn reset_restarts_and_settings_changes_reset() {
    let mut s = Sim::new(20, 10);
    let first = values(&s.frame());
    let _ = s.frame();
    let third = values(&s.frame());
    assert_eq!(third[0], first[0] + 2.0);
    s.put("Reset", 1);
    assert_eq!(values(&s.frame()), first);
    assert_eq!(s.get("Reset"), ParamValue::Int(0));
    assert_eq!(s.det.frames_since_reset(), 1);
    // A gain change recomputes the base image and restarts the ramp.
    let _ = s.frame();
    s.put("GainX", 2.0);
    let f = s.frame();
    assert_eq!(f.pixels::<u8>().unwrap()[5], 10);
    assert_eq!(s.det.frames_since_reset(), 1);
    // A region change does not.
    s.put("MinX", 1);
    let f = s.frame();
    assert_eq!(f.pixels::<u8>().unwrap()[0], 2 + 1);
    assert_eq!(s.det.frames_since_reset(), 2);
}

#[test]
fn data_type_and_colour_mode_changes_take_effect() {
    let mut s = Sim::new(8, 4);
    assert_eq!(s.frame().data_type, DataType::UInt8);
    s.put("DataType", "Int32").put("ColorMode", "RGB1");
    let f = s.frame();
    assert_eq!(f.data_type, DataType::Int32);
    assert_eq!(f.sizes(), vec![3, 8, 4]);
    assert_eq!(f.info().color_mode, ColorMode::RGB1);
    assert_eq!(f.total_bytes(), 3 * 8 * 4 * 4);
}

#[test]
fn steady_state_reuses_one_pool_buffer() {
    for region in [false, true] {
        let mut s = Sim::new(64, 32);
        if region {
            s.put("MinX", 3).put("BinY", 2);
        }
        for _ in 0..20 {
            drop(s.frame());
        }
        let st = s.pool.stats();
        assert_eq!(
            (st.alloc_buffers, st.free_buffers),
            (1, 1),
            "region {region}"
        );
    }
}
