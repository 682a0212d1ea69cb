//! `ndflow.Port`: one port's parameters as attributes and items, from its declarations.

use std::sync::Arc;

use ndflow::registry;
use ndflow_core::{ParamDef, ParamStore};
use ndflow_runtime::PortHandle;
use pyo3::exceptions::{PyAttributeError, PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::convert::{from_param, kind_text, to_param};
use crate::pipeline::{config_error, Core};

/// How a name refers to a parameter: the declaration, and whether it names the readback.
fn resolve(store: &ParamStore, name: &str) -> Option<(usize, &'static ParamDef, bool)> {
    if let Some(i) = store.index(name) {
        let def = store.def(i)?;
        // A read-only parameter is served as Name_RBV only; its plain name reads it too.
        return Some((i, def, !def.writable()));
    }
    let base = name.strip_suffix("_RBV")?;
    let i = store.index(base)?;
    let def = store.def(i)?;
    def.pv_names()
        .iter()
        .any(|n| n == name)
        .then_some((i, def, true))
}

/// One port of a pipeline. Every parameter of its type (see `ndflow.param_declarations`)
/// is an attribute and an item: `port.SizeX = 512`, `port["SizeX_RBV"]`. Enums read as
/// their menu string and take a string or an index; readbacks (`_RBV` and read-only
/// parameters) refuse writes; a refused write raises ValueError with the config file's
/// message.
#[pyclass(frozen, module = "ndflow", name = "Port")]
pub struct Port {
    core: Arc<Core>,
    name: String,
}

impl Port {
    pub fn new(core: Arc<Core>, name: &str) -> Port {
        Port {
            core,
            name: name.to_string(),
        }
    }

    fn handle(&self) -> PyResult<PortHandle> {
        self.core
            .graph
            .port(&self.name)
            .ok_or_else(|| PyKeyError::new_err(format!("no port named '{}'", self.name)))
    }

    fn get<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
        let h = self.handle()?;
        let store = h.params();
        let Some((i, def, readback)) = resolve(store, key) else {
            return Ok(None);
        };
        if readback {
            // Counters reach the parameters at a bounded rate; a read from Python sees now.
            let g = self.core.graph.clone();
            py.detach(|| g.publish_now());
        }
        let v = store.get(i).ok_or_else(|| {
            PyKeyError::new_err(format!("port '{}': no value for '{key}'", self.name))
        })?;
        from_param(py, def, &v, readback).map(Some)
    }

    fn set(&self, py: Python<'_>, key: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let h = self.handle()?;
        let err = |m: String| PyValueError::new_err(config_error(&self.name, key, m));
        match resolve(h.params(), key) {
            Some((_, def, readback)) if readback || !def.writable() => {
                return Err(err(format!("parameter '{key}' is read-only")))
            }
            _ => {}
        }
        let v = to_param(value).map_err(|e| err(e.to_string()))?;
        self.core.put(py, &self.name, key, v)
    }
}

#[pymethods]
impl Port {
    /// The port's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The port's type ("sim", "roi", ..., "python", "frames").
    #[getter]
    fn r#type(&self) -> String {
        self.core.type_of(&self.name).unwrap_or_default()
    }

    /// Every readable name (setpoints and readbacks), as `dir()` and the config file know them.
    fn names(&self) -> PyResult<Vec<String>> {
        let h = self.handle()?;
        Ok(h.params()
            .defs()
            .iter()
            .flat_map(|d| {
                let mut n = d.pv_names();
                if !n.iter().any(|x| x == d.name) {
                    n.insert(0, d.name.to_string());
                }
                n
            })
            .collect())
    }

    /// Every parameter with its current value (readbacks under their `_RBV` name), as in
    /// the summary.
    fn values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let h = self.handle()?;
        let d = PyDict::new(py);
        for (k, v) in h.params().to_json() {
            d.set_item(k, crate::convert::from_json(py, &v)?)?;
        }
        Ok(d)
    }

    /// Input accounting of a plugin port: offered = processed + dropped + queued + in_flight.
    /// For a driver: frames acquired and dropped (pool full).
    fn accounting<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        match self.handle()? {
            PortHandle::Plugin(p) => {
                let a = p.accounting();
                d.set_item("offered", a.offered)?;
                d.set_item("processed", a.processed)?;
                for r in ndflow_runtime::DropReason::ALL {
                    d.set_item(format!("dropped_{}", drop_key(r)), a.dropped(r))?;
                }
                d.set_item("dropped", a.dropped_total())?;
                d.set_item("queued", a.queued)?;
                d.set_item("in_flight", a.in_flight)?;
                d.set_item("dropped_output", a.dropped_output)?;
            }
            PortHandle::Driver(dr) => {
                d.set_item("acquired", dr.array_counter())?;
                d.set_item("dropped", dr.dropped())?;
            }
        }
        Ok(d)
    }

    fn __getattr__<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyAny>> {
        self.get(py, key)?.ok_or_else(|| {
            PyAttributeError::new_err(format!("port '{}' has no parameter '{key}'", self.name))
        })
    }

    fn __setattr__(&self, py: Python<'_>, key: &str, value: Bound<'_, PyAny>) -> PyResult<()> {
        self.set(py, key, &value)
    }

    fn __getitem__<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyAny>> {
        self.get(py, key)?.ok_or_else(|| {
            PyKeyError::new_err(format!("port '{}' has no parameter '{key}'", self.name))
        })
    }

    fn __setitem__(&self, py: Python<'_>, key: &str, value: Bound<'_, PyAny>) -> PyResult<()> {
        self.set(py, key, &value)
    }

    fn __dir__(&self) -> PyResult<Vec<String>> {
        let mut n = self.names()?;
        n.extend(
            ["name", "type", "names", "values", "accounting"]
                .iter()
                .map(|s| s.to_string()),
        );
        Ok(n)
    }

    fn __repr__(&self) -> String {
        format!("<ndflow.Port {} ({})>", self.name, self.r#type())
    }
}

fn drop_key(r: ndflow_runtime::DropReason) -> &'static str {
    use ndflow_runtime::DropReason::*;
    match r {
        QueueFull => "queue_full",
        MinTime => "min_time",
        Unsupported => "unsupported",
        Disabled => "disabled",
        Error => "errors",
    }
}

/// `[(type, areaDetector class, is_driver, description), ...]` of every registered port type.
#[pyfunction]
pub fn port_types() -> Vec<(&'static str, &'static str, bool, &'static str)> {
    registry::TYPES
        .iter()
        .map(|t| (t.name, t.class, t.driver, t.description))
        .collect()
}

/// The parameter declarations of a port type: a list of dicts with name, table, kind,
/// access ("rw", "ro"), default, min, max, choices, readback choices, PV names and doc.
/// The stubs and docs are generated from this.
#[pyfunction]
pub fn param_declarations<'py>(py: Python<'py>, type_name: &str) -> PyResult<Bound<'py, PyList>> {
    if !registry::type_names().contains(&type_name) {
        return Err(PyValueError::new_err(format!(
            "unknown port type '{type_name}'; one of: {}",
            registry::type_names().join(", ")
        )));
    }
    let out = PyList::empty(py);
    for (table, defs) in registry::param_tables(type_name) {
        for def in defs {
            let d = PyDict::new(py);
            d.set_item("name", def.name)?;
            d.set_item("table", table)?;
            d.set_item("kind", kind_text(def))?;
            d.set_item("writable", def.writable())?;
            d.set_item("default", from_param(py, def, &def.default_value(), false)?)?;
            d.set_item("min", def.min)?;
            d.set_item("max", def.max)?;
            d.set_item("choices", def.choices(false).map(|c| c.to_vec()))?;
            d.set_item("pv_names", def.pv_names())?;
            d.set_item("doc", def.desc)?;
            out.append(d)?;
        }
    }
    Ok(out)
}
