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

use std::collections::VecDeque;
use std::sync::Arc;

use ndflow_core::{NDArray, ParamDef, ParamStore, ParamValue};
use ndflow_runtime::{param_index, Plugin, PluginError, ProcessContext, Resolved};
use parking_lot::Mutex;

use crate::attribute::attribute_value;
use calc::{Calc, NARGS};

pub const CIRCULAR_BUFF_PARAMS: &[ParamDef] = &[
    ParamDef::enumeration("Capture", &["Done", "Capture"], 0)
        .busy()
        .readback_choices(&["Done", "Capturing"])
        .doc("Start (ring fills, triggers armed) or stop capturing; completes when capture ends"),
    ParamDef::string("StatusMessage", "Idle")
        .read_only_plain()
        .doc("Buffer filling / Buffer Wrapping / Flushing / Acquisition Completed / errors"),
    ParamDef::string("TriggerA", "").doc("Attribute whose value is A in TriggerCalc"),
    ParamDef::string("TriggerB", "").doc("Attribute whose value is B in TriggerCalc"),
    ParamDef::float64("TriggerAVal", 0.0)
        .read_only_plain()
        .doc("A at the last evaluation (NaN: attribute missing)"),
    ParamDef::float64("TriggerBVal", 0.0)
        .read_only_plain()
        .doc("B at the last evaluation (NaN: attribute missing)"),
    ParamDef::string("TriggerCalc", "0")
        .long_string()
        .doc("EPICS calc expression; non-zero triggers (C=PreCount D=PostCount E=CurrentQty)"),
    ParamDef::float64("TriggerCalcVal", 0.0)
        .read_only_plain()
        .doc("TriggerCalc's value at the last frame"),
    ParamDef::int32("PreCount", 100)
        .min(0.0)
        .doc("Frames kept before a trigger (set while not capturing)"),
    ParamDef::int32("PostCount", 100)
        .min(0.0)
        .doc("Frames sent from the trigger on, the triggering frame included"),
    ParamDef::int32("CurrentQty", 0)
        .read_only()
        .doc("Frames in the ring"),
    ParamDef::int32("PostTriggerQty", 0)
        .read_only()
        .doc("Frames sent since the trigger"),
    ParamDef::enumeration("Trigger", &["Done", "Trigger"], 0)
        .busy()
        .readback_choices(&["Done", "Triggered"])
        .doc("Soft trigger; reads Triggered until the trigger's post frames are out"),
    ParamDef::int32("PresetTriggerCount", 1)
        .min(0.0)
        .doc("Triggers before capture ends; 0 = re-arm forever"),
    ParamDef::int32("ActualTriggerCount", 0)
        .read_only()
        .doc("Triggers completed since Capture started"),
    ParamDef::enumeration("FlushOnSoftTrg", &["OnNewImage", "Immediately"], 0)
        .doc("On a soft trigger send the ring with the next frame, or at once"),
];

#[derive(Debug)]
struct Ix {
    capture: usize,
    status: usize,
    trig_a: usize,
    trig_b: usize,
    a_val: usize,
    b_val: usize,
    calc: usize,
    calc_val: usize,
    pre: usize,
    post: usize,
    qty: usize,
    post_qty: usize,
    trigger: usize,
    preset: usize,
    actual: usize,
    flush_now: usize,
}

impl Ix {
    fn resolve(p: &ParamStore) -> Result<Ix, PluginError> {
        let i = |n: &str| param_index(p, "NDPluginCircularBuff", n);
        Ok(Ix {
            capture: i("Capture")?,
            status: i("StatusMessage")?,
            trig_a: i("TriggerA")?,
            trig_b: i("TriggerB")?,
            a_val: i("TriggerAVal")?,
            b_val: i("TriggerBVal")?,
            calc: i("TriggerCalc")?,
            calc_val: i("TriggerCalcVal")?,
            pre: i("PreCount")?,
            post: i("PostCount")?,
            qty: i("CurrentQty")?,
            post_qty: i("PostTriggerQty")?,
            trigger: i("Trigger")?,
            preset: i("PresetTriggerCount")?,
            actual: i("ActualTriggerCount")?,
            flush_now: i("FlushOnSoftTrg")?,
        })
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
#[derive(Debug, Default)]
pub struct CircularBuffPlugin {
    ix: Resolved<Ix>,
    state: Mutex<State>,
}

impl CircularBuffPlugin {
    pub fn new() -> CircularBuffPlugin {
        CircularBuffPlugin::default()
    }

    fn ix(&self, p: &ParamStore) -> Result<&Ix, PluginError> {
        self.ix.get_or_resolve(|| Ix::resolve(p))
    }

    fn idle_status(capacity: usize) -> &'static str {
        if capacity > 0 {
            "Buffer filling"
        } else {
            "Dropping frames"
        }
    }

    /// Evaluates TriggerCalc on `frame`; returns whether it triggers.
    fn evaluate(&self, st: &mut State, p: &ParamStore, ix: &Ix, frame: &NDArray) -> bool {
        let text = p.get_str(ix.calc);
        if st.calc.as_ref().is_none_or(|(t, _)| *t != text) {
            let parsed = Calc::parse(&text).map_err(|e| format!("TriggerCalc: {e}"));
            st.calc = Some((text, parsed));
        }
        let value_of = |idx: usize| {
            let name = p.get_str(idx);
            attribute_value(frame, &name).unwrap_or(f64::NAN)
        };
        let mut args = [0.0; NARGS];
        args[0] = value_of(ix.trig_a);
        args[1] = value_of(ix.trig_b);
        args[2] = p.get_f64(ix.pre);
        args[3] = p.get_f64(ix.post);
        args[4] = st.ring.len() as f64;
        args[5] = 0.0;
        let mut writes = vec![(ix.a_val, args[0].into()), (ix.b_val, args[1].into())];
        let result = match &st.calc {
            Some((_, Ok(calc))) => Some(calc.eval(&args)),
            Some((_, Err(msg))) => {
                writes.push((ix.status, msg.clone().into()));
                None
            }
            None => None,
        };
        if let Some(v) = result {
            writes.push((ix.calc_val, v.into()));
        }
        p.set_many(&writes);
        result.is_some_and(|v| v.is_finite() && v != 0.0)
    }

    fn start(&self, p: &ParamStore, ix: &Ix) {
        let mut st = self.state.lock();
        st.capacity = p.get_i64(ix.pre).max(0) as usize;
        st.ring = VecDeque::with_capacity(st.capacity);
        st.pending.clear();
        st.triggered = false;
        st.flushed = false;
        st.post_sent = 0;
        st.actual = 0;
        p.set_many(&[
            (ix.trigger, 0.into()),
            (ix.qty, 0.into()),
            (ix.post_qty, 0.into()),
            (ix.actual, 0.into()),
            (ix.status, Self::idle_status(st.capacity).into()),
        ]);
    }

    fn stop(&self, p: &ParamStore, ix: &Ix) {
        let mut st = self.state.lock();
        st.ring.clear();
        st.pending.clear();
        st.triggered = false;
        p.set_many(&[
            (ix.trigger, 0.into()),
            (ix.qty, 0.into()),
            (ix.status, "Acquisition Stopped".into()),
        ]);
    }

    fn soft_trigger(&self, p: &ParamStore, ix: &Ix) {
        if p.get_i64(ix.capture) == 0 {
            p.set_many(&[
                (ix.trigger, 0.into()),
                (ix.status, "Not capturing: trigger ignored".into()),
            ]);
            return;
        }
        let mut st = self.state.lock();
        st.triggered = true;
        if p.get_i64(ix.flush_now) != 0 && !st.flushed {
            st.flushed = true;
            let ring: Vec<_> = st.ring.drain(..).collect();
            st.pending.extend(ring);
            let _ = p.set(ix.qty, 0);
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

    fn param_changed(&self, p: &ParamStore, idx: usize, value: &ParamValue) {
        let Ok(ix) = self.ix(p) else {
            return;
        };
        let on = value.as_i64().unwrap_or(0) != 0;
        if idx == ix.capture {
            if on {
                self.start(p, ix);
            } else {
                self.stop(p, ix);
            }
        } else if idx == ix.trigger && on {
            self.soft_trigger(p, ix);
        } else if idx == ix.pre && p.get_i64(ix.capture) != 0 {
            let applied = self.state.lock().capacity;
            p.set_many(&[
                (ix.pre, applied.into()),
                (ix.status, "Stop acquisition to set pre-count".into()),
            ]);
        } else if idx == ix.calc && p.get_str(ix.calc).trim().is_empty() {
            // As ADCore: an empty expression is "0".
            let _ = p.set(ix.calc, "0");
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
        let p = ctx.params;
        let ix = self.ix(p)?;
        let mut st = self.state.lock();
        if p.get_i64(ix.capture) == 0 {
            return Ok(());
        }
        if !st.triggered && self.evaluate(&mut st, p, ix, input) {
            st.triggered = true;
            let _ = p.set(ix.trigger, 1);
        }
        if !st.triggered {
            if st.capacity > 0 {
                if st.ring.len() == st.capacity {
                    st.ring.pop_front();
                }
                st.ring.push_back(Arc::clone(input));
            }
            let full = st.ring.len() == st.capacity;
            let mut writes = vec![(ix.qty, st.ring.len().into())];
            // A TriggerCalc error stays in StatusMessage until the expression is fixed.
            let calc_error = matches!(st.calc, Some((_, Err(_))));
            if full && !calc_error {
                let s = if st.capacity > 0 {
                    "Buffer Wrapping"
                } else {
                    "Dropping frames"
                };
                writes.push((ix.status, s.into()));
            }
            p.set_many(&writes);
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
            (ix.qty, 0.into()),
            (ix.post_qty, ParamValue::from(st.post_sent)),
            (ix.status, "Flushing".into()),
        ];
        if st.post_sent >= p.get_i64(ix.post) {
            st.actual += 1;
            st.triggered = false;
            writes.push((ix.actual, ParamValue::from(st.actual)));
            let preset = p.get_i64(ix.preset);
            if preset == 0 || st.actual < preset {
                // Re-arm: a fresh ring for the next trigger.
                st.flushed = false;
                st.post_sent = 0;
                writes.push((ix.post_qty, 0.into()));
                writes.push((ix.status, Self::idle_status(st.capacity).into()));
            } else {
                writes.push((ix.capture, 0.into()));
                writes.push((ix.status, "Acquisition Completed".into()));
            }
            writes.push((ix.trigger, 0.into()));
        }
        p.set_many(&writes);
        Ok(())
    }
}
