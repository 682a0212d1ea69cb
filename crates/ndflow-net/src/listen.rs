//! Whom a server serves: this host only (the default), or other hosts through some or all
//! interfaces. The choice comes from `listen = …` in the config / `--listen`, else from the
//! standard EPICS_PVAS_INTF_ADDR_LIST / EPICS_CAS_INTF_ADDR_LIST.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use crate::ifaces;
use crate::LOCAL_GROUP;

/// A listen value that is neither `local`, `all` nor a list of IP addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenError {
    pub value: String,
    pub entry: String,
}

impl std::error::Error for ListenError {}

impl fmt::Display for ListenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "listen {:?}: {:?} is not an IP address (use \"local\", \"all\", or addresses such as \"0.0.0.0\" or \"10.1.2.3 127.0.0.1\")",
            self.value, self.entry
        )
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Listen {
    /// This host only: TCP on 127.0.0.1; searches are received on every interface (a local
    /// client broadcasts on its interfaces) but answered only when they come from this host.
    #[default]
    Local,
    /// These interface addresses (`0.0.0.0`: all of them); other hosts are served.
    Interfaces(Vec<IpAddr>),
}

impl Listen {
    /// Every interface, as RSRV and pvxs serve by default.
    pub fn all() -> Self {
        Listen::Interfaces(vec![IpAddr::V4(Ipv4Addr::UNSPECIFIED)])
    }

    /// `local`, `all`, or whitespace-separated addresses (an optional `:port` on each is
    /// ignored, as the EPICS variables allow one). A list of loopback addresses is `local`.
    pub fn parse(value: &str) -> Result<Listen, ListenError> {
        let v = value.trim();
        if v.eq_ignore_ascii_case("local") || v.eq_ignore_ascii_case("localhost") {
            return Ok(Listen::Local);
        }
        if v.eq_ignore_ascii_case("all") {
            return Ok(Listen::all());
        }
        let mut list = Vec::new();
        for entry in v.split_whitespace() {
            let host = match entry.rsplit_once(':') {
                Some((h, p)) if p.parse::<u16>().is_ok() && !h.contains(':') => h,
                _ => entry,
            };
            let ip = if host.eq_ignore_ascii_case("localhost") {
                IpAddr::V4(Ipv4Addr::LOCALHOST)
            } else {
                host.parse().map_err(|_| ListenError {
                    value: value.to_owned(),
                    entry: entry.to_owned(),
                })?
            };
            list.push(ip);
        }
        if list.is_empty() {
            return Err(ListenError {
                value: value.to_owned(),
                entry: String::new(),
            });
        }
        if list.iter().all(|ip| ip.is_loopback()) {
            return Ok(Listen::Local);
        }
        Ok(Listen::Interfaces(list))
    }

    /// Whether only this host is served.
    pub fn is_local(&self) -> bool {
        matches!(self, Listen::Local)
    }

    /// The addresses the TCP listeners bind.
    pub fn tcp_addrs(&self) -> Vec<IpAddr> {
        match self {
            Listen::Local => vec![IpAddr::V4(Ipv4Addr::LOCALHOST)],
            Listen::Interfaces(v) => v.clone(),
        }
    }

    /// The server address to put in a search reply: one a client can connect to, or the
    /// unspecified address ("the address this reply came from") when several would do.
    pub fn announce(&self) -> IpAddr {
        match self {
            Listen::Local => IpAddr::V4(Ipv4Addr::LOCALHOST),
            Listen::Interfaces(v) if v.len() == 1 => v[0],
            Listen::Interfaces(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        }
    }

    /// Whether a datagram from `src` to `dst` (its destination, when known) is ours to
    /// answer. Local: only this host's clients. Interfaces: anybody, through the listed
    /// interfaces (a unicast to one of them, or a broadcast or multicast).
    pub fn accepts(&self, src: IpAddr, dst: Option<Ipv4Addr>) -> bool {
        match self {
            Listen::Local => ifaces::is_local(src),
            Listen::Interfaces(list) => {
                let Some(dst) = dst else { return true };
                list.iter()
                    .any(|ip| ip.is_unspecified() || *ip == IpAddr::V4(dst))
                    || dst == LOCAL_GROUP
                    || ifaces::is_broadcast(dst)
            }
        }
    }

    /// Where a server's beacons go now: the configured `list` (serving this host only, just
    /// its local addresses), then, with `auto`, `local_auto` when serving this host only, else
    /// every interface's broadcast address at `port`. Looked up at each beacon: interfaces
    /// come and go.
    pub fn beacon_destinations(
        &self,
        list: &[SocketAddr],
        auto: bool,
        port: u16,
        local_auto: SocketAddr,
    ) -> Vec<SocketAddr> {
        let local = self.is_local();
        let mut v: Vec<SocketAddr> = list
            .iter()
            .copied()
            // Port 0 (an ephemeral port copied into the list) names nobody.
            .filter(|a| a.port() != 0 && (!local || ifaces::is_local(a.ip())))
            .collect();
        if auto && port != 0 {
            if local {
                v.push(local_auto);
            } else {
                v.extend(
                    ifaces::broadcast_addrs()
                        .into_iter()
                        .map(|b| SocketAddr::from((b, port))),
                );
            }
        }
        let mut seen = std::collections::HashSet::new();
        v.retain(|a| seen.insert(*a));
        v
    }

    /// Whether a reply may go to `ip` (a search names where its reply goes: a server serving
    /// this host only never sends anywhere else, whatever the packet says).
    pub fn may_reply_to(&self, ip: IpAddr) -> bool {
        if ip.is_unspecified() || ip.is_multicast() || ip == IpAddr::V4(Ipv4Addr::BROADCAST) {
            return false;
        }
        match self {
            Listen::Local => ifaces::is_local(ip),
            Listen::Interfaces(_) => true,
        }
    }
}

impl fmt::Display for Listen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Listen::Local => f.write_str("this host only"),
            Listen::Interfaces(v) if v.iter().any(|ip| ip.is_unspecified()) => {
                f.write_str("all interfaces")
            }
            Listen::Interfaces(v) => {
                let s: Vec<String> = v.iter().map(|ip| ip.to_string()).collect();
                write!(f, "interfaces {}", s.join(" "))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_forms() {
        assert_eq!(Listen::parse("local").unwrap(), Listen::Local);
        assert_eq!(Listen::parse("127.0.0.1").unwrap(), Listen::Local);
        assert_eq!(Listen::parse(" 127.0.0.1:5064 ").unwrap(), Listen::Local);
        assert_eq!(Listen::parse("all").unwrap(), Listen::all());
        assert_eq!(Listen::parse("0.0.0.0").unwrap(), Listen::all());
        assert_eq!(
            Listen::parse("10.1.2.3 127.0.0.1").unwrap(),
            Listen::Interfaces(vec![
                "10.1.2.3".parse().unwrap(),
                "127.0.0.1".parse().unwrap()
            ])
        );
        let e = Listen::parse("10.1.2.3 eth0").unwrap_err();
        assert_eq!(e.entry, "eth0");
        assert!(
            e.to_string().contains("\"eth0\" is not an IP address"),
            "{e}"
        );
        assert!(Listen::parse("  ").is_err());
    }

    #[test]
    fn local_answers_only_this_host() {
        let l = Listen::Local;
        assert!(l.accepts("127.0.0.1".parse().unwrap(), None));
        assert!(!l.accepts("192.0.2.7".parse().unwrap(), Some(Ipv4Addr::BROADCAST)));
        assert!(l.may_reply_to("127.0.0.1".parse().unwrap()));
        assert!(!l.may_reply_to("192.0.2.7".parse().unwrap()));
        assert_eq!(l.announce(), IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert_eq!(l.to_string(), "this host only");
    }

    #[test]
    fn interfaces_answer_others() {
        let all = Listen::all();
        assert!(all.accepts("192.0.2.7".parse().unwrap(), Some(Ipv4Addr::BROADCAST)));
        assert!(all.may_reply_to("192.0.2.7".parse().unwrap()));
        assert!(!all.may_reply_to("255.255.255.255".parse().unwrap()));
        assert!(all.announce().is_unspecified());
        assert_eq!(all.to_string(), "all interfaces");
        let one = Listen::parse("192.0.2.1").unwrap();
        assert!(one.accepts(
            "192.0.2.7".parse().unwrap(),
            Some("192.0.2.1".parse().unwrap())
        ));
        assert!(!one.accepts(
            "192.0.2.7".parse().unwrap(),
            Some("192.0.2.9".parse().unwrap())
        ));
        assert_eq!(one.announce(), "192.0.2.1".parse::<IpAddr>().unwrap());
    }
}
