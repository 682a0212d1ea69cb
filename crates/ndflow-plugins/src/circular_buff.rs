//! NDPluginCircularBuff: scope-style capture around a trigger.
//!
//! While Capture is on, the newest PreCount frames wait in a ring (the frames themselves,
//! shared `Arc`s: nothing is copied; they hold their pool buffers while they wait). A
//! trigger sends the ring downstream oldest → newest, then the triggering frame and the
//! frames after it until PostCount frames have gone since the trigger (the triggering frame is
//! the first of them, as ADCore counts it): PreCount + PostCount frames per trigger, each with
//! its uniqueId, in order. Then ActualTriggerCount goes up; with PresetTriggerCount 0 (or not
//! yet reached) the ring re-arms, else Capture ends (its busy put completes).
//!
//! The trigger: a Trigger write (soft; `FlushOnSoftTrg` = Immediately sends the ring at once,
//! OnNewImage with the next frame), or TriggerCalc, an EPICS calc expression ([`calc`]) that
//! is evaluated on each frame with A, B = the frame's TriggerA / TriggerB attribute values
//! (NaN when missing), C = PreCount, D = PostCount, E = CurrentQty, F = triggered (0); a
//! finite, non-zero result triggers. TriggerAVal / TriggerBVal / TriggerCalcVal show the last
//! evaluation. Trigger_RBV reads Triggered from a trigger until its post frames are out.
//!
//! Deviations: the virtual attributes NDArrayUniqueId / NDArrayTimeStamp / NDArrayEpicsTSSec /
//! NDArrayEpicsTSnSec may be named in TriggerA/B (ADCore looks only at real attributes); a
//! PreCount write while capturing is refused (the value goes back) with a StatusMessage, as
//! ADCore does; a Trigger write while not capturing is ignored (it completes at once) instead
//! of arming the next capture; a bad TriggerCalc shows its error (naming the bad token) in
//! StatusMessage and never triggers. Frames offered while Capture is off are processed and
//! not passed on, as ADCore.

pub mod calc;

use ndflow_core::alarm::sev::{MINOR, NO};
use std::collections::VecDeque;
use std::sync::Arc;

use ndflow_core::handle::{Param, Str};
use ndflow_core::{NDArray, ParamDef, ParamStore, ParamValue};
use ndflow_runtime::port_params::{bind, plugin_layout};
use ndflow_runtime::{Plugin, PluginError, ProcessContext};
use parking_lot::Mutex;

use crate::attribute::attribute_value;
use calc::{Calc, NARGS};
use ndflow_runtime::{Built, PortType};

ndflow_core::params! {
    pub const CIRCULAR_BUFF_PARAMS, pub struct CircularBuffParams {
        capture: enumeration("Capture", &["Done", "Capture"], 0)
            .alarm_states_both(&[NO, MINOR])
            .busy()
            .readback_choices(&["Done", "Capturing"])
            .doc("Start (ring fills, triggers armed) or stop capturing; completes when capture ends"),
        status_message: string("StatusMessage", "Idle")
            .read_only_plain()
            .doc("Buffer filling / Buffer Wrapping / Flushing / Acquisition Completed / errors"),
        trigger_a: string("TriggerA", "").doc("Attribute whose value is A in TriggerCalc"),
        trigger_b: string("TriggerB", "").doc("Attribute whose value is B in TriggerCalc"),
        trigger_a_val: float64("TriggerAVal", 0.0)
            .read_only_plain()
            .doc("A at the last evaluation (NaN: attribute missing)"),
        trigger_b_val: float64("TriggerBVal", 0.0)
            .read_only_plain()
            .doc("B at the last evaluation (NaN: attribute missing)"),
        trigger_calc: string("TriggerCalc", "0")
            .long_string()
            .doc("EPICS calc expression; non-zero triggers (C=PreCount D=PostCount E=CurrentQty)"),
        trigger_calc_val: float64("TriggerCalcVal", 0.0)
            .read_only_plain()
            .doc("TriggerCalc's value at the last frame"),
        pre_count: int32("PreCount", 100)
            .min(0.0)
            .doc("Frames kept before a trigger (set while not capturing)"),
        post_count: int32("PostCount", 100)
            .min(0.0)
            .doc("Frames sent from the trigger on, the triggering frame included"),
        current_qty: int32("CurrentQty", 0)
            .read_only()
            .doc("Frames in the ring"),
        post_trigger_qty: int32("PostTriggerQty", 0)
            .read_only()
            .doc("Frames sent since the trigger"),
        trigger: enumeration("Trigger", &["Done", "Trigger"], 0)
            .alarm_states_both(&[NO, MINOR])
            .busy()
            .readback_choices(&["Done", "Triggered"])
            .doc("Soft trigger; reads Triggered until the trigger's post frames are out"),
        preset_trigger_count: int32("PresetTriggerCount", 1)
            .min(0.0)
            .doc("Triggers before capture ends; 0 = re-arm forever"),
        actual_trigger_count: int32("ActualTriggerCount", 0)
            .read_only()
            .doc("Triggers completed since Capture started"),
        flush_on_soft_trg: enumeration("FlushOnSoftTrg", &["OnNewImage", "Immediately"], 0)
            .doc("On a soft trigger send the ring with the next frame, or at once"),
    }
}

#[derive(Debug, Default)]
struct State {
    ring: VecDeque<Arc<NDArray>>,
    /// Ring frames released by an immediate soft trigger, not sent yet.
    pending: Vec<Arc<NDArray>>,
    /// PreCount as applied at the last Capture start.
    capacity: usize,
    triggered: bool,
    /// The ring of this trigger has been sent.
    flushed: bool,
    post_sent: i64,
    actual: i64,
    /// The TriggerCalc text last parsed and its result.
    calc: Option<(String, Result<Calc, String>)>,
}

/// NDPluginCircularBuff. Serial: the ring's order is the input order.
#[derive(Debug)]
pub struct CircularBuffPlugin {
    p: CircularBuffParams,
    state: Mutex<State>,
}

impl Default for CircularBuffPlugin {
    fn default() -> Self {
        Self::new()
    }
}

impl CircularBuffPlugin {
    pub fn new() -> CircularBuffPlugin {
        CircularBuffPlugin {
            p: bind(
                &plugin_layout(CIRCULAR_BUFF_PARAMS),
                CircularBuffParams::bind,
            ),
            state: Mutex::default(),
        }
    }

    fn idle_status(capacity: usize) -> &'static str {
        if capacity > 0 {
            "Buffer filling"
        } else {
            "Dropping frames"
        }
    }

    /// Evaluates TriggerCalc on `frame`; returns whether it triggers.
    fn evaluate(&self, st: &mut State, params: &ParamStore, frame: &NDArray) -> bool {
        let p = &self.p;
        let text = p.trigger_calc.get(params);
        if st.calc.as_ref().is_none_or(|(t, _)| *t != text) {
            let parsed = Calc::parse(&text).map_err(|e| format!("TriggerCalc: {e}"));
            st.calc = Some((text, parsed));
        }
        let value_of = |attr: Param<Str>| {
            let name = attr.get(params);
            attribute_value(frame, &name).unwrap_or(f64::NAN)
        };
        let mut args = [0.0; NARGS];
        args[0] = value_of(p.trigger_a);
        args[1] = value_of(p.trigger_b);
        args[2] = p.pre_count.get(params) as f64;
        args[3] = p.post_count.get(params) as f64;
        args[4] = st.ring.len() as f64;
        args[5] = 0.0;
        let mut writes = vec![
            p.trigger_a_val.value(args[0]),
            p.trigger_b_val.value(args[1]),
        ];
        let result = match &st.calc {
            Some((_, Ok(calc))) => Some(calc.eval(&args)),
            Some((_, Err(msg))) => {
                writes.push(p.status_message.value(msg.clone()));
                None
            }
            None => None,
        };
        if let Some(v) = result {
            writes.push(p.trigger_calc_val.value(v));
        }
        params.set_many(&writes);
        result.is_some_and(|v| v.is_finite() && v != 0.0)
    }

    fn start(&self, params: &ParamStore) {
        let p = &self.p;
        let mut st = self.state.lock();
        st.capacity = p.pre_count.get(params).max(0) as usize;
        st.ring = VecDeque::with_capacity(st.capacity);
        st.pending.clear();
        st.triggered = false;
        st.flushed = false;
        st.post_sent = 0;
        st.actual = 0;
        params.set_many(&[
            p.trigger.value(0),
            p.current_qty.value(0),
            p.post_trigger_qty.value(0),
            p.actual_trigger_count.value(0),
            p.status_message
                .value(Self::idle_status(st.capacity).into()),
        ]);
    }

    fn stop(&self, params: &ParamStore) {
        let p = &self.p;
        let mut st = self.state.lock();
        st.ring.clear();
        st.pending.clear();
        st.triggered = false;
        params.set_many(&[
            p.trigger.value(0),
            p.current_qty.value(0),
            p.status_message.value("Acquisition Stopped".into()),
        ]);
    }

    fn soft_trigger(&self, params: &ParamStore) {
        let p = &self.p;
        if p.capture.get(params) == 0 {
            params.set_many(&[
                p.trigger.value(0),
                p.status_message
                    .value("Not capturing: trigger ignored".into()),
            ]);
            return;
        }
        let mut st = self.state.lock();
        st.triggered = true;
        if p.flush_on_soft_trg.get(params) != 0 && !st.flushed {
            st.flushed = true;
            let ring: Vec<_> = st.ring.drain(..).collect();
            st.pending.extend(ring);
            p.current_qty.set(params, 0);
        }
    }
}

impl Plugin for CircularBuffPlugin {
    fn plugin_type(&self) -> &'static str {
        "NDPluginCircularBuff"
    }

    fn params(&self) -> &'static [ParamDef] {
        CIRCULAR_BUFF_PARAMS
    }

    fn accepts_compressed(&self) -> bool {
        true
    }

    fn param_changed(&self, params: &ParamStore, idx: usize, value: &ParamValue) {
        let p = &self.p;
        let on = value.as_i64().unwrap_or(0) != 0;
        if p.capture.is(idx) {
            if on {
                self.start(params);
            } else {
                self.stop(params);
            }
        } else if p.trigger.is(idx) && on {
            self.soft_trigger(params);
        } else if p.pre_count.is(idx) && p.capture.get(params) != 0 {
            let applied = self.state.lock().capacity;
            params.set_many(&[
                p.pre_count.value(applied as i64),
                p.status_message
                    .value("Stop acquisition to set pre-count".into()),
            ]);
        } else if p.trigger_calc.is(idx) && p.trigger_calc.get(params).trim().is_empty() {
            // As ADCore: an empty expression is "0".
            p.trigger_calc.set(params, "0".into());
        }
    }

    fn emit_after_put(&self, emit: &mut dyn FnMut(Arc<NDArray>)) {
        // Under the lock: a frame processed meanwhile cannot overtake the ring.
        let mut st = self.state.lock();
        for f in st.pending.drain(..) {
            emit(f);
        }
    }

    fn process(
        &self,
        input: &Arc<NDArray>,
        ctx: &mut ProcessContext<'_>,
    ) -> Result<(), PluginError> {
        let (params, p) = (ctx.params, &self.p);
        let mut st = self.state.lock();
        if p.capture.get(params) == 0 {
            return Ok(());
        }
        if !st.triggered && self.evaluate(&mut st, params, input) {
            st.triggered = true;
            p.trigger.set(params, 1);
        }
        if !st.triggered {
            if st.capacity > 0 {
                if st.ring.len() == st.capacity {
                    st.ring.pop_front();
                }
                st.ring.push_back(Arc::clone(input));
            }
            let full = st.ring.len() == st.capacity;
            let mut writes = vec![p.current_qty.value(st.ring.len() as i64)];
            // A TriggerCalc error stays in StatusMessage until the expression is fixed.
            let calc_error = matches!(st.calc, Some((_, Err(_))));
            if full && !calc_error {
                let s = if st.capacity > 0 {
                    "Buffer Wrapping"
                } else {
                    "Dropping frames"
                };
                writes.push(p.status_message.value(s.into()));
            }
            params.set_many(&writes);
            return Ok(());
        }
        for f in st.pending.drain(..) {
            ctx.emit(f);
        }
        if !st.flushed {
            st.flushed = true;
            for f in st.ring.drain(..) {
                ctx.emit(f);
            }
        }
        ctx.emit(Arc::clone(input));
        st.post_sent += 1;
        let mut writes = vec![
            p.current_qty.value(0),
            p.post_trigger_qty.value(st.post_sent),
            p.status_message.value("Flushing".into()),
        ];
        if st.post_sent >= p.post_count.get(params) {
            st.actual += 1;
            st.triggered = false;
            writes.push(p.actual_trigger_count.value(st.actual));
            let preset = p.preset_trigger_count.get(params);
            if preset == 0 || st.actual < preset {
                // Re-arm: a fresh ring for the next trigger.
                st.flushed = false;
                st.post_sent = 0;
                writes.push(p.post_trigger_qty.value(0));
                writes.push(
                    p.status_message
                        .value(Self::idle_status(st.capacity).into()),
                );
            } else {
                writes.push(p.capture.value(0));
                writes.push(p.status_message.value("Acquisition Completed".into()));
            }
            writes.push(p.trigger.value(0));
        }
        params.set_many(&writes);
        Ok(())
    }
}

/// The port type `type = "circularbuff"`.
pub const PORT: PortType = PortType::plugin(
    "circularbuff",
    "NDPluginCircularBuff",
    "PreCount ring sent around a calc-expression or soft trigger, then PostCount frames",
    |_| {
        Ok(Built::Plugin(
            std::sync::Arc::new(CircularBuffPlugin::new()),
        ))
    },
);
