//! The frame sources of an IOC: one per `web` port, by port name. The port's plugin puts
//! each frame into its source's [`LatestSlot`]; every WebSocket client of that port reads it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use ndflow_core::NDArray;
use parking_lot::RwLock;

use crate::slot::LatestSlot;

/// One port's frames and what its clients did with them.
pub struct FrameSource {
    pub slot: LatestSlot<Arc<NDArray>>,
    clients: AtomicUsize,
    sent: AtomicU64,
    skipped: AtomicU64,
    /// Largest side a client may ask for (0: no limit), and the most frames a second sent to
    /// one client (f64 bits; 0: no limit): the port's parameters, copied here by its plugin.
    max_side: AtomicUsize,
    max_rate: AtomicU64,
    /// Told the number of clients whenever one comes or goes.
    on_clients: RwLock<Option<ClientsChanged>>,
}

/// A listener of the client count.
pub type ClientsChanged = Box<dyn Fn(usize) + Send + Sync>;

impl Default for FrameSource {
    fn default() -> Self {
        FrameSource {
            slot: LatestSlot::default(),
            clients: AtomicUsize::new(0),
            sent: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            max_side: AtomicUsize::new(1024),
            max_rate: AtomicU64::new(30f64.to_bits()),
            on_clients: RwLock::new(None),
        }
    }
}

impl FrameSource {
    pub fn clients(&self) -> usize {
        self.clients.load(Ordering::Relaxed)
    }
    /// Frames sent to all clients.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }
    /// Frames replaced before a client took them (latest-wins), over all clients.
    pub fn skipped(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }
    pub fn set_limits(&self, max_side: usize, max_rate: f64) {
        self.max_side.store(max_side, Ordering::Relaxed);
        self.max_rate.store(max_rate.to_bits(), Ordering::Relaxed);
    }
    pub fn max_side(&self) -> usize {
        self.max_side.load(Ordering::Relaxed)
    }
    pub fn max_rate(&self) -> f64 {
        f64::from_bits(self.max_rate.load(Ordering::Relaxed))
    }
    pub(crate) fn count_sent(&self, skipped: u64) {
        self.sent.fetch_add(1, Ordering::Relaxed);
        self.skipped.fetch_add(skipped, Ordering::Relaxed);
    }
    /// Counts a client for as long as the guard lives.
    pub(crate) fn client(self: &Arc<Self>) -> ClientGuard {
        let n = self.clients.fetch_add(1, Ordering::Relaxed) + 1;
        self.tell_clients(n);
        ClientGuard(Arc::clone(self))
    }
    /// Calls `f` with the client count each time it changes.
    pub fn on_clients_changed(&self, f: ClientsChanged) {
        *self.on_clients.write() = Some(f);
    }
    fn tell_clients(&self, n: usize) {
        if let Some(f) = self.on_clients.read().as_ref() {
            f(n);
        }
    }
}

pub(crate) struct ClientGuard(Arc<FrameSource>);

impl Drop for ClientGuard {
    fn drop(&mut self) {
        let n = self
            .0
            .clients
            .fetch_sub(1, Ordering::Relaxed)
            .saturating_sub(1);
        self.0.tell_clients(n);
    }
}

/// Every port's source.
#[derive(Default)]
pub struct FrameHub {
    sources: RwLock<BTreeMap<String, Arc<FrameSource>>>,
}

impl FrameHub {
    /// Adds the source of port `name`; a second one of the same name is an error.
    pub fn add(&self, name: &str) -> Result<Arc<FrameSource>, String> {
        let mut map = self.sources.write();
        if map.contains_key(name) {
            return Err(format!("web port '{name}' is registered twice"));
        }
        let s = Arc::new(FrameSource::default());
        map.insert(name.to_string(), Arc::clone(&s));
        Ok(s)
    }

    pub fn get(&self, name: &str) -> Option<Arc<FrameSource>> {
        self.sources.read().get(name).cloned()
    }

    /// Port names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.sources.read().keys().cloned().collect()
    }
}
