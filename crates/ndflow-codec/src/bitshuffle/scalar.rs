//! Portable bit transpose, one group of 8 elements at a time.
//!
//! A block of `n = 8 * nrow` elements of `s` bytes becomes `8 * s` rows of `nrow` bytes:
//! row `8 * j + b` holds bit `b` of byte `j` of every element, element `i` at bit `i % 8`
//! of byte `i / 8`. Group `g` (elements `8g..8g + 8`) therefore touches byte `g` of every
//! row and nothing else, so any range of groups can be done independently; the SIMD
//! kernels use these functions for the groups left over after their wide chunks.

/// Transposes the 8x8 bit matrix held in `x` (byte `k`, bit `b` <-> byte `b`, bit `k`).
/// This is the C library's `TRANS_BIT_8X8` for little-endian hosts; it is its own inverse.
#[inline(always)]
pub(super) fn trans_bit_8x8(mut x: u64) -> u64 {
    let t = (x ^ (x >> 7)) & 0x00AA_00AA_00AA_00AA;
    x = x ^ t ^ (t << 7);
    let t = (x ^ (x >> 14)) & 0x0000_CCCC_0000_CCCC;
    x = x ^ t ^ (t << 14);
    let t = (x ^ (x >> 28)) & 0x0000_0000_F0F0_F0F0;
    x ^ t ^ (t << 28)
}

/// Bit-transposes groups `groups` of a block of `8 * nrow` elements of `s` bytes.
///
/// `input` and `out` both hold the whole block (`8 * nrow * s` bytes).
pub(super) fn trans_groups(
    input: &[u8],
    out: &mut [u8],
    s: usize,
    nrow: usize,
    groups: std::ops::Range<usize>,
) {
    match s {
        1 => trans_groups_n::<1>(input, out, nrow, groups),
        2 => trans_groups_n::<2>(input, out, nrow, groups),
        4 => trans_groups_n::<4>(input, out, nrow, groups),
        8 => trans_groups_n::<8>(input, out, nrow, groups),
        _ => trans_groups_dyn(input, out, s, nrow, groups),
    }
}

/// Inverse of [`trans_groups`].
pub(super) fn untrans_groups(
    input: &[u8],
    out: &mut [u8],
    s: usize,
    nrow: usize,
    groups: std::ops::Range<usize>,
) {
    match s {
        1 => untrans_groups_n::<1>(input, out, nrow, groups),
        2 => untrans_groups_n::<2>(input, out, nrow, groups),
        4 => untrans_groups_n::<4>(input, out, nrow, groups),
        8 => untrans_groups_n::<8>(input, out, nrow, groups),
        _ => untrans_groups_dyn(input, out, s, nrow, groups),
    }
}

// Constant element sizes let the compiler unroll the byte loops and drop the bounds checks.
fn trans_groups_n<const S: usize>(
    input: &[u8],
    out: &mut [u8],
    nrow: usize,
    groups: std::ops::Range<usize>,
) {
    for g in groups {
        let src = &input[g * 8 * S..(g + 1) * 8 * S];
        for j in 0..S {
            let mut x = 0u64;
            for k in 0..8 {
                x |= u64::from(src[k * S + j]) << (8 * k);
            }
            let x = trans_bit_8x8(x);
            for b in 0..8 {
                out[(8 * j + b) * nrow + g] = (x >> (8 * b)) as u8;
            }
        }
    }
}

fn trans_groups_dyn(
    input: &[u8],
    out: &mut [u8],
    s: usize,
    nrow: usize,
    groups: std::ops::Range<usize>,
) {
    for g in groups {
        let src = &input[g * 8 * s..(g + 1) * 8 * s];
        for j in 0..s {
            let mut x = 0u64;
            for k in 0..8 {
                x |= u64::from(src[k * s + j]) << (8 * k);
            }
            let x = trans_bit_8x8(x);
            for b in 0..8 {
                out[(8 * j + b) * nrow + g] = (x >> (8 * b)) as u8;
            }
        }
    }
}

fn untrans_groups_n<const S: usize>(
    input: &[u8],
    out: &mut [u8],
    nrow: usize,
    groups: std::ops::Range<usize>,
) {
    for g in groups {
        let dst = &mut out[g * 8 * S..(g + 1) * 8 * S];
        for j in 0..S {
            let mut x = 0u64;
            for b in 0..8 {
                x |= u64::from(input[(8 * j + b) * nrow + g]) << (8 * b);
            }
            let x = trans_bit_8x8(x);
            for k in 0..8 {
                dst[k * S + j] = (x >> (8 * k)) as u8;
            }
        }
    }
}

fn untrans_groups_dyn(
    input: &[u8],
    out: &mut [u8],
    s: usize,
    nrow: usize,
    groups: std::ops::Range<usize>,
) {
    for g in groups {
        let dst = &mut out[g * 8 * s..(g + 1) * 8 * s];
        for j in 0..s {
            let mut x = 0u64;
            for b in 0..8 {
                x |= u64::from(input[(8 * j + b) * nrow + g]) << (8 * b);
            }
            let x = trans_bit_8x8(x);
            for k in 0..8 {
                dst[k * s + j] = (x >> (8 * k)) as u8;
            }
        }
    }
}
