//! The one PV directory every protocol reads.
//!
//! Built once from the parameter declarations of every port: each writable parameter `Name`
//! becomes the PV `{prefix}{port prefix}Name` (setpoint) and `Name_RBV` (readback), a read-only
//! one only `Name_RBV` (or `Name` for [`ndflow_core::Access::ReadOnlyPlain`]) — areaDetector's
//! record names. Each entry knows its port, parameter, areaDetector record type and access.
//!
//! pvAccess and Channel Access are views of this directory: they encode values and run sessions,
//! but the list of PVs, their types, who may write them, how a put is validated and when it
//! completes are decided here, once:
//! - **Changes** reach the views through one publisher thread that posts each changed parameter
//!   at most every [`POST_INTERVAL`] (latest value wins), so a plugin that rewrites a result
//!   10,000 times a second costs clients 100 updates a second and the frame path never waits.
//!   Waveforms of frames (StdArrays `ArrayData`) are the exception: each is posted as it
//!   changes, because a post only shares the frame's buffer and every client's queue keeps the
//!   latest, so a viewer gets every frame it can take, not at most 100 a second.
//! - **Puts** go through [`Graph::put`] (validated like a config key; a refusal changes nothing
//!   and its text reaches the client). A put to a busy record (Acquire, Capture, WriteFile,
//!   FlushNow: [`RecordHint::completes_when_done`]) completes when the value is back to 0 — the
//!   acquisition has ended (and, with WaitForPlugins, the plugins drained), the capture closed
//!   its file — so every protocol's put-with-completion waits for the same event.
//! - **Access** follows the `[[access]]` rules of the config ([`AccessRules`]).
//!
//! Besides the ports of the graph, the directory may hold parameters of the IOC itself
//! ([`IocPort`]: `$(P)NDFLOW:LogLevel`), served the same way; a put to one is validated and
//! stored, and whoever owns its store acts on the change ([`ParamStore::subscribe`]).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use ndflow_core::{
    Access as ParamAccess, Alarm, AlarmRule, AlarmStatus, ParamDef, ParamKind, ParamStore,
    ParamValue, RecordHint, Severity,
};
use ndflow_runtime::{Graph, GraphError};
use parking_lot::{Condvar, Mutex, RwLock};

use crate::access::{AccessRules, Rights};
use crate::links::{Link, LinkHost, Links, Target};
use crate::put_log::PutLog;
use crate::record_fields::{RecordField, RecordFields};
use ndflow_core::LinkKind;

/// Shortest time between two monitor posts of one parameter.
pub const POST_INTERVAL: Duration = Duration::from_millis(10);

/// How often the publisher looks for changes a periodic SCAN held back (the shortest SCAN
/// period is .1 second).
const PERIODIC_TICK: Duration = Duration::from_millis(20);

thread_local! {
    /// Busy records that a put running on this thread set to non-zero: posted once the put's
    /// side effects are done (see [`PvDirectory::put_and_post`]), not in the middle of them.
    static DEFERRED_BUSY: RefCell<Option<Vec<(usize, ParamValue)>>> = const { RefCell::new(None) };
}

/// Which of a parameter's PVs an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Face {
    /// `Name`: writable (or a read-only parameter served without `_RBV`).
    Setpoint,
    /// `Name_RBV`.
    Readback,
}

/// The areaDetector record type an entry is served as (`.RTYP` over Channel Access).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordType {
    Ao,
    Ai,
    Longout,
    Longin,
    Bo,
    Bi,
    Mbbo,
    Mbbi,
    Stringout,
    Stringin,
    /// A waveform: an array parameter, or a long string as NUL-terminated chars.
    Waveform,
    Busy,
    /// A template's helper record: `calc`, `seq`, `subArray`, … ([`RecordHint::Helper`]).
    Helper(&'static str),
}

impl RecordType {
    pub fn name(self) -> &'static str {
        match self {
            RecordType::Ao => "ao",
            RecordType::Ai => "ai",
            RecordType::Longout => "longout",
            RecordType::Longin => "longin",
            RecordType::Bo => "bo",
            RecordType::Bi => "bi",
            RecordType::Mbbo => "mbbo",
            RecordType::Mbbi => "mbbi",
            RecordType::Stringout => "stringout",
            RecordType::Stringin => "stringin",
            RecordType::Waveform => "waveform",
            RecordType::Busy => "busy",
            RecordType::Helper(t) => t,
        }
    }

    /// The record type of one face of a parameter, as ADCore's templates declare it.
    pub fn of(def: &ParamDef, face: Face) -> RecordType {
        let out = face == Face::Setpoint && def.writable();
        let pick = |o, i| if out { o } else { i };
        match (def.record, def.kind) {
            (RecordHint::Helper(t), _) => RecordType::Helper(t),
            (RecordHint::HelperReadback(t), _) if face == Face::Readback => RecordType::Helper(t),
            (RecordHint::LongString, _) | (_, ParamKind::Array(_)) => RecordType::Waveform,
            // (AcquireBusy: a busy record only its port writes.)
            (RecordHint::Busy, _) if face == Face::Setpoint => RecordType::Busy,
            (_, ParamKind::Int32) => pick(RecordType::Longout, RecordType::Longin),
            // 64-bit integers travel as doubles (Channel Access has no 64-bit type).
            (_, ParamKind::Int64 | ParamKind::Float64) => pick(RecordType::Ao, RecordType::Ai),
            (_, ParamKind::Enum(c)) if c.len() <= 2 && def.record != RecordHint::Mbb => {
                pick(RecordType::Bo, RecordType::Bi)
            }
            (_, ParamKind::Enum(_)) => pick(RecordType::Mbbo, RecordType::Mbbi),
            (_, ParamKind::String) => pick(RecordType::Stringout, RecordType::Stringin),
        }
    }
}

/// One PV.
#[derive(Debug)]
pub struct PvEntry {
    /// Full PV name.
    pub name: String,
    /// The parameter behind it ([`PvDirectory::slot`]).
    pub slot: usize,
    pub face: Face,
    pub record: RecordType,
}

/// One parameter of one port, and the PVs that show it.
pub struct ParamSlot {
    pub port: String,
    pub store: Arc<ParamStore>,
    pub idx: usize,
    pub def: &'static ParamDef,
    /// Entry ids: the setpoint (if any) first, then the readback.
    pub entries: Vec<usize>,
    dirty: AtomicBool,
    /// A parameter of an [`IocPort`], not of a port of the graph: puts go to the store.
    ioc: bool,
}

/// Parameters of the IOC itself rather than of a port of the graph, served as
/// `{prefix}{IocPort::prefix}Name` like a port's (e.g. `13SIM1:NDFLOW:LogLevel`).
#[derive(Clone)]
pub struct IocPort {
    /// Shown where a slot names its port.
    pub name: String,
    pub prefix: String,
    pub store: Arc<ParamStore>,
}

impl ParamSlot {
    /// The level alarm limits `[hihi, high, low, lolo]` of its records now, when its alarm is
    /// a level rule (`None` in a place: no such level). An integer parameter's limits are
    /// truncated, as a longin's limit fields are.
    pub fn level_limits(&self) -> Option<[Option<f64>; 4]> {
        let AlarmRule::Levels(l) = self.def.alarm else {
            return None;
        };
        let full = self
            .store
            .index(l.of)
            .map_or(0.0, |i| self.store.get_f64(i));
        let integer = matches!(self.def.kind, ParamKind::Int32 | ParamKind::Int64);
        Some(
            l.limits(full)
                .map(|x| x.map(|x| if integer { x.trunc() } else { x })),
        )
    }

    /// Its records' high display and drive limit now, when it follows another parameter
    /// ([`ParamDef::high_limit_from`]: ROI's MinX spans the input's X size).
    pub fn high_limit(&self) -> Option<f64> {
        let src = self.def.high_limit_from?;
        self.store.index(src).map(|i| self.store.get_f64(i))
    }

    pub fn value(&self) -> ParamValue {
        self.store
            .get(self.idx)
            .unwrap_or_else(|| self.def.default_value())
    }
}

/// Who is asking: the client's host (peer address or announced host name), user name and
/// protocol ("ca", "pva").
#[derive(Debug, Clone, Default)]
pub struct ClientInfo {
    pub host: String,
    pub user: String,
    pub protocol: &'static str,
}

/// Called once with the outcome of a put: `Ok` when applied (busy records: when done).
pub type PutDone = Box<dyn FnOnce(Result<(), String>) + Send>;

/// A protocol view's hook: told `(slot, latest value)` for every changed parameter, at most
/// every [`POST_INTERVAL`] per parameter, on the publisher thread.
pub type Sink = Arc<dyn Fn(usize, &ParamValue) + Send + Sync>;

struct Waiter {
    slot: usize,
    id: u64,
    done: PutDone,
}

#[derive(Default)]
struct Pending {
    queue: Vec<usize>,
    /// Posted slots that links follow: the publisher applies them to the links.
    follow: Vec<usize>,
    /// Output links due, in the order of the changes that made them due.
    outputs: Vec<(Arc<Link>, Target, f64)>,
    stop: bool,
}

/// The IOC's PVs by name.
pub struct PvDirectory {
    entries: Vec<PvEntry>,
    by_name: HashMap<String, usize>,
    slots: Vec<ParamSlot>,
    graph: Weak<Graph>,
    rules: AccessRules,
    waiters: Mutex<(u64, Vec<Waiter>)>,
    sinks: RwLock<Vec<Sink>>,
    pending: (Mutex<Pending>, Condvar),
    /// Posts come from the publisher and from put threads; one at a time, each reading the
    /// value it posts while it holds this, so a view is never handed an older value after a
    /// newer one.
    posting: Mutex<()>,
    /// Where accepted client writes are recorded ([`PutLog`]).
    put_log: RwLock<Arc<PutLog>>,
    /// Per slot: the slots whose high limit is its value ([`ParamSlot::high_limit`]), posted
    /// again when it changes so that clients see the new limit.
    limit_followers: Vec<Vec<usize>>,
    /// Every PV's SCAN, DISA, … ([`RecordFields`]).
    fields: RecordFields,
    /// The link records' `.DOL`/`.OMSL` ([`Links`]).
    links: Links,
    /// Itself, for the link watchers.
    me: std::sync::OnceLock<Weak<PvDirectory>>,
    /// Told of each accepted write of a link field (the state saver).
    link_watch: RwLock<Option<LinkWatch>>,
}

/// What [`PvDirectory::on_link_change`] calls.
pub type LinkWatch = Arc<dyn Fn() + Send + Sync>;

/// Whether a link record of `kind` has link field `f` on its `face` (`.DOL`/`.OMSL` on an
/// input's setpoint, `.INP`/`.ZRVL`/`.ONVL` on a raw input's readback, `.OUT`/`.OCAL` on
/// an output's every PV).
pub fn link_field_of(kind: LinkKind, face: Face, f: RecordField) -> bool {
    match (kind, f) {
        (LinkKind::Input, RecordField::Dol | RecordField::Omsl) => face == Face::Setpoint,
        (LinkKind::RawInput, RecordField::Inp | RecordField::Zrvl | RecordField::Onvl) => {
            face == Face::Readback
        }
        (LinkKind::Output { .. }, RecordField::Out | RecordField::Ocal) => true,
        _ => false,
    }
}

impl PvDirectory {
    /// The directory of every parameter of every port of `graph`, named `prefix` + the port's
    /// prefix + the parameter's PV suffix. Two PVs with one name are an error.
    pub fn build(
        graph: &Arc<Graph>,
        prefix: &str,
        port_prefixes: &HashMap<String, String>,
        rules: AccessRules,
    ) -> Result<Arc<PvDirectory>, String> {
        Self::build_with(graph, prefix, port_prefixes, rules, &[])
    }

    /// [`Self::build`], plus the parameters of the IOC itself (`ioc`), after the ports'.
    pub fn build_with(
        graph: &Arc<Graph>,
        prefix: &str,
        port_prefixes: &HashMap<String, String>,
        rules: AccessRules,
        ioc: &[IocPort],
    ) -> Result<Arc<PvDirectory>, String> {
        let mut entries = Vec::new();
        let mut by_name = HashMap::new();
        let mut slots = Vec::new();
        let ports = graph.ports().into_iter().map(|h| {
            let name = h.name().to_string();
            let full = format!(
                "{prefix}{}",
                port_prefixes.get(&name).map_or("", String::as_str)
            );
            (name, full, h.params().clone(), false)
        });
        let own = ioc.iter().map(|p| {
            let full = format!("{prefix}{}", p.prefix);
            (p.name.clone(), full, p.store.clone(), true)
        });
        for (port, full, store, is_ioc) in ports.chain(own) {
            for (idx, def) in store.defs().iter().copied().enumerate() {
                let slot = slots.len();
                let mut ids = Vec::new();
                for (suffix, face) in faces(def) {
                    let name = format!("{full}{suffix}");
                    if by_name.contains_key(&name) {
                        return Err(format!(
                            "PV name '{name}' is used twice (check the port prefixes)"
                        ));
                    }
                    by_name.insert(name.clone(), entries.len());
                    ids.push(entries.len());
                    entries.push(PvEntry {
                        name,
                        slot,
                        face,
                        record: RecordType::of(def, face),
                    });
                }
                slots.push(ParamSlot {
                    port: port.clone(),
                    store: store.clone(),
                    idx,
                    def,
                    entries: ids,
                    dirty: AtomicBool::new(false),
                    ioc: is_ioc,
                });
            }
        }
        let limit_followers = limit_followers(&slots);
        let fields = RecordFields::new(entries.iter().map(|e: &PvEntry| {
            let writable = slots.get(e.slot).is_some_and(|s| s.def.writable());
            !(e.face == Face::Setpoint && writable)
        }));
        let links = Links::new(
            slots
                .iter()
                .enumerate()
                .filter(|(_, s)| s.def.link != LinkKind::None)
                .map(|(i, s)| (i, s.def.link, s.value().as_i64().unwrap_or(0))),
        );
        let dir = Arc::new(PvDirectory {
            limit_followers,
            fields,
            links,
            me: std::sync::OnceLock::new(),
            link_watch: RwLock::new(None),
            entries,
            by_name,
            slots,
            graph: Arc::downgrade(graph),
            rules,
            waiters: Mutex::new((0, Vec::new())),
            sinks: RwLock::new(Vec::new()),
            pending: (Mutex::new(Pending::default()), Condvar::new()),
            posting: Mutex::new(()),
            put_log: RwLock::new(Arc::new(PutLog::log_only())),
        });
        let _ = dir.me.set(Arc::downgrade(&dir));
        dir.listen();
        Ok(dir)
    }

    /// Every store tells the directory of its changes: the slot is marked dirty for the
    /// publisher, and a busy put waiting for this parameter to return to 0 completes.
    fn listen(self: &Arc<Self>) {
        let mut by_store: Vec<(Arc<ParamStore>, Vec<Option<usize>>)> = Vec::new();
        for (i, s) in self.slots.iter().enumerate() {
            let pos = match by_store
                .iter()
                .position(|(st, _)| Arc::ptr_eq(st, &s.store))
            {
                Some(p) => p,
                None => {
                    by_store.push((s.store.clone(), vec![None; s.store.defs().len()]));
                    by_store.len() - 1
                }
            };
            if let Some(x) = by_store[pos].1.get_mut(s.idx) {
                *x = Some(i);
            }
        }
        for (store, map) in by_store {
            let dir = Arc::downgrade(self);
            store.subscribe(move |idx, v| {
                let (Some(dir), Some(Some(slot))) = (dir.upgrade(), map.get(idx)) else {
                    return;
                };
                dir.changed(*slot, v);
            });
        }
    }

    fn changed(&self, slot: usize, v: &ParamValue) {
        let Some(s) = self.slots.get(slot) else {
            return;
        };
        if let LinkKind::Output { .. } = s.def.link {
            // Every transition counts (a close and an open within one publisher round
            // both write), so they are seen here, and written by the publisher.
            if let Some(due) = v.as_i64().and_then(|x| self.links.output_due(slot, x)) {
                self.pending.0.lock().outputs.push(due);
                self.pending.1.notify_one();
            }
        }
        if s.def.record.completes_when_done() {
            // Busy records (Acquire, Capture, …) change once per operation and clients wait
            // for their transitions (ophyd-async arms by watching Acquire_RBV go to 1), so
            // every value is posted as it happens, never folded into the next round.
            if v.as_i64() != Some(0) {
                // Set by a put on this thread: its side effects (Capture resets NumCaptured)
                // are not done yet; the put posts them first, then this start.
                let deferred = DEFERRED_BUSY.with(|d| match d.borrow_mut().as_mut() {
                    Some(list) => {
                        list.push((slot, v.clone()));
                        true
                    }
                    None => false,
                });
                if deferred {
                    return;
                }
            }
            if v.as_i64() == Some(0) {
                // The end of an operation: what it changed (counters, file names) goes out
                // first, so a client that sees Done and then reads a counter reads its final
                // value (as areaDetector posts them in one callParamCallbacks).
                self.flush_pending();
            }
            self.post_value(slot, v);
            if v.as_i64() != Some(0) {
                return;
            }
            let fired: Vec<Waiter> = {
                let mut w = self.waiters.lock();
                let (done, keep) = std::mem::take(&mut w.1)
                    .into_iter()
                    .partition(|w| w.slot == slot);
                w.1 = keep;
                done
            };
            if !fired.is_empty() {
                // A client that reads after its put completed sees the final values.
                self.flush_pending();
            }
            for w in fired {
                (w.done)(Ok(()));
            }
            return;
        }
        if matches!(s.def.kind, ParamKind::Array(_)) {
            self.post_now(slot);
            return;
        }
        self.mark_dirty(slot);
        for &f in self
            .limit_followers
            .get(slot)
            .map_or(&[][..], Vec::as_slice)
        {
            self.mark_dirty(f);
        }
    }

    /// Queues `slot` for the publisher. Only the first change since the last post queues
    /// work; later ones ride along.
    fn mark_dirty(&self, slot: usize) {
        let Some(s) = self.slots.get(slot) else {
            return;
        };
        if !s.dirty.swap(true, Ordering::AcqRel) {
            self.pending.0.lock().queue.push(slot);
            self.pending.1.notify_one();
        }
    }

    pub fn entries(&self) -> &[PvEntry] {
        &self.entries
    }

    pub fn entry(&self, id: usize) -> Option<&PvEntry> {
        self.entries.get(id)
    }

    pub fn find(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    pub fn slots(&self) -> &[ParamSlot] {
        &self.slots
    }

    pub fn slot(&self, id: usize) -> Option<&ParamSlot> {
        self.slots.get(id)
    }

    /// The slot of an entry.
    pub fn slot_of(&self, entry: usize) -> Option<&ParamSlot> {
        self.entries.get(entry).and_then(|e| self.slots.get(e.slot))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Sorted PV names.
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.entries.iter().map(|e| e.name.clone()).collect();
        v.sort();
        v
    }

    /// The alarm of `entry` while its parameter holds `v`, as its declaration says
    /// ([`ndflow_core::alarm`]): the same for every protocol.
    pub fn alarm(&self, entry: usize, v: &ParamValue) -> Alarm {
        let (Some(e), Some(s)) = (self.entries.get(entry), self.slot_of(entry)) else {
            return Alarm::NONE;
        };
        if self.has_field(entry, RecordField::link_of(s.def.link))
            && self.links.get(e.slot).is_some_and(|l| l.broken())
        {
            return Alarm {
                severity: Severity::Invalid,
                status: AlarmStatus::Link,
            };
        }
        if matches!(s.def.alarm, AlarmRule::None) {
            return Alarm::NONE;
        }
        let x = match s.def.kind {
            ParamKind::Enum(_) => Some(menu_position(s.def, v) as f64),
            _ => v.as_f64(),
        };
        let output = e.face == Face::Setpoint && s.def.writable();
        s.def.alarm.evaluate(x, output, |name| {
            s.store.index(name).map(|i| s.store.get_f64(i))
        })
    }

    /// What an alarm of `entry` showing `v` says in words (pvAccess `alarm.message`): the
    /// menu entry of a state alarm ("Write error"), else the status ("LOLO").
    pub fn alarm_message(&self, entry: usize, v: &ParamValue, alarm: Alarm) -> String {
        let Some((e, s)) = self.entries.get(entry).zip(self.slot_of(entry)) else {
            return String::new();
        };
        match alarm.status {
            AlarmStatus::NoAlarm => String::new(),
            AlarmStatus::State => s
                .def
                .choices(e.face == Face::Readback)
                .and_then(|c| c.get(menu_position(s.def, v) as usize))
                .map_or_else(|| "STATE".into(), |c| c.to_string()),
            other => other.name().to_string(),
        }
    }

    /// Whether `entry` accepts puts at all (the setpoint of a writable parameter).
    pub fn is_writable(&self, entry: usize) -> bool {
        self.entries
            .get(entry)
            .zip(self.slot_of(entry))
            .is_some_and(|(e, s)| e.face == Face::Setpoint && s.def.writable())
    }

    /// What `client` may do with the PV `name` (hidden, read, read and write).
    /// A record field (`NAME.PROC`) has its record's rights, writable where the field is.
    pub fn rights(&self, name: &str, client: &ClientInfo) -> Rights {
        if let (None, Some((rec, field))) = (self.find(name), name.rsplit_once('.')) {
            if field == "VAL" {
                return self.rights(rec, client);
            }
            if self.find(rec).is_some() {
                let r = self.rules.rights(rec, &client.host, &client.user);
                // `FIELD$`: the long-string form of a text field, as writable as the field.
                let field = field.strip_suffix('$').unwrap_or(field);
                return match RecordField::parse(field) {
                    Some(f) if f.writable() => r,
                    _ => r.min(Rights::Read),
                };
            }
        }
        let r = self.rules.rights(name, &client.host, &client.user);
        match self.find(name) {
            Some(e) if !self.is_writable(e) => r.min(Rights::Read),
            _ => r,
        }
    }

    /// Records accepted client writes in `log` too (the log always has them).
    pub fn set_put_log(&self, log: PutLog) {
        *self.put_log.write() = Arc::new(log);
    }

    /// Registers a protocol view. Every parameter is then posted once, so a change made while
    /// the view was creating its PVs is not missed.
    pub fn add_sink(&self, sink: Sink) {
        self.sinks.write().push(sink);
        for (i, s) in self.slots.iter().enumerate() {
            if !s.dirty.swap(true, Ordering::AcqRel) {
                self.pending.0.lock().queue.push(i);
            }
        }
        self.pending.1.notify_one();
    }

    /// Applies a put from `client` to `entry` and calls `done` with the outcome: at once for
    /// ordinary records, when the operation has ended for busy ones. A refused put (read-only,
    /// no access, invalid value) changes nothing and reports why.
    /// `client` is `None` when the protocol has enforced access on the channel already (CA's
    /// ACCESS_RIGHTS). `wait`: the client asked for completion (CA WRITE_NOTIFY, pvAccess
    /// `block=true`); without it a busy put is answered once applied.
    pub fn put(
        &self,
        entry: usize,
        value: ParamValue,
        client: Option<&ClientInfo>,
        wait: bool,
        done: PutDone,
    ) {
        let (Some(e), Some(s)) = (self.entries.get(entry), self.slot_of(entry)) else {
            return done(Err("no such PV".into()));
        };
        if !self.is_writable(entry) {
            return done(Err(format!("'{}' is read-only", e.name)));
        }
        if let Some(c) = client.filter(|c| self.rights(&e.name, c) < Rights::Write) {
            return done(Err(format!(
                "no write access to '{}' for {}@{}",
                e.name, c.user, c.host
            )));
        }
        if self.fields.disabled(entry) {
            // EPICS: a disabled record takes the write but does not process it.
            tracing::debug!("put {} not applied: the record is disabled (DISA)", e.name);
            return done(Ok(()));
        }
        let Some(graph) = self.graph.upgrade() else {
            return done(Err("the IOC is shutting down".into()));
        };
        // Busy records: register before the put so that an operation ending at once (or
        // before `put` returns) cannot be missed.
        let waits = wait
            && s.def.record.completes_when_done()
            && s.def.coerce(value.clone()).ok().and_then(|v| v.as_i64()) != Some(0);
        let old = s.value();
        if !waits {
            let r = self.put_and_post(&graph, s, value);
            self.log_put(e, s, client, &old, &r);
            if r.is_ok() {
                // A get after the put's reply must see the new value and everything the put
                // changed (FilePath → FilePathExists), not wait for the publisher's next round.
                self.post_now(e.slot);
                self.flush_pending();
            }
            return done(r.map(|_| ()).map_err(|e| e.to_string()));
        }
        let id = {
            let mut w = self.waiters.lock();
            w.0 += 1;
            let id = w.0;
            w.1.push(Waiter {
                slot: e.slot,
                id,
                done,
            });
            id
        };
        let r = self.put_and_post(&graph, s, value);
        self.log_put(e, s, client, &old, &r);
        if let Err(err) = r {
            let mine = {
                let mut w = self.waiters.lock();
                w.1.iter()
                    .position(|x| x.id == id)
                    .map(|p| w.1.swap_remove(p))
            };
            if let Some(w) = mine {
                (w.done)(Err(err.to_string()));
            }
        }
    }

    /// `Graph::put`, then posts what it changed before the start of the operation it began: a
    /// client that sees `Capture_RBV` = 1 (or `Acquire_RBV` = 1) and then reads a counter the
    /// start reset reads the reset value, never the previous operation's (ophyd-async reads
    /// NumCaptured right after Capture_RBV = 1 to know where its frames start).
    fn put_and_post(
        &self,
        graph: &Graph,
        s: &ParamSlot,
        value: ParamValue,
    ) -> Result<ParamValue, GraphError> {
        DEFERRED_BUSY.with(|d| *d.borrow_mut() = Some(Vec::new()));
        let r = if s.ioc {
            s.store
                .put(s.def.name, value)
                .map_err(|source| GraphError::Param {
                    port: s.port.clone(),
                    source,
                })
        } else {
            graph.put(&s.port, s.def.name, value)
        };
        let started = DEFERRED_BUSY
            .with(|d| d.borrow_mut().take())
            .unwrap_or_default();
        self.flush_pending();
        for (slot, v) in started {
            self.post_value(slot, &v);
        }
        r
    }

    /// Posts a slot's current value to every view at once (outside the rate limit).
    fn post_now(&self, slot: usize) {
        self.post(&[slot], false);
    }

    /// Posts `v`, the value a change just set, then the slot's current value if it has
    /// moved on meanwhile: every transition reaches the views and the last post is current.
    fn post_value(&self, slot: usize, v: &ParamValue) {
        let Some(s) = self.slots.get(slot) else {
            return;
        };
        let sinks: Vec<Sink> = self.sinks.read().clone();
        let _serial = self.posting.lock();
        self.open_entries(s);
        for sink in &sinks {
            sink(slot, v);
        }
        let now = s.value();
        if now != *v {
            for sink in &sinks {
                sink(slot, &now);
            }
        }
    }

    /// Posts every change still waiting for the publisher, now, on this thread.
    ///
    /// The queue is only ever emptied while holding `posting`, and the batch is posted before
    /// letting go: so once this holds `posting`, a change made before the call is either
    /// still queued (posted here) or was taken by the publisher, which has finished posting
    /// it. Without that, a publisher that took the queue but had not posted yet left this
    /// with nothing to flush, and a put completing right after let its client read the old
    /// value (seen as a stale `ArraySize0_RBV` after `Acquire` with `wait=True`).
    fn flush_pending(&self) {
        let _serial = self.posting.lock();
        let batch = std::mem::take(&mut self.pending.0.lock().queue);
        self.post_held(&batch, true);
    }

    /// Gives every view the current value of each slot; `dequeued`: the slots came off the
    /// pending queue, so they are clean again.
    fn post(&self, slots: &[usize], dequeued: bool) {
        if slots.is_empty() {
            return;
        }
        let _serial = self.posting.lock();
        self.post_held(slots, dequeued);
    }

    /// [`Self::post`] for a caller that holds `posting`.
    fn post_held(&self, slots: &[usize], dequeued: bool) {
        if slots.is_empty() {
            return;
        }
        let sinks: Vec<Sink> = self.sinks.read().clone();
        for &slot in slots {
            let Some(s) = self.slots.get(slot) else {
                continue;
            };
            if dequeued {
                s.dirty.store(false, Ordering::Release);
            }
            self.open_entries(s);
            let v = s.value();
            for sink in &sinks {
                sink(slot, &v);
            }
            if self.links.watches(slot) {
                self.pending.0.lock().follow.push(slot);
                self.pending.1.notify_one();
            }
        }
    }

    /// Decides for each PV of `s` whether the post under way shows (its SCAN and DISA).
    fn open_entries(&self, s: &ParamSlot) {
        for &e in &s.entries {
            self.fields.open(e);
        }
    }

    /// Whether the post under way reaches the clients of `entry` (views ask this for each PV
    /// of a slot they are given: an input record with SCAN Passive or disabled keeps its
    /// value until it is processed).
    pub fn shows(&self, entry: usize) -> bool {
        self.fields.is_open(entry)
    }

    /// The value of field `f` of `entry`.
    pub fn field(&self, entry: usize, f: RecordField) -> i64 {
        if f.is_link() {
            let link = self.entries.get(entry).and_then(|e| self.links.get(e.slot));
            return link.map_or(0, |l| match f {
                RecordField::Omsl => i64::from(l.closed_loop()),
                RecordField::Zrvl => l.raw_values().0,
                RecordField::Onvl => l.raw_values().1,
                _ => 0,
            });
        }
        self.fields.get(entry, f)
    }

    /// Whether `entry` has field `f`: the asyn fields are an asyn record's, `.DOL`/`.OMSL`
    /// a link record's setpoint's; the rest every record's.
    pub fn has_field(&self, entry: usize, f: RecordField) -> bool {
        let Some(e) = self.entries.get(entry) else {
            return false;
        };
        if !f.is_link() {
            return f.serves(e.record);
        }
        link_field_of(self.links.kind(e.slot), e.face, f)
    }

    /// `watch` is called after each accepted write of a link field, whoever made it.
    pub fn on_link_change(&self, watch: LinkWatch) {
        *self.link_watch.write() = Some(watch);
    }

    fn link_changed(&self) {
        let watch = self.link_watch.read().clone();
        if let Some(w) = watch {
            w();
        }
    }

    /// A text field's value (`.DOL`).
    pub fn field_text(&self, entry: usize, f: RecordField) -> String {
        let link = self.entries.get(entry).and_then(|e| self.links.get(e.slot));
        match (f, link) {
            (RecordField::Dol | RecordField::Inp | RecordField::Out, Some(l)) => l.text(),
            (RecordField::Ocal, Some(l)) => l.ocal().to_string(),
            _ => self.field(entry, f).to_string(),
        }
    }

    /// A client's write of `text` to the text field `f` (`.DOL`) of `entry`: the link then
    /// reads what it names (a PV of this IOC or another's, or a constant) and takes its
    /// value now. `client`: as for [`Self::put`].
    pub fn put_field_text(
        &self,
        entry: usize,
        f: RecordField,
        text: &str,
        client: Option<&ClientInfo>,
        done: PutDone,
    ) {
        let Some(e) = self.entries.get(entry).filter(|_| self.has_field(entry, f)) else {
            return done(Err("no such field".into()));
        };
        let name = format!("{}.{}", e.name, f.name());
        if let Some(c) = client.filter(|c| self.rights(&name, c) < Rights::Write) {
            return done(Err(format!(
                "no write access to '{name}' for {}@{}",
                c.user, c.host
            )));
        }
        let old = self.field_text(entry, f);
        if f == RecordField::Ocal {
            let r = self.links.set_ocal(e.slot, text);
            if r.is_ok() {
                self.log_text_put(&name, client, &old, text.trim());
                self.link_changed();
            }
            return done(r.map_err(|m| format!("{name}: {m}")));
        }
        let resolve = |n: &str| self.find(n);
        let slot_of = |x: usize| self.entries.get(x).map(|x| x.slot);
        match self
            .links
            .set_link(e.slot, text, resolve, slot_of, self.host())
        {
            Ok(target) => {
                self.log_text_put(&name, client, &old, text.trim());
                let input = !matches!(self.links.kind(e.slot), LinkKind::Output { .. });
                match target {
                    Target::Constant(x) => self.apply_link(e.slot, x),
                    Target::Internal(src) if input => {
                        if let Some(src) = slot_of(src) {
                            self.follow_links_of(src, &[e.slot]);
                        }
                    }
                    _ => {}
                }
                self.post_now(e.slot);
                self.link_changed();
                done(Ok(()))
            }
            Err(m) => done(Err(format!("{name}: {m}"))),
        }
    }

    fn host(&self) -> Weak<dyn LinkHost> {
        let me: Weak<PvDirectory> = self.me.get().cloned().unwrap_or_default();
        me
    }

    /// For each posted slot: applies its value to the closed-loop input links following it;
    /// a raw input link record keeps the state its PV gave it.
    fn follow_links(&self, posted: &[usize]) {
        for &slot in posted {
            let links = self.links.followers_of(slot);
            self.follow_links_of(slot, &links);
            // A raw input keeps the state its PV gave it (the simulated shutter's echo
            // does not overwrite the real shutter's status).
            if let (Some(l), Some(s)) = (self.links.get(slot), self.slots.get(slot)) {
                if let Some(st) = l.held_state().filter(|st| s.value().as_i64() != Some(*st)) {
                    let _ = s.store.set(s.idx, ParamValue::Int(st));
                }
            }
        }
    }

    /// Writes each due output link's OCAL to the PV its OUT names.
    fn write_outputs(&self, outputs: Vec<(Arc<Link>, Target, f64)>) {
        for (link, target, x) in outputs {
            match target {
                Target::Internal(entry) => {
                    let value = match self.slot_of(entry).map(|s| s.def.kind) {
                        Some(ParamKind::Float64) => ParamValue::Float(x),
                        _ => ParamValue::Int(x.trunc() as i64),
                    };
                    let ok = Arc::new(AtomicBool::new(false));
                    let ok2 = ok.clone();
                    self.put(
                        entry,
                        value,
                        None,
                        false,
                        Box::new(move |r| ok2.store(r.is_ok(), Ordering::Release)),
                    );
                    self.links
                        .output_written(&link, ok.load(Ordering::Acquire), self);
                }
                Target::External(name) => {
                    if let Err(e) = self.links.write_external(link, name, x, self.host()) {
                        tracing::warn!("output link: {e}");
                    }
                }
                _ => {}
            }
        }
    }

    fn follow_links_of(&self, src: usize, links: &[usize]) {
        let Some(x) = self.slots.get(src).and_then(|s| s.value().as_f64()) else {
            return;
        };
        for &l in links {
            self.apply_link(l, x);
        }
    }

    /// A client's write of `v` to field `f` of `entry`: PROC processes the record (an
    /// output applies its value again, an input shows its value now), SCAN/DISA/DISV are
    /// stored and take effect. `client`: as for [`Self::put`].
    pub fn put_field(
        &self,
        entry: usize,
        f: RecordField,
        v: i64,
        client: Option<&ClientInfo>,
        wait: bool,
        done: PutDone,
    ) {
        let (Some(e), Some(s)) = (self.entries.get(entry), self.slot_of(entry)) else {
            return done(Err("no such PV".into()));
        };
        let name = format!("{}.{}", e.name, f.name());
        if let Some(c) = client.filter(|c| self.rights(&name, c) < Rights::Write) {
            return done(Err(format!(
                "no write access to '{name}' for {}@{}",
                c.user, c.host
            )));
        }
        if !self.has_field(entry, f) {
            return done(Err(format!("'{name}' is not a field of this record")));
        }
        let old = self.field(entry, f);
        if f.is_link() {
            let r = match f {
                RecordField::Omsl => self.links.set_omsl(e.slot, v),
                RecordField::Zrvl => self.links.set_raw_value(e.slot, false, v),
                RecordField::Onvl => self.links.set_raw_value(e.slot, true, v),
                _ => Err("takes text (a PV name)".into()),
            };
            if r.is_ok() {
                self.log_field_put(&name, client, old, v);
                self.link_changed();
            }
            return done(r.map_err(|m| format!("{name}: {m}")));
        }
        if f != RecordField::Proc {
            let r = self.fields.set(entry, f, v);
            if r.is_ok() {
                self.log_field_put(&name, client, old, v);
                self.post_now(e.slot);
            }
            return done(r.map_err(|m| format!("{name}: {m}")));
        }
        self.log_field_put(&name, client, old, v);
        if self.fields.disabled(entry) {
            return done(Ok(()));
        }
        if self.is_writable(entry) {
            return self.put(entry, s.value(), client, wait, done);
        }
        self.fields.force(entry);
        self.post_now(e.slot);
        done(Ok(()))
    }

    fn log_field_put(&self, name: &str, client: Option<&ClientInfo>, old: i64, new: i64) {
        self.log_text_put(name, client, &old.to_string(), &new.to_string());
    }

    /// Records a client's write of a field in the put log. Without a client the IOC writes
    /// itself (the config's and the state file's link fields), as it sets parameters, unlogged.
    fn log_text_put(&self, name: &str, client: Option<&ClientInfo>, old: &str, new: &str) {
        if client.is_some() {
            self.put_log
                .read()
                .clone()
                .record_text(name, client, old, new);
        }
    }

    /// Starts the publisher thread; dropping the handle stops it.
    pub fn start_publisher(self: &Arc<Self>) -> Result<Publisher, String> {
        let dir = Arc::clone(self);
        let thread = std::thread::Builder::new()
            .name("ndflow-pv-publisher".into())
            .spawn(move || dir.publish_loop())
            .map_err(|e| format!("cannot start the PV publisher thread: {e}"))?;
        Ok(Publisher {
            dir: Arc::clone(self),
            thread: Some(thread),
        })
    }

    fn publish_loop(&self) {
        let mut batch = Vec::new();
        loop {
            {
                let mut g = self.pending.0.lock();
                loop {
                    if g.stop {
                        return;
                    }
                    // Changes a periodic SCAN held back go out when their period is over.
                    if self.fields.any_periodic() {
                        for e in self.fields.due() {
                            if let Some(slot) = self.entries.get(e).map(|x| x.slot) {
                                g.queue.push(slot);
                            }
                        }
                    }
                    if !g.queue.is_empty() || !g.follow.is_empty() || !g.outputs.is_empty() {
                        break;
                    }
                    if self.fields.any_periodic() {
                        self.pending.1.wait_for(&mut g, PERIODIC_TICK);
                    } else {
                        self.pending.1.wait(&mut g);
                    }
                }
            }
            {
                // Take the queue only while holding `posting` (see `flush_pending`).
                let _serial = self.posting.lock();
                std::mem::swap(&mut batch, &mut self.pending.0.lock().queue);
                self.post_held(&batch, true);
            }
            batch.clear();
            // Links to what was just posted, outside `posting` (their puts post too).
            let (follow, outputs) = {
                let mut g = self.pending.0.lock();
                (
                    std::mem::take(&mut g.follow),
                    std::mem::take(&mut g.outputs),
                )
            };
            self.follow_links(&follow);
            self.write_outputs(outputs);
            std::thread::sleep(POST_INTERVAL);
        }
    }
}

impl PvDirectory {
    /// An accepted put goes to the put log (old → new value as stored); a refused one is
    /// logged at debug level with its reason.
    fn log_put(
        &self,
        e: &PvEntry,
        s: &ParamSlot,
        client: Option<&ClientInfo>,
        old: &ParamValue,
        r: &Result<ParamValue, GraphError>,
    ) {
        match r {
            Ok(_) => {
                let log = self.put_log.read().clone();
                log.record(&e.name, s.def, client, old, &s.value());
            }
            Err(err) => {
                let who = client.map_or_else(String::new, |c| {
                    format!(" by {} {}@{}", c.protocol, c.user, c.host)
                });
                tracing::debug!("put {}{who} refused: {err}", e.name);
            }
        }
    }
}

/// For every slot, the slots of its port whose high limit follows it.
impl LinkHost for PvDirectory {
    fn apply_link(&self, slot: usize, value: f64) {
        let (Some(s), Some(graph)) = (self.slots.get(slot), self.graph.upgrade()) else {
            return;
        };
        if s.def.link == LinkKind::RawInput {
            // An mbbi's raw value: ZRVL is state 0, ONVL state 1; another raw value is none.
            let link = self.links.get(slot);
            let state = link.and_then(|l| l.read_raw(value.trunc() as i64));
            if let Some(state) = state {
                let _ = s.store.set(s.idx, ParamValue::Int(state));
            }
            return;
        }
        // EPICS converts a double to an integer field by truncation.
        let v = match s.def.kind {
            ParamKind::Float64 => ParamValue::Float(value),
            _ if value.is_finite() => ParamValue::Int(value.trunc() as i64),
            _ => return,
        };
        if s.value() == v {
            return;
        }
        if let Err(e) = self.put_and_post(&graph, s, v) {
            tracing::debug!("link {}.{}: {e}", s.port, s.def.name);
        }
        self.post_now(slot);
    }

    fn link_alarm_changed(&self, slot: usize) {
        self.post_now(slot);
    }
}

fn limit_followers(slots: &[ParamSlot]) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new(); slots.len()];
    for (i, s) in slots.iter().enumerate() {
        let Some(src) = s.def.high_limit_from.and_then(|n| s.store.index(n)) else {
            continue;
        };
        let from = slots
            .iter()
            .position(|o| Arc::ptr_eq(&o.store, &s.store) && o.idx == src);
        if let Some(f) = from.and_then(|f| out.get_mut(f)) {
            f.push(i);
        }
    }
    out
}

/// The menu position clients see for an enum value; a value no entry stands for shows as the
/// first position past the menu (clients print the number), never as a wrong entry.
pub fn menu_position(def: &ParamDef, v: &ParamValue) -> i64 {
    let raw = v.as_i64().unwrap_or(0);
    let len = def.choices(false).map_or(0, |c| c.len() as i64);
    def.menu_index(raw).unwrap_or(len)
}

/// The PV suffixes of a parameter and which face each is.
pub fn faces(def: &ParamDef) -> Vec<(String, Face)> {
    match def.access {
        ParamAccess::ReadWrite => vec![
            (def.name.to_string(), Face::Setpoint),
            (format!("{}_RBV", def.name), Face::Readback),
        ],
        ParamAccess::ReadOnly => vec![(format!("{}_RBV", def.name), Face::Readback)],
        ParamAccess::ReadOnlyPlain | ParamAccess::WritePlain => {
            vec![(def.name.to_string(), Face::Setpoint)]
        }
        ParamAccess::ReadOnlyBoth => vec![
            (def.name.to_string(), Face::Setpoint),
            (format!("{}_RBV", def.name), Face::Readback),
        ],
    }
}

/// The running publisher; dropping it stops the thread.
pub struct Publisher {
    dir: Arc<PvDirectory>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.dir.pending.0.lock().stop = true;
        self.dir.pending.1.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
