//! Channel Access channels of the record fields with a state of their own (`NAME.PROC`,
//! `.SCAN`, `.DISA`, `.DISV`, `.UDF`, `.TSE`; [`crate::record_fields`]). Made when a client
//! first asks for one and kept, so a directory of thousands of records does not carry six
//! idle channels each. The fields derived from the declaration (`.DESC`, `.HOPR`, …) are the
//! `ndflow-ca` crate's.
//!
//! A text field also answers as `NAME.FIELD$`, EPICS' long-string form: a `DBR_CHAR` array
//! holding the text and a NUL, so that a link naming a PV of more than 39 characters can be
//! read and written over Channel Access (`caput -S NAME.DOL$ …`), as an IOC allows.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use ndflow_ca::{CaPv, CaValue, NativeType, PvMeta};
use parking_lot::Mutex;

use crate::pvdir::{ClientInfo, PvDirectory};
use crate::record_fields::{FieldKind, RecordField};

/// The field channels made so far, by full name.
#[derive(Default)]
pub struct CaFieldPvs {
    made: Arc<Mutex<HashMap<String, CaPv>>>,
}

impl CaFieldPvs {
    /// The channel `NAME.FIELD` (or `NAME.FIELD$` for a text field) when NAME is a PV of
    /// `dir` and FIELD one of ours.
    pub fn lookup(&self, dir: &Arc<PvDirectory>, name: &str) -> Option<CaPv> {
        let (rec, field) = name.rsplit_once('.')?;
        let (field, long) = match field.strip_suffix('$') {
            Some(f) => (f, true),
            None => (field, false),
        };
        let f = RecordField::parse(field)?;
        let form = match (long, f.kind()) {
            (false, _) => Form::Plain,
            (true, FieldKind::Text) => Form::Long(long_size(f)),
            (true, _) => return None,
        };
        let entry = dir.find(rec)?;
        if !dir.has_field(entry, f) {
            return None;
        }
        let mut made = self.made.lock();
        if let Some(pv) = made.get(name) {
            // Written meanwhile over pvAccess: show the value now.
            let now = value(dir, entry, f, form);
            if pv.get().0 != now {
                pv.post(now);
            }
            return Some(pv.clone());
        }
        let pv = make(dir, entry, f, form, rec, Arc::downgrade(&self.made));
        made.insert(name.to_string(), pv.clone());
        Some(pv)
    }
}

type Made = Weak<Mutex<HashMap<String, CaPv>>>;

/// How a field travels: as its type, or (`NAME.FIELD$`) a text as a char array of at most
/// this many bytes, the NUL included.
#[derive(Clone, Copy, PartialEq)]
enum Form {
    Plain,
    Long(usize),
}

/// The long form's size, as an EPICS IOC gives it: a link's (PVLINK_STRINGSZ), or the string
/// field's own (a calcout's OCAL: 80).
fn long_size(f: RecordField) -> usize {
    match f {
        RecordField::Ocal => 80,
        _ => 1024,
    }
}

fn make(
    dir: &Arc<PvDirectory>,
    entry: usize,
    f: RecordField,
    form: Form,
    rec: &str,
    made: Made,
) -> CaPv {
    let (native, initial) = match (form, f.kind()) {
        (Form::Long(_), _) | (_, FieldKind::UChar) => (NativeType::Char, CaValue::Char(vec![0])),
        (_, FieldKind::Short) => (NativeType::Short, CaValue::Short(vec![0])),
        (_, FieldKind::Long) => (NativeType::Long, CaValue::Long(vec![0])),
        (_, FieldKind::Text) => (NativeType::String, CaValue::String(String::new())),
        (_, FieldKind::Menu(_)) => (NativeType::Enum, CaValue::Enum(0)),
    };
    let mut meta = match form {
        Form::Long(n) => PvMeta::array(native, n),
        Form::Plain => PvMeta::scalar(native),
    };
    if let FieldKind::Menu(m) = f.kind() {
        meta.enum_strings = m.iter().map(|s| s.to_string()).collect();
    }
    // DBR_CLASS_NAME of a field channel names its record's type, as an IOC answers.
    if let Some(e) = dir.entry(entry) {
        meta.record_type = e.record.name().to_string();
    }
    meta.writable = f.writable();
    let pv = CaPv::new(meta, initial);
    pv.post(value(dir, entry, f, form));
    if !f.writable() {
        return pv;
    }
    let weak: Weak<PvDirectory> = Arc::downgrade(dir);
    let prefix = format!("{rec}.");
    pv.with_put_handler(move |pv, put, completion| {
        let Some(dir) = weak.upgrade() else {
            return completion.fail("the IOC is shutting down".into());
        };
        let who = completion.client().map(|(host, user)| ClientInfo {
            host: host.to_string(),
            user: user.to_string(),
            protocol: "ca",
        });
        let wait = completion.is_notify();
        let (pv, dir2) = (pv.clone(), Arc::downgrade(&dir));
        let (made, prefix) = (made.clone(), prefix.clone());
        let done: crate::pvdir::PutDone = Box::new(move |r| {
            if let Some(d) = dir2.upgrade() {
                pv.post(value(&d, entry, f, form));
                // An asyn trace bit and its mask are views of one value.
                if let (RecordField::Asyn(_), Some(made)) = (f, made.upgrade()) {
                    for (name, other) in made.lock().iter() {
                        let g = name.strip_prefix(&prefix).and_then(RecordField::parse);
                        if let Some(g @ RecordField::Asyn(_)) = g {
                            other.post(value(&d, entry, g, Form::Plain));
                        }
                    }
                }
            }
            match r {
                Ok(()) => completion.done(),
                Err(m) => completion.fail(m),
            }
        });
        if f.kind() == FieldKind::Text {
            return match put {
                CaValue::String(text) => dir.put_field_text(entry, f, &text, who.as_ref(), done),
                // The long form: the text up to its NUL.
                CaValue::Char(bytes) if form != Form::Plain => {
                    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
                    let text = String::from_utf8_lossy(&bytes[..end]);
                    dir.put_field_text(entry, f, &text, who.as_ref(), done)
                }
                _ => done(Err(format!("a put to .{} needs a string", f.name()))),
            };
        }
        match as_int(f, &put) {
            Ok(v) => dir.put_field(entry, f, v, who.as_ref(), wait, done),
            Err(m) => done(Err(m)),
        }
    })
}

/// The field's value now, as it travels.
fn value(dir: &PvDirectory, entry: usize, f: RecordField, form: Form) -> CaValue {
    if let Form::Long(n) = form {
        let mut bytes = dir.field_text(entry, f).into_bytes();
        bytes.truncate(n.saturating_sub(1));
        bytes.push(0);
        return CaValue::Char(bytes);
    }
    let v = dir.field(entry, f);
    match f.kind() {
        FieldKind::Text => CaValue::String(dir.field_text(entry, f)),
        FieldKind::UChar => CaValue::Char(vec![v.clamp(0, 255) as u8]),
        FieldKind::Short => CaValue::Short(vec![v.clamp(i16::MIN as i64, i16::MAX as i64) as i16]),
        FieldKind::Long => CaValue::Long(vec![v.clamp(i32::MIN as i64, i32::MAX as i64) as i32]),
        FieldKind::Menu(_) => CaValue::Enum(v.clamp(0, u16::MAX as i64) as u16),
    }
}

/// A put's value as the field's number: a menu field also takes its choice by name.
fn as_int(f: RecordField, v: &CaValue) -> Result<i64, String> {
    let bad = || format!("a put to .{} needs a number", f.name());
    Ok(match v {
        CaValue::Char(b) => b.first().copied().map(i64::from).ok_or_else(bad)?,
        CaValue::Short(x) => x.first().copied().map(i64::from).ok_or_else(bad)?,
        CaValue::Long(x) => x.first().copied().map(i64::from).ok_or_else(bad)?,
        CaValue::Float(x) => x.first().map(|x| *x as i64).ok_or_else(bad)?,
        CaValue::Double(x) => x.first().map(|x| *x as i64).ok_or_else(bad)?,
        CaValue::Enum(i) => i64::from(*i),
        CaValue::String(s) => {
            let s = s.trim();
            if let FieldKind::Menu(m) = f.kind() {
                if let Some(i) = m.iter().position(|c| *c == s) {
                    return Ok(i as i64);
                }
            }
            s.parse()
                .map_err(|_| format!("'{s}' is not a value of .{}", f.name()))?
        }
        CaValue::Shared { .. } => return Err(bad()),
    })
}
