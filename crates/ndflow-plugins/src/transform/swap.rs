//! The axis-swapping transforms (Rot90, Rot270, transpose, anti-transpose) as one
//! cache-blocked transpose.
//!
//! Output pixel (xo, yo) is input element `base + xo·sx + yo·sy` with `sx = ±input row` and
//! `sy = ±1`. A micro-kernel loads `R` input runs of `L` contiguous elements (one run per
//! output column, `ss` apart), transposes them in registers and stores `L` output row pieces
//! of `R` elements (`ds` apart). Both flips cost nothing: a negative `sx` is a negative
//! `ss` (input runs taken bottom-up), and a negative `sy` loads each run from its lowest
//! address and stores the rows bottom-up (a negative `ds`). Blocks are visited in tiles of
//! about 64×64 output elements so a tile's input runs and output rows stay in L1.
//!
//! The in-register transposes use only "unpack" shuffles: with `N` registers of `N` lanes,
//! each round sets `t[2i] = lo(r[i], r[i+N/2])`, `t[2i+1] = hi(r[i], r[i+N/2])`, which
//! rotates the bits of (register, lane) by one; after log2(N) rounds register j holds lane
//! j of every input run. 256-bit AVX2 unpacks work per 128-bit half, so an AVX2 register
//! holds two blocks side by side (`L` twice the SSE2 one) for the same shuffles.

/// Where one colour plane's pixels are: see the module comment. All in elements.
#[derive(Debug, Clone, Copy)]
pub(super) struct Geo {
    pub base: isize,
    pub sx: isize,
    pub sy: isize,
    pub out_off: usize,
    pub out_row: usize,
    pub wo: usize,
    pub ho: usize,
}

impl Geo {
    fn src_at(&self, xo: usize, yo: usize) -> isize {
        self.base + xo as isize * self.sx + yo as isize * self.sy
    }

    /// Every input and output index the plane uses lies in `src_len` / `dst_len`. The input
    /// index is affine in (xo, yo), so checking the four corners covers all pixels.
    fn fits(&self, src_len: usize, dst_len: usize) -> bool {
        if self.sy.abs() != 1 {
            return false; // the kernels load contiguous runs
        }
        if self.wo == 0 || self.ho == 0 {
            return true;
        }
        let (xm, ym) = (self.wo - 1, self.ho - 1);
        let corners = [(0, 0), (xm, 0), (0, ym), (xm, ym)];
        let src_ok = corners.iter().all(|&(x, y)| {
            let i = self.src_at(x, y);
            i >= 0 && (i as usize) < src_len
        });
        src_ok && self.out_off + ym * self.out_row + self.wo <= dst_len && self.wo <= self.out_row
    }
}

/// Which micro-kernels to use; tests force each one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Isa {
    /// Chosen by tests, and by `detect` off x86_64.
    #[cfg_attr(target_arch = "x86_64", allow(dead_code))]
    Scalar,
    #[cfg(target_arch = "x86_64")]
    Sse2,
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl Isa {
    /// The best this CPU has.
    pub(crate) fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx2") {
                return Isa::Avx2;
            }
            Isa::Sse2
        }
        #[cfg(not(target_arch = "x86_64"))]
        Isa::Scalar
    }

    /// Every kernel set this CPU can run (for tests).
    #[cfg(test)]
    pub(crate) fn all_here() -> Vec<Isa> {
        let mut v = vec![Isa::Scalar];
        #[cfg(target_arch = "x86_64")]
        {
            v.push(Isa::Sse2);
            if is_x86_feature_detected!("avx2") {
                v.push(Isa::Avx2);
            }
        }
        v
    }
}

/// Writes the plane `g` of `dst` from `src`. Elements of 1, 2 and 4 bytes use SIMD
/// kernels; others (8-byte types, RGB1 pixel triples) a scalar 8×8 kernel, still tiled.
pub(super) fn transpose_plane<E: bytemuck::Pod>(src: &[E], dst: &mut [E], g: Geo, isa: Isa) {
    if !g.fits(src.len(), dst.len()) {
        // Cannot happen for a Map's planes; the safe element loop keeps it sound anyway.
        return element_loop(src, dst, g, (0, 0));
    }
    #[cfg(target_arch = "x86_64")]
    if x86::dispatch(src, dst, g, isa) {
        return;
    }
    let _ = isa;
    // SAFETY: `g.fits` checked above that every index the tiles touch is inside the slices.
    unsafe {
        tiles::<E, 8, 8>(src.as_ptr(), dst.as_mut_ptr(), g, |s, ss, d, ds| {
            // SAFETY: `tiles` passes an 8×8 block inside the checked plane.
            scalar_block::<E, 8, 8>(s, ss, d, ds)
        })
    };
    element_loop(src, dst, g, (g.wo - g.wo % 8, g.ho - g.ho % 8));
}

/// Plain transpose of an `R`-run × `L`-lane block, element by element.
///
/// # Safety
/// `s + i·ss + l` for i < R, l < L must be readable, `d + l·ds + i` writable.
#[inline(always)]
unsafe fn scalar_block<E: Copy, const R: usize, const L: usize>(
    s: *const E,
    ss: isize,
    d: *mut E,
    ds: isize,
) {
    let blk: [[E; L]; R] = std::array::from_fn(|i| {
        // SAFETY: the caller's contract, run i.
        unsafe { s.offset(i as isize * ss).cast::<[E; L]>().read_unaligned() }
    });
    let rows: [[E; R]; L] = std::array::from_fn(|l| std::array::from_fn(|i| blk[i][l]));
    for (l, row) in rows.into_iter().enumerate() {
        // SAFETY: the caller's contract, output row l.
        unsafe {
            d.offset(l as isize * ds)
                .cast::<[E; R]>()
                .write_unaligned(row)
        };
    }
}

/// A tile is `ti` input runs (output columns) by `tl` lanes (output rows): `tl·size` is
/// one or two cache lines (`lane_bytes`) and `ti·size` four (`RUN_BYTES`). Image rows a
/// power of two apart (1024×1024 u16) fall in a few cache sets, so a line must be used up
/// in one visit: a tile reads whole input lines a few runs at a time, transposes them into
/// a local buffer, then writes whole output lines from it. Reading the input is what costs
/// (strided lines the prefetchers do not follow; the writes overlap with it), so 2- and
/// 4-byte elements read two lines per run. (Measured on 1024×1024 u16, same process, runs
/// interleaved: 128-byte lanes about 10–20 % faster than 64 for u16 and u32, no better for
/// u8 or the 8-byte scalar kernel; software prefetch of the next runs was slower.)
const RUN_BYTES: usize = 256;
const TILE_BUF: usize = 64 * RUN_BYTES;

/// Bytes of a run (one input row's piece) a tile reads, by element size.
const fn lane_bytes(size: usize) -> usize {
    if size == 2 || size == 4 {
        128
    } else {
        64
    }
}

/// The local tile buffer (aligned for any element).
#[repr(C, align(64))]
struct TileBuf([u8; TILE_BUF]);

/// Tile size (`ti`, `tl`) for `size`-byte elements and `R`×`L` blocks: multiples of `R`
/// and `L` within the buffer; None when not even one block fits.
const fn tile_size(size: usize, r: usize, l: usize) -> Option<(usize, usize)> {
    let ti = if RUN_BYTES / size > r {
        RUN_BYTES / size / r * r
    } else {
        r
    };
    let lanes = lane_bytes(size) / size;
    let tl = if lanes > l { lanes / l * l } else { l };
    if ti * tl * size > TILE_BUF {
        None
    } else {
        Some((ti, tl))
    }
}

/// Runs `kern` over every whole `R`×`L` block (`R` output columns, `L` output rows): whole
/// tiles through the local buffer, then the block-aligned parts of the right and bottom
/// strips directly. The ragged right and bottom edges are left to `element_loop`.
///
/// # Safety
/// `g.fits(len(src), len(dst))` must hold for the slices behind `src` and `dst`.
#[inline(always)]
unsafe fn tiles<E: Copy, const R: usize, const L: usize>(
    src: *const E,
    dst: *mut E,
    g: Geo,
    kern: impl Fn(*const E, isize, *mut E, isize),
) {
    let (wb, hb) = (g.wo - g.wo % R, g.ho - g.ho % L);
    let Some((ti, tl)) = tile_size(std::mem::size_of::<E>(), R, L) else {
        // SAFETY: `g.fits` (the caller's contract); columns 0..wb and rows 0..hb lie inside
        // the output image (wb <= wo, hb <= ho).
        return unsafe { blocks::<E, R, L>(src, dst, g, (0, wb), (0, hb), &kern) };
    };
    let (wt, ht) = (g.wo - g.wo % ti, g.ho - g.ho % tl);
    let mut buf = std::mem::MaybeUninit::<TileBuf>::uninit();
    let b = buf.as_mut_ptr().cast::<E>();
    // A run is read from its lowest address: lane l is output row ty0 + l (sy > 0) or
    // ty0 + tl − 1 − l (sy < 0); buffer row l (ti elements) holds lane l.
    let first = if g.sy > 0 { 0 } else { tl - 1 };
    for ty0 in (0..ht).step_by(tl) {
        for tx0 in (0..wt).step_by(ti) {
            for i0 in (0..ti).step_by(R) {
                // SAFETY: tx0 + i0 < wt <= wo and ty0 + first < ht <= ho, so this input
                // index is one of the plane's, which `g.fits` (the caller's contract) puts
                // inside `src`.
                let s = unsafe { src.offset(g.src_at(tx0 + i0, ty0 + first)) };
                for l0 in (0..tl).step_by(L) {
                    // SAFETY: runs tx0+i0.. of lanes l0..l0+L are inside the tile, whose
                    // input indices `g.fits` bounds; the block lies inside the ti×tl
                    // elements of the buffer (ti·tl·size <= TILE_BUF).
                    unsafe { kern(s.add(l0), g.sx, b.add(l0 * ti + i0), ti as isize) };
                }
            }
            // Output rows in ascending address order whatever the flip (buffer row l
            // holds output row ty0 + l, or ty0 + tl − 1 − l when sy < 0).
            for k in 0..tl {
                let (l, yo) = if g.sy > 0 {
                    (k, ty0 + k)
                } else {
                    (tl - 1 - k, ty0 + k)
                };
                // SAFETY: buffer row l was fully written above (ti, tl are multiples of R
                // and L); output row yo, columns tx0..tx0+ti, is inside the checked plane;
                // the local buffer and `dst` do not overlap.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        b.add(l * ti),
                        dst.add(g.out_off + yo * g.out_row + tx0),
                        ti,
                    )
                };
            }
        }
    }
    // SAFETY: `g.fits` (the caller's contract); the right strip (columns wt..wb, rows
    // 0..hb) and the bottom strip (columns 0..wt, rows ht..hb) lie inside the output image.
    unsafe {
        blocks::<E, R, L>(src, dst, g, (wt, wb), (0, hb), &kern);
        blocks::<E, R, L>(src, dst, g, (0, wt), (ht, hb), &kern);
    }
}

/// `kern` straight from input to output over the blocks of columns `xs` and rows `ys`
/// (multiples of `R` and `L` from their starts).
///
/// # Safety
/// As `tiles`; the ranges lie inside the output image.
#[inline(always)]
unsafe fn blocks<E, const R: usize, const L: usize>(
    src: *const E,
    dst: *mut E,
    g: Geo,
    xs: (usize, usize),
    ys: (usize, usize),
    kern: &impl Fn(*const E, isize, *mut E, isize),
) {
    // Lane 0 of a run is output row ty (sy > 0) or ty + L − 1 (sy < 0), written first.
    let first = if g.sy > 0 { 0 } else { L - 1 };
    let ds = if g.sy > 0 {
        g.out_row as isize
    } else {
        -(g.out_row as isize)
    };
    for ty in (ys.0..ys.1).step_by(L) {
        for tx in (xs.0..xs.1).step_by(R) {
            let s = g.src_at(tx, ty + first);
            let d = g.out_off + (ty + first) * g.out_row + tx;
            // SAFETY: (tx..tx+R, ty..ty+L) is inside the output image, whose input and
            // output indices `g.fits` bounds (the caller's contract).
            unsafe { kern(src.offset(s), g.sx, dst.add(d), ds) };
        }
    }
}

/// Element by element: the right edge `xo >= from.0` (all rows), then the bottom edge
/// `yo >= from.1` of the columns left of it. `from = (0, 0)` does the whole plane.
fn element_loop<E: Copy>(src: &[E], dst: &mut [E], g: Geo, from: (usize, usize)) {
    let mut put = |xo: usize, yo: usize| {
        dst[g.out_off + yo * g.out_row + xo] = src[g.src_at(xo, yo) as usize];
    };
    for yo in 0..g.ho {
        (from.0..g.wo).for_each(|xo| put(xo, yo));
    }
    for yo in from.1..g.ho {
        (0..from.0).for_each(|xo| put(xo, yo));
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! SSE2 (x86_64 baseline) and AVX2 (runtime detected) transposes of 1-, 2-, 4-byte
    //! elements. Each `*_sse2` / `*_avx2` entry runs `tiles` with its micro-kernel, then the
    //! scalar edges.
    use std::arch::x86_64::*;

    use super::{element_loop, tiles, Geo, Isa};

    /// Runs the SIMD kernel for `E`'s size if there is one (1, 2 or 4 bytes, and not
    /// `Isa::Scalar`); false if the caller must do the plane.
    pub(super) fn dispatch<E: bytemuck::Pod>(src: &[E], dst: &mut [E], g: Geo, isa: Isa) -> bool {
        use bytemuck::{try_cast_slice as cs, try_cast_slice_mut as cm};
        // Same bytes seen as plain unsigned lanes: a transpose only moves whole elements.
        match (std::mem::size_of::<E>(), isa) {
            (_, Isa::Scalar) => return false,
            (1, _) => match (cs(src), cm(dst)) {
                (Ok(s), Ok(d)) if isa == Isa::Avx2 => u8_avx2(s, d, g),
                (Ok(s), Ok(d)) => u8_sse2(s, d, g),
                _ => return false,
            },
            (2, _) => match (cs(src), cm(dst)) {
                (Ok(s), Ok(d)) if isa == Isa::Avx2 => u16_avx2(s, d, g),
                (Ok(s), Ok(d)) => u16_sse2(s, d, g),
                _ => return false,
            },
            (4, _) => match (cs(src), cm(dst)) {
                (Ok(s), Ok(d)) if isa == Isa::Avx2 => u32_avx2(s, d, g),
                (Ok(s), Ok(d)) => u32_sse2(s, d, g),
                _ => return false,
            },
            _ => return false,
        }
        true
    }

    /// Unpack rounds on `N` registers (see the module comment of `swap`).
    macro_rules! rounds {
        ($r:ident, $n:expr, $times:expr, $lo:ident, $hi:ident) => {
            for _ in 0..$times {
                let mut t = $r;
                for i in 0..$n / 2 {
                    t[2 * i] = $lo($r[i], $r[i + $n / 2]);
                    t[2 * i + 1] = $hi($r[i], $r[i + $n / 2]);
                }
                $r = t;
            }
        };
    }

    /// One SSE2 block: `N` runs of `N` lanes (`N`·size = 16 bytes), transposed by `K`
    /// rounds of the given unpacks.
    macro_rules! sse2_block {
        ($name:ident, $t:ty, $n:expr, $k:expr, $lo:ident, $hi:ident) => {
            /// # Safety
            /// Runs `s + i·ss` (i < N) of 16 bytes readable, rows `d + l·ds` of 16 bytes
            /// writable.
            #[inline(always)]
            unsafe fn $name(s: *const $t, ss: isize, d: *mut $t, ds: isize) {
                // SAFETY: the caller's contract for every run; unaligned loads.
                let mut r: [__m128i; $n] = std::array::from_fn(|i| unsafe {
                    _mm_loadu_si128(s.offset(i as isize * ss).cast())
                });
                // SAFETY: the unpacks need only SSE2, which every x86_64 CPU has (it is part of
                // the target's baseline features); they touch registers only.
                unsafe { rounds!(r, $n, $k, $lo, $hi) };
                for (l, v) in r.iter().enumerate() {
                    // SAFETY: the caller's contract for output row l.
                    unsafe { _mm_storeu_si128(d.offset(l as isize * ds).cast(), *v) };
                }
            }
        };
    }
    sse2_block!(
        block_u8_sse2,
        u8,
        16,
        4,
        _mm_unpacklo_epi8,
        _mm_unpackhi_epi8
    );
    sse2_block!(
        block_u16_sse2,
        u16,
        8,
        3,
        _mm_unpacklo_epi16,
        _mm_unpackhi_epi16
    );
    sse2_block!(
        block_u32_sse2,
        u32,
        4,
        2,
        _mm_unpacklo_epi32,
        _mm_unpackhi_epi32
    );

    /// One AVX2 pair of blocks: `N` runs of `2N` lanes; each 128-bit half transposes as the
    /// SSE2 block does, the low half giving output rows 0..N, the high half rows N..2N.
    macro_rules! avx2_block {
        ($name:ident, $t:ty, $n:expr, $k:expr, $lo:ident, $hi:ident) => {
            /// # Safety
            /// AVX2 available; runs `s + i·ss` (i < N) of 32 bytes readable, rows `d + l·ds`
            /// (l < 2N) of 16 bytes writable.
            #[inline]
            #[target_feature(enable = "avx2")]
            unsafe fn $name(s: *const $t, ss: isize, d: *mut $t, ds: isize) {
                let mut r = [_mm256_setzero_si256(); $n];
                for (i, v) in r.iter_mut().enumerate() {
                    // SAFETY: the caller's contract for run i.
                    *v = unsafe { _mm256_loadu_si256(s.offset(i as isize * ss).cast()) };
                }
                rounds!(r, $n, $k, $lo, $hi);
                for (l, v) in r.iter().enumerate() {
                    let (lo, hi) = (_mm256_castsi256_si128(*v), _mm256_extracti128_si256(*v, 1));
                    // SAFETY: the caller's contract for output rows l and N + l.
                    unsafe {
                        _mm_storeu_si128(d.offset(l as isize * ds).cast(), lo);
                        _mm_storeu_si128(d.offset((l + $n) as isize * ds).cast(), hi);
                    }
                }
            }
        };
    }
    avx2_block!(
        block_u8_avx2,
        u8,
        16,
        4,
        _mm256_unpacklo_epi8,
        _mm256_unpackhi_epi8
    );
    avx2_block!(
        block_u16_avx2,
        u16,
        8,
        3,
        _mm256_unpacklo_epi16,
        _mm256_unpackhi_epi16
    );
    avx2_block!(
        block_u32_avx2,
        u32,
        4,
        2,
        _mm256_unpacklo_epi32,
        _mm256_unpackhi_epi32
    );

    macro_rules! entry {
        ($sse:ident, $avx:ident, $t:ty, $n:expr, $bsse:ident, $bavx:ident) => {
            pub(super) fn $sse(src: &[$t], dst: &mut [$t], g: Geo) {
                // SAFETY: the caller (`transpose_plane`) checked `g.fits` for these slices;
                // `tiles` hands each block pointers inside them (N×N block).
                unsafe {
                    tiles::<$t, $n, $n>(src.as_ptr(), dst.as_mut_ptr(), g, |s, ss, d, ds| {
                        // SAFETY: `tiles` passes an N×N block inside the checked plane.
                        $bsse(s, ss, d, ds)
                    })
                };
                element_loop(src, dst, g, (g.wo - g.wo % $n, g.ho - g.ho % $n));
            }

            pub(super) fn $avx(src: &[$t], dst: &mut [$t], g: Geo) {
                /// # Safety
                /// AVX2 available; `g.fits` for the slices.
                #[target_feature(enable = "avx2")]
                unsafe fn run(src: &[$t], dst: &mut [$t], g: Geo) {
                    // SAFETY: as in the SSE2 entry, with N×2N blocks; AVX2 is enabled here
                    // (the only caller checked the CPU has it).
                    unsafe {
                        tiles::<$t, $n, { 2 * $n }>(
                            src.as_ptr(),
                            dst.as_mut_ptr(),
                            g,
                            // SAFETY: an N×2N block inside the checked plane; AVX2 is on.
                            |s, ss, d, ds| $bavx(s, ss, d, ds),
                        )
                    };
                }
                if !is_x86_feature_detected!("avx2") {
                    return $sse(src, dst, g);
                }
                // SAFETY: AVX2 is present (checked just above).
                unsafe { run(src, dst, g) };
                element_loop(src, dst, g, (g.wo - g.wo % $n, g.ho - g.ho % (2 * $n)));
            }
        };
    }
    entry!(u8_sse2, u8_avx2, u8, 16, block_u8_sse2, block_u8_avx2);
    entry!(u16_sse2, u16_avx2, u16, 8, block_u16_sse2, block_u16_avx2);
    entry!(u32_sse2, u32_avx2, u32, 4, block_u32_sse2, block_u32_avx2);
}
