//! The time series a plugin keeps of its own per-frame results (ROIStat's per-ROI series,
//! Stats' 23 `TS*` waveforms), driven by ROIStat's records: TSControl (Erase/Start, Start,
//! Stop, Read, Erase), TSRead, TSNumPoints, TSCurrentPoint, TSAcquiring, plus TSAcquireMode
//! (Fixed length / Circ. buffer) from NDTimeSeries. The store is [`TsBuffer`].

use ndflow_core::alarm::sev::{MINOR, NO};
use ndflow_core::handle::{Array, Param};
use ndflow_core::{ArrayValue, Buffer, DataType, ParamStore, ParamValue};
use parking_lot::Mutex;

use super::buffer::{Pushed, TsBuffer};

pub const TS_CONTROL_CHOICES: &[&str] = &["Erase/Start", "Start", "Stop", "Read", "Erase"];
pub const TS_ACQUIRING_CHOICES: &[&str] = &["Done", "Acquiring"];
pub const TS_MODE_CHOICES: &[&str] = &["Fixed length", "Circ. buffer"];
/// TSNumPoints' default (areaDetector's DEFAULT_NUM_TSPOINTS) and limit.
pub const TS_DEFAULT_POINTS: usize = 2048;
pub const TS_MAX_POINTS: usize = 1_000_000;

ndflow_core::params! {
    /// ROIStat's time-series control records, first in the tables of ROIStat and Stats
    /// (joined with [`ndflow_core::handle::join`]).
    pub const TS_CONTROL_PARAMS, pub struct TsControl {
        ts_control: enumeration("TSControl", TS_CONTROL_CHOICES, 2)
            .doc("Time series: Erase/Start, Start (resume), Stop, Read (publish), Erase"),
        ts_read: int32("TSRead", 0).doc("Any write publishes the time series (TSControl Read)"),
        ts_num_points: int32("TSNumPoints", TS_DEFAULT_POINTS as i32)
            .range(1.0, TS_MAX_POINTS as f64)
            .doc("Points per time series (a write erases them)"),
        ts_current_point: int32("TSCurrentPoint", 0).read_only_plain().doc("Next time-series point"),
        ts_acquiring: enumeration("TSAcquiring", TS_ACQUIRING_CHOICES, 0)
            .alarm_states(&[NO, MINOR])
            .read_only_plain()
            .doc("Whether frames are being added to the time series"),
        ts_acquire_mode: enumeration("TSAcquireMode", TS_MODE_CHOICES, 0).mbb()
            .doc("Fixed length (stop when full) or Circ. buffer (keep the latest; a write erases)"),
    }
}

/// A plugin's time series of its own results. Thread-safe.
#[derive(Debug)]
pub struct TsRecorder {
    p: TsControl,
    /// Waveform per signal.
    series: Vec<Param<Array>>,
    /// Waveforms that all show the time stamps.
    stamps: Vec<Param<Array>>,
    buf: Mutex<TsBuffer>,
}

impl TsRecorder {
    /// One signal per waveform of `series`; the time stamps are published to every waveform
    /// of `stamps`. `p` are the control records' handles in the same port.
    pub fn new(p: TsControl, series: Vec<Param<Array>>, stamps: Vec<Param<Array>>) -> Self {
        TsRecorder {
            p,
            buf: Mutex::new(TsBuffer::new(series.len(), TS_DEFAULT_POINTS)),
            series,
            stamps,
        }
    }

    /// Handles a write to one of the recorder's records (others are ignored).
    pub fn param_changed(&self, p: &ParamStore, idx: usize, value: &ParamValue) {
        let v = value.as_i64().unwrap_or(0);
        let mut b = self.buf.lock();
        let publish = if self.p.ts_control.is(idx) {
            match v {
                0 => {
                    b.erase();
                    b.acquiring = true;
                    false
                }
                // Start resumes unless the series is full.
                1 => {
                    b.acquiring = b.circular() || b.current() < b.n_points();
                    false
                }
                2 => {
                    b.acquiring = false;
                    true
                }
                3 => true,
                _ => {
                    b.erase();
                    true
                }
            }
        } else if self.p.ts_read.is(idx) {
            true
        } else if self.p.ts_num_points.is(idx) {
            let n = b.n_signals();
            b.resize(n, usize::try_from(v).unwrap_or(1));
            true
        } else if self.p.ts_acquire_mode.is(idx) {
            b.set_circular(v == 1);
            true
        } else {
            return;
        };
        let mut writes = self.status(&b);
        if publish {
            writes.extend(self.series_writes(&b));
        }
        p.set_many(&writes);
    }

    /// Adds one point (`values[s]` for signal `s`) while acquiring; a Fixed length series
    /// that fills stops and is published.
    pub fn record(&self, p: &ParamStore, values: &[f64], stamp: f64) {
        let mut b = self.buf.lock();
        let pushed = b.push(values, stamp, |v| v);
        if pushed == Pushed::Ignored {
            return;
        }
        let mut writes = self.status(&b);
        if pushed == Pushed::Full {
            writes.extend(self.series_writes(&b));
        }
        p.set_many(&writes);
    }

    /// Whether points are being recorded.
    pub fn acquiring(&self) -> bool {
        self.buf.lock().acquiring
    }

    fn status(&self, b: &TsBuffer) -> Vec<(usize, ParamValue)> {
        vec![
            self.p.ts_current_point.value(b.current() as i64),
            self.p.ts_acquiring.value(i64::from(b.acquiring)),
        ]
    }

    fn series_writes(&self, b: &TsBuffer) -> Vec<(usize, ParamValue)> {
        let mut out: Vec<(usize, ParamValue)> = self
            .series
            .iter()
            .enumerate()
            .map(|(s, h)| h.value(f64_values(&b.series(s))))
            .collect();
        let stamps = f64_values(&b.stamps());
        out.extend(self.stamps.iter().map(|h| h.value(stamps.clone())));
        out
    }
}

/// A Float64 array holding `v`.
pub fn f64_values(v: &[f64]) -> ArrayValue {
    ArrayValue {
        data_type: DataType::Float64,
        buffer: Buffer::from_bytes(bytemuck::cast_slice(v)),
        len: v.len(),
    }
}
