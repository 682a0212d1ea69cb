//! Client configuration from EPICS_CA_ADDR_LIST, EPICS_CA_AUTO_ADDR_LIST,
//! EPICS_CA_NAME_SERVERS, EPICS_CA_SERVER_PORT and EPICS_CA_MAX_ARRAY_BYTES, with libca's
//! defaults.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use crate::header::{DEFAULT_MAX_ARRAY_BYTES, DEFAULT_SERVER_PORT};

#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Where searches go (EPICS_CA_ADDR_LIST; `host` or `host:port`).
    pub addr_list: Vec<SocketAddr>,
    /// EPICS_CA_AUTO_ADDR_LIST (default YES, as in libca): also search the directed broadcast
    /// address of every interface that is up, loopback excluded, at `server_port`.
    pub auto_addr_list: bool,
    /// EPICS_CA_NAME_SERVERS: servers searched over TCP (a circuit to each; VERSION + SEARCH
    /// sent on it, replies taken there), as libca does.
    pub name_servers: Vec<SocketAddr>,
    /// EPICS_CA_SERVER_PORT (default 5064): the port of list entries without one, and of the
    /// automatic list.
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
            auto_addr_list: true,
            name_servers: Vec::new(),
            server_port: DEFAULT_SERVER_PORT,
            max_array_bytes: DEFAULT_MAX_ARRAY_BYTES,
            host_name: host_name(),
            user_name: ndflow_net::identity::user_name().unwrap_or_else(|| "ndflow".into()),
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

/// `host` or `host:port` (an IPv4 address, `localhost` or a host name, resolved once), as
/// libca's address lists take them.
pub fn parse_host_port(s: &str, default_port: u16) -> Option<SocketAddr> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Some(a);
    }
    let (host, port) = match s.rsplit_once(':') {
        Some((h, p)) => (h, p.parse::<u16>().ok()?),
        None => (s, default_port),
    };
    if host.is_empty() {
        return None;
    }
    if host.eq_ignore_ascii_case("localhost") {
        return Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Some(SocketAddr::new(ip, port));
    }
    // A host name: its first IPv4 address (Channel Access is IPv4).
    (host, port).to_socket_addrs().ok()?.find(|a| a.is_ipv4())
}

/// libca's reading of EPICS_CA_AUTO_ADDR_LIST: NO turns the automatic list off, anything else
/// leaves it on.
fn auto_list_on(v: &str) -> bool {
    !v.to_ascii_lowercase().contains("no")
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
        let list = |var: &str| {
            let mut out = Vec::new();
            for e in get(var).unwrap_or_default().split_whitespace() {
                match parse_host_port(e, cfg.server_port) {
                    Some(a) => out.push(a),
                    None => tracing::warn!("{var}: skipping {e:?}"),
                }
            }
            out
        };
        cfg.addr_list = list("EPICS_CA_ADDR_LIST");
        cfg.name_servers = list("EPICS_CA_NAME_SERVERS");
        if let Some(v) = get("EPICS_CA_AUTO_ADDR_LIST") {
            cfg.auto_addr_list = auto_list_on(&v);
        }
        if let Some(v) = get("EPICS_CA_MAX_ARRAY_BYTES") {
            match v.parse::<usize>() {
                Ok(n) => cfg.max_array_bytes = n.max(DEFAULT_MAX_ARRAY_BYTES),
                Err(_) => tracing::warn!("EPICS_CA_MAX_ARRAY_BYTES={v:?} is not a byte count"),
            }
        }
        cfg
    }

    /// A client for one server's port on 127.0.0.1 (tests): no automatic list.
    pub fn loopback(port: u16) -> Self {
        Self {
            addr_list: vec![SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)],
            auto_addr_list: false,
            server_port: port,
            max_array_bytes: 100_000_000,
            ..Self::default()
        }
    }

    /// Where UDP searches go: the address list, then (EPICS_CA_AUTO_ADDR_LIST) the interfaces'
    /// directed broadcast addresses at `server_port`. With neither, and no name server either,
    /// 127.0.0.1 at `server_port`.
    pub fn search_targets(&self) -> Vec<SocketAddr> {
        let auto = if self.auto_addr_list {
            ndflow_net::ifaces::broadcast_addrs()
        } else {
            Vec::new()
        };
        self.search_targets_with(&auto)
    }

    /// [`Self::search_targets`] with the automatic list given (tests).
    pub fn search_targets_with(&self, broadcasts: &[Ipv4Addr]) -> Vec<SocketAddr> {
        let mut v = self.addr_list.clone();
        if self.auto_addr_list {
            for b in broadcasts {
                let a = SocketAddr::new(IpAddr::V4(*b), self.server_port);
                if !v.contains(&a) {
                    v.push(a);
                }
            }
        }
        if v.is_empty() && self.name_servers.is_empty() {
            v.push(SocketAddr::new(
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                self.server_port,
            ));
        }
        v
    }

    /// Every place a search goes, for messages: `udp 10.0.0.255:5064, tcp 10.1.2.3:5064`
    /// (`nowhere` when empty).
    pub fn describe_destinations(&self) -> String {
        let mut parts: Vec<String> = self
            .search_targets()
            .iter()
            .map(|a| format!("udp {a}"))
            .collect();
        parts.extend(self.name_servers.iter().map(|a| format!("tcp {a}")));
        if parts.is_empty() {
            "nowhere".into()
        } else {
            parts.join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(vars: &[(&str, &str)]) -> ClientConfig {
        ClientConfig::from_lookup(|k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn addr_list_with_ports() {
        let c = cfg(&[
            ("EPICS_CA_ADDR_LIST", "127.0.0.1 127.0.0.2:7000 bad:x"),
            ("EPICS_CA_SERVER_PORT", "6000"),
            ("EPICS_CA_AUTO_ADDR_LIST", "NO"),
        ]);
        assert_eq!(
            c.search_targets(),
            vec![sa("127.0.0.1:6000"), sa("127.0.0.2:7000")]
        );
    }

    #[test]
    fn auto_list_defaults_to_yes_with_directed_broadcasts() {
        let c = cfg(&[]);
        assert!(c.auto_addr_list);
        assert!(c.name_servers.is_empty());
        let b = [
            Ipv4Addr::new(10, 0, 0, 255),
            Ipv4Addr::new(192, 168, 1, 255),
        ];
        assert_eq!(
            c.search_targets_with(&b),
            vec![sa("10.0.0.255:5064"), sa("192.168.1.255:5064")]
        );
        // Never the limited broadcast address.
        assert!(!c
            .search_targets()
            .iter()
            .any(|a| a.ip() == IpAddr::V4(Ipv4Addr::BROADCAST)));
        // The real list: every directed broadcast address of this host, at the server port.
        let real = c.search_targets();
        for b in ndflow_net::ifaces::broadcast_addrs() {
            assert!(
                real.contains(&SocketAddr::new(IpAddr::V4(b), 5064)),
                "{real:?}"
            );
        }
        // The list comes after EPICS_CA_ADDR_LIST, at EPICS_CA_SERVER_PORT, without duplicates.
        let c = cfg(&[
            ("EPICS_CA_ADDR_LIST", "10.0.0.255:7064 10.9.9.9"),
            ("EPICS_CA_SERVER_PORT", "7064"),
        ]);
        assert_eq!(
            c.search_targets_with(&b),
            vec![
                sa("10.0.0.255:7064"),
                sa("10.9.9.9:7064"),
                sa("192.168.1.255:7064")
            ]
        );
        // No interface that broadcasts and nothing else: 127.0.0.1.
        assert_eq!(
            cfg(&[]).search_targets_with(&[]),
            vec![sa("127.0.0.1:5064")]
        );
    }

    #[test]
    fn auto_list_values_as_libca() {
        for (v, on) in [
            ("NO", false),
            ("no", false),
            ("No", false),
            ("YES", true),
            ("yes", true),
            ("1", true),
        ] {
            assert_eq!(
                cfg(&[("EPICS_CA_AUTO_ADDR_LIST", v)]).auto_addr_list,
                on,
                "{v}"
            );
        }
        let c = cfg(&[("EPICS_CA_AUTO_ADDR_LIST", "NO")]);
        assert_eq!(
            c.search_targets_with(&[Ipv4Addr::new(10, 0, 0, 255)]),
            vec![sa("127.0.0.1:5064")]
        );
    }

    #[test]
    fn name_servers() {
        let c = cfg(&[
            (
                "EPICS_CA_NAME_SERVERS",
                "127.0.0.1 localhost:7001 10.1.2.3:7002 :x",
            ),
            ("EPICS_CA_SERVER_PORT", "7000"),
            ("EPICS_CA_AUTO_ADDR_LIST", "NO"),
        ]);
        assert_eq!(
            c.name_servers,
            vec![
                sa("127.0.0.1:7000"),
                sa("127.0.0.1:7001"),
                sa("10.1.2.3:7002")
            ]
        );
        // Name servers only: no UDP search at all (not even 127.0.0.1).
        assert!(c.search_targets().is_empty());
        assert_eq!(
            c.describe_destinations(),
            "tcp 127.0.0.1:7000, tcp 127.0.0.1:7001, tcp 10.1.2.3:7002"
        );
        let c = cfg(&[
            ("EPICS_CA_ADDR_LIST", "127.0.0.1"),
            ("EPICS_CA_AUTO_ADDR_LIST", "NO"),
            ("EPICS_CA_NAME_SERVERS", "127.0.0.2"),
        ]);
        assert_eq!(
            c.describe_destinations(),
            "udp 127.0.0.1:5064, tcp 127.0.0.2:5064"
        );
    }

    #[test]
    fn loopback_has_no_automatic_list() {
        let c = ClientConfig::loopback(7000);
        assert!(!c.auto_addr_list);
        assert_eq!(c.search_targets(), vec![sa("127.0.0.1:7000")]);
    }
}
