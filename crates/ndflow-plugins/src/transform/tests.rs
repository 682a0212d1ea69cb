//! Every transposing kernel set (scalar, SSE2, AVX2 where the CPU has them) against the
//! plain index mapping, for every data type, transform type and colour layout, on odd and
//! non-square sizes (ragged tiles and edges).

use ndflow_core::{with_pixel_type, DataType, Pixel};

use super::kernel::{transform_frame_with, Colour, Map};
use super::swap::Isa;

/// Deterministic bytes reinterpreted as `T` (bit patterns, NaNs included: compared as bytes).
fn noise<T: Pixel>(n: usize, seed: u64) -> Vec<T> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v = vec![T::default(); n];
    for b in bytemuck::cast_slice_mut::<T, u8>(&mut v) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = (x >> 24) as u8;
    }
    v
}

/// Element index of colour `c` of pixel (x, y) in a `w`×`h` image of layout `colour`.
fn element(colour: Colour, x: usize, y: usize, c: usize, w: usize, h: usize) -> usize {
    match colour {
        Colour::Mono => x + y * w,
        Colour::Rgb1 => c + 3 * (x + y * w),
        Colour::Rgb2 => x + c * w + 3 * w * y,
        Colour::Rgb3 => x + y * w + c * w * h,
    }
}

fn reference<T: Pixel>(src: &[T], map: &Map, colour: Colour) -> Vec<T> {
    let (wo, ho) = map.out_size();
    let colours = if colour == Colour::Mono { 1 } else { 3 };
    let mut out = vec![T::default(); src.len()];
    for yo in 0..ho {
        for xo in 0..wo {
            let (x, y) = map.source(xo, yo);
            for c in 0..colours {
                out[element(colour, xo, yo, c, wo, ho)] =
                    src[element(colour, x, y, c, map.w, map.h)];
            }
        }
    }
    out
}

fn check<T: Pixel>(w: usize, h: usize, colours: &[Colour]) {
    for &colour in colours {
        let per = if colour == Colour::Mono { 1 } else { 3 };
        let src = noise::<T>(w * h * per, (w * 31 + h) as u64);
        for kind in 0..8 {
            let map = Map::new(kind, w, h);
            let want = reference(&src, &map, colour);
            for isa in Isa::all_here() {
                let mut got = vec![T::default(); src.len()];
                transform_frame_with(&src, &mut got, &map, colour, isa).unwrap();
                let same =
                    bytemuck::cast_slice::<T, u8>(&got) == bytemuck::cast_slice::<T, u8>(&want);
                assert!(
                    same,
                    "{} {w}x{h} {colour:?} kind {kind} {isa:?}",
                    T::DATA_TYPE
                );
            }
        }
    }
}

const ALL_COLOURS: [Colour; 4] = [Colour::Mono, Colour::Rgb1, Colour::Rgb2, Colour::Rgb3];

#[test]
fn every_kernel_matches_the_mapping_on_odd_sizes() {
    let sizes = [
        (1, 1),
        (7, 13),
        (13, 7),
        (16, 16),
        (32, 48),
        (33, 70),
        (130, 17),
        (200, 129),
    ];
    for dt in DataType::ALL {
        for &(w, h) in &sizes {
            with_pixel_type!(dt, T => check::<T>(w, h, &ALL_COLOURS));
        }
    }
}

#[test]
fn every_kernel_matches_the_mapping_on_a_large_odd_frame() {
    for dt in DataType::ALL {
        with_pixel_type!(dt, T => check::<T>(1023, 517, &[Colour::Mono, Colour::Rgb2]));
    }
}
