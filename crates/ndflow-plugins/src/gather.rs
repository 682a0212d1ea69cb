//! NDPluginGather: one port fed by up to 8 upstream ports, merged into one stream.
//!
//! `NDArrayPort_1` .. `NDArrayPort_8` name the sources (NDGatherN.template; `NDArrayPort` is
//! the same input as `NDArrayPort_1`), re-wirable while frames flow like `NDArrayPort`. The
//! runtime subscribes the port to each named source once; the plugin passes every frame on
//! unchanged (the same `Arc`). With SortMode = Sorted the merged stream comes out in uniqueId
//! order: a frame goes when it is the next uniqueId after the last one emitted, otherwise it
//! waits at most SortTime, or until more than SortSize frames are held (areaDetector's rule;
//! a gap left by a frame dropped upstream costs one SortTime).
//! `NDArrayAddress_N` is kept for clients; ndflow ports have one address.

use std::sync::Arc;

use ndflow_core::{NDArray, ParamDef};
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

macro_rules! input {
    ($n:literal) => {
        [
            ParamDef::string(concat!("NDArrayPort_", $n), "").doc(concat!(
                "Source port of input ",
                $n,
                " (re-wirable while running)"
            )),
            ParamDef::int32(concat!("NDArrayAddress_", $n), 0)
                .min(0.0)
                .doc(concat!(
                    "Source address of input ",
                    $n,
                    " (no effect in ndflow)"
                )),
        ]
    };
}

/// The 8 (port, address) pairs in one table, in input order.
const fn flatten(pairs: [[ParamDef; 2]; 8]) -> [ParamDef; 16] {
    let mut out = [pairs[0][0]; 16];
    let mut i = 0;
    while i < 8 {
        out[2 * i] = pairs[i][0];
        out[2 * i + 1] = pairs[i][1];
        i += 1;
    }
    out
}

const PAIRS: [[ParamDef; 2]; 8] = [
    input!(1),
    input!(2),
    input!(3),
    input!(4),
    input!(5),
    input!(6),
    input!(7),
    input!(8),
];

/// NDGatherN.template loaded for N = 1..8 (NDGather.template itself is NDPluginBase only).
pub const GATHER_PARAMS: &[ParamDef] = &flatten(PAIRS);

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
    fn process(
        &self,
        input: &Arc<NDArray>,
        ctx: &mut ProcessContext<'_>,
    ) -> Result<(), PluginError> {
        ctx.emit(input.clone());
        Ok(())
    }
}

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
        }
    }
}
