//! How each pixel type accumulates: the narrowest exact integer types, so that the row loops
//! of `kernel.rs` vectorise at full width (16 lanes for 8-bit pixels on plain SSE2).
//!
//! Bounds, per type (t = thresholded value, C = column sum over a group of rows,
//! F = sum of C after each row of the group, D = Σ y·t over a super-block):
//! - u8/i8: row sums in 256-pixel chunks of u16/i16 (squares split into high and low bytes);
//!   C, F in u16/i16 over 16 rows (F ≤ 136·255); D, ΣC in u32/i32 over 4096 rows
//!   (D ≤ 4096²/2·255 < 2³²).
//! - u16/i16: row sums in 65536-pixel chunks of u32/i32 (squares split in 16-bit halves);
//!   C, F in u32/i32 over 256 rows (F ≤ 32896·65535 < 2³²); D in u64/i64.
//! - u32/i32: row sums in u64/i64 (squares split in 32-bit halves); C, F in u64/i64 over
//!   4096 rows; D in f64.
//! - u64/i64/f32/f64: f64 throughout.

use std::ops::{Add, AddAssign, Mul, Sub};

use ndflow_core::Pixel;

use super::kernel::{Columns, ScanOut};

/// An accumulator. Integer ones are exact within the bounds above (debug builds check).
pub(crate) trait Acc:
    bytemuck::Pod
    + Default
    + Send
    + Sync
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + AddAssign
    + 'static
{
    fn f(self) -> f64;
    /// A row count (always within range by the bounds above).
    fn of_usize(n: usize) -> Self;
}

macro_rules! impl_acc {
    ($($t:ty),*) => {$(
        impl Acc for $t {
            #[inline(always)]
            fn f(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn of_usize(n: usize) -> Self {
                n as $t
            }
        }
    )*};
}
impl_acc!(u16, i16, u32, i32, u64, i64, f64);

/// Column sums widen into super-block totals.
pub(crate) trait Widen<W> {
    fn w(self) -> W;
}

macro_rules! impl_widen {
    ($($c:ty => $w:ty),*) => {$(
        impl Widen<$w> for $c {
            #[inline(always)]
            fn w(self) -> $w {
                self as $w
            }
        }
    )*};
}
impl_widen!(u16 => u32, i16 => i32, u32 => u64, i32 => i64, u64 => f64, i64 => f64, f64 => f64);

/// Per-type accumulation plan; see the module docs for the bounds.
pub(crate) trait StatsPixel: Pixel {
    /// The threshold in the form that compares fastest with a pixel.
    type Thr: Copy;
    /// Column sums over a group of rows, and the thresholded row sum of a chunk.
    type C: Acc + Widen<Self::W>;
    /// Column totals over a super-block.
    type W: Acc;
    /// Rows per group (C and F flushed into W).
    const GROUP: usize;
    /// Rows per super-block (W flushed into f64 moments); a multiple of GROUP.
    const SUPER: usize;
    /// Pixels per chunk of a thresholded row sum in C.
    const ROW_CHUNK: usize;
    /// The row's Σt in a loop of its own with four accumulators: f64 sums cannot be
    /// vectorised, and one running f64 sum would serialise the column loop.
    const ROW_SUM_APART: bool = false;
    /// Start values of the min (largest value) and max (smallest value) searches.
    const HI: Self;
    const LO: Self;

    /// The threshold equivalent to areaDetector's `(double)v >= thr`, and whether no value
    /// at all can pass it (then the returned threshold is only a placeholder).
    fn threshold(thr: f64) -> (Self::Thr, bool);
    fn passes(self, thr: Self::Thr) -> bool;
    fn c(self) -> Self::C;
    /// Σv and Σv² of a row (exact for integers up to 32 bits).
    fn sum_sq(px: &[Self]) -> (f64, f64);
    /// A one-pass SIMD kernel for this type where there is one (None: use the generic
    /// pass). Without profiles; `cols` given: with the centroid.
    fn fast_scan(
        _data: &[Self],
        _nx: usize,
        _thr: Self::Thr,
        _cols: Option<&mut Columns<'_, Self>>,
    ) -> Option<ScanOut> {
        None
    }

    /// Min and max of a row; NaN never compares, so it is skipped.
    #[inline(always)]
    fn min_max(px: &[Self]) -> (Self, Self) {
        px.iter().fold((Self::HI, Self::LO), |(mn, mx), &v| {
            (if v < mn { v } else { mn }, if v > mx { v } else { mx })
        })
    }
}

/// Σv, Σv² in f64 with four independent accumulators (no loop-carried latency chain).
#[inline(always)]
fn f64_sums<T: Pixel>(px: &[T]) -> (f64, f64) {
    let (mut s, mut q) = ([0.0f64; 4], [0.0f64; 4]);
    let mut quads = px.chunks_exact(4);
    for c in &mut quads {
        for i in 0..4 {
            let v = c[i].to_f64();
            s[i] += v;
            q[i] += v * v;
        }
    }
    for &v in quads.remainder() {
        let v = v.to_f64();
        s[0] += v;
        q[0] += v * v;
    }
    (s.iter().sum(), q.iter().sum())
}

macro_rules! impl_int {
    (
        $t:ty, c: $c:ty, w: $w:ty, group: $group:expr, sup: $sup:expr, row_chunk: $rc:expr,
        sum: $s:ty, square: $sq:ty as $q:ty, half: $half:expr, sum_chunk: $chunk:expr
        $(, fast: $fast:path)?
    ) => {
        impl StatsPixel for $t {
            type Thr = $t;
            type C = $c;
            type W = $w;
            const GROUP: usize = $group;
            const SUPER: usize = $sup;
            const ROW_CHUNK: usize = $rc;
            const HI: $t = <$t>::MAX;
            const LO: $t = <$t>::MIN;

            fn threshold(thr: f64) -> ($t, bool) {
                // Up to 32 bits integers are exact in f64: v >= thr ⇔ v >= ceil(thr).
                let c = thr.ceil();
                if c.is_nan() || c > <$t>::MAX as f64 {
                    (<$t>::MAX, true)
                } else if c <= <$t>::MIN as f64 {
                    (<$t>::MIN, false)
                } else {
                    (c as $t, false)
                }
            }
            #[inline(always)]
            fn passes(self, thr: $t) -> bool {
                self >= thr
            }
            #[inline(always)]
            fn c(self) -> $c {
                self as $c
            }
            #[inline(always)]
            fn sum_sq(px: &[$t]) -> (f64, f64) {
                let (mut ts, mut tq) = (0.0, 0.0);
                for chunk in px.chunks($chunk) {
                    let (mut s, mut hi, mut lo): ($s, $q, $q) = (0, 0, 0);
                    for &v in chunk {
                        // The square fits $q; its halves are summed apart so they cannot overflow.
                        let q = ((v as $sq) * (v as $sq)) as $q;
                        s += v as $s;
                        hi += q >> $half;
                        lo += q & ((1 << $half) - 1);
                    }
                    ts += s as f64;
                    tq += hi as f64 * (1u64 << $half) as f64 + lo as f64;
                }
                (ts, tq)
            }
            $(
                fn fast_scan(
                    data: &[$t],
                    nx: usize,
                    thr: $t,
                    cols: Option<&mut Columns<'_, $t>>,
                ) -> Option<ScanOut> {
                    $fast(data, nx, thr, cols)
                }
            )?
        }
    };
}
impl_int!(u8, c: u16, w: u32, group: 16, sup: 4096, row_chunk: 256,
    sum: u16, square: u16 as u16, half: 8, sum_chunk: 256, fast: super::fast_u8::scan);
impl_int!(i8, c: i16, w: i32, group: 16, sup: 4096, row_chunk: 256,
    sum: i16, square: i16 as u16, half: 8, sum_chunk: 256);
impl_int!(u16, c: u32, w: u64, group: 256, sup: usize::MAX, row_chunk: 65536,
    sum: u32, square: u32 as u32, half: 16, sum_chunk: 65536);
impl_int!(i16, c: i32, w: i64, group: 256, sup: usize::MAX, row_chunk: 65536,
    sum: i32, square: i32 as u32, half: 16, sum_chunk: 65536);
impl_int!(u32, c: u64, w: f64, group: 4096, sup: usize::MAX, row_chunk: usize::MAX,
    sum: u64, square: u64 as u64, half: 32, sum_chunk: usize::MAX);
impl_int!(i32, c: i64, w: f64, group: 4096, sup: usize::MAX, row_chunk: usize::MAX,
    sum: i64, square: i64 as u64, half: 32, sum_chunk: usize::MAX);

/// Σt of a row with four independent accumulators.
#[inline(always)]
pub(crate) fn f64_threshold_sum<T: StatsPixel>(px: &[T], thr: T::Thr) -> f64 {
    let t = |v: T| if v.passes(thr) { v.to_f64() } else { 0.0 };
    let mut s = [0.0f64; 4];
    let mut quads = px.chunks_exact(4);
    for c in &mut quads {
        for i in 0..4 {
            s[i] += t(c[i]);
        }
    }
    s[0] += quads.remainder().iter().map(|&v| t(v)).sum::<f64>();
    s.iter().sum()
}

/// Float min/max: `f32::min` skips NaN like the comparisons do, and compiles to minps.
macro_rules! float_min_max {
    () => {
        #[inline(always)]
        fn min_max(px: &[Self]) -> (Self, Self) {
            let mn = px.iter().fold(Self::HI, |m, &v| m.min(v));
            let mx = px.iter().fold(Self::LO, |m, &v| m.max(v));
            (mn, mx)
        }
    };
}

macro_rules! impl_wide {
    ($t:ty, thr: $thr:ty, hi: $hi:expr, lo: $lo:expr, threshold: $th:expr $(, $extra:ident)?) => {
        impl StatsPixel for $t {
            type Thr = $thr;
            type C = f64;
            type W = f64;
            const GROUP: usize = usize::MAX;
            const SUPER: usize = usize::MAX;
            const ROW_CHUNK: usize = usize::MAX;
            const ROW_SUM_APART: bool = true;
            $($extra!();)?
            const HI: $t = $hi;
            const LO: $t = $lo;

            fn threshold(thr: f64) -> ($thr, bool) {
                let th: fn(f64) -> $thr = $th;
                (th(thr), thr.is_nan())
            }
            #[inline(always)]
            fn passes(self, thr: $thr) -> bool {
                (self as $thr) >= thr
            }
            #[inline(always)]
            fn c(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn sum_sq(px: &[$t]) -> (f64, f64) {
                f64_sums(px)
            }
        }
    };
}
// 64-bit integers round when converted, so they compare in f64 as areaDetector does.
impl_wide!(u64, thr: f64, hi: u64::MAX, lo: u64::MIN, threshold: |t| t);
impl_wide!(i64, thr: f64, hi: i64::MAX, lo: i64::MIN, threshold: |t| t);
impl_wide!(f64, thr: f64, hi: f64::INFINITY, lo: f64::NEG_INFINITY, threshold: |t| t,
    float_min_max);
impl_wide!(f32, thr: f32, hi: f32::INFINITY, lo: f32::NEG_INFINITY, threshold: f32_threshold,
    float_min_max);

/// The smallest f32 `t` with `(t as f64) >= thr`: then `v >= thr ⇔ v >= t` for every f32.
fn f32_threshold(thr: f64) -> f32 {
    let t = thr as f32;
    if (t as f64) >= thr || t.is_nan() {
        return t;
    }
    if t == 0.0 {
        f32::from_bits(1)
    } else if t > 0.0 {
        f32::from_bits(t.to_bits() + 1)
    } else {
        f32::from_bits(t.to_bits() - 1)
    }
}
