//! Socket tasks of one TCP connection: the reader frames messages and feeds the `Session`; the
//! writer (the only task writing the socket) sends replies, put completions and monitor
//! updates. Small messages are gathered into one buffer; a frame's shared wire-order values go
//! to the socket from where they are, in a vectored write after its header. A connection is
//! dropped when a write makes no progress for `write_timeout` (a vanished or stuck client), when
//! a message it began stays incomplete for `partial_timeout`, on read/write errors, or on an
//! absurd message size. The read buffer grows with the bytes that arrive, never ahead of them
//! to the size a header claims: a header costs its sender the bytes it sends.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use std::io::IoSlice;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

use super::fields::SharedReply;
use super::monitor::ConnSignal;
use super::session::{encode_update, Outgoing, Session};
use super::ServerShared;
use crate::header::Header;

/// Room for a message header and a DBR prefix beyond EPICS_CA_MAX_ARRAY_BYTES.
const HEADROOM: usize = 4096;
/// The room a read may always ask for, however little has arrived.
const MIN_STEP: usize = 16 * 1024;

pub(crate) async fn run(
    stream: TcpStream,
    peer: SocketAddr,
    srv: Arc<ServerShared>,
    mut shutdown: watch::Receiver<bool>,
) {
    let (mut rd, wr) = stream.into_split();
    let (out_tx, out_rx) = mpsc::channel::<Vec<u8>>(64);
    let (comp_tx, comp_rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let mut session = Session::new(Arc::clone(&srv), peer.ip().to_string(), comp_tx);
    let writer = tokio::spawn(write_loop(
        wr,
        out_rx,
        comp_rx,
        Arc::clone(&session.conn),
        Arc::clone(&srv),
    ));
    if out_tx.send(Session::greeting()).await.is_err() {
        return;
    }
    let max_payload = srv.cfg.max_array_bytes + HEADROOM;
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut start = 0usize;
    let mut replies = Vec::new();
    // When the oldest incomplete message's first bytes arrived.
    let mut partial_since: Option<tokio::time::Instant> = None;
    // This connection's share of the server's `partial_bytes`.
    let mut held = 0usize;
    'conn: loop {
        // Frame and handle every complete message in the buffer.
        loop {
            let parsed = match Header::parse(&buf[start..], max_payload) {
                Ok(p) => p,
                Err(e) => {
                    tracing::debug!("CA client {peer}: {e}; closing");
                    break 'conn;
                }
            };
            let Some((h, hlen)) = parsed else { break };
            let total = hlen + h.payload_size as usize;
            if buf.len() - start < total {
                // Room for at most as much again as has arrived: a large message costs its
                // sender what it sends, and still takes O(n) copies to read.
                let step = (total - (buf.len() - start)).min(buf.len().max(MIN_STEP));
                buf.reserve(step);
                break;
            }
            let payload = &buf[start + hlen..start + total];
            let r = session.handle(&h, payload, &mut replies);
            start += total;
            for m in replies.drain(..) {
                if out_tx.send(m).await.is_err() {
                    break 'conn;
                }
            }
            if let Err(why) = r {
                tracing::debug!("CA client {peer}: {why}; closing");
                break 'conn;
            }
        }
        // The clock runs from the first byte of the message now incomplete: it restarts
        // whenever a message completed.
        let progressed = start > 0;
        if progressed {
            buf.drain(..start);
            start = 0;
        }
        partial_since = match (buf.is_empty(), partial_since) {
            (true, _) => None,
            (false, Some(t)) if !progressed => Some(t),
            (false, _) => Some(tokio::time::Instant::now()),
        };
        if buf.len() != held {
            let grew = buf.len() > held;
            let total = if grew {
                srv.partial_bytes
                    .fetch_add(buf.len() - held, Ordering::Relaxed)
                    + buf.len()
                    - held
            } else {
                srv.partial_bytes
                    .fetch_sub(held - buf.len(), Ordering::Relaxed)
                    .saturating_sub(held - buf.len())
            };
            held = buf.len();
            if grew && total > srv.cfg.max_partial_bytes {
                srv.partial_over_cap.fetch_add(1, Ordering::Relaxed);
                tracing::info!(
                    "CA client {peer}: incomplete messages of all clients would hold {total} \
                     bytes (at most {}); closing this one ({held} bytes)",
                    srv.cfg.max_partial_bytes
                );
                break 'conn;
            }
        }
        let deadline = partial_since.map(|t| t + srv.cfg.partial_timeout);
        let stalled = async move {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        let n = tokio::select! {
            r = rd.read_buf(&mut buf) => r,
            _ = stalled => {
                srv.partial_timeouts.fetch_add(1, Ordering::Relaxed);
                tracing::info!(
                    "CA client {peer}: a message begun {:?} ago is still incomplete ({} bytes here); closing",
                    srv.cfg.partial_timeout,
                    buf.len()
                );
                break 'conn;
            }
            _ = shutdown.changed() => {
                session.disconnect_all(&mut replies);
                for m in replies.drain(..) {
                    let _ = out_tx.send(m).await;
                }
                break 'conn;
            }
        };
        match n {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    srv.partial_bytes.fetch_sub(held, Ordering::Relaxed);
    drop(session);
    drop(out_tx);
    // The writer flushes what is queued and ends when the reply channel closes.
    let _ = tokio::time::timeout(Duration::from_secs(2), writer).await;
}

async fn write_loop(
    wr: OwnedWriteHalf,
    mut out_rx: mpsc::Receiver<Vec<u8>>,
    mut comp_rx: mpsc::UnboundedReceiver<Vec<u8>>,
    conn: Arc<ConnSignal>,
    srv: Arc<ServerShared>,
) {
    let mut w = Out {
        wr,
        buf: Vec::with_capacity(BUF_CAP),
        tmo: srv.cfg.write_timeout,
    };
    let max = srv.cfg.max_array_bytes;
    loop {
        // Wait for anything to send.
        let first = tokio::select! {
            biased;
            m = out_rx.recv() => match m { Some(m) => Some(Wake::Reply(m)), None => break },
            m = comp_rx.recv() => m.map(Wake::Completion),
            _ = conn.notify.notified() => None,
        };
        let (mut replies, mut completions) = (Vec::new(), Vec::new());
        match first {
            Some(Wake::Reply(m)) => replies.push(m),
            Some(Wake::Completion(m)) => completions.push(m),
            None => {}
        }
        while let Ok(m) = out_rx.try_recv() {
            replies.push(m);
        }
        while let Ok(m) = comp_rx.try_recv() {
            completions.push(m);
        }
        for m in &replies {
            if w.push(m).await.is_err() {
                return;
            }
        }
        // Monitor updates before put completions: a handler posts the new value before it
        // completes the put, so every update queued before a completion arrived goes out
        // ahead of it, as in an EPICS IOC. A client that reads its monitored copy right
        // after `caput(wait=True)` (pyepics) then sees what it wrote.
        while let Some(sub) = conn.pop_ready() {
            for snap in sub.take() {
                let sent = match encode_update(&sub, &snap, max) {
                    Outgoing::Bytes(m) => w.push(&m).await,
                    Outgoing::Shared(r) => w.push_shared(&r).await,
                };
                if sent.is_err() {
                    return;
                }
            }
        }
        for m in &completions {
            if w.push(m).await.is_err() {
                return;
            }
        }
        if w.flush().await.is_err() {
            return;
        }
    }
    let _ = w.flush().await;
    let _ = w.wr.shutdown().await;
}

/// What woke the writer with a message to send.
enum Wake {
    Reply(Vec<u8>),
    Completion(Vec<u8>),
}

/// Small messages gather here and go out in one write.
const BUF_CAP: usize = 64 * 1024;
/// The zero padding after shared values (a few bytes unless a client asked for more
/// elements than the value has).
static ZEROS: [u8; 4096] = [0; 4096];

/// The writing half of a connection with its send buffer. Every write must make progress
/// within `tmo`, else the client is gone or stuck and the connection is dropped.
struct Out {
    wr: OwnedWriteHalf,
    buf: Vec<u8>,
    tmo: Duration,
}

impl Out {
    async fn push(&mut self, m: &[u8]) -> Result<(), ()> {
        if self.buf.len() + m.len() > BUF_CAP {
            self.flush().await?;
        }
        if m.len() > BUF_CAP {
            return self.write_all(&mut [IoSlice::new(m)]).await;
        }
        self.buf.extend_from_slice(m);
        Ok(())
    }

    /// What is buffered, then the reply's head, its shared values (from where they are, no
    /// copy) and its padding, in vectored writes.
    async fn push_shared(&mut self, r: &SharedReply) -> Result<(), ()> {
        self.buf.extend_from_slice(&r.head);
        let zeros;
        let tail: &[u8] = if r.zeros <= ZEROS.len() {
            &ZEROS[..r.zeros]
        } else {
            zeros = vec![0u8; r.zeros];
            &zeros
        };
        let buf = std::mem::take(&mut self.buf);
        let body = &r.body.as_bytes()[..r.len];
        let res = self
            .write_all(&mut [IoSlice::new(&buf), IoSlice::new(body), IoSlice::new(tail)])
            .await;
        self.buf = buf;
        self.buf.clear();
        res
    }

    async fn flush(&mut self) -> Result<(), ()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let buf = std::mem::take(&mut self.buf);
        let res = self.write_all(&mut [IoSlice::new(&buf)]).await;
        self.buf = buf;
        self.buf.clear();
        res
    }

    async fn write_all(&mut self, mut bufs: &mut [IoSlice<'_>]) -> Result<(), ()> {
        IoSlice::advance_slices(&mut bufs, 0);
        while !bufs.is_empty() {
            match tokio::time::timeout(self.tmo, self.wr.write_vectored(bufs)).await {
                Ok(Ok(n)) if n > 0 => IoSlice::advance_slices(&mut bufs, n),
                _ => return Err(()),
            }
        }
        Ok(())
    }
}
