//! Who gets a port's outputs: every subscriber (fan-out) or one in turn (scatter).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ndflow_core::NDArray;
use parking_lot::RwLock;

use super::*;

/// The plugins subscribed to a port's output.
#[derive(Default)]
pub struct Fanout {
    subs: RwLock<Vec<Arc<PluginPort>>>,
    /// Round-robin position: the subscriber after the one that took the last frame.
    next: AtomicUsize,
}

/// How a frame is offered to a port. Fan-out always offers (a full queue drops and counts
/// there); a scatter only hands a frame to a port that can take it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Offer {
    Always,
    /// Enabled, and room in its queue (a blocking port: not busy with another frame).
    IfFree,
    /// Enabled and blocking (runs the frame in the caller's thread, waiting for it).
    IfBlocking,
}

impl Fanout {
    pub(crate) fn offer_all(&self, frame: &Arc<NDArray>) {
        crate::scheduler::batch(|| {
            for s in self.subs.read().iter() {
                s.offer(frame);
            }
        });
    }
    /// Hands the frame to exactly one subscriber: the next one round-robin that has room,
    /// else the next blocking one (which back-pressures the caller). False when none can
    /// take it; true also when there is no subscriber (nothing to deliver to).
    pub(crate) fn offer_one(&self, frame: &Arc<NDArray>) -> bool {
        let subs = self.subs.read();
        let n = subs.len();
        if n == 0 {
            return true;
        }
        let start = self.next.load(Ordering::Relaxed);
        for how in [Offer::IfFree, Offer::IfBlocking] {
            for k in 0..n {
                let i = (start + k) % n;
                if subs[i].offer_as(frame, how) {
                    // Concurrent scatter threads may race here: that only skews the turn.
                    self.next.store(i + 1, Ordering::Relaxed);
                    return true;
                }
            }
        }
        false
    }
    pub(crate) fn add(&self, port: Arc<PluginPort>) {
        let mut subs = self.subs.write();
        if !subs.iter().any(|p| Arc::ptr_eq(p, &port)) {
            subs.push(port);
        }
    }
    pub(crate) fn remove(&self, port: &Arc<PluginPort>) {
        self.subs.write().retain(|p| !Arc::ptr_eq(p, port));
    }
    pub fn subscriber_names(&self) -> Vec<String> {
        self.subs.read().iter().map(|p| p.name.clone()).collect()
    }
}

/// The distinct non-empty names of `names`, in order.
pub(crate) fn distinct(names: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(names.len());
    for n in names {
        if !n.is_empty() && !out.contains(n) {
            out.push(n.clone());
        }
    }
    out
}
