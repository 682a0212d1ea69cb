//! Colour conversion kernels. Rows are walked as slices: an interleaved (RGB1) row is
//! `chunks_exact(3)`, a planar (RGB2/RGB3) row is three slices. Splitting and joining
//! interleaved rows, and the 8/16-bit unsigned RGB1 mean, go through `super::simd`.

use ndflow_core::{BayerPattern, Pixel};
use num_traits::AsPrimitive;

use super::simd::{self, Isa};
use super::Strides;

/// ADCore's false-colour maps (colorMaps.h), for 8-bit Mono → RGB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FalseColor {
    None,
    Rainbow,
    Iron,
}

/// `va + (vb − va)·(i − a)/(b − a)`, rounded half up, in integers.
fn ramp(i: i32, a: i32, va: i32, b: i32, vb: i32) -> u8 {
    let num = 2 * (va * (b - a) + (vb - va) * (i - a)) + (b - a);
    (num / (2 * (b - a))).clamp(0, 255) as u8
}

/// Entry `i` of a map: ADCore's tables are piecewise linear with these knots (and entry 255
/// is white in both), so they are computed rather than stored.
pub fn false_colour(map: FalseColor, i: u8) -> [u8; 3] {
    let i = i32::from(i);
    if i == 255 {
        return [255; 3];
    }
    match map {
        FalseColor::None => [i as u8; 3],
        FalseColor::Rainbow => {
            let r = match i {
                ..=127 => 0,
                128..=191 => ramp(i, 127, 0, 191, 255),
                _ => 255,
            };
            let g = match i {
                ..=63 => 0,
                64..=127 => ramp(i, 63, 0, 127, 255),
                128..=191 => 255,
                _ => ramp(i, 191, 255, 255, 0),
            };
            let b = match i {
                ..=63 => ramp(i, 0, 0, 63, 255),
                64..=127 => 255,
                128..=191 => ramp(i, 127, 255, 191, 0),
                _ => 0,
            };
            [r, g, b]
        }
        FalseColor::Iron => {
            let r = if i <= 128 { 3 * i / 2 } else { 192 };
            let g = if i < 128 {
                i / 2
            } else {
                64 + 3 * (i - 128) / 2
            };
            let b = match i {
                ..=71 => 17 * i / 10,
                72..=128 => 192 - i,
                _ => 64,
            };
            [r as u8, g as u8, b as u8]
        }
    }
}

/// The map as pixels of type `T`: the bytes as ADCore copies them (Int8 reinterprets).
fn table<T: Pixel>(map: FalseColor) -> [[T; 3]; 256] {
    let signed = T::DATA_TYPE == ndflow_core::DataType::Int8;
    let px = |b: u8| {
        T::from_f64(if signed {
            f64::from(b as i8)
        } else {
            f64::from(b)
        })
    };
    std::array::from_fn(|i| false_colour(map, i as u8).map(px))
}

/// Calls `f(y, r, g, b)` with the three colour rows of each image row of a planar frame.
fn planar_rows_mut<T>(
    dst: &mut [T],
    w: usize,
    h: usize,
    s: Strides,
    mut f: impl FnMut(usize, &mut [T], &mut [T], &mut [T]),
) {
    if s.cs == w {
        for (y, row) in dst.chunks_exact_mut(3 * w).take(h).enumerate() {
            let (r, gb) = row.split_at_mut(w);
            let (g, b) = gb.split_at_mut(w);
            f(y, r, g, b);
        }
    } else {
        let (r, gb) = dst.split_at_mut(w * h);
        let (g, b) = gb.split_at_mut(w * h);
        let rows = r.chunks_exact_mut(w).zip(g.chunks_exact_mut(w));
        for (y, ((r, g), b)) in rows.zip(b.chunks_exact_mut(w)).enumerate() {
            f(y, r, g, b);
        }
    }
}

/// The three colour rows of image row `y` of a planar frame.
fn planar_row<T>(src: &[T], w: usize, y: usize, s: Strides) -> [&[T]; 3] {
    let at = |c: usize| &src[y * s.ys + c * s.cs..][..w];
    [at(0), at(1), at(2)]
}

pub(crate) fn mono_to_rgb<T: Pixel>(
    src: &[T],
    dst: &mut [T],
    w: usize,
    h: usize,
    o: Strides,
    fc: FalseColor,
    isa: Isa,
) {
    let lut = (fc != FalseColor::None).then(|| table::<T>(fc));
    let idx = |v: &T| AsPrimitive::<u8>::as_(*v) as usize;
    if o.cs == 1 {
        let rows = dst.chunks_exact_mut(3 * w).zip(src.chunks_exact(w));
        for (out, row) in rows.take(h) {
            let px = out.chunks_exact_mut(3).zip(row);
            match &lut {
                Some(t) => px.for_each(|(o, v)| o.copy_from_slice(&t[idx(v)])),
                None => simd::triple(row, out, isa),
            }
        }
        return;
    }
    planar_rows_mut(dst, w, h, o, |y, r, g, b| {
        let row = &src[y * w..][..w];
        match &lut {
            Some(t) => {
                for (((r, g), b), v) in r.iter_mut().zip(g.iter_mut()).zip(b.iter_mut()).zip(row) {
                    let [cr, cg, cb] = t[idx(v)];
                    (*r, *g, *b) = (cr, cg, cb);
                }
            }
            None => {
                r.copy_from_slice(row);
                g.copy_from_slice(row);
                b.copy_from_slice(row);
            }
        }
    });
}

#[inline(always)]
fn mean3<T: Pixel>(r: T, g: T, b: T) -> T {
    T::from_f64((r.to_f64() + g.to_f64() + b.to_f64()) / 3.0)
}

/// `mean3` for signed 8/16-bit integers, exactly: (r+g+b)/3.0 truncated is the integer
/// quotient (Rust's `/` truncates toward zero too).
macro_rules! mean3_int {
    ($name:ident, $t:ty, $wide:ty) => {
        fn $name(out: &mut [$t], row: &[$t]) {
            for (d, p) in out.iter_mut().zip(row.chunks_exact(3)) {
                *d = ((p[0] as $wide + p[1] as $wide + p[2] as $wide) / 3) as $t;
            }
        }
    };
}
mean3_int!(mean3_i8, i8, i16);
mean3_int!(mean3_i16, i16, i32);

/// The integer fast path of one interleaved row, if `T` has one.
fn mean3_row_int<T: Pixel>(out: &mut [T], row: &[T], isa: Isa) -> bool {
    use ndflow_core::DataType as D;
    match T::DATA_TYPE {
        D::UInt8 => simd::mean3_u8(
            bytemuck::cast_slice_mut(out),
            bytemuck::cast_slice(row),
            isa,
        ),
        D::Int8 => mean3_i8(bytemuck::cast_slice_mut(out), bytemuck::cast_slice(row)),
        D::UInt16 => simd::mean3_u16(
            bytemuck::cast_slice_mut(out),
            bytemuck::cast_slice(row),
            isa,
        ),
        D::Int16 => mean3_i16(bytemuck::cast_slice_mut(out), bytemuck::cast_slice(row)),
        _ => return false,
    }
    true
}

pub(crate) fn rgb_to_mono<T: Pixel>(
    src: &[T],
    dst: &mut [T],
    w: usize,
    h: usize,
    i: Strides,
    isa: Isa,
) {
    for (y, out) in dst.chunks_exact_mut(w).take(h).enumerate() {
        if i.cs == 1 {
            let row = &src[y * 3 * w..][..3 * w];
            if !mean3_row_int(out, row, isa) {
                for (m, p) in out.iter_mut().zip(row.chunks_exact(3)) {
                    *m = mean3(p[0], p[1], p[2]);
                }
            }
        } else {
            let [r, g, b] = planar_row(src, w, y, i);
            for (((m, r), g), b) in out.iter_mut().zip(r).zip(g).zip(b) {
                *m = mean3(*r, *g, *b);
            }
        }
    }
}

pub(crate) fn rgb_to_rgb<T: Pixel>(
    src: &[T],
    dst: &mut [T],
    w: usize,
    h: usize,
    i: Strides,
    o: Strides,
    isa: Isa,
) {
    if o.cs == 1 {
        // Planar → interleaved.
        for (y, out) in dst.chunks_exact_mut(3 * w).take(h).enumerate() {
            let [r, g, b] = planar_row(src, w, y, i);
            simd::join3(r, g, b, out, isa);
        }
        return;
    }
    planar_rows_mut(dst, w, h, o, |y, ro, go, bo| {
        if i.cs == 1 {
            simd::split3(&src[y * 3 * w..][..3 * w], ro, go, bo, isa);
        } else {
            let [r, g, b] = planar_row(src, w, y, i);
            ro.copy_from_slice(r);
            go.copy_from_slice(g);
            bo.copy_from_slice(b);
        }
    });
}

/// ADCore's Bayer interpolation. `origin` = the dims' offsets (the mosaic is fixed to the
/// sensor); `o` = output RGB strides, None for Mono.
pub(crate) fn bayer<T: Pixel>(
    src: &[T],
    dst: &mut [T],
    w: usize,
    h: usize,
    pattern: BayerPattern,
    origin: (usize, usize),
    o: Option<Strides>,
) {
    let int = !T::DATA_TYPE.is_float();
    // Integer types divide as ADCore's unsigned ints do (truncating).
    let div = |sum: f64, n: f64| if int { (sum / n).trunc() } else { sum / n };
    let p = pattern as usize;
    let at = |x: usize, y: usize| src[x + y * w].to_f64();
    for y in 0..h {
        let by = y + origin.1 + (p & 1);
        for x in 0..w {
            let bx = x + origin.0 + ((p >> 1) & 1);
            let v = at(x, y);
            let mut rgb = [0.0; 3];
            let own = match (bx % 2, by % 2) {
                (0, 0) => 0,
                (1, 1) => 2,
                _ => 1,
            };
            rgb[own] = v;
            if x > 0 && x + 1 < w && y > 0 && y + 1 < h {
                let diag =
                    at(x - 1, y - 1) + at(x + 1, y - 1) + at(x - 1, y + 1) + at(x + 1, y + 1);
                let edge = at(x, y - 1) + at(x - 1, y) + at(x + 1, y) + at(x, y + 1);
                let horiz = at(x - 1, y) + at(x + 1, y);
                let vert = at(x, y - 1) + at(x, y + 1);
                match own {
                    0 => (rgb[2], rgb[1]) = (div(diag, 4.0), div(edge, 4.0)),
                    2 => (rgb[0], rgb[1]) = (div(diag, 4.0), div(edge, 4.0)),
                    // Green on a red row: red left/right, blue above/below.
                    _ if bx % 2 == 1 => (rgb[0], rgb[2]) = (div(horiz, 2.0), div(vert, 2.0)),
                    _ => (rgb[2], rgb[0]) = (div(horiz, 2.0), div(vert, 2.0)),
                }
            }
            match o {
                None => dst[x + y * w] = T::from_f64(div(rgb[0] + rgb[1] + rgb[2], 3.0)),
                Some(s) => {
                    for (c, v) in rgb.iter().enumerate() {
                        dst[x * s.xs + y * s.ys + c * s.cs] = T::from_f64(*v);
                    }
                }
            }
        }
    }
}
