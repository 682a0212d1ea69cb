//! Stream v2: one CBOR message per ZeroMQ part (DECTRIS `stream_v2`).
//!
//! Each part is a map with text keys, optionally behind the self-describe tag 55799. The
//! `type` key (`start` / `image` / `end`) is found first in its own pass, so it may stand
//! anywhere in the map; that pass also proves the whole message well-formed and no deeper
//! than [`MAX_DEPTH`] before anything is built. Unknown keys are skipped, whatever they hold.
//! Lengths from the message are never used to allocate: every item read consumes input, so
//! a length of 2^60 just runs into the end of the part.
//!
//! Arrays:
//! * Images are tag 40 `[[height, width], typed array]` (row-major), with a little-endian
//!   RFC 8746 typed-array tag 64 (u8), 68 (u8 clamped), 69 (u16), 70 (u32), 72 (i8),
//!   77 (i16), 78 (i32) giving the pixel type. The tag's content is a definite byte string
//!   (→ [`Encoding::Raw`], zero-copy) or DECTRIS tag 56500 `[algorithm, modifier, bytes]`:
//!   `"bslz4"` → [`Encoding::BsLz4`] (modifier = element size, must match the typed-array
//!   tag), `"lz4"` → [`Encoding::Lz4Hdf5`]. The frame's bytes are a slice of the part.
//! * Header arrays (`flatfield`, `pixel_mask`: channel → array; and
//!   `countrate_correction_lookup_table`) also take 71 (u64), 79 (i64), 85 (f32), 86 (f64),
//!   and may be a bare typed array (1-D). A compressed payload is decompressed into owned
//!   bytes. Their dims are reversed to NDArray order. Names: `flatfield/<channel>`,
//!   `pixel_mask/<channel>`, `countrate_table`.
//!
//! Refused, by choice: tag 1040 (column-major; never seen in data) → `Malformed`;
//! big-endian typed arrays (65–67, 73–75, 80–83) and f16/f128 → `UnknownType`;
//! a tag-40 array whose content is an untagged byte string → `UnknownType` (the element
//! type would be a guess); indefinite-length byte strings → `Malformed` (not zero-copy);
//! trailing bytes after the map → `Malformed`.
//!
//! Start fields other than the structural ones go to [`Start::meta`]: integers → `Int`
//! (above `i64::MAX` → `Float`), floats → `Float`, bools, text and tag-0 dates → `Text`,
//! nested maps flattened with `/` (`goniometer/omega/start`), arrays → `Text` in CBOR
//! diagnostic notation (`[0.0, 0.0, 0.1]`); null, byte strings and other tags are skipped.
//! `user_data` becomes the appendix: text as is, anything else in diagnostic notation.
//! Required: `series_id` (all), `image_id` and `data` (image).

use super::encoding::{
    array_len, at_part, decompress_owned, frame_len, kind_size, pixel_from_name,
};
use super::{
    ArrayKind, Encoding, Event, Frame, HeaderArray, Image, MetaValue, PixelType, Rational, Start,
    StreamError,
};
use bytes::Bytes;
use minicbor::data::Type;
use minicbor::Decoder;

/// The deepest nesting of arrays, maps and tags accepted.
pub const MAX_DEPTH: usize = 16;
/// The most dimensions of a multi-dimensional array.
const MAX_DIMS: usize = 4;

const TAG_SELF_DESCRIBE: u64 = 55799;
const TAG_DATE: u64 = 0;
const TAG_EPOCH: u64 = 1;
const TAG_ROW_MAJOR: u64 = 40;
const TAG_COLUMN_MAJOR: u64 = 1040;
const TAG_COMPRESSED: u64 = 56500;

type R<T> = Result<T, StreamError>;

fn malformed(detail: impl Into<String>) -> StreamError {
    StreamError::Malformed {
        what: "v2 message",
        detail: detail.into(),
    }
}

fn cbor(e: minicbor::decode::Error) -> StreamError {
    StreamError::Malformed {
        what: "v2 CBOR",
        detail: e.to_string(),
    }
}

fn too_deep() -> StreamError {
    malformed(format!("nested deeper than {MAX_DEPTH} levels"))
}

/// Decodes one ZeroMQ message, each part one CBOR message, appending one event per part.
/// Events decoded before an error stay in `out`; the error names the part.
pub fn decode_message(parts: &[Bytes], out: &mut Vec<Event>) -> Result<(), StreamError> {
    for (i, part) in parts.iter().enumerate() {
        out.push(decode_part(part).map_err(|e| at_part(e, i))?);
    }
    Ok(())
}

fn decode_part(part: &Bytes) -> R<Event> {
    let mut d = Decoder::new(part);
    if d.datatype().map_err(cbor)? == Type::Tag {
        let t = d.tag().map_err(cbor)?.as_u64();
        if t != TAG_SELF_DESCRIBE {
            return Err(malformed(format!("message starts with tag {t}")));
        }
    }
    let body = d.position();
    let mut ty = None;
    each_entry(&mut d, 1, |d, k| {
        if k == "type" && ty.is_none() {
            ty = Some(d.str().map_err(cbor)?);
            Ok(())
        } else {
            skip(d, 2)
        }
    })?;
    if d.position() != part.len() {
        return Err(malformed(format!(
            "{} trailing bytes after the message",
            part.len() - d.position()
        )));
    }
    d.set_position(body);
    match ty {
        Some("start") => start(&mut d, part).map(Event::Start),
        Some("image") => image(&mut d, part).map(Event::Image),
        Some("end") => end(&mut d),
        Some(other) => Err(malformed(format!(
            "unknown type '{}'",
            other.chars().take(64).collect::<String>()
        ))),
        None => Err(malformed("no 'type' key")),
    }
}

/// Calls `f` with each text key of the map at the decoder, `f` consuming the value.
/// Entries whose key is not a definite text string are skipped.
fn each_entry<'b>(
    d: &mut Decoder<'b>,
    depth: usize,
    mut f: impl FnMut(&mut Decoder<'b>, &'b str) -> R<()>,
) -> R<()> {
    if depth > MAX_DEPTH {
        return Err(too_deep());
    }
    let len = d.map().map_err(cbor)?;
    each_item(d, len, |d| {
        if d.datatype().map_err(cbor)? == Type::String {
            let k = d.str().map_err(cbor)?;
            f(d, k)
        } else {
            skip(d, depth + 1)?;
            skip(d, depth + 1)
        }
    })
}

/// Calls `f` once per item of a container of `len` items (`None`: indefinite, up to its break).
fn each_item<'b>(
    d: &mut Decoder<'b>,
    len: Option<u64>,
    mut f: impl FnMut(&mut Decoder<'b>) -> R<()>,
) -> R<()> {
    let mut n = 0u64;
    loop {
        match len {
            Some(l) if n >= l => return Ok(()),
            None if at_break(d)? => return Ok(()),
            _ => {}
        }
        n += 1;
        f(d)?;
    }
}

/// If the decoder is at a break byte, consumes it and says so.
fn at_break(d: &mut Decoder<'_>) -> R<bool> {
    if d.datatype().map_err(cbor)? == Type::Break {
        d.set_position(d.position() + 1);
        Ok(true)
    } else {
        Ok(false)
    }
}

/// Walks the elements of the array at the decoder with `f`.
fn each_element<'b>(
    d: &mut Decoder<'b>,
    depth: usize,
    f: impl FnMut(&mut Decoder<'b>) -> R<()>,
) -> R<()> {
    if depth > MAX_DEPTH {
        return Err(too_deep());
    }
    let len = d.array().map_err(cbor)?;
    each_item(d, len, f)
}

/// Skips one item of any type, refusing nesting deeper than [`MAX_DEPTH`].
fn skip(d: &mut Decoder<'_>, depth: usize) -> R<()> {
    if depth > MAX_DEPTH {
        return Err(too_deep());
    }
    match d.datatype().map_err(cbor)? {
        Type::Array | Type::ArrayIndef => each_element(d, depth, |d| skip(d, depth + 1)),
        Type::Map | Type::MapIndef => each_entry(d, depth, |d, _| skip(d, depth + 1)),
        Type::Tag => {
            d.tag().map_err(cbor)?;
            skip(d, depth + 1)
        }
        Type::Break => Err(malformed("unexpected break")),
        Type::Unknown(b) => Err(malformed(format!("invalid CBOR byte {b:#04x}"))),
        _ => d.skip().map_err(cbor),
    }
}

fn read_u64(d: &mut Decoder<'_>, what: &str) -> R<u64> {
    d.u64()
        .map_err(|e| malformed(format!("'{what}' is not an unsigned integer: {e}")))
}

fn read_usize(d: &mut Decoder<'_>, what: &str) -> R<usize> {
    usize::try_from(read_u64(d, what)?)
        .map_err(|_| StreamError::BadSize(format!("'{what}' too large")))
}

fn read_text(d: &mut Decoder<'_>, what: &str) -> R<String> {
    d.str()
        .map(str::to_owned)
        .map_err(|e| malformed(format!("'{what}' is not text: {e}")))
}

/// An IEEE half float.
fn half(bits: u16) -> f64 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((bits >> 10) & 0x1f);
    let frac = f64::from(bits & 0x3ff);
    match exp {
        0 => sign * frac * 2f64.powi(-24),
        31 if frac == 0.0 => sign * f64::INFINITY,
        31 => f64::NAN,
        e => sign * (1.0 + frac / 1024.0) * 2f64.powi(e - 15),
    }
}

/// A number of any CBOR kind as `f64`.
fn read_f64(d: &mut Decoder<'_>, what: &str) -> R<f64> {
    match d.datatype().map_err(cbor)? {
        Type::U8 | Type::U16 | Type::U32 | Type::U64 => Ok(d.u64().map_err(cbor)? as f64),
        Type::I8 | Type::I16 | Type::I32 | Type::I64 => Ok(d.i64().map_err(cbor)? as f64),
        Type::Int => Ok(i128::from(d.int().map_err(cbor)?) as f64),
        Type::F16 => {
            let p = d.position();
            let b = d
                .input()
                .get(p + 1..p + 3)
                .ok_or_else(|| malformed("truncated f16"))?;
            let bits = u16::from_be_bytes([b[0], b[1]]);
            d.set_position(p + 3);
            Ok(half(bits))
        }
        Type::F32 | Type::F64 => d.f64().map_err(cbor),
        t => Err(malformed(format!("'{what}' is a {t}, not a number"))),
    }
}

fn read_rational(d: &mut Decoder<'_>, what: &str) -> R<Rational> {
    let bad = || malformed(format!("'{what}' is not a [num, den] rational"));
    if d.array().map_err(|_| bad())? != Some(2) {
        return Err(bad());
    }
    let num = read_u64(d, what)?;
    let den = read_u64(d, what)?;
    Ok(Rational { num, den })
}

/// A date: tag 0 + text, or plain text; anything else is skipped (`None`).
fn read_date(d: &mut Decoder<'_>, depth: usize) -> R<Option<String>> {
    let p = d.position();
    if d.datatype().map_err(cbor)? == Type::Tag && d.tag().map_err(cbor)?.as_u64() != TAG_DATE {
        d.set_position(p);
        skip(d, depth)?;
        return Ok(None);
    }
    if d.datatype().map_err(cbor)? == Type::String {
        return Ok(Some(read_text(d, "date")?));
    }
    skip(d, depth)?;
    Ok(None)
}

/// Any item in CBOR diagnostic notation (byte strings summarized).
fn render(d: &mut Decoder<'_>, depth: usize, s: &mut String) -> R<()> {
    use std::fmt::Write;
    if depth > MAX_DEPTH {
        return Err(too_deep());
    }
    match d.datatype().map_err(cbor)? {
        Type::Array | Type::ArrayIndef => {
            s.push('[');
            let mut first = true;
            each_element(d, depth, |d| {
                if !std::mem::take(&mut first) {
                    s.push_str(", ");
                }
                render(d, depth + 1, s)
            })?;
            s.push(']');
        }
        Type::Map | Type::MapIndef => {
            s.push('{');
            let mut first = true;
            each_entry(d, depth, |d, k| {
                if !std::mem::take(&mut first) {
                    s.push_str(", ");
                }
                let _ = write!(s, "{k:?}: ");
                render(d, depth + 1, s)
            })?;
            s.push('}');
        }
        Type::Tag => {
            let t = d.tag().map_err(cbor)?.as_u64();
            let _ = write!(s, "{t}(");
            render(d, depth + 1, s)?;
            s.push(')');
        }
        Type::String => {
            let _ = write!(s, "{:?}", d.str().map_err(cbor)?);
        }
        Type::Bytes => {
            let b = d.bytes().map_err(cbor)?;
            if b.len() <= 32 {
                s.push_str("h'");
                for x in b {
                    let _ = write!(s, "{x:02x}");
                }
                s.push('\'');
            } else {
                let _ = write!(s, "<{} bytes>", b.len());
            }
        }
        Type::Bool => {
            let _ = write!(s, "{}", d.bool().map_err(cbor)?);
        }
        Type::Null => {
            d.skip().map_err(cbor)?;
            s.push_str("null");
        }
        Type::Undefined => {
            d.skip().map_err(cbor)?;
            s.push_str("undefined");
        }
        Type::U8 | Type::U16 | Type::U32 | Type::U64 => {
            let _ = write!(s, "{}", d.u64().map_err(cbor)?);
        }
        Type::I8 | Type::I16 | Type::I32 | Type::I64 | Type::Int => {
            let _ = write!(s, "{}", i128::from(d.int().map_err(cbor)?));
        }
        Type::F16 | Type::F32 | Type::F64 => {
            let _ = write!(s, "{:?}", read_f64(d, "number")?);
        }
        _ => {
            skip(d, depth)?;
            s.push('?');
        }
    }
    Ok(())
}

/// A start-message field that is not structural, into `meta` under `key`.
fn read_meta(
    d: &mut Decoder<'_>,
    key: &str,
    depth: usize,
    meta: &mut Vec<(String, MetaValue)>,
) -> R<()> {
    if depth > MAX_DEPTH {
        return Err(too_deep());
    }
    let value = match d.datatype().map_err(cbor)? {
        Type::U8 | Type::U16 | Type::U32 | Type::U64 => {
            let v = d.u64().map_err(cbor)?;
            match i64::try_from(v) {
                Ok(i) => MetaValue::Int(i),
                Err(_) => MetaValue::Float(v as f64),
            }
        }
        Type::I8 | Type::I16 | Type::I32 | Type::I64 => MetaValue::Int(d.i64().map_err(cbor)?),
        Type::Int | Type::F16 | Type::F32 | Type::F64 => MetaValue::Float(read_f64(d, key)?),
        Type::Bool => MetaValue::Bool(d.bool().map_err(cbor)?),
        Type::String => MetaValue::Text(read_text(d, key)?),
        Type::Map | Type::MapIndef => {
            return each_entry(d, depth, |d, k| {
                read_meta(d, &format!("{key}/{k}"), depth + 1, meta)
            });
        }
        Type::Array | Type::ArrayIndef => {
            let mut s = String::new();
            render(d, depth, &mut s)?;
            MetaValue::Text(s)
        }
        Type::Tag => {
            let p = d.position();
            match d.tag().map_err(cbor)?.as_u64() {
                TAG_DATE if d.datatype().map_err(cbor)? == Type::String => {
                    MetaValue::Text(read_text(d, key)?)
                }
                TAG_EPOCH => return read_meta(d, key, depth + 1, meta),
                _ => {
                    d.set_position(p);
                    return skip(d, depth);
                }
            }
        }
        _ => return skip(d, depth),
    };
    meta.push((key.to_owned(), value));
    Ok(())
}

/// The user data as text: a text string as is, anything else in diagnostic notation.
fn read_user_data(d: &mut Decoder<'_>, depth: usize) -> R<String> {
    if d.datatype().map_err(cbor)? == Type::String {
        return read_text(d, "user_data");
    }
    let mut s = String::new();
    render(d, depth, &mut s)?;
    Ok(s)
}

/// The element type of an RFC 8746 typed-array tag.
fn typed_array_kind(tag: u64) -> R<ArrayKind> {
    Ok(match tag {
        64 | 68 => ArrayKind::U8,
        69 => ArrayKind::U16,
        70 => ArrayKind::U32,
        71 => ArrayKind::U64,
        72 => ArrayKind::I8,
        77 => ArrayKind::I16,
        78 => ArrayKind::I32,
        79 => ArrayKind::I64,
        85 => ArrayKind::F32,
        86 => ArrayKind::F64,
        65..=67 | 73..=75 | 80..=83 | 84 | 87 => {
            return Err(StreamError::UnknownType(format!(
                "typed array tag {tag} (big-endian, f16 or f128)"
            )))
        }
        _ => {
            return Err(malformed(format!(
                "expected a typed array tag, got tag {tag}"
            )))
        }
    })
}

/// A typed array's payload: its element type, encoding and (compressed) bytes.
struct Typed<'b> {
    kind: ArrayKind,
    encoding: Encoding,
    bytes: &'b [u8],
}

/// A byte string, or tag 56500 `[algorithm, modifier, bytes]` standing for one.
fn read_blob<'b>(d: &mut Decoder<'b>, depth: usize) -> R<(Encoding, &'b [u8])> {
    if depth > MAX_DEPTH {
        return Err(too_deep());
    }
    match d.datatype().map_err(cbor)? {
        Type::Bytes => Ok((Encoding::Raw, d.bytes().map_err(cbor)?)),
        Type::BytesIndef => Err(malformed("indefinite-length byte string")),
        Type::Tag => {
            let t = d.tag().map_err(cbor)?.as_u64();
            if t != TAG_COMPRESSED {
                return Err(malformed(format!(
                    "expected bytes or tag 56500, got tag {t}"
                )));
            }
            if d.array().map_err(cbor)? != Some(3) {
                return Err(malformed("tag 56500 is not [algorithm, modifier, bytes]"));
            }
            let alg = d.str().map_err(cbor)?;
            let modifier = read_u64(d, "compression modifier")?;
            let enc = match alg {
                "bslz4" => Encoding::BsLz4 {
                    elem_size: usize::try_from(modifier).map_err(|_| {
                        StreamError::BadSize(format!("bslz4 element size {modifier}"))
                    })?,
                },
                "lz4" => Encoding::Lz4Hdf5,
                other => {
                    return Err(StreamError::UnknownEncoding(
                        other.chars().take(64).collect(),
                    ))
                }
            };
            match d.datatype().map_err(cbor)? {
                Type::Bytes => Ok((enc, d.bytes().map_err(cbor)?)),
                t => Err(malformed(format!("tag 56500 holds a {t}, not bytes"))),
            }
        }
        t => Err(malformed(format!("expected bytes, got a {t}"))),
    }
}

/// A typed-array tag and its payload.
fn read_typed<'b>(d: &mut Decoder<'b>, depth: usize) -> R<Typed<'b>> {
    if d.datatype().map_err(cbor)? != Type::Tag {
        return Err(StreamError::UnknownType(
            "array without a typed-array tag".into(),
        ));
    }
    let kind = typed_array_kind(d.tag().map_err(cbor)?.as_u64())?;
    let (encoding, bytes) = read_blob(d, depth + 1)?;
    if let Encoding::BsLz4 { elem_size } = encoding {
        if elem_size != kind_size(kind) {
            return Err(StreamError::BadSize(format!(
                "bslz4 element size {elem_size} inside a typed array of {}-byte elements",
                kind_size(kind)
            )));
        }
    }
    Ok(Typed {
        kind,
        encoding,
        bytes,
    })
}

/// A tag-40 multi-dimensional array: its dims as sent (row-major, slowest first) and data.
/// `None` dims: a bare typed array (1-D), allowed only where `bare_ok`.
fn read_md_array<'b>(
    d: &mut Decoder<'b>,
    depth: usize,
    bare_ok: bool,
) -> R<(Option<Vec<usize>>, Typed<'b>)> {
    if depth > MAX_DEPTH {
        return Err(too_deep());
    }
    let p = d.position();
    let t = match d.datatype().map_err(cbor)? {
        Type::Tag => d.tag().map_err(cbor)?.as_u64(),
        t => return Err(malformed(format!("expected a tag-40 array, got a {t}"))),
    };
    match t {
        TAG_ROW_MAJOR => {}
        TAG_COLUMN_MAJOR => {
            return Err(malformed("column-major array (tag 1040) is not supported"))
        }
        _ if bare_ok => {
            d.set_position(p);
            return Ok((None, read_typed(d, depth)?));
        }
        _ => return Err(malformed(format!("expected a tag-40 array, got tag {t}"))),
    }
    if d.array().map_err(cbor)? != Some(2) {
        return Err(malformed("tag 40 is not [dims, array]"));
    }
    let mut dims = Vec::new();
    each_element(d, depth + 1, |d| {
        if dims.len() == MAX_DIMS {
            return Err(malformed(format!("more than {MAX_DIMS} dimensions")));
        }
        dims.push(read_usize(d, "dims")?);
        Ok(())
    })?;
    if dims.is_empty() {
        return Err(malformed("no dimensions"));
    }
    Ok((Some(dims), read_typed(d, depth + 1)?))
}

fn pixel_of(kind: ArrayKind) -> R<PixelType> {
    Ok(match kind {
        ArrayKind::U8 => PixelType::U8,
        ArrayKind::U16 => PixelType::U16,
        ArrayKind::U32 => PixelType::U32,
        ArrayKind::I8 => PixelType::I8,
        ArrayKind::I16 => PixelType::I16,
        ArrayKind::I32 => PixelType::I32,
        other => return Err(StreamError::UnknownType(format!("{other:?} image pixels"))),
    })
}

fn frame(d: &mut Decoder<'_>, part: &Bytes, channel: &str, depth: usize) -> R<Frame> {
    let (dims, t) = read_md_array(d, depth, false)?;
    let (height, width) = match dims.as_deref() {
        Some(&[h, w]) => (h, w),
        _ => {
            return Err(malformed(format!(
                "channel '{channel}': image dims {dims:?} are not [height, width]"
            )))
        }
    };
    let pixel = pixel_of(t.kind)?;
    let len = frame_len(width, height, pixel)?;
    if t.encoding == Encoding::Raw && t.bytes.len() != len {
        return Err(StreamError::BadSize(format!(
            "channel '{channel}': {width} x {height} {pixel:?} needs {len} bytes, got {}",
            t.bytes.len()
        )));
    }
    Ok(Frame {
        channel: channel.to_owned(),
        width,
        height,
        pixel,
        encoding: t.encoding,
        data: part.slice_ref(t.bytes),
    })
}

fn header_array(d: &mut Decoder<'_>, part: &Bytes, name: String, depth: usize) -> R<HeaderArray> {
    let (dims, t) = read_md_array(d, depth, true)?;
    let size = kind_size(t.kind);
    let data = match t.encoding {
        Encoding::Raw => part.slice_ref(t.bytes),
        enc => Bytes::from(decompress_owned(enc, t.bytes, size)?),
    };
    let dims = match dims {
        Some(mut v) => {
            v.reverse();
            v
        }
        None => vec![data.len() / size],
    };
    let len = array_len(&dims, size)?;
    if len != data.len() {
        return Err(StreamError::BadSize(format!(
            "{name}: dims {dims:?} of {size}-byte elements need {len} bytes, got {}",
            data.len()
        )));
    }
    Ok(HeaderArray {
        name,
        dims,
        kind: t.kind,
        data,
    })
}

/// `flatfield` / `pixel_mask` / countrate table: a channel map of arrays, or one array.
fn header_arrays(
    d: &mut Decoder<'_>,
    part: &Bytes,
    name: &str,
    depth: usize,
    out: &mut Vec<HeaderArray>,
) -> R<()> {
    match d.datatype().map_err(cbor)? {
        Type::Map | Type::MapIndef => each_entry(d, depth, |d, ch| {
            out.push(header_array(d, part, format!("{name}/{ch}"), depth + 1)?);
            Ok(())
        }),
        _ => {
            out.push(header_array(d, part, name.to_owned(), depth)?);
            Ok(())
        }
    }
}

fn missing(what: &str) -> StreamError {
    malformed(format!("no '{what}'"))
}

fn start(d: &mut Decoder<'_>, part: &Bytes) -> R<Start> {
    let mut s = Start::default();
    let mut series_id = None;
    let (mut size_x, mut size_y) = (None, None);
    each_entry(d, 1, |d, k| {
        match k {
            "type" => skip(d, 2)?,
            "series_id" => series_id = Some(read_u64(d, k)?),
            "series_unique_id" => s.series_unique_id = Some(read_text(d, k)?),
            "channels" => {
                s.channels.clear();
                each_element(d, 2, |d| {
                    s.channels.push(read_text(d, "channels")?);
                    Ok(())
                })?
            }
            "threshold_energy" => match d.datatype().map_err(cbor)? {
                Type::Map | Type::MapIndef => each_entry(d, 2, |d, ch| {
                    s.threshold_energy.push((ch.to_owned(), read_f64(d, k)?));
                    Ok(())
                })?,
                _ => read_meta(d, k, 2, &mut s.meta)?,
            },
            "image_dtype" => {
                let t = read_text(d, k)?;
                s.image_dtype = Some(
                    pixel_from_name(&t)
                        .ok_or_else(|| StreamError::UnknownType(t.chars().take(64).collect()))?,
                );
            }
            "image_size_x" => size_x = Some(read_usize(d, k)?),
            "image_size_y" => size_y = Some(read_usize(d, k)?),
            "flatfield" | "pixel_mask" | "countrate_correction_lookup_table" => {
                let name = match k {
                    "countrate_correction_lookup_table" => "countrate_table",
                    other => other,
                };
                let (at, kept) = (d.position(), s.arrays.len());
                if let Err(e) = header_arrays(d, part, name, 2, &mut s.arrays) {
                    // An array we cannot read (simulators send stubs) costs only itself,
                    // not the series' start; the reason is kept with the header.
                    s.arrays.truncate(kept);
                    d.set_position(at);
                    skip(d, 2)?;
                    s.meta
                        .push((k.to_owned(), MetaValue::Text(format!("not decoded: {e}"))));
                }
            }
            "user_data" => s.appendix = Some(read_user_data(d, 2)?),
            _ => read_meta(d, k, 2, &mut s.meta)?,
        }
        Ok(())
    })?;
    s.series_id = series_id.ok_or_else(|| missing("series_id"))?;
    if let (Some(x), Some(y)) = (size_x, size_y) {
        s.image_size = Some((x, y));
    }
    Ok(s)
}

fn image(d: &mut Decoder<'_>, part: &Bytes) -> R<Image> {
    let mut img = Image {
        series_id: 0,
        image_id: 0,
        series_unique_id: None,
        frames: Vec::new(),
        start_time: None,
        stop_time: None,
        real_time: None,
        series_date: None,
        appendix: None,
    };
    let (mut series_id, mut image_id, mut data) = (None, None, false);
    each_entry(d, 1, |d, k| {
        match k {
            "series_id" => series_id = Some(read_u64(d, k)?),
            "image_id" => image_id = Some(read_u64(d, k)?),
            "series_unique_id" => img.series_unique_id = Some(read_text(d, k)?),
            "start_time" => img.start_time = Some(read_rational(d, k)?),
            "stop_time" => img.stop_time = Some(read_rational(d, k)?),
            "real_time" => img.real_time = Some(read_rational(d, k)?),
            "series_date" => img.series_date = read_date(d, 2)?,
            "user_data" => img.appendix = Some(read_user_data(d, 2)?),
            "data" => {
                data = true;
                img.frames.clear();
                each_entry(d, 2, |d, ch| {
                    img.frames.push(frame(d, part, ch, 3)?);
                    Ok(())
                })?
            }
            _ => skip(d, 2)?,
        }
        Ok(())
    })?;
    img.series_id = series_id.ok_or_else(|| missing("series_id"))?;
    img.image_id = image_id.ok_or_else(|| missing("image_id"))?;
    if !data {
        return Err(missing("data"));
    }
    Ok(img)
}

fn end(d: &mut Decoder<'_>) -> R<Event> {
    let (mut series_id, mut series_unique_id) = (None, None);
    each_entry(d, 1, |d, k| {
        match k {
            "series_id" => series_id = Some(read_u64(d, k)?),
            "series_unique_id" => series_unique_id = Some(read_text(d, k)?),
            _ => skip(d, 2)?,
        }
        Ok(())
    })?;
    Ok(Event::End {
        series_id: series_id.ok_or_else(|| missing("series_id"))?,
        series_unique_id,
    })
}

#[cfg(test)]
mod tests {
    use super::super::encoding::decode_into;
    use super::super::encoding::test_codec::{bs_lz4, lz4_hdf5, pixels};
    use super::*;
    use minicbor::Encoder;

    type Enc = Encoder<Vec<u8>>;

    fn msg(self_describe: bool, f: impl FnOnce(&mut Enc)) -> Bytes {
        let mut e = Encoder::new(Vec::new());
        if self_describe {
            e.tag(minicbor::data::Tag::new(TAG_SELF_DESCRIBE)).unwrap();
        }
        f(&mut e);
        Bytes::from(e.into_writer())
    }

    fn tag(e: &mut Enc, t: u64) {
        e.tag(minicbor::data::Tag::new(t)).unwrap();
    }

    /// tag40([[h, w], tag(typed, payload)]), payload raw or tag 56500.
    fn md(e: &mut Enc, dims: &[u64], typed: u64, comp: Option<(&str, u64)>, bytes: &[u8]) {
        tag(e, TAG_ROW_MAJOR);
        e.array(2).unwrap().array(dims.len() as u64).unwrap();
        for &x in dims {
            e.u64(x).unwrap();
        }
        tag(e, typed);
        if let Some((alg, m)) = comp {
            tag(e, TAG_COMPRESSED);
            e.array(3).unwrap().str(alg).unwrap().u64(m).unwrap();
        }
        e.bytes(bytes).unwrap();
    }

    fn rational(e: &mut Enc, num: u64, den: u64) {
        e.array(2).unwrap().u64(num).unwrap().u64(den).unwrap();
    }

    const W: usize = 21;
    const H: usize = 13;

    fn channel_pixels() -> [Vec<u8>; 3] {
        [pixels(W * H * 2), pixels(W * H * 4), pixels(W * H)]
    }

    fn image_msg(image_id: u64) -> Bytes {
        let [t1, t2, diff] = channel_pixels();
        msg(true, |e| {
            e.map(9).unwrap();
            // Foreign order: `type` is not first; an unknown nested key comes first.
            e.str("x_unknown")
                .unwrap()
                .map(1)
                .unwrap()
                .str("a")
                .unwrap();
            e.array(2).unwrap().u8(1).unwrap();
            tag(e, 77);
            e.bytes(&[0, 1]).unwrap();
            e.str("type").unwrap().str("image").unwrap();
            e.str("series_id").unwrap().u64(3).unwrap();
            e.str("image_id").unwrap().u64(image_id).unwrap();
            e.str("series_unique_id")
                .unwrap()
                .str("01GRXWT80JSDY2FNW8SGCCDZD9")
                .unwrap();
            e.str("start_time").unwrap();
            rational(e, 100, 50_000_000);
            e.str("series_date").unwrap();
            tag(e, TAG_DATE);
            e.str("2023-02-10T12:00:00.000+00:00").unwrap();
            e.str("data").unwrap().map(3).unwrap();
            e.str("threshold_1").unwrap();
            md(
                e,
                &[H as u64, W as u64],
                69,
                Some(("bslz4", 2)),
                &bs_lz4(&t1, 2),
            );
            e.str("threshold_2").unwrap();
            md(
                e,
                &[H as u64, W as u64],
                70,
                Some(("lz4", 0)),
                &lz4_hdf5(&t2, 128),
            );
            e.str("difference").unwrap();
            md(e, &[H as u64, W as u64], 64, None, &diff);
            e.str("user_data").unwrap().str("image appendix").unwrap();
        })
    }

    fn start_msg() -> Bytes {
        let ff: Vec<u8> = (0..6u32)
            .flat_map(|i| (i as f32 * 0.25).to_le_bytes())
            .collect();
        let pm: Vec<u8> = (0..6u32).flat_map(|i| (i % 3).to_le_bytes()).collect();
        let ct: Vec<u8> = (0..5u32).flat_map(|i| (i as f32).to_le_bytes()).collect();
        msg(false, |e| {
            e.begin_map().unwrap(); // indefinite length, as foreign encoders may write
            e.str("series_id").unwrap().u64(3).unwrap();
            e.str("type").unwrap().str("start").unwrap();
            e.str("series_unique_id").unwrap().str("U").unwrap();
            e.str("channels").unwrap().array(3).unwrap();
            for c in ["threshold_1", "threshold_2", "difference"] {
                e.str(c).unwrap();
            }
            e.str("threshold_energy").unwrap().map(2).unwrap();
            e.str("threshold_1").unwrap().f64(4000.0).unwrap();
            e.str("threshold_2").unwrap().f32(8000.0).unwrap();
            e.str("image_dtype").unwrap().str("uint16").unwrap();
            e.str("image_size_x").unwrap().u64(W as u64).unwrap();
            e.str("image_size_y").unwrap().u64(H as u64).unwrap();
            e.str("count_time").unwrap().f64(0.001).unwrap();
            e.str("number_of_images").unwrap().u64(10).unwrap();
            e.str("saturation_value").unwrap().i64(-5).unwrap();
            e.str("flatfield_enabled").unwrap().bool(true).unwrap();
            e.str("sensor_material").unwrap().str("Si").unwrap();
            e.str("incident_energy").unwrap();
            e.writer_mut().extend_from_slice(&[0xf9, 0x3e, 0x00]); // f16 1.5
            e.str("arm_date").unwrap();
            tag(e, TAG_DATE);
            e.str("2023-02-10T12:00:00Z").unwrap();
            e.str("detector_translation").unwrap().array(3).unwrap();
            e.f64(0.0).unwrap().f64(0.0).unwrap().f64(0.1).unwrap();
            e.str("goniometer").unwrap().map(1).unwrap();
            e.str("omega").unwrap().map(2).unwrap();
            e.str("start").unwrap().f64(0.0).unwrap();
            e.str("increment").unwrap().f64(0.1).unwrap();
            e.str("flatfield").unwrap().map(1).unwrap();
            e.str("threshold_1").unwrap();
            md(e, &[2, 3], 85, None, &ff);
            e.str("pixel_mask").unwrap().map(1).unwrap();
            e.str("threshold_1").unwrap();
            md(e, &[2, 3], 70, Some(("bslz4", 4)), &bs_lz4(&pm, 4));
            e.str("countrate_correction_lookup_table").unwrap();
            tag(e, 85);
            e.bytes(&ct).unwrap();
            e.str("user_data")
                .unwrap()
                .map(1)
                .unwrap()
                .str("k")
                .unwrap()
                .u8(1)
                .unwrap();
            e.end().unwrap();
        })
    }

    fn end_msg() -> Bytes {
        msg(true, |e| {
            e.map(3).unwrap();
            e.str("series_unique_id").unwrap().str("U").unwrap();
            e.str("series_id").unwrap().u64(3).unwrap();
            e.str("type").unwrap().str("end").unwrap();
        })
    }

    fn decode(parts: &[Bytes]) -> Vec<Event> {
        let mut out = Vec::new();
        decode_message(parts, &mut out).unwrap();
        out
    }

    #[test]
    fn a_stub_header_array_costs_only_itself() {
        // tickit-devices' recorded start holds 4-byte stubs where the arrays were.
        let part = msg(true, |e| {
            e.map(4).unwrap();
            e.str("type").unwrap().str("start").unwrap();
            e.str("flatfield").unwrap().map(1).unwrap();
            e.str("threshold_1").unwrap().bytes(&[0, 0, 0, 0]).unwrap();
            e.str("count_time").unwrap().f64(0.5).unwrap();
            e.str("series_id").unwrap().u64(9).unwrap();
        });
        let events = decode(&[part]);
        let [Event::Start(s)] = &events[..] else {
            panic!("{events:?}")
        };
        assert_eq!(s.series_id, 9);
        assert!(s.arrays.is_empty());
        assert!(s
            .meta
            .contains(&("count_time".into(), MetaValue::Float(0.5))));
        let note = s.meta.iter().find(|(k, _)| k == "flatfield");
        assert!(
            matches!(note, Some((_, MetaValue::Text(t))) if t.starts_with("not decoded")),
            "{note:?}"
        );
    }

    #[test]
    fn image_with_three_channels() {
        let part = image_msg(4);
        let ev = decode(std::slice::from_ref(&part));
        let [Event::Image(img)] = &ev[..] else {
            panic!("{ev:?}")
        };
        assert_eq!((img.series_id, img.image_id), (3, 4));
        assert_eq!(
            img.series_unique_id.as_deref(),
            Some("01GRXWT80JSDY2FNW8SGCCDZD9")
        );
        assert_eq!(
            img.start_time,
            Some(Rational {
                num: 100,
                den: 50_000_000
            })
        );
        assert_eq!(img.start_time.unwrap().as_nanos(), Some(2000));
        assert_eq!(
            img.series_date.as_deref(),
            Some("2023-02-10T12:00:00.000+00:00")
        );
        assert_eq!(img.appendix.as_deref(), Some("image appendix"));
        let names: Vec<_> = img.frames.iter().map(|f| f.channel.as_str()).collect();
        assert_eq!(names, ["threshold_1", "threshold_2", "difference"]);
        let expect = channel_pixels();
        let types = [PixelType::U16, PixelType::U32, PixelType::U8];
        let encs = [
            Encoding::BsLz4 { elem_size: 2 },
            Encoding::Lz4Hdf5,
            Encoding::Raw,
        ];
        for (i, f) in img.frames.iter().enumerate() {
            assert_eq!(
                (f.width, f.height, f.pixel, f.encoding),
                (W, H, types[i], encs[i])
            );
            // Zero-copy: the frame's bytes lie inside the part.
            let (p, d) = (part.as_ptr() as usize, f.data.as_ptr() as usize);
            assert!(d >= p && d + f.data.len() <= p + part.len());
            super::super::encoding::check_header(f).unwrap();
            let mut out = vec![0u8; f.decoded_len()];
            decode_into(f, &mut out).unwrap();
            assert_eq!(out, expect[i], "{}", f.channel);
        }
    }

    #[test]
    fn start_and_first_image_in_one_message_then_end() {
        let ev = decode(&[start_msg(), image_msg(0), end_msg()]);
        assert_eq!(ev.len(), 3);
        let Event::Start(s) = &ev[0] else { panic!() };
        assert_eq!(s.series_id, 3);
        assert_eq!(s.series_unique_id.as_deref(), Some("U"));
        assert_eq!(s.channels, ["threshold_1", "threshold_2", "difference"]);
        assert_eq!(
            s.threshold_energy,
            [
                ("threshold_1".to_owned(), 4000.0),
                ("threshold_2".to_owned(), 8000.0)
            ]
        );
        assert_eq!(s.image_dtype, Some(PixelType::U16));
        assert_eq!(s.image_size, Some((W, H)));
        let meta = |k: &str| s.meta.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(meta("count_time"), Some(MetaValue::Float(0.001)));
        assert_eq!(meta("number_of_images"), Some(MetaValue::Int(10)));
        assert_eq!(meta("saturation_value"), Some(MetaValue::Int(-5)));
        assert_eq!(meta("flatfield_enabled"), Some(MetaValue::Bool(true)));
        assert_eq!(meta("sensor_material"), Some(MetaValue::Text("Si".into())));
        assert_eq!(meta("incident_energy"), Some(MetaValue::Float(1.5)));
        assert_eq!(
            meta("arm_date"),
            Some(MetaValue::Text("2023-02-10T12:00:00Z".into()))
        );
        assert_eq!(
            meta("detector_translation"),
            Some(MetaValue::Text("[0.0, 0.0, 0.1]".into()))
        );
        assert_eq!(meta("goniometer/omega/start"), Some(MetaValue::Float(0.0)));
        assert_eq!(
            meta("goniometer/omega/increment"),
            Some(MetaValue::Float(0.1))
        );
        assert_eq!(meta("type"), None);
        assert_eq!(s.appendix.as_deref(), Some(r#"{"k": 1}"#));
        let a = &s.arrays;
        assert_eq!(a.len(), 3);
        assert_eq!(
            (a[0].name.as_str(), &a[0].dims[..], a[0].kind),
            ("flatfield/threshold_1", &[3, 2][..], ArrayKind::F32)
        );
        assert_eq!(&a[0].data[4..8], &0.25f32.to_le_bytes());
        assert_eq!(
            (a[1].name.as_str(), &a[1].dims[..], a[1].kind),
            ("pixel_mask/threshold_1", &[3, 2][..], ArrayKind::U32)
        );
        let pm: Vec<u8> = (0..6u32).flat_map(|i| (i % 3).to_le_bytes()).collect();
        assert_eq!(&a[1].data[..], &pm[..]);
        assert_eq!(
            (a[2].name.as_str(), &a[2].dims[..], a[2].kind),
            ("countrate_table", &[5][..], ArrayKind::F32)
        );
        assert!(matches!(ev[1], Event::Image(_)));
        assert_eq!(
            ev[2],
            Event::End {
                series_id: 3,
                series_unique_id: Some("U".into())
            }
        );
    }

    fn image_with(f: impl FnOnce(&mut Enc)) -> Bytes {
        msg(false, |e| {
            e.map(4).unwrap();
            e.str("type").unwrap().str("image").unwrap();
            e.str("series_id").unwrap().u64(1).unwrap();
            e.str("image_id").unwrap().u64(0).unwrap();
            e.str("data").unwrap().map(1).unwrap().str("c").unwrap();
            f(e);
        })
    }

    fn err(part: Bytes) -> StreamError {
        let mut out = Vec::new();
        decode_message(&[end_msg(), part], &mut out).unwrap_err()
    }

    #[test]
    fn refusals() {
        let raw = pixels(W * H * 2);
        // Column-major, big-endian, untagged, elem size mismatch, raw size mismatch.
        let e = err(image_with(|e| {
            tag(e, TAG_COLUMN_MAJOR);
            e.array(2)
                .unwrap()
                .array(2)
                .unwrap()
                .u8(1)
                .unwrap()
                .u8(1)
                .unwrap();
            tag(e, 64);
            e.bytes(&[0]).unwrap();
        }));
        assert!(
            e.to_string().contains("part 1") && e.to_string().contains("1040"),
            "{e}"
        );
        let e = err(image_with(|e| md(e, &[H as u64, W as u64], 65, None, &raw)));
        assert_eq!(e.reason(), "unknown type");
        let e = err(image_with(|e| {
            md(
                e,
                &[H as u64, W as u64],
                69,
                Some(("bslz4", 4)),
                &bs_lz4(&raw, 2),
            )
        }));
        assert_eq!(e.reason(), "bad size");
        let e = err(image_with(|e| {
            md(e, &[H as u64, W as u64 + 1], 69, None, &raw)
        }));
        assert_eq!(e.reason(), "bad size");
        let e = err(image_with(|e| {
            md(e, &[H as u64, W as u64], 69, Some(("zstd", 0)), &raw)
        }));
        assert_eq!(e.reason(), "unknown encoding");
        let e = err(image_with(|e| {
            md(e, &[1 << 40, 1 << 40], 70, Some(("lz4", 0)), &raw)
        }));
        assert_eq!(e.reason(), "bad size");
        let e = err(image_with(|e| {
            tag(e, TAG_ROW_MAJOR);
            e.array(2)
                .unwrap()
                .array(2)
                .unwrap()
                .u8(1)
                .unwrap()
                .u8(2)
                .unwrap();
            e.bytes(&[0, 0]).unwrap();
        }));
        assert_eq!(e.reason(), "unknown type");
        // Events before the error stay.
        let mut out = Vec::new();
        assert!(decode_message(&[end_msg(), Bytes::from_static(b"\xff")], &mut out).is_err());
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn hostile_structure() {
        // Nesting deeper than the limit inside an unknown key.
        let deep = msg(false, |e| {
            e.map(2)
                .unwrap()
                .str("type")
                .unwrap()
                .str("end")
                .unwrap()
                .str("x")
                .unwrap();
            for _ in 0..40 {
                e.array(1).unwrap();
            }
            e.u8(0).unwrap();
        });
        assert!(err(deep).to_string().contains("deeper"));
        // Nesting within the limit is skipped.
        let ok = msg(false, |e| {
            e.map(3)
                .unwrap()
                .str("type")
                .unwrap()
                .str("end")
                .unwrap()
                .str("x")
                .unwrap();
            for _ in 0..10 {
                e.array(1).unwrap();
            }
            e.u8(0).unwrap();
            e.str("series_id").unwrap().u8(9).unwrap();
        });
        assert_eq!(
            decode(&[ok]),
            [Event::End {
                series_id: 9,
                series_unique_id: None
            }]
        );
        // Lengths of 2^60 (array, map, bytes, text) allocate nothing and fail.
        for head in [0x9bu8, 0xbb, 0x5b, 0x7b] {
            let mut v = vec![
                0xa2, 0x64, b't', b'y', b'p', b'e', 0x63, b'e', b'n', b'd', 0x61, b'x', head,
            ];
            v.extend_from_slice(&(1u64 << 60).to_be_bytes());
            v.extend_from_slice(&[0; 8]);
            assert!(decode_message(&[Bytes::from(v)], &mut Vec::new()).is_err());
        }
        // The same for channels in a start and dims in an image.
        let mut v = vec![
            0xa2, 0x64, b't', b'y', b'p', b'e', 0x65, b's', b't', b'a', b'r', b't',
        ];
        v.extend_from_slice(b"\x68channels\x9b");
        v.extend_from_slice(&(1u64 << 60).to_be_bytes());
        v.extend_from_slice(b"\x61a");
        assert!(decode_message(&[Bytes::from(v)], &mut Vec::new()).is_err());
        // Trailing bytes, missing type / series_id, a non-map.
        let mut t = end_msg().to_vec();
        t.push(0);
        assert!(decode_message(&[Bytes::from(t)], &mut Vec::new()).is_err());
        let no_type = msg(false, |e| {
            e.map(1).unwrap().str("series_id").unwrap().u8(1).unwrap();
        });
        assert!(err(no_type).to_string().contains("type"));
        let no_id = msg(false, |e| {
            e.map(1).unwrap().str("type").unwrap().str("end").unwrap();
        });
        assert!(err(no_id).to_string().contains("series_id"));
        assert!(decode_message(&[Bytes::from_static(&[0x01])], &mut Vec::new()).is_err());
        assert!(decode_message(&[Bytes::new()], &mut Vec::new()).is_err());
    }

    #[test]
    fn half_floats() {
        assert_eq!(half(0x3c00), 1.0);
        assert_eq!(half(0xc000), -2.0);
        assert_eq!(half(0x0001), 2f64.powi(-24));
        assert!(half(0x7e00).is_nan());
        assert_eq!(half(0x7c00), f64::INFINITY);
    }
}
