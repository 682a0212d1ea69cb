use super::*;

/// Exercises each rule: orphan category, Group, every type, access through pValue, limits,
/// hex values, an unknown node type, a dangling pFeature, long names and clashes.
const XML: &str = r#"<?xml version="1.0" encoding="utf-8"?>
<RegisterDescription ModelName="Test" VendorName="ndflow" xmlns="http://www.genicam.org/GenApi/Version_1_0">
  <Category Name="Root">
    <pFeature>ImageFormatControl</pFeature>
    <pFeature>AcquisitionControl</pFeature>
  </Category>
  <Category Name="ImageFormatControl">
    <pFeature>Width</pFeature>
    <pFeature>PixelFormat</pFeature>
    <pFeature>Masked</pFeature>
    <pFeature>Nowhere</pFeature>
    <pFeature>Width</pFeature>
  </Category>
  <Group Comment="acquisition">
    <Category Name="AcquisitionControl">
      <pFeature>AcquisitionStart</pFeature>
      <pFeature>ExposureTime</pFeature>
      <pFeature>AcquisitionFrameRateControlEnable</pFeature>
      <pFeature>PayloadSize</pFeature>
      <pFeature>DeviceManufacturerInfo</pFeature>
    </Category>
  </Group>
  <Category Name="Orphan">
    <pFeature>Gain</pFeature>
    <pFeature>ABCDEFGHIJKLMNOPQR1</pFeature>
    <pFeature>ABCDEFGHIJKLMNOPQR2</pFeature>
    <pFeature>ABCDEFGHIJKLMNOPQR3</pFeature>
  </Category>
  <Integer Name="Width">
    <DisplayName>Width</DisplayName>
    <pValue>WidthReg</pValue>
    <Min>1</Min>
    <Max>0x800</Max>
    <Unit>px</Unit>
  </Integer>
  <IntReg Name="WidthReg"><Address>0x100</Address><Length>4</Length><AccessMode>RW</AccessMode></IntReg>
  <Enumeration Name="PixelFormat">
    <EnumEntry Name="Mono8"><Value>0x01080001</Value></EnumEntry>
    <EnumEntry Name="Mono16"><Value>17825799</Value></EnumEntry>
    <EnumEntry Name="AVeryLongEntryNameIndeed"><Value>3</Value></EnumEntry>
    <EnumEntry Name="E4"><Value>4</Value></EnumEntry>
    <EnumEntry Name="E5"><Value>5</Value></EnumEntry>
    <EnumEntry Name="E6"><Value>6</Value></EnumEntry>
    <EnumEntry Name="E7"><Value>7</Value></EnumEntry>
    <EnumEntry Name="E8"><Value>8</Value></EnumEntry>
    <EnumEntry Name="E9"><Value>9</Value></EnumEntry>
    <EnumEntry Name="E10"><Value>10</Value></EnumEntry>
    <EnumEntry Name="E11"><Value>11</Value></EnumEntry>
    <EnumEntry Name="E12"><Value>12</Value></EnumEntry>
    <EnumEntry Name="E13"><Value>13</Value></EnumEntry>
    <EnumEntry Name="E14"><Value>14</Value></EnumEntry>
    <EnumEntry Name="E15"><Value>15</Value></EnumEntry>
    <EnumEntry Name="E16"><Value>16</Value></EnumEntry>
    <EnumEntry Name="E17"><Value>17</Value></EnumEntry>
    <pValue>PixelFormatReg</pValue>
  </Enumeration>
  <IntReg Name="PixelFormatReg"><AccessMode>RO</AccessMode></IntReg>
  <MaskedIntReg Name="Masked"><AccessMode>RW</AccessMode></MaskedIntReg>
  <Command Name="AcquisitionStart"><pValue>CommandReg</pValue><CommandValue>1</CommandValue></Command>
  <IntReg Name="CommandReg"><AccessMode>WO</AccessMode></IntReg>
  <Float Name="ExposureTime">
    <pValue>ExposureConverter</pValue>
    <Min>10.0</Min>
    <Max>1e7</Max>
    <Unit>us</Unit>
  </Float>
  <Converter Name="ExposureConverter"><pValue>ExposureReg</pValue></Converter>
  <IntReg Name="ExposureReg"><AccessMode>RW</AccessMode></IntReg>
  <Boolean Name="AcquisitionFrameRateControlEnable"><ImposedAccessMode>RO</ImposedAccessMode><pValue>ExposureReg</pValue></Boolean>
  <IntSwissKnife Name="PayloadSize"><Formula>1</Formula></IntSwissKnife>
  <StringReg Name="DeviceManufacturerInfo"><AccessMode>RO</AccessMode></StringReg>
  <SwissKnife Name="Gain"><pVariable Name="X">ExposureReg</pVariable><Formula>X</Formula></SwissKnife>
  <Integer Name="ABCDEFGHIJKLMNOPQR1"><Value>1</Value></Integer>
  <Integer Name="ABCDEFGHIJKLMNOPQR2"><Value>2</Value></Integer>
  <Integer Name="ABCDEFGHIJKLMNOPQR3"><Value>3</Value></Integer>
</RegisterDescription>
"#;

fn names(list: &FeatureList) -> Vec<&str> {
    list.features.iter().map(|f| f.name.as_str()).collect()
}

#[test]
fn order_and_reach_follow_make_db() {
    let list = parse(XML).unwrap();
    // Categories in document order, own features before subcategories, each feature once;
    // the orphan category's features are listed too.
    assert_eq!(
        names(&list),
        [
            "Width",
            "PixelFormat",
            "AcquisitionStart",
            "ExposureTime",
            "AcquisitionFrameRateControlEnable",
            "PayloadSize",
            "DeviceManufacturerInfo",
            "Gain",
            "ABCDEFGHIJKLMNOPQR1",
            "ABCDEFGHIJKLMNOPQR2",
            "ABCDEFGHIJKLMNOPQR3",
        ]
    );
    assert!(list.get("Width").unwrap().under_root);
    assert!(list.get("AcquisitionStart").unwrap().under_root);
    let gain = list.get("Gain").unwrap();
    assert_eq!((gain.category.as_str(), gain.under_root), ("Orphan", false));
    assert_eq!(
        list.skipped,
        [
            Skipped {
                name: "Masked".into(),
                node: Some("MaskedIntReg".into())
            },
            Skipped {
                name: "Nowhere".into(),
                node: None
            },
        ]
    );
}

#[test]
fn types_access_limits_and_entries() {
    let list = parse(XML).unwrap();
    let f = |n| list.get(n).unwrap();
    let w = f("Width");
    assert_eq!(
        (w.kind, w.access, w.writable),
        (FeatureType::Integer, Access::RW, true)
    );
    assert_eq!(
        (w.min, w.max),
        (Some(Limit::Int(1)), Some(Limit::Int(2048)))
    );
    assert_eq!(w.unit.as_deref(), Some("px"));
    assert_eq!(w.drv_info, "GC_I_Width");

    let pf = f("PixelFormat");
    assert_eq!(
        (pf.kind, pf.access, pf.writable),
        (FeatureType::Enumeration, Access::RO, false)
    );
    assert_eq!(pf.entries.len(), 17);
    assert_eq!(pf.entries[0].value, Some(0x0108_0001));
    let states = pf.epics_states();
    assert_eq!(states.len(), 16);
    assert_eq!(states[2], ("AVeryLongEntryNa".to_string(), Some(3)));
    assert_eq!(pf.drv_info, "GC_E_PixelFormat");

    let cmd = f("AcquisitionStart");
    assert_eq!(
        (cmd.kind, cmd.access, cmd.drv_info.as_str()),
        (FeatureType::Command, Access::WO, "GC_C_AcquisitionStart")
    );
    let exp = f("ExposureTime");
    assert_eq!((exp.kind, exp.access), (FeatureType::Float, Access::RW));
    assert_eq!(
        (exp.min, exp.max),
        (Some(Limit::Float(10.0)), Some(Limit::Float(1e7)))
    );
    assert_eq!(exp.drv_info, "GC_D_ExposureTime");
    let b = f("AcquisitionFrameRateControlEnable");
    assert_eq!((b.kind, b.access), (FeatureType::Boolean, Access::RO));
    let p = f("PayloadSize");
    assert_eq!((p.kind, p.access), (FeatureType::Integer, Access::RO));
    let s = f("DeviceManufacturerInfo");
    assert_eq!(
        (s.kind, s.access, s.drv_info.as_str()),
        (
            FeatureType::String,
            Access::RO,
            "GC_S_DeviceManufacturerInfo"
        )
    );
    // A SwissKnife's pVariable is no pValue: read-only.
    let g = f("Gain");
    assert_eq!((g.kind, g.access), (FeatureType::Float, Access::RO));
    // A constant Integer without AccessMode or pValue is RW to makeDb.py.
    assert_eq!(f("ABCDEFGHIJKLMNOPQR1").access, Access::RW);
}

#[test]
fn record_names_are_shortened_then_cut_then_numbered() {
    let list = parse(XML).unwrap();
    let pv = |n| list.get(n).unwrap().pv.as_str();
    assert_eq!(pv("Width"), "GC_Width");
    assert_eq!(pv("ExposureTime"), "GC_ExposureTime");
    // 25 characters: "Device" cut first (22, still long), then "Manufacturer".
    assert_eq!(pv("DeviceManufacturerInfo"), "GC_DevManInfo");
    // Cut word by word from the left until it fits: Acq, Fra, Rat, Con (21), Ena (18).
    assert_eq!(
        pv("AcquisitionFrameRateControlEnable"),
        "GC_AcqFraRatConEna"
    );
    // Single-letter words cannot be cut: hard cut to 20, then the tail becomes a counter.
    assert_eq!(pv("ABCDEFGHIJKLMNOPQR1"), "GC_ABCDEFGHIJKLMNOPQ");
    assert_eq!(pv("ABCDEFGHIJKLMNOPQR2"), "GC_ABCDEFGHIJKLMNOP0");
    assert_eq!(pv("ABCDEFGHIJKLMNOPQR3"), "GC_ABCDEFGHIJKLMNOP1");
}

#[test]
fn shorten_and_words_match_the_regex() {
    assert_eq!(
        words("GC_AcquisitionFrameRate"),
        ["G", "C_", "Acquisition", "Frame", "Rate"]
    );
    assert_eq!(words("GC_Gain2Raw_x"), ["G", "C_", "Gain2", "Raw_x"]);
    assert_eq!(shorten("GC_AcquisitionFrameRate"), "GC_AcqFrameRate");
    assert_eq!(shorten("GC_TriggerActivation"), "GC_TriggerActivation");
    assert_eq!(shorten("GC_ChunkEnableTimestampLatch"), "GC_ChuEnaTimLatch");
}

#[test]
fn counter_overwrites_more_of_the_tail_past_nine() {
    // Names that all hard-cut to the same 20 characters (single-letter words cannot be cut);
    // expected values from makeDb.py itself.
    let mut n = RecordNames::default();
    for c in 'A'..='M' {
        n.add(&format!("ABCDEFGHIJKLMNOPQRS{c}"), "GC");
    }
    assert_eq!(n.get("ABCDEFGHIJKLMNOPQRSA"), Some("GC_ABCDEFGHIJKLMNOPQ"));
    assert_eq!(n.get("ABCDEFGHIJKLMNOPQRSB"), Some("GC_ABCDEFGHIJKLMNOP0"));
    assert_eq!(n.get("ABCDEFGHIJKLMNOPQRSK"), Some("GC_ABCDEFGHIJKLMNOP9"));
    assert_eq!(n.get("ABCDEFGHIJKLMNOPQRSL"), Some("GC_ABCDEFGHIJKLMNO10"));
    assert_eq!(n.get("ABCDEFGHIJKLMNOPQRSM"), Some("GC_ABCDEFGHIJKLMNO11"));
    // A repeated node name clashes with its own earlier name, then gives it up.
    let mut r = RecordNames::default();
    let mut seen = Vec::new();
    for _ in 0..3 {
        r.add("Foo", "GC");
        seen.push(r.get("Foo").unwrap_or_default().to_string());
    }
    assert_eq!(seen, ["GC_Foo", "GC_Fo0", "GC_Foo"]);
}

#[test]
fn bad_xml_and_prefix_are_errors() {
    assert!(matches!(
        parse("<RegisterDescription>"),
        Err(FeatureError::Xml(_))
    ));
    assert!(matches!(
        parse_with_prefix(XML, "GCX"),
        Err(FeatureError::Prefix(_))
    ));
    let other = parse_with_prefix(XML, "AR").unwrap();
    assert_eq!(other.get("Width").unwrap().drv_info, "AR_I_Width");
    assert_eq!(other.get("Width").unwrap().pv, "AR_Width");
}

#[test]
fn a_leading_camera_id_line_is_skipped() {
    let with_id = format!("127.0.0.1\n{XML}");
    assert_eq!(names(&parse(&with_id).unwrap()).len(), 11);
}
