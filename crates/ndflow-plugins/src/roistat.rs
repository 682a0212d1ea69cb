//! NDPluginROIStat: min, max, mean, total and net of up to 32 rectangular ROIs of 1-D or 2-D
//! frames of any type, in one pass over the frame, with per-ROI time series.
//!
//! Parameters: the port's ResetAll and time-series records (TSControl Erase/Start, Start,
//! Stop, Read, Erase; TSRead; TSNumPoints; TSCurrentPoint; TSAcquiring; plus TSAcquireMode
//! from NDTimeSeries) and, per ROI N = 1..MaxROIs (config key, default 8, at most 32),
//! NDROIStatN's records under `N:` (`{port prefix}N:MinX`, ...).
//!
//! As ADCore (NDPluginROIStat.cpp): each used ROI is clamped to the frame (MinX in
//! [0, size-1], SizeX in [1, size-MinX]; Y likewise on 2-D frames) and the clamped values are
//! written back to MinX/SizeX/MinY/SizeY, MaxSizeX/Y are the frame's sizes (MaxSizeY 0 on a
//! 1-D frame); net = total − (mean of the background) · elements, where the background is
//! the ROI's own border of BgdWidth (clamped to the ROI): the top and bottom BgdWidth rows
//! whole (a row in both counts twice) and the left and right BgdWidth columns of the rows
//! between; on a 1-D frame the left and right strips. Reset zeroes one ROI's results,
//! ResetAll every ROI's. While TSAcquiring each frame adds one point (min, max, mean,
//! total, net of every ROI, 0 for unused ones, and the frame's time stamp); the waveforms
//! `N:TS*` are published on Stop, Read, Erase, TSRead and when a Fixed length series fills.
//! The input frame is passed on with the same pixels.
//!
//! Deviations: every frame also carries the results of the used ROIs as Float64 attributes
//! `ROI<N>MinValue`, `ROI<N>MaxValue`, `ROI<N>MeanValue`, `ROI<N>Total`, `ROI<N>Net` (ADCore
//! appends whatever its attribute file names); TSControl's default is Stop; TSAcquireMode is
//! an addition (Circ. buffer keeps the latest TSNumPoints points). Unsupported (counted, not
//! passed on): compressed frames and frames of 3 or more dims.

mod kernel;

use std::sync::Arc;

use ndflow_core::{
    with_pixel_type, AttrValue, DataType, NDArray, NDAttribute, ParamDef, ParamStore, ParamValue,
};
use ndflow_runtime::{param_index, Plugin, PluginError, ProcessContext, Resolved};

pub use kernel::{scan, scan_portable, Rect, RoiPixel, RoiStats};

use crate::timeseries::{first_addresses, with_ts_control, TsRecorder};

/// ROIs per port: the default and the most a port can be configured with.
pub const DEFAULT_ROIS: usize = 8;
pub const MAX_ROIS: usize = 32;

/// Result names, in [`RoiStats`]' order (records `N:Name_RBV`, waveforms `N:TSName`).
pub const RESULTS: [&str; 5] = ["MinValue", "MaxValue", "MeanValue", "Total", "Net"];

macro_rules! roistat_params {
    ($($n:literal),+) => {
        with_ts_control![
            ParamDef::enumeration("ResetAll", &["", ""], 0).doc("Zero the results of every ROI"),
            $(
                ParamDef::string(concat!($n, ":Name"), "").doc("Name of this ROI"),
                ParamDef::yes_no(concat!($n, ":Use"), 0).doc("Compute this ROI"),
                ParamDef::enumeration(concat!($n, ":Reset"), &["", ""], 0).doc("Zero this ROI's results"),
                ParamDef::int32(concat!($n, ":BgdWidth"), 0).min(0.0).doc("Border width used as background for Net (0: Net = Total)"),
                ParamDef::int32(concat!($n, ":MinX"), 0).doc("First X (clamped to the frame)"),
                ParamDef::int32(concat!($n, ":MinY"), 0).doc("First Y (clamped to the frame)"),
                ParamDef::int32(concat!($n, ":SizeX"), 0).doc("Width (clamped to the frame)"),
                ParamDef::int32(concat!($n, ":SizeY"), 0).doc("Height (clamped to the frame)"),
                ParamDef::int32(concat!($n, ":MaxSizeX"), 0).read_only().doc("X size of the last frame"),
                ParamDef::int32(concat!($n, ":MaxSizeY"), 0).read_only().doc("Y size of the last frame (0: 1-D)"),
                ParamDef::float64(concat!($n, ":MinValue"), 0.0).read_only().doc("Minimum in the ROI"),
                ParamDef::float64(concat!($n, ":MaxValue"), 0.0).read_only().doc("Maximum in the ROI"),
                ParamDef::float64(concat!($n, ":MeanValue"), 0.0).read_only().doc("Mean of the ROI"),
                ParamDef::float64(concat!($n, ":Total"), 0.0).read_only().doc("Sum of the ROI"),
                ParamDef::float64(concat!($n, ":Net"), 0.0).read_only().doc("Total minus the mean border value times the elements"),
                ParamDef::array(concat!($n, ":TSMinValue"), DataType::Float64).doc("Time series of MinValue"),
                ParamDef::array(concat!($n, ":TSMaxValue"), DataType::Float64).doc("Time series of MaxValue"),
                ParamDef::array(concat!($n, ":TSMeanValue"), DataType::Float64).doc("Time series of MeanValue"),
                ParamDef::array(concat!($n, ":TSTotal"), DataType::Float64).doc("Time series of Total"),
                ParamDef::array(concat!($n, ":TSNet"), DataType::Float64).doc("Time series of Net"),
                ParamDef::array(concat!($n, ":TSTimestamp"), DataType::Float64).doc("Time stamps of the time series"),
            )+
        ]
    };
}

/// NDROIStat's records, then NDROIStatN's once per ROI (`N:`), for [`MAX_ROIS`].
#[rustfmt::skip]
pub const ROISTAT_PARAMS: &[ParamDef] = roistat_params!(
    "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16", "17",
    "18", "19", "20", "21", "22", "23", "24", "25", "26", "27", "28", "29", "30", "31", "32"
);

/// MaxThreads_RBV: the available cores, at most this many.
const MAX_THREADS: usize = 8;

/// One ROI's parameter indices.
#[derive(Debug)]
struct Slot {
    name: usize,
    use_: usize,
    reset: usize,
    bgd: usize,
    min: [usize; 2],
    size: [usize; 2],
    max_size: [usize; 2],
    results: [usize; 5],
}

impl Slot {
    fn resolve(p: &ParamStore, n: usize) -> Result<Slot, PluginError> {
        let one = |name: &str| param_index(p, "NDPluginROIStat", &format!("{n}:{name}"));
        let mut results = [0; 5];
        for (r, name) in results.iter_mut().zip(RESULTS) {
            *r = one(name)?;
        }
        Ok(Slot {
            name: one("Name")?,
            use_: one("Use")?,
            reset: one("Reset")?,
            bgd: one("BgdWidth")?,
            min: [one("MinX")?, one("MinY")?],
            size: [one("SizeX")?, one("SizeY")?],
            max_size: [one("MaxSizeX")?, one("MaxSizeY")?],
            results,
        })
    }
}

#[derive(Debug)]
struct Indices {
    reset_all: usize,
    slots: Vec<Slot>,
}

/// A used ROI as requested: (ROI number from 0, MinX, MinY, SizeX, SizeY, BgdWidth, Name).
type Request = (usize, [i64; 4], i64, String);

/// NDPluginROIStat. Thread-safe: frames may be processed at once (time-series points then
/// go in the order the frames finish).
#[derive(Debug)]
pub struct RoiStatPlugin {
    n_rois: usize,
    ix: Resolved<Indices>,
    ts: TsRecorder,
    max_threads: usize,
}

impl Default for RoiStatPlugin {
    fn default() -> Self {
        Self::new()
    }
}

impl RoiStatPlugin {
    pub fn new() -> Self {
        Self::with_rois(DEFAULT_ROIS)
    }

    /// A port with `n` ROIs (1..=32, clamped).
    pub fn with_rois(n: usize) -> Self {
        let n_rois = n.clamp(1, MAX_ROIS);
        let mut series = Vec::new();
        let mut stamps = Vec::new();
        for r in 1..=n_rois {
            series.extend(RESULTS.iter().map(|s| format!("{r}:TS{s}")));
            stamps.push(format!("{r}:TSTimestamp"));
        }
        RoiStatPlugin {
            n_rois,
            ix: Resolved::default(),
            ts: TsRecorder::new("NDPluginROIStat", series, stamps),
            max_threads: std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(MAX_THREADS),
        }
    }

    fn ix(&self, p: &ParamStore) -> Result<&Indices, PluginError> {
        self.ix.get_or_resolve(|| {
            Ok(Indices {
                reset_all: param_index(p, "NDPluginROIStat", "ResetAll")?,
                slots: (1..=self.n_rois)
                    .map(|n| Slot::resolve(p, n))
                    .collect::<Result<_, _>>()?,
            })
        })
    }

    fn zero(slot: &Slot, w: &mut Vec<(usize, ParamValue)>) {
        w.extend(slot.results.iter().map(|&i| (i, ParamValue::Float(0.0))));
    }
}

/// Clamps a request to a frame of `sizes` (1 or 2 dims) as ADCore does.
pub fn clamp(min: [i64; 2], size: [i64; 2], bgd: i64, sizes: &[usize]) -> Rect {
    let dim = |d: usize| -> (usize, usize) {
        let n = sizes.get(d).copied().unwrap_or(1).max(1) as i64;
        let x0 = min[d].clamp(0, n - 1);
        let nx = size[d].max(1).min(n - x0);
        (x0 as usize, nx as usize)
    };
    let (x0, nx) = dim(0);
    let (y0, ny) = if sizes.len() > 1 { dim(1) } else { (0, 1) };
    Rect {
        x0,
        nx,
        y0,
        ny,
        bgd: usize::try_from(bgd).unwrap_or(0),
    }
}

impl Plugin for RoiStatPlugin {
    fn plugin_type(&self) -> &'static str {
        "NDPluginROIStat"
    }

    fn params(&self) -> &'static [ParamDef] {
        first_addresses(ROISTAT_PARAMS, MAX_ROIS, self.n_rois)
    }

    fn max_threads(&self) -> usize {
        self.max_threads
    }

    fn param_changed(&self, p: &ParamStore, idx: usize, value: &ParamValue) {
        let Ok(ix) = self.ix(p) else { return };
        let mut w = Vec::new();
        if idx == ix.reset_all {
            ix.slots.iter().for_each(|s| Self::zero(s, &mut w));
        } else if let Some(s) = ix.slots.iter().find(|s| s.reset == idx) {
            Self::zero(s, &mut w);
        } else {
            self.ts.param_changed(p, idx, value);
            return;
        }
        p.set_many(&w);
    }

    fn process(
        &self,
        input: &Arc<NDArray>,
        ctx: &mut ProcessContext<'_>,
    ) -> Result<(), PluginError> {
        if input.is_compressed() {
            return Err(PluginError::Unsupported(format!(
                "NDPluginROIStat needs uncompressed frames, got codec '{}'",
                input.codec.name
            )));
        }
        let sizes = input.sizes();
        if !(1..=2).contains(&sizes.len()) || sizes.contains(&0) {
            return Err(PluginError::Unsupported(format!(
                "NDPluginROIStat takes 1-D or 2-D frames, got dims {sizes:?}"
            )));
        }
        let ix = self.ix(ctx.params)?;
        let p = ctx.params;
        let requests: Vec<Request> = p.with_values(|v| {
            let int = |i: usize| v.get(i).and_then(ParamValue::as_i64).unwrap_or(0);
            ix.slots
                .iter()
                .enumerate()
                .filter(|(_, s)| int(s.use_) != 0)
                .map(|(k, s)| {
                    let name = match v.get(s.name) {
                        Some(ParamValue::Str(n)) => n.clone(),
                        _ => String::new(),
                    };
                    let geometry = [int(s.min[0]), int(s.min[1]), int(s.size[0]), int(s.size[1])];
                    (k, geometry, int(s.bgd), name)
                })
                .collect()
        });
        let rects: Vec<Rect> = requests
            .iter()
            .map(|(_, g, bgd, _)| clamp([g[0], g[1]], [g[2], g[3]], *bgd, &sizes))
            .collect();
        let one_d = sizes.len() == 1;
        let stats = with_pixel_type!(input.data_type, T => {
            kernel::scan::<T>(input.pixels::<T>()?, sizes[0], one_d, &rects)
        });

        let mut w = Vec::new();
        let mut ts = vec![0.0; self.n_rois * RESULTS.len()];
        let mut out = NDArray::clone(input);
        for (((k, _, _, name), r), st) in requests.iter().zip(&rects).zip(&stats) {
            let Some(slot) = ix.slots.get(*k) else {
                continue;
            };
            let int = |v: usize| ParamValue::from(v as i64);
            w.push((slot.max_size[0], int(sizes[0])));
            w.push((slot.min[0], int(r.x0)));
            w.push((slot.size[0], int(r.nx)));
            if one_d {
                w.push((slot.max_size[1], int(0)));
            } else {
                w.push((slot.max_size[1], int(sizes[1])));
                w.push((slot.min[1], int(r.y0)));
                w.push((slot.size[1], int(r.ny)));
            }
            let vals = [st.min, st.max, st.mean, st.total, st.net];
            for ((&i, v), res) in slot.results.iter().zip(vals).zip(RESULTS) {
                w.push((i, ParamValue::Float(v)));
                out.set_attribute(NDAttribute::new(
                    format!("ROI{}{res}", k + 1),
                    format!("ROI {} {name} {res}", k + 1),
                    AttrValue::Float64(v),
                ));
            }
            if let Some(dst) = ts.get_mut(k * RESULTS.len()..(k + 1) * RESULTS.len()) {
                dst.copy_from_slice(&vals);
            }
        }
        p.set_many(&w);
        self.ts.record(p, &ts, input.time_stamp)?;
        ctx.emit(out);
        Ok(())
    }
}
