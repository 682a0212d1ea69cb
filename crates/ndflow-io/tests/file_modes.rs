//! NDFile behaviour: Single/Capture/Stream counts, names, auto-increment, TempSuffix,
//! WriteFile, FreeCapture, I/O errors.

use std::sync::Arc;

use crate::common::{mono8, TempDir};
use ndflow_io::{JpegFilePlugin, TiffFilePlugin};
use ndflow_runtime::{Plugin, PluginHarness};

fn harness(dir: &TempDir) -> PluginHarness<TiffFilePlugin> {
    let h = PluginHarness::new(TiffFilePlugin::new());
    h.put("FilePath", dir.path().to_string_lossy().as_ref())
        .unwrap();
    h.put("FileName", "img").unwrap();
    h.put("AutoIncrement", "Yes").unwrap();
    h
}

fn s(h: &PluginHarness<TiffFilePlugin>, name: &str) -> String {
    match h.get(name) {
        ndflow_core::ParamValue::Str(s) => s,
        other => other.to_string(),
    }
}

#[test]
fn plugin_identity() {
    let p = TiffFilePlugin::new();
    assert_eq!(p.plugin_type(), "NDFileTIFF");
    assert_eq!(p.max_threads(), 1);
    assert_eq!(JpegFilePlugin::new().plugin_type(), "NDFileJPEG");
    let h = PluginHarness::new(TiffFilePlugin::new());
    assert_eq!(s(&h, "FileTemplate"), "%s%s_%3.3d.tif");
    assert!(h.put("FullFileName", "x").is_err(), "read-only");
}

#[test]
fn file_path_gets_slash_and_exists_flag() {
    let dir = TempDir::new("path");
    let h = harness(&dir);
    assert_eq!(s(&h, "FilePath"), dir.file_path());
    assert_eq!(h.get_f64("FilePathExists"), 1.0);
    h.put("FilePath", "/nonexistent/ndflow/x").unwrap();
    assert_eq!(h.get_f64("FilePathExists"), 0.0);
    let sub = dir.path().join("made");
    h.put("CreateDirectory", -1).unwrap();
    h.put("FilePath", sub.to_string_lossy().as_ref()).unwrap();
    assert_eq!(h.get_f64("FilePathExists"), 1.0);
    assert!(sub.is_dir());
}

#[test]
fn single_mode_autosave_writes_each_frame_and_increments() {
    let dir = TempDir::new("single");
    let h = harness(&dir);
    h.put("FileNumber", 7).unwrap();
    // AutoSave = No: nothing written.
    h.process(mono8(1)).unwrap();
    assert!(dir.files().is_empty());
    h.put("AutoSave", "Yes").unwrap();
    for uid in 2..5 {
        let out = h.process(mono8(uid)).unwrap();
        assert_eq!(out.len(), 1, "written frames pass downstream");
        assert_eq!(out[0].unique_id, uid);
    }
    assert_eq!(dir.files(), ["img_007.tif", "img_008.tif", "img_009.tif"]);
    assert_eq!(h.get_f64("FileNumber"), 10.0);
    assert_eq!(
        s(&h, "FullFileName"),
        format!("{}img_009.tif", dir.file_path())
    );
    assert_eq!(h.get_f64("WriteStatus"), 0.0);
    // Without AutoIncrement the same name is overwritten.
    h.put("AutoIncrement", "No").unwrap();
    h.process(mono8(5)).unwrap();
    h.process(mono8(6)).unwrap();
    assert_eq!(dir.files().len(), 4);
    assert_eq!(h.get_f64("FileNumber"), 10.0);
}

#[test]
fn single_mode_write_file_writes_latest() {
    let dir = TempDir::new("writefile");
    let h = harness(&dir);
    h.put("WriteFile", 1).unwrap();
    assert_eq!(h.get_f64("WriteStatus"), 1.0, "no frame yet");
    h.process(mono8(1)).unwrap();
    h.process(mono8(2)).unwrap();
    h.put("WriteFile", "Write").unwrap();
    assert_eq!(h.get_f64("WriteFile"), 0.0);
    assert_eq!(dir.files(), ["img_000.tif"]);
    let mut d =
        tiff::decoder::Decoder::new(std::fs::File::open(dir.path().join("img_000.tif")).unwrap())
            .unwrap();
    assert_eq!(d.get_tag_u32(tiff::tags::Tag::Unknown(65001)).unwrap(), 2);
}

#[test]
fn capture_holds_frames_then_writes_all() {
    let dir = TempDir::new("capture");
    let h = harness(&dir);
    h.put("FileWriteMode", "Capture").unwrap();
    h.put("NumCapture", 3).unwrap();
    h.put("AutoSave", "Yes").unwrap();
    h.process(mono8(0)).unwrap(); // not capturing: ignored
    h.put("Capture", 1).unwrap();
    let frames: Vec<_> = (1..=2).map(|u| Arc::new(mono8(u))).collect();
    for f in &frames {
        h.process_arc(f).unwrap();
    }
    assert_eq!(h.get_f64("NumCaptured"), 2.0);
    assert!(dir.files().is_empty());
    // Held, not copied.
    assert_eq!(Arc::strong_count(&frames[0]), 2);
    let out = h.process(mono8(3)).unwrap();
    assert_eq!(out.len(), 3, "written frames pass downstream");
    assert_eq!(h.get_f64("Capture"), 0.0);
    assert_eq!(h.get_f64("NumCaptured"), 0.0);
    drop(out);
    assert_eq!(dir.files(), ["img_000.tif", "img_001.tif", "img_002.tif"]);
    assert_eq!(
        Arc::strong_count(&frames[0]),
        1,
        "buffer released after writing"
    );
    h.process(mono8(4)).unwrap();
    assert_eq!(dir.files().len(), 3, "capture over");
}

#[test]
fn capture_stop_keeps_buffer_for_write_file() {
    let dir = TempDir::new("capture2");
    let h = harness(&dir);
    h.put("FileWriteMode", "Capture").unwrap();
    h.put("NumCapture", 10).unwrap();
    h.put("AutoSave", "Yes").unwrap();
    h.put("Capture", 1).unwrap();
    h.process(mono8(1)).unwrap();
    h.process(mono8(2)).unwrap();
    // Stopping early writes nothing (areaDetector); WriteFile writes what was held.
    h.put("Capture", 0).unwrap();
    assert!(dir.files().is_empty());
    assert_eq!(h.get_f64("NumCaptured"), 2.0);
    h.process(mono8(3)).unwrap();
    h.put("WriteFile", 1).unwrap();
    assert_eq!(dir.files().len(), 2);
    assert_eq!(h.get_f64("NumCaptured"), 0.0, "buffer freed after writing");
    // Nothing left: WriteFile is an error.
    h.put("WriteFile", 1).unwrap();
    assert_eq!(h.get_f64("WriteStatus"), 1.0);
    assert!(s(&h, "WriteMessage").contains("no capture buffer"));

    // AutoSave = No: a full buffer stays until WriteFile.
    h.put("AutoSave", "No").unwrap();
    h.put("NumCapture", 2).unwrap();
    h.put("Capture", 1).unwrap();
    h.process(mono8(4)).unwrap();
    let out = h.process(mono8(5)).unwrap();
    assert!(out.is_empty());
    assert_eq!(h.get_f64("Capture"), 0.0);
    assert_eq!(dir.files().len(), 2);
    h.put("WriteFile", 1).unwrap();
    assert_eq!(dir.files().len(), 4);
    assert_eq!(h.get_f64("WriteStatus"), 0.0);

    // FreeCapture discards.
    h.put("Capture", 1).unwrap();
    h.process(mono8(6)).unwrap();
    h.put("FreeCapture", 1).unwrap();
    assert_eq!(h.get_f64("NumCaptured"), 0.0);
    h.put("Capture", 0).unwrap();
    h.put("WriteFile", 1).unwrap();
    assert_eq!(dir.files().len(), 4);
}

#[test]
fn stream_writes_each_frame_until_num_capture() {
    let dir = TempDir::new("stream");
    let h = harness(&dir);
    h.put("FileWriteMode", "Stream").unwrap();
    h.put("NumCapture", 3).unwrap();
    h.put("Capture", 1).unwrap();
    for u in 0..5 {
        h.process(mono8(u)).unwrap();
    }
    assert_eq!(dir.files(), ["img_000.tif", "img_001.tif", "img_002.tif"]);
    assert_eq!(h.get_f64("NumCaptured"), 3.0);
    assert_eq!(h.get_f64("Capture"), 0.0);
    // NumCapture = 0: until stopped.
    h.put("NumCapture", 0).unwrap();
    h.put("Capture", 1).unwrap();
    for u in 0..4 {
        h.process(mono8(u)).unwrap();
    }
    h.put("Capture", 0).unwrap();
    h.process(mono8(9)).unwrap();
    assert_eq!(dir.files().len(), 7);
}

#[test]
fn capture_in_single_mode_is_refused() {
    let dir = TempDir::new("single-capture");
    let h = harness(&dir);
    h.put("Capture", 1).unwrap();
    assert_eq!(h.get_f64("Capture"), 0.0);
    assert_eq!(h.get_f64("WriteStatus"), 1.0);
}

#[test]
fn temp_suffix_renames_on_close() {
    let dir = TempDir::new("temp");
    let h = harness(&dir);
    h.put("TempSuffix", ".tmp").unwrap();
    h.put("AutoSave", "Yes").unwrap();
    h.process(mono8(1)).unwrap();
    assert_eq!(dir.files(), ["img_000.tif"]);
}

#[test]
fn create_directory_on_write() {
    let dir = TempDir::new("mkdir-write");
    let h = harness(&dir);
    h.put("AutoSave", "Yes").unwrap();
    h.put(
        "FilePath",
        dir.path().join("a/b").to_string_lossy().as_ref(),
    )
    .unwrap();
    assert!(
        h.process(mono8(1)).is_err(),
        "CreateDirectory = 0: missing dir is an error"
    );
    h.put("CreateDirectory", -2).unwrap();
    h.process(mono8(2)).unwrap();
    // The failed attempt consumed number 000, as in areaDetector.
    assert!(dir.path().join("a/b/img_001.tif").is_file());
}

#[test]
fn io_error_is_reported_counted_and_recovers() {
    let dir = TempDir::new("ioerr");
    let h = harness(&dir);
    // A directory under a regular file: ENOTDIR even as root.
    let blocker = dir.path().join("plain");
    std::fs::write(&blocker, b"x").unwrap();
    h.put("FilePath", blocker.join("sub").to_string_lossy().as_ref())
        .unwrap();
    h.put("AutoSave", "Yes").unwrap();
    for u in 0..2 {
        let e = h.process(mono8(u)).unwrap_err().to_string();
        let name = format!("plain/sub/img_00{u}.tif");
        assert!(e.contains("NDFileTIFF") && e.contains(&name), "{e}");
    }
    assert_eq!(h.get_f64("WriteStatus"), 1.0);
    assert_eq!(h.get_f64("FramesNotWritten"), 2.0);
    let msg = s(&h, "WriteMessage");
    assert!(
        msg.contains("plain/sub/img_001.tif") && msg.contains("ot a directory"),
        "{msg}"
    );
    assert_eq!(
        h.get_f64("FileNumber"),
        2.0,
        "numbers consumed at name creation"
    );
    // CreateDirectory cannot help either, and says so.
    h.put("CreateDirectory", -5).unwrap();
    assert!(h.process(mono8(3)).is_err());
    // Back to a good path: recovers.
    h.put("FilePath", dir.path().to_string_lossy().as_ref())
        .unwrap();
    h.process(mono8(4)).unwrap();
    assert_eq!(h.get_f64("WriteStatus"), 0.0);
    assert_eq!(s(&h, "WriteMessage"), "");
    assert_eq!(h.get_f64("FramesNotWritten"), 3.0);
}

#[test]
fn bad_template_is_a_write_error() {
    let dir = TempDir::new("badtemplate");
    let h = harness(&dir);
    h.put("FileTemplate", "%s%s_%f.tif").unwrap();
    h.put("AutoSave", "Yes").unwrap();
    assert!(h.process(mono8(1)).is_err());
    assert!(s(&h, "WriteMessage").contains("%f"));
    assert!(dir.files().is_empty());
}

/// Disk full: RLIMIT_FSIZE would kill the test process with SIGXFSZ, and a tmpfs needs
/// root and mount; /dev/full gives ENOSPC on write where it exists.
#[test]
fn disk_full_via_dev_full() {
    if !std::path::Path::new("/dev/full").exists() {
        return;
    }
    let h = PluginHarness::new(TiffFilePlugin::new());
    h.put("FilePath", "/dev/").unwrap();
    h.put("FileName", "full").unwrap();
    h.put("FileTemplate", "%s%s").unwrap();
    h.put("AutoSave", "Yes").unwrap();
    let e = h.process(mono8(1)).unwrap_err().to_string();
    assert!(e.contains("/dev/full") && e.contains("space"), "{e}");
    assert_eq!(h.get_f64("FramesNotWritten"), 1.0);
}

#[test]
fn delete_driver_file_after_write() {
    let dir = TempDir::new("deldriver");
    let h = harness(&dir);
    let driver_file = dir.path().join("driver.raw");
    std::fs::write(&driver_file, b"raw").unwrap();
    let mut f = mono8(1);
    f.set_attribute(ndflow_core::NDAttribute::new(
        "DriverFileName",
        "",
        ndflow_core::AttrValue::String(driver_file.to_string_lossy().into_owned()),
    ));
    h.put("AutoSave", "Yes").unwrap();
    h.process(f.clone()).unwrap();
    assert!(driver_file.exists(), "DeleteDriverFile = No");
    h.put("DeleteDriverFile", "Yes").unwrap();
    h.process(f.clone()).unwrap();
    assert!(!driver_file.exists());
    // Already gone: not an error.
    h.process(f).unwrap();
    assert_eq!(h.get_f64("WriteStatus"), 0.0);
}
