//! Pixel kernels of NDPluginStats.
//!
//! [`scan`] is the one pass over the frame, row by row. Each row goes through a few simple
//! loops over narrow types (see `pixel.rs`), which the compiler vectorises at full width,
//! while the row is in L1: min/max; Σv and Σv²; and for the centroid the thresholded
//! value `t` into column sums `C`, their running sum `F` and the row sum. Every centroid
//! moment to 4th order is a moment of a marginal, so it follows from row and column sums;
//! the one joint moment, Σx·y·t, is Σ_x x·D[x] with D[x] = Σ_y y·t. D needs no multiply per
//! pixel: over a group of rows ending at `y_end`, Σ y·t = y_end·C − F.

use ndflow_core::Pixel;

use super::pixel::{f64_threshold_sum, Acc, StatsPixel, Widen};

/// Raw moments of the thresholded image, as areaDetector's doComputeCentroid names them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Moments {
    pub m00: f64,
    pub m10: f64,
    pub m01: f64,
    pub m20: f64,
    pub m02: f64,
    pub m11: f64,
    pub m30: f64,
    pub m03: f64,
    pub m40: f64,
    pub m04: f64,
}

/// Centroid results; all zero when nothing passed the threshold (M00 ≤ 0).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Centroid {
    pub total: f64,
    pub x: f64,
    pub y: f64,
    pub sigma_x: f64,
    pub sigma_y: f64,
    pub sigma_xy: f64,
    pub skew_x: f64,
    pub skew_y: f64,
    pub kurtosis_x: f64,
    pub kurtosis_y: f64,
    pub eccentricity: f64,
    pub orientation: f64,
}

impl Moments {
    /// The thresholded sum `rst` of row `y` into the moments of y alone (M01 … M04).
    #[inline(always)]
    pub(crate) fn add_row(&mut self, yf: f64, rst: f64) {
        let y2 = yf * yf;
        self.m01 += rst * yf;
        self.m02 += rst * y2;
        self.m03 += rst * y2 * yf;
        self.m04 += rst * y2 * y2;
    }

    /// The total `c` of column `x` into the moments of x alone (M00, M10 … M40).
    #[inline(always)]
    pub(crate) fn add_column(&mut self, xf: f64, c: f64) {
        let x2 = xf * xf;
        self.m00 += c;
        self.m10 += c * xf;
        self.m20 += c * x2;
        self.m30 += c * x2 * xf;
        self.m40 += c * x2 * x2;
    }

    /// areaDetector's formulas (PR #235), including which results stay 0 when a variance
    /// or the second-moment sum is 0.
    pub(crate) fn centroid(&self) -> Centroid {
        let m = self;
        let mut c = Centroid::default();
        if m.m00 <= 0.0 || m.m00.is_nan() {
            return c;
        }
        let (m00, m10, m01) = (m.m00, m.m10, m.m01);
        let mu20 = m.m20 - m10 * m10 / m00;
        let mu02 = m.m02 - m01 * m01 / m00;
        let mu11 = m.m11 - m10 * m01 / m00;
        let mu30 = m.m30 - 3.0 * m10 * m.m20 / m00 + 2.0 * m10 * m10 * m10 / (m00 * m00);
        let mu03 = m.m03 - 3.0 * m01 * m.m02 / m00 + 2.0 * m01 * m01 * m01 / (m00 * m00);
        let mu40 = m.m40 - 4.0 * m.m30 * m10 / m00 + 6.0 * m.m20 * m10 * m10 / (m00 * m00)
            - 3.0 * m10 * m10 * m10 * m10 / (m00 * m00 * m00);
        let mu04 = m.m04 - 4.0 * m.m03 * m01 / m00 + 6.0 * m.m02 * m01 * m01 / (m00 * m00)
            - 3.0 * m01 * m01 * m01 * m01 / (m00 * m00 * m00);
        let var_x = mu20 / m00;
        let var_y = mu02 / m00;
        let var_xy = mu11 / m00;
        c.total = m00;
        c.x = m10 / m00;
        c.y = m01 / m00;
        c.sigma_x = var_x.sqrt();
        c.sigma_y = var_y.sqrt();
        if c.sigma_x != 0.0 && c.sigma_y != 0.0 {
            c.sigma_xy = var_xy / (c.sigma_x * c.sigma_y);
        }
        if var_x != 0.0 {
            c.skew_x = mu30 / (m00 * var_x.powf(1.5));
            c.kurtosis_x = mu40 / (m00 * var_x * var_x) - 3.0;
        }
        if var_y != 0.0 {
            c.skew_y = mu03 / (m00 * var_y.powf(1.5));
            c.kurtosis_y = mu04 / (m00 * var_y * var_y) - 3.0;
        }
        c.orientation = (0.5 * (2.0 * var_xy).atan2(var_x - var_y)).to_degrees();
        if mu20 + mu02 != 0.0 {
            c.eccentricity = ((mu20 - mu02) * (mu20 - mu02) - 4.0 * mu11 * mu11)
                / ((mu20 + mu02) * (mu20 + mu02));
        }
        c
    }
}

/// What one pass found. Positions are linear element indices.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ScanOut {
    pub min: f64,
    pub max: f64,
    pub min_idx: usize,
    pub max_idx: usize,
    pub sum: f64,
    pub sum_sq: f64,
    pub moments: Moments,
}

/// Average and thresholded-average profiles, filled by [`scan`] when profiles are wanted
/// (X profiles zeroed by the caller).
pub(crate) struct ProfileSums<'a> {
    pub avg_x: &'a mut [f64],
    pub avg_y: &'a mut [f64],
    pub thr_x: &'a mut [f64],
    pub thr_y: &'a mut [f64],
}

/// The column accumulators of one scan (`nx` each), carved out of reusable storage.
pub(crate) struct Columns<'a, T: StatsPixel> {
    c: &'a mut [T::C],
    f: &'a mut [T::C],
    /// Column sums of the values (profiles only).
    v: &'a mut [T::C],
    total: &'a mut [T::W],
    d: &'a mut [T::W],
}

impl<'a, T: StatsPixel> Columns<'a, T> {
    /// Zeroed accumulators for `nx` columns over `store` (grown as needed).
    pub(crate) fn new(store: &'a mut Vec<u64>, nx: usize) -> Option<Self> {
        let words = |bytes: usize| bytes.div_ceil(8);
        let wc = words(nx * std::mem::size_of::<T::C>());
        let ww = words(nx * std::mem::size_of::<T::W>());
        let need = 3 * wc + 2 * ww;
        if store.len() < need {
            store.resize(need, 0);
        }
        let region = &mut store[..need];
        region.fill(0);
        let (c, rest) = region.split_at_mut(wc);
        let (f, rest) = rest.split_at_mut(wc);
        let (v, rest) = rest.split_at_mut(wc);
        let (total, d) = rest.split_at_mut(ww);
        Some(Columns {
            c: cast(c, nx)?,
            f: cast(f, nx)?,
            v: cast(v, nx)?,
            total: cast(total, nx)?,
            d: cast(d, nx)?,
        })
    }

    /// End of a group of rows ending at `y_end` (relative to its super-block): C and F into
    /// the totals and D; the value sums into the X average profile.
    fn flush_group(&mut self, y_end: usize, avg_x: Option<&mut [f64]>) {
        let ye = T::W::of_usize(y_end);
        let zero = T::C::default();
        let cf = self.c.iter_mut().zip(self.f.iter_mut());
        for ((c, f), (t, d)) in cf.zip(self.total.iter_mut().zip(self.d.iter_mut())) {
            let cw = c.w();
            *t += cw;
            *d += ye * cw - f.w();
            *c = zero;
            *f = zero;
        }
        if let Some(avg) = avg_x {
            for (a, v) in avg.iter_mut().zip(self.v.iter_mut()) {
                *a += v.f();
                *v = zero;
            }
        }
    }

    /// End of a super-block starting at row `y0`: its totals into the x moments and M11.
    fn flush_super(&mut self, y0: usize, m: &mut Moments, thr_x: Option<&mut [f64]>) {
        let y0 = y0 as f64;
        let zero = T::W::default();
        for (x, (t, d)) in self.total.iter().zip(self.d.iter()).enumerate() {
            let (c, xf) = (t.f(), x as f64);
            m.add_column(xf, c);
            m.m11 += (y0 * c + d.f()) * xf;
        }
        if let Some(p) = thr_x {
            for (a, t) in p.iter_mut().zip(self.total.iter()) {
                *a += t.f();
            }
        }
        self.total.fill(zero);
        self.d.fill(zero);
    }
}

impl Columns<'_, u8> {
    /// The column sums and their totals, for the UInt8 pass of `fast_u8.rs` (which keeps
    /// no F or D: it takes the joint moment from rows).
    pub(crate) fn u8_parts(&mut self) -> (&mut [u16], &mut [u32]) {
        (&mut *self.c, &mut *self.total)
    }
}

fn cast<A: bytemuck::Pod>(words: &mut [u64], n: usize) -> Option<&mut [A]> {
    bytemuck::try_cast_slice_mut(words).ok()?.get_mut(..n)
}

/// The thresholded value of a row into the column sums; returns the row's Σt.
#[inline(always)]
fn threshold_row<T: StatsPixel, const P: bool>(
    px: &[T],
    cols: &mut Columns<'_, T>,
    thr: T::Thr,
) -> f64 {
    if T::ROW_SUM_APART {
        let zero = T::C::default();
        let cf = cols.c.iter_mut().zip(cols.f.iter_mut());
        if P {
            for ((&v, (c, f)), w) in px.iter().zip(cf).zip(cols.v.iter_mut()) {
                *c += if v.passes(thr) { v.c() } else { zero };
                *f += *c;
                *w += v.c();
            }
        } else {
            for (&v, (c, f)) in px.iter().zip(cf) {
                *c += if v.passes(thr) { v.c() } else { zero };
                *f += *c;
            }
        }
        return f64_threshold_sum(px, thr);
    }
    let n = T::ROW_CHUNK;
    let zero = T::C::default();
    let mut total = 0.0;
    let cf = cols.c.chunks_mut(n).zip(cols.f.chunks_mut(n));
    if P {
        for ((p, (c, f)), w) in px.chunks(n).zip(cf).zip(cols.v.chunks_mut(n)) {
            let mut st = zero;
            for ((&v, (c, f)), w) in p.iter().zip(c.iter_mut().zip(f.iter_mut())).zip(w) {
                let t = if v.passes(thr) { v.c() } else { zero };
                *c += t;
                *f += *c;
                *w += v.c();
                st += t;
            }
            total += st.f();
        }
    } else {
        for (p, (c, f)) in px.chunks(n).zip(cf) {
            let mut st = zero;
            for (&v, (c, f)) in p.iter().zip(c.iter_mut().zip(f.iter_mut())) {
                let t = if v.passes(thr) { v.c() } else { zero };
                *c += t;
                *f += *c;
                st += t;
            }
            total += st.f();
        }
    }
    total
}

/// Index of the first `m` in `px` (which holds it): a vectorised test per chunk, then a
/// search inside the one chunk that has it.
fn first_eq<T: Pixel>(px: &[T], m: T) -> usize {
    const N: usize = 64;
    for (k, c) in px.chunks(N).enumerate() {
        if c.iter().fold(false, |any, &v| any | (v == m)) {
            return k * N + c.iter().position(|&v| v == m).unwrap_or(0);
        }
    }
    0
}

/// The pass over `data` as rows of `nx` pixels (a partial last row is ignored).
///
/// `C`: also the centroid sums, in `cols` (`Some`). `P`: also the profile sums into
/// `prof` (`Some`); requires `C`.
///
/// Compiled twice, like the Process kernel: for the baseline target and, chosen at run time,
/// for AVX2 (twice the integer lanes of SSE2 in every per-row loop).
pub(crate) fn scan<T: StatsPixel, const C: bool, const P: bool>(
    data: &[T],
    nx: usize,
    thr: T::Thr,
    mut cols: Option<Columns<'_, T>>,
    prof: Option<ProfileSums<'_>>,
) -> ScanOut {
    if !P {
        let fast = match (C, cols.as_mut()) {
            (true, Some(c)) => T::fast_scan(data, nx, thr, Some(c)),
            (true, None) => None,
            (false, _) => T::fast_scan(data, nx, thr, None),
        };
        if let Some(out) = fast {
            return out;
        }
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: scan_avx2 only requires AVX2, which the CPU was just seen to have.
        return unsafe { scan_avx2::<T, C, P>(data, nx, thr, cols, prof) };
    }
    scan_generic::<T, C, P>(data, nx, thr, cols, prof)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn scan_avx2<T: StatsPixel, const C: bool, const P: bool>(
    data: &[T],
    nx: usize,
    thr: T::Thr,
    cols: Option<Columns<'_, T>>,
    prof: Option<ProfileSums<'_>>,
) -> ScanOut {
    scan_generic::<T, C, P>(data, nx, thr, cols, prof)
}

/// The portable pass (also the reference the SIMD ones are tested against).
#[inline(always)]
pub(crate) fn scan_generic<T: StatsPixel, const C: bool, const P: bool>(
    data: &[T],
    nx: usize,
    thr: T::Thr,
    mut cols: Option<Columns<'_, T>>,
    mut prof: Option<ProfileSums<'_>>,
) -> ScanOut {
    let mut out = ScanOut::default();
    if nx == 0 {
        return out;
    }
    let (mut gmin, mut gmax) = (T::HI, T::LO);
    let ny = data.len() / nx;
    let nxf = nx as f64;
    let (mut group_start, mut super_start) = (0usize, 0usize);
    for (y, row) in data.chunks_exact(nx).enumerate() {
        let (mn, mx) = T::min_max(row);
        if mn < gmin {
            gmin = mn;
            out.min_idx = y * nx + first_eq(row, mn);
        }
        if mx > gmax {
            gmax = mx;
            out.max_idx = y * nx + first_eq(row, mx);
        }
        let (s, q) = T::sum_sq(row);
        out.sum += s;
        out.sum_sq += q;
        let (true, Some(cols)) = (C, cols.as_mut()) else {
            continue;
        };
        let rst = threshold_row::<T, P>(row, cols, thr);
        let m = &mut out.moments;
        m.add_row(y as f64, rst);
        if let Some(p) = prof.as_mut() {
            if let (Some(a), Some(t)) = (p.avg_y.get_mut(y), p.thr_y.get_mut(y)) {
                *a = s / nxf;
                *t = rst / nxf;
            }
        }
        let next = y + 1;
        if next - group_start == T::GROUP || next == ny {
            cols.flush_group(next - super_start, prof.as_mut().map(|p| &mut *p.avg_x));
            group_start = next;
            if next - super_start == T::SUPER || next == ny {
                cols.flush_super(super_start, m, prof.as_mut().map(|p| &mut *p.thr_x));
                super_start = next;
            }
        }
    }
    if let (true, Some(p)) = (P, prof.as_mut()) {
        // Divided, not multiplied by the inverse: exactly areaDetector's values.
        let nyf = ny.max(1) as f64;
        p.avg_x
            .iter_mut()
            .chain(p.thr_x.iter_mut())
            .for_each(|v| *v /= nyf);
    }
    out.min = gmin.to_f64();
    out.max = gmax.to_f64();
    if out.min > out.max {
        // Only NaN pixels: nothing compared.
        out.min = f64::NAN;
        out.max = f64::NAN;
    }
    out
}

/// Mean of the border of width `width` (areaDetector's N-D definition): for every dim, the
/// first and the last `width` slabs across the whole array; pixels in two slabs (corners)
/// count twice.
pub(crate) fn border_mean<T: Pixel>(data: &[T], sizes: &[usize], width: usize) -> f64 {
    let (mut counts, mut pixels) = (0.0f64, 0usize);
    for d in 0..sizes.len() {
        let inner: usize = sizes[..d].iter().product();
        let n = sizes[d];
        let outer: usize = sizes[d + 1..].iter().product();
        let w1 = width.min(n);
        let off2 = n.saturating_sub(width);
        let w2 = width.min(n - off2);
        for (start, w) in [(0, w1), (off2, w2)] {
            for o in 0..outer {
                let base = o * n * inner;
                if let Some(slab) = data.get(base + start * inner..base + (start + w) * inner) {
                    counts += slab.iter().map(|v| v.to_f64()).sum::<f64>();
                }
            }
            pixels += w * inner * outer;
        }
    }
    counts / pixels.max(1) as f64
}

/// Histogram counts below/above the range, as [`histogram`] returns them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct HistOut {
    pub below: u64,
    pub above: u64,
}

/// areaDetector's binning: `bin = (int)((v − min)·(size − 1)/(max − min) + 0.5)`, below when
/// `bin < 0 || v < min`, above when `bin > size − 1 || v > max`. `counts` (len = size ≥ 1)
/// must be zeroed; `max ≤ min` is taken as `min + 1`.
pub(crate) fn histogram<T: Pixel>(data: &[T], min: f64, max: f64, counts: &mut [u64]) -> HistOut {
    let size = counts.len();
    let max = if max > min { max } else { min + 1.0 };
    let scale = size.saturating_sub(1) as f64 / (max - min);
    let mut out = HistOut::default();
    let mut put = |v: f64, n: u64| {
        let e = (v - min) * scale + 0.5;
        // NaN goes below, as areaDetector's (int)NaN does on x86; huge values go above
        // (the C int conversion would wrap them to "below").
        if e.is_nan() {
            out.below += n;
            return;
        }
        let bin = e as i64;
        if bin < 0 || v < min {
            out.below += n;
        } else if bin > size as i64 - 1 || v > max {
            out.above += n;
        } else if let Some(c) = counts.get_mut(bin as usize) {
            *c += n;
        }
    };
    if std::mem::size_of::<T>() == 1 {
        // 8-bit: count the 256 raw values first, then bin each value once.
        let mut raw = [[0u64; 256]; 4];
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let mut quads = bytes.chunks_exact(4);
        for q in &mut quads {
            raw[0][q[0] as usize] += 1;
            raw[1][q[1] as usize] += 1;
            raw[2][q[2] as usize] += 1;
            raw[3][q[3] as usize] += 1;
        }
        for &b in quads.remainder() {
            raw[0][b as usize] += 1;
        }
        for b in 0..=255u8 {
            let n: u64 = raw.iter().map(|r| r[b as usize]).sum();
            if n > 0 {
                if let Ok(v) = bytemuck::try_cast::<u8, T>(b) {
                    put(v.to_f64(), n);
                }
            }
        }
    } else {
        for &v in data {
            put(v.to_f64(), 1);
        }
    }
    out
}

/// areaDetector's "entropy": −Σ c·ln c / N over the bins (empty bins count as c = 1).
pub(crate) fn entropy(counts: &[u64], n_elements: usize) -> f64 {
    let s: f64 = counts
        .iter()
        .filter(|&&c| c > 1)
        .map(|&c| {
            let c = c as f64;
            c * c.ln()
        })
        .sum();
    -s / n_elements.max(1) as f64
}
