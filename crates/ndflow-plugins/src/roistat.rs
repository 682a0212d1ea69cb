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

use ndflow_core::handle::{join, Array, Float, Param};
use ndflow_core::{
    with_pixel_type, AttrValue, DataType, NDArray, NDAttribute, ParamDef, ParamStore, ParamValue,
};
use ndflow_runtime::port_params::{bind, bind_first, plugin_layout};
use ndflow_runtime::{Plugin, PluginError, ProcessContext};

pub use kernel::{scan, scan_portable, Rect, RoiPixel, RoiStats};

use crate::timeseries::{first_addresses, TsControl, TsRecorder, TS_CONTROL_PARAMS};
use ndflow_runtime::{Built, ConstructorKey, PortType};

/// ROIs per port: the default and the most a port can be configured with.
pub const DEFAULT_ROIS: usize = 8;
pub const MAX_ROIS: usize = 32;

/// Result names, in [`RoiStats`]' order (records `N:Name_RBV`, waveforms `N:TSName`).
pub const RESULTS: [&str; 5] = ["MinValue", "MaxValue", "MeanValue", "Total", "Net"];

ndflow_core::params! {
    /// NDROIStat's own record (after the time-series control records).
    pub const ROISTAT_PORT_PARAMS, pub struct RoiStatParams {
        reset_all: enumeration("ResetAll", &["", ""], 0).doc("Zero the results of every ROI"),
    }
}

ndflow_core::params! {
    /// NDROIStatN's records, once per ROI (`N:`), for [`MAX_ROIS`].
    pub const ROISTAT_ROI_PARAMS: [pub struct RoiStatNParams;
        "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16",
        "17", "18", "19", "20", "21", "22", "23", "24", "25", "26", "27", "28", "29", "30", "31",
        "32"
    ] {
        name: string("Name", "").doc("Name of this ROI"),
        use_: yes_no("Use", 0).doc("Compute this ROI"),
        reset: enumeration("Reset", &["", ""], 0).doc("Zero this ROI's results"),
        bgd_width: int32("BgdWidth", 0).min(0.0).doc("Border width used as background for Net (0: Net = Total)"),
        min_x: int32("MinX", 0).doc("First X (clamped to the frame)"),
        min_y: int32("MinY", 0).doc("First Y (clamped to the frame)"),
        size_x: int32("SizeX", 0).doc("Width (clamped to the frame)"),
        size_y: int32("SizeY", 0).doc("Height (clamped to the frame)"),
        max_size_x: int32("MaxSizeX", 0).read_only().doc("X size of the last frame"),
        max_size_y: int32("MaxSizeY", 0).read_only().doc("Y size of the last frame (0: 1-D)"),
        min_value: float64("MinValue", 0.0).read_only().doc("Minimum in the ROI"),
        max_value: float64("MaxValue", 0.0).read_only().doc("Maximum in the ROI"),
        mean_value: float64("MeanValue", 0.0).read_only().doc("Mean of the ROI"),
        total: float64("Total", 0.0).read_only().doc("Sum of the ROI"),
        net: float64("Net", 0.0).read_only().doc("Total minus the mean border value times the elements"),
        ts_min_value: array("TSMinValue", DataType::Float64).doc("Time series of MinValue"),
        ts_max_value: array("TSMaxValue", DataType::Float64).doc("Time series of MaxValue"),
        ts_mean_value: array("TSMeanValue", DataType::Float64).doc("Time series of MeanValue"),
        ts_total: array("TSTotal", DataType::Float64).doc("Time series of Total"),
        ts_net: array("TSNet", DataType::Float64).doc("Time series of Net"),
        ts_timestamp: array("TSTimestamp", DataType::Float64).doc("Time stamps of the time series"),
    }
}

/// The time-series control records and NDROIStat's, then NDROIStatN's once per ROI (`N:`),
/// for [`MAX_ROIS`].
pub const ROISTAT_PARAMS: &[ParamDef] =
    &join::<{ TS_CONTROL_PARAMS.len() + ROISTAT_PORT_PARAMS.len() + ROISTAT_ROI_PARAMS.len() }>(&[
        TS_CONTROL_PARAMS,
        ROISTAT_PORT_PARAMS,
        ROISTAT_ROI_PARAMS,
    ]);

/// MaxThreads_RBV: the available cores, at most this many.
const MAX_THREADS: usize = 8;

/// A used ROI as requested: (ROI number from 0, MinX, MinY, SizeX, SizeY, BgdWidth, Name).
type Request = (usize, [i64; 4], i64, String);

/// NDPluginROIStat. Thread-safe: frames may be processed at once (time-series points then
/// go in the order the frames finish).
#[derive(Debug)]
pub struct RoiStatPlugin {
    n_rois: usize,
    /// The table [`Plugin::params`] returns: the first `n_rois` ROIs.
    own: &'static [ParamDef],
    p: RoiStatParams,
    rois: Vec<RoiStatNParams>,
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
        let own = first_addresses(
            ROISTAT_PARAMS,
            TS_CONTROL_PARAMS.len() + ROISTAT_PORT_PARAMS.len(),
            RoiStatNParams::LEN,
            n_rois,
        );
        let layout = plugin_layout(own);
        let rois = bind_first(&layout, n_rois, RoiStatNParams::bind_first);
        let mut series = Vec::new();
        let mut stamps = Vec::new();
        for r in &rois {
            series.extend(r.series());
            stamps.push(r.ts_timestamp);
        }
        RoiStatPlugin {
            n_rois,
            own,
            p: bind(&layout, RoiStatParams::bind),
            rois,
            ts: TsRecorder::new(bind(&layout, TsControl::bind), series, stamps),
            max_threads: std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(MAX_THREADS),
        }
    }

    fn zero(roi: &RoiStatNParams, w: &mut Vec<(usize, ParamValue)>) {
        w.extend(roi.results().iter().map(|h| h.value(0.0)));
    }
}

impl RoiStatNParams {
    /// The result records, in [`RESULTS`] order.
    fn results(&self) -> [Param<Float>; 5] {
        [
            self.min_value,
            self.max_value,
            self.mean_value,
            self.total,
            self.net,
        ]
    }

    /// The results' time series, in [`RESULTS`] order.
    fn series(&self) -> [Param<Array>; 5] {
        [
            self.ts_min_value,
            self.ts_max_value,
            self.ts_mean_value,
            self.ts_total,
            self.ts_net,
        ]
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
        self.own
    }

    fn max_threads(&self) -> usize {
        self.max_threads
    }

    fn param_changed(&self, p: &ParamStore, idx: usize, value: &ParamValue) {
        let mut w = Vec::new();
        if self.p.reset_all.is(idx) {
            self.rois.iter().for_each(|r| Self::zero(r, &mut w));
        } else if let Some(r) = self.rois.iter().find(|r| r.reset.is(idx)) {
            Self::zero(r, &mut w);
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
        let p = ctx.params;
        let requests: Vec<Request> = p.with_values(|v| {
            self.rois
                .iter()
                .enumerate()
                .filter(|(_, r)| r.use_.read(v))
                .map(|(k, r)| {
                    let geometry = [
                        r.min_x.read(v),
                        r.min_y.read(v),
                        r.size_x.read(v),
                        r.size_y.read(v),
                    ];
                    (k, geometry, r.bgd_width.read(v), r.name.read(v))
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
            let Some(roi) = self.rois.get(*k) else {
                continue;
            };
            w.push(roi.max_size_x.value(sizes[0] as i64));
            w.push(roi.min_x.value(r.x0 as i64));
            w.push(roi.size_x.value(r.nx as i64));
            if one_d {
                w.push(roi.max_size_y.value(0));
            } else {
                w.push(roi.max_size_y.value(sizes[1] as i64));
                w.push(roi.min_y.value(r.y0 as i64));
                w.push(roi.size_y.value(r.ny as i64));
            }
            let vals = [st.min, st.max, st.mean, st.total, st.net];
            for ((h, v), res) in roi.results().iter().zip(vals).zip(RESULTS) {
                w.push(h.value(v));
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
        self.ts.record(p, &ts, input.time_stamp);
        ctx.emit(out);
        Ok(())
    }
}

/// The port type `type = "roistat"`.
pub const PORT: PortType = PortType::plugin(
    "roistat",
    "NDPluginROIStat",
    "Min/max/mean/total/net of up to 32 ROIs (MaxROIs, default 8) in one pass, time series",
    |a| {
        let n = a.int("MaxROIs", 1..=32, DEFAULT_ROIS as i64)?;
        Ok(Built::Plugin(std::sync::Arc::new(
            RoiStatPlugin::with_rois(n as usize),
        )))
    },
)
.keys(&[ConstructorKey {
    name: "MaxROIs",
    doc: "Number of ROIs, 1..32 (default 8), fixed for the port's life",
}]);
