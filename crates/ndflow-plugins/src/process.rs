//! NDPluginProcess: background subtraction, flat-field normalisation, offset and scale,
//! low/high clipping, a recursive filter and output type conversion, in that order, computed in
//! f64 (reference §5, docs/NDPluginProcess.rst).
//!
//! Commands act as areaDetector's do:
//! - `SaveBackground` / `SaveFlatField` copy the **last output array** of this plugin (at once,
//!   in [`Plugin::param_changed`]), so acquire them with the corrections switched off;
//!   `ValidBackground_RBV` / `ValidFlatField_RBV` say whether the saved array fits the frame.
//! - `ResetFilter` and `AutoOffsetScale` act on the next frame processed.
//! - `FilterType` loads the preset coefficients OC1..4, FC1..4, RC1, RC2 (the template's
//!   `*Seq` records); writing `NumFilter` reloads the current preset, so Average follows 1/N.
//!
//! The filter array F has the frame's size and is kept between frames; it is re-created (and
//! the filter reset) when the frame's shape or data type, or FilterPrecision, changes.
//!
//! `FilterPrecision` is ndflow's own: Float64 (default) is areaDetector's arithmetic; Float32
//! stores F as f32 and evaluates the filter formulas in f32 (coefficients cast once per
//! frame, steps 1–4 still in f64), which halves the memory traffic of F — the bulk of this
//! plugin's cost on a large frame, where it is DRAM-bound.
//!
//! Deviations, on purpose: `AutoOffsetScale` already scales the frame it is computed from
//! (areaDetector applies it from the next frame, an artefact of its single loop); it sets
//! Low/HighClipValue as well as the thresholds, so clipping clamps to the output range; the
//! range for integer outputs is the type's `0..=MAX` (areaDetector's `2^bits − 1` overflows
//! signed types). Conversion to an integer output saturates (C leaves overflow undefined).

mod kernel;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use ndflow_core::{
    convert_slice, with_pixel_type, DataType, NDArray, ParamDef, ParamStore, ParamValue,
};
use ndflow_runtime::params::{DATA_TYPE_AUTOMATIC, DATA_TYPE_OUT_CHOICES};
use ndflow_runtime::{Plugin, PluginError, ProcessContext};
use parking_lot::Mutex;

use kernel::{FilterArray, FilterStep, Linear, PointOps};

/// FilterType menu (NDProcess.template), index = preset.
pub const FILTER_TYPES: &[&str] = &[
    "RecursiveAve",
    "Average",
    "Sum",
    "Difference",
    "RecursiveAveDiff",
    "CopyToFilter",
];

/// FilterPrecision menu (ndflow's own), index 1 = f32.
pub const FILTER_PRECISIONS: &[&str] = &["Float64", "Float32"];

const VALID: &[&str] = &["Invalid", "Valid"];

/// NDPluginProcess's own parameters (NDProcess.template names and enum strings).
#[rustfmt::skip]
pub const PROCESS_PARAMS: &[ParamDef] = &[
    ParamDef::yes_no("SaveBackground", 0).doc("Write 1 to save the last output array as the background"),
    ParamDef::enable("EnableBackground", 0).doc("Subtract the saved background"),
    ParamDef::enumeration("ValidBackground", VALID, 0).read_only().doc("A background of this frame's shape is saved"),
    ParamDef::yes_no("SaveFlatField", 0).doc("Write 1 to save the last output array as the flat field"),
    ParamDef::enable("EnableFlatField", 0).doc("Divide by the saved flat field (times ScaleFlatField)"),
    ParamDef::enumeration("ValidFlatField", VALID, 0).read_only().doc("A flat field of this frame's shape is saved"),
    ParamDef::float64("ScaleFlatField", 255.0).doc("Factor applied after dividing by the flat field"),
    ParamDef::enable("EnableOffsetScale", 0).doc("Apply (x + Offset) * Scale"),
    ParamDef::enumeration("AutoOffsetScale", &["Done", "Calculating"], 0).doc("Write 1: set Offset/Scale/clipping from the next frame's min/max to span the output type"),
    ParamDef::float64("Offset", 0.0).doc("Offset added before scaling"),
    ParamDef::float64("Scale", 1.0).doc("Scale factor"),
    ParamDef::enable("EnableLowClip", 0).doc("Replace values below LowClipThresh"),
    ParamDef::float64("LowClipThresh", 0.0).doc("Low clipping threshold"),
    ParamDef::float64("LowClipValue", 0.0).doc("Replacement for values below LowClipThresh"),
    ParamDef::enable("EnableHighClip", 0).doc("Replace values above HighClipThresh"),
    ParamDef::float64("HighClipThresh", 100.0).doc("High clipping threshold"),
    ParamDef::float64("HighClipValue", 100.0).doc("Replacement for values above HighClipThresh"),
    ParamDef::enumeration("DataTypeOut", DATA_TYPE_OUT_CHOICES, DATA_TYPE_AUTOMATIC).doc("Output data type (Automatic = input type)"),
    ParamDef::enable("EnableFilter", 0).doc("Apply the recursive filter"),
    ParamDef::yes_no("ResetFilter", 0).doc("Write 1 to reset the filter on the next frame"),
    ParamDef::yes_no("AutoResetFilter", 0).doc("Reset the filter after NumFilter frames"),
    ParamDef::enumeration("FilterCallbacks", &["Every array", "Array N only"], 0).doc("Emit every frame, or only when NumFiltered = NumFilter"),
    ParamDef::int32("NumFilter", 1).min(1.0).doc("Frames in the filter (N grows up to this)"),
    ParamDef::int32("NumFiltered", 0).read_only().doc("Frames filtered since the last reset (N)"),
    ParamDef::enumeration("FilterType", FILTER_TYPES, 0).doc("Load preset filter coefficients"),
    ParamDef::enumeration("FilterPrecision", FILTER_PRECISIONS, 0).doc("Storage and arithmetic of the recursive filter: Float64 is areaDetector's; Float32 halves the memory traffic (faster on large frames), with float precision"),
    ParamDef::float64("OOffset", 0.0).doc("Output offset"),
    ParamDef::float64("OScale", 1.0).doc("Output scale"),
    ParamDef::float64("OC1", 1.0).doc("Output coefficient 1 (F)"),
    ParamDef::float64("OC2", -1.0).doc("Output coefficient 2 (F/N)"),
    ParamDef::float64("OC3", 0.0).doc("Output coefficient 3 (I)"),
    ParamDef::float64("OC4", 1.0).doc("Output coefficient 4 (I/N)"),
    ParamDef::float64("FOffset", 0.0).doc("Filter offset"),
    ParamDef::float64("FScale", 1.0).doc("Filter scale"),
    ParamDef::float64("FC1", 1.0).doc("Filter coefficient 1 (F)"),
    ParamDef::float64("FC2", -1.0).doc("Filter coefficient 2 (F/N)"),
    ParamDef::float64("FC3", 0.0).doc("Filter coefficient 3 (I)"),
    ParamDef::float64("FC4", 1.0).doc("Filter coefficient 4 (I/N)"),
    ParamDef::float64("ROffset", 0.0).doc("Reset offset"),
    ParamDef::float64("RC1", 0.0).doc("Reset coefficient 1 (F)"),
    ParamDef::float64("RC2", 1.0).doc("Reset coefficient 2 (I)"),
    ParamDef::string("PortBackup", "")
        .doc("Port of ADCore's autosave backup (no effect in ndflow)"),
];

/// Preset coefficients `[OC1, OC2, OC3, OC4, FC1, FC2, FC3, FC4, RC1, RC2]` of a FilterType
/// (NDProcess.template `*Seq` records); Average uses 1/NumFilter.
pub fn filter_preset(filter_type: usize, num_filter: f64) -> Option<[f64; 10]> {
    let r = 1.0 / num_filter;
    Some(match filter_type {
        0 => [1.0, -1.0, 0.0, 1.0, 1.0, -1.0, 0.0, 1.0, 0.0, 1.0],
        1 => [1.0, 0.0, r, 0.0, 1.0, 0.0, r, 0.0, 0.0, 0.0],
        2 => [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0],
        3 => [-1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0],
        4 => [-1.0, 0.0, 1.0, 0.0, 1.0, -1.0, 0.0, 1.0, 0.0, 1.0],
        5 => [0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0],
        _ => return None,
    })
}

/// Indices of this plugin's parameters in the port's store, resolved once by name.
macro_rules! ids {
    ($($field:ident = $name:literal),* $(,)?) => {
        struct Ids { $($field: usize),* }
        impl Ids {
            fn resolve(p: &ParamStore) -> Option<Ids> {
                Some(Ids { $($field: p.index($name)?),* })
            }
        }
    };
}

ids! {
    save_background = "SaveBackground", enable_background = "EnableBackground",
    valid_background = "ValidBackground", save_flat = "SaveFlatField",
    enable_flat = "EnableFlatField", valid_flat = "ValidFlatField", scale_flat = "ScaleFlatField",
    enable_offset_scale = "EnableOffsetScale", auto_offset_scale = "AutoOffsetScale",
    offset = "Offset", scale = "Scale", enable_low_clip = "EnableLowClip",
    low_clip_thresh = "LowClipThresh", low_clip_value = "LowClipValue",
    enable_high_clip = "EnableHighClip", high_clip_thresh = "HighClipThresh",
    high_clip_value = "HighClipValue", data_type_out = "DataTypeOut",
    enable_filter = "EnableFilter", reset_filter = "ResetFilter",
    auto_reset_filter = "AutoResetFilter", filter_callbacks = "FilterCallbacks",
    num_filter = "NumFilter", num_filtered = "NumFiltered", filter_type = "FilterType",
    filter_precision = "FilterPrecision",
    o_offset = "OOffset", o_scale = "OScale", oc1 = "OC1", oc2 = "OC2", oc3 = "OC3", oc4 = "OC4",
    f_offset = "FOffset", f_scale = "FScale", fc1 = "FC1", fc2 = "FC2", fc3 = "FC3", fc4 = "FC4",
    r_offset = "ROffset", rc1 = "RC1", rc2 = "RC2",
}

/// One frame's view of the parameters, read under a single lock.
struct Settings {
    enable_background: bool,
    enable_flat: bool,
    scale_flat: f64,
    enable_offset_scale: bool,
    auto_offset_scale: bool,
    offset: f64,
    scale: f64,
    low_clip: Option<(f64, f64)>,
    high_clip: Option<(f64, f64)>,
    /// None = Automatic.
    data_type_out: Option<DataType>,
    enable_filter: bool,
    reset_filter: bool,
    auto_reset: bool,
    array_n_only: bool,
    num_filter: usize,
    /// FilterPrecision = Float32.
    f32_filter: bool,
    /// OOffset, OScale, OC1..4.
    o: [f64; 6],
    /// FOffset, FScale, FC1..4.
    f: [f64; 6],
    /// ROffset, RC1, RC2.
    r: [f64; 3],
}

impl Settings {
    fn read(params: &ParamStore, ids: &Ids) -> Settings {
        params.with_values(|v| {
            let num = |i: usize| v.get(i).and_then(ParamValue::as_f64).unwrap_or(0.0);
            let on = |i: usize| num(i) != 0.0;
            let choice = v
                .get(ids.data_type_out)
                .and_then(ParamValue::as_i64)
                .unwrap_or(0);
            Settings {
                enable_background: on(ids.enable_background),
                enable_flat: on(ids.enable_flat),
                scale_flat: num(ids.scale_flat),
                enable_offset_scale: on(ids.enable_offset_scale),
                auto_offset_scale: on(ids.auto_offset_scale),
                offset: num(ids.offset),
                scale: num(ids.scale),
                low_clip: on(ids.enable_low_clip)
                    .then(|| (num(ids.low_clip_thresh), num(ids.low_clip_value))),
                high_clip: on(ids.enable_high_clip)
                    .then(|| (num(ids.high_clip_thresh), num(ids.high_clip_value))),
                data_type_out: usize::try_from(choice)
                    .ok()
                    .and_then(|c| DATA_TYPE_OUT_CHOICES.get(c))
                    .and_then(|name| DataType::from_name(name).ok()),
                enable_filter: on(ids.enable_filter),
                reset_filter: on(ids.reset_filter),
                auto_reset: on(ids.auto_reset_filter),
                array_n_only: on(ids.filter_callbacks),
                // areaDetector clamps NumFilter < 1 to 1.
                num_filter: num(ids.num_filter).clamp(1.0, i32::MAX as f64) as usize,
                f32_filter: num(ids.filter_precision) == 1.0,
                o: [
                    ids.o_offset,
                    ids.o_scale,
                    ids.oc1,
                    ids.oc2,
                    ids.oc3,
                    ids.oc4,
                ]
                .map(num),
                f: [
                    ids.f_offset,
                    ids.f_scale,
                    ids.fc1,
                    ids.fc2,
                    ids.fc3,
                    ids.fc4,
                ]
                .map(num),
                r: [ids.r_offset, ids.rc1, ids.rc2].map(num),
            }
        })
    }
}

/// `off + scale·((c1 + c2/N)·F + (c3 + c4/N)·I)` folded into two coefficients for this N.
fn linear(c: [f64; 6], n: f64) -> Linear {
    let [off, scale, c1, c2, c3, c4] = c;
    Linear::new(off, scale * (c1 + c2 / n), scale * (c3 + c4 / n))
}

/// A saved background or flat field, f64, with the shape it was taken from.
struct Reference {
    sizes: Vec<usize>,
    data: Vec<f64>,
}

impl Reference {
    fn from_frame(frame: &NDArray) -> Option<Reference> {
        let data = with_pixel_type!(frame.data_type, T => {
            kernel::to_f64(frame.pixels::<T>().ok()?)
        });
        Some(Reference {
            sizes: frame.sizes(),
            data,
        })
    }

    fn fits(&self, frame: &NDArray) -> bool {
        same_shape(&self.sizes, frame)
    }
}

fn same_shape(sizes: &[usize], frame: &NDArray) -> bool {
    sizes.iter().copied().eq(frame.dims.iter().map(|d| d.size))
}

/// The recursive filter's stored array.
struct Filter {
    sizes: Vec<usize>,
    data_type: DataType,
    f: FilterArray,
}

#[derive(Default)]
struct State {
    background: Option<Reference>,
    flat: Option<Reference>,
    filter: Option<Filter>,
    num_filtered: usize,
    /// What SaveBackground / SaveFlatField copy (areaDetector's pArrays[0]).
    last_output: Option<Arc<NDArray>>,
}

/// NDPluginProcess. Serial (MaxThreads 1): the recursive filter depends on frame order.
#[derive(Default)]
pub struct ProcessPlugin {
    state: Mutex<State>,
    ids: OnceLock<Ids>,
    reset_pending: AtomicBool,
    auto_pending: AtomicBool,
}

impl ProcessPlugin {
    pub fn new() -> ProcessPlugin {
        ProcessPlugin::default()
    }

    fn ids(&self, params: &ParamStore) -> Option<&Ids> {
        if let Some(ids) = self.ids.get() {
            return Some(ids);
        }
        let ids = Ids::resolve(params)?;
        Some(self.ids.get_or_init(|| ids))
    }

    /// SaveBackground / SaveFlatField: copy the last output, or invalidate if there is none.
    fn save_reference(&self, params: &ParamStore, cmd: usize, valid: usize, flat: bool) {
        let mut st = self.state.lock();
        let saved = st.last_output.as_deref().and_then(Reference::from_frame);
        let ok = saved.is_some();
        if flat {
            st.flat = saved;
        } else {
            st.background = saved;
        }
        drop(st);
        params.set_many(&[(cmd, 0.into()), (valid, ParamValue::Int(ok as i64))]);
    }

    /// Loads the FilterType preset into the coefficient parameters.
    fn apply_preset(&self, params: &ParamStore, ids: &Ids) {
        let kind = params.get_i64(ids.filter_type);
        let n = params.get_f64(ids.num_filter).max(1.0);
        let Some(c) = usize::try_from(kind).ok().and_then(|k| filter_preset(k, n)) else {
            return;
        };
        let targets = [
            ids.oc1, ids.oc2, ids.oc3, ids.oc4, ids.fc1, ids.fc2, ids.fc3, ids.fc4, ids.rc1,
            ids.rc2,
        ];
        let writes: Vec<(usize, ParamValue)> = targets
            .iter()
            .zip(c)
            .map(|(&i, v)| (i, ParamValue::Float(v)))
            .collect();
        params.set_many(&writes);
    }

    /// AutoOffsetScale: Offset/Scale (and clipping) mapping this frame's span onto the output
    /// type's range; updates `s` for this frame and writes the parameters.
    fn auto_offset_scale(
        s: &mut Settings,
        input: &NDArray,
        out_dt: DataType,
        params: &ParamStore,
        ids: &Ids,
    ) -> Result<(), PluginError> {
        let span = with_pixel_type!(input.data_type, T => kernel::min_max(input.pixels::<T>()?));
        let Some((lo, hi)) = span.filter(|(lo, hi)| hi > lo) else {
            return Ok(());
        };
        let max = if out_dt.is_float() {
            2f64.powi(8 * out_dt.size() as i32) - 1.0
        } else {
            out_dt.range().1
        };
        s.offset = -lo;
        s.scale = max / (hi - lo);
        s.enable_offset_scale = true;
        s.low_clip = Some((0.0, 0.0));
        s.high_clip = Some((max, max));
        params.set_many(&[
            (ids.offset, s.offset.into()),
            (ids.scale, s.scale.into()),
            (ids.low_clip_thresh, 0.0.into()),
            (ids.low_clip_value, 0.0.into()),
            (ids.high_clip_thresh, max.into()),
            (ids.high_clip_value, max.into()),
            (ids.enable_offset_scale, 1.into()),
            (ids.enable_low_clip, 1.into()),
            (ids.enable_high_clip, 1.into()),
        ]);
        Ok(())
    }
}

impl Plugin for ProcessPlugin {
    fn plugin_type(&self) -> &'static str {
        "NDPluginProcess"
    }

    fn params(&self) -> &'static [ParamDef] {
        PROCESS_PARAMS
    }

    fn max_threads(&self) -> usize {
        1
    }

    fn param_changed(&self, params: &ParamStore, idx: usize, value: &ParamValue) {
        let Some(ids) = self.ids(params) else { return };
        let set = value.as_i64().unwrap_or(0) != 0;
        if idx == ids.save_background && set {
            self.save_reference(params, ids.save_background, ids.valid_background, false);
        } else if idx == ids.save_flat && set {
            self.save_reference(params, ids.save_flat, ids.valid_flat, true);
        } else if idx == ids.reset_filter && set {
            self.reset_pending.store(true, Ordering::Release);
        } else if idx == ids.auto_offset_scale && set {
            self.auto_pending.store(true, Ordering::Release);
        } else if idx == ids.filter_type || idx == ids.num_filter {
            self.apply_preset(params, ids);
        }
    }

    fn process(
        &self,
        input: &Arc<NDArray>,
        ctx: &mut ProcessContext<'_>,
    ) -> Result<(), PluginError> {
        if input.is_compressed() {
            return Err(PluginError::Unsupported(format!(
                "compressed array (codec {})",
                input.codec.name
            )));
        }
        if input.buffer.len() < input.total_bytes() {
            return Err(PluginError::Other(format!(
                "array buffer holds {} bytes, its dims need {}",
                input.buffer.len(),
                input.total_bytes()
            )));
        }
        let params = ctx.params;
        let ids = self
            .ids(params)
            .ok_or_else(|| PluginError::Other("NDPluginProcess parameters missing".into()))?;
        let mut s = Settings::read(params, ids);
        // Consume commands before processing; a write landing meanwhile stays pending.
        let reset_cmd = self.reset_pending.swap(false, Ordering::AcqRel) || s.reset_filter;
        let auto_cmd = self.auto_pending.swap(false, Ordering::AcqRel) || s.auto_offset_scale;
        let out_dt = s.data_type_out.unwrap_or(input.data_type);
        if auto_cmd {
            Self::auto_offset_scale(&mut s, input, out_dt, params, ids)?;
        }

        let mut guard = self.state.lock();
        let State {
            background,
            flat,
            filter,
            num_filtered,
            last_output,
        } = &mut *guard;
        let background = background.as_ref().filter(|b| b.fits(input));
        let flat = flat.as_ref().filter(|f| f.fits(input));
        let ops = PointOps {
            background: background
                .filter(|_| s.enable_background)
                .map(|b| &b.data[..]),
            flat: flat
                .filter(|_| s.enable_flat)
                .map(|f| (&f.data[..], s.scale_flat)),
            offset_scale: s.enable_offset_scale.then_some((s.offset, s.scale)),
            high_clip: s.high_clip,
            low_clip: s.low_clip,
        };
        let valid = [background.is_some(), flat.is_some()];
        let n = input.n_elements();

        let output = if ops.is_identity() && !s.enable_filter {
            Some(convert(input, out_dt, ctx)?)
        } else {
            let plan = s
                .enable_filter
                .then(|| FilterPlan::new(filter, *num_filtered, &s, input, reset_cmd));
            let emit = plan.as_ref().is_none_or(|p| p.emit);
            // Allocate before touching the filter, so a refused buffer leaves it as it was.
            let mut buf = if emit {
                Some(ctx.alloc(n * out_dt.size())?)
            } else {
                None
            };
            let filter = plan.and_then(|p| p.apply(filter, num_filtered, &s, input));
            let pixels_in = input.data_type;
            with_pixel_type!(pixels_in, I => {
                let src = input.pixels::<I>()?;
                with_pixel_type!(out_dt, O => {
                    let dst = buf.as_mut().map(|b| b.as_mut_slice::<O>());
                    kernel::run_step::<I, O>(src, &ops, filter, dst);
                })
            });
            buf.map(|b| Arc::new(input.with_buffer(out_dt, b.freeze())))
        };
        if let Some(out) = output {
            *last_output = Some(out.clone());
            ctx.emit(out);
        }
        let num_filtered = *num_filtered;
        drop(guard);

        params.set_many(&[
            (ids.valid_background, ParamValue::Int(valid[0] as i64)),
            (ids.valid_flat, ParamValue::Int(valid[1] as i64)),
            (ids.num_filtered, ParamValue::Int(num_filtered as i64)),
        ]);
        // Commands read back as done (areaDetector clears them after the frame).
        for (done, idx) in [
            (reset_cmd, ids.reset_filter),
            (auto_cmd, ids.auto_offset_scale),
        ] {
            if done {
                params.set_many(&[(idx, 0.into())]);
            }
        }
        Ok(())
    }
}

/// Step 5's decisions for one frame, in areaDetector's order: re-create F when the frame's
/// shape or type (or FilterPrecision) changed, reset when asked or after NumFilter frames
/// with AutoResetFilter, advance N. Decided before anything can fail, applied by
/// [`FilterPlan::apply`].
struct FilterPlan {
    init: bool,
    reset: bool,
    num_filtered: usize,
    emit: bool,
}

impl FilterPlan {
    fn new(
        filter: &Option<Filter>,
        num_filtered: usize,
        s: &Settings,
        input: &NDArray,
        reset_cmd: bool,
    ) -> FilterPlan {
        let fits = filter.as_ref().is_some_and(|f| {
            f.data_type == input.data_type
                && f.f.is_f32() == s.f32_filter
                && same_shape(&f.sizes, input)
        });
        let init = !fits;
        let reset = init || reset_cmd || (s.auto_reset && num_filtered >= s.num_filter);
        let mut n = if reset { 0 } else { num_filtered };
        if n < s.num_filter {
            n += 1;
        }
        FilterPlan {
            init,
            reset,
            num_filtered: n,
            emit: !s.array_n_only || n == s.num_filter,
        }
    }

    /// Commits the plan to the state and folds the coefficients for this N (`None` only if
    /// there is no filter array, which `init` rules out).
    fn apply<'a>(
        &self,
        filter: &'a mut Option<Filter>,
        num_filtered: &mut usize,
        s: &Settings,
        input: &NDArray,
    ) -> Option<FilterStep<'a>> {
        if self.init {
            let old = filter.take().map(|f| f.f);
            *filter = Some(Filter {
                sizes: input.sizes(),
                data_type: input.data_type,
                f: FilterArray::new(old, s.f32_filter, input.n_elements()),
            });
        }
        *num_filtered = self.num_filtered;
        let nf = self.num_filtered as f64;
        let [off, c1, c2] = s.r;
        Some(FilterStep {
            f: &mut filter.as_mut()?.f,
            init: self.init,
            reset: self.reset.then(|| Linear::new(off, c1, c2)),
            out: linear(s.o, nf),
            next: linear(s.f, nf),
        })
    }
}

/// Nothing enabled: the input in the output type. The same type shares the pixels (frames are
/// immutable); another type is converted with `as` casts, as NDArrayPool::convert does.
fn convert(
    input: &Arc<NDArray>,
    out_dt: DataType,
    ctx: &ProcessContext<'_>,
) -> Result<Arc<NDArray>, PluginError> {
    if out_dt == input.data_type {
        return Ok(Arc::new(input.with_buffer(out_dt, input.buffer.clone())));
    }
    let mut buf = ctx.alloc(input.n_elements() * out_dt.size())?;
    with_pixel_type!(input.data_type, I => {
        let src = input.pixels::<I>()?;
        with_pixel_type!(out_dt, O => convert_slice::<I, O>(src, buf.as_mut_slice::<O>()))
    });
    Ok(Arc::new(input.with_buffer(out_dt, buf.freeze())))
}
