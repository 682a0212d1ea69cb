//! NDFileHDF5's NeXus layout: groups, NX_class, the data link, the detector data's
//! attributes, the NDAttribute datasets, uniqueId/timestamps and the performance dataset,
//! read back with hdf5-metno.

use crate::common::{
    frame, hdf5_harness, hdf5_stream, read_all, shape, str_attr, with_attrs, TempDir,
};
use ndflow_core::{AttrValue, NDAttribute, ParamStore, SourceType};
use ndflow_io::hdf5::{ATTR_GROUP, DATA_PATH, DETECTOR_ATTR_GROUP, LINK_PATH, PERFORMANCE_PATH};
use ndflow_io::Hdf5FilePlugin;
use ndflow_runtime::port_params::{ARRAY_BASE_PARAMS, PLUGIN_BASE_PARAMS};
use ndflow_runtime::Plugin;

fn frames(n: i32) -> Vec<ndflow_core::NDArray> {
    (1..=n)
        .map(|u| {
            let data: Vec<u16> = (0..12).map(|i| (i * 10 + u) as u16).collect();
            let mut f = with_attrs(frame(&[4, 3], &data, u));
            let mut gain = NDAttribute::new("Gain", "the gain", AttrValue::Float64(2.5 * u as f64));
            gain.source_type = SourceType::Param;
            gain.source = "GAIN".into();
            f.set_attribute(gain);
            f.set_color_mode(ndflow_core::ColorMode::Mono);
            f
        })
        .collect()
}

#[test]
fn plugin_identity_and_parameter_table() {
    let p = Hdf5FilePlugin::new();
    assert_eq!(p.plugin_type(), "NDFileHDF5");
    assert!(p.accepts_compressed());
    assert_eq!(p.max_threads(), 1);
    let dup = ParamStore::duplicate_names(&[ARRAY_BASE_PARAMS, PLUGIN_BASE_PARAMS, p.params()]);
    assert!(dup.is_empty(), "{dup:?}");
    let h = ndflow_runtime::PluginHarness::new(Hdf5FilePlugin::new());
    assert_eq!(h.get_f64("Compression"), 0.0);
    h.put("Compression", "BSLZ4").unwrap();
    assert_eq!(h.get_f64("Compression"), 5.0);
    assert!(h.put("Compression", "zstd").is_err());
    assert!(h.put("SWMRActive", 1).is_err(), "read-only");
    assert_eq!(h.get_f64("SWMRSupported"), 1.0);
    assert_eq!(h.get_f64("ChunkSizeAuto"), 1.0);
    assert_eq!(h.get_f64("BoundaryThreshold"), 65536.0);
    assert_eq!(h.get_f64("StoreAttr"), 1.0);
    assert_eq!(h.get_f64("BloscShuffle"), 1.0);
}

#[test]
fn nexus_groups_link_and_data() {
    let dir = TempDir::new("h5-layout");
    let h = hdf5_harness(&dir, "layout");
    let path = hdf5_stream(&h, frames(3));
    assert_eq!(path, dir.path().join("layout_0.h5"));
    assert_eq!(shape(&path, DATA_PATH), [3, 3, 4], "[n, y, x]");
    let data: Vec<u16> = read_all(&path, LINK_PATH);
    let want: Vec<u16> = (1..=3)
        .flat_map(|u| (0..12).map(move |i| (i * 10 + u) as u16))
        .collect();
    assert_eq!(data, want);
    for (obj, class) in [
        ("/entry", "NXentry"),
        ("/entry/instrument", "NXinstrument"),
        ("/entry/instrument/detector", "NXdetector"),
        (DETECTOR_ATTR_GROUP, "NXcollection"),
        (ATTR_GROUP, "NXcollection"),
        ("/entry/data", "NXdata"),
    ] {
        assert_eq!(str_attr(&path, obj, "NX_class"), class, "{obj}");
    }
    assert_eq!(str_attr(&path, "/", "default"), "entry");
    assert_eq!(str_attr(&path, "/entry", "default"), "data");
    assert_eq!(str_attr(&path, "/entry/data", "signal"), "data");
    let f = hdf5_metno::File::open(&path).unwrap();
    let d = f.dataset(DATA_PATH).unwrap();
    assert_eq!(d.attr("signal").unwrap().read_scalar::<i32>().unwrap(), 1);
    assert_eq!(
        d.attr("NDArrayNumDims")
            .unwrap()
            .read_scalar::<i32>()
            .unwrap(),
        2
    );
    assert_eq!(
        d.attr("NDArrayDimBinning")
            .unwrap()
            .read_raw::<i32>()
            .unwrap(),
        [1, 1]
    );
    // The link is a hard link: the same object.
    let linked = f.dataset(LINK_PATH).unwrap();
    assert_eq!(linked.shape(), d.shape());
    assert_eq!(d.chunk(), Some(vec![1, 3, 4]), "one frame per chunk");
    assert!(d.filters().is_empty());
}

#[test]
fn attribute_datasets_and_timestamps() {
    let dir = TempDir::new("h5-attrs");
    let h = hdf5_harness(&dir, "attrs");
    let path = hdf5_stream(&h, frames(3));
    let g = |n: &str| format!("{ATTR_GROUP}/{n}");
    assert_eq!(read_all::<i32>(&path, &g("NDArrayUniqueId")), [1, 2, 3]);
    assert_eq!(
        read_all::<f64>(&path, &g("NDArrayTimeStamp")),
        [1001.5, 1002.5, 1003.5]
    );
    assert_eq!(
        read_all::<u32>(&path, &g("NDArrayEpicsTSSec")),
        [1_000_001, 1_000_002, 1_000_003]
    );
    assert_eq!(
        read_all::<u32>(&path, &g("NDArrayEpicsTSnSec")),
        [123_456_789; 3]
    );
    assert_eq!(read_all::<f64>(&path, &g("Gain")), [2.5, 5.0, 7.5]);
    assert_eq!(read_all::<i32>(&path, &g("Count")), [-7, -7, -7]);
    let labels: Vec<hdf5_metno::types::FixedAscii<256>> = read_all(&path, &g("Label"));
    assert!(labels.iter().all(|l| l.as_str() == "hello"));
    assert!(read_all::<f32>(&path, &g("Nothing"))
        .iter()
        .all(|v| v.is_nan()));
    assert_eq!(
        read_all::<i32>(&path, &format!("{DETECTOR_ATTR_GROUP}/ColorMode")),
        [0, 0, 0]
    );
    assert_eq!(str_attr(&path, &g("Gain"), "NDAttrName"), "Gain");
    assert_eq!(str_attr(&path, &g("Gain"), "NDAttrDescription"), "the gain");
    assert_eq!(
        str_attr(&path, &g("Gain"), "NDAttrSourceType"),
        "NDAttrSourceParam"
    );
    assert_eq!(str_attr(&path, &g("Gain"), "NDAttrSource"), "GAIN");
    assert_eq!(
        str_attr(&path, &g("NDArrayUniqueId"), "NDAttrDescription"),
        "The unique ID of the NDArray"
    );
    let perf: Vec<f64> = read_all(&path, PERFORMANCE_PATH);
    assert_eq!(shape(&path, PERFORMANCE_PATH), [3, 5]);
    assert!(perf.iter().all(|v| v.is_finite() && *v >= 0.0), "{perf:?}");
    assert!(perf[2 * 5 + 2] >= perf[5 + 2], "run time grows");
    assert!(h.get_f64("RunTime") > 0.0);
}

#[test]
fn attributes_missing_later_get_fill_values_and_newcomers_are_ignored() {
    let dir = TempDir::new("h5-attr-fill");
    let h = hdf5_harness(&dir, "fill");
    let mut fr = frames(2);
    fr[1]
        .attributes
        .retain(|a| a.name != "Count" && a.name != "Label");
    fr[1].set_attribute(NDAttribute::new("Late", "", AttrValue::Int8(1)));
    // A type change converts to the type frozen at open.
    fr[1].set_attribute(NDAttribute::new("Gain", "", AttrValue::Int32(9)));
    let path = hdf5_stream(&h, fr);
    let g = |n: &str| format!("{ATTR_GROUP}/{n}");
    assert_eq!(read_all::<i32>(&path, &g("Count")), [-7, 0]);
    let labels: Vec<hdf5_metno::types::FixedAscii<256>> = read_all(&path, &g("Label"));
    assert_eq!(labels[1].as_str(), "");
    assert_eq!(read_all::<f64>(&path, &g("Gain")), [2.5, 9.0]);
    let f = hdf5_metno::File::open(&path).unwrap();
    assert!(f.dataset(&g("Late")).is_err());
}

#[test]
fn store_attr_and_perform_off() {
    let dir = TempDir::new("h5-noattr");
    let h = hdf5_harness(&dir, "bare");
    h.put("StoreAttr", "No").unwrap();
    h.put("StorePerform", "No").unwrap();
    let path = hdf5_stream(&h, frames(2));
    let f = hdf5_metno::File::open(&path).unwrap();
    assert!(f.dataset(&format!("{ATTR_GROUP}/NDArrayUniqueId")).is_err());
    assert!(f.dataset(PERFORMANCE_PATH).is_err());
    assert_eq!(f.dataset(DATA_PATH).unwrap().shape(), [2, 3, 4]);
}

#[test]
fn single_and_capture_modes() {
    let dir = TempDir::new("h5-modes");
    let h = hdf5_harness(&dir, "single");
    h.put("FileWriteMode", "Single").unwrap();
    h.put("AutoSave", "Yes").unwrap();
    for f in frames(2) {
        h.process(f).unwrap();
    }
    assert_eq!(dir.files(), ["single_0.h5", "single_1.h5"]);
    let p1 = dir.path().join("single_1.h5");
    assert_eq!(
        shape(&p1, DATA_PATH),
        [3, 4],
        "no frame axis in Single mode"
    );
    assert_eq!(read_all::<u16>(&p1, DATA_PATH)[1], 12);
    assert_eq!(
        read_all::<i32>(&p1, &format!("{ATTR_GROUP}/NDArrayUniqueId")),
        [2]
    );

    let h = hdf5_harness(&dir, "cap");
    h.put("FileWriteMode", "Capture").unwrap();
    h.put("NumCapture", 3).unwrap();
    h.put("AutoSave", "Yes").unwrap();
    h.put("Capture", 1).unwrap();
    for f in frames(4) {
        h.process(f).unwrap();
    }
    let p = dir.path().join("cap_0.h5");
    assert_eq!(shape(&p, DATA_PATH), [3, 3, 4]);
    // NDAttributeChunk = 0 follows NumCapture.
    let f = hdf5_metno::File::open(&p).unwrap();
    let uid = f.dataset(&format!("{ATTR_GROUP}/NDArrayUniqueId")).unwrap();
    assert_eq!(uid.chunk(), Some(vec![3]));
}
