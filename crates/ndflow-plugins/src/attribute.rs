//! NDPluginAttribute: the values of up to 8 chosen NDAttributes of each frame as parameters.
//!
//! Per attribute N = 1..8 (NDAttributeN's records under `N:`): AttrName picks the attribute,
//! Value_RBV is its value in the last frame that had it (as float64), ValueSum_RBV the running
//! sum since the last Reset, TSArrayValue the time series of the values (up to
//! [`MAX_TIME_SERIES`] points, then it stops growing, as ADCore's maxTimeSeries). Besides the
//! frame's own attributes, AttrName may name the virtual attributes NDArrayUniqueId,
//! NDArrayTimeStamp, NDArrayEpicsTSSec and NDArrayEpicsTSnSec. The port's Reset (NDAttribute)
//! zeroes every value, sum and series. String attributes have no value and are skipped, as
//! are frames without the attribute.
//!
//! Frames pass on unchanged (shared, not copied), compressed ones too: only the attributes are
//! read. Value and ValueSum follow every frame, TSArrayValue too while it holds up to 256
//! points; longer series are republished at most every 100 ms (so the last few values of a
//! long series show only with a later frame or Reset), sparing a copy per frame.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ndflow_core::{ArrayValue, Buffer, DataType, NDArray, ParamDef, ParamStore, ParamValue};
use ndflow_runtime::{param_index, Plugin, PluginError, ProcessContext, Resolved};
use parking_lot::Mutex;

/// Attributes per port.
pub const MAX_ATTRIBUTES: usize = 8;
/// Points kept per time series.
pub const MAX_TIME_SERIES: usize = 2048;
const TS_PERIOD: Duration = Duration::from_millis(100);
/// Series up to this length are republished with every frame.
const TS_EVERY_FRAME: usize = 256;

/// The 4 virtual attributes: frame fields readable by name.
pub const VIRTUAL_ATTRIBUTES: [&str; 4] = [
    "NDArrayUniqueId",
    "NDArrayTimeStamp",
    "NDArrayEpicsTSSec",
    "NDArrayEpicsTSnSec",
];

/// The value of attribute `name` of `frame` as float64: a virtual attribute, else a numeric
/// attribute of the frame; `None` when absent or a string.
pub fn attribute_value(frame: &NDArray, name: &str) -> Option<f64> {
    match name {
        "" => None,
        "NDArrayUniqueId" => Some(frame.unique_id as f64),
        "NDArrayTimeStamp" => Some(frame.time_stamp),
        "NDArrayEpicsTSSec" => Some(frame.epics_ts.sec as f64),
        "NDArrayEpicsTSnSec" => Some(frame.epics_ts.nsec as f64),
        _ => frame.attribute(name).and_then(|a| a.value.as_f64()),
    }
}

macro_rules! attribute_params {
    ($($n:literal),+) => {
        &[
            ParamDef::enumeration("Reset", &["Done Reset", "Reset"], 0)
                .doc("Zero every Value, ValueSum and time series"),
            $(
                ParamDef::string(concat!($n, ":AttrName"), "")
                    .long_string()
                    .doc("Attribute to follow (or NDArrayUniqueId, NDArrayTimeStamp, ...)"),
                ParamDef::float64(concat!($n, ":Value"), 0.0)
                    .read_only()
                    .doc("Value in the last frame that had the attribute"),
                ParamDef::float64(concat!($n, ":ValueSum"), 0.0)
                    .read_only()
                    .doc("Sum of the values since Reset"),
                ParamDef::array(concat!($n, ":TSArrayValue"), DataType::Float64)
                    .doc("Time series of the values since Reset"),
            )+
        ]
    };
}

pub const ATTRIBUTE_PARAMS: &[ParamDef] = attribute_params!("1", "2", "3", "4", "5", "6", "7", "8");

#[derive(Debug)]
struct Slot {
    name: usize,
    value: usize,
    sum: usize,
    series: usize,
}

#[derive(Debug)]
struct Ix {
    reset: usize,
    slots: Vec<Slot>,
}

#[derive(Debug, Default, Clone)]
struct Acc {
    sum: f64,
    series: Vec<f64>,
}

#[derive(Debug)]
struct State {
    acc: Vec<Acc>,
    last_ts: Option<Instant>,
}

/// NDPluginAttribute. Serial: the time series follow the input order.
#[derive(Debug)]
pub struct AttributePlugin {
    ix: Resolved<Ix>,
    state: Mutex<State>,
}

impl Default for AttributePlugin {
    fn default() -> Self {
        AttributePlugin {
            ix: Resolved::default(),
            state: Mutex::new(State {
                acc: vec![Acc::default(); MAX_ATTRIBUTES],
                last_ts: None,
            }),
        }
    }
}

fn series_value(v: &[f64]) -> ParamValue {
    ParamValue::Array(ArrayValue {
        data_type: DataType::Float64,
        buffer: Buffer::from_bytes(bytemuck::cast_slice(v)),
        len: v.len(),
    })
}

impl AttributePlugin {
    pub fn new() -> AttributePlugin {
        AttributePlugin::default()
    }

    fn ix(&self, p: &ParamStore) -> Result<&Ix, PluginError> {
        self.ix.get_or_resolve(|| {
            let i = |n: String| param_index(p, "NDPluginAttribute", &n);
            Ok(Ix {
                reset: i("Reset".into())?,
                slots: (1..=MAX_ATTRIBUTES)
                    .map(|n| {
                        Ok(Slot {
                            name: i(format!("{n}:AttrName"))?,
                            value: i(format!("{n}:Value"))?,
                            sum: i(format!("{n}:ValueSum"))?,
                            series: i(format!("{n}:TSArrayValue"))?,
                        })
                    })
                    .collect::<Result<_, PluginError>>()?,
            })
        })
    }
}

impl Plugin for AttributePlugin {
    fn plugin_type(&self) -> &'static str {
        "NDPluginAttribute"
    }

    fn params(&self) -> &'static [ParamDef] {
        ATTRIBUTE_PARAMS
    }

    fn accepts_compressed(&self) -> bool {
        true
    }

    fn param_changed(&self, p: &ParamStore, idx: usize, value: &ParamValue) {
        let Ok(ix) = self.ix(p) else {
            return;
        };
        if idx != ix.reset || value.as_i64().unwrap_or(0) == 0 {
            return;
        }
        let mut st = self.state.lock();
        let mut writes = vec![(ix.reset, ParamValue::from(0))];
        for (s, acc) in ix.slots.iter().zip(st.acc.iter_mut()) {
            *acc = Acc::default();
            writes.push((s.value, 0.0.into()));
            writes.push((s.sum, 0.0.into()));
            writes.push((s.series, series_value(&[])));
        }
        st.last_ts = None;
        p.set_many(&writes);
    }

    fn process(
        &self,
        input: &Arc<NDArray>,
        ctx: &mut ProcessContext<'_>,
    ) -> Result<(), PluginError> {
        let p = ctx.params;
        let ix = self.ix(p)?;
        let mut st = self.state.lock();
        let publish_ts = st.last_ts.is_none_or(|t| t.elapsed() >= TS_PERIOD);
        if publish_ts {
            st.last_ts = Some(Instant::now());
        }
        let mut writes = Vec::new();
        for (s, acc) in ix.slots.iter().zip(st.acc.iter_mut()) {
            let Some(v) = attribute_value(input, &p.get_str(s.name)) else {
                continue;
            };
            acc.sum += v;
            if acc.series.len() < MAX_TIME_SERIES {
                acc.series.push(v);
            }
            writes.push((s.value, v.into()));
            writes.push((s.sum, acc.sum.into()));
            if publish_ts || acc.series.len() <= TS_EVERY_FRAME {
                writes.push((s.series, series_value(&acc.series)));
            }
        }
        drop(st);
        p.set_many(&writes);
        ctx.emit(Arc::clone(input));
        Ok(())
    }
}
