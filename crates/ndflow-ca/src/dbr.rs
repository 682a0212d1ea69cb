//! DBR payload layouts (db_access.h): plain, STS (+7), TIME (+14), GR (+21), CTRL (+28) of the
//! seven base types, plus PUT_ACKT/PUT_ACKS (35/36), STSACK_STRING (37) and CLASS_NAME (38).
//! The padding fields ("RISC_pad") are reproduced exactly: the value offset is the C struct size
//! minus one element.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::value::{NativeType, Values, MAX_STRING_SIZE};

/// Seconds from the Unix epoch to the EPICS epoch (1990-01-01 UTC).
pub const EPICS_EPOCH_OFFSET: u64 = 631_152_000;
pub const MAX_UNITS_SIZE: usize = 8;
pub const MAX_ENUM_STATES: usize = 16;
pub const MAX_ENUM_STRING_SIZE: usize = 26;

pub const DBR_PUT_ACKT: u16 = 35;
pub const DBR_PUT_ACKS: u16 = 36;
pub const DBR_STSACK_STRING: u16 = 37;
pub const DBR_CLASS_NAME: u16 = 38;

/// The metadata family of a DBR type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    Plain,
    Sts,
    Time,
    Gr,
    Ctrl,
}

impl Family {
    pub const ALL: [Family; 5] = [
        Family::Plain,
        Family::Sts,
        Family::Time,
        Family::Gr,
        Family::Ctrl,
    ];
}

/// A DBR type code understood.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DbrType {
    Value(Family, NativeType),
    PutAckt,
    PutAcks,
    StsAckString,
    ClassName,
}

impl DbrType {
    pub fn from_code(code: u16) -> Option<DbrType> {
        Some(match code {
            0..=34 => {
                let fam = Family::ALL[usize::from(code / 7)];
                DbrType::Value(fam, NativeType::from_code(code % 7)?)
            }
            DBR_PUT_ACKT => DbrType::PutAckt,
            DBR_PUT_ACKS => DbrType::PutAcks,
            DBR_STSACK_STRING => DbrType::StsAckString,
            DBR_CLASS_NAME => DbrType::ClassName,
            _ => return None,
        })
    }

    pub fn new(family: Family, ty: NativeType) -> DbrType {
        DbrType::Value(family, ty)
    }

    pub fn code(self) -> u16 {
        match self {
            DbrType::Value(f, t) => f as u16 * 7 + t.code(),
            DbrType::PutAckt => DBR_PUT_ACKT,
            DbrType::PutAcks => DBR_PUT_ACKS,
            DbrType::StsAckString => DBR_STSACK_STRING,
            DbrType::ClassName => DBR_CLASS_NAME,
        }
    }

    /// The element type of the value part.
    pub fn value_type(self) -> NativeType {
        match self {
            DbrType::Value(_, t) => t,
            DbrType::PutAckt | DbrType::PutAcks => NativeType::Enum,
            DbrType::StsAckString | DbrType::ClassName => NativeType::String,
        }
    }

    /// Bytes before the first value element.
    pub fn value_offset(self) -> usize {
        use Family::*;
        use NativeType::*;
        match self {
            DbrType::Value(Plain, _) => 0,
            DbrType::Value(Sts, Char) => 5,
            DbrType::Value(Sts, Double) => 8,
            DbrType::Value(Sts, _) => 4,
            DbrType::Value(Time, Short | Enum) => 14,
            DbrType::Value(Time, Char) => 15,
            DbrType::Value(Time, Double) => 16,
            DbrType::Value(Time, _) => 12,
            DbrType::Value(Gr | Ctrl, String) => 4,
            DbrType::Value(Gr | Ctrl, Enum) => 6 + MAX_ENUM_STATES * MAX_ENUM_STRING_SIZE,
            DbrType::Value(Gr, Short) => 24,
            DbrType::Value(Ctrl, Short) => 28,
            DbrType::Value(Gr, Float) => 40,
            DbrType::Value(Ctrl, Float) => 48,
            DbrType::Value(Gr, Char) => 19,
            DbrType::Value(Ctrl, Char) => 21,
            DbrType::Value(Gr, Long) => 36,
            DbrType::Value(Ctrl, Long) => 44,
            DbrType::Value(Gr, Double) => 64,
            DbrType::Value(Ctrl, Double) => 80,
            DbrType::PutAckt | DbrType::PutAcks | DbrType::ClassName => 0,
            DbrType::StsAckString => 8,
        }
    }

    /// `dbr_size_n`: the payload (unpadded) for `count` elements (0 counts as one).
    pub fn size_n(self, count: usize) -> usize {
        self.value_offset() + count.max(1) * self.value_type().elem_size()
    }
}

/// Everything a DBR can carry besides the values.
#[derive(Clone, Debug, PartialEq)]
pub struct DbrInfo {
    pub status: u16,
    pub severity: u16,
    pub stamp: SystemTime,
    pub units: String,
    pub precision: i16,
    pub upper_disp_limit: f64,
    pub lower_disp_limit: f64,
    pub upper_alarm_limit: f64,
    pub upper_warning_limit: f64,
    pub lower_warning_limit: f64,
    pub lower_alarm_limit: f64,
    pub upper_ctrl_limit: f64,
    pub lower_ctrl_limit: f64,
    pub enum_strings: Vec<String>,
    /// STSACK_STRING only.
    pub ackt: u16,
    pub acks: u16,
}

impl Default for DbrInfo {
    fn default() -> Self {
        Self {
            status: 0,
            severity: 0,
            stamp: UNIX_EPOCH + Duration::from_secs(EPICS_EPOCH_OFFSET),
            units: String::new(),
            precision: 0,
            upper_disp_limit: 0.0,
            lower_disp_limit: 0.0,
            upper_alarm_limit: 0.0,
            upper_warning_limit: 0.0,
            lower_warning_limit: 0.0,
            lower_alarm_limit: 0.0,
            upper_ctrl_limit: 0.0,
            lower_ctrl_limit: 0.0,
            enum_strings: Vec::new(),
            ackt: 0,
            acks: 0,
        }
    }
}

/// (seconds, nanoseconds) since the EPICS epoch; earlier times clamp to 0.
pub fn to_epics_time(t: SystemTime) -> (u32, u32) {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs().saturating_sub(EPICS_EPOCH_OFFSET);
    if secs == 0 && d.as_secs() < EPICS_EPOCH_OFFSET {
        return (0, 0);
    }
    (u32::try_from(secs).unwrap_or(u32::MAX), d.subsec_nanos())
}

pub fn from_epics_time(secs: u32, nsec: u32) -> SystemTime {
    UNIX_EPOCH
        + Duration::from_secs(u64::from(secs) + EPICS_EPOCH_OFFSET)
        + Duration::from_nanos(u64::from(nsec.min(999_999_999)))
}

/// Append `s` as a fixed `n`-byte NUL-padded field (truncated at a char boundary to n-1 bytes).
pub fn put_fixed(out: &mut Vec<u8>, s: &str, n: usize) {
    let mut end = s.len().min(n.saturating_sub(1));
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    out.extend_from_slice(&s.as_bytes()[..end]);
    out.resize(out.len() + n - end, 0);
}

/// Append the DBR `ty` for `info` and `values` (already of `ty.value_type()`; its length is the
/// element count; an empty vector still occupies one zero element, as `dbr_size_n` says).
pub fn encode(ty: DbrType, info: &DbrInfo, values: &Values, out: &mut Vec<u8>) {
    encode_prefix(ty, info, out);
    encode_values(values, out);
    if values.is_empty() {
        out.resize(out.len() + ty.value_type().elem_size(), 0);
    }
}

/// Append the part of the DBR `ty` before its values (`ty.value_offset()` bytes).
pub fn encode_prefix(ty: DbrType, info: &DbrInfo, out: &mut Vec<u8>) {
    use NativeType as N;
    let start = out.len();
    let i16b = |out: &mut Vec<u8>, v: i16| out.extend_from_slice(&v.to_be_bytes());
    let sts = |out: &mut Vec<u8>| {
        out.extend_from_slice(&info.status.to_be_bytes());
        out.extend_from_slice(&info.severity.to_be_bytes());
    };
    let limits = [
        info.upper_disp_limit,
        info.lower_disp_limit,
        info.upper_alarm_limit,
        info.upper_warning_limit,
        info.lower_warning_limit,
        info.lower_alarm_limit,
        info.upper_ctrl_limit,
        info.lower_ctrl_limit,
    ];
    match ty {
        DbrType::Value(Family::Plain, _) | DbrType::PutAckt | DbrType::PutAcks => {}
        DbrType::ClassName => {}
        DbrType::StsAckString => {
            sts(out);
            out.extend_from_slice(&info.ackt.to_be_bytes());
            out.extend_from_slice(&info.acks.to_be_bytes());
        }
        DbrType::Value(Family::Sts, t) => {
            sts(out);
            match t {
                N::Char => out.push(0),
                N::Double => out.extend_from_slice(&[0; 4]),
                _ => {}
            }
        }
        DbrType::Value(Family::Time, t) => {
            sts(out);
            let (s, ns) = to_epics_time(info.stamp);
            out.extend_from_slice(&s.to_be_bytes());
            out.extend_from_slice(&ns.to_be_bytes());
            match t {
                N::Short | N::Enum => out.extend_from_slice(&[0; 2]),
                N::Char => out.extend_from_slice(&[0; 3]),
                N::Double => out.extend_from_slice(&[0; 4]),
                _ => {}
            }
        }
        DbrType::Value(fam @ (Family::Gr | Family::Ctrl), t) => {
            sts(out);
            let nlim = if fam == Family::Ctrl { 8 } else { 6 };
            let lims = &limits[..nlim];
            match t {
                N::String => {}
                N::Enum => {
                    let n = info.enum_strings.len().min(MAX_ENUM_STATES);
                    i16b(out, n as i16);
                    for k in 0..MAX_ENUM_STATES {
                        let s = info.enum_strings.get(k).map(String::as_str).unwrap_or("");
                        put_fixed(out, s, MAX_ENUM_STRING_SIZE);
                    }
                }
                N::Float | N::Double => {
                    i16b(out, info.precision);
                    out.extend_from_slice(&[0; 2]);
                    put_fixed(out, &info.units, MAX_UNITS_SIZE);
                    for &l in lims {
                        if t == N::Float {
                            out.extend_from_slice(&(l as f32).to_be_bytes());
                        } else {
                            out.extend_from_slice(&l.to_be_bytes());
                        }
                    }
                }
                N::Short | N::Long | N::Char => {
                    put_fixed(out, &info.units, MAX_UNITS_SIZE);
                    for &l in lims {
                        match t {
                            N::Short => i16b(out, l as i16),
                            N::Long => out.extend_from_slice(&(l as i32).to_be_bytes()),
                            _ => out.push(l as i64 as u8),
                        }
                    }
                    if t == N::Char {
                        out.push(0);
                    }
                }
            }
        }
    }
    debug_assert_eq!(out.len() - start, ty.value_offset());
}

/// Append the elements big-endian (strings as 40-byte slots).
pub fn encode_values(values: &Values, out: &mut Vec<u8>) {
    out.reserve(values.len() * values.native_type().elem_size());
    match values {
        Values::String(v) => v.iter().for_each(|s| put_fixed(out, s, MAX_STRING_SIZE)),
        Values::Short(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_be_bytes())),
        Values::Float(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_be_bytes())),
        Values::Enum(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_be_bytes())),
        Values::Char(v) => out.extend_from_slice(v),
        Values::Long(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_be_bytes())),
        Values::Double(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_be_bytes())),
    }
}

/// Why a DBR payload could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DbrError {
    #[error("unknown DBR type {0}")]
    BadType(u16),
    #[error("payload of {have} bytes is too short for {count} elements of DBR type {ty}")]
    Short { ty: u16, count: usize, have: usize },
}

/// Decode a DBR payload of type `code` holding `count` elements.
pub fn decode(code: u16, count: usize, p: &[u8]) -> Result<(DbrInfo, Values), DbrError> {
    use NativeType as N;
    let ty = DbrType::from_code(code).ok_or(DbrError::BadType(code))?;
    let off = ty.value_offset();
    let et = ty.value_type();
    let need = off.saturating_add(count.checked_mul(et.elem_size()).ok_or(DbrError::Short {
        ty: code,
        count,
        have: p.len(),
    })?);
    // libca sends a single DBR_STRING as strlen + 1 bytes (padded to 8), not 40: strings may
    // end early and are padded here.
    let padded;
    let p = if p.len() < need && et == N::String && p.len() > off && count <= 1 {
        padded = [p, &vec![0u8; need - p.len()]].concat();
        &padded[..]
    } else {
        p
    };
    if p.len() < need || p.len() < off {
        return Err(DbrError::Short {
            ty: code,
            count,
            have: p.len(),
        });
    }
    let i16_at = |i: usize| i16::from_be_bytes([p[i], p[i + 1]]);
    let u16_at = |i: usize| u16::from_be_bytes([p[i], p[i + 1]]);
    let u32_at = |i: usize| u32::from_be_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]]);
    let mut info = DbrInfo::default();
    let has_sts = !matches!(
        ty,
        DbrType::Value(Family::Plain, _) | DbrType::PutAckt | DbrType::PutAcks | DbrType::ClassName
    );
    if has_sts {
        info.status = u16_at(0);
        info.severity = u16_at(2);
    }
    match ty {
        DbrType::StsAckString => {
            info.ackt = u16_at(4);
            info.acks = u16_at(6);
        }
        DbrType::Value(Family::Time, _) => info.stamp = from_epics_time(u32_at(4), u32_at(8)),
        DbrType::Value(fam @ (Family::Gr | Family::Ctrl), t) => {
            let nlim = if fam == Family::Ctrl { 8 } else { 6 };
            let mut lims = [0f64; 8];
            match t {
                N::String => {}
                N::Enum => {
                    let n = usize::try_from(i16_at(4)).unwrap_or(0).min(MAX_ENUM_STATES);
                    info.enum_strings = (0..n)
                        .map(|k| {
                            let s = 6 + k * MAX_ENUM_STRING_SIZE;
                            crate::header::payload_str(&p[s..s + MAX_ENUM_STRING_SIZE])
                        })
                        .collect();
                }
                N::Float | N::Double => {
                    info.precision = i16_at(4);
                    info.units = crate::header::payload_str(&p[8..16]);
                    for (k, l) in lims.iter_mut().take(nlim).enumerate() {
                        *l = if t == N::Float {
                            let i = 16 + 4 * k;
                            f64::from(f32::from_be_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]]))
                        } else {
                            let i = 16 + 8 * k;
                            let mut b = [0u8; 8];
                            b.copy_from_slice(&p[i..i + 8]);
                            f64::from_be_bytes(b)
                        };
                    }
                }
                N::Short | N::Long | N::Char => {
                    info.units = crate::header::payload_str(&p[4..12]);
                    for (k, l) in lims.iter_mut().take(nlim).enumerate() {
                        *l = match t {
                            N::Short => f64::from(i16_at(12 + 2 * k)),
                            N::Long => f64::from(u32_at(12 + 4 * k) as i32),
                            _ => f64::from(p[12 + k]),
                        };
                    }
                }
            }
            info.upper_disp_limit = lims[0];
            info.lower_disp_limit = lims[1];
            info.upper_alarm_limit = lims[2];
            info.upper_warning_limit = lims[3];
            info.lower_warning_limit = lims[4];
            info.lower_alarm_limit = lims[5];
            info.upper_ctrl_limit = lims[6];
            info.lower_ctrl_limit = lims[7];
        }
        _ => {}
    }
    let body = &p[off..need];
    Ok((info, decode_values(et, body)))
}

/// Big-endian elements of `ty` (strings as 40-byte slots).
pub fn decode_values(ty: NativeType, b: &[u8]) -> Values {
    Values::from_be_bytes(ty, b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Format;

    /// Value offsets from db_access.h (sizeof(struct) - sizeof(value)).
    #[test]
    fn value_offsets_match_db_access_h() {
        let expect: [(u16, usize, usize); 39] = [
            // (code, offset, dbr_size for one element)
            (0, 0, 40),
            (1, 0, 2),
            (2, 0, 4),
            (3, 0, 2),
            (4, 0, 1),
            (5, 0, 4),
            (6, 0, 8),
            (7, 4, 44),
            (8, 4, 6),
            (9, 4, 8),
            (10, 4, 6),
            (11, 5, 6),
            (12, 4, 8),
            (13, 8, 16),
            (14, 12, 52),
            (15, 14, 16),
            (16, 12, 16),
            (17, 14, 16),
            (18, 15, 16),
            (19, 12, 16),
            (20, 16, 24),
            (21, 4, 44),
            (22, 24, 26),
            (23, 40, 44),
            (24, 422, 424),
            (25, 19, 20),
            (26, 36, 40),
            (27, 64, 72),
            (28, 4, 44),
            (29, 28, 30),
            (30, 48, 52),
            (31, 422, 424),
            (32, 21, 22),
            (33, 44, 48),
            (34, 80, 88),
            (35, 0, 2),
            (36, 0, 2),
            (37, 8, 48),
            (38, 0, 40),
        ];
        for (code, off, size) in expect {
            let t = DbrType::from_code(code).unwrap();
            assert_eq!(t.code(), code);
            assert_eq!(t.value_offset(), off, "offset of {code}");
            assert_eq!(t.size_n(1), size, "size of {code}");
        }
        assert!(DbrType::from_code(39).is_none());
    }

    fn sample_info() -> DbrInfo {
        DbrInfo {
            status: 3,
            severity: 2,
            stamp: from_epics_time(1_000_000, 123_456_789),
            units: "mm".into(),
            precision: 4,
            upper_disp_limit: 100.0,
            lower_disp_limit: -100.0,
            upper_alarm_limit: 90.0,
            upper_warning_limit: 80.0,
            lower_warning_limit: -80.0,
            lower_alarm_limit: -90.0,
            upper_ctrl_limit: 50.0,
            lower_ctrl_limit: -50.0,
            enum_strings: vec!["Off".into(), "On".into()],
            ackt: 0,
            acks: 0,
        }
    }

    fn values_of(t: NativeType) -> Values {
        let src = Values::Double(vec![1.0, 2.0, 3.0]);
        src.convert(t, None, &Format::default()).unwrap()
    }

    /// Every family × type round-trips through encode/decode with the metadata it carries.
    #[test]
    fn every_family_and_type_round_trips() {
        let info = sample_info();
        for fam in Family::ALL {
            for t in NativeType::ALL {
                let ty = DbrType::new(fam, t);
                let vals = values_of(t);
                let mut out = Vec::new();
                encode(ty, &info, &vals, &mut out);
                assert_eq!(out.len(), ty.size_n(vals.len()), "{ty:?}");
                let (got, v) = decode(ty.code(), vals.len(), &out).unwrap();
                assert_eq!(v, vals, "{ty:?}");
                if fam != Family::Plain {
                    assert_eq!((got.status, got.severity), (3, 2), "{ty:?}");
                }
                if fam == Family::Time {
                    assert_eq!(got.stamp, info.stamp);
                }
                let has_limits = matches!(fam, Family::Gr | Family::Ctrl)
                    && !matches!(t, NativeType::String | NativeType::Enum);
                if has_limits {
                    assert_eq!(got.units, "mm");
                    let lo = if t == NativeType::Char { 156.0 } else { -100.0 };
                    assert_eq!((got.upper_disp_limit, got.lower_disp_limit), (100.0, lo));
                    if fam == Family::Ctrl {
                        assert_eq!(got.upper_ctrl_limit, 50.0, "{ty:?}");
                    }
                }
                if matches!(fam, Family::Gr | Family::Ctrl) && t == NativeType::Enum {
                    assert_eq!(got.enum_strings, info.enum_strings);
                }
                if matches!(fam, Family::Gr | Family::Ctrl)
                    && t.elem_size() >= 4
                    && t != NativeType::Long
                    && t != NativeType::String
                {
                    assert_eq!(got.precision, 4, "{ty:?}");
                }
            }
        }
    }

    #[test]
    fn exact_bytes_of_some_layouts() {
        let info = sample_info();
        // TIME_DOUBLE: status, severity, secs, nsec, 4-byte pad, value.
        let mut out = Vec::new();
        encode(
            DbrType::new(Family::Time, NativeType::Double),
            &info,
            &Values::Double(vec![1.5]),
            &mut out,
        );
        let mut want = vec![0, 3, 0, 2];
        want.extend_from_slice(&1_000_000u32.to_be_bytes());
        want.extend_from_slice(&123_456_789u32.to_be_bytes());
        want.extend_from_slice(&[0; 4]);
        want.extend_from_slice(&1.5f64.to_be_bytes());
        assert_eq!(out, want);
        // TIME_CHAR: 2 + 1 pad bytes.
        out.clear();
        encode(
            DbrType::new(Family::Time, NativeType::Char),
            &info,
            &Values::Char(vec![7]),
            &mut out,
        );
        assert_eq!(&out[12..], &[0, 0, 0, 7]);
        // GR_ENUM: no_str then 16 × 26 strings.
        out.clear();
        encode(
            DbrType::new(Family::Gr, NativeType::Enum),
            &info,
            &Values::Enum(vec![1]),
            &mut out,
        );
        assert_eq!(&out[4..6], &[0, 2]);
        assert_eq!(&out[6..9], b"Off");
        assert_eq!(&out[32..34], b"On");
        assert_eq!(&out[422..], &[0, 1]);
        // CTRL_CHAR: 8 one-byte limits then a pad byte.
        out.clear();
        encode(
            DbrType::new(Family::Ctrl, NativeType::Char),
            &info,
            &Values::Char(vec![9]),
            &mut out,
        );
        assert_eq!(&out[12..22], &[100, 156, 90, 80, 176, 166, 50, 206, 0, 9]);
        // Strings: 40 bytes, truncated to 39 + NUL.
        out.clear();
        let long = "x".repeat(50);
        encode(
            DbrType::new(Family::Plain, NativeType::String),
            &info,
            &Values::String(vec![long]),
            &mut out,
        );
        assert_eq!(out.len(), 40);
        assert_eq!(out[39], 0);
        assert_eq!(out[38], b'x');
    }

    #[test]
    fn class_name_and_stsack() {
        let mut out = Vec::new();
        let info = sample_info();
        encode(
            DbrType::ClassName,
            &info,
            &Values::String(vec!["ao".into()]),
            &mut out,
        );
        assert_eq!(out.len(), 40);
        let (_, v) = decode(38, 1, &out).unwrap();
        assert_eq!(v, Values::String(vec!["ao".into()]));
        out.clear();
        encode(
            DbrType::StsAckString,
            &info,
            &Values::String(vec!["1.0".into()]),
            &mut out,
        );
        assert_eq!(out.len(), 48);
    }

    #[test]
    fn short_payloads_are_errors() {
        for code in 0..=38u16 {
            let t = DbrType::from_code(code).unwrap();
            let full = vec![0u8; t.size_n(3)];
            assert!(decode(code, 3, &full).is_ok());
            assert!(decode(code, 3, &full[..full.len() - 1]).is_err());
            if t.value_type() == NativeType::String {
                // One string may be shorter than 40 bytes (libca sends strlen + 1).
                let p = [&vec![0u8; t.value_offset()][..], b"abc\0"].concat();
                let (_, v) = decode(code, 1, &p).unwrap();
                assert_eq!(v, Values::String(vec!["abc".into()]));
                assert!(decode(code, 1, &p[..t.value_offset()]).is_err());
            }
            assert!(decode(code, usize::MAX, &full).is_err());
        }
        assert!(decode(39, 1, &[0; 64]).is_err());
    }

    #[test]
    fn epics_time() {
        let t = UNIX_EPOCH + Duration::new(EPICS_EPOCH_OFFSET + 5, 7);
        assert_eq!(to_epics_time(t), (5, 7));
        assert_eq!(to_epics_time(UNIX_EPOCH), (0, 0));
        assert_eq!(from_epics_time(5, 7), t);
    }
}
