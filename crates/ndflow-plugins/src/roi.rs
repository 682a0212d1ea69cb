//! NDPluginROI: an N-D region of the input, binned, reversed, scaled, converted.
//!
//! Order of operations, as areaDetector's: extract (X = dim 0, Y = dim 1, Z = dim 2; dims
//! beyond 3 are taken whole) → binning (sum of `bin` blocks; a partial block at the edge is
//! dropped, out size = size / bin) → reverse → optional scale (divide, in f64) → type
//! conversion → collapse of size-1 dims.
//!
//! Settings are clamped to each frame as NDPluginROI does: min ≤ input − 1,
//! 1 ≤ size ≤ input − min, 1 ≤ bin ≤ size; a disabled dim takes the whole input (bin 1, but
//! reversal still applies); AutoSize makes size = input − min. The clamped values are not
//! written back (the requested ones stay), `MaxSize{X,Y,Z}_RBV` show the input dims.
//!
//! Colour frames: X and Y always mean the image axes and Z the colour axis. For RGB1
//! (`[3, X, Y]`) the ROI's X/Y/Z act on dims 1/2/0, for RGB2 (`[X, 3, Y]`) on dims 0/2/1,
//! RGB3 is already `[X, Y, 3]`. When the colour dim stops being 3 wide the output's ColorMode
//! becomes Mono, and a single colour (size 1) is collapsed away even without CollapseDims.
//!
//! Output dims metadata accumulate through ROI chains: offset += min · input binning (in
//! unbinned detector pixels), binning *= bin, reverse ^= reverse.
//!
//! Fast paths: a whole-frame ROI with nothing to do shares the input's pixels; an unbinned
//! same-type region is one `copy_from_slice` per row. Kernels live in `roi/kernel.rs`.

mod kernel;

use ndflow_core::alarm::sev::{MINOR, NO};
use std::sync::Arc;

use ndflow_core::handle::{Flag, Int, Param};
use ndflow_core::{
    with_pixel_type, Codec, ColorMode, DataType, Derive, Dim, NDArray, ParamDef, ParamValue,
    MAX_DIMS,
};
use ndflow_runtime::port_params::{
    bind, plugin_layout, PluginBase, DATA_TYPE_AUTOMATIC, DATA_TYPE_OUT_CHOICES,
};
use ndflow_runtime::{Plugin, PluginError, ProcessContext};

use kernel::{DimPlan, Region};
use ndflow_runtime::{Built, PortType};

ndflow_core::params! {
    /// NDROI.template's parameters (DataType is `DataTypeOut`, as in the template's PV name).
    pub const ROI_PARAMS, pub struct RoiParams {
        name: string("Name", "").doc("Label of this region"),
        min_x: int32("MinX", 0)
            .min(0.0)
            .high_limit_from("MaxX")
            .doc("First input pixel of the region in X"),
        min_y: int32("MinY", 0)
            .min(0.0)
            .high_limit_from("MaxY")
            .doc("First input pixel of the region in Y"),
        min_z: int32("MinZ", 0)
            .min(0.0)
            .doc("First input pixel of the region in Z"),
        size_x: int32("SizeX", 1_000_000)
            .min(0.0)
            .high_limit_from("MaxX")
            .doc("Region size in X (input pixels, clamped to the input)"),
        size_y: int32("SizeY", 1_000_000)
            .min(0.0)
            .high_limit_from("MaxY")
            .doc("Region size in Y (input pixels, clamped to the input)"),
        size_z: int32("SizeZ", 1_000_000)
            .min(0.0)
            .doc("Region size in Z (input pixels, clamped to the input)"),
        bin_x: int32("BinX", 1)
            .min(1.0)
            .doc("Binning in X (sum; partial bins at the edge dropped)"),
        bin_y: int32("BinY", 1)
            .min(1.0)
            .doc("Binning in Y (sum; partial bins at the edge dropped)"),
        bin_z: int32("BinZ", 1)
            .min(1.0)
            .doc("Binning in Z (sum; partial bins at the edge dropped)"),
        reverse_x: yes_no("ReverseX", 0).doc("Reverse the region in X"),
        reverse_y: yes_no("ReverseY", 0).doc("Reverse the region in Y"),
        reverse_z: yes_no("ReverseZ", 0).doc("Reverse the region in Z"),
        enable_x: enable("EnableX", 1)
            .alarm_states(&[NO, MINOR])
            .doc("Disable: take the whole input in X"),
        enable_y: enable("EnableY", 1)
            .alarm_states(&[NO, MINOR])
            .doc("Disable: take the whole input in Y"),
        enable_z: enable("EnableZ", 1)
            .alarm_states(&[NO, MINOR])
            .doc("Disable: take the whole input in Z"),
        auto_size_x: yes_no("AutoSizeX", 0).doc("Yes: SizeX = input size - MinX"),
        auto_size_y: yes_no("AutoSizeY", 0).doc("Yes: SizeY = input size - MinY"),
        auto_size_z: yes_no("AutoSizeZ", 0).doc("Yes: SizeZ = input size - MinZ"),
        max_size_x: int32("MaxSizeX", 0)
            .read_only()
            .doc("Input size in X"),
        max_size_y: int32("MaxSizeY", 0)
            .read_only()
            .doc("Input size in Y"),
        max_size_z: int32("MaxSizeZ", 0)
            .read_only()
            .doc("Input size in Z"),
        data_type_out: enumeration("DataTypeOut", DATA_TYPE_OUT_CHOICES, DATA_TYPE_AUTOMATIC)
            .doc("Output data type (Automatic = input type)"),
        enable_scale: enable("EnableScale", 0)
            .alarm_states(&[NO, MINOR])
            .doc("Divide the output by Scale"),
        scale: float64("Scale", 1.0)
            .doc("Divisor applied after binning when EnableScale (0 and 1: none)"),
        collapse_dims: enable("CollapseDims", 0)
            .alarm_states(&[NO, MINOR])
            .doc("Remove dims of size 1 from the output"),
        max_x: int32("MaxX", 0)
            .read_only_plain()
            .doc("Input size in X: the high limit of MinX and SizeX"),
        max_y: int32("MaxY", 0)
            .read_only_plain()
            .doc("Input size in Y: the high limit of MinY and SizeY"),
        set_x_hopr: float64("SetXHOPR", 0.0)
            .read_only_plain()
            .helper("dfanout")
            .derived(Derive::Copy("MaxX"))
            .doc("MinX's and SizeX's high limit: MaxX (dfanout)"),
        set_y_hopr: float64("SetYHOPR", 0.0)
            .read_only_plain()
            .helper("dfanout")
            .derived(Derive::Copy("MaxY"))
            .doc("MinY's and SizeY's high limit: MaxY (dfanout)"),
    }
}

/// What the user asked for along one of X/Y/Z (unclamped).
#[derive(Debug, Clone, Copy)]
struct Axis {
    min: i64,
    size: i64,
    bin: i64,
    reverse: bool,
    enable: bool,
    auto_size: bool,
}

#[derive(Debug, Clone, Copy)]
struct Settings {
    axes: [Axis; 3],
    /// None = Automatic.
    data_type_out: Option<DataType>,
    /// Divisor, only when enabled and not a no-op.
    scale: Option<f64>,
    collapse: bool,
}

impl Settings {
    fn read(v: &[ParamValue], p: &RoiParams) -> Settings {
        let axis = |min: Param<Int>,
                    size: Param<Int>,
                    bin: Param<Int>,
                    reverse: Param<Flag>,
                    enable: Param<Flag>,
                    auto_size: Param<Flag>| Axis {
            min: min.read(v),
            size: size.read(v),
            bin: bin.read(v),
            reverse: reverse.read(v),
            enable: enable.read(v),
            auto_size: auto_size.read(v),
        };
        let axes = [
            axis(
                p.min_x,
                p.size_x,
                p.bin_x,
                p.reverse_x,
                p.enable_x,
                p.auto_size_x,
            ),
            axis(
                p.min_y,
                p.size_y,
                p.bin_y,
                p.reverse_y,
                p.enable_y,
                p.auto_size_y,
            ),
            axis(
                p.min_z,
                p.size_z,
                p.bin_z,
                p.reverse_z,
                p.enable_z,
                p.auto_size_z,
            ),
        ];
        let scale = p.scale.read(v);
        // areaDetector skips scaling for 0 and 1; a non-finite divisor is skipped too.
        let scale = (p.enable_scale.read(v) && scale != 0.0 && scale != 1.0 && scale.is_finite())
            .then_some(scale);
        Settings {
            axes,
            data_type_out: DataType::from_index(p.data_type_out.read(v)),
            scale,
            collapse: p.collapse_dims.read(v),
        }
    }
}

/// Array dim that each of X, Y, Z acts on: colour frames keep X/Y on the image axes.
fn axis_dims(frame: &NDArray) -> [usize; 3] {
    match frame.info().color_mode {
        ColorMode::RGB1 => [1, 2, 0],
        ColorMode::RGB2 => [0, 2, 1],
        _ => [0, 1, 2],
    }
}

/// Clamps one axis to an input dim of `n` (> 0) pixels, as NDPluginROI does.
fn clamp_axis(a: &Axis, n: usize) -> DimPlan {
    if !a.enable {
        return DimPlan {
            reverse: a.reverse,
            ..DimPlan::whole(n)
        };
    }
    let n64 = n as i64;
    let min = a.min.clamp(0, n64 - 1);
    let size = if a.auto_size { n64 } else { a.size };
    let size = size.clamp(1, n64 - min);
    let bin = a.bin.clamp(1, size);
    DimPlan {
        start: min as usize,
        out: (size / bin) as usize,
        bin: bin as usize,
        reverse: a.reverse,
    }
}

/// The clamped region of `frame`: one plan per input dim (the first `frame.ndims()`).
fn plan(frame: &NDArray, s: &Settings) -> [DimPlan; MAX_DIMS] {
    let mut dims = [DimPlan::whole(1); MAX_DIMS];
    for (p, d) in dims.iter_mut().zip(&frame.dims) {
        *p = DimPlan::whole(d.size);
    }
    for (axis, &d) in s.axes.iter().zip(&axis_dims(frame)) {
        if let (Some(p), Some(input)) = (dims.get_mut(d), frame.dims.get(d)) {
            *p = clamp_axis(axis, input.size);
        }
    }
    dims
}

/// Output dims: sizes from the plan, metadata accumulated onto the input's.
fn out_dims(input: &[Dim], plan: &[DimPlan]) -> Vec<Dim> {
    input
        .iter()
        .zip(plan)
        .map(|(d, p)| Dim {
            size: p.out,
            offset: d.offset + p.start * d.binning,
            binning: d.binning * p.bin,
            reverse: d.reverse ^ p.reverse,
        })
        .collect()
}

/// Colour mode and collapse rules of NDArrayPool::convert + NDPluginROI.
fn finish_dims(out: &mut NDArray, input_mode: ColorMode, collapse: bool) {
    let colour_dim = match input_mode {
        ColorMode::RGB1 => Some(0),
        ColorMode::RGB2 => Some(1),
        ColorMode::RGB3 => Some(2),
        _ => None,
    };
    let mut collapse = collapse;
    if let Some(c) = colour_dim {
        let size = out.dims.get(c).map(|d| d.size);
        if size != Some(3) {
            out.set_color_mode(ColorMode::Mono);
        }
        // One colour picked out: drop the colour dim even without CollapseDims.
        if out.ndims() == 3 && size == Some(1) {
            collapse = true;
        }
    }
    if collapse {
        // All size 1: areaDetector keeps the last dim.
        let last = out.dims.last().copied();
        out.dims.retain(|d| d.size != 1);
        if out.dims.is_empty() {
            out.dims.extend(last);
        }
    }
}

/// NDPluginROI. Stateless per frame: runs on up to 8 worker threads.
#[derive(Debug)]
pub struct RoiPlugin {
    p: RoiParams,
    base: PluginBase,
}

impl RoiPlugin {
    pub fn new() -> RoiPlugin {
        let layout = plugin_layout(ROI_PARAMS);
        RoiPlugin {
            p: bind(&layout, RoiParams::bind),
            base: PluginBase::of(&layout),
        }
    }
}

impl Default for RoiPlugin {
    fn default() -> Self {
        Self::new()
    }
}

impl Plugin for RoiPlugin {
    fn plugin_type(&self) -> &'static str {
        "NDPluginROI"
    }

    fn params(&self) -> &'static [ParamDef] {
        ROI_PARAMS
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
                "NDPluginROI needs uncompressed frames, got codec '{}'",
                input.codec.name
            )));
        }
        if input.dims.is_empty()
            || input.ndims() > MAX_DIMS
            || input.dims.iter().any(|d| d.size == 0)
        {
            return Err(PluginError::Unsupported(format!(
                "NDPluginROI: cannot take a frame of dims {:?}",
                input.sizes()
            )));
        }
        let settings = ctx.params.with_values(|v| Settings::read(v, &self.p));
        let map = axis_dims(input);
        let plan = plan(input, &settings);

        let in_dt = input.data_type;
        let out_dt = settings.data_type_out.unwrap_or(in_dt);
        let identity = out_dt == in_dt
            && settings.scale.is_none()
            && plan
                .iter()
                .zip(&input.dims)
                .all(|(p, d)| *p == DimPlan::whole(d.size));

        let mut out = NDArray::clone(input);
        out.dims = out_dims(&input.dims, &plan);
        if !identity {
            let region = Region::new(&input.dims, &plan);
            let n = region.out_len();
            let mut buf = ctx.alloc(n * out_dt.size())?;
            with_pixel_type!(in_dt, S => {
                let src = input.pixels::<S>()?;
                with_pixel_type!(out_dt, D => {
                    kernel::extract::<S, D>(&region, src, buf.as_mut_slice::<D>(), settings.scale)
                })
            })?;
            out.data_type = out_dt;
            out.buffer = buf.freeze();
            out.codec = Codec::default();
            out.compressed_size = n * out_dt.size();
        }
        finish_dims(&mut out, input.color_mode(), settings.collapse);

        let in_size = |a: usize| input.dims.get(map[a]).map_or(0, |d| d.size);
        let info = out.info();
        let out_z = match out.dims.get(info.color_dim).or(out.dims.get(2)) {
            Some(d) if out.ndims() > 2 => d.size,
            _ => 0,
        };
        let out_sizes = [
            info.x_size,
            if out.ndims() > 1 { info.y_size } else { 0 },
            out_z,
        ];
        let (p, a) = (&self.p, &self.base.array);
        ctx.params.set_many(&[
            p.max_size_x.value(in_size(0) as i64),
            p.max_size_y.value(in_size(1) as i64),
            p.max_x.value(in_size(0) as i64),
            p.max_y.value(in_size(1) as i64),
            p.max_size_z.value(in_size(2) as i64),
            a.array_size_x.value(out_sizes[0] as i64),
            a.array_size_y.value(out_sizes[1] as i64),
            a.array_size_z.value(out_sizes[2] as i64),
        ]);

        ctx.emit(out);
        Ok(())
    }
}

/// The port type `type = "roi"`.
pub const PORT: PortType = PortType::plugin(
    "roi",
    "NDPluginROI",
    "N-D region of interest with binning, reverse, scale, type",
    |_| Ok(Built::Plugin(std::sync::Arc::new(RoiPlugin::new()))),
);
