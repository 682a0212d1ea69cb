//! Saving while the IOC runs. Each change of a saved parameter marks the state dirty; one
//! thread writes the file once changes pause ([`Timing::debounce`]), at the latest
//! [`Timing::max_delay`] after the first unsaved change, and never twice within
//! [`Timing::min_interval`], so a flood of puts costs one write a second. What it writes is
//! every saved parameter whose value differs from its value at start (config and `--set`);
//! a parameter put back to that value leaves the file, and with none left the file is removed.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ndflow_core::{ParamDef, ParamStore, ParamValue};
use parking_lot::{Condvar, Mutex, MutexGuard};
use toml_edit::Value;

use super::file::{self, Entry, Problem};
use super::links::{self, LinkPart, LiveLinks};
use super::rule;
use crate::config::Config;
use crate::pvdir::PvDirectory;

/// When saves happen.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Quiet time after the last change before saving.
    pub debounce: Duration,
    /// Longest wait from the first unsaved change (under a steady stream of changes).
    pub max_delay: Duration,
    /// Shortest time between two writes.
    pub min_interval: Duration,
    /// Wait before trying again after a failed write.
    pub retry: Duration,
}

impl Timing {
    pub const DEFAULT: Timing = Timing {
        debounce: Duration::from_millis(500),
        max_delay: Duration::from_secs(1),
        min_interval: Duration::from_secs(1),
        retry: Duration::from_secs(5),
    };
}

/// The saved parameters of one port, with their values at start.
pub struct Tracked {
    pub port: String,
    pub store: Arc<ParamStore>,
    /// (index in the store, declaration, value at start).
    pub params: Vec<(usize, &'static ParamDef, ParamValue)>,
}

impl Tracked {
    /// The parameters of `store` (a port of type `type_name`) that [`rule::is_saved`], with
    /// their values now as the baseline.
    pub fn new(port: &str, type_name: &str, store: Arc<ParamStore>) -> Tracked {
        let params = store
            .defs()
            .iter()
            .enumerate()
            .filter(|(_, d)| rule::is_saved(type_name, d))
            .filter_map(|(i, d)| store.get(i).map(|v| (i, *d, v)))
            .collect();
        Tracked {
            port: port.to_string(),
            store,
            params,
        }
    }
}

/// Equal as stored values; two NaNs are the same setting.
pub fn same(a: &ParamValue, b: &ParamValue) -> bool {
    match (a, b) {
        (ParamValue::Float(x), ParamValue::Float(y)) => x == y || (x.is_nan() && y.is_nan()),
        _ => a == b,
    }
}

/// Per port, the saved parameters whose value differs from the baseline, as the file writes
/// them (ports without any are left out).
pub fn snapshot(tracked: &[Tracked]) -> Vec<(String, Vec<(String, Value)>)> {
    tracked
        .iter()
        .map(|t| {
            let keys = t
                .params
                .iter()
                .filter_map(|(idx, def, base)| {
                    let now = t.store.get(*idx)?;
                    if same(&now, base) {
                        return None;
                    }
                    file::saved_value(def, &now).map(|v| (def.name.to_string(), v))
                })
                .collect::<Vec<_>>();
            (t.port.clone(), keys)
        })
        .filter(|(_, k)| !k.is_empty())
        .collect()
}

/// A snapshot as text, to compare two (the file's order and form).
fn render(ports: &[(String, Vec<(String, Value)>)]) -> String {
    file::render("", ports)
}

#[derive(Default)]
struct Pending {
    /// The first change not yet saved.
    first: Option<Instant>,
    last: Option<Instant>,
    not_before: Option<Instant>,
    stop: bool,
}

#[derive(Default)]
struct Shared {
    pending: Mutex<Pending>,
    cv: Condvar,
    /// Files written (or removed), for tests and the log.
    writes: AtomicU64,
    /// The link fields ([`links`]).
    links: Mutex<LinkPart>,
}

impl Shared {
    fn touch(&self) {
        let now = Instant::now();
        let mut p = self.pending.lock();
        p.last = Some(now);
        p.first.get_or_insert(now);
        self.cv.notify_one();
    }
}

/// Writes one state file from the tracked parameters.
struct Writer {
    path: PathBuf,
    config: String,
    tracked: Vec<Tracked>,
    /// What the file holds now (`None`: no file), so an unchanged state is not rewritten.
    written: Option<String>,
    failing: bool,
    shared: Arc<Shared>,
}

impl Writer {
    /// Writes the state now; `false` when the write failed (warned once until it works).
    fn save(&mut self) -> bool {
        let link_ports = self.shared.links.lock().snapshot();
        let ports = links::merge(snapshot(&self.tracked), link_ports);
        let text = (!ports.is_empty()).then(|| file::render(&self.config, &ports));
        if text == self.written {
            return true;
        }
        let result = match &text {
            Some(t) => file::write_atomic(&self.path, t.as_bytes()),
            None => file::remove(&self.path).map(|_| ()),
        };
        match result {
            Ok(()) => {
                if self.failing {
                    eprintln!("state: saving to {} works again", self.path.display());
                }
                self.failing = false;
                self.written = text;
                self.shared.writes.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(e) => {
                if !self.failing {
                    warn_unsaved(&self.path, &e);
                }
                self.failing = true;
                false
            }
        }
    }
}

fn warn_unsaved(path: &std::path::Path, e: &std::io::Error) {
    eprintln!(
        "warning: cannot save settings to {}: {e}; the IOC keeps running, and changes are \
         saved once it can write there (tried every {} s while changes wait)",
        path.display(),
        Timing::DEFAULT.retry.as_secs()
    );
}

/// The running saver; dropping it saves what is pending and stops the thread.
pub struct Saver {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Saver {
    /// Watches every tracked parameter and saves into `path`. `written` is the file's text
    /// now (`None`: no file). `config` names the config in the file's header. `carried`: the
    /// file's link fields, kept as they are until [`Self::attach_links`].
    pub fn start(
        path: PathBuf,
        config: &str,
        tracked: Vec<Tracked>,
        written: Option<String>,
        carried: Vec<Entry>,
        timing: Timing,
    ) -> std::io::Result<Saver> {
        let shared = Arc::new(Shared {
            links: Mutex::new(LinkPart::Carried(carried)),
            ..Shared::default()
        });
        for t in &tracked {
            let mut mask = vec![false; t.store.defs().len()];
            for (idx, _, _) in &t.params {
                if let Some(m) = mask.get_mut(*idx) {
                    *m = true;
                }
            }
            // Weak: the stores outlive the saver (the graph holds them).
            let weak: Weak<Shared> = Arc::downgrade(&shared);
            t.store.subscribe(move |idx, _| {
                if mask.get(idx).copied().unwrap_or(false) {
                    if let Some(s) = weak.upgrade() {
                        s.touch();
                    }
                }
            });
        }
        // Said at start rather than at the first change: a wrong --state shows at once.
        let failing = match file::probe_writable(&path) {
            Ok(()) => false,
            Err(e) => {
                warn_unsaved(&path, &e);
                true
            }
        };
        let mut writer = Writer {
            path,
            config: config.to_string(),
            tracked,
            written,
            failing,
            shared: shared.clone(),
        };
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("ndflow-state".into())
            .spawn(move || save_loop(&s, &mut writer, timing))?;
        Ok(Saver {
            shared,
            thread: Some(thread),
        })
    }

    /// The PV directory is up: the link fields of `ports` are tracked from their values now,
    /// the carried ones applied (the count, and those that do not fit or are refused), and
    /// each later write of a link field is saved as a parameter's change is.
    pub fn attach_links(&self, dir: &Arc<PvDirectory>, cfg: &Config) -> (usize, Vec<Problem>) {
        let weak: Weak<Shared> = Arc::downgrade(&self.shared);
        dir.on_link_change(Arc::new(move || {
            if let Some(s) = weak.upgrade() {
                s.touch();
            }
        }));
        let live = LiveLinks::new(dir.clone(), cfg);
        // Held while restoring: a save now must not write the file without the links.
        let mut part = self.shared.links.lock();
        let (applied, problems, restored) = match &*part {
            LinkPart::Carried(entries) => {
                let (n, problems) = live.restore(entries);
                let ok = entries
                    .iter()
                    .filter(|e| !problems.iter().any(|p| p.port == e.port && p.key == e.key))
                    .cloned()
                    .collect();
                (n, problems, ok)
            }
            LinkPart::Live(_) => (0, Vec::new(), Vec::new()),
        };
        // A client may have written a link field since the servers started, before the
        // watch: then the links differ from what the file has, and a save is due. (Not
        // otherwise: a start alone does not rewrite the file.)
        let differs = render(&live.snapshot()) != render(&LinkPart::Carried(restored).snapshot());
        *part = LinkPart::Live(live);
        drop(part);
        if differs {
            self.shared.touch();
        }
        (applied, problems)
    }

    /// The link fields kept from the file, not (yet) applied.
    pub fn carried_links(&self) -> usize {
        match &*self.shared.links.lock() {
            LinkPart::Carried(e) => e.len(),
            LinkPart::Live(_) => 0,
        }
    }

    /// Files written or removed so far.
    pub fn writes(&self) -> u64 {
        self.shared.writes.load(Ordering::Relaxed)
    }
}

impl Drop for Saver {
    fn drop(&mut self) {
        self.shared.pending.lock().stop = true;
        self.shared.cv.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn save_loop(shared: &Shared, w: &mut Writer, t: Timing) {
    let mut p = shared.pending.lock();
    loop {
        while p.first.is_none() && !p.stop {
            shared.cv.wait(&mut p);
        }
        let Some(mut first) = p.first else {
            break; // stopping, nothing pending
        };
        // Wait for a pause in the changes, the longest delay, and the rate limit; stopping
        // saves at once.
        while !p.stop {
            first = p.first.unwrap_or(first);
            let last = p.last.unwrap_or(first);
            let mut due = (last + t.debounce).min(first + t.max_delay);
            if let Some(n) = p.not_before {
                due = due.max(n);
            }
            let now = Instant::now();
            if now >= due {
                break;
            }
            shared.cv.wait_for(&mut p, due - now);
        }
        p.first = None;
        let stop = p.stop;
        let ok = MutexGuard::unlocked(&mut p, || w.save());
        let now = Instant::now();
        if ok {
            p.not_before = Some(now + t.min_interval);
        } else {
            p.not_before = Some(now + t.retry);
            p.first.get_or_insert(now);
        }
        if stop {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndflow_core::ParamDef;
    use ndflow_io::test_dir::Dir;

    static DEFS: &[ParamDef] = &[
        ParamDef::float64("AcquireTime", 0.1),
        ParamDef::int32("MinX", 0),
        ParamDef::enumeration("Acquire", &["Done", "Acquire"], 0).completes_when_done(),
        ParamDef::int32("ArrayCounter", 0),
        ParamDef::string("FilePath", ""),
    ];

    const FAST: Timing = Timing {
        debounce: Duration::from_millis(40),
        max_delay: Duration::from_millis(100),
        min_interval: Duration::from_millis(100),
        retry: Duration::from_millis(100),
    };

    fn store() -> Arc<ParamStore> {
        Arc::new(ParamStore::new(&[DEFS]))
    }

    fn wait_until(what: &str, f: impl Fn() -> bool) {
        let t0 = Instant::now();
        while !f() {
            assert!(t0.elapsed() < Duration::from_secs(5), "timed out: {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn changes_are_saved_actions_are_not_and_a_value_put_back_leaves() {
        let d = Dir::new("saver");
        let path = d.0.join("ioc.state.toml");
        let s = store();
        s.put("MinX", ParamValue::Int(3)).unwrap();
        // The baseline is the value when tracking starts, whatever the default.
        let saver = Saver::start(
            path.clone(),
            "ioc.toml",
            vec![Tracked::new("ROI1", "roi", s.clone())],
            None,
            Vec::new(),
            FAST,
        )
        .unwrap();
        s.put("AcquireTime", ParamValue::Float(0.25)).unwrap();
        s.put("Acquire", ParamValue::Int(1)).unwrap();
        s.put("ArrayCounter", ParamValue::Int(9)).unwrap();
        s.put("FilePath", ParamValue::Str("/data/x/".into()))
            .unwrap();
        wait_until("saved", || path.exists());
        let parsed = file::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let keys: Vec<(&str, &str)> = parsed
            .entries
            .iter()
            .map(|e| (e.port.as_str(), e.key.as_str()))
            .collect();
        assert_eq!(keys, [("ROI1", "AcquireTime"), ("ROI1", "FilePath")]);
        s.put("AcquireTime", ParamValue::Float(0.1)).unwrap();
        wait_until("AcquireTime left", || {
            std::fs::read_to_string(&path).is_ok_and(|t| !t.contains("AcquireTime"))
        });
        s.put("FilePath", ParamValue::Str(String::new())).unwrap();
        wait_until("file removed", || !path.exists());
        drop(saver);
        assert!(d.entries().is_empty());
    }

    #[test]
    fn a_flood_of_changes_is_written_at_most_once_per_interval() {
        let d = Dir::new("flood");
        let path = d.0.join("s.toml");
        let s = store();
        let saver = Saver::start(
            path.clone(),
            "c",
            vec![Tracked::new("SIM1", "sim", s.clone())],
            None,
            Vec::new(),
            FAST,
        )
        .unwrap();
        let t0 = Instant::now();
        let mut i = 0;
        while t0.elapsed() < Duration::from_millis(600) {
            i += 1;
            s.put("MinX", ParamValue::Int(i)).unwrap();
            std::thread::sleep(Duration::from_micros(200));
        }
        let during = saver.writes();
        // 600 ms at one write per 100 ms at most (the first may come at 100 ms).
        assert!((1..=7).contains(&during), "{during} writes");
        drop(saver);
        // Dropping saves the last value.
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(&format!("MinX = {i}\n")), "{text}");
    }

    #[test]
    fn an_unchanged_state_is_not_rewritten_and_drop_saves_what_is_pending() {
        let d = Dir::new("pending");
        let path = d.0.join("s.toml");
        let s = store();
        let slow = Timing {
            debounce: Duration::from_secs(60),
            max_delay: Duration::from_secs(60),
            ..FAST
        };
        let saver = Saver::start(
            path.clone(),
            "c",
            vec![Tracked::new("SIM1", "sim", s.clone())],
            None,
            Vec::new(),
            slow,
        )
        .unwrap();
        // Same value again: notified (an external write), nothing to write.
        s.put("MinX", ParamValue::Int(0)).unwrap();
        s.put("MinX", ParamValue::Int(5)).unwrap();
        drop(saver);
        assert!(std::fs::read_to_string(&path).unwrap().contains("MinX = 5"));
    }

    #[test]
    fn carried_link_fields_are_written_back_as_read() {
        let d = Dir::new("carried");
        let path = d.0.join("s.toml");
        let s = store();
        let carried = vec![Entry {
            port: "SIM1".into(),
            key: "ShutterOpenEPICS.OUT".into(),
            value: ParamValue::Str("BL:Shutter PP".into()),
            text: "\"BL:Shutter PP\"".into(),
            line: 3,
        }];
        let saver = Saver::start(
            path.clone(),
            "c",
            vec![Tracked::new("SIM1", "sim", s.clone())],
            None,
            carried,
            FAST,
        )
        .unwrap();
        assert_eq!(saver.carried_links(), 1);
        s.put("MinX", ParamValue::Int(5)).unwrap();
        drop(saver);
        let parsed = file::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let keys: Vec<(String, ParamValue)> = parsed
            .entries
            .into_iter()
            .map(|e| (format!("{}.{}", e.port, e.key), e.value))
            .collect();
        assert_eq!(
            keys,
            [
                ("SIM1.MinX".to_string(), ParamValue::Int(5)),
                (
                    "SIM1.ShutterOpenEPICS.OUT".to_string(),
                    ParamValue::Str("BL:Shutter PP".into())
                )
            ]
        );
    }

    #[test]
    fn a_directory_that_cannot_be_written_does_not_stop_anything() {
        let s = store();
        let saver = Saver::start(
            PathBuf::from("/proc/ndflow-no-such-dir/s.toml"),
            "c",
            vec![Tracked::new("SIM1", "sim", s.clone())],
            None,
            Vec::new(),
            FAST,
        )
        .unwrap();
        s.put("MinX", ParamValue::Int(5)).unwrap();
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(saver.writes(), 0);
        assert_eq!(s.get(1), Some(ParamValue::Int(5)));
        drop(saver);
    }
}
