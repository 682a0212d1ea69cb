//! Values a caller puts, converted to the channel's type: numbers to any numeric field (range
//! checked, never silently wrapped), text parsed as needed, enums by index or by choice string.

use crate::wire::{BitSet, FieldDesc, NumArray, ScalarType, Value};

/// A value to put into one field.
#[derive(Clone, Debug, PartialEq)]
pub enum PutValue {
    Bool(bool),
    Int(i64),
    Float(f64),
    /// Text; for an enum field the choice name (or its index written as a number).
    Str(String),
    IntArray(Vec<i64>),
    FloatArray(Vec<f64>),
    StrArray(Vec<String>),
    /// A typed array put as is when the type matches, converted otherwise.
    Array(NumArray),
}

impl From<i64> for PutValue {
    fn from(v: i64) -> Self {
        PutValue::Int(v)
    }
}
impl From<i32> for PutValue {
    fn from(v: i32) -> Self {
        PutValue::Int(v.into())
    }
}
impl From<f64> for PutValue {
    fn from(v: f64) -> Self {
        PutValue::Float(v)
    }
}
impl From<bool> for PutValue {
    fn from(v: bool) -> Self {
        PutValue::Bool(v)
    }
}
impl From<&str> for PutValue {
    fn from(v: &str) -> Self {
        PutValue::Str(v.to_owned())
    }
}
impl From<String> for PutValue {
    fn from(v: String) -> Self {
        PutValue::Str(v)
    }
}

/// `{ int index; string[] choices }` (NTEnum's `enum_t`, matched by shape).
pub(crate) fn is_enum(desc: &FieldDesc) -> bool {
    matches!(desc, FieldDesc::Structure(m)
        if matches!(m.get("index"), Some(FieldDesc::Scalar(t)) if t.size().is_some() && *t != ScalarType::Bool)
        && matches!(m.get("choices"), Some(FieldDesc::ScalarArray(ScalarType::String))))
}

/// Whether putting `v` at `path` needs the current value (enum choices).
pub(crate) fn needs_current(desc: &FieldDesc, path: &str, v: &PutValue) -> bool {
    matches!(v, PutValue::Str(_))
        && desc
            .find(field_path(path))
            .is_some_and(|(_, fd)| is_enum(fd))
}

/// "" means the `value` field, as in pvput.
fn field_path(path: &str) -> &str {
    if path.is_empty() {
        "value"
    } else {
        path
    }
}

/// Store `v` at `path` in `value` (of type `desc`) and mark the field in `changed`.
pub(crate) fn apply(
    desc: &FieldDesc,
    value: &mut Value,
    path: &str,
    v: &PutValue,
    changed: &mut BitSet,
) -> Result<(), String> {
    let path = field_path(path);
    let (bit, fd) = desc
        .find(path)
        .ok_or_else(|| format!("no field {path:?} in the channel's type"))?;
    if is_enum(fd) {
        let index = enum_index(desc, value, path, v)?;
        return apply(
            desc,
            value,
            &format!("{path}.index"),
            &PutValue::Int(index),
            changed,
        );
    }
    let new = convert(fd, v).map_err(|e| format!("{path}: {e}"))?;
    let slot = value
        .field_mut(desc, path)
        .ok_or_else(|| format!("no field {path:?} in the value"))?;
    *slot = new;
    changed.set(bit);
    Ok(())
}

fn enum_index(desc: &FieldDesc, value: &Value, path: &str, v: &PutValue) -> Result<i64, String> {
    match v {
        PutValue::Int(i) => Ok(*i),
        PutValue::Bool(b) => Ok(i64::from(*b)),
        PutValue::Float(f) if f.fract() == 0.0 && f.is_finite() => Ok(*f as i64),
        PutValue::Str(s) => {
            let choices = match value.field(desc, &format!("{path}.choices")) {
                Some(Value::StringArray(c)) => c.as_slice(),
                _ => &[],
            };
            if let Some(i) = choices.iter().position(|c| c == s) {
                return Ok(i as i64);
            }
            s.trim()
                .parse::<i64>()
                .map_err(|_| format!("{path}: {s:?} is not one of the choices {choices:?}"))
        }
        _ => Err(format!("{path}: an enum takes an index or a choice string")),
    }
}

fn convert(fd: &FieldDesc, v: &PutValue) -> Result<Value, String> {
    match fd {
        FieldDesc::Scalar(t) => scalar(*t, v),
        FieldDesc::ScalarArray(t) => array(*t, v),
        _ => Err("only scalar, array and enum fields can be put".into()),
    }
}

/// A number (or parsed text) as the scalar type `t`; out-of-range values are refused.
fn scalar(t: ScalarType, v: &PutValue) -> Result<Value, String> {
    if t == ScalarType::String {
        return match v {
            PutValue::Str(s) => Ok(Value::String(s.clone())),
            PutValue::Int(i) => Ok(Value::String(i.to_string())),
            PutValue::Float(f) => Ok(Value::String(f.to_string())),
            PutValue::Bool(b) => Ok(Value::String(b.to_string())),
            _ => Err("an array cannot be put into a string".into()),
        };
    }
    let n = match v {
        PutValue::Int(i) => Num::I(*i),
        PutValue::Float(f) => Num::F(*f),
        PutValue::Bool(b) => Num::I(i64::from(*b)),
        PutValue::Str(s) => parse_num(s)?,
        _ => return Err("an array cannot be put into a scalar".into()),
    };
    num_to(t, n)
}

#[derive(Clone, Copy)]
enum Num {
    I(i64),
    F(f64),
}

fn parse_num(s: &str) -> Result<Num, String> {
    let s = s.trim();
    match s.to_ascii_lowercase().as_str() {
        "true" => return Ok(Num::I(1)),
        "false" => return Ok(Num::I(0)),
        _ => {}
    }
    if let Ok(i) = s.parse::<i64>() {
        return Ok(Num::I(i));
    }
    s.parse::<f64>()
        .map(Num::F)
        .map_err(|_| format!("{s:?} is not a number"))
}

fn num_to(t: ScalarType, n: Num) -> Result<Value, String> {
    let int = |n: Num| -> Result<i128, String> {
        match n {
            Num::I(i) => Ok(i128::from(i)),
            Num::F(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 2e19 => Ok(f as i128),
            Num::F(f) => Err(format!("{f} is not an integer")),
        }
    };
    let f = |n: Num| match n {
        Num::I(i) => i as f64,
        Num::F(f) => f,
    };
    macro_rules! fit {
        ($ty:ty, $var:ident) => {{
            let i = int(n)?;
            <$ty>::try_from(i)
                .map(Value::$var)
                .map_err(|_| format!("{i} is out of range for {}", stringify!($ty)))
        }};
    }
    match t {
        ScalarType::Bool => Ok(Value::Bool(f(n) != 0.0)),
        ScalarType::I8 => fit!(i8, I8),
        ScalarType::I16 => fit!(i16, I16),
        ScalarType::I32 => fit!(i32, I32),
        ScalarType::I64 => fit!(i64, I64),
        ScalarType::U8 => fit!(u8, U8),
        ScalarType::U16 => fit!(u16, U16),
        ScalarType::U32 => fit!(u32, U32),
        ScalarType::U64 => fit!(u64, U64),
        ScalarType::F32 => Ok(Value::F32(f(n) as f32)),
        ScalarType::F64 => Ok(Value::F64(f(n))),
        ScalarType::String => Ok(Value::String(match n {
            Num::I(i) => i.to_string(),
            Num::F(x) => x.to_string(),
        })),
    }
}

/// Elements of `v` as numbers (scalars put into an array become one element).
fn elements(v: &PutValue) -> Result<Vec<Num>, String> {
    Ok(match v {
        PutValue::IntArray(a) => a.iter().map(|&i| Num::I(i)).collect(),
        PutValue::FloatArray(a) => a.iter().map(|&x| Num::F(x)).collect(),
        PutValue::StrArray(a) => a.iter().map(|s| parse_num(s)).collect::<Result<_, _>>()?,
        PutValue::Int(i) => vec![Num::I(*i)],
        PutValue::Float(x) => vec![Num::F(*x)],
        PutValue::Bool(b) => vec![Num::I(i64::from(*b))],
        PutValue::Str(s) => vec![parse_num(s)?],
        PutValue::Array(a) => {
            let bytes = a.bytes_in(crate::wire::ByteOrder::NATIVE);
            return numarray_elements(a.scalar_type(), &bytes);
        }
    })
}

fn numarray_elements(t: ScalarType, b: &[u8]) -> Result<Vec<Num>, String> {
    macro_rules! conv {
        ($ty:ty, $mk:expr) => {
            b.chunks_exact(std::mem::size_of::<$ty>())
                .map(|c| $mk(bytemuck::pod_read_unaligned::<$ty>(c)))
                .collect()
        };
    }
    Ok(match t {
        ScalarType::Bool => b.iter().map(|&x| Num::I(i64::from(x != 0))).collect(),
        ScalarType::I8 => conv!(i8, |x: i8| Num::I(x.into())),
        ScalarType::I16 => conv!(i16, |x: i16| Num::I(x.into())),
        ScalarType::I32 => conv!(i32, |x: i32| Num::I(x.into())),
        ScalarType::I64 => conv!(i64, Num::I),
        ScalarType::U8 => conv!(u8, |x: u8| Num::I(x.into())),
        ScalarType::U16 => conv!(u16, |x: u16| Num::I(x.into())),
        ScalarType::U32 => conv!(u32, |x: u32| Num::I(x.into())),
        ScalarType::U64 => conv!(u64, |x: u64| i64::try_from(x)
            .map_or(Num::F(x as f64), Num::I)),
        ScalarType::F32 => conv!(f32, |x: f32| Num::F(x.into())),
        ScalarType::F64 => conv!(f64, Num::F),
        ScalarType::String => return Err("string arrays are not numeric".into()),
    })
}

fn array(t: ScalarType, v: &PutValue) -> Result<Value, String> {
    if let PutValue::Array(a) = v {
        if a.scalar_type() == t {
            return Ok(Value::Array(a.clone()));
        }
    }
    if t == ScalarType::String {
        return Ok(Value::StringArray(match v {
            PutValue::StrArray(a) => a.clone(),
            PutValue::Str(s) => vec![s.clone()],
            other => elements(other)?
                .into_iter()
                .map(|n| match n {
                    Num::I(i) => i.to_string(),
                    Num::F(x) => x.to_string(),
                })
                .collect(),
        }));
    }
    let vals = elements(v)?
        .into_iter()
        .map(|n| num_to(t, n))
        .collect::<Result<Vec<_>, _>>()?;
    macro_rules! collect {
        ($var:ident, $ty:ty) => {
            NumArray::from_slice::<$ty>(
                &vals
                    .iter()
                    .filter_map(|v| match v {
                        Value::$var(x) => Some(*x),
                        _ => None,
                    })
                    .collect::<Vec<$ty>>(),
            )
        };
    }
    let arr = match t {
        ScalarType::Bool => NumArray::from_bools(
            &vals
                .iter()
                .map(|v| matches!(v, Value::Bool(true)))
                .collect::<Vec<_>>(),
        ),
        ScalarType::I8 => collect!(I8, i8),
        ScalarType::I16 => collect!(I16, i16),
        ScalarType::I32 => collect!(I32, i32),
        ScalarType::I64 => collect!(I64, i64),
        ScalarType::U8 => collect!(U8, u8),
        ScalarType::U16 => collect!(U16, u16),
        ScalarType::U32 => collect!(U32, u32),
        ScalarType::U64 => collect!(U64, u64),
        ScalarType::F32 => collect!(F32, f32),
        ScalarType::F64 => collect!(F64, f64),
        ScalarType::String => return Err("unreachable: string array".into()),
    };
    Ok(Value::Array(arr))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc() -> FieldDesc {
        FieldDesc::structure(
            "",
            vec![
                ("value", FieldDesc::Scalar(ScalarType::U8)),
                (
                    "e",
                    FieldDesc::structure(
                        "enum_t",
                        vec![
                            ("index", FieldDesc::Scalar(ScalarType::I32)),
                            ("choices", FieldDesc::ScalarArray(ScalarType::String)),
                        ],
                    ),
                ),
                ("arr", FieldDesc::ScalarArray(ScalarType::I16)),
                ("s", FieldDesc::Scalar(ScalarType::String)),
            ],
        )
    }

    #[test]
    fn conversions_and_bits() {
        let d = desc();
        let mut v = Value::default_for(&d);
        if let Some(Value::StringArray(c)) = v.field_mut(&d, "e.choices") {
            *c = vec!["Off".into(), "On".into()];
        }
        let mut bits = BitSet::new();
        apply(&d, &mut v, "", &PutValue::Float(200.0), &mut bits).unwrap();
        apply(&d, &mut v, "e", &PutValue::Str("On".into()), &mut bits).unwrap();
        apply(
            &d,
            &mut v,
            "arr",
            &PutValue::IntArray(vec![1, -2]),
            &mut bits,
        )
        .unwrap();
        apply(&d, &mut v, "s", &PutValue::Int(7), &mut bits).unwrap();
        assert_eq!(v.field(&d, "value"), Some(&Value::U8(200)));
        assert_eq!(v.field(&d, "e.index"), Some(&Value::I32(1)));
        assert_eq!(v.field(&d, "s"), Some(&Value::String("7".into())));
        match v.field(&d, "arr") {
            Some(Value::Array(a)) => assert_eq!(a.to_vec::<i16>(), Some(vec![1, -2])),
            other => panic!("{other:?}"),
        }
        // value=1, e=2 (index 3), arr=5, s=6
        assert_eq!(bits.iter().collect::<Vec<_>>(), vec![1, 3, 5, 6]);
    }

    #[test]
    fn refusals() {
        let d = desc();
        let mut v = Value::default_for(&d);
        let mut bits = BitSet::new();
        let e = apply(&d, &mut v, "value", &PutValue::Int(256), &mut bits).unwrap_err();
        assert!(e.contains("out of range"), "{e}");
        let e = apply(&d, &mut v, "value", &PutValue::Float(1.5), &mut bits).unwrap_err();
        assert!(e.contains("not an integer"), "{e}");
        let e = apply(&d, &mut v, "e", &PutValue::Str("Maybe".into()), &mut bits).unwrap_err();
        assert!(e.contains("choices"), "{e}");
        let e = apply(&d, &mut v, "nope", &PutValue::Int(1), &mut bits).unwrap_err();
        assert!(e.contains("no field"), "{e}");
        assert!(bits.is_empty());
    }
}
