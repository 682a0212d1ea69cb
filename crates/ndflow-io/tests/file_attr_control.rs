//! File control by frame attributes (NDPluginFile's FilePluginDestination, FilePluginFileName,
//! FilePluginFileNumber, FilePluginClose) through the TIFF and HDF5 writers.

use std::path::Path;

use crate::common;
use crate::common::{mono8, shape, TempDir};
use ndflow_core::{AttrValue, NDArray, NDAttribute, ParamValue};
use ndflow_io::hdf5::{ATTR_GROUP, DATA_PATH};
use ndflow_io::{Hdf5FilePlugin, TiffFilePlugin};
use ndflow_runtime::{Plugin, PluginError, PluginHarness};

fn with(mut f: NDArray, attrs: &[(&str, AttrValue)]) -> NDArray {
    for (name, v) in attrs {
        f.set_attribute(NDAttribute::new(*name, "", v.clone()));
    }
    f
}

fn s(v: &str) -> AttrValue {
    AttrValue::String(v.into())
}

fn text<P: Plugin>(h: &PluginHarness<P>, name: &str) -> String {
    match h.get(name) {
        ParamValue::Str(s) => s,
        other => other.to_string(),
    }
}

/// A TIFF writer named `port` (as the runtime names it), Single mode, AutoSave.
fn tiff(dir: &TempDir, port: &str) -> PluginHarness<TiffFilePlugin> {
    let h = PluginHarness::new(TiffFilePlugin::new());
    h.params.set_by_name("PortName", port).unwrap();
    h.put("FilePath", dir.path().to_string_lossy().as_ref())
        .unwrap();
    h.put("FileName", "img").unwrap();
    h.put("FileTemplate", "%s%s_%3.3d.tif").unwrap();
    h.put("FileNumber", 1).unwrap();
    h.put("AutoIncrement", "Yes").unwrap();
    h.put("AutoSave", "Yes").unwrap();
    h
}

/// An HDF5 writer named "HDF1", Stream mode, LazyOpen, until Capture = 0.
fn hdf5(dir: &TempDir) -> PluginHarness<Hdf5FilePlugin> {
    let h = common::hdf5_harness(dir, "h");
    h.params.set_by_name("PortName", "HDF1").unwrap();
    h.put("FileTemplate", "%s%s_%3.3d.h5").unwrap();
    h.put("FileNumber", 1).unwrap();
    h
}

fn frames_in(path: &Path) -> usize {
    shape(path, DATA_PATH)[0]
}

fn unique_ids(path: &Path) -> Vec<i32> {
    common::read_all::<i32>(path, &format!("{ATTR_GROUP}/NDArrayUniqueId"))
}

#[test]
fn destination_all_own_name_or_another_writer() {
    let dir = TempDir::new("attr-dest");
    let h = tiff(&dir, "TIF1");
    const D: &str = "FilePluginDestination";
    h.process(with(mono8(1), &[(D, s("all"))])).unwrap();
    h.process(with(mono8(2), &[(D, s("tif1"))])).unwrap();
    h.process(mono8(3)).unwrap();
    // Another writer's frame: refused as unsupported input (the port counts it as dropped
    // with that reason), no file, no number used, no write error.
    let e = h.process(with(mono8(4), &[(D, s("HDF1"))])).unwrap_err();
    assert!(
        matches!(&e, PluginError::Unsupported(m) if m.contains("HDF1")),
        "{e:?}"
    );
    assert_eq!(dir.files(), ["img_001.tif", "img_002.tif", "img_003.tif"]);
    assert_eq!(h.get_f64("FileNumber"), 4.0);
    assert_eq!(h.get_f64("WriteStatus"), 0.0);
    assert_eq!(h.get_f64("FramesNotWritten"), 0.0);
    // WriteFile writes the last frame that was for this writer (uniqueId 3), not frame 4.
    h.put("WriteFile", 1).unwrap();
    let last = tiff_unique_id(&dir.path().join("img_004.tif"));
    assert_eq!(last, 3);

    // A destination that is not a string is reported, not a panic; the frame is not written.
    let e = h
        .process(with(mono8(5), &[(D, AttrValue::Int32(1))]))
        .unwrap_err();
    assert!(matches!(e, PluginError::Other(_)), "{e:?}");
    assert_eq!(h.get_f64("WriteStatus"), 1.0);
    assert!(text(&h, "WriteMessage").contains("FilePluginDestination must be a string"));
    assert_eq!(h.get_f64("FramesNotWritten"), 1.0);
    assert_eq!(dir.files().len(), 4);
}

/// The uniqueId a TIFF file carries (the writer's NDArrayUniqueId tag, read back by ReadFile).
fn tiff_unique_id(path: &Path) -> i32 {
    let h = PluginHarness::new(TiffFilePlugin::new());
    let dir = path.parent().unwrap().to_string_lossy().into_owned();
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    h.put("FilePath", dir.as_str()).unwrap();
    h.put("FileName", name.as_str()).unwrap();
    h.put("FileTemplate", "%s%s").unwrap();
    let out = h.put_emitted("ReadFile", 1).unwrap();
    assert_eq!(out.len(), 1, "{}", text(&h, "WriteMessage"));
    out[0].unique_id
}

#[test]
fn tiff_file_name_and_number_from_attributes() {
    let dir = TempDir::new("attr-tiff");
    let h = tiff(&dir, "TIF1");
    const N: &str = "FilePluginFileName";
    const K: &str = "FilePluginFileNumber";
    h.process(with(mono8(1), &[(N, s("alpha"))])).unwrap();
    assert_eq!(text(&h, "FileName"), "alpha", "FileName_RBV shows it");
    h.process(with(mono8(2), &[(N, s("beta")), (K, AttrValue::Int32(40))]))
        .unwrap();
    assert_eq!(
        h.get_f64("FileNumber"),
        41.0,
        "AutoIncrement after the open"
    );
    // No attributes: the current FileName/FileNumber.
    h.process(mono8(3)).unwrap();
    // A DOUBLE number with no fraction is an integer.
    h.process(with(mono8(4), &[(K, AttrValue::Float64(7.0))]))
        .unwrap();
    assert_eq!(
        dir.files(),
        [
            "alpha_001.tif",
            "beta_007.tif",
            "beta_040.tif",
            "beta_041.tif"
        ]
    );
    assert_eq!(tiff_unique_id(&dir.path().join("beta_040.tif")), 2);
    assert!(text(&h, "FullFileName").ends_with("beta_007.tif"));

    // Wrong types are this frame's failure, reported and counted.
    let e = h.process(with(mono8(5), &[(K, s("8"))])).unwrap_err();
    assert!(
        e.to_string()
            .contains("FilePluginFileNumber must be an integer"),
        "{e}"
    );
    assert_eq!(h.get_f64("FramesNotWritten"), 1.0);
    let e = h
        .process(with(mono8(6), &[(N, AttrValue::Float64(1.0))]))
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("FilePluginFileName must be a string"),
        "{e}"
    );
    assert_eq!(h.get_f64("FramesNotWritten"), 2.0);
    assert_eq!(dir.files().len(), 4);
    // FilePluginClose means nothing more to a single-frame format.
    h.process(with(mono8(7), &[("FilePluginClose", AttrValue::Int32(1))]))
        .unwrap();
    assert_eq!(h.get_f64("WriteStatus"), 0.0);
    assert_eq!(dir.files().len(), 5);
}

#[test]
fn hdf5_stream_opens_a_new_file_when_the_frames_name_one() {
    let dir = TempDir::new("attr-h5-name");
    let h = hdf5(&dir);
    const N: &str = "FilePluginFileName";
    const K: &str = "FilePluginFileNumber";
    h.put("Capture", 1).unwrap();
    for u in 1..=2 {
        h.process(with(mono8(u), &[(N, s("scanA"))])).unwrap();
    }
    // Without attributes the frame goes on into the open file.
    h.process(mono8(3)).unwrap();
    for u in 4..=6 {
        h.process(with(mono8(u), &[(N, s("scanB"))])).unwrap();
    }
    // A new number alone opens a new file too; the same number again keeps it.
    for u in 7..=8 {
        h.process(with(
            mono8(u),
            &[(N, s("scanB")), (K, AttrValue::Int32(20))],
        ))
        .unwrap();
    }
    h.put("Capture", 0).unwrap();
    assert_eq!(
        h.get_f64("WriteStatus"),
        0.0,
        "{}",
        text(&h, "WriteMessage")
    );
    assert_eq!(
        dir.files(),
        ["scanA_001.h5", "scanB_002.h5", "scanB_020.h5"]
    );
    let p = |n: &str| dir.path().join(n);
    assert_eq!(unique_ids(&p("scanA_001.h5")), [1, 2, 3]);
    assert_eq!(unique_ids(&p("scanB_002.h5")), [4, 5, 6]);
    assert_eq!(unique_ids(&p("scanB_020.h5")), [7, 8]);
    assert_eq!(frames_in(&p("scanB_020.h5")), 2);
    assert_eq!(h.get_f64("NumCaptured"), 8.0);
    assert_eq!(text(&h, "FileName"), "scanB");
    assert_eq!(h.get_f64("FileNumber"), 21.0);
    assert_eq!(h.get_f64("FramesNotWritten"), 0.0);
}

#[test]
fn hdf5_stream_split_by_file_plugin_close() {
    let dir = TempDir::new("attr-h5-close");
    let h = hdf5(&dir);
    // As NDPluginFile: FilePluginClose closes the file and ends the capture (Capture = 0); the
    // next Capture = 1 opens the next file.
    for (run, frames) in [(1, 1..=3), (2, 4..=5)] {
        h.put("Capture", 1).unwrap();
        for u in frames.clone() {
            let close = AttrValue::UInt8(u8::from(u == *frames.end()));
            h.process(with(mono8(u), &[("FilePluginClose", close)]))
                .unwrap();
        }
        assert_eq!(h.get_f64("Capture"), 0.0, "run {run}: closed, capture over");
        assert_eq!(
            h.get_f64("NumCaptured"),
            frames.clone().count() as f64,
            "run {run}"
        );
    }
    assert_eq!(
        h.get_f64("WriteStatus"),
        0.0,
        "{}",
        text(&h, "WriteMessage")
    );
    assert_eq!(dir.files(), ["h_001.h5", "h_002.h5"]);
    let p = |n: &str| dir.path().join(n);
    assert_eq!(unique_ids(&p("h_001.h5")), [1, 2, 3]);
    assert_eq!(unique_ids(&p("h_002.h5")), [4, 5]);

    // A wrong type loses that frame only: the file stays open for the next.
    h.put("NumCapture", 0).unwrap();
    h.put("Capture", 1).unwrap();
    h.process(mono8(10)).unwrap();
    let e = h
        .process(with(mono8(11), &[("FilePluginClose", s("now"))]))
        .unwrap_err();
    assert!(
        e.to_string().contains("FilePluginClose must be a number"),
        "{e}"
    );
    h.process(mono8(12)).unwrap();
    h.put("Capture", 0).unwrap();
    assert_eq!(h.get_f64("FramesNotWritten"), 1.0);
    assert_eq!(unique_ids(&p("h_003.h5")), [10, 12]);
}

#[test]
fn hdf5_capture_mode_splits_the_buffer_too() {
    let dir = TempDir::new("attr-h5-capture");
    let h = hdf5(&dir);
    h.put("FileWriteMode", "Capture").unwrap();
    h.put("AutoSave", "Yes").unwrap();
    h.put("NumCapture", 4).unwrap();
    h.put("Capture", 1).unwrap();
    h.process(with(mono8(1), &[("FilePluginFileName", s("c"))]))
        .unwrap();
    h.process(with(mono8(2), &[("FilePluginClose", AttrValue::Int32(1))]))
        .unwrap();
    h.process(mono8(3)).unwrap();
    let out = h.process(mono8(4)).unwrap();
    assert_eq!(out.len(), 4, "all written, passed downstream");
    assert_eq!(dir.files(), ["c_001.h5", "c_002.h5"]);
    assert_eq!(unique_ids(&dir.path().join("c_001.h5")), [1, 2]);
    assert_eq!(unique_ids(&dir.path().join("c_002.h5")), [3, 4]);
}

#[test]
fn hdf5_stream_without_lazy_open_waits_for_a_named_first_frame() {
    let dir = TempDir::new("attr-h5-eager");
    let h = hdf5(&dir);
    h.put("LazyOpen", "No").unwrap();
    // Seen before the stream (not written): it names files, so Capture = 1 opens nothing.
    h.process(with(mono8(1), &[("FilePluginFileName", s("early"))]))
        .unwrap();
    h.put("Capture", 1).unwrap();
    assert_eq!(h.get_f64("Capture"), 1.0);
    assert!(dir.files().is_empty());
    h.process(with(mono8(2), &[("FilePluginFileName", s("run"))]))
        .unwrap();
    h.put("Capture", 0).unwrap();
    assert_eq!(dir.files(), ["run_001.h5"]);
    // A last frame without them: the file opens at Capture = 1, as before.
    h.process(mono8(3)).unwrap();
    h.put("Capture", 1).unwrap();
    assert_eq!(dir.files(), ["run_001.h5", "run_002.h5"]);
    h.put("Capture", 0).unwrap();
}
