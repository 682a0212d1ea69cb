//! NDPluginTransform: rotate / mirror a 2-D image (Mono, or RGB1/2/3), any data type.
//!
//! The eight types, with X to the right and Y down (row 0 at the top), as ADCore's index
//! mapping: None; Rot90 (clockwise); Rot180; Rot270; Mirror (left-right); Rot90Mirror
//! (transpose); Rot180Mirror (up-down); Rot270Mirror (anti-transpose).
//!
//! Each type is an affine map from an output pixel (x', y') to its input element
//! `base + x'·sx + y'·sy` (one colour plane at a time), so one kernel serves all eight, every
//! colour layout and every type. Output X/Y dims take the metadata (offset, binning) of the
//! input axis they come from, and `reverse` flips when that axis is walked backwards —
//! ADCore only swaps the sizes; following the metadata keeps BadPixel and ROI offsets right.
//!
//! Unsupported (counted, not passed on): compressed frames, other than 2-D Mono or 3-D RGB
//! frames, Bayer and YUV (a rotated Bayer mosaic would change its pattern).

mod kernel;
mod swap;

/// The port type `type = "transform"`.
pub const PORT: PortType = PortType::plugin(
    "transform",
    "NDPluginTransform",
    "Rotations (90/180/270 clockwise) and mirrors of a Mono/RGB image",
    |_| Ok(Built::Plugin(std::sync::Arc::new(TransformPlugin::new()))),
);

#[cfg(test)]
mod tests;

use std::sync::Arc;

use ndflow_core::{with_pixel_type, ColorMode, Dim, NDArray, ParamDef};
use ndflow_runtime::port_params::{bind, plugin_layout};
use ndflow_runtime::{Built, PortType};
use ndflow_runtime::{Plugin, PluginError, ProcessContext};

pub use kernel::{Colour, Map};

/// NDTransform.template's menu, in order.
pub const TRANSFORM_TYPES: &[&str] = &[
    "None",
    "Rot90",
    "Rot180",
    "Rot270",
    "Mirror",
    "Rot90Mirror",
    "Rot180Mirror",
    "Rot270Mirror",
];

ndflow_core::params! {
    pub const TRANSFORM_PARAMS, pub struct TransformParams {
        type_: enumeration("Type", TRANSFORM_TYPES, 0)
            .doc("None, Rot90 (clockwise), Rot180, Rot270, Mirror (left-right), Rot90Mirror (transpose), Rot180Mirror (up-down), Rot270Mirror"),
    }
}

/// Where the image axes and colour planes of a frame are (element strides).
#[derive(Debug, Clone, Copy)]
struct Layout {
    x_dim: usize,
    y_dim: usize,
    colour: Colour,
}

fn layout(frame: &NDArray) -> Result<Layout, PluginError> {
    let info = frame.info();
    let l = match (frame.ndims(), info.color_mode) {
        (2, ColorMode::Mono) => Layout {
            x_dim: 0,
            y_dim: 1,
            colour: Colour::Mono,
        },
        (3, ColorMode::RGB1) => Layout {
            x_dim: 1,
            y_dim: 2,
            colour: Colour::Rgb1,
        },
        (3, ColorMode::RGB2) => Layout {
            x_dim: 0,
            y_dim: 2,
            colour: Colour::Rgb2,
        },
        (3, ColorMode::RGB3) => Layout {
            x_dim: 0,
            y_dim: 1,
            colour: Colour::Rgb3,
        },
        _ => {
            return Err(PluginError::Unsupported(format!(
                "NDPluginTransform takes 2-D Mono or 3-D RGB1/2/3 images, got dims {:?} colour {}",
                frame.sizes(),
                frame.color_mode().name()
            )))
        }
    };
    Ok(l)
}

/// Output dims: sizes and metadata of X/Y follow the transform, the colour dim stays.
fn out_dims(input: &[Dim], l: &Layout, map: &Map) -> Vec<Dim> {
    let mut out = input.to_vec();
    let pick = |from_y: bool, flip: bool| {
        let d = input[if from_y { l.y_dim } else { l.x_dim }];
        Dim {
            reverse: d.reverse ^ flip,
            ..d
        }
    };
    out[l.x_dim] = pick(map.swap, map.flip_x);
    out[l.y_dim] = pick(!map.swap, map.flip_y);
    out
}

/// NDPluginTransform. Stateless per frame: up to 8 worker threads.
#[derive(Debug)]
pub struct TransformPlugin {
    p: TransformParams,
}

impl TransformPlugin {
    pub fn new() -> TransformPlugin {
        TransformPlugin {
            p: bind(&plugin_layout(TRANSFORM_PARAMS), TransformParams::bind),
        }
    }
}

impl Default for TransformPlugin {
    fn default() -> Self {
        Self::new()
    }
}

impl Plugin for TransformPlugin {
    fn plugin_type(&self) -> &'static str {
        "NDPluginTransform"
    }

    fn params(&self) -> &'static [ParamDef] {
        TRANSFORM_PARAMS
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
                "NDPluginTransform needs uncompressed frames, got codec '{}'",
                input.codec.name
            )));
        }
        let l = layout(input)?;
        let kind = self.p.type_.get(ctx.params);
        let (w, h) = (input.dims[l.x_dim].size, input.dims[l.y_dim].size);
        let map = Map::new(kind, w, h);
        if map.is_identity() {
            // Type None: the frame passes unchanged, pixels shared.
            ctx.emit(Arc::clone(input));
            return Ok(());
        }
        let mut out = NDArray::clone(input);
        out.dims = out_dims(&input.dims, &l, &map);
        let n = input.n_elements();
        let dt = input.data_type;
        let mut buf = ctx.alloc(n * dt.size())?;
        with_pixel_type!(dt, T => {
            let src = input.pixels::<T>()?;
            let dst = buf.as_mut_slice::<T>();
            kernel::transform_frame(src, dst, &map, l.colour)
        })?;
        ctx.emit(out.with_buffer(dt, buf.freeze()));
        Ok(())
    }
}
