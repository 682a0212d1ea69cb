//! NDPluginBadPixel on known images: Set, Replace, Median (also at edges and corners),
//! through a binned ROI, 1-D, every data type, and bad files.

use crate::common;
use std::io::Write;
use std::sync::Arc;

use ndflow_core::{with_pixel_type, DataType, NDArray, Pixel};
use ndflow_plugins::bad_pixel::{BadPixelPlugin, BAD_PIXEL_PARAMS};
use ndflow_runtime::{PluginError, PluginHarness};

const W: usize = 10;
const H: usize = 8;

fn write_file(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("ndflow-badpixel-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::File::create(&path)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    path.to_string_lossy().into_owned()
}

const LIST: &str = r#"{ "Bad pixels": [
    {"Pixel": [2, 3], "Set": 99},
    {"Pixel": [5, 5], "Replace": [1, 0]},
    {"Pixel": [6, 5], "Replace": [0, 1]},
    {"Pixel": [4, 5], "Replace": [1, 0]},
    {"Pixel": [9, 1], "Replace": [1, 0]},
    {"Pixel": [0, 0], "Median": [1, 1]},
    {"Pixel": [9, 4], "Median": [1, 1]},
    {"Pixel": [3, 6], "Median": [2, 1]},
    {"Pixel": [4, 6], "Set": 7}
]}"#;

/// The image: value = 3x + 11y (+ 1) so that every pixel differs.
fn image<T: Pixel>() -> Vec<T> {
    (0..W * H)
        .map(|i| T::from_f64(((i % W) * 3 + (i / W) * 11 + 1) as f64))
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len().is_multiple_of(2) {
        (v[m - 1] + v[m]) / 2.0
    } else {
        v[m]
    }
}

/// The fixes of LIST worked out by hand (processing order is (y, x)).
fn expected<T: Pixel>() -> Vec<T> {
    let mut d = image::<T>();
    let v = |d: &[T], x: usize, y: usize| d[x + W * y].to_f64();
    // (0,0) corner median over (1,0), (0,1), (1,1).
    d[0] = T::from_f64(median(vec![v(&d, 1, 0), v(&d, 0, 1), v(&d, 1, 1)]));
    // (9,1): replacement (10,1) is outside: unchanged.
    d[2 + W * 3] = T::from_f64(99.0);
    // (9,4) right edge: 5 neighbours.
    let n = vec![
        v(&d, 8, 3),
        v(&d, 9, 3),
        v(&d, 8, 4),
        v(&d, 8, 5),
        v(&d, 9, 5),
    ];
    d[9 + W * 4] = T::from_f64(median(n));
    // (4,5) -> (5,5) is bad: skipped. (5,5) -> (6,5) is bad: skipped. (6,5) -> (6,6).
    d[6 + W * 5] = d[6 + W * 6];
    // (3,6) median over x 1..=5, y 5..=7 without itself and the bad (4,5), (5,5), (4,6).
    let mut n = Vec::new();
    for y in 5..=7 {
        for x in 1..=5 {
            if (x, y) != (3, 6) && ![(4, 5), (5, 5), (4, 6)].contains(&(x, y)) {
                n.push(v(&d, x, y));
            }
        }
    }
    d[3 + W * 6] = T::from_f64(median(n));
    d[4 + W * 6] = T::from_f64(7.0);
    d
}

fn harness(file: &str) -> PluginHarness<BadPixelPlugin> {
    let h = PluginHarness::new(BadPixelPlugin::new());
    h.put("FileName", file).unwrap();
    h
}

fn check_type<T: Pixel>(file: &str) {
    let h = harness(file);
    let f = NDArray::from_pixels(&h.pool, &[W, H], &image::<T>()).unwrap();
    let out = h.process(f).unwrap();
    assert_eq!(
        out[0].pixels::<T>().unwrap(),
        &expected::<T>()[..],
        "{}",
        T::DATA_TYPE
    );
}

#[test]
fn set_replace_median_on_a_known_image_for_every_type() {
    let file = write_file("list.json", LIST);
    for dt in DataType::ALL {
        with_pixel_type!(dt, T => check_type::<T>(&file));
    }
}

#[test]
fn follows_a_binned_roi_through_the_dims_metadata() {
    // Raw sensor 20x16; the frame is ROI min (2, 1), bin 2 -> 9x7 pixels.
    let file = write_file(
        "binned.json",
        r#"{"Bad pixels": [
            {"Pixel": [6, 5], "Set": 500},
            {"Pixel": [7, 6], "Set": 600},
            {"Pixel": [10, 9], "Replace": [1, 0]},
            {"Pixel": [1, 1], "Set": 1},
            {"Pixel": [0, 0], "Set": 2},
            {"Pixel": [19, 15], "Set": 3}
        ]}"#,
    );
    let h = harness(&file);
    let (w, hgt) = (9, 7);
    let data: Vec<u32> = (0..w * hgt).map(|i| i as u32).collect();
    let mut f = NDArray::from_pixels(&h.pool, &[w, hgt], &data).unwrap();
    f.dims[0].offset = 2;
    f.dims[0].binning = 2;
    f.dims[1].offset = 1;
    f.dims[1].binning = 2;
    let out = h.process(f).unwrap();
    let px = out[0].pixels::<u32>().unwrap();
    let mut want = data.clone();
    // (6,5) -> (2,2); (7,6) is in the same binned pixel, later in (y, x) order.
    want[2 + w * 2] = 600;
    // (10,9) -> (4,4), replaced by raw (12,9) -> (5,4).
    want[4 + w * 4] = data[5 + w * 4];
    // (1,1) and (0,0) are left of the ROI (floor division), (19,15) -> (8,7) is below it.
    assert_eq!(px, &want[..]);
}

#[test]
fn one_dimensional_frames() {
    let file = write_file(
        "line.json",
        r#"{"Bad pixels": [{"Pixel": [3, 0], "Set": 0}, {"Pixel": [5, 0], "Replace": [1, 0]},
            {"Pixel": [7, 0], "Median": [2, 0]}]}"#,
    );
    let h = harness(&file);
    let data: Vec<i16> = (0..10).map(|i| i * 10).collect();
    let out = h
        .process(NDArray::from_pixels(&h.pool, &[10], &data).unwrap())
        .unwrap();
    // x=7: median of 60, 80, 90 (x=5 is bad itself, so left out).
    assert_eq!(
        out[0].pixels::<i16>().unwrap(),
        &[0, 10, 20, 0, 40, 60, 60, 80, 80, 90]
    );
}

#[test]
fn no_file_passes_frames_unchanged() {
    let h = PluginHarness::new(BadPixelPlugin::new());
    let f = Arc::new(NDArray::from_pixels(&h.pool, &[4, 4], &[5u8; 16]).unwrap());
    assert!(h.process_arc(&f).unwrap()[0].buffer.ptr_eq(&f.buffer));
}

#[test]
fn bad_files_are_errors_naming_the_file() {
    let cases = [
        ("missing.json", None, "No such file"),
        ("garbage.json", Some("{not json"), "key must be a string"),
        (
            "nolist.json",
            Some(r#"{"Pixels": []}"#),
            "no \"Bad pixels\"",
        ),
        (
            "nofix.json",
            Some(r#"{"Bad pixels": [{"Pixel": [1, 2]}]}"#),
            "needs one of",
        ),
        (
            "badpair.json",
            Some(r#"{"Bad pixels": [{"Pixel": [1], "Set": 0}]}"#),
            "\"Pixel\" needs [x, y]",
        ),
        (
            "badset.json",
            Some(r#"{"Bad pixels": [{"Pixel": [1, 1], "Set": "x"}]}"#),
            "\"Set\" needs a number",
        ),
    ];
    for (name, text, msg) in cases {
        let path = match text {
            Some(t) => write_file(name, t),
            None => std::env::temp_dir()
                .join("ndflow-no-such-dir")
                .join(name)
                .to_string_lossy()
                .into_owned(),
        };
        let h = harness(&path);
        let e = h
            .process(NDArray::from_pixels(&h.pool, &[4, 4], &[0u8; 16]).unwrap())
            .unwrap_err();
        let PluginError::Other(text) = &e else {
            panic!("{e}")
        };
        assert!(text.contains(&path) && text.contains(msg), "{text}");
    }
    // Writing a good file name afterwards recovers.
    let good = write_file("good.json", LIST);
    let h = harness("/no/such/file.json");
    let f = Arc::new(NDArray::from_pixels(&h.pool, &[W, H], &image::<u8>()).unwrap());
    assert!(h.process_arc(&f).is_err());
    h.put("FileName", good.as_str()).unwrap();
    assert!(h.process_arc(&f).is_ok());
}

#[test]
fn colour_and_compressed_frames_are_unsupported() {
    let h = harness(&write_file("c.json", LIST));
    let rgb = NDArray::from_pixels(&h.pool, &[3, 4, 4], &[0u8; 48]).unwrap();
    let mut comp = NDArray::from_pixels(&h.pool, &[4, 4], &[0u8; 16]).unwrap();
    comp.codec.name = "lz4".into();
    for f in [rgb, comp] {
        assert!(matches!(h.process(f), Err(PluginError::Unsupported(_))));
    }
}

#[test]
fn every_template_record_is_served() {
    use ndflow_runtime::port_params::{ARRAY_BASE_PARAMS, PLUGIN_BASE_PARAMS};
    let tables = [ARRAY_BASE_PARAMS, PLUGIN_BASE_PARAMS, BAD_PIXEL_PARAMS];
    common::check_records("NDBadPixel", &tables, &[""], true);
}
