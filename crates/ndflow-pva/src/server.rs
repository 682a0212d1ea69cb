//! The pvAccess server: serves [`SharedPv`]s found through a [`ChannelProvider`] to pvxs, p4p,
//! pvAccessCPP (pvapy, CS-Studio) and our own client.
//!
//! It runs on its own Tokio runtime (the data plane stays on plain threads): an accept loop, one
//! task pair per connection (reader: the protocol state of `session`; writer: replies and
//! monitor updates), a UDP search loop and a beacon loop. Frames are written straight from their
//! buffers; a slow client loses intermediate monitor updates (latest wins) unless the PV is
//! lossless and the client pipelines, in which case posts wait for its acks.
//!
//! Files, one concern each: `config` (environment), `shared_pv` (a PV and its posts),
//! `monitor` (one subscription's queue and window), `session` (handshake, channels, dispatch),
//! `channel_ops` (GET/PUT/MONITOR/GET_FIELD/RPC), `connection` (socket tasks), `search` and
//! `beacon` (UDP discovery).

mod beacon;
mod channel_ops;
pub mod config;
mod connection;
mod direct;
mod monitor;
mod put_reply;
mod search;
mod session;
pub mod shared_pv;

#[doc(hidden)]
pub mod fuzz;

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use tokio::net::TcpListener;
use tokio::runtime::Runtime;
use tokio::sync::watch;

pub use config::{ConfigError, ServerConfig};
pub use put_reply::{ClientId, PutReply};
pub use shared_pv::{DeferredPutHandler, PostError, PutHandler, SharedPv, DEFAULT_LOSSLESS_WAIT};

/// Where the server finds PVs by name.
pub trait ChannelProvider: Send + Sync + 'static {
    fn lookup(&self, name: &str) -> Option<SharedPv>;
    /// The PV for one client's channel: `None` refuses the channel (access rules that hide a
    /// PV from some clients). Defaults to [`ChannelProvider::lookup`].
    fn lookup_for(&self, name: &str, client: &ClientId) -> Option<SharedPv> {
        let _ = client;
        self.lookup(name)
    }
}

/// A name → PV map; PVs can be added and removed while serving (a removed PV stays served to
/// channels already open on it).
#[derive(Default)]
pub struct StaticProvider {
    pvs: RwLock<HashMap<String, SharedPv>>,
}

impl StaticProvider {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add(&self, name: impl Into<String>, pv: SharedPv) {
        self.pvs.write().insert(name.into(), pv);
    }

    pub fn remove(&self, name: &str) -> Option<SharedPv> {
        self.pvs.write().remove(name)
    }

    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.pvs.read().keys().cloned().collect();
        v.sort();
        v
    }
}

impl ChannelProvider for StaticProvider {
    fn lookup(&self, name: &str) -> Option<SharedPv> {
        self.pvs.read().get(name).cloned()
    }
}

/// Counters of a running server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Open TCP connections.
    pub connections: u64,
    pub connections_total: u64,
    /// Open channels.
    pub channels: u64,
    /// Live monitor subscriptions.
    pub monitors: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub messages_received: u64,
    pub searches: u64,
    /// Searches not answered because of where they came from (other hosts, while serving
    /// this host only).
    pub searches_refused: u64,
    /// Unicast searches passed on to the other servers of this host (loopback group).
    pub searches_forwarded: u64,
    /// Messages that could not be decoded (ignored, or the connection closed).
    pub malformed: u64,
    /// Monitor updates a lossless poster wrote to the socket itself (see `direct_write`).
    pub direct_writes: u64,
    /// Connections closed because a message they had begun was not complete within
    /// `conn_timeout` (a client declaring a payload it does not send).
    pub partial_timeouts: u64,
    /// Connections closed because the incomplete messages of all connections would have held
    /// more than `max_partial_bytes` with theirs.
    pub partial_over_cap: u64,
    /// Search replies not sent because of the rate limits (`search_replies_per_second`).
    pub searches_limited: u64,
    /// Channels and requests refused because their connection held as many as it may
    /// (`max_channels_per_conn`, `max_requests_per_conn`).
    pub limit_refusals: u64,
}

#[derive(Default)]
pub(crate) struct Counters {
    connections: AtomicU64,
    connections_total: AtomicU64,
    channels: AtomicU64,
    monitors: AtomicU64,
    bytes_sent: AtomicU64,
    bytes_received: AtomicU64,
    messages_received: AtomicU64,
    searches: AtomicU64,
    searches_refused: AtomicU64,
    searches_forwarded: AtomicU64,
    malformed: AtomicU64,
    direct_writes: AtomicU64,
    partial_timeouts: AtomicU64,
    partial_over_cap: AtomicU64,
    searches_limited: AtomicU64,
    limit_refusals: AtomicU64,
}

impl Counters {
    pub(crate) fn limit_refusal(&self) {
        self.limit_refusals.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn malformed(&self) {
        self.malformed.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn search_limited(&self) {
        self.searches_limited.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn partial_timeout(&self) {
        self.partial_timeouts.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn partial_over_cap(&self) {
        self.partial_over_cap.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn direct_write(&self) {
        self.direct_writes.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn search(&self) {
        self.searches.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn search_refused(&self) {
        self.searches_refused.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn search_forwarded(&self) {
        self.searches_forwarded.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn sent(&self, n: usize) {
        self.bytes_sent.fetch_add(n as u64, Ordering::Relaxed);
    }
    pub(crate) fn received(&self, bytes: u64) {
        self.bytes_received.fetch_add(bytes, Ordering::Relaxed);
        self.messages_received.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn connection(&self, open: bool) {
        if open {
            self.connections.fetch_add(1, Ordering::Relaxed);
            self.connections_total.fetch_add(1, Ordering::Relaxed);
        } else {
            self.connections.fetch_sub(1, Ordering::Relaxed);
        }
    }
    pub(crate) fn channels(&self, delta: i64) {
        add(&self.channels, delta);
    }
    pub(crate) fn monitors(&self, delta: i64) {
        add(&self.monitors, delta);
    }
    fn snapshot(&self) -> ServerStats {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ServerStats {
            connections: g(&self.connections),
            connections_total: g(&self.connections_total),
            channels: g(&self.channels),
            monitors: g(&self.monitors),
            bytes_sent: g(&self.bytes_sent),
            bytes_received: g(&self.bytes_received),
            messages_received: g(&self.messages_received),
            searches: g(&self.searches),
            searches_refused: g(&self.searches_refused),
            searches_forwarded: g(&self.searches_forwarded),
            malformed: g(&self.malformed),
            direct_writes: g(&self.direct_writes),
            partial_timeouts: g(&self.partial_timeouts),
            partial_over_cap: g(&self.partial_over_cap),
            searches_limited: g(&self.searches_limited),
            limit_refusals: g(&self.limit_refusals),
        }
    }
}

fn add(a: &AtomicU64, delta: i64) {
    if delta >= 0 {
        a.fetch_add(delta as u64, Ordering::Relaxed);
    } else {
        a.fetch_sub(delta.unsigned_abs(), Ordering::Relaxed);
    }
}

/// What every connection of one server shares.
pub(crate) struct ServerShared {
    pub(crate) provider: Arc<dyn ChannelProvider>,
    pub(crate) guid: [u8; 12],
    /// The address announced in search responses and beacons (the unspecified address: "the
    /// one this reply came from").
    pub(crate) tcp_addr: SocketAddr,
    pub(crate) cfg: ServerConfig,
    pub(crate) stats: Counters,
    /// Bytes of incomplete messages over all connections (`max_partial_bytes`).
    pub(crate) partial: Arc<crate::transport::PartialBudget>,
    pub(crate) search_limiter: ndflow_net::ReplyLimiter,
}

impl ServerShared {
    pub(crate) fn new(
        provider: Arc<dyn ChannelProvider>,
        tcp_addr: SocketAddr,
        cfg: ServerConfig,
    ) -> Self {
        Self {
            provider,
            guid: new_guid(),
            tcp_addr: SocketAddr::new(cfg.listen.announce(), tcp_addr.port()),
            partial: crate::transport::PartialBudget::new(cfg.max_partial_bytes),
            search_limiter: ndflow_net::ReplyLimiter::new(
                cfg.search_replies_per_second.0,
                cfg.search_replies_per_second.1,
            ),
            cfg,
            stats: Counters::default(),
        }
    }
}

/// 12 bytes unique to this server instance (random seed, time, process id).
fn new_guid() -> [u8; 12] {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    let a = h.finish();
    h.write_u64(a);
    let b = h.finish();
    let mut g = [0u8; 12];
    g[..8].copy_from_slice(&a.to_le_bytes());
    g[8..].copy_from_slice(&b.to_le_bytes()[..4]);
    g
}

/// A running server. Stops (sockets closed, threads joined) on [`Server::stop`] or drop.
pub struct Server {
    shared: Arc<ServerShared>,
    /// The (first) address the TCP listeners bound.
    tcp_addr: SocketAddr,
    udp_addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    runtime: Option<Runtime>,
}

impl Server {
    /// Bind the TCP and UDP sockets and start serving on a runtime of our own.
    pub fn start(cfg: ServerConfig, provider: Arc<dyn ChannelProvider>) -> io::Result<Server> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(cfg.worker_threads.max(1))
            .thread_name("pva-server")
            .enable_all()
            .build()?;
        // Bind with std sockets and hand them to the runtime through `enter` (not `block_on`),
        // so that starting a server from inside another runtime works too.
        let (listeners, udp, tcp_port) = {
            let _ctx = runtime.enter();
            let mut listeners = Vec::new();
            let mut port = cfg.tcp_port;
            for ip in cfg.listen.tcp_addrs() {
                let listener = match std::net::TcpListener::bind((ip, port)) {
                    Ok(l) => l,
                    // Like pvxs: a taken TCP port falls back to an ephemeral one (searches
                    // tell clients where we are).
                    Err(e) if e.kind() == io::ErrorKind::AddrInUse && port != 0 => {
                        let l = std::net::TcpListener::bind((ip, 0))?;
                        tracing::info!(
                            "pvAccess: TCP port {port} is taken (another server on this host); using {}",
                            l.local_addr()?.port()
                        );
                        l
                    }
                    Err(e) => return Err(e),
                };
                // Every interface on one port, as clients are told one port.
                port = listener.local_addr()?.port();
                listener.set_nonblocking(true)?;
                listeners.push(TcpListener::from_std(listener)?);
            }
            let udp = ndflow_net::DiscoverySocket::bind(cfg.udp_port)?;
            (listeners, udp, port)
        };
        let tcp_addr = SocketAddr::new(cfg.listen.tcp_addrs()[0], tcp_port);
        let udp_addr = udp.local_addr()?;
        let mut cfg = cfg;
        cfg.udp_port = udp_addr.port();
        let udp = Arc::new(udp);
        let shared = Arc::new(ServerShared::new(provider, tcp_addr, cfg.clone()));
        let (shutdown, rx) = watch::channel(false);
        for listener in listeners {
            runtime.spawn(accept_loop(listener, Arc::clone(&shared), rx.clone()));
        }
        runtime.spawn(search::udp_loop(
            Arc::clone(&udp),
            Arc::clone(&shared),
            rx.clone(),
        ));
        runtime.spawn(beacon::beacon_loop(udp, Arc::clone(&shared), rx));
        Ok(Server {
            shared,
            tcp_addr,
            udp_addr,
            shutdown,
            runtime: Some(runtime),
        })
    }

    pub fn tcp_addr(&self) -> SocketAddr {
        self.tcp_addr
    }

    /// Whom this server serves.
    pub fn listen(&self) -> &ndflow_net::Listen {
        &self.shared.cfg.listen
    }

    /// The TCP port asked for, when another server of the host had it and a free one was
    /// taken instead.
    pub fn tcp_port_taken(&self) -> Option<u16> {
        let asked = self.shared.cfg.tcp_port;
        (asked != 0 && asked != self.tcp_addr.port()).then_some(asked)
    }

    /// The search port as a client on this host reaches it (127.0.0.1; the socket itself is
    /// bound to every interface).
    pub fn udp_addr(&self) -> SocketAddr {
        SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, self.udp_addr.port()))
    }

    pub fn stats(&self) -> ServerStats {
        self.shared.stats.snapshot()
    }

    /// Close every socket and join the server's threads.
    pub fn stop(mut self) {
        self.shutdown_now();
    }

    fn shutdown_now(&mut self) {
        let _ = self.shutdown.send(true);
        if let Some(rt) = self.runtime.take() {
            // Dropping tasks closes their sockets and subscriptions (no poster stays blocked).
            if tokio::runtime::Handle::try_current().is_ok() {
                // Inside another runtime we may not block: let the threads finish on their own.
                rt.shutdown_background();
            } else {
                rt.shutdown_timeout(Duration::from_secs(2));
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown_now();
    }
}

async fn accept_loop(
    listener: TcpListener,
    srv: Arc<ServerShared>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.changed() => return,
        };
        match accepted {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                tokio::spawn(connection::run(
                    stream,
                    peer,
                    Arc::clone(&srv),
                    shutdown.clone(),
                ));
            }
            // Out of file descriptors and the like: back off instead of spinning.
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}
