//! Values: the seven native DBR types, [`CaValue`] (what a PV holds), [`Values`] (typed element
//! vectors as they travel on the wire) and the conversions between types that RSRV performs on
//! reads and writes (numbers ↔ strings with PREC, enum ↔ choice strings, C casts between numbers).

use std::sync::Arc;

/// Longest DBR_STRING: 40 bytes including the NUL.
pub const MAX_STRING_SIZE: usize = 40;

/// The base DBR types, numbered as on the wire (DBR_STRING = 0 .. DBR_DOUBLE = 6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NativeType {
    String,
    Short,
    Float,
    Enum,
    Char,
    Long,
    Double,
}

impl NativeType {
    pub const ALL: [NativeType; 7] = [
        NativeType::String,
        NativeType::Short,
        NativeType::Float,
        NativeType::Enum,
        NativeType::Char,
        NativeType::Long,
        NativeType::Double,
    ];

    pub fn from_code(code: u16) -> Option<Self> {
        Self::ALL.get(usize::from(code)).copied()
    }

    pub fn code(self) -> u16 {
        self as u16
    }

    /// Bytes of one element on the wire.
    pub fn elem_size(self) -> usize {
        match self {
            NativeType::String => MAX_STRING_SIZE,
            NativeType::Short | NativeType::Enum => 2,
            NativeType::Float | NativeType::Long => 4,
            NativeType::Char => 1,
            NativeType::Double => 8,
        }
    }

    fn is_float(self) -> bool {
        matches!(self, NativeType::Float | NativeType::Double)
    }
}

/// A PV's value, in native byte order.
#[derive(Clone)]
pub enum CaValue {
    /// DBR_STRING scalar (at most 39 bytes + NUL on the wire; longer is truncated).
    String(String),
    Enum(u16),
    Short(Vec<i16>),
    Float(Vec<f32>),
    Long(Vec<i32>),
    Double(Vec<f64>),
    Char(Vec<u8>),
    /// Large numeric waveform sharing the caller's buffer (no copy on post): native-endian bytes
    /// of `ty` elements (a trailing partial element is ignored).
    Shared {
        ty: NativeType,
        bytes: Arc<dyn AsRef<[u8]> + Send + Sync>,
    },
}

impl std::fmt::Debug for CaValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CaValue::String(s) => write!(f, "String({s:?})"),
            CaValue::Enum(v) => write!(f, "Enum({v})"),
            CaValue::Short(v) => write!(f, "Short({v:?})"),
            CaValue::Float(v) => write!(f, "Float({v:?})"),
            CaValue::Long(v) => write!(f, "Long({v:?})"),
            CaValue::Double(v) => write!(f, "Double({v:?})"),
            CaValue::Char(v) => write!(f, "Char({v:?})"),
            CaValue::Shared { ty, bytes } => {
                write!(f, "Shared({ty:?}, {} bytes)", (**bytes).as_ref().len())
            }
        }
    }
}

impl PartialEq for CaValue {
    /// Equal when the type and the elements are (a `Shared` equals the vector it holds).
    fn eq(&self, other: &Self) -> bool {
        self.native_type() == other.native_type() && self.to_values() == other.to_values()
    }
}

impl CaValue {
    pub fn native_type(&self) -> NativeType {
        match self {
            CaValue::String(_) => NativeType::String,
            CaValue::Enum(_) => NativeType::Enum,
            CaValue::Short(_) => NativeType::Short,
            CaValue::Float(_) => NativeType::Float,
            CaValue::Long(_) => NativeType::Long,
            CaValue::Double(_) => NativeType::Double,
            CaValue::Char(_) => NativeType::Char,
            CaValue::Shared { ty, .. } => *ty,
        }
    }

    /// Current element count.
    pub fn count(&self) -> usize {
        match self {
            CaValue::String(_) | CaValue::Enum(_) => 1,
            CaValue::Short(v) => v.len(),
            CaValue::Float(v) => v.len(),
            CaValue::Long(v) => v.len(),
            CaValue::Double(v) => v.len(),
            CaValue::Char(v) => v.len(),
            CaValue::Shared { ty, bytes } => (**bytes).as_ref().len() / ty.elem_size(),
        }
    }

    /// The elements as an owned typed vector (a copy for `Shared`).
    pub fn to_values(&self) -> Values {
        match self {
            CaValue::String(s) => Values::String(vec![s.clone()]),
            CaValue::Enum(v) => Values::Enum(vec![*v]),
            CaValue::Short(v) => Values::Short(v.clone()),
            CaValue::Float(v) => Values::Float(v.clone()),
            CaValue::Long(v) => Values::Long(v.clone()),
            CaValue::Double(v) => Values::Double(v.clone()),
            CaValue::Char(v) => Values::Char(v.clone()),
            CaValue::Shared { ty, bytes } => Values::from_ne_bytes(*ty, (**bytes).as_ref()),
        }
    }

    /// The value as a double when it is numeric and has at least one element (enum = index,
    /// string parsed).
    pub fn as_f64(&self) -> Option<f64> {
        let v = self.to_values();
        if v.is_empty() {
            return None;
        }
        match v.convert(NativeType::Double, Some(1), &Format::default()) {
            Ok(Values::Double(d)) => d.first().copied(),
            _ => None,
        }
    }

    /// The value as text: strings as they are, char arrays as NUL-terminated text, numbers with
    /// `precision`, enums as their choice when `enum_strings` names it.
    pub fn to_text(&self, precision: i16, enum_strings: &[String]) -> String {
        let fmt = Format {
            precision,
            enum_strings,
        };
        match self.to_values().convert(NativeType::String, Some(1), &fmt) {
            Ok(Values::String(s)) => s.into_iter().next().unwrap_or_default(),
            _ => String::new(),
        }
    }
}

/// Typed elements as decoded from, or encoded to, a DBR payload.
#[derive(Clone, Debug, PartialEq)]
pub enum Values {
    String(Vec<String>),
    Short(Vec<i16>),
    Float(Vec<f32>),
    Enum(Vec<u16>),
    Char(Vec<u8>),
    Long(Vec<i32>),
    Double(Vec<f64>),
}

/// Why a conversion failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConvError {
    #[error("cannot convert {0:?} to a number")]
    NotANumber(String),
    #[error("{0:?} is not one of the enum choices")]
    NoSuchChoice(String),
}

/// What number → string conversions need from the PV's metadata.
#[derive(Clone, Copy, Debug, Default)]
pub struct Format<'a> {
    pub precision: i16,
    pub enum_strings: &'a [String],
}

/// One source element.
enum Elem<'a> {
    Int(i64),
    Float(f64),
    Str(&'a str),
}

impl Values {
    pub fn native_type(&self) -> NativeType {
        match self {
            Values::String(_) => NativeType::String,
            Values::Short(_) => NativeType::Short,
            Values::Float(_) => NativeType::Float,
            Values::Enum(_) => NativeType::Enum,
            Values::Char(_) => NativeType::Char,
            Values::Long(_) => NativeType::Long,
            Values::Double(_) => NativeType::Double,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Values::String(v) => v.len(),
            Values::Short(v) => v.len(),
            Values::Float(v) => v.len(),
            Values::Enum(v) => v.len(),
            Values::Char(v) => v.len(),
            Values::Long(v) => v.len(),
            Values::Double(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Decode native-endian bytes of `ty` elements (strings as 40-byte NUL-padded slots).
    pub fn from_ne_bytes(ty: NativeType, b: &[u8]) -> Values {
        Self::from_bytes(ty, b, cfg!(target_endian = "big"))
    }

    /// Decode big-endian (wire order) bytes of `ty` elements.
    pub fn from_be_bytes(ty: NativeType, b: &[u8]) -> Values {
        Self::from_bytes(ty, b, true)
    }

    fn from_bytes(ty: NativeType, b: &[u8], big: bool) -> Values {
        fn map<const N: usize, T>(b: &[u8], f: fn([u8; N]) -> T) -> Vec<T> {
            b.chunks_exact(N)
                .map(|c| {
                    let mut a = [0u8; N];
                    a.copy_from_slice(c);
                    f(a)
                })
                .collect()
        }
        match ty {
            NativeType::String => Values::String(
                b.chunks_exact(MAX_STRING_SIZE)
                    .map(crate::header::payload_str)
                    .collect(),
            ),
            NativeType::Short if big => Values::Short(map(b, i16::from_be_bytes)),
            NativeType::Short => Values::Short(map(b, i16::from_le_bytes)),
            NativeType::Float if big => Values::Float(map(b, f32::from_be_bytes)),
            NativeType::Float => Values::Float(map(b, f32::from_le_bytes)),
            NativeType::Enum if big => Values::Enum(map(b, u16::from_be_bytes)),
            NativeType::Enum => Values::Enum(map(b, u16::from_le_bytes)),
            NativeType::Char => Values::Char(b.to_vec()),
            NativeType::Long if big => Values::Long(map(b, i32::from_be_bytes)),
            NativeType::Long => Values::Long(map(b, i32::from_le_bytes)),
            NativeType::Double if big => Values::Double(map(b, f64::from_be_bytes)),
            NativeType::Double => Values::Double(map(b, f64::from_le_bytes)),
        }
    }

    /// Into a PV value of the same type (a string or enum array keeps its first element).
    pub fn into_ca_value(self) -> CaValue {
        match self {
            Values::String(v) => CaValue::String(v.into_iter().next().unwrap_or_default()),
            Values::Enum(v) => CaValue::Enum(v.first().copied().unwrap_or(0)),
            Values::Short(v) => CaValue::Short(v),
            Values::Float(v) => CaValue::Float(v),
            Values::Char(v) => CaValue::Char(v),
            Values::Long(v) => CaValue::Long(v),
            Values::Double(v) => CaValue::Double(v),
        }
    }

    fn elem(&self, i: usize) -> Elem<'_> {
        match self {
            Values::String(v) => Elem::Str(v[i].as_str()),
            Values::Short(v) => Elem::Int(i64::from(v[i])),
            Values::Float(v) => Elem::Float(f64::from(v[i])),
            Values::Enum(v) => Elem::Int(i64::from(v[i])),
            Values::Char(v) => Elem::Int(i64::from(v[i])),
            Values::Long(v) => Elem::Int(i64::from(v[i])),
            Values::Double(v) => Elem::Float(v[i]),
        }
    }

    /// Convert to `target` with `count` elements (`None` = as many as there are): missing
    /// elements are zeros (empty strings), extra ones dropped. Rules follow RSRV's dbConvert:
    /// C casts between numbers (floats truncate toward zero), numbers → strings with PREC,
    /// enum → its choice string, a char array → string is its NUL-terminated text, strings →
    /// numbers are parsed (an enum also accepts a choice string).
    pub fn convert(
        &self,
        target: NativeType,
        count: Option<usize>,
        fmt: &Format<'_>,
    ) -> Result<Values, ConvError> {
        let n = count.unwrap_or_else(|| self.len());
        let have = self.len().min(n);
        // Whole-array special cases first.
        if target == NativeType::String {
            if let Values::Char(c) = self {
                let end = c.iter().position(|&b| b == 0).unwrap_or(c.len());
                let mut out = vec![String::new(); count.unwrap_or(1)];
                if let Some(first) = out.first_mut() {
                    *first = String::from_utf8_lossy(&c[..end]).into_owned();
                }
                return Ok(Values::String(out));
            }
        }
        if target == NativeType::Char {
            if let Values::String(s) = self {
                // A string into a char array stores its text (what DBR_STRING puts into a
                // char waveform do); parsing a number would lose it.
                if count.is_none_or(|c| c > 1) {
                    let mut b = s.first().map(|s| s.as_bytes().to_vec()).unwrap_or_default();
                    b.push(0);
                    let n = count.unwrap_or(b.len());
                    b.resize(n, 0);
                    return Ok(Values::Char(b));
                }
            }
        }
        let src_is_enum = matches!(self, Values::Enum(_));
        macro_rules! numeric {
            ($variant:ident, $t:ty, $from_f:expr) => {{
                let mut v: Vec<$t> = Vec::with_capacity(n);
                for i in 0..have {
                    v.push(match self.elem(i) {
                        Elem::Int(x) => x as $t,
                        Elem::Float(x) => $from_f(x),
                        Elem::Str(s) => match parse_number(s, target, fmt)? {
                            Elem::Int(x) => x as $t,
                            Elem::Float(x) => $from_f(x),
                            Elem::Str(_) => 0 as $t,
                        },
                    });
                }
                v.resize(n, 0 as $t);
                Values::$variant(v)
            }};
        }
        Ok(match target {
            NativeType::String => {
                let mut v = Vec::with_capacity(n);
                for i in 0..have {
                    v.push(match self.elem(i) {
                        Elem::Int(x) if src_is_enum => enum_text(x, fmt.enum_strings),
                        Elem::Int(x) => x.to_string(),
                        Elem::Float(x) => format_float(x, fmt.precision),
                        Elem::Str(s) => s.to_owned(),
                    });
                }
                v.resize(n, String::new());
                Values::String(v)
            }
            NativeType::Short => numeric!(Short, i16, |x: f64| x as i64 as i16),
            NativeType::Float => numeric!(Float, f32, |x: f64| x as f32),
            NativeType::Enum => numeric!(Enum, u16, |x: f64| x as i64 as u16),
            NativeType::Char => numeric!(Char, u8, |x: f64| x as i64 as u8),
            NativeType::Long => numeric!(Long, i32, |x: f64| x as i64 as i32),
            NativeType::Double => numeric!(Double, f64, |x: f64| x),
        })
    }
}

fn enum_text(x: i64, choices: &[String]) -> String {
    match usize::try_from(x).ok().and_then(|i| choices.get(i)) {
        Some(s) if !s.is_empty() => s.clone(),
        _ => x.to_string(),
    }
}

/// A string as a number for `target`: an enum accepts a choice string first; empty = 0.
fn parse_number<'a>(
    s: &'a str,
    target: NativeType,
    fmt: &Format<'_>,
) -> Result<Elem<'a>, ConvError> {
    if target == NativeType::Enum {
        if let Some(i) = fmt.enum_strings.iter().position(|c| c == s) {
            return Ok(Elem::Int(i as i64));
        }
    }
    let t = s.trim();
    if t.is_empty() {
        return Ok(Elem::Int(0));
    }
    if let Ok(i) = t.parse::<i64>() {
        return Ok(Elem::Int(i));
    }
    if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        if let Ok(i) = i64::from_str_radix(h, 16) {
            return Ok(Elem::Int(i));
        }
    }
    match t.parse::<f64>() {
        Ok(f) if target.is_float() || f.is_finite() => Ok(Elem::Float(f)),
        _ if target == NativeType::Enum => Err(ConvError::NoSuchChoice(s.to_owned())),
        _ => Err(ConvError::NotANumber(s.to_owned())),
    }
}

/// `%.{prec}f` like dbConvert with PREC (exponent form when that would not fit 39 chars).
pub fn format_float(x: f64, precision: i16) -> String {
    let p = usize::try_from(precision.clamp(0, 17)).unwrap_or(0);
    let s = format!("{x:.p$}");
    if s.len() < MAX_STRING_SIZE {
        s
    } else {
        format!("{x:.p$e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(p: i16) -> Format<'static> {
        Format {
            precision: p,
            enum_strings: &[],
        }
    }

    #[test]
    fn numbers_to_strings_use_precision() {
        let v = Values::Double(vec![1.23456, -2.0]);
        let s = v.convert(NativeType::String, None, &fmt(3)).unwrap();
        assert_eq!(s, Values::String(vec!["1.235".into(), "-2.000".into()]));
        let v = Values::Long(vec![42]);
        assert_eq!(
            v.convert(NativeType::String, None, &fmt(3)).unwrap(),
            Values::String(vec!["42".into()])
        );
        assert!(format_float(1e300, 2).contains('e'));
    }

    #[test]
    fn enum_and_choices() {
        let choices: Vec<String> = vec!["Off".into(), "On".into()];
        let f = Format {
            precision: 0,
            enum_strings: &choices,
        };
        let v = Values::Enum(vec![1]);
        assert_eq!(
            v.convert(NativeType::String, None, &f).unwrap(),
            Values::String(vec!["On".into()])
        );
        let s = Values::String(vec!["Off".into()]);
        assert_eq!(
            s.convert(NativeType::Enum, None, &f).unwrap(),
            Values::Enum(vec![0])
        );
        let s = Values::String(vec!["1".into()]);
        assert_eq!(
            s.convert(NativeType::Enum, None, &f).unwrap(),
            Values::Enum(vec![1])
        );
        let s = Values::String(vec!["Maybe".into()]);
        assert!(s.convert(NativeType::Enum, None, &f).is_err());
        // Out-of-range index reads back as the number.
        assert_eq!(
            Values::Enum(vec![7])
                .convert(NativeType::String, None, &f)
                .unwrap(),
            Values::String(vec!["7".into()])
        );
    }

    #[test]
    fn c_casts_between_numbers() {
        let v = Values::Double(vec![2.7, -2.7, 1e12, f64::NAN]);
        assert_eq!(
            v.convert(NativeType::Long, None, &fmt(0)).unwrap(),
            Values::Long(vec![2, -2, (1e12 as i64) as i32, 0])
        );
        let v = Values::Long(vec![70000, -1]);
        assert_eq!(
            v.convert(NativeType::Short, None, &fmt(0)).unwrap(),
            Values::Short(vec![70000i64 as i16, -1])
        );
        assert_eq!(
            v.convert(NativeType::Char, None, &fmt(0)).unwrap(),
            Values::Char(vec![70000i64 as u8, 255])
        );
    }

    #[test]
    fn strings_parse_or_fail() {
        let s = Values::String(vec![" 3.5 ".into()]);
        assert_eq!(
            s.convert(NativeType::Double, None, &fmt(0)).unwrap(),
            Values::Double(vec![3.5])
        );
        assert_eq!(
            s.convert(NativeType::Long, None, &fmt(0)).unwrap(),
            Values::Long(vec![3])
        );
        let s = Values::String(vec!["abc".into()]);
        assert!(s.convert(NativeType::Double, None, &fmt(0)).is_err());
        let s = Values::String(vec!["0x10".into()]);
        assert_eq!(
            s.convert(NativeType::Short, None, &fmt(0)).unwrap(),
            Values::Short(vec![16])
        );
    }

    #[test]
    fn char_text_both_ways() {
        let c = Values::Char(b"/tmp/x\0junk".to_vec());
        assert_eq!(
            c.convert(NativeType::String, Some(1), &fmt(0)).unwrap(),
            Values::String(vec!["/tmp/x".into()])
        );
        let s = Values::String(vec!["/data".into()]);
        assert_eq!(
            s.convert(NativeType::Char, Some(8), &fmt(0)).unwrap(),
            Values::Char(b"/data\0\0\0".to_vec())
        );
        assert_eq!(
            s.convert(NativeType::Char, None, &fmt(0)).unwrap(),
            Values::Char(b"/data\0".to_vec())
        );
    }

    #[test]
    fn padding_and_truncation() {
        let v = Values::Short(vec![1, 2, 3]);
        assert_eq!(
            v.convert(NativeType::Short, Some(5), &fmt(0)).unwrap(),
            Values::Short(vec![1, 2, 3, 0, 0])
        );
        assert_eq!(
            v.convert(NativeType::Double, Some(2), &fmt(0)).unwrap(),
            Values::Double(vec![1.0, 2.0])
        );
    }

    #[test]
    fn shared_values() {
        let data: Vec<u8> = [1i16, -2, 3].iter().flat_map(|x| x.to_ne_bytes()).collect();
        let v = CaValue::Shared {
            ty: NativeType::Short,
            bytes: Arc::new(data),
        };
        assert_eq!(v.count(), 3);
        assert_eq!(v, CaValue::Short(vec![1, -2, 3]));
        assert_eq!(v.as_f64(), Some(1.0));
    }
}
