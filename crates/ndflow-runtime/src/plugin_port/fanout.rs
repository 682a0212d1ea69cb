//! Who gets a port's outputs: every subscriber (fan-out) or one in turn (scatter).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ndflow_core::NDArray;
use parking_lot::RwLock;

use super::*;

/// The plugins subscribed to a port's outputs, each to one address (its `NDArrayAddress`).
#[derive(Default)]
pub struct Fanout {
    subs: RwLock<Vec<Sub>>,
    /// Round-robin position: the subscriber after the one that took the last frame.
    next: AtomicUsize,
}

/// One subscription: a port taking the frames of one address.
struct Sub {
    port: Arc<PluginPort>,
    address: usize,
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
    /// Offers the frame to every subscriber of `address`.
    pub(crate) fn offer_all(&self, frame: &Arc<NDArray>, address: usize) {
        crate::scheduler::batch(|| {
            for s in self.subs.read().iter().filter(|s| s.address == address) {
                s.port.offer(frame);
            }
        });
    }
    /// Hands the frame to exactly one subscriber of `address`: the next one round-robin
    /// that has room, else the next blocking one (which back-pressures the caller). False
    /// when none can take it; true also when there is no subscriber (nothing to deliver to).
    pub(crate) fn offer_one(&self, frame: &Arc<NDArray>, address: usize) -> bool {
        let subs = self.subs.read();
        let n = subs.len();
        if !subs.iter().any(|s| s.address == address) {
            return true;
        }
        let start = self.next.load(Ordering::Relaxed);
        for how in [Offer::IfFree, Offer::IfBlocking] {
            for k in 0..n {
                let i = (start + k) % n;
                if subs[i].address == address && subs[i].port.offer_as(frame, how) {
                    // Concurrent scatter threads may race here: that only skews the turn.
                    self.next.store(i + 1, Ordering::Relaxed);
                    return true;
                }
            }
        }
        false
    }
    /// Subscribes `port` to `address` (once: a second add of the same pair does nothing).
    pub(crate) fn add(&self, port: Arc<PluginPort>, address: usize) {
        let mut subs = self.subs.write();
        if !subs
            .iter()
            .any(|s| Arc::ptr_eq(&s.port, &port) && s.address == address)
        {
            subs.push(Sub { port, address });
        }
    }
    /// Ends the subscription of `port` to `address`.
    pub(crate) fn remove(&self, port: &Arc<PluginPort>, address: usize) {
        self.subs
            .write()
            .retain(|s| !(Arc::ptr_eq(&s.port, port) && s.address == address));
    }
    /// Names of the subscribed ports (a port subscribed to two addresses: twice).
    pub fn subscriber_names(&self) -> Vec<String> {
        self.subs
            .read()
            .iter()
            .map(|s| s.port.name.clone())
            .collect()
    }
    /// (port name, address) of every subscription.
    pub fn subscriptions(&self) -> Vec<(String, usize)> {
        self.subs
            .read()
            .iter()
            .map(|s| (s.port.name.clone(), s.address))
            .collect()
    }
}

/// One input of a port: the source port's name ("" = none) and the address taken.
pub(crate) type Source = (String, usize);

/// The distinct non-empty names of `sources`, in order.
pub(crate) fn distinct(sources: &[Source]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(sources.len());
    for (n, _) in sources {
        if !n.is_empty() && !out.contains(n) {
            out.push(n.clone());
        }
    }
    out
}

/// The distinct (port, address) pairs of `sources` with a port, in order: the
/// subscriptions they make.
pub(crate) fn distinct_pairs(sources: &[Source]) -> Vec<Source> {
    let mut out: Vec<Source> = Vec::with_capacity(sources.len());
    for s in sources {
        if !s.0.is_empty() && !out.contains(s) {
            out.push(s.clone());
        }
    }
    out
}
