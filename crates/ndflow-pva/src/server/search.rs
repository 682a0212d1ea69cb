//! Discovery: SEARCH requests over UDP (several messages per datagram, ORIGIN_TAG
//! tolerated) and over TCP (name-server mode), answered with SEARCH_RESPONSE for the names we
//! serve — or for none when the client insists (mustReply).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use ndflow_net::DiscoverySocket;
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
/// Search flag: sent to one host's address (not broadcast).
pub(crate) const SEARCH_UNICAST: u8 = 0x80;

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

/// How a datagram reached this server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// From the client itself (broadcast, or unicast when it cannot be passed on).
    Direct,
    /// Passed on by a server of this host through the loopback group (ORIGIN_TAG first).
    Forwarded,
}

/// Answers for one datagram: each SEARCH in it gives at most one (destination, bytes) pair.
/// Malformed content ends the parse of that datagram (what came before still counts).
pub(crate) fn handle_datagram(
    srv: &ServerShared,
    dgram: &[u8],
    src: SocketAddr,
    arrival: Arrival,
) -> Vec<(SocketAddr, Vec<u8>)> {
    let mut out = Vec::new();
    for (h, payload) in messages(dgram) {
        if h.command != CMD_SEARCH {
            // ORIGIN_TAG names the original destination; how the datagram arrived already
            // tells us what we need (and a tag from outside the host is not trusted).
            continue;
        }
        let mut r = Reader::new(payload, h.byte_order());
        let Ok(req) = SearchRequest::decode(&mut r) else {
            srv.stats.malformed();
            break;
        };
        srv.stats.search();
        let ip = match (arrival, req.reply_ip) {
            (_, Some(ip)) => ip,
            (Arrival::Direct, None) => src.ip(),
            // The forwarder's address is no use to reply to; forwarders fill the client's in.
            (Arrival::Forwarded, None) => continue,
        };
        if req.reply_port == 0 || !srv.cfg.listen.may_reply_to(ip) {
            srv.stats.search_refused();
            continue;
        }
        if let Some(Ok(msg)) = response(srv, &req, ByteOrder::Big) {
            let mut bytes = msg.header.encode().to_vec();
            for p in &msg.parts {
                bytes.extend_from_slice(p);
            }
            out.push((SocketAddr::new(ip, req.reply_port), bytes));
        }
    }
    out
}

/// The application messages of a datagram, in order, up to the first one that is invalid on
/// UDP (control, segmented, server-sent) or cut short.
fn messages(dgram: &[u8]) -> impl Iterator<Item = (Header, &[u8])> {
    let mut rest = dgram;
    std::iter::from_fn(move || {
        let h = Header::decode(rest).ok()?;
        if h.is_control() || h.segment() != crate::wire::Segment::None || h.is_from_server() {
            return None;
        }
        let len = h.payload_size as usize;
        let payload = rest.get(HEADER_LEN..HEADER_LEN + len)?;
        rest = &rest[HEADER_LEN + len..];
        Some((h, payload))
    })
}

/// What to pass on to the loopback group for a unicast datagram that `src` sent to `dst` (as
/// pvxs does): ORIGIN_TAG(dst), then the messages with each SEARCH's unicast flag cleared
/// and its reply address filled in with the client's (the receivers see only ours). `None`
/// when it holds no SEARCH.
pub(crate) fn forward_datagram(dgram: &[u8], src: SocketAddr, dst: Ipv4Addr) -> Option<Vec<u8>> {
    let tag = OutMessage::build(CMD_ORIGIN_TAG, false, ByteOrder::Big, |w| {
        w.bytes(&encode_addr(IpAddr::V4(dst)));
        Ok(())
    })
    .ok()?;
    let mut out = tag.header.encode().to_vec();
    for p in &tag.parts {
        out.extend_from_slice(p);
    }
    let start = out.len();
    out.extend_from_slice(dgram);
    let mut searches = 0;
    let mut off = 0;
    for (h, payload) in messages(dgram) {
        let at = start + off + HEADER_LEN;
        off += HEADER_LEN + payload.len();
        // seq u32, flags u8, 3 reserved, reply address [16], reply port u16
        if h.command != CMD_SEARCH || payload.len() < 26 {
            continue;
        }
        searches += 1;
        out[at + 4] &= !SEARCH_UNICAST;
        let mut r = Reader::new(&payload[8..24], h.byte_order());
        if matches!(decode_addr(&mut r), Ok(None)) {
            out[at + 8..at + 24].copy_from_slice(&encode_addr(src.ip()));
        }
    }
    (searches > 0).then_some(out)
}

/// The UDP loop: receive searches, answer them (or pass a unicast one on to every server of
/// the host, this one included), until shutdown.
pub(crate) async fn udp_loop(
    sock: Arc<DiscoverySocket>,
    srv: Arc<ServerShared>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 0x10000];
    loop {
        let d = tokio::select! {
            r = sock.recv(&mut buf) => match r {
                Ok(d) => d,
                // ICMP errors from earlier replies surface here; keep serving.
                Err(_) => continue,
            },
            _ = shutdown.changed() => return,
        };
        let data = &buf[..d.len];
        let arrival = if d.is_forwarded() {
            Arrival::Forwarded
        } else if !srv.cfg.listen.accepts(d.src.ip(), d.dst) {
            srv.stats.search_refused();
            continue;
        } else {
            // A unicast reached this socket only, of all that share the port.
            if let (true, Some(dst)) = (d.is_unicast() && sock.in_group(), d.dst) {
                if let Some(fwd) = forward_datagram(data, d.src, dst) {
                    if sock.send_to_group(&fwd).await.is_ok() {
                        srv.stats.search_forwarded();
                        continue;
                    }
                }
            }
            Arrival::Direct
        };
        for (dest, bytes) in handle_datagram(&srv, data, d.src, arrival) {
            if !srv.search_limiter.allow(dest.ip()) {
                srv.stats.search_limited();
                continue;
            }
            let _ = sock.send_to(&bytes, dest).await;
        }
    }
}
