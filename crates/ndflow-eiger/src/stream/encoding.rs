//! Frame encodings: the v1 encoding grammar, cheap header checks for pass-through, and
//! decoding into a caller's buffer through `ndflow-codec`.
//!
//! Every size is checked before it is used: a frame's decoded size comes from its shape and
//! must not exceed [`MAX_FRAME_BYTES`]; the 12-byte headers of `BsLz4` / `Lz4Hdf5` must
//! announce exactly that size; and a compressed blob that could not possibly expand to the
//! announced size (LZ4 expands at most ~255×) is refused before any work is done.

use super::{ArrayKind, Encoding, Frame, PixelType, StreamError, MAX_FRAME_BYTES};
use ndflow_codec::{bslz4, lz4};

/// Bytes of the `BsLz4` / `Lz4Hdf5` header: `u64` BE total bytes, `u32` BE block size.
pub const HEADER_LEN: usize = 12;

/// The most one byte of LZ4 input can expand to, with margin (a match byte of 255 adds 255
/// output bytes; literals expand 1:1).
const LZ4_MAX_RATIO: usize = 256;
/// Slack for headers, block lengths and tiny inputs in the expansion bound.
const EXPANSION_SLACK: usize = 64;

fn bad_size(detail: String) -> StreamError {
    StreamError::BadSize(detail)
}

/// The decoded size of a `width × height` frame of `pixel`, refusing overflow and anything
/// above [`MAX_FRAME_BYTES`].
pub fn frame_len(width: usize, height: usize, pixel: PixelType) -> Result<usize, StreamError> {
    width
        .checked_mul(height)
        .and_then(|n| n.checked_mul(pixel.size()))
        .filter(|&n| n <= MAX_FRAME_BYTES)
        .ok_or_else(|| {
            bad_size(format!(
                "{width} x {height} x {} bytes exceeds the {MAX_FRAME_BYTES}-byte limit",
                pixel.size()
            ))
        })
}

/// Bytes per element of a header array.
pub fn kind_size(kind: ArrayKind) -> usize {
    match kind {
        ArrayKind::U8 | ArrayKind::I8 => 1,
        ArrayKind::U16 | ArrayKind::I16 => 2,
        ArrayKind::U32 | ArrayKind::I32 | ArrayKind::F32 => 4,
        ArrayKind::U64 | ArrayKind::I64 | ArrayKind::F64 => 8,
    }
}

/// A pixel type by its stream name (`uint8`, `uint16`, `uint32`, `int8`, `int16`, `int32`).
pub fn pixel_from_name(name: &str) -> Option<PixelType> {
    Some(match name {
        "uint8" => PixelType::U8,
        "uint16" => PixelType::U16,
        "uint32" => PixelType::U32,
        "int8" => PixelType::I8,
        "int16" => PixelType::I16,
        "int32" => PixelType::I32,
        _ => return None,
    })
}

/// A header array's element type by its v1 name (`uint8` … `int64`, `float32`, `float64`).
pub fn kind_from_name(name: &str) -> Option<ArrayKind> {
    Some(match name {
        "uint8" => ArrayKind::U8,
        "uint16" => ArrayKind::U16,
        "uint32" => ArrayKind::U32,
        "uint64" => ArrayKind::U64,
        "int8" => ArrayKind::I8,
        "int16" => ArrayKind::I16,
        "int32" => ArrayKind::I32,
        "int64" => ArrayKind::I64,
        "float32" => ArrayKind::F32,
        "float64" => ArrayKind::F64,
        _ => return None,
    })
}

/// `dims`' element count times `elem` bytes, refusing overflow and anything above
/// [`MAX_FRAME_BYTES`].
pub(crate) fn array_len(dims: &[usize], elem: usize) -> Result<usize, StreamError> {
    dims.iter()
        .try_fold(elem, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= MAX_FRAME_BYTES)
        .ok_or_else(|| {
            bad_size(format!(
                "array {dims:?} of {elem}-byte elements is too large"
            ))
        })
}

/// Adds where an error happened (`part N`) to its text.
pub(crate) fn at_part(e: StreamError, part: usize) -> StreamError {
    let p = |s: String| format!("part {part}: {s}");
    match e {
        StreamError::Malformed { what, detail } => StreamError::Malformed {
            what,
            detail: p(detail),
        },
        StreamError::UnknownEncoding(s) => StreamError::UnknownEncoding(p(s)),
        StreamError::UnknownType(s) => StreamError::UnknownType(p(s)),
        StreamError::BadSize(s) => StreamError::BadSize(p(s)),
        StreamError::Decode(s) => StreamError::Decode(p(s)),
    }
}

/// Parses a v1 `dimage_d` `encoding`: `[bs<BITS>][[-]lz4][<|>]`.
///
/// * `<` or no byte order: little-endian; `>` is refused ([`StreamError::UnknownEncoding`]):
///   detectors send little-endian and nothing downstream byte-swaps.
/// * `bs<BITS>` must come with `lz4` (bitshuffle alone has no [`Encoding`]) and BITS must be
///   the pixel size in bits ([`StreamError::BadSize`] otherwise).
/// * The `-` is accepted only after `bs<BITS>`.
pub fn parse_v1_encoding(s: &str, pixel: PixelType) -> Result<Encoding, StreamError> {
    let unknown = || StreamError::UnknownEncoding(s.chars().take(64).collect());
    let mut rest = s;
    let mut bits: Option<usize> = None;
    if let Some(r) = rest.strip_prefix("bs") {
        let digits = r.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 3 {
            return Err(unknown());
        }
        bits = Some(r[..digits].parse().map_err(|_| unknown())?);
        rest = &r[digits..];
    }
    let mut lz4 = false;
    if let Some(r) = rest.strip_prefix("-lz4") {
        if bits.is_none() {
            return Err(unknown());
        }
        lz4 = true;
        rest = r;
    } else if let Some(r) = rest.strip_prefix("lz4") {
        lz4 = true;
        rest = r;
    }
    match rest {
        "" | "<" => {}
        _ => return Err(unknown()),
    }
    match (bits, lz4) {
        (None, false) => Ok(Encoding::Raw),
        (None, true) => Ok(Encoding::Lz4Block),
        (Some(_), false) => Err(unknown()),
        (Some(b), true) => {
            if b != pixel.size() * 8 {
                return Err(bad_size(format!(
                    "encoding '{s}' shuffles {b}-bit elements, the pixels are {}-bit",
                    pixel.size() * 8
                )));
            }
            Ok(Encoding::BsLz4 {
                elem_size: pixel.size(),
            })
        }
    }
}

/// The total a 12-byte header announces, or why it cannot be read.
fn header_total(data: &[u8]) -> Result<usize, StreamError> {
    let head = data.get(..HEADER_LEN).ok_or_else(|| {
        StreamError::Decode(format!(
            "{} bytes is shorter than the 12-byte header",
            data.len()
        ))
    })?;
    let mut b = [0u8; 8];
    b.copy_from_slice(&head[..8]);
    let total = u64::from_be_bytes(b);
    usize::try_from(total)
        .ok()
        .filter(|&t| t <= MAX_FRAME_BYTES)
        .ok_or_else(|| bad_size(format!("header announces {total} bytes")))
}

fn header_block(data: &[u8]) -> usize {
    match data.get(8..HEADER_LEN) {
        Some(b) => u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize,
        None => 0,
    }
}

/// Whether `compressed` bytes can possibly decode to `decoded` bytes.
fn can_expand(compressed: usize, decoded: usize) -> bool {
    decoded
        <= compressed
            .saturating_mul(LZ4_MAX_RATIO)
            .saturating_add(EXPANSION_SLACK)
}

/// Checks `enc`'s framing of `data` against an expected decoded size and element size,
/// without decoding.
fn check_blob(enc: Encoding, data: &[u8], len: usize, elem: usize) -> Result<(), StreamError> {
    match enc {
        Encoding::Raw => {
            if data.len() != len {
                return Err(bad_size(format!(
                    "raw frame has {} bytes, the shape needs {len}",
                    data.len()
                )));
            }
        }
        Encoding::Lz4Block => {
            if !can_expand(data.len(), len) || (len > 0 && data.is_empty()) {
                return Err(StreamError::Decode(format!(
                    "{} bytes of LZ4 cannot decode to {len} bytes",
                    data.len()
                )));
            }
        }
        Encoding::BsLz4 { elem_size } => {
            if elem_size != elem {
                return Err(bad_size(format!(
                    "bitshuffle element size {elem_size}, the pixels are {elem} bytes"
                )));
            }
            check_hdf5_header(data, len)?;
            let bb = header_block(data);
            if elem_size == 0
                || !bb.is_multiple_of(elem_size)
                || !(bb / elem_size).is_multiple_of(8)
            {
                return Err(StreamError::Decode(format!(
                    "bitshuffle block of {bb} bytes is not a multiple of 8 elements"
                )));
            }
        }
        Encoding::Lz4Hdf5 => {
            check_hdf5_header(data, len)?;
            if len > 0 && header_block(data) == 0 {
                return Err(StreamError::Decode("lz4hdf5 block size 0".into()));
            }
        }
    }
    Ok(())
}

fn check_hdf5_header(data: &[u8], len: usize) -> Result<(), StreamError> {
    let total = header_total(data)?;
    if total != len {
        return Err(bad_size(format!(
            "header announces {total} bytes, the shape needs {len}"
        )));
    }
    if !can_expand(data.len(), len) {
        return Err(StreamError::Decode(format!(
            "{} bytes cannot decode to {len} bytes",
            data.len()
        )));
    }
    Ok(())
}

/// Cheap validation for pass-through: the frame's size is sane, a raw frame has exactly the
/// shape's bytes, a `BsLz4` / `Lz4Hdf5` header announces [`Frame::decoded_len`] bytes (and
/// the bitshuffle element size is the pixel size), and the blob is not too short to expand
/// to that size. A frame that passes may still fail [`decode_into`] on corrupt blocks.
pub fn check_header(frame: &Frame) -> Result<(), StreamError> {
    let len = frame_len(frame.width, frame.height, frame.pixel)?;
    check_blob(frame.encoding, &frame.data, len, frame.pixel.size())
}

/// Decodes `frame` into `out`, whose length must be [`Frame::decoded_len`]
/// ([`StreamError::BadSize`] otherwise). Pixels come out little-endian as sent.
pub fn decode_into(frame: &Frame, out: &mut [u8]) -> Result<(), StreamError> {
    let len = frame_len(frame.width, frame.height, frame.pixel)?;
    if out.len() != len {
        return Err(bad_size(format!(
            "output buffer has {} bytes, the frame needs {len}",
            out.len()
        )));
    }
    decode_blob(frame.encoding, &frame.data, frame.pixel.size(), out)
}

fn decode_blob(enc: Encoding, data: &[u8], elem: usize, out: &mut [u8]) -> Result<(), StreamError> {
    check_blob(enc, data, out.len(), elem)?;
    let codec = |e: ndflow_codec::CodecError| StreamError::Decode(e.to_string());
    match enc {
        Encoding::Raw => out.copy_from_slice(data),
        Encoding::Lz4Block => {
            lz4::decompress_block(data, out).map_err(codec)?;
        }
        Encoding::BsLz4 { elem_size } => {
            bslz4::decompress(data, elem_size, bslz4::BsFraming::Hdf5, out).map_err(codec)?;
        }
        Encoding::Lz4Hdf5 => {
            lz4::decompress_hdf5(data, out).map_err(codec)?;
        }
    }
    Ok(())
}

/// Decompresses a `BsLz4` / `Lz4Hdf5` blob whose size only its header gives (v2 header
/// arrays) into owned bytes. The header's total must be a whole number of `elem`-byte
/// elements, at most [`MAX_FRAME_BYTES`], and reachable from the blob's length.
pub(crate) fn decompress_owned(
    enc: Encoding,
    data: &[u8],
    elem: usize,
) -> Result<Vec<u8>, StreamError> {
    let total = match enc {
        Encoding::BsLz4 { .. } | Encoding::Lz4Hdf5 => header_total(data)?,
        Encoding::Raw => data.len(),
        Encoding::Lz4Block => {
            return Err(StreamError::UnknownEncoding(
                "a raw LZ4 block without its size".into(),
            ))
        }
    };
    if elem == 0 || !total.is_multiple_of(elem) {
        return Err(bad_size(format!(
            "{total} bytes is not a whole number of {elem}-byte elements"
        )));
    }
    // Refuse before allocating: the header cannot be trusted.
    check_blob(enc, data, total, elem)?;
    let mut out = vec![0u8; total];
    decode_blob(enc, data, elem, &mut out)?;
    Ok(out)
}

#[cfg(test)]
pub(crate) mod test_codec {
    //! Compressors for the tests' messages.
    use ndflow_codec::{bslz4, lz4};

    /// Deterministic test pixels of `n` bytes, compressible but not trivial.
    pub fn pixels(n: usize) -> Vec<u8> {
        (0..n)
            .map(|i| ((i * 7) % 13 + (i / 97) % 5) as u8)
            .collect()
    }

    pub fn bs_lz4(raw: &[u8], elem: usize) -> Vec<u8> {
        let mut out = vec![
            0u8;
            bslz4::max_compressed_len(raw.len(), elem, 0, bslz4::BsFraming::Hdf5)
                .unwrap()
        ];
        let n = bslz4::compress(raw, elem, 0, bslz4::BsFraming::Hdf5, &mut out).unwrap();
        out.truncate(n);
        out
    }

    pub fn lz4_block(raw: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; lz4::max_compressed_len(raw.len())];
        let n = lz4::compress_block(raw, &mut out).unwrap();
        out.truncate(n);
        out
    }

    pub fn lz4_hdf5(raw: &[u8], block: usize) -> Vec<u8> {
        let mut out = vec![0u8; lz4::max_hdf5_len(raw.len(), block)];
        let n = lz4::compress_hdf5(raw, block, &mut out).unwrap();
        out.truncate(n);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::test_codec::*;
    use super::*;
    use bytes::Bytes;

    fn frame(enc: Encoding, pixel: PixelType, w: usize, h: usize, data: Vec<u8>) -> Frame {
        Frame {
            channel: String::new(),
            width: w,
            height: h,
            pixel,
            encoding: enc,
            data: Bytes::from(data),
        }
    }

    #[test]
    fn grammar() {
        use Encoding::*;
        use PixelType::*;
        assert_eq!(parse_v1_encoding("<", U16).unwrap(), Raw);
        assert_eq!(parse_v1_encoding("", U16).unwrap(), Raw);
        assert_eq!(parse_v1_encoding("lz4<", U8).unwrap(), Lz4Block);
        assert_eq!(parse_v1_encoding("lz4", U8).unwrap(), Lz4Block);
        assert_eq!(
            parse_v1_encoding("bs16-lz4<", U16).unwrap(),
            BsLz4 { elem_size: 2 }
        );
        assert_eq!(
            parse_v1_encoding("bs32lz4<", I32).unwrap(),
            BsLz4 { elem_size: 4 }
        );
        assert_eq!(
            parse_v1_encoding("bs8-lz4<", U8).unwrap(),
            BsLz4 { elem_size: 1 }
        );
        for bad in [
            ">",
            "lz4>",
            "bs16-lz4>",
            "bs16<",
            "-lz4<",
            "bs-lz4<",
            "zstd<",
            "<<",
            "bs99999-lz4<",
        ] {
            assert!(
                matches!(
                    parse_v1_encoding(bad, U16),
                    Err(StreamError::UnknownEncoding(_))
                ),
                "{bad}"
            );
        }
        assert!(matches!(
            parse_v1_encoding("bs8-lz4<", U16),
            Err(StreamError::BadSize(_))
        ));
    }

    #[test]
    fn round_trips_all_encodings_and_types() {
        let (w, h) = (37, 23); // n % 8 != 0: the verbatim tail is exercised
        for pixel in [
            PixelType::U8,
            PixelType::U16,
            PixelType::U32,
            PixelType::I32,
        ] {
            let raw = pixels(w * h * pixel.size());
            let encs = [
                (Encoding::Raw, raw.clone()),
                (Encoding::Lz4Block, lz4_block(&raw)),
                (
                    Encoding::BsLz4 {
                        elem_size: pixel.size(),
                    },
                    bs_lz4(&raw, pixel.size()),
                ),
                (Encoding::Lz4Hdf5, lz4_hdf5(&raw, 256)),
                (Encoding::Lz4Hdf5, lz4_hdf5(&raw, 0)),
            ];
            for (enc, data) in encs {
                let f = frame(enc, pixel, w, h, data);
                check_header(&f).unwrap();
                let mut out = vec![0u8; f.decoded_len()];
                decode_into(&f, &mut out).unwrap();
                assert_eq!(out, raw, "{enc:?} {pixel:?}");
            }
        }
    }

    #[test]
    fn sizes_are_checked() {
        let raw = pixels(16 * 16 * 2);
        let bs = bs_lz4(&raw, 2);
        // Wrong output length.
        let f = frame(
            Encoding::BsLz4 { elem_size: 2 },
            PixelType::U16,
            16,
            16,
            bs.clone(),
        );
        assert!(matches!(
            decode_into(&f, &mut [0u8; 10]),
            Err(StreamError::BadSize(_))
        ));
        // Header total differs from the shape.
        let f = frame(
            Encoding::BsLz4 { elem_size: 2 },
            PixelType::U16,
            16,
            8,
            bs.clone(),
        );
        assert!(matches!(check_header(&f), Err(StreamError::BadSize(_))));
        // Element size differs from the pixel size.
        let f = frame(
            Encoding::BsLz4 { elem_size: 4 },
            PixelType::U16,
            16,
            16,
            bs.clone(),
        );
        assert!(matches!(check_header(&f), Err(StreamError::BadSize(_))));
        // Raw length.
        let f = frame(Encoding::Raw, PixelType::U16, 16, 16, raw[1..].to_vec());
        assert!(matches!(check_header(&f), Err(StreamError::BadSize(_))));
        // Absurd shapes do not overflow.
        let f = frame(Encoding::Raw, PixelType::U32, usize::MAX, 3, vec![]);
        assert!(matches!(check_header(&f), Err(StreamError::BadSize(_))));
        assert!(matches!(
            decode_into(&f, &mut []),
            Err(StreamError::BadSize(_))
        ));
        // A header announcing more than the blob can hold.
        let mut big = bs.clone();
        big[..8].copy_from_slice(&(1u64 << 62).to_be_bytes());
        assert!(decompress_owned(Encoding::BsLz4 { elem_size: 2 }, &big, 2).is_err());
        // Truncated and corrupt blobs are errors.
        let f = frame(
            Encoding::BsLz4 { elem_size: 2 },
            PixelType::U16,
            16,
            16,
            bs[..bs.len() - 3].to_vec(),
        );
        let mut out = vec![0u8; 512];
        assert!(decode_into(&f, &mut out).is_err());
        let f = frame(Encoding::Lz4Block, PixelType::U16, 16, 16, vec![0xff; 5]);
        assert!(decode_into(&f, &mut out).is_err());
        let f = frame(Encoding::Lz4Hdf5, PixelType::U16, 16, 16, vec![0; 5]);
        assert!(check_header(&f).is_err());
    }

    #[test]
    fn owned_decompression() {
        let raw = pixels(100 * 4);
        let v = decompress_owned(Encoding::BsLz4 { elem_size: 4 }, &bs_lz4(&raw, 4), 4).unwrap();
        assert_eq!(v, raw);
        let v = decompress_owned(Encoding::Lz4Hdf5, &lz4_hdf5(&raw, 64), 4).unwrap();
        assert_eq!(v, raw);
        assert!(decompress_owned(Encoding::BsLz4 { elem_size: 2 }, &bs_lz4(&raw, 4), 4).is_err());
    }
}
