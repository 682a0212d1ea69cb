//! pvaDriver: a driver whose frames come from an NTNDArray PV (another IOC's NDPluginPva, a
//! p4p server, ...). Acquire subscribes, stopping unsubscribes; ImageMode Single/Multiple stop
//! after 1/NumImages frames (the runtime counts). Frames keep their uniqueId, timestamps,
//! attributes and codec (compressed frames stay compressed for a Codec plugin downstream).
//!
//! Loss is counted two ways: `OverrunCounter` (the server squashed updates for us: its overrun
//! bitset was not empty) as pvaDriver does, and `LostFrames` from gaps in the uniqueId sequence,
//! which also catches frames the producer never sent (unless CountUidGaps = No: a scale-out
//! writer sees only the frames a Scatter gave it, and `ndflow vds` reports gaps over all
//! writers instead). With `Lossless = Yes` the monitor is
//! pipelined, so a lossless publisher waits for us instead of squashing.

use std::time::Duration;

use ndflow_core::{NDArray, ParamDef, ParamStore, ParamValue, Pool};
use ndflow_pva::client::{
    Client, ClientConfig, ClientError, Monitor, MonitorEvent, MonitorOptions,
};
use ndflow_pva::nt::ntndarray::NtNdArray;
use ndflow_pva::FieldDesc;
use ndflow_runtime::{Driver, DriverError};

use super::convert::{from_nt, ConvertError};

pub const PVA_DRIVER_PARAMS: &[ParamDef] = &[
    ParamDef::string("PvName", "").doc("NTNDArray PV to receive frames from"),
    ParamDef::enumeration("PvConnection", &["Down", "Up"], 0)
        .read_only()
        .doc("Whether the PV is connected"),
    ParamDef::int64("OverrunCounter", 0)
        .read_only()
        .doc("Updates the server reported as overrun (squashed) for this monitor"),
    ParamDef::int64("LostFrames", 0)
        .read_only()
        .doc("Frames missing from the uniqueId sequence (when CountUidGaps = Yes)"),
    ParamDef::yes_no("CountUidGaps", 1).doc(
        "Count uniqueId gaps as LostFrames; No for one of several writers fed by a Scatter, which sees only its share",
    ),
    ParamDef::int64("InvalidFrames", 0)
        .read_only()
        .doc("Updates that were not a usable NTNDArray (dropped; StatusMessage says why)"),
    ParamDef::yes_no("DropInitialValue", 1).doc(
        "Skip the first update of each subscription: the PV's current value, made before Acquire",
    ),
    ParamDef::yes_no("Lossless", 0)
        .doc("Pipelined monitor: a lossless publisher waits for this driver"),
    ParamDef::int32("MonitorQueueSize", 16)
        .range(2.0, 100_000.0)
        .doc("Updates the monitor may hold (pvRequest queueSize)"),
];

/// How long one `acquire` waits for an update before letting the runtime check Acquire.
const POLL: Duration = Duration::from_millis(50);

#[derive(Default)]
pub struct PvaDriver {
    client: Option<Client>,
    monitor: Option<Monitor>,
    desc: Option<FieldDesc>,
    last_uid: Option<i32>,
    /// The next update is the subscription's initial snapshot.
    initial_pending: bool,
    overruns: i64,
    lost: i64,
    invalid: i64,
}

impl PvaDriver {
    pub fn new() -> PvaDriver {
        PvaDriver::default()
    }

    fn set(params: &ParamStore, name: &str, v: impl Into<ParamValue>) {
        let _ = params.set_by_name(name, v);
    }

    fn flag(params: &ParamStore, name: &str) -> bool {
        params
            .get_by_name(name)
            .ok()
            .and_then(|v| v.as_i64())
            .unwrap_or(0)
            != 0
    }

    fn counters(&self, params: &ParamStore) {
        Self::set(params, "OverrunCounter", self.overruns);
        Self::set(params, "LostFrames", self.lost);
        Self::set(params, "InvalidFrames", self.invalid);
    }

    /// A bad update costs one frame, counted and explained; acquisition goes on.
    fn invalid(&mut self, params: &ParamStore, why: String) -> DriverError {
        self.invalid += 1;
        self.counters(params);
        Self::set(params, "StatusMessage", why);
        DriverError::NoFrame
    }
}

fn other(e: impl std::fmt::Display) -> DriverError {
    DriverError::Other(e.to_string())
}

impl Driver for PvaDriver {
    fn driver_type(&self) -> &'static str {
        "pvaDriver"
    }

    fn params(&self) -> &'static [ParamDef] {
        PVA_DRIVER_PARAMS
    }

    fn init(&mut self, params: &ParamStore) -> Result<(), DriverError> {
        Self::set(params, "Manufacturer", "ndflow");
        Self::set(params, "Model", "pvaDriver");
        // Frames arrive when the producer sends them: no exposure or period to wait out.
        Self::set(params, "AcquireTime", 0.0);
        Self::set(params, "AcquirePeriod", 0.0);
        Ok(())
    }

    fn start(&mut self, params: &ParamStore) -> Result<(), DriverError> {
        let name = params.get_by_name("PvName").map_err(other)?;
        let name = match name {
            ParamValue::Str(s) if !s.is_empty() => s,
            _ => return Err(other("PvName is empty: set the NTNDArray PV to receive")),
        };
        if self.client.is_none() {
            let cfg = ClientConfig::from_env().map_err(other)?;
            self.client = Some(Client::new(cfg).map_err(other)?);
        }
        let client = self.client.as_ref().ok_or_else(|| other("no client"))?;
        let lossless = Self::flag(params, "Lossless");
        let queue = params
            .get_by_name("MonitorQueueSize")
            .ok()
            .and_then(|v| v.as_i64())
            .unwrap_or(16)
            .clamp(2, 100_000) as u32;
        let opts = MonitorOptions {
            request: String::new(),
            queue_size: queue,
            pipeline: lossless,
            ack_any: None,
        };
        self.monitor = Some(client.monitor(&name, opts).map_err(other)?);
        self.last_uid = None;
        self.initial_pending = true;
        Ok(())
    }

    fn stop(&mut self, params: &ParamStore) {
        // Dropping the monitor cancels the subscription on the server.
        self.monitor = None;
        self.desc = None;
        Self::set(params, "PvConnection", 0);
    }

    fn acquire(&mut self, params: &ParamStore, pool: &Pool) -> Result<NDArray, DriverError> {
        let monitor = self.monitor.as_ref().ok_or(DriverError::NoFrame)?;
        match monitor.recv(POLL) {
            Ok(MonitorEvent::Connected(desc)) => {
                self.desc = Some((*desc).clone());
                // Every (re)subscription starts with a snapshot of the current value.
                self.initial_pending = true;
                Self::set(params, "PvConnection", 1);
                Err(DriverError::NoFrame)
            }
            Ok(MonitorEvent::Data { value, overrun, .. }) => {
                if std::mem::take(&mut self.initial_pending)
                    && Self::flag(params, "DropInitialValue")
                {
                    return Err(DriverError::NoFrame);
                }
                if !overrun.is_empty() {
                    self.overruns += 1;
                }
                let Some(desc) = self.desc.as_ref() else {
                    return Err(self.invalid(params, "update before its type".into()));
                };
                let nt = match NtNdArray::from_value(desc, &value) {
                    Ok(nt) => nt,
                    Err(e) => return Err(self.invalid(params, format!("not an NTNDArray: {e}"))),
                };
                let frame = match from_nt(&nt, pool) {
                    Ok(f) => f,
                    Err(ConvertError::Pool(e)) => return Err(DriverError::Core(e)),
                    Err(e) => return Err(self.invalid(params, e.to_string())),
                };
                let count_gaps = Self::flag(params, "CountUidGaps");
                if let (Some(last), true) = (self.last_uid, count_gaps) {
                    let gap = i64::from(frame.unique_id) - i64::from(last) - 1;
                    if gap > 0 {
                        self.lost += gap;
                    }
                }
                self.last_uid = Some(frame.unique_id);
                self.counters(params);
                Ok(frame)
            }
            Ok(MonitorEvent::Disconnected) | Ok(MonitorEvent::Finished) => {
                Self::set(params, "PvConnection", 0);
                Err(DriverError::NoFrame)
            }
            Ok(MonitorEvent::Failed(why)) => {
                Self::set(params, "PvConnection", 0);
                Err(other(format!("the server refused the subscription: {why}")))
            }
            Err(ClientError::Timeout(_)) => Err(DriverError::NoFrame),
            Err(e) => Err(other(e)),
        }
    }

    fn keeps_frame_identity(&self) -> bool {
        true
    }
}
