//! Ports that publish on several addresses (areaDetector's asyn addresses) and plugins that
//! take one of them through `NDArrayAddress`.

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;

use crate::common::*;
use ndflow_core::{NDArray, ParamDef, ParamStore, ParamValue, Pool};
use ndflow_runtime::{Driver, DriverError, Graph, Plugin, PluginError, ProcessContext};

/// Tags that tell the addresses' frames apart: the frame on address `a` carries uniqueId
/// `id + a * TAG`.
const TAG: i32 = 1000;

/// Publishes each input on addresses 0..`addresses` (address `a`: uniqueId + a·TAG), and
/// once more on address `stray` when set (a plugin's mistake the port must count).
struct Splitter {
    addresses: usize,
    stray: Option<usize>,
}

impl Plugin for Splitter {
    fn plugin_type(&self) -> &'static str {
        "Splitter"
    }
    fn params(&self) -> &'static [ParamDef] {
        &[]
    }
    fn addresses(&self) -> usize {
        self.addresses
    }
    fn process(
        &self,
        input: &Arc<NDArray>,
        ctx: &mut ProcessContext<'_>,
    ) -> Result<(), PluginError> {
        for a in 0..self.addresses {
            let mut out = (**input).clone();
            out.unique_id = input.unique_id + a as i32 * TAG;
            ctx.emit_to(a, out);
        }
        if let Some(a) = self.stray {
            ctx.emit_to(a, input.clone());
        }
        Ok(())
    }
}

fn graph_with_splitter(addresses: usize, stray: Option<usize>) -> Graph {
    let g = sim_graph(2);
    g.add_plugin("SPLIT", Arc::new(Splitter { addresses, stray }))
        .unwrap();
    g.put("SPLIT", "NDArrayPort", "DRV").unwrap();
    g.put("SPLIT", "BlockingCallbacks", "Yes").unwrap();
    g
}

fn sink(g: &Graph, name: &str, source: &str, address: i64) -> Arc<TestPlugin> {
    let p = Arc::new(TestPlugin::new());
    g.add_plugin(name, p.clone()).unwrap();
    g.put(name, "BlockingCallbacks", "Yes").unwrap();
    g.put(name, "NDArrayPort", source).unwrap();
    g.put(name, "NDArrayAddress", address).unwrap();
    p
}

fn acquire(g: &Graph, n: i64) {
    configure_fast(g, n);
    g.put("DRV", "Acquire", 1).unwrap();
    wait_done(g);
}

fn seen(p: &TestPlugin) -> Vec<i32> {
    p.seen.lock().clone()
}

#[test]
fn a_plugin_takes_only_the_frames_of_its_address() {
    let g = graph_with_splitter(3, None);
    let a0 = sink(&g, "A0", "SPLIT", 0);
    let a1 = sink(&g, "A1", "SPLIT", 1);
    let a2 = sink(&g, "A2", "SPLIT", 2);
    acquire(&g, 5);
    assert_eq!(seen(&a0), vec![1, 2, 3, 4, 5]);
    assert_eq!(seen(&a1), vec![1001, 1002, 1003, 1004, 1005]);
    assert_eq!(seen(&a2), vec![2001, 2002, 2003, 2004, 2005]);
    for name in ["A0", "A1", "A2"] {
        let acc = g.plugin(name).unwrap().accounting();
        assert!(acc.is_conserved(), "{name}: {acc:?}");
        assert_eq!((acc.offered, acc.processed), (5, 5), "{name}");
    }
    let mut subs = g.port("SPLIT").unwrap().subscriptions();
    subs.sort();
    assert_eq!(
        subs,
        vec![("A0".into(), 0), ("A1".into(), 1), ("A2".into(), 2)]
    );
    assert_eq!(g.plugin("A1").unwrap().source_address(), 1);
}

#[test]
fn changing_ndarray_address_at_run_time_reconnects() {
    let g = graph_with_splitter(3, None);
    let p = sink(&g, "P", "SPLIT", 1);
    acquire(&g, 2);
    assert_eq!(seen(&p), vec![1001, 1002]);

    g.put("P", "NDArrayAddress", 2).unwrap();
    assert_eq!(g.get("P", "NDArrayAddress").unwrap(), ParamValue::Int(2));
    assert_eq!(
        g.port("SPLIT").unwrap().subscriptions(),
        vec![("P".into(), 2)]
    );
    acquire(&g, 2);
    assert_eq!(seen(&p), vec![1001, 1002, 2003, 2004]);

    g.put("P", "NDArrayAddress", 0).unwrap();
    acquire(&g, 1);
    assert_eq!(seen(&p), vec![1001, 1002, 2003, 2004, 5]);

    // NDArrayPort to a port that publishes the address: the address is kept.
    g.put("P", "NDArrayPort", "DRV").unwrap();
    assert_eq!(
        g.port("DRV").unwrap().subscriptions(),
        vec![("SPLIT".into(), 0), ("P".into(), 0)]
    );
    assert!(g.port("SPLIT").unwrap().subscriptions().is_empty());
    acquire(&g, 1);
    assert_eq!(seen(&p).last(), Some(&6));
}

#[test]
fn an_address_the_source_does_not_publish_is_refused_naming_port_and_address() {
    let g = graph_with_splitter(3, None);
    let p = sink(&g, "P", "SPLIT", 1);

    let e = g.put("P", "NDArrayAddress", 3).unwrap_err().to_string();
    assert!(e.contains("'SPLIT'") && e.contains("address 3"), "{e}");
    assert!(e.contains("0..2"), "{e}");
    // Nothing changed: the value, the subscription, the frames.
    assert_eq!(g.get("P", "NDArrayAddress").unwrap(), ParamValue::Int(1));
    assert_eq!(
        g.port("SPLIT").unwrap().subscriptions(),
        vec![("P".into(), 1)]
    );

    // Moving to a source without that address is refused the same way.
    let e = g.put("P", "NDArrayPort", "DRV").unwrap_err().to_string();
    assert!(
        e.contains("'DRV'") && e.contains("address 1") && e.contains("address 0 only"),
        "{e}"
    );
    assert_eq!(
        g.get("P", "NDArrayPort").unwrap(),
        ParamValue::Str("SPLIT".into())
    );
    acquire(&g, 2);
    assert_eq!(seen(&p), vec![1001, 1002]);

    // Negative addresses are refused by the declaration.
    assert!(g.put("P", "NDArrayAddress", -1).is_err());

    // Without a source any address is kept, and checked when a source is named.
    let q = Arc::new(TestPlugin::new());
    g.add_plugin("Q", q).unwrap();
    g.put("Q", "NDArrayAddress", 7).unwrap();
    let e = g.put("Q", "NDArrayPort", "SPLIT").unwrap_err().to_string();
    assert!(e.contains("'SPLIT'") && e.contains("address 7"), "{e}");
    assert_eq!(
        g.get("Q", "NDArrayPort").unwrap(),
        ParamValue::Str("".into())
    );
    g.put("Q", "NDArrayAddress", 2).unwrap();
    g.put("Q", "NDArrayPort", "SPLIT").unwrap();
    let mut subs = g.port("SPLIT").unwrap().subscriptions();
    subs.sort();
    assert_eq!(subs, vec![("P".into(), 1), ("Q".into(), 2)]);
}

#[test]
fn an_output_on_an_address_the_port_does_not_have_is_counted() {
    let g = graph_with_splitter(2, Some(4));
    let p = sink(&g, "P", "SPLIT", 1);
    acquire(&g, 3);
    assert_eq!(seen(&p), vec![1001, 1002, 1003]);
    g.publish_now();
    assert_eq!(
        g.get("SPLIT", "DroppedOutputArrays").unwrap(),
        ParamValue::Int(3)
    );
    let acc = g.plugin("SPLIT").unwrap().accounting();
    assert_eq!((acc.processed, acc.dropped_output), (3, 3));
}

#[test]
fn only_address_zero_is_throttled_and_sorted() {
    let g = graph_with_splitter(2, None);
    let a0 = sink(&g, "A0", "SPLIT", 0);
    let a1 = sink(&g, "A1", "SPLIT", 1);
    // One byte a second: every 256-byte frame on address 0 is over MaxByteRate.
    g.put("SPLIT", "MaxByteRate", 1.0).unwrap();
    g.put("SPLIT", "SortMode", "Sorted").unwrap();
    acquire(&g, 5);
    assert!(seen(&a0).is_empty(), "{:?}", seen(&a0));
    assert_eq!(seen(&a1), vec![1001, 1002, 1003, 1004, 1005]);
    let acc = g.plugin("SPLIT").unwrap().accounting();
    assert_eq!((acc.dropped_output, acc.sort_pending), (5, 0));
    assert_eq!(g.plugin("SPLIT").unwrap().disordered(), 0);
}

/// A driver with two addresses: frames with an odd pixel value also go to address 1 (as
/// ADEiger sends threshold channel n on address n + 1), or to `also` when set.
struct TwoAddressDriver {
    inner: TestDriver,
    last: AtomicU16,
    also: Option<usize>,
}

impl Driver for TwoAddressDriver {
    fn driver_type(&self) -> &'static str {
        "twoAddressDriver"
    }
    fn params(&self) -> &'static [ParamDef] {
        &[]
    }
    fn init(&mut self, params: &ParamStore) -> Result<(), DriverError> {
        self.inner.init(params)
    }
    fn acquire(&mut self, params: &ParamStore, pool: &Pool) -> Result<NDArray, DriverError> {
        let f = self.inner.acquire(params, pool)?;
        let v = f.pixels::<u16>()?.first().copied().unwrap_or(0);
        self.last.store(v, Ordering::Release);
        Ok(f)
    }
    fn addresses(&self) -> usize {
        2
    }
    fn also_on(&self, _frame: &NDArray) -> Option<usize> {
        if self.last.load(Ordering::Acquire) % 2 == 1 {
            Some(self.also.unwrap_or(1))
        } else {
            None
        }
    }
}

fn two_address_graph(also: Option<usize>) -> Graph {
    let g = Graph::new(2);
    let d = TwoAddressDriver {
        inner: TestDriver::new(4, 2),
        last: AtomicU16::new(0),
        also,
    };
    g.add_driver("DRV", Box::new(d)).unwrap();
    g
}

#[test]
fn a_driver_publishes_a_frame_on_address_zero_and_the_one_it_names() {
    let g = two_address_graph(None);
    assert_eq!(g.port("DRV").unwrap().addresses(), 2);
    let all = sink(&g, "ALL", "DRV", 0);
    let odd = sink(&g, "ODD", "DRV", 1);
    acquire(&g, 6);
    assert_eq!(seen(&all), vec![1, 2, 3, 4, 5, 6]);
    assert_eq!(seen(&odd), vec![1, 3, 5]);
    let e = g.put("ODD", "NDArrayAddress", 2).unwrap_err().to_string();
    assert!(e.contains("'DRV'") && e.contains("addresses 0..1"), "{e}");
}

#[test]
fn a_driver_naming_an_address_it_does_not_have_is_counted() {
    let g = two_address_graph(Some(9));
    let all = sink(&g, "ALL", "DRV", 0);
    let odd = sink(&g, "ODD", "DRV", 1);
    acquire(&g, 4);
    assert_eq!(seen(&all), vec![1, 2, 3, 4]);
    assert!(seen(&odd).is_empty());
    assert_eq!(g.driver("DRV").unwrap().bad_address_frames(), 2);
}
