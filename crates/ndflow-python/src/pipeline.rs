//! `ndflow.Pipeline`: a graph of ports built from a config file or in code.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ndflow::access::AccessRules;
use ndflow::config::{put_setting, Config, ConfigError, PortConfig, Setting};
use ndflow::pv_attrs::AttrPvReader;
use ndflow::pva::ImagePvs;
use ndflow::registry;
use ndflow::serve::{self, ServeOptions, Servers};
use ndflow_core::ParamValue;
use ndflow_runtime::{Graph, PortHandle};
use parking_lot::Mutex;
use pyo3::exceptions::{PyKeyError, PyRuntimeError, PyValueError};
use pyo3::gc::PyVisit;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use pyo3::PyTraverseError;

use crate::convert::{from_json, to_param};
use crate::port::Port;
use crate::pyplugin::PyPlugin;
use crate::stream::{FrameStream, SinkPlugin};

/// The file name config errors show for writes made from Python.
pub const PY_FILE: &str = "<python>";

pub struct State {
    pub prefix: String,
    pub access: AccessRules,
    /// The config's `listen` (whom the servers serve; `None`: the EPICS variables decide).
    pub listen: Option<ndflow_net::Listen>,
    /// Config-file ports and ports added with `add`, in order (types and PV prefixes).
    pub ports: Vec<PortConfig>,
    /// Ports added from Python (frame streams, Python plugins): name → type shown in repr.
    pub extra: Vec<(String, &'static str)>,
    /// The Python plugins, for the garbage collector (their functions may refer back to the
    /// pipeline).
    plugins: Vec<Arc<PyPlugin>>,
    serve_pva: bool,
    serve_ca: bool,
    /// The running PV servers of a pipeline that is also an IOC.
    serving: Option<Servers>,
    closed: bool,
}

/// What a Pipeline and the objects handed out from it (ports, streams) share.
pub struct Core {
    pub graph: Arc<Graph>,
    pub images: Arc<ImagePvs>,
    /// NDAttributes files' EPICS_PV entries (installed before the first port is built).
    pv_reader: Arc<AttrPvReader>,
    pub state: Mutex<State>,
    /// Set by `start()`: a frame stream ends when the pipeline is idle after a start.
    pub started: AtomicBool,
    next_id: AtomicU64,
}

impl Core {
    pub fn type_of(&self, name: &str) -> Option<String> {
        let st = self.state.lock();
        st.ports
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.type_name.clone())
            .or_else(|| {
                st.extra
                    .iter()
                    .find(|e| e.0 == name)
                    .map(|e| e.1.to_string())
            })
    }

    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn check_open(&self) -> PyResult<()> {
        if self.state.lock().closed {
            return Err(PyRuntimeError::new_err("the pipeline is closed"));
        }
        Ok(())
    }

    /// Writes one parameter as a config file's `key = value` would; the ValueError carries
    /// the config file's message.
    pub fn put(&self, py: Python<'_>, port: &str, key: &str, value: ParamValue) -> PyResult<()> {
        if key == "Acquire" && value.as_i64().is_some_and(|v| v != 0) {
            self.started.store(true, Ordering::SeqCst);
        }
        let graph = self.graph.clone();
        py.detach(|| put_setting(&graph, port, key, value))
            .map(|_| ())
            .map_err(|m| PyValueError::new_err(config_error(port, key, m)))
    }

    pub fn driver_names(&self) -> Vec<String> {
        self.graph
            .ports()
            .into_iter()
            .filter_map(|p| match p {
                PortHandle::Driver(d) => Some(d.name.clone()),
                PortHandle::Plugin(_) => None,
            })
            .collect()
    }

    fn shutdown(&self) {
        let serving = {
            let mut st = self.state.lock();
            st.closed = true;
            st.serving.take()
        };
        drop(serving);
        self.graph.shutdown();
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        // Shutting down joins the worker threads; a worker running a Python plugin needs the
        // GIL, so release it while waiting (attaching first is a no-op when this thread holds
        // it, which is the usual case: a Python object's deallocation). During interpreter
        // shutdown there is nothing to attach to and nothing to release.
        if Python::try_attach(|py| py.detach(|| self.shutdown())).is_none() {
            self.shutdown();
        }
    }
}

/// "<python>: port 'SIM1': key 'SizeX': value 0 for 'SizeX' is out of range [1, 65536]".
pub fn config_error(port: &str, key: &str, message: String) -> String {
    ConfigError {
        file: PY_FILE.into(),
        line: None,
        port: Some(port.into()),
        key: Some(key.into()),
        message,
    }
    .to_string()
}

/// A pipeline of ports: a simulated or network detector, processing plugins, file writers,
/// frame streams into Python and plugins written in Python.
///
/// Build it from a config file (`Pipeline.from_toml`) or in code (`Pipeline()` then
/// `add`). Parameters are attributes of `p["PORT"]`. `serve_pva` / `serve_ca` also serve
/// every parameter (and `pva` ports' images) over pvAccess / Channel Access from `start()`
/// on, so the pipeline is an IOC as well.
#[pyclass(subclass, module = "ndflow", name = "Pipeline")]
pub struct Pipeline {
    pub(crate) core: Arc<Core>,
}

#[pymethods]
impl Pipeline {
    #[new]
    #[pyo3(signature = (prefix="", threads=0, serve_pva=false, serve_ca=false, toml=None, file=None))]
    fn new(
        py: Python<'_>,
        prefix: &str,
        threads: usize,
        serve_pva: bool,
        serve_ca: bool,
        toml: Option<&str>,
        file: Option<&str>,
    ) -> PyResult<Pipeline> {
        let cfg = match toml {
            Some(text) => Config::parse(text, file.unwrap_or("<string>"))
                .map_err(|e| PyValueError::new_err(e.to_string()))?,
            None => Config {
                file: PY_FILE.into(),
                prefix: prefix.to_string(),
                threads,
                pva: serve_pva,
                ca: serve_ca,
                access: AccessRules::default(),
                listen: None,
                web: None,
                ports: Vec::new(),
            },
        };
        let graph = Arc::new(Graph::new(cfg.threads));
        let pv_reader = serve::install_pv_reader(&graph);
        let images = Arc::new(ImagePvs::default());
        let core = Arc::new(Core {
            graph: graph.clone(),
            images: images.clone(),
            pv_reader,
            state: Mutex::new(State {
                prefix: cfg.prefix.clone(),
                access: cfg.access.clone(),
                listen: cfg.listen.clone(),
                ports: cfg.ports.clone(),
                extra: Vec::new(),
                plugins: Vec::new(),
                serve_pva,
                serve_ca,
                serving: None,
                closed: false,
            }),
            started: AtomicBool::new(false),
            next_id: AtomicU64::new(0),
        });
        py.detach(|| cfg.build(&graph, &images))
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        // A config's ports exist now (and may already acquire, with `Acquire = 1`): its
        // EPICS_PV attributes naming them are read in process from here on. A pipeline built
        // port by port gets the same at its first start().
        if !cfg.ports.is_empty() {
            serve::set_local_pvs(&core.pv_reader, &graph, &cfg.prefix, &cfg.port_prefixes());
        }
        // A config file with `Acquire = 1` starts acquiring as it is built.
        if !graph.is_idle()
            || cfg.ports.iter().any(|p| {
                p.settings
                    .iter()
                    .any(|s| s.key == "Acquire" && s.value.as_i64().is_some_and(|v| v != 0))
            })
        {
            core.started.store(true, Ordering::SeqCst);
        }
        Ok(Pipeline { core })
    }

    /// Adds a port of a registered type (`ndflow.port_types()`), e.g.
    /// `p.add("roi", "ROI1", NDArrayPort="SIM1", MinX=10)`. Keyword arguments set
    /// parameters exactly as the keys of a config file's `[[port]]` table do (NDArrayPort
    /// first, Acquire last); `prefix` sets the port's PV prefix (default "NAME:").
    #[pyo3(signature = (type_name, name, prefix=None, **params))]
    fn add(
        &self,
        py: Python<'_>,
        type_name: &str,
        name: &str,
        prefix: Option<&str>,
        params: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Port> {
        self.core.check_open()?;
        let err = |key: &str, m: String| PyValueError::new_err(config_error(name, key, m));
        if !registry::type_names().contains(&type_name) {
            return Err(err(
                "type",
                format!(
                    "unknown port type '{type_name}'; one of: {}",
                    registry::type_names().join(", ")
                ),
            ));
        }
        if self.core.graph.port(name).is_some() {
            return Err(err("name", "duplicate port name".into()));
        }
        let mut settings = Vec::new();
        for (k, v) in params.into_iter().flat_map(|d| d.iter()) {
            let key: String = k.extract()?;
            let value = to_param(&v).map_err(|e| err(&key, e.to_string()))?;
            settings.push(Setting {
                key,
                value,
                line: 0,
            });
        }
        let pc = PortConfig {
            name: name.to_string(),
            type_name: type_name.to_string(),
            prefix: prefix.map_or_else(|| format!("{name}:"), str::to_string),
            line: 0,
            settings,
        };
        let top_prefix = self.core.state.lock().prefix.clone();
        let (graph, images) = (self.core.graph.clone(), self.core.images.clone());
        py.detach(|| registry::create(&graph, &pc, &top_prefix, &images))
            .map_err(|m| err("type", m))?;
        self.core.state.lock().ports.push(pc.clone());
        self.apply(py, &pc)?;
        Ok(Port::new(self.core.clone(), name))
    }

    /// Adds a plugin port whose processing is `func(frame)`, run on the pipeline's worker
    /// threads (at most `threads` frames at once; the GIL is held only inside `func`).
    /// `func` returns a numpy array (emitted as a new frame from the pool, with the input's
    /// metadata), a Frame (emitted as is), or None (nothing emitted). An exception drops the
    /// frame (counted in DroppedErrors) and its traceback is printed.
    /// Other keyword arguments set the port's parameters, as in `add`.
    #[pyo3(signature = (name, func, NDArrayPort=None, threads=1, **params))]
    #[allow(non_snake_case)]
    fn add_python(
        &self,
        py: Python<'_>,
        name: &str,
        func: Py<PyAny>,
        NDArrayPort: Option<&str>,
        threads: usize,
        params: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Port> {
        self.core.check_open()?;
        if !func.bind(py).is_callable() {
            return Err(PyValueError::new_err(format!(
                "port '{name}': func must be callable"
            )));
        }
        let threads = threads.max(1);
        let label = func
            .bind(py)
            .getattr("__qualname__")
            .and_then(|n| n.extract::<String>())
            .unwrap_or_else(|_| "<callable>".into());
        let plugin = Arc::new(PyPlugin::new(func, name, &label, threads));
        let graph = self.core.graph.clone();
        let as_plugin: Arc<dyn ndflow_runtime::Plugin> = plugin.clone();
        py.detach(|| graph.add_plugin(name, as_plugin))
            .map_err(|e| PyValueError::new_err(config_error(name, "name", e.to_string())))?;
        {
            let mut st = self.core.state.lock();
            st.extra.push((name.to_string(), "python"));
            st.plugins.push(plugin);
        }
        let mut settings = vec![Setting {
            key: "NumThreads".into(),
            value: ParamValue::Int(threads as i64),
            line: 0,
        }];
        if let Some(src) = NDArrayPort {
            settings.push(Setting {
                key: "NDArrayPort".into(),
                value: ParamValue::Str(src.into()),
                line: 0,
            });
        }
        for (k, v) in params.into_iter().flat_map(|d| d.iter()) {
            let key: String = k.extract()?;
            let value = to_param(&v)
                .map_err(|e| PyValueError::new_err(config_error(name, &key, e.to_string())))?;
            settings.push(Setting {
                key,
                value,
                line: 0,
            });
        }
        let pc = PortConfig {
            name: name.into(),
            type_name: "python".into(),
            prefix: format!("{name}:"),
            line: 0,
            settings,
        };
        self.apply(py, &pc)?;
        Ok(Port::new(self.core.clone(), name))
    }

    /// A stream of the frames `port` emits, through a port of its own with a bounded queue
    /// of `queue` frames: when Python falls behind, frames are dropped there (counted in the
    /// stream's `stats()` and the port's DroppedQueueFull), never held up upstream.
    /// Iteration ends when the pipeline is idle after `start()` and the queue is empty, when
    /// no frame came for `timeout` seconds, or after `close()`.
    #[pyo3(signature = (port, queue=10, timeout=None))]
    fn frames(
        &self,
        py: Python<'_>,
        port: &str,
        queue: usize,
        timeout: Option<f64>,
    ) -> PyResult<FrameStream> {
        self.core.check_open()?;
        let queue = queue.max(1);
        let name = format!("_frames{}", self.core.next_id());
        let (plugin, rx) = SinkPlugin::new(queue);
        let graph = self.core.graph.clone();
        let handle = py
            .detach(|| graph.add_plugin(&name, Arc::new(plugin)))
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        self.core.state.lock().extra.push((name.clone(), "frames"));
        self.core
            .put(py, &name, "QueueSize", ParamValue::Int(queue as i64))?;
        self.core
            .put(py, &name, "NDArrayPort", ParamValue::Str(port.into()))?;
        Ok(FrameStream::new(
            self.core.clone(),
            handle,
            rx,
            port,
            queue,
            timeout,
        ))
    }

    /// The port named `name` (its parameters are attributes and items).
    fn __getitem__(&self, name: &str) -> PyResult<Port> {
        if self.core.graph.port(name).is_none() {
            return Err(PyKeyError::new_err(format!("no port named '{name}'")));
        }
        Ok(Port::new(self.core.clone(), name))
    }

    fn __contains__(&self, name: &str) -> bool {
        self.core.graph.port(name).is_some()
    }

    /// Port names in the order they were added.
    #[getter]
    fn ports(&self) -> Vec<String> {
        self.core
            .graph
            .ports()
            .iter()
            .map(|p| p.name().to_string())
            .collect()
    }

    /// Starts the PV servers (when asked for) and acquisition on every driver (Acquire = 1).
    fn start(&self, py: Python<'_>) -> PyResult<()> {
        self.core.check_open()?;
        self.serve(py)?;
        self.core.started.store(true, Ordering::SeqCst);
        for d in self.core.driver_names() {
            self.core.put(py, &d, "Acquire", ParamValue::Int(1))?;
        }
        Ok(())
    }

    /// Stops acquisition on every driver (Acquire = 0); plugins drain what they hold.
    fn stop(&self, py: Python<'_>) -> PyResult<()> {
        for d in self.core.driver_names() {
            self.core.put(py, &d, "Acquire", ParamValue::Int(0))?;
        }
        Ok(())
    }

    /// True when no driver acquires and every plugin has drained.
    fn is_idle(&self, py: Python<'_>) -> bool {
        let g = self.core.graph.clone();
        py.detach(|| g.is_idle())
    }

    /// Waits up to `timeout` seconds (releasing the GIL) for idle; True when idle.
    #[pyo3(signature = (timeout))]
    fn _wait_idle_for(&self, py: Python<'_>, timeout: f64) -> bool {
        let g = self.core.graph.clone();
        let t = Duration::from_secs_f64(timeout.clamp(0.0, 1e6));
        py.detach(|| g.wait_idle(t))
    }

    /// Frames acquired so far by every driver, summed (for progress output).
    fn _frames_acquired(&self) -> i64 {
        self.core
            .graph
            .ports()
            .iter()
            .map(|p| match p {
                PortHandle::Driver(d) => d.array_counter(),
                PortHandle::Plugin(_) => 0,
            })
            .sum()
    }

    /// Every port's parameters, keyed by PV suffix (the dict `ndflow run --summary` writes).
    fn summary<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let g = self.core.graph.clone();
        let s = py.detach(|| g.summary());
        from_json(py, &s)
    }

    /// Stops acquisition and the PV servers and ends every thread. Frames already handed to
    /// Python stay valid. Idempotent; also done by `with Pipeline(...) as p:`.
    fn close(&self, py: Python<'_>) {
        let core = self.core.clone();
        py.detach(|| core.shutdown());
    }

    /// A Python plugin's function that refers to this pipeline makes a cycle through Rust;
    /// showing the functions to the collector lets it find and clear such a cycle.
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        if let Some(st) = self.core.state.try_lock() {
            for p in &st.plugins {
                p.visit(&visit)?;
            }
        }
        Ok(())
    }

    /// The collector found the pipeline unreachable: close it and drop the functions.
    fn __clear__(&mut self) {
        let core = self.core.clone();
        if Python::try_attach(|py| py.detach(|| core.shutdown())).is_none() {
            core.shutdown();
        }
        let plugins = std::mem::take(&mut self.core.state.lock().plugins);
        let funcs: Vec<_> = plugins.iter().filter_map(|p| p.clear()).collect();
        drop(funcs);
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

    /// A description of the PV servers, or None when not serving.
    #[getter]
    fn serving(&self) -> Option<String> {
        let st = self.core.state.lock();
        st.serving.as_ref().map(|s| s.describe().join("; "))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let g = self.core.graph.clone();
        let lines = py.detach(|| {
            let mut lines = Vec::new();
            for p in g.ports() {
                let ty = self.core.type_of(p.name()).unwrap_or_default();
                lines.push(match p {
                    PortHandle::Driver(d) => format!(
                        "  {:<10} {:<10} frames {} dropped {}{}",
                        d.name,
                        ty,
                        d.array_counter(),
                        d.dropped(),
                        if d.is_busy() { " (acquiring)" } else { "" }
                    ),
                    PortHandle::Plugin(pl) => {
                        let a = pl.accounting();
                        let src = pl.source();
                        format!(
                            "  {:<10} {:<10} <- {:<8} processed {} dropped {} queued {}",
                            pl.name,
                            ty,
                            if src.is_empty() { "-" } else { src.as_str() },
                            a.processed,
                            a.dropped_total(),
                            a.queued + a.in_flight
                        )
                    }
                });
            }
            lines
        });
        let state = if self.core.state.lock().closed {
            "closed"
        } else if self.core.graph.is_idle() {
            "idle"
        } else {
            "running"
        };
        Ok(format!(
            "<ndflow.Pipeline {} ports, {state}>\n{}",
            lines.len(),
            lines.join("\n")
        ))
    }
}

impl Pipeline {
    /// A port's settings in the config file's order, phase by phase as a config file's are
    /// (wiring, others, Acquire).
    fn apply(&self, py: Python<'_>, pc: &PortConfig) -> PyResult<()> {
        for step in 0..3 {
            for s in pc
                .settings
                .iter()
                .filter(|s| registry::setting_phase(&s.key) == step)
            {
                if registry::is_constructor_key(&pc.type_name, &s.key) {
                    continue;
                }
                self.core.put(py, &pc.name, &s.key, s.value.clone())?;
            }
        }
        Ok(())
    }

    /// Starts the PV servers once, when the pipeline was asked to serve. From the first call
    /// on, NDAttributes files' EPICS_PV entries that name this pipeline's own PVs are read in
    /// process (ports added later are read over Channel Access, as any other IOC's).
    fn serve(&self, py: Python<'_>) -> PyResult<()> {
        let (want_pva, want_ca, prefix, access, listen, prefixes, serving) = {
            let st = self.core.state.lock();
            let mut prefixes: HashMap<String, String> = st
                .ports
                .iter()
                .map(|p| (p.name.clone(), p.prefix.clone()))
                .collect();
            for (n, _) in &st.extra {
                prefixes.insert(n.clone(), format!("{n}:"));
            }
            (
                st.serve_pva,
                st.serve_ca,
                st.prefix.clone(),
                st.access.clone(),
                st.listen.clone(),
                prefixes,
                st.serving.is_some(),
            )
        };
        let (graph, images) = (self.core.graph.clone(), self.core.images.clone());
        serve::set_local_pvs(&self.core.pv_reader, &graph, &prefix, &prefixes);
        if serving || !(want_pva || want_ca) {
            return Ok(());
        }
        let servers = py
            .detach(|| {
                serve::serve(
                    &graph,
                    images,
                    &ServeOptions {
                        pva: want_pva,
                        ca: want_ca,
                        prefix: &prefix,
                        port_prefixes: &prefixes,
                        access,
                        listen,
                    },
                )
            })
            .map_err(PyRuntimeError::new_err)?;
        self.core.state.lock().serving = Some(servers);
        Ok(())
    }
}

/// Unused-import guard for PyString in docs builds.
#[allow(dead_code)]
fn _types(_: &PyString) {}
