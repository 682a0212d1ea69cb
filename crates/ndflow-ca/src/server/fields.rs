//! What a channel shows: the PV itself (`NAME` or `NAME.VAL`) or one of the record fields the
//! crate serves from [`PvMeta`] (`.DESC .EGU .NAME .RTYP .PREC .HOPR .LOPR .DRVH .DRVL .SEVR
//! .STAT`, and `.NELM .NORD` for arrays), and the encoding of a DBR reply for a channel.

use std::sync::Arc;

use crate::dbr::{self, DbrInfo, DbrType};
use crate::header::{eca, DBE_ALARM, DBE_LOG, DBE_PROPERTY, DBE_VALUE};
use crate::pv::{CaPv, PvMeta, PvProvider, Snapshot};
use crate::value::{CaValue, Format, NativeType, Values};

/// Alarm severity menu (menuAlarmSevr).
pub const SEVERITY_STRINGS: [&str; 4] = ["NO_ALARM", "MINOR", "MAJOR", "INVALID"];
/// Alarm status menu (menuAlarmStat); CA carries the first 16.
pub const STATUS_STRINGS: [&str; 22] = [
    "NO_ALARM",
    "READ",
    "WRITE",
    "HIHI",
    "HIGH",
    "LOLO",
    "LOW",
    "STATE",
    "COS",
    "COMM",
    "TIMEOUT",
    "HWLIMIT",
    "CALC",
    "SCAN",
    "LINK",
    "SOFT",
    "BAD_SUB",
    "UDF",
    "DISABLE",
    "SIMM",
    "READ_ACCESS",
    "WRITE_ACCESS",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Field {
    Val,
    Desc,
    Egu,
    Name,
    Rtyp,
    Prec,
    Hopr,
    Lopr,
    Drvh,
    Drvl,
    Sevr,
    Stat,
    Nelm,
    Nord,
}

impl Field {
    fn parse(s: &str) -> Option<Field> {
        Some(match s {
            "VAL" => Field::Val,
            "DESC" => Field::Desc,
            "EGU" => Field::Egu,
            "NAME" => Field::Name,
            "RTYP" => Field::Rtyp,
            "PREC" => Field::Prec,
            "HOPR" => Field::Hopr,
            "LOPR" => Field::Lopr,
            "DRVH" => Field::Drvh,
            "DRVL" => Field::Drvl,
            "SEVR" => Field::Sevr,
            "STAT" => Field::Stat,
            "NELM" => Field::Nelm,
            "NORD" => Field::Nord,
            _ => return None,
        })
    }

    /// Which of a PV's events change this field, as the events its monitors see.
    pub(crate) fn events(self, ev: u16) -> u16 {
        match self {
            Field::Val => ev,
            Field::Sevr | Field::Stat if ev & DBE_ALARM != 0 => DBE_VALUE | DBE_LOG | DBE_ALARM,
            Field::Nord if ev & DBE_VALUE != 0 => DBE_VALUE | DBE_LOG,
            Field::Sevr | Field::Stat | Field::Nord => 0,
            _ if ev & DBE_PROPERTY != 0 => DBE_VALUE | DBE_LOG | DBE_PROPERTY,
            _ => 0,
        }
    }
}

/// A name resolved to a PV and field.
pub(crate) struct Target {
    pub pv: CaPv,
    pub field: Field,
    /// The record name (without the field).
    pub record: Arc<str>,
}

/// `NAME` as the provider knows it, else `NAME.FIELD` with a field we serve.
pub(crate) fn resolve(provider: &dyn PvProvider, name: &str) -> Option<Target> {
    if let Some(pv) = provider.lookup(name) {
        return Some(Target {
            pv,
            field: Field::Val,
            record: name.into(),
        });
    }
    let (rec, f) = name.rsplit_once('.')?;
    let field = Field::parse(f)?;
    let pv = provider.lookup(rec)?;
    if matches!(field, Field::Nelm | Field::Nord) && pv.meta().max_count <= 1 {
        return None;
    }
    Some(Target {
        pv,
        field,
        record: rec.into(),
    })
}

/// One state of a channel: its value, native type and count, and the DBR metadata.
pub(crate) struct View {
    pub value: CaValue,
    pub native: NativeType,
    pub max_count: usize,
    pub info: DbrInfo,
    /// What DBR_CLASS_NAME answers.
    pub record_type: String,
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().take(16).map(|s| (*s).to_owned()).collect()
}

/// The channel `field` of `record` in the state `snap`.
pub(crate) fn view(field: Field, record: &str, snap: &Snapshot) -> View {
    let m: &PvMeta = &snap.meta;
    let mut info = DbrInfo {
        status: snap.status,
        severity: snap.severity,
        stamp: snap.time,
        ..DbrInfo::default()
    };
    let scalar = |value: CaValue, native: NativeType, info: DbrInfo| View {
        value,
        native,
        max_count: 1,
        info,
        record_type: m.record_type.clone(),
    };
    let s = |x: &str| CaValue::String(x.to_owned());
    match field {
        Field::Val => {
            info.units = m.units.clone();
            info.precision = m.precision;
            info.upper_disp_limit = m.display_high;
            info.lower_disp_limit = m.display_low;
            info.upper_ctrl_limit = m.control_high;
            info.lower_ctrl_limit = m.control_low;
            info.enum_strings = m.enum_strings.iter().take(16).cloned().collect();
            View {
                value: snap.value.clone(),
                native: m.native,
                max_count: m.max_count.max(1),
                info,
                record_type: m.record_type.clone(),
            }
        }
        Field::Desc => scalar(s(&m.description), NativeType::String, info),
        Field::Egu => scalar(s(&m.units), NativeType::String, info),
        Field::Name => scalar(s(record), NativeType::String, info),
        Field::Rtyp => scalar(s(&m.record_type), NativeType::String, info),
        Field::Prec => scalar(CaValue::Short(vec![m.precision]), NativeType::Short, info),
        Field::Hopr | Field::Lopr | Field::Drvh | Field::Drvl => {
            let x = match field {
                Field::Hopr => m.display_high,
                Field::Lopr => m.display_low,
                Field::Drvh => m.control_high,
                _ => m.control_low,
            };
            info.precision = m.precision;
            info.units = m.units.clone();
            scalar(CaValue::Double(vec![x]), NativeType::Double, info)
        }
        Field::Sevr => {
            info.enum_strings = strings(&SEVERITY_STRINGS);
            scalar(CaValue::Enum(snap.severity), NativeType::Enum, info)
        }
        Field::Stat => {
            info.enum_strings = strings(&STATUS_STRINGS);
            scalar(CaValue::Enum(snap.status), NativeType::Enum, info)
        }
        Field::Nelm | Field::Nord => {
            let n = if field == Field::Nelm {
                m.max_count
            } else {
                snap.value.count()
            };
            let n = i32::try_from(n).unwrap_or(i32::MAX);
            scalar(CaValue::Long(vec![n]), NativeType::Long, info)
        }
    }
}

/// The payload of a reply with DBR `dbr_code` and `req_count` elements (0 = current count) and
/// the element count to put in its header; `Err(eca status)` when it cannot be served.
pub(crate) fn encode_reply(
    v: &View,
    dbr_code: u16,
    req_count: u32,
    max_bytes: usize,
) -> Result<(Vec<u8>, u32), u32> {
    let ty = DbrType::from_code(dbr_code).ok_or(eca::BADTYPE)?;
    if matches!(ty, DbrType::PutAckt | DbrType::PutAcks) {
        return Err(eca::BADTYPE);
    }
    let target = ty.value_type();
    let n = if req_count == 0 {
        match (&v.value, target) {
            (CaValue::Char(_), NativeType::String) => 1,
            (
                CaValue::Shared {
                    ty: NativeType::Char,
                    ..
                },
                NativeType::String,
            ) => 1,
            _ if matches!(ty, DbrType::ClassName) => 1,
            _ => v.value.count(),
        }
    } else {
        req_count as usize
    };
    let size = ty.size_n(n);
    if size > max_bytes {
        return Err(eca::TOLARGE);
    }
    let mut out = Vec::with_capacity(crate::header::padded(size) + 24);
    if ty == DbrType::ClassName {
        let mut vals = vec![String::new(); n];
        vals[0] = v.record_type.clone();
        dbr::encode(ty, &v.info, &Values::String(vals), &mut out);
        return Ok((out, n as u32));
    }
    dbr::encode_prefix(ty, &v.info, &mut out);
    if !fast_values(&v.value, target, n, &mut out) {
        let fmt = Format {
            precision: v.info.precision,
            enum_strings: &v.info.enum_strings,
        };
        let vals = v
            .value
            .to_values()
            .convert(target, Some(n), &fmt)
            .map_err(|_| eca::GETFAIL)?;
        dbr::encode_values(&vals, &mut out);
    }
    if n == 0 {
        out.resize(out.len() + target.elem_size(), 0);
    }
    Ok((out, n as u32))
}

/// Same-type numeric values written straight to big-endian (no intermediate vectors: the
/// 1M-element image case). `false` = not applicable.
fn fast_values(value: &CaValue, target: NativeType, n: usize, out: &mut Vec<u8>) -> bool {
    if value.native_type() != target || target == NativeType::String {
        return false;
    }
    let es = target.elem_size();
    let start = out.len();
    match value {
        CaValue::Shared { bytes, .. } => {
            let b = (**bytes).as_ref();
            let have = (b.len() / es).min(n);
            out.resize(start + have * es, 0);
            swap_to_be(&b[..have * es], &mut out[start..], es);
        }
        CaValue::Short(v) => v
            .iter()
            .take(n)
            .for_each(|x| out.extend_from_slice(&x.to_be_bytes())),
        CaValue::Float(v) => v
            .iter()
            .take(n)
            .for_each(|x| out.extend_from_slice(&x.to_be_bytes())),
        CaValue::Long(v) => v
            .iter()
            .take(n)
            .for_each(|x| out.extend_from_slice(&x.to_be_bytes())),
        CaValue::Double(v) => v
            .iter()
            .take(n)
            .for_each(|x| out.extend_from_slice(&x.to_be_bytes())),
        CaValue::Char(v) => out.extend_from_slice(&v[..v.len().min(n)]),
        CaValue::Enum(x) => {
            if n > 0 {
                out.extend_from_slice(&x.to_be_bytes())
            }
        }
        CaValue::String(_) => return false,
    }
    out.resize(start + n * es, 0);
    true
}

/// Copies native-endian elements of `es` bytes into `dst` as big-endian, one fixed-width pass
/// the compiler vectorises (a 1 Mpx image is swapped at memory speed, not byte by byte).
fn swap_to_be(src: &[u8], dst: &mut [u8], es: usize) {
    fn each<const N: usize>(src: &[u8], dst: &mut [u8], swap: fn([u8; N]) -> [u8; N]) {
        for (d, s) in dst.chunks_exact_mut(N).zip(src.chunks_exact(N)) {
            let mut a = [0u8; N];
            a.copy_from_slice(s);
            d.copy_from_slice(&swap(a));
        }
    }
    match es {
        2 => each::<2>(src, dst, |a| u16::from_ne_bytes(a).to_be_bytes()),
        4 => each::<4>(src, dst, |a| u32::from_ne_bytes(a).to_be_bytes()),
        8 => each::<8>(src, dst, |a| u64::from_ne_bytes(a).to_be_bytes()),
        _ => dst.copy_from_slice(&src[..dst.len()]),
    }
}
