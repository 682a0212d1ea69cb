//! UDP: SEARCH datagrams (a VERSION prefix and several searches per datagram) answered with a
//! VERSION + SEARCH replies datagram, and RSRV_IS_UP beacons.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::UdpSocket;
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

pub(crate) async fn search_loop(
    sock: Arc<UdpSocket>,
    srv: Arc<ServerShared>,
    mut shutdown: watch::Receiver<bool>,
) {
    let reply_ip = match sock.local_addr().map(|a| a.ip()) {
        Ok(IpAddr::V4(ip)) if !ip.is_unspecified() => u32::from(ip),
        _ => u32::MAX,
    };
    let mut buf = vec![0u8; 65536];
    loop {
        let r = tokio::select! {
            r = sock.recv_from(&mut buf) => r,
            _ = shutdown.changed() => return,
        };
        let Ok((n, from)) = r else {
            // ICMP errors from earlier sends and the like: keep serving.
            tokio::time::sleep(Duration::from_millis(1)).await;
            continue;
        };
        let reply = handle_datagram(&srv, &buf[..n], reply_ip);
        if !reply.is_empty() {
            let _ = sock.send_to(&reply, from).await;
        }
    }
}

/// Beacons: fast at start (20 ms, doubling) up to `period`, ids increasing.
pub(crate) async fn beacon_loop(
    sock: Arc<UdpSocket>,
    srv: Arc<ServerShared>,
    dests: Vec<SocketAddr>,
    period: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    if dests.is_empty() {
        return;
    }
    let ip = match srv.cfg.interfaces.first() {
        Some(IpAddr::V4(ip)) => u32::from(*ip),
        _ => 0,
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
        for d in &dests {
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
