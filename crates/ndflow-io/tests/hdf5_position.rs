//! Position mode (PositionMode = On): each frame is written at the indices held by the
//! NDAttributes named PosNameDim* (as the Pos plugin attaches them); a frame without them
//! is not written (WriteStatus, WriteMessage, FramesNotWritten) and the file closes as in
//! ADCore.

use crate::common::{frame, hdf5_harness, read_all, shape, TempDir};
use ndflow_core::{AttrValue, NDAttribute, ParamValue};

const DATA: &str = "/entry/instrument/detector/data";

fn at(u: i32, x: i32, n: i32) -> ndflow_core::NDArray {
    let data: Vec<u16> = (0..6).map(|i| (i + 100 * u) as u16).collect();
    let mut f = frame(&[3, 2], &data, u);
    f.set_attribute(NDAttribute::new("x_idx", "", AttrValue::Int32(x)));
    f.set_attribute(NDAttribute::new("n_idx", "", AttrValue::Int32(n)));
    f
}

fn harness(dir: &TempDir) -> ndflow_runtime::PluginHarness<ndflow_io::Hdf5FilePlugin> {
    let h = hdf5_harness(dir, "pos");
    h.put("PositionMode", "On").unwrap();
    h.put("NumExtraDims", 1).unwrap();
    h.put("ExtraDimSizeN", 2).unwrap();
    h.put("ExtraDimSizeX", 3).unwrap();
    h.put("PosNameDimN", "n_idx").unwrap();
    h.put("PosNameDimX", "x_idx").unwrap();
    h.put("PosIndexDimX", "x_idx").unwrap();
    h.put("DimAttDatasets", "Yes").unwrap();
    h.put("NumCapture", 0).unwrap();
    h
}

#[test]
fn frames_land_at_their_positions() {
    let dir = TempDir::new("h5-pos");
    let h = harness(&dir);
    h.put("Capture", 1).unwrap();
    // Out of order, leaving (0, 1) and (1, *) unwritten.
    for f in [at(1, 2, 1), at(2, 0, 0), at(3, 2, 0)] {
        h.process(f).unwrap();
    }
    h.put("Capture", 0).unwrap();
    assert_eq!(h.get_f64("WriteStatus"), 0.0, "{:?}", h.get("WriteMessage"));
    let path = dir.path().join("pos_0.h5");
    assert_eq!(
        shape(&path, DATA),
        [3, 2, 2, 3],
        "grown to the largest index"
    );
    let data: Vec<u16> = read_all(&path, DATA);
    let first = |x: usize, n: usize| data[(x * 2 + n) * 6];
    assert_eq!(first(2, 1), 100);
    assert_eq!(first(0, 0), 200);
    assert_eq!(first(2, 0), 300);
    assert_eq!(first(0, 1), 0, "fill value");
    let ids: Vec<i32> = read_all(&path, "/entry/instrument/NDAttributes/NDArrayUniqueId");
    assert_eq!(
        ids,
        [2, 0, 0, 0, 3, 1],
        "DimAttDatasets: ids at the frames' places"
    );
    assert_eq!(
        shape(&path, "/entry/instrument/NDAttributes/x_idx"),
        [3],
        "PosIndexDim attributes stay 1-D"
    );
}

#[test]
fn frames_without_positions_are_not_written() {
    let dir = TempDir::new("h5-pos-missing");
    let h = harness(&dir);
    h.put("Capture", 1).unwrap();
    h.process(at(1, 0, 0)).unwrap();
    let mut bare = at(2, 0, 1);
    bare.attributes.retain(|a| a.name != "n_idx");
    assert!(h.process(bare).is_err());
    assert_eq!(h.get_f64("WriteStatus"), 1.0);
    assert_eq!(h.get_f64("FramesNotWritten"), 1.0);
    let ParamValue::Str(msg) = h.get("WriteMessage") else {
        panic!("WriteMessage")
    };
    assert!(msg.contains("no attribute 'n_idx'"), "{msg}");
    assert!(
        h.process(at(3, 5, 0)).is_err(),
        "stream stopped as in ADCore"
    );
    h.put("Capture", 0).unwrap();
    let path = dir.path().join("pos_0.h5");
    assert_eq!(shape(&path, DATA), [1, 1, 2, 3], "the frame before stays");
    // An index outside the axis is refused too.
    let h = harness(&dir);
    h.put("Capture", 1).unwrap();
    let err = h.process(at(1, 3, 0));
    assert!(err.is_err());
    let ParamValue::Str(msg) = h.get("WriteMessage") else {
        panic!("WriteMessage")
    };
    assert!(msg.contains("outside 0..3"), "{msg}");
    h.put("Capture", 0).unwrap();
}
