//! One TCP connection to a server, shared by every channel on it.
//!
//! A reader task decodes every server message in arrival order — it must, because the type cache
//! (0xFD/0xFE) is a property of the stream — and hands each operation its decoded events through
//! a channel. A writer task sends queued messages, so callers never wait on the socket. Any
//! protocol violation closes the connection: every channel and operation on it then sees
//! `Disconnected` and monitors re-subscribe elsewhere.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{timeout_at, Instant};

use crate::transport::{Message, MessageReader, OutMessage};
use crate::wire::header::CTRL_SET_BYTE_ORDER;
use crate::wire::{ByteOrder, EncodeError, TypeCache, Writer};

use super::config::ClientConfig;
use super::proto::{self, cmd, OpDecoder, OpEvent, OpKind};
use super::ClientError;

/// Control message: echo request / response (pvAccessCPP; pvxs never sends them).
const CTRL_ECHO_REQUEST: u8 = 0x03;
const CTRL_ECHO_RESPONSE: u8 = 0x04;

/// What an operation receives.
#[derive(Debug)]
pub(crate) enum OpMsg {
    Event(OpEvent),
    /// The server's message for this op could not be decoded (the connection is closed too).
    Failed(String),
    /// Connection lost or channel destroyed by the server.
    Disconnected,
}

/// Where search responses received over TCP (name servers) go.
pub(crate) type SearchSink = Arc<dyn Fn(proto::SearchResponse, SocketAddr) + Send + Sync>;

/// Takes a monitor's updates straight from the reader task (see [`Connection::direct_updates`]).
pub(crate) type UpdateSink = Box<dyn Fn(OpEvent) + Send + Sync>;

struct OpEntry {
    sid: u32,
    decoder: OpDecoder,
    sink: mpsc::UnboundedSender<OpMsg>,
    /// Where updates go instead of `sink`, once set.
    updates: Option<UpdateSink>,
}

enum Chan {
    Pending {
        waiters: Vec<oneshot::Sender<Result<u32, ClientError>>>,
    },
    Ready {
        cid: u32,
        sid: u32,
        users: usize,
    },
}

#[derive(Default)]
struct State {
    ops: HashMap<u32, OpEntry>,
    chans: HashMap<String, Chan>,
    cid_names: HashMap<u32, String>,
    dead: Option<String>,
}

pub(crate) struct Connection {
    peer: SocketAddr,
    order: ByteOrder,
    /// The server looks like pvxs (see [`looks_like_pvxs`]).
    pvxs: bool,
    tx: mpsc::UnboundedSender<OutMessage>,
    state: Mutex<State>,
    closed: watch::Sender<bool>,
    next_id: AtomicU32,
    search_sink: Option<SearchSink>,
}

impl Connection {
    /// Connect, run connection validation, and start the reader, writer and echo tasks.
    pub(crate) async fn open(
        peer: SocketAddr,
        cfg: &ClientConfig,
        deadline: Instant,
        search_sink: Option<SearchSink>,
    ) -> Result<Arc<Connection>, ClientError> {
        if !cfg.allowed(&peer) {
            return Err(ClientError::Refused(format!(
                "{peer} is outside the loopback network"
            )));
        }
        let stream = timeout_at(deadline, TcpStream::connect(peer))
            .await
            .map_err(|_| ClientError::Timeout(format!("connecting to {peer}")))??;
        stream.set_nodelay(true)?;
        #[cfg(unix)]
        let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
        let (rd, mut wr) = stream.into_split();
        let reader = MessageReader::new(rd, cfg.max_message);
        #[cfg(unix)]
        let reader = reader.with_low_water(crate::transport::tcp_low_water(fd));
        let mut reader = reader;
        let (order, pvxs) = timeout_at(deadline, validate(&mut reader, &mut wr, cfg))
            .await
            .map_err(|_| ClientError::Timeout(format!("validating connection to {peer}")))??;
        let (tx, rx) = mpsc::unbounded_channel();
        let (closed, _) = watch::channel(false);
        let conn = Arc::new(Connection {
            peer,
            order,
            pvxs,
            tx,
            state: Mutex::new(State::default()),
            closed,
            next_id: AtomicU32::new(1),
            search_sink,
        });
        tokio::spawn(writer_task(wr, rx, conn.closed.subscribe()));
        tokio::spawn(reader_task(Arc::clone(&conn), reader, cfg.conn_timeout));
        tokio::spawn(echo_task(Arc::downgrade(&conn), cfg.echo_period));
        Ok(conn)
    }

    /// pvxs servers (1.5) open a pipeline window on an ack but send what they queued only at
    /// the next post or START, so after an ack the client repeats START. pvAccessCPP servers
    /// answer a START with the current value again, so they must not get it.
    pub(crate) fn start_after_ack(&self) -> bool {
        self.pvxs
    }

    pub(crate) fn is_dead(&self) -> bool {
        self.state.lock().dead.is_some()
    }

    pub(crate) fn next_id(&self) -> u32 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Queue a message in the connection's byte order.
    pub(crate) fn send(
        &self,
        command: u8,
        body: impl FnOnce(&mut Writer) -> Result<(), EncodeError>,
    ) -> Result<(), ClientError> {
        let msg = OutMessage::build(command, false, self.order, body)
            .map_err(|e| ClientError::Encode(e.to_string()))?;
        self.tx.send(msg).map_err(|_| ClientError::Disconnected)
    }

    /// Create (or share) the channel `name`; returns its server id.
    pub(crate) async fn acquire_channel(
        &self,
        name: &str,
        deadline: Instant,
    ) -> Result<u32, ClientError> {
        let rx = {
            let mut st = self.state.lock();
            if st.dead.is_some() {
                return Err(ClientError::Disconnected);
            }
            match st.chans.get_mut(name) {
                Some(Chan::Ready { sid, users, .. }) => {
                    *users += 1;
                    return Ok(*sid);
                }
                Some(Chan::Pending { waiters, .. }) => {
                    let (tx, rx) = oneshot::channel();
                    waiters.push(tx);
                    rx
                }
                None => {
                    let cid = self.next_id();
                    let (tx, rx) = oneshot::channel();
                    st.chans
                        .insert(name.to_owned(), Chan::Pending { waiters: vec![tx] });
                    st.cid_names.insert(cid, name.to_owned());
                    drop(st);
                    self.send(cmd::CREATE_CHANNEL, |w| {
                        proto::encode_create_channel(w, cid, name)
                    })?;
                    rx
                }
            }
        };
        // Bound first: the receiver must be dropped before the timeout arm looks at waiters.
        let res = timeout_at(deadline, rx).await;
        match res {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err(ClientError::Disconnected),
            Err(_) => {
                // Forget the request once nobody waits for it, so a later attempt sends a new
                // CREATE_CHANNEL instead of joining one the server never answered.
                let mut st = self.state.lock();
                if let Some(Chan::Pending { waiters }) = st.chans.get_mut(name) {
                    waiters.retain(|w| !w.is_closed());
                    if waiters.is_empty() {
                        st.chans.remove(name);
                        st.cid_names.retain(|_, n| n != name);
                    }
                }
                Err(ClientError::Timeout(format!("creating channel {name}")))
            }
        }
    }

    /// Drop one user of `name`; the last one destroys the channel on the server.
    pub(crate) fn release_channel(&self, name: &str) {
        let mut st = self.state.lock();
        let Some(Chan::Ready { cid, sid, users }) = st.chans.get_mut(name) else {
            return;
        };
        *users = users.saturating_sub(1);
        if *users > 0 {
            return;
        }
        let (cid, sid) = (*cid, *sid);
        st.chans.remove(name);
        st.cid_names.remove(&cid);
        drop(st);
        let _ = self.send(cmd::DESTROY_CHANNEL, |w| {
            proto::encode_destroy_channel(w, sid, cid);
            Ok(())
        });
    }

    /// Register a request id for an operation on channel `sid`.
    pub(crate) fn register_op(
        &self,
        kind: OpKind,
        sid: u32,
    ) -> Result<(u32, mpsc::UnboundedReceiver<OpMsg>), ClientError> {
        let (tx, rx) = mpsc::unbounded_channel();
        let ioid = self.next_id();
        let mut st = self.state.lock();
        if st.dead.is_some() {
            return Err(ClientError::Disconnected);
        }
        st.ops.insert(
            ioid,
            OpEntry {
                sid,
                decoder: OpDecoder::new(kind),
                sink: tx,
                updates: None,
            },
        );
        Ok((ioid, rx))
    }

    /// From now on hand the updates of `ioid` to `f`, called on the reader task, instead of
    /// the operation's channel: a monitor's updates then reach the application's queue with
    /// no task hand-off per frame (on 2 cores one fewer wake-up per frame is measurable).
    /// Everything else (finish, failure, disconnect) still goes through the channel.
    pub(crate) fn direct_updates(&self, ioid: u32, f: UpdateSink) {
        if let Some(op) = self.state.lock().ops.get_mut(&ioid) {
            op.updates = Some(f);
        }
    }

    /// Forget an operation; with `destroy` also tell the server (DESTROY_REQUEST).
    pub(crate) fn remove_op(&self, ioid: u32, destroy: bool) {
        let entry = self.state.lock().ops.remove(&ioid);
        if let (Some(e), true) = (entry, destroy) {
            let _ = self.send(cmd::DESTROY_REQUEST, |w| {
                proto::encode_sid_ioid(w, e.sid, ioid);
                Ok(())
            });
        }
    }

    /// Close the connection: every waiter and operation is told, tasks stop.
    pub(crate) fn close(&self, reason: &str) {
        let (ops, chans) = {
            let mut st = self.state.lock();
            if st.dead.is_some() {
                return;
            }
            st.dead = Some(reason.to_owned());
            st.cid_names.clear();
            (std::mem::take(&mut st.ops), std::mem::take(&mut st.chans))
        };
        for (_, op) in ops {
            let _ = op.sink.send(OpMsg::Disconnected);
        }
        for (_, ch) in chans {
            if let Chan::Pending { waiters, .. } = ch {
                for w in waiters {
                    let _ = w.send(Err(ClientError::Disconnected));
                }
            }
        }
        self.closed.send_replace(true);
    }

    /// Handle one message from the server. `Err` = protocol violation: close the connection.
    fn dispatch(&self, m: Message, cache: &mut TypeCache) -> Result<(), String> {
        let order = m.order();
        if m.header.is_control() {
            if m.header.command == CTRL_ECHO_REQUEST {
                let _ = self.tx.send(OutMessage::control(
                    CTRL_ECHO_RESPONSE,
                    false,
                    self.order,
                    m.header.payload_size,
                ));
            }
            // A later SET_BYTE_ORDER changes nothing: every header carries its own order.
            return Ok(());
        }
        if !m.header.is_from_server() {
            return Err("message without the server flag".into());
        }
        let p = &m.payload;
        match m.command() {
            cmd::CREATE_CHANNEL => {
                let r = proto::decode_create_channel(p, order).map_err(|e| e.to_string())?;
                self.on_channel_created(r);
            }
            cmd::DESTROY_CHANNEL => {
                let (sid, cid) =
                    proto::decode_destroy_channel(p, order).map_err(|e| e.to_string())?;
                self.on_channel_destroyed(sid, cid);
            }
            cmd::GET | cmd::PUT | cmd::MONITOR | cmd::GET_FIELD => {
                let ioid = proto::peek_ioid(p, order).map_err(|e| e.to_string())?;
                let mut st = self.state.lock();
                // Late replies for destroyed requests are normal; ignore them.
                let Some(op) = st.ops.get_mut(&ioid) else {
                    return Ok(());
                };
                if op.decoder.kind.command() != m.command() {
                    return Err(format!(
                        "reply command 0x{:02x} for another op",
                        m.command()
                    ));
                }
                match op.decoder.handle(p, order, cache) {
                    Ok(ev @ OpEvent::Update { .. }) if op.updates.is_some() => {
                        if let Some(f) = &op.updates {
                            f(ev);
                        }
                    }
                    Ok(ev) => {
                        let finished = matches!(ev, OpEvent::Finished { .. });
                        let _ = op.sink.send(OpMsg::Event(ev));
                        if finished {
                            st.ops.remove(&ioid);
                        }
                    }
                    Err(e) => {
                        let _ = op.sink.send(OpMsg::Failed(e.to_string()));
                        st.ops.remove(&ioid);
                        return Err(format!("bad reply to request {ioid}: {e}"));
                    }
                }
            }
            cmd::SEARCH_RESPONSE => {
                let r = proto::decode_search_response(p, order).map_err(|e| e.to_string())?;
                if let Some(sink) = &self.search_sink {
                    sink(r, self.peer);
                }
            }
            // ECHO replies, MESSAGE, beacons, validation repeats and unknown commands.
            _ => {}
        }
        Ok(())
    }

    fn on_channel_created(&self, r: proto::CreateChannelResponse) {
        let mut st = self.state.lock();
        let Some(name) = st.cid_names.get(&r.cid).cloned() else {
            // A reply nobody waits for any more: do not leave the channel open on the server.
            drop(st);
            if r.status.is_success() {
                let _ = self.send(cmd::DESTROY_CHANNEL, |w| {
                    proto::encode_destroy_channel(w, r.sid, r.cid);
                    Ok(())
                });
            }
            return;
        };
        let Some(Chan::Pending { waiters, .. }) = st.chans.remove(&name) else {
            // Already created: a duplicate reply; keep what we have.
            return;
        };
        if r.status.is_success() {
            let users = waiters.len();
            st.chans.insert(
                name,
                Chan::Ready {
                    cid: r.cid,
                    sid: r.sid,
                    users,
                },
            );
            drop(st);
            for w in waiters {
                let _ = w.send(Ok(r.sid));
            }
        } else {
            st.cid_names.remove(&r.cid);
            drop(st);
            for w in waiters {
                let _ = w.send(Err(ClientError::Remote(r.status.message.clone())));
            }
        }
    }

    /// The server dropped a channel (PV gone): its operations are disconnected.
    fn on_channel_destroyed(&self, sid: u32, cid: u32) {
        let mut st = self.state.lock();
        let Some(name) = st.cid_names.remove(&cid) else {
            return;
        };
        st.chans.remove(&name);
        let ids: Vec<u32> = st
            .ops
            .iter()
            .filter(|(_, o)| o.sid == sid)
            .map(|(&id, _)| id)
            .collect();
        for id in ids {
            if let Some(op) = st.ops.remove(&id) {
                let _ = op.sink.send(OpMsg::Disconnected);
            }
        }
    }
}

/// Wait for SET_BYTE_ORDER and CONNECTION_VALIDATION, answer, and wait for CONNECTION_VALIDATED.
/// Returns the byte order to send in (the server's) and whether the server looks like pvxs.
async fn validate(
    reader: &mut MessageReader<OwnedReadHalf>,
    wr: &mut tokio::net::tcp::OwnedWriteHalf,
    cfg: &ClientConfig,
) -> Result<(ByteOrder, bool), ClientError> {
    let mut order = ByteOrder::NATIVE;
    let mut answered = false;
    let mut pvxs = false;
    loop {
        let m = reader
            .next()
            .await
            .map_err(|e| ClientError::Protocol(e.to_string()))?
            .ok_or(ClientError::Disconnected)?;
        if m.header.is_control() {
            if m.header.command == CTRL_SET_BYTE_ORDER {
                order = m.order();
            }
            continue;
        }
        match m.command() {
            cmd::CONNECTION_VALIDATION if !answered => {
                let req = proto::decode_validation_request(&m.payload, m.order())
                    .map_err(|e| ClientError::Protocol(format!("validation request: {e}")))?;
                pvxs = looks_like_pvxs(&req);
                let auth = proto::choose_auth(&req.methods, &cfg.auth);
                let msg = OutMessage::build(cmd::CONNECTION_VALIDATION, false, order, |w| {
                    proto::encode_validation_reply(w, &auth)
                })
                .map_err(|e| ClientError::Encode(e.to_string()))?;
                // The write half is only borrowed here; the writer task takes it afterwards.
                msg.write_to(wr).await?;
                answered = true;
            }
            cmd::CONNECTION_VALIDATED => {
                let st = proto::decode_status(&m.payload, m.order())
                    .map_err(|e| ClientError::Protocol(format!("validated: {e}")))?;
                if !st.is_success() {
                    return Err(ClientError::Remote(format!(
                        "connection refused: {}",
                        st.message
                    )));
                }
                return Ok((order, pvxs));
            }
            _ => {}
        }
    }
}

/// pvxs announces a constant receive buffer of 0x10000 and registry size 0x7fff; pvAccessCPP
/// announces its socket buffer size (17408 on Linux by default).
fn looks_like_pvxs(req: &proto::ValidationRequest) -> bool {
    req.buffer_size == 0x10000 && req.registry_size == 0x7fff
}

async fn reader_task(
    conn: Arc<Connection>,
    mut reader: MessageReader<OwnedReadHalf>,
    silence: Duration,
) {
    let mut cache = TypeCache::new();
    let mut closed = conn.closed.subscribe();
    let reason = loop {
        // Any message counts as a sign of life; echoes keep an idle link talking.
        let next = tokio::select! {
            r = tokio::time::timeout(silence, reader.next()) => r,
            _ = closed.wait_for(|c| *c) => break "closed".to_owned(),
        };
        match next {
            Err(_) => break format!("no message from {} for {silence:?}", conn.peer),
            Ok(Err(e)) => break e.to_string(),
            Ok(Ok(None)) => break "server closed the connection".to_owned(),
            Ok(Ok(Some(m))) => {
                if let Err(e) = conn.dispatch(m, &mut cache) {
                    break e;
                }
            }
        }
    };
    conn.close(&reason);
}

async fn writer_task(
    wr: tokio::net::tcp::OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<OutMessage>,
    mut closed: watch::Receiver<bool>,
) {
    let mut w = BufWriter::with_capacity(64 * 1024, wr);
    loop {
        let msg = tokio::select! {
            m = rx.recv() => m,
            _ = closed.wait_for(|c| *c) => None,
        };
        let Some(msg) = msg else {
            break;
        };
        if msg.write_to(&mut w).await.is_err() {
            break;
        }
        // Batch whatever else is queued, then flush once.
        let mut ok = true;
        while let Ok(m) = rx.try_recv() {
            if m.write_to(&mut w).await.is_err() {
                ok = false;
                break;
            }
        }
        if !ok || w.flush().await.is_err() {
            break;
        }
    }
    let _ = w.shutdown().await;
}

/// pvxs servers drop a client silent for 40 s: send an empty ECHO every period.
async fn echo_task(conn: std::sync::Weak<Connection>, period: Duration) {
    let mut tick = tokio::time::interval_at(Instant::now() + period, period);
    loop {
        tick.tick().await;
        let Some(c) = conn.upgrade() else {
            return;
        };
        if c.is_dead() || c.send(cmd::ECHO, |_| Ok(())).is_err() {
            return;
        }
    }
}
