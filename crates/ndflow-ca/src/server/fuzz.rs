//! Socket-free access to the server's message handlers, for the randomized tests: feed bytes
//! as a TCP client would (framing, session, monitor encoding) or as a search datagram.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::session::{encode_update, Session};
use super::{udp, ServerConfig, ServerShared};
use crate::header::Header;
use crate::pv::PvProvider;

/// One simulated connection.
pub struct FuzzConn {
    srv: Arc<ServerShared>,
    session: Session,
    completions: mpsc::UnboundedReceiver<Vec<u8>>,
    buf: Vec<u8>,
    /// Connections closed because of what was fed.
    pub closed: usize,
    /// Messages that reached the session's handlers.
    pub handled: usize,
}

impl FuzzConn {
    pub fn new(cfg: ServerConfig, provider: Arc<dyn PvProvider>) -> Self {
        let srv = Arc::new(ServerShared::new(provider, cfg, 5064));
        let (tx, rx) = mpsc::unbounded_channel();
        Self {
            session: Session::new(Arc::clone(&srv), "fuzz".into(), tx),
            srv,
            completions: rx,
            buf: Vec::new(),
            closed: 0,
            handled: 0,
        }
    }

    fn reset(&mut self) {
        let (tx, rx) = mpsc::unbounded_channel();
        self.session = Session::new(Arc::clone(&self.srv), "fuzz".into(), tx);
        self.completions = rx;
        self.buf.clear();
        self.closed += 1;
    }

    /// Feed stream bytes; returns the messages the server would send (replies, put
    /// completions, monitor updates), or starts a fresh connection when it would close.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Vec<u8>> {
        self.buf.extend_from_slice(bytes);
        let max = self.srv.cfg.max_array_bytes + 4096;
        let mut out = Vec::new();
        let mut start = 0;
        loop {
            match Header::parse(&self.buf[start..], max) {
                Err(_) => {
                    self.reset();
                    return out;
                }
                Ok(None) => break,
                Ok(Some((h, hlen))) => {
                    let total = hlen + h.payload_size as usize;
                    if self.buf.len() - start < total {
                        break;
                    }
                    let payload = self.buf[start + hlen..start + total].to_vec();
                    start += total;
                    self.handled += 1;
                    if self.session.handle(&h, &payload, &mut out).is_err() {
                        self.reset();
                        return out;
                    }
                }
            }
        }
        self.buf.drain(..start);
        while let Ok(m) = self.completions.try_recv() {
            out.push(m);
        }
        while let Some(sub) = self.session.conn.pop_ready() {
            for snap in sub.take() {
                out.push(encode_update(&sub, &snap, self.srv.cfg.max_array_bytes).into_vec());
            }
        }
        out
    }

    /// Forget an incomplete message but keep the session (channels, subscriptions), so that a
    /// mutated size does not swallow the rest of the test's stream.
    pub fn discard_partial(&mut self) {
        self.buf.clear();
    }

    /// Buffered bytes of an incomplete message.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    pub fn channels(&self) -> usize {
        self.session.channel_count()
    }

    /// The reply to a search datagram.
    pub fn datagram(&self, bytes: &[u8]) -> Vec<u8> {
        udp::handle_datagram(&self.srv, bytes, u32::MAX)
    }
}
