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
//! published, and output frames of the input's type go downstream on the port's addresses
//! as ADCore's doTimeSeriesCallbacks sends them: first the `[TSNumPoints, NSignals]` frame
//! (each signal's series contiguous, oldest first) on address NSignals (the signals in use:
//! the input's, at most MaxSignals), then each signal's series as a 1-D `[TSNumPoints]`
//! frame on address s for signal s (0-based; its records are `s+1:`), all with one uniqueId
//! and time stamp. A plugin takes one with `NDArrayAddress` (of a stats port's time series,
//! MeanValue, signal 6, is on address 6). The port publishes addresses 0..=MaxSignals.
//!
//! Deviations: output frames asked for by a write (TSRead, Stop) go out with the next
//! input frame (a plugin emits only while processing one); input frames are not passed on
//! (as ADCore). Signals beyond MaxSignals (config key, default 8, at most 32) are ignored.
//!
//! [`TsBuffer`] (buffer.rs) is the store, shared with ROIStat and Stats through
//! [`TsRecorder`] (recorder.rs), which drives it with ROIStat's TSControl records.

mod buffer;
mod recorder;

use ndflow_core::alarm::sev::{MINOR, NO};
use std::sync::Arc;
use std::sync::Once;
use std::time::Instant;

use ndflow_core::handle::{join, Array, Param};
use ndflow_core::{
    with_pixel_type, ArrayValue, DataType, EpicsTimeStamp, NDArray, ParamDef, ParamStore,
    ParamValue, Pixel,
};
use ndflow_runtime::port_params::{bind, bind_first, plugin_layout};
use ndflow_runtime::{Built, ConstructorKey, PortType};
use ndflow_runtime::{Plugin, PluginError, ProcessContext};
use parking_lot::Mutex;

pub use buffer::{Pushed, TsBuffer};
pub use recorder::{
    f64_values, TsControl, TsRecorder, TS_ACQUIRING_CHOICES, TS_CONTROL_CHOICES, TS_CONTROL_PARAMS,
    TS_DEFAULT_POINTS, TS_MAX_POINTS, TS_MODE_CHOICES,
};

/// Signals per port: the default and the most a port can be configured with.
pub const DEFAULT_SIGNALS: usize = 8;
pub const MAX_SIGNALS: usize = 32;

ndflow_core::params! {
    /// NDTimeSeries' records.
    pub const TIMESERIES_PORT_PARAMS, pub struct TimeSeriesParams {
        ts_acquire: enumeration("TSAcquire", &["Done", "Acquire"], 0)
            .busy()
            .doc("Acquire erases and starts the time series; Done stops and publishes it"),
        ts_acquiring: enumeration("TSAcquiring", TS_ACQUIRING_CHOICES, 0)
            .alarm_states(&[NO, MINOR])
            .read_only_plain()
            .doc("Whether inputs are being added"),
        ts_read: enumeration("TSRead", &["Done", "Read"], 0)
            .doc("Read publishes the time series (waveforms and an output frame)"),
        ts_num_points: int32("TSNumPoints", TS_DEFAULT_POINTS as i32)
            .range(1.0, TS_MAX_POINTS as f64)
            .doc("Points per time series (a write erases them)"),
        ts_current_point: int32("TSCurrentPoint", 0).read_only_plain().doc("Next point to be written"),
        ts_time_per_point_link: float64("TSTimePerPointLink", 0.0).input_link().doc("Input link (.DOL) for TSTimePerPoint: a write or the linked PV's value is copied to TSTimePerPoint"),
        ts_time_per_point: float64("TSTimePerPoint", 0.0).min(0.0).doc("Seconds between input time points"),
        ts_averaging_time: float64("TSAveragingTime", 0.0)
            .min(0.0)
            .doc("Requested seconds per point; readback: TSTimePerPoint * TSNumAverage"),
        ts_num_average: int32("TSNumAverage", 1).read_only_plain().doc("Inputs averaged per point"),
        ts_elapsed_time: float64("TSElapsedTime", 0.0).read_only_plain().doc("Seconds since Acquire"),
        ts_acquire_mode: enumeration("TSAcquireMode", TS_MODE_CHOICES, 0).mbb()
            .doc("Fixed length (stop when full) or Circ. buffer (keep the latest; a write erases)"),
        ts_timestamp: array("TSTimestamp", DataType::Float64).doc("Time stamp of each point"),
        ts_time_axis: array("TSTimeAxis", DataType::Float64).doc("Time of each point (seconds)"),
    }
}

ndflow_core::params! {
    /// NDTimeSeriesN's records, once per signal (`N:`), for [`MAX_SIGNALS`].
    pub const TIMESERIES_SIGNAL_PARAMS: [pub struct SignalParams;
        "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16",
        "17", "18", "19", "20", "21", "22", "23", "24", "25", "26", "27", "28", "29", "30", "31",
        "32"
    ] {
        name: string("Name", "").doc("Name of this signal"),
        time_series: array("TimeSeries", DataType::Float64).doc("This signal's time series"),
    }
}

/// NDTimeSeries' records, then NDTimeSeriesN's once per signal (`N:`), for [`MAX_SIGNALS`].
pub const TIMESERIES_PARAMS: &[ParamDef] = &join::<
    { TIMESERIES_PORT_PARAMS.len() + TIMESERIES_SIGNAL_PARAMS.len() },
>(&[TIMESERIES_PORT_PARAMS, TIMESERIES_SIGNAL_PARAMS]);

/// The port's records and those of its first `n` addresses: `table[..port + n * per]`, where
/// `port` records come first and each address has `per`.
pub fn first_addresses(
    table: &'static [ParamDef],
    port: usize,
    per: usize,
    n: usize,
) -> &'static [ParamDef] {
    &table[..(port + n * per).min(table.len())]
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
    /// The table [`Plugin::params`] returns: the first `max_signals` signals.
    own: &'static [ParamDef],
    p: TimeSeriesParams,
    /// Each signal's waveform `N:TimeSeries`.
    series: Vec<Param<Array>>,
    /// TSTimeAxis starts as [`TS_DEFAULT_POINTS`] zeros, published on first use.
    axis_init: Once,
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
        let own = first_addresses(
            TIMESERIES_PARAMS,
            TIMESERIES_PORT_PARAMS.len(),
            SignalParams::LEN,
            max_signals,
        );
        let layout = plugin_layout(own);
        let signals = bind_first(&layout, max_signals, SignalParams::bind_first);
        TimeSeriesPlugin {
            max_signals,
            own,
            p: bind(&layout, TimeSeriesParams::bind),
            series: signals.iter().map(|s| s.time_series).collect(),
            axis_init: Once::new(),
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

    fn init_axis(&self, p: &ParamStore) {
        self.axis_init.call_once(|| {
            self.p
                .ts_time_axis
                .set(p, f64_values(&vec![0.0; TS_DEFAULT_POINTS]));
        });
    }

    /// TSNumAverage, TSAveragingTime_RBV and TSTimeAxis from TSTimePerPoint and the request.
    fn averaging(&self, p: &ParamStore, st: &mut State) -> Vec<(usize, ParamValue)> {
        let tpp = self.p.ts_time_per_point.get(p);
        let req = st.averaging_requested;
        let (n, actual) = if tpp > 0.0 {
            let n = ((req / tpp + 0.5) as usize).max(1);
            (n, tpp * n as f64)
        } else {
            (1, req)
        };
        st.buf.set_num_average(n);
        vec![
            self.p.ts_num_average.value(n as i64),
            self.p.ts_averaging_time.value(actual),
            self.p.ts_time_axis.value(axis(&st.buf, actual)),
        ]
    }

    fn publish(&self, st: &State) -> Vec<(usize, ParamValue)> {
        let mut w: Vec<(usize, ParamValue)> = self
            .series
            .iter()
            .enumerate()
            .map(|(s, h)| h.value(f64_values(&st.buf.series(s))))
            .collect();
        w.push(self.p.ts_timestamp.value(f64_values(&st.buf.stamps())));
        w
    }

    fn status(&self, st: &State) -> Vec<(usize, ParamValue)> {
        vec![
            self.p.ts_current_point.value(st.buf.current() as i64),
            self.p.ts_acquiring.value(i64::from(st.buf.acquiring)),
            self.p.ts_acquire.value(i64::from(st.buf.acquiring)),
            self.p
                .ts_elapsed_time
                .value(st.started.elapsed().as_secs_f64()),
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

    /// The output frames of the input's type with their addresses: the `[NTime, NSignals]`
    /// frame on address NSignals, then signal s's `[NTime]` series on address s (ADCore's
    /// order), all with one uniqueId and time stamp.
    fn outputs<T: Pixel>(
        st: &mut State,
        ctx: &ProcessContext<'_>,
    ) -> Result<Vec<(usize, NDArray)>, PluginError> {
        let (n_points, n_signals) = (st.buf.n_points(), st.buf.n_signals());
        let points = st.buf.all_points();
        let epics_ts = EpicsTimeStamp::now();
        let unique_id = st.unique_id;
        st.unique_id = st.unique_id.wrapping_add(1);
        let frame = |dims: &[usize], values: &[f64]| -> Result<NDArray, PluginError> {
            let mut buf = ctx.alloc(values.len() * std::mem::size_of::<T>())?;
            for (o, v) in buf.as_mut_slice::<T>().iter_mut().zip(values) {
                *o = T::from_f64(*v);
            }
            let mut out = NDArray::new(dims, T::DATA_TYPE, buf.freeze())?;
            out.unique_id = unique_id;
            out.epics_ts = epics_ts;
            out.time_stamp = epics_ts.as_f64();
            Ok(out)
        };
        let mut outs = Vec::with_capacity(n_signals + 1);
        outs.push((n_signals, frame(&[n_points, n_signals], &points)?));
        for (s, series) in points.chunks_exact(n_points.max(1)).enumerate() {
            outs.push((s, frame(&[n_points], series)?));
        }
        Ok(outs)
    }
}

/// TSTimeAxis: the time of each point.
fn axis(b: &TsBuffer, per_point: f64) -> ArrayValue {
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
    f64_values(&v)
}

impl Plugin for TimeSeriesPlugin {
    fn plugin_type(&self) -> &'static str {
        "NDPluginTimeSeries"
    }

    fn params(&self) -> &'static [ParamDef] {
        self.own
    }

    /// Signal s on address s, the `[NTime, NSignals]` frame on address NSignals.
    fn addresses(&self) -> usize {
        self.max_signals + 1
    }

    fn param_changed(&self, p: &ParamStore, idx: usize, value: &ParamValue) {
        self.init_axis(p);
        let v = value.as_f64().unwrap_or(0.0);
        let mut st = self.state.lock();
        let mut w = Vec::new();
        if self.p.ts_acquire.is(idx) {
            if v != 0.0 {
                st.buf.erase();
                st.started = Instant::now();
                st.buf.acquiring = true;
            } else {
                st.buf.acquiring = false;
                w.extend(self.publish(&st));
                st.pending_output = true;
            }
        } else if self.p.ts_read.is(idx) {
            if v != 0.0 {
                w.extend(self.publish(&st));
                st.pending_output = true;
                w.push(self.p.ts_read.value(0));
            }
        } else if self.p.ts_num_points.is(idx) {
            let n = st.buf.n_signals();
            st.buf.resize(n, v.max(1.0) as usize);
            w.extend(self.averaging(p, &mut st));
        } else if self.p.ts_acquire_mode.is(idx) {
            st.buf.set_circular(v == 1.0);
            w.extend(self.averaging(p, &mut st));
        } else if self.p.ts_time_per_point_link.is(idx) {
            self.p.ts_time_per_point.set(p, v.max(0.0));
            w.extend(self.averaging(p, &mut st));
        } else if self.p.ts_time_per_point.is(idx) {
            w.extend(self.averaging(p, &mut st));
        } else if self.p.ts_averaging_time.is(idx) {
            st.averaging_requested = v;
            w.extend(self.averaging(p, &mut st));
        } else {
            return;
        }
        w.extend(self.status(&st));
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
        self.init_axis(ctx.params);
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
                w.extend(self.publish(&st));
                st.pending_output = true;
            }
            w.extend(self.status(&st));
        }
        if std::mem::take(&mut st.pending_output) {
            let outs = with_pixel_type!(input.data_type, T => Self::outputs::<T>(&mut st, ctx))?;
            for (address, out) in outs {
                ctx.emit_to(address, out);
            }
        }
        drop(st);
        ctx.params.set_many(&w);
        Ok(())
    }
}

/// The port type `type = "timeseries"`.
pub const PORT: PortType = PortType::plugin(
    "timeseries",
    "NDPluginTimeSeries",
    "Time series of up to 32 signals (MaxSignals, default 8): fixed/circular, averaging",
    |a| {
        let n = a.int("MaxSignals", 1..=32, DEFAULT_SIGNALS as i64)?;
        Ok(Built::Plugin(std::sync::Arc::new(
            TimeSeriesPlugin::with_signals(n as usize),
        )))
    },
)
.keys(&[ConstructorKey {
    name: "MaxSignals",
    doc: "Number of signals, 1..32 (default 8), fixed for the port's life",
}]);
