//! zlib streams (RFC 1950), as NDPluginCodec's `zlib` codec (`compress2` / `uncompress`).
//!
//! Built on flate2's low-level `Compress` / `Decompress` (miniz_oxide backend), writing
//! straight into the caller's buffer. Each thread keeps its (large) compressor and
//! decompressor state and resets it per call, so steady-state calls do not allocate.
//! The compressed bytes are a valid zlib stream any zlib reads, but not byte-identical to
//! C zlib's output (the deflate encoders differ).

use crate::CodecError;
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};
use std::cell::RefCell;

const CODEC: &str = "zlib";

/// zlib's `compressBound`: the largest stream `n` input bytes can produce.
pub const fn max_compressed_len(n: usize) -> usize {
    n + (n >> 12) + (n >> 14) + (n >> 25) + 13
}

thread_local! {
    static COMPRESSOR: RefCell<Option<(u32, Compress)>> = const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<Decompress>> = const { RefCell::new(None) };
}

/// Compresses `input` as one zlib stream at `level` (clamped to 0–9, as NDPluginCodec
/// does). Returns the bytes written; size `out` with [`max_compressed_len`].
pub fn compress(input: &[u8], level: i32, out: &mut [u8]) -> Result<usize, CodecError> {
    let level = level.clamp(0, 9) as u32;
    COMPRESSOR.with(|cell| match cell.try_borrow_mut() {
        Ok(mut slot) => {
            let c = match &mut *slot {
                Some((l, c)) if *l == level => {
                    c.reset();
                    c
                }
                other => {
                    &mut other
                        .insert((level, Compress::new(Compression::new(level), true)))
                        .1
                }
            };
            compress_with(c, input, out)
        }
        Err(_) => compress_with(
            &mut Compress::new(Compression::new(level), true),
            input,
            out,
        ),
    })
}

fn compress_with(c: &mut Compress, input: &[u8], out: &mut [u8]) -> Result<usize, CodecError> {
    let status =
        c.compress(input, out, FlushCompress::Finish)
            .map_err(|e| CodecError::Library {
                codec: CODEC,
                detail: e.to_string(),
            })?;
    match status {
        Status::StreamEnd => Ok(c.total_out() as usize),
        _ => Err(CodecError::OutputTooSmall {
            need: max_compressed_len(input.len()),
            have: out.len(),
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
