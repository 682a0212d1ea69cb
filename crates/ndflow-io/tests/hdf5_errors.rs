//! Errors of the HDF5 writer: a path that is not there, a frame that does not fit the file
//! (the file size limit is in hdf5_disk_full.rs). Each is published in
//! WriteStatus/WriteMessage, counted in FramesNotWritten, the plugin keeps taking frames, and
//! the file keeps every frame written before the error. Plus SWMR flags and FlushNow.

use crate::common::{frame, hdf5_harness, read_all, shape, TempDir};
use ndflow_core::NDArray;
use ndflow_io::hdf5::{ATTR_GROUP, DATA_PATH};

fn u16_frame(w: usize, h: usize, uid: i32) -> NDArray {
    let px: Vec<u16> = (0..w * h).map(|i| (i as i32 * 3 + uid) as u16).collect();
    frame(&[w, h], &px, uid)
}

fn message(h: &ndflow_runtime::PluginHarness<ndflow_io::Hdf5FilePlugin>) -> String {
    h.get("WriteMessage").to_string()
}

#[test]
fn missing_directory_counts_every_frame_of_the_stream() {
    let dir = TempDir::new("h5-nodir");
    let h = hdf5_harness(&dir, "x");
    h.put(
        "FilePath",
        dir.path().join("gone").to_string_lossy().as_ref(),
    )
    .unwrap();
    h.put("Capture", 1).unwrap();
    for u in 1..=3 {
        assert!(h.process(u16_frame(4, 3, u)).is_err());
    }
    assert_eq!(h.get_f64("WriteStatus"), 1.0);
    assert_eq!(h.get_f64("FramesNotWritten"), 3.0);
    assert!(message(&h).contains("gone"), "{}", message(&h));
    assert_eq!(
        h.get_f64("FileNumber"),
        1.0,
        "one open attempt, not one per frame"
    );
    h.put("Capture", 0).unwrap();
    // The next stream works again once the path is right.
    h.put("FilePath", dir.path().to_string_lossy().as_ref())
        .unwrap();
    h.put("Capture", 1).unwrap();
    h.process(u16_frame(4, 3, 4)).unwrap();
    h.put("Capture", 0).unwrap();
    assert_eq!(h.get_f64("WriteStatus"), 0.0);
    assert_eq!(dir.files(), ["x_1.h5"]);
}

#[test]
fn a_frame_of_another_shape_ends_the_file_cleanly() {
    let dir = TempDir::new("h5-shape");
    let h = hdf5_harness(&dir, "s");
    h.put("Capture", 1).unwrap();
    h.process(u16_frame(4, 3, 1)).unwrap();
    h.process(u16_frame(4, 3, 2)).unwrap();
    assert!(h.process(u16_frame(5, 3, 3)).is_err());
    assert!(
        h.process(u16_frame(4, 3, 4)).is_err(),
        "the stream's file is closed"
    );
    assert_eq!(h.get_f64("FramesNotWritten"), 2.0);
    assert!(message(&h).contains("[3, 5]"), "{}", message(&h));
    assert_eq!(
        h.get_f64("Capture"),
        1.0,
        "the stream goes on until Capture = 0"
    );
    h.put("Capture", 0).unwrap();
    let path = dir.path().join("s_0.h5");
    assert_eq!(shape(&path, DATA_PATH), [2, 3, 4]);
    assert_eq!(
        read_all::<i32>(&path, &format!("{ATTR_GROUP}/NDArrayUniqueId")),
        [1, 2]
    );
    assert_eq!(h.get_f64("NumCaptured"), 2.0);
}

#[test]
fn swmr_flags_flushes_and_flush_now() {
    let dir = TempDir::new("h5-swmr");
    let h = hdf5_harness(&dir, "w");
    h.put("SWMRMode", "On").unwrap();
    h.put("NumFramesFlush", 2).unwrap();
    h.put("Capture", 1).unwrap();
    assert_eq!(h.get_f64("SWMRActive"), 0.0);
    for u in 1..=5 {
        h.process(u16_frame(4, 3, u)).unwrap();
    }
    assert_eq!(h.get_f64("SWMRActive"), 1.0);
    assert_eq!(
        h.get_f64("SWMRCbCounter"),
        2.0,
        "flushed after frames 2 and 4"
    );
    h.put("FlushNow", "Flush").unwrap();
    assert_eq!(h.get_f64("FlushNow"), 0.0, "done");
    assert_eq!(h.get_f64("SWMRCbCounter"), 3.0);
    h.put("Capture", 0).unwrap();
    assert_eq!(h.get_f64("SWMRActive"), 0.0);
    let path = dir.path().join("w_0.h5");
    assert_eq!(shape(&path, DATA_PATH), [5, 3, 4]);
    // FlushNow without an open file is harmless.
    h.put("FlushNow", "Flush").unwrap();
    assert_eq!(h.get_f64("WriteStatus"), 0.0);
    // NumFramesFlush below NumFramesChunks is raised to it in SWMR mode.
    let h = hdf5_harness(&dir, "v");
    h.put("SWMRMode", "On").unwrap();
    h.put("NumFramesChunks", 3).unwrap();
    h.put("NumFramesFlush", 1).unwrap();
    h.put("Capture", 1).unwrap();
    h.process(u16_frame(4, 3, 1)).unwrap();
    assert_eq!(h.get_f64("NumFramesFlush"), 3.0);
    h.put("Capture", 0).unwrap();
}

#[test]
fn a_plugin_dropped_mid_stream_leaves_a_complete_file() {
    let dir = TempDir::new("h5-drop");
    let h = hdf5_harness(&dir, "d");
    h.put("Capture", 1).unwrap();
    for u in 1..=3 {
        h.process(u16_frame(4, 3, u)).unwrap();
    }
    drop(h);
    let path = dir.path().join("d_0.h5");
    assert_eq!(shape(&path, DATA_PATH), [3, 3, 4]);
    assert_eq!(
        read_all::<i32>(&path, &format!("{ATTR_GROUP}/NDArrayUniqueId")),
        [1, 2, 3]
    );
}
