//! zlib streams (RFC 1950), as NDPluginCodec's `zlib` codec (`compress2` / `uncompress`).
//!
//! Compression: miniz_oxide's deflate, writing straight into the caller's buffer. Its
//! streams are valid zlib any zlib reads, but not byte-identical to C zlib's (the encoders
//! differ). zlib-rs compresses faster, but at level 6 it shrinks the simulator's ramp to
//! 1/21 where C zlib and miniz_oxide reach 1/129, so it is not used for compression.
//! Decompression: zlib-rs through flate2, 1.5–3× C zlib's `uncompress` on detector data
//! (`ndflow bench codec`); a decoder's output is fixed by the stream, so this changes no
//! byte anywhere. Each thread keeps its (large) compressor and decompressor state and
//! resets it per call, so steady-state calls do not allocate.

use crate::CodecError;
use flate2::{Decompress, FlushDecompress, Status};
use miniz_oxide::deflate::core::CompressorOxide;
use miniz_oxide::deflate::stream::deflate;
use miniz_oxide::{DataFormat, MZError, MZFlush, MZStatus};
use std::cell::RefCell;

const CODEC: &str = "zlib";

/// zlib's `compressBound`: the largest stream `n` input bytes can produce.
pub const fn max_compressed_len(n: usize) -> usize {
    n + (n >> 12) + (n >> 14) + (n >> 25) + 13
}

thread_local! {
    static COMPRESSOR: RefCell<Option<(u8, Box<CompressorOxide>)>> = const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<Decompress>> = const { RefCell::new(None) };
}

fn new_compressor(level: u8) -> Box<CompressorOxide> {
    let mut c = Box::<CompressorOxide>::default();
    c.set_format_and_level(DataFormat::Zlib, level);
    c
}

/// Compresses `input` as one zlib stream at `level` (clamped to 0–9, as NDPluginCodec
/// does). Returns the bytes written; size `out` with [`max_compressed_len`].
pub fn compress(input: &[u8], level: i32, out: &mut [u8]) -> Result<usize, CodecError> {
    let level = level.clamp(0, 9) as u8;
    COMPRESSOR.with(|cell| match cell.try_borrow_mut() {
        Ok(mut slot) => {
            let c = match &mut *slot {
                Some((l, c)) if *l == level => {
                    c.reset();
                    c
                }
                other => &mut other.insert((level, new_compressor(level))).1,
            };
            compress_with(c, input, out)
        }
        Err(_) => compress_with(&mut new_compressor(level), input, out),
    })
}

fn compress_with(
    c: &mut CompressorOxide,
    input: &[u8],
    out: &mut [u8],
) -> Result<usize, CodecError> {
    let r = deflate(c, input, out, MZFlush::Finish);
    match r.status {
        Ok(MZStatus::StreamEnd) => Ok(r.bytes_written),
        Ok(_) | Err(MZError::Buf) => Err(CodecError::OutputTooSmall {
            need: max_compressed_len(input.len()),
            have: out.len(),
        }),
        Err(e) => Err(CodecError::Library {
            codec: CODEC,
            detail: format!("deflate failed: {e:?}"),
        }),
    }
}

/// Decodes one zlib stream; `out.len()` is the exact uncompressed size. A truncated or
/// corrupt stream, trailing bytes, or a different decoded size is an error.
pub fn decompress(input: &[u8], out: &mut [u8]) -> Result<usize, CodecError> {
    DECOMPRESSOR.with(|cell| match cell.try_borrow_mut() {
        Ok(mut slot) => {
            let d = match &mut *slot {
                Some(d) => {
                    d.reset(true);
                    d
                }
                none => none.insert(Decompress::new(true)),
            };
            decompress_with(d, input, out)
        }
        Err(_) => decompress_with(&mut Decompress::new(true), input, out),
    })
}

fn corrupt(detail: String) -> CodecError {
    CodecError::Corrupt {
        codec: CODEC,
        detail,
    }
}

fn decompress_with(d: &mut Decompress, input: &[u8], out: &mut [u8]) -> Result<usize, CodecError> {
    let status = d
        .decompress(input, out, FlushDecompress::Finish)
        .map_err(|e| corrupt(e.to_string()))?;
    let (read, written) = (d.total_in() as usize, d.total_out() as usize);
    match status {
        Status::StreamEnd if read != input.len() => {
            Err(corrupt(format!("{} trailing bytes", input.len() - read)))
        }
        Status::StreamEnd if written != out.len() => Err(corrupt(format!(
            "stream decodes to {written} bytes, expected {}",
            out.len()
        ))),
        Status::StreamEnd => Ok(written),
        // Not finished: either the output is full with input left (the stream holds more
        // than expected) or the input ran out (truncated).
        _ if written == out.len() && read < input.len() => Err(corrupt(format!(
            "stream decodes to more than the expected {} bytes",
            out.len()
        ))),
        _ => Err(corrupt(format!("truncated after {read} bytes"))),
    }
}
