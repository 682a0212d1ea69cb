//! Test access to the server's message handlers without sockets, for randomized robustness
//! tests (tests/server_fuzz.rs). Not part of the supported API.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::Notify;

use crate::transport::{Message, OutMessage};
use crate::wire::{Header, SharedBytes};

use super::session::Session;
use super::{ChannelProvider, ServerConfig, ServerShared, ServerStats};

/// One connection's protocol state fed by hand.
pub struct Harness {
    srv: Arc<ServerShared>,
    session: Session,
}

impl Harness {
    pub fn new(provider: Arc<dyn ChannelProvider>) -> Self {
        let tcp: SocketAddr = ([127, 0, 0, 1], 5075).into();
        let srv = Arc::new(ServerShared::new(
            provider,
            tcp,
            ServerConfig::loopback_ephemeral(),
        ));
        let session = Session::new(Arc::clone(&srv), Arc::new(Notify::new()), Arc::default());
        Self { srv, session }
    }

    /// The greeting (SET_BYTE_ORDER, CONNECTION_VALIDATION).
    pub fn greeting(&mut self) -> Vec<OutMessage> {
        self.session.greeting()
    }

    /// Handle one message; returns the replies.
    pub fn feed(&mut self, header: Header, payload: &[u8]) -> Vec<OutMessage> {
        let msg = Message {
            header,
            payload: SharedBytes::copy_from_slice(payload),
        };
        self.session.handle(&msg)
    }

    /// Pending monitor updates as encoded messages (what the writer would send now).
    pub fn drain_monitors(&mut self) -> Vec<OutMessage> {
        let subs = self.session.monitors.lock().clone();
        let mut out = Vec::new();
        for s in subs {
            while let Some(Ok(m)) = s.next_message(self.session.order) {
                out.push(m);
            }
        }
        out
    }

    /// Handle one UDP datagram, as received from a client and as passed on by another
    /// server (with what this server would pass on for it); returns how many replies the
    /// two produced.
    pub fn feed_datagram(&self, dgram: &[u8]) -> usize {
        use super::search::{forward_datagram, handle_datagram, Arrival};
        let src: SocketAddr = ([127, 0, 0, 1], 40000).into();
        let direct = handle_datagram(&self.srv, dgram, src, Arrival::Direct).len();
        let fwd = forward_datagram(dgram, src, std::net::Ipv4Addr::LOCALHOST)
            .map(|f| {
                handle_datagram(
                    &self.srv,
                    &f,
                    ([127, 0, 0, 1], 5076).into(),
                    Arrival::Forwarded,
                )
                .len()
            })
            .unwrap_or(0);
        direct + fwd
    }

    pub fn is_validated(&self) -> bool {
        self.session.is_validated()
    }

    /// The session asked to close the connection.
    pub fn closed(&self) -> bool {
        self.session.should_close()
    }

    pub fn stats(&self) -> ServerStats {
        self.srv.stats.snapshot()
    }
}
