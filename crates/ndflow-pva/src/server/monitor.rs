//! One MONITOR subscription: a bounded queue between a PV's posts and a connection's
//! writer, the pipeline window, and squashing.
//!
//! Posts [`offer`](Subscription::offer) updates; when the queue holds `queueSize` entries the new
//! value is merged into the last one (latest wins) and the fields that changed twice are marked
//! in its overrun set, as pvxs does. The connection's writer asks for the next message only when
//! it is ready to write ([`Subscription::next_message`]), so a slow client costs squashed updates,
//! never memory, and never blocks a poster. With pipelining the writer also stops when the
//! client's window (its acks) is used up; a lossless poster waits for [`Subscription::has_room`].

use std::collections::VecDeque;
use std::sync::{Arc, Weak};

use parking_lot::{Condvar, Mutex};
use tokio::sync::Notify;

use crate::request::apply_mask;
use crate::transport::OutMessage;
use crate::wire::{BitSet, ByteOrder, EncodeError, FieldDesc, Value};

use crate::transport::cmd::MONITOR as CMD_MONITOR;

use super::direct::SockOut;

/// Wakes lossless posters when a subscription frees room or goes away (one per PV).
#[derive(Default)]
pub(crate) struct Room {
    /// (generation, posters waiting).
    state: Mutex<(u64, usize)>,
    cv: Condvar,
}

impl Room {
    pub(crate) fn generation(&self) -> u64 {
        self.state.lock().0
    }

    pub(crate) fn bump(&self) {
        let mut st = self.state.lock();
        st.0 += 1;
        let waiting = st.1 > 0;
        // Unlocked first, so the woken poster does not block on this mutex; and a condvar
        // notify is a futex syscall even with nobody waiting, so skip it then.
        drop(st);
        if waiting {
            self.cv.notify_all();
        }
    }

    /// Bump only if a poster waits; true if one did.
    pub(crate) fn bump_if_waiting(&self) -> bool {
        let mut st = self.state.lock();
        if st.1 == 0 {
            return false;
        }
        st.0 += 1;
        drop(st);
        self.cv.notify_all();
        true
    }

    /// Wait until the generation differs from `seen` or `timeout` passes.
    pub(crate) fn wait(&self, seen: u64, timeout: std::time::Duration) {
        let mut st = self.state.lock();
        if st.0 != seen {
            return;
        }
        st.1 += 1;
        self.cv.wait_for(&mut st, timeout);
        st.1 -= 1;
    }
}

struct Update {
    value: Value,
    changed: BitSet,
    overrun: BitSet,
}

struct SubState {
    queue: VecDeque<Update>,
    queue_size: usize,
    pipeline: bool,
    /// Updates the client can still take (pipeline only).
    window: u32,
    running: bool,
    closed: bool,
}

/// Monitor options taken from the INIT request.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MonitorParams {
    pub queue_size: u32,
    pub pipeline: bool,
    pub initial_window: u32,
}

pub(crate) struct Subscription {
    ioid: u32,
    desc: Arc<FieldDesc>,
    mask: Option<BitSet>,
    wake: Arc<Notify>,
    room: Arc<Room>,
    /// The connection's socket, for direct writes by a lossless poster (None in the fuzzer).
    /// Weak: a subscription left in a quiet PV's list after its client has gone must not keep
    /// the socket open (it stayed in CLOSE_WAIT until the PV's next post).
    out: Option<Weak<SockOut>>,
    st: Mutex<SubState>,
}

/// Updates a lossless poster writes itself ([`Subscription::take_direct`]).
pub(crate) struct DirectBatch {
    /// The socket, held, and the messages to write on it in order.
    pub(crate) write: Option<(SockGuard, Arc<SockOut>, Encoded)>,
    /// The new value was taken (to be written, or it changed nothing the client asked for);
    /// false: offer it to the queue as before.
    pub(crate) taken: bool,
}

pub(crate) type SockGuard = tokio::sync::OwnedMutexGuard<tokio::net::tcp::OwnedWriteHalf>;

/// Messages to write in order (one that failed to encode is counted and skipped).
pub(crate) type Encoded = Vec<Result<OutMessage, EncodeError>>;

impl Subscription {
    pub(crate) fn new(
        ioid: u32,
        desc: Arc<FieldDesc>,
        mask: Option<BitSet>,
        params: MonitorParams,
        wake: Arc<Notify>,
        room: Arc<Room>,
        out: Option<Arc<SockOut>>,
    ) -> Self {
        Self {
            ioid,
            desc,
            mask,
            wake,
            room,
            out: out.as_ref().map(Arc::downgrade),
            st: Mutex::new(SubState {
                queue: VecDeque::new(),
                queue_size: params.queue_size.max(1) as usize,
                pipeline: params.pipeline,
                window: params.initial_window,
                running: false,
                closed: false,
            }),
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.st.lock().closed
    }

    /// The connection's socket while the connection lasts.
    fn socket(&self) -> Option<Arc<SockOut>> {
        self.out.as_ref().and_then(Weak::upgrade)
    }

    /// Whether a lossless poster may offer now without squashing: always true unless this is a
    /// running pipelined subscription whose queue is full.
    pub(crate) fn has_room(&self) -> bool {
        let st = self.st.lock();
        st.closed || !st.running || !st.pipeline || st.queue.len() < st.queue_size
    }

    /// Updates queued now.
    pub(crate) fn queued(&self) -> usize {
        self.st.lock().queue.len()
    }

    /// Whether the writer has an update to send now (queued, running, window open).
    pub(crate) fn sendable(&self) -> bool {
        let st = self.st.lock();
        !st.closed && st.running && !st.queue.is_empty() && (!st.pipeline || st.window > 0)
    }

    /// For a lossless poster: take what it may write itself now, keeping the order and the flow
    /// control of the queued path. With the connection's socket free (nobody writing, nothing
    /// half written) it takes the queued updates the window allows, then `new` if nothing is
    /// left queued before it and the window still allows; the caller offers `new` otherwise.
    pub(crate) fn take_direct(&self, new: Option<(&Value, &BitSet)>) -> DirectBatch {
        let none = DirectBatch {
            write: None,
            taken: false,
        };
        let Some(out) = self.socket().filter(|o| o.enabled()) else {
            return none;
        };
        let mut st = self.st.lock();
        let open = |st: &SubState| !st.pipeline || st.window > 0;
        if st.closed || !st.running || !open(&st) || (st.queue.is_empty() && new.is_none()) {
            return none;
        }
        let Some(guard) = out.try_claim() else {
            return none;
        };
        let mut take = Vec::new();
        while open(&st) {
            let Some(u) = st.queue.pop_front() else {
                break;
            };
            let changed = apply_mask(&self.desc, &u.changed, self.mask.as_ref());
            if changed.is_empty() {
                continue;
            }
            if st.pipeline {
                st.window -= 1;
            }
            let overrun = apply_mask(&self.desc, &u.overrun, self.mask.as_ref());
            take.push((u.value, changed, overrun));
        }
        let mut taken = false;
        if let Some((value, changed)) = new {
            if st.queue.is_empty() && open(&st) {
                taken = true;
                let changed = apply_mask(&self.desc, changed, self.mask.as_ref());
                if !changed.is_empty() {
                    if st.pipeline {
                        st.window -= 1;
                    }
                    take.push((value.clone(), changed, BitSet::new()));
                }
            }
        }
        drop(st);
        if take.is_empty() {
            return DirectBatch { write: None, taken };
        }
        let msgs = take
            .into_iter()
            .map(|(value, changed, overrun)| self.encode(out.order, &value, &changed, &overrun))
            .collect();
        DirectBatch {
            write: Some((guard, out, msgs)),
            taken,
        }
    }

    fn encode(
        &self,
        order: ByteOrder,
        value: &Value,
        changed: &BitSet,
        overrun: &BitSet,
    ) -> Result<OutMessage, EncodeError> {
        OutMessage::build(CMD_MONITOR, true, order, |w| {
            w.u32(self.ioid);
            w.u8(0x00);
            w.bitset(changed)?;
            value.encode_partial(&self.desc, changed, w)?;
            w.bitset(overrun)
        })
    }

    /// Wake the connection's writer (a poster gave up with updates still queued).
    pub(crate) fn wake_writer(&self) {
        self.wake.notify_one();
    }

    /// Queue an update; returns true if it had to be squashed into the last queued one.
    pub(crate) fn offer(&self, value: &Value, changed: &BitSet) -> bool {
        let mut st = self.st.lock();
        if st.closed || !st.running {
            return false;
        }
        let squashed = if st.queue.len() < st.queue_size {
            st.queue.push_back(Update {
                value: value.clone(),
                changed: changed.clone(),
                overrun: BitSet::new(),
            });
            false
        } else if let Some(last) = st.queue.back_mut() {
            // Latest wins: fields changed again since the last queued update are overruns.
            let mut twice = BitSet::new();
            for b in changed.iter() {
                if last.changed.get(b) {
                    twice.set(b);
                }
            }
            last.overrun.union_with(&twice);
            last.changed.union_with(changed);
            last.value = value.clone();
            true
        } else {
            false
        };
        drop(st);
        self.wake.notify_one();
        squashed
    }

    /// Client start (0x44): begin with the current value, every field marked.
    pub(crate) fn start(&self, current: &Value) {
        let mut st = self.st.lock();
        if st.closed || st.running {
            return;
        }
        st.running = true;
        st.queue.clear();
        st.queue.push_back(Update {
            value: current.clone(),
            changed: BitSet::from_bits(&[0]),
            overrun: BitSet::new(),
        });
        drop(st);
        self.wake.notify_one();
    }

    /// Client stop (0x04): nothing more is sent until the next start.
    pub(crate) fn stop(&self) {
        let mut st = self.st.lock();
        st.running = false;
        st.queue.clear();
        drop(st);
        self.room.bump();
    }

    /// Pipeline ack (0x80): the client has room for `n` more updates.
    pub(crate) fn ack(&self, n: u32) {
        let mut st = self.st.lock();
        st.window = st.window.saturating_add(n);
        drop(st);
        // A lossless poster waiting for room writes the queued updates itself when woken (one
        // wake-up instead of the writer's and then the poster's); else the writer sends them.
        let direct = self.socket().is_some_and(|o| o.enabled());
        if direct && self.room.bump_if_waiting() {
            return;
        }
        self.wake.notify_one();
    }

    /// The subscription is gone (destroyed, channel destroyed, connection lost).
    pub(crate) fn close(&self) {
        let mut st = self.st.lock();
        st.closed = true;
        st.running = false;
        st.queue.clear();
        drop(st);
        self.room.bump();
    }

    /// The next update to write, if one is queued and the window allows; called by the writer
    /// only when it is ready to write, so that anything else squashes in the queue meanwhile.
    pub(crate) fn next_message(&self, order: ByteOrder) -> Option<Result<OutMessage, EncodeError>> {
        loop {
            let mut st = self.st.lock();
            if st.closed || !st.running || (st.pipeline && st.window == 0) {
                return None;
            }
            let u = st.queue.pop_front()?;
            let changed = apply_mask(&self.desc, &u.changed, self.mask.as_ref());
            if changed.is_empty() {
                // Nothing the client asked for changed; costs no window.
                continue;
            }
            if st.pipeline {
                st.window -= 1;
            }
            // A lossless poster waiting on a full queue is woken once half of it is free, not
            // at every update taken: it then posts several frames per wake-up, and the updates
            // still queued keep this writer busy meanwhile.
            let wake = st.queue.len() <= st.queue_size / 2;
            drop(st);
            if wake {
                self.room.bump();
            }
            let overrun = apply_mask(&self.desc, &u.overrun, self.mask.as_ref());
            return Some(self.encode(order, &u.value, &changed, &overrun));
        }
    }
}
