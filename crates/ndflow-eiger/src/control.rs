//! The control thread: writes settings to the detector as they are put, reads back what the
//! detector made of them, polls its status once a second, and notices when it goes away and
//! comes back (State_RBV `disconnected`, Error_RBV saying why; on reconnection every readback
//! is refreshed). Writes never wait on the network: the put handler only queues them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, RecvTimeoutError, Sender};
use ndflow_core::{ParamStore, ParamValue};
use ndflow_runtime::PutHandler;
use serde_json::{json, Value};

use crate::keys::{self, Access, Conv, KeyMap, Section};
use crate::params::{Eiger1Params, Eiger2Params, EigerBaseParams, Family};
use crate::simplon::{Simplon, SimplonError, Subsystem};

/// Status poll period.
const POLL: Duration = Duration::from_secs(1);
/// Slow commands: initialize and restart take tens of seconds.
const SLOW: Duration = Duration::from_secs(300);

enum Msg {
    Put(usize, ParamValue),
    PollNow,
    Shutdown,
}

/// When each parameter was last written from outside, on a counter of writes: a read-back
/// that started before a write must not undo it (the write is queued and will be read back).
struct Writes {
    clock: AtomicU64,
    at: Vec<AtomicU64>,
}

impl Writes {
    fn now(&self) -> u64 {
        self.clock.load(Ordering::Acquire)
    }
    fn record(&self, idx: usize) {
        let t = self.clock.fetch_add(1, Ordering::AcqRel) + 1;
        if let Some(a) = self.at.get(idx) {
            a.store(t, Ordering::Release);
        }
    }
    fn since(&self, idx: usize, t: u64) -> bool {
        self.at
            .get(idx)
            .is_some_and(|a| a.load(Ordering::Acquire) > t)
    }
}

pub struct Control {
    tx: Sender<Msg>,
    writes: Arc<Writes>,
    armed: Arc<AtomicBool>,
    /// Whether the last request reached the detector (false until the first does).
    reachable: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Control {
    pub fn start(
        simplon: Simplon,
        family: Family,
        params: Arc<ParamStore>,
    ) -> std::io::Result<Control> {
        let (tx, rx) = unbounded();
        let armed = Arc::new(AtomicBool::new(false));
        let reachable = Arc::new(AtomicBool::new(false));
        let layout = params.layout();
        let writes = Arc::new(Writes {
            clock: AtomicU64::new(0),
            at: (0..layout.defs().len())
                .map(|_| AtomicU64::new(0))
                .collect(),
        });
        let state = State {
            p: EigerBaseParams::bind(layout).map_err(std::io::Error::other)?,
            p1: Eiger1Params::bind(layout).ok(),
            p2: Eiger2Params::bind(layout).ok(),
            simplon,
            family,
            params,
            armed: armed.clone(),
            writes: writes.clone(),
            connected: None,
            reachable: reachable.clone(),
            detector_values: HashMap::new(),
            pending: Vec::new(),
            initialized: false,
        };
        let thread = std::thread::Builder::new()
            .name("ndflow-eiger-ctl".into())
            .spawn(move || state.run(&rx))?;
        Ok(Control {
            tx,
            writes,
            armed,
            reachable,
            thread: Some(thread),
        })
    }

    /// Whether the detector answered the last request (for `DetectorState_RBV`).
    pub fn reachable(&self) -> Arc<AtomicBool> {
        self.reachable.clone()
    }

    pub fn put_handler(&self) -> PutHandler {
        let (tx, writes) = (self.tx.clone(), self.writes.clone());
        Box::new(move |idx, v| {
            writes.record(idx);
            let _ = tx.send(Msg::Put(idx, v.clone()));
        })
    }

    pub fn set_armed(&self, armed: bool) {
        self.armed.store(armed, Ordering::Release);
    }

    pub fn poll_now(&self) {
        let _ = self.tx.send(Msg::PollNow);
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        let _ = self.tx.send(Msg::Shutdown);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct State {
    p: EigerBaseParams,
    p1: Option<Eiger1Params>,
    p2: Option<Eiger2Params>,
    simplon: Simplon,
    family: Family,
    params: Arc<ParamStore>,
    armed: Arc<AtomicBool>,
    writes: Arc<Writes>,
    /// None until the first poll; then whether the last request reached the detector.
    connected: Option<bool>,
    /// `connected == Some(true)`, for the driver port.
    reachable: Arc<AtomicBool>,
    /// Energies and wavelength as the detector last reported them (for the *Eps checks).
    detector_values: HashMap<&'static str, f64>,
    /// Whether the automatic initialization of a detector found in state "na" was done.
    initialized: bool,
    /// Settings written while the detector was unreachable, in order: sent when it comes
    /// back, before its own values are read (the user's last word wins, as it would have).
    pending: Vec<(usize, ParamValue)>,
}

/// A record's value as SIMPLON JSON.
fn to_json(k: &KeyMap, v: &ParamValue) -> Option<Value> {
    Some(match k.conv {
        Conv::Float => json!(v.as_f64()? / k.scale),
        Conv::Int => json!(v.as_i64()?),
        Conv::Bool => json!(v.as_i64()? != 0),
        Conv::Text => match v {
            ParamValue::Str(s) => json!(s),
            other => json!(other.to_string()),
        },
        Conv::Enum(_) => json!(k.conv.simplon_value(usize::try_from(v.as_i64()?).ok()?)?),
    })
}

/// A SIMPLON value as the record's value.
fn from_json(k: &KeyMap, v: &Value) -> Option<ParamValue> {
    Some(match k.conv {
        Conv::Float => ParamValue::Float(crate::driver::json_f64(v)? * k.scale),
        Conv::Int => ParamValue::Int(v.as_i64().or_else(|| v.as_f64().map(|f| f as i64))?),
        Conv::Bool => ParamValue::Int(i64::from(v.as_bool()?)),
        Conv::Text => ParamValue::Str(match v {
            Value::String(s) => s.clone(),
            Value::Array(items) => items
                .iter()
                .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_string))
                .collect::<Vec<_>>()
                .join(", "),
            Value::Null => String::new(),
            other => other.to_string(),
        }),
        Conv::Enum(_) => ParamValue::Int(k.conv.menu_index(v.as_str()?)? as i64),
    })
}

fn unreachable(e: &SimplonError) -> bool {
    matches!(
        e,
        SimplonError::Connect { .. } | SimplonError::Timeout { .. }
    )
}

impl State {
    fn run(mut self, rx: &Receiver<Msg>) {
        let mut next_poll = Instant::now();
        loop {
            let wait = next_poll.saturating_duration_since(Instant::now());
            match rx.recv_timeout(wait) {
                Ok(Msg::Put(idx, v)) => self.on_put(idx, &v),
                Ok(Msg::PollNow) => next_poll = Instant::now(),
                Ok(Msg::Shutdown) | Err(RecvTimeoutError::Disconnected) => return,
                Err(RecvTimeoutError::Timeout) => {}
            }
            if Instant::now() >= next_poll {
                self.poll();
                next_poll = Instant::now() + POLL;
            }
        }
    }

    fn entries(&self) -> impl Iterator<Item = &'static KeyMap> {
        keys::for_family(self.family)
    }

    /// Sets the record of `k` from the detector's `value`, read after write number `asked`.
    fn show(&mut self, k: &'static KeyMap, value: &Value, asked: u64) {
        let Some(pv) = from_json(k, value) else {
            tracing::debug!("eiger: {} = {value} does not fit {}", k.key, k.record);
            return;
        };
        // Error_RBV also carries ndflow's own messages (a bad stream message, a lost
        // connection): the detector's empty error list does not wipe them.
        if k.record == "Error" && matches!(&pv, ParamValue::Str(t) if t.is_empty()) {
            return;
        }
        if let ParamValue::Float(f) = pv {
            self.detector_values.insert(k.record, f);
        }
        // ADEiger also shows the full image size as the detector's maximum.
        let target = match k.record {
            "ArraySizeX" => "MaxSizeX",
            "ArraySizeY" => "MaxSizeY",
            r => r,
        };
        let Some(idx) = self.params.index(target) else {
            return;
        };
        if self.writes.since(idx, asked) {
            return; // written since we asked: that write is queued and will be read back
        }
        if let Err(e) = self.params.set(idx, pv) {
            tracing::debug!("eiger: cannot show {target}: {e}");
        }
    }

    fn read(&mut self, k: &'static KeyMap) -> Result<(), SimplonError> {
        let asked = self.writes.now();
        let got = match k.section {
            Section::Config => self.simplon.get_config(k.sub, k.key)?,
            Section::Status => self.simplon.get_status(k.sub, k.key)?,
        };
        self.show(k, &got.value, asked);
        Ok(())
    }

    fn set_connected(&mut self, c: Option<bool>) {
        self.connected = c;
        // Unknown (re-reading after a command) keeps the last answer.
        if let Some(c) = c {
            self.reachable.store(c, Ordering::Release);
        }
    }

    fn lost(&mut self, e: &SimplonError) {
        if self.connected != Some(false) {
            tracing::warn!("eiger: detector unreachable: {e}");
        }
        self.set_connected(Some(false));
        self.params.set_many(&[
            self.p.state.value("disconnected".into()),
            self.p.error.value(e.to_string()),
        ]);
    }

    /// Status once a second; everything after a (re)connection.
    fn poll(&mut self) {
        let fresh = self.connected != Some(true);
        if fresh && !self.pending.is_empty() {
            if let Err(e) = self.simplon.get_status(Subsystem::Detector, "state") {
                return self.lost(&e);
            }
            for (idx, v) in std::mem::take(&mut self.pending) {
                self.on_put(idx, &v);
            }
            if self.connected == Some(false) {
                return; // lost again while catching up; the rest is pending again
            }
        }
        let list: Vec<&'static KeyMap> = self
            .entries()
            .filter(|k| fresh || k.section == Section::Status)
            .filter(|k| k.access != Access::WriteOnly)
            .collect();
        for k in list {
            match self.read(k) {
                Ok(()) => {}
                Err(e) if unreachable(&e) => return self.lost(&e),
                // A key this firmware lacks (404) or answers oddly: not a lost detector.
                Err(e) => tracing::debug!("eiger: {e}"),
            }
        }
        if fresh {
            tracing::info!("eiger: connected to {}", self.simplon.addr());
            self.set_connected(Some(true));
            self.p.error.set(&self.params, String::new());
            // A detector just powered on is not initialized ("na") and refuses to arm:
            // initialize it once, as ADEiger does at start-up.
            if self.p.state.get(&self.params) == "na" && !self.initialized {
                self.initialized = true;
                tracing::info!("eiger: the detector is not initialized: initializing it");
                if let Err(e) =
                    self.slow_command(Subsystem::Detector, "initialize", None, "Initialize")
                {
                    self.p.error.set(&self.params, format!("initialize: {e}"));
                }
            }
        }
    }

    fn on_put(&mut self, idx: usize, v: &ParamValue) {
        let Some(name) = self.params.def(idx).map(|d| d.name) else {
            return;
        };
        let result = match name {
            "Trigger" => self.manual_trigger(),
            "Initialize" => self.slow_command(Subsystem::Detector, "initialize", None, name),
            "Restart" => self
                .slow_command(Subsystem::System, "restart", None, name)
                .and_then(|()| self.slow_command(Subsystem::Detector, "initialize", None, name)),
            "HVReset" if self.p2.is_some() && v.as_i64() != Some(0) => {
                let secs = self.p2.map_or(1.0, |p2| p2.hv_reset_time.get(&self.params));
                self.slow_command(
                    Subsystem::Detector,
                    "hv_reset",
                    Some(json!({ "value": secs })),
                    name,
                )
            }
            "FWClear" if self.p1.is_some() => self
                .simplon
                .command(Subsystem::FileWriter, "clear", None)
                .map(|_| ()),
            _ => self.write_setting(name, v),
        };
        match result {
            Ok(()) => {}
            Err(e) if unreachable(&e) => {
                if self.connected != Some(false) || self.pending.is_empty() {
                    tracing::info!("eiger: {name} will be sent when the detector answers");
                }
                self.pending.retain(|(i, _)| *i != idx);
                self.pending.push((idx, v.clone()));
                self.lost(&e);
            }
            Err(e) => self.p.error.set(&self.params, e.to_string()),
        }
    }

    /// Commands that take long; their busy record is back to Done when they end.
    fn slow_command(
        &mut self,
        sub: Subsystem,
        cmd: &str,
        body: Option<Value>,
        record: &str,
    ) -> Result<(), SimplonError> {
        self.p.state.set(&self.params, format!("{cmd}…"));
        let r = self.simplon.command_with_timeout(sub, cmd, body, SLOW);
        let _ = self.params.set_by_name(record, 0);
        r?;
        // Settings may have changed (initialize restores defaults): read everything.
        self.set_connected(None);
        self.poll();
        Ok(())
    }

    /// One software trigger, when armed in an internal mode with ManualTrigger.
    fn manual_trigger(&mut self) -> Result<(), SimplonError> {
        let (ps, p) = (&*self.params, &self.p);
        let mode = ps.get_by_name("TriggerMode").ok().and_then(|v| v.as_i64());
        if !self.armed.load(Ordering::Acquire)
            || !p.manual_trigger.get(ps)
            || !matches!(mode, Some(0 | 1))
        {
            p.error.set(
                ps,
                "Trigger ignored: it needs an armed detector, TriggerMode Internal Series or Internal Enable, and ManualTrigger = Enable".into(),
            );
            return Ok(());
        }
        let body = (mode == Some(1)).then(|| {
            let t = ps.get_by_name("AcquireTime").ok().and_then(|v| v.as_f64());
            json!({ "value": t.unwrap_or(0.0) })
        });
        // A trigger call returns when its images are taken: not on this thread.
        let (simplon, params, error) = (self.simplon.clone(), self.params.clone(), p.error);
        let spawned = std::thread::Builder::new()
            .name("ndflow-eiger-trigger".into())
            .spawn(move || {
                if let Err(e) =
                    simplon.command_with_timeout(Subsystem::Detector, "trigger", body, SLOW)
                {
                    error.set(&params, e.to_string());
                }
            });
        if let Err(e) = spawned {
            p.error.set(ps, format!("cannot send the trigger: {e}"));
        }
        Ok(())
    }

    /// A setting backed by a SIMPLON key: written, then read back with whatever it changed.
    fn write_setting(&mut self, name: &str, v: &ParamValue) -> Result<(), SimplonError> {
        let Some(k) = keys::lookup(name, self.family) else {
            return Ok(()); // a record of ndflow's own, or one without a detector side
        };
        if !matches!(k.access, Access::ReadWrite | Access::WriteOnly)
            || k.section != Section::Config
        {
            return Ok(());
        }
        if self.within_eps(name, v) {
            return Ok(());
        }
        let Some(value) = to_json(k, v) else {
            self.p
                .error
                .set(&self.params, format!("{name}: {v} has no detector value"));
            return Ok(());
        };
        let changed = match self.simplon.put_config(k.sub, k.key, value) {
            Ok(changed) => changed,
            Err(e) => {
                // Show the detector's own value again, and say why the write failed.
                if !unreachable(&e) && k.access == Access::ReadWrite {
                    let _ = self.read(k);
                }
                return Err(e);
            }
        };
        if k.access == Access::ReadWrite {
            self.read(k)?;
        }
        // Other settings the detector changed with it (an energy moves the thresholds).
        let others: Vec<&'static KeyMap> = self
            .entries()
            .filter(|o| o.sub == k.sub && o.section == Section::Config && o.key != k.key)
            .filter(|o| o.access == Access::ReadWrite || o.access == Access::ReadOnly)
            .filter(|o| changed.iter().any(|c| c == o.key))
            .collect();
        for o in others {
            self.read(o)?;
        }
        Ok(())
    }

    /// PhotonEnergy / Threshold*Energy within EnergyEps, Wavelength within WavelengthEps, of
    /// what the detector has: not sent (a real energy change recalibrates for seconds).
    fn within_eps(&self, name: &str, v: &ParamValue) -> bool {
        let eps = match name {
            "PhotonEnergy" | "ThresholdEnergy" | "Threshold2Energy" | "Threshold3Energy"
            | "Threshold4Energy" => self.p.energy_eps.get(&self.params),
            "Wavelength" => self.p.wavelength_eps.get(&self.params),
            _ => return false,
        };
        match (self.detector_values.get(name), v.as_f64()) {
            (Some(have), Some(want)) => (have - want).abs() < eps,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_convert_both_ways() {
        let k = keys::lookup("TriggerMode", Family::Eiger2).unwrap();
        assert_eq!(to_json(k, &ParamValue::Int(5)), Some(json!("extg")));
        assert_eq!(from_json(k, &json!("exts")), Some(ParamValue::Int(2)));
        assert_eq!(from_json(k, &json!("nonsense")), None);
        let k = keys::lookup("FWFree", Family::Eiger2).unwrap();
        assert_eq!(from_json(k, &json!(2.5e9)), Some(ParamValue::Float(2.5)));
        let k = keys::lookup("Error", Family::Eiger2).unwrap();
        assert_eq!(
            from_json(k, &json!(["a", "b"])),
            Some(ParamValue::Str("a, b".into()))
        );
        let k = keys::lookup("FlatfieldApplied", Family::Eiger1).unwrap();
        assert_eq!(to_json(k, &ParamValue::Int(1)), Some(json!(true)));
        assert_eq!(from_json(k, &json!(false)), Some(ParamValue::Int(0)));
    }
}
