//! The Channel Access server: serves [`CaPv`](crate::CaPv)s found through a
//! [`PvProvider`](crate::PvProvider) to libca (pyepics, MEDM, CS-Studio), caproto and our own
//! client.
//!
//! It runs on its own Tokio runtime, so callers stay plain sync code: an accept loop per
//! interface, per connection a reader (`session`: the protocol state) and a writer (the only
//! task writing the socket: replies, put completions, monitor updates), a UDP search loop and
//! a beacon loop. The UDP search socket is shared with the other servers of the host
//! (SO_REUSEADDR, as RSRV does); a unicast search, which the kernel gives to one of them only,
//! is passed on to all through the loopback group (see `udp`).
//!
//! Files, one concern each: `config` (environment), `fields` (record fields and DBR replies),
//! `monitor` (one subscription's queue), `session` (message handling), `connection` (socket
//! tasks), `udp` (search and beacons).

pub mod config;
mod connection;
mod fields;
mod monitor;
mod session;
mod udp;

#[doc(hidden)]
pub mod fuzz;

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::runtime::Runtime;
use tokio::sync::watch;

pub use config::{ConfigError, ServerConfig};
pub use fields::{SEVERITY_STRINGS, STATUS_STRINGS};

use crate::pv::PvProvider;

/// What every connection of one server shares.
pub(crate) struct ServerShared {
    pub(crate) provider: Arc<dyn PvProvider>,
    pub(crate) cfg: ServerConfig,
    pub(crate) tcp_port: u16,
    connections: AtomicUsize,
    channels: AtomicI64,
    pub(crate) searches_refused: AtomicU64,
    pub(crate) searches_forwarded: AtomicU64,
    /// Connections closed because a message stayed incomplete past `partial_timeout`.
    pub(crate) partial_timeouts: AtomicU64,
    /// Bytes of incomplete messages held by all connections now.
    pub(crate) partial_bytes: AtomicUsize,
    /// Connections closed because their incomplete message took `partial_bytes` over
    /// `max_partial_bytes`.
    pub(crate) partial_over_cap: AtomicU64,
    pub(crate) search_limiter: ndflow_net::ReplyLimiter,
    /// Search replies not sent because of the rate limits.
    pub(crate) searches_limited: AtomicU64,
    /// Channels, subscriptions and notified puts refused because a connection had as many
    /// as it may (`max_channels_per_conn`, the in-flight put limit).
    pub(crate) limit_refusals: AtomicU64,
}

impl ServerShared {
    pub(crate) fn new(provider: Arc<dyn PvProvider>, cfg: ServerConfig, tcp_port: u16) -> Self {
        let (per_source, total) = cfg.search_replies_per_second;
        Self {
            provider,
            cfg,
            tcp_port,
            connections: AtomicUsize::new(0),
            channels: AtomicI64::new(0),
            searches_refused: AtomicU64::new(0),
            searches_forwarded: AtomicU64::new(0),
            partial_timeouts: AtomicU64::new(0),
            partial_bytes: AtomicUsize::new(0),
            partial_over_cap: AtomicU64::new(0),
            search_limiter: ndflow_net::ReplyLimiter::new(per_source, total),
            searches_limited: AtomicU64::new(0),
            limit_refusals: AtomicU64::new(0),
        }
    }

    pub(crate) fn channels(&self, delta: i64) {
        self.channels.fetch_add(delta, Ordering::Relaxed);
    }
}

/// A running server. Stops (SERVER_DISCONN to clients, sockets closed, threads joined) on
/// [`Server::stop`] or drop.
pub struct Server {
    shared: Arc<ServerShared>,
    tcp_addr: SocketAddr,
    udp_addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    runtime: Option<Runtime>,
}

impl Server {
    /// Bind TCP on the configured interfaces and the shared UDP search port, and start
    /// serving.
    pub fn start(cfg: ServerConfig, provider: Arc<dyn PvProvider>) -> io::Result<Server> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(cfg.worker_threads.max(1))
            .thread_name("ca-server")
            .enable_all()
            .build()?;
        let _ctx = runtime.enter();
        let mut listeners = Vec::new();
        let mut port = cfg.tcp_port;
        for ip in cfg.listen.tcp_addrs() {
            let l = match std::net::TcpListener::bind((ip, port)) {
                Ok(l) => l,
                // Another server of this host has the port (RSRV does the same): searches
                // tell clients which one we took.
                Err(e) if e.kind() == io::ErrorKind::AddrInUse && port != 0 => {
                    let l = std::net::TcpListener::bind((ip, 0))?;
                    tracing::info!(
                        "Channel Access: TCP port {port} is taken (another server on this host); using {}",
                        l.local_addr()?.port()
                    );
                    l
                }
                Err(e) => return Err(e),
            };
            // Port 0: the first bind picks one; the other interfaces use the same.
            port = l.local_addr()?.port();
            l.set_nonblocking(true)?;
            listeners.push(TcpListener::from_std(l)?);
        }
        let udp_port = if cfg.udp_port != 0 {
            cfg.udp_port
        } else {
            port
        };
        let udp = Arc::new(ndflow_net::DiscoverySocket::bind(udp_port)?);
        let tcp_addr = listeners[0].local_addr()?;
        let udp_addr = SocketAddr::from((Ipv4Addr::LOCALHOST, udp.port()));
        let shared = Arc::new(ServerShared::new(provider, cfg.clone(), port));
        let (shutdown, rx) = watch::channel(false);
        for l in listeners {
            runtime.spawn(accept_loop(l, Arc::clone(&shared), rx.clone()));
        }
        runtime.spawn(udp::search_loop(
            Arc::clone(&udp),
            Arc::clone(&shared),
            rx.clone(),
        ));
        runtime.spawn(udp::beacon_loop(udp, Arc::clone(&shared), rx));
        drop(_ctx);
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

    /// The search port as a client on this host reaches it (127.0.0.1; the socket itself is
    /// bound to every interface).
    pub fn udp_addr(&self) -> SocketAddr {
        self.udp_addr
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

    /// Searches not answered because of where they came from, and unicast searches passed on
    /// to the other servers of the host.
    pub fn search_counts(&self) -> (u64, u64) {
        (
            self.shared.searches_refused.load(Ordering::Relaxed),
            self.shared.searches_forwarded.load(Ordering::Relaxed),
        )
    }

    /// Connections closed because a message they had begun stayed incomplete past
    /// `partial_timeout` (a client declaring a payload it does not send).
    /// Channels, subscriptions and notified puts refused because their connection was at
    /// its limit.
    pub fn limit_refusals(&self) -> u64 {
        self.shared.limit_refusals.load(Ordering::Relaxed)
    }

    pub fn partial_timeouts(&self) -> u64 {
        self.shared.partial_timeouts.load(Ordering::Relaxed)
    }

    /// Connections closed because the bytes all connections held in incomplete messages went
    /// over `max_partial_bytes` with theirs.
    pub fn partial_over_cap(&self) -> u64 {
        self.shared.partial_over_cap.load(Ordering::Relaxed)
    }

    /// Search replies not sent because a client (or all of them) searched faster than the
    /// rate limits (`search_replies_per_second`).
    pub fn searches_limited(&self) -> u64 {
        self.shared.searches_limited.load(Ordering::Relaxed)
    }

    /// Bytes of incomplete messages the connections hold now.
    pub fn partial_bytes(&self) -> usize {
        self.shared.partial_bytes.load(Ordering::Relaxed)
    }

    /// Open TCP connections.
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::Relaxed)
    }

    /// Open channels over all connections.
    pub fn channels(&self) -> usize {
        usize::try_from(self.shared.channels.load(Ordering::Relaxed)).unwrap_or(0)
    }

    /// Tell clients (SERVER_DISCONN), close every socket and join the server's threads.
    pub fn stop(mut self) {
        self.shutdown_now();
    }

    fn shutdown_now(&mut self) {
        let _ = self.shutdown.send(true);
        if let Some(rt) = self.runtime.take() {
            // Give connections a moment to send SERVER_DISCONN and close.
            let t0 = Instant::now();
            while self.connections() > 0 && t0.elapsed() < Duration::from_secs(1) {
                std::thread::sleep(Duration::from_millis(5));
            }
            if tokio::runtime::Handle::try_current().is_ok() {
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
                if srv.connections.load(Ordering::Relaxed) >= srv.cfg.max_connections {
                    tracing::warn!("CA server: connection limit reached, refusing {peer}");
                    drop(stream);
                    continue;
                }
                let _ = stream.set_nodelay(true);
                // Keepalive finds peers that vanished without a FIN while nothing is sent.
                let sock = socket2::SockRef::from(&stream);
                let ka = socket2::TcpKeepalive::new()
                    .with_time(Duration::from_secs(30))
                    .with_interval(Duration::from_secs(10));
                let _ = sock.set_tcp_keepalive(&ka);
                srv.connections.fetch_add(1, Ordering::Relaxed);
                let srv2 = Arc::clone(&srv);
                let rx = shutdown.clone();
                tokio::spawn(async move {
                    connection::run(stream, peer, Arc::clone(&srv2), rx).await;
                    srv2.connections.fetch_sub(1, Ordering::Relaxed);
                });
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}
