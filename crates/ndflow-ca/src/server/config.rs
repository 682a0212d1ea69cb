//! Server configuration from the EPICS_CAS_* / EPICS_CA_* variables (names as in RSRV), except
//! that the default bind address is 127.0.0.1, not every interface, and the automatic beacon
//! list (broadcast) is used only when asked for explicitly.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

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
    /// Addresses TCP and UDP bind to (EPICS_CAS_INTF_ADDR_LIST; default 127.0.0.1).
    pub interfaces: Vec<IpAddr>,
    /// TCP and UDP port (EPICS_CAS_SERVER_PORT, else EPICS_CA_SERVER_PORT; 0 = any free port).
    pub tcp_port: u16,
    /// Beacon destinations (EPICS_CAS_BEACON_ADDR_LIST; entries without a port use
    /// `beacon_port`).
    pub beacon_addrs: Vec<SocketAddr>,
    /// EPICS_CAS_AUTO_BEACON_ADDR_LIST=YES adds the limited broadcast address.
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
    /// Tokio worker threads of the server's runtime.
    pub worker_threads: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            interfaces: vec![IpAddr::V4(Ipv4Addr::LOCALHOST)],
            tcp_port: DEFAULT_SERVER_PORT,
            beacon_addrs: Vec::new(),
            auto_beacon: false,
            beacon_port: DEFAULT_REPEATER_PORT,
            beacon_period: Duration::from_secs(15),
            max_array_bytes: DEFAULT_MAX_ARRAY_BYTES,
            max_channels_per_conn: 100_000,
            max_connections: 1024,
            write_timeout: Duration::from_secs(30),
            worker_threads: 2,
        }
    }
}

impl ServerConfig {
    /// For tests: 127.0.0.1, a free port, no beacons.
    pub fn loopback_ephemeral() -> Self {
        Self {
            tcp_port: 0,
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
        let mut cfg = Self {
            tcp_port: port(
                &["EPICS_CAS_SERVER_PORT", "EPICS_CA_SERVER_PORT"],
                DEFAULT_SERVER_PORT,
            )?,
            beacon_port: port(
                &["EPICS_CAS_BEACON_PORT", "EPICS_CA_REPEATER_PORT"],
                DEFAULT_REPEATER_PORT,
            )?,
            ..Self::default()
        };
        if let Some(v) = get("EPICS_CAS_INTF_ADDR_LIST") {
            let mut list = Vec::new();
            for e in v.split_whitespace() {
                let a = parse_addr(e, 0).ok_or_else(|| {
                    err(
                        "EPICS_CAS_INTF_ADDR_LIST",
                        &v,
                        &format!("bad address {e:?}"),
                    )
                })?;
                list.push(a.ip());
            }
            if !list.is_empty() {
                cfg.interfaces = list;
            }
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
        if let Some(v) = get("EPICS_CAS_AUTO_BEACON_ADDR_LIST") {
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

    /// Where beacons go: the list, plus 255.255.255.255 when the automatic list is on.
    pub fn beacon_destinations(&self) -> Vec<SocketAddr> {
        let mut v: Vec<SocketAddr> = self
            .beacon_addrs
            .iter()
            .copied()
            .filter(|a| a.port() != 0)
            .collect();
        if self.auto_beacon {
            v.push(SocketAddr::new(
                IpAddr::V4(Ipv4Addr::BROADCAST),
                self.beacon_port,
            ));
        }
        v
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
    fn defaults_are_loopback_and_quiet() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.interfaces, vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]);
        assert_eq!(c.tcp_port, 5064);
        assert!(c.beacon_destinations().is_empty());
        assert_eq!(c.max_array_bytes, 16384);
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
            ("EPICS_CAS_AUTO_BEACON_ADDR_LIST", "YES"),
        ])
        .unwrap();
        assert_eq!(c.tcp_port, 0);
        assert_eq!(c.beacon_destinations().len(), 1);
        assert!(cfg(&[("EPICS_CA_SERVER_PORT", "x")]).is_err());
        assert!(cfg(&[("EPICS_CAS_INTF_ADDR_LIST", "nowhere")]).is_err());
    }
}
