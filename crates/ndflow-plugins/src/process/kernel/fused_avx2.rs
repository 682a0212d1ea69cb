//! The recursive filter's hot path written out in AVX2 for integer frames with an f64 filter
//! (UInt8/UInt16 in and out: the 2013 benchmark's PROC1 and most detectors).
//!
//! What the compiler makes of the generic loop spends most of its instructions on the
//! float → integer conversion (a saturating `as` has no vector instruction, so it goes through
//! [`super::trunc_sat`]'s magic-number arithmetic) and on widening one pixel at a time. Here a
//! block of 16 pixels is widened with two `vpmovzx`, converted with `max`, `min` and one
//! truncating `vcvttpd2dq`, and narrowed with `packus`: the same arithmetic in the same order
//! (no FMA, `(off + c1·F) + c2·I`), so F and the output equal the generic path bit for bit —
//! the tests compare them on values that saturate, are negative, infinite or NaN.

use std::any::TypeId;
#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use ndflow_core::Pixel;

use super::{Linear, OutPixel, Real};

/// Pixels per block: one 128-bit load of UInt8 input, four vectors of f64.
const BLOCK: usize = 16;

/// Runs `F = off + c1·F + c2·I; O = F as O` over the longest multiple of [`BLOCK`] pixels when
/// (I, O, R) is one of the handled combinations, and returns how many pixels it did (0 when
/// the combination is not handled; the caller finishes the rest with the generic loop).
///
/// # Safety
/// The CPU must support AVX2 (the caller runs inside the AVX2 build, chosen after
/// `is_x86_feature_detected!("avx2")`). There is no other requirement: every pointer access
/// is bounded by the slices' own lengths.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn fused_same_dense<I: Pixel, O: OutPixel, R: Real>(
    input: &[I],
    f: &mut [R],
    lin: &Linear<R>,
    out: &mut [O],
) -> usize {
    if TypeId::of::<R>() != TypeId::of::<f64>() {
        return 0;
    }
    let f: &mut [f64] = bytemuck::cast_slice_mut(f);
    let c = Coeffs {
        off: _mm256_set1_pd(bytemuck::cast(lin.off)),
        c1: _mm256_set1_pd(bytemuck::cast(lin.c1)),
        c2: _mm256_set1_pd(bytemuck::cast(lin.c2)),
    };
    let input: &[u8] = bytemuck::cast_slice(input);
    let out: &mut [u8] = bytemuck::cast_slice_mut(out);
    let (i8_, o8) = (
        TypeId::of::<I>() == TypeId::of::<u8>(),
        TypeId::of::<O>() == TypeId::of::<u8>(),
    );
    let (i16_, o16) = (
        TypeId::of::<I>() == TypeId::of::<u16>(),
        TypeId::of::<O>() == TypeId::of::<u16>(),
    );
    match (i8_, i16_, o8, o16) {
        (true, _, true, _) => blocks::<1, 1>(input, f, &c, out),
        (true, _, _, true) => blocks::<1, 2>(input, f, &c, out),
        (_, true, true, _) => blocks::<2, 1>(input, f, &c, out),
        (_, true, _, true) => blocks::<2, 2>(input, f, &c, out),
        _ => 0,
    }
}

/// Off x86_64: handles nothing (returns 0).
///
/// # Safety
/// None (kept `unsafe` to match the x86_64 signature).
#[cfg(not(target_arch = "x86_64"))]
pub(super) unsafe fn fused_same_dense<I: Pixel, O: OutPixel, R: Real>(
    _input: &[I],
    _f: &mut [R],
    _lin: &Linear<R>,
    _out: &mut [O],
) -> usize {
    0
}

#[cfg(target_arch = "x86_64")]
struct Coeffs {
    off: __m256d,
    c1: __m256d,
    c2: __m256d,
}

/// `IN`/`OUT`: bytes per input/output pixel (1 = UInt8, 2 = UInt16); slices are raw bytes.
/// Safe to call from AVX2 code: every access is bounded by the slices' lengths.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn blocks<const IN: usize, const OUT: usize>(
    input: &[u8],
    f: &mut [f64],
    c: &Coeffs,
    out: &mut [u8],
) -> usize {
    let n = (input.len() / IN).min(f.len()).min(out.len() / OUT);
    let whole = n - n % BLOCK;
    let top = _mm256_set1_pd(if OUT == 1 { 255.0 } else { 65535.0 });
    let zero = _mm256_setzero_pd();
    let mut i = 0;
    while i < whole {
        // SAFETY: i + BLOCK <= whole <= n, so the 16 pixels read from `input` (16·IN bytes at
        // byte i·IN), the 16 f64 read and written in `f` and the 16 pixels written to `out`
        // (16·OUT bytes at byte i·OUT) are inside their slices (n bounds all three);
        // load16/store16 need AVX2, which is enabled on this function.
        unsafe {
            let x = load16::<IN>(input.as_ptr().add(i * IN));
            let fp = f.as_mut_ptr().add(i);
            let mut q = [_mm_setzero_si128(); 4];
            for k in 0..4 {
                let old = _mm256_loadu_pd(fp.add(4 * k));
                let nf = _mm256_add_pd(
                    _mm256_add_pd(c.off, _mm256_mul_pd(c.c1, old)),
                    _mm256_mul_pd(c.c2, x[k]),
                );
                _mm256_storeu_pd(fp.add(4 * k), nf);
                // `max` returns its second operand when the first is NaN: NaN → 0, as `as` does;
                // after the clamp, truncation toward zero is exact in i32.
                let clamped = _mm256_min_pd(_mm256_max_pd(nf, zero), top);
                q[k] = _mm256_cvttpd_epi32(clamped);
            }
            store16::<OUT>(out.as_mut_ptr().add(i * OUT), &q);
        }
        i += BLOCK;
    }
    whole
}

/// 16 unsigned pixels of `BYTES` bytes each at `p`, as four vectors of f64.
///
/// # Safety
/// AVX2 available; `p` readable for `16 * BYTES` bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn load16<const BYTES: usize>(p: *const u8) -> [__m256d; 4] {
    let (lo, hi) = if BYTES == 1 {
        // SAFETY: the caller passes 16 readable bytes at p (BYTES == 1); unaligned load.
        let b = unsafe { _mm_loadu_si128(p as *const __m128i) };
        (
            _mm256_cvtepu8_epi32(b),
            _mm256_cvtepu8_epi32(_mm_srli_si128(b, 8)),
        )
    } else {
        // SAFETY: BYTES >= 2, so the caller passes 16·BYTES >= 32 readable bytes at p;
        // unaligned loads of bytes 0..16 and 16..32.
        let (a, b) = unsafe {
            (
                _mm_loadu_si128(p as *const __m128i),
                _mm_loadu_si128(p.add(16) as *const __m128i),
            )
        };
        (_mm256_cvtepu16_epi32(a), _mm256_cvtepu16_epi32(b))
    };
    [
        _mm256_cvtepi32_pd(_mm256_castsi256_si128(lo)),
        _mm256_cvtepi32_pd(_mm256_extracti128_si256(lo, 1)),
        _mm256_cvtepi32_pd(_mm256_castsi256_si128(hi)),
        _mm256_cvtepi32_pd(_mm256_extracti128_si256(hi, 1)),
    ]
}

/// Narrows four vectors of 4 i32 (each already within the output type's range) to 16 pixels
/// of `BYTES` bytes at `p`.
///
/// # Safety
/// AVX2 available; `p` writable for `16 * BYTES` bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn store16<const BYTES: usize>(p: *mut u8, q: &[__m128i; 4]) {
    let a = _mm_packus_epi32(q[0], q[1]);
    let b = _mm_packus_epi32(q[2], q[3]);
    if BYTES == 1 {
        // SAFETY: the caller passes 16 writable bytes at p (BYTES == 1); unaligned store.
        unsafe { _mm_storeu_si128(p as *mut __m128i, _mm_packus_epi16(a, b)) };
    } else {
        // SAFETY: BYTES >= 2, so the caller passes 16·BYTES >= 32 writable bytes at p;
        // unaligned stores of bytes 0..16 and 16..32.
        unsafe {
            _mm_storeu_si128(p as *mut __m128i, a);
            _mm_storeu_si128(p.add(16) as *mut __m128i, b);
        }
    }
}
