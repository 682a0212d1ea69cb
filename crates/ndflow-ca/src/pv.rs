//! Served PVs: [`CaPv`] (value, alarm, timestamp, metadata, put handler), [`PutCompletion`],
//! and the [`PvProvider`] the server asks for names.
//!
//! A post swaps an `Arc<Snapshot>` and hands it to every live subscription; subscriptions keep
//! a few snapshots each (latest wins; one for frames), so posting never waits for a client.
//! A frame is put in wire order (big-endian) at most once per snapshot, by the first sender,
//! and shared by every other subscription and read of it.

use std::sync::{Arc, OnceLock, Weak};
use std::time::SystemTime;

use parking_lot::{Mutex, RwLock};

use crate::header::{DBE_ALARM, DBE_LOG, DBE_PROPERTY, DBE_VALUE};
use crate::value::{CaValue, NativeType};

/// What GR/CTRL DBRs and the record fields (.EGU, .PREC, .DESC ...) report.
#[derive(Clone, Debug, PartialEq)]
pub struct PvMeta {
    pub native: NativeType,
    /// Element count the channel advertises (1 for scalars; the NELM of a waveform).
    pub max_count: usize,
    pub units: String,
    pub precision: i16,
    pub display_low: f64,
    pub display_high: f64,
    pub control_low: f64,
    pub control_high: f64,
    /// Alarm limits (.HIHI .HIGH .LOW .LOLO; DBR_GR/DBR_CTRL's alarm and warning limits).
    pub alarm_limits: AlarmLimits,
    /// At most 16 of at most 25 chars go on the wire.
    pub enum_strings: Vec<String>,
    /// .DESC (at most 40 chars).
    pub description: String,
    /// .RTYP, e.g. "ao", "mbbo", "waveform", "busy".
    pub record_type: String,
    pub writable: bool,
}

/// A record's level alarm limits; 0 where none is set, as in a record's fields.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AlarmLimits {
    pub hihi: f64,
    pub high: f64,
    pub low: f64,
    pub lolo: f64,
}

impl PvMeta {
    /// A scalar of `native` type with empty metadata, writable; record type from the type
    /// ("ai"-like defaults: ao, longout, mbbo, stringout).
    pub fn scalar(native: NativeType) -> PvMeta {
        PvMeta::array(native, 1)
    }

    /// A waveform of at most `max_count` elements (a scalar when `max_count` is 1).
    pub fn array(native: NativeType, max_count: usize) -> PvMeta {
        let record_type = if max_count > 1 {
            "waveform"
        } else {
            match native {
                NativeType::String => "stringout",
                NativeType::Enum => "mbbo",
                NativeType::Double | NativeType::Float => "ao",
                _ => "longout",
            }
        };
        PvMeta {
            native,
            max_count: max_count.max(1),
            units: String::new(),
            precision: 0,
            display_low: 0.0,
            display_high: 0.0,
            control_low: 0.0,
            control_high: 0.0,
            alarm_limits: AlarmLimits::default(),
            enum_strings: Vec::new(),
            description: String::new(),
            record_type: record_type.into(),
            writable: true,
        }
    }
}

/// One state of a PV as subscribers see it.
#[derive(Clone, Debug)]
pub(crate) struct Snapshot {
    pub value: CaValue,
    pub status: u16,
    pub severity: u16,
    pub time: SystemTime,
    pub meta: Arc<PvMeta>,
    /// The value's elements in wire order, made by the first sender that needs them (large
    /// arrays only) and then shared by every subscription and read of this state, whatever
    /// DBR family they ask for: a frame is byte-swapped once per post, not once per client.
    pub wire: OnceLock<Arc<WireValues>>,
}

impl Snapshot {
    pub(crate) fn new(value: CaValue, time: SystemTime, meta: Arc<PvMeta>) -> Snapshot {
        Snapshot {
            value,
            status: 0,
            severity: 0,
            time,
            meta,
            wire: OnceLock::new(),
        }
    }
}

/// Elements already big-endian, kept in their own element type so that they stay aligned.
pub(crate) enum WireValues {
    /// Bytes need no swap: the value's own buffer.
    Same(Arc<dyn AsRef<[u8]> + Send + Sync>),
    Bytes(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    U64(Vec<u64>),
}

impl std::fmt::Debug for WireValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WireValues({} bytes)", self.as_bytes().len())
    }
}

impl WireValues {
    pub(crate) fn as_bytes(&self) -> &[u8] {
        match self {
            WireValues::Same(b) => (**b).as_ref(),
            WireValues::Bytes(v) => v,
            WireValues::U16(v) => bytemuck::cast_slice(v),
            WireValues::U32(v) => bytemuck::cast_slice(v),
            WireValues::U64(v) => bytemuck::cast_slice(v),
        }
    }
}

/// Receives a PV's changes (a server subscription). `notify` must be quick and never block.
pub(crate) trait Watcher: Send + Sync {
    fn notify(&self, events: u16, snap: &Arc<Snapshot>);
}

type PutFn = dyn Fn(&CaPv, CaValue, PutCompletion) + Send + Sync;

struct Inner {
    state: Mutex<Arc<Snapshot>>,
    /// Also serialises notifications, so subscribers see posts in order.
    watchers: Mutex<Vec<Weak<dyn Watcher>>>,
    handler: RwLock<Option<Arc<PutFn>>>,
}

/// A served PV. Cloning shares it.
#[derive(Clone)]
pub struct CaPv {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for CaPv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.inner.state.lock();
        f.debug_struct("CaPv")
            .field("value", &s.value)
            .field("record_type", &s.meta.record_type)
            .finish()
    }
}

impl CaPv {
    pub fn new(meta: PvMeta, initial: CaValue) -> CaPv {
        CaPv {
            inner: Arc::new(Inner {
                state: Mutex::new(Arc::new(Snapshot::new(
                    initial,
                    SystemTime::now(),
                    Arc::new(meta),
                ))),
                watchers: Mutex::new(Vec::new()),
                handler: RwLock::new(None),
            }),
        }
    }

    /// Store `value` and notify monitors (DBE_VALUE | DBE_LOG); timestamp = now.
    pub fn post(&self, value: CaValue) {
        self.post_with_time(value, SystemTime::now());
    }

    pub fn post_with_time(&self, value: CaValue, t: SystemTime) {
        self.update(DBE_VALUE | DBE_LOG, |s| {
            s.value = value;
            s.time = t;
            s.wire = OnceLock::new();
        });
    }

    /// Store `value` with its alarm (timestamp = now) in one update: monitors see the value
    /// and its severity together, and DBE_ALARM subscribers only when the alarm changed.
    pub fn post_with_alarm(&self, value: CaValue, status: u16, severity: u16) {
        let t = SystemTime::now();
        self.update_with(|s| {
            let mut events = DBE_VALUE | DBE_LOG;
            if (s.status, s.severity) != (status, severity) {
                events |= DBE_ALARM;
            }
            s.value = value;
            s.time = t;
            s.wire = OnceLock::new();
            s.status = status;
            s.severity = severity;
            events
        });
    }

    /// Set the alarm status and severity (notifies DBE_ALARM subscribers when it changes).
    pub fn set_alarm(&self, status: u16, severity: u16) {
        self.update(DBE_ALARM, |s| {
            s.status = status;
            s.severity = severity;
        });
    }

    /// Replace the metadata (notifies DBE_PROPERTY subscribers).
    pub fn set_meta(&self, meta: PvMeta) {
        self.update(DBE_PROPERTY, |s| s.meta = Arc::new(meta));
    }

    /// (value, alarm status, alarm severity, timestamp).
    pub fn get(&self) -> (CaValue, u16, u16, SystemTime) {
        let s = self.snapshot();
        (s.value.clone(), s.status, s.severity, s.time)
    }

    pub fn meta(&self) -> Arc<PvMeta> {
        Arc::clone(&self.snapshot().meta)
    }

    /// Handle client writes with `h` instead of storing them. The handler runs on the server's
    /// runtime: it must return quickly, and it is responsible for posting the new value. For
    /// work that takes time, keep the [`PutCompletion`] and complete it later from another
    /// thread (a WRITE_NOTIFY reply goes out only then).
    pub fn with_put_handler(
        self,
        h: impl Fn(&CaPv, CaValue, PutCompletion) + Send + Sync + 'static,
    ) -> CaPv {
        *self.inner.handler.write() = Some(Arc::new(h));
        self
    }

    /// A client write of `value` (already of the native type): the put handler's business, or
    /// stored and completed at once when there is none.
    pub fn put(&self, value: CaValue, completion: PutCompletion) {
        let h = self.inner.handler.read().clone();
        match h {
            Some(h) => h(self, value, completion),
            None => {
                self.post(value);
                completion.done();
            }
        }
    }

    pub(crate) fn snapshot(&self) -> Arc<Snapshot> {
        Arc::clone(&self.inner.state.lock())
    }

    /// Register a subscriber; it is dropped from the list once the `Arc` is gone.
    #[cfg(test)]
    pub(crate) fn watch(&self, w: Weak<dyn Watcher>) {
        let mut ws = self.inner.watchers.lock();
        ws.retain(|w| w.strong_count() > 0);
        ws.push(w);
    }

    /// Register a subscriber and hand `initial` the current state, atomically with respect to
    /// posts (so the first update a subscriber sees is never older than a later one).
    pub(crate) fn watch_initial(&self, w: Weak<dyn Watcher>, initial: impl FnOnce(&Arc<Snapshot>)) {
        let mut ws = self.inner.watchers.lock();
        ws.retain(|w| w.strong_count() > 0);
        ws.push(w);
        initial(&self.snapshot());
    }

    fn update(&self, events: u16, f: impl FnOnce(&mut Snapshot)) {
        self.update_with(|s| {
            f(s);
            events
        });
    }

    /// [`Self::update`] where the change decides which events it is.
    fn update_with(&self, f: impl FnOnce(&mut Snapshot) -> u16) {
        let ws = self.inner.watchers.lock();
        let (snap, events) = {
            let mut st = self.inner.state.lock();
            let mut s = Snapshot::clone(&st);
            let events = f(&mut s);
            *st = Arc::new(s);
            (Arc::clone(&st), events)
        };
        for w in ws.iter() {
            if let Some(w) = w.upgrade() {
                w.notify(events, &snap);
            }
        }
    }
}

type CompleteFn = Box<dyn FnOnce(Result<(), String>) + Send>;

/// Given to a put handler, which (or any thread, later) calls exactly one of [`done`] or
/// [`fail`]. For WRITE_NOTIFY the reply goes out when it is called; for plain WRITE the result
/// is only logged. Dropping it without calling either = failure (ECA_PUTFAIL).
///
/// [`done`]: PutCompletion::done
/// [`fail`]: PutCompletion::fail
pub struct PutCompletion {
    notify: bool,
    f: Option<CompleteFn>,
    /// The writer's (host, user) as the server knows them.
    client: Option<(String, String)>,
}

impl PutCompletion {
    /// A completion that calls `f` with the outcome (for servers and tests).
    pub fn new(notify: bool, f: impl FnOnce(Result<(), String>) + Send + 'static) -> Self {
        Self {
            notify,
            f: Some(Box::new(f)),
            client: None,
        }
    }

    /// Names the client that writes (its host and user, from HOST_NAME/CLIENT_NAME).
    pub fn with_client(mut self, host: String, user: String) -> Self {
        self.client = Some((host, user));
        self
    }

    /// (host, user) of the client that writes, when the server named it.
    pub fn client(&self) -> Option<(&str, &str)> {
        self.client.as_ref().map(|(h, u)| (h.as_str(), u.as_str()))
    }

    pub fn done(mut self) {
        if let Some(f) = self.f.take() {
            f(Ok(()));
        }
    }

    pub fn fail(mut self, reason: String) {
        if let Some(f) = self.f.take() {
            f(Err(reason));
        }
    }

    /// Whether the client waits for the outcome (WRITE_NOTIFY).
    pub fn is_notify(&self) -> bool {
        self.notify
    }
}

impl Drop for PutCompletion {
    fn drop(&mut self) {
        if let Some(f) = self.f.take() {
            f(Err("put handler dropped its completion".into()));
        }
    }
}

/// What a client may do with a PV.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// The channel is not found for that client.
    None,
    Read,
    ReadWrite,
}

/// Where the server finds PVs.
pub trait PvProvider: Send + Sync + 'static {
    /// The PV of a record name (without a field suffix).
    fn lookup(&self, name: &str) -> Option<CaPv>;
    /// Access rights for a client (host and user from HOST_NAME / CLIENT_NAME).
    fn access(&self, _pv: &str, _host: &str, _user: &str) -> Access {
        Access::ReadWrite
    }
}

/// A name → PV map, changeable while serving.
#[derive(Default)]
pub struct StaticProvider {
    pvs: RwLock<std::collections::HashMap<String, CaPv>>,
}

impl StaticProvider {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add(&self, name: impl Into<String>, pv: CaPv) {
        self.pvs.write().insert(name.into(), pv);
    }

    pub fn remove(&self, name: &str) -> Option<CaPv> {
        self.pvs.write().remove(name)
    }
}

impl PvProvider for StaticProvider {
    fn lookup(&self, name: &str) -> Option<CaPv> {
        self.pvs.read().get(name).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU16, Ordering};

    struct Count(AtomicU16);
    impl Watcher for Count {
        fn notify(&self, events: u16, _snap: &Arc<Snapshot>) {
            self.0.fetch_or(events, Ordering::Relaxed);
        }
    }

    #[test]
    fn post_notifies_and_dead_watchers_go() {
        let pv = CaPv::new(
            PvMeta::scalar(NativeType::Double),
            CaValue::Double(vec![1.0]),
        );
        let w: Arc<dyn Watcher> = Arc::new(Count(AtomicU16::new(0)));
        pv.watch(Arc::downgrade(&w));
        pv.post(CaValue::Double(vec![2.0]));
        pv.set_alarm(1, 2);
        assert_eq!(pv.get().0, CaValue::Double(vec![2.0]));
        assert_eq!((pv.get().1, pv.get().2), (1, 2));
        drop(w);
        pv.set_meta(PvMeta::scalar(NativeType::Double));
        pv.watch(Arc::downgrade(
            &(Arc::new(Count(AtomicU16::new(0))) as Arc<dyn Watcher>),
        ));
        assert_eq!(pv.inner.watchers.lock().len(), 1);
    }

    #[test]
    fn post_with_alarm_adds_alarm_events_only_on_change() {
        let pv = CaPv::new(PvMeta::scalar(NativeType::Long), CaValue::Long(vec![0]));
        let w = Arc::new(Count(AtomicU16::new(0)));
        let dyn_w: Arc<dyn Watcher> = w.clone();
        pv.watch(Arc::downgrade(&dyn_w));
        pv.post_with_alarm(CaValue::Long(vec![1]), 7, 2);
        assert_eq!(
            w.0.swap(0, Ordering::Relaxed),
            DBE_VALUE | DBE_LOG | DBE_ALARM
        );
        assert_eq!((pv.get().1, pv.get().2), (7, 2));
        pv.post_with_alarm(CaValue::Long(vec![2]), 7, 2);
        assert_eq!(w.0.swap(0, Ordering::Relaxed), DBE_VALUE | DBE_LOG);
        pv.post_with_alarm(CaValue::Long(vec![0]), 0, 0);
        assert_eq!(
            w.0.swap(0, Ordering::Relaxed),
            DBE_VALUE | DBE_LOG | DBE_ALARM
        );
        assert_eq!(pv.get(), (CaValue::Long(vec![0]), 0, 0, pv.get().3));
    }

    #[test]
    fn completion_dropped_is_failure() {
        let (tx, rx) = std::sync::mpsc::channel();
        let c = PutCompletion::new(true, move |r| tx.send(r).unwrap_or(()));
        assert!(c.is_notify());
        drop(c);
        assert!(rx.recv().unwrap().is_err());
    }

    #[test]
    fn put_without_handler_stores() {
        let pv = CaPv::new(PvMeta::scalar(NativeType::Long), CaValue::Long(vec![0]));
        let (tx, rx) = std::sync::mpsc::channel();
        pv.put(
            CaValue::Long(vec![5]),
            PutCompletion::new(false, move |r| tx.send(r).unwrap_or(())),
        );
        assert_eq!(rx.recv().unwrap(), Ok(()));
        assert_eq!(pv.get().0, CaValue::Long(vec![5]));
    }
}
