//! AVX2 bit transpose.
//!
//! Encode, 1- and 2-byte elements, 32 groups (256 elements) at a time: `pshufb` + unpacks
//! gather, for each element position `k`, the bytes of elements `8g + k` of 32 groups into
//! one vector; the 8x8 bit transposes then run across those 8 vectors (12 delta swaps) and
//! leave exactly 32 bytes of each of the 8 rows, stored whole.
//!
//! Encode, other sizes and the leftover 4-group chunks: de-interleave 32 elements into one
//! 32-byte vector per byte plane, then `movemask` pulls bit 7 of all 32 bytes into one
//! `u32`, which is 4 bytes of one output row (element `i` -> bit `i % 8` of byte `i / 8`);
//! adding the vector to itself moves the next bit up. 8 movemasks per plane (port-0 bound,
//! about 60 % of the speed of the wide path).
//!
//! Decode: load 32 bytes of each of the 8 rows of a plane (32 groups), do the 8x8 bit
//! transposes across the 8 row vectors with 12 delta swaps, then byte-transpose them with
//! unpacks into element order; planes are re-interleaved into elements with unpacks.
//!
//! Groups not filling a whole chunk are handed to the scalar kernel.
//!
//! Every function here needs AVX2 (the caller checks `is_x86_feature_detected!("avx2")`).
//! Those that read and write through raw pointers are `unsafe` and stay within
//! `8 * s * nrow` bytes of `input` and `out`, which the caller guarantees
//! (`input.len() == out.len() == 8 * s * nrow`); the register-only helpers
//! (`transpose_words`, `swap_bits`, `transpose_rows`) are safe `#[target_feature]` functions,
//! callable without `unsafe` from the AVX2 functions here.

use super::scalar;
use std::arch::x86_64::*;
use std::ptr;

/// Writes the 8 bit rows of one byte plane: 32 elements' byte `j` in `v` become 4 bytes
/// of rows `row0..row0 + 8` at byte offset `off`.
///
/// # Safety
/// AVX2 available; `out` writable for rows `row0..row0 + 8` of `nrow` bytes each, with
/// `off + 4 <= nrow`.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn emit_plane(mut v: __m256i, out: *mut u8, row0: usize, nrow: usize, off: usize) {
    for b in (0..8).rev() {
        let m = _mm256_movemask_epi8(v) as u32;
        // SAFETY: row0 + b < row0 + 8 and off + 4 <= nrow, so the 4 bytes lie inside `out`
        // (the caller's contract above).
        unsafe { ptr::write_unaligned(out.add((row0 + b) * nrow + off).cast::<u32>(), m.to_le()) };
        v = _mm256_add_epi8(v, v);
    }
}

/// Unaligned 32-byte load.
///
/// # Safety
/// AVX2 available; `p` readable for 32 bytes.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn load(p: *const u8) -> __m256i {
    // SAFETY: the caller passes a pointer with 32 readable bytes.
    unsafe { _mm256_loadu_si256(p.cast::<__m256i>()) }
}

/// Unaligned 32-byte store.
///
/// # Safety
/// AVX2 available; `p` writable for 32 bytes.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn store(p: *mut u8, v: __m256i) {
    // SAFETY: the caller passes a pointer with 32 writable bytes.
    unsafe { _mm256_storeu_si256(p.cast::<__m256i>(), v) }
}

/// Bit-transposes a whole block (`input.len() == out.len() == 8 * s * nrow`).
///
/// # Safety
/// AVX2 must be available (the caller checks `is_x86_feature_detected!("avx2")`); the
/// lengths must be as stated.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn trans(input: &[u8], out: &mut [u8], s: usize, nrow: usize) {
    debug_assert!(input.len() == 8 * s * nrow && out.len() == 8 * s * nrow);
    let inp = input.as_ptr();
    let outp = out.as_mut_ptr();
    // Wide chunks of 32 groups (256 elements) for 1- and 2-byte elements.
    let wide = if s <= 2 { nrow / 32 } else { 0 };
    for c in 0..wide {
        // SAFETY: AVX2 is enabled here too; wide chunk c reads elements 256c..256c + 256
        // (bytes up to 256 * s * wide <= 8 * s * nrow) and writes bytes 32c..32c + 32 <= nrow
        // of rows 0..8 * s.
        unsafe {
            if s == 1 {
                trans1_wide(inp.add(256 * c), outp, nrow, 32 * c);
            } else {
                trans2_wide(inp.add(512 * c), outp, nrow, 32 * c);
            }
        }
    }
    // Then chunks of 4 groups (32 elements) with movemask.
    let c0 = wide * 8;
    let chunks = nrow / 4;
    // SAFETY: (all arms) AVX2 is enabled here too; chunk c reads elements 32c..32c + 32,
    // i.e. bytes up to 32 * s * chunks <= 8 * s * nrow (and `tmp` is 32 bytes), and writes
    // bytes 4c..4c + 4 <= nrow of each of the 8 * s rows.
    unsafe {
        match s {
            1 => {
                for c in c0..chunks {
                    emit_plane(load(inp.add(32 * c)), outp, 0, nrow, 4 * c);
                }
            }
            2 => {
                let m = _mm256_setr_epi8(
                    0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12,
                    14, 1, 3, 5, 7, 9, 11, 13, 15,
                );
                for c in c0..chunks {
                    let p = inp.add(64 * c);
                    // lane: [byte0 of 8 elements, byte1 of 8 elements]
                    let a = _mm256_shuffle_epi8(load(p), m);
                    let b = _mm256_shuffle_epi8(load(p.add(32)), m);
                    // qwords [a.p0(0-7), a.p0(8-15), a.p1(0-7), a.p1(8-15)]
                    let a = _mm256_permute4x64_epi64::<0b11_01_10_00>(a);
                    let b = _mm256_permute4x64_epi64::<0b11_01_10_00>(b);
                    emit_plane(
                        _mm256_permute2x128_si256::<0x20>(a, b),
                        outp,
                        0,
                        nrow,
                        4 * c,
                    );
                    emit_plane(
                        _mm256_permute2x128_si256::<0x31>(a, b),
                        outp,
                        8,
                        nrow,
                        4 * c,
                    );
                }
            }
            4 => {
                let m = _mm256_setr_epi8(
                    0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4, 8, 12, 1, 5, 9, 13,
                    2, 6, 10, 14, 3, 7, 11, 15,
                );
                let perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
                for c in 0..chunks {
                    let p = inp.add(128 * c);
                    // Each w holds 8 elements as qwords [plane0, plane1, plane2, plane3].
                    let w0 = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(load(p), m), perm);
                    let w1 =
                        _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(load(p.add(32)), m), perm);
                    let w2 =
                        _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(load(p.add(64)), m), perm);
                    let w3 =
                        _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(load(p.add(96)), m), perm);
                    let a = _mm256_unpacklo_epi64(w0, w1);
                    let b = _mm256_unpacklo_epi64(w2, w3);
                    let cc = _mm256_unpackhi_epi64(w0, w1);
                    let d = _mm256_unpackhi_epi64(w2, w3);
                    emit_plane(
                        _mm256_permute2x128_si256::<0x20>(a, b),
                        outp,
                        0,
                        nrow,
                        4 * c,
                    );
                    emit_plane(
                        _mm256_permute2x128_si256::<0x20>(cc, d),
                        outp,
                        8,
                        nrow,
                        4 * c,
                    );
                    emit_plane(
                        _mm256_permute2x128_si256::<0x31>(a, b),
                        outp,
                        16,
                        nrow,
                        4 * c,
                    );
                    emit_plane(
                        _mm256_permute2x128_si256::<0x31>(cc, d),
                        outp,
                        24,
                        nrow,
                        4 * c,
                    );
                }
            }
            8 => {
                for c in 0..chunks {
                    trans8_chunk(inp.add(256 * c), outp, nrow, 4 * c);
                }
            }
            _ => {
                let mut tmp = [0u8; 32];
                for c in 0..chunks {
                    let base = 32 * s * c;
                    for j in 0..s {
                        for (k, t) in tmp.iter_mut().enumerate() {
                            *t = *inp.add(base + k * s + j);
                        }
                        emit_plane(load(tmp.as_ptr()), outp, 8 * j, nrow, 4 * c);
                    }
                }
            }
        }
    }
    scalar::trans_groups(input, out, s, nrow, 4 * chunks..nrow);
}

/// 32 elements of 8 bytes at `p` -> 4 bytes of each of the 64 rows.
///
/// # Safety
/// AVX2 available; `p` readable for 256 bytes; `outp` writable for 64 rows of `nrow` bytes,
/// with `off + 4 <= nrow`.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn trans8_chunk(p: *const u8, outp: *mut u8, nrow: usize, off: usize) {
    let m = _mm256_setr_epi8(
        0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15, 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5,
        13, 6, 14, 7, 15,
    );
    // v[i]: lane 0 = elements 2i, 2i+1; lane 1 = elements 16 + 2i, 17 + 2i; after the
    // shuffle each lane holds 8 words, word j = byte j of both elements.
    let mut v = [_mm256_setzero_si256(); 8];
    for (i, vi) in v.iter_mut().enumerate() {
        // SAFETY: the caller passes 256 readable bytes at p.
        let (lo, hi) = unsafe {
            (
                _mm_loadu_si128(p.add(16 * i).cast::<__m128i>()),
                _mm_loadu_si128(p.add(128 + 16 * i).cast::<__m128i>()),
            )
        };
        *vi = _mm256_shuffle_epi8(_mm256_set_m128i(hi, lo), m);
    }
    let planes = transpose_words(&v);
    for (j, pl) in planes.into_iter().enumerate() {
        // SAFETY: AVX2 is enabled here too; forwarded caller contract (rows 8j..8j + 8 <= 64
        // of nrow bytes, off + 4 <= nrow).
        unsafe { emit_plane(pl, outp, 8 * j, nrow, off) };
    }
}

/// 8x8 transpose of 16-bit words within each 128-bit lane: word `k` of lane `l` of
/// `v[i]` becomes word `i` of lane `l` of the result's vector `k`.
#[target_feature(enable = "avx2")]
#[inline]
fn transpose_words(v: &[__m256i; 8]) -> [__m256i; 8] {
    let t0 = _mm256_unpacklo_epi16(v[0], v[1]);
    let t1 = _mm256_unpackhi_epi16(v[0], v[1]);
    let t2 = _mm256_unpacklo_epi16(v[2], v[3]);
    let t3 = _mm256_unpackhi_epi16(v[2], v[3]);
    let t4 = _mm256_unpacklo_epi16(v[4], v[5]);
    let t5 = _mm256_unpackhi_epi16(v[4], v[5]);
    let t6 = _mm256_unpacklo_epi16(v[6], v[7]);
    let t7 = _mm256_unpackhi_epi16(v[6], v[7]);
    let u0 = _mm256_unpacklo_epi32(t0, t2);
    let u1 = _mm256_unpackhi_epi32(t0, t2);
    let u2 = _mm256_unpacklo_epi32(t1, t3);
    let u3 = _mm256_unpackhi_epi32(t1, t3);
    let u4 = _mm256_unpacklo_epi32(t4, t6);
    let u5 = _mm256_unpackhi_epi32(t4, t6);
    let u6 = _mm256_unpacklo_epi32(t5, t7);
    let u7 = _mm256_unpackhi_epi32(t5, t7);
    [
        _mm256_unpacklo_epi64(u0, u4),
        _mm256_unpackhi_epi64(u0, u4),
        _mm256_unpacklo_epi64(u1, u5),
        _mm256_unpackhi_epi64(u1, u5),
        _mm256_unpacklo_epi64(u2, u6),
        _mm256_unpackhi_epi64(u2, u6),
        _mm256_unpacklo_epi64(u3, u7),
        _mm256_unpackhi_epi64(u3, u7),
    ]
}

/// Encodes 32 groups of one byte plane. `w[i]`: lane 0 holds, for element position
/// `k = 0..8`, the word (byte of group 2i, byte of group 2i + 1); lane 1 the same for
/// groups 16 + 2i and 17 + 2i. Writes 32 bytes at `off` of rows `row0..row0 + 8`.
///
/// # Safety
/// AVX2 available; `out` writable for rows `row0..row0 + 8` of `nrow` bytes, with
/// `off + 32 <= nrow`.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn emit_rows(w: &[__m256i; 8], out: *mut u8, row0: usize, nrow: usize, off: usize) {
    // e[k] = byte of element 8g + k for g = 0..32, in order; then the bit transpose turns
    // it into row b.
    let mut e = transpose_words(w);
    transpose_rows(&mut e);
    for (b, eb) in e.iter().enumerate() {
        // SAFETY: AVX2 is enabled here too; row0 + b < row0 + 8 and off + 32 <= nrow, so
        // the 32 bytes lie inside `out` (the caller's contract).
        unsafe { store(out.add((row0 + b) * nrow + off), *eb) };
    }
}

/// Two unaligned 16-byte loads as the low (`lo`) and high (`hi`) halves of one vector.
///
/// # Safety
/// AVX2 available; `lo` and `hi` readable for 16 bytes each.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn load2(lo: *const u8, hi: *const u8) -> __m256i {
    // SAFETY: the caller passes two pointers with 16 readable bytes each.
    unsafe {
        _mm256_set_m128i(
            _mm_loadu_si128(hi.cast::<__m128i>()),
            _mm_loadu_si128(lo.cast::<__m128i>()),
        )
    }
}

/// 256 one-byte elements at `p` (32 groups) -> 32 bytes at `off` of each of the 8 rows.
///
/// # Safety
/// AVX2 available; `p` readable for 256 bytes; `out` writable for 8 rows of `nrow` bytes,
/// with `off + 32 <= nrow`.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn trans1_wide(p: *const u8, out: *mut u8, nrow: usize, off: usize) {
    let m = _mm256_setr_epi8(
        0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15, 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5,
        13, 6, 14, 7, 15,
    );
    let mut w = [_mm256_setzero_si256(); 8];
    for (i, wi) in w.iter_mut().enumerate() {
        // SAFETY: AVX2 is enabled here too; 128 + 16i + 16 <= 256 for i < 8, and the caller
        // passes 256 readable bytes at p.
        *wi = _mm256_shuffle_epi8(unsafe { load2(p.add(16 * i), p.add(128 + 16 * i)) }, m);
    }
    // SAFETY: AVX2 is enabled here too; forwarded caller contract (8 rows, off + 32 <= nrow).
    unsafe { emit_rows(&w, out, 0, nrow, off) };
}

/// 256 two-byte elements at `p` (32 groups of 16 bytes) -> 32 bytes at `off` of each of
/// the 16 rows.
///
/// # Safety
/// AVX2 available; `p` readable for 512 bytes; `out` writable for 16 rows of `nrow` bytes,
/// with `off + 32 <= nrow`.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn trans2_wide(p: *const u8, out: *mut u8, nrow: usize, off: usize) {
    let m = _mm256_setr_epi8(
        0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5,
        7, 9, 11, 13, 15,
    );
    let mut w0 = [_mm256_setzero_si256(); 8];
    let mut w1 = [_mm256_setzero_si256(); 8];
    for i in 0..8 {
        // SAFETY: AVX2 is enabled here too; 256 + 32i + 32 <= 512 for i < 8, and the caller
        // passes 512 readable bytes at p.
        let (x, y) = unsafe {
            (
                load2(p.add(32 * i), p.add(256 + 32 * i)),
                load2(p.add(32 * i + 16), p.add(256 + 32 * i + 16)),
            )
        };
        // Lane: [byte 0 of the group's 8 elements, byte 1 of them].
        let x = _mm256_shuffle_epi8(x, m);
        let y = _mm256_shuffle_epi8(y, m);
        w0[i] = _mm256_unpacklo_epi8(x, y);
        w1[i] = _mm256_unpackhi_epi8(x, y);
    }
    // SAFETY: AVX2 is enabled here too; forwarded caller contract (rows 0..8 and 8..16 of
    // the 16, off + 32 <= nrow).
    unsafe {
        emit_rows(&w0, out, 0, nrow, off);
        emit_rows(&w1, out, 8, nrow, off);
    }
}

/// Delta swap between two row vectors: bits `mask` of `a` <-> the bits `SHIFT` lower in
/// `b` (16-bit shifts are fine: the mask drops the bits that cross a byte boundary).
#[target_feature(enable = "avx2")]
#[inline]
fn swap_bits<const SHIFT: i32>(a: __m256i, b: __m256i, mask: __m256i) -> (__m256i, __m256i) {
    let t = _mm256_and_si256(_mm256_xor_si256(a, _mm256_slli_epi16::<SHIFT>(b)), mask);
    (
        _mm256_xor_si256(a, t),
        _mm256_xor_si256(b, _mm256_srli_epi16::<SHIFT>(t)),
    )
}

/// The 8x8 bit transpose of every byte column of 8 row vectors: afterwards bit `b` of
/// byte `g` of `r[k]` is what bit `k` of byte `g` of `r[b]` was. This is `TRANS_BIT_8X8`
/// with the 8 bytes of each matrix spread over the 8 vectors, so every lane does useful
/// work (12 swaps of 6 ops for 32 matrices instead of 8 x 18 ops on 64-bit lanes).
#[target_feature(enable = "avx2")]
#[inline]
fn transpose_rows(r: &mut [__m256i; 8]) {
    let m1 = _mm256_set1_epi8(0xAAu8 as i8);
    let m2 = _mm256_set1_epi8(0xCCu8 as i8);
    let m4 = _mm256_set1_epi8(0xF0u8 as i8);
    for k in [0, 2, 4, 6] {
        (r[k], r[k + 1]) = swap_bits::<1>(r[k], r[k + 1], m1);
    }
    for k in [0, 1, 4, 5] {
        (r[k], r[k + 2]) = swap_bits::<2>(r[k], r[k + 2], m2);
    }
    for k in [0, 1, 2, 3] {
        (r[k], r[k + 4]) = swap_bits::<4>(r[k], r[k + 4], m4);
    }
}

/// Decodes 32 groups of one plane: reads 32 bytes at `off` of the 8 rows starting at `rows`
/// (row stride `nrow`) and writes the plane's 256 bytes (byte `j` of 256 elements, in
/// element order) to `dst`.
///
/// # Safety
/// AVX2 available; `rows` readable for 8 rows of `nrow` bytes with `off + 32 <= nrow`;
/// `dst` writable for 256 bytes.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn untrans_plane(rows: *const u8, nrow: usize, off: usize, dst: *mut u8) {
    let mut r = [_mm256_setzero_si256(); 8];
    for (b, rb) in r.iter_mut().enumerate() {
        // SAFETY: AVX2 is enabled here too; b < 8 and off + 32 <= nrow, so the 32 bytes lie in
        // the caller's 8 rows of nrow bytes at rows.
        *rb = unsafe { load(rows.add(b * nrow + off)) };
    }
    // Bit transpose first (r[k] becomes byte j of elements 8g + k), then interleave the
    // 8 vectors bytewise so each 64-bit lane holds one group's 8 elements.
    transpose_rows(&mut r);
    let a0 = _mm256_unpacklo_epi8(r[0], r[1]);
    let a1 = _mm256_unpackhi_epi8(r[0], r[1]);
    let a2 = _mm256_unpacklo_epi8(r[2], r[3]);
    let a3 = _mm256_unpackhi_epi8(r[2], r[3]);
    let a4 = _mm256_unpacklo_epi8(r[4], r[5]);
    let a5 = _mm256_unpackhi_epi8(r[4], r[5]);
    let a6 = _mm256_unpacklo_epi8(r[6], r[7]);
    let a7 = _mm256_unpackhi_epi8(r[6], r[7]);
    let b0 = _mm256_unpacklo_epi16(a0, a2);
    let b1 = _mm256_unpackhi_epi16(a0, a2);
    let b2 = _mm256_unpacklo_epi16(a1, a3);
    let b3 = _mm256_unpackhi_epi16(a1, a3);
    let b4 = _mm256_unpacklo_epi16(a4, a6);
    let b5 = _mm256_unpackhi_epi16(a4, a6);
    let b6 = _mm256_unpacklo_epi16(a5, a7);
    let b7 = _mm256_unpackhi_epi16(a5, a7);
    // c[k]: lane 0 = groups 2k, 2k+1; lane 1 = groups 16 + 2k, 17 + 2k.
    let c = [
        _mm256_unpacklo_epi32(b0, b4),
        _mm256_unpackhi_epi32(b0, b4),
        _mm256_unpacklo_epi32(b1, b5),
        _mm256_unpackhi_epi32(b1, b5),
        _mm256_unpacklo_epi32(b2, b6),
        _mm256_unpackhi_epi32(b2, b6),
        _mm256_unpacklo_epi32(b3, b7),
        _mm256_unpackhi_epi32(b3, b7),
    ];
    for k in 0..4 {
        let (x, y) = (c[2 * k], c[2 * k + 1]);
        // SAFETY: AVX2 is enabled here too; dst has 256 writable bytes, 32k + 32 <= 128 and
        // 128 + 32k + 32 <= 256 for k < 4.
        unsafe {
            store(dst.add(32 * k), _mm256_permute2x128_si256::<0x20>(x, y));
            store(
                dst.add(128 + 32 * k),
                _mm256_permute2x128_si256::<0x31>(x, y),
            );
        }
    }
}

/// Interleaves 2 planes of 32 elements (at `p`, stride 256) into 64 bytes at `dst`.
///
/// # Safety
/// AVX2 available; `p` readable for 32 bytes at offsets 0 and 256; `dst` writable for 64.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn interleave2(p: *const u8, dst: *mut u8) {
    // SAFETY: AVX2 is enabled here too; p has 2 planes of 256 bytes, of which the first 32
    // of each are read; dst has 64 writable bytes (the caller's contract).
    unsafe {
        let a = load(p);
        let b = load(p.add(256));
        let lo = _mm256_unpacklo_epi8(a, b);
        let hi = _mm256_unpackhi_epi8(a, b);
        store(dst, _mm256_permute2x128_si256::<0x20>(lo, hi));
        store(dst.add(32), _mm256_permute2x128_si256::<0x31>(lo, hi));
    }
}

/// Interleaves 4 planes of 32 elements (at `p`, stride 256) into 128 bytes at `dst`.
///
/// # Safety
/// AVX2 available; `p` readable for 32 bytes at offsets 0, 256, 512, 768; `dst` writable
/// for 128.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn interleave4(p: *const u8, dst: *mut u8) {
    // SAFETY: AVX2 is enabled here too; p has 4 planes of 256 bytes, of which the first 32
    // of each are read; dst has 128 writable bytes (the caller's contract).
    unsafe {
        let x0 = _mm256_unpacklo_epi8(load(p), load(p.add(256)));
        let x1 = _mm256_unpackhi_epi8(load(p), load(p.add(256)));
        let y0 = _mm256_unpacklo_epi8(load(p.add(512)), load(p.add(768)));
        let y1 = _mm256_unpackhi_epi8(load(p.add(512)), load(p.add(768)));
        let z0 = _mm256_unpacklo_epi16(x0, y0);
        let z1 = _mm256_unpackhi_epi16(x0, y0);
        let z2 = _mm256_unpacklo_epi16(x1, y1);
        let z3 = _mm256_unpackhi_epi16(x1, y1);
        store(dst, _mm256_permute2x128_si256::<0x20>(z0, z1));
        store(dst.add(32), _mm256_permute2x128_si256::<0x20>(z2, z3));
        store(dst.add(64), _mm256_permute2x128_si256::<0x31>(z0, z1));
        store(dst.add(96), _mm256_permute2x128_si256::<0x31>(z2, z3));
    }
}

/// Interleaves 8 planes of 32 elements (at `p`, stride 256) into 256 bytes at `dst`.
///
/// # Safety
/// AVX2 available; `p` readable for 32 bytes at offsets 256j, j < 8; `dst` writable for
/// 256.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn interleave8(p: *const u8, dst: *mut u8) {
    // SAFETY: AVX2 is enabled here too; p has 8 planes of 256 bytes, of which the first 32
    // of each are read; dst has 256 writable bytes, 128 + 32i + 32 <= 256 for i < 4 (the
    // caller's contract).
    unsafe {
        let mut pl = [_mm256_setzero_si256(); 8];
        for (j, v) in pl.iter_mut().enumerate() {
            *v = load(p.add(256 * j));
        }
        let x0 = _mm256_unpacklo_epi8(pl[0], pl[1]);
        let x1 = _mm256_unpackhi_epi8(pl[0], pl[1]);
        let x2 = _mm256_unpacklo_epi8(pl[2], pl[3]);
        let x3 = _mm256_unpackhi_epi8(pl[2], pl[3]);
        let x4 = _mm256_unpacklo_epi8(pl[4], pl[5]);
        let x5 = _mm256_unpackhi_epi8(pl[4], pl[5]);
        let x6 = _mm256_unpacklo_epi8(pl[6], pl[7]);
        let x7 = _mm256_unpackhi_epi8(pl[6], pl[7]);
        let y0 = _mm256_unpacklo_epi16(x0, x2);
        let y1 = _mm256_unpackhi_epi16(x0, x2);
        let y2 = _mm256_unpacklo_epi16(x1, x3);
        let y3 = _mm256_unpackhi_epi16(x1, x3);
        let y4 = _mm256_unpacklo_epi16(x4, x6);
        let y5 = _mm256_unpackhi_epi16(x4, x6);
        let y6 = _mm256_unpacklo_epi16(x5, x7);
        let y7 = _mm256_unpackhi_epi16(x5, x7);
        // z[m]: lane 0 = elements 2m, 2m+1; lane 1 = elements 16 + 2m, 17 + 2m.
        let z = [
            _mm256_unpacklo_epi32(y0, y4),
            _mm256_unpackhi_epi32(y0, y4),
            _mm256_unpacklo_epi32(y1, y5),
            _mm256_unpackhi_epi32(y1, y5),
            _mm256_unpacklo_epi32(y2, y6),
            _mm256_unpackhi_epi32(y2, y6),
            _mm256_unpacklo_epi32(y3, y7),
            _mm256_unpackhi_epi32(y3, y7),
        ];
        for i in 0..4 {
            store(
                dst.add(32 * i),
                _mm256_permute2x128_si256::<0x20>(z[2 * i], z[2 * i + 1]),
            );
            store(
                dst.add(128 + 32 * i),
                _mm256_permute2x128_si256::<0x31>(z[2 * i], z[2 * i + 1]),
            );
        }
    }
}

/// Inverse of [`trans`] (`input.len() == out.len() == 8 * s * nrow`).
///
/// # Safety
/// AVX2 must be available (the caller checks `is_x86_feature_detected!("avx2")`); the
/// lengths must be as stated.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn untrans(input: &[u8], out: &mut [u8], s: usize, nrow: usize) {
    debug_assert!(input.len() == 8 * s * nrow && out.len() == 8 * s * nrow);
    let chunks = nrow / 32;
    let inp = input.as_ptr();
    let outp = out.as_mut_ptr();
    // Planes of one chunk (256 elements) for the interleaving element sizes.
    // Uninitialised: every plane is fully written by untrans_plane before it is read.
    let mut tmp = [std::mem::MaybeUninit::<u8>::uninit(); 256 * 8];
    let tp = tmp.as_mut_ptr().cast::<u8>();
    // SAFETY: (all arms) AVX2 is enabled here too; chunk c reads bytes 32c..32c + 32 of
    // every row (32 * chunks <= nrow) and writes elements 256c..256c + 256, i.e. bytes up to
    // 256 * s * chunks <= 8 * s * nrow; tmp holds 8 planes of 256 bytes (s <= 8 in the
    // interleaving arm, plane 0 only in the last), and every tmp byte read was written by
    // untrans_plane first.
    unsafe {
        match s {
            1 => {
                for c in 0..chunks {
                    untrans_plane(inp, nrow, 32 * c, outp.add(256 * c));
                }
            }
            2 | 4 | 8 => {
                for c in 0..chunks {
                    for j in 0..s {
                        untrans_plane(inp.add(8 * j * nrow), nrow, 32 * c, tp.add(256 * j));
                    }
                    let dst = outp.add(256 * s * c);
                    for i in 0..8 {
                        match s {
                            2 => interleave2(tp.add(32 * i), dst.add(64 * i)),
                            4 => interleave4(tp.add(32 * i), dst.add(128 * i)),
                            _ => interleave8(tp.add(32 * i), dst.add(256 * i)),
                        }
                    }
                }
            }
            _ => {
                for c in 0..chunks {
                    let base = 256 * s * c;
                    for j in 0..s {
                        untrans_plane(inp.add(8 * j * nrow), nrow, 32 * c, tp);
                        for k in 0..256 {
                            *outp.add(base + k * s + j) = *tp.add(k);
                        }
                    }
                }
            }
        }
    }
    scalar::untrans_groups(input, out, s, nrow, 32 * chunks..nrow);
}
