//! Client configuration from the EPICS_PVA_* environment variables (as pvxs reads them).
//!
//! Search destinations: `EPICS_PVA_ADDR_LIST` entries (port defaults to the broadcast port) and,
//! when `EPICS_PVA_AUTO_ADDR_LIST` is YES (the EPICS default), the directed broadcast address of
//! every interface that is up, loopback excluded (as pvxs), at `EPICS_PVA_BROADCAST_PORT` — never
//! the limited broadcast address 255.255.255.255 unless the address list names it.
//! `EPICS_PVA_NAME_SERVERS` are searched over TCP. `loopback_only` drops every destination outside
//! 127.0.0.0/8 (and `::1`), for processes that must never reach the network.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use crate::transport::DEFAULT_MAX_MESSAGE;

/// Default UDP search/beacon port.
pub const DEFAULT_BROADCAST_PORT: u16 = 5076;
/// Default TCP server port (used for name servers given without a port).
pub const DEFAULT_SERVER_PORT: u16 = 5075;

/// Why a configuration could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("{var}: cannot parse {value:?} as an address")]
    BadAddress { var: &'static str, value: String },
    #[error("{var}: cannot parse {value:?} as a port")]
    BadPort { var: &'static str, value: String },
    #[error("{var}: expected YES or NO, got {value:?}")]
    BadBool { var: &'static str, value: String },
    #[error("{var}: cannot parse {value:?} as seconds")]
    BadDuration { var: &'static str, value: String },
}

/// Credentials chosen in connection validation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuthMethod {
    Anonymous,
    /// "ca": user and host name as pvxs sends them (servers apply access rights with them).
    Ca {
        user: String,
        host: String,
    },
}

impl AuthMethod {
    /// "ca" with the login name and host name of this process.
    pub fn ca_from_env() -> Self {
        let user = ndflow_net::identity::user_name().unwrap_or_else(|| "unknown".into());
        let host = std::env::var("HOSTNAME")
            .ok()
            .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "localhost".into());
        AuthMethod::Ca { user, host }
    }

    pub fn name(&self) -> &'static str {
        match self {
            AuthMethod::Anonymous => "anonymous",
            AuthMethod::Ca { .. } => "ca",
        }
    }
}

/// Where and how the client looks for channels.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// UDP search destinations (unicast or broadcast), with their ports.
    pub addr_list: Vec<SocketAddr>,
    /// Add the directed broadcast address of every interface that is up (loopback excluded)
    /// on `broadcast_port`.
    pub auto_addr_list: bool,
    /// TCP name servers: searches are also sent over a connection to each.
    pub name_servers: Vec<SocketAddr>,
    /// Port for addr_list entries given without one.
    pub broadcast_port: u16,
    /// Default time allowed to find a channel (used by operations that take no timeout).
    pub search_timeout: Duration,
    /// Largest message accepted from a server (after joining segments).
    pub max_message: usize,
    /// Local address the UDP search socket binds to (EPICS_PVA_INTF_ADDR_LIST's first entry).
    pub intf_addr: IpAddr,
    /// Drop every destination outside the loopback network.
    pub loopback_only: bool,
    pub auth: AuthMethod,
    /// Period of ECHO keep-alives on idle connections (pvxs: 15 s).
    pub echo_period: Duration,
    /// A connection silent for this long is closed (pvxs: 40 s).
    pub conn_timeout: Duration,
    /// First search retry interval; doubles up to `search_max_interval`.
    pub search_min_interval: Duration,
    pub search_max_interval: Duration,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            addr_list: Vec::new(),
            auto_addr_list: true,
            name_servers: Vec::new(),
            broadcast_port: DEFAULT_BROADCAST_PORT,
            search_timeout: Duration::from_secs(5),
            max_message: DEFAULT_MAX_MESSAGE,
            intf_addr: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            loopback_only: false,
            auth: AuthMethod::ca_from_env(),
            echo_period: Duration::from_secs(15),
            conn_timeout: Duration::from_secs(40),
            search_min_interval: Duration::from_millis(50),
            search_max_interval: Duration::from_secs(5),
        }
    }
}

impl ClientConfig {
    /// Read EPICS_PVA_ADDR_LIST, EPICS_PVA_AUTO_ADDR_LIST, EPICS_PVA_BROADCAST_PORT,
    /// EPICS_PVA_NAME_SERVERS, EPICS_PVA_INTF_ADDR_LIST, EPICS_PVA_CONN_TMO and
    /// NDFLOW_PVA_LOOPBACK_ONLY from the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// As [`Self::from_env`] with an explicit variable lookup (tests, embedded configs).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let mut cfg = ClientConfig::default();
        let var = |k: &str| {
            get(k)
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
        };
        if let Some(p) = var("EPICS_PVA_BROADCAST_PORT") {
            cfg.broadcast_port = parse_port("EPICS_PVA_BROADCAST_PORT", &p)?;
        }
        let server_port = match var("EPICS_PVA_SERVER_PORT") {
            Some(p) => parse_port("EPICS_PVA_SERVER_PORT", &p)?,
            None => DEFAULT_SERVER_PORT,
        };
        if let Some(list) = var("EPICS_PVA_ADDR_LIST") {
            cfg.addr_list = parse_list("EPICS_PVA_ADDR_LIST", &list, cfg.broadcast_port)?;
        }
        if let Some(v) = var("EPICS_PVA_AUTO_ADDR_LIST") {
            cfg.auto_addr_list = parse_bool("EPICS_PVA_AUTO_ADDR_LIST", &v)?;
        }
        if let Some(list) = var("EPICS_PVA_NAME_SERVERS") {
            cfg.name_servers = parse_list("EPICS_PVA_NAME_SERVERS", &list, server_port)?;
        }
        if let Some(list) = var("EPICS_PVA_INTF_ADDR_LIST") {
            if let Some(first) = list.split_whitespace().next() {
                cfg.intf_addr = parse_list("EPICS_PVA_INTF_ADDR_LIST", first, 0)?
                    .first()
                    .map(|a| a.ip())
                    .unwrap_or(cfg.intf_addr);
            }
        }
        if let Some(v) = var("EPICS_PVA_CONN_TMO") {
            let secs: f64 = v.parse().map_err(|_| ConfigError::BadDuration {
                var: "EPICS_PVA_CONN_TMO",
                value: v.clone(),
            })?;
            if !(secs.is_finite() && secs > 0.0 && secs < 1e6) {
                return Err(ConfigError::BadDuration {
                    var: "EPICS_PVA_CONN_TMO",
                    value: v,
                });
            }
            // pvxs waits 4/3 of the configured timeout before declaring a peer dead.
            cfg.conn_timeout = Duration::from_secs_f64(secs * 4.0 / 3.0);
            cfg.echo_period = Duration::from_secs_f64(secs / 2.0);
        }
        if let Some(v) = var("NDFLOW_PVA_LOOPBACK_ONLY") {
            cfg.loopback_only = parse_bool("NDFLOW_PVA_LOOPBACK_ONLY", &v)?;
        }
        Ok(cfg)
    }

    /// Loopback-only configuration for tests: search `127.0.0.1:udp_port` only.
    pub fn loopback(udp_port: u16) -> Self {
        Self {
            addr_list: vec![SocketAddr::from((Ipv4Addr::LOCALHOST, udp_port))],
            auto_addr_list: false,
            broadcast_port: udp_port,
            intf_addr: IpAddr::V4(Ipv4Addr::LOCALHOST),
            loopback_only: true,
            ..Self::default()
        }
    }

    /// The UDP destinations searches go to, after `auto_addr_list` (the interfaces' directed
    /// broadcast addresses) and `loopback_only`. When the automatic list is on but finds no
    /// interface that broadcasts (a container with loopback only) and nothing else is
    /// configured, 127.0.0.1 at `broadcast_port`, so that the host's own servers are found.
    pub fn search_destinations(&self) -> Vec<SocketAddr> {
        let auto = if self.auto_addr_list {
            ndflow_net::ifaces::broadcast_addrs()
        } else {
            Vec::new()
        };
        self.search_destinations_with(&auto)
    }

    /// [`Self::search_destinations`] with the automatic list given (tests).
    pub fn search_destinations_with(&self, broadcasts: &[Ipv4Addr]) -> Vec<SocketAddr> {
        let mut out = self.addr_list.clone();
        if self.auto_addr_list {
            out.extend(
                broadcasts
                    .iter()
                    .map(|b| SocketAddr::from((*b, self.broadcast_port))),
            );
        }
        if self.auto_addr_list && out.is_empty() && self.name_servers.is_empty() {
            out.push(SocketAddr::from((Ipv4Addr::LOCALHOST, self.broadcast_port)));
        }
        out.retain(|a| self.allowed(a));
        let mut seen = std::collections::HashSet::new();
        out.retain(|a| seen.insert(*a));
        out
    }

    /// Every place a search goes, for messages: `udp 10.0.0.255:5076, tcp 10.1.2.3:5075`
    /// (`nowhere` when empty).
    pub fn describe_destinations(&self) -> String {
        let mut parts: Vec<String> = self
            .search_destinations()
            .iter()
            .map(|a| format!("udp {a}"))
            .collect();
        parts.extend(
            self.name_server_destinations()
                .iter()
                .map(|a| format!("tcp {a}")),
        );
        if parts.is_empty() {
            "nowhere".into()
        } else {
            parts.join(", ")
        }
    }

    /// Name servers after `loopback_only`.
    pub fn name_server_destinations(&self) -> Vec<SocketAddr> {
        let mut out = self.name_servers.clone();
        out.retain(|a| self.allowed(a));
        out
    }

    /// Whether the client may talk to `a` (servers found by search are checked too).
    pub fn allowed(&self, a: &SocketAddr) -> bool {
        !self.loopback_only || a.ip().is_loopback()
    }
}

fn parse_bool(var: &'static str, v: &str) -> Result<bool, ConfigError> {
    match v.to_ascii_uppercase().as_str() {
        "YES" | "Y" | "TRUE" | "1" | "ON" => Ok(true),
        "NO" | "N" | "FALSE" | "0" | "OFF" => Ok(false),
        _ => Err(ConfigError::BadBool {
            var,
            value: v.into(),
        }),
    }
}

fn parse_port(var: &'static str, v: &str) -> Result<u16, ConfigError> {
    v.parse().map_err(|_| ConfigError::BadPort {
        var,
        value: v.into(),
    })
}

/// Whitespace-separated `host[:port]` entries (IPv4, `[v6]:port` or bare IPv6).
fn parse_list(
    var: &'static str,
    list: &str,
    default_port: u16,
) -> Result<Vec<SocketAddr>, ConfigError> {
    list.split_whitespace()
        .map(|e| parse_addr(var, e, default_port))
        .collect()
}

fn parse_addr(var: &'static str, e: &str, default_port: u16) -> Result<SocketAddr, ConfigError> {
    if let Ok(sa) = e.parse::<SocketAddr>() {
        return Ok(sa);
    }
    if let Ok(ip) = e.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, default_port));
    }
    if let Some((host, port)) = e.rsplit_once(':') {
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(SocketAddr::new(ip, parse_port(var, port)?));
        }
        if host == "localhost" {
            return Ok(SocketAddr::from((
                Ipv4Addr::LOCALHOST,
                parse_port(var, port)?,
            )));
        }
    }
    if e == "localhost" {
        return Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, default_port)));
    }
    Err(ConfigError::BadAddress {
        var,
        value: e.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cfg(vars: &[(&str, &str)]) -> Result<ClientConfig, ConfigError> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ClientConfig::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn env_lists_and_ports() {
        let c = cfg(&[
            ("EPICS_PVA_ADDR_LIST", "127.0.0.1 127.0.0.2:1234"),
            ("EPICS_PVA_AUTO_ADDR_LIST", "NO"),
            ("EPICS_PVA_BROADCAST_PORT", "15076"),
            ("EPICS_PVA_NAME_SERVERS", "127.0.0.1:15075 localhost"),
            ("EPICS_PVA_SERVER_PORT", "15999"),
            ("EPICS_PVA_INTF_ADDR_LIST", "127.0.0.1"),
        ])
        .unwrap();
        assert_eq!(
            c.search_destinations(),
            vec![
                "127.0.0.1:15076".parse().unwrap(),
                "127.0.0.2:1234".parse().unwrap()
            ]
        );
        assert_eq!(
            c.name_servers,
            vec![
                "127.0.0.1:15075".parse().unwrap(),
                "127.0.0.1:15999".parse().unwrap()
            ]
        );
        assert_eq!(c.intf_addr, IpAddr::V4(Ipv4Addr::LOCALHOST));
    }

    #[test]
    fn auto_list_and_loopback_filter() {
        let c = cfg(&[("EPICS_PVA_ADDR_LIST", "10.0.0.1")]).unwrap();
        assert!(c.auto_addr_list, "YES by default");
        let b = [
            Ipv4Addr::new(10, 0, 0, 255),
            Ipv4Addr::new(192, 168, 7, 255),
        ];
        assert_eq!(
            c.search_destinations_with(&b),
            vec![
                "10.0.0.1:5076".parse().unwrap(),
                "10.0.0.255:5076".parse().unwrap(),
                "192.168.7.255:5076".parse().unwrap()
            ]
        );
        // The interfaces' directed broadcast addresses, never 255.255.255.255.
        let real = c.search_destinations();
        assert!(!real
            .iter()
            .any(|a| a.ip() == IpAddr::V4(Ipv4Addr::BROADCAST)));
        for b in ndflow_net::ifaces::broadcast_addrs() {
            assert!(real.contains(&SocketAddr::from((b, 5076))), "{real:?}");
        }
        let c = cfg(&[
            ("EPICS_PVA_ADDR_LIST", "10.0.0.255"),
            ("EPICS_PVA_BROADCAST_PORT", "15076"),
        ])
        .unwrap();
        assert_eq!(
            c.search_destinations_with(&b),
            vec![
                "10.0.0.255:15076".parse().unwrap(),
                "192.168.7.255:15076".parse().unwrap()
            ],
            "at the broadcast port, without duplicates"
        );
        // No interface that broadcasts (loopback only) and nothing else: 127.0.0.1.
        assert_eq!(
            cfg(&[]).unwrap().search_destinations_with(&[]),
            vec!["127.0.0.1:5076".parse().unwrap()]
        );
        let c = cfg(&[("EPICS_PVA_AUTO_ADDR_LIST", "NO")]).unwrap();
        assert!(c.search_destinations_with(&b).is_empty());
        assert!(c.search_destinations_with(&[]).is_empty());
        assert_eq!(c.describe_destinations(), "nowhere");
        let c = cfg(&[
            ("EPICS_PVA_AUTO_ADDR_LIST", "NO"),
            ("EPICS_PVA_ADDR_LIST", "127.0.0.1"),
            ("EPICS_PVA_NAME_SERVERS", "127.0.0.1:15075"),
        ])
        .unwrap();
        assert_eq!(
            c.describe_destinations(),
            "udp 127.0.0.1:5076, tcp 127.0.0.1:15075"
        );
        let c = cfg(&[
            ("EPICS_PVA_ADDR_LIST", "10.0.0.1 127.0.0.1"),
            ("NDFLOW_PVA_LOOPBACK_ONLY", "YES"),
        ])
        .unwrap();
        assert_eq!(
            c.search_destinations(),
            vec!["127.0.0.1:5076".parse().unwrap()]
        );
    }

    #[test]
    fn errors_name_the_variable() {
        let e = cfg(&[("EPICS_PVA_ADDR_LIST", "nonsense:x")]).unwrap_err();
        assert!(e.to_string().contains("EPICS_PVA_ADDR_LIST"), "{e}");
        let e = cfg(&[("EPICS_PVA_AUTO_ADDR_LIST", "maybe")]).unwrap_err();
        assert!(e.to_string().contains("YES or NO"), "{e}");
    }
}
