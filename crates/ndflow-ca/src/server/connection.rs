//! Socket tasks of one TCP connection: the reader frames messages and feeds the `Session`; the
//! writer (the only task writing the socket) sends replies, put completions and monitor
//! updates. A connection is dropped when a write makes no progress for `write_timeout` (a
//! vanished or stuck client), on read/write errors, or on an absurd message size.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

use super::monitor::ConnSignal;
use super::session::{encode_update, Session};
use super::ServerShared;
use crate::header::Header;

/// Room for a message header and a DBR prefix beyond EPICS_CA_MAX_ARRAY_BYTES.
const HEADROOM: usize = 4096;

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
                buf.reserve(total - (buf.len() - start));
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
        if start > 0 {
            buf.drain(..start);
            start = 0;
        }
        let n = tokio::select! {
            r = rd.read_buf(&mut buf) => r,
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
    let mut w = BufWriter::with_capacity(64 * 1024, wr);
    let tmo = srv.cfg.write_timeout;
    let max = srv.cfg.max_array_bytes;
    loop {
        // Wait for anything to send.
        let first = tokio::select! {
            biased;
            m = out_rx.recv() => match m { Some(m) => Some(m), None => break },
            m = comp_rx.recv() => m,
            _ = conn.notify.notified() => None,
        };
        let mut batch: Vec<Vec<u8>> = first.into_iter().collect();
        while let Ok(m) = out_rx.try_recv() {
            batch.push(m);
        }
        while let Ok(m) = comp_rx.try_recv() {
            batch.push(m);
        }
        for m in &batch {
            if write(&mut w, m, tmo).await.is_err() {
                return;
            }
        }
        while let Some(sub) = conn.pop_ready() {
            for snap in sub.take() {
                let m = encode_update(&sub, &snap, max);
                if write(&mut w, &m, tmo).await.is_err() {
                    return;
                }
            }
        }
        if tokio::time::timeout(tmo, w.flush())
            .await
            .map_or(true, |r| r.is_err())
        {
            return;
        }
    }
    let _ = tokio::time::timeout(tmo, w.flush()).await;
    let _ = w.into_inner().shutdown().await;
}

async fn write(w: &mut BufWriter<OwnedWriteHalf>, m: &[u8], tmo: Duration) -> Result<(), ()> {
    match tokio::time::timeout(tmo, w.write_all(m)).await {
        Ok(Ok(())) => Ok(()),
        _ => Err(()),
    }
}
