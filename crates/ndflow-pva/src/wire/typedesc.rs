//! Type introspection: [`FieldDesc`] and the per-connection receive-side type cache.

use std::collections::HashMap;

use super::primitives::{Reader, Writer};
use super::{DecodeError, EncodeError};

/// Nesting limit for type descriptions (pvxs uses 20).
pub const MAX_TYPE_DEPTH: usize = 20;

/// Scalar element types with their type codes (array code = scalar code | 0x08).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ScalarType {
    Bool = 0x00,
    I8 = 0x20,
    I16 = 0x21,
    I32 = 0x22,
    I64 = 0x23,
    U8 = 0x24,
    U16 = 0x25,
    U32 = 0x26,
    U64 = 0x27,
    F32 = 0x42,
    F64 = 0x43,
    String = 0x60,
}

impl ScalarType {
    pub const ALL: [ScalarType; 12] = [
        ScalarType::Bool,
        ScalarType::I8,
        ScalarType::I16,
        ScalarType::I32,
        ScalarType::I64,
        ScalarType::U8,
        ScalarType::U16,
        ScalarType::U32,
        ScalarType::U64,
        ScalarType::F32,
        ScalarType::F64,
        ScalarType::String,
    ];

    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn from_code(code: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.code() == code)
    }

    /// Bytes per element on the wire; `None` for strings.
    pub fn size(self) -> Option<usize> {
        match self {
            ScalarType::Bool | ScalarType::I8 | ScalarType::U8 => Some(1),
            ScalarType::I16 | ScalarType::U16 => Some(2),
            ScalarType::I32 | ScalarType::U32 | ScalarType::F32 => Some(4),
            ScalarType::I64 | ScalarType::U64 | ScalarType::F64 => Some(8),
            ScalarType::String => None,
        }
    }
}

/// Members of a structure or union, with its type id ("" = the default "structure"/"union").
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Members {
    pub id: String,
    pub fields: Vec<(String, FieldDesc)>,
}

impl Members {
    pub fn new(id: impl Into<String>, fields: Vec<(&str, FieldDesc)>) -> Self {
        Self {
            id: id.into(),
            fields: fields.into_iter().map(|(n, f)| (n.to_owned(), f)).collect(),
        }
    }

    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|(n, _)| n == name)
    }

    pub fn get(&self, name: &str) -> Option<&FieldDesc> {
        self.fields.iter().find(|(n, _)| n == name).map(|(_, f)| f)
    }
}

/// A pvData type description.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FieldDesc {
    Scalar(ScalarType),
    ScalarArray(ScalarType),
    Structure(Members),
    /// Array of the structure described by the members.
    StructureArray(Members),
    Union(Members),
    UnionArray(Members),
    Any,
    AnyArray,
}

impl FieldDesc {
    pub fn structure(id: &str, fields: Vec<(&str, FieldDesc)>) -> Self {
        FieldDesc::Structure(Members::new(id, fields))
    }

    pub fn union(id: &str, fields: Vec<(&str, FieldDesc)>) -> Self {
        FieldDesc::Union(Members::new(id, fields))
    }

    pub fn code(&self) -> u8 {
        match self {
            FieldDesc::Scalar(t) => t.code(),
            FieldDesc::ScalarArray(t) => t.code() | 0x08,
            FieldDesc::Structure(_) => 0x80,
            FieldDesc::StructureArray(_) => 0x88,
            FieldDesc::Union(_) => 0x81,
            FieldDesc::UnionArray(_) => 0x89,
            FieldDesc::Any => 0x82,
            FieldDesc::AnyArray => 0x8A,
        }
    }

    /// The type id as C++ validators see it (empty ids are the defaults).
    pub fn type_id(&self) -> String {
        match self {
            FieldDesc::Structure(m) if m.id.is_empty() => "structure".into(),
            FieldDesc::Union(m) if m.id.is_empty() => "union".into(),
            FieldDesc::Structure(m) | FieldDesc::Union(m) => m.id.clone(),
            FieldDesc::StructureArray(_) | FieldDesc::UnionArray(_) => {
                format!("{}[]", self.element_id())
            }
            FieldDesc::Scalar(t) => scalar_name(*t).into(),
            FieldDesc::ScalarArray(t) => format!("{}[]", scalar_name(*t)),
            FieldDesc::Any => "any".into(),
            FieldDesc::AnyArray => "any[]".into(),
        }
    }

    fn element_id(&self) -> String {
        match self {
            FieldDesc::StructureArray(m) => FieldDesc::Structure(m.clone()).type_id(),
            FieldDesc::UnionArray(m) => FieldDesc::Union(m.clone()).type_id(),
            _ => String::new(),
        }
    }

    /// Members of a structure/union or of the element of a structure/union array.
    pub fn members(&self) -> Option<&Members> {
        match self {
            FieldDesc::Structure(m)
            | FieldDesc::StructureArray(m)
            | FieldDesc::Union(m)
            | FieldDesc::UnionArray(m) => Some(m),
            _ => None,
        }
    }

    /// Number of field bits this field occupies in a BitSet (itself plus, for a structure, every
    /// descendant; unions, anys and arrays are single leaves).
    pub fn bit_count(&self) -> usize {
        match self {
            FieldDesc::Structure(m) => {
                1 + m.fields.iter().map(|(_, f)| f.bit_count()).sum::<usize>()
            }
            _ => 1,
        }
    }

    /// Follow a dotted path through nested structures; returns the field's bit offset (relative
    /// to this field) and its description.
    pub fn find(&self, path: &str) -> Option<(usize, &FieldDesc)> {
        let mut cur = self;
        let mut bit = 0;
        if path.is_empty() {
            return Some((0, self));
        }
        for name in path.split('.') {
            let FieldDesc::Structure(m) = cur else {
                return None;
            };
            bit += 1;
            let mut found = None;
            for (n, f) in &m.fields {
                if n == name {
                    found = Some(f);
                    break;
                }
                bit += f.bit_count();
            }
            cur = found?;
        }
        Some((bit, cur))
    }

    /// Full type description, never using the cache (a sender may always do this).
    pub fn encode(&self, w: &mut Writer) -> Result<(), EncodeError> {
        w.u8(self.code());
        match self {
            FieldDesc::Structure(m) | FieldDesc::Union(m) => encode_members(m, w),
            FieldDesc::StructureArray(m) => {
                w.u8(0x80);
                encode_members(m, w)
            }
            FieldDesc::UnionArray(m) => {
                w.u8(0x81);
                encode_members(m, w)
            }
            _ => Ok(()),
        }
    }

    /// Encode an optional type (`None` = 0xFF null type).
    pub fn encode_opt(desc: Option<&FieldDesc>, w: &mut Writer) -> Result<(), EncodeError> {
        match desc {
            Some(d) => d.encode(w),
            None => {
                w.null_size();
                Ok(())
            }
        }
    }

    /// Decode a type description; `None` is the 0xFF null type.
    pub fn decode(
        r: &mut Reader<'_>,
        cache: &mut TypeCache,
    ) -> Result<Option<FieldDesc>, DecodeError> {
        Self::decode_at(r, cache, 0)
    }

    pub(crate) fn decode_at(
        r: &mut Reader<'_>,
        cache: &mut TypeCache,
        depth: usize,
    ) -> Result<Option<FieldDesc>, DecodeError> {
        if depth > MAX_TYPE_DEPTH {
            return Err(DecodeError::TooDeep(MAX_TYPE_DEPTH));
        }
        let code = r.u8()?;
        match code {
            0xFF => return Ok(None),
            0xFD => {
                let key = r.u16()?;
                let desc =
                    Self::decode_at(r, cache, depth + 1)?.ok_or(DecodeError::UnexpectedNull)?;
                cache.insert(key, desc.clone());
                return Ok(Some(desc));
            }
            0xFE => {
                let key = r.u16()?;
                return cache
                    .get(key)
                    .cloned()
                    .map(Some)
                    .ok_or(DecodeError::UnknownCacheKey(key));
            }
            _ => {}
        }
        let desc = match code {
            0x80 | 0x81 => {
                let id = r.string()?;
                // Each member needs at least a name Size and a type code.
                let n = r.bounded_count(2)?;
                let mut fields = Vec::with_capacity(n);
                for _ in 0..n {
                    let name = r.string()?;
                    let f =
                        Self::decode_at(r, cache, depth + 1)?.ok_or(DecodeError::UnexpectedNull)?;
                    fields.push((name, f));
                }
                let m = Members { id, fields };
                if code == 0x80 {
                    FieldDesc::Structure(m)
                } else {
                    FieldDesc::Union(m)
                }
            }
            0x82 => FieldDesc::Any,
            0x8A => FieldDesc::AnyArray,
            0x88 | 0x89 => {
                let elem =
                    Self::decode_at(r, cache, depth + 1)?.ok_or(DecodeError::UnexpectedNull)?;
                match (code, elem) {
                    (0x88, FieldDesc::Structure(m)) => FieldDesc::StructureArray(m),
                    (0x89, FieldDesc::Union(m)) => FieldDesc::UnionArray(m),
                    _ => {
                        return Err(DecodeError::Invalid(
                            "compound array element is not a structure/union",
                        ))
                    }
                }
            }
            c => {
                // Fixed/bounded arrays (0x10/0x18) are refused, as pvxs does.
                let t = ScalarType::from_code(c & !0x08).ok_or(DecodeError::BadTypeCode(c))?;
                if c & 0x08 != 0 {
                    FieldDesc::ScalarArray(t)
                } else {
                    FieldDesc::Scalar(t)
                }
            }
        };
        Ok(Some(desc))
    }
}

fn encode_members(m: &Members, w: &mut Writer) -> Result<(), EncodeError> {
    w.string(&m.id)?;
    w.size(m.fields.len())?;
    for (name, f) in &m.fields {
        w.string(name)?;
        f.encode(w)?;
    }
    Ok(())
}

fn scalar_name(t: ScalarType) -> &'static str {
    match t {
        ScalarType::Bool => "boolean",
        ScalarType::I8 => "byte",
        ScalarType::I16 => "short",
        ScalarType::I32 => "int",
        ScalarType::I64 => "long",
        ScalarType::U8 => "ubyte",
        ScalarType::U16 => "ushort",
        ScalarType::U32 => "uint",
        ScalarType::U64 => "ulong",
        ScalarType::F32 => "float",
        ScalarType::F64 => "double",
        ScalarType::String => "string",
    }
}

/// Receive-side introspection cache (0xFD defines, 0xFE reuses), one per connection and direction.
/// pvAccessCPP peers (NDPluginPva, pvaDriver, pvapy) use it; pvxs only parses it.
#[derive(Clone, Debug, Default)]
pub struct TypeCache {
    map: HashMap<u16, FieldDesc>,
}

impl TypeCache {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn insert(&mut self, key: u16, desc: FieldDesc) {
        self.map.insert(key, desc);
    }

    pub fn get(&self, key: u16) -> Option<&FieldDesc> {
        self.map.get(&key)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}
