//! Bitshuffle + LZ4 (`bslz4`), byte-identical to the C `bitshuffle` library.
//!
//! The body is `bshuf_compress_lz4(in, out, n, elem_size, block)`: for each full block of
//! `block` elements, then one last block of `(n % block) & !7` elements (if non-zero), a
//! `u32` BE compressed length and the raw LZ4 block (`LZ4_compress_default`) of the
//! bit-transposed block; then the last `n % 8` elements verbatim. This is what python
//! `bitshuffle.compress_lz4(arr, block)` returns.
//!
//! * [`BsFraming::AreaDetector`]: the body alone. NDPluginCodec calls `bshuf_compress_lz4`
//!   with block size 0 (the default, [`bitshuffle::default_block_elems`]) and stores that
//!   output; readers (ImageJ, c2dataviewer, `bitshuffle.decompress_lz4(buf, shape, dtype)`)
//!   must know the element size, the element count and that the block size is the default.
//! * [`BsFraming::Hdf5`]: an HDF5 filter 32008 chunk (the `bshuf_h5_filter` output with
//!   cd[4] = 2): a 12-byte header (`u64` BE uncompressed bytes, `u32` BE block size in
//!   **bytes**) and then the body. Decoders take the block size from the header.
//!
//! One thread; callers parallelise over frames. No allocation per call: each thread keeps
//! one grow-only scratch block.

use crate::bitshuffle::{self, Kernel};
use crate::{lz4, CodecError};
use std::cell::RefCell;

const CODEC: &str = "bslz4";

/// Bytes of the HDF5 filter 32008 header.
pub const HDF5_HEADER_LEN: usize = 12;

/// How the compressed stream is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BsFraming {
    /// Blocks only, as NDPluginCodec's `bslz4` codec and `bitshuffle.compress_lz4`.
    #[default]
    AreaDetector,
    /// HDF5 filter 32008 chunk: 12-byte header, then the blocks.
    Hdf5,
}

thread_local! {
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on this thread's scratch block of `len` bytes (grown, never shrunk).
fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut v) => {
            if v.len() < len {
                v.resize(len, 0);
            }
            f(&mut v[..len])
        }
        // Only reachable if `f` itself re-entered; stay correct rather than panic.
        Err(_) => f(&mut vec![0u8; len]),
    })
}

fn invalid(detail: String) -> CodecError {
    CodecError::InvalidArgument {
        codec: CODEC,
        detail,
    }
}

fn corrupt(detail: String) -> CodecError {
    CodecError::Corrupt {
        codec: CODEC,
        detail,
    }
}

/// Validated geometry of one call.
struct Layout {
    elem_size: usize,
    /// Elements.
    n: usize,
    /// Block size in elements.
    block: usize,
}

impl Layout {
    fn new(bytes: usize, elem_size: usize, block_elems: usize) -> Result<Layout, CodecError> {
        let block = bitshuffle::resolve_block(elem_size, block_elems)?;
        if !bytes.is_multiple_of(elem_size) {
            return Err(invalid(format!(
                "{bytes} bytes is not a whole number of {elem_size}-byte elements"
            )));
        }
        let n = bytes / elem_size;
        // Blocks actually used never exceed the data, so only those must fit liblz4.
        let used = block.min(n) * elem_size;
        if used > lz4::MAX_INPUT_SIZE {
            return Err(invalid(format!(
                "block of {used} bytes exceeds the LZ4 block limit"
            )));
        }
        Ok(Layout {
            elem_size,
            n,
            block,
        })
    }

    /// Byte sizes of the transposed blocks, in order.
    fn blocks(&self) -> impl Iterator<Item = usize> {
        let full = self.n / self.block;
        let last = (self.n % self.block) / 8 * 8;
        let (bb, s) = (self.block * self.elem_size, self.elem_size);
        std::iter::repeat_n(bb, full).chain((last > 0).then_some(last * s))
    }

    fn tail_bytes(&self) -> usize {
        self.n % 8 * self.elem_size
    }

    fn scratch_len(&self) -> usize {
        self.block.min(self.n) * self.elem_size
    }
}

/// `bshuf_compress_lz4_bound` (+ 12 for [`BsFraming::Hdf5`]): the largest output of
/// [`compress`] for `input_len` bytes of `elem_size`-byte elements.
pub fn max_compressed_len(
    input_len: usize,
    elem_size: usize,
    block_elems: usize,
    framing: BsFraming,
) -> Result<usize, CodecError> {
    let l = Layout::new(input_len, elem_size, block_elems)?;
    let mut bound = l.tail_bytes();
    for b in l.blocks() {
        bound = bound.saturating_add(lz4::max_compressed_len(b) + 4);
    }
    if framing == BsFraming::Hdf5 {
        bound = bound.saturating_add(HDF5_HEADER_LEN);
    }
    Ok(bound)
}

/// Bit-shuffles and LZ4-compresses `input` (`elem_size`-byte elements, native order).
/// `block_elems` 0 = the default block, otherwise a multiple of 8. Returns the bytes
/// written; size `out` with [`max_compressed_len`].
pub fn compress(
    input: &[u8],
    elem_size: usize,
    block_elems: usize,
    framing: BsFraming,
    out: &mut [u8],
) -> Result<usize, CodecError> {
    let l = Layout::new(input.len(), elem_size, block_elems)?;
    let have = out.len();
    let too_small = || CodecError::OutputTooSmall {
        need: max_compressed_len(input.len(), elem_size, block_elems, framing).unwrap_or(0),
        have,
    };
    let mut pos = 0;
    if framing == BsFraming::Hdf5 {
        let block_bytes = u32::try_from(l.block * elem_size)
            .map_err(|_| invalid(format!("block of {} elements too large", l.block)))?;
        if out.len() < HDF5_HEADER_LEN {
            return Err(too_small());
        }
        out[..8].copy_from_slice(&(input.len() as u64).to_be_bytes());
        out[8..12].copy_from_slice(&block_bytes.to_be_bytes());
        pos = HDF5_HEADER_LEN;
    }
    let kernel = Kernel::best();
    let mut inpos = 0;
    let body = with_scratch(l.scratch_len(), |scratch| {
        for bytes in l.blocks() {
            let tmp = &mut scratch[..bytes];
            bitshuffle::trans_bit_elem_with(kernel, &input[inpos..inpos + bytes], elem_size, tmp)?;
            let dst = out.get_mut(pos + 4..).ok_or_else(too_small)?;
            let c = lz4::compress_into(tmp, dst).ok_or_else(too_small)?;
            out[pos..pos + 4].copy_from_slice(&(c as u32).to_be_bytes());
            pos += 4 + c;
            inpos += bytes;
        }
        Ok::<(), CodecError>(())
    });
    body?;
    let tail = &input[inpos..];
    out.get_mut(pos..pos + tail.len())
        .ok_or_else(too_small)?
        .copy_from_slice(tail);
    Ok(pos + tail.len())
}

/// The uncompressed byte count in a [`BsFraming::Hdf5`] header.
pub fn hdf5_decompressed_len(input: &[u8]) -> Result<usize, CodecError> {
    let head = input
        .get(..8)
        .ok_or_else(|| corrupt(format!("{} bytes is shorter than the header", input.len())))?;
    let mut b = [0u8; 8];
    b.copy_from_slice(head);
    usize::try_from(u64::from_be_bytes(b))
        .map_err(|_| corrupt("uncompressed size does not fit in memory".into()))
}

/// Decompresses with the default block size ([`BsFraming::AreaDetector`]) or the header's
/// ([`BsFraming::Hdf5`]). `out.len()` is the exact uncompressed size in bytes.
pub fn decompress(
    input: &[u8],
    elem_size: usize,
    framing: BsFraming,
    out: &mut [u8],
) -> Result<usize, CodecError> {
    decompress_with_block(input, elem_size, 0, framing, out)
}

/// [`decompress`] for a stream compressed with a non-default `block_elems` (ignored for
/// [`BsFraming::Hdf5`], whose header says it). Truncated, corrupt or trailing input, or a
/// size that differs from `out.len()`, is an error.
pub fn decompress_with_block(
    input: &[u8],
    elem_size: usize,
    block_elems: usize,
    framing: BsFraming,
    out: &mut [u8],
) -> Result<usize, CodecError> {
    let mut pos = 0;
    let mut block_elems = block_elems;
    if framing == BsFraming::Hdf5 {
        if input.len() < HDF5_HEADER_LEN {
            return Err(corrupt(format!(
                "{} bytes is shorter than the 12-byte header",
                input.len()
            )));
        }
        let total = hdf5_decompressed_len(input)?;
        if total != out.len() {
            return Err(corrupt(format!(
                "header says {total} bytes, expected {}",
                out.len()
            )));
        }
        if elem_size == 0 {
            return Err(invalid("element size 0".into()));
        }
        let bb = u32::from_be_bytes([input[8], input[9], input[10], input[11]]) as usize;
        // As bshuf_h5_filter: bytes / elem_size, and 0 falls back to the default.
        block_elems = bb / elem_size;
        if !block_elems.is_multiple_of(8) {
            return Err(corrupt(format!(
                "header block size {bb} bytes is not a multiple of 8 elements"
            )));
        }
        pos = HDF5_HEADER_LEN;
    }
    let l = Layout::new(out.len(), elem_size, block_elems)?;
    let kernel = Kernel::best();
    let mut outpos = 0;
    let body = with_scratch(l.scratch_len(), |scratch| {
        for (i, bytes) in l.blocks().enumerate() {
            let c = input
                .get(pos..pos + 4)
                .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
                .ok_or_else(|| corrupt(format!("truncated before block {i}")))?;
            pos += 4;
            let data = pos
                .checked_add(c)
                .and_then(|end| input.get(pos..end))
                .ok_or_else(|| {
                    corrupt(format!(
                        "block {i} claims {c} bytes, {} left",
                        input.len() - pos
                    ))
                })?;
            let tmp = &mut scratch[..bytes];
            lz4::decompress_into(data, tmp).map_err(|d| corrupt(format!("block {i}: {d}")))?;
            bitshuffle::untrans_bit_elem_with(
                kernel,
                tmp,
                elem_size,
                &mut out[outpos..outpos + bytes],
            )?;
            pos += c;
            outpos += bytes;
        }
        Ok::<(), CodecError>(())
    });
    body?;
    let tail = l.tail_bytes();
    let src = input
        .get(pos..pos + tail)
        .ok_or_else(|| corrupt(format!("truncated in the last {tail} verbatim bytes")))?;
    out[outpos..].copy_from_slice(src);
    pos += tail;
    if pos != input.len() {
        return Err(corrupt(format!("{} trailing bytes", input.len() - pos)));
    }
    Ok(out.len())
}
