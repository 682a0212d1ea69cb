//! LZ4 through the C liblz4 (lz4-sys): the raw block format, and the HDF5 / Dectris
//! blocked framing.
//!
//! * `lz4` (NDPluginCodec): one raw LZ4 block of the whole array, no header, written by
//!   `LZ4_compress_default`; readers must know the uncompressed size
//!   (`lz4.block.decompress(data, uncompressed_size=n)` in python).
//! * `lz4hdf5` (HDF5 filter 32004, Dectris Stream2, ADSupport `lz4hdf5.c`): `u64` BE total
//!   uncompressed bytes, `u32` BE block size in bytes, then per block a `u32` BE stored
//!   size and the data. A block whose LZ4 form is not smaller than the block is stored raw
//!   with stored size == block size; the last block may be shorter. The default block is
//!   1 GiB, capped to the input size (the capped value is what the header holds).
//!
//! Decoders use `LZ4_decompress_safe`, which never reads or writes outside the given
//! buffers, and demand the exact sizes: malformed input is an error, never a panic.

use crate::CodecError;
use std::os::raw::{c_char, c_int};

const CODEC: &str = "lz4";
const CODEC_HDF5: &str = "lz4hdf5";

/// `LZ4_MAX_INPUT_SIZE`: the largest block liblz4 compresses.
pub const MAX_INPUT_SIZE: usize = 0x7E00_0000;
/// Default `lz4hdf5` block size in bytes (ADSupport and the HDF5 filter: 1 GiB).
pub const HDF5_DEFAULT_BLOCK_SIZE: usize = 1 << 30;
/// Bytes of the `lz4hdf5` header.
pub const HDF5_HEADER_LEN: usize = 12;

/// `LZ4_COMPRESSBOUND`: the largest raw block `n` input bytes can produce.
pub const fn max_compressed_len(n: usize) -> usize {
    n + n / 255 + 16
}

fn corrupt(codec: &'static str, detail: String) -> CodecError {
    CodecError::Corrupt { codec, detail }
}

/// Compresses `input` into `out` with capacity `out.len()`. `None` if it does not fit.
/// `input.len() <= MAX_INPUT_SIZE` is the caller's job.
pub(crate) fn compress_into(input: &[u8], out: &mut [u8]) -> Option<usize> {
    debug_assert!(input.len() <= MAX_INPUT_SIZE);
    let cap = out.len().min(c_int::MAX as usize) as c_int;
    // SAFETY: liblz4 reads exactly input.len() bytes from input and writes at most `cap`
    // <= out.len() bytes to out (a smaller capacity than the bound makes it stop and
    // return 0 instead of overflowing). Both pointers come from live slices.
    let n = unsafe {
        lz4_sys::LZ4_compress_default(
            input.as_ptr().cast::<c_char>(),
            out.as_mut_ptr().cast::<c_char>(),
            input.len() as c_int,
            cap,
        )
    };
    (n > 0).then_some(n as usize)
}

/// Decompresses one block of exactly `input.len()` bytes that must fill `out` exactly.
/// Returns liblz4's error code (negative) or a size mismatch as `Err(detail)`.
pub(crate) fn decompress_into(input: &[u8], out: &mut [u8]) -> Result<(), String> {
    if input.len() > c_int::MAX as usize || out.len() > c_int::MAX as usize {
        return Err(format!(
            "block too large for liblz4 ({} -> {} bytes)",
            input.len(),
            out.len()
        ));
    }
    // SAFETY: LZ4_decompress_safe reads at most input.len() bytes and writes at most
    // out.len() bytes whatever the input holds (it is liblz4's hardened decoder); both
    // lengths fit c_int (checked above) and the pointers come from live slices.
    let n = unsafe {
        lz4_sys::LZ4_decompress_safe(
            input.as_ptr().cast::<c_char>(),
            out.as_mut_ptr().cast::<c_char>(),
            input.len() as c_int,
            out.len() as c_int,
        )
    };
    if n < 0 {
        Err(format!("liblz4 rejected the block (code {n})"))
    } else if n as usize != out.len() {
        Err(format!(
            "block decodes to {n} bytes, expected {}",
            out.len()
        ))
    } else {
        Ok(())
    }
}

/// `LZ4_compress_default` of the whole input as one raw block (NDPluginCodec `lz4`).
/// Size `out` with [`max_compressed_len`]; a smaller buffer works when the data fits.
pub fn compress_block(input: &[u8], out: &mut [u8]) -> Result<usize, CodecError> {
    if input.len() > MAX_INPUT_SIZE {
        return Err(CodecError::InvalidArgument {
            codec: CODEC,
            detail: format!(
                "{} bytes exceeds the LZ4 block limit of {MAX_INPUT_SIZE}",
                input.len()
            ),
        });
    }
    compress_into(input, out).ok_or(CodecError::OutputTooSmall {
        need: max_compressed_len(input.len()),
        have: out.len(),
    })
}

/// Decodes one raw LZ4 block; `out.len()` is the exact uncompressed size. Any other
/// decoded size, a truncated or corrupt block, or trailing bytes are an error.
pub fn decompress_block(input: &[u8], out: &mut [u8]) -> Result<usize, CodecError> {
    decompress_into(input, out).map_err(|d| corrupt(CODEC, d))?;
    Ok(out.len())
}

/// The block size `compress_hdf5` uses for `n` bytes and a requested `block_size`
/// (0 = 1 GiB), capped to `n` as the C code does.
fn hdf5_block(n: usize, block_size: usize) -> usize {
    let bs = if block_size == 0 {
        HDF5_DEFAULT_BLOCK_SIZE
    } else {
        block_size
    };
    bs.min(n)
}

/// The largest `lz4hdf5` stream for `n` input bytes and block size `block_size` (bytes,
/// 0 = default): the header, a 4-byte length per block, and at most `n` bytes of data
/// since blocks that do not shrink are stored raw.
pub fn max_hdf5_len(n: usize, block_size: usize) -> usize {
    let bs = hdf5_block(n, block_size);
    let blocks = if bs == 0 { 0 } else { n.div_ceil(bs) };
    HDF5_HEADER_LEN
        .saturating_add(blocks.saturating_mul(4))
        .saturating_add(n)
}

/// Compresses into the `lz4hdf5` framing (ADSupport `compress_lz4hdf5`, HDF5 filter
/// 32004). `block_size` is in bytes, 0 = 1 GiB; it is capped to the input size and must
/// then be at most [`MAX_INPUT_SIZE`]. Size `out` with [`max_hdf5_len`].
pub fn compress_hdf5(input: &[u8], block_size: usize, out: &mut [u8]) -> Result<usize, CodecError> {
    let n = input.len();
    let bs = hdf5_block(n, block_size);
    if bs > MAX_INPUT_SIZE {
        return Err(CodecError::InvalidArgument {
            codec: CODEC_HDF5,
            detail: format!("block size {bs} exceeds the LZ4 block limit of {MAX_INPUT_SIZE}"),
        });
    }
    let too_small = CodecError::OutputTooSmall {
        need: max_hdf5_len(n, block_size),
        have: out.len(),
    };
    if out.len() < HDF5_HEADER_LEN {
        return Err(too_small);
    }
    out[..8].copy_from_slice(&(n as u64).to_be_bytes());
    out[8..12].copy_from_slice(&(bs as u32).to_be_bytes());
    let mut pos = HDF5_HEADER_LEN;
    if bs == 0 {
        return Ok(pos);
    }
    for block in input.chunks(bs) {
        let room = out.len() - pos;
        if room < 4 {
            return Err(too_small);
        }
        // Only a result shorter than the block is kept (the C code stores the block raw
        // when compBlockSize >= blockSize), so LZ4 never needs more than len - 1 bytes.
        let cap = (block.len() - 1).min(room - 4);
        let dst = &mut out[pos + 4..pos + 4 + cap];
        let stored = match compress_into(block, dst) {
            Some(c) => c,
            None if cap == block.len() - 1 && room - 4 >= block.len() => {
                out[pos + 4..pos + 4 + block.len()].copy_from_slice(block);
                block.len()
            }
            None => return Err(too_small),
        };
        out[pos..pos + 4].copy_from_slice(&(stored as u32).to_be_bytes());
        pos += 4 + stored;
    }
    Ok(pos)
}

fn read_u32(input: &[u8], pos: usize) -> Option<u32> {
    let b = input.get(pos..pos.checked_add(4)?)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// The uncompressed size announced by an `lz4hdf5` header.
pub fn hdf5_decompressed_len(input: &[u8]) -> Result<usize, CodecError> {
    let head = input.get(..8).ok_or_else(|| {
        corrupt(
            CODEC_HDF5,
            format!("{} bytes is shorter than the 12-byte header", input.len()),
        )
    })?;
    let mut b = [0u8; 8];
    b.copy_from_slice(head);
    usize::try_from(u64::from_be_bytes(b)).map_err(|_| {
        corrupt(
            CODEC_HDF5,
            "uncompressed size does not fit in memory".into(),
        )
    })
}

/// Decodes an `lz4hdf5` stream into `out`, whose length must equal the size in the header.
/// Truncation, trailing bytes, corrupt blocks or inconsistent sizes are errors.
pub fn decompress_hdf5(input: &[u8], out: &mut [u8]) -> Result<usize, CodecError> {
    if input.len() < HDF5_HEADER_LEN {
        return Err(corrupt(
            CODEC_HDF5,
            format!("{} bytes is shorter than the 12-byte header", input.len()),
        ));
    }
    let total = hdf5_decompressed_len(input)?;
    if total != out.len() {
        return Err(corrupt(
            CODEC_HDF5,
            format!("header says {total} bytes, expected {}", out.len()),
        ));
    }
    let mut bs = read_u32(input, 8).unwrap_or(0) as usize;
    bs = bs.min(total);
    if bs == 0 && total > 0 {
        return Err(corrupt(CODEC_HDF5, "block size 0".into()));
    }
    let mut pos = HDF5_HEADER_LEN;
    let mut done = 0;
    while done < total {
        let blk = bs.min(total - done);
        let stored = read_u32(input, pos)
            .ok_or_else(|| corrupt(CODEC_HDF5, format!("truncated at block {}", done / bs)))?
            as usize;
        pos += 4;
        let data = pos
            .checked_add(stored)
            .and_then(|end| input.get(pos..end))
            .ok_or_else(|| {
                corrupt(
                    CODEC_HDF5,
                    format!(
                        "block {} claims {stored} bytes, {} left",
                        done / bs,
                        input.len() - pos
                    ),
                )
            })?;
        let dst = &mut out[done..done + blk];
        if stored == blk {
            dst.copy_from_slice(data);
        } else {
            decompress_into(data, dst)
                .map_err(|d| corrupt(CODEC_HDF5, format!("block {}: {d}", done / bs)))?;
        }
        pos += stored;
        done += blk;
    }
    if pos != input.len() {
        return Err(corrupt(
            CODEC_HDF5,
            format!("{} trailing bytes", input.len() - pos),
        ));
    }
    Ok(total)
}
