//! Record fields over pvAccess: `NAME.FIELD` as its own PV, as QSRV serves a field of a
//! record (`pvget 13SIM1:cam1:Acquire.PROC`). The fields with a state of their own
//! (`PROC SCAN DISA DISV UDF TSE`, [`crate::record_fields`]) are writable where EPICS' are; the
//! others are read from the parameter's declaration, value and alarm when the PV is asked for:
//! `DESC EGU NAME RTYP PREC HOPR LOPR DRVH DRVL HIHI HIGH LOW LOLO SEVR STAT NELM NORD`; an
//! asyn record's (`AsynIO.CNCT` …, [`crate::asyn_fields`]) too.
//! PVs are made on first use and kept.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use ndflow_ca::server::{SEVERITY_STRINGS, STATUS_STRINGS};
use ndflow_core::{ParamKind, ParamValue};
use ndflow_pva::server::SharedPv;
use ndflow_pva::{nt, BitSet, FieldDesc, ScalarType, Value};
use parking_lot::Mutex;

use crate::pvdir::{PvDirectory, RecordType};
use crate::record_fields::{FieldKind, RecordField};

/// Fields derived from the declaration and value.
const DERIVED: [&str; 17] = [
    "DESC", "EGU", "NAME", "RTYP", "PREC", "HOPR", "LOPR", "DRVH", "DRVL", "HIHI", "HIGH", "LOW",
    "LOLO", "SEVR", "STAT", "NELM", "NORD",
];

/// The field PVs made so far, by full name.
#[derive(Default)]
pub struct FieldPvs {
    made: Arc<Mutex<HashMap<String, SharedPv>>>,
}

impl FieldPvs {
    /// `NAME.FIELD` when NAME is a PV of `dir` and FIELD a field we serve; its value is
    /// brought up to date on each lookup (a new channel).
    pub fn lookup(&self, dir: &Arc<PvDirectory>, name: &str) -> Option<SharedPv> {
        let (rec, field) = name.rsplit_once('.')?;
        let entry = dir.find(rec)?;
        let own = RecordField::parse(field).filter(|f| dir.has_field(entry, *f));
        if own.is_none() && !DERIVED.contains(&field) {
            return None;
        }
        let (desc, value) = match own {
            Some(f) => own_value(dir, entry, f),
            None => derived_value(dir, entry, rec, field)?,
        };
        let mut made = self.made.lock();
        if let Some(pv) = made.get(name) {
            if pv.current() != value {
                let _ = pv.post(value, &BitSet::new());
            }
            return Some(pv.clone());
        }
        let mut pv = SharedPv::new(desc.clone(), value);
        if let Some(f) = own.filter(|f| f.writable()) {
            let made = Arc::downgrade(&self.made);
            pv = writable(pv, dir, entry, f, desc, format!("{rec}."), made);
        }
        made.insert(name.to_string(), pv.clone());
        Some(pv)
    }
}

fn own_value(dir: &PvDirectory, entry: usize, f: RecordField) -> (FieldDesc, Value) {
    let v = dir.field(entry, f);
    match f.kind() {
        FieldKind::Text => scalar(ScalarType::String, Value::String(dir.field_text(entry, f))),
        FieldKind::Menu(m) => (nt::enumeration::desc(), nt::enumeration::value(v as i32, m)),
        FieldKind::UChar => scalar(ScalarType::U8, Value::U8(v.clamp(0, 255) as u8)),
        FieldKind::Short => scalar(
            ScalarType::I16,
            Value::I16(v.clamp(i16::MIN as i64, i16::MAX as i64) as i16),
        ),
        FieldKind::Long => scalar(
            ScalarType::I32,
            Value::I32(v.clamp(i32::MIN as i64, i32::MAX as i64) as i32),
        ),
    }
}

fn scalar(t: ScalarType, v: Value) -> (FieldDesc, Value) {
    (nt::scalar::desc(t), nt::scalar::value(t, v))
}

fn derived_value(
    dir: &PvDirectory,
    entry: usize,
    rec: &str,
    field: &str,
) -> Option<(FieldDesc, Value)> {
    let e = dir.entry(entry)?;
    let s = dir.slot(e.slot)?;
    let value = s.value();
    let text = |x: &str| scalar(ScalarType::String, Value::String(x.to_string()));
    let num = |x: f64| scalar(ScalarType::F64, Value::F64(x));
    let count = match (&s.def.kind, &value) {
        (ParamKind::Array(_), ParamValue::Array(a)) => a.len(),
        _ => 1,
    };
    let levels = s.level_limits().unwrap_or([None; 4]);
    let alarm = dir.alarm(entry, &value);
    Some(match field {
        "DESC" => text(&s.def.desc.chars().take(40).collect::<String>()),
        "EGU" => text(""),
        "NAME" => text(rec),
        "RTYP" => text(e.record.name()),
        "PREC" => {
            // As the Channel Access view: 3 digits for the records served as doubles.
            let double = matches!(s.def.kind, ParamKind::Int64 | ParamKind::Float64)
                && !matches!(e.record, RecordType::Waveform);
            scalar(ScalarType::I16, Value::I16(if double { 3 } else { 0 }))
        }
        "HOPR" | "DRVH" => num(s.high_limit().or(s.def.max).unwrap_or(0.0)),
        "LOPR" | "DRVL" => num(s.def.min.unwrap_or(0.0)),
        "HIHI" => num(levels[0].unwrap_or(0.0)),
        "HIGH" => num(levels[1].unwrap_or(0.0)),
        "LOW" => num(levels[2].unwrap_or(0.0)),
        "LOLO" => num(levels[3].unwrap_or(0.0)),
        "SEVR" => (
            nt::enumeration::desc(),
            nt::enumeration::value(alarm.severity as i32, &SEVERITY_STRINGS),
        ),
        "STAT" => (
            nt::enumeration::desc(),
            nt::enumeration::value(alarm.status as i32, &STATUS_STRINGS),
        ),
        "NELM" | "NORD" => scalar(ScalarType::I32, Value::I32(count as i32)),
        _ => return None,
    })
}

/// A writable field PV: a PUT goes to the directory (access, the put log, what it does).
fn writable(
    pv: SharedPv,
    dir: &Arc<PvDirectory>,
    entry: usize,
    f: RecordField,
    desc: FieldDesc,
    prefix: String,
    made: Weak<Mutex<HashMap<String, SharedPv>>>,
) -> SharedPv {
    let weak: Weak<PvDirectory> = Arc::downgrade(dir);
    pv.with_deferred_put_handler(move |pv, value, _changed, client, reply| {
        let Some(dir) = weak.upgrade() else {
            return reply.done(Err("the IOC is shutting down".into()));
        };
        let who = super::param_pvs::client_info(client);
        let wait = reply.wants_completion();
        let (pv, dir2) = (pv.clone(), Arc::downgrade(&dir));
        let (made, prefix) = (made.clone(), prefix.clone());
        let done: crate::pvdir::PutDone = Box::new(move |r| {
            if let Some(d) = dir2.upgrade() {
                let _ = pv.post(own_value(&d, entry, f).1, &BitSet::new());
                // An asyn trace bit and its mask are views of one value.
                if let (RecordField::Asyn(_), Some(made)) = (f, made.upgrade()) {
                    for (name, other) in made.lock().iter() {
                        let g = name.strip_prefix(&prefix).and_then(RecordField::parse);
                        if let Some(g @ RecordField::Asyn(_)) = g {
                            let _ = other.post(own_value(&d, entry, g).1, &BitSet::new());
                        }
                    }
                }
            }
            reply.done(r)
        });
        if f.kind() == FieldKind::Text {
            return match value.field(&desc, "value") {
                Some(Value::String(text)) => dir.put_field_text(entry, f, text, Some(&who), done),
                _ => done(Err(format!("PUT to .{} needs a string", f.name()))),
            };
        }
        match put_number(&desc, value, f) {
            Ok(v) => dir.put_field(entry, f, v, Some(&who), wait, done),
            Err(m) => done(Err(m)),
        }
    })
}

/// The number a PUT carries: `value` (or an enum's `value.index`; a SCAN choice by name).
fn put_number(desc: &FieldDesc, v: &Value, f: RecordField) -> Result<i64, String> {
    let bad = || format!("PUT to .{} carries no usable value", f.name());
    let x = v
        .field(desc, "value.index")
        .or_else(|| v.field(desc, "value"))
        .ok_or_else(bad)?;
    if let Value::String(s) = x {
        let choice = match f.kind() {
            FieldKind::Menu(m) => m.iter().position(|c| *c == s.trim()),
            _ => None,
        };
        return match choice {
            Some(i) => Ok(i as i64),
            None => s.trim().parse().map_err(|_| bad()),
        };
    }
    x.as_f64().map(|x| x as i64).ok_or_else(bad)
}
