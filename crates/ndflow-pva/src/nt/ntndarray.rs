//! `epics:nt/NTNDArray:1.0` in normativeTypesCPP field order, as NDPluginPva builds it
//! (with descriptor, alarm, timeStamp and display), plus a typed view for building and reading it.

use std::sync::OnceLock;

use crate::wire::typedesc::{FieldDesc, Members, ScalarType};
use crate::wire::value::{NumArray, Value};
use crate::wire::DecodeError;

pub const NTNDARRAY_ID: &str = "epics:nt/NTNDArray:1.0";
pub const NTATTRIBUTE_ID: &str = "epics:nt/NTAttribute:1.0";

/// Union members of `value`, selector 0..10, in this order.
pub const VALUE_MEMBERS: [(&str, ScalarType); 11] = [
    ("booleanValue", ScalarType::Bool),
    ("byteValue", ScalarType::I8),
    ("shortValue", ScalarType::I16),
    ("intValue", ScalarType::I32),
    ("longValue", ScalarType::I64),
    ("ubyteValue", ScalarType::U8),
    ("ushortValue", ScalarType::U16),
    ("uintValue", ScalarType::U32),
    ("ulongValue", ScalarType::U64),
    ("floatValue", ScalarType::F32),
    ("doubleValue", ScalarType::F64),
];

/// Union selector of `value` for an element type (also the pvData ScalarType ordinal that
/// `codec.parameters` carries for compressed frames).
pub fn value_selector(t: ScalarType) -> Option<usize> {
    VALUE_MEMBERS.iter().position(|&(_, m)| m == t)
}

fn s(t: ScalarType) -> FieldDesc {
    FieldDesc::Scalar(t)
}

pub fn time_desc() -> FieldDesc {
    FieldDesc::structure(
        "time_t",
        vec![
            ("secondsPastEpoch", s(ScalarType::I64)),
            ("nanoseconds", s(ScalarType::I32)),
            ("userTag", s(ScalarType::I32)),
        ],
    )
}

pub fn alarm_desc() -> FieldDesc {
    FieldDesc::structure(
        "alarm_t",
        vec![
            ("severity", s(ScalarType::I32)),
            ("status", s(ScalarType::I32)),
            ("message", s(ScalarType::String)),
        ],
    )
}

pub fn display_desc() -> FieldDesc {
    FieldDesc::structure(
        "display_t",
        vec![
            ("limitLow", s(ScalarType::F64)),
            ("limitHigh", s(ScalarType::F64)),
            ("description", s(ScalarType::String)),
            ("format", s(ScalarType::String)),
            ("units", s(ScalarType::String)),
        ],
    )
}

fn value_union() -> FieldDesc {
    FieldDesc::union(
        "",
        VALUE_MEMBERS
            .iter()
            .map(|&(n, t)| (n, FieldDesc::ScalarArray(t)))
            .collect(),
    )
}

fn dimension_members() -> Members {
    Members::new(
        "dimension_t",
        vec![
            ("size", s(ScalarType::I32)),
            ("offset", s(ScalarType::I32)),
            ("fullSize", s(ScalarType::I32)),
            ("binning", s(ScalarType::I32)),
            ("reverse", s(ScalarType::Bool)),
        ],
    )
}

fn attribute_members() -> Members {
    Members::new(
        NTATTRIBUTE_ID,
        vec![
            ("name", s(ScalarType::String)),
            ("value", FieldDesc::Any),
            ("descriptor", s(ScalarType::String)),
            ("sourceType", s(ScalarType::I32)),
            ("source", s(ScalarType::String)),
        ],
    )
}

/// The full NTNDArray type (built once).
pub fn ntndarray_desc() -> &'static FieldDesc {
    static DESC: OnceLock<FieldDesc> = OnceLock::new();
    DESC.get_or_init(|| {
        FieldDesc::structure(
            NTNDARRAY_ID,
            vec![
                ("value", value_union()),
                (
                    "codec",
                    FieldDesc::structure(
                        "codec_t",
                        vec![
                            ("name", s(ScalarType::String)),
                            ("parameters", FieldDesc::Any),
                        ],
                    ),
                ),
                ("compressedSize", s(ScalarType::I64)),
                ("uncompressedSize", s(ScalarType::I64)),
                ("dimension", FieldDesc::StructureArray(dimension_members())),
                ("uniqueId", s(ScalarType::I32)),
                ("dataTimeStamp", time_desc()),
                ("attribute", FieldDesc::StructureArray(attribute_members())),
                ("descriptor", s(ScalarType::String)),
                ("alarm", alarm_desc()),
                ("timeStamp", time_desc()),
                ("display", display_desc()),
            ],
        )
    })
}

/// One `dimension_t` (index 0 is the fastest-varying axis).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Dimension {
    pub size: i32,
    pub offset: i32,
    pub full_size: i32,
    pub binning: i32,
    pub reverse: bool,
}

/// One NTAttribute element; `value` `None` = undefined (empty any).
#[derive(Clone, Debug, PartialEq)]
pub struct Attribute {
    pub name: String,
    pub value: Option<(FieldDesc, Value)>,
    pub descriptor: String,
    pub source_type: i32,
    pub source: String,
}

/// POSIX seconds + nanoseconds + user tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TimeStamp {
    pub seconds_past_epoch: i64,
    pub nanoseconds: i32,
    pub user_tag: i32,
}

/// Typed view of the fields of an NTNDArray that carry frame data. `display` and `descriptor`
/// are left at their defaults when building.
#[derive(Clone, Debug, PartialEq)]
pub struct NtNdArray {
    /// `None` = no union member selected.
    pub value: Option<NumArray>,
    pub codec_name: String,
    /// `codec.parameters` as an int32 (ADCore's original element type ordinal).
    pub codec_parameters: Option<i32>,
    pub compressed_size: i64,
    pub uncompressed_size: i64,
    pub dimension: Vec<Dimension>,
    pub unique_id: i32,
    pub data_time_stamp: TimeStamp,
    pub attribute: Vec<Attribute>,
    pub alarm: (i32, i32, String),
    pub time_stamp: TimeStamp,
}

fn time_value(t: &TimeStamp) -> Value {
    Value::Structure(vec![
        Value::I64(t.seconds_past_epoch),
        Value::I32(t.nanoseconds),
        Value::I32(t.user_tag),
    ])
}

impl NtNdArray {
    /// The value tree matching [`ntndarray_desc`].
    pub fn to_value(&self) -> Value {
        let value = self.value.as_ref().and_then(|a| {
            value_selector(a.scalar_type()).map(|sel| Box::new((sel, Value::Array(a.clone()))))
        });
        let params = self
            .codec_parameters
            .map(|p| Box::new((FieldDesc::Scalar(ScalarType::I32), Value::I32(p))));
        let dims = self
            .dimension
            .iter()
            .map(|d| {
                Some(vec![
                    Value::I32(d.size),
                    Value::I32(d.offset),
                    Value::I32(d.full_size),
                    Value::I32(d.binning),
                    Value::Bool(d.reverse),
                ])
            })
            .collect();
        let attrs = self
            .attribute
            .iter()
            .map(|a| {
                Some(vec![
                    Value::String(a.name.clone()),
                    Value::Any(a.value.clone().map(Box::new)),
                    Value::String(a.descriptor.clone()),
                    Value::I32(a.source_type),
                    Value::String(a.source.clone()),
                ])
            })
            .collect();
        let mut v = Value::default_for(ntndarray_desc());
        if let Value::Structure(f) = &mut v {
            f[0] = Value::Union(value);
            f[1] = Value::Structure(vec![
                Value::String(self.codec_name.clone()),
                Value::Any(params),
            ]);
            f[2] = Value::I64(self.compressed_size);
            f[3] = Value::I64(self.uncompressed_size);
            f[4] = Value::StructureArray(dims);
            f[5] = Value::I32(self.unique_id);
            f[6] = time_value(&self.data_time_stamp);
            f[7] = Value::StructureArray(attrs);
            f[9] = Value::Structure(vec![
                Value::I32(self.alarm.0),
                Value::I32(self.alarm.1),
                Value::String(self.alarm.2.clone()),
            ]);
            f[10] = time_value(&self.time_stamp);
        }
        v
    }

    /// Read a received value by field name, so that pvxs/p4p field order and optional fields
    /// are accepted too.
    pub fn from_value(desc: &FieldDesc, v: &Value) -> Result<Self, DecodeError> {
        const BAD: DecodeError = DecodeError::Invalid("not an NTNDArray");
        let get = |p: &str| v.field(desc, p);
        let int = |p: &str| get(p).and_then(Value::as_f64).map(|x| x as i64);
        let ts = |p: &str| TimeStamp {
            seconds_past_epoch: int(&format!("{p}.secondsPastEpoch")).unwrap_or(0),
            nanoseconds: int(&format!("{p}.nanoseconds")).unwrap_or(0) as i32,
            user_tag: int(&format!("{p}.userTag")).unwrap_or(0) as i32,
        };
        let value = match get("value").ok_or(BAD)? {
            Value::Union(None) => None,
            Value::Union(Some(b)) => match &b.1 {
                Value::Array(a) => Some(a.clone()),
                _ => return Err(BAD),
            },
            _ => return Err(BAD),
        };
        let codec_parameters = match get("codec.parameters") {
            Some(Value::Any(Some(b))) => b.1.as_f64().map(|x| x as i32),
            _ => None,
        };
        let (dim_desc, attr_desc) = match desc {
            FieldDesc::Structure(m) => (m.get("dimension"), m.get("attribute")),
            _ => return Err(BAD),
        };
        let mut dimension = Vec::new();
        if let (Some(FieldDesc::StructureArray(m)), Some(Value::StructureArray(el))) =
            (dim_desc, get("dimension"))
        {
            let d = FieldDesc::Structure(m.clone());
            for e in el.iter().flatten() {
                let e = Value::Structure(e.clone());
                let i = |n: &str| e.field(&d, n).and_then(Value::as_f64).unwrap_or(0.0) as i32;
                dimension.push(Dimension {
                    size: i("size"),
                    offset: i("offset"),
                    full_size: i("fullSize"),
                    binning: i("binning"),
                    reverse: matches!(e.field(&d, "reverse"), Some(Value::Bool(true))),
                });
            }
        }
        let mut attribute = Vec::new();
        if let (Some(FieldDesc::StructureArray(m)), Some(Value::StructureArray(el))) =
            (attr_desc, get("attribute"))
        {
            let d = FieldDesc::Structure(m.clone());
            for e in el.iter().flatten() {
                let e = Value::Structure(e.clone());
                let st = |n: &str| {
                    e.field(&d, n)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned()
                };
                attribute.push(Attribute {
                    name: st("name"),
                    value: match e.field(&d, "value") {
                        Some(Value::Any(a)) => a.as_deref().cloned(),
                        Some(Value::Union(Some(b))) => m
                            .get("value")
                            .and_then(FieldDesc::members)
                            .and_then(|u| u.fields.get(b.0))
                            .map(|(_, f)| (f.clone(), b.1.clone())),
                        _ => None,
                    },
                    descriptor: st("descriptor"),
                    source_type: e
                        .field(&d, "sourceType")
                        .and_then(Value::as_f64)
                        .unwrap_or(0.0) as i32,
                    source: st("source"),
                });
            }
        }
        Ok(Self {
            value,
            codec_name: get("codec.name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            codec_parameters,
            compressed_size: int("compressedSize").unwrap_or(0),
            uncompressed_size: int("uncompressedSize").unwrap_or(0),
            dimension,
            unique_id: int("uniqueId").unwrap_or(0) as i32,
            data_time_stamp: ts("dataTimeStamp"),
            attribute,
            alarm: (
                int("alarm.severity").unwrap_or(0) as i32,
                int("alarm.status").unwrap_or(0) as i32,
                get("alarm.message")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
            ),
            time_stamp: ts("timeStamp"),
        })
    }
}
