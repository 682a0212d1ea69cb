//! Stream v1 ("legacy"): multipart ZeroMQ messages with JSON headers.
//!
//! [`decode_message`] walks every part of one ZeroMQ message and switches on `htype`, never
//! on the part count, so a header and the first image arriving as one 6-part message, or
//! any other concatenation, decode to all their events.
//!
//! * `dheader-1.0` is followed, for `header_detail` `basic` / `all`, by the configuration
//!   dict (a JSON object without `htype`, required there), then by any number of
//!   `dflatfield-1.0` / `dpixelmask-1.0` / `dcountrate_table-1.0` descriptor + blob pairs,
//!   then an optional appendix.
//! * `dimage-1.0` must be followed by `dimage_d-1.0` and the blob; the `dconfig-1.0` part
//!   is taken when it is next (its absence leaves the times `None`); then an optional
//!   appendix.
//! * `dseries_end-1.0` stands alone.
//!
//! An appendix is the part after the last expected one when it is not a JSON object with a
//! string `htype` (so: non-JSON, or JSON without `htype`); it is kept as (lossy UTF-8) text.
//!
//! Configuration values become [`MetaValue`]s: integers that fit `i64` → `Int`, other
//! numbers → `Float`, booleans, strings → `Text`; arrays and objects → `Text` holding their
//! compact JSON (`[0.0,0.0,0.1]`); `null` is skipped. The order is the keys' sorted order.
//!
//! Sizes checked here: `size` equals the blob's length, the shape is at most
//! [`MAX_FRAME_BYTES`], a raw (`<`) blob has exactly the shape's bytes, a header array's
//! blob has exactly shape × type bytes. A compressed blob's own header is checked by
//! [`super::encoding::check_header`] / [`super::encoding::decode_into`].
//! The image `hash` is not validated (simulators fill it with junk).

use super::encoding::{
    array_len, at_part, frame_len, kind_from_name, kind_size, parse_v1_encoding, pixel_from_name,
};
use super::{Encoding, Event, Frame, HeaderArray, Image, MetaValue, Rational, Start, StreamError};
use bytes::Bytes;
use serde_json::{Map, Value};

type Object = Map<String, Value>;

const NS: u64 = 1_000_000_000;

fn malformed(part: usize, detail: impl std::fmt::Display) -> StreamError {
    StreamError::Malformed {
        what: "v1 message",
        detail: format!("part {part}: {detail}"),
    }
}

/// The part as a JSON object, or `None` if it is not one.
fn json_object(part: &[u8]) -> Option<Object> {
    // Cheap pre-check: a JSON object starts with `{` after optional white space, so blobs
    // are refused without running the parser over them.
    let first = part.iter().find(|b| !b.is_ascii_whitespace())?;
    if *first != b'{' {
        return None;
    }
    match serde_json::from_slice::<Value>(part) {
        Ok(Value::Object(m)) => Some(m),
        _ => None,
    }
}

fn htype(obj: &Object) -> Option<&str> {
    obj.get("htype").and_then(Value::as_str)
}

fn get_u64(obj: &Object, key: &str, part: usize) -> Result<u64, StreamError> {
    obj.get(key).and_then(Value::as_u64).ok_or_else(|| {
        malformed(
            part,
            format!("'{key}' is missing or not an unsigned integer"),
        )
    })
}

fn get_str<'a>(obj: &'a Object, key: &str, part: usize) -> Result<&'a str, StreamError> {
    obj.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| malformed(part, format!("'{key}' is missing or not a string")))
}

/// `shape` as sizes: 1 to 4 unsigned integers.
fn get_shape(obj: &Object, part: usize) -> Result<Vec<usize>, StreamError> {
    let bad = || malformed(part, "'shape' is not an array of 1 to 4 sizes");
    let arr = obj.get("shape").and_then(Value::as_array).ok_or_else(bad)?;
    if arr.is_empty() || arr.len() > 4 {
        return Err(bad());
    }
    arr.iter()
        .map(|v| {
            v.as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(bad)
        })
        .collect()
}

/// Decodes one ZeroMQ multipart message into `out`. Events decoded before an error stay in
/// `out`; the error names the part.
pub fn decode_message(parts: &[Bytes], out: &mut Vec<Event>) -> Result<(), StreamError> {
    let mut i = 0;
    while i < parts.len() {
        let head = json_object(&parts[i])
            .ok_or_else(|| malformed(i, "expected a JSON object with 'htype'"))?;
        i = match htype(&head) {
            Some("dheader-1.0") => header(parts, i, &head, out)?,
            Some("dimage-1.0") => image(parts, i, &head, out)?,
            Some("dseries_end-1.0") => {
                out.push(Event::End {
                    series_id: get_u64(&head, "series", i)?,
                    series_unique_id: None,
                });
                i + 1
            }
            Some(other) => {
                let t: String = other.chars().take(64).collect();
                return Err(malformed(i, format!("unexpected htype '{t}'")));
            }
            None => return Err(malformed(i, "JSON object without 'htype'")),
        };
    }
    Ok(())
}

/// Takes the appendix at `j` if there is one; returns the next part's index.
fn appendix(parts: &[Bytes], j: usize, into: &mut Option<String>) -> usize {
    match parts.get(j) {
        Some(p) if json_object(p).as_ref().and_then(htype).is_none() => {
            *into = Some(String::from_utf8_lossy(p).into_owned());
            j + 1
        }
        _ => j,
    }
}

fn header(
    parts: &[Bytes],
    i: usize,
    head: &Object,
    out: &mut Vec<Event>,
) -> Result<usize, StreamError> {
    let mut start = Start {
        series_id: get_u64(head, "series", i)?,
        header_detail: head
            .get("header_detail")
            .and_then(Value::as_str)
            .map(str::to_owned),
        ..Start::default()
    };
    let mut j = i + 1;
    if matches!(start.header_detail.as_deref(), Some("basic" | "all")) {
        let cfg = parts
            .get(j)
            .and_then(|p| json_object(p))
            .filter(|o| htype(o).is_none())
            .ok_or_else(|| malformed(j, "expected the configuration dict (JSON without htype)"))?;
        start.meta = config_meta(cfg);
        j += 1;
    }
    while let Some(obj) = parts.get(j).and_then(|p| json_object(p)) {
        let name = match htype(&obj) {
            Some("dflatfield-1.0") => "flatfield",
            Some("dpixelmask-1.0") => "pixel_mask",
            Some("dcountrate_table-1.0") => "countrate_table",
            _ => break,
        };
        let blob = parts
            .get(j + 1)
            .ok_or_else(|| malformed(j + 1, format!("missing the {name} blob")))?;
        start.arrays.push(header_array(name, &obj, blob, j)?);
        j += 2;
    }
    j = appendix(parts, j, &mut start.appendix);
    out.push(Event::Start(start));
    Ok(j)
}

fn config_meta(cfg: Object) -> Vec<(String, MetaValue)> {
    cfg.into_iter()
        .filter_map(|(k, v)| {
            let m = match v {
                Value::Null => return None,
                Value::Bool(b) => MetaValue::Bool(b),
                Value::Number(n) => match n.as_i64() {
                    Some(i) => MetaValue::Int(i),
                    None => MetaValue::Float(n.as_f64()?),
                },
                Value::String(s) => MetaValue::Text(s),
                v @ (Value::Array(_) | Value::Object(_)) => MetaValue::Text(v.to_string()),
            };
            Some((k, m))
        })
        .collect()
}

fn header_array(
    name: &str,
    desc: &Object,
    blob: &Bytes,
    j: usize,
) -> Result<HeaderArray, StreamError> {
    let dims = get_shape(desc, j)?;
    let ty = get_str(desc, "type", j)?;
    let kind = kind_from_name(ty)
        .ok_or_else(|| at_part(StreamError::UnknownType(ty.chars().take(64).collect()), j))?;
    let len = array_len(&dims, kind_size(kind)).map_err(|e| at_part(e, j))?;
    if blob.len() != len {
        return Err(at_part(
            StreamError::BadSize(format!(
                "{name} {dims:?} {ty} needs {len} bytes, the blob has {}",
                blob.len()
            )),
            j + 1,
        ));
    }
    Ok(HeaderArray {
        name: name.to_owned(),
        dims,
        kind,
        data: blob.clone(),
    })
}

fn image(
    parts: &[Bytes],
    i: usize,
    head: &Object,
    out: &mut Vec<Event>,
) -> Result<usize, StreamError> {
    let series_id = get_u64(head, "series", i)?;
    let image_id = get_u64(head, "frame", i)?;
    let d = i + 1;
    let desc = parts
        .get(d)
        .and_then(|p| json_object(p))
        .filter(|o| htype(o) == Some("dimage_d-1.0"))
        .ok_or_else(|| malformed(d, "expected the dimage_d-1.0 part"))?;
    let shape = get_shape(&desc, d)?;
    let (width, height) = match shape[..] {
        [w, h] | [w, h, 1] => (w, h),
        _ => {
            return Err(malformed(
                d,
                format!("shape {shape:?} is not [width, height]"),
            ))
        }
    };
    let ty = get_str(&desc, "type", d)?;
    let pixel = pixel_from_name(ty)
        .ok_or_else(|| at_part(StreamError::UnknownType(ty.chars().take(64).collect()), d))?;
    let encoding =
        parse_v1_encoding(get_str(&desc, "encoding", d)?, pixel).map_err(|e| at_part(e, d))?;
    let size = get_u64(&desc, "size", d)?;
    let len = frame_len(width, height, pixel).map_err(|e| at_part(e, d))?;
    let b = d + 1;
    let blob = parts
        .get(b)
        .ok_or_else(|| malformed(b, "missing the image blob"))?;
    if size != blob.len() as u64 {
        return Err(at_part(
            StreamError::BadSize(format!("'size' {size}, the blob has {} bytes", blob.len())),
            b,
        ));
    }
    if encoding == Encoding::Raw && blob.len() != len {
        return Err(at_part(
            StreamError::BadSize(format!(
                "raw {width} x {height} {ty} needs {len} bytes, the blob has {}",
                blob.len()
            )),
            b,
        ));
    }
    let mut img = Image {
        series_id,
        image_id,
        series_unique_id: None,
        frames: vec![Frame {
            channel: String::new(),
            width,
            height,
            pixel,
            encoding,
            data: blob.clone(),
        }],
        start_time: None,
        stop_time: None,
        real_time: None,
        series_date: None,
        appendix: None,
    };
    let mut j = b + 1;
    if let Some(cfg) = parts
        .get(j)
        .and_then(|p| json_object(p))
        .filter(|o| htype(o) == Some("dconfig-1.0"))
    {
        let ns = |k: &str| {
            cfg.get(k)
                .and_then(Value::as_u64)
                .map(|num| Rational { num, den: NS })
        };
        img.start_time = ns("start_time");
        img.stop_time = ns("stop_time");
        img.real_time = ns("real_time");
        j += 1;
    }
    j = appendix(parts, j, &mut img.appendix);
    out.push(Event::Image(img));
    Ok(j)
}

#[cfg(test)]
mod tests {
    use super::super::encoding::decode_into;
    use super::super::encoding::test_codec::{bs_lz4, lz4_block, pixels};
    use super::super::{ArrayKind, PixelType};
    use super::*;
    use serde_json::json;

    fn j(v: Value) -> Bytes {
        Bytes::from(v.to_string())
    }

    fn header_parts(detail: &str, appendix: Option<&str>) -> Vec<Bytes> {
        let mut p = vec![j(
            json!({"htype": "dheader-1.0", "series": 7, "header_detail": detail}),
        )];
        if detail != "none" {
            p.push(j(json!({
                "count_time": 0.5, "nimages": 10, "description": "Dectris EIGER2 Si 500K",
                "flatfield_correction_applied": true, "detector_translation": [0.0, 0.0, 0.1],
                "big": u64::MAX, "nothing": null
            })));
        }
        if detail == "all" {
            let ff: Vec<u8> = (0..6u32)
                .flat_map(|i| (i as f32 * 0.5).to_le_bytes())
                .collect();
            p.push(j(
                json!({"htype": "dflatfield-1.0", "shape": [3, 2], "type": "float32"}),
            ));
            p.push(Bytes::from(ff));
            let pm: Vec<u8> = (0..6u32).flat_map(|i| (i % 2).to_le_bytes()).collect();
            p.push(j(
                json!({"htype": "dpixelmask-1.0", "shape": [3, 2], "type": "uint32"}),
            ));
            p.push(Bytes::from(pm));
            let ct: Vec<u8> = (0..8u32).flat_map(|i| (i as f32).to_le_bytes()).collect();
            p.push(j(
                json!({"htype": "dcountrate_table-1.0", "shape": [2, 4], "type": "float32"}),
            ));
            p.push(Bytes::from(ct));
        }
        if let Some(a) = appendix {
            p.push(Bytes::from(a.to_owned()));
        }
        p
    }

    fn image_parts(
        frame: u64,
        pixel: &str,
        enc: &str,
        w: usize,
        h: usize,
        blob: Vec<u8>,
        appendix: Option<&str>,
    ) -> Vec<Bytes> {
        let mut p = vec![
            j(json!({"htype": "dimage-1.0", "series": 7, "frame": frame, "hash": ""})),
            j(
                json!({"htype": "dimage_d-1.0", "shape": [w, h], "type": pixel,
                     "encoding": enc, "size": blob.len()}),
            ),
            Bytes::from(blob),
            j(
                json!({"htype": "dconfig-1.0", "start_time": 834759834260u64,
                     "stop_time": 834760834280u64, "real_time": 1000000}),
            ),
        ];
        if let Some(a) = appendix {
            p.push(Bytes::from(a.to_owned()));
        }
        p
    }

    fn decode(parts: &[Bytes]) -> Vec<Event> {
        let mut out = Vec::new();
        decode_message(parts, &mut out).unwrap();
        out
    }

    fn pixels_of(f: &Frame) -> Vec<u8> {
        let mut out = vec![0u8; f.decoded_len()];
        decode_into(f, &mut out).unwrap();
        out
    }

    #[test]
    fn images_in_every_type_and_encoding() {
        let (w, h) = (33, 17);
        for (ty, pixel) in [
            ("uint8", PixelType::U8),
            ("uint16", PixelType::U16),
            ("uint32", PixelType::U32),
        ] {
            let s = pixel.size();
            let raw = pixels(w * h * s);
            let bs = format!("bs{}-lz4<", s * 8);
            for (enc, blob) in [
                ("<", raw.clone()),
                ("lz4<", lz4_block(&raw)),
                (bs.as_str(), bs_lz4(&raw, s)),
            ] {
                let parts = image_parts(3, ty, enc, w, h, blob.clone(), None);
                let ev = decode(&parts);
                let [Event::Image(img)] = &ev[..] else {
                    panic!("{ev:?}")
                };
                assert_eq!((img.series_id, img.image_id), (7, 3));
                let f = &img.frames[0];
                assert_eq!((f.width, f.height, f.pixel), (w, h, pixel));
                // Zero-copy: the frame is the blob part itself.
                assert_eq!(f.data.as_ptr(), parts[2].as_ptr());
                assert_eq!(pixels_of(f), raw, "{ty} {enc}");
                assert_eq!(
                    img.start_time,
                    Some(Rational {
                        num: 834759834260,
                        den: NS
                    })
                );
                assert_eq!(img.real_time.unwrap().as_nanos(), Some(1_000_000));
                assert_eq!(img.appendix, None);
            }
        }
    }

    #[test]
    fn header_and_first_image_in_one_message() {
        let raw = pixels(8 * 4 * 2);
        let mut parts = header_parts("basic", None);
        parts.extend(image_parts(
            0,
            "uint16",
            "bs16-lz4<",
            8,
            4,
            bs_lz4(&raw, 2),
            Some("img app"),
        ));
        parts.extend(image_parts(1, "uint16", "<", 8, 4, raw.clone(), None));
        parts.push(j(json!({"htype": "dseries_end-1.0", "series": 7})));
        let ev = decode(&parts);
        assert_eq!(ev.len(), 4);
        let Event::Start(s) = &ev[0] else { panic!() };
        assert_eq!(s.series_id, 7);
        assert_eq!(s.header_detail.as_deref(), Some("basic"));
        assert!(s
            .meta
            .contains(&("count_time".into(), MetaValue::Float(0.5))));
        assert!(s.meta.contains(&("nimages".into(), MetaValue::Int(10))));
        assert!(s
            .meta
            .contains(&("flatfield_correction_applied".into(), MetaValue::Bool(true))));
        assert!(s.meta.contains(&(
            "detector_translation".into(),
            MetaValue::Text("[0.0,0.0,0.1]".into())
        )));
        assert!(s
            .meta
            .contains(&("big".into(), MetaValue::Float(u64::MAX as f64))));
        assert!(!s.meta.iter().any(|(k, _)| k == "nothing"));
        let Event::Image(a) = &ev[1] else { panic!() };
        assert_eq!(a.appendix.as_deref(), Some("img app"));
        assert_eq!(pixels_of(&a.frames[0]), raw);
        let Event::Image(b) = &ev[2] else { panic!() };
        assert_eq!((b.image_id, b.appendix.as_ref()), (1, None));
        assert_eq!(
            ev[3],
            Event::End {
                series_id: 7,
                series_unique_id: None
            }
        );
    }

    #[test]
    fn header_detail_all_with_arrays_and_appendix() {
        let parts = header_parts("all", Some(r#"{"user": "json appendix"}"#));
        assert_eq!(parts.len(), 9);
        let ev = decode(&parts);
        let [Event::Start(s)] = &ev[..] else {
            panic!("{ev:?}")
        };
        let names: Vec<_> = s.arrays.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["flatfield", "pixel_mask", "countrate_table"]);
        assert_eq!(s.arrays[0].dims, [3, 2]);
        assert_eq!(s.arrays[0].kind, ArrayKind::F32);
        assert_eq!(&s.arrays[0].data[4..8], &0.5f32.to_le_bytes());
        assert_eq!(s.arrays[1].kind, ArrayKind::U32);
        assert_eq!(s.arrays[2].dims, [2, 4]);
        assert_eq!(s.appendix.as_deref(), Some(r#"{"user": "json appendix"}"#));
        // A non-JSON appendix, and none at all, and detail "none".
        let ev = decode(&header_parts("all", Some("plain text")));
        let [Event::Start(s)] = &ev[..] else { panic!() };
        assert_eq!(s.appendix.as_deref(), Some("plain text"));
        let ev = decode(&header_parts("none", Some("x")));
        let [Event::Start(s)] = &ev[..] else { panic!() };
        assert!(s.meta.is_empty());
        assert_eq!(s.appendix.as_deref(), Some("x"));
    }

    #[test]
    fn errors_name_the_part_and_keep_earlier_events() {
        let raw = pixels(8 * 4 * 2);
        let mut parts = header_parts("basic", None);
        parts.extend(image_parts(0, "uint16", "<", 8, 4, raw.clone(), None));
        // Wrong 'size'.
        parts[3] = j(
            json!({"htype": "dimage_d-1.0", "shape": [8, 4], "type": "uint16",
                            "encoding": "<", "size": 63}),
        );
        let mut out = Vec::new();
        let e = decode_message(&parts, &mut out).unwrap_err();
        assert!(
            matches!(&e, StreamError::BadSize(s) if s.starts_with("part 4:")),
            "{e}"
        );
        assert_eq!(out.len(), 1);
        // Unknown type / encoding, big-endian.
        for (ty, enc, want) in [
            ("float32", "<", "unknown type"),
            ("uint16", ">", "unknown encoding"),
            ("uint16", "bs8-lz4<", "bad size"),
        ] {
            let mut p = image_parts(0, "uint16", "<", 8, 4, raw.clone(), None);
            p[1] = j(json!({"htype": "dimage_d-1.0", "shape": [8, 4], "type": ty,
                            "encoding": enc, "size": 64}));
            let e = decode_message(&p, &mut Vec::new()).unwrap_err();
            assert_eq!(e.reason(), want);
        }
        // Raw blob of the wrong length (with a matching 'size').
        let p = image_parts(0, "uint16", "<", 8, 5, raw.clone(), None);
        assert!(matches!(
            decode_message(&p, &mut Vec::new()),
            Err(StreamError::BadSize(_))
        ));
        // Absurd shape.
        let p = image_parts(0, "uint32", "lz4<", 1 << 20, 1 << 20, raw.clone(), None);
        assert!(matches!(
            decode_message(&p, &mut Vec::new()),
            Err(StreamError::BadSize(_))
        ));
        // Missing blob, stray parts, a blob where a header should be.
        let p = image_parts(0, "uint16", "<", 8, 4, raw.clone(), None);
        assert!(decode_message(&p[..2], &mut Vec::new()).is_err());
        assert!(decode_message(&p[1..], &mut Vec::new()).is_err());
        assert!(decode_message(&p[2..], &mut Vec::new()).is_err());
        // basic without its config dict.
        let h = header_parts("basic", None);
        let e = decode_message(&h[..1], &mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("part 1"), "{e}");
        // Header array blob of the wrong length.
        let mut h = header_parts("all", None);
        h[3] = Bytes::from_static(b"abc");
        assert!(matches!(
            decode_message(&h, &mut Vec::new()),
            Err(StreamError::BadSize(_))
        ));
    }

    #[test]
    fn missing_dconfig_is_tolerated() {
        let raw = pixels(4 * 4);
        let mut p = image_parts(5, "uint8", "<", 4, 4, raw, None);
        p.truncate(3);
        p.push(j(json!({"htype": "dseries_end-1.0", "series": 7})));
        let ev = decode(&p);
        let Event::Image(img) = &ev[0] else { panic!() };
        assert_eq!(img.start_time, None);
        assert!(matches!(ev[1], Event::End { .. }));
    }
}
