//! A plugin port: bounded input queue, concurrency limit, accounting, output sorting and
//! throttling around one [`Plugin`] (NDPluginDriver's semantics).
//!
//! Every input transition (offer, drop, dequeue, finish) happens under the one queue lock,
//! so an [`Accounting`] snapshot always balances exactly. The parts: [`fanout`] (who gets
//! the outputs), [`input`] (queue, workers, processing), [`output`] (throttling and sorting
//! of outputs), [`publish`] (counters to parameters, the pool records).

mod fanout;
mod input;
mod output;
mod publish;

pub use fanout::Fanout;
pub(crate) use fanout::Offer;
pub(crate) use fanout::{distinct, distinct_pairs, Source};
use output::{Sorter, Throttle};

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ndflow_core::{NDArray, ParamStore, ParamValue, Pool};
use parking_lot::Mutex;

use crate::accounting::{Accounting, DropReason};
use crate::attr_file::PortAttributes;
use crate::meta::FrameMeta;
use crate::plugin::{pool_of, Plugin, PluginError, ProcessContext, Routing};
use crate::port_params::{ArrayBaseParams, PluginBase};
use crate::scheduler::Scheduler;
use crate::wakeup::Wakeup;

const NO_ID: i64 = i64::MIN;

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
    meta: Mutex<FrameMeta>,
    exec_ns: AtomicU64,
    array_counter: AtomicI64,
    dropped_arrays_base: AtomicU64,
    last_emitted: AtomicI64,
    disordered: AtomicU64,
    dropped_output: AtomicU64,
    logged: Mutex<HashSet<String>>,
    /// Source port ("" = none) and address of each input; index 0 is `NDArrayPort` with
    /// `NDArrayAddress`.
    pub(crate) sources: Mutex<Vec<Source>>,
    /// Addresses this port publishes on ([`Plugin::addresses`]).
    addresses: usize,
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
        let addresses = plugin.addresses().max(1);
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
            meta: Mutex::new(FrameMeta::default()),
            exec_ns: AtomicU64::new(0),
            array_counter: AtomicI64::new(0),
            dropped_arrays_base: AtomicU64::new(0),
            last_emitted: AtomicI64::new(NO_ID),
            disordered: AtomicU64::new(0),
            dropped_output: AtomicU64::new(0),
            logged: Mutex::new(HashSet::new()),
            sources: Mutex::new(vec![(String::new(), 0); n_inputs]),
            addresses,
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
        } else if b.max_array_rate.is(idx) {
            // ADCore's MaxArrayRate_COUT: the rate is MinCallbackTime's reciprocal, so the
            // frames over it are skipped at the input (counted as DroppedMinTime).
            let rate = value.as_f64().unwrap_or(0.0);
            let time = if rate > 0.0 { 1.0 / rate } else { 0.0 };
            b.min_callback_time.set(p, time);
        } else if b.min_callback_time.is(idx) {
            // ADCore's MaxArrayRate_RBV calc: 1 / MinCallbackTime (0 = no limit).
            let time = value.as_f64().unwrap_or(0.0);
            b.max_array_rate
                .set(p, if time > 0.0 { 1.0 / time } else { 0.0 });
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
            self.emit(0, out);
        });
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
        self.sources
            .lock()
            .first()
            .map(|s| s.0.clone())
            .unwrap_or_default()
    }

    /// The address of the upstream port this port takes (`NDArrayAddress`; the first input
    /// of a Gather).
    pub fn source_address(&self) -> usize {
        self.sources.lock().first().map_or(0, |s| s.1)
    }

    /// How many addresses this port publishes on ([`Plugin::addresses`]).
    pub fn addresses(&self) -> usize {
        self.addresses
    }

    /// The handles of NDArrayBase's parameters in this port's store.
    pub fn array_base(&self) -> &ArrayBaseParams {
        &self.base.array
    }

    /// Names of the ports subscribed to this one's output.
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

    /// The input an address parameter sets: 0 for `NDArrayAddress`, i for the plugin's
    /// `input_addresses()[i]`.
    pub(crate) fn address_slot(&self, param: &str) -> Option<usize> {
        if param == "NDArrayAddress" {
            return Some(0);
        }
        self.plugin
            .input_addresses()
            .iter()
            .position(|n| *n == param)
    }

    /// The parameters that give the address of input `slot` (`NDArrayAddress` and
    /// `NDArrayAddress_1` for 0).
    pub(crate) fn slot_address_params(&self, slot: usize) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = self
            .plugin
            .input_addresses()
            .get(slot)
            .copied()
            .into_iter()
            .collect();
        if slot == 0 {
            names.push("NDArrayAddress");
        }
        names
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
}
