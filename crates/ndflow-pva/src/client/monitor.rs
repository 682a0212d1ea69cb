//! MONITOR subscriptions: a task that finds the channel, subscribes (pipelined or not),
//! forwards updates to the application's queue, and re-subscribes after a disconnect.
//!
//! Pipelining back-pressures end to end: the server may have at most `queue_size` updates
//! un-acknowledged, and we acknowledge only as the application *consumes* them
//! ([`Monitor::recv`]), in batches of `ack_any`. Without pipelining the server sends freely and
//! the local queue keeps at most `queue_size` updates, squashing the newest into the last one
//! (latest wins, overrun bits set) rather than growing.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex, MutexGuard};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::request;
use crate::wire::{BitSet, FieldDesc, Value};

use super::connection::{Connection, OpMsg};
use super::ctx::{ChannelRef, Ctx};
use super::ops::OpGuard;
use super::proto::{self, cmd, sub, OpEvent, OpKind};
use super::ClientError;

/// How to subscribe.
#[derive(Clone, Debug)]
pub struct MonitorOptions {
    /// Field selection (and extra options) as a pvRequest string: "", "field(value)",
    /// "field(value,alarm)record[ackAny=2]".
    pub request: String,
    /// Updates the client buffers (and, pipelined, the server's send window). At least 1; 2 when
    /// pipelining.
    pub queue_size: u32,
    /// Ask for `record._options.pipeline=true` (flow control by acknowledgements).
    pub pipeline: bool,
    /// Acknowledge after this many consumed updates; default half the queue.
    pub ack_any: Option<u32>,
}

impl Default for MonitorOptions {
    fn default() -> Self {
        Self {
            request: String::new(),
            queue_size: request::DEFAULT_QUEUE_SIZE,
            pipeline: false,
            ack_any: None,
        }
    }
}

/// What a subscription delivers.
#[derive(Clone, Debug)]
pub enum MonitorEvent {
    /// Subscribed (again); the type of the values that follow.
    Connected(Arc<FieldDesc>),
    /// One update: the whole value (fields not in `changed` keep their last values), the fields
    /// that changed, and those the server squashed (overran) since the previous update.
    Data {
        value: Value,
        changed: BitSet,
        overrun: BitSet,
    },
    /// Connection or channel lost; the monitor searches and re-subscribes by itself.
    Disconnected,
    /// The server ended the subscription; nothing more will come.
    Finished,
    /// The server refused the subscription (e.g. a bad pvRequest); nothing more will come.
    Failed(String),
}

/// Counters of one subscription.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MonitorStats {
    /// Updates received from the server.
    pub updates: u64,
    /// Updates whose overrun BitSet was non-empty (the server squashed values).
    pub overrun_updates: u64,
    /// Message bytes of the updates received.
    pub bytes: u64,
    /// Updates merged locally because the application's queue was full.
    pub squashed: u64,
    /// Pipeline acknowledgements sent.
    pub acks_sent: u64,
    /// Successful subscriptions (1 + reconnects).
    pub connects: u64,
    /// Updates handed to the application.
    pub consumed: u64,
    /// Updates that changed nothing (not handed to the application).
    pub empty: u64,
}

struct Item {
    ev: MonitorEvent,
    gen: u64,
    /// Server updates this item stands for (more than one after a local squash).
    n: u32,
}

struct AckTarget {
    conn: Arc<Connection>,
    sid: u32,
    ioid: u32,
    gen: u64,
}

struct Queue {
    items: VecDeque<Item>,
    data_items: usize,
    limit: usize,
    pipeline: bool,
    ack_any: u32,
    unacked: u32,
    target: Option<AckTarget>,
    desc: Option<Arc<FieldDesc>>,
    stats: MonitorStats,
    ended: bool,
    /// Threads blocked in [`Shared::pop`]: a condvar notify is a futex syscall even when
    /// nobody waits, so the reader task notifies only when someone does.
    waiting: usize,
}

enum Pop {
    Event(MonitorEvent),
    /// Finished or failed, and every event taken.
    Ended,
    /// Nothing before the deadline.
    Empty,
}

pub(crate) struct Shared {
    q: Mutex<Queue>,
    cv: Condvar,
}

impl Shared {
    /// Release the queue and wake the consumers blocked in [`Self::pop`], if any.
    fn wake(&self, q: MutexGuard<'_, Queue>) {
        let waiting = q.waiting > 0;
        drop(q);
        if waiting {
            self.cv.notify_all();
        }
    }

    fn push(&self, ev: MonitorEvent, gen: u64) {
        let mut q = self.q.lock();
        if matches!(ev, MonitorEvent::Finished | MonitorEvent::Failed(_)) {
            q.ended = true;
        }
        q.items.push_back(Item { ev, gen, n: 0 });
        self.wake(q);
    }

    fn connected(&self, desc: Arc<FieldDesc>, target: AckTarget) {
        let mut q = self.q.lock();
        let gen = target.gen;
        q.unacked = 0;
        q.target = Some(target);
        q.desc = Some(Arc::clone(&desc));
        q.stats.connects += 1;
        q.items.push_back(Item {
            ev: MonitorEvent::Connected(desc),
            gen,
            n: 0,
        });
        self.wake(q);
    }

    fn lost(&self) {
        self.q.lock().target = None;
    }

    fn update(&self, value: Value, changed: BitSet, overrun: BitSet, bytes: usize, gen: u64) {
        let mut q = self.q.lock();
        q.stats.updates += 1;
        q.stats.bytes += bytes as u64;
        if !overrun.is_empty() {
            q.stats.overrun_updates += 1;
        }
        if changed.is_empty() && overrun.is_empty() {
            // pvDatabase (pvAccessCPP) sends empty updates after the first; they carry nothing
            // for the application but still used up the window, so count them as consumed.
            q.stats.empty += 1;
            self.ack(&mut q, gen, 1);
            return;
        }
        if q.data_items >= q.limit {
            if let Some(Item {
                ev:
                    MonitorEvent::Data {
                        value: v,
                        changed: c,
                        overrun: o,
                    },
                gen: g,
                n,
            }) = q.items.back_mut()
            {
                if *g == gen {
                    // Latest wins: fields changed twice are overrun.
                    for b in changed.iter().filter(|&b| c.get(b)) {
                        o.set(b);
                    }
                    o.union_with(&overrun);
                    c.union_with(&changed);
                    *v = value;
                    *n += 1;
                    q.stats.squashed += 1;
                    self.wake(q);
                    return;
                }
            }
        }
        q.data_items += 1;
        q.items.push_back(Item {
            ev: MonitorEvent::Data {
                value,
                changed,
                overrun,
            },
            gen,
            n: 1,
        });
        self.wake(q);
    }

    /// Take the next event; acknowledges consumed updates to the server in `ack_any` batches.
    fn pop(&self, deadline: Option<std::time::Instant>) -> Pop {
        let mut q = self.q.lock();
        loop {
            if let Some(item) = q.items.pop_front() {
                if matches!(item.ev, MonitorEvent::Data { .. }) {
                    q.data_items = q.data_items.saturating_sub(1);
                    q.stats.consumed += 1;
                    self.ack(&mut q, item.gen, item.n);
                }
                return Pop::Event(item.ev);
            }
            if q.ended {
                return Pop::Ended;
            }
            let now = std::time::Instant::now();
            match deadline {
                Some(d) if d > now => {
                    q.waiting += 1;
                    self.cv.wait_for(&mut q, d - now);
                    q.waiting -= 1;
                }
                _ => return Pop::Empty,
            }
        }
    }

    fn ack(&self, q: &mut Queue, gen: u64, n: u32) {
        if !q.pipeline {
            return;
        }
        let Some(t) = q.target.as_ref().filter(|t| t.gen == gen) else {
            return;
        };
        q.unacked += n;
        if q.unacked < q.ack_any {
            return;
        }
        let (sid, ioid, count) = (t.sid, t.ioid, q.unacked);
        let acked = t.conn.send(cmd::MONITOR, |w| {
            proto::encode_monitor_ack(w, sid, ioid, count);
            Ok(())
        });
        // pvxs servers only send what they queued at the next post or START (see
        // `Connection::start_after_ack`); START goes in its own message as pvAccessCPP
        // cannot take ack and start together.
        let started = if t.conn.start_after_ack() {
            t.conn.send(cmd::MONITOR, |w| {
                proto::encode_op_simple(w, sid, ioid, sub::GET | sub::START);
                Ok(())
            })
        } else {
            Ok(())
        };
        if acked.is_ok() && started.is_ok() {
            q.unacked = 0;
            q.stats.acks_sent += 1;
        }
    }
}

/// A subscription. Dropping it cancels the subscription on the server.
pub struct Monitor {
    name: String,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    // Keeps the client's runtime alive while the monitor exists.
    _rt: Arc<super::RtGuard>,
}

impl Monitor {
    pub(crate) fn start(
        ctx: Arc<Ctx>,
        rt: Arc<super::RtGuard>,
        name: &str,
        opts: MonitorOptions,
    ) -> Result<Monitor, ClientError> {
        let queue_size = if opts.pipeline {
            opts.queue_size.max(2)
        } else {
            opts.queue_size.max(1)
        };
        let (fields, mut options) =
            request::parse_str(&opts.request).map_err(ClientError::Request)?;
        options.retain(|(k, _)| k != "queueSize" && k != "pipeline");
        // ackAny may also come in the request string, as pvxs reads it.
        let user = request::PvRequest {
            fields: Vec::new(),
            options: options.clone(),
        };
        let ack_any = opts
            .ack_any
            .or_else(|| user.option("ackAny").map(|_| user.ack_any(queue_size)))
            .unwrap_or((queue_size / 2).max(1))
            .clamp(1, queue_size);
        let q = queue_size.to_string();
        let mut opt_refs: Vec<(&str, &str)> = vec![("queueSize", q.as_str())];
        if opts.pipeline {
            opt_refs.push(("pipeline", "true"));
        }
        opt_refs.extend(options.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let req = request::build(&fields.join(","), &opt_refs);
        let shared = Arc::new(Shared {
            q: Mutex::new(Queue {
                items: VecDeque::new(),
                data_items: 0,
                limit: queue_size as usize,
                pipeline: opts.pipeline,
                ack_any,
                unacked: 0,
                target: None,
                desc: None,
                stats: MonitorStats::default(),
                ended: false,
                waiting: 0,
            }),
            cv: Condvar::new(),
        });
        let (stop, stop_rx) = watch::channel(false);
        let task = Task {
            ctx,
            name: name.to_owned(),
            req,
            pipeline: opts.pipeline,
            queue_size,
            shared: Arc::clone(&shared),
            stop: stop_rx,
        };
        rt.handle()?.spawn(task.run());
        Ok(Monitor {
            name: name.to_owned(),
            shared,
            stop,
            _rt: rt,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The next event, waiting at most `timeout`. After `Finished`/`Failed` has been taken,
    /// returns [`ClientError::Closed`].
    pub fn recv(&self, timeout: Duration) -> Result<MonitorEvent, ClientError> {
        let deadline = std::time::Instant::now().checked_add(timeout);
        match self.shared.pop(deadline) {
            Pop::Event(ev) => Ok(ev),
            Pop::Ended => Err(ClientError::Closed(format!(
                "monitor of {} has ended",
                self.name
            ))),
            Pop::Empty => Err(ClientError::Timeout(format!(
                "waiting {timeout:?} for an update of {}",
                self.name
            ))),
        }
    }

    /// The next event if one is queued.
    pub fn try_recv(&self) -> Option<MonitorEvent> {
        match self.shared.pop(None) {
            Pop::Event(ev) => Some(ev),
            Pop::Ended | Pop::Empty => None,
        }
    }

    /// The type of the current subscription, once connected.
    pub fn desc(&self) -> Option<Arc<FieldDesc>> {
        self.shared.q.lock().desc.clone()
    }

    pub fn stats(&self) -> MonitorStats {
        self.shared.q.lock().stats.clone()
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        // The task sends DESTROY_REQUEST and releases the channel.
        self.stop.send_replace(true);
    }
}

struct Task {
    ctx: Arc<Ctx>,
    name: String,
    req: (FieldDesc, Value),
    pipeline: bool,
    queue_size: u32,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
}

enum Outcome {
    Stop,
    End,
    Lost,
}

impl Task {
    async fn run(mut self) {
        let mut gen = 0u64;
        let mut backoff = Duration::from_millis(50);
        loop {
            // No deadline: a monitor keeps looking for its channel until dropped.
            let far = Instant::now() + Duration::from_secs(86_400 * 365);
            let ch = tokio::select! {
                r = self.ctx.open_channel(&self.name, far) => r,
                _ = self.stop.wait_for(|s| *s) => return,
            };
            let ch = match ch {
                Ok(c) => c,
                Err(_) => {
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = self.stop.wait_for(|s| *s) => return,
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    continue;
                }
            };
            gen += 1;
            match self.subscribe(&ch, gen).await {
                Outcome::Stop | Outcome::End => return,
                Outcome::Lost => {
                    self.shared.lost();
                    self.shared.push(MonitorEvent::Disconnected, gen);
                    backoff = Duration::from_millis(50);
                }
            }
        }
    }

    async fn subscribe(&mut self, ch: &ChannelRef, gen: u64) -> Outcome {
        let Ok((ioid, mut rx)) = ch.conn.register_op(OpKind::Monitor, ch.sid) else {
            return Outcome::Lost;
        };
        let _guard = OpGuard {
            conn: Arc::clone(&ch.conn),
            ioid,
        };
        let (subcmd, nfree) = if self.pipeline {
            (sub::INIT | sub::PIPELINE, Some(self.queue_size))
        } else {
            (sub::INIT, None)
        };
        let sent = ch.conn.send(cmd::MONITOR, |w| {
            proto::encode_op_init(w, ch.sid, ioid, subcmd, (&self.req.0, &self.req.1), nfree)
        });
        if sent.is_err() {
            return Outcome::Lost;
        }
        let mut started = false;
        loop {
            let m = tokio::select! {
                m = rx.recv() => m,
                _ = self.stop.wait_for(|s| *s) => return Outcome::Stop,
            };
            match m {
                Some(OpMsg::Event(OpEvent::Init { status, desc })) => {
                    let Some(desc) = desc.filter(|_| status.is_success()) else {
                        self.shared
                            .push(MonitorEvent::Failed(status.message.clone()), gen);
                        return Outcome::End;
                    };
                    self.shared.connected(
                        desc,
                        AckTarget {
                            conn: Arc::clone(&ch.conn),
                            sid: ch.sid,
                            ioid,
                            gen,
                        },
                    );
                    // Updates go from the reader task to the queue directly (set before START,
                    // so none can come through the channel first).
                    let shared = Arc::clone(&self.shared);
                    ch.conn.direct_updates(
                        ioid,
                        Box::new(move |ev| {
                            if let OpEvent::Update {
                                value,
                                changed,
                                overrun,
                                bytes,
                            } = ev
                            {
                                shared.update(value, changed, overrun, bytes, gen);
                            }
                        }),
                    );
                    // Start separately from any ack: pvAccessCPP cannot take both in one.
                    let start = ch.conn.send(cmd::MONITOR, |w| {
                        proto::encode_op_simple(w, ch.sid, ioid, sub::GET | sub::START);
                        Ok(())
                    });
                    if start.is_err() {
                        return Outcome::Lost;
                    }
                    started = true;
                }
                Some(OpMsg::Event(OpEvent::Update {
                    value,
                    changed,
                    overrun,
                    bytes,
                })) if started => {
                    self.shared.update(value, changed, overrun, bytes, gen);
                }
                Some(OpMsg::Event(OpEvent::Finished { status })) => {
                    let ev = if status.is_success() {
                        MonitorEvent::Finished
                    } else {
                        MonitorEvent::Failed(status.message)
                    };
                    self.shared.lost();
                    self.shared.push(ev, gen);
                    return Outcome::End;
                }
                Some(OpMsg::Event(_)) => {}
                Some(OpMsg::Failed(_)) | Some(OpMsg::Disconnected) | None => return Outcome::Lost,
            }
        }
    }
}
