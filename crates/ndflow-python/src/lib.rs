//! # ndflow-python: the `ndflow` Python package
//!
//! Pipelines built from a config file or in code ([`pipeline`]), parameters as attributes
//! from the one declaration ([`port`]), frames handed to Python as read-only numpy views of
//! the pooled pixels without a copy ([`frame`], [`stream`]), and plugins written in Python
//! ([`pyplugin`]). Every graph operation that may wait runs with the GIL released; a Python
//! plugin holds the GIL only while its function runs.

use pyo3::prelude::*;

pub mod convert;
pub mod frame;
pub mod pipeline;
pub mod port;
pub mod pyplugin;
pub mod stream;

/// Routes the runtime's warnings (dropped frames, plugin errors) to stderr once, filtered by
/// the NDFLOW_LOG variable as for the IOC binary (default "warn").
fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("NDFLOW_LOG").unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .try_init();
}

#[pymodule]
fn _ndflow(m: &Bound<'_, PyModule>) -> PyResult<()> {
    init_logging();
    m.add_class::<pipeline::Pipeline>()?;
    m.add_class::<port::Port>()?;
    m.add_class::<frame::Frame>()?;
    m.add_class::<stream::FrameStream>()?;
    m.add_function(wrap_pyfunction!(port::port_types, m)?)?;
    m.add_function(wrap_pyfunction!(port::param_declarations, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
