//! Unit tests of the Process kernels: paths and builds agree bit for bit, the vectorisable
//! conversions equal `as`.

use super::*;

/// The fused and general paths must agree bit for bit.
#[test]
fn fused_matches_general() {
    let input: Vec<u16> = (0..3000u32).map(|i| (i * 37 % 65536) as u16).collect();
    let out_l = Linear::new(1.5, 0.75, 0.25);
    let next_l = Linear::new(0.0, 0.5, 0.0);
    let mut f1: Vec<f64> = (0..3000).map(|i| i as f64 * 0.5).collect();
    let mut f2 = f1.clone();
    let mut o1 = vec![0i32; 3000];
    let mut o2 = vec![0i32; 3000];
    let ops = PointOps::default();
    fn mk(f: &mut [f64], out: Linear, next: Linear) -> FilterOps<'_> {
        FilterOps {
            f,
            init: false,
            reset: None,
            out,
            next,
        }
    }
    run(
        &input,
        &ops,
        Some(mk(&mut f1, out_l, next_l)),
        Some(&mut o1[..]),
    );
    general::<u16, i32, f64, false>(
        &input,
        &ops,
        Some(mk(&mut f2, out_l, next_l)),
        Some(&mut o2[..]),
    );
    assert_eq!(o1, o2);
    assert_eq!(f1, f2);
}

/// `run` picks the AVX2 build where the CPU has it; it must equal the baseline build bit
/// for bit on the hot path (shared O/F coefficients, UInt8 in and out, values that
/// saturate at both ends).
#[test]
fn dispatched_build_matches_baseline() {
    let n = 4099;
    let input: Vec<u8> = (0..n).map(|i| (i * 97 % 256) as u8).collect();
    for lin in [Linear::new(0.0, 1.0, 0.01), Linear::new(-40.0, 0.9, 1.3)] {
        let mut f1: Vec<f64> = (0..n).map(|i| (i % 300) as f64 - 20.0).collect();
        let mut f2 = f1.clone();
        let mut o1 = vec![0u8; n];
        let mut o2 = vec![0u8; n];
        let fo = |f| FilterOps {
            f,
            init: false,
            reset: None,
            out: lin,
            next: lin,
        };
        run(
            &input,
            &PointOps::default(),
            Some(fo(&mut f1)),
            Some(&mut o1[..]),
        );
        run_impl::<u8, u8, f64, false>(
            &input,
            &PointOps::default(),
            Some(fo(&mut f2)),
            Some(&mut o2[..]),
        );
        assert_eq!(o1, o2);
        assert_eq!(f1, f2);
    }
}

/// One frame through `run` (the AVX2 build where the CPU has it) and through the baseline
/// build, from the same F; F and the output must agree bit for bit.
fn both_builds<I: Pixel, O: OutPixel, R: Real>(
    input: &[I],
    ops: &PointOps<'_>,
    f0: &[R],
    fo: (bool, Option<Linear<R>>, Linear<R>, Linear<R>),
    emit: bool,
) {
    let (init, reset, out, next) = fo;
    let (mut f1, mut f2) = (f0.to_vec(), f0.to_vec());
    let mut o1 = vec![O::default(); input.len()];
    let mut o2 = o1.clone();
    let mk = |f| FilterOps {
        f,
        init,
        reset,
        out,
        next,
    };
    run(input, ops, Some(mk(&mut f1)), emit.then_some(&mut o1[..]));
    run_impl::<I, O, R, false>(input, ops, Some(mk(&mut f2)), emit.then_some(&mut o2[..]));
    let what = format!("{fo:?} {} -> {}", I::DATA_TYPE, O::DATA_TYPE);
    let bytes = bytemuck::cast_slice::<R, u8>;
    assert!(bytes(&f1) == bytes(&f2), "F differs: {what}");
    let bytes = bytemuck::cast_slice::<O, u8>;
    assert!(bytes(&o1) == bytes(&o2), "output differs: {what}");
}

/// The f32 filter: every kernel variant (fused with shared, sparse or distinct
/// coefficients, filter only, init, reset, point operations) and the f32 → integer
/// conversions (8/16-bit natively, 32-bit through f64) in both builds.
#[test]
fn dispatched_build_matches_baseline_f32() {
    let n = 4099;
    let input: Vec<u8> = (0..n).map(|i| (i * 97 % 256) as u8).collect();
    let input16: Vec<i16> = (0..n).map(|i| (i as i16).wrapping_mul(7919)).collect();
    // Magnitudes that saturate every output type at both ends, and non-finite values.
    let f0: Vec<f32> = (0..n)
        .map(|i| {
            let m = [1.0, 300.0, 7e4, 5e9, 1e30][i % 5];
            let v = ((i * 31 % 200) as f32 - 100.0) * 0.37 * m;
            match i % 1000 {
                1 => f32::NAN,
                2 => f32::INFINITY,
                3 => f32::NEG_INFINITY,
                _ => v,
            }
        })
        .collect();
    let l = |a: f32, b: f32, c: f32| Linear::new(a, b, c);
    let cases = [
        (false, None, l(0.0, 1.0, 0.01), l(0.0, 1.0, 0.01)),
        (false, None, l(-40.0, 0.9, 1.3), l(-40.0, 0.9, 1.3)),
        (false, None, l(0.5, 0.0, 1.0), l(0.5, 0.0, 1.0)),
        (false, None, l(128.0, -1.0, 1.0), l(0.0, 0.99, 0.01)),
        (
            true,
            Some(l(0.0, 0.0, 1.0)),
            l(1.5, 1.0, 0.0),
            l(0.0, 0.5, 0.5),
        ),
        (
            false,
            Some(l(2.0, 0.5, 1.0)),
            l(0.0, 1.0, 0.25),
            l(0.0, 1.0, 0.25),
        ),
    ];
    let bg: Vec<f64> = (0..n).map(|i| (i % 50) as f64).collect();
    let point = PointOps {
        background: Some(&bg),
        offset_scale: Some((3.0, 1.5)),
        high_clip: Some((300.0, 1e6)),
        ..PointOps::default()
    };
    for ops in [PointOps::default(), point] {
        for fo in cases {
            for emit in [true, false] {
                both_builds::<u8, u8, f32>(&input, &ops, &f0, fo, emit);
            }
            both_builds::<u8, i8, f32>(&input, &ops, &f0, fo, true);
            both_builds::<i16, i16, f32>(&input16, &ops, &f0, fo, true);
            both_builds::<i16, u16, f32>(&input16, &ops, &f0, fo, true);
            both_builds::<u8, i32, f32>(&input, &ops, &f0, fo, true);
            both_builds::<i16, u32, f32>(&input16, &ops, &f0, fo, true);
            both_builds::<u8, f32, f32>(&input, &ops, &f0, fo, true);
            both_builds::<u8, f64, f32>(&input, &ops, &f0, fo, true);
        }
    }
}

/// With f32 the fused and general paths agree too (the general path loads an f32 F the
/// same way when no point operation is on).
#[test]
fn fused_matches_general_f32() {
    let input: Vec<i32> = (0..3000).map(|i| (i * 7919 % 100_003) - 50_000).collect();
    let (o, nx) = (
        Linear::new(1.5f32, 0.75, 0.25),
        Linear::new(0.0f32, 0.5, 0.5),
    );
    let f0: Vec<f32> = (0..3000).map(|i| i as f32 * 0.37).collect();
    let (mut f1, mut f2) = (f0.clone(), f0);
    let (mut o1, mut o2) = (vec![0u16; 3000], vec![0u16; 3000]);
    let mk = |f| FilterOps {
        f,
        init: false,
        reset: None,
        out: o,
        next: nx,
    };
    let ops = PointOps::default();
    run(&input, &ops, Some(mk(&mut f1)), Some(&mut o1[..]));
    general::<i32, u16, f32, false>(&input, &ops, Some(mk(&mut f2)), Some(&mut o2[..]));
    assert_eq!(o1, o2);
    assert_eq!(f1, f2);
}

fn edge_values_f64() -> Vec<f64> {
    let mut values = vec![
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        0.5,
        -0.5,
        1.5,
        -1.5,
        2.5,
        -2.5,
        0.999_999_999_999_999_9,
        -0.999_999_999_999_999_9,
        1e-300,
        -1e-300,
        1e300,
        -1e300,
        254.999_999_999_999_97,
        255.5,
        256.0,
        -128.5,
        -129.0,
        127.5,
        32767.5,
        -32768.5,
        65535.5,
        2147483647.5,
        -2147483648.5,
        4294967295.5,
        4294967296.0,
    ];
    let mut x = -70000.0f64;
    while x < 70000.0 {
        values.push(x);
        x += 0.37;
    }
    values
}

/// The AVX2 conversion must equal `as` for every type it serves (run on any target).
#[test]
fn trunc_sat_equals_as() {
    for v in edge_values_f64() {
        assert_eq!(trunc_sat::<true>(v, -128.0, 127.0) as i8, v as i8, "{v}");
        assert_eq!(trunc_sat::<false>(v, 0.0, 255.0) as u8, v as u8, "{v}");
        assert_eq!(
            trunc_sat::<true>(v, -32768.0, 32767.0) as i16,
            v as i16,
            "{v}"
        );
        assert_eq!(trunc_sat::<false>(v, 0.0, 65535.0) as u16, v as u16, "{v}");
        let (lo, hi) = (i32::MIN as f64, i32::MAX as f64);
        assert_eq!(trunc_sat::<true>(v, lo, hi) as i32, v as i32, "{v}");
        let w = v * 65536.0;
        assert_eq!(trunc_sat::<true>(w, lo, hi) as i32, w as i32, "{w}");
        assert_eq!(
            trunc_sat::<false>(w, 0.0, u32::MAX as f64) as u32,
            w as u32,
            "{w}"
        );
    }
}

/// The f32 → integer conversions of the AVX2 path (`from_f32_vec`) equal `as`, bit for
/// bit, for every output type: the f64 edge values narrowed, every integer limit and
/// its neighbouring floats (±4 ulps), a fine sweep, and one f32 bit pattern in 4099
/// (all exponents, NaN payloads and subnormals included).
#[test]
fn f32_conversion_equals_as() {
    fn check<O: OutPixel + PartialEq>(v: f32) {
        let (vec, r#as) = (O::from_f32_vec(v), O::from_f32_as(v));
        assert!(
            bytemuck::bytes_of(&vec) == bytemuck::bytes_of(&r#as),
            "{v:e} ({:#x}) -> {}: {vec:?} != {as:?}",
            v.to_bits(),
            O::DATA_TYPE,
            as = r#as
        );
    }
    fn all(v: f32) {
        check::<i8>(v);
        check::<u8>(v);
        check::<i16>(v);
        check::<u16>(v);
        check::<i32>(v);
        check::<u32>(v);
        check::<i64>(v);
        check::<u64>(v);
        check::<f32>(v);
        check::<f64>(v);
    }
    let limits = [
        0.0f32,
        1.0,
        -1.0,
        127.0,
        128.0,
        -128.0,
        -129.0,
        255.0,
        256.0,
        32767.0,
        32768.0,
        -32768.0,
        -32769.0,
        65535.0,
        65536.0,
        4_194_304.0,
        8_388_608.0,
        16_777_216.0,
        2_147_483_648.0,
        -2_147_483_648.0,
        4_294_967_296.0,
        f32::MAX,
        f32::MIN_POSITIVE,
    ];
    for l in limits {
        for s in [l, -l] {
            for d in -4i32..=4 {
                // Neighbouring floats: the bit pattern is monotonic within a sign.
                all(f32::from_bits(s.to_bits().wrapping_add_signed(d)));
            }
            all(s + 0.5);
            all(s - 0.5);
        }
    }
    for v in edge_values_f64() {
        all(v as f32);
    }
    for bits in (0..=u32::MAX).step_by(4099) {
        all(f32::from_bits(bits));
    }
}

#[test]
fn zero_coefficient_skips_non_finite() {
    let l = Linear::new(2.0, 0.0, 1.0);
    assert_eq!(l.eval(f64::NAN, 3.0), 5.0);
    assert_eq!(l.eval(f64::INFINITY, 3.0), 5.0);
    let l = Linear::new(2.0f64, 1e-60, 1.0).cast::<f32>();
    assert_eq!(
        l.eval(f32::INFINITY, 3.0),
        5.0,
        "underflows to 0 in f32: skipped"
    );
    assert_eq!(min_max::<f32>(&[f32::NAN, 2.0, -1.0]), Some((-1.0, 2.0)));
    assert_eq!(min_max::<u8>(&[]), None);
}

/// The hand-written AVX2 hot path (f64 filter, UInt8/UInt16 in and out, O and F sharing
/// dense coefficients) equals the baseline build bit for bit: F holding every edge value
/// (NaN, ±∞, ±0, halves, values that saturate each output type), coefficients that keep,
/// shrink, negate and offset, and lengths that leave a tail after the 16-pixel blocks.
#[test]
fn hand_written_avx2_hot_path_matches_baseline() {
    let edges = edge_values_f64();
    let l = Linear::new;
    let lins = [
        l(0.0, 0.99, 0.01),
        l(0.0, 1.0, 1.0),
        l(-40.0, 0.9, 1.3),
        l(128.0, -1.0, 1.0),
        l(0.5, 1e-3, 300.0),
    ];
    for n in [0, 5, 16, 31, 4099, edges.len()] {
        let f0: Vec<f64> = edges.iter().copied().cycle().take(n).collect();
        let in8: Vec<u8> = (0..n).map(|i| (i * 97 % 256) as u8).collect();
        let in16: Vec<u16> = (0..n).map(|i| (i * 7919 % 65536) as u16).collect();
        for lin in lins {
            let fo = (false, None, lin, lin);
            both_builds::<u8, u8, f64>(&in8, &PointOps::default(), &f0, fo, true);
            both_builds::<u8, u16, f64>(&in8, &PointOps::default(), &f0, fo, true);
            both_builds::<u16, u8, f64>(&in16, &PointOps::default(), &f0, fo, true);
            both_builds::<u16, u16, f64>(&in16, &PointOps::default(), &f0, fo, true);
        }
    }
}
