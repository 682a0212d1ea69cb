//! ROIStat's one pass: the frame's rows are visited once, top to bottom; each row is offered
//! to every ROI that covers it while it is in cache, and each ROI takes min, max and sum of
//! its segment (and of its background strips) with a per-type row kernel.

use ndflow_core::Pixel;

/// One ROI, already clamped to the frame.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rect {
    pub x0: usize,
    pub nx: usize,
    pub y0: usize,
    pub ny: usize,
    /// Background border width (0: Net = Total).
    pub bgd: usize,
}

/// One ROI's results.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RoiStats {
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    pub total: f64,
    pub net: f64,
}

/// Min, max and sum of one row segment.
#[derive(Debug, Clone, Copy)]
pub struct RowStats {
    pub min: f64,
    pub max: f64,
    pub sum: f64,
}

/// A pixel type with a fast row kernel.
pub trait RoiPixel: Pixel {
    /// Min, max and sum of a non-empty segment. Min/max as areaDetector's `<`/`>` scan.
    fn row(seg: &[Self]) -> RowStats;
    /// Sum of a segment (background strips).
    fn sum(seg: &[Self]) -> f64 {
        if seg.is_empty() {
            0.0
        } else {
            Self::row(seg).sum
        }
    }
}

const LANES: usize = 16;

/// Integer types up to 32 bits: exact i64 sums, lane-wise min/max (vectorises).
macro_rules! int_row {
    ($($t:ty),*) => {$(
        impl RoiPixel for $t {
            #[inline]
            fn row(seg: &[$t]) -> RowStats {
                let mut mn = [<$t>::MAX; LANES];
                let mut mx = [<$t>::MIN; LANES];
                let mut s = [0i64; LANES];
                let chunks = seg.chunks_exact(LANES);
                let rest = chunks.remainder();
                for c in chunks {
                    let lanes = mn.iter_mut().zip(mx.iter_mut()).zip(s.iter_mut());
                    for (((lo, hi), acc), &v) in lanes.zip(c) {
                        *lo = (*lo).min(v);
                        *hi = (*hi).max(v);
                        *acc += v as i64;
                    }
                }
                let (mut lo, mut hi) = (<$t>::MAX, <$t>::MIN);
                let mut sum: i64 = s.iter().sum();
                for (&a, &b) in mn.iter().zip(&mx) {
                    lo = lo.min(a);
                    hi = hi.max(b);
                }
                for &v in rest {
                    lo = lo.min(v);
                    hi = hi.max(v);
                    sum += v as i64;
                }
                RowStats { min: lo as f64, max: hi as f64, sum: sum as f64 }
            }
        }
    )*};
}
int_row!(i8, u8, i16, u16, i32, u32);

/// 64-bit integers and floats: values as f64, summed in f64 as areaDetector does.
macro_rules! wide_row {
    ($($t:ty),*) => {$(
        impl RoiPixel for $t {
            #[inline]
            fn row(seg: &[$t]) -> RowStats {
                let first = seg.first().map_or(0.0, |v| *v as f64);
                let (mut lo, mut hi, mut sum) = (first, first, 0.0);
                for &v in seg {
                    let v = v as f64;
                    if v < lo {
                        lo = v;
                    }
                    if v > hi {
                        hi = v;
                    }
                    sum += v;
                }
                RowStats { min: lo, max: hi, sum }
            }
        }
    )*};
}
wide_row!(i64, u64, f32, f64);

/// Running results of one ROI.
#[derive(Debug, Clone, Copy, Default)]
struct Acc {
    min: f64,
    max: f64,
    total: f64,
    bgd: f64,
    n_bgd: usize,
    seen: bool,
}

/// Statistics of every ROI in `rects` over a `width`-wide frame (`one_d`: a 1-D frame, whose
/// background is the left and right strips only), in one pass over the rows.
pub fn scan<T: RoiPixel>(data: &[T], width: usize, one_d: bool, rects: &[Rect]) -> Vec<RoiStats> {
    let mut acc = vec![Acc::default(); rects.len()];
    let y_lo = rects.iter().map(|r| r.y0).min().unwrap_or(0);
    let y_hi = rects.iter().map(|r| r.y0 + r.ny).max().unwrap_or(0);
    for y in y_lo..y_hi {
        let Some(row) = data.get(y * width..(y + 1) * width) else {
            break;
        };
        for (r, a) in rects.iter().zip(acc.iter_mut()) {
            if y < r.y0 || y >= r.y0 + r.ny {
                continue;
            }
            let Some(seg) = row.get(r.x0..r.x0 + r.nx) else {
                continue;
            };
            if seg.is_empty() {
                continue;
            }
            let s = T::row(seg);
            if !a.seen {
                (a.min, a.max, a.seen) = (s.min, s.max, true);
            }
            if s.min < a.min {
                a.min = s.min;
            }
            if s.max > a.max {
                a.max = s.max;
            }
            a.total += s.sum;
            if r.bgd == 0 {
                continue;
            }
            // areaDetector: the top and bottom bands are whole rows (a row in both counts
            // twice), the rows between contribute their left and right strips.
            let (bx, by) = (r.bgd.min(r.nx), r.bgd.min(r.ny));
            let rel = y - r.y0;
            let times = if one_d {
                0
            } else {
                usize::from(rel < by) + usize::from(rel >= r.ny - by)
            };
            if times > 0 {
                a.bgd += s.sum * times as f64;
                a.n_bgd += r.nx * times;
            } else {
                a.bgd += T::sum(&seg[..bx]) + T::sum(&seg[r.nx - bx..]);
                a.n_bgd += 2 * bx;
            }
        }
    }
    rects
        .iter()
        .zip(acc)
        .map(|(r, a)| {
            let n = if one_d { r.nx } else { r.nx * r.ny };
            let bgd = if a.n_bgd > 0 {
                a.bgd / a.n_bgd as f64 * n as f64
            } else {
                0.0
            };
            RoiStats {
                min: a.min,
                max: a.max,
                mean: if n > 0 { a.total / n as f64 } else { 0.0 },
                total: a.total,
                net: a.total - bgd,
            }
        })
        .collect()
}
