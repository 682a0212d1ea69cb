//! Transform kernels: one affine remap, row copies when rows stay rows, a cache-blocked
//! SIMD transpose (`super::swap`) when they become columns.

use ndflow_core::Pixel;
use ndflow_runtime::PluginError;

use super::swap::{transpose_plane, Geo, Isa};

/// One of the eight transforms of a `w`×`h` image, as: does output X come from input Y
/// (`swap`), and is the input axis behind output X / Y walked backwards (`flip_x`, `flip_y`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Map {
    pub swap: bool,
    pub flip_x: bool,
    pub flip_y: bool,
    /// Input image size.
    pub w: usize,
    pub h: usize,
}

impl Map {
    /// `kind` is the Type menu index; unknown values act as None.
    pub fn new(kind: i64, w: usize, h: usize) -> Map {
        let (swap, flip_x, flip_y) = match kind {
            1 => (true, true, false),  // Rot90: out(x', y') = in(y', h-1-x')
            2 => (false, true, true),  // Rot180
            3 => (true, false, true),  // Rot270: out(x', y') = in(w-1-y', x')
            4 => (false, true, false), // Mirror (left-right)
            5 => (true, false, false), // Rot90Mirror (transpose)
            6 => (false, false, true), // Rot180Mirror (up-down)
            7 => (true, true, true),   // Rot270Mirror (anti-transpose)
            _ => (false, false, false),
        };
        Map {
            swap,
            flip_x,
            flip_y,
            w,
            h,
        }
    }

    pub fn is_identity(&self) -> bool {
        !(self.swap || self.flip_x || self.flip_y)
    }

    /// Output image size.
    pub fn out_size(&self) -> (usize, usize) {
        if self.swap {
            (self.h, self.w)
        } else {
            (self.w, self.h)
        }
    }

    /// The input pixel (x, y) that output pixel (x', y') shows.
    pub fn source(&self, xo: usize, yo: usize) -> (usize, usize) {
        let (a, b) = if self.swap { (yo, xo) } else { (xo, yo) };
        let flip_a = if self.swap { self.flip_y } else { self.flip_x };
        let flip_b = if self.swap { self.flip_x } else { self.flip_y };
        let x = if flip_a { self.w - 1 - a } else { a };
        let y = if flip_b { self.h - 1 - b } else { b };
        (x, y)
    }

    /// (base, step per output x, step per output y) in elements of an input plane whose
    /// rows are `row` elements apart.
    fn affine(&self, row: isize) -> (isize, isize, isize) {
        let (w, h) = (self.w as isize, self.h as isize);
        let along_x = |flip: bool, len: isize| if flip { (len - 1, -1) } else { (0, 1) };
        let along_y = |flip: bool, len: isize| {
            if flip {
                ((len - 1) * row, -row)
            } else {
                (0, row)
            }
        };
        if self.swap {
            let (bx, sy) = along_x(self.flip_y, w);
            let (by, sx) = along_y(self.flip_x, h);
            (bx + by, sx, sy)
        } else {
            let (bx, sx) = along_x(self.flip_x, w);
            let (by, sy) = along_y(self.flip_y, h);
            (bx + by, sx, sy)
        }
    }
}

/// One colour plane: where it starts and how far apart its rows are, in input and output.
#[derive(Debug, Clone, Copy)]
struct Plane {
    in_off: usize,
    in_row: usize,
    out_off: usize,
    out_row: usize,
}

/// How the colour of a pixel is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Colour {
    Mono,
    /// `[3, X, Y]`: the three values of a pixel are adjacent.
    Rgb1,
    /// `[X, 3, Y]`: one row of each colour in turn.
    Rgb2,
    /// `[X, Y, 3]`: three whole planes.
    Rgb3,
}

/// Transforms a whole `w`×`h` frame (`src` may be longer than the image).
pub(crate) fn transform_frame<T: Pixel>(
    src: &[T],
    dst: &mut [T],
    map: &Map,
    colour: Colour,
) -> Result<(), PluginError> {
    transform_frame_with(src, dst, map, colour, Isa::detect())
}

/// `transform_frame` with the transposing micro-kernels of `isa` (tests compare them).
pub(crate) fn transform_frame_with<T: Pixel>(
    src: &[T],
    dst: &mut [T],
    map: &Map,
    colour: Colour,
    isa: Isa,
) -> Result<(), PluginError> {
    let (w, h) = (map.w, map.h);
    let per_pixel = if colour == Colour::Mono { 1 } else { 3 };
    let n = w * h * per_pixel;
    if src.len() < n || dst.len() != n {
        return Err(PluginError::Other(format!(
            "Transform: {} input / {} output elements for a {w}x{h}x{per_pixel} image",
            src.len(),
            dst.len(),
        )));
    }
    let (wo, ho) = map.out_size();
    let whole = Plane {
        in_off: 0,
        in_row: w,
        out_off: 0,
        out_row: wo,
    };
    match colour {
        Colour::Mono => remap(&src[..n], dst, map, whole, isa),
        Colour::Rgb1 => {
            // A pixel's three values move together: treat them as one element.
            let s: &[[T; 3]] = bytemuck::cast_slice(&src[..n]);
            remap(s, bytemuck::cast_slice_mut(dst), map, whole, isa);
        }
        Colour::Rgb2 => (0..3).for_each(|c| {
            let p = Plane {
                in_off: c * w,
                in_row: 3 * w,
                out_off: c * wo,
                out_row: 3 * wo,
            };
            remap(&src[..n], dst, map, p, isa)
        }),
        Colour::Rgb3 => (0..3).for_each(|c| {
            let p = Plane {
                in_off: c * w * h,
                in_row: w,
                out_off: c * wo * ho,
                out_row: wo,
            };
            remap(&src[..n], dst, map, p, isa)
        }),
    }
    Ok(())
}

fn remap<E: bytemuck::Pod>(src: &[E], dst: &mut [E], map: &Map, p: Plane, isa: Isa) {
    let (wo, ho) = map.out_size();
    let (base, sx, sy) = map.affine(p.in_row as isize);
    let base = base + p.in_off as isize;
    if !map.swap {
        // Rows stay rows: a copy or a reversed copy per row.
        for yo in 0..ho {
            let start = (base + yo as isize * sy) as usize;
            let out = &mut dst[p.out_off + yo * p.out_row..][..wo];
            if sx > 0 {
                out.copy_from_slice(&src[start..start + wo]);
            } else {
                let row = &src[start + 1 - wo..=start];
                for (d, s) in out.iter_mut().zip(row.iter().rev()) {
                    *d = *s;
                }
            }
        }
        return;
    }
    let g = Geo {
        base,
        sx,
        sy,
        out_off: p.out_off,
        out_row: p.out_row,
        wo,
        ho,
    };
    transpose_plane(src, dst, g, isa);
}
