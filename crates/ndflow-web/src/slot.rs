//! Latest-wins hand-over from the frame path to the clients: the slot holds one value, a new
//! one replaces it, and a reader gets the newest value it has not seen. A slow client thus
//! holds at most the frame it is sending plus the newest; nothing queues, nothing stale is
//! ever sent, and the writer (a plugin's worker) never waits.

use parking_lot::Mutex;
use tokio::sync::Notify;

pub struct LatestSlot<T> {
    /// (sequence number of the value, the value); 0: nothing yet.
    value: Mutex<(u64, Option<T>)>,
    changed: Notify,
}

impl<T: Clone> Default for LatestSlot<T> {
    fn default() -> Self {
        LatestSlot {
            value: Mutex::new((0, None)),
            changed: Notify::new(),
        }
    }
}

impl<T: Clone> LatestSlot<T> {
    /// Replaces the value; never blocks on readers.
    pub fn put(&self, v: T) {
        {
            let mut g = self.value.lock();
            g.0 += 1;
            g.1 = Some(v);
        }
        self.changed.notify_waiters();
    }

    /// The newest value if it is newer than `seen`, with its sequence number.
    pub fn newer_than(&self, seen: u64) -> Option<(u64, T)> {
        let g = self.value.lock();
        match &g.1 {
            Some(v) if g.0 > seen => Some((g.0, v.clone())),
            _ => None,
        }
    }

    /// Waits for a value newer than `seen`.
    pub async fn next(&self, seen: u64) -> (u64, T) {
        loop {
            // Registered before looking, so a put between the look and the wait is not missed.
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(v) = self.newer_than(seen) {
                return v;
            }
            notified.await;
        }
    }
}

/// Values a reader that last saw `seen` missed by taking `got` (0 for its first value).
pub fn skipped(seen: u64, got: u64) -> u64 {
    if seen == 0 {
        0
    } else {
        got.saturating_sub(seen + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn a_reader_gets_only_the_newest_and_counts_what_it_missed() {
        let s = LatestSlot::default();
        assert_eq!(s.newer_than(0), None);
        s.put(1);
        let (seq, v) = s.newer_than(0).unwrap();
        assert_eq!((seq, v), (1, 1));
        assert_eq!(s.newer_than(seq), None, "nothing new: nothing again");
        for v in 2..=5 {
            s.put(v);
        }
        let (seq2, v) = s.newer_than(seq).unwrap();
        assert_eq!(v, 5, "stale values are never handed out");
        assert_eq!(skipped(seq, seq2), 3);
        assert_eq!(skipped(0, seq2), 0);
    }

    #[tokio::test]
    async fn next_wakes_on_a_put_from_another_thread() {
        let s = Arc::new(LatestSlot::default());
        s.put(10);
        let (seen, _) = s.next(0).await;
        let writer = Arc::clone(&s);
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            for v in 11..=20 {
                writer.put(v);
            }
        });
        let (seq, v) = tokio::time::timeout(Duration::from_secs(5), s.next(seen))
            .await
            .unwrap();
        assert!(seq > seen && v > 10);
        t.join().unwrap();
        assert_eq!(s.next(seen).await.1, 20);
    }
}
