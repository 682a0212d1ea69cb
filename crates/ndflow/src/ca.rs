//! Channel Access in the IOC: every entry of the [`PvDirectory`] as a CA channel with the
//! native type its areaDetector record has — ao/ai → DBR_DOUBLE, longout/longin → DBR_LONG,
//! bo/bi/mbbo/mbbi/busy → DBR_ENUM with the menu strings, stringout/stringin → DBR_STRING,
//! long strings (FilePath, FileName, FullFileName_RBV, …) → a char waveform holding the
//! NUL-terminated text, arrays → a waveform of the element type (UInt16 frames as DBR_SHORT,
//! as ADCore's NDStdArrays template serves them; 64-bit values as DBR_DOUBLE).
//!
//! Like [`crate::pva`], this is only a view: names, access, put validation, completion (busy
//! records answer WRITE_NOTIFY when the operation has ended) and alarms (`.SEVR`, `.STAT`,
//! DBR_STS and up) are the directory's. The protocol
//! itself is the `ndflow-ca` crate.

use std::sync::Arc;

use ndflow_ca::{
    Access, AlarmLimits, CaPv, CaValue, NativeType, PvMeta, PvProvider, Server, ServerConfig,
};
use ndflow_core::{AlarmRule, DataType, ParamDef, ParamKind, ParamValue, RecordHint};
use ndflow_net::Listen;

use crate::access::Rights;
use crate::pvdir::{ClientInfo, PvDirectory, RecordType};

/// Elements of a char waveform holding a string (ADCore's templates use 256 for paths).
const LONG_STRING_NELM: usize = 256;

/// The running Channel Access side of an IOC. Dropping it stops the server.
pub struct CaService {
    server: Option<Server>,
    provider: Arc<CaProvider>,
}

impl CaService {
    /// Serves every entry of `dir` with the server configured from the EPICS_CA*/EPICS_CAS*
    /// variables (and `listen`, when given, over them).
    pub fn start(dir: &Arc<PvDirectory>, listen: Option<&Listen>) -> Result<CaService, String> {
        let provider = CaProvider::new(dir);
        let mut cfg =
            ServerConfig::from_env().map_err(|e| format!("Channel Access configuration: {e}"))?;
        if let Some(l) = listen {
            cfg.listen = l.clone();
        }
        let server = Server::start(cfg, provider.clone())
            .map_err(|e| format!("cannot start the Channel Access server: {e}"))?;
        Ok(CaService {
            server: Some(server),
            provider,
        })
    }

    /// The running server (its counters).
    pub fn server(&self) -> Option<&Server> {
        self.server.as_ref()
    }

    /// "Channel Access: N PVs on tcp 127.0.0.1:5064, udp 127.0.0.1:5064".
    pub fn describe(&self) -> String {
        match &self.server {
            Some(s) => format!(
                "Channel Access: {} PVs on tcp {}, udp {}",
                self.provider.pvs.len(),
                s.tcp_addr(),
                s.udp_addr()
            ),
            None => "Channel Access: off".into(),
        }
    }
}

impl CaService {
    /// "Channel Access 812 PVs tcp 127.0.0.1:5064 udp 5064" for the banner.
    pub fn where_text(&self) -> String {
        match &self.server {
            Some(s) => format!(
                "Channel Access {} PVs tcp {}{} udp {}",
                self.provider.pvs.len(),
                s.tcp_addr(),
                crate::serve::taken_text(s.tcp_port_taken()),
                s.udp_addr().port()
            ),
            None => "Channel Access off".into(),
        }
    }

    /// Whom the server serves.
    pub fn listen(&self) -> Listen {
        self.server
            .as_ref()
            .map(|s| s.listen().clone())
            .unwrap_or_default()
    }
}

impl Drop for CaService {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.stop();
        }
    }
}

/// One [`CaPv`] per directory entry.
pub struct CaProvider {
    dir: Arc<PvDirectory>,
    pvs: Vec<CaPv>,
    /// Per slot: the native type of its channels.
    natives: Vec<NativeType>,
    /// `NAME.PROC`, `NAME.SCAN`, … as clients ask for them.
    fields: crate::ca_fields::CaFieldPvs,
}

impl CaProvider {
    pub fn new(dir: &Arc<PvDirectory>) -> Arc<CaProvider> {
        let array_nelm = largest_frame_elements(dir);
        let natives: Vec<NativeType> = dir
            .slots()
            .iter()
            .map(|s| match s.def.kind {
                // A waveform keeps one type for life: the port's ArrayDataType when the config
                // fixed it (StdArrays), as for pvAccess.
                ParamKind::Array(declared) => {
                    array_type(fixed_array_type(&s.store).unwrap_or(declared))
                }
                _ => native_type(s.def),
            })
            .collect();
        let mut pvs = Vec::with_capacity(dir.len());
        for (id, e) in dir.entries().iter().enumerate() {
            let (Some(s), Some(&native)) = (dir.slot(e.slot), natives.get(e.slot)) else {
                continue;
            };
            let value = s.value();
            let mut meta = meta(
                s.def,
                e.record,
                native,
                dir.is_writable(id),
                &value,
                array_nelm,
            );
            if let Some(c) = s.def.choices(e.face == crate::pvdir::Face::Readback) {
                meta.enum_strings = c.iter().map(|s| s.to_string()).collect();
            }
            meta.alarm_limits = alarm_limits(s);
            if let Some(h) = s.high_limit() {
                (meta.display_high, meta.control_high) = (h, h);
            }
            let mut pv = CaPv::new(meta, to_ca(s.def, native, &value));
            let alarm = dir.alarm(id, &value);
            if alarm != ndflow_core::Alarm::NONE {
                pv.set_alarm(alarm.status as u16, alarm.severity as u16);
            }
            if dir.is_writable(id) {
                let (weak, def) = (Arc::downgrade(dir), s.def);
                pv = pv.with_put_handler(move |_pv, value, completion| {
                    let Some(dir) = weak.upgrade() else {
                        return completion.fail("the IOC is shutting down".into());
                    };
                    // The server checked the channel's access rights already; the client
                    // is named for the put log (the rules give it the same answer again).
                    let wait = completion.is_notify();
                    let who = completion.client().map(|(host, user)| ClientInfo {
                        host: host.to_string(),
                        user: user.to_string(),
                        protocol: "ca",
                    });
                    dir.put(
                        id,
                        from_ca(def, value),
                        who.as_ref(),
                        wait,
                        Box::new(move |r| match r {
                            Ok(()) => completion.done(),
                            Err(m) => completion.fail(m),
                        }),
                    );
                });
            }
            pvs.push(pv);
        }
        let provider = Arc::new(CaProvider {
            dir: dir.clone(),
            pvs,
            natives,
            fields: Default::default(),
        });
        let weak = Arc::downgrade(&provider);
        dir.add_sink(Arc::new(move |slot, v| {
            if let Some(p) = weak.upgrade() {
                p.post(slot, v);
            }
        }));
        provider
    }

    fn post(&self, slot: usize, v: &ParamValue) {
        let (Some(s), Some(&native)) = (self.dir.slot(slot), self.natives.get(slot)) else {
            return;
        };
        let value = to_ca(s.def, native, v);
        // Level limits follow another parameter (QueueFree's LOW is a quarter of QueueSize).
        let limits = matches!(s.def.alarm, AlarmRule::Levels(_)).then(|| alarm_limits(s));
        // The high limit may follow another parameter (ROI's MinX spans the input size).
        let high = s.high_limit();
        for &e in &s.entries {
            if !self.dir.shows(e) {
                continue;
            }
            if let Some(pv) = self.pvs.get(e) {
                let old = pv.meta();
                let new_levels = limits.filter(|l| *l != old.alarm_limits);
                let new_high = high.filter(|h| *h != old.display_high || *h != old.control_high);
                if new_levels.is_some() || new_high.is_some() {
                    let mut meta = PvMeta::clone(&old);
                    if let Some(l) = new_levels {
                        meta.alarm_limits = l;
                    }
                    if let Some(h) = new_high {
                        (meta.display_high, meta.control_high) = (h, h);
                    }
                    pv.set_meta(meta);
                }
                let alarm = self.dir.alarm(e, v);
                pv.post_with_alarm(value.clone(), alarm.status as u16, alarm.severity as u16);
            }
        }
    }
}

impl PvProvider for CaProvider {
    fn lookup(&self, name: &str) -> Option<CaPv> {
        match self.dir.find(name) {
            Some(id) => self.pvs.get(id).cloned(),
            None => self.fields.lookup(&self.dir, name),
        }
    }

    fn access(&self, pv: &str, host: &str, user: &str) -> Access {
        let client = ClientInfo {
            host: host.to_string(),
            user: user.to_string(),
            protocol: "ca",
        };
        match self.dir.rights(pv, &client) {
            Rights::None => Access::None,
            Rights::Read => Access::Read,
            Rights::Write => Access::ReadWrite,
        }
    }
}

/// The level alarm limits of a parameter's records now (0 where none is declared).
fn alarm_limits(s: &crate::pvdir::ParamSlot) -> AlarmLimits {
    let Some(l) = s.level_limits() else {
        return AlarmLimits::default();
    };
    let [hihi, high, low, lolo] = l.map(|x| x.unwrap_or(0.0));
    AlarmLimits {
        hihi,
        high,
        low,
        lolo,
    }
}

/// The CA type of a parameter's channels.
pub fn native_type(def: &ParamDef) -> NativeType {
    match (def.record, def.kind) {
        (RecordHint::LongString, _) => NativeType::Char,
        (_, ParamKind::Int32) => NativeType::Long,
        (_, ParamKind::Int64 | ParamKind::Float64) => NativeType::Double,
        (_, ParamKind::Enum(_)) => NativeType::Enum,
        (_, ParamKind::String) => NativeType::String,
        (_, ParamKind::Array(dt)) => array_type(dt),
    }
}

/// The port's `ArrayDataType` when it is not Automatic.
fn fixed_array_type(store: &ndflow_core::ParamStore) -> Option<DataType> {
    store
        .index("ArrayDataType")
        .map(|i| store.get_i64(i))
        .and_then(DataType::from_index) // "Automatic" (10) is none
}

/// The waveform type of an element type (FTVL as ADCore's templates choose it).
fn array_type(dt: DataType) -> NativeType {
    match dt {
        DataType::Int8 | DataType::UInt8 => NativeType::Char,
        DataType::Int16 | DataType::UInt16 => NativeType::Short,
        DataType::Int32 | DataType::UInt32 => NativeType::Long,
        DataType::Float32 => NativeType::Float,
        DataType::Int64 | DataType::UInt64 | DataType::Float64 => NativeType::Double,
    }
}

/// Element count advertised for array channels: a full frame of the largest driver (NELM of
/// ADCore's image waveform is MaxSizeX × MaxSizeY in the usual start-up scripts).
fn largest_frame_elements(dir: &PvDirectory) -> usize {
    let mut best = 1usize;
    for s in dir.slots() {
        if s.def.name == "MaxSizeX" {
            let x = s.store.get_i64(s.idx).max(0) as usize;
            let y = s
                .store
                .index("MaxSizeY")
                .map_or(1, |i| s.store.get_i64(i).max(0) as usize);
            best = best.max(x.saturating_mul(y));
        }
    }
    best
}

fn meta(
    def: &ParamDef,
    record: RecordType,
    native: NativeType,
    writable: bool,
    value: &ParamValue,
    array_nelm: usize,
) -> PvMeta {
    let (lo, hi) = (def.min.unwrap_or(0.0), def.max.unwrap_or(0.0));
    let max_count = match (native, def.kind) {
        (NativeType::Char, ParamKind::String) => {
            let len = match value {
                ParamValue::Str(s) => s.len() + 1,
                _ => 0,
            };
            LONG_STRING_NELM.max(len)
        }
        (_, ParamKind::Array(_)) => {
            let len = match value {
                ParamValue::Array(a) => a.len(),
                _ => 0,
            };
            array_nelm.max(len).max(1)
        }
        _ => 1,
    };
    PvMeta {
        native,
        max_count,
        units: String::new(),
        precision: if native == NativeType::Double { 3 } else { 0 },
        display_low: lo,
        display_high: hi,
        control_low: lo,
        control_high: hi,
        alarm_limits: AlarmLimits::default(),
        enum_strings: match def.kind {
            ParamKind::Enum(c) => c.iter().map(|s| s.to_string()).collect(),
            _ => Vec::new(),
        },
        description: def.desc.chars().take(40).collect(),
        record_type: record.name().to_string(),
        writable,
    }
}

/// A parameter value as the channel's native value.
pub fn to_ca(def: &ParamDef, native: NativeType, v: &ParamValue) -> CaValue {
    let text = || match v {
        ParamValue::Str(s) => s.clone(),
        ParamValue::Array(_) => String::new(),
        other => other.to_string(),
    };
    match native {
        NativeType::String => CaValue::String(text()),
        NativeType::Enum => {
            CaValue::Enum(crate::pvdir::menu_position(def, v).clamp(0, u16::MAX as i64) as u16)
        }
        NativeType::Double if !matches!(def.kind, ParamKind::Array(_)) => {
            CaValue::Double(vec![v.as_f64().unwrap_or(0.0)])
        }
        NativeType::Long if !matches!(def.kind, ParamKind::Array(_)) => CaValue::Long(vec![v
            .as_i64()
            .unwrap_or(0)
            .clamp(i32::MIN as i64, i32::MAX as i64)
            as i32]),
        NativeType::Char if matches!(def.kind, ParamKind::String) => {
            let mut b = text().into_bytes();
            b.push(0);
            CaValue::Char(b)
        }
        _ => match v {
            ParamValue::Array(a) => array_to_ca(native, a),
            _ => CaValue::Double(vec![v.as_f64().unwrap_or(0.0)]),
        },
    }
}

/// An array value in the channel's element type: the parameter's buffer itself when the bytes
/// already are that type (no copy), else converted.
fn array_to_ca(native: NativeType, a: &ndflow_core::ArrayValue) -> CaValue {
    if array_type(a.data_type) == native && a.data_type.size() == native_size(native) {
        return CaValue::Shared {
            ty: native,
            bytes: Arc::new(ArrayBytes(a.buffer.clone(), a.len() * a.data_type.size())),
        };
    }
    let mut f = vec![0f64; a.len()];
    ndflow_core::with_pixel_type!(a.data_type, T => {
        let size = std::mem::size_of::<T>();
        for (d, b) in f.iter_mut().zip(a.bytes().chunks_exact(size)) {
            *d = ndflow_core::Pixel::to_f64(bytemuck::pod_read_unaligned::<T>(b));
        }
    });
    match native {
        NativeType::Char => CaValue::Char(f.iter().map(|&x| x as i64 as u8).collect()),
        NativeType::Short => CaValue::Short(f.iter().map(|&x| x as i64 as i16).collect()),
        NativeType::Long => CaValue::Long(f.iter().map(|&x| x as i64 as i32).collect()),
        NativeType::Float => CaValue::Float(f.iter().map(|&x| x as f32).collect()),
        _ => CaValue::Double(f),
    }
}

fn native_size(t: NativeType) -> usize {
    match t {
        NativeType::Char => 1,
        NativeType::Short | NativeType::Enum => 2,
        NativeType::Long | NativeType::Float => 4,
        NativeType::Double => 8,
        NativeType::String => 40,
    }
}

/// A put's native value as a parameter value (then validated by the graph).
pub fn from_ca(def: &ParamDef, v: CaValue) -> ParamValue {
    match v {
        CaValue::String(s) => ParamValue::Str(s),
        CaValue::Enum(i) => ParamValue::Int(i as i64),
        CaValue::Char(b) => {
            let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
            let s = String::from_utf8_lossy(&b[..end]).into_owned();
            match def.kind {
                ParamKind::String | ParamKind::Enum(_) => ParamValue::Str(s),
                _ => b
                    .first()
                    .map_or(ParamValue::Int(0), |&c| ParamValue::Int(c as i64)),
            }
        }
        CaValue::Short(x) => ParamValue::Int(x.first().copied().unwrap_or(0) as i64),
        CaValue::Long(x) => ParamValue::Int(x.first().copied().unwrap_or(0) as i64),
        CaValue::Float(x) => ParamValue::Float(x.first().copied().unwrap_or(0.0) as f64),
        CaValue::Double(x) => ParamValue::Float(x.first().copied().unwrap_or(0.0)),
        CaValue::Shared { .. } => ParamValue::Str(String::new()),
    }
}

/// A parameter's array buffer lent to the server (the waveform is never copied on post).
struct ArrayBytes(ndflow_core::Buffer, usize);

impl AsRef<[u8]> for ArrayBytes {
    fn as_ref(&self) -> &[u8] {
        &self.0[..self.1.min(self.0.len())]
    }
}
