//! Input links of link records: a parameter declared [`ParamDef::input_link`] (an Overlay's
//! `PositionXLink`, FFT's `FFTTimePerPointLink`) has EPICS' `.DOL` (what it reads: a PV name
//! with optional `CP`/`MS`-style modifiers, or a constant) and `.OMSL` (`supervisory`: only
//! client writes; `closed_loop`: it takes the linked value on every change, as a `CP` link
//! processes its record).
//!
//! - A PV of this IOC is followed directly: each post of its parameter is applied to the link
//!   by the directory's publisher thread (never on the thread that changed the source).
//! - Another IOC's PV is monitored over Channel Access (the client follows the `EPICS_CA_*`
//!   environment), on a thread of its own per link that retries every second while the PV
//!   cannot be reached.
//! - A number is a constant, applied once.
//!
//! A link that cannot be read puts its record in `LINK`/`INVALID` alarm until it can.
//! Values are converted as EPICS converts them: a double written to an integer link is
//! truncated toward zero.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use ndflow_ca::client::{Client, ClientConfig, ClientError};
use parking_lot::{Mutex, RwLock};

/// EPICS' menuOmsl, in order.
pub const OMSL_MENU: [&str; 2] = ["supervisory", "closed_loop"];

/// What a `.DOL` names.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    None,
    Constant(f64),
    /// A parameter slot of this IOC.
    Internal(usize),
    /// A PV of another IOC, read over Channel Access.
    External(String),
}

/// One link record's state.
pub struct Link {
    pub slot: usize,
    dol: Mutex<String>,
    closed_loop: AtomicBool,
    target: Mutex<Target>,
    /// The linked PV cannot be read now (the record alarms).
    broken: AtomicBool,
    /// Bumped on each `.DOL` write: a watcher of an older target stops.
    generation: AtomicU64,
}

impl Link {
    pub fn dol(&self) -> String {
        self.dol.lock().clone()
    }
    pub fn closed_loop(&self) -> bool {
        self.closed_loop.load(Ordering::Acquire)
    }
    pub fn broken(&self) -> bool {
        self.broken.load(Ordering::Acquire)
    }
    pub fn target(&self) -> Target {
        self.target.lock().clone()
    }
    fn current(&self, generation: u64) -> bool {
        self.generation.load(Ordering::Acquire) == generation
    }
}

/// Every link record of a directory.
#[derive(Default)]
pub struct Links {
    by_slot: HashMap<usize, Arc<Link>>,
    /// Source slot → the link slots following it (links to this IOC's PVs).
    followers: RwLock<HashMap<usize, Vec<usize>>>,
    /// Made on the first link to another IOC.
    ca: Mutex<Option<Arc<Client>>>,
}

/// What the directory does for the links ([`crate::pvdir::PvDirectory`] implements it).
pub trait LinkHost: Send + Sync + 'static {
    /// Writes `value` (the linked PV's) to the link record `slot`, as the record's own
    /// processing does (no client, no access rule).
    fn apply_link(&self, slot: usize, value: f64);
    /// The link record's alarm changed: post it.
    fn link_alarm_changed(&self, slot: usize);
}

/// The name a `.DOL` text links to (its first word, without `.VAL` or `ca://`), or a constant.
pub fn parse_dol(text: &str) -> Result<Option<DolName>, String> {
    let Some(first) = text.split_whitespace().next() else {
        return Ok(None);
    };
    if let Ok(x) = first.parse::<f64>() {
        return Ok(Some(DolName::Constant(x)));
    }
    if first.starts_with("pva://") {
        return Err(format!(
            "'{first}': pvAccess links are not supported; name the PV (read over Channel Access)"
        ));
    }
    let name = first.strip_prefix("ca://").unwrap_or(first);
    let name = name.strip_suffix(".VAL").unwrap_or(name);
    Ok(Some(DolName::Pv(name.to_string())))
}

/// A parsed `.DOL`.
#[derive(Debug, Clone, PartialEq)]
pub enum DolName {
    Constant(f64),
    Pv(String),
}

impl Links {
    /// `slots`: the slots of link records.
    pub fn new(slots: impl IntoIterator<Item = usize>) -> Links {
        let by_slot = slots
            .into_iter()
            .map(|slot| {
                let link = Link {
                    slot,
                    dol: Mutex::new(String::new()),
                    closed_loop: AtomicBool::new(true),
                    target: Mutex::new(Target::None),
                    broken: AtomicBool::new(false),
                    generation: AtomicU64::new(0),
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

    pub fn is_link(&self, slot: usize) -> bool {
        self.by_slot.contains_key(&slot)
    }

    /// Whether some link follows `slot` (the publisher then calls [`Self::follow`]).
    pub fn is_followed(&self, slot: usize) -> bool {
        self.followers
            .read()
            .get(&slot)
            .is_some_and(|v| !v.is_empty())
    }

    /// The links following `source`, closed-loop ones only.
    pub fn follow(&self, source: usize) -> Vec<usize> {
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

    /// `.OMSL`: 0 supervisory, 1 closed_loop.
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

    /// A `.DOL` write. `resolve`: this IOC's slot of a PV name, if it is one of ours.
    /// Returns what the link now reads; an external PV starts its watcher on `host`.
    pub fn set_dol(
        &self,
        slot: usize,
        text: &str,
        resolve: impl Fn(&str) -> Option<usize>,
        host: Weak<dyn LinkHost>,
    ) -> Result<Target, String> {
        let link = self.by_slot.get(&slot).ok_or("not a link record")?.clone();
        let target = match parse_dol(text)? {
            None => Target::None,
            Some(DolName::Constant(x)) => Target::Constant(x),
            Some(DolName::Pv(name)) => match resolve(&name) {
                Some(src) if src == slot => {
                    return Err(format!("'{name}' is the link record itself"));
                }
                Some(src) => Target::Internal(src),
                None => Target::External(name),
            },
        };
        let generation = link.generation.fetch_add(1, Ordering::AcqRel) + 1;
        *link.dol.lock() = text.trim().to_string();
        let was_broken = link.broken.swap(false, Ordering::AcqRel);
        {
            let mut f = self.followers.write();
            for v in f.values_mut() {
                v.retain(|l| *l != slot);
            }
            if let Target::Internal(src) = target {
                f.entry(src).or_default().push(slot);
            }
        }
        *link.target.lock() = target.clone();
        if let Target::External(name) = &target {
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

/// Follows another IOC's PV for one link until its `.DOL` changes or the IOC stops.
fn watch(
    host: Weak<dyn LinkHost>,
    link: Arc<Link>,
    generation: u64,
    name: String,
    client: Arc<Client>,
) {
    let set_broken = |b: bool| {
        if link.broken.swap(b, Ordering::AcqRel) != b {
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

    struct Host {
        applied: Mutex<Vec<(usize, f64)>>,
        alarms: Mutex<Vec<usize>>,
    }
    impl LinkHost for Host {
        fn apply_link(&self, slot: usize, value: f64) {
            self.applied.lock().push((slot, value));
        }
        fn link_alarm_changed(&self, slot: usize) {
            self.alarms.lock().push(slot);
        }
    }

    #[test]
    fn dol_texts() {
        assert_eq!(parse_dol("  ").unwrap(), None);
        assert_eq!(
            parse_dol("13SIM1:Stats1:CentroidX_RBV CP MS").unwrap(),
            Some(DolName::Pv("13SIM1:Stats1:CentroidX_RBV".into()))
        );
        assert_eq!(
            parse_dol("ca://A:B.VAL").unwrap(),
            Some(DolName::Pv("A:B".into()))
        );
        assert_eq!(parse_dol("0.1").unwrap(), Some(DolName::Constant(0.1)));
        assert!(parse_dol("pva://X").unwrap_err().contains("not supported"));
    }

    #[test]
    fn internal_links_follow_and_move() {
        let links = Links::new([7, 8]);
        let host: Arc<dyn LinkHost> = Arc::new(Host {
            applied: Mutex::new(Vec::new()),
            alarms: Mutex::new(Vec::new()),
        });
        let resolve = |n: &str| match n {
            "A" => Some(3),
            "B" => Some(4),
            "SELF" => Some(7),
            _ => None,
        };
        let t = links
            .set_dol(7, "A CP", resolve, Arc::downgrade(&host))
            .unwrap();
        assert_eq!(t, Target::Internal(3));
        links
            .set_dol(8, "A", resolve, Arc::downgrade(&host))
            .unwrap();
        assert_eq!(links.follow(3), vec![7, 8]);
        links.set_omsl(8, 0).unwrap();
        assert_eq!(links.follow(3), vec![7], "supervisory links do not follow");
        links
            .set_dol(7, "B", resolve, Arc::downgrade(&host))
            .unwrap();
        assert!(links.follow(3).is_empty());
        assert_eq!(links.follow(4), vec![7]);
        assert_eq!(links.get(7).unwrap().dol(), "B");
        assert!(links
            .set_dol(7, "SELF", resolve, Arc::downgrade(&host))
            .is_err());
        assert!(links.set_omsl(7, 2).is_err());
        assert!(links
            .set_dol(9, "A", resolve, Arc::downgrade(&host))
            .is_err());
        let t = links
            .set_dol(7, "", resolve, Arc::downgrade(&host))
            .unwrap();
        assert_eq!(t, Target::None);
        assert!(!links.is_followed(4));
    }
}
