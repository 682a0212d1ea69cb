//! Every parameter of every port as a pvAccess PV: `{prefix}{port prefix}{Name}` (writable) and
//! `{Name}_RBV` (readback), as areaDetector's records name them ([`ParamDef::pv_names`]).
//!
//! Numbers and strings are NTScalar (value, alarm, timeStamp, display, control), enums NTEnum
//! with areaDetector's choice strings, arrays NTScalarArray (sharing the parameter's buffer).
//! `alarm` carries the directory's alarm of each PV ([`PvDirectory::alarm`]).
//! This is a view of the IOC's [`PvDirectory`]: the names, who may write, how a PUT is validated
//! (through `Graph::put`, exactly like a config key) and when it completes (busy records: when
//! the operation has ended) are the directory's; this module only turns parameter values into
//! pvAccess values and back. Monitors get the directory's rate-limited changes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use ndflow_core::{AlarmRule, ParamDef, ParamKind, ParamStore, ParamValue};
use ndflow_pva::server::{ChannelProvider, ClientId, SharedPv};
use ndflow_pva::{BitSet, ByteOrder, FieldDesc, NumArray, ScalarType, SharedBytes, Value};
use parking_lot::RwLock;

use crate::access::Rights;
use crate::pvdir::{ClientInfo, Face, PvDirectory};

use super::convert::scalar_type;

/// The pvAccess face of the IOC: one [`SharedPv`] per directory entry, plus the NTNDArray
/// image PVs of `pva` ports ([`ImagePvs`]).
pub struct PvaProvider {
    dir: Arc<PvDirectory>,
    /// Per directory entry.
    pvs: Vec<SharedPv>,
    /// Per directory slot: the type of its PVs.
    descs: Vec<FieldDesc>,
    images: Arc<ImagePvs>,
    /// `NAME.PROC`, `NAME.DESC`, … as clients ask for them.
    fields: super::field_pvs::FieldPvs,
}

impl PvaProvider {
    /// Creates the PVs of every entry of `dir` and starts following its changes.
    pub fn new(dir: &Arc<PvDirectory>, images: Arc<ImagePvs>) -> Result<Arc<PvaProvider>, String> {
        for name in images.names() {
            if dir.find(&name).is_some() {
                return Err(format!(
                    "PV name '{name}' is used twice (an image PV and a parameter)"
                ));
            }
        }
        let descs: Vec<FieldDesc> = dir
            .slots()
            .iter()
            .map(|s| match s.def.kind {
                ParamKind::Array(declared) => array_desc(&s.store, declared),
                _ => pv_desc(s.def),
            })
            .collect();
        let mut pvs = Vec::with_capacity(dir.len());
        for (id, e) in dir.entries().iter().enumerate() {
            let Some(s) = dir.slot(e.slot) else {
                return Err(format!("directory entry '{}' has no parameter", e.name));
            };
            let desc = &descs[e.slot];
            let readback = e.face == Face::Readback;
            let mut initial = face_value(s.def, desc, &s.value(), readback);
            set_alarm(dir, id, desc, &mut initial, &s.value());
            if let Some(l) = s.level_limits() {
                set_value_alarm(desc, &mut initial, l);
            }
            if let Some(h) = s.high_limit() {
                set_high_limit(desc, &mut initial, h);
            }
            let mut pv = SharedPv::new(desc.clone(), initial);
            if dir.is_writable(id) {
                let (weak, def) = (Arc::downgrade(dir), s.def);
                pv = pv.with_deferred_put_handler(move |_pv, value, _changed, client, reply| {
                    let Some(dir) = weak.upgrade() else {
                        return reply.done(Err("the IOC is shutting down".into()));
                    };
                    let v = match from_value(def, value) {
                        Ok(v) => v,
                        Err(e) => return reply.done(Err(e)),
                    };
                    let who = client_info(client);
                    let wait = reply.wants_completion();
                    dir.put(id, v, Some(&who), wait, Box::new(move |r| reply.done(r)));
                });
            }
            pvs.push(pv);
        }
        let provider = Arc::new(PvaProvider {
            dir: dir.clone(),
            pvs,
            descs,
            images,
            fields: Default::default(),
        });
        let weak = Arc::downgrade(&provider);
        dir.add_sink(Arc::new(move |slot, v| {
            if let Some(p) = weak.upgrade() {
                p.post(slot, v);
            }
        }));
        Ok(provider)
    }

    fn post(&self, slot: usize, v: &ParamValue) {
        let (Some(s), Some(desc)) = (self.dir.slot(slot), self.descs.get(slot)) else {
            return;
        };
        let value = to_value(s.def, desc, v);
        let alarms =
            !matches!(s.def.alarm, AlarmRule::None) || s.def.link != ndflow_core::LinkKind::None;
        let mut bits = changed_bits(desc);
        if alarms {
            bits.extend(desc.find("alarm").map(|(bit, _)| bit));
            bits.extend(desc.find("valueAlarm").map(|(bit, _)| bit));
        }
        let limits = s.level_limits();
        let high = s.high_limit();
        if high.is_some() {
            bits.extend(desc.find("display").map(|(bit, _)| bit));
            bits.extend(desc.find("control").map(|(bit, _)| bit));
        }
        let changed = BitSet::from_bits(&bits);
        for &e in &s.entries {
            let Some(pv) = self.pvs.get(e).filter(|_| self.dir.shows(e)) else {
                continue;
            };
            let readback = self.dir.entry(e).is_some_and(|x| x.face == Face::Readback);
            let mut out = if readback && s.def.readback_choices.is_some() {
                face_value(s.def, desc, v, true)
            } else {
                value.clone()
            };
            if alarms {
                set_alarm(&self.dir, e, desc, &mut out, v);
            }
            if let Some(l) = limits {
                set_value_alarm(desc, &mut out, l);
            }
            if let Some(h) = high {
                set_high_limit(desc, &mut out, h);
            }
            // Latest-wins for control PVs: a slow client sees the newest value.
            let _ = pv.post(out, &changed);
        }
    }

    pub fn len(&self) -> usize {
        self.pvs.len() + self.images.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every PV name served, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut v = self.dir.names();
        v.extend(self.images.names());
        v.sort();
        v
    }
}

pub(crate) fn client_info(c: &ClientId) -> ClientInfo {
    ClientInfo {
        host: c.peer.map_or(String::new(), |a| a.ip().to_string()),
        user: c.user.clone(),
        protocol: "pva",
    }
}

impl ChannelProvider for PvaProvider {
    fn lookup(&self, name: &str) -> Option<SharedPv> {
        match self.dir.find(name) {
            Some(id) => self.pvs.get(id).cloned(),
            None => self
                .images
                .lookup(name)
                .or_else(|| self.fields.lookup(&self.dir, name)),
        }
    }

    fn lookup_for(&self, name: &str, client: &ClientId) -> Option<SharedPv> {
        if self.dir.rights(name, &client_info(client)) == Rights::None {
            return None;
        }
        self.lookup(name)
    }
}

/// The NTNDArray PVs of `pva` ports, registered while the graph is built, and the frame
/// sources of `web` ports (the IOC's services to the port constructors).
#[derive(Default)]
pub struct ImagePvs {
    pvs: RwLock<HashMap<String, SharedPv>>,
    web: Arc<ndflow_web::FrameHub>,
}

impl ImagePvs {
    /// The frame sources of `web` ports, read by the IOC's web server.
    pub fn web_frames(&self) -> &Arc<ndflow_web::FrameHub> {
        &self.web
    }

    /// Adds a PV; an existing name is an error (two ports with the same prefix and name).
    pub fn add(&self, name: String, pv: SharedPv) -> Result<(), String> {
        let mut map = self.pvs.write();
        if map.contains_key(&name) {
            return Err(format!(
                "PV name '{name}' is used twice (check the port prefixes)"
            ));
        }
        map.insert(name, pv);
        Ok(())
    }

    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.pvs.read().keys().cloned().collect();
        v.sort();
        v
    }

    pub fn len(&self) -> usize {
        self.pvs.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.pvs.read().is_empty()
    }
}

impl ChannelProvider for ImagePvs {
    fn lookup(&self, name: &str) -> Option<SharedPv> {
        self.pvs.read().get(name).cloned()
    }
}

/// pvData's alarm status for an alarm a record raised itself (alarm_t.status RECORD).
const PVA_STATUS_RECORD: i32 = 3;

/// Fills `alarm` of a PV's value with the directory's alarm of `entry` (severity, status
/// RECORD, and the message: "Write error", "LOLO", …).
fn set_alarm(dir: &PvDirectory, entry: usize, desc: &FieldDesc, out: &mut Value, v: &ParamValue) {
    let alarm = dir.alarm(entry, v);
    if alarm == ndflow_core::Alarm::NONE {
        let _ = ndflow_pva::nt::set_alarm(desc, out, 0, 0, "");
        return;
    }
    let message = dir.alarm_message(entry, v, alarm);
    let _ = ndflow_pva::nt::set_alarm(
        desc,
        out,
        alarm.severity as i32,
        PVA_STATUS_RECORD,
        &message,
    );
}

/// Fills `valueAlarm` with level limits `[hihi, high, low, lolo]` (0 and NO_ALARM where a
/// level is not declared): MAJOR beyond the alarm limits, MINOR beyond the warning ones.
fn set_value_alarm(desc: &FieldDesc, out: &mut Value, limits: [Option<f64>; 4]) {
    let [hihi, high, low, lolo] = limits;
    let sev = |l: Option<f64>, s: i32| Value::I32(if l.is_some() { s } else { 0 });
    let fields = [
        ("valueAlarm.active", Value::Bool(true)),
        ("valueAlarm.lowAlarmLimit", Value::F64(lolo.unwrap_or(0.0))),
        ("valueAlarm.lowWarningLimit", Value::F64(low.unwrap_or(0.0))),
        (
            "valueAlarm.highWarningLimit",
            Value::F64(high.unwrap_or(0.0)),
        ),
        ("valueAlarm.highAlarmLimit", Value::F64(hihi.unwrap_or(0.0))),
        ("valueAlarm.lowAlarmSeverity", sev(lolo, 2)),
        ("valueAlarm.lowWarningSeverity", sev(low, 1)),
        ("valueAlarm.highWarningSeverity", sev(high, 1)),
        ("valueAlarm.highAlarmSeverity", sev(hihi, 2)),
    ];
    for (path, v) in fields {
        set(out, desc, path, v);
    }
}

/// Sets the display and control high limits (a limit that follows another parameter); the
/// low limits are the declared minimum, else 0.
fn set_high_limit(desc: &FieldDesc, out: &mut Value, high: f64) {
    for f in ["display.limitHigh", "control.limitHigh"] {
        set(out, desc, f, Value::F64(high));
    }
}

/// Bits of `value` and `timeStamp` (what changes on an update).
fn changed_bits(desc: &FieldDesc) -> Vec<usize> {
    ["value", "timeStamp"]
        .iter()
        .filter_map(|f| desc.find(f).map(|(bit, _)| bit))
        .collect()
}

fn int_type(def: &ParamDef) -> ScalarType {
    if matches!(def.kind, ParamKind::Int64) {
        ScalarType::I64
    } else {
        ScalarType::I32
    }
}

/// An array PV keeps one element type for its life: the port's `ArrayDataType` when the
/// config fixed it (StdArrays), else the declared type.
fn array_desc(store: &ParamStore, declared: ndflow_core::DataType) -> FieldDesc {
    let chosen = store
        .index("ArrayDataType")
        .map(|i| store.get_i64(i))
        .and_then(ndflow_core::DataType::from_index) // "Automatic" (10) is none
        .unwrap_or(declared);
    ndflow_pva::nt::scalar_array::desc(scalar_type(chosen))
}

/// The normative type of a parameter's PV.
pub fn pv_desc(def: &ParamDef) -> FieldDesc {
    use ndflow_pva::nt;
    // Level alarms (QueueFree's LOW/LOLO) are served as `valueAlarm`, as QSRV does.
    let levels = matches!(def.alarm, AlarmRule::Levels(_));
    match def.kind {
        ParamKind::Int32 | ParamKind::Int64 if levels => {
            nt::scalar::desc_with_value_alarm(int_type(def))
        }
        ParamKind::Float64 if levels => nt::scalar::desc_with_value_alarm(ScalarType::F64),
        ParamKind::Int32 | ParamKind::Int64 => nt::scalar::desc(int_type(def)),
        ParamKind::Float64 => nt::scalar::desc(ScalarType::F64),
        ParamKind::String => nt::scalar::desc(ScalarType::String),
        ParamKind::Enum(_) => nt::enumeration::desc(),
        ParamKind::Array(dt) => nt::scalar_array::desc(scalar_type(dt)),
    }
}

fn now_posix() -> (i64, i32) {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_secs() as i64, d.subsec_nanos() as i32)
}

fn set(v: &mut Value, desc: &FieldDesc, path: &str, x: Value) {
    if let Some(f) = v.field_mut(desc, path) {
        *f = x;
    }
}

/// The PV value of a parameter value (with display/control metadata and a current timeStamp).
pub fn to_value(def: &ParamDef, desc: &FieldDesc, pv: &ParamValue) -> Value {
    let mut v = Value::default_for(desc);
    match (&def.kind, pv) {
        (ParamKind::Enum(choices), p) => {
            set(
                &mut v,
                desc,
                "value.index",
                Value::I32(crate::pvdir::menu_position(def, p) as i32),
            );
            set(
                &mut v,
                desc,
                "value.choices",
                Value::StringArray(choices.iter().map(|s| s.to_string()).collect()),
            );
        }
        (ParamKind::Array(_), ParamValue::Array(a)) => {
            // A PV keeps one type for its life, so an array of another element type (StdArrays'
            // ArrayData with ArrayDataType Automatic follows the frame) is served as its raw
            // bytes in the PV's type; clients reinterpret them (numpy `.view(dtype)`), nothing
            // is converted or copied.
            let ty = match desc.find("value") {
                Some((_, FieldDesc::ScalarArray(t))) => *t,
                _ => scalar_type(a.data_type),
            };
            let size = ty.size().unwrap_or(1).max(1);
            let n = a.len() * a.data_type.size();
            let n = n - n % size;
            let shared = SharedBytes::from_owner(ArrayBytes(a.buffer.clone()));
            if let Some(arr) = shared
                .slice(0, n.min(shared.len()))
                .and_then(|b| NumArray::from_shared(ty, ByteOrder::NATIVE, b))
            {
                set(&mut v, desc, "value", Value::Array(arr));
            }
        }
        (ParamKind::String, p) => {
            let s = match p {
                ParamValue::Str(s) => s.clone(),
                other => other.to_string(),
            };
            set(&mut v, desc, "value", Value::String(s));
        }
        (ParamKind::Float64, p) => {
            set(&mut v, desc, "value", Value::F64(p.as_f64().unwrap_or(0.0)))
        }
        (ParamKind::Int32 | ParamKind::Int64, p) => {
            let i = p.as_i64().unwrap_or(0);
            let x = if int_type(def) == ScalarType::I64 {
                Value::I64(i)
            } else {
                Value::I32(i.clamp(i32::MIN as i64, i32::MAX as i64) as i32)
            };
            set(&mut v, desc, "value", x);
        }
        _ => {}
    }
    if !def.desc.is_empty() {
        set(
            &mut v,
            desc,
            "display.description",
            Value::String(def.desc.to_string()),
        );
    }
    if let (Some(lo), Some(hi)) = (def.min, def.max) {
        for f in ["display.limitLow", "control.limitLow"] {
            set(&mut v, desc, f, Value::F64(lo));
        }
        for f in ["display.limitHigh", "control.limitHigh"] {
            set(&mut v, desc, f, Value::F64(hi));
        }
    }
    let (s, ns) = now_posix();
    set(&mut v, desc, "timeStamp.secondsPastEpoch", Value::I64(s));
    set(&mut v, desc, "timeStamp.nanoseconds", Value::I32(ns));
    v
}

/// [`to_value`] for one face of a parameter: a readback with its own menu shows that menu.
fn face_value(def: &ParamDef, desc: &FieldDesc, pv: &ParamValue, readback: bool) -> Value {
    let mut v = to_value(def, desc, pv);
    if let (true, Some(c)) = (readback, def.readback_choices) {
        set(
            &mut v,
            desc,
            "value.choices",
            Value::StringArray(c.iter().map(|s| s.to_string()).collect()),
        );
    }
    v
}

/// A PUT's value as a parameter value (then validated by the store).
pub fn from_value(def: &ParamDef, v: &Value) -> Result<ParamValue, String> {
    let desc = pv_desc(def);
    let bad = || format!("PUT to '{}' carries no usable value", def.name);
    match def.kind {
        ParamKind::Enum(_) => {
            let idx = v.field(&desc, "value.index").ok_or_else(bad)?;
            Ok(ParamValue::Int(idx.as_f64().ok_or_else(bad)? as i64))
        }
        ParamKind::String => {
            let s = v
                .field(&desc, "value")
                .and_then(Value::as_str)
                .ok_or_else(bad)?;
            Ok(ParamValue::Str(s.to_string()))
        }
        ParamKind::Array(_) => Err(format!("'{}' is read-only", def.name)),
        ParamKind::Int32 | ParamKind::Int64 | ParamKind::Float64 => {
            let f = v.field(&desc, "value").ok_or_else(bad)?;
            match f {
                Value::F32(_) | Value::F64(_) => Ok(ParamValue::Float(f.as_f64().ok_or_else(bad)?)),
                Value::String(s) => Ok(ParamValue::Str(s.clone())),
                other => Ok(ParamValue::Int(other.as_f64().ok_or_else(bad)? as i64)),
            }
        }
    }
}

/// An array parameter's buffer, shared with the PV (no copy of the waveform).
struct ArrayBytes(ndflow_core::Buffer);

impl AsRef<[u8]> for ArrayBytes {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}
