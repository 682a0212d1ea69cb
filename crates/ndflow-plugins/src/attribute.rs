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

use ndflow_core::handle::join;
use ndflow_core::{DataType, NDArray, ParamDef, ParamStore, ParamValue};
use ndflow_runtime::port_params::{bind, bind_first, plugin_layout};
use ndflow_runtime::{Plugin, PluginError, ProcessContext};
use parking_lot::Mutex;

use crate::timeseries::f64_values;
use ndflow_runtime::{Built, PortType};

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

ndflow_core::params! {
    /// NDAttribute's record (the port's).
    pub const ATTRIBUTE_PORT_PARAMS, pub struct AttributeParams {
        reset: enumeration("Reset", &["Done Reset", "Reset"], 0)
            .doc("Zero every Value, ValueSum and time series"),
    }
}

ndflow_core::params! {
    /// NDAttributeN's records once per attribute, prefixed `N:`.
    pub const ATTRIBUTE_N_PARAMS: [pub struct AttributeNParams; "1", "2", "3", "4", "5", "6", "7", "8"] {
        attr_name: string("AttrName", "")
            .long_string()
            .doc("Attribute to follow (or NDArrayUniqueId, NDArrayTimeStamp, ...)"),
        value: float64("Value", 0.0)
            .read_only()
            .doc("Value in the last frame that had the attribute"),
        value_sum: float64("ValueSum", 0.0)
            .read_only()
            .doc("Sum of the values since Reset"),
        ts_array_value: array("TSArrayValue", DataType::Float64)
            .doc("Time series of the values since Reset"),
    }
}

pub const ATTRIBUTE_PARAMS: &[ParamDef] = &join::<
    { ATTRIBUTE_PORT_PARAMS.len() + ATTRIBUTE_N_PARAMS.len() },
>(&[ATTRIBUTE_PORT_PARAMS, ATTRIBUTE_N_PARAMS]);

const _: () = assert!(AttributeNParams::COUNT == MAX_ATTRIBUTES);

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
    p: AttributeParams,
    attrs: Vec<AttributeNParams>,
    state: Mutex<State>,
}

impl Default for AttributePlugin {
    fn default() -> Self {
        Self::new()
    }
}

impl AttributePlugin {
    pub fn new() -> AttributePlugin {
        let layout = plugin_layout(ATTRIBUTE_PARAMS);
        let attrs = bind_first(&layout, MAX_ATTRIBUTES, AttributeNParams::bind_first);
        AttributePlugin {
            p: bind(&layout, AttributeParams::bind),
            attrs,
            state: Mutex::new(State {
                acc: vec![Acc::default(); MAX_ATTRIBUTES],
                last_ts: None,
            }),
        }
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
        if !self.p.reset.is(idx) || value.as_i64().unwrap_or(0) == 0 {
            return;
        }
        let mut st = self.state.lock();
        let mut writes = vec![self.p.reset.value(0)];
        for (a, acc) in self.attrs.iter().zip(st.acc.iter_mut()) {
            *acc = Acc::default();
            writes.push(a.value.value(0.0));
            writes.push(a.value_sum.value(0.0));
            writes.push(a.ts_array_value.value(f64_values(&[])));
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
        let names: Vec<String> =
            p.with_values(|v| self.attrs.iter().map(|a| a.attr_name.read(v)).collect());
        let mut st = self.state.lock();
        let publish_ts = st.last_ts.is_none_or(|t| t.elapsed() >= TS_PERIOD);
        if publish_ts {
            st.last_ts = Some(Instant::now());
        }
        let mut writes = Vec::new();
        for ((a, name), acc) in self.attrs.iter().zip(&names).zip(st.acc.iter_mut()) {
            let Some(v) = attribute_value(input, name) else {
                continue;
            };
            acc.sum += v;
            if acc.series.len() < MAX_TIME_SERIES {
                acc.series.push(v);
            }
            writes.push(a.value.value(v));
            writes.push(a.value_sum.value(acc.sum));
            if publish_ts || acc.series.len() <= TS_EVERY_FRAME {
                writes.push(a.ts_array_value.value(f64_values(&acc.series)));
            }
        }
        drop(st);
        p.set_many(&writes);
        ctx.emit(Arc::clone(input));
        Ok(())
    }
}

/// The port type `type = "attribute"`.
pub const PORT: PortType = PortType::plugin(
    "attribute",
    "NDPluginAttribute",
    "8 chosen frame attributes (or uniqueId/time stamps) as value, sum and time series",
    |_| Ok(Built::Plugin(std::sync::Arc::new(AttributePlugin::new()))),
);
