//! NDAttribute: a named, typed value carried by a frame.

use crate::DataType;

/// Where an attribute's value comes from (the XML `type` of areaDetector's attribute files).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SourceType {
    #[default]
    Driver,
    Param,
    EpicsPv,
    Function,
    Const,
}

impl SourceType {
    pub fn name(self) -> &'static str {
        match self {
            SourceType::Driver => "NDAttrSourceDriver",
            SourceType::Param => "NDAttrSourceParam",
            SourceType::EpicsPv => "NDAttrSourceEPICSPV",
            SourceType::Function => "NDAttrSourceFunct",
            SourceType::Const => "NDAttrSourceConst",
        }
    }
}

/// An attribute value: one of the ten numeric types, a string, or undefined.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    Int8(i8),
    UInt8(u8),
    Int16(i16),
    UInt16(u16),
    Int32(i32),
    UInt32(u32),
    Int64(i64),
    UInt64(u64),
    Float32(f32),
    Float64(f64),
    String(String),
    Undefined,
}

impl AttrValue {
    /// The numeric type, or None for strings and undefined values.
    pub fn data_type(&self) -> Option<DataType> {
        Some(match self {
            AttrValue::Int8(_) => DataType::Int8,
            AttrValue::UInt8(_) => DataType::UInt8,
            AttrValue::Int16(_) => DataType::Int16,
            AttrValue::UInt16(_) => DataType::UInt16,
            AttrValue::Int32(_) => DataType::Int32,
            AttrValue::UInt32(_) => DataType::UInt32,
            AttrValue::Int64(_) => DataType::Int64,
            AttrValue::UInt64(_) => DataType::UInt64,
            AttrValue::Float32(_) => DataType::Float32,
            AttrValue::Float64(_) => DataType::Float64,
            AttrValue::String(_) | AttrValue::Undefined => return None,
        })
    }

    pub fn as_f64(&self) -> Option<f64> {
        Some(match *self {
            AttrValue::Int8(v) => v as f64,
            AttrValue::UInt8(v) => v as f64,
            AttrValue::Int16(v) => v as f64,
            AttrValue::UInt16(v) => v as f64,
            AttrValue::Int32(v) => v as f64,
            AttrValue::UInt32(v) => v as f64,
            AttrValue::Int64(v) => v as f64,
            AttrValue::UInt64(v) => v as f64,
            AttrValue::Float32(v) => v as f64,
            AttrValue::Float64(v) => v,
            AttrValue::String(_) | AttrValue::Undefined => return None,
        })
    }
}

/// One attribute: unique (case-sensitive) name, description, source, value.
#[derive(Debug, Clone, PartialEq)]
pub struct NDAttribute {
    pub name: String,
    pub description: String,
    pub source_type: SourceType,
    pub source: String,
    pub value: AttrValue,
}

impl NDAttribute {
    pub fn new(name: impl Into<String>, description: impl Into<String>, value: AttrValue) -> Self {
        NDAttribute {
            name: name.into(),
            description: description.into(),
            source_type: SourceType::Driver,
            source: String::new(),
            value,
        }
    }
}
