//! The frame sources of an IOC: one per `web` port, by port name. The port's plugin puts
//! each frame into its source's [`LatestSlot`]; every WebSocket client of that port reads it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use axum::body::Bytes;
use ndflow_core::NDArray;
use parking_lot::RwLock;

use crate::slot::LatestSlot;

/// One port's frames and what its clients did with them.
pub struct FrameSource {
    pub slot: LatestSlot<Arc<NDArray>>,
    clients: AtomicUsize,
    sent: AtomicU64,
    skipped: AtomicU64,
    /// Largest side a client may ask for (0: no limit), and the most frames a second sent to
    /// one client (f64 bits; 0: no limit): the port's parameters, copied here by its plugin.
    max_side: AtomicUsize,
    max_rate: AtomicU64,
    /// Told the number of clients whenever one comes or goes.
    on_clients: RwLock<Option<ClientsChanged>>,
    /// The last message encoded: (frame's slot sequence number, side, bytes), so clients
    /// taking the same frame at the same size share one decode/bin/copy. Held while a
    /// client encodes, so the others wait for its result instead of repeating the work.
    encoded: tokio::sync::Mutex<Option<(u64, usize, Bytes)>>,
}

/// A listener of the client count.
pub type ClientsChanged = Box<dyn Fn(usize) + Send + Sync>;

impl Default for FrameSource {
    fn default() -> Self {
        FrameSource {
            slot: LatestSlot::default(),
            clients: AtomicUsize::new(0),
            sent: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            max_side: AtomicUsize::new(1024),
            max_rate: AtomicU64::new(30f64.to_bits()),
            on_clients: RwLock::new(None),
            encoded: tokio::sync::Mutex::new(None),
        }
    }
}

impl FrameSource {
    pub fn clients(&self) -> usize {
        self.clients.load(Ordering::Relaxed)
    }
    /// Frames sent to all clients.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }
    /// Frames replaced before a client took them (latest-wins), over all clients.
    pub fn skipped(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }
    pub fn set_limits(&self, max_side: usize, max_rate: f64) {
        self.max_side.store(max_side, Ordering::Relaxed);
        self.max_rate.store(max_rate.to_bits(), Ordering::Relaxed);
    }
    pub fn max_side(&self) -> usize {
        self.max_side.load(Ordering::Relaxed)
    }
    pub fn max_rate(&self) -> f64 {
        f64::from_bits(self.max_rate.load(Ordering::Relaxed))
    }
    pub(crate) fn count_sent(&self, skipped: u64) {
        self.sent.fetch_add(1, Ordering::Relaxed);
        self.skipped.fetch_add(skipped, Ordering::Relaxed);
    }
    /// The message for frame `seq` at `side`: the one another client encoded, else what
    /// `encode` makes on a blocking thread (kept for the next client, replacing the one
    /// before: only the newest frame is ever sent). Clients of the same frame wait for one
    /// another's encoding rather than repeat it. `None` when the runtime is stopping.
    pub async fn shared_encoding<F>(
        &self,
        seq: u64,
        side: usize,
        encode: F,
    ) -> Option<Result<Bytes, String>>
    where
        F: FnOnce() -> Result<Vec<u8>, String> + Send + 'static,
    {
        let mut kept = self.encoded.lock().await;
        if let Some((s, d, b)) = &*kept {
            if *s == seq && *d == side {
                return Some(Ok(b.clone()));
            }
        }
        let msg = match tokio::task::spawn_blocking(encode).await.ok()? {
            Ok(v) => Bytes::from(v),
            Err(e) => return Some(Err(e)),
        };
        *kept = Some((seq, side, msg.clone()));
        Some(Ok(msg))
    }
    /// Counts a client for as long as the guard lives.
    pub(crate) fn client(self: &Arc<Self>) -> ClientGuard {
        let n = self.clients.fetch_add(1, Ordering::Relaxed) + 1;
        self.tell_clients(n);
        ClientGuard(Arc::clone(self))
    }
    /// Calls `f` with the client count each time it changes.
    pub fn on_clients_changed(&self, f: ClientsChanged) {
        *self.on_clients.write() = Some(f);
    }
    fn tell_clients(&self, n: usize) {
        if let Some(f) = self.on_clients.read().as_ref() {
            f(n);
        }
    }
}

pub(crate) struct ClientGuard(Arc<FrameSource>);

impl Drop for ClientGuard {
    fn drop(&mut self) {
        let n = self
            .0
            .clients
            .fetch_sub(1, Ordering::Relaxed)
            .saturating_sub(1);
        self.0.tell_clients(n);
    }
}

/// Every port's source.
#[derive(Default)]
pub struct FrameHub {
    sources: RwLock<BTreeMap<String, Arc<FrameSource>>>,
}

impl FrameHub {
    /// Adds the source of port `name`; a second one of the same name is an error.
    pub fn add(&self, name: &str) -> Result<Arc<FrameSource>, String> {
        let mut map = self.sources.write();
        if map.contains_key(name) {
            return Err(format!("web port '{name}' is registered twice"));
        }
        let s = Arc::new(FrameSource::default());
        map.insert(name.to_string(), Arc::clone(&s));
        Ok(s)
    }

    pub fn get(&self, name: &str) -> Option<Arc<FrameSource>> {
        self.sources.read().get(name).cloned()
    }

    /// Port names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.sources.read().keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn clients_of_one_frame_and_size_share_one_encoding() {
        let s = Arc::new(FrameSource::default());
        let calls = Arc::new(AtomicUsize::new(0));
        let encode = |text: &'static [u8]| {
            let calls = Arc::clone(&calls);
            move || {
                calls.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(std::time::Duration::from_millis(30));
                Ok(text.to_vec())
            }
        };
        // Five clients at once, as when a new frame wakes them all.
        let tasks: Vec<_> = (0..5)
            .map(|_| {
                let (s, f) = (Arc::clone(&s), encode(b"one"));
                tokio::spawn(async move { s.shared_encoding(1, 1024, f).await })
            })
            .collect();
        for t in tasks {
            assert_eq!(t.await.unwrap().unwrap().unwrap(), &b"one"[..]);
        }
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "encoded once for five clients"
        );
        let other = s.shared_encoding(1, 512, encode(b"half")).await.unwrap();
        assert_eq!(other.unwrap(), &b"half"[..], "another size is binned apart");
        let newer = s.shared_encoding(2, 1024, encode(b"two")).await.unwrap();
        assert_eq!(
            newer.unwrap(),
            &b"two"[..],
            "a newer frame is encoded afresh"
        );
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        let failed = s
            .shared_encoding(3, 1024, || Err("bad frame".to_string()))
            .await;
        assert_eq!(failed, Some(Err("bad frame".to_string())));
    }
}
