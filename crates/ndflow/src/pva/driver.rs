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

use ndflow_core::alarm::sev::{MAJOR, NO};
use std::time::Duration;

use ndflow_core::{NDArray, ParamDef, ParamStore, Pool};
use ndflow_pva::client::{
    Client, ClientConfig, ClientError, Monitor, MonitorEvent, MonitorOptions,
};
use ndflow_pva::nt::ntndarray::NtNdArray;
use ndflow_pva::FieldDesc;
use ndflow_runtime::port_params::{bind, driver_layout, DriverBase};
use ndflow_runtime::{Driver, DriverError};

use super::convert::{from_nt, ConvertError};
use ndflow_runtime::{Built, PortType};

ndflow_core::params! {
    /// pvaDriver's own parameters.
    pub const PVA_DRIVER_PARAMS, pub struct PvaDriverParams {
        pv_name: string("PvName", "").doc("NTNDArray PV to receive frames from"),
        pv_connection: enumeration("PvConnection", &["Down", "Up"], 0)
            .alarm_states(&[MAJOR, NO])
            .read_only()
            .doc("Whether the PV is connected"),
        overrun_counter: int64("OverrunCounter", 0)
            .read_only()
            .doc("Updates the server reported as overrun (squashed) for this monitor"),
        lost_frames: int64("LostFrames", 0)
            .read_only()
            .doc("Frames missing from the uniqueId sequence (when CountUidGaps = Yes)"),
        count_uid_gaps: yes_no("CountUidGaps", 1).doc(
            "Count uniqueId gaps as LostFrames; No for one of several writers fed by a Scatter, which sees only its share",
        ),
        invalid_frames: int64("InvalidFrames", 0)
            .read_only()
            .doc("Updates that were not a usable NTNDArray (dropped; StatusMessage says why)"),
        drop_initial_value: yes_no("DropInitialValue", 1).doc(
            "Skip the first update of each subscription: the PV's current value, made before Acquire",
        ),
        lossless: yes_no("Lossless", 0)
            .doc("Pipelined monitor: a lossless publisher waits for this driver"),
        monitor_queue_size: int32("MonitorQueueSize", 16)
            .range(2.0, 100_000.0)
            .doc("Updates the monitor may hold (pvRequest queueSize)"),
    }
}

/// How long one `acquire` waits for an update before letting the runtime check Acquire.
const POLL: Duration = Duration::from_millis(50);

pub struct PvaDriver {
    /// pvaDriver's handles and the driver base's, in the port's layout.
    p: PvaDriverParams,
    base: DriverBase,
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

impl Default for PvaDriver {
    fn default() -> Self {
        Self::new()
    }
}

impl PvaDriver {
    pub fn new() -> PvaDriver {
        let layout = driver_layout(PVA_DRIVER_PARAMS);
        PvaDriver {
            p: bind(&layout, PvaDriverParams::bind),
            base: DriverBase::of(&layout),
            client: None,
            monitor: None,
            desc: None,
            last_uid: None,
            initial_pending: false,
            overruns: 0,
            lost: 0,
            invalid: 0,
        }
    }

    fn counters(&self, params: &ParamStore) {
        params.set_many(&[
            self.p.overrun_counter.value(self.overruns),
            self.p.lost_frames.value(self.lost),
            self.p.invalid_frames.value(self.invalid),
        ]);
    }

    /// A bad update costs one frame, counted and explained; acquisition goes on.
    fn invalid(&mut self, params: &ParamStore, why: String) -> DriverError {
        self.invalid += 1;
        self.counters(params);
        self.base.driver.status_message.set(params, why);
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
        let (nd, ad) = (&self.base.array, &self.base.driver);
        params.set_many(&[
            nd.manufacturer.value("ndflow".into()),
            nd.model.value("pvaDriver".into()),
            // Frames arrive when the producer sends them: no exposure or period to wait out.
            ad.acquire_time.value(0.0),
            ad.acquire_period.value(0.0),
        ]);
        Ok(())
    }

    fn start(&mut self, params: &ParamStore) -> Result<(), DriverError> {
        let name = self.p.pv_name.get(params);
        if name.is_empty() {
            return Err(other("PvName is empty: set the NTNDArray PV to receive"));
        }
        if self.client.is_none() {
            let cfg = ClientConfig::from_env().map_err(other)?;
            self.client = Some(Client::new(cfg).map_err(other)?);
        }
        let client = self.client.as_ref().ok_or_else(|| other("no client"))?;
        let (lossless, queue) =
            params.with_values(|v| (self.p.lossless.read(v), self.p.monitor_queue_size.read(v)));
        let queue = queue.clamp(2, 100_000) as u32;
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
        self.p.pv_connection.set(params, 0);
    }

    fn acquire(&mut self, params: &ParamStore, pool: &Pool) -> Result<NDArray, DriverError> {
        let monitor = self.monitor.as_ref().ok_or(DriverError::NoFrame)?;
        match monitor.recv(POLL) {
            Ok(MonitorEvent::Connected(desc)) => {
                self.desc = Some((*desc).clone());
                // Every (re)subscription starts with a snapshot of the current value.
                self.initial_pending = true;
                self.p.pv_connection.set(params, 1);
                Err(DriverError::NoFrame)
            }
            Ok(MonitorEvent::Data { value, overrun, .. }) => {
                if std::mem::take(&mut self.initial_pending)
                    && self.p.drop_initial_value.get(params)
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
                let count_gaps = self.p.count_uid_gaps.get(params);
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
                self.p.pv_connection.set(params, 0);
                Err(DriverError::NoFrame)
            }
            Ok(MonitorEvent::Failed(why)) => {
                self.p.pv_connection.set(params, 0);
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

/// The port type `type = "pvadriver"`.
pub const PORT: PortType = PortType::driver(
    "pvadriver",
    "pvaDriver",
    "Frames from an NTNDArray PV (another IOC, p4p); uniqueId gaps counted",
    |_| Ok(Built::Driver(Box::new(PvaDriver::new()))),
);

#[cfg(test)]
mod tests {
    use super::*;
    use ndflow_core::ParamValue;

    #[test]
    fn init_start_and_stop_write_their_parameters() {
        let store = ParamStore::from_layout(driver_layout(PVA_DRIVER_PARAMS));
        let mut d = PvaDriver::new();
        d.init(&store).unwrap();
        let get = |name| store.get_by_name(name).unwrap();
        assert_eq!(get("Manufacturer"), ParamValue::Str("ndflow".into()));
        assert_eq!(get("Model"), ParamValue::Str("pvaDriver".into()));
        assert_eq!(get("AcquirePeriod"), ParamValue::Float(0.0));
        let e = d.start(&store).expect_err("an empty PvName is refused");
        assert!(e.to_string().contains("PvName is empty"), "{e}");
        store.set_by_name("PvConnection", 1).unwrap();
        d.stop(&store);
        assert_eq!(get("PvConnection"), ParamValue::Int(0));
    }
}
