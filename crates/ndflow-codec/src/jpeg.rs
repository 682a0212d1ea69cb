//! JPEG for UInt8 mono (1 component) and RGB (3 components, pixel-interleaved = RGB1) images,
//! through libjpeg-turbo's TurboJPEG 3 API (the `turbojpeg` crate, bundled libjpeg-turbo 3.1).
//!
//! Like NDPluginCodec (which calls libjpeg with `jpeg_set_defaults` + `jpeg_set_quality`), RGB
//! is stored as YCbCr with 4:2:0 chroma subsampling unless [`JpegEncoder::set_subsampling`]
//! says otherwise, mono as a 1-component grayscale JPEG, and the quality is clamped to 1–100.
//! Decoding gives 1 component for grayscale JPEGs and 3 (RGB) for colour ones.
//!
//! [`JpegEncoder`] / [`JpegDecoder`] hold a TurboJPEG handle for reuse; the free functions
//! [`compress`] / [`decompress`] use one per thread, so steady-state calls allocate nothing on
//! the Rust side. Decoding checks the header dimensions against `out` before any pixel is
//! written, and any libjpeg warning (truncated or corrupt entropy data) is an error rather than
//! a partly grey image.

use std::cell::RefCell;

use turbojpeg::{Compressor, Decompressor, Image, PixelFormat, Subsamp};

use crate::CodecError;

const CODEC: &str = "jpeg";

/// Lowest and highest quality; values outside are clamped (NDPluginCodec's `jpeg_clamp_quality`).
pub const QUALITY_MIN: u8 = 1;
pub const QUALITY_MAX: u8 = 100;
/// Largest width or height a baseline JPEG can hold.
pub const MAX_DIMENSION: usize = 65_535;
/// Progressive scans allowed when decoding: guards against the many-scans CPU-exhaustion
/// trick (libjpeg-turbo's advice); real encoders write fewer than 20.
const SCAN_LIMIT: u32 = 500;

/// Chroma subsampling for 3-component images (ignored for mono).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum JpegSubsampling {
    /// 4:4:4, no subsampling.
    S444,
    /// 4:2:2, half horizontal chroma resolution.
    S422,
    /// 4:2:0, half horizontal and vertical chroma resolution: libjpeg's default, used by
    /// NDPluginCodec.
    #[default]
    S420,
}

impl JpegSubsampling {
    fn tj(self) -> Subsamp {
        match self {
            Self::S444 => Subsamp::None,
            Self::S422 => Subsamp::Sub2x1,
            Self::S420 => Subsamp::Sub2x2,
        }
    }
}

/// Size and layout of a (decoded) JPEG image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JpegImageInfo {
    pub width: usize,
    pub height: usize,
    /// 1 (mono) or 3 (RGB, pixel-interleaved).
    pub components: usize,
}

impl JpegImageInfo {
    /// Bytes of the decoded image: width × height × components.
    pub fn len(&self) -> usize {
        self.width
            .saturating_mul(self.height)
            .saturating_mul(self.components)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Output size that always suffices for [`compress`] (libjpeg-turbo's `tj3JPEGBufSize`, the
/// 4:4:4 worst case, so it holds for every subsampling).
pub fn max_compressed_len(width: usize, height: usize, components: usize) -> usize {
    let subsamp = if components == 1 {
        Subsamp::Gray
    } else {
        Subsamp::None
    };
    turbojpeg::compressed_buf_len(width.max(1), height.max(1), subsamp).unwrap_or(usize::MAX)
}

/// A reusable JPEG encoder (one TurboJPEG compressor handle).
pub struct JpegEncoder {
    tj: Compressor,
    subsampling: JpegSubsampling,
}

impl std::fmt::Debug for JpegEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JpegEncoder")
            .field("subsampling", &self.subsampling)
            .finish()
    }
}

impl JpegEncoder {
    pub fn new() -> Result<Self, CodecError> {
        Ok(Self {
            tj: Compressor::new().map_err(lib)?,
            subsampling: JpegSubsampling::default(),
        })
    }

    /// Chroma subsampling for RGB input (default 4:2:0).
    pub fn set_subsampling(&mut self, subsampling: JpegSubsampling) {
        self.subsampling = subsampling;
    }

    /// Encodes `pixels` (`width × height × components` bytes, rows top to bottom, RGB
    /// interleaved) at `quality` (clamped to 1–100) into `out`; returns the JPEG length.
    pub fn encode(
        &mut self,
        pixels: &[u8],
        width: usize,
        height: usize,
        components: usize,
        quality: u8,
        out: &mut [u8],
    ) -> Result<usize, CodecError> {
        let format = match components {
            1 => PixelFormat::GRAY,
            3 => PixelFormat::RGB,
            _ => {
                return Err(invalid(format!(
                    "{components} components (1 = mono, 3 = RGB)"
                )))
            }
        };
        if width == 0 || height == 0 || width > MAX_DIMENSION || height > MAX_DIMENSION {
            return Err(invalid(format!(
                "{width}x{height} outside 1..={MAX_DIMENSION}"
            )));
        }
        if pixels.len() != width * height * components {
            return Err(invalid(format!(
                "{} bytes for a {width}x{height}x{components} image",
                pixels.len()
            )));
        }
        let subsamp = if components == 1 {
            Subsamp::Gray
        } else {
            self.subsampling.tj()
        };
        let quality = quality.clamp(QUALITY_MIN, QUALITY_MAX);
        self.tj.set_quality(i32::from(quality)).map_err(lib)?;
        self.tj.set_subsamp(subsamp).map_err(lib)?;
        let image = Image {
            pixels,
            width,
            pitch: width * components,
            height,
            format,
        };
        match self.tj.compress_to_slice(image, out) {
            Ok(n) => Ok(n),
            Err(e) => {
                let need = max_compressed_len(width, height, components);
                if out.len() < need {
                    Err(CodecError::OutputTooSmall {
                        need,
                        have: out.len(),
                    })
                } else {
                    Err(lib(e))
                }
            }
        }
    }
}

/// A reusable JPEG decoder (one TurboJPEG decompressor handle).
pub struct JpegDecoder {
    tj: Decompressor,
}

impl std::fmt::Debug for JpegDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JpegDecoder")
    }
}

impl JpegDecoder {
    pub fn new() -> Result<Self, CodecError> {
        Ok(Self {
            tj: Self::handle()?,
        })
    }

    fn handle() -> Result<Decompressor, CodecError> {
        let mut tj = Decompressor::new().map_err(lib)?;
        tj.set_scan_limit(SCAN_LIMIT).map_err(lib)?;
        Ok(tj)
    }

    /// libjpeg keeps Huffman/quantization tables in the decompressor between images (for
    /// abbreviated streams), so a corrupt table would poison every later decode ("Bogus
    /// Huffman table definition" on valid files, found by the corruption test). After any
    /// failure the handle is replaced; that allocates only on the error path.
    fn fail(&mut self, e: turbojpeg::Error) -> CodecError {
        if let Ok(fresh) = Self::handle() {
            self.tj = fresh;
        }
        corrupt(e)
    }

    /// Reads the header: dimensions and the component count [`Self::decode`] will produce.
    pub fn read_header(&mut self, jpeg: &[u8]) -> Result<JpegImageInfo, CodecError> {
        let h = match self.tj.read_header(jpeg) {
            Ok(h) => h,
            Err(e) => return Err(self.fail(e)),
        };
        let components = match h.colorspace {
            turbojpeg::Colorspace::Gray => 1,
            turbojpeg::Colorspace::YCbCr | turbojpeg::Colorspace::RGB => 3,
            other => {
                return Err(invalid(format!(
                    "{other:?} JPEGs are not supported (only grayscale and RGB/YCbCr)"
                )))
            }
        };
        if h.width == 0 || h.height == 0 {
            return Err(CodecError::Corrupt {
                codec: CODEC,
                detail: format!("{}x{} image", h.width, h.height),
            });
        }
        Ok(JpegImageInfo {
            width: h.width,
            height: h.height,
            components,
        })
    }

    /// Decodes into `out` (at least `width × height × components` bytes, see
    /// [`Self::read_header`]); returns the image layout. Bytes past the image are untouched.
    pub fn decode(&mut self, jpeg: &[u8], out: &mut [u8]) -> Result<JpegImageInfo, CodecError> {
        let info = self.read_header(jpeg)?;
        let need = info.len();
        let Some(dst) = out.get_mut(..need) else {
            return Err(CodecError::OutputTooSmall {
                need,
                have: out.len(),
            });
        };
        let format = if info.components == 1 {
            PixelFormat::GRAY
        } else {
            PixelFormat::RGB
        };
        let image = Image {
            pixels: dst,
            width: info.width,
            pitch: info.width * info.components,
            height: info.height,
            format,
        };
        // The crate re-reads the header and refuses an image smaller than it; libjpeg-turbo
        // writes `height` rows of `pitch` bytes, exactly `dst`.
        match self.tj.decompress(jpeg, image) {
            Ok(()) => Ok(info),
            Err(e) => Err(self.fail(e)),
        }
    }
}

thread_local! {
    static ENCODER: RefCell<Option<JpegEncoder>> = const { RefCell::new(None) };
    static DECODER: RefCell<Option<JpegDecoder>> = const { RefCell::new(None) };
}

/// [`JpegEncoder::encode`] with this thread's encoder (4:2:0 for RGB, as NDPluginCodec).
pub fn compress(
    pixels: &[u8],
    width: usize,
    height: usize,
    components: usize,
    quality: u8,
    out: &mut [u8],
) -> Result<usize, CodecError> {
    ENCODER.with(|cell| {
        let mut slot = cell.try_borrow_mut().map_err(|_| busy())?;
        if slot.is_none() {
            *slot = Some(JpegEncoder::new()?);
        }
        match slot.as_mut() {
            Some(enc) => {
                enc.set_subsampling(JpegSubsampling::S420);
                enc.encode(pixels, width, height, components, quality, out)
            }
            None => Err(busy()),
        }
    })
}

/// [`JpegDecoder::decode`] with this thread's decoder.
pub fn decompress(jpeg: &[u8], out: &mut [u8]) -> Result<JpegImageInfo, CodecError> {
    with_decoder(|d| d.decode(jpeg, out))
}

/// [`JpegDecoder::read_header`] with this thread's decoder.
pub fn read_header(jpeg: &[u8]) -> Result<JpegImageInfo, CodecError> {
    with_decoder(|d| d.read_header(jpeg))
}

fn with_decoder<R>(
    f: impl FnOnce(&mut JpegDecoder) -> Result<R, CodecError>,
) -> Result<R, CodecError> {
    DECODER.with(|cell| {
        let mut slot = cell.try_borrow_mut().map_err(|_| busy())?;
        if slot.is_none() {
            *slot = Some(JpegDecoder::new()?);
        }
        match slot.as_mut() {
            Some(dec) => f(dec),
            None => Err(busy()),
        }
    })
}

fn busy() -> CodecError {
    CodecError::Library {
        codec: CODEC,
        detail: "thread-local TurboJPEG handle unavailable".into(),
    }
}

fn lib(e: turbojpeg::Error) -> CodecError {
    CodecError::Library {
        codec: CODEC,
        detail: e.to_string(),
    }
}

fn corrupt(e: turbojpeg::Error) -> CodecError {
    CodecError::Corrupt {
        codec: CODEC,
        detail: e.to_string(),
    }
}

fn invalid(detail: String) -> CodecError {
    CodecError::InvalidArgument {
        codec: CODEC,
        detail,
    }
}
