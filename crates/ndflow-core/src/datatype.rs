//! The ten areaDetector pixel types and the [`Pixel`] trait that pixel kernels are generic over.

use num_traits::AsPrimitive;

use crate::CoreError;

/// NDDataType_t, in areaDetector's order (the index is the enum value on the wire and in PVs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum DataType {
    Int8 = 0,
    #[default]
    UInt8 = 1,
    Int16 = 2,
    UInt16 = 3,
    Int32 = 4,
    UInt32 = 5,
    Int64 = 6,
    UInt64 = 7,
    Float32 = 8,
    Float64 = 9,
}

impl DataType {
    pub const ALL: [DataType; 10] = [
        DataType::Int8,
        DataType::UInt8,
        DataType::Int16,
        DataType::UInt16,
        DataType::Int32,
        DataType::UInt32,
        DataType::Int64,
        DataType::UInt64,
        DataType::Float32,
        DataType::Float64,
    ];
    /// The enum strings of the DataType PV, index = enum value.
    pub const NAMES: [&'static str; 10] = [
        "Int8", "UInt8", "Int16", "UInt16", "Int32", "UInt32", "Int64", "UInt64", "Float32",
        "Float64",
    ];

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    pub fn from_index(i: i64) -> Option<DataType> {
        usize::try_from(i)
            .ok()
            .and_then(|i| Self::ALL.get(i).copied())
    }

    pub fn from_name(s: &str) -> Result<DataType, CoreError> {
        Self::NAMES
            .iter()
            .position(|n| *n == s)
            .map(|i| Self::ALL[i])
            .ok_or_else(|| CoreError::UnknownDataType(s.to_string()))
    }

    pub fn size(self) -> usize {
        match self {
            DataType::Int8 | DataType::UInt8 => 1,
            DataType::Int16 | DataType::UInt16 => 2,
            DataType::Int32 | DataType::UInt32 | DataType::Float32 => 4,
            DataType::Int64 | DataType::UInt64 | DataType::Float64 => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, DataType::Float32 | DataType::Float64)
    }

    /// Smallest and largest representable value, as f64 (used for clamping and auto-scaling).
    pub fn range(self) -> (f64, f64) {
        crate::with_pixel_type!(self, T => (T::MIN_F64, T::MAX_F64))
    }
}

impl std::fmt::Display for DataType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A pixel element type. Kernels are written once, generic over `T: Pixel`, and monomorphised
/// per type through [`with_pixel_type!`](crate::with_pixel_type).
pub trait Pixel:
    bytemuck::Pod
    + Copy
    + Send
    + Sync
    + PartialOrd
    + Default
    + std::fmt::Debug
    + AsPrimitive<f64>
    + AsPrimitive<i8>
    + AsPrimitive<u8>
    + AsPrimitive<i16>
    + AsPrimitive<u16>
    + AsPrimitive<i32>
    + AsPrimitive<u32>
    + AsPrimitive<i64>
    + AsPrimitive<u64>
    + AsPrimitive<f32>
    + 'static
{
    const DATA_TYPE: DataType;
    const MIN_F64: f64;
    const MAX_F64: f64;
    /// Wrapping add of a small integer step (ramp generators); floats add normally.
    fn wrapping_add_f64(self, step: f64) -> Self;
    fn to_f64(self) -> f64 {
        self.as_()
    }
    /// `as` semantics: floats saturate into integer types, NaN becomes 0.
    fn from_f64(v: f64) -> Self;
}

macro_rules! impl_pixel_int {
    ($($t:ty => $dt:ident),*) => {$(
        impl Pixel for $t {
            const DATA_TYPE: DataType = DataType::$dt;
            const MIN_F64: f64 = <$t>::MIN as f64;
            const MAX_F64: f64 = <$t>::MAX as f64;
            #[inline(always)]
            fn wrapping_add_f64(self, step: f64) -> Self {
                self.wrapping_add(step as i64 as $t)
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self { v as $t }
        }
    )*};
}
impl_pixel_int!(i8 => Int8, u8 => UInt8, i16 => Int16, u16 => UInt16, i32 => Int32,
    u32 => UInt32, i64 => Int64, u64 => UInt64);

macro_rules! impl_pixel_float {
    ($($t:ty => $dt:ident),*) => {$(
        impl Pixel for $t {
            const DATA_TYPE: DataType = DataType::$dt;
            const MIN_F64: f64 = <$t>::MIN as f64;
            const MAX_F64: f64 = <$t>::MAX as f64;
            #[inline(always)]
            fn wrapping_add_f64(self, step: f64) -> Self { self + step as $t }
            #[inline(always)]
            fn from_f64(v: f64) -> Self { v as $t }
        }
    )*};
}
impl_pixel_float!(f32 => Float32, f64 => Float64);

/// Runs `$body` with the type alias `$T` bound to the Rust type of the runtime [`DataType`].
///
/// ```
/// use ndflow_core::{with_pixel_type, DataType, Pixel};
/// let bytes = with_pixel_type!(DataType::UInt16, T => std::mem::size_of::<T>());
/// assert_eq!(bytes, 2);
/// ```
#[macro_export]
macro_rules! with_pixel_type {
    ($dt:expr, $T:ident => $body:expr) => {
        match $dt {
            $crate::DataType::Int8 => {
                #[allow(dead_code)]
                type $T = i8;
                $body
            }
            $crate::DataType::UInt8 => {
                #[allow(dead_code)]
                type $T = u8;
                $body
            }
            $crate::DataType::Int16 => {
                #[allow(dead_code)]
                type $T = i16;
                $body
            }
            $crate::DataType::UInt16 => {
                #[allow(dead_code)]
                type $T = u16;
                $body
            }
            $crate::DataType::Int32 => {
                #[allow(dead_code)]
                type $T = i32;
                $body
            }
            $crate::DataType::UInt32 => {
                #[allow(dead_code)]
                type $T = u32;
                $body
            }
            $crate::DataType::Int64 => {
                #[allow(dead_code)]
                type $T = i64;
                $body
            }
            $crate::DataType::UInt64 => {
                #[allow(dead_code)]
                type $T = u64;
                $body
            }
            $crate::DataType::Float32 => {
                #[allow(dead_code)]
                type $T = f32;
                $body
            }
            $crate::DataType::Float64 => {
                #[allow(dead_code)]
                type $T = f64;
                $body
            }
        }
    };
}

/// Element-wise `as` conversion (C cast semantics for integers, saturating for float→int).
/// Lengths must match; the shorter length is used otherwise.
#[inline]
pub fn convert_slice<S, D>(src: &[S], dst: &mut [D])
where
    S: Pixel + AsPrimitive<D>,
    D: Pixel,
{
    for (d, s) in dst.iter_mut().zip(src) {
        *d = s.as_();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for (i, dt) in DataType::ALL.iter().enumerate() {
            assert_eq!(DataType::from_name(dt.name()).unwrap(), *dt);
            assert_eq!(DataType::from_index(i as i64), Some(*dt));
            assert_eq!(with_pixel_type!(*dt, T => T::DATA_TYPE), *dt);
            assert_eq!(
                with_pixel_type!(*dt, T => std::mem::size_of::<T>()),
                dt.size()
            );
        }
        assert!(DataType::from_name("UInt9").is_err());
        assert_eq!(DataType::from_index(10), None);
    }

    #[test]
    fn conversion_has_c_cast_semantics() {
        let src: [i32; 3] = [-1, 256, 1000];
        let mut dst = [0u8; 3];
        convert_slice(&src, &mut dst);
        assert_eq!(dst, [255, 0, 232]);
        let f = [-5.5f64, 300.7, f64::NAN];
        let mut d8 = [0u8; 3];
        convert_slice(&f, &mut d8);
        assert_eq!(d8, [0, 255, 0]);
        assert_eq!(250u8.wrapping_add_f64(10.0), 4);
    }
}
