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
use futures_util::StreamExt;
use zeromq::{PullSocket, Socket, SocketEvent, SocketRecv};

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
        // zmq.rs reconnects no PULL socket by itself: when the detector goes away (a DCU
        // restart), the socket is dropped and a new one connects.
        while !stop.load(Ordering::Acquire) {
            let Some(socket) = connect(endpoint, tx, stop).await else {
                return;
            };
            if !receive(socket, version, tx, stop).await {
                return;
            }
        }
    });
}

/// A PULL socket connected to `endpoint`, retrying until it is or the thread is stopped.
async fn connect(endpoint: &str, tx: &Sender<Incoming>, stop: &AtomicBool) -> Option<PullSocket> {
    loop {
        if stop.load(Ordering::Acquire) {
            return None;
        }
        let mut s = PullSocket::new();
        let why = match tokio::time::timeout(Duration::from_secs(1), s.connect(endpoint)).await {
            Ok(Ok(())) => {
                return deliver(tx, Incoming::Connected, stop).then_some(s);
            }
            Ok(Err(e)) => format!("stream {endpoint}: {e}"),
            Err(_) => format!("stream {endpoint}: no answer in 1 s"),
        };
        if !deliver(tx, Incoming::ConnectFailed(why), stop) {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Receives until the peer goes away (true: connect again) or the thread is stopped (false).
async fn receive(
    mut socket: PullSocket,
    version: StreamVersion,
    tx: &Sender<Incoming>,
    stop: &AtomicBool,
) -> bool {
    let mut monitor = socket.monitor();
    let mut events = Vec::new();
    while !stop.load(Ordering::Acquire) {
        let msg = tokio::select! {
            ev = monitor.next() => {
                if let Some(SocketEvent::Disconnected(_)) | None = ev {
                    let why = "stream: the detector closed the connection".to_string();
                    return deliver(tx, Incoming::ConnectFailed(why), stop);
                }
                continue;
            }
            r = tokio::time::timeout(TICK, socket.recv()) => match r {
                Err(_) => continue,
                Ok(Err(e)) => {
                    let why = StreamError::Malformed {
                        what: "ZeroMQ message",
                        detail: e.to_string(),
                    };
                    if !deliver(tx, Incoming::Invalid(why), stop) {
                        return false;
                    }
                    continue;
                }
                Ok(Ok(m)) => m,
            },
        };
        let parts: Vec<Bytes> = msg.into_vec();
        let result = match version {
            StreamVersion::V1 => v1::decode_message(&parts, &mut events),
            StreamVersion::V2 => v2::decode_message(&parts, &mut events),
        };
        for e in events.drain(..) {
            if !deliver(tx, Incoming::Event(e), stop) {
                return false;
            }
        }
        if let Err(e) = result {
            if !deliver(tx, Incoming::Invalid(e), stop) {
                return false;
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use zeromq::{Endpoint, PushSocket, SocketSend, ZmqMessage};

    /// `{"type": "end", "series_id": n}` in CBOR.
    fn end(n: u8) -> ZmqMessage {
        let mut m = vec![0xa2, 0x64];
        m.extend_from_slice(b"type");
        m.push(0x63);
        m.extend_from_slice(b"end");
        m.push(0x69);
        m.extend_from_slice(b"series_id");
        m.push(n);
        ZmqMessage::from(m)
    }

    /// Sends once the PUSH side has registered the peer (it learns of it a moment after the
    /// PULL side reports the connection).
    fn send(rt: &tokio::runtime::Runtime, push: &mut PushSocket, m: ZmqMessage) {
        for _ in 0..200 {
            if rt.block_on(push.send(m.clone())).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("the PUSH side never saw the peer");
    }

    fn next_kind(rx: &StreamReceiver) -> String {
        match rx.recv(Duration::from_secs(10)) {
            Some(Incoming::Connected) => "connected".into(),
            Some(Incoming::ConnectFailed(_)) => "failed".into(),
            Some(Incoming::Event(Event::End { series_id, .. })) => format!("end {series_id}"),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn reconnects_when_the_detector_comes_back() {
        // The detector's side runs on worker threads of its own while the test waits.
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let mut push = PushSocket::new();
        let Endpoint::Tcp(_, port) = rt.block_on(push.bind("tcp://127.0.0.1:0")).unwrap() else {
            panic!("not tcp")
        };
        let rx = StreamReceiver::start("127.0.0.1", port, StreamVersion::V2).unwrap();
        assert_eq!(next_kind(&rx), "connected");
        send(&rt, &mut push, end(1));
        assert_eq!(next_kind(&rx), "end 1");
        // The detector restarts: its socket closes, then binds the same port again.
        drop(rt.block_on(push.close()));
        let mut kinds = vec![next_kind(&rx)];
        let mut push = PushSocket::new();
        rt.block_on(push.bind(&format!("tcp://127.0.0.1:{port}")))
            .unwrap();
        while kinds.last().map(String::as_str) != Some("connected") {
            kinds.push(next_kind(&rx));
            assert!(kinds.len() < 50, "{kinds:?}");
        }
        assert_eq!(kinds[0], "failed", "the loss is reported: {kinds:?}");
        send(&rt, &mut push, end(2));
        assert_eq!(next_kind(&rx), "end 2");
    }
}
