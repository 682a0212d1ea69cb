//! Discovery: SEARCH requests over UDP (several messages per datagram, ORIGIN_TAG
//! tolerated) and over TCP (name-server mode), answered with SEARCH_RESPONSE for the names we
//! serve — or for none when the client insists (mustReply).

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use tokio::net::UdpSocket;
use tokio::sync::watch;

use crate::transport::OutMessage;
use crate::wire::header::HEADER_LEN;
use crate::wire::{ByteOrder, DecodeError, EncodeError, Header, Reader};

use super::ServerShared;
use crate::transport::cmd::{
    ORIGIN_TAG as CMD_ORIGIN_TAG, SEARCH as CMD_SEARCH, SEARCH_RESPONSE as CMD_SEARCH_RESPONSE,
};

/// Search flag: reply even if nothing is found.
pub(crate) const SEARCH_MUST_REPLY: u8 = 0x01;

/// A decoded SEARCH request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SearchRequest {
    pub seq: u32,
    pub flags: u8,
    /// `None` = reply to the packet's source address.
    pub reply_ip: Option<IpAddr>,
    pub reply_port: u16,
    pub protocols: Vec<String>,
    pub channels: Vec<(u32, String)>,
}

impl SearchRequest {
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let seq = r.u32()?;
        let flags = r.u8()?;
        r.take(3)?;
        let reply_ip = decode_addr(r)?;
        let reply_port = r.u16()?;
        let n = r.bounded_count(1)?;
        let mut protocols = Vec::with_capacity(n);
        for _ in 0..n {
            protocols.push(r.string()?);
        }
        // The channel count is a plain uint16, not a Size.
        let n = usize::from(r.u16()?);
        let mut channels = Vec::with_capacity(n.min(r.remaining() / 5));
        for _ in 0..n {
            let id = r.u32()?;
            channels.push((id, r.string()?));
        }
        Ok(Self {
            seq,
            flags,
            reply_ip,
            reply_port,
            protocols,
            channels,
        })
    }

    /// Whether this search may be answered over TCP.
    pub(crate) fn wants_tcp(&self) -> bool {
        self.protocols.is_empty() || self.protocols.iter().any(|p| p == "tcp")
    }
}

/// 16-byte address: IPv6 or IPv4-mapped; all zero (or ::ffff:0.0.0.0) = unspecified.
pub(crate) fn decode_addr(r: &mut Reader<'_>) -> Result<Option<IpAddr>, DecodeError> {
    let b = r.take(16)?;
    let mut a = [0u8; 16];
    a.copy_from_slice(b);
    let ip6 = Ipv6Addr::from(a);
    let ip = match ip6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(ip6),
    };
    Ok((!ip.is_unspecified()).then_some(ip))
}

pub(crate) fn encode_addr(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// The answer to `req`, or `None` when we stay silent (nothing found and no mustReply, or a
/// protocol we do not speak).
pub(crate) fn response(
    srv: &ServerShared,
    req: &SearchRequest,
    order: ByteOrder,
) -> Option<Result<OutMessage, EncodeError>> {
    if !req.wants_tcp() {
        return None;
    }
    let found: Vec<u32> = req
        .channels
        .iter()
        .filter(|(_, name)| srv.provider.lookup(name).is_some())
        .map(|(id, _)| *id)
        .collect();
    let must = req.flags & SEARCH_MUST_REPLY != 0;
    if found.is_empty() && !must {
        return None;
    }
    let ids: Vec<u32> = if found.is_empty() {
        req.channels.iter().map(|(id, _)| *id).collect()
    } else {
        found.clone()
    };
    let n = u16::try_from(ids.len()).unwrap_or(u16::MAX);
    Some(OutMessage::build(CMD_SEARCH_RESPONSE, true, order, |w| {
        w.bytes(&srv.guid);
        w.u32(req.seq);
        w.bytes(&encode_addr(srv.tcp_addr.ip()));
        w.u16(srv.tcp_addr.port());
        w.string("tcp")?;
        w.bool(!found.is_empty());
        w.u16(n);
        for id in ids.iter().take(usize::from(n)) {
            w.u32(*id);
        }
        Ok(())
    }))
}

/// Answers for one datagram: each SEARCH in it gives at most one (destination, bytes) pair.
/// Malformed content ends the parse of that datagram (what came before still counts).
pub(crate) fn handle_datagram(
    srv: &ServerShared,
    dgram: &[u8],
    src: SocketAddr,
) -> Vec<(SocketAddr, Vec<u8>)> {
    let mut out = Vec::new();
    let mut rest = dgram;
    let mut origin: Option<IpAddr> = None;
    while rest.len() >= HEADER_LEN {
        let Ok(h) = Header::decode(rest) else { break };
        // Control and segmented messages are invalid on UDP; server-sent ones are not for us.
        if h.is_control() || h.segment() != crate::wire::Segment::None || h.is_from_server() {
            break;
        }
        let len = h.payload_size as usize;
        let Some(payload) = rest.get(HEADER_LEN..HEADER_LEN + len) else {
            break;
        };
        rest = &rest[HEADER_LEN + len..];
        let mut r = Reader::new(payload, h.byte_order());
        match h.command {
            CMD_ORIGIN_TAG => origin = decode_addr(&mut r).ok().flatten(),
            CMD_SEARCH => {
                let Ok(req) = SearchRequest::decode(&mut r) else {
                    srv.stats.malformed();
                    break;
                };
                srv.stats.search();
                let ip = req.reply_ip.or(origin).unwrap_or(src.ip());
                let dest = SocketAddr::new(ip, req.reply_port);
                if !reply_allowed(srv.bind_ip, dest) {
                    continue;
                }
                if let Some(Ok(msg)) = response(srv, &req, ByteOrder::Big) {
                    let mut bytes = msg.header.encode().to_vec();
                    for p in &msg.parts {
                        bytes.extend_from_slice(p);
                    }
                    out.push((dest, bytes));
                }
            }
            _ => {}
        }
    }
    out
}

/// A server bound to loopback answers only loopback addresses: a search cannot make it send
/// anywhere else (no reflection off the host), whatever address the packet names.
fn reply_allowed(bind: IpAddr, dest: SocketAddr) -> bool {
    if dest.port() == 0 || dest.ip().is_unspecified() || dest.ip().is_multicast() {
        return false;
    }
    if bind.is_loopback() {
        return dest.ip().is_loopback();
    }
    true
}

/// The UDP loop: receive searches, answer them, until shutdown.
pub(crate) async fn udp_loop(
    sock: Arc<UdpSocket>,
    srv: Arc<ServerShared>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 0x10000];
    loop {
        let (n, src) = tokio::select! {
            r = sock.recv_from(&mut buf) => match r {
                Ok(x) => x,
                // ICMP errors from earlier replies surface here; keep serving.
                Err(_) => continue,
            },
            _ = shutdown.changed() => return,
        };
        for (dest, bytes) in handle_datagram(&srv, &buf[..n], src) {
            let _ = sock.send_to(&bytes, dest).await;
        }
    }
}
