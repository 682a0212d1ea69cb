//! NDFileMagick: one image file per frame, its format chosen by the file name's extension
//! (`FileTemplate = "%s%s_%3.3d.png"`), as areaDetector's GraphicsMagick writer does.
//!
//! | extension | format | BitDepth | colour |
//! | --- | --- | --- | --- |
//! | `.png` | PNG (`png` crate) | 8, 16 | Gray, RGB |
//! | `.tif`, `.tiff` | TIFF (`tiff` crate) | 8, 16 | Gray, RGB |
//! | `.bmp` | BMP | 8 | Gray (palette), RGB |
//! | `.gif` | GIF | 8 | Gray, RGB (exact up to 256 colours, quantised beyond) |
//! | `.jpg`, `.jpeg` | JPEG (lossy) | 8 | Gray, RGB |
//!
//! Frames are UInt8 or UInt16, Mono (1-D/2-D) or RGB1/RGB2/RGB3 (written interleaved).
//! `BitDepth` (menu 1/8/16/32, default 8) is the depth of the samples in the file; samples are
//! scaled between 8 and 16 bits as GraphicsMagick scales them (×257, and (v+128)/257), so an
//! UInt16 frame is written unchanged only with BitDepth = 16 and an UInt8 frame only with 8.
//! Depths 1 and 32, and 16 for BMP/GIF/JPEG, are refused with a message.
//! `Quality` (0-100, default 100): JPEG's quality (clamped to 1-100); for PNG, as GraphicsMagick,
//! the tens are the zlib level (0 = stored, 9 max) and the units the row filter (0 none, 1 sub,
//! 2 up, 3 average, 4 Paeth, 5-9 adaptive). `CompressType` applies to TIFF: None, LZW, Zip
//! (Deflate), RLE (PackBits); BZip, FAX, Group 4 and JPEG are refused for TIFF. The other
//! formats have one compression of their own and ignore it.
//!
//! Every refusal happens before the file is created: WriteStatus = Write error, WriteMessage
//! names the reason, FramesNotWritten_RBV counts the frame. ReadFile is refused (as
//! NDFileMagick's readFile).

use std::fs::File;
use std::io::{self, Cursor, Write};
use std::path::Path;

use image::codecs::bmp::BmpEncoder;
use image::codecs::gif::GifEncoder;
use image::codecs::jpeg::JpegEncoder;
use image::{ExtendedColorType, ImageEncoder};
use ndflow_core::{ColorMode, DataType, NDArray, ParamDef, ParamStore};
use ndflow_runtime::port_params::{bind, plugin_layout};
use ndflow_runtime::{Built, PortType};

use crate::file::{FileWriterPlugin, Format, NdFileParams};
use crate::tiff::{interleave, layout, TiffLayout};

/// CompressType's menu, in NDFileMagick.template's order.
pub const COMPRESS_TYPES: &[&str] = &[
    "None", "BZip", "FAX", "Group 4", "JPEG", "LZW", "RLE", "Zip",
];
/// BitDepth's menu (the depths of NDFileMagick.template's states).
pub const BIT_DEPTHS: &[&str] = &["1", "8", "16", "32"];

ndflow_core::params! {
    /// NDFileMagick's own records.
    pub const MAGICK_OWN_PARAMS, pub struct MagickParams {
        file_format: enumeration("FileFormat", &["Use extension"], 0).mbb().doc("File format: from the file name's extension"),
        quality: int32("Quality", 100).range(0.0, 100.0).doc("JPEG quality; PNG: tens = zlib level, units = row filter"),
        bit_depth: enumeration("BitDepth", BIT_DEPTHS, 1).doc("Bits per sample in the file (8 or 16)"),
        compress_type: enumeration("CompressType", COMPRESS_TYPES, 0).doc("TIFF compression: None, LZW, RLE (PackBits), Zip"),
    }
}

/// NDFile's parameters plus NDFileMagick's Quality, BitDepth and CompressType.
pub const MAGICK_PARAMS: &[ParamDef] = crate::ndfile_params!("%s%s_%3.3d.png"; MAGICK_OWN_PARAMS);

/// The NDFileMagick plugin: `MagickFilePlugin::new()`.
pub type MagickFilePlugin = FileWriterPlugin<MagickFormat>;

/// The image formats, chosen by extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageKind {
    Png,
    Bmp,
    Gif,
    Tiff,
    Jpeg,
}

impl ImageKind {
    /// The format `path`'s extension names (case-insensitive), or an error naming it.
    pub fn from_path(path: &Path) -> io::Result<ImageKind> {
        let ext = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase());
        match ext.as_deref() {
            Some("png") => Ok(ImageKind::Png),
            Some("bmp") => Ok(ImageKind::Bmp),
            Some("gif") => Ok(ImageKind::Gif),
            Some("tif" | "tiff") => Ok(ImageKind::Tiff),
            Some("jpg" | "jpeg") => Ok(ImageKind::Jpeg),
            Some(other) => Err(bad(format!(
                "unknown image extension \".{other}\" (png, bmp, gif, tif, tiff, jpg, jpeg)"
            ))),
            None => Err(bad(
                "the file name has no extension to choose the image format (png, bmp, gif, tif, jpg)"
                    .into(),
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ImageKind::Png => "PNG",
            ImageKind::Bmp => "BMP",
            ImageKind::Gif => "GIF",
            ImageKind::Tiff => "TIFF",
            ImageKind::Jpeg => "JPEG",
        }
    }

    fn holds_16_bits(self) -> bool {
        matches!(self, ImageKind::Png | ImageKind::Tiff)
    }
}

fn bad(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, why)
}

/// The samples of a frame, interleaved, at the file's depth.
enum Samples {
    U8(Vec<u8>),
    U16(Vec<u16>),
}

/// A frame ready to encode.
struct Image {
    width: u32,
    height: u32,
    /// 1 (gray) or 3 (RGB).
    channels: usize,
    samples: Samples,
}

/// Writer settings from the parameters.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    pub quality: i64,
    /// Index in [`BIT_DEPTHS`].
    pub bit_depth: i64,
    /// Index in [`COMPRESS_TYPES`].
    pub compress_type: i64,
}

fn menu_name(menu: &[&'static str], i: i64) -> &'static str {
    usize::try_from(i)
        .ok()
        .and_then(|i| menu.get(i).copied())
        .unwrap_or("?")
}

/// The frame's samples, interleaved, at `depth` bits (8 or 16).
fn prepare(frame: &NDArray, depth: u32) -> io::Result<Image> {
    if frame.is_compressed() {
        return Err(bad(format!(
            "NDFileMagick cannot store {}-compressed frames",
            frame.codec.name
        )));
    }
    let (width, height, channels, mode) = match layout(frame)? {
        TiffLayout::Mono { width, height } => (width, height, 1, ColorMode::Mono),
        TiffLayout::Rgb {
            width,
            height,
            mode,
        } => (width, height, 3, mode),
    };
    let dim = |v: usize| {
        u32::try_from(v).map_err(|_| bad(format!("image size {width}x{height} out of range")))
    };
    let (w, h) = (dim(width)?, dim(height)?);
    fn order<T: Copy>(p: &[T], w: usize, h: usize, mode: ColorMode) -> Vec<T> {
        match mode {
            ColorMode::RGB2 | ColorMode::RGB3 => interleave(p, w, h, mode),
            _ => p.to_vec(),
        }
    }
    let err = |e: ndflow_core::CoreError| bad(e.to_string());
    let samples = match (frame.data_type, depth) {
        (DataType::UInt8, 8) => Samples::U8(order(
            frame.pixels::<u8>().map_err(err)?,
            width,
            height,
            mode,
        )),
        (DataType::UInt8, _) => {
            let p = order(frame.pixels::<u8>().map_err(err)?, width, height, mode);
            Samples::U16(p.into_iter().map(|v| u16::from(v) * 257).collect())
        }
        (DataType::UInt16, 16) => Samples::U16(order(
            frame.pixels::<u16>().map_err(err)?,
            width,
            height,
            mode,
        )),
        (DataType::UInt16, _) => {
            let p = order(frame.pixels::<u16>().map_err(err)?, width, height, mode);
            Samples::U8(
                p.into_iter()
                    .map(|v| ((u32::from(v) + 128) / 257) as u8)
                    .collect(),
            )
        }
        (other, _) => {
            return Err(bad(format!(
                "NDFileMagick writes UInt8 and UInt16 frames, frame is {}",
                other.name()
            )))
        }
    };
    let n = match &samples {
        Samples::U8(v) => v.len(),
        Samples::U16(v) => v.len(),
    };
    if n != width * height * channels {
        return Err(bad(format!(
            "frame of {n} samples does not fill a {width}x{height}x{channels} image"
        )));
    }
    Ok(Image {
        width: w,
        height: h,
        channels,
        samples,
    })
}

fn image_err(kind: ImageKind) -> impl Fn(image::ImageError) -> io::Error {
    move |e| io::Error::other(format!("{} encoder: {e}", kind.name()))
}

/// Encodes one frame as `kind` into `out` (cleared first).
pub fn encode(frame: &NDArray, kind: ImageKind, s: Settings, out: &mut Vec<u8>) -> io::Result<()> {
    out.clear();
    let depth = match menu_name(BIT_DEPTHS, s.bit_depth) {
        "8" => 8,
        "16" if kind.holds_16_bits() => 16,
        "16" => {
            return Err(bad(format!(
                "{} holds 8-bit samples only; set BitDepth to 8",
                kind.name()
            )))
        }
        other => return Err(bad(format!("BitDepth {other} is not supported (8 or 16)"))),
    };
    let img = prepare(frame, depth)?;
    let (w, h) = (img.width, img.height);
    let rgb = img.channels == 3;
    match kind {
        ImageKind::Tiff => return encode_tiff(&img, s.compress_type, out),
        ImageKind::Png => {
            encode_png(&img, s.quality, out)
                .map_err(|e| io::Error::other(format!("PNG encoder: {e}")))?;
        }
        ImageKind::Bmp | ImageKind::Gif | ImageKind::Jpeg => {
            let Samples::U8(v) = &img.samples else {
                return Err(bad(format!("{} holds 8-bit samples only", kind.name())));
            };
            let c = if rgb {
                ExtendedColorType::Rgb8
            } else {
                ExtendedColorType::L8
            };
            match kind {
                ImageKind::Bmp => BmpEncoder::new(out).write_image(v, w, h, c),
                ImageKind::Jpeg => {
                    let q = s.quality.clamp(1, 100) as u8;
                    JpegEncoder::new_with_quality(&mut *out, q).write_image(v, w, h, c)
                }
                _ => {
                    let (wg, hg) = match (u16::try_from(w), u16::try_from(h)) {
                        (Ok(a), Ok(b)) => (a, b),
                        _ => {
                            return Err(bad(format!(
                                "GIF images are at most 65535x65535, frame is {w}x{h}"
                            )))
                        }
                    };
                    let rgb8: Vec<u8> = if rgb {
                        v.clone()
                    } else {
                        v.iter().flat_map(|&g| [g, g, g]).collect()
                    };
                    let mut enc = GifEncoder::new(&mut *out);
                    enc.encode(&rgb8, u32::from(wg), u32::from(hg), ExtendedColorType::Rgb8)
                }
            }
            .map_err(image_err(kind))?;
        }
    }
    Ok(())
}

/// PNG through the `png` crate: Quality's tens are the zlib level (0 = stored), its units the
/// row filter (0 none, 1 sub, 2 up, 3 average, 4 Paeth, 5-9 adaptive).
fn encode_png(img: &Image, quality: i64, out: &mut Vec<u8>) -> Result<(), png::EncodingError> {
    use png::{BitDepth, ColorType, DeflateCompression, Filter};
    let q = quality.clamp(0, 100);
    let level = (q / 10).min(9) as u8;
    let mut enc = png::Encoder::new(&mut *out, img.width, img.height);
    enc.set_color(if img.channels == 3 {
        ColorType::Rgb
    } else {
        ColorType::Grayscale
    });
    enc.set_deflate_compression(if level == 0 {
        DeflateCompression::NoCompression
    } else {
        DeflateCompression::Level(level)
    });
    enc.set_filter(match q % 10 {
        0 => Filter::NoFilter,
        1 => Filter::Sub,
        2 => Filter::Up,
        3 => Filter::Avg,
        4 => Filter::Paeth,
        _ => Filter::Adaptive,
    });
    match &img.samples {
        Samples::U8(v) => {
            enc.set_depth(BitDepth::Eight);
            enc.write_header()?.write_image_data(v)
        }
        Samples::U16(v) => {
            // PNG's 16-bit samples are big-endian.
            enc.set_depth(BitDepth::Sixteen);
            let bytes: Vec<u8> = v.iter().flat_map(|s| s.to_be_bytes()).collect();
            enc.write_header()?.write_image_data(&bytes)
        }
    }
}

fn encode_tiff(img: &Image, compress_type: i64, out: &mut Vec<u8>) -> io::Result<()> {
    use tiff::encoder::{colortype, Compression, DeflateLevel, TiffEncoder};
    let compression = match menu_name(COMPRESS_TYPES, compress_type) {
        "None" => Compression::Uncompressed,
        "LZW" => Compression::Lzw,
        "Zip" => Compression::Deflate(DeflateLevel::Balanced),
        "RLE" => Compression::Packbits,
        other => {
            return Err(bad(format!(
                "CompressType {other} is not supported for TIFF (None, LZW, RLE, Zip)"
            )))
        }
    };
    let tiff_err = |e: tiff::TiffError| io::Error::other(format!("TIFF encoder: {e}"));
    let mut enc = TiffEncoder::new(Cursor::new(out))
        .map_err(tiff_err)?
        .with_compression(compression);
    let (w, h) = (img.width, img.height);
    match (&img.samples, img.channels) {
        (Samples::U8(v), 1) => enc.write_image::<colortype::Gray8>(w, h, v),
        (Samples::U8(v), _) => enc.write_image::<colortype::RGB8>(w, h, v),
        (Samples::U16(v), 1) => enc.write_image::<colortype::Gray16>(w, h, v),
        (Samples::U16(v), _) => enc.write_image::<colortype::RGB16>(w, h, v),
    }
    .map_err(tiff_err)
}

/// The Magick [`Format`]: one file per frame.
pub struct MagickFormat {
    p: MagickParams,
    /// NDFile's handles (TempSuffix).
    nd: NdFileParams,
    file: Option<File>,
    /// Encoded image, reused between frames.
    out: Vec<u8>,
}

impl Default for MagickFormat {
    fn default() -> Self {
        MagickFormat {
            p: bind(&plugin_layout(MAGICK_PARAMS), MagickParams::bind),
            nd: bind(&plugin_layout(MAGICK_PARAMS), NdFileParams::bind),
            file: None,
            out: Vec::new(),
        }
    }
}

impl Format for MagickFormat {
    const PLUGIN_TYPE: &'static str = "NDFileMagick";
    const PARAMS: &'static [ParamDef] = MAGICK_PARAMS;

    fn open(&mut self, path: &Path, frame: &NDArray, params: &ParamStore) -> io::Result<()> {
        // The format follows the final name: with a TempSuffix `path` ends in the suffix.
        let suffix = self.nd.temp_suffix.get(params);
        let shown = path.to_string_lossy();
        let final_name = match shown.strip_suffix(suffix.as_str()) {
            Some(stem) if !suffix.is_empty() => stem,
            _ => &shown,
        };
        let kind = ImageKind::from_path(Path::new(final_name))?;
        let s = Settings {
            quality: self.p.quality.get(params),
            bit_depth: self.p.bit_depth.get(params),
            compress_type: self.p.compress_type.get(params),
        };
        // Encode first, so an unsupported frame leaves no empty file behind.
        encode(frame, kind, s, &mut self.out)?;
        self.file = Some(File::create(path)?);
        Ok(())
    }

    fn write(&mut self, _frame: &NDArray, _params: &ParamStore) -> io::Result<()> {
        let f = self
            .file
            .as_mut()
            .ok_or_else(|| io::Error::other("image file not open"))?;
        f.write_all(&self.out)
    }

    fn close(&mut self, _params: &ParamStore) -> io::Result<()> {
        match self.file.take() {
            Some(mut f) => f.flush(),
            None => Ok(()),
        }
    }
}

/// The port type `type = "magick"`.
pub const PORT: PortType = PortType::plugin(
    "magick",
    "NDFileMagick",
    "Image files by extension: PNG, TIFF, BMP, GIF, JPEG; UInt8/UInt16 Mono/RGB",
    |_| Ok(Built::Plugin(std::sync::Arc::new(MagickFilePlugin::new()))),
);

#[cfg(test)]
mod tests {

    use image::DynamicImage;
    use ndflow_core::{ParamValue, Pool};
    use ndflow_runtime::{Plugin, PluginHarness};

    use super::*;

    use crate::test_dir::Dir;

    fn mono8(w: usize, h: usize) -> (NDArray, Vec<u8>) {
        let data: Vec<u8> = (0..w * h).map(|i| (i * 7 % 256) as u8).collect();
        let f = NDArray::from_pixels(&Pool::unlimited(), &[w, h], &data).unwrap();
        (f, data)
    }

    fn mono16(w: usize, h: usize) -> (NDArray, Vec<u16>) {
        let data: Vec<u16> = (0..w * h).map(|i| (i * 4099 % 65536) as u16).collect();
        let f = NDArray::from_pixels(&Pool::unlimited(), &[w, h], &data).unwrap();
        (f, data)
    }

    fn settings(depth: &str, compress: &str) -> Settings {
        let pos = |m: &[&str], s: &str| m.iter().position(|x| *x == s).unwrap() as i64;
        Settings {
            quality: 100,
            bit_depth: pos(BIT_DEPTHS, depth),
            compress_type: pos(COMPRESS_TYPES, compress),
        }
    }

    /// Decodes with `image`, PNG with the `png` crate and TIFF with the `tiff` crate (image is
    /// built without either).
    fn decode(bytes: &[u8]) -> DynamicImage {
        if bytes.starts_with(b"\x89PNG") {
            return decode_png(bytes);
        }
        if !bytes.starts_with(b"II*\0") && !bytes.starts_with(b"MM\0*") {
            return image::load_from_memory(bytes).unwrap();
        }
        use tiff::decoder::{Decoder, DecodingResult};
        let mut d = Decoder::new(Cursor::new(bytes)).unwrap();
        let (w, h) = d.dimensions().unwrap();
        let rgb = matches!(d.colortype().unwrap(), tiff::ColorType::RGB(_));
        match (d.read_image().unwrap(), rgb) {
            (DecodingResult::U8(v), false) => image::GrayImage::from_raw(w, h, v).unwrap().into(),
            (DecodingResult::U8(v), true) => image::RgbImage::from_raw(w, h, v).unwrap().into(),
            (DecodingResult::U16(v), false) => {
                image::ImageBuffer::<image::Luma<u16>, _>::from_raw(w, h, v)
                    .unwrap()
                    .into()
            }
            (DecodingResult::U16(v), true) => {
                image::ImageBuffer::<image::Rgb<u16>, _>::from_raw(w, h, v)
                    .unwrap()
                    .into()
            }
            _ => panic!("unexpected TIFF samples"),
        }
    }

    fn decode_png(bytes: &[u8]) -> DynamicImage {
        use png::{BitDepth, ColorType};
        let mut r = png::Decoder::new(Cursor::new(bytes)).read_info().unwrap();
        let mut buf = vec![0; r.output_buffer_size().unwrap()];
        let info = r.next_frame(&mut buf).unwrap();
        buf.truncate(info.buffer_size());
        let (w, h) = (info.width, info.height);
        let be16 = |b: &[u8]| -> Vec<u16> {
            b.chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect()
        };
        match (info.color_type, info.bit_depth) {
            (ColorType::Grayscale, BitDepth::Eight) => {
                image::GrayImage::from_raw(w, h, buf).unwrap().into()
            }
            (ColorType::Rgb, BitDepth::Eight) => {
                image::RgbImage::from_raw(w, h, buf).unwrap().into()
            }
            (ColorType::Grayscale, BitDepth::Sixteen) => {
                image::ImageBuffer::<image::Luma<u16>, _>::from_raw(w, h, be16(&buf))
                    .unwrap()
                    .into()
            }
            (ColorType::Rgb, BitDepth::Sixteen) => {
                image::ImageBuffer::<image::Rgb<u16>, _>::from_raw(w, h, be16(&buf))
                    .unwrap()
                    .into()
            }
            other => panic!("unexpected PNG {other:?}"),
        }
    }

    #[test]
    fn extension_chooses_the_format() {
        let k = |p: &str| ImageKind::from_path(Path::new(p));
        assert_eq!(k("/d/a_001.png").unwrap(), ImageKind::Png);
        assert_eq!(k("a.PNG").unwrap(), ImageKind::Png);
        assert_eq!(k("a.bmp").unwrap(), ImageKind::Bmp);
        assert_eq!(k("a.gif").unwrap(), ImageKind::Gif);
        assert_eq!(k("a.tif").unwrap(), ImageKind::Tiff);
        assert_eq!(k("a.tiff").unwrap(), ImageKind::Tiff);
        assert_eq!(k("a.jpg").unwrap(), ImageKind::Jpeg);
        assert_eq!(k("a.jpeg").unwrap(), ImageKind::Jpeg);
        let e = k("a.xyz").unwrap_err().to_string();
        assert!(e.contains(".xyz"), "{e}");
        assert!(k("/d/noext")
            .unwrap_err()
            .to_string()
            .contains("no extension"));
    }

    #[test]
    fn lossless_formats_round_trip() {
        let (f, data) = mono8(13, 5);
        let mut out = Vec::new();
        for kind in [
            ImageKind::Png,
            ImageKind::Bmp,
            ImageKind::Gif,
            ImageKind::Tiff,
        ] {
            encode(&f, kind, settings("8", "None"), &mut out).unwrap();
            let img = decode(&out);
            assert_eq!((img.width(), img.height()), (13, 5), "{kind:?}");
            assert_eq!(img.to_luma8().into_raw(), data, "{kind:?}");
        }
        // TIFF with every supported compression.
        for c in ["LZW", "Zip", "RLE"] {
            encode(&f, ImageKind::Tiff, settings("8", c), &mut out).unwrap();
            assert_eq!(decode(&out).to_luma8().into_raw(), data, "{c}");
        }
        // 16-bit PNG and TIFF keep every bit.
        let (f, data) = mono16(6, 4);
        for kind in [ImageKind::Png, ImageKind::Tiff] {
            encode(&f, kind, settings("16", "None"), &mut out).unwrap();
            assert_eq!(decode(&out).to_luma16().into_raw(), data, "{kind:?}");
        }
    }

    #[test]
    fn rgb_modes_are_interleaved() {
        let (w, h) = (4usize, 3usize);
        let rgb: Vec<u8> = (0..w * h * 3).map(|i| (i * 11 % 256) as u8).collect();
        // RGB1 (c, x, y) is the interleaved order; RGB3 (x, y, c) holds three planes.
        let mut planes = vec![0u8; w * h * 3];
        for (i, px) in rgb.chunks_exact(3).enumerate() {
            for c in 0..3 {
                planes[c * w * h + i] = px[c];
            }
        }
        let pool = Pool::unlimited();
        let mut f1 = NDArray::from_pixels(&pool, &[3, w, h], &rgb).unwrap();
        f1.set_color_mode(ColorMode::RGB1);
        let mut f3 = NDArray::from_pixels(&pool, &[w, h, 3], &planes).unwrap();
        f3.set_color_mode(ColorMode::RGB3);
        let mut out = Vec::new();
        for f in [&f1, &f3] {
            for kind in [
                ImageKind::Png,
                ImageKind::Bmp,
                ImageKind::Tiff,
                ImageKind::Gif,
            ] {
                encode(f, kind, settings("8", "None"), &mut out).unwrap();
                assert_eq!(decode(&out).to_rgb8().into_raw(), rgb, "{kind:?}");
            }
        }
    }

    #[test]
    fn depth_scaling_and_refusals() {
        let (f8, d8) = mono8(4, 2);
        let (f16, d16) = mono16(4, 2);
        let mut out = Vec::new();
        encode(&f8, ImageKind::Png, settings("16", "None"), &mut out).unwrap();
        let want: Vec<u16> = d8.iter().map(|&v| u16::from(v) * 257).collect();
        assert_eq!(decode(&out).to_luma16().into_raw(), want);
        encode(&f16, ImageKind::Png, settings("8", "None"), &mut out).unwrap();
        let want: Vec<u8> = d16
            .iter()
            .map(|&v| ((u32::from(v) + 128) / 257) as u8)
            .collect();
        assert_eq!(decode(&out).to_luma8().into_raw(), want);

        let msg = |f: &NDArray, k, s| encode(f, k, s, &mut Vec::new()).unwrap_err().to_string();
        assert!(msg(&f16, ImageKind::Bmp, settings("16", "None")).contains("BMP holds 8-bit"));
        assert!(msg(&f8, ImageKind::Gif, settings("16", "None")).contains("GIF holds 8-bit"));
        assert!(msg(&f8, ImageKind::Png, settings("1", "None")).contains("BitDepth 1"));
        assert!(msg(&f8, ImageKind::Png, settings("32", "None")).contains("BitDepth 32"));
        assert!(msg(&f8, ImageKind::Tiff, settings("8", "BZip")).contains("CompressType BZip"));
        let fi = NDArray::from_pixels(&Pool::unlimited(), &[2, 2], &[1i32, 2, 3, 4]).unwrap();
        assert!(msg(&fi, ImageKind::Png, settings("8", "None")).contains("frame is Int32"));
        let f4 = NDArray::from_pixels(&Pool::unlimited(), &[2, 2, 2, 2], &[0u8; 16]).unwrap();
        assert!(encode(&f4, ImageKind::Png, settings("8", "None"), &mut out).is_err());
    }

    #[test]
    fn jpeg_is_close() {
        let (f, data) = mono8(16, 16);
        let mut out = Vec::new();
        encode(&f, ImageKind::Jpeg, settings("8", "None"), &mut out).unwrap();
        let got = decode(&out).to_luma8().into_raw();
        let err: f64 = got
            .iter()
            .zip(&data)
            .map(|(a, b)| (f64::from(*a) - f64::from(*b)).abs())
            .sum::<f64>()
            / data.len() as f64;
        assert!(err < 20.0, "{err}");
    }

    fn s(h: &PluginHarness<MagickFilePlugin>, name: &str) -> String {
        match h.get(name) {
            ParamValue::Str(s) => s,
            other => other.to_string(),
        }
    }

    #[test]
    fn plugin_writes_numbered_files_and_reports_errors() {
        let dir = Dir::new("plugin");
        let h = PluginHarness::new(MagickFilePlugin::new());
        assert_eq!(h.plugin.plugin_type(), "NDFileMagick");
        assert_eq!(s(&h, "FileTemplate"), "%s%s_%3.3d.png");
        assert_eq!(h.get_f64("BitDepth"), 1.0, "BitDepth 8");
        assert_eq!(h.get_f64("Quality"), 100.0);
        h.put("FilePath", dir.0.to_string_lossy().as_ref()).unwrap();
        h.put("FileName", "img").unwrap();
        h.put("AutoIncrement", "Yes").unwrap();
        h.put("AutoSave", "Yes").unwrap();
        h.put("TempSuffix", ".tmp").unwrap();
        let (f, data) = mono8(5, 3);
        h.process(f.clone()).unwrap();
        h.put("FileTemplate", "%s%s_%3.3d.bmp").unwrap();
        h.process(f.clone()).unwrap();
        assert_eq!(dir.entries(), ["img_000.png", "img_001.bmp"]);
        assert_eq!(h.get_f64("FileNumber"), 2.0);
        let png = std::fs::read(dir.0.join("img_000.png")).unwrap();
        assert_eq!(decode(&png).to_luma8().into_raw(), data);

        // A refusal: no file, WriteStatus/WriteMessage, FramesNotWritten.
        h.put("FileTemplate", "%s%s_%3.3d.xyz").unwrap();
        assert!(h.process(f.clone()).is_err());
        assert_eq!(h.get_f64("WriteStatus"), 1.0);
        assert!(
            s(&h, "WriteMessage").contains(".xyz"),
            "{}",
            s(&h, "WriteMessage")
        );
        h.put("FileTemplate", "%s%s_%3.3d.gif").unwrap();
        h.put("BitDepth", "16").unwrap();
        assert!(h.process(f.clone()).is_err());
        assert!(s(&h, "WriteMessage").contains("GIF holds 8-bit"));
        assert_eq!(h.get_f64("FramesNotWritten"), 2.0);
        assert_eq!(dir.entries(), ["img_000.png", "img_001.bmp"]);
        h.put("BitDepth", "8").unwrap();
        h.process(f).unwrap();
        assert_eq!(h.get_f64("WriteStatus"), 0.0);
        assert_eq!(dir.entries().len(), 3);
    }
}
