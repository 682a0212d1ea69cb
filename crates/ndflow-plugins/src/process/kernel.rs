//! Pixel kernels of NDPluginProcess.
//!
//! Two paths share one set of formulas:
//! - the **fused** path, for the common case "recursive filter only" (the 2013 benchmark's
//!   100-frame average): one loop reads the input, reads and writes the filter array F and
//!   writes the output, with no temporary image;
//! - the **general** path, for everything else: the frame is walked in chunks of [`CHUNK`]
//!   pixels through a stack buffer that stays in L1, one tight loop per enabled step, so each
//!   step's on/off test is made once per chunk rather than once per pixel.
//!
//! Steps 1–4 are computed in f64. The filter (F, its arithmetic and the output value) is
//! generic over [`Real`]: f64 reproduces areaDetector's arithmetic exactly, including its habit
//! of skipping a filter term whose coefficient is 0 (so that `0·∞` or `0·NaN` in F or I does
//! not leak through); f32 (FilterPrecision = Float32) evaluates the same formulas in the same
//! order in f32, which halves the memory traffic of F and doubles the SIMD width.

use std::fmt::Debug;
use std::ops::{Add, Mul};

use ndflow_core::{AlignedBuf, Pixel};
use num_traits::AsPrimitive;

/// Pixels per chunk of the general path: 8 KiB of f64, comfortably inside L1.
const CHUNK: usize = 1024;

/// An output element: `from_f64`/`from_f32` with Rust's `as` semantics (truncate toward zero,
/// saturate, NaN → 0). The `_vec` forms compute the same value in a form that vectorises with
/// AVX2.
pub(crate) trait OutPixel: Pixel {
    fn from_f64_as(v: f64) -> Self;
    #[inline(always)]
    fn from_f64_vec(v: f64) -> Self {
        Self::from_f64_as(v)
    }
    fn from_f32_as(v: f32) -> Self;
    #[inline(always)]
    fn from_f32_vec(v: f32) -> Self {
        Self::from_f32_as(v)
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

/// 1.5·2^23: adding it to an integer-valued |x| < 2^22 puts x in the low mantissa bits.
const MAGIC32: f32 = 12_582_912.0;

/// `v as T` from f32 for an integer type with range `[lo, hi]` inside ±2^22 (8- and 16-bit
/// types), like [`trunc_sat`]. `trunc` is one `vroundps` with AVX2 (a libm call on SSE2, so
/// again only the AVX2 path uses it); LLVM leaves `f32 as u8` etc. scalar.
#[inline(always)]
pub(crate) fn trunc_sat_f32<const SIGNED: bool>(v: f32, lo: f32, hi: f32) -> i32 {
    let c = if v > lo { v } else { lo };
    let c = if c < hi { c } else { hi };
    let c = if SIGNED && v.is_nan() { 0.0 } else { c };
    let t = c.trunc() + MAGIC32;
    (t.to_bits() as i32).wrapping_sub(MAGIC32.to_bits() as i32)
}

macro_rules! out_int {
    ($($t:ty => $signed:literal, $narrow:literal),*) => {$(
        impl OutPixel for $t {
            #[inline(always)]
            fn from_f64_as(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_f64_vec(v: f64) -> Self {
                trunc_sat::<$signed>(v, <$t>::MIN as f64, <$t>::MAX as f64) as $t
            }
            #[inline(always)]
            fn from_f32_as(v: f32) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_f32_vec(v: f32) -> Self {
                if $narrow {
                    trunc_sat_f32::<$signed>(v, <$t>::MIN as f32, <$t>::MAX as f32) as $t
                } else {
                    // 32-bit types exceed trunc_sat_f32's range; f32 → f64 is exact.
                    Self::from_f64_vec(f64::from(v))
                }
            }
        }
    )*};
}
out_int!(
    i8 => true, true,
    u8 => false, true,
    i16 => true, true,
    u16 => false, true,
    i32 => true, false,
    u32 => false, false
);

macro_rules! out_plain {
    ($($t:ty),*) => {$(
        impl OutPixel for $t {
            #[inline(always)]
            fn from_f64_as(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_f32_as(v: f32) -> Self {
                v as $t
            }
        }
    )*};
}
out_plain!(i64, u64, f32, f64);

/// The filter's element type: storage of F and the arithmetic of step 5.
pub(crate) trait Real:
    bytemuck::Pod + PartialEq + Default + Debug + Add<Output = Self> + Mul<Output = Self>
{
    /// The bit pattern, for masking a skipped term.
    type Bits: Copy + PartialEq + Debug;
    /// `v as Self`.
    fn from_f64(v: f64) -> Self;
    /// `x as Self`.
    fn from_pixel<I: Pixel>(x: I) -> Self;
    /// All ones when `keep`, zero otherwise.
    fn mask(keep: bool) -> Self::Bits;
    fn and(self, m: Self::Bits) -> Self;
    /// `self as O`; `V`: the vectorisable form (only where AVX2 is enabled).
    fn to_out<O: OutPixel, const V: bool>(self) -> O;
    /// Loads a chunk (pixels `start..end`) and applies steps 1–4 in f64; `wide` is scratch.
    fn load_point_ops<I: Pixel>(
        x: &[I],
        t: &mut [Self],
        wide: &mut [f64],
        ops: &PointOps<'_>,
        start: usize,
        end: usize,
    );
}

impl Real for f64 {
    type Bits = u64;
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v
    }
    #[inline(always)]
    fn from_pixel<I: Pixel>(x: I) -> Self {
        x.to_f64()
    }
    #[inline(always)]
    fn mask(keep: bool) -> u64 {
        if keep {
            u64::MAX
        } else {
            0
        }
    }
    #[inline(always)]
    fn and(self, m: u64) -> Self {
        f64::from_bits(self.to_bits() & m)
    }
    #[inline(always)]
    fn to_out<O: OutPixel, const V: bool>(self) -> O {
        if V {
            O::from_f64_vec(self)
        } else {
            O::from_f64_as(self)
        }
    }
    #[inline(always)]
    fn load_point_ops<I: Pixel>(
        x: &[I],
        t: &mut [f64],
        _wide: &mut [f64],
        ops: &PointOps<'_>,
        start: usize,
        end: usize,
    ) {
        load(x, t);
        point_ops(t, ops, start, end);
    }
}

impl Real for f32 {
    type Bits = u32;
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    #[inline(always)]
    fn from_pixel<I: Pixel>(x: I) -> Self {
        AsPrimitive::<f32>::as_(x)
    }
    #[inline(always)]
    fn mask(keep: bool) -> u32 {
        if keep {
            u32::MAX
        } else {
            0
        }
    }
    #[inline(always)]
    fn and(self, m: u32) -> Self {
        f32::from_bits(self.to_bits() & m)
    }
    #[inline(always)]
    fn to_out<O: OutPixel, const V: bool>(self) -> O {
        if V {
            O::from_f32_vec(self)
        } else {
            O::from_f32_as(self)
        }
    }
    #[inline(always)]
    fn load_point_ops<I: Pixel>(
        x: &[I],
        t: &mut [f32],
        wide: &mut [f64],
        ops: &PointOps<'_>,
        start: usize,
        end: usize,
    ) {
        load(x, wide);
        point_ops(wide, ops, start, end);
        for (d, s) in t.iter_mut().zip(wide.iter()) {
            *d = *s as f32;
        }
    }
}

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
pub(crate) struct Linear<R: Real = f64> {
    off: R,
    c1: R,
    c2: R,
    /// All ones when the term is used, zero when skipped (decided once, not per pixel).
    m1: R::Bits,
    m2: R::Bits,
}

impl<R: Real> Linear<R> {
    pub fn new(off: R, c1: R, c2: R) -> Linear<R> {
        let zero = R::default();
        Linear {
            off,
            c1,
            c2,
            m1: R::mask(c1 != zero),
            m2: R::mask(c2 != zero),
        }
    }

    #[inline(always)]
    fn eval(&self, f: R, x: R) -> R {
        // A skipped term adds +0.0, which equals areaDetector's `if (c) v += c*x` for every
        // value (it only turns -0.0 into +0.0). Masking bits instead of branching keeps the
        // loops branch-free, so they vectorise.
        let a = (self.c1 * f).and(self.m1);
        let b = (self.c2 * x).and(self.m2);
        self.off + a + b
    }

    /// Both terms used: the plain formula (what [`Linear::eval`] computes then, without the
    /// masks, which cost ≈10 % in the hot loop).
    fn is_dense(&self) -> bool {
        let all = R::mask(true);
        self.m1 == all && self.m2 == all
    }

    #[inline(always)]
    fn eval_as<const DENSE: bool>(&self, f: R, x: R) -> R {
        if DENSE {
            self.off + self.c1 * f + self.c2 * x
        } else {
            self.eval(f, x)
        }
    }
}

impl Linear {
    /// The same formula with its coefficients cast to `R` (once per frame); a coefficient
    /// that becomes 0 is skipped.
    pub fn cast<R: Real>(self) -> Linear<R> {
        Linear::new(
            R::from_f64(self.off),
            R::from_f64(self.c1),
            R::from_f64(self.c2),
        )
    }
}

/// Step 5 for one frame: the filter array and this frame's coefficients.
#[derive(Debug)]
pub(crate) struct FilterOps<'a, R: Real = f64> {
    pub f: &'a mut [R],
    /// F was just (re)created: it starts as a copy of the processed input, as in areaDetector.
    pub init: bool,
    /// Reset this frame: `F = ROffset + RC1·F + RC2·I`.
    pub reset: Option<Linear<R>>,
    /// Output: `O = OOffset + O1·F + O2·I` with `O1 = OScale·(OC1 + OC2/N)` etc.
    pub out: Linear<R>,
    /// Next filter: `F = FOffset + F1·F + F2·I`.
    pub next: Linear<R>,
}

/// The filter array F, kept between frames, in the precision FilterPrecision chose; on huge
/// pages (an 8 MiB array for a 1024² frame is read and written once per frame).
#[derive(Debug)]
pub(crate) enum FilterArray {
    F64(AlignedBuf<f64>),
    F32(AlignedBuf<f32>),
}

impl FilterArray {
    /// `n` elements (their values are overwritten by the first frame), in f32 or f64, reusing
    /// `old`'s allocation when it has that precision and size.
    pub fn new(old: Option<FilterArray>, f32: bool, n: usize) -> FilterArray {
        match (old, f32) {
            (Some(FilterArray::F32(v)), true) if v.len() == n => FilterArray::F32(v),
            (Some(FilterArray::F64(v)), false) if v.len() == n => FilterArray::F64(v),
            (_, true) => FilterArray::F32(AlignedBuf::zeroed(n)),
            (_, false) => FilterArray::F64(AlignedBuf::zeroed(n)),
        }
    }

    pub fn is_f32(&self) -> bool {
        matches!(self, FilterArray::F32(_))
    }
}

/// [`FilterOps`] before F's precision is known: coefficients in f64.
#[derive(Debug)]
pub(crate) struct FilterStep<'a> {
    pub f: &'a mut FilterArray,
    pub init: bool,
    pub reset: Option<Linear>,
    pub out: Linear,
    pub next: Linear,
}

/// [`run`] with F in its own precision (f32 coefficients are cast here, once per frame).
pub(crate) fn run_step<I: Pixel, O: OutPixel>(
    input: &[I],
    ops: &PointOps<'_>,
    filter: Option<FilterStep<'_>>,
    out: Option<&mut [O]>,
) {
    let Some(s) = filter else {
        return run::<I, O, f64>(input, ops, None, out);
    };
    match s.f {
        FilterArray::F64(f) => {
            let fo = FilterOps {
                f: &mut f[..],
                init: s.init,
                reset: s.reset,
                out: s.out,
                next: s.next,
            };
            run(input, ops, Some(fo), out);
        }
        FilterArray::F32(f) => {
            let fo = FilterOps {
                f: &mut f[..],
                init: s.init,
                reset: s.reset.map(Linear::cast),
                out: s.out.cast(),
                next: s.next.cast(),
            };
            run(input, ops, Some(fo), out);
        }
    }
}

/// Runs steps 1–5 over `input`, writing the converted result to `out` when given (an
/// "Array N only" frame that is not emitted still updates F). Slices are walked in lockstep;
/// the caller makes them the same length.
///
/// The same code is compiled twice: for the baseline target and, chosen at run time, for
/// AVX2+FMA (four f64 or eight f32 per instruction and a vectorised float→integer
/// conversion: ≈2× faster).
pub(crate) fn run<I: Pixel, O: OutPixel, R: Real>(
    input: &[I],
    ops: &PointOps<'_>,
    filter: Option<FilterOps<'_, R>>,
    out: Option<&mut [O]>,
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: run_avx2 only requires AVX2 and FMA, which the CPU was just seen to have.
        unsafe { run_avx2(input, ops, filter, out) };
        return;
    }
    run_impl::<I, O, R, false>(input, ops, filter, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn run_avx2<I: Pixel, O: OutPixel, R: Real>(
    input: &[I],
    ops: &PointOps<'_>,
    filter: Option<FilterOps<'_, R>>,
    out: Option<&mut [O]>,
) {
    run_impl::<I, O, R, true>(input, ops, filter, out);
}

/// `V`: use the vectorisable conversion (only where AVX2 is enabled). Rust never contracts
/// `a·b + c` into an FMA, so both builds round alike.
#[inline(always)]
fn run_impl<I: Pixel, O: OutPixel, R: Real, const V: bool>(
    input: &[I],
    ops: &PointOps<'_>,
    filter: Option<FilterOps<'_, R>>,
    out: Option<&mut [O]>,
) {
    match filter {
        Some(fo) if ops.is_identity() && !fo.init && fo.reset.is_none() => {
            let dense = fo.next.is_dense();
            match out {
                Some(out) if fo.out == fo.next && dense => {
                    let done = if V {
                        // SAFETY: V is true only in run_avx2, which `run` calls after
                        // detecting AVX2.
                        unsafe { fused_avx2::fused_same_dense(input, fo.f, &fo.next, out) }
                    } else {
                        0
                    };
                    let (input, f, out) = (&input[done..], &mut fo.f[done..], &mut out[done..]);
                    fused_same::<I, O, R, true, V>(input, f, fo.next, out)
                }
                Some(out) if fo.out == fo.next => {
                    fused_same::<I, O, R, false, V>(input, fo.f, fo.next, out)
                }
                Some(out) => fused::<I, O, R, V>(input, fo.f, fo.out, fo.next, out),
                None if dense => fused_filter_only::<I, R, true>(input, fo.f, fo.next),
                None => fused_filter_only::<I, R, false>(input, fo.f, fo.next),
            }
        }
        filter => general::<I, O, R, V>(input, ops, filter, out),
    }
}

/// Pixels per tile of [`fused`]: a tile's values stay in registers between the load,
/// filter and store stages, so each stage vectorises (≈10 % faster than one zipped loop there
/// on x86-64 baseline). On SSE2 the float→integer conversion stays scalar (LLVM does not
/// vectorise saturating `as` casts, and [`trunc_sat`] measured slower there); it is about
/// half of the hot loop's time.
const TILE: usize = 16;

/// The hot path: filter only, output and next filter with different coefficients.
#[inline(always)]
fn fused<I: Pixel, O: OutPixel, R: Real, const V: bool>(
    input: &[I],
    f: &mut [R],
    o: Linear<R>,
    n: Linear<R>,
    out: &mut [O],
) {
    let mut xs = input.chunks_exact(TILE);
    let mut fs = f.chunks_exact_mut(TILE);
    let mut ys = out.chunks_exact_mut(TILE);
    for ((x, f), y) in (&mut xs).zip(&mut fs).zip(&mut ys) {
        let mut t = [R::default(); TILE];
        load(x, &mut t);
        for (v, f) in t.iter_mut().zip(f.iter_mut()) {
            let old = *f;
            *f = n.eval(old, *v);
            *v = o.eval(old, *v);
        }
        store::<O, R, V>(&t, y);
    }
    let (x, f, y) = (xs.remainder(), fs.into_remainder(), ys.into_remainder());
    for ((x, f), y) in x.iter().zip(f.iter_mut()).zip(y.iter_mut()) {
        let (v, old) = (R::from_pixel(*x), *f);
        *f = n.eval(old, v);
        *y = o.eval(old, v).to_out::<O, V>();
    }
}

/// The hot path when O and F share coefficients (RecursiveAve, Average, Sum, CopyToFilter):
/// the output is the new filter value, computed once. A plain zipped loop: tiling measured
/// slower here (the compiler then assembles the scalar f64→int results into vectors).
#[inline(always)]
fn fused_same<I: Pixel, O: OutPixel, R: Real, const DENSE: bool, const V: bool>(
    input: &[I],
    f: &mut [R],
    n: Linear<R>,
    out: &mut [O],
) {
    for ((x, f), y) in input.iter().zip(f.iter_mut()).zip(out.iter_mut()) {
        let nf = n.eval_as::<DENSE>(*f, R::from_pixel(*x));
        *f = nf;
        *y = nf.to_out::<O, V>();
    }
}

/// A frame that is filtered but not emitted.
#[inline(always)]
fn fused_filter_only<I: Pixel, R: Real, const DENSE: bool>(input: &[I], f: &mut [R], n: Linear<R>) {
    for (x, f) in input.iter().zip(f.iter_mut()) {
        *f = n.eval_as::<DENSE>(*f, R::from_pixel(*x));
    }
}

/// Every other combination, chunk by chunk through a stack buffer. With point operations
/// and an f32 filter, steps 1–4 run in f64 (`wide`) and the result is narrowed for step 5.
#[inline(always)]
fn general<I: Pixel, O: OutPixel, R: Real, const V: bool>(
    input: &[I],
    ops: &PointOps<'_>,
    mut filter: Option<FilterOps<'_, R>>,
    mut out: Option<&mut [O]>,
) {
    let point = !ops.is_identity();
    let mut tmp = [R::default(); CHUNK];
    let mut wide = [0.0f64; CHUNK];
    for (k, x) in input.chunks(CHUNK).enumerate() {
        let start = k * CHUNK;
        let end = start + x.len();
        let t = &mut tmp[..x.len()];
        if point {
            R::load_point_ops(x, t, &mut wide[..x.len()], ops, start, end);
        } else {
            load(x, t);
        }
        if let Some(fo) = filter.as_mut() {
            if let Some(f) = fo.f.get_mut(start..end) {
                filter_chunk(t, f, fo.init, fo.reset, fo.out, fo.next);
            }
        }
        if let Some(y) = out.as_deref_mut().and_then(|o| o.get_mut(start..end)) {
            store::<O, R, V>(t, y);
        }
    }
}

#[inline(always)]
fn load<I: Pixel, R: Real>(x: &[I], t: &mut [R]) {
    for (d, s) in t.iter_mut().zip(x) {
        *d = R::from_pixel(*s);
    }
}

#[inline(always)]
fn store<O: OutPixel, R: Real, const V: bool>(t: &[R], y: &mut [O]) {
    for (d, s) in y.iter_mut().zip(t) {
        *d = s.to_out::<O, V>();
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
fn filter_chunk<R: Real>(
    t: &mut [R],
    f: &mut [R],
    init: bool,
    reset: Option<Linear<R>>,
    out: Linear<R>,
    next: Linear<R>,
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

mod fused_avx2;

#[cfg(test)]
mod tests;
