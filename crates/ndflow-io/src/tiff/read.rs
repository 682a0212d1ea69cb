//! NDFileTIFF's ReadFile: a TIFF file back into a frame, decoded straight into a pool buffer.
//!
//! Reads what NDFileTIFF (ours or areaDetector's) writes: one uncompressed or compressed
//! image, Gray or pixel-interleaved RGB, any of the ten sample types. Mono comes back as
//! [X, Y], RGB as RGB1 [3, X, Y]. The frame's timeStamp, uniqueId and EPICS time stamp come
//! from tags 65000–65003 and every `name:value` tag from 65010 up becomes a string attribute
//! (the file does not keep the attribute's type).

use std::fs::File;
use std::io::{self, BufReader, Read, Seek};
use std::path::Path;

use ndflow_core::{AttrValue, ColorMode, DataType, EpicsTimeStamp, NDArray, NDAttribute, Pool};
use tiff::decoder::{ifd::Value, Decoder, Limits};
use tiff::tags::{PlanarConfiguration, SampleFormat, Tag};
use tiff::{ColorType, TiffError};

use super::tags::{
    TAG_EPICS_TS_NSEC, TAG_EPICS_TS_SEC, TAG_FIRST_ATTRIBUTE, TAG_LAST_ATTRIBUTE, TAG_TIMESTAMP,
    TAG_UNIQUE_ID,
};

/// Largest image ReadFile accepts (a header claiming more is refused before allocating).
const MAX_BYTES: usize = 4 << 30;

fn bad(path: &Path, what: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: {what}", path.display()),
    )
}

/// Reads the TIFF file at `path` into a frame whose pixels come from `pool`.
pub fn read_tiff(path: &Path, pool: &Pool) -> io::Result<NDArray> {
    read_tiff_from(BufReader::new(File::open(path)?), path, pool)
}

/// [`read_tiff`] from any seekable reader (the fuzz targets read from memory); `path` names
/// the source in errors and attributes.
pub fn read_tiff_from<R: Read + Seek>(r: R, path: &Path, pool: &Pool) -> io::Result<NDArray> {
    let terr = |e: TiffError| match e {
        TiffError::IoError(io) => io,
        other => bad(path, other),
    };
    // Images up to MAX_BYTES; tag values and compressed strips within the crate's defaults
    // (1 MiB, 128 MiB), so that a count a hostile file claims is refused, not allocated.
    let mut limits = Limits::default();
    limits.decoding_buffer_size = MAX_BYTES;
    let mut dec = Decoder::new(r).map_err(terr)?.with_limits(limits);
    let (w, h) = dec.dimensions().map_err(terr)?;
    let (samples, bits) = match dec.colortype().map_err(terr)? {
        ColorType::Gray(b) => (1usize, b),
        ColorType::RGB(b) => (3, b),
        other => {
            return Err(bad(
                path,
                format!("colour type {other:?} is not Gray or RGB"),
            ))
        }
    };
    let planar = dec
        .find_tag_unsigned::<u16>(Tag::PlanarConfiguration)
        .map_err(terr)?;
    if samples == 3 && planar == Some(PlanarConfiguration::Planar.to_u16()) {
        return Err(bad(
            path,
            "planar RGB (PlanarConfiguration 2) is not supported",
        ));
    }
    let format = dec
        .find_tag_unsigned_vec::<u16>(Tag::SampleFormat)
        .map_err(terr)?
        .and_then(|v| v.first().copied())
        .unwrap_or(SampleFormat::Uint.to_u16());
    let data_type = data_type(format, bits)
        .ok_or_else(|| bad(path, format!("{bits}-bit samples of format {format}")))?;
    let (w, h) = (w as usize, h as usize);
    let bytes = w
        .checked_mul(h)
        .and_then(|n| n.checked_mul(samples * data_type.size()))
        .filter(|&n| n <= MAX_BYTES)
        .ok_or_else(|| bad(path, format!("{w}x{h}x{samples} image is too large")))?;
    let mut buf = pool.alloc(bytes).map_err(io::Error::other)?;
    dec.read_image_bytes(buf.as_mut_slice::<u8>())
        .map_err(terr)?;
    // The image is read: the tags left are numbers and `name:value` texts, none near 1 MiB (an
    // ASCII tag is bounded by the decoding limit, not the tag-value one).
    let mut tag_limits = Limits::default();
    tag_limits.decoding_buffer_size = 1 << 20;
    let mut dec = dec.with_limits(tag_limits);
    // TIFF stores samples in the file's byte order; the decoder returns native order.
    let sizes: Vec<usize> = if samples == 3 {
        vec![3, w, h]
    } else {
        vec![w, h]
    };
    let mut frame = NDArray::new(&sizes, data_type, buf.freeze()).map_err(io::Error::other)?;
    if let Some(Value::Double(t)) = dec.find_tag(Tag::Unknown(TAG_TIMESTAMP)).map_err(terr)? {
        frame.time_stamp = t;
    }
    let uint = |dec: &mut Decoder<_>, tag| dec.find_tag_unsigned::<u32>(Tag::Unknown(tag));
    if let Some(id) = uint(&mut dec, TAG_UNIQUE_ID).map_err(terr)? {
        frame.unique_id = id as i32;
    }
    let sec = uint(&mut dec, TAG_EPICS_TS_SEC).map_err(terr)?;
    let nsec = uint(&mut dec, TAG_EPICS_TS_NSEC).map_err(terr)?;
    if let (Some(sec), Some(nsec)) = (sec, nsec) {
        frame.epics_ts = EpicsTimeStamp { sec, nsec };
    }
    for tag in TAG_FIRST_ATTRIBUTE..=TAG_LAST_ATTRIBUTE {
        let Some(v) = dec.find_tag(Tag::Unknown(tag)).map_err(terr)? else {
            break; // written consecutively: the first gap ends them
        };
        let Ok(text) = v.into_string() else { continue };
        let text = text.trim_end_matches('\0');
        // The colour mode is the image's own (set below), not the text of the tag.
        if let Some((name, value)) = text.split_once(':').filter(|(n, _)| *n != "ColorMode") {
            let mut a = NDAttribute::new(name, "", AttrValue::String(value.to_string()));
            a.source = path.display().to_string();
            frame.attributes.retain(|x| x.name != name);
            frame.attributes.push(a);
        }
    }
    frame.set_color_mode(if samples == 3 {
        ColorMode::RGB1
    } else {
        ColorMode::Mono
    });
    Ok(frame)
}

fn data_type(format: u16, bits: u8) -> Option<DataType> {
    let uint = SampleFormat::Uint.to_u16();
    let int = SampleFormat::Int.to_u16();
    let float = SampleFormat::IEEEFP.to_u16();
    Some(match (format, bits) {
        (f, 8) if f == uint => DataType::UInt8,
        (f, 16) if f == uint => DataType::UInt16,
        (f, 32) if f == uint => DataType::UInt32,
        (f, 64) if f == uint => DataType::UInt64,
        (f, 8) if f == int => DataType::Int8,
        (f, 16) if f == int => DataType::Int16,
        (f, 32) if f == int => DataType::Int32,
        (f, 64) if f == int => DataType::Int64,
        (f, 32) if f == float => DataType::Float32,
        (f, 64) if f == float => DataType::Float64,
        _ => return None,
    })
}
