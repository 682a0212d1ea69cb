//! NDPluginCircularBuff: pre/post counts around attribute-driven and soft triggers, re-arm
//! with PresetTriggerCount 0 vs N, order and uniqueIds of the emitted frames (the very
//! frames that came in: pixels shared), FlushOnSoftTrg, and the accounting through a graph.

use std::sync::Arc;
use std::time::Duration;

use ndflow_core::{AttrValue, NDArray, NDAttribute, ParamDef, ParamStore, ParamValue, Pool};
use ndflow_plugins::circular_buff::CircularBuffPlugin;
use ndflow_runtime::{
    Driver, DriverError, Graph, Plugin, PluginError, PluginHarness, ProcessContext,
};

type Harness = PluginHarness<CircularBuffPlugin>;

/// Frame `id` with attribute `Gate` = `gate`.
fn frame(pool: &Pool, id: i32, gate: f64) -> Arc<NDArray> {
    let mut f = NDArray::from_pixels(pool, &[4, 2], &[id as u16; 8]).unwrap();
    f.unique_id = id;
    f.set_attribute(NDAttribute::new("Gate", "", AttrValue::Float64(gate)));
    f.set_attribute(NDAttribute::new("Level", "", AttrValue::Int32(id * 10)));
    Arc::new(f)
}

fn harness(pre: i64, post: i64, preset: i64) -> Harness {
    let h = PluginHarness::new(CircularBuffPlugin::new());
    h.put("PreCount", pre).unwrap();
    h.put("PostCount", post).unwrap();
    h.put("PresetTriggerCount", preset).unwrap();
    h
}

/// Feeds frames `ids` (gate 1 where `gates` says so); returns the uniqueIds emitted.
fn feed(h: &Harness, ids: std::ops::RangeInclusive<i32>, gate_at: &[i32]) -> Vec<i32> {
    let mut out = Vec::new();
    for id in ids {
        let g = if gate_at.contains(&id) { 1.0 } else { 0.0 };
        let f = frame(&h.pool, id, g);
        for o in h.process_arc(&f).unwrap() {
            out.push(o.unique_id);
        }
    }
    out
}

fn int(h: &Harness, name: &str) -> i64 {
    h.get(name).as_i64().unwrap()
}

#[test]
fn attribute_trigger_sends_pre_then_post_in_order() {
    let h = harness(3, 4, 1);
    h.put("TriggerA", "Gate").unwrap();
    h.put("TriggerB", "Level").unwrap();
    h.put("TriggerCalc", "A>0.5 && B>=0").unwrap();
    // Not capturing: nothing passes, nothing is kept.
    assert!(feed(&h, 1..=3, &[2]).is_empty());
    h.put("Capture", 1).unwrap();
    assert_eq!(h.get("StatusMessage"), ParamValue::from("Buffer filling"));
    // Frames 10..=15 fill and wrap the ring (keeps 13, 14, 15); 16 triggers.
    assert!(feed(&h, 10..=15, &[]).is_empty());
    assert_eq!(int(&h, "CurrentQty"), 3);
    assert_eq!(h.get("StatusMessage"), ParamValue::from("Buffer Wrapping"));
    assert_eq!(h.get_f64("TriggerAVal"), 0.0);
    assert_eq!(h.get_f64("TriggerBVal"), 150.0);
    let out = feed(&h, 16..=25, &[16]);
    // PreCount 3 before the trigger frame, PostCount 4 from it on: 7 frames, in order.
    assert_eq!(out, vec![13, 14, 15, 16, 17, 18, 19]);
    assert_eq!(h.get_f64("TriggerAVal"), 1.0);
    assert_eq!(h.get_f64("TriggerCalcVal"), 1.0);
    assert_eq!(int(&h, "ActualTriggerCount"), 1);
    assert_eq!(
        int(&h, "Capture"),
        0,
        "PresetTriggerCount 1 reached: capture ends"
    );
    assert_eq!(int(&h, "Trigger"), 0);
    assert_eq!(
        h.get("StatusMessage"),
        ParamValue::from("Acquisition Completed")
    );
}

#[test]
fn emitted_frames_are_the_input_frames() {
    let h = harness(2, 1, 1);
    h.put("Capture", 1).unwrap();
    let frames: Vec<_> = (1..=3).map(|i| frame(&h.pool, i, 0.0)).collect();
    for f in &frames[..2] {
        assert!(h.process_arc(f).unwrap().is_empty());
    }
    let out = h.put_emitted("Trigger", 1).unwrap();
    assert!(
        out.is_empty(),
        "OnNewImage: the ring waits for the next frame"
    );
    let out = h.process_arc(&frames[2]).unwrap();
    assert_eq!(out.len(), 3);
    for (o, f) in out.iter().zip(&frames) {
        assert!(Arc::ptr_eq(o, f), "no copy: the same frame goes on");
    }
}

#[test]
fn re_arm_forever_with_preset_zero() {
    let h = harness(2, 2, 0);
    h.put("TriggerA", "Gate").unwrap();
    h.put("TriggerCalc", "A").unwrap();
    h.put("Capture", 1).unwrap();
    let out = feed(&h, 1..=20, &[5, 12, 13, 19]);
    // Trigger at 5: ring 3,4 + 5,6. Ring refills 7..11 -> 10,11; trigger 12: 10,11,12,13
    // (13's gate comes while frames of the 12 trigger are still being sent: no new trigger).
    // Ring 14..18 -> 17,18; trigger 19: 17,18,19,20.
    assert_eq!(out, vec![3, 4, 5, 6, 10, 11, 12, 13, 17, 18, 19, 20]);
    assert_eq!(int(&h, "ActualTriggerCount"), 3);
    assert_eq!(
        int(&h, "Capture"),
        1,
        "PresetTriggerCount 0: still capturing"
    );
    assert_eq!(h.get("StatusMessage"), ParamValue::from("Buffer filling"));
}

#[test]
fn preset_n_stops_after_n_triggers() {
    let h = harness(1, 1, 2);
    h.put("TriggerA", "Gate").unwrap();
    h.put("TriggerCalc", "A=1").unwrap();
    h.put("Capture", 1).unwrap();
    let out = feed(&h, 1..=12, &[3, 6, 9]);
    assert_eq!(
        out,
        vec![2, 3, 5, 6],
        "the third trigger comes after capture ended"
    );
    assert_eq!(int(&h, "ActualTriggerCount"), 2);
    assert_eq!(int(&h, "Capture"), 0);
    // A new Capture resets the count and arms again.
    h.put("Capture", 1).unwrap();
    assert_eq!(int(&h, "ActualTriggerCount"), 0);
    assert_eq!(feed(&h, 13..=15, &[15]), vec![14, 15]);
}

#[test]
fn soft_trigger_on_new_image_and_immediately() {
    // OnNewImage: the ring goes with the next frame, which is the first post frame.
    let h = harness(3, 2, 1);
    h.put("Capture", 1).unwrap();
    assert!(feed(&h, 1..=5, &[]).is_empty());
    assert!(h.put_emitted("Trigger", 1).unwrap().is_empty());
    assert_eq!(int(&h, "Trigger"), 1, "busy until the post frames are out");
    assert_eq!(feed(&h, 6..=9, &[]), vec![3, 4, 5, 6, 7]);
    assert_eq!(int(&h, "Trigger"), 0);
    assert_eq!(int(&h, "Capture"), 0);

    // Immediately: the ring goes on the Trigger write itself.
    let h = harness(3, 2, 1);
    h.put("FlushOnSoftTrg", "Immediately").unwrap();
    h.put("Capture", 1).unwrap();
    assert!(feed(&h, 1..=5, &[]).is_empty());
    let ids: Vec<i32> = h
        .put_emitted("Trigger", 1)
        .unwrap()
        .iter()
        .map(|f| f.unique_id)
        .collect();
    assert_eq!(ids, vec![3, 4, 5]);
    assert_eq!(int(&h, "CurrentQty"), 0);
    assert_eq!(feed(&h, 6..=9, &[]), vec![6, 7]);
    assert_eq!(int(&h, "ActualTriggerCount"), 1);
}

#[test]
fn soft_trigger_while_not_capturing_is_ignored() {
    let h = harness(3, 2, 1);
    h.put("Trigger", 1).unwrap();
    assert_eq!(int(&h, "Trigger"), 0, "completes at once");
    h.put("Capture", 1).unwrap();
    assert!(
        feed(&h, 1..=4, &[]).is_empty(),
        "no trigger armed from before"
    );
}

#[test]
fn trigger_on_virtual_uniqueid_and_counters() {
    let h = harness(2, 3, 1);
    h.put("TriggerA", "NDArrayUniqueId").unwrap();
    // E = CurrentQty: only once the ring is full.
    h.put("TriggerCalc", "A>=4 && E=C").unwrap();
    h.put("Capture", 1).unwrap();
    assert_eq!(feed(&h, 1..=10, &[]), vec![2, 3, 4, 5, 6]);
}

#[test]
fn bad_expression_reports_token_and_never_triggers() {
    let h = harness(2, 1, 1);
    h.put("TriggerA", "Gate").unwrap();
    h.put("TriggerCalc", "A > > 1").unwrap();
    h.put("Capture", 1).unwrap();
    assert!(feed(&h, 1..=5, &[1, 2, 3, 4, 5]).is_empty());
    let msg = h.get("StatusMessage").to_string();
    assert!(
        msg.contains("TriggerCalc") && msg.contains("'>' at offset 4"),
        "{msg}"
    );
    // An empty expression is "0", as ADCore.
    h.put("TriggerCalc", "").unwrap();
    assert_eq!(h.get("TriggerCalc"), ParamValue::from("0"));
}

#[test]
fn pre_count_refused_while_capturing() {
    let h = harness(3, 1, 1);
    h.put("Capture", 1).unwrap();
    h.put("PreCount", 7).unwrap();
    assert_eq!(int(&h, "PreCount"), 3);
    assert_eq!(
        h.get("StatusMessage"),
        ParamValue::from("Stop acquisition to set pre-count")
    );
    h.put("Capture", 0).unwrap();
    assert_eq!(
        h.get("StatusMessage"),
        ParamValue::from("Acquisition Stopped")
    );
    h.put("PreCount", 7).unwrap();
    assert_eq!(int(&h, "PreCount"), 7);
}

#[test]
fn pre_count_zero_sends_only_post_frames() {
    let h = harness(0, 2, 1);
    h.put("TriggerA", "Gate").unwrap();
    h.put("TriggerCalc", "A").unwrap();
    h.put("Capture", 1).unwrap();
    assert_eq!(feed(&h, 1..=6, &[4]), vec![4, 5]);
}

/// Frames with uniqueIds 1, 2, ... (the port numbers them).
struct Source;

impl Driver for Source {
    fn driver_type(&self) -> &'static str {
        "testSource"
    }
    fn params(&self) -> &'static [ParamDef] {
        &[]
    }
    fn init(&mut self, _params: &ParamStore) -> Result<(), DriverError> {
        Ok(())
    }
    fn acquire(&mut self, _params: &ParamStore, pool: &Pool) -> Result<NDArray, DriverError> {
        Ok(NDArray::from_pixels(pool, &[8], &[0u8; 8])?)
    }
}

/// Records the uniqueIds it is offered.
#[derive(Default)]
struct Sink(parking_lot::Mutex<Vec<i32>>);

impl Plugin for Sink {
    fn plugin_type(&self) -> &'static str {
        "testSink"
    }
    fn params(&self) -> &'static [ParamDef] {
        &[]
    }
    fn process(&self, f: &Arc<NDArray>, _: &mut ProcessContext<'_>) -> Result<(), PluginError> {
        self.0.lock().push(f.unique_id);
        Ok(())
    }
}

/// Through a graph: an immediate soft trigger sends the ring from the put itself (no frame
/// flows after it), and every frame offered to the port is counted.
#[test]
fn immediate_flush_through_a_port() {
    let g = Graph::new(2);
    g.add_driver("DRV", Box::new(Source)).unwrap();
    g.add_plugin("CB", Arc::new(CircularBuffPlugin::new()))
        .unwrap();
    let sink = Arc::new(Sink::default());
    g.add_plugin("SINK", sink.clone()).unwrap();
    g.put("CB", "NDArrayPort", "DRV").unwrap();
    g.put("SINK", "NDArrayPort", "CB").unwrap();
    g.put("CB", "QueueSize", 100).unwrap();
    g.put("SINK", "QueueSize", 100).unwrap();
    g.put("CB", "PreCount", 4).unwrap();
    g.put("CB", "PostCount", 2).unwrap();
    g.put("CB", "FlushOnSoftTrg", "Immediately").unwrap();
    g.put("CB", "Capture", 1).unwrap();
    g.put("DRV", "AcquireTime", 0.0).unwrap();
    g.put("DRV", "AcquirePeriod", 0.0).unwrap();
    g.put("DRV", "ImageMode", "Multiple").unwrap();
    g.put("DRV", "NumImages", 10).unwrap();
    g.put("DRV", "Acquire", 1).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert!(g.wait_idle(Duration::from_secs(30)));
    let first = *sink.0.lock().first().unwrap_or(&0);
    assert!(
        sink.0.lock().is_empty(),
        "nothing before the trigger (got {first})"
    );
    g.put("CB", "Trigger", 1).unwrap();
    assert!(g.wait_idle(Duration::from_secs(30)));
    assert_eq!(*sink.0.lock(), vec![7, 8, 9, 10]);
    let a = g.plugin("CB").unwrap().accounting();
    assert!(a.is_conserved());
    assert_eq!((a.offered, a.processed), (10, 10));
    g.shutdown();
}
