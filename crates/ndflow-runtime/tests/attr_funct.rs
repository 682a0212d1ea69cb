//! NDAttributes files: FUNCT entries (the built-in functions) and PARAM's `addr`.

use std::sync::Arc;

use crate::common::*;
use ndflow_core::{
    AttrValue, NDArray, NDAttribute, ParamDef, ParamStore, ParamValue, Pool, SourceType,
};
use ndflow_runtime::attr_file::{AttributeList, LoadError};

/// A port with per-address records, as ROIStat's `1:Total`, `2:Total`.
const TABLE: &[ParamDef] = &[
    ParamDef::float64("Gain", 1.5),
    ParamDef::float64("1:Total", 10.0),
    ParamDef::float64("2:Total", 20.0),
    ParamDef::string("2:Name", "second"),
];

fn store() -> ParamStore {
    ParamStore::new(&[TABLE])
}

fn frame(unique_id: i32) -> NDArray {
    let pool = Pool::unlimited();
    let mut f = NDArray::from_pixels::<u8>(&pool, &[2], &[1, 2]).unwrap();
    f.unique_id = unique_id;
    f
}

fn load(xml: &str) -> Result<AttributeList, LoadError> {
    AttributeList::parse(xml, "", &store(), None)
}

fn value(f: &NDArray, name: &str) -> AttrValue {
    f.attribute(name)
        .map_or(AttrValue::Undefined, |a| a.value.clone())
}

const FUNCTS: &str = r#"<Attributes>
  <Attribute name="Wall"   type="FUNCT" source="wallTime"/>
  <Attribute name="Epoch"  type="FUNCT" source="epochSeconds"/>
  <Attribute name="Host"   type="FUNCT" source="hostName"/>
  <Attribute name="Pid"    type="FUNCT" source="processId"/>
  <Attribute name="Frame"  type="FUNCT" source="uniqueId" description="frame counter"/>
  <Attribute name="Ten"    type="FUNCT" source="constant" param="10"/>
  <Attribute name="Label"  type="FUNCT" source="constant" param="run 7"/>
  <Attribute name="Half"   type="FUNCT" source="constant" param="0.5" datatype="STRING"/>
  <Attribute name="Gain"   type="PARAM" source="Gain"/>
  <Attribute name="Scaled" type="FUNCT" source="expression" param="(Gain + Ten) * 2 - Frame / 4"/>
  <Attribute name="AsInt"  type="FUNCT" source="expression" param="Scaled / 10" datatype="INT"/>
  <Attribute name="Dangling" type="FUNCT" source="expression" param="NotThere + 1"/>
</Attributes>"#;

#[test]
fn each_built_in_function_gives_its_value() {
    let list = load(FUNCTS).unwrap();
    assert!(list.warnings().is_empty(), "{:?}", list.warnings());
    assert_eq!(list.len(), 12);
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let mut f = frame(8);
    list.apply(&mut f, &store());
    let AttrValue::String(wall) = value(&f, "Wall") else {
        panic!("wallTime is text")
    };
    assert_eq!(wall.len(), "2026-11-27T08:30:02.789Z".len(), "{wall}");
    assert!(wall.ends_with('Z') && wall.as_bytes()[10] == b'T', "{wall}");
    let AttrValue::Float64(epoch) = value(&f, "Epoch") else {
        panic!("epochSeconds is a double")
    };
    assert!((epoch - before).abs() < 5.0, "{epoch} vs {before}");
    assert!(wall.starts_with(&format!("{}", 1970 + (epoch / 31_556_952.0) as i64)));
    let AttrValue::String(host) = value(&f, "Host") else {
        panic!("hostName is text")
    };
    assert!(!host.is_empty());
    assert_eq!(
        value(&f, "Pid"),
        AttrValue::Int32(std::process::id() as i32)
    );
    assert_eq!(value(&f, "Frame"), AttrValue::Int32(8));
    let frame_attr = f.attribute("Frame").unwrap();
    assert_eq!(frame_attr.source_type, SourceType::Function);
    assert_eq!(
        (frame_attr.source.as_str(), frame_attr.description.as_str()),
        ("uniqueId", "frame counter")
    );
    assert_eq!(value(&f, "Ten"), AttrValue::Int32(10));
    assert_eq!(value(&f, "Label"), AttrValue::String("run 7".into()));
    assert_eq!(value(&f, "Half"), AttrValue::String("0.5".into()));
    assert_eq!(
        value(&f, "Scaled"),
        AttrValue::Float64((1.5 + 10.0) * 2.0 - 2.0)
    );
    assert_eq!(value(&f, "AsInt"), AttrValue::Int32(2));
    assert_eq!(value(&f, "Dangling"), AttrValue::Undefined);
    // Values follow the frame.
    let mut g = frame(40);
    list.apply(&mut g, &store());
    assert_eq!(value(&g, "Frame"), AttrValue::Int32(40));
    assert_eq!(value(&g, "Scaled"), AttrValue::Float64(23.0 - 10.0));
}

#[test]
fn an_expression_reads_the_attributes_already_on_the_frame() {
    let list = load(
        r#"<Attributes><Attribute name="Sum" type="FUNCT" source="expression" param="Driver1 * 2 + 1"/></Attributes>"#,
    )
    .unwrap();
    let mut f = frame(1);
    f.set_attribute(NDAttribute::new("Driver1", "", AttrValue::UInt16(20)));
    list.apply(&mut f, &store());
    assert_eq!(value(&f, "Sum"), AttrValue::Float64(41.0));
    let mut text = frame(1);
    text.set_attribute(NDAttribute::new(
        "Driver1",
        "",
        AttrValue::String("x".into()),
    ));
    list.apply(&mut text, &store());
    assert_eq!(
        value(&text, "Sum"),
        AttrValue::Undefined,
        "text is not a number"
    );
}

#[test]
fn an_unknown_function_is_skipped_with_one_warning_and_the_rest_loads() {
    let xml = r#"<Attributes>
      <Attribute name="A" type="CONST" source="1" datatype="INT"/>
      <Attribute name="F" type="FUNCT" source="myAttrFunct1" param="PI"/>
      <Attribute name="B" type="FUNCT" source="uniqueId"/>
    </Attributes>"#;
    let list = load(xml).unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list.warnings().len(), 1);
    let w = &list.warnings()[0];
    assert!(
        w.contains("Attribute #2 'F'") && w.contains("myAttrFunct1"),
        "{w}"
    );
    let mut f = frame(3);
    list.apply(&mut f, &store());
    assert_eq!(value(&f, "A"), AttrValue::Int32(1));
    assert_eq!(value(&f, "B"), AttrValue::Int32(3));
    assert!(f.attribute("F").is_none());
}

#[test]
fn an_expression_error_refuses_the_file_naming_the_entry() {
    let xml = r#"<Attributes>
      <Attribute name="A" type="CONST" source="1"/>
      <Attribute name="Bad" type="FUNCT" source="expression" param="(A + 2"/>
    </Attributes>"#;
    let Err(LoadError::Xml(msg)) = load(xml) else {
        panic!("an expression error is an XML error")
    };
    assert_eq!(
        msg,
        "Attribute #2 'Bad': expression '(A + 2': missing ')' at 7"
    );
    let empty =
        r#"<Attributes><Attribute name="E" type="FUNCT" source="expression"/></Attributes>"#;
    let Err(LoadError::Xml(msg)) = load(empty) else {
        panic!("an empty expression is an error")
    };
    assert!(msg.starts_with("Attribute #1 'E': expression ''"), "{msg}");
}

#[test]
fn param_addr_reads_the_record_of_that_address() {
    let xml = r#"<Attributes>
      <Attribute name="T0" type="PARAM" source="Total" addr="0"/>
      <Attribute name="T1" type="PARAM" source="Total" addr="1"/>
      <Attribute name="N1" type="PARAM" source="Name" addr="1" datatype="STRING"/>
      <Attribute name="G0" type="PARAM" source="Gain" addr="0"/>
      <Attribute name="G"  type="PARAM" source="Gain"/>
    </Attributes>"#;
    let list = load(xml).unwrap();
    let mut f = frame(1);
    list.apply(&mut f, &store());
    assert_eq!(value(&f, "T0"), AttrValue::Float64(10.0));
    assert_eq!(value(&f, "T1"), AttrValue::Float64(20.0));
    assert_eq!(value(&f, "N1"), AttrValue::String("second".into()));
    assert_eq!(
        value(&f, "G0"),
        AttrValue::Float64(1.5),
        "addr 0 is also the port's own"
    );
    assert_eq!(value(&f, "G"), AttrValue::Float64(1.5));
    let missing =
        r#"<Attributes><Attribute name="X" type="PARAM" source="Gain" addr="3"/></Attributes>"#;
    let Err(LoadError::Xml(msg)) = load(missing) else {
        panic!("no such address")
    };
    assert!(
        msg.contains("'X'") && msg.contains("addr 3") && msg.contains("4:Gain"),
        "{msg}"
    );
    let bad =
        r#"<Attributes><Attribute name="Y" type="PARAM" source="Gain" addr="one"/></Attributes>"#;
    let Err(LoadError::Xml(msg)) = load(bad) else {
        panic!("a bad address")
    };
    assert!(msg.contains("addr 'one'"), "{msg}");
}

#[test]
fn a_driver_stamps_funct_attributes_on_its_frames_and_an_unknown_one_does_not_fail_the_file() {
    let g = sim_graph(1);
    let rec = Arc::new(Recorder::default());
    g.add_plugin("REC", rec.clone()).unwrap();
    g.put("REC", "NDArrayPort", "DRV").unwrap();
    let xml = r#"<Attributes>
      <Attribute name="Counter" type="FUNCT" source="uniqueId"/>
      <Attribute name="Twice" type="FUNCT" source="expression" param="Counter * 2"/>
      <Attribute name="Site" type="FUNCT" source="mySiteFunction" param="X"/>
    </Attributes>"#;
    g.put("DRV", "NDAttributesFile", xml).unwrap();
    assert_eq!(
        g.get("DRV", "NDAttributesStatus").unwrap(),
        ParamValue::Int(0),
        "an unknown FUNCT is skipped, not an error"
    );
    configure_fast(&g, 3);
    g.put("DRV", "Acquire", 1).unwrap();
    wait_done(&g);
    let last = rec.last.lock().clone();
    let get = |n: &str| last.iter().find(|a| a.name == n).map(|a| a.value.clone());
    let Some(AttrValue::Int32(id)) = get("Counter") else {
        panic!("Counter: {last:?}")
    };
    assert!(id >= 3, "{id}");
    assert_eq!(get("Twice"), Some(AttrValue::Float64(2.0 * id as f64)));
    assert_eq!(get("Site"), None);
    g.shutdown();
}
