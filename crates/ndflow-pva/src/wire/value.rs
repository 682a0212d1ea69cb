//! Values: a dynamic tree encoded and decoded against a [`FieldDesc`], in full or partially
//! through a [`BitSet`] (GET/PUT/MONITOR data).

use std::borrow::Cow;

use super::primitives::{BitSet, Reader, Writer};
use super::typedesc::{FieldDesc, Members, ScalarType, TypeCache};
use super::{ByteOrder, DecodeError, EncodeError, SharedBytes};

/// Value nesting limit (structures, unions and anys nested in anys).
pub const MAX_VALUE_DEPTH: usize = 64;

/// Element types a [`NumArray`] can be viewed as.
pub trait Element: bytemuck::Pod {
    const TYPE: ScalarType;
}

macro_rules! element {
    ($($t:ty => $st:ident),*) => { $(impl Element for $t { const TYPE: ScalarType = ScalarType::$st; })* };
}
element!(i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8, u16 => U16, u32 => U32,
    u64 => U64, f32 => F32, f64 => F64);

/// A numeric (or boolean) array as raw bytes in a known byte order. Decoding can borrow the
/// received message and encoding can send a foreign buffer (e.g. a frame's pixels) as is; bytes
/// are swapped only when the order differs from the message's.
#[derive(Clone, Debug)]
pub struct NumArray {
    ty: ScalarType,
    order: ByteOrder,
    data: SharedBytes,
}

impl NumArray {
    /// Wrap existing bytes; `None` if `ty` is String or the length is not a whole number of elements.
    pub fn from_shared(ty: ScalarType, order: ByteOrder, data: SharedBytes) -> Option<Self> {
        let size = ty.size()?;
        (data.len().checked_rem(size) == Some(0)).then_some(Self { ty, order, data })
    }

    /// Copy a typed slice (native order).
    pub fn from_slice<T: Element>(v: &[T]) -> Self {
        Self {
            ty: T::TYPE,
            order: ByteOrder::NATIVE,
            data: SharedBytes::copy_from_slice(bytemuck::cast_slice(v)),
        }
    }

    pub fn from_bools(v: &[bool]) -> Self {
        let bytes: Vec<u8> = v.iter().map(|&b| u8::from(b)).collect();
        Self {
            ty: ScalarType::Bool,
            order: ByteOrder::NATIVE,
            data: bytes.into(),
        }
    }

    pub fn empty(ty: ScalarType) -> Option<Self> {
        Self::from_shared(ty, ByteOrder::NATIVE, SharedBytes::empty())
    }

    pub fn scalar_type(&self) -> ScalarType {
        self.ty
    }

    pub fn order(&self) -> ByteOrder {
        self.order
    }

    /// The raw bytes, in [`Self::order`].
    pub fn bytes(&self) -> &SharedBytes {
        &self.data
    }

    fn elem_size(&self) -> usize {
        self.ty.size().unwrap_or(1)
    }

    pub fn len(&self) -> usize {
        self.data.len() / self.elem_size()
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Zero-copy typed view; `None` if the type differs, the bytes are not in native order or
    /// not aligned for `T`.
    pub fn as_slice<T: Element>(&self) -> Option<&[T]> {
        if T::TYPE != self.ty || self.order != ByteOrder::NATIVE {
            return None;
        }
        bytemuck::try_cast_slice(self.data.as_slice()).ok()
    }

    /// Typed copy in native order; `None` if the type differs.
    pub fn to_vec<T: Element>(&self) -> Option<Vec<T>> {
        if T::TYPE != self.ty {
            return None;
        }
        let native = self.bytes_in(ByteOrder::NATIVE);
        Some(
            native
                .chunks_exact(std::mem::size_of::<T>())
                .map(bytemuck::pod_read_unaligned)
                .collect(),
        )
    }

    pub fn to_bools(&self) -> Option<Vec<bool>> {
        (self.ty == ScalarType::Bool).then(|| self.data.iter().map(|&b| b != 0).collect())
    }

    /// The bytes in `order`, swapped into a new buffer only when needed.
    pub fn bytes_in(&self, order: ByteOrder) -> Cow<'_, [u8]> {
        let size = self.elem_size();
        if order == self.order || size == 1 {
            return Cow::Borrowed(self.data.as_slice());
        }
        let mut v = self.data.to_vec();
        for c in v.chunks_exact_mut(size) {
            c.reverse();
        }
        Cow::Owned(v)
    }

    fn encode(&self, w: &mut Writer) -> Result<(), EncodeError> {
        w.size(self.len())?;
        if self.order == w.order() || self.elem_size() == 1 {
            // Already in the message's order: a zero-copy writer sends the buffer as is.
            w.shared(&self.data);
        } else {
            w.bytes(&self.bytes_in(w.order()));
        }
        Ok(())
    }
}

impl PartialEq for NumArray {
    fn eq(&self, other: &Self) -> bool {
        self.ty == other.ty && self.bytes_in(ByteOrder::Little) == other.bytes_in(ByteOrder::Little)
    }
}

/// A pvData value. Structures hold their fields in description order.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Bool(bool),
    I8(i8),
    I16(i16),
    I32(i32),
    I64(i64),
    U8(u8),
    U16(u16),
    U32(u32),
    U64(u64),
    F32(f32),
    F64(f64),
    String(String),
    Array(NumArray),
    StringArray(Vec<String>),
    Structure(Vec<Value>),
    /// Elements may be null.
    StructureArray(Vec<Option<Vec<Value>>>),
    /// `None` = no member selected; else (selector, member value).
    Union(Option<Box<(usize, Value)>>),
    UnionArray(Vec<Option<(usize, Value)>>),
    /// `None` = empty variant; else (its type, its value).
    Any(Option<Box<(FieldDesc, Value)>>),
    AnyArray(Vec<Option<(FieldDesc, Value)>>),
}

impl Value {
    /// The zero/empty value of a type.
    pub fn default_for(desc: &FieldDesc) -> Value {
        match desc {
            FieldDesc::Scalar(t) => default_scalar(*t),
            FieldDesc::ScalarArray(ScalarType::String) => Value::StringArray(Vec::new()),
            FieldDesc::ScalarArray(t) => NumArray::empty(*t)
                .map(Value::Array)
                .unwrap_or(Value::StringArray(Vec::new())),
            FieldDesc::Structure(m) => Value::Structure(
                m.fields
                    .iter()
                    .map(|(_, f)| Value::default_for(f))
                    .collect(),
            ),
            FieldDesc::StructureArray(_) => Value::StructureArray(Vec::new()),
            FieldDesc::Union(_) => Value::Union(None),
            FieldDesc::UnionArray(_) => Value::UnionArray(Vec::new()),
            FieldDesc::Any => Value::Any(None),
            FieldDesc::AnyArray => Value::AnyArray(Vec::new()),
        }
    }

    /// Field at a dotted path through nested structures.
    pub fn field(&self, desc: &FieldDesc, path: &str) -> Option<&Value> {
        let mut v = self;
        let mut d = desc;
        for name in path.split('.').filter(|s| !s.is_empty()) {
            let (FieldDesc::Structure(m), Value::Structure(vals)) = (d, v) else {
                return None;
            };
            let i = m.index_of(name)?;
            d = &m.fields[i].1;
            v = vals.get(i)?;
        }
        Some(v)
    }

    pub fn field_mut(&mut self, desc: &FieldDesc, path: &str) -> Option<&mut Value> {
        let mut v = self;
        let mut d = desc;
        for name in path.split('.').filter(|s| !s.is_empty()) {
            let (FieldDesc::Structure(m), Value::Structure(vals)) = (d, v) else {
                return None;
            };
            let i = m.index_of(name)?;
            d = &m.fields[i].1;
            v = vals.get_mut(i)?;
        }
        Some(v)
    }

    /// Numeric scalar as f64 (booleans as 0/1).
    pub fn as_f64(&self) -> Option<f64> {
        Some(match *self {
            Value::Bool(b) => f64::from(u8::from(b)),
            Value::I8(v) => v.into(),
            Value::I16(v) => v.into(),
            Value::I32(v) => v.into(),
            Value::I64(v) => v as f64,
            Value::U8(v) => v.into(),
            Value::U16(v) => v.into(),
            Value::U32(v) => v.into(),
            Value::U64(v) => v as f64,
            Value::F32(v) => v.into(),
            Value::F64(v) => v,
            _ => return None,
        })
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// Full encoding against `desc`.
    pub fn encode(&self, desc: &FieldDesc, w: &mut Writer) -> Result<(), EncodeError> {
        match (desc, self) {
            (FieldDesc::Scalar(t), v) => encode_scalar(*t, v, w),
            (FieldDesc::ScalarArray(ScalarType::String), Value::StringArray(v)) => {
                w.size(v.len())?;
                v.iter().try_for_each(|s| w.string(s))
            }
            (FieldDesc::ScalarArray(t), Value::Array(a)) if a.scalar_type() == *t => a.encode(w),
            (FieldDesc::Structure(m), Value::Structure(vals)) => encode_fields(m, vals, w),
            (FieldDesc::StructureArray(m), Value::StructureArray(elems)) => {
                w.size(elems.len())?;
                for e in elems {
                    match e {
                        None => w.u8(0),
                        Some(vals) => {
                            w.u8(1);
                            encode_fields(m, vals, w)?;
                        }
                    }
                }
                Ok(())
            }
            (FieldDesc::Union(m), Value::Union(u)) => {
                encode_union(m, u.as_deref().map(|(s, v)| (*s, v)), w)
            }
            (FieldDesc::UnionArray(m), Value::UnionArray(elems)) => {
                w.size(elems.len())?;
                for e in elems {
                    match e {
                        None => w.u8(0),
                        Some((sel, v)) => {
                            w.u8(1);
                            encode_union(m, Some((*sel, v)), w)?;
                        }
                    }
                }
                Ok(())
            }
            (FieldDesc::Any, Value::Any(a)) => encode_any(a.as_deref(), w),
            (FieldDesc::AnyArray, Value::AnyArray(elems)) => {
                w.size(elems.len())?;
                for e in elems {
                    match e {
                        None => w.u8(0),
                        Some((d, v)) => {
                            w.u8(1);
                            d.encode(w)?;
                            v.encode(d, w)?;
                        }
                    }
                }
                Ok(())
            }
            _ => Err(EncodeError::Mismatch("value kind differs from its type")),
        }
    }

    /// Full decoding against `desc`. The cache is needed because pvAccessCPP may send the type
    /// of an `any` through it.
    pub fn decode(
        desc: &FieldDesc,
        r: &mut Reader<'_>,
        cache: &mut TypeCache,
    ) -> Result<Value, DecodeError> {
        decode_at(desc, r, cache, 0)
    }

    /// Write only the fields selected by `bits` (bit 0 = this field), in ascending bit order. A set
    /// structure bit sends the whole sub-structure. The BitSet itself is not written.
    pub fn encode_partial(
        &self,
        desc: &FieldDesc,
        bits: &BitSet,
        w: &mut Writer,
    ) -> Result<(), EncodeError> {
        encode_partial_at(self, desc, bits, 0, w)
    }

    /// Read the fields selected by `bits` into `self`, leaving the others untouched.
    pub fn decode_partial(
        &mut self,
        desc: &FieldDesc,
        bits: &BitSet,
        r: &mut Reader<'_>,
        cache: &mut TypeCache,
    ) -> Result<(), DecodeError> {
        decode_partial_at(self, desc, bits, 0, r, cache)
    }
}

fn default_scalar(t: ScalarType) -> Value {
    match t {
        ScalarType::Bool => Value::Bool(false),
        ScalarType::I8 => Value::I8(0),
        ScalarType::I16 => Value::I16(0),
        ScalarType::I32 => Value::I32(0),
        ScalarType::I64 => Value::I64(0),
        ScalarType::U8 => Value::U8(0),
        ScalarType::U16 => Value::U16(0),
        ScalarType::U32 => Value::U32(0),
        ScalarType::U64 => Value::U64(0),
        ScalarType::F32 => Value::F32(0.0),
        ScalarType::F64 => Value::F64(0.0),
        ScalarType::String => Value::String(String::new()),
    }
}

fn encode_scalar(t: ScalarType, v: &Value, w: &mut Writer) -> Result<(), EncodeError> {
    match (t, v) {
        (ScalarType::Bool, Value::Bool(x)) => w.bool(*x),
        (ScalarType::I8, Value::I8(x)) => w.i8(*x),
        (ScalarType::I16, Value::I16(x)) => w.i16(*x),
        (ScalarType::I32, Value::I32(x)) => w.i32(*x),
        (ScalarType::I64, Value::I64(x)) => w.i64(*x),
        (ScalarType::U8, Value::U8(x)) => w.u8(*x),
        (ScalarType::U16, Value::U16(x)) => w.u16(*x),
        (ScalarType::U32, Value::U32(x)) => w.u32(*x),
        (ScalarType::U64, Value::U64(x)) => w.u64(*x),
        (ScalarType::F32, Value::F32(x)) => w.f32(*x),
        (ScalarType::F64, Value::F64(x)) => w.f64(*x),
        (ScalarType::String, Value::String(s)) => w.string(s)?,
        _ => return Err(EncodeError::Mismatch("scalar type differs")),
    }
    Ok(())
}

fn encode_fields(m: &Members, vals: &[Value], w: &mut Writer) -> Result<(), EncodeError> {
    if vals.len() != m.fields.len() {
        return Err(EncodeError::Mismatch("structure field count"));
    }
    for ((_, f), v) in m.fields.iter().zip(vals) {
        v.encode(f, w)?;
    }
    Ok(())
}

fn encode_union(
    m: &Members,
    u: Option<(usize, &Value)>,
    w: &mut Writer,
) -> Result<(), EncodeError> {
    match u {
        None => {
            w.null_size();
            Ok(())
        }
        Some((sel, v)) => {
            let (_, f) = m.fields.get(sel).ok_or(EncodeError::BadSelector {
                selector: sel,
                members: m.fields.len(),
            })?;
            w.size(sel)?;
            v.encode(f, w)
        }
    }
}

fn encode_any(a: Option<&(FieldDesc, Value)>, w: &mut Writer) -> Result<(), EncodeError> {
    match a {
        None => {
            w.null_size();
            Ok(())
        }
        Some((d, v)) => {
            d.encode(w)?;
            v.encode(d, w)
        }
    }
}

fn decode_scalar(t: ScalarType, r: &mut Reader<'_>) -> Result<Value, DecodeError> {
    Ok(match t {
        ScalarType::Bool => Value::Bool(r.bool()?),
        ScalarType::I8 => Value::I8(r.i8()?),
        ScalarType::I16 => Value::I16(r.i16()?),
        ScalarType::I32 => Value::I32(r.i32()?),
        ScalarType::I64 => Value::I64(r.i64()?),
        ScalarType::U8 => Value::U8(r.u8()?),
        ScalarType::U16 => Value::U16(r.u16()?),
        ScalarType::U32 => Value::U32(r.u32()?),
        ScalarType::U64 => Value::U64(r.u64()?),
        ScalarType::F32 => Value::F32(r.f32()?),
        ScalarType::F64 => Value::F64(r.f64()?),
        ScalarType::String => Value::String(r.string()?),
    })
}

fn decode_fields(
    m: &Members,
    r: &mut Reader<'_>,
    cache: &mut TypeCache,
    depth: usize,
) -> Result<Vec<Value>, DecodeError> {
    m.fields
        .iter()
        .map(|(_, f)| decode_at(f, r, cache, depth))
        .collect()
}

fn decode_union(
    m: &Members,
    r: &mut Reader<'_>,
    cache: &mut TypeCache,
    depth: usize,
) -> Result<Option<(usize, Value)>, DecodeError> {
    let Some(sel) = r.size()? else {
        return Ok(None);
    };
    let (_, f) = m.fields.get(sel).ok_or(DecodeError::BadSelector {
        selector: sel,
        members: m.fields.len(),
    })?;
    Ok(Some((sel, decode_at(f, r, cache, depth)?)))
}

fn decode_any(
    r: &mut Reader<'_>,
    cache: &mut TypeCache,
    depth: usize,
) -> Result<Option<(FieldDesc, Value)>, DecodeError> {
    let Some(d) = FieldDesc::decode_at(r, cache, 0)? else {
        return Ok(None);
    };
    let v = decode_at(&d, r, cache, depth)?;
    Ok(Some((d, v)))
}

fn decode_at(
    desc: &FieldDesc,
    r: &mut Reader<'_>,
    cache: &mut TypeCache,
    depth: usize,
) -> Result<Value, DecodeError> {
    if depth > MAX_VALUE_DEPTH {
        return Err(DecodeError::TooDeep(MAX_VALUE_DEPTH));
    }
    let depth = depth + 1;
    Ok(match desc {
        FieldDesc::Scalar(t) => decode_scalar(*t, r)?,
        FieldDesc::ScalarArray(ScalarType::String) => {
            let n = r.bounded_count(1)?;
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                v.push(r.string()?);
            }
            Value::StringArray(v)
        }
        FieldDesc::ScalarArray(t) => {
            let size = t.size().unwrap_or(1);
            let n = r.count()?;
            let bytes = r.take_shared(n.checked_mul(size).ok_or(DecodeError::BadSize)?)?;
            let arr = NumArray::from_shared(*t, r.order(), bytes)
                .ok_or(DecodeError::Invalid("array length"))?;
            Value::Array(arr)
        }
        FieldDesc::Structure(m) => Value::Structure(decode_fields(m, r, cache, depth)?),
        FieldDesc::StructureArray(m) => {
            let n = r.bounded_count(1)?;
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                v.push(match r.u8()? {
                    0 => None,
                    _ => Some(decode_fields(m, r, cache, depth)?),
                });
            }
            Value::StructureArray(v)
        }
        FieldDesc::Union(m) => Value::Union(decode_union(m, r, cache, depth)?.map(Box::new)),
        FieldDesc::UnionArray(m) => {
            let n = r.bounded_count(1)?;
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                v.push(match r.u8()? {
                    0 => None,
                    _ => decode_union(m, r, cache, depth)?,
                });
            }
            Value::UnionArray(v)
        }
        FieldDesc::Any => Value::Any(decode_any(r, cache, depth)?.map(Box::new)),
        FieldDesc::AnyArray => {
            let n = r.bounded_count(1)?;
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                v.push(match r.u8()? {
                    0 => None,
                    _ => decode_any(r, cache, depth)?,
                });
            }
            Value::AnyArray(v)
        }
    })
}

fn encode_partial_at(
    v: &Value,
    desc: &FieldDesc,
    bits: &BitSet,
    offset: usize,
    w: &mut Writer,
) -> Result<(), EncodeError> {
    if bits.get(offset) {
        return v.encode(desc, w);
    }
    if let (FieldDesc::Structure(m), Value::Structure(vals)) = (desc, v) {
        if vals.len() != m.fields.len() {
            return Err(EncodeError::Mismatch("structure field count"));
        }
        let mut off = offset + 1;
        for ((_, f), fv) in m.fields.iter().zip(vals) {
            let n = f.bit_count();
            if bits.any_in(off, off + n) {
                encode_partial_at(fv, f, bits, off, w)?;
            }
            off += n;
        }
    }
    Ok(())
}

fn decode_partial_at(
    v: &mut Value,
    desc: &FieldDesc,
    bits: &BitSet,
    offset: usize,
    r: &mut Reader<'_>,
    cache: &mut TypeCache,
) -> Result<(), DecodeError> {
    if bits.get(offset) {
        *v = decode_at(desc, r, cache, 0)?;
        return Ok(());
    }
    let FieldDesc::Structure(m) = desc else {
        return Ok(());
    };
    if !matches!(v, Value::Structure(vals) if vals.len() == m.fields.len()) {
        *v = Value::default_for(desc);
    }
    let Value::Structure(vals) = v else {
        return Err(DecodeError::Invalid("structure value"));
    };
    let mut off = offset + 1;
    for ((_, f), fv) in m.fields.iter().zip(vals.iter_mut()) {
        let n = f.bit_count();
        if bits.any_in(off, off + n) {
            decode_partial_at(fv, f, bits, off, r, cache)?;
        }
        off += n;
    }
    Ok(())
}
