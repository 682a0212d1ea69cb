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

/// Elements summed per accumulator flush: 32768 keeps it below overflow (u16 into u32:
/// 65535 × 32768 < 2^32; i16 into i32: 32768 × 32768 = 2^30).
const BLOCK: usize = 32768;

/// Integer types up to 32 bits: plain min/max/add reductions into the narrowest accumulator
/// that cannot overflow within a block, which the compiler vectorises; exact totals in i64.
macro_rules! int_row {
    ($($t:ty => $acc:ty),*) => {$(
        impl RoiPixel for $t {
            #[inline(always)]
            fn row(seg: &[$t]) -> RowStats {
                let (mut lo, mut hi) = (<$t>::MAX, <$t>::MIN);
                let mut sum: i64 = 0;
                for block in seg.chunks(BLOCK) {
                    let mut s: $acc = 0;
                    for &v in block {
                        lo = lo.min(v);
                        hi = hi.max(v);
                        s += v as $acc;
                    }
                    sum += s as i64;
                }
                RowStats { min: lo as f64, max: hi as f64, sum: sum as f64 }
            }
        }
    )*};
}
int_row!(i8 => i32, u8 => u32, i16 => i32, u16 => u32, i32 => i64, u32 => u64);

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
/// background is the left and right strips only), in one pass over the rows. Runs the same
/// code compiled for AVX2 where the CPU has it (the row kernels then take 16-bit lanes
/// twice as wide, with native unsigned min/max).
pub fn scan<T: RoiPixel>(data: &[T], width: usize, one_d: bool, rects: &[Rect]) -> Vec<RoiStats> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: `scan_avx2` only requires AVX2, which the CPU was just checked to have.
        return unsafe { scan_avx2(data, width, one_d, rects) };
    }
    scan_portable(data, width, one_d, rects)
}

/// [`scan_portable`] compiled with AVX2 enabled.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn scan_avx2<T: RoiPixel>(
    data: &[T],
    width: usize,
    one_d: bool,
    rects: &[Rect],
) -> Vec<RoiStats> {
    scan_portable(data, width, one_d, rects)
}

/// [`scan`] for any CPU (baseline instructions).
#[inline(always)]
pub fn scan_portable<T: RoiPixel>(
    data: &[T],
    width: usize,
    one_d: bool,
    rects: &[Rect],
) -> Vec<RoiStats> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// The dispatched scan (AVX2 where available) equals the portable one, bit for bit.
    fn same<T: RoiPixel>(seed: u64) {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let (w, h) = (333, 21);
        let lo = T::MIN_F64.max(-1e9);
        let hi = T::MAX_F64.min(1e9);
        let data: Vec<T> = (0..w * h)
            .map(|_| T::from_f64(rng.random_range(lo..=hi)))
            .collect();
        let rects: Vec<Rect> = (0..8)
            .map(|_| {
                let x0 = rng.random_range(0..w);
                let y0 = rng.random_range(0..h);
                Rect {
                    x0,
                    nx: rng.random_range(1..=w - x0),
                    y0,
                    ny: rng.random_range(1..=h - y0),
                    bgd: rng.random_range(0..4),
                }
            })
            .collect();
        for one_d in [false, true] {
            let rs: Vec<Rect> = if one_d {
                rects.iter().map(|r| Rect { y0: 0, ny: 1, ..*r }).collect()
            } else {
                rects.clone()
            };
            assert_eq!(
                scan(&data, w, one_d, &rs),
                scan_portable(&data, w, one_d, &rs)
            );
        }
    }

    #[test]
    fn dispatched_equals_portable() {
        same::<i8>(1);
        same::<u8>(2);
        same::<i16>(3);
        same::<u16>(4);
        same::<i32>(5);
        same::<u32>(6);
        same::<i64>(7);
        same::<u64>(8);
        same::<f32>(9);
        same::<f64>(10);
    }
}
