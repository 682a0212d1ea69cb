//! NDPluginTimeSeries: time series of the signals of 1-D `[NSignals]` or 2-D
//! `[NSignals, NTime]` input frames (dims[0] fastest: one time point is NSignals values).
//!
//! As ADCore (NDPluginTimeSeries.cpp): TSAcquire = Acquire erases and starts; each point is
//! the average of TSNumAverage inputs, stored in the input's data type; Fixed length stops
//! (TSAcquire back to Done) when TSNumPoints points are in, Circ. buffer keeps the latest
//! TSNumPoints. TSNumAverage = round(TSAveragingTime / TSTimePerPoint) (at least 1; 1 when
//! TSTimePerPoint is 0) and TSAveragingTime_RBV is the actual TSTimePerPoint * TSNumAverage;
//! TSTimeAxis is `i * that` (Fixed length) or `-(N-1-i) * that` (Circ. buffer).
//! TSTimePerPointLink forwards a write to TSTimePerPoint (the template's link from the
//! driver's acquire period). A new data type or signal count re-sizes and erases the series.
//! On Stop, TSRead or a full Fixed length series, each signal's waveform `N:TimeSeries`
//! (Fixed length: the points so far; Circ. buffer: all, oldest first) and TSTimestamp are
//! published, and an output frame `[TSNumPoints, NSignals]` of the input's type (each
//! signal's series contiguous, oldest first) is sent downstream.
//!
//! Deviations: an output frame asked for by a write (TSRead, Stop) goes out with the next
//! input frame (a plugin emits only while processing one); the per-signal 1-D frames that
//! ADCore sends on addresses 1..N are not produced (one output per port); input frames are
//! not passed on (as ADCore). Signals beyond MaxSignals (config key, default 8, at most 32)
//! are ignored.
//!
//! [`TsBuffer`] (buffer.rs) is the store, shared with ROIStat and Stats through
//! [`TsRecorder`] (recorder.rs), which drives it with ROIStat's TSControl records.

mod buffer;
mod recorder;

use std::sync::Arc;
use std::time::Instant;

use ndflow_core::{
    with_pixel_type, DataType, EpicsTimeStamp, NDArray, ParamDef, ParamStore, ParamValue, Pixel,
};
use ndflow_runtime::{param_index, Plugin, PluginError, ProcessContext, Resolved};
use parking_lot::Mutex;

pub use buffer::{Pushed, TsBuffer};
pub(crate) use recorder::with_ts_control;
pub use recorder::{
    f64_array, TsRecorder, TS_ACQUIRING_CHOICES, TS_CONTROL_CHOICES, TS_DEFAULT_POINTS,
    TS_MAX_POINTS, TS_MODE_CHOICES,
};

/// Signals per port: the default and the most a port can be configured with.
pub const DEFAULT_SIGNALS: usize = 8;
pub const MAX_SIGNALS: usize = 32;

macro_rules! timeseries_params {
    ($($n:literal),+) => {
        &[
            ParamDef::enumeration("TSAcquire", &["Done", "Acquire"], 0)
                .busy()
                .doc("Acquire erases and starts the time series; Done stops and publishes it"),
            ParamDef::enumeration("TSAcquiring", TS_ACQUIRING_CHOICES, 0)
                .read_only_plain()
                .doc("Whether inputs are being added"),
            ParamDef::enumeration("TSRead", &["Done", "Read"], 0)
                .doc("Read publishes the time series (waveforms and an output frame)"),
            ParamDef::int32("TSNumPoints", TS_DEFAULT_POINTS as i32)
                .range(1.0, TS_MAX_POINTS as f64)
                .doc("Points per time series (a write erases them)"),
            ParamDef::int32("TSCurrentPoint", 0).read_only_plain().doc("Next point to be written"),
            ParamDef::float64("TSTimePerPointLink", 0.0).doc("Copied to TSTimePerPoint"),
            ParamDef::float64("TSTimePerPoint", 0.0).min(0.0).doc("Seconds between input time points"),
            ParamDef::float64("TSAveragingTime", 0.0)
                .min(0.0)
                .doc("Requested seconds per point; readback: TSTimePerPoint * TSNumAverage"),
            ParamDef::int32("TSNumAverage", 1).read_only_plain().doc("Inputs averaged per point"),
            ParamDef::float64("TSElapsedTime", 0.0).read_only_plain().doc("Seconds since Acquire"),
            ParamDef::enumeration("TSAcquireMode", TS_MODE_CHOICES, 0)
                .doc("Fixed length (stop when full) or Circ. buffer (keep the latest; a write erases)"),
            ParamDef::array("TSTimestamp", DataType::Float64).doc("Time stamp of each point"),
            ParamDef::array("TSTimeAxis", DataType::Float64).doc("Time of each point (seconds)"),
            $(
                ParamDef::string(concat!($n, ":Name"), "").doc("Name of this signal"),
                ParamDef::array(concat!($n, ":TimeSeries"), DataType::Float64)
                    .doc("This signal's time series"),
            )+
        ]
    };
}

/// NDTimeSeries' records, then NDTimeSeriesN's once per signal (`N:`), for [`MAX_SIGNALS`].
pub const TIMESERIES_PARAMS: &[ParamDef] = timeseries_params!(
    "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16", "17",
    "18", "19", "20", "21", "22", "23", "24", "25", "26", "27", "28", "29", "30", "31", "32"
);

/// The first `n` per-address blocks of a table whose port records come first and whose
/// per-address records start with `1:`: `table[..port + n * per]`.
pub fn first_addresses(table: &'static [ParamDef], max: usize, n: usize) -> &'static [ParamDef] {
    let port = table
        .iter()
        .position(|d| d.name.starts_with("1:"))
        .unwrap_or(table.len());
    let per = (table.len() - port) / max.max(1);
    &table[..(port + n.min(max) * per).min(table.len())]
}

#[derive(Debug)]
struct Indices {
    acquire: usize,
    acquiring: usize,
    read: usize,
    num_points: usize,
    current: usize,
    tpp_link: usize,
    tpp: usize,
    averaging: usize,
    num_average: usize,
    elapsed: usize,
    mode: usize,
    stamps: usize,
    axis: usize,
    series: Vec<usize>,
}

#[derive(Debug)]
struct State {
    buf: TsBuffer,
    data_type: DataType,
    signals_in: usize,
    started: Instant,
    averaging_requested: f64,
    /// An output frame was asked for by a write; sent with the next input.
    pending_output: bool,
    unique_id: i32,
}

/// NDPluginTimeSeries. Serial (one thread): the series is one ordered stream.
#[derive(Debug)]
pub struct TimeSeriesPlugin {
    max_signals: usize,
    ix: Resolved<Indices>,
    state: Mutex<State>,
}

impl Default for TimeSeriesPlugin {
    fn default() -> Self {
        Self::new()
    }
}

impl TimeSeriesPlugin {
    pub fn new() -> Self {
        Self::with_signals(DEFAULT_SIGNALS)
    }

    /// A port serving `n` signals (1..=32, clamped).
    pub fn with_signals(n: usize) -> Self {
        let max_signals = n.clamp(1, MAX_SIGNALS);
        TimeSeriesPlugin {
            max_signals,
            ix: Resolved::default(),
            state: Mutex::new(State {
                buf: TsBuffer::new(max_signals, TS_DEFAULT_POINTS),
                data_type: DataType::Float64,
                signals_in: max_signals,
                started: Instant::now(),
                averaging_requested: 0.0,
                pending_output: false,
                unique_id: 0,
            }),
        }
    }

    fn ix(&self, p: &ParamStore) -> Result<&Indices, PluginError> {
        self.ix.get_or_resolve(|| {
            let one = |n: &str| param_index(p, "NDPluginTimeSeries", n);
            let ix = Indices {
                acquire: one("TSAcquire")?,
                acquiring: one("TSAcquiring")?,
                read: one("TSRead")?,
                num_points: one("TSNumPoints")?,
                current: one("TSCurrentPoint")?,
                tpp_link: one("TSTimePerPointLink")?,
                tpp: one("TSTimePerPoint")?,
                averaging: one("TSAveragingTime")?,
                num_average: one("TSNumAverage")?,
                elapsed: one("TSElapsedTime")?,
                mode: one("TSAcquireMode")?,
                stamps: one("TSTimestamp")?,
                axis: one("TSTimeAxis")?,
                series: (1..=self.max_signals)
                    .map(|n| one(&format!("{n}:TimeSeries")))
                    .collect::<Result<_, _>>()?,
            };
            p.set_many(&[(ix.axis, f64_array(&vec![0.0; TS_DEFAULT_POINTS]))]);
            Ok(ix)
        })
    }

    /// TSNumAverage, TSAveragingTime_RBV and TSTimeAxis from TSTimePerPoint and the request.
    fn averaging(&self, p: &ParamStore, ix: &Indices, st: &mut State) -> Vec<(usize, ParamValue)> {
        let tpp = p.get_f64(ix.tpp);
        let req = st.averaging_requested;
        let (n, actual) = if tpp > 0.0 {
            let n = ((req / tpp + 0.5) as usize).max(1);
            (n, tpp * n as f64)
        } else {
            (1, req)
        };
        st.buf.set_num_average(n);
        vec![
            (ix.num_average, ParamValue::from(n as i64)),
            (ix.averaging, ParamValue::Float(actual)),
            axis(ix, &st.buf, actual),
        ]
    }

    fn publish(ix: &Indices, st: &State) -> Vec<(usize, ParamValue)> {
        let mut w: Vec<(usize, ParamValue)> = ix
            .series
            .iter()
            .enumerate()
            .map(|(s, &i)| (i, f64_array(&st.buf.series(s))))
            .collect();
        w.push((ix.stamps, f64_array(&st.buf.stamps())));
        w
    }

    fn status(ix: &Indices, st: &State) -> Vec<(usize, ParamValue)> {
        vec![
            (ix.current, ParamValue::from(st.buf.current() as i64)),
            (ix.acquiring, ParamValue::from(i64::from(st.buf.acquiring))),
            (ix.acquire, ParamValue::from(i64::from(st.buf.acquiring))),
            (
                ix.elapsed,
                ParamValue::Float(st.started.elapsed().as_secs_f64()),
            ),
        ]
    }

    /// Adds the input's time points; returns whether a Fixed length series just filled.
    fn add<T: Pixel>(st: &mut State, frame: &NDArray) -> Result<bool, PluginError> {
        let data = frame.pixels::<T>()?;
        let n_in = st.signals_in.max(1);
        let n = st.buf.n_signals();
        let mut values = vec![0.0; n];
        let quantise = |v: f64| T::from_f64(v).to_f64();
        for point in data.chunks_exact(n_in) {
            for (o, v) in values.iter_mut().zip(point) {
                *o = v.to_f64();
            }
            if st.buf.push(&values, frame.time_stamp, quantise) == Pushed::Full {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The `[NTime, NSignals]` output frame of the input's type.
    fn output<T: Pixel>(st: &mut State, ctx: &ProcessContext<'_>) -> Result<NDArray, PluginError> {
        let points = st.buf.all_points();
        let mut buf = ctx.alloc(points.len() * std::mem::size_of::<T>())?;
        for (o, v) in buf.as_mut_slice::<T>().iter_mut().zip(&points) {
            *o = T::from_f64(*v);
        }
        let mut out = NDArray::new(
            &[st.buf.n_points(), st.buf.n_signals()],
            T::DATA_TYPE,
            buf.freeze(),
        )?;
        out.unique_id = st.unique_id;
        st.unique_id = st.unique_id.wrapping_add(1);
        out.epics_ts = EpicsTimeStamp::now();
        out.time_stamp = out.epics_ts.as_f64();
        Ok(out)
    }
}

fn axis(ix: &Indices, b: &TsBuffer, per_point: f64) -> (usize, ParamValue) {
    let n = b.n_points();
    let v: Vec<f64> = (0..n)
        .map(|i| {
            if b.circular() {
                -((n - 1 - i) as f64) * per_point
            } else {
                i as f64 * per_point
            }
        })
        .collect();
    (ix.axis, f64_array(&v))
}

impl Plugin for TimeSeriesPlugin {
    fn plugin_type(&self) -> &'static str {
        "NDPluginTimeSeries"
    }

    fn params(&self) -> &'static [ParamDef] {
        first_addresses(TIMESERIES_PARAMS, MAX_SIGNALS, self.max_signals)
    }

    fn param_changed(&self, p: &ParamStore, idx: usize, value: &ParamValue) {
        let Ok(ix) = self.ix(p) else { return };
        let v = value.as_f64().unwrap_or(0.0);
        let mut st = self.state.lock();
        let mut w = Vec::new();
        if idx == ix.acquire {
            if v != 0.0 {
                st.buf.erase();
                st.started = Instant::now();
                st.buf.acquiring = true;
            } else {
                st.buf.acquiring = false;
                w.extend(Self::publish(ix, &st));
                st.pending_output = true;
            }
        } else if idx == ix.read {
            if v != 0.0 {
                w.extend(Self::publish(ix, &st));
                st.pending_output = true;
                w.push((ix.read, ParamValue::from(0i64)));
            }
        } else if idx == ix.num_points {
            let n = st.buf.n_signals();
            st.buf.resize(n, v.max(1.0) as usize);
            w.extend(self.averaging(p, ix, &mut st));
        } else if idx == ix.mode {
            st.buf.set_circular(v == 1.0);
            w.extend(self.averaging(p, ix, &mut st));
        } else if idx == ix.tpp_link {
            let _ = p.set(ix.tpp, v.max(0.0));
            w.extend(self.averaging(p, ix, &mut st));
        } else if idx == ix.tpp {
            w.extend(self.averaging(p, ix, &mut st));
        } else if idx == ix.averaging {
            st.averaging_requested = v;
            w.extend(self.averaging(p, ix, &mut st));
        } else {
            return;
        }
        w.extend(Self::status(ix, &st));
        p.set_many(&w);
    }

    fn process(
        &self,
        input: &Arc<NDArray>,
        ctx: &mut ProcessContext<'_>,
    ) -> Result<(), PluginError> {
        if input.is_compressed() {
            return Err(PluginError::Unsupported(format!(
                "NDPluginTimeSeries needs uncompressed frames, got codec '{}'",
                input.codec.name
            )));
        }
        if !(1..=2).contains(&input.ndims()) {
            return Err(PluginError::Unsupported(format!(
                "NDPluginTimeSeries takes 1-D or 2-D frames, got dims {:?}",
                input.sizes()
            )));
        }
        let ix = self.ix(ctx.params)?;
        let mut st = self.state.lock();
        let signals_in = input.dims.first().map_or(1, |d| d.size).max(1);
        if input.data_type != st.data_type || signals_in != st.signals_in {
            st.data_type = input.data_type;
            st.signals_in = signals_in;
            let points = st.buf.n_points();
            st.buf.resize(signals_in.min(self.max_signals), points);
            st.started = Instant::now();
        }
        let mut w = Vec::new();
        if st.buf.acquiring {
            let full = with_pixel_type!(input.data_type, T => Self::add::<T>(&mut st, input))?;
            if full {
                w.extend(Self::publish(ix, &st));
                st.pending_output = true;
            }
            w.extend(Self::status(ix, &st));
        }
        if std::mem::take(&mut st.pending_output) {
            let out = with_pixel_type!(input.data_type, T => Self::output::<T>(&mut st, ctx))?;
            ctx.emit(out);
        }
        drop(st);
        ctx.params.set_many(&w);
        Ok(())
    }
}
