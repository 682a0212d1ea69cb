//! NDPosPlugin: XML position lists (inline and file, appended), Discard vs Keep, Reset and
//! Delete, missing/duplicate frame counting by uniqueId and by an ID attribute, and the
//! attributes attached to each frame.

use std::sync::Arc;

use ndflow_core::{AttrValue, NDArray, NDAttribute, ParamValue};
use ndflow_plugins::pos::{parse_positions, PosPlugin};
use ndflow_runtime::{PluginError, PluginHarness};

type Harness = PluginHarness<PosPlugin>;

/// `<pos_layout>` with dims x, y and the given (x, y) positions.
fn xml(points: &[(i32, i32)]) -> String {
    let pos: String = points
        .iter()
        .map(|(x, y)| format!("<position x=\"{x}\" y=\"{y}\"/>"))
        .collect();
    format!(
        "<?xml version=\"1.0\"?><pos_layout><dimensions><dimension name=\"x\"/>\
         <dimension name=\"y\"/></dimensions><positions>{pos}</positions></pos_layout>"
    )
}

fn frame(h: &Harness, id: i32) -> Arc<NDArray> {
    let mut f = NDArray::from_pixels(&h.pool, &[2], &[1u8, 2]).unwrap();
    f.unique_id = id;
    f.set_attribute(NDAttribute::new("FrameNo", "", AttrValue::Int32(id * 2)));
    Arc::new(f)
}

/// Feeds `ids`; returns (uniqueId, x, y) of each frame passed on.
fn feed(h: &Harness, ids: &[i32]) -> Vec<(i32, i32, i32)> {
    let mut out = Vec::new();
    for &id in ids {
        for o in h.process_arc(&frame(h, id)).unwrap() {
            let get = |n: &str| match o.attribute(n).map(|a| &a.value) {
                Some(AttrValue::Int32(v)) => *v,
                other => panic!("frame {id}: attribute {n} is {other:?}"),
            };
            out.push((o.unique_id, get("x"), get("y")));
        }
    }
    out
}

fn int(h: &Harness, n: &str) -> i64 {
    h.get(n).as_i64().unwrap()
}

const PTS: [(i32, i32); 6] = [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1)];

#[test]
fn discard_mode_attaches_positions_in_order() {
    let h = PluginHarness::new(PosPlugin::new());
    h.put("Filename", xml(&PTS)).unwrap();
    assert_eq!(int(&h, "FileValid"), 1);
    assert_eq!(int(&h, "Qty"), 6);
    // Idle: frames are not passed on.
    assert!(feed(&h, &[1, 2]).is_empty());
    h.put("Running", 1).unwrap();
    assert_eq!(int(&h, "ExpectedID"), 1);
    let got = feed(&h, &[1, 2, 3]);
    assert_eq!(got, vec![(1, 0, 0), (2, 1, 0), (3, 2, 0)]);
    assert_eq!(int(&h, "Qty"), 3);
    assert_eq!(int(&h, "Index"), 0);
    assert_eq!(h.get("Position"), ParamValue::from("[x=2,y=0]"));
    assert_eq!(int(&h, "ExpectedID"), 4);
    let got = feed(&h, &[4, 5, 6, 7]);
    assert_eq!(got, vec![(4, 0, 1), (5, 1, 1), (6, 2, 1)]);
    assert_eq!(int(&h, "Qty"), 0);
    assert_eq!(int(&h, "Running"), 0, "list used up: Running back to Idle");
    assert_eq!((int(&h, "Missing"), int(&h, "Duplicate")), (0, 0));
}

#[test]
fn missing_and_duplicate_frames_discard() {
    let h = PluginHarness::new(PosPlugin::new());
    h.put("Filename", xml(&PTS)).unwrap();
    h.put("Running", 1).unwrap();
    // 2 and 3 never come: their positions are skipped, 4 still gets its own.
    // 4 again is a duplicate and is not passed on.
    let got = feed(&h, &[1, 4, 4, 5]);
    assert_eq!(got, vec![(1, 0, 0), (4, 0, 1), (5, 1, 1)]);
    assert_eq!(int(&h, "Missing"), 2);
    assert_eq!(int(&h, "Duplicate"), 1);
    assert_eq!(int(&h, "ExpectedID"), 6);
    assert_eq!(int(&h, "Qty"), 1);
    // Counters are writable (reset to 0), as longouts.
    h.put("Missing", 0).unwrap();
    assert_eq!(feed(&h, &[6]), vec![(6, 2, 1)]);
    assert_eq!(int(&h, "Missing"), 0);
}

#[test]
fn keep_mode_reset_and_missing() {
    let h = PluginHarness::new(PosPlugin::new());
    h.put("Mode", "Keep").unwrap();
    h.put("Filename", xml(&PTS[..3])).unwrap();
    h.put("IDStart", 10).unwrap();
    h.put("IDDifference", 2).unwrap();
    h.put("Running", 1).unwrap();
    assert_eq!(int(&h, "ExpectedID"), 10);
    // 10 -> (0,0); 12 missing; 14 -> (2,0) and the list is used up.
    let got = feed(&h, &[10, 14]);
    assert_eq!(got, vec![(10, 0, 0), (14, 2, 0)]);
    assert_eq!(int(&h, "Missing"), 1);
    assert_eq!(int(&h, "Index"), 3);
    assert_eq!(int(&h, "Qty"), 3, "Keep: positions stay");
    assert_eq!(int(&h, "Running"), 0);
    // Reset replays the list from the start.
    h.put("Reset", 1).unwrap();
    assert_eq!(int(&h, "Index"), 0);
    assert_eq!(h.get("Position"), ParamValue::from(""));
    h.put("Running", 1).unwrap();
    assert_eq!(
        feed(&h, &[10, 12, 14]),
        vec![(10, 0, 0), (12, 1, 0), (14, 2, 0)]
    );
}

#[test]
fn id_from_attribute() {
    let h = PluginHarness::new(PosPlugin::new());
    h.put("Filename", xml(&PTS)).unwrap();
    h.put("IDName", "FrameNo").unwrap();
    h.put("IDStart", 2).unwrap();
    h.put("IDDifference", 2).unwrap();
    h.put("Running", 1).unwrap();
    // FrameNo = 2 * uniqueId: 2, 4, then 8 (6 missing).
    assert_eq!(feed(&h, &[1, 2, 4]), vec![(1, 0, 0), (2, 1, 0), (4, 0, 1)]);
    assert_eq!(int(&h, "Missing"), 1);
    // A frame without the attribute stops the run, naming it.
    h.put("IDName", "Nope").unwrap();
    let e = h.process_arc(&frame(&h, 5)).unwrap_err();
    assert!(
        matches!(&e, PluginError::Other(m) if m.contains("'Nope'")),
        "{e}"
    );
    assert_eq!(int(&h, "Running"), 0);
}

#[test]
fn append_file_and_delete() {
    let dir = std::env::temp_dir().join(format!("ndflow-pos-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("scan.xml");
    std::fs::write(&file, xml(&PTS[3..])).unwrap();
    let h = PluginHarness::new(PosPlugin::new());
    h.put("Filename", xml(&PTS[..3])).unwrap();
    h.put("Filename", file.to_str().unwrap()).unwrap();
    assert_eq!(int(&h, "FileValid"), 1);
    assert_eq!(int(&h, "Qty"), 6, "appended");
    h.put("Running", 1).unwrap();
    let got: Vec<(i32, i32)> = feed(&h, &[1, 2, 3, 4, 5, 6])
        .iter()
        .map(|&(_, x, y)| (x, y))
        .collect();
    assert_eq!(got, PTS.to_vec());
    // A bad load appends nothing.
    h.put("Filename", xml(&PTS[..2])).unwrap();
    h.put("Filename", dir.join("missing.xml").to_str().unwrap())
        .unwrap();
    assert_eq!(int(&h, "FileValid"), 0);
    assert_eq!(int(&h, "Qty"), 2);
    h.put("Delete", 1).unwrap();
    assert_eq!(int(&h, "Qty"), 0);
    // Running with an empty list: the next frame finds nothing to attach, is not passed on,
    // and Running goes back to Idle.
    h.put("Running", 1).unwrap();
    assert_eq!(int(&h, "Running"), 1);
    assert!(feed(&h, &[7]).is_empty());
    assert_eq!(int(&h, "Running"), 0);
    // A list loaded after Running is set is used.
    h.put("Running", 1).unwrap();
    h.put("Filename", xml(&PTS[..1])).unwrap();
    assert_eq!(feed(&h, &[1]), vec![(1, 0, 0)]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn parse_errors_name_the_fault() {
    let e = parse_positions(
        "<pos_layout><dimensions><dimension name=\"x\"/></dimensions>\
         <positions><position x=\"1\"/><position x=\"a\"/></positions></pos_layout>",
    )
    .unwrap_err();
    assert!(e.contains("position 2") && e.contains("x=\"a\""), "{e}");
    let e = parse_positions(
        "<pos_layout><dimensions><dimension name=\"x\"/>\
         <dimension name=\"y\"/></dimensions><positions><position x=\"1\"/></positions>\
         </pos_layout>",
    )
    .unwrap_err();
    assert!(e.contains("no 'y'"), "{e}");
    let e = parse_positions("<layout/>").unwrap_err();
    assert!(e.contains("<layout>"), "{e}");
    assert!(parse_positions("<pos_layout>")
        .unwrap_err()
        .starts_with("XML"));
}
