//! Client configuration from EPICS_CA_ADDR_LIST, EPICS_CA_AUTO_ADDR_LIST,
//! EPICS_CA_SERVER_PORT and EPICS_CA_MAX_ARRAY_BYTES.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use crate::header::{DEFAULT_MAX_ARRAY_BYTES, DEFAULT_SERVER_PORT};
use crate::server::config::parse_addr;

#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Where searches go (EPICS_CA_ADDR_LIST; `host` or `host:port`).
    pub addr_list: Vec<SocketAddr>,
    /// EPICS_CA_AUTO_ADDR_LIST=YES adds the limited broadcast address. Unlike libca (where it
    /// defaults to YES) this client broadcasts only when told to; with neither list it
    /// searches 127.0.0.1.
    pub auto_addr_list: bool,
    /// EPICS_CA_SERVER_PORT (default 5064): the port of list entries without one.
    pub server_port: u16,
    /// EPICS_CA_MAX_ARRAY_BYTES (default 16384): larger replies close the circuit.
    pub max_array_bytes: usize,
    /// Sent as HOST_NAME / CLIENT_NAME.
    pub host_name: String,
    pub user_name: String,
    /// How long `monitor()` waits to connect.
    pub connect_timeout: Duration,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            addr_list: Vec::new(),
            auto_addr_list: false,
            server_port: DEFAULT_SERVER_PORT,
            max_array_bytes: DEFAULT_MAX_ARRAY_BYTES,
            host_name: host_name(),
            user_name: std::env::var("USER")
                .or_else(|_| std::env::var("LOGNAME"))
                .unwrap_or_else(|_| "ndflow".into()),
            connect_timeout: Duration::from_secs(5),
        }
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

impl ClientConfig {
    /// From the process environment; entries that cannot be parsed are skipped (logged).
    pub fn from_env() -> Self {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let get = |k: &str| {
            lookup(k)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let mut cfg = Self::default();
        if let Some(p) = get("EPICS_CA_SERVER_PORT") {
            match p.parse() {
                Ok(p) => cfg.server_port = p,
                Err(_) => tracing::warn!("EPICS_CA_SERVER_PORT={p:?} is not a port"),
            }
        }
        if let Some(v) = get("EPICS_CA_ADDR_LIST") {
            for e in v.split_whitespace() {
                match parse_addr(e, cfg.server_port) {
                    Some(a) => cfg.addr_list.push(a),
                    None => tracing::warn!("EPICS_CA_ADDR_LIST: skipping {e:?}"),
                }
            }
        }
        if let Some(v) = get("EPICS_CA_AUTO_ADDR_LIST") {
            cfg.auto_addr_list = v.eq_ignore_ascii_case("YES");
        }
        if let Some(v) = get("EPICS_CA_MAX_ARRAY_BYTES") {
            match v.parse::<usize>() {
                Ok(n) => cfg.max_array_bytes = n.max(DEFAULT_MAX_ARRAY_BYTES),
                Err(_) => tracing::warn!("EPICS_CA_MAX_ARRAY_BYTES={v:?} is not a byte count"),
            }
        }
        cfg
    }

    /// A client for one server's port on 127.0.0.1 (tests).
    pub fn loopback(port: u16) -> Self {
        Self {
            addr_list: vec![SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)],
            server_port: port,
            max_array_bytes: 100_000_000,
            ..Self::default()
        }
    }

    /// Where searches go.
    pub fn search_targets(&self) -> Vec<SocketAddr> {
        let mut v = self.addr_list.clone();
        if self.auto_addr_list {
            v.push(SocketAddr::new(
                IpAddr::V4(Ipv4Addr::BROADCAST),
                self.server_port,
            ));
        }
        if v.is_empty() {
            v.push(SocketAddr::new(
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                self.server_port,
            ));
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addr_list_with_ports() {
        let c = ClientConfig::from_lookup(|k| match k {
            "EPICS_CA_ADDR_LIST" => Some("127.0.0.1 127.0.0.2:7000 bad:x".into()),
            "EPICS_CA_SERVER_PORT" => Some("6000".into()),
            "EPICS_CA_AUTO_ADDR_LIST" => Some("NO".into()),
            _ => None,
        });
        assert_eq!(
            c.search_targets(),
            vec![
                "127.0.0.1:6000".parse().unwrap(),
                "127.0.0.2:7000".parse().unwrap()
            ]
        );
        let c = ClientConfig::from_lookup(|_| None);
        assert_eq!(c.search_targets(), vec!["127.0.0.1:5064".parse().unwrap()]);
    }
}
