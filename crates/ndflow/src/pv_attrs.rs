//! EPICS_PV attributes of NDAttributes files. Where the value comes from depends on the name:
//! - a PV this IOC serves (`{prefix}cam1:AcquireTime_RBV`): read from its parameter, in
//!   process, as each frame is stamped — no network, so it works with Channel Access and
//!   pvAccess serving off too;
//! - `pva://NAME`: a pvAccess monitor of `NAME` (the `value` of an NTScalar or NTEnum);
//! - `ca://NAME`, or a name this IOC does not serve: a Channel Access monitor.
//!
//! One client per protocol is shared by every attribute (one connection per server). Each
//! monitor runs on its own thread and keeps a cell current; a frame only copies the cell's
//! value and never waits for the network. An unreachable PV leaves the attribute undefined
//! (its name is logged) and is retried every second. The clients read the usual EPICS_CA_* and
//! EPICS_PVA_* variables.
//!
//! `dbrtype` converts as areaDetector's PVAttribute does: DBR_NATIVE keeps the PV's own type,
//! DBR_STRING gives text (an enum's menu string), the integer types an Int32 (an enum's menu
//! index) and DBR_FLOAT/DBR_DOUBLE a Float64.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use ndflow_ca::{Client, ClientConfig, ClientError, Values};
use ndflow_core::{AttrValue, ParamDef, ParamKind, ParamStore, ParamValue, RecordHint};
use ndflow_pva::client::{Client as PvaClient, MonitorEvent, MonitorOptions};
use ndflow_pva::{ByteOrder, FieldDesc, NumArray, ScalarType, Value};
use ndflow_runtime::{Graph, PvCell, PvReader, PvSource};
use parking_lot::Mutex;

use crate::pvdir::{faces, menu_position, Face};

/// How long a failed connection waits before the next try, and how often a monitor thread
/// checks that its attribute is still wanted.
const RETRY: Duration = Duration::from_secs(1);

/// One PV of this IOC: the parameter behind it and which face the name is.
struct LocalPv {
    store: Arc<ParamStore>,
    idx: usize,
    def: &'static ParamDef,
    readback: bool,
}

/// The names of this IOC's parameter PVs, as the PV directory names them (built even when no
/// protocol serves them: one map entry per PV, at start-up).
pub struct LocalPvs(HashMap<String, Arc<LocalPv>>);

impl LocalPvs {
    pub fn build(graph: &Graph, prefix: &str, port_prefixes: &HashMap<String, String>) -> Self {
        let mut map = HashMap::new();
        for handle in graph.ports() {
            let full = format!(
                "{prefix}{}",
                port_prefixes.get(handle.name()).map_or("", String::as_str)
            );
            let store = handle.params();
            for (idx, def) in store.defs().iter().copied().enumerate() {
                for (suffix, face) in faces(def) {
                    let pv = LocalPv {
                        store: Arc::clone(store),
                        idx,
                        def,
                        readback: face == Face::Readback,
                    };
                    map.insert(format!("{full}{suffix}"), Arc::new(pv));
                }
            }
        }
        LocalPvs(map)
    }
}

/// An attribute named before the ports all existed (the configuration is being applied):
/// resolved once [`AttrPvReader::set_local`] knows this IOC's names.
struct Deferred {
    pv: String,
    want: Want,
    resolved: OnceLock<PvSource>,
}

/// The IOC's EPICS_PV reader (see the module doc).
#[derive(Default)]
pub struct AttrPvReader {
    local: OnceLock<LocalPvs>,
    /// Taken with `local` read or set, so that no attribute misses its resolution.
    deferred: Mutex<Vec<Weak<Deferred>>>,
    ca: Mutex<Option<Arc<Client>>>,
    pva: Mutex<Option<Arc<PvaClient>>>,
}

/// Which protocol a source names.
enum Route<'a> {
    /// No scheme: this IOC's PV if it serves the name, else Channel Access.
    Any(&'a str),
    Ca(&'a str),
    Pva(&'a str),
}

fn route(pv: &str) -> Result<Route<'_>, String> {
    let pv = pv.trim();
    let scheme = |s: &str| {
        pv.get(..s.len())
            .filter(|p| p.eq_ignore_ascii_case(s))
            .map(|_| pv[s.len()..].trim())
    };
    let r = if let Some(n) = scheme("pva://") {
        Route::Pva(n)
    } else if let Some(n) = scheme("ca://") {
        Route::Ca(n)
    } else if let Some((s, _)) = pv.split_once("://") {
        return Err(format!(
            "EPICS_PV source '{pv}': unknown scheme '{s}://' (pva:// or ca://)"
        ));
    } else {
        Route::Any(pv)
    };
    match r {
        Route::Pva("") | Route::Ca("") => Err(format!(
            "EPICS_PV source '{pv}' names no PV after its scheme"
        )),
        r => Ok(r),
    }
}

impl AttrPvReader {
    /// Tells the reader which names this IOC serves (once its ports exist); attributes named
    /// before are resolved now.
    pub fn set_local(&self, names: LocalPvs) {
        let mut deferred = self.deferred.lock();
        let _ = self.local.set(names);
        for d in std::mem::take(&mut *deferred) {
            if let Some(d) = d.upgrade() {
                let _ = d.resolved.set(self.any(&d.pv, d.want));
            }
        }
    }

    /// A name with no scheme: ours if we serve it, else over CA. Needs `local` set.
    fn any(&self, pv: &str, want: Want) -> PvSource {
        match self.local.get().and_then(|l| l.0.get(pv)) {
            Some(p) => {
                let p = Arc::clone(p);
                PvSource::Live(Arc::new(move || match p.store.get(p.idx) {
                    Some(v) => want.convert(&local_sample(&p, &v)),
                    None => AttrValue::Undefined,
                }))
            }
            None => PvSource::Cell(self.ca_cell(pv, want)),
        }
    }

    fn ca_client(&self) -> Option<Arc<Client>> {
        let mut c = self.ca.lock();
        if c.is_none() {
            match Client::new(ClientConfig::from_env()) {
                Ok(cl) => *c = Some(Arc::new(cl)),
                Err(e) => tracing::warn!("EPICS_PV attributes: cannot start a CA client: {e}"),
            }
        }
        c.clone()
    }

    fn pva_client(&self) -> Option<Arc<PvaClient>> {
        let mut c = self.pva.lock();
        if c.is_none() {
            match PvaClient::from_env() {
                Ok(cl) => *c = Some(Arc::new(cl)),
                Err(e) => {
                    tracing::warn!("EPICS_PV attributes: cannot start a pvAccess client: {e}")
                }
            }
        }
        c.clone()
    }

    fn ca_cell(&self, pv: &str, want: Want) -> PvCell {
        let cell = undefined();
        if let Some(client) = self.ca_client() {
            let (pv, mine) = (pv.to_string(), Arc::clone(&cell));
            spawn(move || follow_ca(&client, &pv, want, &mine));
        }
        cell
    }

    fn pva_cell(&self, pv: &str, want: Want) -> PvCell {
        let cell = undefined();
        if let Some(client) = self.pva_client() {
            let (pv, mine) = (pv.to_string(), Arc::clone(&cell));
            spawn(move || follow_pva(&client, &pv, want, &mine));
        }
        cell
    }
}

impl PvReader for AttrPvReader {
    /// A monitor over the network (pvAccess for `pva://`, else Channel Access).
    fn watch(&self, pv: &str, dbrtype: &str) -> PvCell {
        let want = Want::parse(dbrtype);
        match route(pv) {
            Ok(Route::Pva(n)) => self.pva_cell(n, want),
            Ok(Route::Ca(n) | Route::Any(n)) => self.ca_cell(n, want),
            Err(_) => undefined(),
        }
    }

    fn source(&self, pv: &str, dbrtype: &str) -> Result<PvSource, String> {
        let want = Want::parse(dbrtype);
        Ok(match route(pv)? {
            Route::Pva(n) => PvSource::Cell(self.pva_cell(n, want)),
            Route::Ca(n) => PvSource::Cell(self.ca_cell(n, want)),
            Route::Any(n) => {
                let mut deferred = self.deferred.lock();
                if self.local.get().is_some() {
                    drop(deferred);
                    self.any(n, want)
                } else {
                    let d = Arc::new(Deferred {
                        pv: n.to_string(),
                        want,
                        resolved: OnceLock::new(),
                    });
                    deferred.retain(|w| w.strong_count() > 0);
                    deferred.push(Arc::downgrade(&d));
                    PvSource::Live(Arc::new(move || match d.resolved.get() {
                        Some(PvSource::Live(read)) => read(),
                        Some(PvSource::Cell(cell)) => cell.lock().clone(),
                        None => AttrValue::Undefined,
                    }))
                }
            }
        })
    }
}

fn undefined() -> PvCell {
    Arc::new(Mutex::new(AttrValue::Undefined))
}

fn spawn(f: impl FnOnce() + Send + 'static) {
    let spawned = std::thread::Builder::new()
        .name("ndflow-attr-pv".into())
        .spawn(f);
    if let Err(e) = spawned {
        tracing::warn!("EPICS_PV attributes: cannot start a monitor thread: {e}");
    }
}

/// Keeps `cell` current over Channel Access until the attribute list holding it is dropped
/// (the cell's only other owner), reconnecting when the server goes away.
fn follow_ca(client: &Client, pv: &str, want: Want, cell: &PvCell) {
    let mut warned = false;
    while Arc::strong_count(cell) > 1 {
        let sub = match client.monitor(pv) {
            Ok(s) => s,
            Err(e) => {
                if !warned {
                    tracing::warn!("EPICS_PV attribute 'ca://{pv}': {e}; retrying");
                    warned = true;
                }
                std::thread::sleep(RETRY);
                continue;
            }
        };
        warned = false;
        while Arc::strong_count(cell) > 1 {
            match sub.recv_timeout(RETRY) {
                Ok(r) => *cell.lock() = want.convert(&ca_sample(&r.values)),
                Err(ClientError::Timeout) => {}
                Err(_) => {
                    *cell.lock() = AttrValue::Undefined;
                    break;
                }
            }
        }
    }
}

/// [`follow_ca`] over pvAccess: the monitor searches and re-subscribes by itself.
fn follow_pva(client: &PvaClient, pv: &str, want: Want, cell: &PvCell) {
    let opts = MonitorOptions {
        request: "field(value)".into(),
        ..MonitorOptions::default()
    };
    let mut warned = false;
    while Arc::strong_count(cell) > 1 {
        let mon = match client.monitor(pv, opts.clone()) {
            Ok(m) => m,
            Err(e) => {
                if !warned {
                    tracing::warn!("EPICS_PV attribute 'pva://{pv}': {e}; retrying");
                    warned = true;
                }
                std::thread::sleep(RETRY);
                continue;
            }
        };
        let (started, mut desc) = (Instant::now(), None::<Arc<FieldDesc>>);
        while Arc::strong_count(cell) > 1 {
            match mon.recv(RETRY) {
                Ok(MonitorEvent::Connected(d)) => {
                    desc = Some(d);
                    warned = false;
                }
                Ok(MonitorEvent::Data { value, .. }) => {
                    if let Some(d) = &desc {
                        *cell.lock() = want.convert(&pva_sample(d, &value));
                    }
                }
                Ok(MonitorEvent::Disconnected) => *cell.lock() = AttrValue::Undefined,
                // The server ended or refused the subscription: subscribe again a second later.
                Ok(MonitorEvent::Finished) => {
                    std::thread::sleep(RETRY);
                    break;
                }
                Ok(MonitorEvent::Failed(why)) => {
                    tracing::warn!("EPICS_PV attribute 'pva://{pv}': refused: {why}");
                    std::thread::sleep(RETRY);
                    break;
                }
                Err(_) => {
                    if desc.is_none() && !warned && started.elapsed() > 5 * RETRY {
                        tracing::warn!("EPICS_PV attribute 'pva://{pv}': not found yet");
                        warned = true;
                    }
                }
            }
        }
        *cell.lock() = AttrValue::Undefined;
    }
}

/// A PV's value in the three forms a `dbrtype` may ask for.
struct Sample {
    /// DBR_NATIVE.
    native: AttrValue,
    /// The first element as a number (a string's parse, an enum's index).
    num: Option<f64>,
    /// DBR_STRING (an enum's menu string).
    text: String,
}

impl Sample {
    fn numeric(native: AttrValue, num: Option<f64>) -> Sample {
        let text = num.map(|n| n.to_string()).unwrap_or_default();
        Sample { native, num, text }
    }

    fn string(s: String) -> Sample {
        Sample {
            num: s.trim().parse().ok(),
            native: AttrValue::String(s.clone()),
            text: s,
        }
    }
}

/// The attribute type asked for by `dbrtype` (DBR_NATIVE keeps the PV's own).
#[derive(Clone, Copy)]
enum Want {
    Native,
    Int,
    Double,
    String,
}

impl Want {
    fn parse(dbrtype: &str) -> Want {
        match dbrtype.trim().to_ascii_uppercase().as_str() {
            "DBR_CHAR" | "DBR_SHORT" | "DBR_INT" | "DBR_LONG" | "DBR_ENUM" => Want::Int,
            "DBR_FLOAT" | "DBR_DOUBLE" => Want::Double,
            "DBR_STRING" => Want::String,
            _ => Want::Native,
        }
    }

    fn convert(self, s: &Sample) -> AttrValue {
        match self {
            Want::String => AttrValue::String(s.text.clone()),
            Want::Double => s.num.map_or(AttrValue::Undefined, AttrValue::Float64),
            Want::Int => s
                .num
                .map_or(AttrValue::Undefined, |n| AttrValue::Int32(n as i32)),
            Want::Native => s.native.clone(),
        }
    }
}

/// A Channel Access reading (the first element of an array).
fn ca_sample(v: &Values) -> Sample {
    fn first<T: Copy>(x: &[T], f: impl Fn(T) -> AttrValue, n: impl Fn(T) -> f64) -> Sample {
        match x.first() {
            Some(&a) => Sample::numeric(f(a), Some(n(a))),
            None => Sample::numeric(AttrValue::Undefined, None),
        }
    }
    match v {
        Values::String(x) => Sample::string(x.first().cloned().unwrap_or_default()),
        Values::Short(x) => first(x, AttrValue::Int16, f64::from),
        Values::Float(x) => first(x, AttrValue::Float32, f64::from),
        Values::Enum(x) => first(x, AttrValue::UInt16, f64::from),
        Values::Char(x) => first(x, AttrValue::UInt8, f64::from),
        Values::Long(x) => first(x, AttrValue::Int32, f64::from),
        Values::Double(x) => first(x, AttrValue::Float64, |a| a),
    }
}

/// A parameter of this IOC, typed as its Channel Access channel is (ca.rs `native_type`):
/// Int32 a long, Int64 and Float64 a double, an enum its menu index (with the menu string of
/// this face), a string (long strings too) its text, an array its first element.
fn local_sample(p: &LocalPv, v: &ParamValue) -> Sample {
    match (p.def.record, p.def.kind, v) {
        (RecordHint::LongString, _, _) | (_, ParamKind::String, _) => Sample::string(match v {
            ParamValue::Str(s) => s.clone(),
            other => other.to_string(),
        }),
        (_, ParamKind::Int32, _) => {
            let i = v
                .as_i64()
                .unwrap_or(0)
                .clamp(i32::MIN as i64, i32::MAX as i64) as i32;
            Sample::numeric(AttrValue::Int32(i), Some(f64::from(i)))
        }
        (_, ParamKind::Enum(_), _) => {
            let pos = menu_position(p.def, v).clamp(0, u16::MAX as i64) as u16;
            let label = p
                .def
                .choices(p.readback)
                .and_then(|c| c.get(pos as usize))
                .map(|s| s.to_string())
                .unwrap_or_else(|| pos.to_string());
            Sample {
                native: AttrValue::UInt16(pos),
                num: Some(f64::from(pos)),
                text: label,
            }
        }
        (_, ParamKind::Array(dt), ParamValue::Array(a)) => {
            let first = ndflow_core::with_pixel_type!(dt, T => {
                a.bytes()
                    .get(..std::mem::size_of::<T>())
                    .map(|b| ndflow_core::Pixel::to_f64(bytemuck::pod_read_unaligned::<T>(b)))
            });
            Sample::numeric(
                first.map_or(AttrValue::Undefined, AttrValue::Float64),
                first,
            )
        }
        _ => {
            let d = v.as_f64();
            Sample::numeric(d.map_or(AttrValue::Undefined, AttrValue::Float64), d)
        }
    }
}

/// A pvAccess update: the `value` of an NTScalar (its own type; an array's first element) or
/// of an NTEnum (`index`, with `choices[index]` as its text).
fn pva_sample(desc: &FieldDesc, top: &Value) -> Sample {
    let Some(v) = top.field(desc, "value") else {
        return Sample::numeric(AttrValue::Undefined, None);
    };
    if let Value::Structure(_) = v {
        let index = top.field(desc, "value.index").and_then(Value::as_f64);
        let label = match (top.field(desc, "value.choices"), index) {
            (Some(Value::StringArray(c)), Some(i)) => c.get(i as usize).cloned(),
            _ => None,
        };
        let mut s = Sample::numeric(
            index.map_or(AttrValue::Undefined, |i| AttrValue::Int32(i as i32)),
            index,
        );
        if let Some(l) = label {
            s.text = l;
        }
        return s;
    }
    let native = match v {
        Value::Bool(b) => AttrValue::UInt8(u8::from(*b)),
        Value::I8(x) => AttrValue::Int8(*x),
        Value::I16(x) => AttrValue::Int16(*x),
        Value::I32(x) => AttrValue::Int32(*x),
        Value::I64(x) => AttrValue::Int64(*x),
        Value::U8(x) => AttrValue::UInt8(*x),
        Value::U16(x) => AttrValue::UInt16(*x),
        Value::U32(x) => AttrValue::UInt32(*x),
        Value::U64(x) => AttrValue::UInt64(*x),
        Value::F32(x) => AttrValue::Float32(*x),
        Value::F64(x) => AttrValue::Float64(*x),
        Value::String(s) => return Sample::string(s.clone()),
        Value::StringArray(x) => return Sample::string(x.first().cloned().unwrap_or_default()),
        Value::Array(a) => {
            let first = pva_first(a);
            return Sample::numeric(
                first.map_or(AttrValue::Undefined, AttrValue::Float64),
                first,
            );
        }
        _ => AttrValue::Undefined,
    };
    let num = v.as_f64();
    Sample::numeric(native, num)
}

/// The first element of a numeric array of any element type.
fn pva_first(a: &NumArray) -> Option<f64> {
    let b = a.bytes_in(ByteOrder::NATIVE);
    macro_rules! first {
        ($t:ty) => {
            b.get(..std::mem::size_of::<$t>())
                .map(|x| bytemuck::pod_read_unaligned::<$t>(x) as f64)
        };
    }
    match a.scalar_type() {
        ScalarType::Bool | ScalarType::U8 => first!(u8),
        ScalarType::I8 => first!(i8),
        ScalarType::I16 => first!(i16),
        ScalarType::U16 => first!(u16),
        ScalarType::I32 => first!(i32),
        ScalarType::U32 => first!(u32),
        ScalarType::I64 => first!(i64),
        ScalarType::U64 => first!(u64),
        ScalarType::F32 => first!(f32),
        ScalarType::F64 => first!(f64),
        ScalarType::String => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static DEFS: &[ParamDef] = &[
        ParamDef::float64("Time", 0.5),
        ParamDef::int32("Count", 7),
        ParamDef::enumeration("Mode", &["Off", "On", "Auto"], 2).readback_choices(&["o", "i", "a"]),
        ParamDef::string("Name", "short"),
        ParamDef::string("Path", "").long_string(),
    ];

    /// A reader that knows `T:` + each parameter's PV names of one store.
    fn reader_with(store: &Arc<ParamStore>) -> AttrPvReader {
        let mut map = HashMap::new();
        for (idx, def) in store.defs().iter().copied().enumerate() {
            for (suffix, face) in faces(def) {
                let pv = LocalPv {
                    store: Arc::clone(store),
                    idx,
                    def,
                    readback: face == Face::Readback,
                };
                map.insert(format!("T:{suffix}"), Arc::new(pv));
            }
        }
        let r = AttrPvReader::default();
        r.set_local(LocalPvs(map));
        r
    }

    fn read(r: &AttrPvReader, pv: &str, dbr: &str) -> AttrValue {
        match r.source(pv, dbr) {
            Ok(PvSource::Live(f)) => f(),
            Ok(PvSource::Cell(_)) => panic!("{pv} was not read in process"),
            Err(e) => panic!("{pv}: {e}"),
        }
    }

    #[test]
    fn own_pvs_convert_as_their_dbrtype_asks() {
        let store = Arc::new(ParamStore::new(&[DEFS]));
        let r = reader_with(&store);
        assert_eq!(read(&r, "T:Time", "DBR_NATIVE"), AttrValue::Float64(0.5));
        assert_eq!(read(&r, "T:Time_RBV", "DBR_LONG"), AttrValue::Int32(0));
        assert_eq!(
            read(&r, "T:Time", "DBR_STRING"),
            AttrValue::String("0.5".into())
        );
        assert_eq!(read(&r, "T:Count_RBV", ""), AttrValue::Int32(7));
        assert_eq!(read(&r, "T:Count", "DBR_DOUBLE"), AttrValue::Float64(7.0));
        // An enum: its menu index natively, its menu string for DBR_STRING — each face's menu.
        assert_eq!(read(&r, "T:Mode", "DBR_NATIVE"), AttrValue::UInt16(2));
        assert_eq!(read(&r, "T:Mode", "DBR_ENUM"), AttrValue::Int32(2));
        assert_eq!(
            read(&r, "T:Mode", "DBR_STRING"),
            AttrValue::String("Auto".into())
        );
        assert_eq!(
            read(&r, "T:Mode_RBV", "DBR_STRING"),
            AttrValue::String("a".into())
        );
        assert_eq!(
            read(&r, "T:Name_RBV", ""),
            AttrValue::String("short".into())
        );
        // A long string (a waveform of chars over CA) reads as its text.
        let long = "/data/a/path/longer/than/forty/characters/for/sure.h5";
        store.set_by_name("Path", long).unwrap();
        assert_eq!(
            read(&r, "T:Path", "DBR_STRING"),
            AttrValue::String(long.into())
        );
        // Read as each frame is stamped: always the current value.
        store.set_by_name("Time", 1.25).unwrap();
        assert_eq!(
            read(&r, "T:Time_RBV", "DBR_DOUBLE"),
            AttrValue::Float64(1.25)
        );
    }

    #[test]
    fn names_given_before_the_ports_exist_resolve_once_they_do() {
        let store = Arc::new(ParamStore::new(&[DEFS]));
        let early = AttrPvReader::default();
        let Ok(PvSource::Live(f)) = early.source("T:Count_RBV", "DBR_NATIVE") else {
            panic!("a name without a scheme waits for this IOC's names");
        };
        assert_eq!(f(), AttrValue::Undefined);
        let names = reader_with(&store).local.into_inner();
        early.set_local(names.unwrap_or(LocalPvs(HashMap::new())));
        assert_eq!(f(), AttrValue::Int32(7));
        // A name we do not serve becomes a (network) monitor; `ca://` always is one.
        assert!(matches!(
            early.source("OTHER:PV", ""),
            Ok(PvSource::Cell(_))
        ));
        assert!(matches!(
            early.source("ca://T:Count", ""),
            Ok(PvSource::Cell(_))
        ));
    }

    #[test]
    fn schemes_pick_the_protocol_and_bad_ones_name_the_source() {
        assert!(matches!(route("pva://X:Y"), Ok(Route::Pva("X:Y"))));
        assert!(matches!(route("PVA://X"), Ok(Route::Pva("X"))));
        assert!(matches!(route("ca://X"), Ok(Route::Ca("X"))));
        assert!(matches!(route("X:Y"), Ok(Route::Any("X:Y"))));
        let e = route("http://X").err().unwrap_or_default();
        assert!(
            e.contains("http://X") && e.contains("unknown scheme"),
            "{e}"
        );
        let e = route("pva://").err().unwrap_or_default();
        assert!(e.contains("names no PV"), "{e}");
    }
}
