//! Transform kernels: one affine remap, row copies when rows stay rows, tiles when they
//! become columns (so both the reads and the writes stay in cache).

use ndflow_core::Pixel;
use ndflow_runtime::PluginError;

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
        Colour::Mono => remap(&src[..n], dst, map, whole),
        Colour::Rgb1 => {
            // A pixel's three values move together: treat them as one element.
            let s: &[[T; 3]] = bytemuck::cast_slice(&src[..n]);
            remap(s, bytemuck::cast_slice_mut(dst), map, whole);
        }
        Colour::Rgb2 => (0..3).for_each(|c| {
            let p = Plane {
                in_off: c * w,
                in_row: 3 * w,
                out_off: c * wo,
                out_row: 3 * wo,
            };
            remap(&src[..n], dst, map, p)
        }),
        Colour::Rgb3 => (0..3).for_each(|c| {
            let p = Plane {
                in_off: c * w * h,
                in_row: w,
                out_off: c * wo * ho,
                out_row: wo,
            };
            remap(&src[..n], dst, map, p)
        }),
    }
    Ok(())
}

fn remap<E: Copy>(src: &[E], dst: &mut [E], map: &Map, p: Plane) {
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
    remap_swapped(src, dst, base, (sx, sy), p, (wo, ho));
}

/// Rows become columns. Whole 8×8 blocks: eight contiguous input runs (one per output
/// column) are loaded, then written as eight output row pieces, bands of 8 output rows at a
/// time (the input lines of a band are reused by the next band from L2). Fixed sizes let
/// the compiler drop the bounds checks and use shuffles. The ragged right/bottom edges go
/// element by element.
fn remap_swapped<E: Copy>(
    src: &[E],
    dst: &mut [E],
    base: isize,
    (sx, sy): (isize, isize),
    p: Plane,
    (wo, ho): (usize, usize),
) {
    const B: usize = 8;
    let at = |xo: usize, yo: usize| (base + xo as isize * sx + yo as isize * sy) as usize;
    let (wb, hb) = (wo - wo % B, ho - ho % B);
    for ty in (0..hb).step_by(B) {
        for tx in (0..wb).step_by(B) {
            // blk[i][j] = output (tx + i, ty + j): input run along sy.
            let blk: [[E; B]; B] = std::array::from_fn(|i| {
                let s = at(tx + i, ty);
                if sy > 0 {
                    let run = &src[s..s + B];
                    std::array::from_fn(|j| run[j])
                } else {
                    let run = &src[s + 1 - B..=s];
                    std::array::from_fn(|j| run[B - 1 - j])
                }
            });
            for j in 0..B {
                let row: [E; B] = std::array::from_fn(|i| blk[i][j]);
                dst[p.out_off + (ty + j) * p.out_row + tx..][..B].copy_from_slice(&row);
            }
        }
    }
    // Right edge (all rows), then bottom edge (the block columns).
    for yo in 0..ho {
        for xo in wb..wo {
            dst[p.out_off + yo * p.out_row + xo] = src[at(xo, yo)];
        }
    }
    for yo in hb..ho {
        for xo in 0..wb {
            dst[p.out_off + yo * p.out_row + xo] = src[at(xo, yo)];
        }
    }
}
