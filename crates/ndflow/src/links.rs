//! The link fields of areaDetector's link records ([`LinkKind`]), set at run time:
//!
//! - **Input** (`.DOL`, `.OMSL`): an Overlay's `PositionXLink`, FFT's `FFTTimePerPointLink`
//!   take the named PV's value on each change while `.OMSL` is `closed_loop`, as a `CP` link
//!   processes its record.
//! - **Raw input** (`.INP`, `.ZRVL`, `.ONVL`): ADBase's `ShutterStatusEPICS_RBV` reads a
//!   shutter's status PV; the raw value equal to ZRVL is state 0 (Closed), to ONVL state 1.
//! - **Output** (`.OUT`, `.OCAL`): ADBase's `ShutterOpenEPICS` writes OCAL to the named PV
//!   when `ShutterControlEPICS` goes non-zero, `ShutterCloseEPICS` when it goes to zero.
//!
//! What a link names: a PV of this IOC (followed or written directly, by the directory's
//! publisher thread, never by a frame-processing thread), another IOC's PV over Channel
//! Access (the `EPICS_CA_*` environment; inputs are monitored on a thread per link that
//! retries every second, outputs written on a thread per write), or, for an input, a number
//! (a constant, applied once). A text is a PV name with optional EPICS modifiers (`CP MS`…).
//! A link that cannot be read or written puts its record in `LINK`/`INVALID` alarm until it
//! works again. A double written to an integer record is truncated toward zero, as EPICS
//! converts it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use ndflow_ca::client::{Client, ClientConfig, ClientError};
use ndflow_ca::CaValue;
use ndflow_core::LinkKind;
use parking_lot::{Mutex, RwLock};

/// EPICS' menuOmsl, in order.
pub const OMSL_MENU: [&str; 2] = ["supervisory", "closed_loop"];

/// A new link record's `.OMSL` (closed_loop: it follows its `.DOL`), `.ZRVL` and `.ONVL`.
pub const DEFAULT_OMSL: i64 = 1;
pub const DEFAULT_ZRVL: i64 = 0;
pub const DEFAULT_ONVL: i64 = 1;

/// What a link names.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    None,
    Constant(f64),
    /// A PV (entry) of this IOC.
    Internal(usize),
    /// A PV of another IOC, over Channel Access.
    External(String),
}

/// One link record's link.
pub struct Link {
    pub slot: usize,
    pub kind: LinkKind,
    text: Mutex<String>,
    closed_loop: AtomicBool,
    target: Mutex<Target>,
    /// The linked PV cannot be read (written) now: the record alarms.
    broken: AtomicBool,
    /// Bumped on each change of the link's text: a watcher of an older target stops.
    generation: AtomicU64,
    /// Raw inputs: the raw values of states 0 and 1.
    zrvl: AtomicI64,
    onvl: AtomicI64,
    /// Outputs: the value written, and the record's last value (for its transitions).
    ocal: Mutex<f64>,
    last: AtomicI64,
    /// Raw inputs: the last raw value read (the record keeps showing its state).
    last_raw: Mutex<Option<i64>>,
}

impl Link {
    pub fn text(&self) -> String {
        self.text.lock().clone()
    }
    pub fn closed_loop(&self) -> bool {
        self.closed_loop.load(Ordering::Acquire)
    }
    pub fn broken(&self) -> bool {
        self.broken.load(Ordering::Acquire)
    }
    pub fn raw_values(&self) -> (i64, i64) {
        (
            self.zrvl.load(Ordering::Acquire),
            self.onvl.load(Ordering::Acquire),
        )
    }
    pub fn ocal(&self) -> f64 {
        *self.ocal.lock()
    }
    fn current(&self, generation: u64) -> bool {
        self.generation.load(Ordering::Acquire) == generation
    }
    /// Marks the link broken or working; true when that changed.
    fn set_broken(&self, b: bool) -> bool {
        self.broken.swap(b, Ordering::AcqRel) != b
    }

    /// A raw input read `raw`: the state to show (None: neither ZRVL nor ONVL).
    pub fn read_raw(&self, raw: i64) -> Option<i64> {
        *self.last_raw.lock() = Some(raw);
        self.state_of(raw)
    }

    /// A raw input's state from the last raw value read, while it names a PV.
    pub fn held_state(&self) -> Option<i64> {
        if matches!(*self.target.lock(), Target::None) {
            return None;
        }
        (*self.last_raw.lock()).and_then(|r| self.state_of(r))
    }

    /// A raw input's state for raw value `raw` (None: neither ZRVL nor ONVL).
    pub fn state_of(&self, raw: i64) -> Option<i64> {
        let (z, o) = self.raw_values();
        if raw == o {
            Some(1)
        } else if raw == z {
            Some(0)
        } else {
            None
        }
    }
}

/// What the directory does for the links ([`crate::pvdir::PvDirectory`] implements it).
pub trait LinkHost: Send + Sync + 'static {
    /// Gives the link record `slot` the value `value` read through its input link.
    fn apply_link(&self, slot: usize, value: f64);
    /// The link record's alarm changed: post it.
    fn link_alarm_changed(&self, slot: usize);
}

/// A link's text, parsed: its first word without `ca://` and `.VAL`, or a number.
#[derive(Debug, Clone, PartialEq)]
pub enum LinkName {
    Constant(f64),
    Pv(String),
}

pub fn parse_link(text: &str) -> Result<Option<LinkName>, String> {
    let Some(first) = text.split_whitespace().next() else {
        return Ok(None);
    };
    if let Ok(x) = first.parse::<f64>() {
        return Ok(Some(LinkName::Constant(x)));
    }
    if first.starts_with("pva://") {
        return Err(format!(
            "'{first}': pvAccess links are not supported; name the PV (read over Channel Access)"
        ));
    }
    let name = first.strip_prefix("ca://").unwrap_or(first);
    let name = name.strip_suffix(".VAL").unwrap_or(name);
    Ok(Some(LinkName::Pv(name.to_string())))
}

/// Every link record of a directory.
#[derive(Default)]
pub struct Links {
    by_slot: HashMap<usize, Arc<Link>>,
    /// Source slot → the input links following it (links to this IOC's PVs).
    followers: RwLock<HashMap<usize, Vec<usize>>>,
    /// Made on the first link to another IOC.
    ca: Mutex<Option<Arc<Client>>>,
    /// The thread writing output links to other IOCs, in order (made on the first write).
    writer: Mutex<Option<std::sync::mpsc::Sender<Write>>>,
}

/// One output write to another IOC.
struct Write {
    link: Arc<Link>,
    name: String,
    value: f64,
    host: Weak<dyn LinkHost>,
}

impl Links {
    /// `slots`: each link record's slot, kind and value now.
    pub fn new(slots: impl IntoIterator<Item = (usize, LinkKind, i64)>) -> Links {
        let by_slot = slots
            .into_iter()
            .map(|(slot, kind, value)| {
                let ocal = match kind {
                    LinkKind::Output { ocal, .. } => ocal,
                    _ => 0.0,
                };
                let link = Link {
                    slot,
                    kind,
                    text: Mutex::new(String::new()),
                    closed_loop: AtomicBool::new(DEFAULT_OMSL == 1),
                    target: Mutex::new(Target::None),
                    broken: AtomicBool::new(false),
                    generation: AtomicU64::new(0),
                    zrvl: AtomicI64::new(DEFAULT_ZRVL),
                    onvl: AtomicI64::new(DEFAULT_ONVL),
                    ocal: Mutex::new(ocal),
                    last: AtomicI64::new(value),
                    last_raw: Mutex::new(None),
                };
                (slot, Arc::new(link))
            })
            .collect();
        Links {
            by_slot,
            ..Links::default()
        }
    }

    pub fn get(&self, slot: usize) -> Option<&Arc<Link>> {
        self.by_slot.get(&slot)
    }

    pub fn kind(&self, slot: usize) -> LinkKind {
        self.by_slot.get(&slot).map_or(LinkKind::None, |l| l.kind)
    }

    /// Whether a post of `slot` concerns a link: an input follows it, or it is an output.
    pub fn watches(&self, slot: usize) -> bool {
        matches!(self.kind(slot), LinkKind::RawInput)
            || self
                .followers
                .read()
                .get(&slot)
                .is_some_and(|v| !v.is_empty())
    }

    /// The links following `source` that take its value now (closed-loop ones).
    pub fn followers_of(&self, source: usize) -> Vec<usize> {
        let f = self.followers.read();
        f.get(&source)
            .map(|v| {
                v.iter()
                    .copied()
                    .filter(|l| self.by_slot.get(l).is_some_and(|x| x.closed_loop()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// An output record's new value `v`: the value to write and where, when it is the
    /// transition its link writes on.
    pub fn output_due(&self, slot: usize, v: i64) -> Option<(Arc<Link>, Target, f64)> {
        let link = self.by_slot.get(&slot)?;
        let LinkKind::Output { to_nonzero, .. } = link.kind else {
            return None;
        };
        let was = link.last.swap(v, Ordering::AcqRel);
        let moved = if to_nonzero {
            was == 0 && v != 0
        } else {
            was != 0 && v == 0
        };
        let target = link.target.lock().clone();
        (moved && target != Target::None).then(|| (link.clone(), target, link.ocal()))
    }

    pub fn set_omsl(&self, slot: usize, v: i64) -> Result<(), String> {
        let link = self.by_slot.get(&slot).ok_or("not a link record")?;
        match v {
            0 | 1 => {
                link.closed_loop.store(v == 1, Ordering::Release);
                Ok(())
            }
            _ => Err(format!(
                "{v} is not an OMSL choice (0: supervisory, 1: closed_loop)"
            )),
        }
    }

    /// `.ZRVL` (`one` false) or `.ONVL`.
    pub fn set_raw_value(&self, slot: usize, one: bool, v: i64) -> Result<(), String> {
        let link = self.by_slot.get(&slot).ok_or("not a link record")?;
        if one { &link.onvl } else { &link.zrvl }.store(v, Ordering::Release);
        Ok(())
    }

    pub fn set_ocal(&self, slot: usize, text: &str) -> Result<(), String> {
        let link = self.by_slot.get(&slot).ok_or("not a link record")?;
        let x: f64 = text.trim().parse().map_err(|_| {
            format!(
                "'{}' is not a number (OCAL here is a constant)",
                text.trim()
            )
        })?;
        *link.ocal.lock() = x;
        Ok(())
    }

    /// A write of the link's text (`.DOL`, `.INP`, `.OUT`). `resolve`: the entry of a PV of
    /// this IOC; `slot_of`: an entry's slot. Returns what the link now names; an external
    /// input starts its watcher on `host`.
    pub fn set_link(
        &self,
        slot: usize,
        text: &str,
        resolve: impl Fn(&str) -> Option<usize>,
        slot_of: impl Fn(usize) -> Option<usize>,
        host: Weak<dyn LinkHost>,
    ) -> Result<Target, String> {
        let link = self.by_slot.get(&slot).ok_or("not a link record")?.clone();
        let output = matches!(link.kind, LinkKind::Output { .. });
        let target = match parse_link(text)? {
            None => Target::None,
            Some(LinkName::Constant(_)) if output => {
                return Err("an output link names a PV, not a number".into());
            }
            Some(LinkName::Constant(x)) => Target::Constant(x),
            Some(LinkName::Pv(name)) => match resolve(&name) {
                Some(e) if slot_of(e) == Some(slot) => {
                    return Err(format!("'{name}' is the link record itself"));
                }
                Some(e) => Target::Internal(e),
                None => Target::External(name),
            },
        };
        let generation = link.generation.fetch_add(1, Ordering::AcqRel) + 1;
        *link.text.lock() = text.trim().to_string();
        let was_broken = link.broken.swap(false, Ordering::AcqRel);
        *link.last_raw.lock() = None;
        {
            let mut f = self.followers.write();
            for v in f.values_mut() {
                v.retain(|l| *l != slot);
            }
            if let (Target::Internal(e), false) = (&target, output) {
                if let Some(src) = slot_of(*e) {
                    f.entry(src).or_default().push(slot);
                }
            }
        }
        *link.target.lock() = target.clone();
        if let (Target::External(name), false) = (&target, output) {
            let client = self.client()?;
            let name = name.clone();
            std::thread::Builder::new()
                .name("ndflow-ca-link".into())
                .spawn(move || watch(host, link, generation, name, client))
                .map_err(|e| format!("cannot start a link thread: {e}"))?;
        } else if was_broken {
            if let Some(h) = host.upgrade() {
                h.link_alarm_changed(slot);
            }
        }
        Ok(target)
    }

    /// Writes `value` to another IOC's PV for an output link. One thread makes every such
    /// write, in order (an open and a close in quick succession arrive in that order), so a
    /// slow or absent IOC never holds up the publisher; a failure alarms the record.
    pub fn write_external(
        &self,
        link: Arc<Link>,
        name: String,
        value: f64,
        host: Weak<dyn LinkHost>,
    ) -> Result<(), String> {
        let mut w = self.writer.lock();
        if w.is_none() {
            let client = self.client()?;
            let (tx, rx) = std::sync::mpsc::channel::<Write>();
            std::thread::Builder::new()
                .name("ndflow-ca-out".into())
                .spawn(move || {
                    for job in rx {
                        let v = CaValue::Double(vec![job.value]);
                        let r = client.put(&job.name, v, true, WRITE_TIMEOUT);
                        if let Err(e) = &r {
                            tracing::warn!(
                                "output link {}: {e}; the record alarms (LINK)",
                                job.name
                            );
                        }
                        if job.link.set_broken(r.is_err()) {
                            if let Some(h) = job.host.upgrade() {
                                h.link_alarm_changed(job.link.slot);
                            }
                        }
                    }
                })
                .map_err(|e| format!("cannot start a link thread: {e}"))?;
            *w = Some(tx);
        }
        let job = Write {
            link,
            name,
            value,
            host,
        };
        w.as_ref()
            .ok_or("no link writer")?
            .send(job)
            .map_err(|_| "the link writer has stopped".to_string())
    }

    /// An internal output's result: alarms the record while writes fail.
    pub fn output_written(&self, link: &Link, ok: bool, host: &dyn LinkHost) {
        if link.set_broken(!ok) {
            host.link_alarm_changed(link.slot);
        }
    }

    fn client(&self) -> Result<Arc<Client>, String> {
        let mut ca = self.ca.lock();
        if let Some(c) = ca.as_ref() {
            return Ok(c.clone());
        }
        let c = Arc::new(
            Client::new(ClientConfig::from_env())
                .map_err(|e| format!("cannot start the Channel Access client for links: {e}"))?,
        );
        *ca = Some(c.clone());
        Ok(c)
    }
}

const RETRY: Duration = Duration::from_secs(1);
const POLL: Duration = Duration::from_millis(250);
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// Follows another IOC's PV for one input link until its text changes or the IOC stops.
fn watch(
    host: Weak<dyn LinkHost>,
    link: Arc<Link>,
    generation: u64,
    name: String,
    client: Arc<Client>,
) {
    let set_broken = |b: bool| {
        if link.set_broken(b) {
            if b {
                tracing::warn!("link {name}: cannot read it; the record alarms (LINK) and retries");
            }
            if let Some(h) = host.upgrade() {
                h.link_alarm_changed(link.slot);
            }
        }
    };
    while link.current(generation) && host.strong_count() > 0 {
        match client.monitor(&name) {
            Ok(sub) => loop {
                if !link.current(generation) {
                    return;
                }
                match sub.recv_timeout(POLL) {
                    Ok(r) => {
                        let Some(x) = r.value.as_f64() else {
                            set_broken(true);
                            continue;
                        };
                        set_broken(false);
                        if link.closed_loop() {
                            let Some(h) = host.upgrade() else { return };
                            h.apply_link(link.slot, x);
                        }
                    }
                    Err(ClientError::Timeout) => {}
                    Err(_) => {
                        set_broken(true);
                        break;
                    }
                }
            },
            Err(_) => set_broken(true),
        }
        std::thread::sleep(RETRY);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Host;
    impl LinkHost for Host {
        fn apply_link(&self, _slot: usize, _value: f64) {}
        fn link_alarm_changed(&self, _slot: usize) {}
    }

    #[test]
    fn link_texts() {
        assert_eq!(parse_link("  ").unwrap(), None);
        assert_eq!(
            parse_link("13SIM1:Stats1:CentroidX_RBV CP MS").unwrap(),
            Some(LinkName::Pv("13SIM1:Stats1:CentroidX_RBV".into()))
        );
        assert_eq!(
            parse_link("ca://A:B.VAL").unwrap(),
            Some(LinkName::Pv("A:B".into()))
        );
        assert_eq!(parse_link("0.1").unwrap(), Some(LinkName::Constant(0.1)));
        assert!(parse_link("pva://X").unwrap_err().contains("not supported"));
    }

    #[test]
    fn inputs_follow_and_move() {
        let links = Links::new([(7, LinkKind::Input, 0), (8, LinkKind::Input, 0)]);
        let host: Arc<dyn LinkHost> = Arc::new(Host);
        // Entries 30, 40, 70 are of slots 3, 4, 7.
        let resolve = |n: &str| match n {
            "A" => Some(30),
            "B" => Some(40),
            "SELF" => Some(70),
            _ => None,
        };
        let slot_of = |e: usize| Some(e / 10);
        let set = |slot, text| links.set_link(slot, text, resolve, slot_of, Arc::downgrade(&host));
        assert_eq!(set(7, "A CP").unwrap(), Target::Internal(30));
        set(8, "A").unwrap();
        assert_eq!(links.followers_of(3), vec![7, 8]);
        assert!(links.watches(3));
        links.set_omsl(8, 0).unwrap();
        assert_eq!(
            links.followers_of(3),
            vec![7],
            "supervisory links do not follow"
        );
        set(7, "B").unwrap();
        assert!(links.followers_of(3).is_empty());
        assert_eq!(links.followers_of(4), vec![7]);
        assert_eq!(links.get(7).unwrap().text(), "B");
        assert!(set(7, "SELF").is_err());
        assert!(links.set_omsl(7, 2).is_err());
        assert!(set(9, "A").is_err());
        assert_eq!(set(7, "").unwrap(), Target::None);
        assert!(!links.watches(4));
    }

    #[test]
    fn outputs_write_on_their_transition() {
        let open = LinkKind::Output {
            to_nonzero: true,
            ocal: 1.0,
        };
        let close = LinkKind::Output {
            to_nonzero: false,
            ocal: 0.0,
        };
        let links = Links::new([(1, open, 0), (2, close, 0)]);
        let host: Arc<dyn LinkHost> = Arc::new(Host);
        assert!(links.output_due(1, 1).is_none(), "no OUT: nothing to write");
        links.output_due(1, 0);
        let set = |slot, text| {
            links.set_link(slot, text, |_| Some(50), |_| Some(5), Arc::downgrade(&host))
        };
        set(1, "SHUTTER:CMD").unwrap();
        set(2, "SHUTTER:CMD").unwrap();
        assert!(set(1, "3").is_err(), "an output names a PV");
        links.set_ocal(1, "7").unwrap();
        assert!(links.set_ocal(1, "A+1").is_err());
        let (_, t, v) = links.output_due(1, 1).unwrap();
        assert_eq!((t, v), (Target::Internal(50), 7.0));
        assert!(links.output_due(1, 1).is_none(), "no transition");
        assert!(
            links.output_due(2, 1).is_none(),
            "the close link waits for zero"
        );
        assert_eq!(links.output_due(2, 0).unwrap().2, 0.0);
        assert!(!links.watches(1), "outputs act on changes, not posts");
    }

    #[test]
    fn raw_inputs_map_states() {
        let links = Links::new([(4, LinkKind::RawInput, 0)]);
        let l = links.get(4).unwrap();
        assert_eq!(
            (l.state_of(0), l.state_of(1), l.state_of(5)),
            (Some(0), Some(1), None)
        );
        links.set_raw_value(4, false, 2).unwrap();
        links.set_raw_value(4, true, 3).unwrap();
        assert_eq!(
            (l.state_of(2), l.state_of(3), l.state_of(0)),
            (Some(0), Some(1), None)
        );
    }
}
