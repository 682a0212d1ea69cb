//! One EVENT_ADD subscription: a small queue of PV snapshots (latest wins when full, like
//! RSRV's event queue; a frame replaces whatever is queued) and the connection's ready list
//! that wakes its writer. A post only pushes an `Arc` and never waits for the client.

use std::collections::VecDeque;
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use tokio::sync::Notify;

use super::fields::{is_large, Field};
use crate::pv::{Snapshot, Watcher};

/// Snapshots kept per subscription before the newest replaces the last queued one.
pub(crate) const QUEUE_LEN: usize = 4;

/// Per connection: subscriptions with something to send, and the writer's wake-up.
#[derive(Default)]
pub(crate) struct ConnSignal {
    ready: Mutex<VecDeque<Weak<Subscription>>>,
    pub(crate) notify: Notify,
}

impl ConnSignal {
    /// The next subscription with queued snapshots, if any.
    pub(crate) fn pop_ready(&self) -> Option<Arc<Subscription>> {
        let mut r = self.ready.lock();
        while let Some(w) = r.pop_front() {
            if let Some(s) = w.upgrade() {
                return Some(s);
            }
        }
        None
    }
}

struct SubQueue {
    items: VecDeque<Arc<Snapshot>>,
    scheduled: bool,
    cancelled: bool,
}

pub(crate) struct Subscription {
    pub subid: u32,
    pub sid: u32,
    pub dbr: u16,
    pub count: u32,
    pub mask: u16,
    pub field: Field,
    pub record: Arc<str>,
    me: Weak<Subscription>,
    queue: Mutex<SubQueue>,
    conn: Arc<ConnSignal>,
}

impl Subscription {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        subid: u32,
        sid: u32,
        dbr: u16,
        count: u32,
        mask: u16,
        field: Field,
        record: Arc<str>,
        conn: Arc<ConnSignal>,
    ) -> Arc<Subscription> {
        Arc::new_cyclic(|me| Subscription {
            subid,
            sid,
            dbr,
            count,
            mask,
            field,
            record,
            me: me.clone(),
            queue: Mutex::new(SubQueue {
                items: VecDeque::with_capacity(QUEUE_LEN),
                scheduled: false,
                cancelled: false,
            }),
            conn,
        })
    }

    /// Queue `snap` (the first snapshot after EVENT_ADD is sent whatever the mask).
    pub(crate) fn push(&self, snap: &Arc<Snapshot>) {
        let mut q = self.queue.lock();
        if q.cancelled {
            return;
        }
        if is_large(&snap.value) {
            // A frame: a client that has not taken the last one gets this one instead, so a
            // slow client holds one frame at most (each snapshot has all of the PV's state).
            q.items.clear();
            q.items.push_back(Arc::clone(snap));
        } else if q.items.len() >= QUEUE_LEN {
            if let Some(last) = q.items.back_mut() {
                *last = Arc::clone(snap);
            }
        } else {
            q.items.push_back(Arc::clone(snap));
        }
        if !q.scheduled {
            q.scheduled = true;
            self.conn.ready.lock().push_back(self.me.clone());
            self.conn.notify.notify_one();
        }
    }

    /// Everything queued; the subscription may be scheduled again afterwards.
    pub(crate) fn take(&self) -> Vec<Arc<Snapshot>> {
        let mut q = self.queue.lock();
        q.scheduled = false;
        if q.cancelled {
            q.items.clear();
            return Vec::new();
        }
        q.items.drain(..).collect()
    }

    /// No more updates (EVENT_CANCEL, CLEAR_CHANNEL, connection closed).
    pub(crate) fn cancel(&self) {
        let mut q = self.queue.lock();
        q.cancelled = true;
        q.items.clear();
    }

    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        self.queue.lock().items.len()
    }
}

impl Watcher for Subscription {
    fn notify(&self, events: u16, snap: &Arc<Snapshot>) {
        if self.field.events(events) & self.mask != 0 {
            self.push(snap);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::{DBE_ALARM, DBE_VALUE};
    use crate::pv::{CaPv, PvMeta};
    use crate::value::{CaValue, NativeType};

    #[test]
    fn latest_wins_and_scheduling() {
        let conn = Arc::new(ConnSignal::default());
        let sub = Subscription::new(
            1,
            1,
            6,
            1,
            DBE_VALUE,
            Field::Val,
            "X".into(),
            Arc::clone(&conn),
        );
        let w: Weak<dyn Watcher> = Arc::downgrade(&sub) as Weak<dyn Watcher>;
        let pv = CaPv::new(
            PvMeta::scalar(NativeType::Double),
            CaValue::Double(vec![0.0]),
        );
        pv.watch(w);
        for i in 0..100 {
            pv.post(CaValue::Double(vec![f64::from(i)]));
        }
        pv.set_alarm(1, 1); // not in the mask
        assert_eq!(sub.queued(), QUEUE_LEN);
        let s = conn.pop_ready().unwrap();
        assert!(conn.pop_ready().is_none());
        let got = s.take();
        assert_eq!(got.last().unwrap().value, CaValue::Double(vec![99.0]));
        assert_eq!(got[0].value, CaValue::Double(vec![0.0]));
        pv.post(CaValue::Double(vec![1.0]));
        assert!(conn.pop_ready().is_some());
        sub.cancel();
        pv.post(CaValue::Double(vec![2.0]));
        assert!(sub.take().is_empty());
        // SEVR field channels follow alarms only.
        let sevr = Subscription::new(2, 1, 3, 1, DBE_VALUE, Field::Sevr, "X".into(), conn);
        pv.watch(Arc::downgrade(&sevr) as Weak<dyn Watcher>);
        pv.post(CaValue::Double(vec![3.0]));
        assert_eq!(sevr.queued(), 0);
        pv.set_alarm(1, 2);
        assert_eq!(sevr.queued(), 1);
        let _ = DBE_ALARM;
    }

    #[test]
    fn frames_keep_only_the_latest() {
        let conn = Arc::new(ConnSignal::default());
        let sub = Subscription::new(1, 1, 1, 0, DBE_VALUE, Field::Val, "X".into(), conn);
        let pv = CaPv::new(
            PvMeta::array(NativeType::Short, 1 << 16),
            CaValue::Short(vec![0; 1 << 16]),
        );
        pv.watch(Arc::downgrade(&sub) as Weak<dyn Watcher>);
        for i in 0..10 {
            pv.post(CaValue::Short(vec![i; 1 << 16]));
        }
        assert_eq!(sub.queued(), 1);
        let got = sub.take();
        assert_eq!(got[0].value, CaValue::Short(vec![9; 1 << 16]));
    }
}
