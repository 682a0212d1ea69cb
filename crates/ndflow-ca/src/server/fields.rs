//! What a channel shows: the PV itself (`NAME` or `NAME.VAL`) or one of the record fields the
//! crate serves from [`PvMeta`] (`.DESC .EGU .NAME .RTYP .PREC .HOPR .LOPR .DRVH .DRVL .HIHI
//! .HIGH .LOW .LOLO .SEVR .STAT`, and `.NELM .NORD` for arrays), and the encoding of a DBR reply for a channel.

use std::sync::Arc;

use crate::dbr::{self, DbrInfo, DbrType};
use crate::header::{eca, Header, DBE_ALARM, DBE_LOG, DBE_PROPERTY, DBE_VALUE};
use crate::pv::{CaPv, PvMeta, PvProvider, Snapshot, WireValues};
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
    Hihi,
    High,
    Low,
    Lolo,
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
            "HIHI" => Field::Hihi,
            "HIGH" => Field::High,
            "LOW" => Field::Low,
            "LOLO" => Field::Lolo,
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
            info.upper_alarm_limit = m.alarm_limits.hihi;
            info.upper_warning_limit = m.alarm_limits.high;
            info.lower_warning_limit = m.alarm_limits.low;
            info.lower_alarm_limit = m.alarm_limits.lolo;
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
        Field::Hopr
        | Field::Lopr
        | Field::Drvh
        | Field::Drvl
        | Field::Hihi
        | Field::High
        | Field::Low
        | Field::Lolo => {
            let x = match field {
                Field::Hopr => m.display_high,
                Field::Lopr => m.display_low,
                Field::Drvh => m.control_high,
                Field::Hihi => m.alarm_limits.hihi,
                Field::High => m.alarm_limits.high,
                Field::Low => m.alarm_limits.low,
                Field::Lolo => m.alarm_limits.lolo,
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

/// Values of at least this many bytes are put in wire order once per snapshot and shared by
/// every sender (smaller ones cost less to encode than to cache).
pub(crate) const SHARE_BYTES: usize = 16 * 1024;

/// Whether `value` is an array big enough to share its wire-order elements.
pub(crate) fn is_large(value: &CaValue) -> bool {
    !matches!(value.native_type(), NativeType::String | NativeType::Enum)
        && value.count() * value.native_type().elem_size() >= SHARE_BYTES
}

/// The elements of `snap`'s value in wire order, made on first use and kept with the
/// snapshot; `None` for strings, enums and small values.
pub(crate) fn wire_values(snap: &Snapshot) -> Option<&Arc<WireValues>> {
    if !is_large(&snap.value) {
        return None;
    }
    Some(snap.wire.get_or_init(|| Arc::new(to_wire(&snap.value))))
}

/// One pass over the elements: `to_be` over typed slices, which LLVM turns into vector
/// byte shuffles (a 1 Mpx UInt16 frame is swapped at memory speed).
fn to_wire(value: &CaValue) -> WireValues {
    // Generic over the functions (not `fn` pointers) so that they inline into the loop.
    fn typed<T: bytemuck::Pod, const N: usize>(
        b: &[u8],
        be: impl Fn(T) -> T,
        from: impl Fn([u8; N]) -> T,
    ) -> Vec<T> {
        let b = &b[..b.len() / N * N];
        match bytemuck::try_cast_slice::<u8, T>(b) {
            Ok(v) => v.iter().map(|&x| be(x)).collect(),
            // An unaligned buffer: element by element.
            Err(_) => b
                .chunks_exact(N)
                .map(|c| {
                    let mut a = [0u8; N];
                    a.copy_from_slice(c);
                    be(from(a))
                })
                .collect(),
        }
    }
    match value {
        CaValue::Shared { ty, bytes } => {
            let b = (**bytes).as_ref();
            match ty.elem_size() {
                2 => WireValues::U16(typed(b, u16::to_be, u16::from_ne_bytes)),
                4 => WireValues::U32(typed(b, u32::to_be, u32::from_ne_bytes)),
                8 => WireValues::U64(typed(b, u64::to_be, u64::from_ne_bytes)),
                // Bytes need no swap: the caller's buffer itself goes on the wire.
                _ => WireValues::Same(Arc::clone(bytes)),
            }
        }
        CaValue::Short(v) => WireValues::U16(v.iter().map(|&x| (x as u16).to_be()).collect()),
        CaValue::Float(v) => WireValues::U32(v.iter().map(|x| x.to_bits().to_be()).collect()),
        CaValue::Long(v) => WireValues::U32(v.iter().map(|&x| (x as u32).to_be()).collect()),
        CaValue::Double(v) => WireValues::U64(v.iter().map(|x| x.to_bits().to_be()).collect()),
        CaValue::Char(v) => WireValues::Bytes(v.clone()),
        CaValue::Enum(x) => WireValues::U16(vec![x.to_be()]),
        CaValue::String(_) => WireValues::Bytes(Vec::new()),
    }
}

/// A reply whose values are `snap`'s shared wire-order elements: what [`encode_reply`] gives
/// for the same request, as a header and DBR prefix (`head`), `len` bytes of `body`, then
/// `zeros` zero bytes (missing elements and the padding to 8). `None` when the request is not
/// a same-type read of a large value of the record (the caller encodes it the usual way).
pub(crate) fn shared_reply(
    field: Field,
    record: &str,
    snap: &Snapshot,
    mut h: Header,
    req_count: u32,
    max_bytes: usize,
) -> Option<SharedReply> {
    let ty = DbrType::from_code(h.data_type)?;
    let DbrType::Value(_, target) = ty else {
        return None;
    };
    if field != Field::Val || snap.value.native_type() != target {
        return None;
    }
    let body = wire_values(snap)?;
    let count = snap.value.count();
    let n = if req_count == 0 {
        count
    } else {
        req_count as usize
    };
    let size = ty.size_n(n);
    if size > max_bytes {
        return None;
    }
    let es = target.elem_size();
    let len = (count.min(n) * es).min(body.as_bytes().len());
    h.count = n as u32;
    h.payload_size = crate::header::padded(size) as u32;
    let mut head = Vec::with_capacity(24 + ty.value_offset());
    h.write(&mut head);
    let v = view(field, record, snap);
    dbr::encode_prefix(ty, &v.info, &mut head);
    let zeros = h.payload_size as usize - ty.value_offset() - len;
    Some(SharedReply {
        head,
        body: Arc::clone(body),
        len,
        zeros,
    })
}

/// See [`shared_reply`].
pub(crate) struct SharedReply {
    pub head: Vec<u8>,
    pub body: Arc<WireValues>,
    pub len: usize,
    pub zeros: usize,
}

impl SharedReply {
    /// The whole message in one buffer (tests, the fuzz harness).
    pub(crate) fn to_vec(&self) -> Vec<u8> {
        let mut m = Vec::with_capacity(self.head.len() + self.len + self.zeros);
        m.extend_from_slice(&self.head);
        m.extend_from_slice(&self.body.as_bytes()[..self.len]);
        m.resize(m.len() + self.zeros, 0);
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dbr::Family;
    use crate::header::{cmd, message};
    use std::time::{Duration, UNIX_EPOCH};

    /// The message the per-client path builds for the same request.
    fn reference(snap: &Snapshot, h: Header, req: u32, max: usize) -> Vec<u8> {
        let v = view(Field::Val, "REC", snap);
        let (body, n) = encode_reply(&v, h.data_type, req, max).unwrap();
        message(Header { count: n, ..h }, &body)
    }

    fn snap(value: CaValue) -> Snapshot {
        let mut meta = PvMeta::array(value.native_type(), 1 << 20);
        meta.units = "cts".into();
        meta.precision = 2;
        meta.display_high = 65535.0;
        meta.control_low = -3.0;
        let mut s = Snapshot::new(
            value,
            UNIX_EPOCH + Duration::from_secs(1_800_000_000),
            Arc::new(meta),
        );
        s.status = 3;
        s.severity = 2;
        s
    }

    fn shared(ty: NativeType, ne: Vec<u8>, offset: usize) -> CaValue {
        // `offset` > 0 makes the elements unaligned in their buffer.
        struct Off(Vec<u8>, usize);
        impl AsRef<[u8]> for Off {
            fn as_ref(&self) -> &[u8] {
                &self.0[self.1..]
            }
        }
        let mut b = vec![0xEE; offset];
        b.extend_from_slice(&ne);
        CaValue::Shared {
            ty,
            bytes: Arc::new(Off(b, offset)),
        }
    }

    #[test]
    fn shared_replies_equal_the_per_client_encoding() {
        let n = 40_000usize;
        let shorts: Vec<i16> = (0..n).map(|i| (i as i16).wrapping_mul(7919)).collect();
        let longs: Vec<i32> = (0..n).map(|i| (i as i32).wrapping_mul(-104_729)).collect();
        let floats: Vec<f32> = (0..n).map(|i| i as f32 * 0.37 - 5.0).collect();
        let doubles: Vec<f64> = (0..n).map(|i| i as f64 * -1.25e-3).collect();
        let chars: Vec<u8> = (0..n).map(|i| (i * 31) as u8).collect();
        let values = vec![
            CaValue::Short(shorts.clone()),
            CaValue::Long(longs.clone()),
            CaValue::Float(floats.clone()),
            CaValue::Double(doubles.clone()),
            CaValue::Char(chars.clone()),
            shared(
                NativeType::Short,
                shorts.iter().flat_map(|x| x.to_ne_bytes()).collect(),
                0,
            ),
            shared(
                NativeType::Short,
                shorts.iter().flat_map(|x| x.to_ne_bytes()).collect(),
                1,
            ),
            shared(
                NativeType::Long,
                longs.iter().flat_map(|x| x.to_ne_bytes()).collect(),
                2,
            ),
            shared(
                NativeType::Float,
                floats.iter().flat_map(|x| x.to_ne_bytes()).collect(),
                0,
            ),
            shared(
                NativeType::Double,
                doubles.iter().flat_map(|x| x.to_ne_bytes()).collect(),
                3,
            ),
            shared(NativeType::Char, chars.clone(), 0),
        ];
        let max = 1 << 24;
        for v in values {
            let s = snap(v.clone());
            for fam in Family::ALL {
                let code = DbrType::new(fam, v.native_type()).code();
                // 0 = current count, fewer, more (zero-filled), odd counts (padding).
                for req in [0u32, 1, 3, 1001, n as u32, n as u32 + 5, 70_001] {
                    let h = Header::new(cmd::EVENT_ADD, code, 0, eca::NORMAL, 77);
                    let r = shared_reply(Field::Val, "REC", &s, h, req, max)
                        .unwrap_or_else(|| panic!("{v:?} {fam:?} {req}: not shared"));
                    assert_eq!(
                        r.to_vec(),
                        reference(&s, h, req, max),
                        "{v:?} {fam:?} count {req}"
                    );
                }
            }
            // Every request of this snapshot shares one encoding.
            let a = wire_values(&s).unwrap();
            let b = wire_values(&s).unwrap();
            assert!(Arc::ptr_eq(a, b));
        }
    }

    #[test]
    fn small_other_type_and_field_requests_are_not_shared() {
        let s = snap(CaValue::Short(vec![1; 100]));
        let h = Header::new(cmd::EVENT_ADD, 1, 0, eca::NORMAL, 1);
        assert!(shared_reply(Field::Val, "REC", &s, h, 0, 1 << 20).is_none());
        let s = snap(CaValue::Short(vec![1; 100_000]));
        // Another element type is converted per request.
        let h = Header::new(cmd::EVENT_ADD, 6, 0, eca::NORMAL, 1);
        assert!(shared_reply(Field::Val, "REC", &s, h, 0, 1 << 20).is_none());
        let h = Header::new(cmd::EVENT_ADD, 1, 0, eca::NORMAL, 1);
        assert!(shared_reply(Field::Nord, "REC", &s, h, 0, 1 << 20).is_none());
        // Too large for EPICS_CA_MAX_ARRAY_BYTES: the usual path answers with the error.
        assert!(shared_reply(Field::Val, "REC", &s, h, 0, 1000).is_none());
        assert!(shared_reply(Field::Val, "REC", &s, h, 0, 1 << 20).is_some());
    }
}
