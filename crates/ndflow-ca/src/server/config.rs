//! Server configuration from the EPICS_CAS_* / EPICS_CA_* variables (names as in RSRV), except
//! for the default scope: without EPICS_CAS_INTF_ADDR_LIST (or a `listen` setting) the server
//! serves this host only — searches are received on every interface but answered only for
//! local clients, TCP listens on 127.0.0.1, beacons go to the local CA repeater. With the
//! variable (or `listen = "all"`) it behaves as RSRV: the listed interfaces, beacons to
//! EPICS_CAS_BEACON_ADDR_LIST plus, unless EPICS_CAS_AUTO_BEACON_ADDR_LIST=NO, every
//! interface's broadcast address.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use ndflow_net::Listen;

use crate::header::{DEFAULT_MAX_ARRAY_BYTES, DEFAULT_REPEATER_PORT, DEFAULT_SERVER_PORT};

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
    /// Whom the server serves (EPICS_CAS_INTF_ADDR_LIST; default this host only): the TCP
    /// listeners bind `listen.tcp_addrs()`, the search socket the wildcard address.
    pub listen: Listen,
    /// TCP port (EPICS_CAS_SERVER_PORT, else EPICS_CA_SERVER_PORT; 0 = any free port). When
    /// it is taken (another server on this host) a free one is used and searches say which.
    pub tcp_port: u16,
    /// UDP search port, shared with the other servers of the host (same variables; 0 = the
    /// TCP port).
    pub udp_port: u16,
    /// Beacon destinations (EPICS_CAS_BEACON_ADDR_LIST; entries without a port use
    /// `beacon_port`).
    pub beacon_addrs: Vec<SocketAddr>,
    /// Serving other hosts: beacons also to every interface's broadcast address
    /// (EPICS_CAS_AUTO_BEACON_ADDR_LIST, else EPICS_CA_AUTO_ADDR_LIST; default YES). Serving
    /// this host only: beacons to the local repeater (127.0.0.1).
    pub auto_beacon: bool,
    /// EPICS_CAS_BEACON_PORT, else EPICS_CA_REPEATER_PORT (default 5065).
    pub beacon_port: u16,
    /// Slowest beacon period (EPICS_CAS_BEACON_PERIOD / EPICS_CA_BEACON_PERIOD, default 15 s);
    /// beacons start fast and double up to it.
    pub beacon_period: Duration,
    /// EPICS_CA_MAX_ARRAY_BYTES (default 16384, at least 16384): the largest DBR payload served;
    /// larger requests get ECA_TOLARGE.
    pub max_array_bytes: usize,
    /// Channels one connection may hold.
    pub max_channels_per_conn: usize,
    /// Simultaneous TCP connections.
    pub max_connections: usize,
    /// A connection whose writes make no progress this long is dropped (client gone or stuck).
    pub write_timeout: Duration,
    /// A message whose header has arrived must be complete this long after: a client that
    /// declares a large payload and then stalls or drips is disconnected (and counted).
    pub partial_timeout: Duration,
    /// Bytes all connections together may hold in messages not yet complete; the connection
    /// whose message takes the total over is closed (and counted). Bounds the memory a crowd of
    /// clients can make the server hold with large messages they never finish.
    pub max_partial_bytes: usize,
    /// Search replies a second, to one client address and in all (each with a burst of two
    /// seconds' worth); replies over them are dropped and counted.
    pub search_replies_per_second: (f64, f64),
    /// Tokio worker threads of the server's runtime.
    pub worker_threads: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: Listen::Local,
            tcp_port: DEFAULT_SERVER_PORT,
            udp_port: DEFAULT_SERVER_PORT,
            beacon_addrs: Vec::new(),
            auto_beacon: true,
            beacon_port: DEFAULT_REPEATER_PORT,
            beacon_period: Duration::from_secs(15),
            max_array_bytes: DEFAULT_MAX_ARRAY_BYTES,
            max_channels_per_conn: 100_000,
            max_connections: 1024,
            write_timeout: Duration::from_secs(30),
            partial_timeout: Duration::from_secs(30),
            max_partial_bytes: 256 << 20,
            search_replies_per_second: (1000.0, 10_000.0),
            worker_threads: 2,
        }
    }
}

impl ServerConfig {
    /// For tests: this host only, a free port, no beacons.
    pub fn loopback_ephemeral() -> Self {
        Self {
            tcp_port: 0,
            udp_port: 0,
            auto_beacon: false,
            ..Self::default()
        }
    }

    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// From any variable source, so tests need not touch the process environment.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let get = |k: &str| {
            lookup(k)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let first = |ks: &[&str]| ks.iter().find_map(|k| get(k).map(|v| ((*k).to_owned(), v)));
        let err = |var: &str, value: &str, why: &str| ConfigError {
            var: var.into(),
            value: value.into(),
            why: why.into(),
        };
        let port = |ks: &[&str], default: u16| -> Result<u16, ConfigError> {
            match first(ks) {
                None => Ok(default),
                Some((k, v)) => v.parse().map_err(|_| err(&k, &v, "not a port number")),
            }
        };
        let server_port = port(
            &["EPICS_CAS_SERVER_PORT", "EPICS_CA_SERVER_PORT"],
            DEFAULT_SERVER_PORT,
        )?;
        let mut cfg = Self {
            tcp_port: server_port,
            udp_port: server_port,
            beacon_port: port(
                &["EPICS_CAS_BEACON_PORT", "EPICS_CA_REPEATER_PORT"],
                DEFAULT_REPEATER_PORT,
            )?,
            ..Self::default()
        };
        if let Some(v) = get("EPICS_CAS_INTF_ADDR_LIST") {
            cfg.listen = Listen::parse(&v).map_err(|e| {
                err(
                    "EPICS_CAS_INTF_ADDR_LIST",
                    &v,
                    &format!("bad address {:?}", e.entry),
                )
            })?;
        }
        if let Some(v) = get("EPICS_CAS_BEACON_ADDR_LIST") {
            for e in v.split_whitespace() {
                let a = parse_addr(e, cfg.beacon_port).ok_or_else(|| {
                    err(
                        "EPICS_CAS_BEACON_ADDR_LIST",
                        &v,
                        &format!("bad address {e:?}"),
                    )
                })?;
                cfg.beacon_addrs.push(a);
            }
        }
        if let Some((_, v)) = first(&["EPICS_CAS_AUTO_BEACON_ADDR_LIST", "EPICS_CA_AUTO_ADDR_LIST"])
        {
            cfg.auto_beacon = v.eq_ignore_ascii_case("YES");
        }
        if let Some((k, v)) = first(&["EPICS_CAS_BEACON_PERIOD", "EPICS_CA_BEACON_PERIOD"]) {
            match v.parse::<f64>() {
                Ok(x) if x.is_finite() && x > 0.0 => {
                    cfg.beacon_period = Duration::from_secs_f64(x.max(0.1))
                }
                _ => return Err(err(&k, &v, "not a positive number of seconds")),
            }
        }
        if let Some(v) = get("EPICS_CA_MAX_ARRAY_BYTES") {
            let n: usize = v
                .parse()
                .map_err(|_| err("EPICS_CA_MAX_ARRAY_BYTES", &v, "not a byte count"))?;
            cfg.max_array_bytes = n.max(DEFAULT_MAX_ARRAY_BYTES);
        }
        Ok(cfg)
    }

    /// Where beacons go now: the list (only local addresses when serving this host only),
    /// plus the automatic destinations — the local repeater, or every interface's broadcast
    /// address when serving other hosts.
    pub fn beacon_destinations(&self) -> Vec<SocketAddr> {
        self.listen.beacon_destinations(
            &self.beacon_addrs,
            self.auto_beacon,
            self.beacon_port,
            SocketAddr::from((Ipv4Addr::LOCALHOST, self.beacon_port)),
        )
    }
}

/// `host` or `host:port` (IPv4 or `localhost`).
pub fn parse_addr(s: &str, default_port: u16) -> Option<SocketAddr> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Some(a);
    }
    let (host, port) = match s.rsplit_once(':') {
        Some((h, p)) => (h, p.parse::<u16>().ok()?),
        None => (s, default_port),
    };
    let ip = if host.eq_ignore_ascii_case("localhost") {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        host.parse().ok()?
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cfg(vars: &[(&str, &str)]) -> Result<ServerConfig, ConfigError> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect();
        ServerConfig::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn defaults_serve_this_host_and_beacon_to_the_local_repeater() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.listen, Listen::Local);
        assert_eq!((c.tcp_port, c.udp_port), (5064, 5064));
        assert_eq!(
            c.beacon_destinations(),
            vec!["127.0.0.1:5065".parse::<SocketAddr>().unwrap()]
        );
        assert_eq!(c.max_array_bytes, 16384);
        // Serving this host only, a list naming another host is not used.
        let c = cfg(&[("EPICS_CAS_BEACON_ADDR_LIST", "192.0.2.1")]).unwrap();
        assert!(!c
            .beacon_destinations()
            .iter()
            .any(|a| a.ip() == IpAddr::from([192, 0, 2, 1])));
        // Every interface (as RSRV), automatic list off: the list only.
        let c = cfg(&[
            ("EPICS_CAS_INTF_ADDR_LIST", "0.0.0.0"),
            ("EPICS_CAS_BEACON_ADDR_LIST", "192.0.2.1"),
            ("EPICS_CA_AUTO_ADDR_LIST", "NO"),
        ])
        .unwrap();
        assert_eq!(c.listen, Listen::all());
        assert_eq!(
            c.beacon_destinations(),
            vec!["192.0.2.1:5065".parse::<SocketAddr>().unwrap()]
        );
    }

    #[test]
    fn variables() {
        let c = cfg(&[
            ("EPICS_CA_SERVER_PORT", "15064"),
            ("EPICS_CA_REPEATER_PORT", "15065"),
            ("EPICS_CAS_BEACON_ADDR_LIST", "127.0.0.1 127.0.0.2:999"),
            ("EPICS_CA_MAX_ARRAY_BYTES", "100000000"),
        ])
        .unwrap();
        assert_eq!(c.tcp_port, 15064);
        assert_eq!(
            c.beacon_destinations(),
            vec![
                "127.0.0.1:15065".parse().unwrap(),
                "127.0.0.2:999".parse().unwrap()
            ]
        );
        assert_eq!(c.max_array_bytes, 100_000_000);
        let c = cfg(&[
            ("EPICS_CAS_SERVER_PORT", "0"),
            ("EPICS_CA_SERVER_PORT", "15064"),
            ("EPICS_CAS_AUTO_BEACON_ADDR_LIST", "NO"),
        ])
        .unwrap();
        assert_eq!(c.tcp_port, 0);
        assert!(c.beacon_destinations().is_empty());
        assert!(cfg(&[("EPICS_CA_SERVER_PORT", "x")]).is_err());
        assert!(cfg(&[("EPICS_CAS_INTF_ADDR_LIST", "nowhere")]).is_err());
    }
}
