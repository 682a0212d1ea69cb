//! Pixel kernels of NDPluginProcess, in f64 as areaDetector computes them.
//!
//! Two paths share one set of formulas:
//! - the **fused** path, for the common case "recursive filter only" (the 2013 benchmark's
//!   100-frame average): one loop reads the input, reads and writes the filter array F and
//!   writes the output, with no temporary image;
//! - the **general** path, for everything else: the frame is walked in chunks of [`CHUNK`]
//!   pixels through a stack buffer that stays in L1, one tight loop per enabled step, so each
//!   step's on/off test is made once per chunk rather than once per pixel.
//!
//! Both reproduce areaDetector's arithmetic exactly, including its habit of skipping a filter
//! term whose coefficient is 0 (so that `0·∞` or `0·NaN` in F or I does not leak through).

use ndflow_core::Pixel;

/// Pixels per chunk of the general path: 8 KiB of f64, comfortably inside L1.
const CHUNK: usize = 1024;

/// An output element: `from_f64` with Rust's `as` semantics (truncate toward zero, saturate,
/// NaN → 0). `from_f64_vec` computes the same value in a form that vectorises with AVX2.
pub(crate) trait OutPixel: Pixel {
    fn from_f64_as(v: f64) -> Self;
    #[inline(always)]
    fn from_f64_vec(v: f64) -> Self {
        Self::from_f64_as(v)
    }
}

/// 1.5·2^52: adding it rounds any |x| < 2^51 to an integer held in the low mantissa bits.
const MAGIC: f64 = 6_755_399_441_055_744.0;

/// `v as T` for an integer type of at most 32 bits with range `[lo, hi]`, from float compares,
/// adds and bit casts only. LLVM vectorises this with AVX2 (≈2.5× faster than `as`, which it
/// leaves scalar), but on SSE2 it is slower than `as`, so only the AVX2 path ([`run`]) uses it.
#[inline(always)]
pub(crate) fn trunc_sat<const SIGNED: bool>(v: f64, lo: f64, hi: f64) -> i64 {
    let c = if v > lo { v } else { lo };
    let c = if c < hi { c } else { hi };
    let c = if SIGNED && v.is_nan() { 0.0 } else { c };
    let r = c + MAGIC;
    let rounded = r - MAGIC;
    let k = (r.to_bits() as i64).wrapping_sub(MAGIC.to_bits() as i64);
    // Round-to-nearest went away from zero: step back toward zero (truncation).
    let down = if rounded > c && (!SIGNED || c > 0.0) {
        -1
    } else {
        0
    };
    let up = if SIGNED && rounded < c && c < 0.0 {
        1
    } else {
        0
    };
    k + down + up
}

macro_rules! out_small_int {
    ($($t:ty => $signed:expr),*) => {$(
        impl OutPixel for $t {
            #[inline(always)]
            fn from_f64_as(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_f64_vec(v: f64) -> Self {
                trunc_sat::<$signed>(v, <$t>::MIN as f64, <$t>::MAX as f64) as $t
            }
        }
    )*};
}
out_small_int!(i8 => true, u8 => false, i16 => true, u16 => false, i32 => true, u32 => false);

macro_rules! out_plain {
    ($($t:ty),*) => {$(
        impl OutPixel for $t {
            #[inline(always)]
            fn from_f64_as(v: f64) -> Self {
                v as $t
            }
        }
    )*};
}
out_plain!(i64, u64, f32, f64);

/// Steps 1–4 (background, flat field, offset/scale, clipping), constant over one frame.
/// `None` switches a step off.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PointOps<'a> {
    pub background: Option<&'a [f64]>,
    /// The flat field and ScaleFlatField.
    pub flat: Option<(&'a [f64], f64)>,
    /// (Offset, Scale): `(x + Offset)·Scale`.
    pub offset_scale: Option<(f64, f64)>,
    /// (HighClipThresh, HighClipValue).
    pub high_clip: Option<(f64, f64)>,
    /// (LowClipThresh, LowClipValue).
    pub low_clip: Option<(f64, f64)>,
}

impl PointOps<'_> {
    pub fn is_identity(&self) -> bool {
        self.background.is_none()
            && self.flat.is_none()
            && self.offset_scale.is_none()
            && self.high_clip.is_none()
            && self.low_clip.is_none()
    }
}

/// `off + c1·F + c2·I`, evaluated left to right, a term with a zero coefficient skipped.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Linear {
    off: f64,
    c1: f64,
    c2: f64,
    /// All ones when the term is used, zero when skipped (decided once, not per pixel).
    m1: u64,
    m2: u64,
}

impl Linear {
    pub fn new(off: f64, c1: f64, c2: f64) -> Linear {
        let mask = |c: f64| if c != 0.0 { u64::MAX } else { 0 };
        Linear {
            off,
            c1,
            c2,
            m1: mask(c1),
            m2: mask(c2),
        }
    }

    #[inline(always)]
    fn eval(&self, f: f64, x: f64) -> f64 {
        // A skipped term adds +0.0, which equals areaDetector's `if (c) v += c*x` for every
        // value (it only turns -0.0 into +0.0). Masking bits instead of branching keeps the
        // loops branch-free, so they vectorise.
        let a = f64::from_bits((self.c1 * f).to_bits() & self.m1);
        let b = f64::from_bits((self.c2 * x).to_bits() & self.m2);
        self.off + a + b
    }

    /// Both terms used: the plain formula (what [`Linear::eval`] computes then, without the
    /// masks, which cost ≈10 % in the hot loop).
    fn is_dense(&self) -> bool {
        self.m1 == u64::MAX && self.m2 == u64::MAX
    }

    #[inline(always)]
    fn eval_as<const DENSE: bool>(&self, f: f64, x: f64) -> f64 {
        if DENSE {
            self.off + self.c1 * f + self.c2 * x
        } else {
            self.eval(f, x)
        }
    }
}

/// Step 5 for one frame: the filter array and this frame's coefficients.
#[derive(Debug)]
pub(crate) struct FilterOps<'a> {
    pub f: &'a mut [f64],
    /// F was just (re)created: it starts as a copy of the processed input, as in areaDetector.
    pub init: bool,
    /// Reset this frame: `F = ROffset + RC1·F + RC2·I`.
    pub reset: Option<Linear>,
    /// Output: `O = OOffset + O1·F + O2·I` with `O1 = OScale·(OC1 + OC2/N)` etc.
    pub out: Linear,
    /// Next filter: `F = FOffset + F1·F + F2·I`.
    pub next: Linear,
}

/// Runs steps 1–5 over `input`, writing the converted result to `out` when given (an
/// "Array N only" frame that is not emitted still updates F). Slices are walked in lockstep;
/// the caller makes them the same length.
///
/// The same code is compiled twice: for the baseline target and, chosen at run time, for
/// AVX2+FMA (four f64 per instruction and a vectorised f64→integer conversion: ≈2× faster).
pub(crate) fn run<I: Pixel, O: OutPixel>(
    input: &[I],
    ops: &PointOps<'_>,
    filter: Option<FilterOps<'_>>,
    out: Option<&mut [O]>,
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: run_avx2 only requires AVX2 and FMA, which the CPU was just seen to have.
        unsafe { run_avx2(input, ops, filter, out) };
        return;
    }
    run_impl::<I, O, false>(input, ops, filter, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn run_avx2<I: Pixel, O: OutPixel>(
    input: &[I],
    ops: &PointOps<'_>,
    filter: Option<FilterOps<'_>>,
    out: Option<&mut [O]>,
) {
    run_impl::<I, O, true>(input, ops, filter, out);
}

/// `V`: use the vectorisable conversion (only where AVX2 is enabled).
#[inline(always)]
fn run_impl<I: Pixel, O: OutPixel, const V: bool>(
    input: &[I],
    ops: &PointOps<'_>,
    filter: Option<FilterOps<'_>>,
    out: Option<&mut [O]>,
) {
    match filter {
        Some(fo) if ops.is_identity() && !fo.init && fo.reset.is_none() => {
            let dense = fo.next.is_dense();
            match out {
                Some(out) if fo.out == fo.next && dense => {
                    fused_same::<I, O, true, V>(input, fo.f, fo.next, out)
                }
                Some(out) if fo.out == fo.next => {
                    fused_same::<I, O, false, V>(input, fo.f, fo.next, out)
                }
                Some(out) => fused::<I, O, V>(input, fo.f, fo.out, fo.next, out),
                None if dense => fused_filter_only::<I, true>(input, fo.f, fo.next),
                None => fused_filter_only::<I, false>(input, fo.f, fo.next),
            }
        }
        filter => general::<I, O, V>(input, ops, filter, out),
    }
}

/// Pixels per tile of [`fused`]: a tile's f64 values stay in registers between the load,
/// filter and store stages, so each stage vectorises (≈10 % faster than one zipped loop there
/// on x86-64 baseline). On SSE2 the f64→integer conversion stays scalar (LLVM does not
/// vectorise saturating `as` casts, and [`trunc_sat`] measured slower there); it is about
/// half of the hot loop's time.
const TILE: usize = 16;

/// The hot path: filter only, output and next filter with different coefficients.
#[inline(always)]
fn fused<I: Pixel, O: OutPixel, const V: bool>(
    input: &[I],
    f: &mut [f64],
    o: Linear,
    n: Linear,
    out: &mut [O],
) {
    let mut xs = input.chunks_exact(TILE);
    let mut fs = f.chunks_exact_mut(TILE);
    let mut ys = out.chunks_exact_mut(TILE);
    for ((x, f), y) in (&mut xs).zip(&mut fs).zip(&mut ys) {
        let mut t = [0.0f64; TILE];
        load(x, &mut t);
        for (v, f) in t.iter_mut().zip(f.iter_mut()) {
            let old = *f;
            *f = n.eval(old, *v);
            *v = o.eval(old, *v);
        }
        store::<O, V>(&t, y);
    }
    let (x, f, y) = (xs.remainder(), fs.into_remainder(), ys.into_remainder());
    for ((x, f), y) in x.iter().zip(f.iter_mut()).zip(y.iter_mut()) {
        let (v, old) = (x.to_f64(), *f);
        *f = n.eval(old, v);
        *y = convert::<O, V>(o.eval(old, v));
    }
}

/// The hot path when O and F share coefficients (RecursiveAve, Average, Sum, CopyToFilter):
/// the output is the new filter value, computed once. A plain zipped loop: tiling measured
/// slower here (the compiler then assembles the scalar f64→int results into vectors).
#[inline(always)]
fn fused_same<I: Pixel, O: OutPixel, const DENSE: bool, const V: bool>(
    input: &[I],
    f: &mut [f64],
    n: Linear,
    out: &mut [O],
) {
    for ((x, f), y) in input.iter().zip(f.iter_mut()).zip(out.iter_mut()) {
        let nf = n.eval_as::<DENSE>(*f, x.to_f64());
        *f = nf;
        *y = convert::<O, V>(nf);
    }
}

/// A frame that is filtered but not emitted.
#[inline(always)]
fn fused_filter_only<I: Pixel, const DENSE: bool>(input: &[I], f: &mut [f64], n: Linear) {
    for (x, f) in input.iter().zip(f.iter_mut()) {
        *f = n.eval_as::<DENSE>(*f, x.to_f64());
    }
}

/// Every other combination, chunk by chunk through a stack buffer.
#[inline(always)]
fn general<I: Pixel, O: OutPixel, const V: bool>(
    input: &[I],
    ops: &PointOps<'_>,
    mut filter: Option<FilterOps<'_>>,
    mut out: Option<&mut [O]>,
) {
    let mut tmp = [0.0f64; CHUNK];
    for (k, x) in input.chunks(CHUNK).enumerate() {
        let start = k * CHUNK;
        let end = start + x.len();
        let t = &mut tmp[..x.len()];
        load(x, t);
        point_ops(t, ops, start, end);
        if let Some(fo) = filter.as_mut() {
            if let Some(f) = fo.f.get_mut(start..end) {
                filter_chunk(t, f, fo.init, fo.reset, fo.out, fo.next);
            }
        }
        if let Some(y) = out.as_deref_mut().and_then(|o| o.get_mut(start..end)) {
            store::<O, V>(t, y);
        }
    }
}

#[inline(always)]
fn load<I: Pixel>(x: &[I], t: &mut [f64]) {
    for (d, s) in t.iter_mut().zip(x) {
        *d = s.to_f64();
    }
}

#[inline(always)]
fn convert<O: OutPixel, const V: bool>(v: f64) -> O {
    if V {
        O::from_f64_vec(v)
    } else {
        O::from_f64_as(v)
    }
}

#[inline(always)]
fn store<O: OutPixel, const V: bool>(t: &[f64], y: &mut [O]) {
    for (d, s) in y.iter_mut().zip(t) {
        *d = convert::<O, V>(*s);
    }
}

/// Steps 1–4 on one chunk (pixels `start..end` of the frame), in areaDetector's order.
#[inline(never)]
fn point_ops(t: &mut [f64], ops: &PointOps<'_>, start: usize, end: usize) {
    if let Some(bg) = ops.background.and_then(|b| b.get(start..end)) {
        for (v, b) in t.iter_mut().zip(bg) {
            *v -= b;
        }
    }
    if let Some((flat, scale)) = ops.flat {
        if let Some(flat) = flat.get(start..end) {
            // A zero flat-field pixel leaves the value alone (areaDetector skips it).
            for (v, fl) in t.iter_mut().zip(flat) {
                *v = if *fl != 0.0 { *v * (scale / fl) } else { *v };
            }
        }
    }
    if let Some((offset, scale)) = ops.offset_scale {
        for v in t.iter_mut() {
            *v = (*v + offset) * scale;
        }
    }
    if let Some((thresh, value)) = ops.high_clip {
        for v in t.iter_mut() {
            // A select, not a conditional store, so the loop vectorises.
            *v = if *v > thresh { value } else { *v };
        }
    }
    if let Some((thresh, value)) = ops.low_clip {
        for v in t.iter_mut() {
            *v = if *v < thresh { value } else { *v };
        }
    }
}

/// Step 5 on one chunk: optional (re)initialisation and reset, then output and new filter.
#[inline(never)]
fn filter_chunk(
    t: &mut [f64],
    f: &mut [f64],
    init: bool,
    reset: Option<Linear>,
    out: Linear,
    next: Linear,
) {
    if init {
        f.copy_from_slice(t);
    }
    if let Some(r) = reset {
        for (fv, v) in f.iter_mut().zip(t.iter()) {
            *fv = r.eval(*fv, *v);
        }
    }
    for (v, fv) in t.iter_mut().zip(f.iter_mut()) {
        let old = *fv;
        *fv = next.eval(old, *v);
        *v = out.eval(old, *v);
    }
}

/// Smallest and largest value of a frame (NaN ignored); `None` when there is no finite span.
pub(crate) fn min_max<I: Pixel>(input: &[I]) -> Option<(f64, f64)> {
    let (lo, hi) = input
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
            let v = x.to_f64();
            (lo.min(v), hi.max(v))
        });
    (lo <= hi).then_some((lo, hi))
}

/// A frame's pixels as f64 (saving a background or flat field).
pub(crate) fn to_f64<I: Pixel>(input: &[I]) -> Vec<f64> {
    input.iter().map(|x| x.to_f64()).collect()
}

#[cfg(test)]
mod tests {
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
        general::<u16, i32, false>(
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
            run_impl::<u8, u8, false>(
                &input,
                &PointOps::default(),
                Some(fo(&mut f2)),
                Some(&mut o2[..]),
            );
            assert_eq!(o1, o2);
            assert_eq!(f1, f2);
        }
    }

    /// The AVX2 conversion must equal `as` for every type it serves (run on any target).
    #[test]
    fn trunc_sat_equals_as() {
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
        for v in values {
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

    #[test]
    fn zero_coefficient_skips_non_finite() {
        let l = Linear::new(2.0, 0.0, 1.0);
        assert_eq!(l.eval(f64::NAN, 3.0), 5.0);
        assert_eq!(l.eval(f64::INFINITY, 3.0), 5.0);
        assert_eq!(min_max::<f32>(&[f32::NAN, 2.0, -1.0]), Some((-1.0, 2.0)));
        assert_eq!(min_max::<u8>(&[]), None);
    }
}
