//! Every parameter of every port as a pvAccess PV: `{prefix}{port prefix}{Name}` (writable) and
//! `{Name}_RBV` (readback), as areaDetector's records name them ([`ParamDef::pv_names`]).
//!
//! Numbers and strings are NTScalar (value, alarm, timeStamp, display, control), enums NTEnum
//! with areaDetector's choice strings, arrays NTScalarArray (sharing the parameter's buffer).
//! A PUT goes through [`Graph::put`], so it is validated exactly like a config key and a refusal
//! reaches the client as an error status naming the value and the reason.
//!
//! Monitors are fed at a bounded rate: a store change only marks its PV dirty; one poster thread
//! publishes the latest value of each dirty parameter at most every [`POST_INTERVAL`]. A plugin
//! that rewrites its results 10,000 times a second therefore costs clients 100 updates a
//! second, and the frame path never waits for the network.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ndflow_core::{ParamDef, ParamKind, ParamStore, ParamValue};
use ndflow_pva::server::{ChannelProvider, SharedPv};
use ndflow_pva::{BitSet, ByteOrder, FieldDesc, NumArray, ScalarType, SharedBytes, Value};
use ndflow_runtime::Graph;
use parking_lot::{Condvar, Mutex, RwLock};

use super::convert::scalar_type;

/// Shortest time between two monitor posts of one parameter.
pub const POST_INTERVAL: Duration = Duration::from_millis(10);

/// The IOC's PVs by name: parameters and the image PVs of `pva` ports.
#[derive(Default)]
pub struct PvDirectory {
    pvs: RwLock<HashMap<String, SharedPv>>,
}

impl PvDirectory {
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

impl ChannelProvider for PvDirectory {
    fn lookup(&self, name: &str) -> Option<SharedPv> {
        self.pvs.read().get(name).cloned()
    }
}

/// The PVs of one parameter: the writable one (if any) and the readback.
struct ParamPvs {
    desc: FieldDesc,
    def: &'static ParamDef,
    pvs: Vec<SharedPv>,
    dirty: AtomicBool,
}

struct PortPvs {
    store: Arc<ParamStore>,
    params: Vec<ParamPvs>,
}

#[derive(Default)]
struct Pending {
    /// (port, parameter index) marked dirty since the last post.
    queue: Vec<(usize, usize)>,
    stop: bool,
}

/// Publishes parameter changes to their PVs at a bounded rate. Dropping it stops the thread.
pub struct ParamPublisher {
    shared: Arc<(Mutex<Pending>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for ParamPublisher {
    fn drop(&mut self) {
        self.shared.0.lock().stop = true;
        self.shared.1.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Creates the PVs of every port of `graph` under `prefix` + the port's prefix, adds them to
/// `dir` and starts the publisher.
pub fn serve_params(
    graph: &Arc<Graph>,
    prefix: &str,
    port_prefixes: &HashMap<String, String>,
    dir: &PvDirectory,
) -> Result<ParamPublisher, String> {
    let shared: Arc<(Mutex<Pending>, Condvar)> = Arc::default();
    let mut ports = Vec::new();
    for handle in graph.ports() {
        let port = handle.name().to_string();
        let full = format!(
            "{prefix}{}",
            port_prefixes.get(&port).map_or("", String::as_str)
        );
        let store = handle.params().clone();
        let mut params = Vec::new();
        for (idx, def) in store.defs().iter().copied().enumerate() {
            let desc = match def.kind {
                ParamKind::Array(declared) => array_desc(&store, declared),
                _ => pv_desc(def),
            };
            let initial = store.get(idx).unwrap_or_else(|| def.default_value());
            let mut pvs = Vec::new();
            for suffix in def.pv_names() {
                let mut pv = SharedPv::new(desc.clone(), to_value(def, &desc, &initial));
                if def.writable() && suffix == def.name {
                    let graph = Arc::downgrade(graph);
                    let (port, name) = (port.clone(), def.name);
                    pv = pv.with_put_handler(move |_pv, value, _changed| {
                        let graph = graph.upgrade().ok_or("the IOC is shutting down")?;
                        let v = from_value(def, value)?;
                        graph
                            .put(&port, name, v)
                            .map(|_| ())
                            .map_err(|e| e.to_string())
                    });
                }
                dir.add(format!("{full}{suffix}"), pv.clone())?;
                pvs.push(pv);
            }
            params.push(ParamPvs {
                desc,
                def,
                pvs,
                dirty: AtomicBool::new(false),
            });
        }
        ports.push(PortPvs { store, params });
    }
    let ports = Arc::new(ports);
    for (port_i, p) in ports.iter().enumerate() {
        let (ports2, shared2) = (Arc::downgrade(&ports), shared.clone());
        p.store.subscribe(move |idx, _v| {
            let Some(ports) = ports2.upgrade() else {
                return;
            };
            let Some(pp) = ports.get(port_i).and_then(|p| p.params.get(idx)) else {
                return;
            };
            // Only the first change since the last post queues work; later ones ride along.
            if !pp.dirty.swap(true, Ordering::AcqRel) {
                shared2.0.lock().queue.push((port_i, idx));
                shared2.1.notify_one();
            }
        });
    }
    let shared2 = shared.clone();
    let thread = std::thread::Builder::new()
        .name("ndflow-pv-publisher".into())
        .spawn(move || publish_loop(&ports, &shared2))
        .map_err(|e| format!("cannot start the PV publisher thread: {e}"))?;
    Ok(ParamPublisher {
        shared,
        thread: Some(thread),
    })
}

fn publish_loop(ports: &[PortPvs], shared: &(Mutex<Pending>, Condvar)) {
    let mut batch = Vec::new();
    loop {
        {
            let mut g = shared.0.lock();
            while g.queue.is_empty() && !g.stop {
                shared.1.wait(&mut g);
            }
            if g.stop {
                return;
            }
            std::mem::swap(&mut batch, &mut g.queue);
        }
        for &(port_i, idx) in &batch {
            let Some(port) = ports.get(port_i) else {
                continue;
            };
            let Some(pp) = port.params.get(idx) else {
                continue;
            };
            pp.dirty.store(false, Ordering::Release);
            let Some(v) = port.store.get(idx) else {
                continue;
            };
            let value = to_value(pp.def, &pp.desc, &v);
            let changed = BitSet::from_bits(&changed_bits(&pp.desc));
            for pv in &pp.pvs {
                // Latest-wins for control PVs: a slow client sees the newest value.
                let _ = pv.post(value.clone(), &changed);
            }
        }
        batch.clear();
        std::thread::sleep(POST_INTERVAL);
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
        .filter(|&i| i > 0) // 0 = Automatic
        .and_then(|i| ndflow_core::DataType::from_index(i - 1))
        .unwrap_or(declared);
    ndflow_pva::nt::scalar_array::desc(scalar_type(chosen))
}

/// The normative type of a parameter's PV.
pub fn pv_desc(def: &ParamDef) -> FieldDesc {
    use ndflow_pva::nt;
    match def.kind {
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
                Value::I32(p.as_i64().unwrap_or(0) as i32),
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
