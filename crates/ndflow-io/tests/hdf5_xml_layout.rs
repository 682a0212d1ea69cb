//! XML layouts (XMLFileName): groups, datasets from detector / ndattribute / constant
//! sources, attributes (OnFileOpen / OnFileClose), hardlinks, ndattr_default,
//! detector_data_destination; invalid layouts refused. Read back with hdf5-metno.

use std::path::Path;

use crate::common::{frame, hdf5_harness, hdf5_stream, read_all, shape, str_attr, TempDir};
use hdf5_metno::types::VarLenUnicode;
use ndflow_core::{AttrValue, NDAttribute, ParamValue};

const DEMO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/hdf5/layout_demo.xml"
);

fn frames(n: i32) -> Vec<ndflow_core::NDArray> {
    (1..=n)
        .map(|u| {
            let data: Vec<u16> = (0..12).map(|i| (i * 10 + u) as u16).collect();
            let mut f = frame(&[4, 3], &data, u);
            f.set_attribute(NDAttribute::new("Gain", "g", AttrValue::Float64(u as f64)));
            f.set_attribute(NDAttribute::new("Temp", "t", AttrValue::Int32(20 + u)));
            f
        })
        .collect()
}

fn text(h: &ndflow_runtime::PluginHarness<ndflow_io::Hdf5FilePlugin>, name: &str) -> String {
    match h.get(name) {
        ParamValue::Str(s) => s,
        other => panic!("{name}: {other:?}"),
    }
}

#[test]
fn demo_layout_from_a_file() {
    let dir = TempDir::new("h5-xml");
    let h = hdf5_harness(&dir, "xml");
    h.put("XMLFileName", DEMO).unwrap();
    assert_eq!(h.get_f64("XMLValid"), 1.0, "{}", text(&h, "XMLErrorMsg"));
    let path = hdf5_stream(&h, frames(3));
    let det = "/entry/instrument/detector/image";
    assert_eq!(shape(&path, det), [3, 3, 4]);
    let want: Vec<u16> = (1..=3)
        .flat_map(|u| (0..12).map(move |i| (i * 10 + u) as u16))
        .collect();
    assert_eq!(read_all::<u16>(&path, det), want);
    assert_eq!(
        read_all::<u16>(&path, "/entry/data/image"),
        want,
        "hardlink"
    );
    assert_eq!(
        read_all::<f64>(&path, "/entry/instrument/detector/gain"),
        [1.0, 2.0, 3.0]
    );
    assert_eq!(read_all::<f64>(&path, "/entry/data/gain"), [1.0, 2.0, 3.0]);
    // Not placed by the layout: the ndattr_default group.
    let nda = "/entry/instrument/NDAttributes";
    assert_eq!(read_all::<i32>(&path, &format!("{nda}/Temp")), [21, 22, 23]);
    assert_eq!(
        read_all::<i32>(&path, &format!("{nda}/NDArrayUniqueId")),
        [1, 2, 3]
    );
    assert_eq!(
        shape(&path, "/entry/instrument/performance/timestamp"),
        [3, 5]
    );
    let f = hdf5_metno::File::open(&path).unwrap();
    let d = f.dataset("/entry/instrument/detector/distance").unwrap();
    assert_eq!(d.read_scalar::<f64>().unwrap(), 1.5);
    assert_eq!(
        str_attr(&path, "/entry/instrument/detector/distance", "units"),
        "m"
    );
    assert_eq!(str_attr(&path, det, "units"), "counts");
    assert_eq!(str_attr(&path, "/entry", "NX_class"), "NXentry");
    assert_eq!(str_attr(&path, "/entry/data", "NX_class"), "NXdata");
    let entry = f.group("/entry").unwrap();
    assert_eq!(entry.attr("run").unwrap().read_scalar::<i32>().unwrap(), 42);
    let g = f.group("/entry/instrument/detector").unwrap();
    assert_eq!(
        g.attr("first_gain").unwrap().read_scalar::<f64>().unwrap(),
        1.0
    );
    assert_eq!(
        g.attr("last_gain").unwrap().read_scalar::<f64>().unwrap(),
        3.0
    );
    assert!(
        f.dataset("/entry/instrument/detector/data").is_err(),
        "no NeXus default"
    );
}

#[test]
fn inline_xml_constants_and_destination() {
    let dir = TempDir::new("h5-xml-dest");
    let h = hdf5_harness(&dir, "dest");
    let xml = r#"<hdf5_layout auto_ndattr_default="false">
  <global name="detector_data_destination" ndattribute="Dest"/>
  <group name="scan">
    <dataset name="dark" source="detector"/>
    <dataset name="light" source="detector" det_default="true"/>
    <dataset name="ints" source="constant" value="1,2,3" type="int"/>
    <dataset name="title" source="constant" value="a scan" type="string"/>
    <dataset name="t0" source="ndattribute" ndattribute="Temp" when="OnFileOpen"/>
    <dataset name="t1" source="ndattribute" ndattribute="Temp" when="OnFileClose"/>
  </group>
</hdf5_layout>"#;
    h.put("XMLFileName", xml).unwrap();
    assert_eq!(h.get_f64("XMLValid"), 1.0, "{}", text(&h, "XMLErrorMsg"));
    let mut fs = frames(3);
    fs[1].set_attribute(NDAttribute::new(
        "Dest",
        "",
        AttrValue::String("dark".into()),
    ));
    fs[2].set_attribute(NDAttribute::new(
        "Dest",
        "",
        AttrValue::String("nope".into()),
    ));
    let path = hdf5_stream(&h, fs);
    assert_eq!(shape(&path, "/scan/light"), [2, 3, 4]);
    assert_eq!(shape(&path, "/scan/dark"), [1, 3, 4]);
    assert_eq!(read_all::<u16>(&path, "/scan/dark")[0], 2, "frame 2 routed");
    assert_eq!(
        read_all::<u16>(&path, "/scan/light")[12],
        3,
        "unknown → default"
    );
    assert_eq!(read_all::<i32>(&path, "/scan/ints"), [1, 2, 3]);
    assert_eq!(read_all::<i32>(&path, "/scan/t0"), [21]);
    assert_eq!(read_all::<i32>(&path, "/scan/t1"), [23]);
    let f = hdf5_metno::File::open(&path).unwrap();
    let title = f.dataset("/scan/title").unwrap();
    assert_eq!(
        title.read_scalar::<VarLenUnicode>().unwrap().as_str(),
        "a scan"
    );
    // auto_ndattr_default = false: unplaced NDAttributes are not stored.
    assert_eq!(f.member_names().unwrap(), ["scan"]);
    assert_eq!(f.group("/scan").unwrap().member_names().unwrap().len(), 6);
}

fn refused(dir: &TempDir, xml: &str, needle: &str) {
    let h = hdf5_harness(dir, "bad");
    h.put("XMLFileName", xml).unwrap();
    assert_eq!(h.get_f64("XMLValid"), 0.0, "{xml}");
    let msg = text(&h, "XMLErrorMsg");
    assert!(msg.contains(needle), "{msg:?} lacks {needle:?}");
    h.put("Capture", 1).unwrap();
    assert!(h.process(frames(1).remove(0)).is_err());
    assert_eq!(h.get_f64("WriteStatus"), 1.0);
    let wm = text(&h, "WriteMessage");
    assert!(wm.contains("XML layout invalid"), "{wm}");
    h.put("Capture", 0).unwrap();
}

#[test]
fn invalid_layouts_are_refused() {
    let dir = TempDir::new("h5-xml-bad");
    refused(&dir, "<hdf5_layout><group name=\"a\">", "XML syntax error");
    refused(
        &dir,
        "<hdf5_layout>\n<group name=\"a\">\n<dataset name=\"d\" source=\"detectr\"/></group></hdf5_layout>",
        "<dataset name=\"d\"> at line 3: attribute source=\"detectr\"",
    );
    refused(
        &dir,
        "<hdf5_layout><group name=\"a\"><dataset name=\"d\" source=\"detector\"/><hardlink name=\"l\" target=\"/b\"/></group></hdf5_layout>",
        "target=\"/b\"",
    );
    refused(&dir, "/no/such/layout.xml", "cannot read XML layout file");
    assert!(dir.files().is_empty(), "{:?}", dir.files());
    // Back to the default layout.
    let h = hdf5_harness(&dir, "ok");
    h.put("XMLFileName", "<x/>").unwrap();
    assert_eq!(h.get_f64("XMLValid"), 0.0);
    h.put("XMLFileName", "").unwrap();
    assert_eq!(h.get_f64("XMLValid"), 1.0);
    let path = hdf5_stream(&h, frames(1));
    assert_eq!(shape(&path, "/entry/instrument/detector/data"), [1, 3, 4]);
    assert!(Path::new(&path).exists());
}
