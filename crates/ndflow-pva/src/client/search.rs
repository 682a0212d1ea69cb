//! Channel search: UDP requests to the address list and TCP requests to name servers,
//! retried with exponential backoff until a server claims the name or the caller gives up.
//!
//! All pending names are batched into as few SEARCH messages as fit a datagram. Replies come back
//! to our UDP socket (we send the zero response address, so servers answer the packet's source)
//! or over a name-server connection; either way [`Searcher::on_response`] resolves the waiters.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::net::UdpSocket;
use tokio::sync::{oneshot, Notify};
use tokio::time::{timeout_at, Instant};

use crate::wire::{ByteOrder, Header, Writer};

use super::config::ClientConfig;
use super::proto::{self, cmd};
use super::ClientError;

/// Keep each search datagram below a typical MTU.
const MAX_SEARCH_PAYLOAD: usize = 1200;

/// What a search that no server answered in time says ([`ClientError::is_not_found`]).
pub(crate) const SEARCHING: &str = "searching for channel ";

struct Pending {
    name: String,
    waiters: Vec<oneshot::Sender<SocketAddr>>,
    next: Instant,
    interval: Duration,
}

#[derive(Default)]
struct State {
    pending: HashMap<u32, Pending>,
    by_name: HashMap<String, u32>,
}

/// Sends searches over TCP to name servers; provided by the context that owns connections.
pub(crate) type TcpSearch = Arc<dyn Fn(&[(u32, &str)]) + Send + Sync>;

pub(crate) struct Searcher {
    cfg: ClientConfig,
    dests: Vec<SocketAddr>,
    socket: Option<Arc<UdpSocket>>,
    state: Mutex<State>,
    wake: Notify,
    next_id: AtomicU32,
    seq: AtomicU32,
    tcp: Mutex<Option<TcpSearch>>,
}

impl Searcher {
    /// Bind the UDP socket (when there is anywhere to send) and start the send/receive tasks.
    pub(crate) async fn start(cfg: &ClientConfig) -> Result<Arc<Searcher>, ClientError> {
        let dests = cfg.search_destinations();
        let socket = if dests.is_empty() {
            None
        } else {
            let s = UdpSocket::bind(SocketAddr::new(cfg.intf_addr, 0)).await?;
            if dests.iter().any(|d| is_broadcast(d.ip())) {
                s.set_broadcast(true)?;
            }
            Some(Arc::new(s))
        };
        let me = Arc::new(Searcher {
            cfg: cfg.clone(),
            dests,
            socket,
            state: Mutex::new(State::default()),
            wake: Notify::new(),
            next_id: AtomicU32::new(1),
            seq: AtomicU32::new(proto::SEARCH_SEQ),
            tcp: Mutex::new(None),
        });
        tokio::spawn(send_task(Arc::clone(&me)));
        if let Some(s) = &me.socket {
            tokio::spawn(recv_task(Arc::clone(&me), Arc::clone(s)));
        }
        Ok(me)
    }

    /// Install the TCP (name server) path.
    pub(crate) fn set_tcp(&self, f: TcpSearch) {
        *self.tcp.lock() = Some(f);
    }

    /// Find the server (TCP address) that claims `name`.
    pub(crate) async fn find(
        &self,
        name: &str,
        deadline: Instant,
    ) -> Result<SocketAddr, ClientError> {
        if self.dests.is_empty() && self.cfg.name_server_destinations().is_empty() {
            return Err(ClientError::Config(
                "nowhere to search: EPICS_PVA_ADDR_LIST and EPICS_PVA_NAME_SERVERS are empty \
                 and EPICS_PVA_AUTO_ADDR_LIST is NO"
                    .into(),
            ));
        }
        let (tx, rx) = oneshot::channel();
        let id = {
            let mut st = self.state.lock();
            match st.by_name.get(name).copied() {
                Some(id) => {
                    if let Some(p) = st.pending.get_mut(&id) {
                        p.waiters.push(tx);
                    }
                    id
                }
                None => {
                    let id = self.next_id.fetch_add(1, Ordering::Relaxed);
                    st.pending.insert(
                        id,
                        Pending {
                            name: name.to_owned(),
                            waiters: vec![tx],
                            next: Instant::now(),
                            interval: self.cfg.search_min_interval,
                        },
                    );
                    st.by_name.insert(name.to_owned(), id);
                    id
                }
            }
        };
        self.wake.notify_one();
        // Bound first: the receiver must be dropped before the timeout arm looks at waiters.
        let res = timeout_at(deadline, rx).await;
        match res {
            Ok(Ok(addr)) => Ok(addr),
            _ => {
                // Stop searching once nobody waits for this name any more.
                let mut st = self.state.lock();
                if let Some(p) = st.pending.get_mut(&id) {
                    p.waiters.retain(|w| !w.is_closed());
                    if p.waiters.is_empty() {
                        st.pending.remove(&id);
                        st.by_name.remove(name);
                    }
                }
                Err(ClientError::Timeout(format!("{SEARCHING}{name}")))
            }
        }
    }

    /// A server answered: resolve every waiter of the names it claims.
    pub(crate) fn on_response(&self, r: proto::SearchResponse, source: SocketAddr) {
        if r.protocol != "tcp" || !r.found {
            return;
        }
        let ip = r.addr.unwrap_or(source.ip());
        let port = if r.port == 0 { source.port() } else { r.port };
        let server = SocketAddr::new(ip, port);
        if !self.cfg.allowed(&server) {
            return;
        }
        let mut st = self.state.lock();
        for id in r.ids {
            if let Some(p) = st.pending.remove(&id) {
                st.by_name.remove(&p.name);
                for w in p.waiters {
                    let _ = w.send(server);
                }
            }
        }
    }

    /// Names due for (re)sending now; advances their backoff. Also returns the next due time.
    fn due(&self) -> (Vec<(u32, String)>, Option<Instant>) {
        let now = Instant::now();
        let mut st = self.state.lock();
        // Drop names nobody waits for (callers timed out).
        let dead: Vec<u32> = st
            .pending
            .iter()
            .filter(|(_, p)| p.waiters.iter().all(|w| w.is_closed()))
            .map(|(&id, _)| id)
            .collect();
        for id in dead {
            if let Some(p) = st.pending.remove(&id) {
                st.by_name.remove(&p.name);
            }
        }
        let mut out = Vec::new();
        let mut next: Option<Instant> = None;
        for (&id, p) in st.pending.iter_mut() {
            if p.next <= now {
                out.push((id, p.name.clone()));
                p.next = now + p.interval;
                p.interval = (p.interval * 2).min(self.cfg.search_max_interval);
            }
            next = Some(next.map_or(p.next, |n| n.min(p.next)));
        }
        (out, next)
    }

    async fn send_batch(&self, names: &[(u32, String)]) {
        for chunk in batches(names) {
            if let Some(tcp) = self.tcp.lock().clone() {
                tcp(&chunk);
            }
            let Some(sock) = &self.socket else {
                continue;
            };
            let Ok(port) = sock.local_addr().map(|a| a.port()) else {
                continue;
            };
            for dest in &self.dests {
                let flags = search_flags(dest.ip());
                let seq = self.seq.fetch_add(1, Ordering::Relaxed);
                // UDP is sent big-endian, like pvxs.
                let Some(dgram) = search_datagram(seq, flags, port, &chunk, ByteOrder::Big) else {
                    continue;
                };
                // A failed send (no route, ...) is retried with the next round.
                let _ = sock.send_to(&dgram, dest).await;
            }
        }
    }
}

/// Group names so each SEARCH payload stays below [`MAX_SEARCH_PAYLOAD`].
fn batches(names: &[(u32, String)]) -> Vec<Vec<(u32, &str)>> {
    let mut out = Vec::new();
    let mut cur: Vec<(u32, &str)> = Vec::new();
    let mut size = 40;
    for (id, n) in names {
        let item = 4 + 5 + n.len();
        if !cur.is_empty() && (size + item > MAX_SEARCH_PAYLOAD || cur.len() == u16::MAX as usize) {
            out.push(std::mem::take(&mut cur));
            size = 40;
        }
        cur.push((*id, n.as_str()));
        size += item;
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// One SEARCH message with its header.
pub(crate) fn search_datagram(
    seq: u32,
    flags: u8,
    reply_port: u16,
    names: &[(u32, &str)],
    order: ByteOrder,
) -> Option<Vec<u8>> {
    let mut w = Writer::new(order);
    proto::encode_search(&mut w, seq, flags, reply_port, names).ok()?;
    let body = w.into_inner();
    let size = u32::try_from(body.len()).ok()?;
    let mut out = Header::application(cmd::SEARCH, false, order, size)
        .encode()
        .to_vec();
    out.extend_from_slice(&body);
    Some(out)
}

/// The SEARCH flags for a destination: the unicast bit exactly when it reaches one host.
fn search_flags(dest: IpAddr) -> u8 {
    if is_broadcast(dest) {
        0
    } else {
        proto::SEARCH_UNICAST
    }
}

/// A destination that reaches more than one host (limited or one of this host's directed
/// broadcast addresses, a multicast group): sent without the unicast flag, with SO_BROADCAST.
fn is_broadcast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => ndflow_net::ifaces::is_broadcast(v4),
        IpAddr::V6(v6) => v6.is_multicast(),
    }
}

async fn send_task(s: Arc<Searcher>) {
    loop {
        let notified = s.wake.notified();
        tokio::pin!(notified);
        // Register before computing what is due, so a wake-up in between is not lost.
        notified.as_mut().enable();
        let (names, next) = s.due();
        if !names.is_empty() {
            s.send_batch(&names).await;
        }
        let wait = next.map_or(Duration::from_secs(3600), |n| {
            n.saturating_duration_since(Instant::now())
        });
        tokio::select! {
            _ = notified => {}
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

async fn recv_task(s: Arc<Searcher>, sock: Arc<UdpSocket>) {
    let mut buf = vec![0u8; 65536];
    loop {
        let Ok((n, src)) = sock.recv_from(&mut buf).await else {
            // ICMP errors surface as receive errors on some systems; keep listening.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        for (h, payload) in proto::split_datagram(&buf[..n]) {
            if h.command == cmd::SEARCH_RESPONSE && h.is_from_server() {
                if let Ok(r) = proto::decode_search_response(payload, h.byte_order()) {
                    s.on_response(r, src);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn unicast_flag_only_for_single_hosts() {
        assert_eq!(
            search_flags(Ipv4Addr::LOCALHOST.into()),
            proto::SEARCH_UNICAST
        );
        assert_eq!(
            search_flags(Ipv4Addr::new(192, 0, 2, 7).into()),
            proto::SEARCH_UNICAST
        );
        assert_eq!(search_flags(Ipv4Addr::BROADCAST.into()), 0);
        assert_eq!(search_flags(Ipv4Addr::new(224, 0, 0, 128).into()), 0);
        for b in ndflow_net::ifaces::broadcast_addrs() {
            assert_eq!(search_flags(b.into()), 0, "{b}");
        }
        for i in ndflow_net::ifaces::interfaces() {
            assert_eq!(search_flags(i.addr.into()), proto::SEARCH_UNICAST, "{i:?}");
        }
    }
}
