//! zlib streams (RFC 1950), as NDPluginCodec's `zlib` codec (`compress2` / `uncompress`).
//!
//! Compression: zlib-rs's deflate (through its C API, `libz-rs-sys`) run with **C zlib's
//! own search parameters for each level** (`deflateTune` with zlib's configuration table,
//! on the zlib-rs algorithm that matches zlib's: `deflate_fast` for 1–3, lazy
//! `deflate_slow` for 4–9). Left to its own level table, zlib-rs uses zlib-ng's
//! `deflate_medium` at 3–6, which shrinks the simulator's ramp to 1/21 where C zlib reaches
//! 1/129; with zlib's parameters it compresses like C zlib (within ~2 % on detector data at
//! the default level 6) at 2–3× its speed (`ndflow bench codec`). The streams are valid
//! zlib that any zlib reads, but not byte-identical to C zlib's (the hash and match finder
//! differ).
//! Decompression: zlib-rs through flate2, 1.5–3× C zlib's `uncompress` on detector data;
//! a decoder's output is fixed by the stream, so this changes no byte anywhere.
//! Each thread keeps its (large) compressor and decompressor state and resets it per call,
//! so steady-state calls do not allocate.

use crate::CodecError;
use flate2::{Decompress, FlushDecompress, Status};
use libz_rs_sys as z;
use std::cell::RefCell;

const CODEC: &str = "zlib";

/// zlib's `compressBound`: the largest stream `n` input bytes can produce.
pub const fn max_compressed_len(n: usize) -> usize {
    n + (n >> 12) + (n >> 14) + (n >> 25) + 13
}

/// Per level: the zlib-rs level whose algorithm is the one C zlib runs at that level, then
/// C zlib's `good_length, max_lazy, nice_length, max_chain` (deflate.c's table).
const ZLIB_LEVELS: [(i32, [i32; 4]); 10] = [
    (0, [0, 0, 0, 0]),
    (2, [4, 4, 8, 4]),
    (2, [4, 5, 16, 8]),
    (2, [4, 6, 32, 32]),
    (7, [4, 4, 16, 16]),
    (7, [8, 16, 32, 32]),
    (7, [8, 16, 128, 128]),
    (7, [8, 32, 128, 256]),
    (8, [32, 128, 258, 1024]),
    (9, [32, 258, 258, 4096]),
];

/// One deflate state, at one level. Boxed because the library keeps the stream's address.
struct Encoder {
    strm: Box<z::z_stream>,
    level: usize,
}

fn library(detail: String) -> CodecError {
    CodecError::Library {
        codec: CODEC,
        detail,
    }
}

impl Encoder {
    fn new(level: usize) -> Result<Self, CodecError> {
        let mut strm = Box::<z::z_stream>::default();
        let (algorithm, _) = ZLIB_LEVELS[level];
        // SAFETY: `strm` is a zeroed, boxed z_stream (no allocator set: the library's
        // default is used); the version and size are this library's own.
        let rc = unsafe {
            z::deflateInit2_(
                &mut *strm,
                algorithm,
                z::Z_DEFLATED,
                15,
                8,
                z::Z_DEFAULT_STRATEGY,
                z::zlibVersion(),
                std::mem::size_of::<z::z_stream>() as i32,
            )
        };
        if rc != z::Z_OK {
            return Err(library(format!("deflateInit2 failed ({rc})")));
        }
        Ok(Encoder { strm, level })
    }

    fn compress(&mut self, input: &[u8], out: &mut [u8]) -> Result<usize, CodecError> {
        let strm = &mut *self.strm;
        // SAFETY: `strm` was initialised by deflateInit2_ in `new` and has not moved (boxed).
        // Reset re-applies the level's own table, so the tuning follows it.
        let rc = unsafe { z::deflateReset(strm) };
        if rc != z::Z_OK {
            return Err(library(format!("deflateReset failed ({rc})")));
        }
        if self.level > 0 {
            let [good, lazy, nice, chain] = ZLIB_LEVELS[self.level].1;
            // SAFETY: as above.
            let rc = unsafe { z::deflateTune(strm, good, lazy, nice, chain) };
            if rc != z::Z_OK {
                return Err(library(format!("deflateTune failed ({rc})")));
            }
        }
        let too_small = CodecError::OutputTooSmall {
            need: max_compressed_len(input.len()),
            have: out.len(),
        };
        // avail_in / avail_out are 32-bit: feed larger buffers in pieces.
        let (mut read, mut written) = (0usize, 0usize);
        let result = loop {
            let take_in = (input.len() - read).min(u32::MAX as usize);
            let take_out = (out.len() - written).min(u32::MAX as usize);
            let last = read + take_in == input.len();
            strm.next_in = input[read..].as_ptr().cast_mut();
            strm.avail_in = take_in as u32;
            strm.next_out = out[written..].as_mut_ptr();
            strm.avail_out = take_out as u32;
            let flush = if last { z::Z_FINISH } else { z::Z_NO_FLUSH };
            // SAFETY: next_in/avail_in and next_out/avail_out describe live slices of
            // `input` and `out` for the length of this call; the library reads and writes
            // only within them.
            let rc = unsafe { z::deflate(strm, flush) };
            read += take_in - strm.avail_in as usize;
            written += take_out - strm.avail_out as usize;
            match rc {
                z::Z_STREAM_END => break Ok(written),
                z::Z_OK if written < out.len() => continue,
                z::Z_OK | z::Z_BUF_ERROR => break Err(too_small),
                rc => break Err(library(format!("deflate failed ({rc})"))),
            }
        };
        // The stream must not keep pointers into the caller's buffers.
        strm.next_in = std::ptr::null_mut();
        strm.avail_in = 0;
        strm.next_out = std::ptr::null_mut();
        strm.avail_out = 0;
        result
    }
}

impl Drop for Encoder {
    fn drop(&mut self) {
        // SAFETY: the stream was initialised in `new` and is ended once, here.
        unsafe {
            z::deflateEnd(&mut *self.strm);
        }
    }
}

thread_local! {
    static COMPRESSOR: RefCell<Option<Encoder>> = const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<Decompress>> = const { RefCell::new(None) };
}

/// Compresses `input` as one zlib stream at `level` (clamped to 0–9, as NDPluginCodec
/// does). Returns the bytes written; size `out` with [`max_compressed_len`].
pub fn compress(input: &[u8], level: i32, out: &mut [u8]) -> Result<usize, CodecError> {
    let level = level.clamp(0, 9) as usize;
    COMPRESSOR.with(|cell| match cell.try_borrow_mut() {
        Ok(mut slot) => {
            let encoder = match &mut *slot {
                Some(e) if e.level == level => e,
                other => other.insert(Encoder::new(level)?),
            };
            encoder.compress(input, out)
        }
        Err(_) => Encoder::new(level)?.compress(input, out),
    })
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
