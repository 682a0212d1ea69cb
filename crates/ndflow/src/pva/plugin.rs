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

use ndflow_core::{NDArray, ParamDef, ParamStore};
use ndflow_pva::server::SharedPv;
use ndflow_pva::BitSet;
use ndflow_runtime::port_params::{bind, plugin_layout};
use ndflow_runtime::{Built, ConstructorKey, Plugin, PluginError, PortType, ProcessContext};

use super::convert::to_nt;
use super::ImagePvs;

ndflow_core::params! {
    /// NDPluginPva's own parameters.
    pub const PVA_PARAMS, pub struct PvaParams {
        pv_name: string("PvName", "")
            .read_only()
            .long_string()
            .doc("Name of the NTNDArray PV (config key PvName at creation; default {prefix}{port prefix}Image)"),
        lossless: yes_no("Lossless", 0)
            .doc("Yes: pipelined subscribers back-pressure the plugin (no frame lost); No: latest-wins"),
        lossless_timeout: float64("LosslessTimeout", 5.0)
            .min(0.0)
            .doc("Lossless: seconds to wait for a subscriber's ack before the frame is counted as an error"),
        subscribers: int32("Subscribers", 0)
            .read_only()
            .doc("Monitors of the image PV"),
        overruns: int64("Overruns", 0)
            .read_only()
            .doc("Updates squashed for latest-wins subscribers that were behind"),
    }
}

pub struct PvaPlugin {
    pv: SharedPv,
    pv_name: String,
    /// NDPluginPva's handles in the port's layout.
    p: PvaParams,
}

impl PvaPlugin {
    /// A publisher on `pv` (already registered by the IOC under `pv_name`).
    pub fn new(pv: SharedPv, pv_name: String) -> PvaPlugin {
        PvaPlugin {
            pv,
            pv_name,
            p: bind(&plugin_layout(PVA_PARAMS), PvaParams::bind),
        }
    }

    /// The PV of an NTNDArray publisher, with the normative type and an empty value.
    pub fn new_pv() -> SharedPv {
        let desc = ndflow_pva::nt::ntndarray::ntndarray_desc().clone();
        let initial = ndflow_pva::Value::default_for(&desc);
        SharedPv::new(desc, initial)
    }
}

impl Plugin for PvaPlugin {
    fn plugin_type(&self) -> &'static str {
        "NDPluginPva"
    }

    fn params(&self) -> &'static [ParamDef] {
        PVA_PARAMS
    }

    fn attached(&self, params: &Arc<ParamStore>) {
        self.p.pv_name.set(params, self.pv_name.clone());
        // The count changes as clients come and go, not only with frames.
        let (params, subscribers) = (Arc::clone(params), self.p.subscribers);
        self.pv
            .on_subscribers_changed(move |n| subscribers.set(&params, n as i64));
    }

    fn accepts_compressed(&self) -> bool {
        true
    }

    fn process(
        &self,
        input: &Arc<NDArray>,
        ctx: &mut ProcessContext<'_>,
    ) -> Result<(), PluginError> {
        let (lossless, timeout) = ctx
            .params
            .with_values(|v| (self.p.lossless.read(v), self.p.lossless_timeout.read(v)));
        self.pv.set_lossless(lossless);
        let value = to_nt(input).to_value();
        // Bit 0 = the whole structure: every field is new with each frame.
        let all = BitSet::from_bits(&[0]);
        let result = if lossless {
            let secs = timeout.clamp(0.0, 3600.0);
            self.pv
                .post_deadline(value, &all, Instant::now() + Duration::from_secs_f64(secs))
        } else {
            self.pv.post(value, &all)
        };
        ctx.params.set_many(&[
            self.p.subscribers.value(self.pv.subscribers() as i64),
            self.p.overruns.value(self.pv.overruns() as i64),
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

/// The port type `type = "pva"`: publishes under `PvName` (constructor key; default the
/// port's prefix followed by `Image`), registered with the IOC's image PVs when built in one.
pub const PORT: PortType = PortType::plugin(
    "pva",
    "NDPluginPva",
    "Publishes frames as an NTNDArray PV (zero-copy; latest-wins or lossless)",
    |a| {
        let name = match a.string("PvName")? {
            Some(n) => n,
            None => format!("{}Image", a.pv_prefix),
        };
        let pv = PvaPlugin::new_pv();
        if let Some(pvs) = a.service::<ImagePvs>() {
            pvs.add(name.clone(), pv.clone())?;
        }
        Ok(Built::Plugin(Arc::new(PvaPlugin::new(pv, name))))
    },
)
.keys(&[ConstructorKey {
    name: "PvName",
    doc: "The NTNDArray PV's full name (default: IOC prefix, port prefix, then Image)",
}]);

#[cfg(test)]
mod tests {
    use super::*;
    use ndflow_core::{DataType, Pool};
    use ndflow_runtime::PluginHarness;

    fn frame(uid: i32) -> NDArray {
        let mut b = Pool::unlimited().alloc(6 * 4).unwrap();
        b.as_mut_slice::<u8>().fill(3);
        let mut f = NDArray::new(&[6, 4], DataType::UInt8, b.freeze()).unwrap();
        f.unique_id = uid;
        f
    }

    #[test]
    fn publishes_and_passes_on_each_frame_latest_wins_or_lossless() {
        let pv = PvaPlugin::new_pv();
        let h = PluginHarness::new(PvaPlugin::new(pv, "T:Image".into()));
        assert_eq!(h.process(frame(1)).unwrap()[0].unique_id, 1);
        h.put("Lossless", "Yes").unwrap();
        h.put("LosslessTimeout", 0.5).unwrap();
        assert_eq!(h.process(frame(2)).unwrap()[0].unique_id, 2);
        assert_eq!(h.get_f64("Subscribers"), 0.0);
        assert_eq!(h.get_f64("Overruns"), 0.0);
    }
}
