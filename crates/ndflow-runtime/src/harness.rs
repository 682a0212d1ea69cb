//! Running one plugin by hand, without a graph: for unit tests and micro-benchmarks.

use std::sync::Arc;

use ndflow_core::{NDArray, ParamError, ParamStore, ParamValue, Pool};

use crate::plugin::{pool_of, Plugin, PluginError, ProcessContext};
use crate::port_params::plugin_layout;

/// A plugin with its parameter store (base + its own), processing frames synchronously.
pub struct PluginHarness<P: Plugin> {
    pub plugin: P,
    pub params: ParamStore,
    pub pool: Pool,
}

impl<P: Plugin> PluginHarness<P> {
    pub fn new(plugin: P) -> Self {
        let params = ParamStore::from_layout(plugin_layout(plugin.params()));
        PluginHarness {
            plugin,
            params,
            pool: Pool::unlimited(),
        }
    }

    /// An external write, as a PV put or config key would do; tells the plugin.
    pub fn put(&self, name: &str, value: impl Into<ParamValue>) -> Result<(), ParamError> {
        let v = self.params.put(name, value.into())?;
        let idx = self.params.require(name)?;
        self.plugin.param_changed(&self.params, idx, &v);
        Ok(())
    }

    /// [`Self::put`], returning the frames the plugin released on the write
    /// ([`Plugin::emit_after_put`]), as the port would forward them.
    pub fn put_emitted(
        &self,
        name: &str,
        value: impl Into<ParamValue>,
    ) -> Result<Vec<Arc<NDArray>>, ParamError> {
        self.put(name, value)?;
        let mut out = Vec::new();
        self.plugin.emit_after_put(&mut |f| out.push(f));
        Ok(out)
    }

    pub fn get(&self, name: &str) -> ParamValue {
        self.params
            .get_by_name(name)
            .unwrap_or(ParamValue::Str(format!("<no parameter {name}>")))
    }

    pub fn get_f64(&self, name: &str) -> f64 {
        self.get(name).as_f64().unwrap_or(f64::NAN)
    }

    /// Processes one frame and returns what the plugin emitted on address 0.
    pub fn process(&self, frame: NDArray) -> Result<Vec<Arc<NDArray>>, PluginError> {
        self.process_arc(&Arc::new(frame))
    }

    pub fn process_arc(&self, frame: &Arc<NDArray>) -> Result<Vec<Arc<NDArray>>, PluginError> {
        let out = self.process_addressed(frame)?;
        Ok(out
            .into_iter()
            .filter(|(a, _)| *a == 0)
            .map(|(_, f)| f)
            .collect())
    }

    /// Processes one frame and returns what the plugin emitted on every address, as
    /// (address, frame): address 0's frames first, then the others in emission order.
    pub fn process_addressed(
        &self,
        frame: &Arc<NDArray>,
    ) -> Result<Vec<(usize, Arc<NDArray>)>, PluginError> {
        let mut out = Vec::new();
        let pool = pool_of(frame, &self.pool);
        let mut ctx = ProcessContext::new(&self.params, &pool, &mut out);
        self.plugin.process(frame, &mut ctx)?;
        let others = ctx.take_addressed();
        let mut all: Vec<(usize, Arc<NDArray>)> = out.into_iter().map(|f| (0, f)).collect();
        all.extend(others);
        Ok(all)
    }
}
