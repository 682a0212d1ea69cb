//! The netcdf and nexus ports through the plugin harness: parameter tables, NDFile modes,
//! template checks on a put, and write errors in WriteStatus/WriteMessage (never a panic).

use ndflow_core::{NDArray, ParamStore, ParamValue, Pool};
use ndflow_io::{NetcdfFilePlugin, NexusFilePlugin};
use ndflow_runtime::port_params::{ARRAY_BASE_PARAMS, PLUGIN_BASE_PARAMS};
use ndflow_runtime::{Plugin, PluginHarness};

fn text(v: ParamValue) -> String {
    match v {
        ParamValue::Str(s) => s,
        other => panic!("not a string: {other:?}"),
    }
}

fn dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("ndflow-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn frame(id: i32) -> NDArray {
    let px: Vec<i32> = (0..12).map(|i| i * id).collect();
    let mut f = NDArray::from_pixels(&Pool::unlimited(), &[4, 3], &px).unwrap();
    f.unique_id = id;
    f
}

fn single<P: Plugin>(h: &PluginHarness<P>, path: &std::path::Path, name: &str) {
    h.put("FilePath", path.to_string_lossy().as_ref()).unwrap();
    h.put("FileName", name).unwrap();
    h.put("FileWriteMode", "Single").unwrap();
    h.put("AutoSave", "Yes").unwrap();
    h.put("AutoIncrement", "Yes").unwrap();
}

#[test]
fn parameter_tables_have_no_duplicates() {
    for (ty, params) in [
        (
            NetcdfFilePlugin::new().plugin_type(),
            NetcdfFilePlugin::new().params(),
        ),
        (
            NexusFilePlugin::new().plugin_type(),
            NexusFilePlugin::new().params(),
        ),
    ] {
        let dup = ParamStore::duplicate_names(&[ARRAY_BASE_PARAMS, PLUGIN_BASE_PARAMS, params]);
        assert!(dup.is_empty(), "{ty}: {dup:?}");
    }
    let h = PluginHarness::new(NetcdfFilePlugin::new());
    assert_eq!(text(h.get("FileTemplate")), "%s%s_%3.3d.nc");
    let h = PluginHarness::new(NexusFilePlugin::new());
    assert_eq!(text(h.get("FileTemplate")), "%s%s_%3.3d.nxs");
    assert!(h.put("FileTemplateValid", 1).is_err(), "read-only");
}

#[test]
fn netcdf_single_files_and_a_write_error() {
    let d = dir("nc-h");
    let h = PluginHarness::new(NetcdfFilePlugin::new());
    single(&h, &d, "img");
    h.process(frame(1)).unwrap();
    h.process(frame(2)).unwrap();
    assert_eq!(h.get_f64("WriteStatus"), 0.0);
    for n in ["img_000.nc", "img_001.nc"] {
        let bytes = std::fs::read(d.join(n)).unwrap();
        assert_eq!(&bytes[..4], b"CDF\x02", "{n}");
    }
    // A directory that is gone: the frame is reported, counted and dropped, no panic.
    h.put("FilePath", d.join("gone").to_string_lossy().as_ref())
        .unwrap();
    assert!(h.process(frame(3)).is_err());
    assert_eq!(h.get_f64("WriteStatus"), 1.0);
    assert!(text(h.get("WriteMessage")).contains("netCDF create"));
    assert_eq!(h.get_f64("FramesNotWritten"), 1.0);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn nexus_template_checked_on_put_and_at_open() {
    let d = dir("nx-h");
    let h = PluginHarness::new(NexusFilePlugin::new());
    single(&h, &d, "img");
    // No template: the open fails with the reason, no file.
    assert!(h.process(frame(1)).is_err());
    assert!(text(h.get("WriteMessage")).contains("TemplateFileName is empty"));
    let bad = "<NXroot>\n<NXentry name=\"e\">\n<d type=\"pArray\"/>\n<v type=\"CONST\" outtype=\"NX_INT8\">999</v>\n</NXentry>\n</NXroot>";
    h.put("TemplateFileName", bad).unwrap();
    assert_eq!(h.get_f64("FileTemplateValid"), 0.0);
    assert_eq!(h.get_f64("WriteStatus"), 1.0);
    let msg = text(h.get("WriteMessage"));
    assert!(msg.contains("line 4: <v>"), "{msg}");
    let good = "<NXroot><NXentry name=\"e\"><d type=\"pArray\"/></NXentry></NXroot>";
    h.put("TemplateFileName", good).unwrap();
    assert_eq!(h.get_f64("FileTemplateValid"), 1.0);
    h.process(frame(2)).unwrap();
    assert_eq!(h.get_f64("WriteStatus"), 0.0);
    let f = hdf5_metno::File::open(d.join("img_001.nxs")).unwrap();
    let data = f.dataset("e/d").unwrap();
    assert_eq!(data.shape(), vec![3, 4]);
    let px: Vec<i32> = data.read_raw().unwrap();
    assert_eq!(px, (0..12).map(|i| i * 2).collect::<Vec<_>>());
    assert!(
        !d.join("img_000.nxs").exists(),
        "a failed open leaves no file"
    );
    std::fs::remove_dir_all(&d).unwrap();
}
