//! Extra dimensions (NumExtraDims, ExtraDimSize*): the detector dataset is
//! `[…, X, N, y, x]` filled N fastest (ADCore configureDims / extendDataSet), NumCapture
//! follows the product, and DimAttDatasets gives NDAttribute datasets the same axes.

use crate::common::{frame, hdf5_harness, hdf5_stream, read_all, shape, TempDir};
use ndflow_core::{AttrValue, NDAttribute};

const DATA: &str = "/entry/instrument/detector/data";
const ATTRS: &str = "/entry/instrument/NDAttributes";

fn frames(n: i32) -> Vec<ndflow_core::NDArray> {
    (1..=n)
        .map(|u| {
            let data: Vec<u16> = (0..12).map(|i| (i + 100 * u) as u16).collect();
            let mut f = frame(&[4, 3], &data, u);
            f.set_attribute(NDAttribute::new("Gain", "", AttrValue::Float64(u as f64)));
            f
        })
        .collect()
}

#[test]
fn two_by_three_frames() {
    let dir = TempDir::new("h5-extra");
    let h = hdf5_harness(&dir, "extra");
    h.put("NumExtraDims", 1).unwrap();
    h.put("ExtraDimSizeN", 2).unwrap();
    h.put("ExtraDimSizeX", 3).unwrap();
    assert_eq!(h.get_f64("NumCapture"), 6.0, "calcNumFrames");
    assert_eq!(h.get_f64("ExtraDimSizeN"), 2.0);
    h.put("DimAttDatasets", "Yes").unwrap();
    let path = hdf5_stream(&h, frames(6));
    assert_eq!(shape(&path, DATA), [3, 2, 3, 4], "(X, N, y, x)");
    let data: Vec<u16> = read_all(&path, DATA);
    for u in 1..=6usize {
        // Frame u (1-based) at X = (u-1) / 2, N = (u-1) % 2: row-major order = write order.
        let at = (u - 1) * 12;
        assert_eq!(data[at], (100 * u) as u16, "frame {u}");
    }
    assert_eq!(shape(&path, &format!("{ATTRS}/Gain")), [3, 2]);
    assert_eq!(
        read_all::<f64>(&path, &format!("{ATTRS}/Gain")),
        [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );
    assert_eq!(shape(&path, &format!("{ATTRS}/NDArrayUniqueId")), [3, 2]);
}

#[test]
fn partial_fill_and_names() {
    let dir = TempDir::new("h5-extra2");
    let h = hdf5_harness(&dir, "extra");
    assert_eq!(
        h.get("ExtraDimNameX"),
        ndflow_core::ParamValue::Str("scan dimension 1".into())
    );
    h.put("NumExtraDims", 2).unwrap();
    h.put("ExtraDimSizeN", 2).unwrap();
    h.put("ExtraDimSizeX", 2).unwrap();
    h.put("ExtraDimSizeY", 2).unwrap();
    assert_eq!(h.get_f64("NumCapture"), 8.0);
    h.put("NumCapture", 0).unwrap();
    h.put("Capture", 1).unwrap();
    for f in frames(3) {
        h.process(f).unwrap();
    }
    h.put("Capture", 0).unwrap();
    let path = dir.path().join("extra_0.h5");
    // Three frames: N full, X grown to 2, Y to 1.
    assert_eq!(shape(&path, DATA), [1, 2, 2, 3, 4]);
    assert_eq!(
        shape(&path, &format!("{ATTRS}/Gain")),
        [3],
        "DimAttDatasets = No"
    );
    // A fourth frame past the capacity is refused, not wrapped.
    let h = hdf5_harness(&dir, "full");
    h.put("NumExtraDims", 1).unwrap();
    h.put("ExtraDimSizeX", 1).unwrap();
    h.put("ExtraDimSizeN", 2).unwrap();
    h.put("NumCapture", 0).unwrap();
    h.put("Capture", 1).unwrap();
    let mut fs = frames(3).into_iter();
    for f in fs.by_ref().take(2) {
        h.process(f).unwrap();
    }
    assert!(h.process(fs.next().unwrap()).is_err());
    assert_eq!(h.get_f64("WriteStatus"), 1.0);
    h.put("Capture", 0).unwrap();
    assert_eq!(shape(&dir.path().join("full_0.h5"), DATA), [1, 2, 3, 4]);
}
