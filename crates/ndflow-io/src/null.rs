//! NDFileNull: a file plugin that writes nothing.
//!
//! Every NDFile behaviour runs as for the other writers (Single/Capture/Stream, NumCapture /
//! NumCaptured, AutoIncrement/FileNumber, FullFileName built from FilePath/FileName/
//! FileTemplate, WriteFile, Capture completion), but `open`, `write` and `close` do nothing, as
//! areaDetector's NDFileNull. Its use is `DeleteDriverFile = Yes`: when a frame is "written" the
//! file named by its `DriverFileName` attribute (a string; set by the driver or an attributes
//! file) is deleted, so a detector's own files can be removed without writing them again. A
//! frame without that attribute, or with an empty one, deletes nothing; a file that is already
//! gone is not an error; any other failure to delete sets WriteStatus/WriteMessage.
//!
//! Differences from areaDetector, both from the shared NDFile state machine: the driver file is
//! deleted when the frame is written (in Capture mode when the buffer is written, not when the
//! frame is captured), and a TempSuffix is ignored (areaDetector's rename of a file that was
//! never written fails every write; here there is simply nothing to rename). ReadFile is
//! refused, as NDFileNull's readFile.

use std::io;
use std::path::Path;

use ndflow_core::{NDArray, ParamDef, ParamStore};
use ndflow_runtime::{Built, PortType};

use crate::file::{FileWriterPlugin, Format};

ndflow_core::params! {
    /// NDFileNull's own records: only NDFile.template's FileFormat menu (NDFileNull has no
    /// template of its own).
    pub const NULL_OWN_PARAMS, pub struct NullParams {
        file_format: enumeration("FileFormat", &["Undefined", "Invalid"], 0).mbb().readback_choices(&["netCDF", "Undefined"]).doc("File format (none: nothing is written)"),
    }
}

/// NDFile's parameters plus the FileFormat menu.
pub const NULL_PARAMS: &[ParamDef] = crate::ndfile_params!("%s%s_%3.3d.dat"; NULL_OWN_PARAMS);

/// The NDFileNull plugin: `NullFilePlugin::new()`.
pub type NullFilePlugin = FileWriterPlugin<NullFormat>;

/// The null [`Format`]: every operation succeeds and touches no file.
#[derive(Default)]
pub struct NullFormat;

impl Format for NullFormat {
    const PLUGIN_TYPE: &'static str = "NDFileNull";
    const PARAMS: &'static [ParamDef] = NULL_PARAMS;
    const WRITES_FILES: bool = false;

    fn open(&mut self, _path: &Path, _frame: &NDArray, _params: &ParamStore) -> io::Result<()> {
        Ok(())
    }

    fn write(&mut self, _frame: &NDArray, _params: &ParamStore) -> io::Result<()> {
        Ok(())
    }

    fn close(&mut self, _params: &ParamStore) -> io::Result<()> {
        Ok(())
    }
}

/// The port type `type = "null"`.
pub const PORT: PortType = PortType::plugin(
    "null",
    "NDFileNull",
    "Writes nothing; runs NDFile's modes and counters, deletes DriverFileName files",
    |_| Ok(Built::Plugin(std::sync::Arc::new(NullFilePlugin::new()))),
);

#[cfg(test)]
mod tests {

    use ndflow_core::{AttrValue, NDAttribute, ParamValue, Pool};
    use ndflow_runtime::{Plugin, PluginHarness};

    use super::*;

    use crate::test_dir::Dir;

    fn frame(uid: i32, driver_file: Option<&Path>) -> NDArray {
        let data: Vec<u8> = (0..16u8).collect();
        let mut f = NDArray::from_pixels(&Pool::unlimited(), &[4, 4], &data).unwrap();
        f.unique_id = uid;
        if let Some(p) = driver_file {
            f.set_attribute(NDAttribute::new(
                "DriverFileName",
                "",
                AttrValue::String(p.to_string_lossy().into_owned()),
            ));
        }
        f
    }

    fn harness(dir: &Dir) -> PluginHarness<NullFilePlugin> {
        let h = PluginHarness::new(NullFilePlugin::new());
        h.put("FilePath", dir.0.to_string_lossy().as_ref()).unwrap();
        h.put("FileName", "img").unwrap();
        h.put("AutoIncrement", "Yes").unwrap();
        h
    }

    fn s(h: &PluginHarness<NullFilePlugin>, name: &str) -> String {
        match h.get(name) {
            ParamValue::Str(s) => s,
            other => other.to_string(),
        }
    }

    #[test]
    fn identity_and_table() {
        let h = PluginHarness::new(NullFilePlugin::new());
        assert_eq!(h.plugin.plugin_type(), "NDFileNull");
        assert_eq!(s(&h, "FileTemplate"), "%s%s_%3.3d.dat");
        assert_eq!(
            NULL_PARAMS.len(),
            crate::file::NDFILE_PARAMS.len() + NULL_OWN_PARAMS.len()
        );
        assert!(NULL_PARAMS.iter().any(|p| p.name == "DeleteDriverFile"));
    }

    #[test]
    fn single_mode_counts_names_and_writes_nothing() {
        let dir = Dir::new("single");
        let h = harness(&dir);
        h.put("FileNumber", 5).unwrap();
        h.put("AutoSave", "Yes").unwrap();
        for uid in 1..=3 {
            let out = h.process(frame(uid, None)).unwrap();
            assert_eq!(out.len(), 1, "\"written\" frames pass downstream");
        }
        assert_eq!(h.get_f64("FileNumber"), 8.0);
        assert_eq!(
            s(&h, "FullFileName"),
            format!("{}/img_007.dat", dir.0.display())
        );
        assert_eq!(h.get_f64("WriteStatus"), 0.0);
        assert!(dir.entries().is_empty(), "nothing on disk");
        // WriteFile "writes" the latest frame.
        h.put("WriteFile", 1).unwrap();
        assert_eq!(h.get_f64("WriteFile"), 0.0);
        assert_eq!(h.get_f64("FileNumber"), 9.0);
    }

    #[test]
    fn temp_suffix_names_no_file_and_fails_nothing() {
        let dir = Dir::new("temp");
        let h = harness(&dir);
        h.put("AutoSave", "Yes").unwrap();
        h.put("TempSuffix", ".tmp").unwrap();
        h.process(frame(1, None)).unwrap();
        assert_eq!(h.get_f64("WriteStatus"), 0.0, "{}", s(&h, "WriteMessage"));
        assert!(dir.entries().is_empty());
    }

    #[test]
    fn capture_and_stream_counters() {
        let dir = Dir::new("modes");
        let h = harness(&dir);
        h.put("AutoSave", "Yes").unwrap();
        h.put("FileWriteMode", "Capture").unwrap();
        h.put("NumCapture", 3).unwrap();
        h.put("Capture", 1).unwrap();
        h.process(frame(1, None)).unwrap();
        h.process(frame(2, None)).unwrap();
        assert_eq!(h.get_f64("NumCaptured"), 2.0);
        assert_eq!(h.get_f64("Capture"), 1.0);
        let out = h.process(frame(3, None)).unwrap();
        assert_eq!(out.len(), 3);
        assert_eq!(h.get_f64("Capture"), 0.0, "Capture completes at NumCapture");
        assert_eq!(h.get_f64("FileNumber"), 3.0, "one name per frame");

        h.put("FileWriteMode", "Stream").unwrap();
        h.put("NumCapture", 4).unwrap();
        h.put("Capture", 1).unwrap();
        for uid in 10..14 {
            h.process(frame(uid, None)).unwrap();
        }
        assert_eq!(h.get_f64("NumCaptured"), 4.0);
        assert_eq!(h.get_f64("Capture"), 0.0);
        assert_eq!(h.get_f64("FileNumber"), 7.0);
        assert_eq!(h.get_f64("FramesNotWritten"), 0.0);
        assert!(dir.entries().is_empty());
    }

    #[test]
    fn delete_driver_file_only_when_enabled() {
        let dir = Dir::new("delete");
        let h = harness(&dir);
        h.put("AutoSave", "Yes").unwrap();
        let a = dir.0.join("driver_a.raw");
        let b = dir.0.join("driver_b.raw");
        std::fs::write(&a, b"a").unwrap();
        std::fs::write(&b, b"b").unwrap();
        h.process(frame(1, Some(&a))).unwrap();
        assert!(a.exists(), "DeleteDriverFile = No keeps the file");
        h.put("DeleteDriverFile", "Yes").unwrap();
        h.process(frame(2, Some(&a))).unwrap();
        assert!(!a.exists());
        // Already gone, or no attribute: not an error.
        h.process(frame(3, Some(&a))).unwrap();
        h.process(frame(4, None)).unwrap();
        assert_eq!(h.get_f64("WriteStatus"), 0.0);
        assert_eq!(dir.entries(), ["driver_b.raw"]);
        // Not "written" (AutoSave = No): kept.
        h.put("AutoSave", "No").unwrap();
        h.process(frame(5, Some(&b))).unwrap();
        assert!(b.exists());
    }

    #[test]
    fn undeletable_driver_file_is_a_write_error() {
        let dir = Dir::new("undeletable");
        let h = harness(&dir);
        h.put("AutoSave", "Yes").unwrap();
        h.put("DeleteDriverFile", "Yes").unwrap();
        // A non-empty directory cannot be removed with remove_file.
        let sub = dir.0.join("sub");
        std::fs::create_dir_all(sub.join("x")).unwrap();
        assert!(h.process(frame(1, Some(&sub))).is_err());
        assert_eq!(h.get_f64("WriteStatus"), 1.0);
        assert!(s(&h, "WriteMessage").contains("driver file"));
        assert_eq!(h.get_f64("FramesNotWritten"), 1.0);
    }

    #[test]
    fn read_file_is_refused() {
        let dir = Dir::new("read");
        let h = harness(&dir);
        h.put("ReadFile", 1).unwrap();
        assert_eq!(h.get_f64("ReadFile"), 0.0);
        assert_eq!(h.get_f64("WriteStatus"), 1.0);
        assert!(s(&h, "WriteMessage").contains("NDFileNull cannot read"));
    }
}
