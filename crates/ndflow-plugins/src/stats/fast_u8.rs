//! The pass of [`super::kernel::scan`] for UInt8 frames in AVX2 intrinsics: one load per 32
//! pixels feeds every sum (the generic loops go over each row three times and widen every
//! pixel to 16 bits for Σv and Σv²).
//!
//! - min/max in bytes (`pminub`/`pmaxub`), Σv and Σt with `psadbw`, Σv² with `pmaddwd`;
//! - the thresholded value `t` widened once into the column sums C (u16 over 256 rows,
//!   255·256 < 2¹⁶), flushed into u32 totals, and those into the x moments every 4096 rows
//!   exactly as the generic pass does;
//! - the joint moment from rows instead of columns: R(y) = Σx·t with `pmaddwd` against a
//!   column ramp (x relative to a 2048-pixel chunk, so the i32 lanes cannot overflow), and
//!   M11 = Σ y·R(y) summed exactly in u128.
//!
//! Every sum is an exact integer, so the results equal the generic pass's (M11 too, as long
//! as the generic f64 sums stay below 2⁵³; tests compare them bit for bit).

use super::kernel::{Columns, Moments, ScanOut};

/// Rows of C before it is flushed into the u32 totals (255·256 < 2¹⁶).
const GROUP: usize = 256;
/// Rows of totals before they go into the f64 moments (the generic pass's `SUPER` for u8).
const SUPER: usize = 4096;
/// Pixels per chunk of the Σx·t ramp: 2·255·2047 per pair, 64 pairs per lane, fits i32.
const CHUNK: usize = 2048;

/// The AVX2 pass when this CPU has AVX2 and the frame suits it (rows of at least 32
/// pixels), else None. `cols` given: the centroid sums too.
pub(crate) fn scan(
    data: &[u8],
    nx: usize,
    thr: u8,
    cols: Option<&mut Columns<'_, u8>>,
) -> Option<ScanOut> {
    #[cfg(target_arch = "x86_64")]
    if nx >= 32 && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 is present (checked just above).
        return Some(unsafe { x86::scan_avx2(data, nx, thr, cols) });
    }
    let _ = (data, nx, thr, cols);
    None
}

/// Column totals into the x moments (the generic `flush_super` without M11, which comes
/// from rows here); zeroes the totals.
fn flush_totals(total: &mut [u32], m: &mut Moments) {
    for (x, t) in total.iter_mut().enumerate() {
        m.add_column(x as f64, *t as f64);
        *t = 0;
    }
}

/// Column sums into the totals; zeroes the sums.
fn flush_group(c: &mut [u16], total: &mut [u32]) {
    for (t, c) in total.iter_mut().zip(c.iter_mut()) {
        *t += *c as u32;
        *c = 0;
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{flush_group, flush_totals, Columns, ScanOut, CHUNK, GROUP, SUPER};

    /// Row results of the vector loop and the scalar tail.
    #[derive(Default)]
    struct Row {
        min: u8,
        max: u8,
        sum: u64,
        sum_sq: u64,
        /// Σt and Σx·t (x from the row start).
        t: u64,
        xt: u64,
    }

    /// Sum of the four u64 lanes.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn hsum_u64(v: __m256i) -> u64 {
        let s = _mm_add_epi64(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
        _mm_cvtsi128_si64(_mm_add_epi64(s, _mm_unpackhi_epi64(s, s))) as u64
    }

    /// Sum of the eight u32 lanes (each below 2²⁸ here, so the sum fits 32 bits).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn hsum_u32(v: __m256i) -> u64 {
        let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
        _mm_cvtsi128_si32(s) as u32 as u64
    }

    /// Smallest and largest of the 32 bytes of `lo` and of `hi`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn hmin_hmax(lo: __m256i, hi: __m256i) -> (u8, u8) {
        let mut m = _mm_min_epu8(_mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1));
        let mut x = _mm_max_epu8(_mm256_castsi256_si128(hi), _mm256_extracti128_si256(hi, 1));
        m = _mm_min_epu8(m, _mm_srli_si128(m, 8));
        x = _mm_max_epu8(x, _mm_srli_si128(x, 8));
        m = _mm_min_epu8(m, _mm_srli_si128(m, 4));
        x = _mm_max_epu8(x, _mm_srli_si128(x, 4));
        m = _mm_min_epu8(m, _mm_srli_si128(m, 2));
        x = _mm_max_epu8(x, _mm_srli_si128(x, 2));
        m = _mm_min_epu8(m, _mm_srli_si128(m, 1));
        x = _mm_max_epu8(x, _mm_srli_si128(x, 1));
        (_mm_cvtsi128_si32(m) as u8, _mm_cvtsi128_si32(x) as u8)
    }

    /// min/max, Σv and Σv² of a row's blocks, as both loops of `row_pass` keep them.
    struct Basic {
        min: __m256i,
        max: __m256i,
        sum: __m256i,
        /// Σv² of the low and high bytes' pairs; each i32 lane gains ≤ 2·255² per block, so
        /// they are emptied every CHUNK pixels (64 blocks).
        sq: [__m256i; 2],
    }

    impl Basic {
        #[inline]
        #[target_feature(enable = "avx2")]
        fn new() -> Self {
            let zero = _mm256_setzero_si256();
            Basic {
                min: _mm256_set1_epi8(-1),
                max: zero,
                sum: zero,
                sq: [zero; 2],
            }
        }

        #[inline]
        #[target_feature(enable = "avx2")]
        fn add(&mut self, v: __m256i) {
            let zero = _mm256_setzero_si256();
            self.min = _mm256_min_epu8(self.min, v);
            self.max = _mm256_max_epu8(self.max, v);
            self.sum = _mm256_add_epi64(self.sum, _mm256_sad_epu8(v, zero));
            let (lo, hi) = (_mm256_unpacklo_epi8(v, zero), _mm256_unpackhi_epi8(v, zero));
            self.sq[0] = _mm256_add_epi32(self.sq[0], _mm256_madd_epi16(lo, lo));
            self.sq[1] = _mm256_add_epi32(self.sq[1], _mm256_madd_epi16(hi, hi));
        }

        /// Σv² so far, emptying the lanes.
        #[inline]
        #[target_feature(enable = "avx2")]
        fn take_squares(&mut self) -> u64 {
            let s = hsum_u32(self.sq[0]) + hsum_u32(self.sq[1]);
            self.sq = [_mm256_setzero_si256(); 2];
            s
        }
    }

    /// One row: the vector loop over whole 32-pixel blocks, the rest in scalar code.
    /// `c` (the row's column sums) is given with the centroid.
    ///
    /// # Safety
    /// AVX2 available; `c`, when given, holds at least `row.len()` sums.
    #[target_feature(enable = "avx2")]
    unsafe fn row_pass(row: &[u8], thr: u8, c: Option<&mut [u16]>) -> Row {
        let n = row.len();
        let blocks = n / 32;
        let zero = _mm256_setzero_si256();
        let thrv = _mm256_set1_epi8(thr as i8);
        let mut acc = Basic::new();
        let mut out = Row::default();
        let ramp = _mm256_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        let step16 = _mm256_set1_epi16(16);
        let p = row.as_ptr();
        match c {
            None => {
                for first in (0..blocks).step_by(CHUNK / 32) {
                    for b in first..(first + CHUNK / 32).min(blocks) {
                        // SAFETY: block b covers bytes 32b..32b+32 < n.
                        acc.add(unsafe { _mm256_loadu_si256(p.add(32 * b).cast()) });
                    }
                    out.sum_sq += acc.take_squares();
                }
            }
            Some(c) => {
                let cp = c.as_mut_ptr();
                for first in (0..blocks).step_by(CHUNK / 32) {
                    let (mut chunk_t, mut xt, mut x) = (zero, zero, ramp);
                    for b in first..(first + CHUNK / 32).min(blocks) {
                        // SAFETY: block b covers bytes 32b..32b+32 < n.
                        let v = unsafe { _mm256_loadu_si256(p.add(32 * b).cast()) };
                        acc.add(v);
                        // v >= thr ⇔ max(v, thr) == v (bytes compare unsigned this way).
                        let pass = _mm256_cmpeq_epi8(_mm256_max_epu8(v, thrv), v);
                        let t = _mm256_and_si256(v, pass);
                        chunk_t = _mm256_add_epi64(chunk_t, _mm256_sad_epu8(t, zero));
                        // In column order: pixels 0..16 and 16..32 of the block.
                        let t0 = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(t));
                        let t1 = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(t, 1));
                        // SAFETY: sums 32b..32b+32 < n <= c.len(); unaligned loads/stores.
                        unsafe {
                            let c0 = cp.add(32 * b).cast::<__m256i>();
                            let c1 = cp.add(32 * b + 16).cast::<__m256i>();
                            _mm256_storeu_si256(c0, _mm256_add_epi16(_mm256_loadu_si256(c0), t0));
                            _mm256_storeu_si256(c1, _mm256_add_epi16(_mm256_loadu_si256(c1), t1));
                        }
                        let x1 = _mm256_add_epi16(x, step16);
                        xt = _mm256_add_epi32(xt, _mm256_madd_epi16(t0, x));
                        xt = _mm256_add_epi32(xt, _mm256_madd_epi16(t1, x1));
                        x = _mm256_add_epi16(x1, step16);
                    }
                    // Σx·t of the chunk = x0·Σt + Σ(x − x0)·t.
                    let ct = hsum_u64(chunk_t);
                    out.t += ct;
                    out.xt += (32 * first) as u64 * ct + hsum_u32(xt);
                    out.sum_sq += acc.take_squares();
                }
                let tail = 32 * blocks;
                for (i, (&v, c)) in row[tail..].iter().zip(&mut c[tail..n]).enumerate() {
                    let t = if v >= thr { v } else { 0 };
                    *c += t as u16;
                    out.t += t as u64;
                    out.xt += (tail + i) as u64 * t as u64;
                }
            }
        }
        out.sum = hsum_u64(acc.sum);
        (out.min, out.max) = hmin_hmax(acc.min, acc.max);
        for &v in &row[32 * blocks..] {
            out.min = out.min.min(v);
            out.max = out.max.max(v);
            out.sum += v as u64;
            out.sum_sq += v as u64 * v as u64;
        }
        out
    }

    /// # Safety
    /// AVX2 available.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn scan_avx2(
        data: &[u8],
        nx: usize,
        thr: u8,
        mut cols: Option<&mut Columns<'_, u8>>,
    ) -> ScanOut {
        let mut out = ScanOut::default();
        // As the generic pass: an index moves only on a strictly smaller (larger) value.
        let (mut gmin, mut gmax) = (u8::MAX, u8::MIN);
        let ny = data.len() / nx;
        let mut m11: u128 = 0;
        for (y, row) in data.chunks_exact(nx).enumerate() {
            let r = match cols.as_mut() {
                None => {
                    // SAFETY: AVX2 is on here.
                    unsafe { row_pass(row, thr, None) }
                }
                Some(cl) => {
                    let (c, total) = cl.u8_parts();
                    // SAFETY: AVX2 is on here; `c` has `nx` sums (Columns::new).
                    let r = unsafe { row_pass(row, thr, Some(&mut *c)) };
                    let m = &mut out.moments;
                    m.add_row(y as f64, r.t as f64);
                    m11 += y as u128 * r.xt as u128;
                    let next = y + 1;
                    if next % GROUP == 0 || next == ny {
                        flush_group(c, total);
                        if next % SUPER == 0 || next == ny {
                            flush_totals(total, m);
                        }
                    }
                    r
                }
            };
            if r.min < gmin {
                gmin = r.min;
                out.min_idx = y * nx + row.iter().position(|&v| v == r.min).unwrap_or(0);
            }
            if r.max > gmax {
                gmax = r.max;
                out.max_idx = y * nx + row.iter().position(|&v| v == r.max).unwrap_or(0);
            }
            out.sum += r.sum as f64;
            out.sum_sq += r.sum_sq as f64;
        }
        out.moments.m11 = m11 as f64;
        out.min = gmin as f64;
        out.max = gmax as f64;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::kernel::{scan_generic, Columns};
    use super::scan;

    fn noise(n: usize, seed: u64) -> Vec<u8> {
        let mut s = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (s >> 56) as u8
            })
            .collect()
    }

    fn same(a: &super::ScanOut, b: &super::ScanOut, what: &str) {
        let pairs = [
            ("min", a.min, b.min),
            ("max", a.max, b.max),
            ("sum", a.sum, b.sum),
            ("sum_sq", a.sum_sq, b.sum_sq),
            ("m00", a.moments.m00, b.moments.m00),
            ("m10", a.moments.m10, b.moments.m10),
            ("m01", a.moments.m01, b.moments.m01),
            ("m20", a.moments.m20, b.moments.m20),
            ("m02", a.moments.m02, b.moments.m02),
            ("m11", a.moments.m11, b.moments.m11),
            ("m30", a.moments.m30, b.moments.m30),
            ("m03", a.moments.m03, b.moments.m03),
            ("m40", a.moments.m40, b.moments.m40),
            ("m04", a.moments.m04, b.moments.m04),
        ];
        for (name, x, y) in pairs {
            assert_eq!(x.to_bits(), y.to_bits(), "{what}: {name} {x} vs {y}");
        }
        assert_eq!(a.min_idx, b.min_idx, "{what}: min_idx");
        assert_eq!(a.max_idx, b.max_idx, "{what}: max_idx");
    }

    /// Bit-equal to the generic pass: ragged widths (tails of 0..31 pixels, several ramp
    /// chunks), heights across the 256-row group flush, every threshold edge, images that
    /// are all 0 or all 255, with and without the centroid.
    #[test]
    fn equals_the_generic_pass_bit_for_bit() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return; // the generic pass is all there is
        }
        let shapes = [
            (32, 1),
            (33, 7),
            (63, 300),
            (512, 512),
            (1000, 17),
            (2048, 3),
            (4133, 5),
            (1024, 600),
        ];
        let mut store = Vec::new();
        for (k, &(nx, ny)) in shapes.iter().enumerate() {
            let mut images = vec![noise(nx * ny, k as u64)];
            images.push(vec![0; nx * ny]);
            images.push(vec![255; nx * ny]);
            for (j, img) in images.iter().enumerate() {
                for thr in [0u8, 1, 77, 128, 254, 255] {
                    let what = format!("{nx}x{ny} image {j} thr {thr}");
                    let want = scan_generic::<u8, false, false>(img, nx, thr, None, None);
                    let got = scan(img, nx, thr, None).expect("AVX2 pass");
                    same(&got, &want, &format!("{what}, basic"));
                    let cols = Columns::<u8>::new(&mut store, nx).expect("columns");
                    let want = scan_generic::<u8, true, false>(img, nx, thr, Some(cols), None);
                    let mut cols = Columns::<u8>::new(&mut store, nx).expect("columns");
                    let got = scan(img, nx, thr, Some(&mut cols)).expect("AVX2 pass");
                    same(&got, &want, &format!("{what}, centroid"));
                }
            }
        }
    }

    /// Rows narrower than one vector are left to the generic pass.
    #[test]
    fn narrow_rows_fall_back() {
        assert!(scan(&[1u8; 31 * 4], 31, 0, None).is_none());
    }
}
