//! The NDFile behaviour for a multi-frame format (what HDF5 will use), with a mock format
//! that writes one line per frame; and the JPEG plugin through the harness.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

use crate::common;
use crate::common::{mono8, TempDir};
use ndflow_core::{NDArray, ParamDef, ParamStore};
use ndflow_io::{FileWriterPlugin, Format, JpegFilePlugin};
use ndflow_runtime::PluginHarness;

#[derive(Default)]
struct Lines {
    file: Option<File>,
}

impl Format for Lines {
    const PLUGIN_TYPE: &'static str = "NDFileLines";
    const PARAMS: &'static [ParamDef] = ndflow_io::ndfile_params!("%s%s_%d.txt");
    const MULTI_FRAME: bool = true;
    fn open(&mut self, path: &Path, _f: &NDArray, _p: &ParamStore) -> io::Result<()> {
        self.file = Some(File::create(path)?);
        Ok(())
    }
    fn write(&mut self, f: &NDArray, _p: &ParamStore) -> io::Result<()> {
        let file = self
            .file
            .as_mut()
            .ok_or_else(|| io::Error::other("not open"))?;
        writeln!(file, "{}", f.unique_id)
    }
    fn close(&mut self, _p: &ParamStore) -> io::Result<()> {
        self.file.take();
        Ok(())
    }
}

fn harness(dir: &TempDir) -> PluginHarness<FileWriterPlugin<Lines>> {
    let h = PluginHarness::new(FileWriterPlugin::<Lines>::new());
    h.put("FilePath", dir.path().to_string_lossy().as_ref())
        .unwrap();
    h.put("FileName", "s").unwrap();
    h.put("AutoIncrement", "Yes").unwrap();
    h
}

fn read(dir: &TempDir, name: &str) -> String {
    std::fs::read_to_string(dir.path().join(name)).unwrap()
}

#[test]
fn stream_is_one_file() {
    let dir = TempDir::new("mf-stream");
    let h = harness(&dir);
    h.put("FileWriteMode", "Stream").unwrap();
    h.put("NumCapture", 0).unwrap();
    // Not lazy: needs a frame seen first.
    h.put("Capture", 1).unwrap();
    assert_eq!(h.get_f64("Capture"), 0.0);
    assert_eq!(h.get_f64("WriteStatus"), 1.0);
    h.process(mono8(0)).unwrap();
    h.put("Capture", 1).unwrap();
    assert_eq!(h.get_f64("Capture"), 1.0);
    h.put("TempSuffix", ".part").unwrap(); // applies to the next file only
    for u in 1..=3 {
        h.process(mono8(u)).unwrap();
    }
    assert_eq!(dir.files(), ["s_0.txt"], "opened at Capture = 1");
    h.put("Capture", 0).unwrap();
    assert_eq!(read(&dir, "s_0.txt"), "1\n2\n3\n");
    assert_eq!(h.get_f64("FileNumber"), 1.0);

    // LazyOpen with NumCapture: opens on the first frame, closes after 2.
    h.put("LazyOpen", "Yes").unwrap();
    h.put("NumCapture", 2).unwrap();
    h.put("Capture", 1).unwrap();
    assert_eq!(dir.files().len(), 1);
    for u in 4..=6 {
        h.process(mono8(u)).unwrap();
    }
    assert_eq!(dir.files(), ["s_0.txt", "s_1.txt"], "temp file renamed");
    assert_eq!(read(&dir, "s_1.txt"), "4\n5\n");
    assert_eq!(h.get_f64("NumCaptured"), 2.0);
}

#[test]
fn capture_is_one_file() {
    let dir = TempDir::new("mf-capture");
    let h = harness(&dir);
    h.put("FileWriteMode", "Capture").unwrap();
    h.put("NumCapture", 3).unwrap();
    h.put("AutoSave", "Yes").unwrap();
    h.put("Capture", 1).unwrap();
    for u in 1..=4 {
        h.process(mono8(u)).unwrap();
    }
    assert_eq!(dir.files(), ["s_0.txt"]);
    assert_eq!(read(&dir, "s_0.txt"), "1\n2\n3\n");
}

#[test]
fn jpeg_plugin_writes_and_refuses_other_types() {
    let dir = TempDir::new("jpeg");
    let h = PluginHarness::new(JpegFilePlugin::new());
    h.put("FilePath", dir.path().to_string_lossy().as_ref())
        .unwrap();
    h.put("FileName", "j").unwrap();
    h.put("AutoSave", "Yes").unwrap();
    h.put("JPEGQuality", 80).unwrap();
    assert!(h.put("JPEGQuality", 101).is_err());
    h.process(mono8(1)).unwrap();
    assert_eq!(dir.files(), ["j_000.jpg"]);
    let bytes = std::fs::read(dir.path().join("j_000.jpg")).unwrap();
    assert_eq!(&bytes[..2], &[0xFF, 0xD8]);
    let f = common::frame(&[4, 4], &[0u16; 16], 2);
    let e = h.process(f).unwrap_err().to_string();
    assert!(e.contains("UInt16"), "{e}");
    assert_eq!(h.get_f64("FramesNotWritten"), 1.0);
    assert_eq!(dir.files().len(), 1, "no empty file left behind");
}
