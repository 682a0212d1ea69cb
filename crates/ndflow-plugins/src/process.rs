//! NDPluginProcess: background subtraction, flat-field normalisation, offset and scale,
//! low/high clipping, a recursive filter and output type conversion, in that order, computed in
//! f64 (as ADCore's NDPluginProcess documentation describes).
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

use ndflow_core::alarm::sev::{MINOR, NO};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ndflow_core::handle::{Flag, Menu, Param};
use ndflow_core::{
    convert_slice, with_pixel_type, DataType, Derive, NDArray, ParamDef, ParamStore, ParamValue,
};
use ndflow_runtime::port_params::{
    bind, plugin_layout, DATA_TYPE_AUTOMATIC, DATA_TYPE_OUT_CHOICES,
};
use ndflow_runtime::{Plugin, PluginError, ProcessContext};
use parking_lot::Mutex;

use kernel::{FilterArray, FilterStep, Linear, PointOps};
use ndflow_runtime::{Built, PortType};

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

ndflow_core::params! {
    /// NDPluginProcess's own parameters (NDProcess.template names and enum strings).
    pub const PROCESS_PARAMS, pub struct ProcessParams {
        save_background: yes_no("SaveBackground", 0).doc("Write 1 to save the last output array as the background"),
        enable_background: enable("EnableBackground", 0)
            .alarm_states(&[NO, MINOR])
            .doc("Subtract the saved background"),
        valid_background: enumeration("ValidBackground", VALID, 0).read_only().doc("A background of this frame's shape is saved"),
        save_flat_field: yes_no("SaveFlatField", 0).doc("Write 1 to save the last output array as the flat field"),
        enable_flat_field: enable("EnableFlatField", 0)
            .alarm_states(&[NO, MINOR])
            .doc("Divide by the saved flat field (times ScaleFlatField)"),
        valid_flat_field: enumeration("ValidFlatField", VALID, 0).read_only().doc("A flat field of this frame's shape is saved"),
        scale_flat_field: float64("ScaleFlatField", 255.0).doc("Factor applied after dividing by the flat field"),
        enable_offset_scale: enable("EnableOffsetScale", 0)
            .alarm_states(&[NO, MINOR])
            .doc("Apply (x + Offset) * Scale"),
        auto_offset_scale: enumeration("AutoOffsetScale", &["Done", "Calculating"], 0).busy().doc("Write 1: set Offset/Scale/clipping from the next frame's min/max to span the output type"),
        offset: float64("Offset", 0.0).doc("Offset added before scaling"),
        scale: float64("Scale", 1.0).doc("Scale factor"),
        enable_low_clip: enable("EnableLowClip", 0)
            .alarm_states(&[NO, MINOR])
            .doc("Replace values below LowClipThresh"),
        low_clip_thresh: float64("LowClipThresh", 0.0).doc("Low clipping threshold"),
        low_clip_value: float64("LowClipValue", 0.0).doc("Replacement for values below LowClipThresh"),
        enable_high_clip: enable("EnableHighClip", 0)
            .alarm_states(&[NO, MINOR])
            .doc("Replace values above HighClipThresh"),
        high_clip_thresh: float64("HighClipThresh", 100.0).doc("High clipping threshold"),
        high_clip_value: float64("HighClipValue", 100.0).doc("Replacement for values above HighClipThresh"),
        data_type_out: enumeration("DataTypeOut", DATA_TYPE_OUT_CHOICES, DATA_TYPE_AUTOMATIC).doc("Output data type (Automatic = input type)"),
        enable_filter: enable("EnableFilter", 0)
            .alarm_states(&[NO, MINOR])
            .doc("Apply the recursive filter"),
        reset_filter: yes_no("ResetFilter", 0).doc("Write 1 to reset the filter on the next frame"),
        auto_reset_filter: yes_no("AutoResetFilter", 0).doc("Reset the filter after NumFilter frames"),
        filter_callbacks: enumeration("FilterCallbacks", &["Every array", "Array N only"], 0).doc("Emit every frame, or only when NumFiltered = NumFilter"),
        num_filter: int32("NumFilter", 1).min(1.0).doc("Frames in the filter (N grows up to this)"),
        num_filtered: int32("NumFiltered", 0).read_only().doc("Frames filtered since the last reset (N)"),
        filter_type: enumeration("FilterType", FILTER_TYPES, 0).doc("Load preset filter coefficients"),
        filter_precision: enumeration("FilterPrecision", FILTER_PRECISIONS, 0).doc("Storage and arithmetic of the recursive filter: Float64 is areaDetector's; Float32 halves the memory traffic (faster on large frames), with float precision"),
        o_offset: float64("OOffset", 0.0).doc("Output offset"),
        o_scale: float64("OScale", 1.0).doc("Output scale"),
        oc1: float64("OC1", 1.0).doc("Output coefficient 1 (F)"),
        oc2: float64("OC2", -1.0).doc("Output coefficient 2 (F/N)"),
        oc3: float64("OC3", 0.0).doc("Output coefficient 3 (I)"),
        oc4: float64("OC4", 1.0).doc("Output coefficient 4 (I/N)"),
        f_offset: float64("FOffset", 0.0).doc("Filter offset"),
        f_scale: float64("FScale", 1.0).doc("Filter scale"),
        fc1: float64("FC1", 1.0).doc("Filter coefficient 1 (F)"),
        fc2: float64("FC2", -1.0).doc("Filter coefficient 2 (F/N)"),
        fc3: float64("FC3", 0.0).doc("Filter coefficient 3 (I)"),
        fc4: float64("FC4", 1.0).doc("Filter coefficient 4 (I/N)"),
        r_offset: float64("ROffset", 0.0).doc("Reset offset"),
        rc1: float64("RC1", 0.0).doc("Reset coefficient 1 (F)"),
        rc2: float64("RC2", 1.0).doc("Reset coefficient 2 (I)"),
        port_backup: string("PortBackup", "")
            .doc("Port of ADCore's autosave backup (no effect in ndflow)"),
        // NDProcess.template's helper records: FilterType's seq runs the seq of its preset,
        // each of which loads the preset's coefficients (a write or .PROC runs them).
        num_filter_recip: float64("NumFilterRecip", 1.0).read_only_plain().helper("calc").derived(Derive::Reciprocal("NumFilter")).doc("1/NumFilter: Average's coefficients (calc)"),
        filter_type_seq: int32("FilterTypeSeq", 0).write_plain().helper("seq").doc("Loads the coefficients of the FilterType preset (seq)"),
        recursive_ave_seq: int32("RecursiveAveSeq", 0).write_plain().helper("seq").doc("Loads the RecursiveAve coefficients (seq)"),
        average_seq: int32("AverageSeq", 0).write_plain().helper("seq").doc("Loads the Average coefficients (seq)"),
        sum_seq: int32("SumSeq", 0).write_plain().helper("seq").doc("Loads the Sum coefficients (seq)"),
        difference_seq: int32("DifferenceSeq", 0).write_plain().helper("seq").doc("Loads the Difference coefficients (seq)"),
        recursive_ave_diff_seq: int32("RecursiveAveDiffSeq", 0).write_plain().helper("seq").doc("Loads the RecursiveAveDiff coefficients (seq)"),
        copy_to_filter_seq: int32("CopyToFilterSeq", 0).write_plain().helper("seq").doc("Loads the CopyToFilter coefficients (seq)"),
        read_background_tiff_seq: int32("ReadBackgroundTIFFSeq", 0).write_plain().helper("sseq").doc("ADCore reads a background from a TIFF file through its TIFF sub-plugin; ndflow has none: not acted on (use SaveBackground)"),
        read_flat_field_tiff_seq: int32("ReadFlatFieldTIFFSeq", 0).write_plain().helper("sseq").doc("ADCore reads a flat field from a TIFF file through its TIFF sub-plugin; ndflow has none: not acted on (use SaveFlatField)"),
    }
}

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
    fn read(params: &ParamStore, p: &ProcessParams) -> Settings {
        params.with_values(|v| Settings {
            enable_background: p.enable_background.read(v),
            enable_flat: p.enable_flat_field.read(v),
            scale_flat: p.scale_flat_field.read(v),
            enable_offset_scale: p.enable_offset_scale.read(v),
            auto_offset_scale: p.auto_offset_scale.read(v) != 0,
            offset: p.offset.read(v),
            scale: p.scale.read(v),
            low_clip: p
                .enable_low_clip
                .read(v)
                .then(|| (p.low_clip_thresh.read(v), p.low_clip_value.read(v))),
            high_clip: p
                .enable_high_clip
                .read(v)
                .then(|| (p.high_clip_thresh.read(v), p.high_clip_value.read(v))),
            data_type_out: usize::try_from(p.data_type_out.read(v))
                .ok()
                .and_then(|c| DATA_TYPE_OUT_CHOICES.get(c))
                .and_then(|name| DataType::from_name(name).ok()),
            enable_filter: p.enable_filter.read(v),
            reset_filter: p.reset_filter.read(v),
            auto_reset: p.auto_reset_filter.read(v),
            array_n_only: p.filter_callbacks.read(v) != 0,
            // areaDetector clamps NumFilter < 1 to 1.
            num_filter: p.num_filter.read(v).clamp(1, i32::MAX as i64) as usize,
            f32_filter: p.filter_precision.read(v) == 1,
            o: [p.o_offset, p.o_scale, p.oc1, p.oc2, p.oc3, p.oc4].map(|c| c.read(v)),
            f: [p.f_offset, p.f_scale, p.fc1, p.fc2, p.fc3, p.fc4].map(|c| c.read(v)),
            r: [p.r_offset, p.rc1, p.rc2].map(|c| c.read(v)),
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
pub struct ProcessPlugin {
    p: ProcessParams,
    state: Mutex<State>,
    reset_pending: AtomicBool,
    auto_pending: AtomicBool,
}

impl Default for ProcessPlugin {
    fn default() -> Self {
        Self::new()
    }
}

impl ProcessPlugin {
    pub fn new() -> ProcessPlugin {
        ProcessPlugin {
            p: bind(&plugin_layout(PROCESS_PARAMS), ProcessParams::bind),
            state: Mutex::default(),
            reset_pending: AtomicBool::new(false),
            auto_pending: AtomicBool::new(false),
        }
    }

    /// SaveBackground / SaveFlatField: copy the last output, or invalidate if there is none.
    fn save_reference(
        &self,
        params: &ParamStore,
        cmd: Param<Flag>,
        valid: Param<Menu>,
        flat: bool,
    ) {
        let mut st = self.state.lock();
        let saved = st.last_output.as_deref().and_then(Reference::from_frame);
        let ok = saved.is_some();
        if flat {
            st.flat = saved;
        } else {
            st.background = saved;
        }
        drop(st);
        params.set_many(&[cmd.value(false), valid.value(ok as i64)]);
    }

    /// Loads the FilterType preset into the coefficient parameters.
    fn apply_preset(&self, params: &ParamStore) {
        if let Ok(kind) = usize::try_from(self.p.filter_type.get(params)) {
            self.load_preset(params, kind);
        }
    }

    /// Loads the coefficients of preset `kind` (an index of the FilterType menu).
    fn load_preset(&self, params: &ParamStore, kind: usize) {
        let p = &self.p;
        let n = (p.num_filter.get(params) as f64).max(1.0);
        let Some(c) = filter_preset(kind, n) else {
            return;
        };
        let targets = [
            p.oc1, p.oc2, p.oc3, p.oc4, p.fc1, p.fc2, p.fc3, p.fc4, p.rc1, p.rc2,
        ];
        let writes: Vec<(usize, ParamValue)> =
            targets.iter().zip(c).map(|(t, v)| t.value(v)).collect();
        params.set_many(&writes);
    }

    /// AutoOffsetScale: Offset/Scale (and clipping) mapping this frame's span onto the output
    /// type's range; updates `s` for this frame and writes the parameters.
    fn auto_offset_scale(
        s: &mut Settings,
        input: &NDArray,
        out_dt: DataType,
        params: &ParamStore,
        p: &ProcessParams,
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
            p.offset.value(s.offset),
            p.scale.value(s.scale),
            p.low_clip_thresh.value(0.0),
            p.low_clip_value.value(0.0),
            p.high_clip_thresh.value(max),
            p.high_clip_value.value(max),
            p.enable_offset_scale.value(true),
            p.enable_low_clip.value(true),
            p.enable_high_clip.value(true),
            // Done: a busy put completes, and the next frame does not compute again.
            p.auto_offset_scale.value(0),
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
        let p = &self.p;
        let set = value.as_i64().unwrap_or(0) != 0;
        if p.save_background.is(idx) && set {
            self.save_reference(params, p.save_background, p.valid_background, false);
        } else if p.save_flat_field.is(idx) && set {
            self.save_reference(params, p.save_flat_field, p.valid_flat_field, true);
        } else if p.reset_filter.is(idx) && set {
            self.reset_pending.store(true, Ordering::Release);
        } else if p.auto_offset_scale.is(idx) && set {
            self.auto_pending.store(true, Ordering::Release);
        } else if p.filter_type.is(idx) || p.num_filter.is(idx) || p.filter_type_seq.is(idx) {
            self.apply_preset(params);
        } else if let Some(kind) = [
            p.recursive_ave_seq,
            p.average_seq,
            p.sum_seq,
            p.difference_seq,
            p.recursive_ave_diff_seq,
            p.copy_to_filter_seq,
        ]
        .iter()
        .position(|h| h.is(idx))
        {
            self.load_preset(params, kind);
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
        let p = &self.p;
        let mut s = Settings::read(params, p);
        // Consume commands before processing; a write landing meanwhile stays pending.
        let reset_cmd = self.reset_pending.swap(false, Ordering::AcqRel) || s.reset_filter;
        let auto_cmd = self.auto_pending.swap(false, Ordering::AcqRel) || s.auto_offset_scale;
        let out_dt = s.data_type_out.unwrap_or(input.data_type);
        if auto_cmd {
            Self::auto_offset_scale(&mut s, input, out_dt, params, p)?;
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
            p.valid_background.value(valid[0] as i64),
            p.valid_flat_field.value(valid[1] as i64),
            p.num_filtered.value(num_filtered as i64),
        ]);
        // Commands read back as done (areaDetector clears them after the frame).
        if reset_cmd {
            p.reset_filter.set(params, false);
        }
        if auto_cmd {
            p.auto_offset_scale.set(params, 0);
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

/// The port type `type = "process"`.
pub const PORT: PortType = PortType::plugin(
    "process",
    "NDPluginProcess",
    "Background, flat field, offset/scale, clipping, recursive filter",
    |_| Ok(Built::Plugin(std::sync::Arc::new(ProcessPlugin::new()))),
);
