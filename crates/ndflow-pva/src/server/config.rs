//! Server configuration from the EPICS_PVAS_* / EPICS_PVA_* variables (names and fallbacks as in
//! pvxs `config.cpp`), except for the default scope: without EPICS_PVAS_INTF_ADDR_LIST (or a
//! `listen` setting) the server serves this host only — searches are received on every
//! interface but answered only for local clients, TCP listens on 127.0.0.1, and beacons stay
//! on loopback. With the variable (or `listen = "all"`) it behaves as pvxs: the listed
//! interfaces, beacons to EPICS_PVAS_BEACON_ADDR_LIST plus, unless
//! EPICS_PVAS_AUTO_BEACON_ADDR_LIST=NO, every interface's broadcast address.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use ndflow_net::Listen;

use crate::transport::DEFAULT_MAX_MESSAGE;

pub const DEFAULT_TCP_PORT: u16 = 5075;
pub const DEFAULT_UDP_PORT: u16 = 5076;

/// A variable that could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var}={value:?}: {why}")]
pub struct ConfigError {
    pub var: String,
    pub value: String,
    pub why: String,
}

#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Whom the server serves; the TCP listeners bind `listen.tcp_addrs()`, the search
    /// socket the wildcard address.
    pub listen: Listen,
    /// TCP port; 0 = ephemeral. If the port is taken the server falls back to an ephemeral one
    /// (as pvxs does); `tcp_addr()` tells which.
    pub tcp_port: u16,
    /// UDP search port; 0 = ephemeral.
    pub udp_port: u16,
    /// Beacon destinations besides the automatic ones (serving this host only, those that
    /// are not local are left out).
    pub beacon_addrs: Vec<SocketAddr>,
    /// Beacons also to every interface's broadcast address (other hosts served only) and,
    /// serving this host only, to the loopback group.
    pub auto_beacon: bool,
    pub beacon_period: Duration,
    /// Largest message accepted from a client (segments joined).
    pub max_message: usize,
    /// A connection silent this long is closed (pvxs: EPICS_PVA_CONN_TMO x 4/3 = 40 s); so is
    /// one whose message, once begun, is not complete this long after.
    pub conn_timeout: Duration,
    /// Bytes all connections together may hold in messages not yet complete; the connection
    /// whose bytes take the total over is closed (and counted).
    pub max_partial_bytes: usize,
    /// Search replies a second, to one client address and in all (each with a burst of two
    /// seconds' worth); replies over them are dropped and counted.
    pub search_replies_per_second: (f64, f64),
    /// Period of the server's own ECHO keep-alives.
    pub echo_period: Duration,
    /// Tokio worker threads of the server's runtime.
    pub worker_threads: usize,
    /// A lossless post writes a monitor update to an idle connection's socket from the posting
    /// thread (see `server/direct.rs`); off: every update goes through the connection's writer.
    pub direct_write: bool,
    /// Channels one connection may hold; a CREATE_CHANNEL over it is refused (and counted).
    pub max_channels_per_conn: usize,
    /// Requests (get, put, monitor, …) one connection may hold open; more are refused (and
    /// counted). Each monitor's queue is bounded too, so a connection's queued updates are.
    pub max_requests_per_conn: usize,
}

impl ServerConfig {
    /// For tests: this host only, ephemeral ports, no beacons.
    pub fn loopback_ephemeral() -> Self {
        Self {
            listen: Listen::Local,
            tcp_port: 0,
            udp_port: 0,
            beacon_addrs: Vec::new(),
            auto_beacon: false,
            beacon_period: Duration::from_secs(15),
            max_message: DEFAULT_MAX_MESSAGE,
            conn_timeout: Duration::from_secs(40),
            max_partial_bytes: 256 << 20,
            search_replies_per_second: (1000.0, 10_000.0),
            echo_period: Duration::from_secs(15),
            worker_threads: 2,
            direct_write: true,
            max_channels_per_conn: 1 << 16,
            max_requests_per_conn: 1 << 16,
        }
    }

    /// From the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// From any variable source (`lookup(name)` → value), so that tests need not touch the
    /// process environment.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let get = |k: &str| {
            lookup(k)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let first = |ks: &[&str]| ks.iter().find_map(|k| get(k).map(|v| ((*k).to_owned(), v)));
        let port = |ks: &[&str], default: u16| -> Result<u16, ConfigError> {
            match first(ks) {
                None => Ok(default),
                Some((k, v)) => v.parse::<u16>().map_err(|_| ConfigError {
                    var: k,
                    value: v,
                    why: "not a port number".into(),
                }),
            }
        };
        let mut cfg = Self::loopback_ephemeral();
        cfg.tcp_port = port(
            &["EPICS_PVAS_SERVER_PORT", "EPICS_PVA_SERVER_PORT"],
            DEFAULT_TCP_PORT,
        )?;
        cfg.udp_port = port(
            &["EPICS_PVAS_BROADCAST_PORT", "EPICS_PVA_BROADCAST_PORT"],
            DEFAULT_UDP_PORT,
        )?;
        if let Some(v) = get("EPICS_PVAS_INTF_ADDR_LIST") {
            cfg.listen = Listen::parse(&v).map_err(|e| ConfigError {
                var: "EPICS_PVAS_INTF_ADDR_LIST".into(),
                value: v.clone(),
                why: format!("{:?} is not an IP address", e.entry),
            })?;
        }
        cfg.auto_beacon = match first(&[
            "EPICS_PVAS_AUTO_BEACON_ADDR_LIST",
            "EPICS_PVA_AUTO_ADDR_LIST",
        ]) {
            None => true,
            Some((_, v)) => v.eq_ignore_ascii_case("YES"),
        };
        // Like pvxs, the client's address list is the fallback for the beacon list.
        let (var, list) = match first(&["EPICS_PVAS_BEACON_ADDR_LIST", "EPICS_PVA_ADDR_LIST"]) {
            Some((k, v)) => (k, v),
            None => (String::new(), String::new()),
        };
        for entry in list.split_whitespace() {
            let a = parse_addr(entry, cfg.udp_port).ok_or_else(|| ConfigError {
                var: var.clone(),
                value: list.clone(),
                why: format!("bad address {entry:?}"),
            })?;
            cfg.beacon_addrs.push(a);
        }
        if let Some(v) = get("EPICS_PVA_BEACON_PERIOD") {
            cfg.beacon_period = secs("EPICS_PVA_BEACON_PERIOD", &v)?;
        }
        if let Some(v) = get("EPICS_PVA_CONN_TMO") {
            cfg.conn_timeout = secs("EPICS_PVA_CONN_TMO", &v)?.mul_f64(4.0 / 3.0);
        }
        Ok(cfg)
    }

    /// Where beacons go now: the list (only local addresses when serving this host only),
    /// plus the automatic destinations.
    pub fn beacon_destinations(&self) -> Vec<SocketAddr> {
        self.listen.beacon_destinations(
            &self.beacon_addrs,
            self.auto_beacon,
            self.udp_port,
            SocketAddr::from((ndflow_net::LOCAL_GROUP, self.udp_port)),
        )
    }
}

fn secs(var: &str, v: &str) -> Result<Duration, ConfigError> {
    match v.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(Duration::from_secs_f64(x.max(0.1))),
        _ => Err(ConfigError {
            var: var.into(),
            value: v.into(),
            why: "not a positive number of seconds".into(),
        }),
    }
}

fn parse_host(s: &str) -> Option<IpAddr> {
    let host = match s.rsplit_once(':') {
        Some((h, p)) if p.parse::<u16>().is_ok() && !h.contains(':') => h,
        _ => s,
    };
    if host.eq_ignore_ascii_case("localhost") {
        return Some(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    host.parse().ok()
}

/// `host` or `host:port` (IPv4 or `localhost`).
pub(crate) fn parse_addr(s: &str, default_port: u16) -> Option<SocketAddr> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Some(a);
    }
    let (host, port) = match s.rsplit_once(':') {
        Some((h, p)) => (h, p.parse::<u16>().ok()?),
        None => (s, default_port),
    };
    Some(SocketAddr::new(parse_host(host)?, port))
}
