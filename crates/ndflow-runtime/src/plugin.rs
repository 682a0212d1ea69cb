//! The [`Plugin`] trait: what a processing plugin implements. The runtime supplies queues,
//! threads, counters, sorting and throttling (NDPluginDriver's job); a plugin only turns one
//! input frame into results and/or output frames.

use std::sync::Arc;

use ndflow_core::{BufferMut, CoreError, NDArray, ParamDef, ParamStore, ParamValue, Pool};
use thiserror::Error;

/// Why a plugin could not process a frame. The runtime counts the frame as dropped with
/// reason "error" and logs the message once per distinct kind.
#[derive(Debug, Error)]
pub enum PluginError {
    #[error(transparent)]
    Core(#[from] CoreError),
    #[error("unsupported input: {0}")]
    Unsupported(String),
    /// The plugin's own downstream queue is full (a consumer outside the graph, e.g. a
    /// Python iterator, is slower than the source): counted as DroppedQueueFull.
    #[error("queue full: {0}")]
    QueueFull(String),
    #[error("{0}")]
    Other(String),
}

/// Where a port sends its outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routing {
    /// Every output to every subscriber (fan-out; the default).
    Broadcast,
    /// Each output to exactly one subscriber, round-robin, skipping those whose queue is full
    /// (NDPluginScatter). An output no subscriber can take is counted as this port's input
    /// dropped with reason "queue full".
    RoundRobin,
}

/// A processing plugin. `process` may run on several worker threads at once when
/// `max_threads() > 1`, so state that changes per frame needs its own lock.
///
/// Settings: read them from `ctx.params` (this port's store, base parameters plus
/// `params()`) through typed handles bound at construction against
/// [`crate::port_params::plugin_layout`] of the same table (see `ndflow_core::params!`); for
/// several values, one snapshot under [`ParamStore::with_values`] per frame or whenever
/// `ParamStore::version` moves.
pub trait Plugin: Send + Sync + 'static {
    /// PluginType_RBV, e.g. "NDPluginROI".
    fn plugin_type(&self) -> &'static str;
    /// This plugin's own parameter declarations (the runtime adds NDPluginDriver's).
    fn params(&self) -> &'static [ParamDef];
    /// MaxThreads_RBV: 1 for plugins whose processing is inherently serial.
    fn max_threads(&self) -> usize {
        1
    }
    /// Whether compressed frames are accepted (others are dropped with reason "unsupported").
    fn accepts_compressed(&self) -> bool {
        false
    }
    /// Where outputs go: [`Routing::Broadcast`] unless the plugin distributes them (Scatter).
    fn routing(&self) -> Routing {
        Routing::Broadcast
    }
    /// Source parameters of a port with several inputs (NDPluginGather's `NDArrayPort_1` ..
    /// `NDArrayPort_8`), one per input; the port subscribes to every port they name. The
    /// first is the same input as `NDArrayPort` (areaDetector's address 0), and a write to
    /// either shows in both. A port with inputs here merges streams, so its SortMode waits
    /// for the next uniqueId in line (areaDetector's rule) rather than for its own workers.
    /// Empty (the default): one input, `NDArrayPort`.
    fn inputs(&self) -> &'static [&'static str] {
        &[]
    }
    /// Address parameters of the inputs of [`Plugin::inputs`], in the same order
    /// (NDPluginGather's `NDArrayAddress_1` .. `NDArrayAddress_8`; the first is the same
    /// input's address as `NDArrayAddress`). Empty: one input, `NDArrayAddress`.
    fn input_addresses(&self) -> &'static [&'static str] {
        &[]
    }
    /// How many addresses this port publishes on (areaDetector's asyn addresses 0..N-1):
    /// [`ProcessContext::emit`] goes to address 0, [`ProcessContext::emit_to`] to another.
    /// A downstream port takes the frames of one address (its `NDArrayAddress`); a write
    /// naming an address outside 0..N-1 is refused. Fixed for the port's life.
    fn addresses(&self) -> usize {
        1
    }
    /// Called once, when the port's store exists and before any frame or write: a plugin that
    /// updates parameters from outside `process` (a subscriber count) keeps the store here.
    fn attached(&self, _params: &Arc<ParamStore>) {}
    /// Processes one frame; outputs go through `ctx.emit`.
    fn process(
        &self,
        input: &Arc<NDArray>,
        ctx: &mut ProcessContext<'_>,
    ) -> Result<(), PluginError>;
    /// Told of every external write to this port's parameters (commands such as ResetFilter).
    fn param_changed(&self, _params: &ParamStore, _idx: usize, _value: &ParamValue) {}
    /// [`Plugin::param_changed`] with the port's input position at the moment of the write:
    /// `accepted` is the [`ProcessContext::input_seq`] of the last frame the port accepted
    /// (0 = none yet). A plugin that must still handle the frames queued before a command
    /// (a file writer stopping a stream) compares it with each frame's `input_seq`. The
    /// default forwards to `param_changed`.
    fn param_changed_at(&self, params: &ParamStore, idx: usize, value: &ParamValue, accepted: u64) {
        let _ = accepted;
        self.param_changed(params, idx, value)
    }
    /// Frames a command released outside `process` (CircularBuff's FlushOnSoftTrg =
    /// Immediately sends its ring on the Trigger write, without waiting for a frame). The
    /// port calls this after every `param_changed_at`; `emit` passes a frame downstream at
    /// once, so a plugin that calls it under its own lock keeps its output order.
    fn emit_after_put(&self, _emit: &mut dyn FnMut(Arc<NDArray>)) {}
}

/// What a plugin sees while processing one frame.
pub struct ProcessContext<'a> {
    pub params: &'a ParamStore,
    pool: &'a Pool,
    /// Outputs on address 0.
    outputs: &'a mut Vec<Arc<NDArray>>,
    /// Outputs on other addresses, in emission order.
    addressed: Vec<(usize, Arc<NDArray>)>,
    input_seq: Option<u64>,
}

impl<'a> ProcessContext<'a> {
    pub fn new(params: &'a ParamStore, pool: &'a Pool, outputs: &'a mut Vec<Arc<NDArray>>) -> Self {
        ProcessContext {
            params,
            pool,
            outputs,
            addressed: Vec::new(),
            input_seq: None,
        }
    }

    /// Tags the frame with its input sequence number (the port does this).
    pub fn with_input_seq(mut self, seq: u64) -> Self {
        self.input_seq = Some(seq);
        self
    }

    /// The frame's place in the port's input: 1 for the first frame the port accepted, 2 for
    /// the next, ... `None` when run without a port (harness, benchmarks).
    pub fn input_seq(&self) -> Option<u64> {
        self.input_seq
    }

    /// The pool of the input frame (areaDetector allocates outputs from the source's pool).
    pub fn pool(&self) -> &Pool {
        self.pool
    }

    /// A buffer of `len` bytes from the pool; a cap hit becomes an error (frame counted).
    pub fn alloc(&self, len: usize) -> Result<BufferMut, PluginError> {
        Ok(self.pool.alloc(len)?)
    }

    /// Passes a frame downstream on address 0 (after sorting/throttling by the runtime).
    pub fn emit(&mut self, frame: impl Into<Arc<NDArray>>) {
        self.outputs.push(frame.into());
    }

    /// Passes a frame downstream on `address`: only the ports whose `NDArrayAddress` is
    /// `address` get it. Address 0 is [`ProcessContext::emit`]; other addresses are not
    /// throttled (MaxByteRate) or sorted (SortMode), as in ADCore, where only the main output
    /// goes through NDPluginDriver's. An address at or beyond [`Plugin::addresses`] reaches
    /// no port (the port counts it in `DroppedOutputArrays`).
    pub fn emit_to(&mut self, address: usize, frame: impl Into<Arc<NDArray>>) {
        if address == 0 {
            self.outputs.push(frame.into());
        } else {
            self.addressed.push((address, frame.into()));
        }
    }

    /// The outputs emitted on addresses other than 0, in order (the port forwards them).
    pub fn take_addressed(&mut self) -> Vec<(usize, Arc<NDArray>)> {
        std::mem::take(&mut self.addressed)
    }
}

/// Pool to use for a frame: its own buffer's pool, else `fallback`.
pub fn pool_of(frame: &NDArray, fallback: &Pool) -> Pool {
    frame.buffer.pool().unwrap_or_else(|| fallback.clone())
}
