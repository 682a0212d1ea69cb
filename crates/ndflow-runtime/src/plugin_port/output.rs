//! The output side: MaxByteRate throttling, SortMode ordering, forwarding. (MaxArrayRate
//! acts at the input, through MinCallbackTime, as in ADCore.)

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ndflow_core::NDArray;

use super::*;

pub(super) struct Sorter {
    /// Held outputs by (uniqueId, arrival): the address, the frame, when it was held.
    pub(super) pending: BTreeMap<(i32, u64), (usize, Arc<NDArray>, Instant)>,
    pub(super) seq: u64,
    pub(super) sort_time: Duration,
    pub(super) sort_size: usize,
}

pub(super) struct Throttle {
    pub(super) tokens: f64,
    pub(super) last: Instant,
}

impl PluginPort {
    /// Throttles, sorts and forwards one output on `address` (address 0: throttled and
    /// sorted; others: forwarded at once). False only when a round-robin output found no
    /// downstream port to take it (the caller counts the input as dropped).
    /// An output on an address this port does not publish is counted in
    /// DroppedOutputArrays (a plugin's mistake: no port can be subscribed there).
    pub(super) fn emit(&self, address: usize, out: Arc<NDArray>) -> bool {
        if address >= self.addresses {
            self.dropped_output.fetch_add(1, Ordering::Relaxed);
            self.log_once(
                "no such address",
                &format!(
                    "{}: output dropped: address {address} is not one this port publishes (0..{})",
                    self.name,
                    self.addresses - 1
                ),
            );
            return true;
        }
        // As ADCore, where only the main output goes through NDPluginDriver's throttling and
        // sorting (other addresses are direct doCallbacksGenericPointer calls): address 0 is
        // throttled and sorted, the others go out at once.
        if address != 0 {
            return self.forward(address, &out);
        }
        let rate = f64::from_bits(self.max_byte_rate.load(Ordering::Acquire));
        if rate > 0.0 {
            let bytes = out.compressed_size as f64;
            let mut t = self.throttle.lock();
            let now = Instant::now();
            // Token bucket holding at most one second's worth of bytes.
            t.tokens = (t.tokens + rate * now.duration_since(t.last).as_secs_f64()).min(rate);
            t.last = now;
            if t.tokens < bytes {
                self.dropped_output.fetch_add(1, Ordering::Relaxed);
                return true;
            }
            t.tokens -= bytes;
        }
        // A scatter's outputs go to different ports: sorting them here would mean nothing
        // (sort after the Gather), and delivery must be known now to count the input.
        if self.sorted.load(Ordering::Acquire) && self.routing == Routing::Broadcast {
            let first = {
                let mut s = self.sorter.lock();
                let seq = s.seq;
                s.seq += 1;
                let first = s.pending.is_empty();
                s.pending
                    .insert((out.unique_id, seq), (address, out, Instant::now()));
                first
            };
            self.flush_sorted(false);
            if first && !self.sorter.lock().pending.is_empty() {
                self.housekeeping.kick();
            }
            true
        } else {
            self.forward(address, &out)
        }
    }

    /// Passes one output to the subscribers of `address`; false when a round-robin one
    /// found no taker.
    pub(super) fn forward(&self, address: usize, out: &Arc<NDArray>) -> bool {
        // DisorderedArrays and the merge rule follow the main output (address 0) only.
        if address == 0 {
            let id = out.unique_id as i64;
            let prev = self.last_emitted.swap(id, Ordering::AcqRel);
            if prev != NO_ID && id != prev && id != prev + 1 {
                self.disordered.fetch_add(1, Ordering::Relaxed);
            }
        }
        if !self.array_callbacks.load(Ordering::Acquire) {
            return true;
        }
        match self.routing {
            Routing::Broadcast => {
                self.fanout.offer_all(out, address);
                true
            }
            Routing::RoundRobin => self.fanout.offer_one(out, address),
        }
    }

    /// Emits sorted outputs whose turn has come: no earlier uniqueId is still being
    /// processed, or the sort buffer is over SortSize, or (`timeouts`) the head waited longer
    /// than SortTime. Holding the sorter lock while forwarding keeps the output order.
    /// A merging port (several inputs) cannot see the frames still upstream, so it uses
    /// areaDetector's rule instead of the in-flight one: the head goes when it is the next
    /// uniqueId after the last emitted (or older), else on SortSize/SortTime.
    pub(crate) fn flush_sorted(&self, timeouts: bool) {
        let mut s = self.sorter.lock();
        let sorted = self.sorted.load(Ordering::Acquire);
        while let Some((&(id, seq), (_, _, since))) = s.pending.first_key_value() {
            let min_busy = self
                .state
                .lock()
                .in_flight_ids
                .first_key_value()
                .map(|(k, _)| *k);
            let in_line = || {
                let last = self.last_emitted.load(Ordering::Acquire);
                last != NO_ID && i64::from(id) <= last + 1
            };
            let ready = !sorted
                || (self.merge && in_line())
                || (!self.merge && min_busy.is_none_or(|m| id <= m))
                || s.pending.len() > s.sort_size
                || (timeouts && since.elapsed() >= s.sort_time);
            if !ready {
                break;
            }
            if let Some((address, out, _)) = s.pending.remove(&(id, seq)) {
                self.forward(address, &out);
            }
        }
    }

    /// When the first frame held for sorting goes out on SortTime; None when none is held.
    /// The first by uniqueId, not the longest held: `flush_sorted` looks only at the head,
    /// so an earlier deadline further back would have the housekeeping thread spin.
    pub(crate) fn sort_deadline(&self) -> Option<Instant> {
        let s = self.sorter.lock();
        let (_, (_, _, since)) = s.pending.first_key_value()?;
        since.checked_add(s.sort_time)
    }
}
