//! A driver that forwards frames made elsewhere (pvaDriver's shape): it may have nothing to
//! give for a while (`DriverError::NoFrame`), and its frames keep their own uniqueId/timestamps.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::common::*;
use ndflow_core::{DataType, NDArray, ParamDef, ParamStore, Pool};
use ndflow_runtime::{Driver, DriverError, Graph};

/// Yields a frame on every third call, with uniqueIds 1000, 1010, 1020, ...
struct Forwarder {
    calls: u32,
    next_id: i32,
    stops: Arc<AtomicU32>,
}

impl Driver for Forwarder {
    fn driver_type(&self) -> &'static str {
        "forwarder"
    }
    fn params(&self) -> &'static [ParamDef] {
        &[]
    }
    fn init(&mut self, _params: &ParamStore) -> Result<(), DriverError> {
        Ok(())
    }
    fn acquire(&mut self, _params: &ParamStore, pool: &Pool) -> Result<NDArray, DriverError> {
        self.calls += 1;
        if !self.calls.is_multiple_of(3) {
            return Err(DriverError::NoFrame);
        }
        let buf = pool.alloc(8)?;
        let mut f = NDArray::new(&[4], DataType::UInt16, buf.freeze())?;
        f.unique_id = self.next_id;
        f.time_stamp = 77.25;
        self.next_id += 10;
        Ok(f)
    }
    fn stop(&mut self, _params: &ParamStore) {
        self.stops.fetch_add(1, Ordering::SeqCst);
    }
    fn keeps_frame_identity(&self) -> bool {
        true
    }
}

#[test]
fn no_frame_is_not_an_error_and_identity_is_kept() {
    let g = Graph::new(1);
    let stops = Arc::new(AtomicU32::new(0));
    g.add_driver(
        "FWD",
        Box::new(Forwarder {
            calls: 0,
            next_id: 1000,
            stops: stops.clone(),
        }),
    )
    .unwrap();
    let p = Arc::new(TestPlugin::new());
    g.add_plugin("P1", p.clone()).unwrap();
    g.put("P1", "NDArrayPort", "FWD").unwrap();
    g.put("FWD", "AcquireTime", 0.0).unwrap();
    g.put("FWD", "AcquirePeriod", 0.0).unwrap();
    g.put("FWD", "ImageMode", "Multiple").unwrap();
    g.put("FWD", "NumImages", 5).unwrap();
    g.put("FWD", "Acquire", 1).unwrap();
    wait_done(&g);
    assert!(g.wait_idle(std::time::Duration::from_secs(5)));
    let s = g.summary();
    assert_eq!(s["ports"]["FWD"]["ArrayCounter_RBV"], 5);
    assert_eq!(s["ports"]["FWD"]["DetectorState_RBV"], "Idle");
    assert_eq!(*p.seen.lock(), vec![1000, 1010, 1020, 1030, 1040]);
    assert_eq!(s["ports"]["P1"]["UniqueId_RBV"], 1040);
    assert_eq!(
        stops.load(Ordering::SeqCst),
        1,
        "stop() once per acquisition"
    );
}
