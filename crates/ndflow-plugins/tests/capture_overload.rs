//! Attribute -> Pos -> CircularBuff under overload (queues of 2, a driver with no period):
//! every frame offered to each port is processed or dropped with a reason, and each port is
//! offered exactly what the one before it passed on.

use std::sync::Arc;
use std::time::Duration;

use ndflow_core::{NDArray, ParamDef, ParamStore, Pool};
use ndflow_plugins::attribute::AttributePlugin;
use ndflow_plugins::circular_buff::CircularBuffPlugin;
use ndflow_plugins::pos::PosPlugin;
use ndflow_runtime::{Driver, DriverError, DropReason, Graph};

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
        Ok(NDArray::from_pixels(pool, &[64, 64], &[7u16; 64 * 64])?)
    }
}

#[test]
fn every_frame_is_counted_under_overload() {
    let n = 3000;
    let g = Graph::new(2);
    g.add_driver("DRV", Box::new(Source)).unwrap();
    g.add_plugin("ATTR", Arc::new(AttributePlugin::new()))
        .unwrap();
    g.add_plugin("POS", Arc::new(PosPlugin::new())).unwrap();
    g.add_plugin("CB", Arc::new(CircularBuffPlugin::new()))
        .unwrap();
    for (port, src) in [("ATTR", "DRV"), ("POS", "ATTR"), ("CB", "POS")] {
        g.put(port, "NDArrayPort", src).unwrap();
        g.put(port, "QueueSize", 2).unwrap();
    }
    g.put("ATTR", "1:AttrName", "NDArrayUniqueId").unwrap();
    let points: String = (0..n).map(|i| format!("<position i=\"{i}\"/>")).collect();
    let xml = format!(
        "<pos_layout><dimensions><dimension name=\"i\"/></dimensions>\
         <positions>{points}</positions></pos_layout>"
    );
    g.put("POS", "Filename", xml.as_str()).unwrap();
    g.put("POS", "Running", 1).unwrap();
    g.put("CB", "PreCount", 5).unwrap();
    g.put("CB", "PostCount", 5).unwrap();
    g.put("CB", "PresetTriggerCount", 0).unwrap();
    g.put("CB", "TriggerA", "i").unwrap();
    g.put("CB", "TriggerCalc", "A%100=0").unwrap();
    g.put("CB", "Capture", 1).unwrap();
    g.put("DRV", "AcquireTime", 0.0).unwrap();
    g.put("DRV", "AcquirePeriod", 0.0).unwrap();
    g.put("DRV", "ImageMode", "Multiple").unwrap();
    g.put("DRV", "NumImages", n).unwrap();
    g.put("DRV", "Acquire", 1).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert!(g.wait_idle(Duration::from_secs(60)));
    let acc = |p: &str| g.plugin(p).unwrap().accounting();
    let (attr, pos, cb) = (acc("ATTR"), acc("POS"), acc("CB"));
    for (name, a) in [("ATTR", attr), ("POS", pos), ("CB", cb)] {
        eprintln!("{name}: {a:?}");
        assert!(a.is_conserved(), "{name}: {a:?}");
        assert_eq!(a.queued + a.in_flight, 0, "{name}");
        let full = a.dropped(DropReason::QueueFull);
        assert_eq!(a.dropped_total(), full, "{name}: only queue-full drops");
    }
    assert_eq!(attr.offered, n as u64);
    // Attribute passes everything on; Pos passes what it processed (no missing frames are
    // possible to skip beyond the list, no duplicates): each is offered what came before.
    assert_eq!(pos.offered, attr.processed);
    let ps = g.plugin("POS").unwrap();
    let missing = ps.params.get_by_name("Missing").unwrap().as_i64().unwrap();
    let dup = ps
        .params
        .get_by_name("Duplicate")
        .unwrap()
        .as_i64()
        .unwrap();
    assert_eq!(dup, 0);
    eprintln!("POS: Missing {missing}");
    // Frames dropped upstream show up as missing IDs, never as wrong positions.
    let upstream_lost = n as u64 - pos.processed;
    assert!(
        missing as u64 <= upstream_lost,
        "{missing} > {upstream_lost}"
    );
    assert_eq!(cb.offered, pos.processed);
    g.shutdown();
}
