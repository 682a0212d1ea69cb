//! Blosc1 frames through c-blosc's contextual API.
//!
//! `blosc_compress_ctx` / `blosc_decompress_ctx` keep no global state, so any number of threads
//! may call [`compress`] and [`decompress`] at once (NDPluginCodec uses the same pair).
//! c-blosc is built by this crate's `build.rs` from blosc-src's bundled sources with the SSE2
//! and AVX2 shuffles chosen at run time; [`build_info`] tells what this binary has.
//!
//! Decoding never trusts the frame: the 16-byte header is checked against the input and the
//! output length in Rust *before* c-blosc sees it, so a malformed frame cannot make C read past
//! the input or write past the output. c-blosc's decoder itself checks every block offset and
//! compressed length against the frame size (c-blosc ≥ 1.21).
//!
//! Blosc1 frame header (little endian): `[0]` format version (2), `[1]` compressor format
//! version, `[2]` flags (bit0 byte shuffle, bit1 memcpyed, bit2 bit shuffle, bit3 reserved,
//! bit4 dont-split, bits 5-7 compressor format), `[3]` type size, `[4..8]` uncompressed bytes,
//! `[8..12]` block size, `[12..16]` frame bytes (header included).

use std::os::raw::{c_char, c_int, c_void};

use crate::CodecError;

// c-blosc calls into these C libraries; naming the crates makes rustc link them.
#[cfg(ndflow_cblosc_zlib)]
use libz_sys as _;
use lz4_sys as _;
#[cfg(ndflow_cblosc_zstd)]
use zstd_sys as _;

const CODEC: &str = "blosc";

/// Bytes c-blosc may add to the input (`BLOSC_MAX_OVERHEAD`): the frame header.
pub const MAX_OVERHEAD: usize = 16;
/// Largest input c-blosc 1.x accepts (`BLOSC_MAX_BUFFERSIZE`).
pub const MAX_BUFFER_SIZE: usize = i32::MAX as usize - MAX_OVERHEAD;
/// Largest type size; c-blosc treats larger ones as 1.
pub const MAX_TYPE_SIZE: usize = 255;
/// Most internal threads c-blosc accepts (`BLOSC_MAX_THREADS`).
pub const MAX_THREADS: usize = 256;
/// Largest forced block size (`BLOSC_MAX_BLOCKSIZE`).
pub const MAX_BLOCK_SIZE: usize = 715_827_542;

const FORMAT_VERSION: u8 = 2;
const FLAG_SHUFFLE: u8 = 0x01;
const FLAG_MEMCPYED: u8 = 0x02;
const FLAG_BITSHUFFLE: u8 = 0x04;
const FLAG_RESERVED: u8 = 0x08;

/// Compressor inside the Blosc frame; order and names of NDPluginCodec's `BloscCompressor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BloscCompressor {
    #[default]
    BloscLZ,
    LZ4,
    LZ4HC,
    Snappy,
    Zlib,
    Zstd,
}

impl BloscCompressor {
    /// All compressors in menu order.
    pub const ALL: [BloscCompressor; 6] = [
        Self::BloscLZ,
        Self::LZ4,
        Self::LZ4HC,
        Self::Snappy,
        Self::Zlib,
        Self::Zstd,
    ];
    /// areaDetector's menu strings (NDCodec.template `BloscCompressor`).
    pub const CHOICES: [&'static str; 6] = ["BloscLZ", "LZ4", "LZ4HC", "SNAPPY", "ZLIB", "ZSTD"];

    /// The areaDetector menu string.
    pub fn name(self) -> &'static str {
        Self::CHOICES[self as usize]
    }

    /// c-blosc's compressor name (`"blosclz"`, `"lz4"`, …).
    pub fn c_name(self) -> &'static str {
        let n = self.c_name_nul();
        // The names are ASCII literals; the slice drops the trailing NUL.
        std::str::from_utf8(&n[..n.len() - 1]).unwrap_or("")
    }

    fn c_name_nul(self) -> &'static [u8] {
        match self {
            Self::BloscLZ => b"blosclz\0",
            Self::LZ4 => b"lz4\0",
            Self::LZ4HC => b"lz4hc\0",
            Self::Snappy => b"snappy\0",
            Self::Zlib => b"zlib\0",
            Self::Zstd => b"zstd\0",
        }
    }

    /// From the menu index (0 = BloscLZ … 5 = ZSTD).
    pub fn from_index(index: i64) -> Option<Self> {
        usize::try_from(index)
            .ok()
            .and_then(|i| Self::ALL.get(i).copied())
    }

    /// From a menu string or a c-blosc name, case-insensitive.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(name) || c.c_name().eq_ignore_ascii_case(name))
    }

    /// Whether this build of c-blosc contains the codec.
    pub fn is_available(self) -> bool {
        // SAFETY: the argument is a NUL-terminated static string; the function only compares
        // it with c-blosc's built-in names and keeps no pointer to it.
        unsafe { blosc_src::blosc_compname_to_compcode(self.c_name_nul().as_ptr().cast()) >= 0 }
    }

    /// The compressor of a frame, from the 3-bit format code in the flags byte. LZ4 and
    /// LZ4HC share one format (the decoder is the same), reported as LZ4.
    fn from_format(code: u8) -> Option<Self> {
        match code {
            0 => Some(Self::BloscLZ),
            1 => Some(Self::LZ4),
            2 => Some(Self::Snappy),
            3 => Some(Self::Zlib),
            4 => Some(Self::Zstd),
            _ => None,
        }
    }
}

/// Shuffle filter; order and names of NDPluginCodec's `BloscShuffle` (None/Byte/Bit = c-blosc's
/// `BLOSC_NOSHUFFLE`/`BLOSC_SHUFFLE`/`BLOSC_BITSHUFFLE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BloscShuffle {
    #[default]
    None,
    Byte,
    Bit,
}

impl BloscShuffle {
    /// All shuffles in menu order.
    pub const ALL: [BloscShuffle; 3] = [Self::None, Self::Byte, Self::Bit];
    /// areaDetector's menu strings (NDCodec.template `BloscShuffle`).
    pub const CHOICES: [&'static str; 3] = ["None", "Byte", "Bit"];

    /// The areaDetector menu string.
    pub fn name(self) -> &'static str {
        Self::CHOICES[self as usize]
    }

    /// From the menu index (0 = None, 1 = Byte, 2 = Bit).
    pub fn from_index(index: i64) -> Option<Self> {
        usize::try_from(index)
            .ok()
            .and_then(|i| Self::ALL.get(i).copied())
    }

    /// From a menu string, case-insensitive.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|s| s.name().eq_ignore_ascii_case(name))
    }
}

/// Compression settings (NDPluginCodec's Blosc parameters). The default is areaDetector's:
/// BloscLZ, level 3, no shuffle, 1 thread, automatic block size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BloscParams {
    pub compressor: BloscCompressor,
    /// 0 (copy) … 9; larger values are treated as 9.
    pub clevel: u8,
    pub shuffle: BloscShuffle,
    /// c-blosc's internal threads; 0 is treated as 1, values above 256 as 256.
    pub num_threads: usize,
    /// Bytes per block; 0 = c-blosc's automatic choice. c-blosc clamps forced sizes to
    /// 128 … [`MAX_BLOCK_SIZE`].
    pub block_size: usize,
}

impl Default for BloscParams {
    fn default() -> Self {
        Self {
            compressor: BloscCompressor::BloscLZ,
            clevel: 3,
            shuffle: BloscShuffle::None,
            num_threads: 1,
            block_size: 0,
        }
    }
}

/// What a frame header says (see the module doc for the layout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BloscFrameInfo {
    /// Uncompressed bytes.
    pub nbytes: usize,
    /// Frame bytes, header included.
    pub cbytes: usize,
    pub block_size: usize,
    pub type_size: usize,
    pub shuffle: BloscShuffle,
    /// The data was stored uncompressed (level 0, tiny or incompressible input).
    pub memcpyed: bool,
    /// `None` when the format code is unknown.
    pub compressor: Option<BloscCompressor>,
}

/// What this binary's c-blosc contains.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BloscBuildInfo {
    /// c-blosc version string, e.g. `"1.21.6"`.
    pub version: String,
    /// Compressors compiled in, in menu order.
    pub compressors: Vec<BloscCompressor>,
    /// Built by ndflow-codec's build.rs (false: blosc-src's stock library).
    pub own_build: bool,
    /// The shuffle implementation c-blosc's run-time dispatch picks on this CPU:
    /// `"avx2"`, `"sse2"` or `"generic"`.
    pub shuffle_impl: &'static str,
}

/// What this binary's c-blosc contains and which shuffle it runs on this CPU.
pub fn build_info() -> BloscBuildInfo {
    // SAFETY: returns a pointer to a static NUL-terminated string inside c-blosc.
    let version = unsafe { std::ffi::CStr::from_ptr(blosc_src::blosc_get_version_string()) }
        .to_string_lossy()
        .into_owned();
    BloscBuildInfo {
        version,
        compressors: BloscCompressor::ALL
            .into_iter()
            .filter(|c| c.is_available())
            .collect(),
        own_build: cfg!(ndflow_cblosc),
        shuffle_impl: shuffle_impl(),
    }
}

/// Mirrors the selection in c-blosc's shuffle.c: AVX2 if compiled in and the CPU and OS
/// support it, else SSE2 if compiled in (on x86 unless `NDFLOW_BLOSC_SIMD=none` at build
/// time), else the generic C code.
fn shuffle_impl() -> &'static str {
    #[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
    {
        if cfg!(ndflow_cblosc_avx2) && std::arch::is_x86_feature_detected!("avx2") {
            return "avx2";
        }
        if cfg!(ndflow_cblosc_sse2) && std::arch::is_x86_feature_detected!("sse2") {
            return "sse2";
        }
    }
    "generic"
}

/// Output size that always suffices for [`compress`]: input + [`MAX_OVERHEAD`].
pub fn max_compressed_len(input_len: usize) -> usize {
    input_len.saturating_add(MAX_OVERHEAD)
}

/// Compresses `input` (elements of `type_size` bytes) into one Blosc1 frame in `out`; returns
/// the frame length. `out` of [`max_compressed_len`] bytes always suffices (c-blosc falls back
/// to a stored copy when the data does not compress).
pub fn compress(
    input: &[u8],
    type_size: usize,
    params: &BloscParams,
    out: &mut [u8],
) -> Result<usize, CodecError> {
    if input.len() > MAX_BUFFER_SIZE {
        return Err(invalid(format!(
            "input of {} bytes exceeds c-blosc's limit of {MAX_BUFFER_SIZE}",
            input.len()
        )));
    }
    if type_size == 0 || type_size > MAX_TYPE_SIZE {
        return Err(invalid(format!(
            "type size {type_size} outside 1..={MAX_TYPE_SIZE}"
        )));
    }
    if !params.compressor.is_available() {
        return Err(invalid(format!(
            "compressor {} is not compiled into this c-blosc",
            params.compressor.name()
        )));
    }
    // c-blosc keeps the output size in an int32: never pass more than it can need.
    let dest_len = out.len().min(max_compressed_len(input.len()));
    if dest_len < MAX_OVERHEAD {
        return Err(CodecError::OutputTooSmall {
            need: max_compressed_len(input.len()),
            have: out.len(),
        });
    }
    let clevel = params.clevel.min(9);
    let threads = params.num_threads.clamp(1, MAX_THREADS);
    let shuffle = params.shuffle as c_int;
    let block_size = params.block_size.min(MAX_BLOCK_SIZE);
    // SAFETY: `input` is valid for `input.len()` reads and `out` for `dest_len` ≤ `out.len()`
    // writes; c-blosc never writes more than `destsize` bytes (documented guarantee, enforced
    // in blosc_c / blosc_compress_context) and never reads more than `nbytes`. The compressor
    // name is a static NUL-terminated string. All sizes are within c-blosc's int32 limits
    // (checked above), and clevel/shuffle/threads/typesize are in the ranges it accepts.
    let n = unsafe {
        blosc_src::blosc_compress_ctx(
            c_int::from(clevel),
            shuffle,
            type_size,
            input.len(),
            input.as_ptr().cast::<c_void>(),
            out.as_mut_ptr().cast::<c_void>(),
            dest_len,
            params.compressor.c_name_nul().as_ptr().cast::<c_char>(),
            block_size,
            threads as c_int,
        )
    };
    match usize::try_from(n) {
        Ok(0) => Err(CodecError::OutputTooSmall {
            need: max_compressed_len(input.len()),
            have: out.len(),
        }),
        Ok(n) if n <= dest_len => Ok(n),
        _ => Err(CodecError::Library {
            codec: CODEC,
            detail: format!("blosc_compress_ctx returned {n}"),
        }),
    }
}

/// Parses and checks a frame header: version, reserved flag, sizes within c-blosc's limits,
/// frame length ≤ `input.len()`. Pure Rust; c-blosc is not called.
pub fn frame_info(input: &[u8]) -> Result<BloscFrameInfo, CodecError> {
    let Some(h) = input.first_chunk::<16>() else {
        return Err(corrupt(format!(
            "{} bytes, shorter than the 16-byte header",
            input.len()
        )));
    };
    if h[0] != FORMAT_VERSION {
        return Err(corrupt(format!(
            "format version {} (only Blosc1 version {FORMAT_VERSION} is supported)",
            h[0]
        )));
    }
    let flags = h[2];
    if flags & FLAG_RESERVED != 0 {
        return Err(corrupt("reserved flag bit 3 set".into()));
    }
    let le = |i: usize| i32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    let (nbytes, block_size, cbytes) = (le(4), le(8), le(12));
    let nbytes = usize::try_from(nbytes)
        .ok()
        .filter(|&n| n <= MAX_BUFFER_SIZE)
        .ok_or_else(|| corrupt(format!("uncompressed size {nbytes} out of range")))?;
    let cbytes = usize::try_from(cbytes)
        .ok()
        .filter(|&n| n >= MAX_OVERHEAD)
        .ok_or_else(|| corrupt(format!("frame size {cbytes} out of range")))?;
    if cbytes > input.len() {
        return Err(corrupt(format!(
            "truncated: header says {cbytes} frame bytes, {} present",
            input.len()
        )));
    }
    let block_size = usize::try_from(block_size)
        .map_err(|_| corrupt(format!("block size {block_size} out of range")))?;
    let type_size = usize::from(h[3]);
    if nbytes > 0 && (block_size == 0 || block_size > MAX_BLOCK_SIZE || type_size == 0) {
        return Err(corrupt(format!(
            "block size {block_size} / type size {type_size} invalid"
        )));
    }
    let memcpyed = flags & FLAG_MEMCPYED != 0;
    if memcpyed && nbytes + MAX_OVERHEAD != cbytes {
        return Err(corrupt(format!(
            "stored frame of {nbytes} bytes with frame size {cbytes}"
        )));
    }
    let shuffle = if flags & FLAG_SHUFFLE != 0 {
        BloscShuffle::Byte
    } else if flags & FLAG_BITSHUFFLE != 0 {
        BloscShuffle::Bit
    } else {
        BloscShuffle::None
    };
    Ok(BloscFrameInfo {
        nbytes,
        cbytes,
        block_size,
        type_size,
        shuffle,
        memcpyed,
        compressor: BloscCompressor::from_format(flags >> 5),
    })
}

/// Uncompressed size of a frame (after [`frame_info`]'s checks).
pub fn decompressed_len(input: &[u8]) -> Result<usize, CodecError> {
    frame_info(input).map(|i| i.nbytes)
}

/// Decompresses one frame into `out` with one thread; returns the uncompressed length.
/// Bytes after the frame (header `cbytes`) are ignored.
pub fn decompress(input: &[u8], out: &mut [u8]) -> Result<usize, CodecError> {
    decompress_mt(input, out, 1)
}

/// [`decompress`] with `num_threads` c-blosc threads (0 → 1, capped at 256).
pub fn decompress_mt(
    input: &[u8],
    out: &mut [u8],
    num_threads: usize,
) -> Result<usize, CodecError> {
    let info = frame_info(input)?;
    if info.nbytes > out.len() {
        return Err(CodecError::OutputTooSmall {
            need: info.nbytes,
            have: out.len(),
        });
    }
    if !info.memcpyed {
        match info.compressor {
            Some(c) if c.is_available() => {}
            Some(c) => {
                return Err(invalid(format!(
                    "frame uses {}, which is not compiled into this c-blosc",
                    c.name()
                )))
            }
            None => {
                return Err(corrupt(format!(
                    "unknown compressor format {}",
                    input[2] >> 5
                )))
            }
        }
    }
    let frame = &input[..info.cbytes];
    let mut nbytes = 0usize;
    // SAFETY: `frame` is valid for `frame.len()` reads; c-blosc reads only its 16-byte header
    // here (len ≥ 16 checked by frame_info).
    let valid = unsafe {
        blosc_src::blosc_cbuffer_validate(frame.as_ptr().cast::<c_void>(), frame.len(), &mut nbytes)
    };
    if valid != 0 || nbytes != info.nbytes {
        return Err(corrupt("rejected by blosc_cbuffer_validate".into()));
    }
    if info.nbytes == 0 {
        return Ok(0);
    }
    let threads = num_threads.clamp(1, MAX_THREADS) as c_int;
    // SAFETY: the header's frame size is ≤ `frame.len()` (frame_info), and c-blosc's decoder
    // bounds every read by that frame size (block-start table, per-split lengths, stored
    // copies). `destsize` = the header's uncompressed size ≤ `out.len()` (checked above), and
    // c-blosc writes at most `destsize` bytes: it rejects frames whose uncompressed or block
    // size exceeds it and decodes each block with its own length as the output limit.
    let n = unsafe {
        blosc_src::blosc_decompress_ctx(
            frame.as_ptr().cast::<c_void>(),
            out.as_mut_ptr().cast::<c_void>(),
            info.nbytes,
            threads,
        )
    };
    if usize::try_from(n).ok() != Some(info.nbytes) {
        return Err(corrupt(format!(
            "c-blosc returned {n}, expected {} bytes",
            info.nbytes
        )));
    }
    Ok(info.nbytes)
}

fn corrupt(detail: String) -> CodecError {
    CodecError::Corrupt {
        codec: CODEC,
        detail,
    }
}

fn invalid(detail: String) -> CodecError {
    CodecError::InvalidArgument {
        codec: CODEC,
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for (i, c) in BloscCompressor::ALL.into_iter().enumerate() {
            assert_eq!(BloscCompressor::from_index(i as i64), Some(c));
            assert_eq!(BloscCompressor::from_name(c.name()), Some(c));
            assert_eq!(BloscCompressor::from_name(c.c_name()), Some(c));
        }
        assert_eq!(BloscCompressor::LZ4HC.c_name(), "lz4hc");
        assert_eq!(BloscShuffle::from_index(2), Some(BloscShuffle::Bit));
        assert_eq!(BloscShuffle::from_index(3), None);
        assert_eq!(BloscCompressor::from_index(-1), None);
    }

    #[test]
    fn header_checks() {
        assert!(frame_info(&[2u8; 15]).is_err());
        let mut h = [0u8; 16];
        h[0] = 2;
        h[3] = 1;
        h[12] = 16;
        assert_eq!(frame_info(&h).map(|i| i.nbytes), Ok(0));
        h[12] = 17;
        assert!(frame_info(&h).is_err());
    }
}
