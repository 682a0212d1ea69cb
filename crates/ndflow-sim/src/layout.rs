//! Where pixel (x, y, colour) lives in a Mono/RGB1/RGB2/RGB3 buffer, and the readout:
//! region, binning (sums) and reversal applied to the raw image in one pass, as
//! NDArrayPool::convert does for simDetector.

use ndflow_core::ColorMode;

use crate::params::Region;
use crate::pixel::SimPixel;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    pub nx: usize,
    pub ny: usize,
    pub mode: ColorMode,
}

impl Layout {
    pub fn colors(&self) -> usize {
        if self.mode == ColorMode::Mono {
            1
        } else {
            3
        }
    }

    pub fn len(&self) -> usize {
        self.nx * self.ny * self.colors()
    }

    /// Element strides of (x, y, colour).
    pub fn strides(&self) -> (usize, usize, usize) {
        let (nx, ny) = (self.nx, self.ny);
        match self.mode {
            ColorMode::RGB1 => (3, 3 * nx, 1),
            ColorMode::RGB2 => (1, 3 * nx, nx),
            ColorMode::RGB3 => (1, nx, nx * ny),
            _ => (1, nx, 0),
        }
    }

    /// NDArray dims (fastest first) and which of them are x and y.
    pub fn dims(&self) -> (Vec<usize>, usize, usize) {
        let (nx, ny) = (self.nx, self.ny);
        match self.mode {
            ColorMode::RGB1 => (vec![3, nx, ny], 1, 2),
            ColorMode::RGB2 => (vec![nx, 3, ny], 0, 2),
            ColorMode::RGB3 => (vec![nx, ny, 3], 0, 1),
            _ => (vec![nx, ny], 0, 1),
        }
    }

    /// Calls `f(x, pixel)` for each pixel of row `y`, colour `c`.
    #[inline]
    pub fn for_row<T>(&self, buf: &mut [T], y: usize, c: usize, mut f: impl FnMut(usize, &mut T)) {
        let (xs, ys, cs) = self.strides();
        let start = y * ys + c * cs;
        if xs == 1 {
            if let Some(row) = buf.get_mut(start..start + self.nx) {
                for (x, v) in row.iter_mut().enumerate() {
                    f(x, v);
                }
            }
        } else if let Some(rest) = buf.get_mut(start..) {
            for (x, v) in rest.iter_mut().step_by(xs).take(self.nx).enumerate() {
                f(x, v);
            }
        }
    }

    /// `out[i] = base[i] + inc[colour of i]` (or `out[i] += base[i] + inc` with
    /// `accumulate`), walking each layout in its natural order.
    pub fn add_per_colour<T: SimPixel>(
        &self,
        out: &mut [T],
        base: &[T],
        inc: [T; 3],
        accumulate: bool,
    ) {
        let n = self.len().min(out.len()).min(base.len());
        let (out, base) = (&mut out[..n], &base[..n]);
        let uniform = self.mode == ColorMode::Mono || (inc[0] == inc[1] && inc[1] == inc[2]);
        if uniform {
            add_run(out, base, inc[0], accumulate);
            return;
        }
        match self.mode {
            ColorMode::RGB1 => {
                for (o, b) in out.chunks_exact_mut(3).zip(base.chunks_exact(3)) {
                    for c in 0..3 {
                        let v = b[c].wadd(inc[c]);
                        o[c] = if accumulate { o[c].wadd(v) } else { v };
                    }
                }
            }
            // Colour planes of `run` elements repeat R, G, B.
            _ => {
                let run = if self.mode == ColorMode::RGB2 {
                    self.nx
                } else {
                    self.nx * self.ny
                };
                if run == 0 {
                    return;
                }
                for (k, (o, b)) in out.chunks_mut(run).zip(base.chunks(run)).enumerate() {
                    add_run(o, b, inc[k % 3], accumulate);
                }
            }
        }
    }
}

#[inline]
fn add_run<T: SimPixel>(out: &mut [T], base: &[T], inc: T, accumulate: bool) {
    if accumulate {
        for (o, &b) in out.iter_mut().zip(base) {
            *o = o.wadd(b.wadd(inc));
        }
    } else {
        for (o, &b) in out.iter_mut().zip(base) {
            *o = b.wadd(inc);
        }
    }
}

/// Copies `src` rotated left by `start` into `out` (the background copied from a random
/// offset), or adds it when `accumulate`.
pub(crate) fn copy_rotated<T: SimPixel>(out: &mut [T], src: &[T], start: usize, accumulate: bool) {
    let n = out.len().min(src.len());
    let start = start.min(n);
    let (head, tail) = out[..n].split_at_mut(n - start);
    let (src_lo, src_hi) = src[..n].split_at(start);
    if accumulate {
        for (o, &s) in head
            .iter_mut()
            .zip(src_hi)
            .chain(tail.iter_mut().zip(src_lo))
        {
            *o = o.wadd(s);
        }
    } else {
        head.copy_from_slice(src_hi);
        tail.copy_from_slice(src_lo);
    }
}

/// Reads `region` of the raw image `raw` (layout `l`) into `out` (layout of the output
/// size, same colour mode): binned pixels are summed in the pixel type (integers wrap),
/// reversed axes are flipped after binning.
///
/// Works row by row on slices: a raw row is a run of pixels `w` elements wide (3 for
/// interleaved RGB1, else 1 per colour plane), summed `bin` at a time into the output row.
pub(crate) fn convert_region<T: SimPixel>(raw: &[T], l: Layout, r: &Region, out: &mut [T]) {
    let (ox_n, oy_n) = (r.out_size(0), r.out_size(1));
    let lo = Layout {
        nx: ox_n,
        ny: oy_n,
        mode: l.mode,
    };
    let (_, ys, cs) = l.strides();
    let (_, oys, ocs) = lo.strides();
    let [bin_x, bin_y] = r.bin;
    // RGB1 rows hold all three colours, interleaved; other layouts one plane per colour.
    let (w, planes) = if l.mode == ColorMode::RGB1 {
        (3, 1)
    } else {
        (1, l.colors())
    };
    let src_len = ox_n * bin_x * w;
    let out_len = ox_n * w;
    for oy in 0..oy_n {
        let by = if r.reverse[1] { oy_n - 1 - oy } else { oy };
        let sy = r.min[1] + by * bin_y;
        for c in 0..planes {
            let d = oy * oys + c * ocs;
            let Some(dst) = out.get_mut(d..d + out_len) else {
                continue;
            };
            for (k, y) in (sy..sy + bin_y).enumerate() {
                let s = y * ys + c * cs + r.min[0] * w;
                if let Some(src) = raw.get(s..s + src_len) {
                    bin_row(dst, src, w, bin_x, k > 0);
                }
            }
            if r.reverse[0] {
                dst.reverse();
                if w > 1 {
                    // Whole pixels move; their colour order stays.
                    dst.chunks_exact_mut(w).for_each(<[T]>::reverse);
                }
            }
        }
    }
}

/// `dst[i] (+)= sum of the bin pixels of src`, for pixels `w` elements wide.
#[inline]
fn bin_row<T: SimPixel>(dst: &mut [T], src: &[T], w: usize, bin: usize, accumulate: bool) {
    if bin == 1 {
        if accumulate {
            for (d, &s) in dst.iter_mut().zip(src) {
                *d = d.wadd(s);
            }
        } else if let Some(src) = src.get(..dst.len()) {
            dst.copy_from_slice(src);
        }
        return;
    }
    if w == 1 {
        // The usual small bins get fixed-size chunks, which the compiler unrolls.
        match bin {
            2 => bin_fixed::<T, 2>(dst, src, accumulate),
            3 => bin_fixed::<T, 3>(dst, src, accumulate),
            4 => bin_fixed::<T, 4>(dst, src, accumulate),
            _ => {
                for (d, s) in dst.iter_mut().zip(src.chunks_exact(bin)) {
                    let init = if accumulate { *d } else { T::default() };
                    *d = s.iter().fold(init, |a, &v| a.wadd(v));
                }
            }
        }
        return;
    }
    for (d, s) in dst.chunks_exact_mut(w).zip(src.chunks_exact(w * bin)) {
        for (c, dc) in d.iter_mut().enumerate() {
            let mut acc = if accumulate { *dc } else { T::default() };
            for v in s.iter().skip(c).step_by(w) {
                acc = acc.wadd(*v);
            }
            *dc = acc;
        }
    }
}

#[inline]
fn bin_fixed<T: SimPixel, const B: usize>(dst: &mut [T], src: &[T], accumulate: bool) {
    // A constant chunk length: the fold below is unrolled.
    let chunks = src.chunks_exact(B);
    if accumulate {
        for (d, s) in dst.iter_mut().zip(chunks) {
            *d = s.iter().fold(*d, |a, &v| a.wadd(v));
        }
    } else {
        for (d, s) in dst.iter_mut().zip(chunks) {
            *d = s.iter().fold(T::default(), |a, &v| a.wadd(v));
        }
    }
}
