//! NDPluginScatter: each frame goes to exactly one downstream port, round-robin.
//!
//! The plugin itself only passes the frame on (the same `Arc`, no copy); the distribution is
//! the runtime's ([`Routing::RoundRobin`]): the next subscriber in turn whose queue has room
//! takes the frame, a full one is skipped, and when every queue is full the frame goes to the
//! next subscriber with BlockingCallbacks = Yes (which back-pressures this port). Only when
//! none can take it is the frame dropped, counted on this port as DroppedQueueFull. So
//! ArraysOffered = ArraysProcessed (frames delivered downstream) + dropped + queued + in flight.
//!
//! Blocking subscribers run in the scatter's worker threads; a busy one is skipped while an
//! idle one is free, so NumThreads up to the number of blocking subscribers runs them in
//! parallel (more threads than that would run one subscriber on two threads at once).
//! Disabled subscribers are skipped (areaDetector's disabled plugins are not clients). The
//! output is never re-sorted here (SortMode has no effect): sort after a Gather.

use std::sync::Arc;

use ndflow_core::{NDArray, ParamDef};
use ndflow_runtime::{Built, PortType};
use ndflow_runtime::{Plugin, PluginError, ProcessContext, Routing};

ndflow_core::params! {
    /// NDScatter.template: the distribution method (areaDetector has only round robin).
    /// Nothing reads it: the one method is the runtime's [`Routing::RoundRobin`].
    pub const SCATTER_PARAMS, pub struct ScatterParams {
        scatter_method: enumeration("ScatterMethod", &["Round robin"], 0).mbb()
            .doc("How frames are distributed: each to the next downstream port with room"),
    }
}

/// NDPluginScatter. Stateless: up to 8 threads (useful when downstream ports block).
#[derive(Debug, Default)]
pub struct ScatterPlugin;

impl ScatterPlugin {
    pub fn new() -> ScatterPlugin {
        ScatterPlugin
    }
}

impl Plugin for ScatterPlugin {
    fn plugin_type(&self) -> &'static str {
        "NDPluginScatter"
    }
    fn params(&self) -> &'static [ParamDef] {
        SCATTER_PARAMS
    }
    fn max_threads(&self) -> usize {
        8
    }
    fn accepts_compressed(&self) -> bool {
        true
    }
    fn routing(&self) -> Routing {
        Routing::RoundRobin
    }
    fn process(
        &self,
        input: &Arc<NDArray>,
        ctx: &mut ProcessContext<'_>,
    ) -> Result<(), PluginError> {
        ctx.emit(input.clone());
        Ok(())
    }
}

/// The port type `type = "scatter"`.
pub const PORT: PortType = PortType::plugin(
    "scatter",
    "NDPluginScatter",
    "Each frame to ONE downstream port, round-robin, skipping full queues (scale-out)",
    |_| Ok(Built::Plugin(std::sync::Arc::new(ScatterPlugin::new()))),
);
