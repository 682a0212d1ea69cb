//! The graph: named ports, wiring by name (NDArrayPort), external parameter writes with
//! their side effects, the housekeeping thread, and idle detection.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ndflow_core::{ParamError, ParamStore, ParamValue, Pool};
use parking_lot::{Mutex, RwLock};
use thiserror::Error;

use crate::attr_file::{PortAttributes, PvReader};
use crate::driver::{Driver, DriverError};
use crate::driver_port::DriverPort;
use crate::plugin::Plugin;
use crate::plugin_port::{distinct_pairs, Fanout, PluginPort};
use crate::port_params::{driver_layout, plugin_layout, ArrayBaseParams};
use crate::scheduler::Scheduler;
use crate::wakeup::Wakeup;

#[derive(Debug, Error)]
pub enum GraphError {
    #[error("a port named '{0}' already exists")]
    DuplicatePort(String),
    #[error("no port named '{0}'")]
    UnknownPort(String),
    #[error("port '{port}': {source}")]
    Param {
        port: String,
        #[source]
        source: ParamError,
    },
    #[error("port '{port}': {source}")]
    Driver {
        port: String,
        #[source]
        source: DriverError,
    },
}

/// One port of the graph.
#[derive(Clone)]
pub enum PortHandle {
    Driver(Arc<DriverPort>),
    Plugin(Arc<PluginPort>),
}

impl PortHandle {
    pub fn name(&self) -> &str {
        match self {
            PortHandle::Driver(d) => &d.name,
            PortHandle::Plugin(p) => &p.name,
        }
    }
    pub fn params(&self) -> &Arc<ParamStore> {
        match self {
            PortHandle::Driver(d) => &d.params,
            PortHandle::Plugin(p) => &p.params,
        }
    }
    fn attrs(&self) -> &PortAttributes {
        match self {
            PortHandle::Driver(d) => &d.attrs,
            PortHandle::Plugin(p) => &p.attrs,
        }
    }
    /// The handles of NDArrayBase's parameters in this port's store.
    fn array_base(&self) -> &ArrayBaseParams {
        match self {
            PortHandle::Driver(d) => d.array_base(),
            PortHandle::Plugin(p) => p.array_base(),
        }
    }
    fn fanout(&self) -> &Fanout {
        match self {
            PortHandle::Driver(d) => &d.fanout,
            PortHandle::Plugin(p) => &p.fanout,
        }
    }
    /// How many addresses the port publishes on (0..N-1); a downstream port's
    /// `NDArrayAddress` must be one of them.
    pub fn addresses(&self) -> usize {
        match self {
            PortHandle::Driver(d) => d.addresses(),
            PortHandle::Plugin(p) => p.addresses(),
        }
    }
    /// (port name, address) of every port subscribed to this one's outputs.
    pub fn subscriptions(&self) -> Vec<(String, usize)> {
        self.fanout().subscriptions()
    }
}

struct GraphInner {
    ports: RwLock<Vec<PortHandle>>,
    sched: Arc<Scheduler>,
    /// Wakes the housekeeping thread early (a frame started waiting for SortTime, stop).
    housekeeping: Arc<Wakeup>,
    /// Rounds the housekeeping thread has made (it must not spin: tests read this).
    housekeeping_rounds: AtomicU64,
    fallback_pool: Pool,
    stop: AtomicBool,
    /// Where EPICS_PV attribute values come from (the IOC's Channel Access client).
    pv_reader: RwLock<Option<Arc<dyn PvReader>>>,
}

impl GraphInner {
    fn busy(&self) -> u64 {
        self.ports
            .read()
            .iter()
            .map(|p| match p {
                PortHandle::Plugin(p) => p.busy(),
                PortHandle::Driver(_) => 0,
            })
            .sum()
    }
    fn publish(&self, rate_tick: bool) {
        for p in self.ports.read().iter() {
            match p {
                PortHandle::Plugin(p) => p.publish(rate_tick),
                PortHandle::Driver(d) => d.publish(rate_tick),
            }
        }
    }
}

/// A running graph of ports. Dropping it stops every thread.
pub struct Graph {
    inner: Arc<GraphInner>,
    ticker: Mutex<Option<JoinHandle<()>>>,
}

impl Graph {
    /// A graph whose plugins run on `workers` threads (0 = one per core).
    pub fn new(workers: usize) -> Graph {
        let n = if workers == 0 {
            std::thread::available_parallelism().map_or(2, |n| n.get())
        } else {
            workers
        };
        let inner = Arc::new(GraphInner {
            ports: RwLock::new(Vec::new()),
            sched: Scheduler::start(n),
            housekeeping: Arc::new(Wakeup::default()),
            housekeeping_rounds: AtomicU64::new(0),
            fallback_pool: Pool::unlimited(),
            stop: AtomicBool::new(false),
            pv_reader: RwLock::new(None),
        });
        let (weak, wake) = (Arc::downgrade(&inner), inner.housekeeping.clone());
        let ticker = std::thread::Builder::new()
            .name("ndflow-housekeeping".into())
            .spawn(move || housekeeping(weak, wake))
            .ok();
        Graph {
            inner,
            ticker: Mutex::new(ticker),
        }
    }

    fn check_new_name(&self, name: &str) -> Result<(), GraphError> {
        if self.port(name).is_some() {
            return Err(GraphError::DuplicatePort(name.to_string()));
        }
        Ok(())
    }

    /// Adds a driver port and starts its acquisition thread (idle until Acquire = 1).
    pub fn add_driver(
        &self,
        name: &str,
        driver: Box<dyn Driver>,
    ) -> Result<Arc<DriverPort>, GraphError> {
        self.check_new_name(name)?;
        let params = Arc::new(ParamStore::from_layout(driver_layout(driver.params())));
        let weak = Arc::downgrade(&self.inner);
        let probe = Arc::new(move || weak.upgrade().map_or(0, |g| g.busy()));
        let weak = Arc::downgrade(&self.inner);
        let publish = Arc::new(move || {
            if let Some(g) = weak.upgrade() {
                g.publish(false);
            }
        });
        let port = DriverPort::start(name, driver, params, probe, publish).map_err(|e| {
            GraphError::Driver {
                port: name.to_string(),
                source: e,
            }
        })?;
        self.inner
            .ports
            .write()
            .push(PortHandle::Driver(port.clone()));
        Ok(port)
    }

    /// Adds a plugin port (unconnected until its NDArrayPort is set).
    pub fn add_plugin(
        &self,
        name: &str,
        plugin: Arc<dyn Plugin>,
    ) -> Result<Arc<PluginPort>, GraphError> {
        self.check_new_name(name)?;
        let params = Arc::new(ParamStore::from_layout(plugin_layout(plugin.params())));
        plugin.attached(&params);
        let port = PluginPort::new(
            name,
            plugin,
            params,
            self.inner.sched.clone(),
            self.inner.housekeeping.clone(),
            self.inner.fallback_pool.clone(),
        );
        self.inner
            .ports
            .write()
            .push(PortHandle::Plugin(port.clone()));
        Ok(port)
    }

    pub fn port(&self, name: &str) -> Option<PortHandle> {
        self.inner
            .ports
            .read()
            .iter()
            .find(|p| p.name() == name)
            .cloned()
    }

    pub fn ports(&self) -> Vec<PortHandle> {
        self.inner.ports.read().clone()
    }

    pub fn plugin(&self, name: &str) -> Option<Arc<PluginPort>> {
        match self.port(name) {
            Some(PortHandle::Plugin(p)) => Some(p),
            _ => None,
        }
    }

    pub fn driver(&self, name: &str) -> Option<Arc<DriverPort>> {
        match self.port(name) {
            Some(PortHandle::Driver(d)) => Some(d),
            _ => None,
        }
    }

    pub fn get(&self, port: &str, param: &str) -> Result<ParamValue, GraphError> {
        let p = self
            .port(port)
            .ok_or_else(|| GraphError::UnknownPort(port.to_string()))?;
        p.params()
            .get_by_name(param)
            .map_err(|e| GraphError::Param {
                port: port.to_string(),
                source: e,
            })
    }

    /// An external write (config file, PV put, API): validated, applied, side effects run.
    /// A refused write changes nothing.
    pub fn put(
        &self,
        port: &str,
        param: &str,
        value: impl Into<ParamValue>,
    ) -> Result<ParamValue, GraphError> {
        let value = value.into();
        let handle = self
            .port(port)
            .ok_or_else(|| GraphError::UnknownPort(port.to_string()))?;
        let perr = |e| GraphError::Param {
            port: port.to_string(),
            source: e,
        };
        let params = handle.params().clone();
        let idx = params.require(param).map_err(perr)?;
        if let PortHandle::Plugin(p) = &handle {
            if let Some(slot) = p.source_slot(param) {
                let def = params
                    .def(idx)
                    .ok_or_else(|| GraphError::UnknownPort(port.into()));
                let v = def?.coerce(value).map_err(perr)?;
                let source = match &v {
                    ParamValue::Str(s) => s.clone(),
                    other => other.to_string(),
                };
                let address = p.sources.lock().get(slot).map_or(0, |s| s.1);
                self.check_source(p, param, &format!("\"{source}\""), &source, address)
                    .map_err(perr)?;
                let stored = params.put(param, v).map_err(perr)?;
                // NDArrayPort and NDArrayPort_1 of a Gather are one input: show it in both.
                for alias in p.slot_params(slot).into_iter().filter(|a| *a != param) {
                    params.set_by_name(alias, stored.clone()).map_err(perr)?;
                }
                self.rewire(p, slot, Some(&source), None);
                return Ok(stored);
            }
            if let Some(slot) = p.address_slot(param) {
                let def = params
                    .def(idx)
                    .ok_or_else(|| GraphError::UnknownPort(port.into()));
                let v = def?.coerce(value).map_err(perr)?;
                let address = v.as_i64().unwrap_or(0);
                let source = p.sources.lock().get(slot).map(|s| s.0.clone());
                let source = source.unwrap_or_default();
                // Negative addresses are refused by the declaration (min 0) on the put below.
                let address = usize::try_from(address).unwrap_or(usize::MAX);
                self.check_source(p, param, &v.to_string(), &source, address)
                    .map_err(perr)?;
                let stored = params.put(param, v).map_err(perr)?;
                // NDArrayAddress and NDArrayAddress_1 of a Gather are one input's address.
                for alias in p
                    .slot_address_params(slot)
                    .into_iter()
                    .filter(|a| *a != param)
                {
                    params.set_by_name(alias, stored.clone()).map_err(perr)?;
                }
                self.rewire(p, slot, None, Some(address));
                return Ok(stored);
            }
        }
        let stored = params.put(param, value).map_err(perr)?;
        match &handle {
            PortHandle::Plugin(p) => p.on_put(idx, &stored),
            PortHandle::Driver(d) => d.on_put(idx, &stored),
        }
        let reader = self.inner.pv_reader.read().clone();
        handle
            .attrs()
            .on_put(idx, handle.array_base(), &params, reader.as_deref());
        Ok(stored)
    }

    /// Installs the source of EPICS_PV attribute values; attribute files loaded afterwards
    /// use it (set it before applying the configuration).
    pub fn set_pv_reader(&self, reader: Arc<dyn PvReader>) {
        *self.inner.pv_reader.write() = Some(reader);
    }

    /// Whether input (`source`, `address`) may feed `port`: the source exists, publishes
    /// that address, and is not downstream of `port`. No source: any address is kept for
    /// when one is named (it is checked then). `value` is the written value, for messages.
    fn check_source(
        &self,
        port: &Arc<PluginPort>,
        param: &str,
        value: &str,
        source: &str,
        address: usize,
    ) -> Result<(), ParamError> {
        let refuse = |reason: String| ParamError::Refused {
            name: param.into(),
            value: value.to_string(),
            reason,
        };
        if source.is_empty() {
            return Ok(());
        }
        let Some(src) = self.port(source) else {
            return Err(refuse(format!("no port named '{source}'")));
        };
        let n = src.addresses();
        if address >= n {
            let has = if n == 1 {
                "address 0 only".to_string()
            } else {
                format!("addresses 0..{}", n - 1)
            };
            return Err(refuse(format!(
                "port '{source}' publishes {has}, not address {address}"
            )));
        }
        // Walk every path upstream from the new source: reaching this port would make a loop.
        let mut todo = vec![source.to_string()];
        let mut seen = std::collections::HashSet::new();
        while let Some(cur) = todo.pop() {
            if cur == port.name {
                return Err(refuse("the wiring would form a loop".into()));
            }
            if seen.insert(cur.clone()) {
                if let Some(p) = self.plugin(&cur) {
                    todo.extend(p.sources());
                }
            }
        }
        Ok(())
    }

    /// Points input `slot` at `source` and/or `address` and (un)subscribes by the change in
    /// the set of (port, address) pairs: a pair listed by two inputs is subscribed once, and
    /// stays subscribed until neither names it. The lock serialises rewires of one port.
    fn rewire(
        &self,
        port: &Arc<PluginPort>,
        slot: usize,
        source: Option<&str>,
        address: Option<usize>,
    ) {
        let mut sources = port.sources.lock();
        let before = distinct_pairs(&sources);
        if let Some(s) = sources.get_mut(slot) {
            if let Some(name) = source {
                s.0 = name.to_string();
            }
            if let Some(a) = address {
                s.1 = a;
            }
        }
        let after = distinct_pairs(&sources);
        for (old, a) in before.iter().filter(|n| !after.contains(n)) {
            if let Some(h) = self.port(old) {
                h.fanout().remove(port, *a);
            }
        }
        for (new, a) in after.iter().filter(|n| !before.contains(n)) {
            if let Some(h) = self.port(new) {
                h.fanout().add(port.clone(), *a);
            }
        }
    }

    /// (worker threads, workers running a plugin now).
    pub fn workers(&self) -> (usize, usize) {
        self.inner.sched.worker_counts()
    }

    /// Frames still queued, in flight or waiting to be sorted, over all plugins.
    pub fn busy(&self) -> u64 {
        self.inner.busy()
    }

    /// No driver acquiring and every plugin drained.
    pub fn is_idle(&self) -> bool {
        let drivers_busy = self.inner.ports.read().iter().any(|p| match p {
            PortHandle::Driver(d) => d.is_busy(),
            PortHandle::Plugin(_) => false,
        });
        !drivers_busy && self.busy() == 0
    }

    /// Waits until [`Graph::is_idle`] (true) or the timeout (false). Acquisitions, however
    /// long, are waited for on the drivers' condvars; only the plugins' drain after them (short)
    /// is checked by naps growing from 1 to 10 ms. (It used to poll every 2 ms throughout: 500
    /// wake-ups a second in a notebook waiting for a long scan.)
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut nap = Duration::from_millis(1);
        loop {
            for p in self.ports() {
                if let PortHandle::Driver(d) = p {
                    d.wait_done(deadline.saturating_duration_since(Instant::now()));
                }
            }
            if self.is_idle() {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            std::thread::sleep(nap.min(left));
            nap = (nap * 2).min(Duration::from_millis(10));
        }
    }

    /// Publishes every counter to the parameters now (the housekeeping thread does this at
    /// a bounded rate).
    /// Worker wake-ups that were lost and made up for by the safety time-out (should stay 0).
    pub fn missed_wakeups(&self) -> u64 {
        self.inner.sched.missed_wakeups()
    }

    /// Rounds the housekeeping thread has made so far (about 10 a second, more only while
    /// frames wait for SortTime).
    pub fn housekeeping_rounds(&self) -> u64 {
        self.inner.housekeeping_rounds.load(Ordering::Relaxed)
    }

    pub fn publish_now(&self) {
        self.inner.publish(false);
    }

    /// `{"ports": {"SIM1": {"ArrayCounter_RBV": 1000, ...}, ...}}`, keys = PV suffixes.
    pub fn summary(&self) -> serde_json::Value {
        self.publish_now();
        let mut ports = serde_json::Map::new();
        for p in self.ports() {
            ports.insert(p.name().to_string(), p.params().to_json().into());
        }
        serde_json::json!({ "ports": ports })
    }

    /// Stops acquisition, workers and housekeeping. Idempotent.
    pub fn shutdown(&self) {
        self.inner.stop.store(true, Ordering::Release);
        for p in self.ports() {
            if let PortHandle::Driver(d) = p {
                d.shutdown();
            }
        }
        self.inner.sched.stop();
        self.inner.housekeeping.kick();
        if let Some(t) = self.ticker.lock().take() {
            let _ = t.join();
        }
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Counters are published every [`PUBLISH_PERIOD`] (rates every [`RATE_PERIOD`]).
const PUBLISH_PERIOD: Duration = Duration::from_millis(100);
const RATE_PERIOD: Duration = Duration::from_secs(1);

/// Publishes counters every 100 ms and rates every second, and sends out frames held for
/// sorting when their SortTime has passed. It sleeps until the next of those is due (a port
/// that starts holding a frame for sorting kicks it): an idle IOC wakes 10 times a second,
/// not 100 (it used to poll every 10 ms for sort time-outs that are rare).
fn housekeeping(graph: Weak<GraphInner>, wake: Arc<Wakeup>) {
    let start = Instant::now();
    let (mut next_publish, mut next_rate) = (start + PUBLISH_PERIOD, start + RATE_PERIOD);
    loop {
        let next_sort = {
            let Some(g) = graph.upgrade() else { return };
            if g.stop.load(Ordering::Acquire) {
                return;
            }
            g.housekeeping_rounds.fetch_add(1, Ordering::Relaxed);
            let mut next_sort: Option<Instant> = None;
            for p in g.ports.read().iter() {
                if let PortHandle::Plugin(p) = p {
                    p.flush_sorted(true);
                    if let Some(due) = p.sort_deadline() {
                        next_sort = Some(next_sort.map_or(due, |n| n.min(due)));
                    }
                }
            }
            let now = Instant::now();
            if now >= next_publish {
                let rate_tick = now >= next_rate;
                g.publish(rate_tick);
                // Late rounds (a stalled thread) are not caught up in a burst.
                next_publish = (next_publish + PUBLISH_PERIOD).max(now);
                if rate_tick {
                    next_rate = (next_rate + RATE_PERIOD).max(now);
                }
            }
            next_sort
        };
        wake.wait_until(next_sort.map_or(next_publish, |s| s.min(next_publish)));
    }
}
