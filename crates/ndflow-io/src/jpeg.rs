//! NDFileJPEG: one UInt8 frame per file, through `ndflow_codec::jpeg` (libjpeg-turbo).
//!
//! Mono (2-D) is a grayscale JPEG, RGB1 a colour one; RGB2/RGB3 are interleaved first, as
//! NDFileJPEG does. Other types are refused with a message naming the type (areaDetector
//! writes only 8-bit JPEGs). `JPEGQuality` (0-100, default 50 as in NDFileJPEG.template) is
//! clamped to the codec's 1-100.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

use ndflow_codec::jpeg;
use ndflow_core::{ColorMode, DataType, NDArray, ParamDef, ParamStore};
use ndflow_runtime::port_params::{bind, plugin_layout};

use crate::file::{FileWriterPlugin, Format};
use crate::tiff::{interleave, layout, TiffLayout};
use ndflow_runtime::{Built, PortType};

ndflow_core::params! {
    /// NDFileJPEG's own parameters.
    pub const JPEG_OWN_PARAMS, pub struct JpegParams {
        jpeg_quality: int32("JPEGQuality", 50).range(0.0, 100.0).doc("JPEG quality, 0-100"),
        file_format: enumeration("FileFormat", &["JPEG", "Invalid"], 0).mbb().readback_choices(&["JPEG", "Undefined"]).doc("File format (JPEG only)"),
    }
}

/// NDFile's parameters plus NDFileJPEG's JPEGQuality.
pub const JPEG_PARAMS: &[ParamDef] = crate::ndfile_params!("%s%s_%3.3d.jpg"; JPEG_OWN_PARAMS);

/// The NDFileJPEG plugin: `JpegFilePlugin::new()`.
pub type JpegFilePlugin = FileWriterPlugin<JpegFormat>;

/// The JPEG [`Format`]: one file per frame.
pub struct JpegFormat {
    p: JpegParams,
    file: Option<File>,
    quality: u8,
    /// Compressed stream, reused between frames.
    out: Vec<u8>,
}

impl Default for JpegFormat {
    fn default() -> Self {
        JpegFormat {
            p: bind(&plugin_layout(JPEG_PARAMS), JpegParams::bind),
            file: None,
            quality: 0,
            out: Vec::new(),
        }
    }
}

/// Encodes one UInt8 Mono/RGB frame into `out` (resized to fit); returns the JPEG length.
pub fn encode_jpeg(frame: &NDArray, quality: u8, out: &mut Vec<u8>) -> io::Result<usize> {
    let bad = |why: String| io::Error::new(io::ErrorKind::InvalidInput, why);
    if frame.is_compressed() {
        return Err(bad(format!(
            "JPEG cannot store {}-compressed frames",
            frame.codec.name
        )));
    }
    if frame.data_type != DataType::UInt8 {
        return Err(bad(format!(
            "JPEG needs UInt8 data, frame is {}",
            frame.data_type.name()
        )));
    }
    let pixels = frame.pixels::<u8>().map_err(|e| bad(e.to_string()))?;
    let (width, height, components, interleaved) = match layout(frame) {
        Ok(TiffLayout::Mono { width, height }) if frame.ndims() == 2 => (width, height, 1, None),
        Ok(TiffLayout::Rgb {
            width,
            height,
            mode,
        }) => {
            let conv = (mode != ColorMode::RGB1).then(|| interleave(pixels, width, height, mode));
            (width, height, 3, conv)
        }
        _ => {
            return Err(bad(format!(
                "JPEG needs a 2-D Mono or 3-D RGB frame, got dims {:?} with ColorMode {}",
                frame.sizes(),
                frame.color_mode().name()
            )))
        }
    };
    let src = interleaved.as_deref().unwrap_or(pixels);
    let cap = jpeg::max_compressed_len(width, height, components);
    if cap == usize::MAX {
        return Err(bad(format!(
            "JPEG image size {width}x{height} out of range"
        )));
    }
    out.resize(cap, 0);
    jpeg::compress(src, width, height, components, quality, out)
        .map_err(|e| io::Error::other(e.to_string()))
}

impl Format for JpegFormat {
    const PLUGIN_TYPE: &'static str = "NDFileJPEG";
    const PARAMS: &'static [ParamDef] = JPEG_PARAMS;

    fn open(&mut self, path: &Path, frame: &NDArray, params: &ParamStore) -> io::Result<()> {
        let q = self.p.jpeg_quality.get(params);
        self.quality = q.clamp(i64::from(jpeg::QUALITY_MIN), i64::from(jpeg::QUALITY_MAX)) as u8;
        // Encode first, so an unsupported frame leaves no empty file behind.
        let n = encode_jpeg(frame, self.quality, &mut self.out)?;
        self.out.truncate(n);
        self.file = Some(File::create(path)?);
        Ok(())
    }

    fn write(&mut self, _frame: &NDArray, _params: &ParamStore) -> io::Result<()> {
        let f = self
            .file
            .as_mut()
            .ok_or_else(|| io::Error::other("JPEG file not open"))?;
        f.write_all(&self.out)
    }

    fn close(&mut self, _params: &ParamStore) -> io::Result<()> {
        match self.file.take() {
            Some(mut f) => f.flush(),
            None => Ok(()),
        }
    }
}

/// The port type `type = "jpeg"`.
pub const PORT: PortType = PortType::plugin(
    "jpeg",
    "NDFileJPEG",
    "JPEG files: UInt8 Mono/RGB, JPEGQuality",
    |_| Ok(Built::Plugin(std::sync::Arc::new(JpegFilePlugin::new()))),
);
