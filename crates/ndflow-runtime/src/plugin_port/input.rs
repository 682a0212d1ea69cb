//! The input side: offering a frame (queue, blocking, MinCallbackTime), the workers' turns,
//! and processing one frame with its accounting.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use ndflow_core::NDArray;

use super::*;

impl PluginPort {
    /// Starts workers for queued frames if the concurrency limit allows more.
    pub(super) fn kick(self: &Arc<Self>) {
        let mut st = self.state.lock();
        let mut n = 0;
        while st.running < st.cfg.num_threads && st.running < st.queue.len() {
            st.running += 1;
            n += 1;
        }
        drop(st);
        for _ in 0..n {
            self.sched.submit(self.clone());
        }
    }

    /// Offers a frame to this port's input. Never blocks unless BlockingCallbacks = Yes.
    pub fn offer(self: &Arc<Self>, frame: &Arc<NDArray>) {
        self.offer_as(frame, Offer::Always);
    }

    /// [`PluginPort::offer`] if `how` allows it now; false (nothing counted) if not. Once
    /// taken, the frame is this port's to count (processed or dropped with a reason).
    pub(crate) fn offer_as(self: &Arc<Self>, frame: &Arc<NDArray>, how: Offer) -> bool {
        let mut st = self.state.lock();
        let cfg = st.cfg;
        let take = match how {
            Offer::Always => true,
            Offer::IfFree if cfg.blocking => cfg.enabled && st.in_flight == 0,
            Offer::IfFree => cfg.enabled && st.queue.len() < cfg.queue_size,
            Offer::IfBlocking => cfg.enabled && cfg.blocking,
        };
        if !take {
            return false;
        }
        st.offered += 1;
        if !cfg.enabled {
            st.dropped[DropReason::Disabled as usize] += 1;
            return true;
        }
        if frame.is_compressed() && !self.plugin.accepts_compressed() {
            st.dropped[DropReason::Unsupported as usize] += 1;
            drop(st);
            self.log_once(
                "compressed",
                &format!(
                    "{}: dropping compressed input (codec '{}'): {} accepts only uncompressed frames",
                    self.name,
                    frame.codec.name,
                    self.plugin.plugin_type()
                ),
            );
            return true;
        }
        if !cfg.min_time.is_zero() {
            let now = Instant::now();
            if st
                .last_accept
                .is_some_and(|t| now.duration_since(t) < cfg.min_time)
            {
                st.dropped[DropReason::MinTime as usize] += 1;
                return true;
            }
            st.last_accept = Some(now);
        }
        st.last_input = Some(frame.clone());
        if cfg.blocking {
            st.in_flight += 1;
            *st.in_flight_ids.entry(frame.unique_id).or_insert(0) += 1;
            st.accepted += 1;
            let seq = st.accepted;
            drop(st);
            self.process_frame(frame.clone(), seq);
            return true;
        }
        if st.queue.len() >= cfg.queue_size {
            st.dropped[DropReason::QueueFull as usize] += 1;
            return true;
        }
        st.accepted += 1;
        let seq = st.accepted;
        st.queue.push_back((frame.clone(), seq));
        if st.running < cfg.num_threads {
            st.running += 1;
            drop(st);
            self.sched.submit(self.clone());
        }
        true
    }

    /// One worker's turn: process one queued frame, then hand the port back to the pool —
    /// unless no other task waits anywhere in the pool, in which case the same worker goes
    /// on with the port's next frame. Handing the port back when nothing else waits only
    /// woke the other worker to take it (a context switch per frame, ~1 per frame for a
    /// single-thread writer fed faster than it writes); with any task waiting the port still
    /// yields after each frame, so one slow port cannot hold a worker from other ports.
    pub(crate) fn run_task(self: Arc<Self>, sched: &Arc<Scheduler>) {
        loop {
            let (frame, seq) = {
                let mut st = self.state.lock();
                match st.queue.pop_front() {
                    Some((f, seq)) => {
                        st.in_flight += 1;
                        *st.in_flight_ids.entry(f.unique_id).or_insert(0) += 1;
                        (f, seq)
                    }
                    None => {
                        st.running = st.running.saturating_sub(1);
                        return;
                    }
                }
            };
            self.process_frame(frame, seq);
            let mut st = self.state.lock();
            if st.queue.is_empty() || st.running > st.cfg.num_threads {
                st.running = st.running.saturating_sub(1);
                return;
            }
            drop(st);
            if !sched.nothing_waiting() {
                sched.submit_global(self);
                return;
            }
        }
    }

    pub(super) fn process_frame(&self, frame: Arc<NDArray>, seq: u64) {
        let t0 = Instant::now();
        let frame = self.attrs.attach(&frame, &self.params);
        let pool = pool_of(&frame, &self.fallback_pool);
        let mut outputs = Vec::new();
        let (result, addressed) = {
            let mut ctx =
                ProcessContext::new(&self.params, &pool, &mut outputs).with_input_seq(seq);
            let result = self.plugin.process(&frame, &mut ctx);
            (result, ctx.take_addressed())
        };
        self.exec_ns
            .store(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
        // Readbacks show the output when there is one (ROI's size), else the input.
        self.meta.lock().update(outputs.first().unwrap_or(&frame));
        // A full downstream queue is counted, not logged (it is the expected overload case).
        if let Some(e) = result
            .as_ref()
            .err()
            .filter(|e| !matches!(e, PluginError::QueueFull(_)))
        {
            let msg = e.to_string();
            self.log_once(
                &msg,
                &format!("{}: frame {} dropped: {msg}", self.name, frame.unique_id),
            );
        }
        // A scatter output no downstream port could take: the input is dropped, not processed.
        let mut undelivered = false;
        for out in outputs {
            undelivered |= !self.emit(0, out);
        }
        for (address, out) in addressed {
            undelivered |= !self.emit(address, out);
        }
        if undelivered {
            self.log_once(
                "undelivered",
                &format!(
                    "{}: frame {} dropped: no downstream port could take it (queues full or disabled)",
                    self.name, frame.unique_id
                ),
            );
        }
        {
            let mut st = self.state.lock();
            st.in_flight -= 1;
            if let Some(c) = st.in_flight_ids.get_mut(&frame.unique_id) {
                *c -= 1;
                if *c == 0 {
                    st.in_flight_ids.remove(&frame.unique_id);
                }
            }
            match &result {
                Ok(()) if undelivered => st.dropped[DropReason::QueueFull as usize] += 1,
                Ok(()) => st.processed += 1,
                // The plugin cannot take this input (e.g. colour into a Mono-only kernel).
                Err(PluginError::Unsupported(_)) => {
                    st.dropped[DropReason::Unsupported as usize] += 1
                }
                Err(PluginError::QueueFull(_)) => st.dropped[DropReason::QueueFull as usize] += 1,
                Err(_) => st.dropped[DropReason::Error as usize] += 1,
            }
        }
        if result.is_ok() && !undelivered {
            self.array_counter.fetch_add(1, Ordering::AcqRel);
        }
        if self.sorted.load(Ordering::Acquire) || !self.sorter.lock().pending.is_empty() {
            self.flush_sorted(false);
        }
    }
}
