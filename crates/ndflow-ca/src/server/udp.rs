//! UDP: SEARCH datagrams (a VERSION prefix and several searches per datagram) answered with a
//! VERSION + SEARCH replies datagram, and RSRV_IS_UP beacons.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ndflow_net::DiscoverySocket;
use tokio::sync::watch;

use super::fields;
use super::session::{not_found, search_reply};
use super::ServerShared;
use crate::header::{cmd, message, payload_str, Header, DO_REPLY, MINOR_VERSION};
use crate::pv::Access;

/// The reply to one search datagram (empty = stay silent). `reply_ip` goes in the replies
/// (u32::MAX = "the address this came from").
pub(crate) fn handle_datagram(srv: &ServerShared, data: &[u8], reply_ip: u32) -> Vec<u8> {
    let mut out = Vec::new();
    let mut off = 0;
    while let Ok(Some((h, hlen))) = Header::parse(&data[off..], data.len()) {
        let end = off + hlen + h.payload_size as usize;
        if end > data.len() {
            break;
        }
        let payload = &data[off + hlen..end];
        off = end;
        if h.command != cmd::SEARCH {
            continue;
        }
        let name = payload_str(payload);
        // UDP searches carry no client identity: hide only what is hidden from everybody.
        let found = fields::resolve(srv.provider.as_ref(), &name)
            .filter(|t| srv.provider.access(&t.record, "", "") != Access::None)
            .is_some();
        let m = if found {
            search_reply(srv.tcp_port, reply_ip, h.p1)
        } else if h.data_type == DO_REPLY {
            not_found(&h)
        } else {
            continue;
        };
        if out.is_empty() {
            out.extend(message(
                Header::new(cmd::VERSION, 0, u32::from(MINOR_VERSION), 0, 0),
                &[],
            ));
        }
        out.extend(m);
    }
    out
}

/// The command of the header a server of this host puts before a unicast search it passes
/// on through the loopback group: data type = the client's UDP port, p1 = its IPv4 address,
/// p2 = the address the search was sent to. Channel Access has no such message of its own
/// (pvAccess has ORIGIN_TAG); the value is outside the protocol's range, and only datagrams
/// from loopback to the group are read for it.
pub(crate) const FORWARDED: u16 = 0x4E46;

/// What to pass on to the group for a unicast datagram `src` sent to `dst`; `None` when it
/// holds no SEARCH.
pub(crate) fn forward_datagram(data: &[u8], src: SocketAddrV4, dst: Ipv4Addr) -> Option<Vec<u8>> {
    let mut off = 0;
    let mut searches = false;
    while let Ok(Some((h, hlen))) = Header::parse(&data[off..], data.len()) {
        searches |= h.command == cmd::SEARCH;
        off += hlen + h.payload_size as usize;
        if off >= data.len() {
            break;
        }
    }
    if !searches {
        return None;
    }
    let mut out = message(
        Header::new(
            FORWARDED,
            src.port(),
            0,
            u32::from(*src.ip()),
            u32::from(dst),
        ),
        &[],
    );
    out.extend_from_slice(data);
    Some(out)
}

/// The client a passed-on datagram came from, and the rest of it (the client's datagram).
pub(crate) fn forwarded_client(data: &[u8]) -> Option<(SocketAddrV4, &[u8])> {
    let (h, hlen) = Header::parse(data, 0).ok()??;
    if h.command != FORWARDED || h.payload_size != 0 {
        return None;
    }
    Some((
        SocketAddrV4::new(Ipv4Addr::from(h.p1), h.data_type),
        &data[hlen..],
    ))
}

/// The server address to put in search replies (u32::MAX: "the address this came from").
fn announce(srv: &ServerShared) -> u32 {
    match srv.cfg.listen.announce() {
        IpAddr::V4(ip) if !ip.is_unspecified() => u32::from(ip),
        _ => u32::MAX,
    }
}

pub(crate) async fn search_loop(
    sock: Arc<DiscoverySocket>,
    srv: Arc<ServerShared>,
    mut shutdown: watch::Receiver<bool>,
) {
    let reply_ip = announce(&srv);
    let mut buf = vec![0u8; 65536];
    loop {
        let r = tokio::select! {
            r = sock.recv(&mut buf) => r,
            _ = shutdown.changed() => return,
        };
        let Ok(d) = r else {
            // ICMP errors from earlier sends and the like: keep serving.
            tokio::time::sleep(Duration::from_millis(1)).await;
            continue;
        };
        let data = &buf[..d.len];
        let (client, data) = if d.is_forwarded() {
            let Some((client, rest)) = forwarded_client(data) else {
                continue;
            };
            (SocketAddr::V4(client), rest)
        } else if !srv.cfg.listen.accepts(d.src.ip(), d.dst) {
            srv.searches_refused.fetch_add(1, Ordering::Relaxed);
            continue;
        } else {
            // A unicast reached this socket only, of all that share the port: pass it on to
            // every server of the host (this one included) and answer it from there.
            if let (true, Some(dst), SocketAddr::V4(src)) =
                (d.is_unicast() && sock.in_group(), d.dst, d.src)
            {
                if let Some(fwd) = forward_datagram(data, src, dst) {
                    if sock.send_to_group(&fwd).await.is_ok() {
                        srv.searches_forwarded.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                }
            }
            (d.src, data)
        };
        if client.port() == 0 || !srv.cfg.listen.may_reply_to(client.ip()) {
            srv.searches_refused.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let reply = handle_datagram(&srv, data, reply_ip);
        if !reply.is_empty() {
            if !srv.search_limiter.allow(client.ip()) {
                srv.searches_limited.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let _ = sock.send_to(&reply, client).await;
        }
    }
}

/// Beacons: fast at start (20 ms, doubling) up to `period`, ids increasing; the destinations
/// are looked up each time (interfaces come and go).
pub(crate) async fn beacon_loop(
    sock: Arc<DiscoverySocket>,
    srv: Arc<ServerShared>,
    mut shutdown: watch::Receiver<bool>,
) {
    let period = srv.cfg.beacon_period;
    let ip = match srv.cfg.listen.announce() {
        IpAddr::V4(ip) => u32::from(ip),
        IpAddr::V6(_) => 0,
    };
    let mut id: u32 = 0;
    let mut delay = Duration::from_millis(20).min(period);
    loop {
        let m = message(
            Header::new(
                cmd::RSRV_IS_UP,
                MINOR_VERSION,
                u32::from(srv.tcp_port),
                id,
                ip,
            ),
            &[],
        );
        for d in srv.cfg.beacon_destinations() {
            let _ = sock.send_to(&m, d).await;
        }
        id = id.wrapping_add(1);
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = shutdown.changed() => return,
        }
        delay = (delay * 2).min(period);
    }
}
