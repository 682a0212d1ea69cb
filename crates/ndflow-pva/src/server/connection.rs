//! The socket side of one client connection: a reader task feeding [`Session`] and a writer
//! task that sends replies and monitor updates.
//!
//! The writer takes a monitor update out of its subscription only when it is about to write it,
//! so while the socket is busy further posts squash in the subscription's queue instead of piling
//! up here; replies (small) go first. The socket is shared with lossless posters, which write
//! updates themselves when the writer has nothing to send (`direct.rs`); the writer locks it only
//! when it has work, and first finishes any message a poster left half written. A connection that goes silent for `conn_timeout`, sends
//! garbage framing, or whose writer fails is closed, and closing ends its subscriptions — which
//! releases any lossless poster waiting on them.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch, Notify};

use crate::transport::{cmd, MessageReader, OutMessage, TransportError};
use crate::wire::ByteOrder;

use super::direct::{CloseOnDrop, SockOut};
use super::monitor::Subscription;
use super::session::Session;
use super::ServerShared;

/// Replies queued ahead of the writer; a client that floods requests without reading waits here.
const REPLY_QUEUE: usize = 64;

pub(crate) async fn run(
    stream: TcpStream,
    peer: SocketAddr,
    srv: Arc<ServerShared>,
    mut shutdown: watch::Receiver<bool>,
) {
    srv.stats.connection(true);
    let (rd, wr) = stream.into_split();
    let wake = Arc::new(Notify::new());
    let monitors: Arc<Mutex<Vec<Arc<Subscription>>>> = Arc::default();
    let writer_done = Arc::new(Notify::new());
    let (tx, rx) = mpsc::channel::<OutMessage>(REPLY_QUEUE);
    let mut session = Session::new(Arc::clone(&srv), Arc::clone(&wake), Arc::clone(&monitors));
    session.peer = Some(peer);
    session.late = Some((tx.clone(), tokio::runtime::Handle::current()));
    let order = session.order;
    let out = Arc::new(SockOut::new(wr, order, Arc::clone(&wake), Arc::clone(&srv)));
    session.sock = Some(Arc::clone(&out));
    // A poster blocked on this socket gives up once the connection is over.
    let _closed = CloseOnDrop(Arc::clone(&out));
    let writer = tokio::spawn(writer_loop(
        out,
        rx,
        wake,
        monitors,
        Arc::clone(&srv),
        order,
        Arc::clone(&writer_done),
    ));
    let mut reader =
        MessageReader::new(rd, srv.cfg.max_message).with_budget(Arc::clone(&srv.partial));
    let mut counted = 0u64;
    let mut pending = session.greeting();
    'conn: loop {
        for m in pending.drain(..) {
            if tx.send(m).await.is_err() {
                break 'conn;
            }
        }
        if session.should_close() {
            break;
        }
        let next = tokio::select! {
            r = tokio::time::timeout(srv.cfg.conn_timeout, reader.next()) => r,
            _ = shutdown.changed() => break,
            _ = writer_done.notified() => break,
        };
        let msg = match next {
            Ok(Ok(Some(m))) => m,
            Err(_) if reader.mid_message() => {
                // A message begun and not finished in time: a client that declares a payload
                // and stalls or drips.
                srv.stats.partial_timeout();
                tracing::info!("pva client {peer}: a message stayed incomplete; closing");
                break;
            }
            Ok(Err(TransportError::OverBudget(total))) => {
                srv.stats.partial_over_cap();
                tracing::info!(
                    "pva client {peer}: incomplete messages of all clients would hold {total} \
                     bytes (at most {}); closing this one",
                    srv.cfg.max_partial_bytes
                );
                break;
            }
            // Idle too long, clean EOF, I/O error: the connection is over.
            Err(_) | Ok(Ok(None)) | Ok(Err(TransportError::Io(_))) => break,
            Ok(Err(_)) => {
                // Bad framing: nothing after it can be trusted.
                srv.stats.malformed();
                break;
            }
        };
        srv.stats.received(reader.bytes_read() - counted);
        counted = reader.bytes_read();
        pending = session.handle(&msg);
    }
    session.close_all();
    drop(session);
    drop(tx);
    // The writer may be stuck writing to a client that stopped reading: do not wait for it.
    writer.abort();
    srv.stats.connection(false);
}

async fn writer_loop(
    out: Arc<SockOut>,
    mut rx: mpsc::Receiver<OutMessage>,
    wake: Arc<Notify>,
    monitors: Arc<Mutex<Vec<Arc<Subscription>>>>,
    srv: Arc<ServerShared>,
    order: ByteOrder,
    done: Arc<Notify>,
) {
    let res = write_all(&out, &mut rx, &wake, &monitors, &srv, order).await;
    if res.is_ok() {
        let _ = out.lock().await.shutdown().await;
    }
    // A stored permit: the reader sees it even if it is not waiting yet.
    done.notify_one();
}

async fn write_all(
    out: &SockOut,
    rx: &mut mpsc::Receiver<OutMessage>,
    wake: &Notify,
    monitors: &Mutex<Vec<Arc<Subscription>>>,
    srv: &ServerShared,
    order: ByteOrder,
) -> io::Result<()> {
    let period = srv.cfg.echo_period;
    let mut echo = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    let mut next_sub = 0usize;
    // Replies taken off the channel, not sent yet.
    let mut replies: Vec<OutMessage> = Vec::new();
    loop {
        let subs: Vec<Arc<Subscription>> = monitors.lock().clone();
        // The socket is locked only when there is something to write: a direct poster may be
        // writing, and waiting for it would wake this task again when it is done.
        let work = !replies.is_empty()
            || !rx.is_empty()
            || out.has_tail()
            || subs.iter().any(|s| s.sendable());
        if work {
            let mut wr = out.lock().await;
            // A message a poster left half written comes first.
            for part in out.take_tail() {
                wr.write_all(&part).await?;
            }
            // Replies next: they are small and a client may be waiting on one. But first the
            // updates queued before them: a handler posts the value it wrote before it
            // completes the PUT, and a client that reads its monitored copy once the PUT
            // returns (ophyd-async's cached reads) must see that value, as from an EPICS IOC.
            while let Ok(m) = rx.try_recv() {
                replies.push(m);
            }
            if !replies.is_empty() {
                // Only those queued now: a lossless poster refilling a queue must not hold
                // the replies back.
                let queued: Vec<usize> = subs.iter().map(|s| s.queued()).collect();
                for (s, n) in subs.iter().zip(queued) {
                    for _ in 0..n {
                        match s.next_message(order) {
                            Some(Ok(m)) => send(&mut wr, &m, srv).await?,
                            Some(Err(_)) => srv.stats.malformed(),
                            None => break,
                        }
                    }
                }
                for m in replies.drain(..) {
                    send(&mut wr, &m, srv).await?;
                }
            }
            // Then at most one update per subscription, round robin.
            let mut sent = false;
            for i in 0..subs.len() {
                let s = &subs[(next_sub + i) % subs.len()];
                match s.next_message(order) {
                    Some(Ok(m)) => {
                        send(&mut wr, &m, srv).await?;
                        sent = true;
                    }
                    // The PV's value no longer encodes against its type: drop that update.
                    Some(Err(_)) => srv.stats.malformed(),
                    None => {}
                }
            }
            next_sub = next_sub.wrapping_add(1);
            if sent {
                continue;
            }
        }
        tokio::select! {
            m = rx.recv() => match m {
                // Sent at the top of the loop, after the updates queued before it.
                Some(m) => replies.push(m),
                None => return Ok(()),
            },
            _ = wake.notified() => {}
            _ = echo.tick() => {
                // Keep-alive; clients do not answer it (pvxs and pvAccessCPP ignore it).
                let m = OutMessage {
                    header: crate::wire::Header::application(cmd::ECHO, true, order, 0),
                    parts: Vec::new(),
                };
                let mut wr = out.lock().await;
                for part in out.take_tail() {
                    wr.write_all(&part).await?;
                }
                send(&mut wr, &m, srv).await?;
            }
        }
    }
}

async fn send(wr: &mut OwnedWriteHalf, m: &OutMessage, srv: &ServerShared) -> io::Result<()> {
    m.write_to(wr).await?;
    srv.stats.sent(m.wire_len());
    Ok(())
}
