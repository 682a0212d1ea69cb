//! NDPluginStats: statistics, centroid and moments, profiles, histogram.
//!
//! What is computed, with areaDetector's definitions (NDPluginStats.cpp):
//! 1. Statistics (N-D, all elements): min/max with the X/Y of their first occurrence
//!    (`index % xSize`, `index / xSize`), mean, sigma (population, `sqrt(Σv²/N − mean²)`),
//!    total, and net = total − (mean of the border) · N, where the border is, for every dim,
//!    the first and last `BgdWidth` slabs (corner pixels count twice); BgdWidth 0: net = total.
//! 2. Centroid (1-D/2-D): weights are the pixel values where `value >= CentroidThreshold`,
//!    else 0. CentroidTotal = M00, centroid = (M10, M01)/M00, sigmas from the second central
//!    moments, SigmaXY = μ11/(M00·σx·σy) (a correlation coefficient), skewness, excess
//!    kurtosis, eccentricity = ((μ20−μ02)² − 4μ11²)/(μ20+μ02)², orientation =
//!    ½·atan2(2μ11, μ20−μ02) in degrees. Nothing above threshold: all 0.
//! 3. Profiles (1-D/2-D): average X/Y, thresholded average X/Y, the row/column through the
//!    centroid (rounded) and through the cursor, CursorVal.
//! 4. Histogram (N-D): HistSize bins over [HistMin, HistMax] (`bin = (int)((v − min)·(size −
//!    1)/(max − min) + 0.5)`), counts below/above, entropy = −Σ c·ln c / N.
//!
//! Statistics and centroid come from one pass over the pixels (`stats/kernel.rs`, with the
//! per-type accumulators of `stats/pixel.rs`); the input frame is passed on unchanged (the
//! same `Arc`) on address 0, and, as ADCore, each frame's time-series point goes out on
//! address 1: a 1-D Float64 frame of 23 values, the [`TS_STATS`] in order then the input's
//! timeStamp, with the input's uniqueId and time stamps (what an NDPluginTimeSeries port
//! with `NDArrayAddress = 1` takes: ADCore's `$(R)TS:` port). Any number of frames may be processed at once (`MaxThreads` up to 8): each
//! call works in its own scratch buffers and publishes its results with one `set_many`.
//!
//! Differences from areaDetector, all at the edges:
//! - The average and thresholded profiles are computed whenever ComputeProfiles is Yes
//!   (areaDetector fills them inside the centroid code, so without ComputeCentroid they are
//!   zeros and the centroid profiles go through row and column 0).
//! - Sigma is never NaN from rounding (a variance below 0 is 0); NaN pixels are skipped by
//!   min/max (in areaDetector a NaN first element sticks).
//! - Histogram: a value whose bin is beyond the C `int` range counts as above (areaDetector's
//!   conversion wraps it to below); NaN counts as below, as on x86.
//! - The 23 `TS*` waveforms (TSMinValue … TSOrientation, TSTimestamp), which areaDetector
//!   fills through an attached NDPluginTimeSeries port, are kept by the port itself (one
//!   point per frame, 0 for results not computed) with ROIStat's TSControl records (see
//!   `timeseries::TsRecorder`); TSAveragingTime is not offered (one point per frame).
//! - Results are read-only (`Name_RBV`); areaDetector's template also has writable records
//!   of the same names, used only by its `Reset` records.

mod fast_u8;
mod kernel;
mod pixel;

use ndflow_core::alarm::sev::{MINOR, NO};
use std::sync::Arc;

use ndflow_core::handle::{join, Float, Int, Param};
use ndflow_core::{
    with_pixel_type, ArrayValue, BufferMut, DataType, Derive, NDArray, ParamDef, ParamStore,
    ParamValue, Pool, MAX_DIMS,
};
use ndflow_runtime::port_params::{bind, plugin_layout};
use ndflow_runtime::{Plugin, PluginError, ProcessContext};
use parking_lot::Mutex;

use kernel::{Centroid, Columns, ProfileSums, ScanOut};
use pixel::StatsPixel;

use crate::timeseries::{TsControl, TsRecorder, TS_CONTROL_PARAMS};
use ndflow_runtime::{Built, PortType};

ndflow_core::params! {
    /// NDStats.template's parameters. Results are read-only (`Name_RBV`), except `CursorVal`,
    /// whose record has no `_RBV`. The sigma readback is `Sigma_RBV`, as in the template.
    pub const STATS_OWN_PARAMS, pub struct StatsParams {
        compute_statistics: yes_no("ComputeStatistics", 1)
            .alarm_states(&[NO, MINOR])
            .doc("Compute min, max, mean, sigma, total, net"),
        bgd_width: int32("BgdWidth", 1).min(0.0).doc("Width of the border used as background for Net (0: Net = Total)"),
        min_value: float64("MinValue", 0.0).read_only_both().doc("Minimum value"),
        max_value: float64("MaxValue", 0.0).read_only_both().doc("Maximum value"),
        mean_value: float64("MeanValue", 0.0).read_only_both().doc("Mean value"),
        sigma: float64("Sigma", 0.0).read_only().doc("Standard deviation (population)"),
        sigma_value: float64("SigmaValue", 0.0).read_only_plain().doc("Standard deviation (population); NDStats.template's name for Sigma_RBV's output record"),
        total: float64("Total", 0.0).read_only_both().doc("Sum of all elements"),
        net: float64("Net", 0.0).read_only_both().doc("Total minus the mean border value times the number of elements"),
        min_x: float64("MinX", 0.0).read_only_both().doc("X of the first minimum"),
        min_y: float64("MinY", 0.0).read_only_both().doc("Y of the first minimum"),
        max_x: float64("MaxX", 0.0).read_only_both().doc("X of the first maximum"),
        max_y: float64("MaxY", 0.0).read_only_both().doc("Y of the first maximum"),
        compute_centroid: yes_no("ComputeCentroid", 0)
            .alarm_states(&[NO, MINOR])
            .doc("Compute centroid and moments (1-D/2-D)"),
        centroid_threshold: float64("CentroidThreshold", 1.0).doc("Pixels with value >= threshold weigh their value, others 0"),
        centroid_total: float64("CentroidTotal", 0.0).read_only_both().doc("Sum of the pixels above threshold (M00)"),
        centroid_x: float64("CentroidX", 0.0).read_only_both().doc("Centroid X"),
        centroid_y: float64("CentroidY", 0.0).read_only_both().doc("Centroid Y"),
        sigma_x: float64("SigmaX", 0.0).read_only_both().doc("Sigma in X about the centroid"),
        sigma_y: float64("SigmaY", 0.0).read_only_both().doc("Sigma in Y about the centroid"),
        sigma_xy: float64("SigmaXY", 0.0).read_only_both().doc("X-Y correlation coefficient"),
        skew_x: float64("SkewX", 0.0).read_only_both().doc("Skewness in X"),
        skew_y: float64("SkewY", 0.0).read_only_both().doc("Skewness in Y"),
        kurtosis_x: float64("KurtosisX", 0.0).read_only_both().doc("Excess kurtosis in X"),
        kurtosis_y: float64("KurtosisY", 0.0).read_only_both().doc("Excess kurtosis in Y"),
        eccentricity: float64("Eccentricity", 0.0).read_only_both().doc("Eccentricity from the second central moments"),
        orientation: float64("Orientation", 0.0).read_only_both().doc("Orientation of the major axis (degrees)"),
        compute_profiles: yes_no("ComputeProfiles", 0)
            .alarm_states(&[NO, MINOR])
            .doc("Compute the X/Y profiles (1-D/2-D)"),
        profile_size_x: int32("ProfileSizeX", 0).read_only().doc("Length of the X profiles"),
        profile_size_y: int32("ProfileSizeY", 0).read_only().doc("Length of the Y profiles"),
        cursor_x: int32("CursorX", 256).min(0.0).high_limit_from("MaxSizeX").doc("Cursor X (clamped to the image)"),
        cursor_y: int32("CursorY", 256).min(0.0).high_limit_from("MaxSizeY").doc("Cursor Y (clamped to the image)"),
        cursor_val: float64("CursorVal", 0.0).read_only_plain().doc("Value at the cursor"),
        profile_average_x: array("ProfileAverageX", DataType::Float64).read_only().doc("Average over Y of each column"),
        profile_average_y: array("ProfileAverageY", DataType::Float64).read_only().doc("Average over X of each row"),
        profile_threshold_x: array("ProfileThresholdX", DataType::Float64).read_only().doc("Average over Y of each column, below-threshold pixels as 0"),
        profile_threshold_y: array("ProfileThresholdY", DataType::Float64).read_only().doc("Average over X of each row, below-threshold pixels as 0"),
        profile_centroid_x: array("ProfileCentroidX", DataType::Float64).read_only().doc("The row through the centroid"),
        profile_centroid_y: array("ProfileCentroidY", DataType::Float64).read_only().doc("The column through the centroid"),
        profile_cursor_x: array("ProfileCursorX", DataType::Float64).read_only().doc("The row through the cursor"),
        profile_cursor_y: array("ProfileCursorY", DataType::Float64).read_only().doc("The column through the cursor"),
        compute_histogram: yes_no("ComputeHistogram", 0)
            .alarm_states(&[NO, MINOR])
            .doc("Compute the histogram"),
        hist_size: int32("HistSize", 256).range(1.0, 1_000_000.0).doc("Number of bins"),
        hist_min: float64("HistMin", 0.0).doc("Value of the first bin"),
        hist_max: float64("HistMax", 255.0).doc("Value of the last bin (<= HistMin: HistMin + 1)"),
        hist_below: int32("HistBelow", 0).read_only_both().doc("Elements below HistMin"),
        hist_above: int32("HistAbove", 0).read_only_both().doc("Elements above HistMax"),
        hist_entropy: float64("HistEntropy", 0.0).read_only_both().doc("-sum(c ln c)/N over the bins"),
        histogram: array("Histogram", DataType::Float64).read_only().doc("Counts per bin"),
        histogram_x: array("HistogramX", DataType::Float64).read_only().doc("HistMin + i (HistMax - HistMin)/HistSize"),
        max_size_x: int32("MaxSizeX", 0).read_only_plain().doc("Length of the X profiles: the high limit of CursorX"),
        max_size_y: int32("MaxSizeY", 0).read_only_plain().doc("Length of the Y profiles: the high limit of CursorY"),
        ts_min_value: array("TSMinValue", DataType::Float64).doc("Time series of MinValue"),
        ts_min_x: array("TSMinX", DataType::Float64).doc("Time series of MinX"),
        ts_min_y: array("TSMinY", DataType::Float64).doc("Time series of MinY"),
        ts_max_value: array("TSMaxValue", DataType::Float64).doc("Time series of MaxValue"),
        ts_max_x: array("TSMaxX", DataType::Float64).doc("Time series of MaxX"),
        ts_max_y: array("TSMaxY", DataType::Float64).doc("Time series of MaxY"),
        ts_mean_value: array("TSMeanValue", DataType::Float64).doc("Time series of MeanValue"),
        ts_sigma: array("TSSigma", DataType::Float64).doc("Time series of Sigma"),
        ts_total: array("TSTotal", DataType::Float64).doc("Time series of Total"),
        ts_net: array("TSNet", DataType::Float64).doc("Time series of Net"),
        ts_centroid_total: array("TSCentroidTotal", DataType::Float64).doc("Time series of CentroidTotal"),
        ts_centroid_x: array("TSCentroidX", DataType::Float64).doc("Time series of CentroidX"),
        ts_centroid_y: array("TSCentroidY", DataType::Float64).doc("Time series of CentroidY"),
        ts_sigma_x: array("TSSigmaX", DataType::Float64).doc("Time series of SigmaX"),
        ts_sigma_y: array("TSSigmaY", DataType::Float64).doc("Time series of SigmaY"),
        ts_sigma_xy: array("TSSigmaXY", DataType::Float64).doc("Time series of SigmaXY"),
        ts_skew_x: array("TSSkewX", DataType::Float64).doc("Time series of SkewX"),
        ts_skew_y: array("TSSkewY", DataType::Float64).doc("Time series of SkewY"),
        ts_kurtosis_x: array("TSKurtosisX", DataType::Float64).doc("Time series of KurtosisX"),
        ts_kurtosis_y: array("TSKurtosisY", DataType::Float64).doc("Time series of KurtosisY"),
        ts_eccentricity: array("TSEccentricity", DataType::Float64).doc("Time series of Eccentricity"),
        ts_orientation: array("TSOrientation", DataType::Float64).doc("Time series of Orientation"),
        ts_timestamp: array("TSTimestamp", DataType::Float64).doc("Time stamps of the time series"),
        // NDStats.template's helper records: the dfanouts that give CursorX/Y their high limit,
        // and the sseqs that zero the results (Reset runs Reset1, which runs Reset2).
        set_x_hopr: float64("SetXHOPR", 0.0).read_only_plain().helper("dfanout").derived(Derive::Copy("MaxSizeX")).doc("CursorX's high limit: MaxSizeX (dfanout)"),
        set_y_hopr: float64("SetYHOPR", 0.0).read_only_plain().helper("dfanout").derived(Derive::Copy("MaxSizeY")).doc("CursorY's high limit: MaxSizeY (dfanout)"),
        reset: int32("Reset", 0).write_plain().helper("sseq").doc("Write (or .PROC) to zero the statistics, then what Reset1 and Reset2 zero"),
        reset1: int32("Reset1", 0).write_plain().helper("sseq").doc("Write (or .PROC) to zero the centroid and moments, then what Reset2 zeroes"),
        reset2: int32("Reset2", 0).write_plain().helper("sseq").doc("Write (or .PROC) to zero Eccentricity, Orientation and the histogram counts"),
    }
}

/// The port's table: the time-series control records, then NDStats.template's.
pub const STATS_PARAMS: &[ParamDef] =
    &join::<{ TS_CONTROL_PARAMS.len() + STATS_OWN_PARAMS.len() }>(&[
        TS_CONTROL_PARAMS,
        STATS_OWN_PARAMS,
    ]);

/// The statistics kept as time series, in areaDetector's order (waveform `TS<name>`);
/// TSTimestamp follows.
#[rustfmt::skip]
pub const TS_STATS: [&str; 22] = [
    "MinValue", "MinX", "MinY", "MaxValue", "MaxX", "MaxY", "MeanValue", "Sigma", "Total", "Net",
    "CentroidTotal", "CentroidX", "CentroidY", "SigmaX", "SigmaY", "SigmaXY", "SkewX", "SkewY",
    "KurtosisX", "KurtosisY", "Eccentricity", "Orientation",
];

/// MaxThreads_RBV: the available cores, at most this many.
const MAX_THREADS: usize = 8;

/// One frame's settings, read under one lock and clamped.
#[derive(Debug, Clone, Copy)]
struct Settings {
    statistics: bool,
    centroid: bool,
    profiles: bool,
    histogram: bool,
    bgd_width: usize,
    threshold: f64,
    cursor: [usize; 2],
    hist_size: usize,
    hist_min: f64,
    hist_max: f64,
}

const MAX_HIST_SIZE: usize = 1_000_000;

impl Settings {
    fn read(v: &[ParamValue], p: &StatsParams) -> Settings {
        let count = |h: Param<Int>| usize::try_from(h.read(v)).unwrap_or(0);
        Settings {
            statistics: p.compute_statistics.read(v),
            centroid: p.compute_centroid.read(v),
            profiles: p.compute_profiles.read(v),
            histogram: p.compute_histogram.read(v),
            bgd_width: count(p.bgd_width),
            threshold: p.centroid_threshold.read(v),
            cursor: [count(p.cursor_x), count(p.cursor_y)],
            hist_size: count(p.hist_size).clamp(1, MAX_HIST_SIZE),
            hist_min: p.hist_min.read(v),
            hist_max: p.hist_max.read(v),
        }
    }

    fn hist_key(&self) -> (usize, u64, u64) {
        (
            self.hist_size,
            self.hist_min.to_bits(),
            self.hist_max.to_bits(),
        )
    }
}

/// Reusable per-call buffers (one per concurrently processing thread).
#[derive(Default)]
struct Scratch {
    cols: Vec<u64>,
    counts: Vec<u64>,
    writes: Vec<(usize, ParamValue)>,
    /// This frame's time-series point, in [`TS_STATS`] order.
    ts: [f64; 22],
}

/// NDPluginStats. Thread-safe: any number of frames may be processed at once.
pub struct StatsPlugin {
    p: StatsParams,
    scratch: Mutex<Vec<Scratch>>,
    /// (HistSize, HistMin, HistMax) of the HistogramX last published.
    hist_x: Mutex<Option<(usize, u64, u64)>>,
    max_threads: usize,
    ts: TsRecorder,
}

impl Default for StatsPlugin {
    fn default() -> Self {
        Self::new()
    }
}

impl StatsPlugin {
    /// NDStats.template's Reset sseqs: group `from` (0: Reset, 1: Reset1, 2: Reset2) and the
    /// groups after it are zeroed, as each sseq's forward link processes the next.
    fn reset_results(&self, params: &ParamStore, from: usize) {
        let p = &self.p;
        let groups: [&[Param<Float>]; 3] = [
            &[
                p.min_value,
                p.max_value,
                p.mean_value,
                p.sigma,
                p.sigma_value,
                p.total,
                p.net,
                p.min_x,
                p.min_y,
                p.max_x,
                p.max_y,
            ],
            &[
                p.centroid_x,
                p.centroid_y,
                p.sigma_x,
                p.sigma_y,
                p.sigma_xy,
                p.centroid_total,
                p.skew_x,
                p.skew_y,
                p.kurtosis_x,
                p.kurtosis_y,
            ],
            &[p.eccentricity, p.orientation, p.hist_entropy],
        ];
        let mut writes: Vec<(usize, ParamValue)> = groups[from.min(2)..]
            .iter()
            .flat_map(|g| g.iter().map(|h| h.value(0.0)))
            .collect();
        writes.push(p.hist_below.value(0));
        writes.push(p.hist_above.value(0));
        params.set_many(&writes);
    }

    pub fn new() -> StatsPlugin {
        let layout = plugin_layout(STATS_PARAMS);
        let p = bind(&layout, StatsParams::bind);
        // In TS_STATS order.
        let series = vec![
            p.ts_min_value,
            p.ts_min_x,
            p.ts_min_y,
            p.ts_max_value,
            p.ts_max_x,
            p.ts_max_y,
            p.ts_mean_value,
            p.ts_sigma,
            p.ts_total,
            p.ts_net,
            p.ts_centroid_total,
            p.ts_centroid_x,
            p.ts_centroid_y,
            p.ts_sigma_x,
            p.ts_sigma_y,
            p.ts_sigma_xy,
            p.ts_skew_x,
            p.ts_skew_y,
            p.ts_kurtosis_x,
            p.ts_kurtosis_y,
            p.ts_eccentricity,
            p.ts_orientation,
        ];
        StatsPlugin {
            p,
            scratch: Mutex::new(Vec::new()),
            hist_x: Mutex::new(None),
            ts: TsRecorder::new(bind(&layout, TsControl::bind), series, vec![p.ts_timestamp]),
            max_threads: std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(MAX_THREADS),
        }
    }

    /// HistogramX when (HistSize, HistMin, HistMax) changed since it was last published.
    fn hist_x_update(&self, s: &Settings, pool: &Pool) -> Option<ArrayValue> {
        let key = s.hist_key();
        let mut last = self.hist_x.lock();
        if *last == Some(key) {
            return None;
        }
        *last = Some(key);
        let step = (s.hist_max - s.hist_min) / s.hist_size as f64;
        let mut buf = f64_buf(pool, s.hist_size).ok()?;
        for (i, x) in buf.as_mut_slice::<f64>().iter_mut().enumerate() {
            *x = s.hist_min + i as f64 * step;
        }
        Some(array_value(buf, s.hist_size))
    }

    fn compute<T: StatsPixel>(
        &self,
        frame: &NDArray,
        s: &Settings,
        pool: &Pool,
        scratch: &mut Scratch,
    ) -> Result<(), PluginError> {
        let data = frame.pixels::<T>()?;
        let n = data.len();
        let nd = frame.ndims();
        let nx = frame.dims.first().map_or(0, |d| d.size);
        let ny = if nd > 1 {
            frame.dims.get(1).map_or(1, |d| d.size)
        } else {
            1
        };
        let p = &self.p;
        scratch.ts = [0.0; 22];
        let writes = &mut scratch.writes;
        if n == 0 {
            return Ok(());
        }
        let two_d = nd <= 2;
        let want_c = s.centroid || s.profiles;
        let (thr, none_pass) = T::threshold(s.threshold);

        let mut prof = match s.profiles {
            true => Some(Profiles::alloc(pool, nx, ny)?),
            false => None,
        };
        let mut scan_out = ScanOut::default();
        if s.statistics || (want_c && two_d) {
            let profs = prof.as_mut().filter(|_| two_d).map(Profiles::sums);
            scan_out = if want_c && two_d {
                let cols = Columns::<T>::new(&mut scratch.cols, nx)
                    .ok_or_else(|| PluginError::Other("NDPluginStats: column scratch".into()))?;
                match profs {
                    Some(sums) => {
                        kernel::scan::<T, true, true>(data, nx, thr, Some(cols), Some(sums))
                    }
                    None => kernel::scan::<T, true, false>(data, nx, thr, Some(cols), None),
                }
            } else {
                kernel::scan::<T, false, false>(data, nx, thr, None, None)
            };
            if none_pass {
                // The placeholder threshold may have let the largest value through.
                scan_out.moments = kernel::Moments::default();
                if let Some(prof) = prof.as_mut() {
                    prof.clear_threshold();
                }
            }
        }

        if s.statistics {
            let o = &scan_out;
            let mean = o.sum / n as f64;
            let sigma = (o.sum_sq / n as f64 - mean * mean).max(0.0).sqrt();
            let net = if s.bgd_width > 0 {
                let mut sizes = [0usize; MAX_DIMS];
                for (z, d) in sizes.iter_mut().zip(&frame.dims) {
                    *z = d.size;
                }
                let sizes = &sizes[..nd.min(MAX_DIMS)];
                o.sum - kernel::border_mean(data, sizes, s.bgd_width) * n as f64
            } else {
                o.sum
            };
            let xs = frame.info().x_size.max(1);
            let vals = [
                o.min,
                o.max,
                mean,
                sigma,
                o.sum,
                net,
                (o.min_idx % xs) as f64,
                (o.min_idx / xs) as f64,
                (o.max_idx % xs) as f64,
                (o.max_idx / xs) as f64,
                sigma,
            ];
            for (t, v) in scratch.ts.iter_mut().zip([0, 6, 7, 1, 8, 9, 2, 3, 4, 5]) {
                *t = vals[v];
            }
            let basic = [
                p.min_value,
                p.max_value,
                p.mean_value,
                p.sigma,
                p.total,
                p.net,
                p.min_x,
                p.min_y,
                p.max_x,
                p.max_y,
                p.sigma_value,
            ];
            writes.extend(basic.iter().zip(vals).map(|(h, v)| h.value(v)));
        }

        let centroid = if two_d {
            scan_out.moments.centroid()
        } else {
            Centroid::default()
        };
        if s.centroid {
            let c = &centroid;
            let vals = [
                c.total,
                c.x,
                c.y,
                c.sigma_x,
                c.sigma_y,
                c.sigma_xy,
                c.skew_x,
                c.skew_y,
                c.kurtosis_x,
                c.kurtosis_y,
                c.eccentricity,
                c.orientation,
            ];
            scratch.ts[10..].copy_from_slice(&vals);
            let handles = [
                p.centroid_total,
                p.centroid_x,
                p.centroid_y,
                p.sigma_x,
                p.sigma_y,
                p.sigma_xy,
                p.skew_x,
                p.skew_y,
                p.kurtosis_x,
                p.kurtosis_y,
                p.eccentricity,
                p.orientation,
            ];
            writes.extend(handles.iter().zip(vals).map(|(h, v)| h.value(v)));
        }
        if want_c {
            writes.push(p.profile_size_x.value(nx as i64));
            writes.push(p.profile_size_y.value(ny as i64));
            writes.push(p.max_size_x.value(nx as i64));
            writes.push(p.max_size_y.value(ny as i64));
        }

        if let Some(mut prof) = prof {
            let mut cursor_val = 0.0;
            if two_d {
                let [cx, cy] = s.cursor;
                let cx = cx.min(nx - 1);
                let cy = cy.min(ny - 1);
                let ccx = ((centroid.x + 0.5) as usize).min(nx - 1);
                let ccy = ((centroid.y + 0.5) as usize).min(ny - 1);
                prof.lines(data, nx, [ccx, ccy], [cx, cy]);
                cursor_val = data.get(cy * nx + cx).map_or(0.0, |v| v.to_f64());
            }
            writes.push(p.cursor_val.value(cursor_val));
            let handles = [
                p.profile_average_x,
                p.profile_average_y,
                p.profile_threshold_x,
                p.profile_threshold_y,
                p.profile_centroid_x,
                p.profile_centroid_y,
                p.profile_cursor_x,
                p.profile_cursor_y,
            ];
            for ((h, buf), len) in handles.iter().zip(prof.bufs).zip(prof.lens) {
                writes.push(h.value(array_value(buf, len)));
            }
        }

        if s.histogram {
            let counts = &mut scratch.counts;
            counts.clear();
            counts.resize(s.hist_size, 0);
            let h = kernel::histogram(data, s.hist_min, s.hist_max, counts);
            let entropy = kernel::entropy(counts, n);
            let mut buf = f64_buf(pool, s.hist_size)?;
            for (o, &c) in buf.as_mut_slice::<f64>().iter_mut().zip(counts.iter()) {
                *o = c as f64;
            }
            writes.push(p.hist_below.value(h.below as i64));
            writes.push(p.hist_above.value(h.above as i64));
            writes.push(p.hist_entropy.value(entropy));
            writes.push(p.histogram.value(array_value(buf, s.hist_size)));
            if let Some(x) = self.hist_x_update(s, pool) {
                writes.push(p.histogram_x.value(x));
            }
        }
        Ok(())
    }
}

impl Plugin for StatsPlugin {
    fn plugin_type(&self) -> &'static str {
        "NDPluginStats"
    }

    fn params(&self) -> &'static [ParamDef] {
        STATS_PARAMS
    }

    fn max_threads(&self) -> usize {
        self.max_threads
    }

    /// Address 0: the input; address 1: the frame's time-series point.
    fn addresses(&self) -> usize {
        2
    }

    fn process(
        &self,
        input: &Arc<NDArray>,
        ctx: &mut ProcessContext<'_>,
    ) -> Result<(), PluginError> {
        if input.is_compressed() {
            return Err(PluginError::Unsupported(format!(
                "NDPluginStats needs uncompressed arrays, got codec {}",
                input.codec.name
            )));
        }
        let s = ctx.params.with_values(|v| Settings::read(v, &self.p));
        let mut scratch = self.scratch.lock().pop().unwrap_or_default();
        scratch.writes.clear();
        let res = with_pixel_type!(input.data_type, T => {
            self.compute::<T>(input, &s, ctx.pool(), &mut scratch)
        });
        let point = scratch.ts;
        if res.is_ok() {
            ctx.params.set_many(&scratch.writes);
            self.ts.record(ctx.params, &point, input.time_stamp);
        }
        // Drop the array values now: their buffers go back to the pool.
        scratch.writes.clear();
        self.scratch.lock().push(scratch);
        res?;
        ctx.emit(Arc::clone(input));
        ctx.emit_to(1, ts_point_frame(input, &point, ctx.pool())?);
        Ok(())
    }

    fn param_changed(&self, params: &ParamStore, idx: usize, value: &ParamValue) {
        self.ts.param_changed(params, idx, value);
        if let Some(from) = [self.p.reset, self.p.reset1, self.p.reset2]
            .iter()
            .position(|h| h.is(idx))
        {
            self.reset_results(params, from);
            return;
        }
        // HistogramX follows HistSize/HistMin/HistMax at once, as areaDetector's computeHistX.
        let p = &self.p;
        if !(p.hist_size.is(idx) || p.hist_min.is(idx) || p.hist_max.is(idx)) {
            return;
        }
        let s = params.with_values(|v| Settings::read(v, p));
        if let Some(x) = self.hist_x_update(&s, &Pool::unlimited()) {
            p.histogram_x.set(params, x);
        }
    }
}

/// ADCore's time-series array of one frame (NDPluginStats' address 1): the [`TS_STATS`]
/// values then the frame's timeStamp, Float64, with the frame's uniqueId and time stamps.
fn ts_point_frame(input: &NDArray, point: &[f64; 22], pool: &Pool) -> Result<NDArray, PluginError> {
    let mut values = [0.0; TS_STATS.len() + 1];
    values[..TS_STATS.len()].copy_from_slice(point);
    values[TS_STATS.len()] = input.time_stamp;
    let mut out = NDArray::from_pixels(pool, &[values.len()], &values)?;
    out.unique_id = input.unique_id;
    out.time_stamp = input.time_stamp;
    out.epics_ts = input.epics_ts;
    Ok(out)
}

/// A buffer for `len` f64 from the frame's pool, or from a private one if the pool is at its
/// cap (a result array must not cost the frame).
fn f64_buf(pool: &Pool, len: usize) -> Result<BufferMut, PluginError> {
    let bytes = len * 8;
    Ok(pool
        .alloc(bytes)
        .or_else(|_| Pool::unlimited().alloc(bytes))?)
}

fn array_value(buf: BufferMut, len: usize) -> ArrayValue {
    let len = len.min(buf.len() / 8);
    ArrayValue {
        data_type: DataType::Float64,
        buffer: buf.freeze(),
        len,
    }
}

/// The eight profile arrays of one frame.
struct Profiles {
    bufs: [BufferMut; 8],
    lens: [usize; 8],
}

impl Profiles {
    fn alloc(pool: &Pool, nx: usize, ny: usize) -> Result<Profiles, PluginError> {
        let zeroed = |len: usize| -> Result<BufferMut, PluginError> {
            let mut b = f64_buf(pool, len)?;
            b.as_mut_slice::<f64>().fill(0.0);
            Ok(b)
        };
        let (x, y) = (nx, ny);
        Ok(Profiles {
            bufs: [
                zeroed(x)?,
                zeroed(y)?,
                zeroed(x)?,
                zeroed(y)?,
                zeroed(x)?,
                zeroed(y)?,
                zeroed(x)?,
                zeroed(y)?,
            ],
            lens: [x, y, x, y, x, y, x, y],
        })
    }

    fn sums(&mut self) -> ProfileSums<'_> {
        let [ax, ay, tx, ty, ..] = &mut self.bufs;
        ProfileSums {
            avg_x: ax.as_mut_slice(),
            avg_y: ay.as_mut_slice(),
            thr_x: tx.as_mut_slice(),
            thr_y: ty.as_mut_slice(),
        }
    }

    fn clear_threshold(&mut self) {
        self.bufs[2].as_mut_slice::<f64>().fill(0.0);
        self.bufs[3].as_mut_slice::<f64>().fill(0.0);
    }

    /// The row and column through the centroid and through the cursor.
    fn lines<T: StatsPixel>(
        &mut self,
        data: &[T],
        nx: usize,
        centroid: [usize; 2],
        cursor: [usize; 2],
    ) {
        let [_, _, _, _, cx, cy, ux, uy] = &mut self.bufs;
        let row = |y: usize| data.get(y * nx..(y + 1) * nx).unwrap_or_default();
        for (dst, src) in [(cx, centroid[1]), (ux, cursor[1])] {
            for (o, v) in dst.as_mut_slice::<f64>().iter_mut().zip(row(src)) {
                *o = v.to_f64();
            }
        }
        for (dst, x) in [(cy, centroid[0]), (uy, cursor[0])] {
            let col = data.iter().skip(x).step_by(nx.max(1));
            for (o, v) in dst.as_mut_slice::<f64>().iter_mut().zip(col) {
                *o = v.to_f64();
            }
        }
    }
}

/// The port type `type = "stats"`.
pub const PORT: PortType = PortType::plugin(
    "stats",
    "NDPluginStats",
    "Statistics, centroid and moments, profiles, histogram",
    |_| Ok(Built::Plugin(std::sync::Arc::new(StatsPlugin::new()))),
);
