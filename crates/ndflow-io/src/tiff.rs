//! NDFileTIFF: one frame per file through the `tiff` crate, uncompressed, one strip.
//!
//! - All 10 types: SampleFormat Int/Uint/IEEEFP with 8/16/32/64 bits. The crate's built-in
//!   colour types lack signed RGB, so the colour types here are our own (generic over the
//!   sample type), which the crate allows.
//! - Mono (1-D as one row, 2-D) and RGB1/RGB2/RGB3 (3-D with the colour dim of size 3 where
//!   ColorMode says). RGB2/RGB3 are converted to pixel-interleaved (PlanarConfig = 1) for the
//!   file. areaDetector writes them planar (PlanarConfig = 2); readers see the same RGB image,
//!   but tifffile returns (3, Y, X) for planar files and (Y, X, 3) for ours.
//! - Tags as NDFileTIFF writes them: 65000 timeStamp (DOUBLE), 65001 uniqueId, 65002 epicsTS
//!   sec, 65003 epicsTS nsec (LONG); every defined attribute as an ASCII tag from 65010 up to
//!   65535, the string `name:value` (integers in decimal, floats `%f`, strings as they are);
//!   Model/Make from the Model/Manufacturer attributes ("Unknown" without), Software
//!   "EPICS areaDetector", ImageDescription from the TIFFImageDescription attribute.

use std::fs::File;
use std::io::{self, BufWriter, Seek, Write};
use std::marker::PhantomData;
use std::path::Path;

use ndflow_core::{
    with_pixel_type, AttrValue, ColorMode, NDArray, ParamDef, ParamStore, Pixel, Pool,
};
use tiff::encoder::colortype::ColorType;
use tiff::encoder::{DirectoryEncoder, TiffEncoder, TiffKind, TiffValue};
use tiff::tags::{PhotometricInterpretation, SampleFormat, Tag};
use tiff::TiffError;

use ndflow_runtime::{Built, PortType};

use crate::file::{FileWriterPlugin, Format};

pub mod read;
pub mod tags;

pub use tags::{
    TAG_EPICS_TS_NSEC, TAG_EPICS_TS_SEC, TAG_FIRST_ATTRIBUTE, TAG_LAST_ATTRIBUTE, TAG_TIMESTAMP,
    TAG_UNIQUE_ID,
};

ndflow_core::params! {
    /// NDFileTIFF's own parameters: only the FileFormat menu.
    pub const TIFF_OWN_PARAMS, pub struct TiffParams {
        file_format: enumeration("FileFormat", &["TIFF", "Invalid"], 0).mbb().readback_choices(&["TIFF", "Undefined"]).doc("File format (TIFF only)"),
    }
}

/// NDFileTIFF has no parameters beyond NDFile's.
pub const TIFF_PARAMS: &[ParamDef] = crate::ndfile_params!("%s%s_%3.3d.tif"; TIFF_OWN_PARAMS);

/// The NDFileTIFF plugin: `TiffFilePlugin::new()`.
pub type TiffFilePlugin = FileWriterPlugin<TiffFormat>;

/// How a frame maps onto the TIFF image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TiffLayout {
    Mono {
        width: usize,
        height: usize,
    },
    Rgb {
        width: usize,
        height: usize,
        mode: ColorMode,
    },
}

/// The image layout of `frame`, or an error naming what is not writable.
pub fn layout(frame: &NDArray) -> io::Result<TiffLayout> {
    let s = frame.sizes();
    let mode = frame.color_mode();
    let l = match (s.as_slice(), mode) {
        ([3, w, h], ColorMode::RGB1)
        | ([w, 3, h], ColorMode::RGB2)
        | ([w, h, 3], ColorMode::RGB3) => TiffLayout::Rgb {
            width: *w,
            height: *h,
            mode,
        },
        ([w], _) => TiffLayout::Mono {
            width: *w,
            height: 1,
        },
        ([w, h], _) => TiffLayout::Mono {
            width: *w,
            height: *h,
        },
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "unsupported array structure for TIFF: dims {s:?} with ColorMode {}",
                    mode.name()
                ),
            ))
        }
    };
    let (w, h) = match l {
        TiffLayout::Mono { width, height } | TiffLayout::Rgb { width, height, .. } => {
            (width, height)
        }
    };
    if w == 0 || h == 0 || u32::try_from(w).is_err() || u32::try_from(h).is_err() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("TIFF image size {w}x{h} out of range"),
        ));
    }
    Ok(l)
}

/// A sample type with its TIFF description for mono and RGB images.
pub trait TiffSample: Pixel + TiffValue {
    const MONO_BITS: &'static [u16];
    const RGB_BITS: &'static [u16];
    const MONO_FORMAT: &'static [SampleFormat];
    const RGB_FORMAT: &'static [SampleFormat];
}

macro_rules! sample {
    ($t:ty, $bits:expr, $fmt:expr) => {
        impl TiffSample for $t {
            const MONO_BITS: &'static [u16] = &[$bits];
            const RGB_BITS: &'static [u16] = &[$bits, $bits, $bits];
            const MONO_FORMAT: &'static [SampleFormat] = &[$fmt];
            const RGB_FORMAT: &'static [SampleFormat] = &[$fmt, $fmt, $fmt];
        }
    };
}
sample!(i8, 8, SampleFormat::Int);
sample!(u8, 8, SampleFormat::Uint);
sample!(i16, 16, SampleFormat::Int);
sample!(u16, 16, SampleFormat::Uint);
sample!(i32, 32, SampleFormat::Int);
sample!(u32, 32, SampleFormat::Uint);
sample!(i64, 64, SampleFormat::Int);
sample!(u64, 64, SampleFormat::Uint);
sample!(f32, 32, SampleFormat::IEEEFP);
sample!(f64, 64, SampleFormat::IEEEFP);

/// Grey image of `T` samples (BlackIsZero).
pub struct Mono<T>(PhantomData<T>);
/// Pixel-interleaved RGB image of `T` samples.
pub struct Rgb<T>(PhantomData<T>);

impl<T: TiffSample> ColorType for Mono<T> {
    type Inner = T;
    const TIFF_VALUE: PhotometricInterpretation = PhotometricInterpretation::BlackIsZero;
    const BITS_PER_SAMPLE: &'static [u16] = T::MONO_BITS;
    const SAMPLE_FORMAT: &'static [SampleFormat] = T::MONO_FORMAT;
    // No predictor is used: the data go out as they are.
    fn horizontal_predict(row: &[T], result: &mut Vec<T>) {
        result.extend_from_slice(row);
    }
}

impl<T: TiffSample> ColorType for Rgb<T> {
    type Inner = T;
    const TIFF_VALUE: PhotometricInterpretation = PhotometricInterpretation::RGB;
    const BITS_PER_SAMPLE: &'static [u16] = T::RGB_BITS;
    const SAMPLE_FORMAT: &'static [SampleFormat] = T::RGB_FORMAT;
    fn horizontal_predict(row: &[T], result: &mut Vec<T>) {
        result.extend_from_slice(row);
    }
}

/// Numbers formatted as NDFileTIFF's `%lld` / `%f`.
fn attribute_string(name: &str, value: &AttrValue) -> Option<String> {
    let v = match value {
        AttrValue::Int8(v) => v.to_string(),
        AttrValue::UInt8(v) => v.to_string(),
        AttrValue::Int16(v) => v.to_string(),
        AttrValue::UInt16(v) => v.to_string(),
        AttrValue::Int32(v) => v.to_string(),
        AttrValue::UInt32(v) => v.to_string(),
        AttrValue::Int64(v) => v.to_string(),
        // areaDetector reads it as int64 (%lld).
        AttrValue::UInt64(v) => (*v as i64).to_string(),
        AttrValue::Float32(v) => format!("{:.6}", f64::from(*v)),
        AttrValue::Float64(v) => format!("{v:.6}"),
        AttrValue::String(s) => s.clone(),
        AttrValue::Undefined => return None,
    };
    Some(ascii(&format!("{name}:{v}")))
}

/// TIFF ASCII tags hold 7-bit text without NUL: other characters become '?'.
fn ascii(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii() && c != '\0' { c } else { '?' })
        .take(2047)
        .collect()
}

fn string_attr(frame: &NDArray, name: &str) -> Option<String> {
    frame.attribute(name).map(|a| match &a.value {
        AttrValue::String(s) => ascii(s),
        other => other.as_f64().map(|v| v.to_string()).unwrap_or_default(),
    })
}

fn write_tags<W: Write + Seek, K: TiffKind>(
    enc: &mut DirectoryEncoder<'_, W, K>,
    frame: &NDArray,
) -> Result<(), TiffError> {
    enc.write_tag(Tag::Unknown(TAG_TIMESTAMP), frame.time_stamp)?;
    enc.write_tag(Tag::Unknown(TAG_UNIQUE_ID), frame.unique_id as u32)?;
    enc.write_tag(Tag::Unknown(TAG_EPICS_TS_SEC), frame.epics_ts.sec)?;
    enc.write_tag(Tag::Unknown(TAG_EPICS_TS_NSEC), frame.epics_ts.nsec)?;
    let model = string_attr(frame, "Model").unwrap_or_else(|| "Unknown".into());
    let make = string_attr(frame, "Manufacturer").unwrap_or_else(|| "Unknown".into());
    enc.write_tag(Tag::Model, model.as_str())?;
    enc.write_tag(Tag::Make, make.as_str())?;
    enc.write_tag(Tag::Software, "EPICS areaDetector")?;
    if let Some(d) = string_attr(frame, "TIFFImageDescription") {
        enc.write_tag(Tag::ImageDescription, d.as_str())?;
    }
    let strings = frame
        .attributes
        .iter()
        .filter_map(|a| attribute_string(&a.name, &a.value));
    for (tag, s) in (TAG_FIRST_ATTRIBUTE..=TAG_LAST_ATTRIBUTE).zip(strings) {
        enc.write_tag(Tag::Unknown(tag), s.as_str())?;
    }
    Ok(())
}

/// RGB2 (x, c, y) or RGB3 (x, y, c) to pixel-interleaved (c, x, y).
pub(crate) fn interleave<T: Copy>(
    data: &[T],
    width: usize,
    height: usize,
    mode: ColorMode,
) -> Vec<T> {
    let mut out = Vec::with_capacity(width * height * 3);
    let mut push3 = |r: &[T], g: &[T], b: &[T]| {
        for ((r, g), b) in r.iter().zip(g).zip(b) {
            out.extend_from_slice(&[*r, *g, *b]);
        }
    };
    if mode == ColorMode::RGB2 {
        for row in data.chunks_exact(3 * width).take(height) {
            let (r, gb) = row.split_at(width);
            let (g, b) = gb.split_at(width);
            push3(r, g, b);
        }
    } else {
        let mut planes = data.chunks_exact(width * height);
        if let (Some(r), Some(g), Some(b)) = (planes.next(), planes.next(), planes.next()) {
            push3(r, g, b);
        }
    }
    out
}

fn encode<T: TiffSample, W: Write + Seek>(w: &mut W, frame: &NDArray) -> Result<(), TiffError>
where
    [T]: TiffValue,
{
    let data = frame
        .pixels::<T>()
        .map_err(|e| io::Error::other(e.to_string()))?;
    let mut enc = TiffEncoder::new(w)?;
    match layout(frame)? {
        TiffLayout::Mono { width, height } => {
            let mut img = enc.new_image::<Mono<T>>(width as u32, height as u32)?;
            write_tags(img.encoder(), frame)?;
            img.rows_per_strip(height as u32)?;
            img.write_data(data)
        }
        TiffLayout::Rgb {
            width,
            height,
            mode,
        } => {
            let mut img = enc.new_image::<Rgb<T>>(width as u32, height as u32)?;
            write_tags(img.encoder(), frame)?;
            img.rows_per_strip(height as u32)?;
            if mode == ColorMode::RGB1 {
                img.write_data(data)
            } else {
                img.write_data(&interleave(data, width, height, mode))
            }
        }
    }
}

/// Writes `frame` as a TIFF image to `w` (a file, or memory for tests).
pub fn write_tiff<W: Write + Seek>(w: &mut W, frame: &NDArray) -> io::Result<()> {
    if frame.is_compressed() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("TIFF cannot store {}-compressed frames", frame.codec.name),
        ));
    }
    with_pixel_type!(frame.data_type, T => encode::<T, W>(w, frame)).map_err(|e| match e {
        TiffError::IoError(io) => io,
        other => io::Error::other(other.to_string()),
    })
}

/// The TIFF [`Format`]: one file per frame.
#[derive(Default)]
pub struct TiffFormat {
    file: Option<BufWriter<File>>,
}

impl Format for TiffFormat {
    const PLUGIN_TYPE: &'static str = "NDFileTIFF";
    const PARAMS: &'static [ParamDef] = TIFF_PARAMS;

    fn open(&mut self, path: &Path, frame: &NDArray, _params: &ParamStore) -> io::Result<()> {
        // Refuse before creating an empty file.
        layout(frame)?;
        self.file = Some(BufWriter::with_capacity(1 << 20, File::create(path)?));
        Ok(())
    }

    fn write(&mut self, frame: &NDArray, _params: &ParamStore) -> io::Result<()> {
        let f = self
            .file
            .as_mut()
            .ok_or_else(|| io::Error::other("TIFF file not open"))?;
        write_tiff(f, frame)
    }

    fn close(&mut self, _params: &ParamStore) -> io::Result<()> {
        match self.file.take() {
            Some(mut f) => f.flush(),
            None => Ok(()),
        }
    }

    fn read(&mut self, path: &Path, pool: &Pool) -> io::Result<NDArray> {
        read::read_tiff(path, pool)
    }
}

/// The port type `type = "tiff"`.
pub const PORT: PortType = PortType::plugin(
    "tiff",
    "NDFileTIFF",
    "TIFF files: all types, Mono/RGB, uniqueId/timestamps/attributes as tags",
    |_| Ok(Built::Plugin(std::sync::Arc::new(TiffFilePlugin::new()))),
);
