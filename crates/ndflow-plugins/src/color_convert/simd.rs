//! Interleaved (RGB1) rows to three planes and back, and the exact 8/16-bit RGB1 → Mono
//! mean, with SSSE3 byte shuffles (runtime detected) and plain loops as the fallback.
//!
//! Any element of 1, 2, 4 or 8 bytes splits the same way: 48 interleaved bytes (three
//! 16-byte registers) hold 16 bytes of each colour, and each colour register is the OR of
//! three `pshufb`s with masks that pick its bytes (0x80 zeroes a byte). Joining runs the
//! masks the other way round.

/// Which kernels to use; tests force each one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Isa {
    Scalar,
    #[cfg(target_arch = "x86_64")]
    Ssse3,
    /// The same shuffles on two 48-byte chunks at once (one per 128-bit half).
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl Isa {
    pub(crate) fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx2") {
                return Isa::Avx2;
            }
            if is_x86_feature_detected!("ssse3") {
                return Isa::Ssse3;
            }
        }
        Isa::Scalar
    }

    #[cfg(test)]
    pub(crate) fn all_here() -> Vec<Isa> {
        let mut v = vec![Isa::Scalar];
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("ssse3") {
                v.push(Isa::Ssse3);
            }
            if is_x86_feature_detected!("avx2") {
                v.push(Isa::Avx2);
            }
        }
        v
    }
}

/// Splits an interleaved row (`src.len() == 3·n`) into `r`, `g`, `b` (each `n` long).
pub(crate) fn split3<E: bytemuck::Pod>(src: &[E], r: &mut [E], g: &mut [E], b: &mut [E], isa: Isa) {
    let n = r.len().min(g.len()).min(b.len()).min(src.len() / 3);
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if let (Some(k), Some(m)) = (x86::width(isa), x86::masks(std::mem::size_of::<E>())) {
        // Pixels per k·16 bytes of a plane.
        let per = k * 16 / std::mem::size_of::<E>();
        let chunks = n / per;
        let d = [
            r.as_mut_ptr().cast(),
            g.as_mut_ptr().cast(),
            b.as_mut_ptr().cast(),
        ];
        // SAFETY: the Isa came from detection (its feature is present); `src` holds
        // k·48·chunks bytes and each plane k·16·chunks bytes (chunks·per <= n).
        unsafe {
            if k == 2 {
                x86::split_avx2(src.as_ptr().cast(), d, chunks, &m.split)
            } else {
                x86::split(src.as_ptr().cast(), d, chunks, &m.split)
            }
        };
        done = chunks * per;
    }
    let _ = isa;
    let px = src[3 * done..3 * n].chunks_exact(3);
    let outs = r[done..n]
        .iter_mut()
        .zip(&mut g[done..n])
        .zip(&mut b[done..n]);
    for (((r, g), b), p) in outs.zip(px) {
        (*r, *g, *b) = (p[0], p[1], p[2]);
    }
}

/// Interleaves `r`, `g`, `b` (each `n` long) into `dst` (`3·n`).
pub(crate) fn join3<E: bytemuck::Pod>(r: &[E], g: &[E], b: &[E], dst: &mut [E], isa: Isa) {
    let n = r.len().min(g.len()).min(b.len()).min(dst.len() / 3);
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if let (Some(k), Some(m)) = (x86::width(isa), x86::masks(std::mem::size_of::<E>())) {
        let per = k * 16 / std::mem::size_of::<E>();
        let chunks = n / per;
        let s = [r.as_ptr().cast(), g.as_ptr().cast(), b.as_ptr().cast()];
        // SAFETY: the Isa's feature is present; each plane holds k·16·chunks bytes, `dst`
        // k·48·chunks.
        unsafe {
            if k == 2 {
                x86::join_avx2(s, dst.as_mut_ptr().cast(), chunks, &m.join)
            } else {
                x86::join(s, dst.as_mut_ptr().cast(), chunks, &m.join)
            }
        };
        done = chunks * per;
    }
    let _ = isa;
    let px = dst[3 * done..3 * n].chunks_exact_mut(3);
    for (((p, r), g), b) in px.zip(&r[done..n]).zip(&g[done..n]).zip(&b[done..n]) {
        p.copy_from_slice(&[*r, *g, *b]);
    }
}

/// Each element of `src` three times into `dst` (`3·n`): Mono → RGB1 without a colour map.
pub(crate) fn triple<E: bytemuck::Pod>(src: &[E], dst: &mut [E], isa: Isa) {
    let n = src.len().min(dst.len() / 3);
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if let (Some(k), Some(m)) = (x86::width(isa), x86::masks(std::mem::size_of::<E>())) {
        let per = k * 16 / std::mem::size_of::<E>();
        let chunks = n / per;
        let (s, d) = (src.as_ptr().cast(), dst.as_mut_ptr().cast());
        // SAFETY: the Isa's feature is present; `src` holds k·16·chunks bytes, `dst`
        // k·48·chunks.
        unsafe {
            if k == 2 {
                x86::triple_avx2(s, d, chunks, &m.triple)
            } else {
                x86::triple(s, d, chunks, &m.triple)
            }
        };
        done = chunks * per;
    }
    let _ = isa;
    for (p, v) in dst[3 * done..3 * n].chunks_exact_mut(3).zip(&src[done..n]) {
        p.copy_from_slice(&[*v; 3]);
    }
}

/// (r + g + b) / 3 of each pixel of an interleaved u8 row, truncated (= the f64 mean cast).
pub(crate) fn mean3_u8(out: &mut [u8], row: &[u8], isa: Isa) {
    let n = out.len().min(row.len() / 3);
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if let Some(k) = x86::width(isa) {
        let chunks = n / (16 * k);
        // SAFETY: the Isa's feature is present; `row` holds k·48·chunks bytes, `out`
        // k·16·chunks.
        unsafe {
            if k == 2 {
                x86::mean3_u8_avx2(row.as_ptr(), out.as_mut_ptr(), chunks)
            } else {
                x86::mean3_u8(row.as_ptr(), out.as_mut_ptr(), chunks)
            }
        };
        done = chunks * 16 * k;
    }
    let _ = isa;
    for (m, p) in out[done..n].iter_mut().zip(row[3 * done..].chunks_exact(3)) {
        *m = ((u16::from(p[0]) + u16::from(p[1]) + u16::from(p[2])) / 3) as u8;
    }
}

/// As `mean3_u8` for u16.
pub(crate) fn mean3_u16(out: &mut [u16], row: &[u16], isa: Isa) {
    let n = out.len().min(row.len() / 3);
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if let Some(k) = x86::width(isa) {
        let chunks = n / (8 * k);
        // SAFETY: the Isa's feature is present; `row` holds k·48·chunks bytes, `out`
        // k·16·chunks.
        unsafe {
            if k == 2 {
                x86::mean3_u16_avx2(row.as_ptr(), out.as_mut_ptr(), chunks)
            } else {
                x86::mean3_u16(row.as_ptr(), out.as_mut_ptr(), chunks)
            }
        };
        done = chunks * 8 * k;
    }
    let _ = isa;
    for (m, p) in out[done..n].iter_mut().zip(row[3 * done..].chunks_exact(3)) {
        *m = ((u32::from(p[0]) + u32::from(p[1]) + u32::from(p[2])) / 3) as u16;
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::Isa;

    /// 48-byte chunks per step of the Isa's kernels (None: no SIMD kernels).
    pub(super) fn width(isa: Isa) -> Option<usize> {
        match isa {
            Isa::Scalar => None,
            Isa::Ssse3 => Some(1),
            Isa::Avx2 => Some(2),
        }
    }

    /// `split[c][v]`: the bytes of colour c found in input register v; `join[v][c]`: the
    /// bytes of output register v taken from colour register c.
    pub(super) struct Masks {
        pub split: [[[u8; 16]; 3]; 3],
        pub join: [[[u8; 16]; 3]; 3],
        /// `join` when all three colours are the same register (Mono → RGB1).
        pub triple: [[u8; 16]; 3],
    }

    /// Masks for `e`-byte elements (None unless e divides 16).
    pub(super) fn masks(e: usize) -> Option<&'static Masks> {
        match e {
            1 => Some(&MASKS[0]),
            2 => Some(&MASKS[1]),
            4 => Some(&MASKS[2]),
            8 => Some(&MASKS[3]),
            _ => None,
        }
    }

    /// Built at compile time (rebuilding them per row cost as much as the shuffles).
    static MASKS: [Masks; 4] = [make(1), make(2), make(4), make(8)];

    const fn make(e: usize) -> Masks {
        let mut m = Masks {
            split: [[[0x80; 16]; 3]; 3],
            join: [[[0x80; 16]; 3]; 3],
            triple: [[0x80; 16]; 3],
        };
        // Interleaved byte o (0..48) is byte `bb` of colour c of pixel p of the chunk; in the
        // colour's register it is byte p·e + bb.
        let mut o = 0;
        while o < 48 {
            let (p, q) = (o / (3 * e), o % (3 * e));
            let (c, bb) = (q / e, q % e);
            let k = p * e + bb;
            m.split[c][o / 16][k] = (o % 16) as u8;
            m.join[o / 16][c][o % 16] = k as u8;
            m.triple[o / 16][o % 16] = k as u8;
            o += 1;
        }
        m
    }

    /// The three 16-byte masks as registers.
    #[inline(always)]
    fn load3(m: &[[u8; 16]; 3]) -> [__m128i; 3] {
        // SAFETY: each row is a `[u8; 16]`, 16 readable bytes (unaligned load); SSE2 is part
        // of the x86_64 baseline.
        m.map(|r| unsafe { _mm_loadu_si128(r.as_ptr().cast()) })
    }

    /// One colour register from three source registers (registers only: safe to call from
    /// SSSE3 code).
    #[inline]
    #[target_feature(enable = "ssse3")]
    fn pick(v: &[__m128i; 3], m: &[__m128i; 3]) -> __m128i {
        let a = _mm_shuffle_epi8(v[0], m[0]);
        let b = _mm_shuffle_epi8(v[1], m[1]);
        let c = _mm_shuffle_epi8(v[2], m[2]);
        _mm_or_si128(_mm_or_si128(a, b), c)
    }

    /// # Safety
    /// SSSE3 available; `src` readable for 48·chunks bytes, each `dst` writable for
    /// 16·chunks bytes.
    #[target_feature(enable = "ssse3")]
    pub(super) unsafe fn split(
        src: *const u8,
        dst: [*mut u8; 3],
        chunks: usize,
        masks: &[[[u8; 16]; 3]; 3],
    ) {
        let m = [load3(&masks[0]), load3(&masks[1]), load3(&masks[2])];
        for i in 0..chunks {
            // SAFETY: i < chunks, so the 48 bytes read at src + 48i lie in the caller's
            // 48·chunks readable bytes and the 16 bytes written at dst[c] + 16i in each plane's
            // 16·chunks writable bytes; unaligned loads/stores.
            unsafe {
                let s = src.add(48 * i);
                let v = [
                    _mm_loadu_si128(s.cast()),
                    _mm_loadu_si128(s.add(16).cast()),
                    _mm_loadu_si128(s.add(32).cast()),
                ];
                for c in 0..3 {
                    _mm_storeu_si128(dst[c].add(16 * i).cast(), pick(&v, &m[c]));
                }
            }
        }
    }

    /// # Safety
    /// SSSE3 available; each `src` readable for 16·chunks bytes, `dst` writable for
    /// 48·chunks bytes.
    #[target_feature(enable = "ssse3")]
    pub(super) unsafe fn join(
        src: [*const u8; 3],
        dst: *mut u8,
        chunks: usize,
        masks: &[[[u8; 16]; 3]; 3],
    ) {
        let m = [load3(&masks[0]), load3(&masks[1]), load3(&masks[2])];
        for i in 0..chunks {
            // SAFETY: i < chunks, so the 16 bytes read at each src + 16i lie in that plane's
            // 16·chunks readable bytes and the 48 bytes written at dst + 48i in the caller's
            // 48·chunks writable bytes; unaligned loads/stores.
            unsafe {
                let v = src.map(|p| _mm_loadu_si128(p.add(16 * i).cast()));
                let d = dst.add(48 * i);
                for (k, mk) in m.iter().enumerate() {
                    _mm_storeu_si128(d.add(16 * k).cast(), pick(&v, mk));
                }
            }
        }
    }

    /// # Safety
    /// SSSE3 available; `src` readable for 16·chunks bytes, `dst` writable for 48·chunks.
    #[target_feature(enable = "ssse3")]
    pub(super) unsafe fn triple(
        src: *const u8,
        dst: *mut u8,
        chunks: usize,
        masks: &[[u8; 16]; 3],
    ) {
        let m = load3(masks);
        for i in 0..chunks {
            // SAFETY: i < chunks, so the 16 bytes read at src + 16i lie in the caller's
            // 16·chunks readable bytes and the 48 bytes written at dst + 48i in its 48·chunks
            // writable bytes; unaligned loads/stores.
            unsafe {
                let v = _mm_loadu_si128(src.add(16 * i).cast());
                for (k, mk) in m.iter().enumerate() {
                    _mm_storeu_si128(dst.add(48 * i + 16 * k).cast(), _mm_shuffle_epi8(v, *mk));
                }
            }
        }
    }

    /// # Safety
    /// SSSE3 available; `src` readable for 48·chunks bytes, `dst` writable for 16·chunks.
    #[target_feature(enable = "ssse3")]
    pub(super) unsafe fn mean3_u8(src: *const u8, dst: *mut u8, chunks: usize) {
        let Some(mm) = masks(1) else { return };
        let m = [
            load3(&mm.split[0]),
            load3(&mm.split[1]),
            load3(&mm.split[2]),
        ];
        let zero = _mm_setzero_si128();
        // x / 3 == (x · 0xAAAB) >> 17 for every x < 2^17 (sums are <= 765).
        let third = _mm_set1_epi16(0xAAABu16 as i16);
        for i in 0..chunks {
            // SAFETY: i < chunks, so the 48 bytes at src + 48i lie in the caller's 48·chunks
            // readable bytes; unaligned loads.
            let v = unsafe {
                let s = src.add(48 * i);
                [
                    _mm_loadu_si128(s.cast()),
                    _mm_loadu_si128(s.add(16).cast()),
                    _mm_loadu_si128(s.add(32).cast()),
                ]
            };
            let (r, g, b) = (pick(&v, &m[0]), pick(&v, &m[1]), pick(&v, &m[2]));
            let half = |lo: bool| {
                let w = |x| {
                    if lo {
                        _mm_unpacklo_epi8(x, zero)
                    } else {
                        _mm_unpackhi_epi8(x, zero)
                    }
                };
                let sum = _mm_add_epi16(_mm_add_epi16(w(r), w(g)), w(b));
                _mm_srli_epi16(_mm_mulhi_epu16(sum, third), 1)
            };
            let q = _mm_packus_epi16(half(true), half(false));
            // SAFETY: i < chunks, so the 16 bytes at dst + 16i lie in the caller's 16·chunks
            // writable bytes; unaligned store.
            unsafe { _mm_storeu_si128(dst.add(16 * i).cast(), q) };
        }
    }

    /// # Safety
    /// SSSE3 available; `src` readable for 48·chunks bytes (8 pixels of u16 each), `dst`
    /// writable for 16·chunks bytes.
    #[target_feature(enable = "ssse3")]
    pub(super) unsafe fn mean3_u16(src: *const u16, dst: *mut u16, chunks: usize) {
        let Some(mm) = masks(2) else { return };
        let m = [
            load3(&mm.split[0]),
            load3(&mm.split[1]),
            load3(&mm.split[2]),
        ];
        let zero = _mm_setzero_si128();
        let third = _mm_set1_ps(super::THIRD_UP);
        let bias = _mm_set1_epi32(0x8000);
        let flip = _mm_set1_epi16(0x8000u16 as i16);
        for i in 0..chunks {
            // SAFETY: i < chunks, so the 48 bytes (24 u16) at src + 24i lie in the caller's
            // 48·chunks readable bytes; unaligned loads.
            let v = unsafe {
                let s = src.add(24 * i).cast::<u8>();
                [
                    _mm_loadu_si128(s.cast()),
                    _mm_loadu_si128(s.add(16).cast()),
                    _mm_loadu_si128(s.add(32).cast()),
                ]
            };
            let (r, g, b) = (pick(&v, &m[0]), pick(&v, &m[1]), pick(&v, &m[2]));
            let half = |lo: bool| {
                let w = |x| {
                    if lo {
                        _mm_unpacklo_epi16(x, zero)
                    } else {
                        _mm_unpackhi_epi16(x, zero)
                    }
                };
                let sum = _mm_add_epi32(_mm_add_epi32(w(r), w(g)), w(b));
                let q = _mm_cvttps_epi32(_mm_mul_ps(_mm_cvtepi32_ps(sum), third));
                // To i16 range for the signed saturating pack, back below.
                _mm_sub_epi32(q, bias)
            };
            let q = _mm_xor_si128(_mm_packs_epi32(half(true), half(false)), flip);
            // SAFETY: i < chunks, so the 16 bytes (8 u16) at dst + 8i lie in the caller's
            // 16·chunks writable bytes; unaligned store.
            unsafe { _mm_storeu_si128(dst.add(8 * i).cast(), q) };
        }
    }

    /// The 16-byte masks in both halves.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn load3_wide(m: &[[u8; 16]; 3]) -> [__m256i; 3] {
        // SAFETY: each row is a `[u8; 16]`, 16 readable bytes (unaligned load); AVX2 is
        // enabled on this function.
        m.map(|r| unsafe { _mm256_broadcastsi128_si256(_mm_loadu_si128(r.as_ptr().cast())) })
    }

    /// Register k of two consecutive 48-byte chunks at `s`: chunk 0 low, chunk 1 high.
    ///
    /// # Safety
    /// AVX2 available; `k < 3`; `s` readable for 96 bytes.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn load_pair(s: *const u8, k: usize) -> __m256i {
        // SAFETY: k < 3 at every call, so bytes 16k..16k + 16 and 48 + 16k..64 + 16k lie in
        // the caller's 96 readable bytes at s; unaligned loads.
        let (lo, hi) = unsafe {
            (
                _mm_loadu_si128(s.add(16 * k).cast()),
                _mm_loadu_si128(s.add(48 + 16 * k).cast()),
            )
        };
        _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1)
    }

    /// `pick` on both halves (registers only: safe to call from AVX2 code).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn pick_wide(v: &[__m256i; 3], m: &[__m256i; 3]) -> __m256i {
        let a = _mm256_shuffle_epi8(v[0], m[0]);
        let b = _mm256_shuffle_epi8(v[1], m[1]);
        let c = _mm256_shuffle_epi8(v[2], m[2]);
        _mm256_or_si256(_mm256_or_si256(a, b), c)
    }

    /// Stores registers k = 0..3 of two 48-byte chunks (chunk 0 in the low halves) as the
    /// 96 bytes at `d`, in three whole 32-byte stores.
    ///
    /// # Safety
    /// AVX2 available; `d` writable for 96 bytes.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn store_pair(d: *mut u8, o: [__m256i; 3]) {
        let a = _mm256_permute2x128_si256(o[0], o[1], 0x20); // chunk 0: regs 0, 1
        let b = _mm256_permute2x128_si256(o[2], o[0], 0x30); // chunk 0 reg 2, chunk 1 reg 0
        let c = _mm256_permute2x128_si256(o[1], o[2], 0x31); // chunk 1: regs 1, 2
                                                             // SAFETY: bytes 0..32, 32..64 and 64..96 at d lie in the caller's 96 writable bytes;
                                                             // unaligned stores.
        unsafe {
            _mm256_storeu_si256(d.cast(), a);
            _mm256_storeu_si256(d.add(32).cast(), b);
            _mm256_storeu_si256(d.add(64).cast(), c);
        }
    }

    /// Three colour registers (32 bytes each) of the 96 bytes at `s`.
    ///
    /// # Safety
    /// AVX2 available; `s` readable for 96 bytes.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn split_pair(s: *const u8, m: &[[__m256i; 3]; 3]) -> [__m256i; 3] {
        // SAFETY: AVX2 is enabled here too; k = 0, 1, 2 < 3 and s is readable for 96 bytes
        // (the caller's contract), which is load_pair's contract.
        let v = unsafe { [load_pair(s, 0), load_pair(s, 1), load_pair(s, 2)] };
        [
            pick_wide(&v, &m[0]),
            pick_wide(&v, &m[1]),
            pick_wide(&v, &m[2]),
        ]
    }

    /// # Safety
    /// AVX2 available; `src` readable for 96·chunks bytes, each `dst` writable for
    /// 32·chunks bytes.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn split_avx2(
        src: *const u8,
        dst: [*mut u8; 3],
        chunks: usize,
        masks: &[[[u8; 16]; 3]; 3],
    ) {
        let m = [
            load3_wide(&masks[0]),
            load3_wide(&masks[1]),
            load3_wide(&masks[2]),
        ];
        for i in 0..chunks {
            // SAFETY: AVX2 is enabled here too; i < chunks, so the 96 bytes read at src + 96i
            // lie in the caller's 96·chunks readable bytes and the 32 bytes written at each
            // dst + 32i in that plane's 32·chunks writable bytes; unaligned loads/stores.
            unsafe {
                let c = split_pair(src.add(96 * i), &m);
                for (d, v) in dst.iter().zip(c) {
                    _mm256_storeu_si256(d.add(32 * i).cast(), v);
                }
            }
        }
    }

    /// # Safety
    /// AVX2 available; each `src` readable for 32·chunks bytes, `dst` writable for
    /// 96·chunks bytes.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn join_avx2(
        src: [*const u8; 3],
        dst: *mut u8,
        chunks: usize,
        masks: &[[[u8; 16]; 3]; 3],
    ) {
        let m = [
            load3_wide(&masks[0]),
            load3_wide(&masks[1]),
            load3_wide(&masks[2]),
        ];
        for i in 0..chunks {
            // Low halves: 16 bytes of each colour for chunk 0; high halves: chunk 1.
            // SAFETY: i < chunks, so the 32 bytes at each src + 32i lie in that plane's
            // 32·chunks readable bytes; unaligned loads.
            let v = src.map(|p| unsafe { _mm256_loadu_si256(p.add(32 * i).cast()) });
            let o = [
                pick_wide(&v, &m[0]),
                pick_wide(&v, &m[1]),
                pick_wide(&v, &m[2]),
            ];
            // SAFETY: AVX2 is enabled here too; i < chunks, so the 96 bytes at dst + 96i lie
            // in the caller's 96·chunks writable bytes.
            unsafe { store_pair(dst.add(96 * i), o) };
        }
    }

    /// # Safety
    /// AVX2 available; `src` readable for 32·chunks bytes, `dst` writable for 96·chunks.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn triple_avx2(
        src: *const u8,
        dst: *mut u8,
        chunks: usize,
        masks: &[[u8; 16]; 3],
    ) {
        let m = load3_wide(masks);
        for i in 0..chunks {
            // SAFETY: i < chunks, so the 32 bytes at src + 32i lie in the caller's 32·chunks
            // readable bytes; unaligned load.
            let v = unsafe { _mm256_loadu_si256(src.add(32 * i).cast()) };
            let o = [
                _mm256_shuffle_epi8(v, m[0]),
                _mm256_shuffle_epi8(v, m[1]),
                _mm256_shuffle_epi8(v, m[2]),
            ];
            // SAFETY: AVX2 is enabled here too; i < chunks, so the 96 bytes at dst + 96i lie
            // in the caller's 96·chunks writable bytes.
            unsafe { store_pair(dst.add(96 * i), o) };
        }
    }

    /// # Safety
    /// AVX2 available; `src` readable for 96·chunks bytes, `dst` writable for 32·chunks.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn mean3_u8_avx2(src: *const u8, dst: *mut u8, chunks: usize) {
        let Some(mm) = masks(1) else { return };
        let m = [
            load3_wide(&mm.split[0]),
            load3_wide(&mm.split[1]),
            load3_wide(&mm.split[2]),
        ];
        let zero = _mm256_setzero_si256();
        let third = _mm256_set1_epi16(0xAAABu16 as i16);
        for i in 0..chunks {
            // SAFETY: AVX2 is enabled here too; i < chunks, so the 96 bytes at src + 96i lie in
            // the caller's 96·chunks readable bytes.
            let [r, g, b] = unsafe { split_pair(src.add(96 * i), &m) };
            // Unpack and pack both work per 128-bit half, so the pixel order survives.
            let lo = _mm256_add_epi16(
                _mm256_add_epi16(_mm256_unpacklo_epi8(r, zero), _mm256_unpacklo_epi8(g, zero)),
                _mm256_unpacklo_epi8(b, zero),
            );
            let hi = _mm256_add_epi16(
                _mm256_add_epi16(_mm256_unpackhi_epi8(r, zero), _mm256_unpackhi_epi8(g, zero)),
                _mm256_unpackhi_epi8(b, zero),
            );
            let ql = _mm256_srli_epi16(_mm256_mulhi_epu16(lo, third), 1);
            let qh = _mm256_srli_epi16(_mm256_mulhi_epu16(hi, third), 1);
            let q = _mm256_packus_epi16(ql, qh);
            // SAFETY: i < chunks, so the 32 bytes at dst + 32i lie in the caller's 32·chunks
            // writable bytes; unaligned store.
            unsafe { _mm256_storeu_si256(dst.add(32 * i).cast(), q) };
        }
    }

    /// # Safety
    /// AVX2 available; `src` readable for 96·chunks bytes (16 u16 pixels each), `dst`
    /// writable for 32·chunks bytes.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn mean3_u16_avx2(src: *const u16, dst: *mut u16, chunks: usize) {
        let Some(mm) = masks(2) else { return };
        let m = [
            load3_wide(&mm.split[0]),
            load3_wide(&mm.split[1]),
            load3_wide(&mm.split[2]),
        ];
        let zero = _mm256_setzero_si256();
        let third = _mm256_set1_ps(super::THIRD_UP);
        let bias = _mm256_set1_epi32(0x8000);
        let flip = _mm256_set1_epi16(0x8000u16 as i16);
        for i in 0..chunks {
            // SAFETY: AVX2 is enabled here too; i < chunks, so the 96 bytes (48 u16) at
            // src + 48i lie in the caller's 96·chunks readable bytes.
            let [r, g, b] = unsafe { split_pair(src.add(48 * i).cast(), &m) };
            let quot = |x: __m256i| {
                let q = _mm256_cvttps_epi32(_mm256_mul_ps(_mm256_cvtepi32_ps(x), third));
                _mm256_sub_epi32(q, bias)
            };
            let lo = _mm256_add_epi32(
                _mm256_add_epi32(
                    _mm256_unpacklo_epi16(r, zero),
                    _mm256_unpacklo_epi16(g, zero),
                ),
                _mm256_unpacklo_epi16(b, zero),
            );
            let hi = _mm256_add_epi32(
                _mm256_add_epi32(
                    _mm256_unpackhi_epi16(r, zero),
                    _mm256_unpackhi_epi16(g, zero),
                ),
                _mm256_unpackhi_epi16(b, zero),
            );
            let q = _mm256_xor_si256(_mm256_packs_epi32(quot(lo), quot(hi)), flip);
            // SAFETY: i < chunks, so the 32 bytes (16 u16) at dst + 16i lie in the caller's
            // 32·chunks writable bytes; unaligned store.
            unsafe { _mm256_storeu_si256(dst.add(16 * i).cast(), q) };
        }
    }
}

/// 1/3 as f32 (0x3EAAAAAB) lies above 1/3, so for sums below 2^18 `trunc(sum · THIRD_UP)` is
/// `sum / 3`: the product never falls below an exact quotient and stays far below the next
/// integer (a test checks every u16 sum).
#[cfg(target_arch = "x86_64")]
const THIRD_UP: f32 = 1.0 / 3.0;
