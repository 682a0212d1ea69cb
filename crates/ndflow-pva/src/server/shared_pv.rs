//! [`SharedPv`]: one process variable served to any number of channels — its type, its current
//! value, an optional PUT handler, and the subscriptions that receive its posts.
//!
//! Posting is a plain (blocking-free by default) call from any thread: the value is stored and
//! offered to each running subscription's queue, and the connections' writers do the rest on the
//! server's runtime. In lossless mode a post first waits until every pipelined subscription has
//! room, so a client's acks back-pressure the producer end to end; a subscription that goes away
//! (client gone, request destroyed) releases the wait at once. A lossless post also writes the
//! update to an idle connection's socket itself (and, while it waits for room, the queued updates
//! an ack lets through), instead of handing it to the connection's writer: see `direct.rs`.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};

use crate::nt::value_fits;
use crate::wire::{BitSet, FieldDesc, Value};

use super::monitor::{Room, Subscription};
use super::put_reply::{ClientId, PutReply};

/// How long [`SharedPv::post`] waits for room in lossless mode.
pub const DEFAULT_LOSSLESS_WAIT: Duration = Duration::from_secs(5);

/// Why a post was not delivered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PostError {
    #[error("lossless post timed out waiting for a subscriber's window")]
    Timeout,
    #[error("value does not match the PV's type")]
    Mismatch,
}

/// PUT handler: gets the PV, the value as the client would have it (current value with the
/// client's fields applied) and the fields the client sent. `Err(message)` refuses the PUT.
pub type PutHandler = dyn Fn(&SharedPv, &Value, &BitSet) -> Result<(), String> + Send + Sync;

/// PUT handler that answers through a [`PutReply`], possibly later and from another thread
/// (busy records). It also learns who sent the PUT.
pub type DeferredPutHandler = dyn Fn(&SharedPv, &Value, &BitSet, &ClientId, PutReply) + Send + Sync;

#[derive(Clone)]
pub(crate) enum Handler {
    Now(Arc<PutHandler>),
    Deferred(Arc<DeferredPutHandler>),
}

struct State {
    current: Value,
    subs: Vec<Arc<Subscription>>,
}

struct Inner {
    desc: Arc<FieldDesc>,
    state: Mutex<State>,
    put: RwLock<Option<Handler>>,
    lossless: AtomicBool,
    room: Arc<Room>,
    /// Serialises posts so that the stored value and the queued updates keep one order.
    post_lock: Mutex<()>,
    overruns: AtomicU64,
    posts: AtomicU64,
    /// Told the live subscription count when a subscription starts.
    on_subscribers: RwLock<Option<SubscriberWatch>>,
}

type SubscriberWatch = Arc<dyn Fn(usize) + Send + Sync>;

/// A PV with shared state; clones are handles to the same PV.
#[derive(Clone)]
pub struct SharedPv {
    inner: Arc<Inner>,
}

impl fmt::Debug for SharedPv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedPv")
            .field("type", &self.inner.desc.type_id())
            .field("subscribers", &self.subscribers())
            .finish()
    }
}

impl SharedPv {
    /// A PV of type `desc` holding `initial` (replaced by the type's default value if it does
    /// not fit the type).
    pub fn new(desc: FieldDesc, initial: Value) -> Self {
        let initial = if value_fits(&desc, &initial) {
            initial
        } else {
            Value::default_for(&desc)
        };
        Self {
            inner: Arc::new(Inner {
                desc: Arc::new(desc),
                state: Mutex::new(State {
                    current: initial,
                    subs: Vec::new(),
                }),
                put: RwLock::new(None),
                lossless: AtomicBool::new(false),
                room: Arc::new(Room::default()),
                post_lock: Mutex::new(()),
                overruns: AtomicU64::new(0),
                posts: AtomicU64::new(0),
                on_subscribers: RwLock::new(None),
            }),
        }
    }

    /// Accept PUTs through `f`. Without a handler a PUT is refused with "read-only". On success
    /// the server replies OK; the handler posts the new value itself (or not).
    pub fn with_put_handler(
        self,
        f: impl Fn(&SharedPv, &Value, &BitSet) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        *self.inner.put.write() = Some(Handler::Now(Arc::new(f)));
        self
    }

    /// Accept PUTs through `f`, which answers each through its [`PutReply`] when the operation
    /// has ended (the client's PUT returns then) and sees the client's identity.
    pub fn with_deferred_put_handler(
        self,
        f: impl Fn(&SharedPv, &Value, &BitSet, &ClientId, PutReply) + Send + Sync + 'static,
    ) -> Self {
        *self.inner.put.write() = Some(Handler::Deferred(Arc::new(f)));
        self
    }

    pub(crate) fn put_handler(&self) -> Option<Handler> {
        self.inner.put.read().clone()
    }

    /// Lossless: posts wait for pipelined subscribers' windows instead of squashing.
    pub fn set_lossless(&self, on: bool) {
        self.inner.lossless.store(on, Ordering::Relaxed);
    }

    pub fn is_lossless(&self) -> bool {
        self.inner.lossless.load(Ordering::Relaxed)
    }

    /// Publish `value`; `changed` marks the fields that changed (empty = everything). See
    /// [`Self::post_deadline`]; a lossless post waits at most [`DEFAULT_LOSSLESS_WAIT`].
    pub fn post(&self, value: Value, changed: &BitSet) -> Result<(), PostError> {
        self.post_deadline(value, changed, Instant::now() + DEFAULT_LOSSLESS_WAIT)
    }

    /// Publish `value`. Latest wins: a subscriber whose queue is full gets the value merged into
    /// its last queued update (counted in [`Self::overruns`]). In lossless mode this first waits
    /// (blocking the calling thread, which must not be one of the server's) until every running
    /// pipelined subscriber has room, or returns [`PostError::Timeout`] at `deadline` without
    /// posting. The value is stored either way except on a type mismatch.
    pub fn post_deadline(
        &self,
        value: Value,
        changed: &BitSet,
        deadline: Instant,
    ) -> Result<(), PostError> {
        if !value_fits(&self.inner.desc, &value) {
            return Err(PostError::Mismatch);
        }
        let all = BitSet::from_bits(&[0]);
        let changed = if changed.is_empty() { &all } else { changed };
        let _serial = self.inner.post_lock.lock();
        let lossless = self.is_lossless();
        let timed_out = lossless && !self.wait_for_room(deadline);
        let mut st = self.inner.state.lock();
        st.current = value;
        if timed_out {
            return Err(PostError::Timeout);
        }
        st.subs.retain(|s| !s.is_closed());
        let mut squashed = 0;
        let mut direct = Vec::new();
        for s in &st.subs {
            // Lossless: write it ourselves where the connection is idle (no hand-off to its
            // writer task); such a post may block that long anyway.
            if lossless {
                let b = s.take_direct(Some((&st.current, changed)));
                direct.extend(b.write);
                if b.taken {
                    continue;
                }
            }
            if s.offer(&st.current, changed) {
                squashed += 1;
            }
        }
        drop(st);
        for (guard, out, msgs) in direct {
            out.write_blocking(guard, msgs, deadline);
        }
        self.inner.posts.fetch_add(1, Ordering::Relaxed);
        self.inner.overruns.fetch_add(squashed, Ordering::Relaxed);
        Ok(())
    }

    /// True when every subscription has room; false if `deadline` passed first. Meanwhile it
    /// writes the queued updates their windows allow itself where the socket is free.
    fn wait_for_room(&self, deadline: Instant) -> bool {
        loop {
            let seen = self.inner.room.generation();
            let subs: Vec<Arc<Subscription>> = self.inner.state.lock().subs.clone();
            for s in &subs {
                if let Some((guard, out, msgs)) = s.take_direct(None).write {
                    out.write_blocking(guard, msgs, deadline);
                }
            }
            if subs.iter().all(|s| s.has_room()) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                // Acks may have gone to this poster: let the writers send what is queued.
                for s in &subs {
                    if s.sendable() {
                        s.wake_writer();
                    }
                }
                return false;
            }
            // Bounded wait so a missed wake-up can only cost a few milliseconds.
            self.inner
                .room
                .wait(seen, (deadline - now).min(Duration::from_millis(50)));
        }
    }

    /// The value last posted (a cheap clone: arrays are shared).
    pub fn current(&self) -> Value {
        self.inner.state.lock().current.clone()
    }

    /// Set the value without notifying anyone (e.g. before the first client).
    pub fn set_current(&self, value: Value) -> Result<(), PostError> {
        if !value_fits(&self.inner.desc, &value) {
            return Err(PostError::Mismatch);
        }
        self.inner.state.lock().current = value;
        Ok(())
    }

    pub fn desc(&self) -> FieldDesc {
        (*self.inner.desc).clone()
    }

    pub(crate) fn desc_arc(&self) -> Arc<FieldDesc> {
        Arc::clone(&self.inner.desc)
    }

    pub(crate) fn room(&self) -> Arc<Room> {
        Arc::clone(&self.inner.room)
    }

    /// Live subscriptions (running or not).
    pub fn subscribers(&self) -> usize {
        self.inner
            .state
            .lock()
            .subs
            .iter()
            .filter(|s| !s.is_closed())
            .count()
    }

    /// Updates squashed so far for latest-wins subscribers (one per subscriber per squash).
    pub fn overruns(&self) -> u64 {
        self.inner.overruns.load(Ordering::Relaxed)
    }

    /// Posts accepted so far.
    pub fn posts(&self) -> u64 {
        self.inner.posts.load(Ordering::Relaxed)
    }

    pub(crate) fn subscribe(&self, sub: Arc<Subscription>) {
        let mut st = self.inner.state.lock();
        st.subs.retain(|s| !s.is_closed());
        st.subs.push(sub);
    }

    /// Start a subscription with the current value, under the state lock so that no post can
    /// slip between reading the value and the subscription starting.
    pub(crate) fn start(&self, sub: &Subscription) {
        let count = {
            let st = self.inner.state.lock();
            sub.start(&st.current);
            st.subs.iter().filter(|s| !s.is_closed()).count()
        };
        let watch = self.inner.on_subscribers.read().clone();
        if let Some(f) = watch {
            f(count);
        }
    }

    /// Calls `f` with the live subscription count each time a subscription starts, so a
    /// publisher can show its subscribers before it posts anything (a lossless scale-out head
    /// waits for its writers that way). Closed subscriptions show at the next post.
    pub fn on_subscribers_changed(&self, f: impl Fn(usize) + Send + Sync + 'static) {
        *self.inner.on_subscribers.write() = Some(Arc::new(f));
    }

    /// Whether two handles name the same PV.
    pub fn same(&self, other: &SharedPv) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}
