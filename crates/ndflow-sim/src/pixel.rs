//! The arithmetic the simulator needs on top of [`Pixel`]: the C semantics areaDetector's
//! simDetector relies on (integer types wrap, doubles are cast like a C cast on x86), and
//! a small PRNG.

use ndflow_core::Pixel;

/// Wrapping arithmetic per pixel type. simDetector computes in the output type, so an
/// 8-bit ramp wraps every 256 counts: those wraps are the "moving bands" users expect.
pub(crate) trait SimPixel: Pixel {
    /// `a + b`, wrapping for integers.
    fn wadd(self, other: Self) -> Self;
    /// `self * k`, wrapping for integers (k frames of a per-frame increment).
    fn wmul_count(self, k: u64) -> Self;
    /// A C cast from double as x86 compilers emit it: integers keep the low bits of the
    /// truncated value (so 300.0 as UInt8 is 44 and -1.0 is 255); NaN becomes 0.
    fn from_f64_wrap(v: f64) -> Self;
    /// [`SimPixel::from_f64_wrap`] for |v| < 2^31 (checked by the caller): the same bits
    /// through an i32 cast, which vectorises where the i64 one does not.
    fn from_f64_wrap_i32(v: f64) -> Self;
}

macro_rules! impl_small_int {
    ($($t:ty),*) => {$(
        impl SimPixel for $t {
            #[inline(always)]
            fn wadd(self, other: Self) -> Self {
                self.wrapping_add(other)
            }
            #[inline(always)]
            fn wmul_count(self, k: u64) -> Self {
                self.wrapping_mul(k as $t)
            }
            #[inline(always)]
            fn from_f64_wrap(v: f64) -> Self {
                // Any value within i64 truncates exactly, then keeps its low bits.
                (v as i64) as $t
            }
            #[inline(always)]
            fn from_f64_wrap_i32(v: f64) -> Self {
                (v as i32) as $t
            }
        }
    )*};
}
impl_small_int!(i8, u8, i16, u16, i32, u32, i64);

impl SimPixel for u64 {
    #[inline(always)]
    fn wadd(self, other: Self) -> Self {
        self.wrapping_add(other)
    }
    #[inline(always)]
    fn wmul_count(self, k: u64) -> Self {
        self.wrapping_mul(k)
    }
    #[inline(always)]
    fn from_f64_wrap_i32(v: f64) -> Self {
        (v as i32) as u64
    }
    #[inline(always)]
    fn from_f64_wrap(v: f64) -> Self {
        if v >= 0.0 {
            v as u64
        } else {
            (v as i64) as u64
        }
    }
}

macro_rules! impl_float {
    ($($t:ty),*) => {$(
        impl SimPixel for $t {
            #[inline(always)]
            fn wadd(self, other: Self) -> Self {
                self + other
            }
            #[inline(always)]
            fn wmul_count(self, k: u64) -> Self {
                self * k as $t
            }
            #[inline(always)]
            fn from_f64_wrap(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_f64_wrap_i32(v: f64) -> Self {
                v as $t
            }
        }
    )*};
}
impl_float!(f32, f64);

/// xorshift64* (Vigna): a few instructions per number, plenty for simulated noise.
/// Seeded with a constant so that runs are reproducible (simDetector's `rand()` is never
/// seeded either).
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    #[inline(always)]
    pub(crate) fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, 1).
    #[inline(always)]
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [0, n); 0 when n is 0.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        ((self.unit() * n as f64) as usize).min(n.saturating_sub(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_cast_semantics() {
        assert_eq!(u8::from_f64_wrap(300.0), 44);
        assert_eq!(u8::from_f64_wrap(-1.0), 255);
        assert_eq!(u8::from_f64_wrap(-0.5), 0);
        assert_eq!(i8::from_f64_wrap(200.0), -56);
        assert_eq!(u16::from_f64_wrap(70000.7), 4464);
        assert_eq!(u64::from_f64_wrap(-2.0), u64::MAX - 1);
        assert_eq!(u32::from_f64_wrap(f64::NAN), 0);
        assert_eq!(f32::from_f64_wrap(1.5), 1.5);
        for v in [
            -70000.9, -300.0, -1.5, -0.5, 0.0, 0.7, 255.9, 300.0, 70000.7, 2.1e9,
        ] {
            assert_eq!(u8::from_f64_wrap_i32(v), u8::from_f64_wrap(v));
            assert_eq!(i16::from_f64_wrap_i32(v), i16::from_f64_wrap(v));
            assert_eq!(u32::from_f64_wrap_i32(v), u32::from_f64_wrap(v));
            assert_eq!(i64::from_f64_wrap_i32(v), i64::from_f64_wrap(v));
            assert_eq!(u64::from_f64_wrap_i32(v), u64::from_f64_wrap(v));
        }
        assert_eq!(250u8.wadd(10), 4);
        assert_eq!(3u8.wmul_count(100), 44);
        assert_eq!((-3i16).wmul_count(3), -9);
        assert_eq!(2.5f64.wmul_count(4), 10.0);
    }

    #[test]
    fn rng_range() {
        let mut r = Rng::new(7);
        for _ in 0..10_000 {
            let u = r.unit();
            assert!((0.0..1.0).contains(&u));
            assert!(r.below(10) < 10);
        }
        assert_eq!(r.below(0), 0);
    }
}
