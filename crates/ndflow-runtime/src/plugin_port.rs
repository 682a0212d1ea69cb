//! A plugin port: bounded input queue, concurrency limit, accounting, output sorting and
//! throttling around one [`Plugin`] (NDPluginDriver's semantics, reference §4).
//!
//! Every input transition (offer, drop, dequeue, finish) happens under the one queue lock,
//! so an [`Accounting`] snapshot always balances exactly.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ndflow_core::{NDArray, ParamStore, ParamValue, Pool};
use parking_lot::{Mutex, RwLock};

use crate::accounting::{Accounting, DropReason};
use crate::attr_file::PortAttributes;
use crate::graph::Wakeup;
use crate::meta::FrameMeta;
use crate::params::{ArrayBaseParams, PluginBase};
use crate::plugin::{pool_of, Plugin, PluginError, ProcessContext, Routing};
use crate::scheduler::Scheduler;

const NO_ID: i64 = i64::MIN;

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

/// Settings read on the offer path (kept under the queue lock).
#[derive(Debug, Clone, Copy)]
struct InputConfig {
    enabled: bool,
    blocking: bool,
    queue_size: usize,
    num_threads: usize,
    min_time: Duration,
}

struct InputState {
    cfg: InputConfig,
    /// Frames with their input sequence number ([`ProcessContext::input_seq`]).
    queue: VecDeque<(Arc<NDArray>, u64)>,
    /// Sequence number of the last frame accepted (queued or run in the caller's thread).
    accepted: u64,
    running: usize,
    offered: u64,
    processed: u64,
    dropped: [u64; 5],
    in_flight: u64,
    /// uniqueIds being processed (multiset), for exact output sorting.
    in_flight_ids: BTreeMap<i32, u32>,
    last_accept: Option<Instant>,
    last_input: Option<Arc<NDArray>>,
}

struct Sorter {
    pending: BTreeMap<(i32, u64), (Arc<NDArray>, Instant)>,
    seq: u64,
    sort_time: Duration,
    sort_size: usize,
}

struct Throttle {
    tokens: f64,
    last: Instant,
}

pub struct PluginPort {
    pub name: String,
    pub(crate) plugin: Arc<dyn Plugin>,
    pub params: Arc<ParamStore>,
    sched: Arc<Scheduler>,
    /// Kicked when a frame starts waiting for sorting, so its SortTime is kept.
    housekeeping: Arc<Wakeup>,
    fallback_pool: Pool,
    state: Mutex<InputState>,
    pub(crate) fanout: Fanout,
    routing: Routing,
    /// Several inputs (Gather): sorting waits for the next uniqueId in line.
    merge: bool,
    sorted: AtomicBool,
    array_callbacks: AtomicBool,
    max_byte_rate: AtomicU64,
    sorter: Mutex<Sorter>,
    throttle: Mutex<Throttle>,
    /// MaxArrayRate (arrays/s as f64 bits) and its bucket of at most one array.
    max_array_rate: AtomicU64,
    frame_throttle: Mutex<Throttle>,
    meta: Mutex<FrameMeta>,
    exec_ns: AtomicU64,
    array_counter: AtomicI64,
    dropped_arrays_base: AtomicU64,
    last_emitted: AtomicI64,
    disordered: AtomicU64,
    dropped_output: AtomicU64,
    logged: Mutex<HashSet<String>>,
    /// Source port of each input ("" = none); index 0 is `NDArrayPort`.
    pub(crate) sources: Mutex<Vec<String>>,
    rate: Mutex<(Instant, i64)>,
    /// The handles of NDArrayBase's and NDPluginDriver's parameters in this port's store.
    base: PluginBase,
    /// NDAttributesFile: attached to each input frame before it is processed.
    pub(crate) attrs: PortAttributes,
}

impl PluginPort {
    pub(crate) fn new(
        name: &str,
        plugin: Arc<dyn Plugin>,
        params: Arc<ParamStore>,
        sched: Arc<Scheduler>,
        housekeeping: Arc<Wakeup>,
        fallback_pool: Pool,
    ) -> Arc<PluginPort> {
        let base = PluginBase::of(params.layout());
        base.array.port_name.set(&params, name.to_string());
        base.plugin
            .plugin_type
            .set(&params, plugin.plugin_type().to_string());
        base.plugin
            .max_threads
            .set(&params, plugin.max_threads().max(1) as i64);
        let routing = plugin.routing();
        let n_inputs = plugin.inputs().len().max(1);
        let port = Arc::new(PluginPort {
            name: name.to_string(),
            plugin,
            params,
            sched,
            housekeeping,
            fallback_pool,
            state: Mutex::new(InputState {
                cfg: InputConfig {
                    enabled: true,
                    blocking: false,
                    queue_size: 10,
                    num_threads: 1,
                    min_time: Duration::ZERO,
                },
                queue: VecDeque::new(),
                accepted: 0,
                running: 0,
                offered: 0,
                processed: 0,
                dropped: [0; 5],
                in_flight: 0,
                in_flight_ids: BTreeMap::new(),
                last_accept: None,
                last_input: None,
            }),
            fanout: Fanout::default(),
            routing,
            merge: n_inputs > 1,
            sorted: AtomicBool::new(false),
            array_callbacks: AtomicBool::new(true),
            max_byte_rate: AtomicU64::new(0),
            sorter: Mutex::new(Sorter {
                pending: BTreeMap::new(),
                seq: 0,
                sort_time: Duration::from_millis(100),
                sort_size: 10,
            }),
            throttle: Mutex::new(Throttle {
                tokens: 0.0,
                last: Instant::now(),
            }),
            max_array_rate: AtomicU64::new(0),
            frame_throttle: Mutex::new(Throttle {
                tokens: 1.0,
                last: Instant::now(),
            }),
            meta: Mutex::new(FrameMeta::default()),
            exec_ns: AtomicU64::new(0),
            array_counter: AtomicI64::new(0),
            dropped_arrays_base: AtomicU64::new(0),
            last_emitted: AtomicI64::new(NO_ID),
            disordered: AtomicU64::new(0),
            dropped_output: AtomicU64::new(0),
            logged: Mutex::new(HashSet::new()),
            sources: Mutex::new(vec![String::new(); n_inputs]),
            rate: Mutex::new((Instant::now(), 0)),
            base,
            attrs: PortAttributes::default(),
        });
        port.reload_config();
        port
    }

    pub fn plugin_type(&self) -> &'static str {
        self.plugin.plugin_type()
    }

    /// Re-reads the base settings from the parameters (after any write to them).
    pub(crate) fn reload_config(&self) {
        let (p, b) = (&*self.params, &self.base.plugin);
        let max_threads = self.plugin.max_threads().max(1);
        let cfg = InputConfig {
            enabled: b.enable_callbacks.get(p),
            blocking: b.blocking_callbacks.get(p),
            queue_size: b.queue_size.get(p).max(1) as usize,
            num_threads: (b.num_threads.get(p).max(1) as usize).min(max_threads),
            min_time: Duration::from_secs_f64(b.min_callback_time.get(p).clamp(0.0, 1e6)),
        };
        self.state.lock().cfg = cfg;
        self.sorted
            .store(b.sort_mode.get(p) != 0, Ordering::Release);
        self.array_callbacks
            .store(self.base.array.array_callbacks.get(p), Ordering::Release);
        self.max_byte_rate
            .store(b.max_byte_rate.get(p).max(0.0).to_bits(), Ordering::Release);
        self.max_array_rate.store(
            b.max_array_rate.get(p).max(0.0).to_bits(),
            Ordering::Release,
        );
        let mut s = self.sorter.lock();
        s.sort_time = Duration::from_secs_f64(b.sort_time.get(p).clamp(0.0, 1e6));
        s.sort_size = b.sort_size.get(p).max(1) as usize;
    }

    /// Handles the side effects of an external write to one of this port's parameters.
    pub(crate) fn on_put(self: &Arc<Self>, idx: usize, value: &ParamValue) {
        let (a, b, p) = (&self.base.array, &self.base.plugin, &*self.params);
        let count = || value.as_i64().unwrap_or(0).max(0) as u64;
        if a.array_counter.is(idx) {
            self.array_counter
                .store(value.as_i64().unwrap_or(0), Ordering::Release);
        } else if b.dropped_arrays.is(idx) {
            let acc = self.accounting();
            let total = acc.dropped(DropReason::QueueFull) + acc.dropped(DropReason::Unsupported);
            self.dropped_arrays_base
                .store(total.saturating_sub(count()), Ordering::Release);
        } else if b.disordered_arrays.is(idx) {
            // Writable counters: a write sets them (0 resets), as areaDetector's longouts do.
            self.disordered.store(count(), Ordering::Release);
        } else if b.dropped_output_arrays.is(idx) {
            self.dropped_output.store(count(), Ordering::Release);
        } else if a.pool_max_mem.is(idx) || a.empty_free_list.is(idx) || a.pre_alloc_buffers.is(idx)
        {
            // The pool records act on the pool this port's outputs come from (its source's).
            self.pool_put(idx, value);
        } else if b.process_plugin.is(idx) && value.as_i64().unwrap_or(0) != 0 {
            let last = self.state.lock().last_input.clone();
            if let Some(f) = last {
                self.offer(&f);
            }
            b.process_plugin.set(p, 0);
        }
        self.reload_config();
        if b.num_threads.is(idx) || b.queue_size.is(idx) {
            self.kick();
        }
        let accepted = self.state.lock().accepted;
        self.plugin
            .param_changed_at(&self.params, idx, value, accepted);
        self.plugin.emit_after_put(&mut |out| {
            self.emit(out);
        });
    }

    /// Starts workers for queued frames if the concurrency limit allows more.
    fn kick(self: &Arc<Self>) {
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

    fn process_frame(&self, frame: Arc<NDArray>, seq: u64) {
        let t0 = Instant::now();
        let frame = self.attrs.attach(&frame, &self.params);
        let pool = pool_of(&frame, &self.fallback_pool);
        let mut outputs = Vec::new();
        let result = {
            let mut ctx =
                ProcessContext::new(&self.params, &pool, &mut outputs).with_input_seq(seq);
            self.plugin.process(&frame, &mut ctx)
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
            undelivered |= !self.emit(out);
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

    /// Throttles, sorts and forwards one output. False only when a round-robin output found
    /// no downstream port to take it (the caller counts the input as dropped).
    fn emit(&self, out: Arc<NDArray>) -> bool {
        let frames = f64::from_bits(self.max_array_rate.load(Ordering::Acquire));
        if frames > 0.0 {
            let mut t = self.frame_throttle.lock();
            let now = Instant::now();
            // At most one array of burst: outputs are spaced by 1/MaxArrayRate.
            t.tokens = (t.tokens + frames * now.duration_since(t.last).as_secs_f64()).min(1.0);
            t.last = now;
            if t.tokens < 1.0 {
                self.dropped_output.fetch_add(1, Ordering::Relaxed);
                return true;
            }
            t.tokens -= 1.0;
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
                    .insert((out.unique_id, seq), (out, Instant::now()));
                first
            };
            self.flush_sorted(false);
            if first && !self.sorter.lock().pending.is_empty() {
                self.housekeeping.kick();
            }
            true
        } else {
            self.forward(&out)
        }
    }

    /// Passes one output to the subscribers; false when a round-robin one found no taker.
    fn forward(&self, out: &Arc<NDArray>) -> bool {
        let id = out.unique_id as i64;
        let prev = self.last_emitted.swap(id, Ordering::AcqRel);
        if prev != NO_ID && id != prev && id != prev + 1 {
            self.disordered.fetch_add(1, Ordering::Relaxed);
        }
        if !self.array_callbacks.load(Ordering::Acquire) {
            return true;
        }
        match self.routing {
            Routing::Broadcast => {
                self.fanout.offer_all(out);
                true
            }
            Routing::RoundRobin => self.fanout.offer_one(out),
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
        while let Some((&(id, seq), (_, since))) = s.pending.first_key_value() {
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
            if let Some((out, _)) = s.pending.remove(&(id, seq)) {
                self.forward(&out);
            }
        }
    }

    /// When the first frame held for sorting goes out on SortTime; None when none is held.
    /// The first by uniqueId, not the longest held: `flush_sorted` looks only at the head,
    /// so an earlier deadline further back would have the housekeeping thread spin.
    pub(crate) fn sort_deadline(&self) -> Option<Instant> {
        let s = self.sorter.lock();
        let (_, (_, since)) = s.pending.first_key_value()?;
        since.checked_add(s.sort_time)
    }

    fn log_once(&self, key: &str, msg: &str) {
        if self.logged.lock().insert(key.to_string()) {
            tracing::warn!("{msg}");
        }
    }

    /// Exact input accounting at this instant.
    pub fn accounting(&self) -> Accounting {
        let (offered, processed, dropped, queued, in_flight) = {
            let st = self.state.lock();
            (
                st.offered,
                st.processed,
                st.dropped,
                st.queue.len() as u64,
                st.in_flight,
            )
        };
        Accounting {
            offered,
            processed,
            dropped,
            queued,
            in_flight,
            dropped_output: self.dropped_output.load(Ordering::Acquire),
            sort_pending: self.sorter.lock().pending.len() as u64,
        }
    }

    /// Frames this port still holds (queued, in flight, or waiting to be sorted).
    pub fn busy(&self) -> u64 {
        let a = self.accounting();
        a.queued + a.in_flight + a.sort_pending
    }

    pub fn disordered(&self) -> u64 {
        self.disordered.load(Ordering::Acquire)
    }

    pub fn array_counter(&self) -> i64 {
        self.array_counter.load(Ordering::Acquire)
    }

    /// Name of the upstream port (`NDArrayPort`; the first input of a Gather).
    pub fn source(&self) -> String {
        self.sources.lock().first().cloned().unwrap_or_default()
    }

    /// Names of the ports subscribed to this one's output.
    /// The handles of NDArrayBase's parameters in this port's store.
    pub fn array_base(&self) -> &ArrayBaseParams {
        &self.base.array
    }

    pub fn subscriber_names(&self) -> Vec<String> {
        self.fanout.subscriber_names()
    }

    /// Names of every upstream port (distinct, none empty).
    pub fn sources(&self) -> Vec<String> {
        distinct(&self.sources.lock())
    }

    /// The input a source parameter sets: 0 for `NDArrayPort`, i for the plugin's
    /// `inputs()[i]` (whose first is input 0 too).
    pub(crate) fn source_slot(&self, param: &str) -> Option<usize> {
        if param == "NDArrayPort" {
            return Some(0);
        }
        self.plugin.inputs().iter().position(|n| *n == param)
    }

    /// The parameters that name input `slot` (`NDArrayPort` and `NDArrayPort_1` for 0).
    pub(crate) fn slot_params(&self, slot: usize) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = self
            .plugin
            .inputs()
            .get(slot)
            .copied()
            .into_iter()
            .collect();
        if slot == 0 {
            names.push("NDArrayPort");
        }
        names
    }

    /// The pool this port's outputs are allocated from: that of its last input's buffer
    /// (areaDetector's plugins allocate from their source's pool); none before a first input.
    fn source_pool(&self) -> Option<Pool> {
        let last = self.state.lock().last_input.clone();
        last.map(|f| pool_of(&f, &self.fallback_pool))
    }

    fn pool_put(&self, idx: usize, value: &ParamValue) {
        let (a, p) = (&self.base.array, &*self.params);
        let v = value.as_f64().unwrap_or(0.0);
        let pool = self.source_pool();
        if a.pool_max_mem.is(idx) {
            if let Some(pool) = pool {
                pool.set_max_mem((v.max(0.0) * 1e6) as usize);
            }
        } else if a.empty_free_list.is(idx) && v != 0.0 {
            if let Some(pool) = pool {
                pool.empty_free_list();
            }
            a.empty_free_list.set(p, 0);
        } else if a.pre_alloc_buffers.is(idx) && v != 0.0 {
            let n = a.num_pre_alloc_buffers.get(p).max(0) as usize;
            let bytes = a.array_size.get(p).max(0) as usize;
            if let Some(Err(e)) = pool.map(|pool| pool.preallocate(n, bytes)) {
                self.log_once("prealloc", &format!("{}: PreAllocBuffers: {e}", self.name));
            }
            a.pre_alloc_buffers.set(p, 0);
        }
    }

    /// Writes the counters to the parameters (called at a bounded rate, and at the end).
    pub(crate) fn publish(&self, rate_tick: bool) {
        let a = self.accounting();
        let (cfg, last) = {
            let st = self.state.lock();
            (st.cfg, st.last_input.clone())
        };
        let counter = self.array_counter();
        let mut w: Vec<(usize, ParamValue)> = Vec::with_capacity(32);
        let (x, b) = (&self.base.array, &self.base.plugin);
        w.push(x.array_counter.value(counter));
        w.push(b.arrays_offered.value(a.offered as i64));
        w.push(b.arrays_processed.value(a.processed as i64));
        let dropped = [
            b.dropped_queue_full,
            b.dropped_min_time,
            b.dropped_unsupported,
            b.dropped_disabled,
            b.dropped_errors,
        ];
        for (h, r) in dropped.iter().zip(DropReason::ALL.iter()) {
            w.push(h.value(a.dropped(*r) as i64));
        }
        let ad_dropped = a.dropped(DropReason::QueueFull) + a.dropped(DropReason::Unsupported);
        let base = self.dropped_arrays_base.load(Ordering::Acquire);
        w.push(
            b.dropped_arrays
                .value(ad_dropped.saturating_sub(base) as i64),
        );
        w.push(b.queue_use.value(a.queued as i64));
        w.push(
            b.queue_free
                .value(cfg.queue_size.saturating_sub(a.queued as usize) as i64),
        );
        w.push(b.in_flight.value(a.in_flight as i64));
        w.push(
            b.execution_time
                .value(self.exec_ns.load(Ordering::Relaxed) as f64 / 1e6),
        );
        w.push(b.disordered_arrays.value(self.disordered() as i64));
        w.push(b.dropped_output_arrays.value(a.dropped_output as i64));
        let sort_size = self.sorter.lock().sort_size;
        w.push(
            b.sort_free
                .value(sort_size.saturating_sub(a.sort_pending as usize) as i64),
        );
        if rate_tick {
            let mut r = self.rate.lock();
            let dt = r.0.elapsed().as_secs_f64();
            if dt > 0.0 {
                w.push(x.array_rate.value(((counter - r.1).max(0)) as f64 / dt));
            }
            *r = (Instant::now(), counter);
        }
        if let Some(f) = last {
            let s = pool_of(&f, &self.fallback_pool).stats();
            w.push(x.pool_max_mem.value(s.max_mem as f64 / 1e6));
            w.push(x.pool_used_mem.value(s.used_mem as f64 / 1e6));
            w.push(x.pool_alloc_buffers.value(s.alloc_buffers as i64));
            w.push(x.pool_free_buffers.value(s.free_buffers as i64));
            w.push(
                x.pool_used_buffers
                    .value(s.alloc_buffers as i64 - s.free_buffers as i64),
            );
        }
        self.meta.lock().write_to(x, true, &mut w);
        self.params.set_many(&w);
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
