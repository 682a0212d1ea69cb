//! The worked example of docs/architecture.md ("Port types: one record each"): a whole plugin
//! in one file — declarations, code and its `PortType` record — built from the record as the
//! IOC builds every port, served by a graph and run through the test harness.

use std::sync::Arc;

use ndflow_core::{NDArray, ParamDef, ParamValue};
use ndflow_runtime::port_params::{bind, plugin_layout};
use ndflow_runtime::{
    Built, Graph, Plugin, PluginError, PluginHarness, PortArgs, PortType, ProcessContext,
};

ndflow_core::params! {
    /// The plugin's own records.
    pub const INVERT_PARAMS, pub struct InvertParams {
        level: int32("Level", 255).range(0.0, 255.0).doc("Value a pixel is subtracted from"),
        inverted: int64("Inverted", 0).read_only().doc("Frames inverted"),
    }
}

pub struct InvertPlugin {
    p: InvertParams,
}

impl InvertPlugin {
    pub fn new() -> InvertPlugin {
        InvertPlugin {
            p: bind(&plugin_layout(INVERT_PARAMS), InvertParams::bind),
        }
    }
}

impl Default for InvertPlugin {
    fn default() -> Self {
        InvertPlugin::new()
    }
}

impl Plugin for InvertPlugin {
    fn plugin_type(&self) -> &'static str {
        "NDPluginInvert"
    }
    fn params(&self) -> &'static [ParamDef] {
        INVERT_PARAMS
    }
    fn process(
        &self,
        input: &Arc<NDArray>,
        ctx: &mut ProcessContext<'_>,
    ) -> Result<(), PluginError> {
        let level = self.p.level.get(ctx.params) as u8;
        let pixels = input
            .pixels::<u8>()
            .map_err(|e| PluginError::Unsupported(e.to_string()))?;
        let mut out = ctx.alloc(pixels.len())?;
        for (o, i) in out.as_mut_slice::<u8>().iter_mut().zip(pixels) {
            *o = level.saturating_sub(*i);
        }
        ctx.emit(input.with_buffer(input.data_type, out.freeze()));
        let done = self.p.inverted.get(ctx.params);
        self.p.inverted.set(ctx.params, done + 1);
        Ok(())
    }
}

/// The port type `type = "invert"`: with `&invert::PORT,` in the registry's list, the IOC
/// builds, serves and documents it.
pub const PORT: PortType =
    PortType::plugin("invert", "NDPluginInvert", "Inverts 8-bit images", |_| {
        Ok(Built::Plugin(Arc::new(InvertPlugin::new())))
    });

#[test]
fn the_record_lists_the_tables_and_builds_a_port_the_graph_serves() {
    let tables = PORT.param_tables(&PortArgs::defaults()).unwrap();
    let names: Vec<_> = tables.iter().map(|(t, _)| *t).collect();
    assert_eq!(names, ["NDArrayBase", "NDPluginBase", "NDPluginInvert"]);
    assert!(!PORT.driver && PORT.constructor_keys.is_empty());

    let graph = Graph::new(1);
    let Built::Plugin(plugin) = (PORT.build)(&PortArgs::new("INV1", "13SIM1:INV1:")).unwrap()
    else {
        panic!("a plugin type builds a plugin");
    };
    graph.add_plugin("INV1", plugin).unwrap();
    // Its records are the port's parameters: validated puts, readbacks, base records.
    assert_eq!(
        graph.put("INV1", "Level", 200).unwrap(),
        ParamValue::Int(200)
    );
    let err = graph.put("INV1", "Level", 300).unwrap_err().to_string();
    assert!(
        err.contains("Level") && err.contains("out of range"),
        "{err}"
    );
    assert!(graph.put("INV1", "Inverted", 1).is_err(), "read-only");
    assert_eq!(
        graph.get("INV1", "PluginType").unwrap(),
        ParamValue::Str("NDPluginInvert".into())
    );
}

#[test]
fn processes_through_its_handles() {
    let h = PluginHarness::new(InvertPlugin::new());
    h.put("Level", 100).unwrap();
    let frame = NDArray::from_pixels(&h.pool, &[4, 1], &[0u8, 10, 100, 250]).unwrap();
    let out = h.process(frame).unwrap();
    assert_eq!(out[0].pixels::<u8>().unwrap(), &[100, 90, 0, 0]);
    assert_eq!(h.get("Inverted"), ParamValue::Int(1));
    assert!(
        h.params.to_json().contains_key("Inverted_RBV"),
        "served as a readback"
    );
}
