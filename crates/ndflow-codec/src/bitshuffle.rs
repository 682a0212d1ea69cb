//! The bit transpose of the C `bitshuffle` library (Kiyoshi Masui), byte-identical.
//!
//! A block of `n` elements (`n % 8 == 0`) of `s` bytes is stored as `8 * s` rows of
//! `n / 8` bytes: row `8 * j + b` holds bit `b` of byte `j` of every element, element `i`
//! at bit `i % 8` of byte `i / 8` (`bshuf_trans_bit_elem`). A whole buffer is cut into
//! blocks of `block_elems` elements (default [`default_block_elems`]), then one last
//! block of `(n % block_elems) & !7` elements; the last `n % 8` elements are copied
//! verbatim (`bshuf_bitshuffle` / `bshuf_blocked_wrap_fun`).
//!
//! Kernels: a portable scalar one and AVX2, chosen at run time ([`Kernel::best`]).
//! AVX-512 / GFNI were not added: the AVX2 transpose runs at 15–18 GB/s (u16, one core),
//! five to six times the LZ4 step of bitshuffle-LZ4, which dominates its cost.

#[cfg(target_arch = "x86_64")]
mod avx2;
mod scalar;

use crate::CodecError;

/// Block sizes (in elements) must be a multiple of this (`BSHUF_BLOCKED_MULT`).
pub const BLOCKED_MULT: usize = 8;
/// `BSHUF_TARGET_BLOCK_SIZE_B`: the default block is about this many bytes.
const TARGET_BLOCK_BYTES: usize = 8192;
/// `BSHUF_MIN_RECOMMEND_BLOCK`.
const MIN_RECOMMEND_BLOCK: usize = 128;

const CODEC: &str = "bitshuffle";

/// The C library's default block size in elements, `max(128, (8192 / elem_size) & !7)`
/// (`bshuf_default_block_size`). It is part of the bitshuffle-LZ4 format: decoders that
/// are told "block size 0" use it. `elem_size` 0 gives 128.
pub const fn default_block_elems(elem_size: usize) -> usize {
    if elem_size == 0 {
        return MIN_RECOMMEND_BLOCK;
    }
    let bs = (TARGET_BLOCK_BYTES / elem_size) / BLOCKED_MULT * BLOCKED_MULT;
    if bs > MIN_RECOMMEND_BLOCK {
        bs
    } else {
        MIN_RECOMMEND_BLOCK
    }
}

/// A bit-transpose implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// Portable 64-bit code (8x8 bit transposes in a `u64`).
    Scalar,
    /// x86-64 AVX2 (shuffles + delta swaps across vectors; `movemask` for some encodes).
    Avx2,
}

impl Kernel {
    /// Every kernel, fastest last.
    pub const ALL: [Kernel; 2] = [Kernel::Scalar, Kernel::Avx2];

    /// The fastest kernel this CPU supports.
    pub fn best() -> Kernel {
        if Kernel::Avx2.is_available() {
            Kernel::Avx2
        } else {
            Kernel::Scalar
        }
    }

    /// Whether this CPU can run the kernel.
    pub fn is_available(self) -> bool {
        match self {
            Kernel::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(not(target_arch = "x86_64"))]
            Kernel::Avx2 => false,
        }
    }
}

fn invalid(detail: String) -> CodecError {
    CodecError::InvalidArgument {
        codec: CODEC,
        detail,
    }
}

/// Checks a one-block call: `input.len() == out.len()`, a multiple of `8 * elem_size`.
fn check_block(input: &[u8], elem_size: usize, out: &[u8]) -> Result<usize, CodecError> {
    if elem_size == 0 {
        return Err(invalid("element size 0".into()));
    }
    let group = elem_size
        .checked_mul(BLOCKED_MULT)
        .ok_or_else(|| invalid(format!("element size {elem_size} too large")))?;
    if !input.len().is_multiple_of(group) {
        return Err(invalid(format!(
            "block of {} bytes is not a multiple of 8 elements of {elem_size} bytes",
            input.len()
        )));
    }
    if out.len() != input.len() {
        return Err(CodecError::OutputTooSmall {
            need: input.len(),
            have: out.len(),
        });
    }
    Ok(input.len() / group)
}

/// `bshuf_trans_bit_elem`: bit-transposes one block. `input.len()` must be a multiple of
/// `8 * elem_size` and `out.len() == input.len()`. Returns the bytes written.
pub fn trans_bit_elem(input: &[u8], elem_size: usize, out: &mut [u8]) -> Result<usize, CodecError> {
    trans_bit_elem_with(Kernel::best(), input, elem_size, out)
}

/// `bshuf_untrans_bit_elem`: the inverse of [`trans_bit_elem`], same length rules.
pub fn untrans_bit_elem(
    input: &[u8],
    elem_size: usize,
    out: &mut [u8],
) -> Result<usize, CodecError> {
    untrans_bit_elem_with(Kernel::best(), input, elem_size, out)
}

/// [`trans_bit_elem`] with an explicit kernel (an unavailable one falls back to scalar).
pub fn trans_bit_elem_with(
    kernel: Kernel,
    input: &[u8],
    elem_size: usize,
    out: &mut [u8],
) -> Result<usize, CodecError> {
    let nrow = check_block(input, elem_size, out)?;
    match kernel {
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 if kernel.is_available() => {
            // SAFETY: AVX2 was detected just above, and check_block verified
            // input.len() == out.len() == 8 * elem_size * nrow, the kernel's contract.
            unsafe { avx2::trans(input, out, elem_size, nrow) }
        }
        _ => scalar::trans_groups(input, out, elem_size, nrow, 0..nrow),
    }
    Ok(input.len())
}

/// [`untrans_bit_elem`] with an explicit kernel (an unavailable one falls back to scalar).
pub fn untrans_bit_elem_with(
    kernel: Kernel,
    input: &[u8],
    elem_size: usize,
    out: &mut [u8],
) -> Result<usize, CodecError> {
    let nrow = check_block(input, elem_size, out)?;
    match kernel {
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 if kernel.is_available() => {
            // SAFETY: AVX2 was detected just above, and check_block verified
            // input.len() == out.len() == 8 * elem_size * nrow, the kernel's contract.
            unsafe { avx2::untrans(input, out, elem_size, nrow) }
        }
        _ => scalar::untrans_groups(input, out, elem_size, nrow, 0..nrow),
    }
    Ok(input.len())
}

/// `bshuf_bitshuffle(in, out, n, elem_size, 0)`: bit-shuffles a whole buffer with the
/// default block size. `input.len()` must be a multiple of `elem_size`; `out` must hold
/// at least `input.len()` bytes. Returns the bytes written (`input.len()`).
pub fn bitshuffle(input: &[u8], elem_size: usize, out: &mut [u8]) -> Result<usize, CodecError> {
    bitshuffle_with(Kernel::best(), input, elem_size, 0, out)
}

/// `bshuf_bitunshuffle(in, out, n, elem_size, 0)`: the inverse of [`bitshuffle`].
pub fn bitunshuffle(input: &[u8], elem_size: usize, out: &mut [u8]) -> Result<usize, CodecError> {
    bitunshuffle_with(Kernel::best(), input, elem_size, 0, out)
}

/// [`bitshuffle`] with an explicit kernel and block size in elements (0 = default,
/// otherwise a multiple of 8).
pub fn bitshuffle_with(
    kernel: Kernel,
    input: &[u8],
    elem_size: usize,
    block_elems: usize,
    out: &mut [u8],
) -> Result<usize, CodecError> {
    blocked(input, elem_size, block_elems, out, |i, o| {
        trans_bit_elem_with(kernel, i, elem_size, o)
    })
}

/// [`bitunshuffle`] with an explicit kernel and block size in elements (0 = default).
pub fn bitunshuffle_with(
    kernel: Kernel,
    input: &[u8],
    elem_size: usize,
    block_elems: usize,
    out: &mut [u8],
) -> Result<usize, CodecError> {
    blocked(input, elem_size, block_elems, out, |i, o| {
        untrans_bit_elem_with(kernel, i, elem_size, o)
    })
}

/// Resolves and validates a block size in elements: 0 means the default; the result is
/// a non-zero multiple of 8 whose byte size does not overflow.
pub(crate) fn resolve_block(elem_size: usize, block_elems: usize) -> Result<usize, CodecError> {
    if elem_size == 0 {
        return Err(invalid("element size 0".into()));
    }
    let bs = if block_elems == 0 {
        default_block_elems(elem_size)
    } else {
        block_elems
    };
    if !bs.is_multiple_of(BLOCKED_MULT) {
        return Err(invalid(format!(
            "block size {bs} elements is not a multiple of {BLOCKED_MULT}"
        )));
    }
    if bs.checked_mul(elem_size).is_none() {
        return Err(invalid(format!("block size {bs} elements too large")));
    }
    Ok(bs)
}

/// `bshuf_blocked_wrap_fun` without the threads: full blocks, one last block of a
/// multiple of 8 elements, then the tail copied verbatim.
fn blocked(
    input: &[u8],
    elem_size: usize,
    block_elems: usize,
    out: &mut [u8],
    mut fun: impl FnMut(&[u8], &mut [u8]) -> Result<usize, CodecError>,
) -> Result<usize, CodecError> {
    let bs = resolve_block(elem_size, block_elems)?;
    if !input.len().is_multiple_of(elem_size) {
        return Err(invalid(format!(
            "{} bytes is not a whole number of {elem_size}-byte elements",
            input.len()
        )));
    }
    if out.len() < input.len() {
        return Err(CodecError::OutputTooSmall {
            need: input.len(),
            have: out.len(),
        });
    }
    let n = input.len() / elem_size;
    let block_bytes = bs * elem_size;
    let mut pos = 0;
    for _ in 0..n / bs {
        fun(
            &input[pos..pos + block_bytes],
            &mut out[pos..pos + block_bytes],
        )?;
        pos += block_bytes;
    }
    let last = (n % bs) / BLOCKED_MULT * BLOCKED_MULT * elem_size;
    if last > 0 {
        fun(&input[pos..pos + last], &mut out[pos..pos + last])?;
        pos += last;
    }
    out[pos..input.len()].copy_from_slice(&input[pos..]);
    Ok(input.len())
}
