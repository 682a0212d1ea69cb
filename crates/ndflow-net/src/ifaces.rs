//! IPv4 interfaces from getifaddrs, re-read at most once a second (addresses change on
//! laptops, DHCP renewals and container start-up, and searches ask often).

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::ifaddrs::getifaddrs;
use nix::net::if_::InterfaceFlags;
use parking_lot::Mutex;

/// One address of an interface that is up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    pub name: String,
    pub addr: Ipv4Addr,
    /// The directed broadcast address, for interfaces that broadcast.
    pub broadcast: Option<Ipv4Addr>,
    pub loopback: bool,
}

#[derive(Debug, Default)]
struct Snapshot {
    list: Vec<Interface>,
    addrs: HashSet<Ipv4Addr>,
    broadcasts: HashSet<Ipv4Addr>,
}

static CACHE: Mutex<Option<(Instant, Arc<Snapshot>)>> = Mutex::new(None);
const MAX_AGE: Duration = Duration::from_secs(1);

fn read() -> Snapshot {
    let mut s = Snapshot::default();
    let Ok(iter) = getifaddrs() else {
        return s;
    };
    for ifa in iter {
        if !ifa.flags.contains(InterfaceFlags::IFF_UP) {
            continue;
        }
        let Some(addr) = ifa.address.as_ref().and_then(|a| a.as_sockaddr_in()) else {
            continue;
        };
        let broadcast = if ifa.flags.contains(InterfaceFlags::IFF_BROADCAST) {
            ifa.broadcast
                .as_ref()
                .and_then(|a| a.as_sockaddr_in())
                .map(|a| a.ip())
                .filter(|b| !b.is_unspecified())
        } else {
            None
        };
        s.addrs.insert(addr.ip());
        if let Some(b) = broadcast {
            s.broadcasts.insert(b);
        }
        s.list.push(Interface {
            name: ifa.interface_name.clone(),
            addr: addr.ip(),
            broadcast,
            loopback: ifa.flags.contains(InterfaceFlags::IFF_LOOPBACK),
        });
    }
    s
}

fn snapshot() -> Arc<Snapshot> {
    let mut c = CACHE.lock();
    match &*c {
        Some((at, s)) if at.elapsed() < MAX_AGE => Arc::clone(s),
        _ => {
            let s = Arc::new(read());
            *c = Some((Instant::now(), Arc::clone(&s)));
            s
        }
    }
}

/// The IPv4 addresses of the interfaces that are up.
pub fn interfaces() -> Vec<Interface> {
    snapshot().list.clone()
}

/// The directed broadcast addresses of the interfaces that are up (what libca and pvxs put in
/// their automatic address lists), loopback excluded.
pub fn broadcast_addrs() -> Vec<Ipv4Addr> {
    let mut v: Vec<Ipv4Addr> = snapshot()
        .list
        .iter()
        .filter(|i| !i.loopback)
        .filter_map(|i| i.broadcast)
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Whether `ip` is this host: a loopback address or an address of one of its interfaces.
pub fn is_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback() || snapshot().addrs.contains(&v4),
        IpAddr::V6(v6) => {
            v6.is_loopback()
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| is_local(IpAddr::V4(v4)))
        }
    }
}

/// Whether a datagram sent to `ip` reaches more than one host's sockets: the limited
/// broadcast, a multicast group, or one of this host's directed broadcast addresses.
pub fn is_broadcast(ip: Ipv4Addr) -> bool {
    ip.is_broadcast() || ip.is_multicast() || snapshot().broadcasts.contains(&ip)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_local_and_listed() {
        assert!(is_local(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        assert!(is_local(IpAddr::V4(Ipv4Addr::new(127, 3, 2, 1))));
        assert!(is_local("::1".parse().unwrap()));
        assert!(interfaces()
            .iter()
            .any(|i| i.loopback && i.addr == Ipv4Addr::LOCALHOST));
        // A documentation address (RFC 5737) is nobody's.
        assert!(!is_local(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1))));
        for i in interfaces() {
            assert!(is_local(IpAddr::V4(i.addr)), "{i:?}");
        }
    }

    #[test]
    fn broadcast_classes() {
        assert!(is_broadcast(Ipv4Addr::BROADCAST));
        assert!(is_broadcast(Ipv4Addr::new(224, 0, 0, 128)));
        assert!(!is_broadcast(Ipv4Addr::LOCALHOST));
        for b in broadcast_addrs() {
            assert!(is_broadcast(b));
        }
    }
}
