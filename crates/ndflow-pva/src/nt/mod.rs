//! Normative types (`epics:nt/...`) as type descriptions and value helpers.
//!
//! [`scalar`], [`scalar_array`] and [`enumeration`] are the control-PV types QSRV serves for every
//! record; [`ntndarray`] is the image type. The helpers here edit a value in place and
//! return the [`BitSet`] of what they changed, ready for `SharedPv::post`.

pub mod ntenum;
pub mod ntndarray;
pub mod ntscalar;

pub use ntenum::enumeration;
pub use ntscalar::{scalar, scalar_array};

use std::time::{SystemTime, UNIX_EPOCH};

use crate::wire::{BitSet, FieldDesc, Value};
pub use ntndarray::{alarm_desc, display_desc, time_desc, TimeStamp};

/// Alarm severities (alarm_t.severity).
pub const SEVERITY_NONE: i32 = 0;
pub const SEVERITY_MINOR: i32 = 1;
pub const SEVERITY_MAJOR: i32 = 2;
pub const SEVERITY_INVALID: i32 = 3;

impl TimeStamp {
    /// The current time, POSIX epoch.
    pub fn now() -> TimeStamp {
        let d = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        TimeStamp {
            seconds_past_epoch: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            nanoseconds: d.subsec_nanos() as i32,
            user_tag: 0,
        }
    }
}

/// Replace the field at `path` (dotted) and return its bit; `None` if there is no such field or
/// the new value does not fit its type.
pub fn set_field(desc: &FieldDesc, v: &mut Value, path: &str, new: Value) -> Option<BitSet> {
    let (bit, fd) = desc.find(path)?;
    if !value_fits(fd, &new) {
        return None;
    }
    *v.field_mut(desc, path)? = new;
    Some(BitSet::from_bits(&[bit]))
}

/// Set `alarm.{severity,status,message}`; returns the changed bits (the alarm structure).
pub fn set_alarm(
    desc: &FieldDesc,
    v: &mut Value,
    severity: i32,
    status: i32,
    message: &str,
) -> Option<BitSet> {
    set_field(
        desc,
        v,
        "alarm",
        Value::Structure(vec![
            Value::I32(severity),
            Value::I32(status),
            Value::String(message.to_owned()),
        ]),
    )
}

/// Set `timeStamp`; returns the changed bits.
pub fn set_time_stamp(desc: &FieldDesc, v: &mut Value, ts: TimeStamp) -> Option<BitSet> {
    set_field(
        desc,
        v,
        "timeStamp",
        Value::Structure(vec![
            Value::I64(ts.seconds_past_epoch),
            Value::I32(ts.nanoseconds),
            Value::I32(ts.user_tag),
        ]),
    )
}

/// Whether `v` has the shape of `desc` (kinds, scalar types, structure field counts), checked
/// all the way down. Cheap enough to run on every post.
pub fn value_fits(desc: &FieldDesc, v: &Value) -> bool {
    use crate::wire::ScalarType as S;
    match (desc, v) {
        (FieldDesc::Scalar(t), v) => matches!(
            (t, v),
            (S::Bool, Value::Bool(_))
                | (S::I8, Value::I8(_))
                | (S::I16, Value::I16(_))
                | (S::I32, Value::I32(_))
                | (S::I64, Value::I64(_))
                | (S::U8, Value::U8(_))
                | (S::U16, Value::U16(_))
                | (S::U32, Value::U32(_))
                | (S::U64, Value::U64(_))
                | (S::F32, Value::F32(_))
                | (S::F64, Value::F64(_))
                | (S::String, Value::String(_))
        ),
        (FieldDesc::ScalarArray(S::String), Value::StringArray(_)) => true,
        (FieldDesc::ScalarArray(t), Value::Array(a)) => a.scalar_type() == *t,
        (FieldDesc::Structure(m), Value::Structure(vals)) => {
            m.fields.len() == vals.len()
                && m.fields
                    .iter()
                    .zip(vals)
                    .all(|((_, f), x)| value_fits(f, x))
        }
        (FieldDesc::StructureArray(m), Value::StructureArray(el)) => el.iter().flatten().all(|e| {
            m.fields.len() == e.len() && m.fields.iter().zip(e).all(|((_, f), x)| value_fits(f, x))
        }),
        (FieldDesc::Union(m), Value::Union(u)) => match u.as_deref() {
            None => true,
            Some((sel, x)) => m.fields.get(*sel).is_some_and(|(_, f)| value_fits(f, x)),
        },
        (FieldDesc::UnionArray(m), Value::UnionArray(el)) => el
            .iter()
            .flatten()
            .all(|(sel, x)| m.fields.get(*sel).is_some_and(|(_, f)| value_fits(f, x))),
        (FieldDesc::Any, Value::Any(a)) => a.as_deref().is_none_or(|(d, x)| value_fits(d, x)),
        (FieldDesc::AnyArray, Value::AnyArray(el)) => {
            el.iter().flatten().all(|(d, x)| value_fits(d, x))
        }
        _ => false,
    }
}
