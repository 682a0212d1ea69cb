//! NDPluginPva: publishes each frame as an NTNDArray PV (default `{prefix}{port prefix}Image`).
//!
//! The frame is not copied: the PV value shares the frame's buffer and the server writes the
//! pixels from it. Each subscriber has its own bounded queue (its pvRequest `queueSize`):
//! latest-wins by default, so a slow viewer sees the newest frames and never slows the
//! pipeline. With `Lossless = Yes`, pipelined subscribers (`record[pipeline=true]`) hold the
//! plugin until they have room; with BlockingCallbacks on, that back-pressure reaches the
//! source and no frame is lost end to end. A subscriber that never acks for
//! `LosslessTimeout` seconds costs one frame (counted as an error), not a stalled IOC; one
//! that disconnects is dropped at once.
//!
//! Frames are passed on downstream unchanged (as NDPluginPva does).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ndflow_core::{NDArray, ParamDef, ParamStore, ParamValue};
use ndflow_pva::server::SharedPv;
use ndflow_pva::BitSet;
use ndflow_runtime::{param_index, Plugin, PluginError, ProcessContext, Resolved};

use super::convert::to_nt;

pub const PVA_PARAMS: &[ParamDef] = &[
    ParamDef::string("PvName", "")
        .read_only()
        .long_string()
        .doc("Name of the NTNDArray PV (config key PvName at creation; default {prefix}{port prefix}Image)"),
    ParamDef::yes_no("Lossless", 0)
        .doc("Yes: pipelined subscribers back-pressure the plugin (no frame lost); No: latest-wins"),
    ParamDef::float64("LosslessTimeout", 5.0)
        .min(0.0)
        .doc("Lossless: seconds to wait for a subscriber's ack before the frame is counted as an error"),
    ParamDef::int32("Subscribers", 0)
        .read_only()
        .doc("Monitors of the image PV"),
    ParamDef::int64("Overruns", 0)
        .read_only()
        .doc("Updates squashed for latest-wins subscribers that were behind"),
];

struct Idx {
    lossless: usize,
    timeout: usize,
    subscribers: usize,
    overruns: usize,
}

pub struct PvaPlugin {
    pv: SharedPv,
    pv_name: String,
    idx: Resolved<Idx>,
}

impl PvaPlugin {
    /// A publisher on `pv` (already registered by the IOC under `pv_name`).
    pub fn new(pv: SharedPv, pv_name: String) -> PvaPlugin {
        PvaPlugin {
            pv,
            pv_name,
            idx: Resolved::default(),
        }
    }

    /// The PV of an NTNDArray publisher, with the normative type and an empty value.
    pub fn new_pv() -> SharedPv {
        let desc = ndflow_pva::nt::ntndarray::ntndarray_desc().clone();
        let initial = ndflow_pva::Value::default_for(&desc);
        SharedPv::new(desc, initial)
    }

    fn idx(&self, p: &ParamStore) -> Result<&Idx, PluginError> {
        self.idx.get_or_resolve(|| {
            let i = |n| param_index(p, "NDPluginPva", n);
            Ok(Idx {
                lossless: i("Lossless")?,
                timeout: i("LosslessTimeout")?,
                subscribers: i("Subscribers")?,
                overruns: i("Overruns")?,
            })
        })
    }
}

impl Plugin for PvaPlugin {
    fn plugin_type(&self) -> &'static str {
        "NDPluginPva"
    }

    fn params(&self) -> &'static [ParamDef] {
        PVA_PARAMS
    }

    fn accepts_compressed(&self) -> bool {
        true
    }

    fn process(
        &self,
        input: &Arc<NDArray>,
        ctx: &mut ProcessContext<'_>,
    ) -> Result<(), PluginError> {
        let ix = self.idx(ctx.params)?;
        let lossless = ctx.params.get_i64(ix.lossless) != 0;
        self.pv.set_lossless(lossless);
        let value = to_nt(input).to_value();
        // Bit 0 = the whole structure: every field is new with each frame.
        let all = BitSet::from_bits(&[0]);
        let result = if lossless {
            let secs = ctx.params.get_f64(ix.timeout).clamp(0.0, 3600.0);
            self.pv
                .post_deadline(value, &all, Instant::now() + Duration::from_secs_f64(secs))
        } else {
            self.pv.post(value, &all)
        };
        ctx.params.set_many(&[
            (
                ix.subscribers,
                ParamValue::Int(self.pv.subscribers() as i64),
            ),
            (ix.overruns, ParamValue::Int(self.pv.overruns() as i64)),
        ]);
        result.map_err(|e| {
            PluginError::Other(format!(
                "{}: frame {} not published: {e}",
                self.pv_name, input.unique_id
            ))
        })?;
        ctx.emit(input.clone());
        Ok(())
    }
}
