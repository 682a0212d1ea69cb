//! The frame: [`NDArray`] metadata plus a shared pixel [`Buffer`].

use std::time::{SystemTime, UNIX_EPOCH};

use crate::{AttrValue, Buffer, CoreError, DataType, NDAttribute, Pixel};

pub const MAX_DIMS: usize = 10;
/// Seconds from 1970-01-01 (POSIX) to 1990-01-01 (EPICS epoch).
pub const POSIX_TO_EPICS_EPOCH: f64 = 631_152_000.0;

/// One dimension. `offset` is in unbinned, un-reversed detector pixels and, like `binning`
/// and `reverse`, cumulative through ROI chains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dim {
    pub size: usize,
    pub offset: usize,
    pub binning: usize,
    pub reverse: bool,
}

impl Dim {
    pub fn new(size: usize) -> Dim {
        Dim {
            size,
            offset: 0,
            binning: 1,
            reverse: false,
        }
    }
}

/// EPICS timestamp: seconds since 1990-01-01 and nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PartialOrd, Ord)]
pub struct EpicsTimeStamp {
    pub sec: u32,
    pub nsec: u32,
}

impl EpicsTimeStamp {
    pub fn now() -> EpicsTimeStamp {
        let d = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        EpicsTimeStamp {
            sec: d.as_secs().saturating_sub(POSIX_TO_EPICS_EPOCH as u64) as u32,
            nsec: d.subsec_nanos(),
        }
    }
    pub fn as_f64(self) -> f64 {
        self.sec as f64 + self.nsec as f64 * 1e-9
    }
}

/// Compression descriptor. An empty `name` means uncompressed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Codec {
    pub name: String,
    pub level: i32,
    pub shuffle: i32,
    pub compressor: i32,
}

impl Codec {
    pub fn is_compressed(&self) -> bool {
        !self.name.is_empty()
    }
}

/// NDColorMode_t; travels as the Int32 attribute `ColorMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ColorMode {
    #[default]
    Mono = 0,
    Bayer = 1,
    RGB1 = 2,
    RGB2 = 3,
    RGB3 = 4,
    YUV444 = 5,
    YUV422 = 6,
    /// NDColorModeYUV411; areaDetector's menus call it "YUV421", and so do ours.
    YUV411 = 7,
}

impl ColorMode {
    pub const NAMES: [&'static str; 8] = [
        "Mono", "Bayer", "RGB1", "RGB2", "RGB3", "YUV444", "YUV422", "YUV421",
    ];
    pub const ALL: [ColorMode; 8] = [
        ColorMode::Mono,
        ColorMode::Bayer,
        ColorMode::RGB1,
        ColorMode::RGB2,
        ColorMode::RGB3,
        ColorMode::YUV444,
        ColorMode::YUV422,
        ColorMode::YUV411,
    ];
    pub fn from_index(i: i64) -> Option<ColorMode> {
        usize::try_from(i)
            .ok()
            .and_then(|i| Self::ALL.get(i).copied())
    }
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// NDBayerPattern_t; travels as the Int32 attribute `BayerPattern`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BayerPattern {
    #[default]
    RGGB = 0,
    GBRG = 1,
    GRBG = 2,
    BGGR = 3,
}

impl BayerPattern {
    pub const NAMES: [&'static str; 4] = ["RGGB", "GBRG", "GRBG", "BGGR"];
}

/// Derived layout facts (NDArrayInfo): which dim is x, y and colour, with strides in elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArrayInfo {
    pub n_elements: usize,
    pub bytes_per_element: usize,
    pub total_bytes: usize,
    pub color_mode: ColorMode,
    pub x_dim: usize,
    pub y_dim: usize,
    pub color_dim: usize,
    pub x_size: usize,
    pub y_size: usize,
    pub color_size: usize,
    pub x_stride: usize,
    pub y_stride: usize,
    pub color_stride: usize,
}

/// An N-dimensional frame. Immutable once published (shared as `Arc<NDArray>`); clone the
/// struct to change metadata: the pixels stay shared.
#[derive(Debug, Clone)]
pub struct NDArray {
    pub dims: Vec<Dim>,
    /// For compressed frames: the uncompressed type.
    pub data_type: DataType,
    pub unique_id: i32,
    /// Seconds, EPICS epoch.
    pub time_stamp: f64,
    pub epics_ts: EpicsTimeStamp,
    pub attributes: Vec<NDAttribute>,
    pub codec: Codec,
    /// Bytes of valid data in `buffer` (compressed length, or the full size when uncompressed).
    pub compressed_size: usize,
    pub buffer: Buffer,
}

impl NDArray {
    /// A frame of shape `sizes` (dims[0] fastest) over `buffer`, which must hold the pixels.
    pub fn new(sizes: &[usize], data_type: DataType, buffer: Buffer) -> Result<NDArray, CoreError> {
        if sizes.is_empty() || sizes.len() > MAX_DIMS {
            return Err(CoreError::BadDims(sizes.len()));
        }
        let need = sizes.iter().product::<usize>() * data_type.size();
        if buffer.len() < need {
            return Err(CoreError::ShortBuffer {
                have: buffer.len(),
                need,
            });
        }
        Ok(NDArray {
            dims: sizes.iter().map(|&s| Dim::new(s)).collect(),
            data_type,
            unique_id: 0,
            time_stamp: 0.0,
            epics_ts: EpicsTimeStamp::default(),
            attributes: Vec::new(),
            codec: Codec::default(),
            compressed_size: need,
            buffer,
        })
    }

    /// A frame holding a copy of `data` in a buffer from `pool` (tests, examples, network input).
    pub fn from_pixels<T: Pixel>(
        pool: &crate::Pool,
        sizes: &[usize],
        data: &[T],
    ) -> Result<NDArray, CoreError> {
        let mut buf = pool.alloc(std::mem::size_of_val(data))?;
        buf.as_mut_slice::<T>().copy_from_slice(data);
        NDArray::new(sizes, T::DATA_TYPE, buf.freeze())
    }

    /// Same metadata over other pixels (a plugin's output). Sizes are taken from `self.dims`.
    pub fn with_buffer(&self, data_type: DataType, buffer: Buffer) -> NDArray {
        let mut out = self.clone();
        out.data_type = data_type;
        out.compressed_size = out.n_elements() * data_type.size();
        out.buffer = buffer;
        out.codec = Codec::default();
        out
    }

    pub fn ndims(&self) -> usize {
        self.dims.len()
    }

    pub fn sizes(&self) -> Vec<usize> {
        self.dims.iter().map(|d| d.size).collect()
    }

    pub fn n_elements(&self) -> usize {
        self.dims.iter().map(|d| d.size).product()
    }

    /// Uncompressed size in bytes.
    pub fn total_bytes(&self) -> usize {
        self.n_elements() * self.data_type.size()
    }

    pub fn is_compressed(&self) -> bool {
        self.codec.is_compressed()
    }

    /// The pixels as `&[T]`; an error when `T` is not the frame's type or it is compressed.
    pub fn pixels<T: Pixel>(&self) -> Result<&[T], CoreError> {
        if self.is_compressed() {
            return Err(CoreError::Compressed(self.codec.name.clone()));
        }
        if T::DATA_TYPE != self.data_type {
            return Err(CoreError::TypeMismatch {
                actual: self.data_type.name(),
                wanted: T::DATA_TYPE.name(),
            });
        }
        let n = self.n_elements();
        let all = self.buffer.as_slice::<T>();
        all.get(..n).ok_or(CoreError::ShortBuffer {
            have: self.buffer.len(),
            need: n * std::mem::size_of::<T>(),
        })
    }

    /// Raw bytes of the data (compressed stream when compressed).
    pub fn data_bytes(&self) -> &[u8] {
        let n = self.compressed_size.min(self.buffer.len());
        &self.buffer[..n]
    }

    pub fn attribute(&self, name: &str) -> Option<&NDAttribute> {
        self.attributes.iter().find(|a| a.name == name)
    }

    /// Adds or replaces (names are unique).
    pub fn set_attribute(&mut self, attr: NDAttribute) {
        match self.attributes.iter_mut().find(|a| a.name == attr.name) {
            Some(a) => *a = attr,
            None => self.attributes.push(attr),
        }
    }

    pub fn color_mode(&self) -> ColorMode {
        self.attribute("ColorMode")
            .and_then(|a| a.value.as_f64())
            .and_then(|v| ColorMode::from_index(v as i64))
            .unwrap_or_default()
    }

    pub fn set_color_mode(&mut self, mode: ColorMode) {
        self.set_attribute(NDAttribute::new(
            "ColorMode",
            "Color mode",
            AttrValue::Int32(mode as i32),
        ));
    }

    /// Sets both timestamps from the current time (updateTimeStamps).
    pub fn stamp_now(&mut self) {
        self.epics_ts = EpicsTimeStamp::now();
        self.time_stamp = self.epics_ts.as_f64();
    }

    /// Layout facts; colour modes other than Mono/Bayer need 3 dims with one of size 3.
    pub fn info(&self) -> ArrayInfo {
        let n = self.ndims();
        let mut cm = self.color_mode();
        let size = |i: usize| self.dims.get(i).map_or(1, |d| d.size);
        let (x_dim, y_dim, color_dim) = match cm {
            ColorMode::RGB1 if n == 3 && size(0) == 3 => (1, 2, 0),
            ColorMode::RGB2 if n == 3 && size(1) == 3 => (0, 2, 1),
            ColorMode::RGB3 if n == 3 && size(2) == 3 => (0, 1, 2),
            _ => {
                if matches!(cm, ColorMode::RGB1 | ColorMode::RGB2 | ColorMode::RGB3) {
                    cm = ColorMode::Mono;
                }
                (0, 1, usize::MAX)
            }
        };
        let mut strides = [1usize; MAX_DIMS + 1];
        for i in 1..=n {
            strides[i] = strides[i - 1] * size(i - 1);
        }
        let stride = |d: usize| if d < n { strides[d] } else { 0 };
        let color_size = if color_dim == usize::MAX {
            1
        } else {
            size(color_dim)
        };
        ArrayInfo {
            n_elements: self.n_elements(),
            bytes_per_element: self.data_type.size(),
            total_bytes: self.total_bytes(),
            color_mode: cm,
            x_dim,
            y_dim,
            color_dim,
            x_size: size(x_dim),
            y_size: if n > 1 { size(y_dim) } else { 1 },
            color_size,
            x_stride: stride(x_dim),
            y_stride: stride(y_dim),
            color_stride: if color_dim == usize::MAX {
                0
            } else {
                stride(color_dim)
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Pool;

    fn frame(sizes: &[usize], dt: DataType) -> NDArray {
        let pool = Pool::unlimited();
        let n: usize = sizes.iter().product();
        let buf = pool.alloc(n * dt.size()).unwrap().freeze();
        NDArray::new(sizes, dt, buf).unwrap()
    }

    #[test]
    fn metadata_change_shares_pixels() {
        let f = frame(&[4, 3], DataType::UInt16);
        let mut g = f.clone();
        g.set_attribute(NDAttribute::new("A", "", AttrValue::Float64(1.5)));
        assert!(f.buffer.ptr_eq(&g.buffer));
        assert!(f.attribute("A").is_none());
        assert_eq!(g.attribute("A").unwrap().value.as_f64(), Some(1.5));
    }

    #[test]
    fn pixels_checks_type_and_codec() {
        let mut f = frame(&[4, 3], DataType::UInt16);
        assert_eq!(f.pixels::<u16>().unwrap().len(), 12);
        assert!(f.pixels::<u8>().is_err());
        f.codec.name = "lz4".into();
        assert!(matches!(f.pixels::<u16>(), Err(CoreError::Compressed(_))));
    }

    #[test]
    fn rejects_bad_dims_and_short_buffers() {
        let buf = Buffer::from_bytes(&[0; 8]);
        assert!(NDArray::new(&[], DataType::UInt8, buf.clone()).is_err());
        assert!(NDArray::new(&[1; 11], DataType::UInt8, buf.clone()).is_err());
        assert!(NDArray::new(&[3, 3], DataType::UInt8, buf).is_err());
    }

    #[test]
    fn info_for_color_modes() {
        let mut f = frame(&[3, 5, 4], DataType::UInt8);
        f.set_color_mode(ColorMode::RGB1);
        let i = f.info();
        assert_eq!((i.x_size, i.y_size, i.color_size), (5, 4, 3));
        assert_eq!((i.x_stride, i.y_stride, i.color_stride), (3, 15, 1));
        let mut g = frame(&[5, 3, 4], DataType::UInt8);
        g.set_color_mode(ColorMode::RGB2);
        let i = g.info();
        assert_eq!((i.x_stride, i.y_stride, i.color_stride), (1, 15, 5));
        let mut h = frame(&[5, 4, 3], DataType::UInt8);
        h.set_color_mode(ColorMode::RGB3);
        let i = h.info();
        assert_eq!((i.x_stride, i.y_stride, i.color_stride), (1, 5, 20));
        let m = frame(&[5, 4], DataType::UInt8);
        assert_eq!(m.info().color_mode, ColorMode::Mono);
    }
}
