//! The time series a plugin keeps of its own per-frame results (ROIStat's per-ROI series,
//! Stats' 23 `TS*` waveforms), driven by ROIStat's records: TSControl (Erase/Start, Start,
//! Stop, Read, Erase), TSRead, TSNumPoints, TSCurrentPoint, TSAcquiring, plus TSAcquireMode
//! (Fixed length / Circ. buffer) from NDTimeSeries. The store is [`TsBuffer`].

use ndflow_core::{ArrayValue, Buffer, DataType, ParamStore, ParamValue};
use ndflow_runtime::{param_index, PluginError, Resolved};
use parking_lot::Mutex;

use super::buffer::{Pushed, TsBuffer};

pub const TS_CONTROL_CHOICES: &[&str] = &["Erase/Start", "Start", "Stop", "Read", "Erase"];
pub const TS_ACQUIRING_CHOICES: &[&str] = &["Done", "Acquiring"];
pub const TS_MODE_CHOICES: &[&str] = &["Fixed length", "Circ. buffer"];
/// TSNumPoints' default (areaDetector's DEFAULT_NUM_TSPOINTS) and limit.
pub const TS_DEFAULT_POINTS: usize = 2048;
pub const TS_MAX_POINTS: usize = 1_000_000;

/// `&[TS control records..., $entries...]`: a plugin's table with the recorder's records
/// first (one declaration for ROIStat and Stats).
macro_rules! with_ts_control {
    ($($e:expr),* $(,)?) => {
        &[
            ::ndflow_core::ParamDef::enumeration("TSControl", $crate::timeseries::TS_CONTROL_CHOICES, 2)
                .doc("Time series: Erase/Start, Start (resume), Stop, Read (publish), Erase"),
            ::ndflow_core::ParamDef::int32("TSRead", 0).doc("Any write publishes the time series (TSControl Read)"),
            ::ndflow_core::ParamDef::int32("TSNumPoints", $crate::timeseries::TS_DEFAULT_POINTS as i32)
                .range(1.0, $crate::timeseries::TS_MAX_POINTS as f64)
                .doc("Points per time series (a write erases them)"),
            ::ndflow_core::ParamDef::int32("TSCurrentPoint", 0).read_only_plain().doc("Next time-series point"),
            ::ndflow_core::ParamDef::enumeration("TSAcquiring", $crate::timeseries::TS_ACQUIRING_CHOICES, 0)
                .read_only_plain()
                .doc("Whether frames are being added to the time series"),
            ::ndflow_core::ParamDef::enumeration("TSAcquireMode", $crate::timeseries::TS_MODE_CHOICES, 0)
                .doc("Fixed length (stop when full) or Circ. buffer (keep the latest; a write erases)"),
            $($e,)*
        ]
    };
}
pub(crate) use with_ts_control;

#[derive(Debug)]
struct Indices {
    control: usize,
    read: usize,
    num_points: usize,
    current: usize,
    acquiring: usize,
    mode: usize,
    /// Waveform per signal.
    series: Vec<usize>,
    /// Waveforms that all show the time stamps.
    stamps: Vec<usize>,
}

/// A plugin's time series of its own results. Thread-safe.
#[derive(Debug)]
pub struct TsRecorder {
    plugin: &'static str,
    series_names: Vec<String>,
    stamp_names: Vec<String>,
    buf: Mutex<TsBuffer>,
    ix: Resolved<Indices>,
}

impl TsRecorder {
    /// One signal per name in `series_names` (its waveform parameter); the time stamps are
    /// published to every parameter of `stamp_names`.
    pub fn new(plugin: &'static str, series_names: Vec<String>, stamp_names: Vec<String>) -> Self {
        TsRecorder {
            plugin,
            buf: Mutex::new(TsBuffer::new(series_names.len(), TS_DEFAULT_POINTS)),
            series_names,
            stamp_names,
            ix: Resolved::default(),
        }
    }

    fn ix(&self, p: &ParamStore) -> Result<&Indices, PluginError> {
        self.ix.get_or_resolve(|| {
            let one = |n: &str| param_index(p, self.plugin, n);
            let all = |names: &[String]| -> Result<Vec<usize>, PluginError> {
                names.iter().map(|n| one(n)).collect()
            };
            Ok(Indices {
                control: one("TSControl")?,
                read: one("TSRead")?,
                num_points: one("TSNumPoints")?,
                current: one("TSCurrentPoint")?,
                acquiring: one("TSAcquiring")?,
                mode: one("TSAcquireMode")?,
                series: all(&self.series_names)?,
                stamps: all(&self.stamp_names)?,
            })
        })
    }

    /// Handles a write to one of the recorder's records (others are ignored).
    pub fn param_changed(&self, p: &ParamStore, idx: usize, value: &ParamValue) {
        let Ok(ix) = self.ix(p) else { return };
        let v = value.as_i64().unwrap_or(0);
        let mut b = self.buf.lock();
        let publish = if idx == ix.control {
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
        } else if idx == ix.read {
            true
        } else if idx == ix.num_points {
            let n = b.n_signals();
            b.resize(n, usize::try_from(v).unwrap_or(1));
            true
        } else if idx == ix.mode {
            b.set_circular(v == 1);
            true
        } else {
            return;
        };
        let mut writes = status(&b, ix);
        if publish {
            writes.extend(series_writes(&b, ix));
        }
        p.set_many(&writes);
    }

    /// Adds one point (`values[s]` for signal `s`) while acquiring; a Fixed length series
    /// that fills stops and is published.
    pub fn record(&self, p: &ParamStore, values: &[f64], stamp: f64) -> Result<(), PluginError> {
        let ix = self.ix(p)?;
        let mut b = self.buf.lock();
        let pushed = b.push(values, stamp, |v| v);
        if pushed == Pushed::Ignored {
            return Ok(());
        }
        let mut writes = status(&b, ix);
        if pushed == Pushed::Full {
            writes.extend(series_writes(&b, ix));
        }
        p.set_many(&writes);
        Ok(())
    }

    /// Whether points are being recorded.
    pub fn acquiring(&self) -> bool {
        self.buf.lock().acquiring
    }
}

fn status(b: &TsBuffer, ix: &Indices) -> Vec<(usize, ParamValue)> {
    vec![
        (ix.current, ParamValue::from(b.current() as i64)),
        (ix.acquiring, ParamValue::from(i64::from(b.acquiring))),
    ]
}

fn series_writes(b: &TsBuffer, ix: &Indices) -> Vec<(usize, ParamValue)> {
    let mut out: Vec<(usize, ParamValue)> = ix
        .series
        .iter()
        .enumerate()
        .map(|(s, &i)| (i, f64_array(&b.series(s))))
        .collect();
    let stamps = f64_array(&b.stamps());
    out.extend(ix.stamps.iter().map(|&i| (i, stamps.clone())));
    out
}

/// A Float64 array parameter value holding `v`.
pub fn f64_array(v: &[f64]) -> ParamValue {
    ParamValue::Array(ArrayValue {
        data_type: DataType::Float64,
        buffer: Buffer::from_bytes(bytemuck::cast_slice(v)),
        len: v.len(),
    })
}
