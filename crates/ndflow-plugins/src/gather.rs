//! NDPluginGather: one port fed by up to 8 upstream ports, merged into one stream.
//!
//! `NDArrayPort_1` .. `NDArrayPort_8` name the sources (NDGatherN.template; `NDArrayPort` is
//! the same input as `NDArrayPort_1`), re-wirable while frames flow like `NDArrayPort`. The
//! runtime subscribes the port to each named source once; the plugin passes every frame on
//! unchanged (the same `Arc`). With SortMode = Sorted the merged stream comes out in uniqueId
//! order: a frame goes when it is the next uniqueId after the last one emitted, otherwise it
//! waits at most SortTime, or until more than SortSize frames are held (areaDetector's rule;
//! a gap left by a frame dropped upstream costs one SortTime).
//! `NDArrayAddress_N` is the address of input N's source it takes (`NDArrayAddress` is
//! `NDArrayAddress_1`), re-wirable like the port; an address the source does not publish is
//! refused.

use std::sync::Arc;

use ndflow_core::{NDArray, ParamDef};
use ndflow_runtime::{Built, PortType};
use ndflow_runtime::{Plugin, PluginError, ProcessContext};

/// The source parameters, one per input.
pub const GATHER_INPUTS: &[&str] = &[
    "NDArrayPort_1",
    "NDArrayPort_2",
    "NDArrayPort_3",
    "NDArrayPort_4",
    "NDArrayPort_5",
    "NDArrayPort_6",
    "NDArrayPort_7",
    "NDArrayPort_8",
];

/// The address parameters, one per input, in [`GATHER_INPUTS`]' order.
pub const GATHER_ADDRESSES: &[&str] = &[
    "NDArrayAddress_1",
    "NDArrayAddress_2",
    "NDArrayAddress_3",
    "NDArrayAddress_4",
    "NDArrayAddress_5",
    "NDArrayAddress_6",
    "NDArrayAddress_7",
    "NDArrayAddress_8",
];

ndflow_core::params! {
    /// NDGatherN.template loaded for N = 1..8 (NDGather.template itself is NDPluginBase
    /// only): the 8 (port, address) pairs in input order. The runtime subscribes to the
    /// (port, address) pairs of [`GATHER_INPUTS`] and [`GATHER_ADDRESSES`]; the plugin reads
    /// none of them.
    pub const GATHER_PARAMS, pub struct GatherParams {
        nd_array_port_1: string("NDArrayPort_1", "")
            .doc("Source port of input 1 (re-wirable while running)"),
        nd_array_address_1: int32("NDArrayAddress_1", 0)
            .min(0.0)
            .doc("Address of input 1's source port it takes (re-wirable while running)"),
        nd_array_port_2: string("NDArrayPort_2", "")
            .doc("Source port of input 2 (re-wirable while running)"),
        nd_array_address_2: int32("NDArrayAddress_2", 0)
            .min(0.0)
            .doc("Address of input 2's source port it takes (re-wirable while running)"),
        nd_array_port_3: string("NDArrayPort_3", "")
            .doc("Source port of input 3 (re-wirable while running)"),
        nd_array_address_3: int32("NDArrayAddress_3", 0)
            .min(0.0)
            .doc("Address of input 3's source port it takes (re-wirable while running)"),
        nd_array_port_4: string("NDArrayPort_4", "")
            .doc("Source port of input 4 (re-wirable while running)"),
        nd_array_address_4: int32("NDArrayAddress_4", 0)
            .min(0.0)
            .doc("Address of input 4's source port it takes (re-wirable while running)"),
        nd_array_port_5: string("NDArrayPort_5", "")
            .doc("Source port of input 5 (re-wirable while running)"),
        nd_array_address_5: int32("NDArrayAddress_5", 0)
            .min(0.0)
            .doc("Address of input 5's source port it takes (re-wirable while running)"),
        nd_array_port_6: string("NDArrayPort_6", "")
            .doc("Source port of input 6 (re-wirable while running)"),
        nd_array_address_6: int32("NDArrayAddress_6", 0)
            .min(0.0)
            .doc("Address of input 6's source port it takes (re-wirable while running)"),
        nd_array_port_7: string("NDArrayPort_7", "")
            .doc("Source port of input 7 (re-wirable while running)"),
        nd_array_address_7: int32("NDArrayAddress_7", 0)
            .min(0.0)
            .doc("Address of input 7's source port it takes (re-wirable while running)"),
        nd_array_port_8: string("NDArrayPort_8", "")
            .doc("Source port of input 8 (re-wirable while running)"),
        nd_array_address_8: int32("NDArrayAddress_8", 0)
            .min(0.0)
            .doc("Address of input 8's source port it takes (re-wirable while running)"),
    }
}

/// NDPluginGather. Passes frames through; one thread keeps arrival order.
#[derive(Debug, Default)]
pub struct GatherPlugin;

impl GatherPlugin {
    pub fn new() -> GatherPlugin {
        GatherPlugin
    }
}

impl Plugin for GatherPlugin {
    fn plugin_type(&self) -> &'static str {
        "NDPluginGather"
    }
    fn params(&self) -> &'static [ParamDef] {
        GATHER_PARAMS
    }
    fn accepts_compressed(&self) -> bool {
        true
    }
    fn inputs(&self) -> &'static [&'static str] {
        GATHER_INPUTS
    }
    fn input_addresses(&self) -> &'static [&'static str] {
        GATHER_ADDRESSES
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

/// The port type `type = "gather"`.
pub const PORT: PortType = PortType::plugin(
    "gather",
    "NDPluginGather",
    "Up to 8 upstream ports (NDArrayPort_1..8) merged into one stream; SortMode orders it",
    |_| Ok(Built::Plugin(std::sync::Arc::new(GatherPlugin::new()))),
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_input_has_a_port_and_an_address() {
        assert_eq!(GATHER_PARAMS.len(), 16);
        for (i, port) in GATHER_INPUTS.iter().enumerate() {
            assert_eq!(GATHER_PARAMS[2 * i].name, *port);
            assert_eq!(
                GATHER_PARAMS[2 * i + 1].name,
                format!("NDArrayAddress_{}", i + 1)
            );
            assert_eq!(GATHER_PARAMS[2 * i + 1].name, GATHER_ADDRESSES[i]);
        }
    }
}
