//! NDAttributes files: the attributes a driver or plugin attaches to frames, and the status a
//! bad file reports.

use std::sync::Arc;

use crate::common::*;
use ndflow_core::{AttrValue, NDAttribute, ParamValue, SourceType};
use ndflow_runtime::{Graph, PvCell, PvReader};
use parking_lot::Mutex;

fn attr(rec: &Recorder, name: &str) -> Option<NDAttribute> {
    rec.last.lock().iter().find(|a| a.name == name).cloned()
}

fn graph_with_recorder(source: &str) -> (Graph, Arc<Recorder>) {
    let g = sim_graph(1);
    let rec = Arc::new(Recorder::default());
    g.add_plugin("REC", rec.clone()).unwrap();
    g.put("REC", "NDArrayPort", source).unwrap();
    (g, rec)
}

fn acquire(g: &Graph, n: i64) {
    configure_fast(g, n);
    g.put("DRV", "Acquire", 1).unwrap();
    wait_done(g);
}

const DRIVER_XML: &str = r#"<?xml version="1.0" standalone="no" ?>
<Attributes>
  <Attribute name="Images" type="PARAM" source="NIMAGES" datatype="INT" description="drvInfo name"/>
  <Attribute name="Gain" type="PARAM" source="Gain" description="ndflow name, native type"/>
  <Attribute name="GainText" type="PARAM" source="GAIN" datatype="STRING"/>
  <Attribute name="Sample" type="CONST" source="$(SAMPLE)" datatype="STRING" description="from a macro"/>
  <Attribute name="Energy" type="CONST" source="${E}" datatype="DOUBLE"/>
</Attributes>"#;

#[test]
fn a_driver_attaches_param_and_const_attributes_to_every_frame() {
    let dir = std::env::temp_dir().join(format!("ndflow-attrs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("driver.xml");
    std::fs::write(&file, DRIVER_XML).unwrap();
    let (g, rec) = graph_with_recorder("DRV");
    g.put("DRV", "Gain", 2.5).unwrap();
    g.put("DRV", "NDAttributesMacros", "SAMPLE=lysozyme, E=12.4")
        .unwrap();
    g.put("DRV", "NDAttributesFile", file.to_str().unwrap())
        .unwrap();
    assert_eq!(
        g.get("DRV", "NDAttributesStatus").unwrap(),
        ParamValue::Int(0)
    );
    acquire(&g, 3);
    let images = attr(&rec, "Images").unwrap();
    assert_eq!(images.value, AttrValue::Int32(3));
    assert_eq!(images.source_type, SourceType::Param);
    assert_eq!(
        (images.source.as_str(), images.description.as_str()),
        ("NIMAGES", "drvInfo name")
    );
    assert_eq!(attr(&rec, "Gain").unwrap().value, AttrValue::Float64(2.5));
    assert_eq!(
        attr(&rec, "GainText").unwrap().value,
        AttrValue::String("2.5".into())
    );
    assert_eq!(
        attr(&rec, "Sample").unwrap().value,
        AttrValue::String("lysozyme".into())
    );
    assert_eq!(
        attr(&rec, "Energy").unwrap().value,
        AttrValue::Float64(12.4)
    );
    // Values are read per frame: a change shows on the next acquisition.
    g.put("DRV", "Gain", 4.0).unwrap();
    acquire(&g, 1);
    assert_eq!(attr(&rec, "Gain").unwrap().value, AttrValue::Float64(4.0));
    assert_eq!(attr(&rec, "Images").unwrap().value, AttrValue::Int32(1));
    // An empty file name removes the list.
    g.put("DRV", "NDAttributesFile", "").unwrap();
    acquire(&g, 1);
    assert!(attr(&rec, "Gain").is_none());
    let _ = std::fs::remove_dir_all(&dir);
    g.shutdown();
}

#[test]
fn a_plugin_attaches_its_list_to_each_frame_it_processes() {
    let g = sim_graph(1);
    g.add_plugin("P1", Arc::new(TestPlugin::new())).unwrap();
    g.put("P1", "NDArrayPort", "DRV").unwrap();
    let rec = Arc::new(Recorder::default());
    g.add_plugin("REC", rec.clone()).unwrap();
    g.put("REC", "NDArrayPort", "P1").unwrap();
    let xml = r#"<Attributes><Attribute name="Where" type="CONST" source="P1"/>
        <Attribute name="Port" type="PARAM" source="PORT_NAME_SELF" datatype="STRING"/></Attributes>"#;
    g.put("P1", "NDAttributesFile", xml).unwrap();
    assert_eq!(
        g.get("P1", "NDAttributesStatus").unwrap(),
        ParamValue::Int(0)
    );
    acquire(&g, 2);
    assert_eq!(
        attr(&rec, "Where").unwrap().value,
        AttrValue::String("P1".into())
    );
    assert_eq!(
        attr(&rec, "Port").unwrap().value,
        AttrValue::String("P1".into())
    );
    g.shutdown();
}

#[test]
fn bad_files_set_the_status_and_attach_nothing() {
    let g = sim_graph(1);
    let status = |file: &str, macros: &str| {
        g.put("DRV", "NDAttributesMacros", macros).unwrap();
        g.put("DRV", "NDAttributesFile", file).unwrap();
        g.get("DRV", "NDAttributesStatus").unwrap()
    };
    let ok = r#"<Attributes><Attribute name="A" type="CONST" source="1"/></Attributes>"#;
    assert_eq!(status(ok, ""), ParamValue::Int(0));
    assert_eq!(
        status("/nonexistent/attrs.xml", ""),
        ParamValue::Int(1),
        "file not found"
    );
    assert_eq!(
        status("<Attributes><Attribute", ""),
        ParamValue::Int(2),
        "XML syntax"
    );
    let unknown =
        r#"<Attributes><Attribute name="X" type="PARAM" source="NoSuchParam"/></Attributes>"#;
    assert_eq!(status(unknown, ""), ParamValue::Int(2), "unknown parameter");
    let funct =
        r#"<Attributes><Attribute name="F" type="FUNCT" source="myAttrFunct1"/></Attributes>"#;
    assert_eq!(
        status(funct, ""),
        ParamValue::Int(0),
        "an unknown FUNCT is skipped with a warning (attr_funct.rs)"
    );
    let wrong_type = r#"<Attributes><Attribute name="T" type="PARAM" source="Gain" datatype="FLOAT"/></Attributes>"#;
    assert_eq!(status(wrong_type, ""), ParamValue::Int(2), "datatype");
    let macro_ =
        r#"<Attributes><Attribute name="M" type="CONST" source="$(UNDEFINED)"/></Attributes>"#;
    assert_eq!(
        status(macro_, "OTHER=1"),
        ParamValue::Int(3),
        "undefined macro"
    );
    assert_eq!(
        status(ok, "NOEQUALS"),
        ParamValue::Int(3),
        "malformed macro list"
    );
    g.shutdown();
}

/// A PV source whose values the test sets by hand (the IOC's CA reader is tested end to end).
#[derive(Default)]
struct HandReader {
    cells: Mutex<Vec<(String, String, PvCell)>>,
}

impl PvReader for HandReader {
    fn watch(&self, pv: &str, dbrtype: &str) -> PvCell {
        let cell: PvCell = Arc::new(Mutex::new(AttrValue::Undefined));
        self.cells
            .lock()
            .push((pv.to_string(), dbrtype.to_string(), cell.clone()));
        cell
    }
}

#[test]
fn epics_pv_attributes_carry_the_latest_monitored_value() {
    let (g, rec) = graph_with_recorder("DRV");
    let reader = Arc::new(HandReader::default());
    g.set_pv_reader(reader.clone());
    let xml = r#"<Attributes>
        <Attribute name="Ring" type="EPICS_PV" source="SR:Current" dbrtype="DBR_DOUBLE"/></Attributes>"#;
    g.put("DRV", "NDAttributesFile", xml).unwrap();
    acquire(&g, 1);
    // Not connected yet: the attribute is there, undefined (as areaDetector does).
    assert_eq!(attr(&rec, "Ring").unwrap().value, AttrValue::Undefined);
    {
        let cells = reader.cells.lock();
        assert_eq!(
            (cells[0].0.as_str(), cells[0].1.as_str()),
            ("SR:Current", "DBR_DOUBLE")
        );
        *cells[0].2.lock() = AttrValue::Float64(301.5);
    }
    acquire(&g, 1);
    let ring = attr(&rec, "Ring").unwrap();
    assert_eq!(ring.value, AttrValue::Float64(301.5));
    assert_eq!(ring.source_type, SourceType::EpicsPv);
    g.shutdown();
}
