//! Test doubles: a tiny driver and plugins with controllable behaviour.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use ndflow_core::{NDArray, NDAttribute, ParamDef, ParamStore, Pool};
use ndflow_runtime::{Driver, DriverError, Graph, Plugin, PluginError, ProcessContext};
use parking_lot::Mutex;

/// Produces `w`×`h` UInt16 frames whose pixels all equal the frame number.
pub struct TestDriver {
    pub w: usize,
    pub h: usize,
    n: u16,
}

impl TestDriver {
    pub fn new(w: usize, h: usize) -> Self {
        TestDriver { w, h, n: 0 }
    }
}

impl Driver for TestDriver {
    fn driver_type(&self) -> &'static str {
        "testDriver"
    }
    fn params(&self) -> &'static [ParamDef] {
        &[]
    }
    fn init(&mut self, params: &ParamStore) -> Result<(), DriverError> {
        params
            .set_by_name("Model", "test")
            .map_err(|e| DriverError::Other(e.to_string()))?;
        Ok(())
    }
    fn acquire(&mut self, _params: &ParamStore, pool: &Pool) -> Result<NDArray, DriverError> {
        self.n = self.n.wrapping_add(1);
        let mut buf = pool.alloc(self.w * self.h * 2)?;
        buf.as_mut_slice::<u16>().fill(self.n);
        Ok(NDArray::new(
            &[self.w, self.h],
            ndflow_core::DataType::UInt16,
            buf.freeze(),
        )?)
    }
}

/// Passes frames on after an optional delay; records the uniqueIds it saw.
pub struct TestPlugin {
    pub delay: Duration,
    pub jitter: bool,
    pub threads: usize,
    pub fail_every: u64,
    pub seen: Mutex<Vec<i32>>,
}

impl TestPlugin {
    pub fn new() -> Self {
        TestPlugin {
            delay: Duration::ZERO,
            jitter: false,
            threads: 1,
            fail_every: 0,
            seen: Mutex::new(Vec::new()),
        }
    }
    pub fn slow(delay: Duration) -> Self {
        TestPlugin {
            delay,
            ..Self::new()
        }
    }
}

impl Plugin for TestPlugin {
    fn plugin_type(&self) -> &'static str {
        "TestPlugin"
    }
    fn params(&self) -> &'static [ParamDef] {
        &[]
    }
    fn max_threads(&self) -> usize {
        self.threads
    }
    fn process(
        &self,
        input: &Arc<NDArray>,
        ctx: &mut ProcessContext<'_>,
    ) -> Result<(), PluginError> {
        let id = input.unique_id;
        if self.fail_every > 0 && (id as u64).is_multiple_of(self.fail_every) {
            return Err(PluginError::Other(format!("refusing frame {id}")));
        }
        let mut d = self.delay;
        if self.jitter {
            // Deterministic pseudo-random delay so that threads finish out of order.
            d = Duration::from_micros(((id as u64 * 7919) % 13) * 150);
        }
        if !d.is_zero() {
            std::thread::sleep(d);
        }
        self.seen.lock().push(id);
        ctx.emit(input.clone());
        Ok(())
    }
}

pub fn sim_graph(workers: usize) -> Graph {
    let g = Graph::new(workers);
    g.add_driver("DRV", Box::new(TestDriver::new(16, 8)))
        .unwrap();
    g
}

pub fn configure_fast(g: &Graph, images: i64) {
    g.put("DRV", "AcquireTime", 0.0).unwrap();
    g.put("DRV", "AcquirePeriod", 0.0).unwrap();
    g.put("DRV", "ImageMode", "Multiple").unwrap();
    g.put("DRV", "NumImages", images).unwrap();
}

pub fn wait_done(g: &Graph) {
    std::thread::sleep(Duration::from_millis(20));
    assert!(
        g.wait_idle(Duration::from_secs(30)),
        "graph did not go idle"
    );
}

/// Keeps the attributes of the last frame it was given.
#[derive(Default)]
pub struct Recorder {
    pub last: Mutex<Vec<NDAttribute>>,
}

impl Plugin for Recorder {
    fn plugin_type(&self) -> &'static str {
        "Recorder"
    }
    fn params(&self) -> &'static [ParamDef] {
        &[]
    }
    fn process(&self, input: &Arc<NDArray>, _: &mut ProcessContext<'_>) -> Result<(), PluginError> {
        *self.last.lock() = input.attributes.clone();
        Ok(())
    }
}
