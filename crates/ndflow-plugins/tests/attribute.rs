//! NDPluginAttribute: values, running sums and time series of chosen attributes (real and
//! virtual) on frames with known attributes, Reset, pass-through of (compressed) frames.

use std::sync::Arc;

use ndflow_core::{AttrValue, Codec, EpicsTimeStamp, NDArray, NDAttribute, ParamValue};
use ndflow_plugins::attribute::AttributePlugin;
use ndflow_runtime::PluginHarness;

type Harness = PluginHarness<AttributePlugin>;

fn frame(h: &Harness, k: i32) -> Arc<NDArray> {
    let mut f = NDArray::from_pixels(&h.pool, &[3], &[1u8, 2, 3]).unwrap();
    f.unique_id = 100 + k;
    f.time_stamp = 1000.0 + k as f64 * 0.25;
    f.epics_ts = EpicsTimeStamp {
        sec: 5000 + k as u32,
        nsec: 1000 * k as u32,
    };
    f.set_attribute(NDAttribute::new(
        "Temp",
        "",
        AttrValue::Float32(20.5 + k as f32),
    ));
    f.set_attribute(NDAttribute::new(
        "Counts",
        "",
        AttrValue::UInt16(7 * k as u16),
    ));
    f.set_attribute(NDAttribute::new("Label", "", AttrValue::String("x".into())));
    if k % 2 == 0 {
        f.set_attribute(NDAttribute::new(
            "EvenOnly",
            "",
            AttrValue::Int64(-3 * k as i64),
        ));
    }
    Arc::new(f)
}

fn series(h: &Harness, n: usize) -> Vec<f64> {
    match h.get(&format!("{n}:TSArrayValue")) {
        ParamValue::Array(a) => bytemuck::cast_slice::<u8, f64>(a.bytes()).to_vec(),
        v => panic!("not an array: {v}"),
    }
}

#[test]
fn values_sums_series_and_reset() {
    let h = PluginHarness::new(AttributePlugin::new());
    let names = [
        "Temp",
        "Counts",
        "EvenOnly",
        "NDArrayUniqueId",
        "NDArrayTimeStamp",
        "NDArrayEpicsTSSec",
        "NDArrayEpicsTSnSec",
        "Label",
    ];
    for (i, n) in names.iter().enumerate() {
        h.put(&format!("{}:AttrName", i + 1), *n).unwrap();
    }
    let ks = 1..=5;
    for k in ks.clone() {
        let f = frame(&h, k);
        let out = h.process_arc(&f).unwrap();
        assert_eq!(out.len(), 1);
        assert!(Arc::ptr_eq(&out[0], &f), "passes the frame on unchanged");
    }
    // Independent expectations per attribute, k = 1..=5.
    let temp: Vec<f64> = ks.clone().map(|k| (20.5 + k as f32) as f64).collect();
    let counts: Vec<f64> = ks.clone().map(|k| (7 * k) as f64).collect();
    let even: Vec<f64> = [2.0, 4.0].iter().map(|k| -3.0 * k).collect();
    let uid: Vec<f64> = ks.clone().map(|k| (100 + k) as f64).collect();
    let ts: Vec<f64> = ks.clone().map(|k| 1000.0 + k as f64 * 0.25).collect();
    let sec: Vec<f64> = ks.clone().map(|k| (5000 + k) as f64).collect();
    let nsec: Vec<f64> = ks.clone().map(|k| (1000 * k) as f64).collect();
    let want = [temp, counts, even, uid, ts, sec, nsec];
    for (i, w) in want.iter().enumerate() {
        let n = i + 1;
        assert_eq!(h.get_f64(&format!("{n}:Value")), *w.last().unwrap(), "{n}");
        assert_eq!(
            h.get_f64(&format!("{n}:ValueSum")),
            w.iter().sum::<f64>(),
            "{n}"
        );
        assert_eq!(series(&h, n), *w, "{n}");
    }
    // A string attribute has no value.
    assert_eq!(h.get_f64("8:Value"), 0.0);
    assert!(series(&h, 8).is_empty());

    h.put("Reset", 1).unwrap();
    assert_eq!(h.get("Reset").as_i64(), Some(0));
    for n in 1..=7 {
        assert_eq!(h.get_f64(&format!("{n}:Value")), 0.0);
        assert_eq!(h.get_f64(&format!("{n}:ValueSum")), 0.0);
        assert!(series(&h, n).is_empty());
    }
    h.process_arc(&frame(&h, 9)).unwrap();
    assert_eq!(h.get_f64("2:ValueSum"), 63.0);
    assert_eq!(series(&h, 2), vec![63.0]);
}

#[test]
fn compressed_frames_pass_and_count() {
    let h = PluginHarness::new(AttributePlugin::new());
    h.put("1:AttrName", "NDArrayUniqueId").unwrap();
    let mut f = NDArray::clone(&frame(&h, 3));
    f.codec = Codec {
        name: "lz4".into(),
        ..Codec::default()
    };
    f.compressed_size = 2;
    let f = Arc::new(f);
    let out = h.process_arc(&f).unwrap();
    assert!(Arc::ptr_eq(&out[0], &f));
    assert_eq!(h.get_f64("1:Value"), 103.0);
}
