//! A blocking Channel Access client over Tokio: search (UDP to the address list and the
//! interfaces' broadcast addresses, TCP to EPICS_CA_NAME_SERVERS; retries with backoff), one TCP
//! circuit per server, channels cached by name, get / put / put-notify / monitor.
//!
//! The client runs its own runtime; its methods block the calling thread and must not be
//! called from inside an async runtime. A monitor ends (yields `Disconnected`) when its
//! circuit drops; callers re-subscribe.

mod circuit;
pub mod config;

use std::collections::{HashMap, HashSet};
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;
use tokio::net::UdpSocket;
use tokio::runtime::Runtime;
use tokio::sync::oneshot;

use crate::dbr::{self, DbrInfo, DbrType, Family};
use crate::header::{
    cmd, eca, message, string_message, Header, DBE_ALARM, DBE_LOG, DBE_VALUE, DONT_REPLY,
    MINOR_VERSION,
};
use crate::value::{CaValue, NativeType, Values};
use circuit::{Circuit, Reply, SearchHook, SubQueue};
pub use config::ClientConfig;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{0}: not found")]
    NotFound(String),
    #[error("{0}: the server refused the channel")]
    ChannelRefused(String),
    #[error("timed out")]
    Timeout,
    #[error("server status {code} ({}): {text}", eca::name(*code))]
    Eca { code: u32, text: String },
    #[error("no write access")]
    NoWriteAccess,
    #[error("disconnected")]
    Disconnected,
    #[error("bad reply: {0}")]
    Protocol(String),
    #[error("I/O: {0}")]
    Io(#[from] io::Error),
}

impl ClientError {
    /// The ECA status of a server-side failure.
    pub fn eca(&self) -> Option<u32> {
        match self {
            ClientError::Eca { code, .. } => Some(*code),
            ClientError::NoWriteAccess => Some(eca::NOWTACCESS),
            _ => None,
        }
    }
}

/// A value as received, with what its DBR carried.
#[derive(Clone, Debug, PartialEq)]
pub struct Reading {
    pub value: CaValue,
    /// All elements as received (a DBR_STRING array keeps every string here).
    pub values: Values,
    pub dbr: DbrType,
    pub status: u16,
    pub severity: u16,
    /// TIME family only.
    pub stamp: Option<SystemTime>,
    /// Units, precision, limits, enum strings (GR/CTRL families).
    pub info: DbrInfo,
}

/// A connected channel's description.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChannelInfo {
    pub native: NativeType,
    pub count: u32,
    pub read: bool,
    pub write: bool,
}

struct Channel {
    circuit: Arc<Circuit>,
    cid: u32,
    sid: u32,
    native: NativeType,
    count: u32,
}

struct Inner {
    cfg: ClientConfig,
    udp: Arc<UdpSocket>,
    ids: AtomicU32,
    searches: Mutex<HashMap<u32, oneshot::Sender<SocketAddr>>>,
    circuits: tokio::sync::Mutex<HashMap<SocketAddr, Arc<Circuit>>>,
    /// Name servers being connected to (searches for them wait for the next round).
    ns_connecting: Mutex<HashSet<SocketAddr>>,
    channels: Mutex<HashMap<String, Arc<Channel>>>,
}

impl Inner {
    /// A SEARCH reply: the server that claims the search `h.p2`. Data type = the server's TCP
    /// port, p1 = its address, or ~0 for "where this reply came from": the datagram's source
    /// address (UDP), or the circuit's address itself (a name server's TCP circuit, as libca).
    fn search_reply(&self, h: &Header, from: SocketAddr, over_tcp: bool) {
        let server = if h.p1 == u32::MAX || h.p1 == 0 {
            if over_tcp {
                from
            } else {
                SocketAddr::new(from.ip(), h.data_type)
            }
        } else {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::from(h.p1)), h.data_type)
        };
        if let Some(tx) = self.searches.lock().remove(&h.p2) {
            let _ = tx.send(server);
        }
    }

    /// What every circuit does with a SEARCH reply it receives (name servers answer there).
    fn search_hook(self: &Arc<Self>) -> SearchHook {
        let weak = Arc::downgrade(self);
        Arc::new(move |h: &Header, circuit: SocketAddr| {
            if let Some(inner) = weak.upgrade() {
                inner.search_reply(h, circuit, true);
            }
        })
    }
}

pub struct Client {
    inner: Arc<Inner>,
    rt: Runtime,
}

impl Client {
    pub fn new(cfg: ClientConfig) -> io::Result<Client> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("ca-client")
            .enable_all()
            .build()?;
        let targets = cfg.search_targets();
        // Loopback-only targets (or none: name servers only): keep the search socket on
        // loopback too.
        let bind_ip = if targets.iter().all(|a| a.ip().is_loopback()) {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        } else {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        };
        let udp = {
            let _g = rt.enter();
            let s = std::net::UdpSocket::bind((bind_ip, 0))?;
            // The automatic list is re-read at each search (interfaces come and go).
            if cfg.auto_addr_list || targets.iter().any(|a| is_broadcast(a.ip())) {
                s.set_broadcast(true)?;
            }
            s.set_nonblocking(true)?;
            Arc::new(UdpSocket::from_std(s)?)
        };
        let inner = Arc::new(Inner {
            cfg,
            udp,
            ids: AtomicU32::new(1),
            searches: Mutex::new(HashMap::new()),
            circuits: tokio::sync::Mutex::new(HashMap::new()),
            ns_connecting: Mutex::new(HashSet::new()),
            channels: Mutex::new(HashMap::new()),
        });
        rt.spawn(search_replies(
            Arc::downgrade(&inner),
            Arc::clone(&inner.udp),
        ));
        Ok(Client { inner, rt })
    }

    /// The value with alarm and timestamp (DBR_TIME of the native type, current count).
    pub fn get(&self, name: &str, timeout: Duration) -> Result<Reading, ClientError> {
        let deadline = Instant::now() + timeout;
        let ch = self.channel(name, deadline)?;
        self.read(&ch, DbrType::new(Family::Time, ch.native), 0, deadline)
    }

    /// The value as DBR type `dbr` (any family, converted by the server), current count.
    pub fn get_as(
        &self,
        name: &str,
        dbr: DbrType,
        timeout: Duration,
    ) -> Result<Reading, ClientError> {
        let deadline = Instant::now() + timeout;
        let ch = self.channel(name, deadline)?;
        self.read(&ch, dbr, 0, deadline)
    }

    /// Like [`Client::get_as`] with an explicit element count (0 = current).
    pub fn get_count(
        &self,
        name: &str,
        dbr: DbrType,
        count: u32,
        timeout: Duration,
    ) -> Result<Reading, ClientError> {
        let deadline = Instant::now() + timeout;
        let ch = self.channel(name, deadline)?;
        self.read(&ch, dbr, count, deadline)
    }

    /// Native type, element count and access rights of a channel.
    pub fn info(&self, name: &str, timeout: Duration) -> Result<ChannelInfo, ClientError> {
        let ch = self.channel(name, Instant::now() + timeout)?;
        let r = ch.circuit.rights(ch.cid);
        Ok(ChannelInfo {
            native: ch.native,
            count: ch.count,
            read: r & 1 != 0,
            write: r & 2 != 0,
        })
    }

    /// Write `value` (sent as its own DBR type; the server converts). `wait` = WRITE_NOTIFY and
    /// wait for the server's completion; otherwise WRITE, and only local errors are reported.
    pub fn put(
        &self,
        name: &str,
        value: CaValue,
        wait: bool,
        timeout: Duration,
    ) -> Result<(), ClientError> {
        let deadline = Instant::now() + timeout;
        let ch = self.channel(name, deadline)?;
        if ch.circuit.rights(ch.cid) & 2 == 0 {
            return Err(ClientError::NoWriteAccess);
        }
        let vals = value.to_values();
        let ty = DbrType::new(Family::Plain, vals.native_type());
        let mut body = Vec::new();
        dbr::encode(ty, &DbrInfo::default(), &vals, &mut body);
        let count = vals.len().max(1) as u32;
        let ioid = self.next_id();
        let command = if wait { cmd::WRITE_NOTIFY } else { cmd::WRITE };
        let m = message(Header::new(command, ty.code(), count, ch.sid, ioid), &body);
        if !wait {
            ch.circuit.send(m);
            return Ok(());
        }
        let rx = ch.circuit.reply_for(ioid);
        ch.circuit.send(m);
        let (h, _) = self.wait(&ch.circuit, ioid, rx, deadline)?;
        if h.p1 == eca::NORMAL {
            Ok(())
        } else {
            Err(ClientError::Eca {
                code: h.p1,
                text: "put failed".into(),
            })
        }
    }

    /// Subscribe to value and alarm changes (DBR_TIME of the native type, current count).
    pub fn monitor(&self, name: &str) -> Result<Subscription, ClientError> {
        self.monitor_as(name, None, DBE_VALUE | DBE_LOG | DBE_ALARM)
    }

    /// Subscribe with a DBR type (`None` = TIME of the native type) and an event mask.
    pub fn monitor_as(
        &self,
        name: &str,
        dbr: Option<DbrType>,
        mask: u16,
    ) -> Result<Subscription, ClientError> {
        let deadline = Instant::now() + self.inner.cfg.connect_timeout;
        let ch = self.channel(name, deadline)?;
        let dbr = dbr.unwrap_or(DbrType::new(Family::Time, ch.native));
        let subid = self.next_id();
        let q = SubQueue::new();
        ch.circuit.add_sub(subid, Arc::clone(&q));
        let mut p = [0u8; 16];
        p[12..14].copy_from_slice(&mask.to_be_bytes());
        ch.circuit.send(message(
            Header::new(cmd::EVENT_ADD, dbr.code(), 0, ch.sid, subid),
            &p,
        ));
        Ok(Subscription {
            q,
            circuit: Arc::clone(&ch.circuit),
            sid: ch.sid,
            subid,
            dbr,
        })
    }

    fn next_id(&self) -> u32 {
        self.inner.ids.fetch_add(1, Ordering::Relaxed)
    }

    fn read(
        &self,
        ch: &Channel,
        dbr: DbrType,
        count: u32,
        deadline: Instant,
    ) -> Result<Reading, ClientError> {
        let ioid = self.next_id();
        let rx = ch.circuit.reply_for(ioid);
        ch.circuit.send(message(
            Header::new(cmd::READ_NOTIFY, dbr.code(), count, ch.sid, ioid),
            &[],
        ));
        let (h, p) = self.wait(&ch.circuit, ioid, rx, deadline)?;
        decode_reading(&h, &p)
    }

    fn wait(
        &self,
        circuit: &Circuit,
        id: u32,
        rx: oneshot::Receiver<Reply>,
        deadline: Instant,
    ) -> Result<(Header, Vec<u8>), ClientError> {
        let left = deadline.saturating_duration_since(Instant::now());
        let r = self
            .rt
            .block_on(async { tokio::time::timeout(left, rx).await });
        match r {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => Err(ClientError::Disconnected),
            Err(_) => {
                circuit.forget(id);
                Err(ClientError::Timeout)
            }
        }
    }

    /// A connected channel for `name` (cached; searched and created when needed). No answer to
    /// the search by `deadline` is [`ClientError::NotFound`]; a server that answered but did not
    /// create the channel in time is [`ClientError::Timeout`].
    fn channel(&self, name: &str, deadline: Instant) -> Result<Arc<Channel>, ClientError> {
        if let Some(c) = self.inner.channels.lock().get(name) {
            if c.circuit.is_alive() && !c.circuit.channel_dead(c.cid) {
                return Ok(Arc::clone(c));
            }
        }
        let inner = Arc::clone(&self.inner);
        let name2 = name.to_owned();
        let deadline = tokio::time::Instant::from_std(deadline);
        let ch = self
            .rt
            .block_on(async move { connect(&inner, &name2, deadline).await })?;
        let ch = Arc::new(ch);
        self.inner
            .channels
            .lock()
            .insert(name.to_owned(), Arc::clone(&ch));
        Ok(ch)
    }
}

/// Search, open (or reuse) the circuit, create the channel.
async fn connect(
    inner: &Arc<Inner>,
    name: &str,
    deadline: tokio::time::Instant,
) -> Result<Channel, ClientError> {
    let addr = search(inner, name, deadline).await?;
    tokio::time::timeout_at(deadline, create_channel(inner, name, addr))
        .await
        .map_err(|_| ClientError::Timeout)?
}

/// Open (or reuse) the circuit to `addr` and create the channel there.
async fn create_channel(
    inner: &Arc<Inner>,
    name: &str,
    addr: SocketAddr,
) -> Result<Channel, ClientError> {
    let circuit = {
        let mut cs = inner.circuits.lock().await;
        match cs.get(&addr) {
            Some(c) if c.is_alive() => Arc::clone(c),
            _ => {
                let c = Circuit::connect(
                    addr,
                    &inner.cfg.host_name,
                    &inner.cfg.user_name,
                    inner.cfg.max_array_bytes + 4096,
                    inner.search_hook(),
                )
                .await?;
                cs.insert(addr, Arc::clone(&c));
                c
            }
        }
    };
    let cid = inner.ids.fetch_add(1, Ordering::Relaxed);
    let rx = circuit.reply_for(cid);
    circuit.send(string_message(
        Header::new(cmd::CREATE_CHAN, 0, 0, cid, u32::from(MINOR_VERSION)),
        name,
    ));
    let (h, _) = rx.await.map_err(|_| ClientError::Disconnected)??;
    if h.command != cmd::CREATE_CHAN {
        return Err(ClientError::ChannelRefused(name.to_owned()));
    }
    let native = NativeType::from_code(h.data_type)
        .ok_or_else(|| ClientError::Protocol(format!("native type {}", h.data_type)))?;
    Ok(Channel {
        circuit,
        cid,
        sid: h.p2,
        native,
        count: h.count,
    })
}

/// Search with retries (50 ms doubling to 1 s) until a server answers or `deadline`
/// ([`ClientError::NotFound`]): UDP to [`ClientConfig::search_targets`], and over a TCP circuit
/// to each name server (EPICS_CA_NAME_SERVERS), where the same VERSION + SEARCH messages go.
async fn search(
    inner: &Arc<Inner>,
    name: &str,
    deadline: tokio::time::Instant,
) -> Result<SocketAddr, ClientError> {
    let cid = inner.ids.fetch_add(1, Ordering::Relaxed);
    let (tx, mut rx) = oneshot::channel();
    inner.searches.lock().insert(cid, tx);
    let mut dgram = message(
        Header::new(cmd::VERSION, 0, u32::from(MINOR_VERSION), 0, 0),
        &[],
    );
    dgram.extend(string_message(
        Header::new(cmd::SEARCH, DONT_REPLY, u32::from(MINOR_VERSION), cid, cid),
        name,
    ));
    let mut delay = Duration::from_millis(50);
    let r = loop {
        // Re-read each round: the automatic list follows the interfaces.
        for t in &inner.cfg.search_targets() {
            let _ = inner.udp.send_to(&dgram, t).await;
        }
        for ns in &inner.cfg.name_servers {
            tcp_search(inner, *ns, dgram.clone());
        }
        let next = (tokio::time::Instant::now() + delay).min(deadline);
        tokio::select! {
            r = &mut rx => break r.map_err(|_| ClientError::NotFound(name.to_owned())),
            _ = tokio::time::sleep_until(next) => {}
        }
        if tokio::time::Instant::now() >= deadline {
            break Err(ClientError::NotFound(name.to_owned()));
        }
        delay = (delay * 2).min(Duration::from_secs(1));
    };
    inner.searches.lock().remove(&cid);
    r
}

/// Send `msg` (VERSION + SEARCH) on the circuit to name server `ns`, connecting it first when
/// needed; while it connects (or when it cannot be reached) this round's search is skipped
/// and the next round tries again. The circuit is an ordinary one: channels the name server
/// itself serves are created on it.
fn tcp_search(inner: &Arc<Inner>, ns: SocketAddr, msg: Vec<u8>) {
    let inner = Arc::clone(inner);
    tokio::spawn(async move {
        let live = inner
            .circuits
            .lock()
            .await
            .get(&ns)
            .filter(|c| c.is_alive())
            .cloned();
        if let Some(c) = live {
            c.send(msg);
            return;
        }
        if !inner.ns_connecting.lock().insert(ns) {
            return;
        }
        let r = tokio::time::timeout(
            Duration::from_secs(2),
            Circuit::connect(
                ns,
                &inner.cfg.host_name,
                &inner.cfg.user_name,
                inner.cfg.max_array_bytes + 4096,
                inner.search_hook(),
            ),
        )
        .await;
        let c = match r {
            Ok(Ok(c)) => {
                let mut cs = inner.circuits.lock().await;
                match cs.get(&ns) {
                    // A channel's connect() got there first: use its circuit.
                    Some(old) if old.is_alive() => {
                        c.close();
                        Arc::clone(old)
                    }
                    _ => {
                        cs.insert(ns, Arc::clone(&c));
                        c
                    }
                }
            }
            Ok(Err(e)) => {
                tracing::debug!("CA name server {ns}: {e}");
                inner.ns_connecting.lock().remove(&ns);
                return;
            }
            Err(_) => {
                tracing::debug!("CA name server {ns}: no connection within 2 s");
                inner.ns_connecting.lock().remove(&ns);
                return;
            }
        };
        inner.ns_connecting.lock().remove(&ns);
        c.send(msg);
    });
}

/// Whether a datagram to `ip` needs SO_BROADCAST.
fn is_broadcast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => ndflow_net::ifaces::is_broadcast(v4),
        IpAddr::V6(_) => false,
    }
}

async fn search_replies(inner: std::sync::Weak<Inner>, udp: Arc<UdpSocket>) {
    let mut buf = vec![0u8; 65536];
    loop {
        let Ok((n, from)) = udp.recv_from(&mut buf).await else {
            tokio::time::sleep(Duration::from_millis(1)).await;
            continue;
        };
        let Some(inner) = inner.upgrade() else { return };
        let mut off = 0;
        while let Ok(Some((h, hlen))) = Header::parse(&buf[off..n], n) {
            off += hlen + h.payload_size as usize;
            if off > n {
                break;
            }
            if h.command != cmd::SEARCH {
                continue;
            }
            inner.search_reply(&h, from, false);
        }
    }
}

fn decode_reading(h: &Header, p: &[u8]) -> Result<Reading, ClientError> {
    if h.command == cmd::READ_NOTIFY && h.p1 != eca::NORMAL {
        return Err(ClientError::Eca {
            code: h.p1,
            text: "read failed".into(),
        });
    }
    let dbr = DbrType::from_code(h.data_type)
        .ok_or_else(|| ClientError::Protocol(format!("DBR type {}", h.data_type)))?;
    let (info, values) = dbr::decode(h.data_type, h.count as usize, p)
        .map_err(|e| ClientError::Protocol(e.to_string()))?;
    Ok(Reading {
        value: values.clone().into_ca_value(),
        values,
        dbr,
        status: info.status,
        severity: info.severity,
        stamp: matches!(dbr, DbrType::Value(Family::Time, _)).then_some(info.stamp),
        info,
    })
}

/// Updates of one monitor. Iterating blocks for the next update and ends when the
/// subscription ends (circuit lost: one `Disconnected` error first). Dropping it cancels.
pub struct Subscription {
    q: Arc<SubQueue>,
    circuit: Arc<Circuit>,
    sid: u32,
    subid: u32,
    dbr: DbrType,
}

impl Subscription {
    /// The next update, waiting at most `timeout`; `Err(Timeout)` when none came.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<Reading, ClientError> {
        let deadline = Instant::now() + timeout;
        let mut g = self.q.q.lock();
        loop {
            if let Some(r) = g.0.pop_front() {
                return r.and_then(|(h, p)| decode_reading(&h, &p));
            }
            if g.1 {
                return Err(ClientError::Disconnected);
            }
            if self.q.cv.wait_until(&mut g, deadline).timed_out() && g.0.is_empty() {
                return Err(if g.1 {
                    ClientError::Disconnected
                } else {
                    ClientError::Timeout
                });
            }
        }
    }

    /// An update if one is queued.
    pub fn try_recv(&self) -> Option<Result<Reading, ClientError>> {
        let r = self.q.q.lock().0.pop_front()?;
        Some(r.and_then(|(h, p)| decode_reading(&h, &p)))
    }
}

impl Iterator for Subscription {
    type Item = Result<Reading, ClientError>;
    fn next(&mut self) -> Option<Self::Item> {
        let mut g = self.q.q.lock();
        loop {
            if let Some(r) = g.0.pop_front() {
                return Some(r.and_then(|(h, p)| decode_reading(&h, &p)));
            }
            if g.1 {
                return None;
            }
            self.q.cv.wait(&mut g);
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.circuit.remove_sub(self.subid);
        self.circuit.send(message(
            Header::new(cmd::EVENT_CANCEL, self.dbr.code(), 0, self.sid, self.subid),
            &[],
        ));
    }
}
