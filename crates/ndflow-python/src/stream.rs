//! `Pipeline.frames()`: frames into Python through a port of their own with a bounded
//! queue, so a slow consumer drops (and counts) frames instead of stalling the pipeline.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError};
use ndflow_core::{NDArray, ParamDef, ParamValue};
use ndflow_runtime::{DropReason, Plugin, PluginError, PluginPort, ProcessContext};
use pyo3::exceptions::PyStopAsyncIteration;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::frame::Frame;
use crate::pipeline::Core;

/// The port behind a stream: hands each frame (the `Arc`, never the pixels) to a bounded
/// channel; a full channel drops the frame as DroppedQueueFull.
pub struct SinkPlugin {
    tx: Sender<Arc<NDArray>>,
}

impl SinkPlugin {
    pub fn new(queue: usize) -> (SinkPlugin, Receiver<Arc<NDArray>>) {
        let (tx, rx) = crossbeam_channel::bounded(queue);
        (SinkPlugin { tx }, rx)
    }
}

impl Plugin for SinkPlugin {
    fn plugin_type(&self) -> &'static str {
        "NDPluginPythonFrames"
    }
    fn params(&self) -> &'static [ParamDef] {
        &[]
    }
    fn accepts_compressed(&self) -> bool {
        true
    }
    fn process(
        &self,
        input: &Arc<NDArray>,
        _ctx: &mut ProcessContext<'_>,
    ) -> Result<(), PluginError> {
        match self.tx.try_send(input.clone()) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => Err(PluginError::QueueFull(
                "the Python consumer is slower than the source".into(),
            )),
            Err(TrySendError::Disconnected(_)) => {
                Err(PluginError::Other("the frame stream was closed".into()))
            }
        }
    }
}

/// An iterator (and async iterator) of the frames a port emits. See `Pipeline.frames`.
#[pyclass(frozen, module = "ndflow", name = "FrameStream")]
pub struct FrameStream {
    core: Arc<Core>,
    port: Arc<PluginPort>,
    rx: Receiver<Arc<NDArray>>,
    source: String,
    queue: usize,
    timeout: Option<f64>,
    delivered: AtomicU64,
    closed: AtomicBool,
}

/// What one wait for a frame ended with.
enum Next {
    Frame(Arc<NDArray>),
    End,
    Timeout,
}

impl FrameStream {
    pub fn new(
        core: Arc<Core>,
        port: Arc<PluginPort>,
        rx: Receiver<Arc<NDArray>>,
        source: &str,
        queue: usize,
        timeout: Option<f64>,
    ) -> FrameStream {
        FrameStream {
            core,
            port,
            rx,
            source: source.to_string(),
            queue,
            timeout,
            delivered: AtomicU64::new(0),
            closed: AtomicBool::new(false),
        }
    }

    /// Waits (GIL released in slices of 50 ms, so Ctrl-C is seen) for the next frame.
    fn wait(&self, py: Python<'_>, limit: Option<f64>) -> PyResult<Next> {
        let deadline = limit.map(|t| Instant::now() + Duration::from_secs_f64(t.clamp(0.0, 1e9)));
        loop {
            if self.closed.load(Ordering::Acquire) {
                return Ok(Next::End);
            }
            let slice = match deadline {
                Some(d) => d
                    .saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(50)),
                None => Duration::from_millis(50),
            };
            // Idle after a start means no frame can still come: every plugin has drained,
            // so everything for us is already in the channel.
            let ended = || {
                self.core.started.load(Ordering::SeqCst)
                    && self.core.graph.is_idle()
                    && self.rx.is_empty()
            };
            // A queued frame is taken without releasing the GIL (the common, fast case).
            let got = match self.rx.try_recv() {
                Ok(f) => Some(Next::Frame(f)),
                Err(_) => py.detach(|| {
                    if ended() {
                        return Some(Next::End);
                    }
                    match self.rx.recv_timeout(slice) {
                        Ok(f) => Some(Next::Frame(f)),
                        Err(RecvTimeoutError::Timeout) => ended().then_some(Next::End),
                        Err(RecvTimeoutError::Disconnected) => Some(Next::End),
                    }
                }),
            };
            match got {
                Some(Next::Frame(f)) => {
                    self.delivered.fetch_add(1, Ordering::Relaxed);
                    return Ok(Next::Frame(f));
                }
                Some(other) => return Ok(other),
                None => {}
            }
            if let Err(e) = py.check_signals() {
                // Ctrl-C in a `for frame in stream` loop stops acquisition, as Ctrl-C stops
                // `ndflow run`; the pipeline drains and stays usable.
                for d in self.core.driver_names() {
                    let _ = self.core.put(py, &d, "Acquire", ParamValue::Int(0));
                }
                return Err(e);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(Next::Timeout);
            }
        }
    }

    fn shut(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        let _ = self.core.graph.put(
            &self.port.name,
            "NDArrayPort",
            ParamValue::Str(String::new()),
        );
        // Frames still queued go back to their pool now.
        while self.rx.try_recv().is_ok() {}
    }
}

#[pymethods]
impl FrameStream {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Frame>> {
        self.next_within(py, self.timeout)
    }

    /// The next frame, waiting at most `timeout` seconds (None: no limit); None at the end
    /// of the stream or on time-out.
    #[pyo3(signature = (timeout=None))]
    fn get(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<Frame>> {
        self.next_within(py, timeout)
    }

    fn __aiter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// `async for frame in stream`: the wait runs in the event loop's default executor
    /// (GIL released), so other tasks keep running.
    fn __anext__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let event_loop = py.import("asyncio")?.call_method0("get_running_loop")?;
        event_loop.call_method1(
            "run_in_executor",
            (py.None(), slf.getattr("_next_or_stop")?),
        )
    }

    /// The next frame, or StopAsyncIteration at the end (for `__anext__`).
    fn _next_or_stop(&self, py: Python<'_>) -> PyResult<Frame> {
        self.next_within(py, self.timeout)?
            .ok_or_else(|| PyStopAsyncIteration::new_err(()))
    }

    /// Stops the stream: the port is unwired and frames still queued are released.
    fn close(&self, py: Python<'_>) {
        py.detach(|| self.shut());
    }

    /// The port's name (`_framesN`): its parameters are `pipeline["_framesN"]`.
    #[getter]
    fn port(&self) -> String {
        self.port.name.clone()
    }

    /// The port the frames come from.
    #[getter]
    fn source(&self) -> String {
        self.source.clone()
    }

    /// Counters: offered = delivered + pending + dropped_queue_full + (other drops) +
    /// queued + in_flight. `dropped_queue_full` counts frames dropped because Python was
    /// slower than the source; `pending` frames wait in the stream's queue.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let a = self.port.accounting();
        let d = PyDict::new(py);
        d.set_item("offered", a.offered)?;
        d.set_item("delivered", self.delivered.load(Ordering::Relaxed))?;
        d.set_item("pending", self.rx.len())?;
        d.set_item("dropped_queue_full", a.dropped(DropReason::QueueFull))?;
        d.set_item("dropped", a.dropped_total())?;
        d.set_item("queued", a.queued)?;
        d.set_item("in_flight", a.in_flight)?;
        d.set_item("queue", self.queue)?;
        Ok(d)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _t: Option<Bound<'_, PyAny>>,
        _v: Option<Bound<'_, PyAny>>,
        _tb: Option<Bound<'_, PyAny>>,
    ) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self) -> String {
        format!(
            "<ndflow.FrameStream {} <- {} queue {} delivered {}>",
            self.port.name,
            self.source,
            self.queue,
            self.delivered.load(Ordering::Relaxed)
        )
    }
}

impl FrameStream {
    fn next_within(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<Frame>> {
        Ok(match self.wait(py, timeout)? {
            Next::Frame(f) => Some(Frame::new(f)),
            Next::End | Next::Timeout => None,
        })
    }
}

impl Drop for FrameStream {
    fn drop(&mut self) {
        // Unwiring waits for the source's fan-out lock, which a worker may hold while it runs
        // a Python plugin (BlockingCallbacks) that waits for the GIL: release it meanwhile.
        if Python::try_attach(|py| py.detach(|| self.shut())).is_none() {
            self.shut();
        }
    }
}
