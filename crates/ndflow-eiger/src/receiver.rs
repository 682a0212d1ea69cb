//! The stream's receive thread: a ZeroMQ PULL socket connected to the detector, decoding each
//! message into [`Event`]s (headers only: pixels stay compressed, as slices of the message)
//! and handing them to the acquisition thread through a bounded queue. When the queue is full
//! the thread stops reading, so the detector's own buffer fills and its `dropped` counter,
//! not a silent queue, records any loss.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use crossbeam_channel::{bounded, Receiver as ChanRx, SendTimeoutError, Sender};
use zeromq::{PullSocket, Socket, SocketRecv};

use crate::stream::{v1, v2, Event, StreamError};

/// Which stream interface to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamVersion {
    V1,
    V2,
}

/// What the receive thread reports, in arrival order.
#[derive(Debug)]
pub enum Incoming {
    Connected,
    /// The connection attempt failed (the thread retries); the text says why.
    ConnectFailed(String),
    Event(Event),
    /// A message (or the rest of one) that could not be decoded.
    Invalid(StreamError),
}

/// Messages queued between the receive thread and the acquisition thread. Compressed
/// frames are small (0.1–1 MB), so this bounds memory while riding out short stalls.
const QUEUE: usize = 256;
/// How often a blocked thread looks at the stop flag.
const TICK: Duration = Duration::from_millis(50);

pub struct StreamReceiver {
    stop: Arc<AtomicBool>,
    events: ChanRx<Incoming>,
    thread: Option<JoinHandle<()>>,
}

impl StreamReceiver {
    /// Connects to `tcp://{host}:{port}` on a thread of its own.
    pub fn start(host: &str, port: u16, version: StreamVersion) -> std::io::Result<StreamReceiver> {
        let (tx, rx) = bounded(QUEUE);
        let stop = Arc::new(AtomicBool::new(false));
        let endpoint = format!("tcp://{host}:{port}");
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("ndflow-eiger-rx".into())
            .spawn(move || run(&endpoint, version, &tx, &flag))?;
        Ok(StreamReceiver {
            stop,
            events: rx,
            thread: Some(thread),
        })
    }

    /// The next report, or `None` after `timeout`.
    pub fn recv(&self, timeout: Duration) -> Option<Incoming> {
        self.events.recv_timeout(timeout).ok()
    }

    /// The next report if one is waiting.
    pub fn try_recv(&self) -> Option<Incoming> {
        self.events.try_recv().ok()
    }
}

impl Drop for StreamReceiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Hands `item` on, waiting while the queue is full; false once stopped.
fn deliver(tx: &Sender<Incoming>, mut item: Incoming, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::Acquire) {
            return false;
        }
        match tx.send_timeout(item, TICK) {
            Ok(()) => return true,
            Err(SendTimeoutError::Timeout(back)) => item = back,
            Err(SendTimeoutError::Disconnected(_)) => return false,
        }
    }
}

fn run(endpoint: &str, version: StreamVersion, tx: &Sender<Incoming>, stop: &AtomicBool) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            deliver(
                tx,
                Incoming::ConnectFailed(format!("no runtime: {e}")),
                stop,
            );
            return;
        }
    };
    rt.block_on(async {
        let mut socket = loop {
            if stop.load(Ordering::Acquire) {
                return;
            }
            let mut s = PullSocket::new();
            match tokio::time::timeout(Duration::from_secs(1), s.connect(endpoint)).await {
                Ok(Ok(())) => break s,
                Ok(Err(e)) => {
                    let why = format!("stream {endpoint}: {e}");
                    if !deliver(tx, Incoming::ConnectFailed(why), stop) {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(_) => {
                    let why = format!("stream {endpoint}: no answer in 1 s");
                    if !deliver(tx, Incoming::ConnectFailed(why), stop) {
                        return;
                    }
                }
            }
        };
        if !deliver(tx, Incoming::Connected, stop) {
            return;
        }
        let mut events = Vec::new();
        while !stop.load(Ordering::Acquire) {
            let msg = match tokio::time::timeout(TICK, socket.recv()).await {
                Err(_) => continue,
                Ok(Err(e)) => {
                    let why = StreamError::Malformed {
                        what: "ZeroMQ message",
                        detail: e.to_string(),
                    };
                    if !deliver(tx, Incoming::Invalid(why), stop) {
                        return;
                    }
                    continue;
                }
                Ok(Ok(m)) => m,
            };
            let parts: Vec<Bytes> = msg.into_vec();
            let result = match version {
                StreamVersion::V1 => v1::decode_message(&parts, &mut events),
                StreamVersion::V2 => v2::decode_message(&parts, &mut events),
            };
            for e in events.drain(..) {
                if !deliver(tx, Incoming::Event(e), stop) {
                    return;
                }
            }
            if let Err(e) = result {
                if !deliver(tx, Incoming::Invalid(e), stop) {
                    return;
                }
            }
        }
    });
}
