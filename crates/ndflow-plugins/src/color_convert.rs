//! NDPluginColorConvert: Mono → RGB1/2/3 (optional false colour for 8-bit), Bayer →
//! Mono/RGB1/2/3, RGBn → Mono, RGBn → RGBm; every data type.
//!
//! As ADCore: RGB → Mono is (R+G+B)/3 in f64, converted with `as`; false colour (Rainbow,
//! Iron) applies to Int8/UInt8 only, through ADCore's 256-entry maps (rebuilt here from the
//! piecewise-linear formulas they follow). Bayer demosaicing is ADCore's: the pattern comes
//! from the frame's `BayerPattern` attribute (RGGB if absent) and the dims' offsets; a pixel
//! keeps its own colour and takes the mean of its 4 diagonal / 4 edge / 2 neighbours for
//! the others; the border row/column keep only their own colour (others 0).
//!
//! Same mode in and out passes the frame unchanged. Refused as unsupported (counted):
//! compressed frames, output Bayer or YUV, YUV input, and frames whose dims do not fit their
//! mode (e.g. RGB1 that is not `[3, X, Y]`, Mono or Bayer that is not 2-D).
//!
//! Deviations: Bayer averages of integer types truncate as ADCore's unsigned arithmetic does
//! for non-negative values, but float types keep their fraction and no type is cut to 32
//! bits; the X/Y dims keep their offset/binning/reverse in every conversion (ADCore resets
//! them for Mono/Bayer → RGB).

mod kernel;
mod simd;

/// The port type `type = "colorconvert"`.
pub const PORT: PortType = PortType::plugin(
    "colorconvert",
    "NDPluginColorConvert",
    "Colour mode conversion: Mono/Bayer/RGB1/2/3, false colour",
    |_| {
        Ok(Built::Plugin(
            std::sync::Arc::new(ColorConvertPlugin::new()),
        ))
    },
);

#[cfg(test)]
mod tests;

use std::sync::Arc;

use ndflow_core::{with_pixel_type, BayerPattern, ColorMode, DataType, Dim, NDArray, ParamDef};
use ndflow_runtime::port_params::{bind, plugin_layout};
use ndflow_runtime::{Built, PortType};
use ndflow_runtime::{Plugin, PluginError, ProcessContext};

pub use kernel::{false_colour, FalseColor};

/// NDColorConvert.template's ColorModeOut menu (ADCore's spelling, "YUV421" included).
pub const COLOR_MODE_OUT_CHOICES: &[&str] = &[
    "Mono", "Bayer", "RGB1", "RGB2", "RGB3", "YUV444", "YUV422", "YUV421",
];

ndflow_core::params! {
    pub const COLOR_CONVERT_PARAMS, pub struct ColorConvertParams {
        color_mode_out: enumeration("ColorModeOut", COLOR_MODE_OUT_CHOICES, 2)
            .doc("Colour mode of the output (Bayer and YUV outputs are not supported)"),
        false_color: enumeration("FalseColor", &["None", "Rainbow", "Iron"], 0)
            .doc("Colour map for Mono -> RGB of Int8/UInt8 frames"),
    }
}

/// Where a frame's colours are, in element strides: pixel (x, y) colour c is at
/// `x·xs + y·ys + c·cs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Strides {
    pub xs: usize,
    pub ys: usize,
    pub cs: usize,
}

/// Strides of an RGB layout for a `w`×`h` image (None for non-RGB modes).
pub fn rgb_strides(mode: ColorMode, w: usize, h: usize) -> Option<Strides> {
    match mode {
        ColorMode::RGB1 => Some(Strides {
            xs: 3,
            ys: 3 * w,
            cs: 1,
        }),
        ColorMode::RGB2 => Some(Strides {
            xs: 1,
            ys: 3 * w,
            cs: w,
        }),
        ColorMode::RGB3 => Some(Strides {
            xs: 1,
            ys: w,
            cs: w * h,
        }),
        _ => None,
    }
}

/// The input's mode as its dims allow (ADCore's `ndims` checks), with the image size.
fn input_mode(frame: &NDArray) -> Result<(ColorMode, usize, usize), PluginError> {
    let mode = frame.color_mode();
    let info = frame.info();
    let ok = match mode {
        ColorMode::Mono | ColorMode::Bayer => frame.ndims() == 2,
        ColorMode::RGB1 | ColorMode::RGB2 | ColorMode::RGB3 => {
            frame.ndims() == 3 && info.color_mode == mode
        }
        _ => false,
    };
    if !ok {
        return Err(PluginError::Unsupported(format!(
            "NDPluginColorConvert cannot take a {} frame of dims {:?}",
            mode.name(),
            frame.sizes()
        )));
    }
    Ok((mode, info.x_size, info.y_size))
}

/// Output dims: X and Y keep the input's metadata, the colour dim is plain 3.
fn out_dims(input: &NDArray, mode_in: ColorMode, mode_out: ColorMode) -> Vec<Dim> {
    let (xd, yd) = match mode_in {
        ColorMode::RGB1 => (1, 2),
        ColorMode::RGB2 => (0, 2),
        _ => (0, 1),
    };
    let (x, y, c) = (input.dims[xd], input.dims[yd], Dim::new(3));
    match mode_out {
        ColorMode::RGB1 => vec![c, x, y],
        ColorMode::RGB2 => vec![x, c, y],
        ColorMode::RGB3 => vec![x, y, c],
        _ => vec![x, y],
    }
}

fn bayer_pattern(frame: &NDArray) -> BayerPattern {
    match frame
        .attribute("BayerPattern")
        .and_then(|a| a.value.as_f64())
        .map(|v| v as i64)
    {
        Some(1) => BayerPattern::GBRG,
        Some(2) => BayerPattern::GRBG,
        Some(3) => BayerPattern::BGGR,
        _ => BayerPattern::RGGB,
    }
}

/// NDPluginColorConvert. Stateless per frame: up to 8 worker threads.
#[derive(Debug)]
pub struct ColorConvertPlugin {
    p: ColorConvertParams,
}

impl ColorConvertPlugin {
    pub fn new() -> ColorConvertPlugin {
        ColorConvertPlugin {
            p: bind(
                &plugin_layout(COLOR_CONVERT_PARAMS),
                ColorConvertParams::bind,
            ),
        }
    }
}

impl Default for ColorConvertPlugin {
    fn default() -> Self {
        Self::new()
    }
}

impl Plugin for ColorConvertPlugin {
    fn plugin_type(&self) -> &'static str {
        "NDPluginColorConvert"
    }

    fn params(&self) -> &'static [ParamDef] {
        COLOR_CONVERT_PARAMS
    }

    fn max_threads(&self) -> usize {
        8
    }

    fn process(
        &self,
        input: &Arc<NDArray>,
        ctx: &mut ProcessContext<'_>,
    ) -> Result<(), PluginError> {
        if input.is_compressed() {
            return Err(PluginError::Unsupported(format!(
                "NDPluginColorConvert needs uncompressed frames, got codec '{}'",
                input.codec.name
            )));
        }
        let mode_out =
            ColorMode::from_index(self.p.color_mode_out.get(ctx.params)).unwrap_or_default();
        let (mode_in, w, h) = input_mode(input)?;
        if mode_in == mode_out {
            ctx.emit(Arc::clone(input));
            return Ok(());
        }
        let out_strides = rgb_strides(mode_out, w, h);
        let supported = matches!(mode_out, ColorMode::Mono) || out_strides.is_some();
        if !supported {
            return Err(PluginError::Unsupported(format!(
                "NDPluginColorConvert cannot convert {} to {}",
                mode_in.name(),
                mode_out.name()
            )));
        }
        let dt = input.data_type;
        let fc = match (dt, self.p.false_color.get(ctx.params)) {
            (DataType::UInt8 | DataType::Int8, 1) => FalseColor::Rainbow,
            (DataType::UInt8 | DataType::Int8, 2) => FalseColor::Iron,
            _ => FalseColor::None,
        };
        let mut out = NDArray::clone(input);
        out.dims = out_dims(input, mode_in, mode_out);
        let n = out.n_elements();
        let mut buf = ctx.alloc(n * dt.size())?;
        let pattern = bayer_pattern(input);
        let origin = (input.dims[0].offset, input.dims[1].offset);
        let isa = simd::Isa::detect();
        with_pixel_type!(dt, T => {
            let src = input.pixels::<T>()?;
            let dst = buf.as_mut_slice::<T>();
            match (mode_in, rgb_strides(mode_in, w, h), out_strides) {
                (ColorMode::Mono, _, Some(o)) => kernel::mono_to_rgb(src, dst, w, h, o, fc, isa),
                (ColorMode::Bayer, _, o) => {
                    kernel::bayer(src, dst, w, h, pattern, origin, o)
                }
                (_, Some(i), None) => kernel::rgb_to_mono(src, dst, w, h, i, isa),
                (_, Some(i), Some(o)) => kernel::rgb_to_rgb(src, dst, w, h, i, o, isa),
                _ => {}
            }
        });
        out = out.with_buffer(dt, buf.freeze());
        out.set_color_mode(mode_out);
        ctx.emit(out);
        Ok(())
    }
}
