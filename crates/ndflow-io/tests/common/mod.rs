//! Test helpers: a temp dir removed on drop, frames of every type.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use ndflow_core::{AttrValue, ColorMode, NDArray, NDAttribute, Pixel, Pool};

pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "ndflow-io-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
    /// The directory as FilePath (with the trailing slash).
    pub fn file_path(&self) -> String {
        format!("{}/", self.0.display())
    }
    /// Sorted file names in the directory.
    pub fn files(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Values that exercise each type's range (negatives, large, fractions).
pub fn pattern<T: Pixel>(n: usize) -> Vec<T> {
    let (lo, hi) = T::DATA_TYPE.range();
    (0..n)
        .map(|i| {
            let v = match i % 5 {
                0 => lo,
                1 => hi,
                2 => (i as f64) * 1.25 - 3.0,
                3 => 0.0,
                _ => (i as f64) * 7.0,
            };
            T::from_f64(v.clamp(lo, hi))
        })
        .collect()
}

pub fn frame<T: Pixel>(sizes: &[usize], data: &[T], uid: i32) -> NDArray {
    let mut f = NDArray::from_pixels(&Pool::unlimited(), sizes, data).unwrap();
    f.unique_id = uid;
    f.time_stamp = 1000.5 + uid as f64;
    f.epics_ts.sec = 1_000_000 + uid as u32;
    f.epics_ts.nsec = 123_456_789;
    f
}

pub fn mono8(uid: i32) -> NDArray {
    let data: Vec<u8> = (0..64u32).map(|i| (i * 3 + uid as u32) as u8).collect();
    frame(&[8, 8], &data, uid)
}

pub fn rgb(mut f: NDArray, mode: ColorMode) -> NDArray {
    f.set_color_mode(mode);
    f
}

pub fn with_attrs(mut f: NDArray) -> NDArray {
    f.set_attribute(NDAttribute::new("Gain", "", AttrValue::Float64(2.5)));
    f.set_attribute(NDAttribute::new("Count", "", AttrValue::Int32(-7)));
    f.set_attribute(NDAttribute::new(
        "Label",
        "",
        AttrValue::String("hello".into()),
    ));
    f.set_attribute(NDAttribute::new("Nothing", "", AttrValue::Undefined));
    f
}

/// A harness of the HDF5 plugin writing `name_N.h5` into `dir`, Stream mode, LazyOpen.
pub fn hdf5_harness(
    dir: &TempDir,
    name: &str,
) -> ndflow_runtime::PluginHarness<ndflow_io::Hdf5FilePlugin> {
    let h = ndflow_runtime::PluginHarness::new(ndflow_io::Hdf5FilePlugin::new());
    h.put("FilePath", dir.path().to_string_lossy().as_ref())
        .unwrap();
    h.put("FileName", name).unwrap();
    h.put("FileTemplate", "%s%s_%d.h5").unwrap();
    h.put("AutoIncrement", "Yes").unwrap();
    h.put("FileWriteMode", "Stream").unwrap();
    h.put("LazyOpen", "Yes").unwrap();
    h.put("NumCapture", 0).unwrap();
    h
}

/// Writes `frames` as one stream and returns the file path.
pub fn hdf5_stream(
    h: &ndflow_runtime::PluginHarness<ndflow_io::Hdf5FilePlugin>,
    frames: Vec<NDArray>,
) -> PathBuf {
    h.put("Capture", 1).unwrap();
    for f in frames {
        h.process(f).unwrap();
    }
    h.put("Capture", 0).unwrap();
    assert_eq!(h.get_f64("WriteStatus"), 0.0, "{:?}", h.get("WriteMessage"));
    match h.get("FullFileName") {
        ndflow_core::ParamValue::Str(s) => PathBuf::from(s),
        other => panic!("FullFileName {other:?}"),
    }
}

/// Reads a whole dataset as `T`.
pub fn read_all<T: hdf5_metno::H5Type>(path: &Path, dataset: &str) -> Vec<T> {
    let f = hdf5_metno::File::open(path).unwrap();
    f.dataset(dataset).unwrap().read_raw::<T>().unwrap()
}

/// The shape of a dataset.
pub fn shape(path: &Path, dataset: &str) -> Vec<usize> {
    let f = hdf5_metno::File::open(path).unwrap();
    f.dataset(dataset).unwrap().shape()
}

/// A fixed-length string attribute of an object ("/" for the root group).
pub fn str_attr(path: &Path, object: &str, name: &str) -> String {
    let f = hdf5_metno::File::open(path).unwrap();
    let a = match f.dataset(object) {
        Ok(d) => d.attr(name),
        Err(_) if object == "/" => f.attr(name),
        Err(_) => f.group(object).unwrap().attr(name),
    }
    .unwrap_or_else(|e| panic!("{object}@{name}: {e}"));
    let desc = a.dtype().unwrap().to_descriptor().unwrap();
    assert!(
        matches!(desc, hdf5_metno::types::TypeDescriptor::FixedAscii(_)),
        "{object}@{name} is {desc:?}"
    );
    a.read_scalar::<hdf5_metno::types::FixedAscii<1024>>()
        .unwrap()
        .as_str()
        .to_string()
}
