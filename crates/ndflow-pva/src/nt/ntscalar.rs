//! `epics:nt/NTScalar:1.0` and `epics:nt/NTScalarArray:1.0`: value, alarm, timeStamp and,
//! for numbers and booleans, display (pvDataCPP `display_t`) and control (`control_t`).

use crate::wire::{FieldDesc, NumArray, ScalarType, Value};

use super::{alarm_desc, display_desc, time_desc};

pub const NTSCALAR_ID: &str = "epics:nt/NTScalar:1.0";
pub const NTSCALAR_ARRAY_ID: &str = "epics:nt/NTScalarArray:1.0";

/// `control_t` { limitLow, limitHigh, minStep }.
pub fn control_desc() -> FieldDesc {
    FieldDesc::structure(
        "control_t",
        vec![
            ("limitLow", FieldDesc::Scalar(ScalarType::F64)),
            ("limitHigh", FieldDesc::Scalar(ScalarType::F64)),
            ("minStep", FieldDesc::Scalar(ScalarType::F64)),
        ],
    )
}

/// `valueAlarm_t`: a record's level alarm limits and their severities, as QSRV serves them for
/// ai/longin records.
pub fn value_alarm_desc() -> FieldDesc {
    let f64 = || FieldDesc::Scalar(ScalarType::F64);
    let i32 = || FieldDesc::Scalar(ScalarType::I32);
    FieldDesc::structure(
        "valueAlarm_t",
        vec![
            ("active", FieldDesc::Scalar(ScalarType::Bool)),
            ("lowAlarmLimit", f64()),
            ("lowWarningLimit", f64()),
            ("highWarningLimit", f64()),
            ("highAlarmLimit", f64()),
            ("lowAlarmSeverity", i32()),
            ("lowWarningSeverity", i32()),
            ("highWarningSeverity", i32()),
            ("highAlarmSeverity", i32()),
            ("hysteresis", FieldDesc::Scalar(ScalarType::U8)),
        ],
    )
}

fn build(id: &str, value: FieldDesc, meta: bool) -> FieldDesc {
    let mut fields = vec![
        ("value", value),
        ("alarm", alarm_desc()),
        ("timeStamp", time_desc()),
    ];
    if meta {
        fields.push(("display", display_desc()));
        fields.push(("control", control_desc()));
    }
    FieldDesc::structure(id, fields)
}

/// A numeric scalar of type `t` from an f64 (saturating, as a cast does); strings get the
/// number's text.
pub fn from_f64(t: ScalarType, x: f64) -> Value {
    match t {
        ScalarType::Bool => Value::Bool(x != 0.0),
        ScalarType::I8 => Value::I8(x as i8),
        ScalarType::I16 => Value::I16(x as i16),
        ScalarType::I32 => Value::I32(x as i32),
        ScalarType::I64 => Value::I64(x as i64),
        ScalarType::U8 => Value::U8(x as u8),
        ScalarType::U16 => Value::U16(x as u16),
        ScalarType::U32 => Value::U32(x as u32),
        ScalarType::U64 => Value::U64(x as u64),
        ScalarType::F32 => Value::F32(x as f32),
        ScalarType::F64 => Value::F64(x),
        ScalarType::String => Value::String(x.to_string()),
    }
}

/// NTScalar.
pub mod scalar {
    use super::*;
    use crate::wire::BitSet;

    /// The type: strings carry value, alarm, timeStamp; numbers and booleans add display and
    /// control.
    pub fn desc(t: ScalarType) -> FieldDesc {
        build(NTSCALAR_ID, FieldDesc::Scalar(t), t != ScalarType::String)
    }

    /// [`desc`] of a number plus `valueAlarm` (level alarm limits).
    pub fn desc_with_value_alarm(t: ScalarType) -> FieldDesc {
        FieldDesc::structure(
            NTSCALAR_ID,
            vec![
                ("value", FieldDesc::Scalar(t)),
                ("alarm", alarm_desc()),
                ("timeStamp", time_desc()),
                ("display", display_desc()),
                ("control", control_desc()),
                ("valueAlarm", value_alarm_desc()),
            ],
        )
    }

    /// A complete value of [`desc`]`(t)` holding `v` (which must be a scalar of type `t`), with
    /// no alarm and the current time.
    pub fn value(t: ScalarType, v: Value) -> Value {
        let d = desc(t);
        let mut out = Value::default_for(&d);
        let _ = super::super::set_field(&d, &mut out, "value", v);
        let _ = super::super::set_time_stamp(&d, &mut out, super::super::TimeStamp::now());
        out
    }

    /// Set `value` (must match the type); returns the changed bit.
    pub fn set_value(desc: &FieldDesc, v: &mut Value, new: Value) -> Option<BitSet> {
        super::super::set_field(desc, v, "value", new)
    }

    /// Set `display` {limitLow, limitHigh, description, format, units}.
    pub fn set_display(
        desc: &FieldDesc,
        v: &mut Value,
        low: f64,
        high: f64,
        description: &str,
        units: &str,
    ) -> Option<BitSet> {
        super::super::set_field(
            desc,
            v,
            "display",
            Value::Structure(vec![
                Value::F64(low),
                Value::F64(high),
                Value::String(description.to_owned()),
                Value::String(String::new()),
                Value::String(units.to_owned()),
            ]),
        )
    }

    /// Set `control` {limitLow, limitHigh, minStep}.
    pub fn set_control(
        desc: &FieldDesc,
        v: &mut Value,
        low: f64,
        high: f64,
        min_step: f64,
    ) -> Option<BitSet> {
        super::super::set_field(
            desc,
            v,
            "control",
            Value::Structure(vec![
                Value::F64(low),
                Value::F64(high),
                Value::F64(min_step),
            ]),
        )
    }
}

/// NTScalarArray.
pub mod scalar_array {
    use super::*;
    use crate::wire::BitSet;

    pub fn desc(t: ScalarType) -> FieldDesc {
        build(
            NTSCALAR_ARRAY_ID,
            FieldDesc::ScalarArray(t),
            t != ScalarType::String,
        )
    }

    /// A complete value of [`desc`] for the array's element type, current time.
    pub fn value(a: NumArray) -> Value {
        let t = a.scalar_type();
        let d = desc(t);
        let mut out = Value::default_for(&d);
        let _ = super::super::set_field(&d, &mut out, "value", Value::Array(a));
        let _ = super::super::set_time_stamp(&d, &mut out, super::super::TimeStamp::now());
        out
    }

    /// A complete string-array value.
    pub fn strings(v: Vec<String>) -> Value {
        let d = desc(ScalarType::String);
        let mut out = Value::default_for(&d);
        let _ = super::super::set_field(&d, &mut out, "value", Value::StringArray(v));
        out
    }

    pub fn set_value(desc: &FieldDesc, v: &mut Value, new: Value) -> Option<BitSet> {
        super::super::set_field(desc, v, "value", new)
    }
}
