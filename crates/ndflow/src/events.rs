//! What a running IOC says when nobody watches a status line: one line per change of state.
//!
//! - An acquisition started, and ended (or was aborted, or failed) with its frame count and
//!   rate, per driver.
//! - A plugin's first dropped frame for each reason; later drops are summarised, one line per
//!   plugin when no acquisition is running any more (at most every [`SUMMARY_EVERY`] while one
//!   is). Frames a disabled plugin skips are counted in the exit summary only: disabling a
//!   plugin is a setting, not a fault.
//! - At exit: uptime, frames per driver, drops per plugin with their reasons.
//!
//! An idle IOC therefore prints nothing. [`Watcher`] is the logic (fed samples, returns
//! lines); [`Events`] feeds it from a graph: the start and end of each acquisition from the
//! drivers' `AcquireBusy` as it changes (so an acquisition shorter than the run loop's tick is
//! not missed), drops from the plugins' accounting as the loop reads it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ndflow_runtime::{DriverPort, DropReason, Graph, PluginPort, PortHandle};
use parking_lot::Mutex;

/// Drop reasons: the input reasons of [`DropReason`], then outputs dropped after processing.
pub const REASONS: usize = 6;

/// How often, at most, a plugin's further drops are summarised while an acquisition runs.
pub const SUMMARY_EVERY: Duration = Duration::from_secs(60);

const DISABLED: usize = DropReason::Disabled as usize;

fn reason_name(r: usize) -> &'static str {
    DropReason::ALL
        .get(r)
        .map_or("MaxByteRate (output)", |d| d.name())
}

/// A plugin's drops so far, per reason (indexed as [`DropReason`], then output drops).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drops {
    pub port: String,
    pub counts: [u64; REASONS],
}

impl Drops {
    pub fn of(p: &PluginPort) -> Drops {
        let a = p.accounting();
        let mut counts = [0; REASONS];
        counts[..DropReason::ALL.len()].copy_from_slice(&a.dropped);
        counts[REASONS - 1] = a.dropped_output;
        Drops {
            port: p.name.clone(),
            counts,
        }
    }
}

/// How an acquisition ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Complete,
    Aborted,
    /// With the driver's status message.
    Failed(String),
}

/// A driver's `AcquireBusy` changed.
#[derive(Debug, Clone)]
pub struct Transition {
    pub driver: String,
    pub acquiring: bool,
    /// The driver's ArrayCounter at that moment.
    pub frames: i64,
    pub at: Instant,
    /// Meaningful when `acquiring` is false.
    pub outcome: Outcome,
}

struct DriverState {
    name: String,
    /// Start time and ArrayCounter of the acquisition running now.
    since: Option<(Instant, i64)>,
    acquisitions: u64,
}

struct PluginState {
    name: String,
    /// The reasons whose first drop has been reported.
    seen: [bool; REASONS],
    /// The counts reported so far.
    reported: [u64; REASONS],
    last_report: Instant,
}

/// The state-change logic: remembers what it has said and says only what changed.
pub struct Watcher {
    start: Instant,
    drivers: Vec<DriverState>,
    plugins: Vec<PluginState>,
}

impl Watcher {
    pub fn new(start: Instant) -> Watcher {
        Watcher {
            start,
            drivers: Vec::new(),
            plugins: Vec::new(),
        }
    }

    fn driver(&mut self, name: &str) -> &mut DriverState {
        let i = match self.drivers.iter().position(|d| d.name == name) {
            Some(i) => i,
            None => {
                self.drivers.push(DriverState {
                    name: name.to_string(),
                    since: None,
                    acquisitions: 0,
                });
                self.drivers.len() - 1
            }
        };
        &mut self.drivers[i]
    }

    /// True while some driver's acquisition has started and not ended.
    pub fn acquiring(&self) -> bool {
        self.drivers.iter().any(|d| d.since.is_some())
    }

    /// The line for a start or end (none for a repeated start, or an end of an acquisition
    /// this watcher never saw start).
    pub fn transition(&mut self, t: &Transition) -> Option<String> {
        let d = self.driver(&t.driver);
        if t.acquiring {
            if d.since.is_some() {
                return None;
            }
            d.since = Some((t.at, t.frames));
            return Some(format!("{}: acquisition started", t.driver));
        }
        let (t0, f0) = d.since.take()?;
        d.acquisitions += 1;
        // ArrayCounter may have been reset (written 0) while it ran.
        let frames = if t.frames >= f0 {
            t.frames - f0
        } else {
            t.frames
        };
        let secs = t.at.saturating_duration_since(t0).as_secs_f64();
        let rate = if secs > 0.0 {
            frames as f64 / secs
        } else {
            0.0
        };
        let how = match &t.outcome {
            Outcome::Complete => "ended".to_string(),
            Outcome::Aborted => "aborted".to_string(),
            Outcome::Failed(why) => format!("failed ({why})"),
        };
        Some(format!(
            "{}: acquisition {how}: {frames} frames in {} ({rate:.1} frames/s)",
            t.driver,
            duration_text(secs)
        ))
    }

    /// Lines for the plugins' drops since the last call: a reason's first drop at once,
    /// further drops summarised once no acquisition runs (or every [`SUMMARY_EVERY`]).
    pub fn drops(&mut self, samples: &[Drops], now: Instant) -> Vec<String> {
        let acquiring = self.acquiring();
        let mut out = Vec::new();
        for s in samples {
            let p = match self.plugins.iter().position(|p| p.name == s.port) {
                Some(i) => &mut self.plugins[i],
                None => {
                    self.plugins.push(PluginState {
                        name: s.port.clone(),
                        seen: [false; REASONS],
                        reported: [0; REASONS],
                        last_report: now,
                    });
                    let last = self.plugins.len() - 1;
                    &mut self.plugins[last]
                }
            };
            for (r, &n) in s.counts.iter().enumerate() {
                // Counters only grow; a smaller one was reset: start from there.
                if n < p.reported[r] || r == DISABLED {
                    p.reported[r] = n;
                }
            }
            let first: Vec<usize> = (0..REASONS)
                .filter(|&r| !p.seen[r] && s.counts[r] > p.reported[r])
                .collect();
            if !first.is_empty() {
                let what: Vec<String> = first
                    .iter()
                    .map(|&r| format!("{} ({})", reason_name(r), s.counts[r] - p.reported[r]))
                    .collect();
                out.push(format!(
                    "{}: dropping frames: {}; further drops are summarised",
                    s.port,
                    what.join(", ")
                ));
                for r in first {
                    p.seen[r] = true;
                    p.reported[r] = s.counts[r];
                }
                p.last_report = now;
                continue;
            }
            let more: u64 = (0..REASONS).map(|r| s.counts[r] - p.reported[r]).sum();
            let due = !acquiring || now.saturating_duration_since(p.last_report) >= SUMMARY_EVERY;
            if more > 0 && due {
                out.push(format!(
                    "{}: {more} more frames dropped ({})",
                    s.port,
                    reasons_text(&s.counts, &p.reported)
                ));
                p.reported = s.counts;
                p.last_report = now;
            }
        }
        out
    }

    /// The exit summary: uptime; per driver `(name, frames, frames lost for a full pool)`;
    /// every plugin that dropped frames, with the reasons.
    pub fn summary(
        &self,
        drivers: &[(String, i64, u64)],
        plugins: &[Drops],
        now: Instant,
    ) -> Vec<String> {
        let up = now.saturating_duration_since(self.start).as_secs_f64();
        let mut out = vec![format!("summary: up {}", duration_text(up))];
        for (name, frames, pool) in drivers {
            let n = self
                .drivers
                .iter()
                .find(|d| &d.name == name)
                .map_or(0, |d| d.acquisitions);
            let mut line = format!(
                "summary: {name}: {frames} frames, {n} acquisition{}",
                if n == 1 { "" } else { "s" }
            );
            if *pool > 0 {
                line.push_str(&format!(", {pool} not acquired (pool full)"));
            }
            out.push(line);
        }
        let mut any = false;
        for p in plugins {
            let total: u64 = p.counts.iter().sum();
            if total > 0 {
                any = true;
                out.push(format!(
                    "summary: {}: {total} frames dropped ({})",
                    p.port,
                    reasons_text(&p.counts, &[0; REASONS])
                ));
            }
        }
        if !any && !plugins.is_empty() {
            out.push("summary: no plugin dropped a frame".to_string());
        }
        out
    }
}

/// `queue full 12, error 1`: the reasons whose count grew from `from` to `to`.
fn reasons_text(to: &[u64; REASONS], from: &[u64; REASONS]) -> String {
    let parts: Vec<String> = (0..REASONS)
        .filter(|&r| to[r] > from[r])
        .map(|r| format!("{} {}", reason_name(r), to[r] - from[r]))
        .collect();
    parts.join(", ")
}

/// `0.051 s`, `12.3 s`, `4 min 05 s`, `3 h 07 min`, `2 d 03 h`.
pub fn duration_text(secs: f64) -> String {
    let s = secs.max(0.0);
    if s < 10.0 {
        return format!("{s:.3} s");
    }
    if s < 60.0 {
        return format!("{s:.1} s");
    }
    let whole = s as u64;
    let (d, h, m, sec) = (
        whole / 86_400,
        whole / 3600 % 24,
        whole / 60 % 60,
        whole % 60,
    );
    if d > 0 {
        format!("{d} d {h:02} h")
    } else if h > 0 {
        format!("{h} h {m:02} min")
    } else {
        format!("{m} min {sec:02} s")
    }
}

/// The [`Watcher`] of a graph: acquisitions reported by the drivers as they start and end,
/// drops read from the plugins when asked.
pub struct Events {
    watcher: Watcher,
    pending: Arc<Mutex<Vec<Transition>>>,
}

impl Events {
    /// Watches every driver of `graph`; `wake` is called (on the driver's thread) after each
    /// start or end, so the caller can come and [`Events::poll`].
    pub fn attach(graph: &Graph, wake: Arc<dyn Fn() + Send + Sync>) -> Events {
        let pending: Arc<Mutex<Vec<Transition>>> = Arc::default();
        for port in graph.ports() {
            let PortHandle::Driver(d) = port else {
                continue;
            };
            let busy = d.array_base().acquire_busy;
            let (weak, queue, wake) = (Arc::downgrade(&d), pending.clone(), wake.clone());
            d.params.subscribe(move |idx, v| {
                if !busy.is(idx) {
                    return;
                }
                if let Some(d) = weak.upgrade() {
                    queue.lock().push(transition(&d, v.as_i64() != Some(0)));
                    wake();
                }
            });
            // Already acquiring (Acquire = 1 in the config). Under the queue's lock: an end
            // after this read is queued after this start.
            let mut q = pending.lock();
            if busy.get(&d.params) != 0 {
                q.push(transition(&d, true));
            }
        }
        Events {
            watcher: Watcher::new(Instant::now()),
            pending,
        }
    }

    /// The lines for what changed since the last call.
    pub fn poll(&mut self, graph: &Graph) -> Vec<String> {
        let transitions = std::mem::take(&mut *self.pending.lock());
        let mut out: Vec<String> = transitions
            .iter()
            .filter_map(|t| self.watcher.transition(t))
            .collect();
        out.extend(self.watcher.drops(&plugin_drops(graph), Instant::now()));
        out
    }

    /// The exit summary (call [`Events::poll`] first, so that every end has been seen).
    pub fn summary(&self, graph: &Graph) -> Vec<String> {
        let drivers: Vec<(String, i64, u64)> = graph
            .ports()
            .into_iter()
            .filter_map(|p| match p {
                PortHandle::Driver(d) => Some((d.name.clone(), d.array_counter(), d.dropped())),
                PortHandle::Plugin(_) => None,
            })
            .collect();
        self.watcher
            .summary(&drivers, &plugin_drops(graph), Instant::now())
    }
}

fn plugin_drops(graph: &Graph) -> Vec<Drops> {
    graph
        .ports()
        .into_iter()
        .filter_map(|p| match p {
            PortHandle::Plugin(pl) => Some(Drops::of(&pl)),
            PortHandle::Driver(_) => None,
        })
        .collect()
}

/// A driver's state now, as a transition to `acquiring`.
fn transition(d: &DriverPort, acquiring: bool) -> Transition {
    let p = &d.params;
    let state = p.index("DetectorState").map_or(0, |i| p.get_i64(i));
    let outcome = match state {
        6 => Outcome::Failed(
            p.index("StatusMessage")
                .map_or_else(String::new, |i| p.get_str(i)),
        ),
        10 => Outcome::Aborted,
        _ => Outcome::Complete,
    };
    Transition {
        driver: d.name.clone(),
        acquiring,
        frames: d.array_counter(),
        at: Instant::now(),
        outcome,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(driver: &str, acquiring: bool, frames: i64, at: Instant, outcome: Outcome) -> Transition {
        Transition {
            driver: driver.into(),
            acquiring,
            frames,
            at,
            outcome,
        }
    }

    fn drops(port: &str, queue_full: u64, disabled: u64, error: u64) -> Drops {
        let mut counts = [0; REASONS];
        counts[DropReason::QueueFull as usize] = queue_full;
        counts[DropReason::Disabled as usize] = disabled;
        counts[DropReason::Error as usize] = error;
        Drops {
            port: port.into(),
            counts,
        }
    }

    #[test]
    fn one_line_per_start_and_end_with_count_and_rate() {
        let t0 = Instant::now();
        let mut w = Watcher::new(t0);
        let start = t("SIM1", true, 100, t0, Outcome::Complete);
        assert_eq!(
            w.transition(&start).as_deref(),
            Some("SIM1: acquisition started")
        );
        // A second start report of the same acquisition says nothing.
        assert_eq!(w.transition(&start), None);
        assert!(w.acquiring());
        let end = t(
            "SIM1",
            false,
            150,
            t0 + Duration::from_millis(500),
            Outcome::Complete,
        );
        assert_eq!(
            w.transition(&end).as_deref(),
            Some("SIM1: acquisition ended: 50 frames in 0.500 s (100.0 frames/s)")
        );
        assert!(!w.acquiring());
        // An end never seen starting (or a repeated end) says nothing.
        assert_eq!(w.transition(&end), None);
    }

    #[test]
    fn aborted_failed_and_a_counter_reset_mid_acquisition() {
        let t0 = Instant::now();
        let mut w = Watcher::new(t0);
        let later = t0 + Duration::from_secs(2);
        w.transition(&t("A", true, 10, t0, Outcome::Complete));
        w.transition(&t("B", true, 0, t0, Outcome::Complete));
        assert_eq!(
            w.transition(&t("A", false, 4, later, Outcome::Aborted))
                .as_deref(),
            Some("A: acquisition aborted: 4 frames in 2.000 s (2.0 frames/s)")
        );
        assert!(w.acquiring(), "B still runs");
        let failed = Outcome::Failed("Error: no frame".into());
        assert_eq!(
            w.transition(&t("B", false, 0, later, failed)).as_deref(),
            Some("B: acquisition failed (Error: no frame): 0 frames in 2.000 s (0.0 frames/s)")
        );
        let lines = w.summary(
            &[("A".into(), 4, 0), ("B".into(), 0, 3)],
            &[],
            t0 + Duration::from_secs(75),
        );
        assert_eq!(
            lines,
            [
                "summary: up 1 min 15 s",
                "summary: A: 4 frames, 1 acquisition",
                "summary: B: 0 frames, 1 acquisition, 3 not acquired (pool full)"
            ]
        );
    }

    #[test]
    fn first_drop_per_reason_at_once_the_rest_summarised_when_acquisitions_end() {
        let t0 = Instant::now();
        let mut w = Watcher::new(t0);
        let s = Duration::from_secs(1);
        assert!(w.drops(&[drops("ROI1", 0, 0, 0)], t0).is_empty());
        w.transition(&t("SIM1", true, 0, t0, Outcome::Complete));
        assert_eq!(
            w.drops(&[drops("ROI1", 3, 0, 0)], t0 + s),
            ["ROI1: dropping frames: queue full (3); further drops are summarised"]
        );
        // More of the same while acquiring: quiet.
        assert!(w.drops(&[drops("ROI1", 40, 0, 0)], t0 + 2 * s).is_empty());
        assert!(w.drops(&[drops("ROI1", 90, 0, 0)], t0 + 3 * s).is_empty());
        // A new reason is a first again, and leaves the queue-full drops pending.
        assert_eq!(
            w.drops(&[drops("ROI1", 90, 0, 2)], t0 + 4 * s),
            ["ROI1: dropping frames: error (2); further drops are summarised"]
        );
        w.transition(&t("SIM1", false, 100, t0 + 5 * s, Outcome::Complete));
        assert_eq!(
            w.drops(&[drops("ROI1", 100, 0, 3)], t0 + 5 * s),
            ["ROI1: 98 more frames dropped (queue full 97, error 1)"]
        );
        assert!(w.drops(&[drops("ROI1", 100, 0, 3)], t0 + 6 * s).is_empty());
    }

    #[test]
    fn long_acquisitions_summarise_drops_at_most_every_interval() {
        let t0 = Instant::now();
        let mut w = Watcher::new(t0);
        w.transition(&t("SIM1", true, 0, t0, Outcome::Complete));
        assert_eq!(w.drops(&[drops("P", 1, 0, 0)], t0).len(), 1);
        let mut lines = Vec::new();
        for sec in 1..=150u64 {
            lines.extend(w.drops(&[drops("P", 1 + sec, 0, 0)], t0 + Duration::from_secs(sec)));
        }
        assert_eq!(
            lines,
            [
                "P: 60 more frames dropped (queue full 60)",
                "P: 60 more frames dropped (queue full 60)"
            ]
        );
    }

    #[test]
    fn disabled_plugins_stay_quiet_until_the_summary() {
        let t0 = Instant::now();
        let mut w = Watcher::new(t0);
        assert!(w.drops(&[drops("OFF", 0, 500, 0)], t0).is_empty());
        assert!(w
            .drops(&[drops("OFF", 0, 900, 0)], t0 + Duration::from_secs(1))
            .is_empty());
        let plugins = [drops("OFF", 0, 900, 0), drops("OK", 0, 0, 0)];
        assert_eq!(
            w.summary(&[], &plugins, t0 + Duration::from_secs(3)),
            [
                "summary: up 3.000 s",
                "summary: OFF: 900 frames dropped (disabled 900)"
            ]
        );
        assert_eq!(
            w.summary(&[], &[drops("OK", 0, 0, 0)], t0)[1],
            "summary: no plugin dropped a frame"
        );
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration_text(0.0512), "0.051 s");
        assert_eq!(duration_text(12.34), "12.3 s");
        assert_eq!(duration_text(245.0), "4 min 05 s");
        assert_eq!(duration_text(3.0 * 3600.0 + 7.0 * 60.0 + 5.0), "3 h 07 min");
        assert_eq!(duration_text(2.0 * 86_400.0 + 3.0 * 3600.0), "2 d 03 h");
    }
}
