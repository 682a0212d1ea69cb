//! The SIMD row kernels against plain loops: split/join for every data type and odd
//! lengths, the 8/16-bit means exhaustively, and whole-frame conversions on odd sizes for
//! every kernel set this CPU has.

use ndflow_core::{with_pixel_type, ColorMode, DataType, Pixel};

use super::kernel::{mono_to_rgb, rgb_to_mono, rgb_to_rgb, FalseColor};
use super::rgb_strides;
use super::simd::{join3, mean3_u16, mean3_u8, split3, triple, Isa};

/// Deterministic bit patterns as `T` (NaNs included; compared as bytes).
fn bits<T: Pixel>(n: usize, seed: u64) -> Vec<T> {
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

/// Finite values over the type's range (negatives included), for means.
fn values<T: Pixel>(n: usize, seed: u64) -> Vec<T> {
    let (lo, hi) = (T::MIN_F64.max(-1e6), T::MAX_F64.min(1e6));
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            T::from_f64(lo + u * (hi - lo))
        })
        .collect()
}

fn same<T: Pixel>(a: &[T], b: &[T]) -> bool {
    bytemuck::cast_slice::<T, u8>(a) == bytemuck::cast_slice::<T, u8>(b)
}

fn check_split_join<T: Pixel>() {
    for n in [0, 1, 2, 5, 15, 16, 17, 31, 47, 48, 49, 1023] {
        let src = bits::<T>(3 * n, n as u64 + 1);
        for isa in Isa::all_here() {
            let mut p = [
                vec![T::default(); n],
                vec![T::default(); n],
                vec![T::default(); n],
            ];
            let [r, g, b] = &mut p;
            split3(&src, r, g, b, isa);
            for (c, plane) in p.iter().enumerate() {
                let want: Vec<T> = src.iter().skip(c).step_by(3).copied().collect();
                assert!(
                    same(plane, &want),
                    "{} n={n} {isa:?} split c{c}",
                    T::DATA_TYPE
                );
            }
            let mut back = vec![T::default(); 3 * n];
            join3(&p[0], &p[1], &p[2], &mut back, isa);
            assert!(same(&back, &src), "{} n={n} {isa:?} join", T::DATA_TYPE);
            let mut three = vec![T::default(); 3 * n];
            triple(&p[1], &mut three, isa);
            let want: Vec<T> = p[1].iter().flat_map(|v| [*v; 3]).collect();
            assert!(same(&three, &want), "{} n={n} {isa:?} triple", T::DATA_TYPE);
        }
    }
}

#[test]
fn split_and_join_match_plain_loops_for_every_type() {
    for dt in DataType::ALL {
        with_pixel_type!(dt, T => check_split_join::<T>());
    }
}

#[test]
fn u8_mean_is_the_f64_mean_for_every_triple() {
    for isa in Isa::all_here() {
        for r in 0..=255u8 {
            // 65536 pixels: every (g, b) with this r; length not a multiple of 16 + 1 tail.
            let row: Vec<u8> = (0..=65535u32)
                .chain([7])
                .flat_map(|i| [r, (i >> 8) as u8, i as u8])
                .collect();
            let mut out = vec![0u8; row.len() / 3];
            mean3_u8(&mut out, &row, isa);
            for (m, p) in out.iter().zip(row.chunks_exact(3)) {
                let want = ((f64::from(p[0]) + f64::from(p[1]) + f64::from(p[2])) / 3.0) as u8;
                assert_eq!(*m, want, "{p:?} {isa:?}");
            }
        }
    }
}

#[test]
fn u16_mean_is_the_f64_mean_for_every_sum() {
    // Every sum 0..=3·65535 (the quotient depends on the sum only), then random triples.
    let mut row: Vec<u16> = (0..=3 * 65535u32)
        .flat_map(|s| {
            let r = s.min(65535);
            let g = (s - r).min(65535);
            [r as u16, g as u16, (s - r - g) as u16]
        })
        .collect();
    row.extend(values::<u16>(3 * 1001, 5));
    for isa in Isa::all_here() {
        let mut out = vec![0u16; row.len() / 3];
        mean3_u16(&mut out, &row, isa);
        for (m, p) in out.iter().zip(row.chunks_exact(3)) {
            let want = ((f64::from(p[0]) + f64::from(p[1]) + f64::from(p[2])) / 3.0) as u16;
            assert_eq!(*m, want, "{p:?} {isa:?}");
        }
    }
}

const RGB: [ColorMode; 3] = [ColorMode::RGB1, ColorMode::RGB2, ColorMode::RGB3];

/// Whole frames through the kernels: RGBn → RGBm and Mono → RGBm moved element by element,
/// RGBn → Mono as the f64 mean, for each kernel set.
fn check_frames<T: Pixel>(w: usize, h: usize) {
    let ctx = |what: &str, isa: Isa| format!("{} {w}x{h} {what} {isa:?}", T::DATA_TYPE);
    let n = w * h;
    let mono = bits::<T>(n, 9);
    for mi in RGB {
        let Some(si) = rgb_strides(mi, w, h) else {
            unreachable!()
        };
        let src = bits::<T>(3 * n, mi as u64);
        let finite = values::<T>(3 * n, mi as u64);
        for isa in Isa::all_here() {
            for mo in RGB {
                let Some(so) = rgb_strides(mo, w, h) else {
                    unreachable!()
                };
                let mut want = vec![T::default(); 3 * n];
                let mut want_mono = vec![T::default(); 3 * n];
                for (y, x, c) in
                    (0..h).flat_map(|y| (0..w).flat_map(move |x| (0..3).map(move |c| (y, x, c))))
                {
                    want[x * so.xs + y * so.ys + c * so.cs] =
                        src[x * si.xs + y * si.ys + c * si.cs];
                    want_mono[x * so.xs + y * so.ys + c * so.cs] = mono[x + y * w];
                }
                if mi != mo {
                    let mut got = vec![T::default(); 3 * n];
                    rgb_to_rgb(&src, &mut got, w, h, si, so, isa);
                    assert!(
                        same(&got, &want),
                        "{}",
                        ctx(&format!("{mi:?}->{mo:?}"), isa)
                    );
                }
                let mut got = vec![T::default(); 3 * n];
                mono_to_rgb(&mono, &mut got, w, h, so, FalseColor::None, isa);
                assert!(
                    same(&got, &want_mono),
                    "{}",
                    ctx(&format!("Mono->{mo:?}"), isa)
                );
            }
            let want: Vec<T> = (0..n)
                .map(|p| {
                    let (x, y) = (p % w, p / w);
                    let at = |c: usize| finite[x * si.xs + y * si.ys + c * si.cs].to_f64();
                    T::from_f64((at(0) + at(1) + at(2)) / 3.0)
                })
                .collect();
            let mut got = vec![T::default(); n];
            rgb_to_mono(&finite, &mut got, w, h, si, isa);
            assert!(same(&got, &want), "{}", ctx(&format!("{mi:?}->Mono"), isa));
        }
    }
}

#[test]
fn frames_match_plain_loops_on_odd_sizes_for_every_type() {
    for dt in DataType::ALL {
        for (w, h) in [(1, 1), (7, 13), (17, 3), (1023, 517)] {
            with_pixel_type!(dt, T => check_frames::<T>(w, h));
        }
    }
}
