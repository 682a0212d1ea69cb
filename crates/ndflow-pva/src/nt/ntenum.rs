//! `epics:nt/NTEnum:1.0`: value `enum_t` { int index; string[] choices }, alarm,
//! timeStamp. ophyd-async maps PVA enums and booleans through it.

use crate::wire::{FieldDesc, ScalarType, Value};

use super::{alarm_desc, time_desc};

pub const NTENUM_ID: &str = "epics:nt/NTEnum:1.0";

/// NTEnum.
pub mod enumeration {
    use super::*;
    use crate::wire::BitSet;

    /// `enum_t`.
    pub fn enum_desc() -> FieldDesc {
        FieldDesc::structure(
            "enum_t",
            vec![
                ("index", FieldDesc::Scalar(ScalarType::I32)),
                ("choices", FieldDesc::ScalarArray(ScalarType::String)),
            ],
        )
    }

    pub fn desc() -> FieldDesc {
        FieldDesc::structure(
            NTENUM_ID,
            vec![
                ("value", enum_desc()),
                ("alarm", alarm_desc()),
                ("timeStamp", time_desc()),
            ],
        )
    }

    /// A complete value: `index` among `choices`, current time.
    pub fn value(index: i32, choices: &[&str]) -> Value {
        let d = desc();
        let mut out = Value::default_for(&d);
        let _ = super::super::set_field(
            &d,
            &mut out,
            "value",
            Value::Structure(vec![
                Value::I32(index),
                Value::StringArray(choices.iter().map(|s| (*s).to_owned()).collect()),
            ]),
        );
        let _ = super::super::set_time_stamp(&d, &mut out, super::super::TimeStamp::now());
        out
    }

    /// `value.index`.
    pub fn index(desc: &FieldDesc, v: &Value) -> Option<i32> {
        match v.field(desc, "value.index")? {
            Value::I32(i) => Some(*i),
            _ => None,
        }
    }

    /// `value.choices`.
    pub fn choices<'a>(desc: &FieldDesc, v: &'a Value) -> Option<&'a [String]> {
        match v.field(desc, "value.choices")? {
            Value::StringArray(c) => Some(c),
            _ => None,
        }
    }

    /// Set `value.index`; returns the changed bit.
    pub fn set_index(desc: &FieldDesc, v: &mut Value, index: i32) -> Option<BitSet> {
        super::super::set_field(desc, v, "value.index", Value::I32(index))
    }

    /// Set `value.index` to the position of `choice`; `None` if it is not a choice.
    pub fn set_choice(desc: &FieldDesc, v: &mut Value, choice: &str) -> Option<BitSet> {
        let i = choices(desc, v)?.iter().position(|c| c == choice)?;
        set_index(desc, v, i32::try_from(i).ok()?)
    }
}
