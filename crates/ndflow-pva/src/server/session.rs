//! The protocol state of one client connection, independent of sockets: the handshake,
//! ECHO, TCP search, channel creation and the table of open requests. [`Session::handle`] takes
//! one received message and returns the replies; the GET/PUT/MONITOR/... handlers live in
//! [`super::channel_ops`].
//!
//! Malformed input never panics and never takes the server down: a message that cannot be
//! decoded is counted and ignored (or answered with an error status when its request is known).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::request::PvRequest;
use crate::transport::{cmd, Message, OutMessage};
use crate::wire::header::CTRL_SET_BYTE_ORDER;
use crate::wire::{
    BitSet, ByteOrder, DecodeError, EncodeError, FieldDesc, Reader, Status, TypeCache, Value,
    Writer,
};

use super::monitor::Subscription;
use super::search::SearchRequest;
use super::shared_pv::SharedPv;
use super::ServerShared;

/// Authentication methods offered, in pvxs's order (old pvAccessCPP picks the last it knows).
pub const AUTH_METHODS: [&str; 2] = ["anonymous", "ca"];

pub(crate) struct Channel {
    pub cid: u32,
    pub pv: SharedPv,
}

pub(crate) enum OpKind {
    Get,
    /// `block`: the client asked to be answered when the operation has ended.
    Put {
        block: bool,
    },
    Monitor(Arc<Subscription>),
}

pub(crate) struct Op {
    pub sid: u32,
    pub kind: OpKind,
    pub mask: Option<BitSet>,
}

pub(crate) struct Session {
    pub(crate) srv: Arc<ServerShared>,
    /// Byte order of everything we send (the one announced by SET_BYTE_ORDER).
    pub(crate) order: ByteOrder,
    validated: bool,
    pub(crate) user: String,
    /// Types the client defined with 0xFD (pvAccessCPP does).
    pub(crate) cache: TypeCache,
    pub(crate) channels: HashMap<u32, Channel>,
    next_sid: u32,
    pub(crate) ops: HashMap<u32, Op>,
    /// Wakes the connection's writer when a subscription has something to send.
    pub(crate) wake: Arc<Notify>,
    /// The subscriptions the writer serves (shared with it).
    pub(crate) monitors: Arc<Mutex<Vec<Arc<Subscription>>>>,
    /// The connection's socket, for direct writes by lossless posters (None in the fuzzer).
    pub(crate) sock: Option<Arc<super::direct::SockOut>>,
    pub(crate) out: Vec<OutMessage>,
    close: bool,
    /// The client's address (None in the fuzzer).
    pub(crate) peer: Option<std::net::SocketAddr>,
    /// How replies given after their request was handled (deferred PUTs) reach the writer.
    pub(crate) late: Option<(
        tokio::sync::mpsc::Sender<OutMessage>,
        tokio::runtime::Handle,
    )>,
}

impl Session {
    pub(crate) fn new(
        srv: Arc<ServerShared>,
        wake: Arc<Notify>,
        monitors: Arc<Mutex<Vec<Arc<Subscription>>>>,
    ) -> Self {
        Self {
            srv,
            order: ByteOrder::NATIVE,
            validated: false,
            user: String::new(),
            cache: TypeCache::new(),
            channels: HashMap::new(),
            next_sid: 1,
            ops: HashMap::new(),
            wake,
            monitors,
            sock: None,
            out: Vec::new(),
            close: false,
            peer: None,
            late: None,
        }
    }

    /// What the server sends first: SET_BYTE_ORDER, then CONNECTION_VALIDATION.
    pub(crate) fn greeting(&mut self) -> Vec<OutMessage> {
        self.out.push(OutMessage::control(
            CTRL_SET_BYTE_ORDER,
            true,
            self.order,
            0,
        ));
        self.reply(cmd::CONNECTION_VALIDATION, |w| {
            w.u32(0x10000); // receive buffer size (informational)
            w.u16(0x7fff); // introspection registry size
            w.size(AUTH_METHODS.len())?;
            AUTH_METHODS.iter().try_for_each(|m| w.string(m))
        });
        std::mem::take(&mut self.out)
    }

    /// Whether the connection should be closed (protocol violation).
    pub(crate) fn should_close(&self) -> bool {
        self.close
    }

    pub(crate) fn is_validated(&self) -> bool {
        self.validated
    }

    /// Process one message; returns the replies in order.
    pub(crate) fn handle(&mut self, msg: &Message) -> Vec<OutMessage> {
        let h = msg.header;
        if h.is_from_server() {
            // A client must never set the server flag (pvxs disconnects too).
            self.srv.stats.malformed();
            self.close = true;
            return Vec::new();
        }
        if h.is_control() {
            // SET_BYTE_ORDER from a client and the unused control codes: nothing to do; we
            // read each message in its own flagged order.
            return Vec::new();
        }
        let mut r = Reader::over_shared(&msg.payload, h.byte_order());
        let res = match h.command {
            cmd::ECHO => {
                // Same payload back (v2 behaviour).
                self.out.push(OutMessage {
                    header: crate::wire::Header::application(
                        cmd::ECHO,
                        true,
                        self.order,
                        h.payload_size,
                    ),
                    parts: vec![msg.payload.clone()],
                });
                Ok(())
            }
            cmd::CONNECTION_VALIDATION => self.validation(&mut r),
            cmd::SEARCH => self.tcp_search(&mut r),
            _ if !self.validated => Ok(()),
            cmd::CREATE_CHANNEL => self.create_channel(&mut r),
            cmd::DESTROY_CHANNEL => self.destroy_channel(&mut r),
            cmd::GET => self.get(&mut r),
            cmd::PUT => self.put(&mut r),
            cmd::MONITOR => self.monitor(&mut r),
            cmd::GET_FIELD => self.get_field(&mut r),
            // GET/PUT complete at once, so CANCEL has nothing to stop; DESTROY releases the
            // request (and ends a subscription).
            cmd::DESTROY_REQUEST => r
                .u32()
                .and_then(|_sid| r.u32())
                .map(|ioid| self.remove_op(ioid)),
            cmd::CANCEL_REQUEST => Ok(()),
            cmd::RPC | cmd::PROCESS | cmd::PUT_GET => self.unsupported(h.command, &mut r),
            // AUTHNZ, ARRAY, MESSAGE, ... : ignored, as pvxs does.
            _ => Ok(()),
        };
        if res.is_err() {
            self.srv.stats.malformed();
        }
        std::mem::take(&mut self.out)
    }

    fn validation(&mut self, r: &mut Reader<'_>) -> Result<(), DecodeError> {
        let _buffer = r.u32()?;
        let _registry = r.u16()?;
        let _qos = r.u16()?;
        let method = if r.is_empty() {
            String::new()
        } else {
            r.string()?
        };
        // Credentials: "ca" sends {user, host}; "anonymous" a null type. Old clients may send
        // nothing at all, so a missing or odd description is not an error.
        let mut user = String::new();
        if !r.is_empty() {
            if let Ok(Some(d)) = FieldDesc::decode(r, &mut self.cache) {
                if let Ok(v) = Value::decode(&d, r, &mut self.cache) {
                    if let Some(u) = v.field(&d, "user").and_then(Value::as_str) {
                        user = u.to_owned();
                    }
                }
            }
        }
        let status = if method.is_empty() || AUTH_METHODS.contains(&method.as_str()) {
            self.validated = true;
            self.user = user;
            Status::ok()
        } else {
            Status::error(format!("authentication method {method:?} not offered"))
        };
        self.reply(cmd::CONNECTION_VALIDATED, |w| w.status(&status));
        Ok(())
    }

    fn tcp_search(&mut self, r: &mut Reader<'_>) -> Result<(), DecodeError> {
        let req = SearchRequest::decode(r)?;
        self.srv.stats.search();
        if let Some(Ok(m)) = super::search::response(&self.srv, &req, self.order) {
            self.out.push(m);
        }
        Ok(())
    }

    fn create_channel(&mut self, r: &mut Reader<'_>) -> Result<(), DecodeError> {
        let n = r.u16()?;
        for _ in 0..n {
            let cid = r.u32()?;
            let name = r.string()?;
            let found = if self.channels.len() >= self.srv.cfg.max_channels_per_conn {
                self.srv.stats.limit_refusal();
                Err(Status::error("too many channels on this connection"))
            } else {
                let client = super::ClientId {
                    peer: self.peer,
                    user: self.user.clone(),
                };
                self.srv
                    .provider
                    .lookup_for(&name, &client)
                    .ok_or_else(|| Status::error(format!("no such channel: {name}")))
            };
            match found {
                Ok(pv) => {
                    let sid = self.alloc_sid();
                    self.channels.insert(sid, Channel { cid, pv });
                    self.srv.stats.channels(1);
                    self.reply(cmd::CREATE_CHANNEL, |w| {
                        w.u32(cid);
                        w.u32(sid);
                        w.status(&Status::ok())
                    });
                }
                Err(st) => self.reply(cmd::CREATE_CHANNEL, |w| {
                    w.u32(cid);
                    w.u32(u32::MAX);
                    w.status(&st)
                }),
            }
        }
        Ok(())
    }

    fn alloc_sid(&mut self) -> u32 {
        loop {
            let sid = self.next_sid;
            self.next_sid = self.next_sid.wrapping_add(1).max(1);
            if !self.channels.contains_key(&sid) {
                return sid;
            }
        }
    }

    fn destroy_channel(&mut self, r: &mut Reader<'_>) -> Result<(), DecodeError> {
        let sid = r.u32()?;
        let cid = r.u32()?;
        // Late or unknown ids are ignored, not fatal.
        if self.channels.get(&sid).is_some_and(|c| c.cid == cid) {
            self.channels.remove(&sid);
            self.srv.stats.channels(-1);
            let ops: Vec<u32> = self
                .ops
                .iter()
                .filter(|(_, op)| op.sid == sid)
                .map(|(ioid, _)| *ioid)
                .collect();
            for ioid in ops {
                self.remove_op(ioid);
            }
            self.reply(cmd::DESTROY_CHANNEL, |w| {
                w.u32(sid);
                w.u32(cid);
                Ok(())
            });
        }
        Ok(())
    }

    /// Read the pvRequest of an INIT (type, then value).
    pub(crate) fn read_request(&mut self, r: &mut Reader<'_>) -> Result<PvRequest, DecodeError> {
        let desc = FieldDesc::decode(r, &mut self.cache)?;
        let value = match &desc {
            Some(d) => Some(Value::decode(d, r, &mut self.cache)?),
            None => None,
        };
        Ok(PvRequest::decode(desc.as_ref(), value.as_ref()))
    }

    /// Whether another request may be opened under `ioid`.
    pub(crate) fn ioid_free(&self, ioid: u32) -> Result<(), Status> {
        if self.ops.contains_key(&ioid) {
            Err(Status::error(format!("request id {ioid} already in use")))
        } else if self.ops.len() >= self.srv.cfg.max_requests_per_conn {
            self.srv.stats.limit_refusal();
            Err(Status::error("too many requests on this connection"))
        } else {
            Ok(())
        }
    }

    pub(crate) fn remove_op(&mut self, ioid: u32) {
        if let Some(op) = self.ops.remove(&ioid) {
            if let OpKind::Monitor(sub) = op.kind {
                sub.close();
                self.monitors.lock().retain(|s| !Arc::ptr_eq(s, &sub));
                self.srv.stats.monitors(-1);
            }
        }
    }

    /// Queue one reply built by `body`; an encoding failure (a value that no longer fits its
    /// type) is counted, not sent.
    pub(crate) fn reply(
        &mut self,
        command: u8,
        body: impl FnOnce(&mut Writer) -> Result<(), EncodeError>,
    ) {
        match OutMessage::build(command, true, self.order, body) {
            Ok(m) => self.out.push(m),
            Err(_) => self.srv.stats.malformed(),
        }
    }

    /// `ioid, subcmd, status` — the reply shape shared by GET/PUT/MONITOR/RPC errors.
    pub(crate) fn status_reply(&mut self, command: u8, ioid: u32, sub: u8, st: &Status) {
        self.reply(command, |w| {
            w.u32(ioid);
            w.u8(sub);
            w.status(st)
        });
    }

    /// Close every request and channel (connection gone): subscriptions stop holding posters.
    pub(crate) fn close_all(&mut self) {
        let ioids: Vec<u32> = self.ops.keys().copied().collect();
        for ioid in ioids {
            self.remove_op(ioid);
        }
        let n = self.channels.len() as i64;
        self.channels.clear();
        self.srv.stats.channels(-n);
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.close_all();
    }
}
