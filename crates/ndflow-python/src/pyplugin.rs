//! Plugins written in Python: `Pipeline.add_python(name, func, ...)`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ndflow_core::{ColorMode, NDArray, ParamDef};
use ndflow_runtime::{Plugin, PluginError, ProcessContext};
use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;

use crate::convert::data_type_of;
use crate::frame::Frame;

/// Tracebacks printed per plugin before only counting (DroppedErrors still counts all).
const TRACEBACKS: u64 = 5;

/// A plugin port whose processing is a Python callable. The runtime gives it queues,
/// threads and accounting like any plugin; the GIL is taken only around the call (and the
/// copy of a returned array into a pool buffer).
pub struct PyPlugin {
    /// None once the pipeline was cleared by Python's garbage collector (see
    /// `Pipeline.__clear__`).
    func: parking_lot::Mutex<Option<Py<PyAny>>>,
    port: String,
    label: String,
    threads: usize,
    errors: AtomicU64,
}

impl PyPlugin {
    pub fn new(func: Py<PyAny>, port: &str, label: &str, threads: usize) -> PyPlugin {
        PyPlugin {
            func: parking_lot::Mutex::new(Some(func)),
            port: port.to_string(),
            label: label.to_string(),
            threads,
            errors: AtomicU64::new(0),
        }
    }

    /// Lends the function to the garbage collector's visit (never blocks: a function being
    /// cloned right now is simply not visited this time).
    pub fn visit(&self, visit: &pyo3::gc::PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
        if let Some(guard) = self.func.try_lock() {
            if let Some(f) = guard.as_ref() {
                visit.call(f)?;
            }
        }
        Ok(())
    }

    /// Drops the function (breaks a cycle through a closure over the pipeline).
    pub fn clear(&self) -> Option<Py<PyAny>> {
        self.func.lock().take()
    }

    /// Counts an exception and prints its traceback (the first few times).
    fn report(&self, py: Python<'_>, input: &NDArray, e: &PyErr) -> PluginError {
        let n = self.errors.fetch_add(1, Ordering::Relaxed) + 1;
        if n <= TRACEBACKS {
            let header = format!(
                "ndflow: port '{}': {} raised on frame {} (counted in DroppedErrors){}\n",
                self.port,
                self.label,
                input.unique_id,
                if n == TRACEBACKS {
                    "; further exceptions are counted, not printed"
                } else {
                    ""
                }
            );
            // Through sys.stderr, as the traceback goes, so notebooks show both.
            let _ = py
                .import("sys")
                .and_then(|sys| sys.getattr("stderr"))
                .and_then(|err| err.call_method1("write", (header,)));
            e.display(py);
        }
        PluginError::Other(format!("Python exception in {}: {e}", self.label))
    }

    /// What `func` returned, as frames to emit.
    fn output(
        &self,
        py: Python<'_>,
        input: &Arc<NDArray>,
        out: &Bound<'_, PyAny>,
        ctx: &mut ProcessContext<'_>,
    ) -> Result<(), PluginError> {
        if out.is_none() {
            return Ok(());
        }
        if let Ok(f) = out.cast::<Frame>() {
            ctx.emit(f.get().arr.clone());
            return Ok(());
        }
        let bad = |m: String| PluginError::Other(format!("{}: {m}", self.label));
        let np = py.import("numpy").map_err(|e| bad(e.to_string()))?;
        let arr = match out.cast::<PyUntypedArray>() {
            Ok(a) if a.is_c_contiguous() => a.clone(),
            _ => np
                .call_method1("ascontiguousarray", (out,))
                .and_then(|a| Ok(a.cast_into::<PyUntypedArray>()?))
                .map_err(|e| bad(format!("must return a numpy array, a Frame or None ({e})")))?,
        };
        let dt = data_type_of(py, &arr.dtype()).ok_or_else(|| {
            bad(format!(
                "returned dtype {} is not a pixel type (int8..uint64, float32, float64)",
                arr.dtype()
            ))
        })?;
        if arr.ndim() == 0 || arr.ndim() > 10 {
            return Err(bad(format!("returned a {}-D array", arr.ndim())));
        }
        let sizes: Vec<usize> = arr.shape().iter().rev().copied().collect();
        let nbytes = sizes.iter().product::<usize>() * dt.size();
        // SAFETY: `arr` is a C-contiguous numpy array (checked or made so above) that we hold
        // a reference to, with the GIL held, so its data pointer addresses `nbytes` readable
        // bytes that no other thread can free or resize during this function.
        let data: &[u8] = unsafe {
            let p = (*arr.as_array_ptr()).data as *const u8;
            if nbytes == 0 || p.is_null() {
                &[]
            } else {
                std::slice::from_raw_parts(p, nbytes)
            }
        };
        // The input's own pixels returned unchanged: pass the frame on without a copy.
        if dt == input.data_type
            && sizes == input.sizes()
            && !input.is_compressed()
            && std::ptr::eq(data.as_ptr(), input.buffer.as_ptr())
        {
            ctx.emit(input.clone());
            return Ok(());
        }
        let mut buf = ctx.alloc(nbytes)?;
        buf.copy_from_slice(data);
        let frame = if sizes == input.sizes() {
            input.with_buffer(dt, buf.freeze())
        } else {
            let mut f = NDArray::new(&sizes, dt, buf.freeze())?;
            f.unique_id = input.unique_id;
            f.time_stamp = input.time_stamp;
            f.epics_ts = input.epics_ts;
            f.attributes = input.attributes.clone();
            if sizes.len() < 3 && input.color_mode() != ColorMode::Mono {
                f.set_color_mode(ColorMode::Mono);
            }
            f
        };
        ctx.emit(frame);
        Ok(())
    }
}

impl Plugin for PyPlugin {
    fn plugin_type(&self) -> &'static str {
        "NDPluginPython"
    }
    fn params(&self) -> &'static [ParamDef] {
        &[]
    }
    fn max_threads(&self) -> usize {
        self.threads
    }
    fn accepts_compressed(&self) -> bool {
        true
    }
    fn process(
        &self,
        input: &Arc<NDArray>,
        ctx: &mut ProcessContext<'_>,
    ) -> Result<(), PluginError> {
        Python::try_attach(|py| {
            keep_thread_state(py);
            let frame = Bound::new(py, Frame::new(input.clone()))
                .map_err(|e| PluginError::Other(e.to_string()))?;
            let func = self.func.lock().as_ref().map(|f| f.clone_ref(py));
            let Some(func) = func else {
                return Err(PluginError::Other("the pipeline was closed".into()));
            };
            match func.bind(py).call1((frame,)) {
                Ok(out) => self.output(py, input, &out, ctx),
                Err(e) => Err(self.report(py, input, &e)),
            }
        })
        .unwrap_or_else(|| {
            Err(PluginError::Other(
                "the Python interpreter has exited".into(),
            ))
        })
    }
}

thread_local! {
    /// Whether this thread's Python thread state is kept for its life ([`keep_thread_state`]).
    static THREAD_STATE_KEPT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A runtime worker is not a Python thread, so each attach created a Python thread state and
/// deleted it again at release; in CPython that maps and unmaps the state's frame stack, and
/// the munmap's TLB shoot-down interrupts the other core: ~half of a no-op plugin's 15–35 µs
/// per frame. One more count on the state, never released, keeps it for the worker's life
/// and every later attach reuses it. (The state is freed with the interpreter.)
fn keep_thread_state(_py: Python<'_>) {
    THREAD_STATE_KEPT.with(|kept| {
        if !kept.get() {
            // SAFETY: this thread holds the GIL (`_py`), so PyGILState_Ensure only adds one
            // to the count of its current thread state; nothing else changes.
            let _ = unsafe { pyo3::ffi::PyGILState_Ensure() };
            kept.set(true);
        }
    });
}
