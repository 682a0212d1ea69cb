//! NDFileTIFF ReadFile: a written file comes back as the same frame (pixels, shape, type,
//! colour mode, uniqueId, time stamps, attributes as text), and a missing or foreign file is
//! reported in WriteStatus/WriteMessage without a frame.

mod common;

use common::{frame, pattern, rgb, with_attrs, TempDir};
use ndflow_core::{with_pixel_type, AttrValue, ColorMode, DataType, NDArray, ParamValue, Pixel};
use ndflow_io::TiffFilePlugin;
use ndflow_runtime::{Plugin, PluginHarness};

/// What the plugin sends downstream after the last put.
fn taken(h: &PluginHarness<TiffFilePlugin>) -> Vec<std::sync::Arc<NDArray>> {
    let mut out = Vec::new();
    h.plugin.emit_after_put(&mut |f| out.push(f));
    out
}

fn harness(dir: &TempDir) -> PluginHarness<TiffFilePlugin> {
    let h = PluginHarness::new(TiffFilePlugin::new());
    h.put("FilePath", dir.path().to_string_lossy().as_ref())
        .unwrap();
    h.put("FileName", "rb").unwrap();
    h.put("AutoIncrement", "No").unwrap();
    h.put("FileWriteMode", "Single").unwrap();
    h.put("AutoSave", "Yes").unwrap();
    h
}

/// Writes `f` through the plugin, reads it back with ReadFile and returns the frame emitted.
fn round_trip(h: &PluginHarness<TiffFilePlugin>, f: NDArray) -> NDArray {
    h.process(f).unwrap();
    assert_eq!(
        h.get("WriteStatus"),
        ParamValue::Int(0),
        "{:?}",
        h.get("WriteMessage")
    );
    assert!(taken(h).is_empty(), "nothing before ReadFile");
    h.put("ReadFile", 1).unwrap();
    assert_eq!(h.get("ReadFile"), ParamValue::Int(0), "back to Done");
    let mut out = taken(h);
    assert_eq!(out.len(), 1, "{:?}", h.get("WriteMessage"));
    NDArray::clone(&out.remove(0))
}

fn check<T: Pixel>(h: &PluginHarness<TiffFilePlugin>) {
    let (w, hh) = (7usize, 5usize);
    let mono = with_attrs(frame(&[w, hh], &pattern::<T>(w * hh), 42));
    let back = round_trip(h, mono.clone());
    assert_eq!(back.sizes(), vec![w, hh]);
    assert_eq!(back.data_type, T::DATA_TYPE);
    assert_eq!(back.data_bytes(), mono.data_bytes(), "{:?}", T::DATA_TYPE);
    assert_eq!((back.unique_id, back.time_stamp), (42, mono.time_stamp));
    assert_eq!(back.epics_ts, mono.epics_ts);
    let text = |n: &str| back.attribute(n).map(|a| a.value.clone());
    assert_eq!(text("Gain"), Some(AttrValue::String("2.500000".into())));
    assert_eq!(text("Count"), Some(AttrValue::String("-7".into())));
    assert_eq!(text("Label"), Some(AttrValue::String("hello".into())));

    let data = pattern::<T>(w * hh * 3);
    let colour = rgb(frame(&[3, w, hh], &data, 7), ColorMode::RGB1);
    let back = round_trip(h, colour.clone());
    assert_eq!(back.sizes(), vec![3, w, hh]);
    assert_eq!(back.color_mode(), ColorMode::RGB1);
    assert_eq!(
        back.data_bytes(),
        colour.data_bytes(),
        "{:?} RGB1",
        T::DATA_TYPE
    );
}

#[test]
fn every_type_mono_and_rgb_reads_back_as_written() {
    let dir = TempDir::new("readfile");
    let h = harness(&dir);
    for dt in DataType::ALL {
        with_pixel_type!(dt, T => check::<T>(&h));
    }
}

#[test]
fn missing_and_foreign_files_set_write_status() {
    let dir = TempDir::new("readfile-bad");
    let h = harness(&dir);
    h.put("FileNumber", 99).unwrap();
    h.put("ReadFile", 1).unwrap();
    assert_eq!(h.get("ReadFile"), ParamValue::Int(0));
    assert_eq!(h.get("WriteStatus"), ParamValue::Int(1));
    let msg = h.get("WriteMessage").to_string();
    assert!(msg.contains("rb_099.tif"), "{msg}");
    assert!(taken(&h).is_empty());
    // A file that is not a TIFF.
    std::fs::write(dir.path().join("rb_099.tif"), b"not a tiff at all").unwrap();
    h.put("ReadFile", 1).unwrap();
    assert_eq!(h.get("WriteStatus"), ParamValue::Int(1));
    assert!(taken(&h).is_empty());
    // A good file afterwards clears the status.
    h.put("FileNumber", 1).unwrap();
    let back = round_trip(&h, frame(&[4, 3], &[5u16; 12], 3));
    assert_eq!(
        back.data_bytes(),
        frame(&[4, 3], &[5u16; 12], 3).data_bytes()
    );
    assert_eq!(h.get("WriteStatus"), ParamValue::Int(0));
}
