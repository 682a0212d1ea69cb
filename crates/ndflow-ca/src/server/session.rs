//! The protocol state of one TCP connection: channels, subscriptions and the handling of each
//! client message. Synchronous and socket-free (replies are appended to a `Vec`), so the
//! fuzz tests drive it directly; `connection` does the I/O.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use tokio::sync::mpsc::UnboundedSender;

use super::fields::{self, Field, SharedReply, View};
use super::monitor::{ConnSignal, Subscription};
use super::ServerShared;
use crate::dbr::{self, DbrType};
use crate::header::{
    cmd, eca, error_message, message, payload_str, Header, DBE_ALARM, DBE_VALUE, DO_REPLY,
    MINOR_VERSION,
};
use crate::pv::{Access, CaPv, PutCompletion, Snapshot, Watcher};
use crate::value::{CaValue, Format, NativeType};

/// WRITE_NOTIFYs of one connection waiting for their put handlers.
const MAX_INFLIGHT_PUTS: usize = 4096;

struct Chan {
    cid: u32,
    name: String,
    record: Arc<str>,
    pv: CaPv,
    field: Field,
    access: Access,
}

impl Chan {
    fn can_write(&self) -> bool {
        self.access == Access::ReadWrite && self.field == Field::Val && self.pv.meta().writable
    }

    fn rights(&self) -> u32 {
        match self.access {
            Access::None => 0,
            Access::Read => 1,
            Access::ReadWrite if self.can_write() => 3,
            Access::ReadWrite => 1,
        }
    }

    fn view(&self) -> View {
        fields::view(self.field, &self.record, &self.pv.snapshot())
    }
}

/// Why a connection must close.
pub(crate) type Close = &'static str;

pub(crate) struct Session {
    srv: Arc<ServerShared>,
    pub(crate) conn: Arc<ConnSignal>,
    completions: UnboundedSender<Vec<u8>>,
    inflight: Arc<AtomicUsize>,
    /// The client's address until it names its host — which counts only from this host: a
    /// client elsewhere could claim any name (RSRV's EPICS_CAS_USE_HOST_NAMES=NO, by address).
    host: String,
    host_name_trusted: bool,
    user: String,
    chans: HashMap<u32, Chan>,
    next_sid: u32,
    subs: HashMap<u32, Arc<Subscription>>,
}

impl Session {
    pub(crate) fn new(
        srv: Arc<ServerShared>,
        peer_host: String,
        completions: UnboundedSender<Vec<u8>>,
    ) -> Self {
        Self {
            srv,
            conn: Arc::new(ConnSignal::default()),
            completions,
            inflight: Arc::new(AtomicUsize::new(0)),
            host_name_trusted: peer_host.parse().is_ok_and(ndflow_net::ifaces::is_local),
            host: peer_host,
            user: String::new(),
            chans: HashMap::new(),
            next_sid: 1,
            subs: HashMap::new(),
        }
    }

    /// What the server sends first: its VERSION.
    pub(crate) fn greeting() -> Vec<u8> {
        message(
            Header::new(cmd::VERSION, 0, u32::from(MINOR_VERSION), 0, 0),
            &[],
        )
    }

    pub(crate) fn channel_count(&self) -> usize {
        self.chans.len()
    }

    /// SERVER_DISCONN for every channel (server shutting down).
    pub(crate) fn disconnect_all(&mut self, out: &mut Vec<Vec<u8>>) {
        for c in self.chans.values() {
            out.push(message(
                Header::new(cmd::SERVER_DISCONN, 0, 0, c.cid, 0),
                &[],
            ));
        }
        self.close_all();
    }

    fn close_all(&mut self) {
        for s in self.subs.values() {
            s.cancel();
        }
        self.subs.clear();
        self.srv.channels(-(self.chans.len() as i64));
        self.chans.clear();
    }

    /// Handle one message; replies go to `out`. `Err` = close the connection.
    pub(crate) fn handle(
        &mut self,
        h: &Header,
        payload: &[u8],
        out: &mut Vec<Vec<u8>>,
    ) -> Result<(), Close> {
        match h.command {
            cmd::VERSION | cmd::EVENTS_OFF | cmd::EVENTS_ON | cmd::READ_SYNC => {}
            cmd::ECHO => out.push(message(
                Header {
                    payload_size: 0,
                    ..*h
                },
                &[],
            )),
            cmd::HOST_NAME | cmd::CLIENT_NAME => {
                let s: String = payload_str(payload).chars().take(256).collect();
                if h.command == cmd::HOST_NAME {
                    if self.host_name_trusted {
                        self.host = s;
                    }
                } else {
                    self.user = s;
                }
                self.recheck_access(out);
            }
            cmd::SEARCH => self.search(h, payload, out),
            cmd::CREATE_CHAN => self.create_chan(h, payload, out),
            cmd::CLEAR_CHANNEL => self.clear_chan(h, out),
            cmd::READ_NOTIFY | cmd::READ => self.read(h, out),
            cmd::WRITE | cmd::WRITE_NOTIFY => self.write(h, payload, out),
            cmd::EVENT_ADD => self.event_add(h, payload, out),
            cmd::EVENT_CANCEL => self.event_cancel(h, out),
            _ => out.push(error_message(
                h,
                0,
                eca::INTERNAL,
                &format!("unsupported command {}", h.command),
            )),
        }
        Ok(())
    }

    fn search(&self, h: &Header, payload: &[u8], out: &mut Vec<Vec<u8>>) {
        let name = payload_str(payload);
        let found = fields::resolve(self.srv.provider.as_ref(), &name).filter(|t| {
            self.srv.provider.access(&t.record, &self.host, &self.user) != Access::None
        });
        if found.is_some() {
            out.push(search_reply(self.srv.tcp_port, u32::MAX, h.p1));
        } else if h.data_type == DO_REPLY {
            out.push(not_found(h));
        }
    }

    fn create_chan(&mut self, h: &Header, payload: &[u8], out: &mut Vec<Vec<u8>>) {
        let cid = h.p1;
        let name = payload_str(payload);
        let fail = message(Header::new(cmd::CREATE_CH_FAIL, 0, 0, cid, 0), &[]);
        if self.chans.len() >= self.srv.cfg.max_channels_per_conn {
            self.srv.limit_refusals.fetch_add(1, Ordering::Relaxed);
            tracing::warn!("CA client {}: channel limit reached", self.host);
            out.push(fail);
            return;
        }
        let Some(t) = fields::resolve(self.srv.provider.as_ref(), &name) else {
            out.push(fail);
            return;
        };
        let access = self.srv.provider.access(&t.record, &self.host, &self.user);
        if access == Access::None {
            out.push(fail);
            return;
        }
        // Skip sids still in use after wrap-around.
        let mut sid = self.next_sid;
        while self.chans.contains_key(&sid) {
            sid = sid.wrapping_add(1);
        }
        self.next_sid = sid.wrapping_add(1);
        let chan = Chan {
            cid,
            name,
            record: t.record,
            pv: t.pv,
            field: t.field,
            access,
        };
        let v = chan.view();
        out.push(message(
            Header::new(cmd::ACCESS_RIGHTS, 0, 0, cid, chan.rights()),
            &[],
        ));
        out.push(message(
            Header::new(
                cmd::CREATE_CHAN,
                v.native.code(),
                u32::try_from(v.max_count).unwrap_or(u32::MAX),
                cid,
                sid,
            ),
            &[],
        ));
        self.chans.insert(sid, chan);
        self.srv.channels(1);
    }

    fn recheck_access(&mut self, out: &mut Vec<Vec<u8>>) {
        for c in self.chans.values_mut() {
            let a = self.srv.provider.access(&c.record, &self.host, &self.user);
            if a != c.access {
                c.access = a;
                out.push(message(
                    Header::new(cmd::ACCESS_RIGHTS, 0, 0, c.cid, c.rights()),
                    &[],
                ));
            }
        }
    }

    fn clear_chan(&mut self, h: &Header, out: &mut Vec<Vec<u8>>) {
        let Some(c) = self.chans.remove(&h.p1) else {
            out.push(error_message(h, h.p2, eca::BADCHID, "no such channel"));
            return;
        };
        self.srv.channels(-1);
        let sid = h.p1;
        self.subs.retain(|_, s| {
            if s.sid == sid {
                s.cancel();
                false
            } else {
                true
            }
        });
        out.push(message(
            Header::new(cmd::CLEAR_CHANNEL, 0, 0, sid, c.cid),
            &[],
        ));
    }

    fn read(&mut self, h: &Header, out: &mut Vec<Vec<u8>>) {
        let Some(c) = self.chans.get(&h.p1) else {
            out.push(error_message(h, 0, eca::BADCHID, "no such channel"));
            return;
        };
        // READ (deprecated) answers with the sid in p1; READ_NOTIFY with the status.
        let notify = h.command == cmd::READ_NOTIFY;
        let reply = |status: u32, count: u32, body: &[u8]| {
            let p1 = if notify { status } else { h.p1 };
            message(Header::new(h.command, h.data_type, count, p1, h.p2), body)
        };
        if c.access == Access::None {
            out.push(error_message(h, c.cid, eca::NORDACCESS, "no read access"));
            return;
        }
        // A frame: its wire-order values, swapped once per post and shared, copied once.
        let p1 = if notify { eca::NORMAL } else { h.p1 };
        let head = Header::new(h.command, h.data_type, 0, p1, h.p2);
        let max = self.srv.cfg.max_array_bytes;
        let snap = c.pv.snapshot();
        if let Some(r) = fields::shared_reply(c.field, &c.record, &snap, head, h.count, max) {
            out.push(r.to_vec());
            return;
        }
        match fields::encode_reply(
            &fields::view(c.field, &c.record, &snap),
            h.data_type,
            h.count,
            max,
        ) {
            Ok((body, n)) => out.push(reply(eca::NORMAL, n, &body)),
            Err(s @ (eca::TOLARGE | eca::BADTYPE)) => {
                out.push(error_message(h, c.cid, s, eca::name(s)))
            }
            Err(s) => {
                // A failed conversion: the status and a zeroed payload, as RSRV does.
                let zeros = DbrType::from_code(h.data_type)
                    .map(|t| vec![0u8; t.size_n(h.count as usize)])
                    .unwrap_or_default();
                out.push(reply(s, h.count, &zeros));
            }
        }
    }

    fn write(&mut self, h: &Header, payload: &[u8], out: &mut Vec<Vec<u8>>) {
        let notify = h.command == cmd::WRITE_NOTIFY;
        let Some(c) = self.chans.get(&h.p1) else {
            out.push(error_message(h, 0, eca::BADCHID, "no such channel"));
            return;
        };
        let cid = c.cid;
        let fail = |status: u32, text: &str| -> Vec<u8> {
            if notify {
                message(
                    Header::new(cmd::WRITE_NOTIFY, h.data_type, h.count, status, h.p2),
                    &[],
                )
            } else {
                error_message(h, cid, status, text)
            }
        };
        if matches!(h.data_type, dbr::DBR_PUT_ACKT | dbr::DBR_PUT_ACKS) {
            // Alarm acknowledgement: accepted and ignored (we keep no acknowledgement state).
            if notify {
                out.push(fail(eca::NORMAL, ""));
            }
            return;
        }
        if !c.can_write() {
            out.push(fail(eca::NOWTACCESS, "no write access"));
            return;
        }
        let value = match decode_put(c, h, payload) {
            Ok(v) => v,
            Err((status, why)) => {
                out.push(fail(status, &why));
                return;
            }
        };
        if notify && self.inflight.load(Ordering::Relaxed) >= MAX_INFLIGHT_PUTS {
            self.srv.limit_refusals.fetch_add(1, Ordering::Relaxed);
            out.push(fail(eca::PUTFAIL, "too many puts in progress"));
            return;
        }
        let completion = if notify {
            self.inflight.fetch_add(1, Ordering::Relaxed);
            let tx = self.completions.clone();
            let inflight = Arc::clone(&self.inflight);
            let (ty, count, ioid) = (h.data_type, h.count, h.p2);
            PutCompletion::new(true, move |r| {
                inflight.fetch_sub(1, Ordering::Relaxed);
                let status = match r {
                    Ok(()) => eca::NORMAL,
                    Err(why) => {
                        tracing::debug!("CA put failed: {why}");
                        eca::PUTFAIL
                    }
                };
                // A closed connection just drops the reply.
                let _ = tx.send(message(
                    Header::new(cmd::WRITE_NOTIFY, ty, count, status, ioid),
                    &[],
                ));
            })
        } else {
            let name = c.name.clone();
            PutCompletion::new(false, move |r| {
                if let Err(why) = r {
                    tracing::warn!("CA put to {name} failed: {why}");
                }
            })
        };
        c.pv.put(
            value,
            completion.with_client(self.host.clone(), self.user.clone()),
        );
    }

    fn event_add(&mut self, h: &Header, payload: &[u8], out: &mut Vec<Vec<u8>>) {
        let Some(c) = self.chans.get(&h.p1) else {
            out.push(error_message(h, 0, eca::BADCHID, "no such channel"));
            return;
        };
        let mask = if payload.len() >= 14 {
            u16::from_be_bytes([payload[12], payload[13]])
        } else {
            0
        };
        let mask = if mask & 0x0F == 0 {
            DBE_VALUE | DBE_ALARM
        } else {
            mask & 0x0F
        };
        if !matches!(DbrType::from_code(h.data_type), Some(DbrType::Value(..))) {
            out.push(error_message(h, c.cid, eca::BADTYPE, "bad DBR type"));
            return;
        }
        let ty = DbrType::from_code(h.data_type).unwrap_or(DbrType::ClassName);
        let n = if h.count == 0 { 1 } else { h.count as usize };
        if ty.size_n(n) > self.srv.cfg.max_array_bytes {
            out.push(error_message(h, c.cid, eca::TOLARGE, "ECA_TOLARGE"));
            return;
        }
        if c.access == Access::None {
            out.push(error_message(h, c.cid, eca::NORDACCESS, "no read access"));
            return;
        }
        if !self.subs.contains_key(&h.p2) && self.subs.len() >= self.srv.cfg.max_channels_per_conn {
            self.srv.limit_refusals.fetch_add(1, Ordering::Relaxed);
            out.push(error_message(
                h,
                c.cid,
                eca::ALLOCMEM,
                "too many subscriptions",
            ));
            return;
        }
        let sub = Subscription::new(
            h.p2,
            h.p1,
            h.data_type,
            h.count,
            mask,
            c.field,
            Arc::clone(&c.record),
            Arc::clone(&self.conn),
        );
        let w: Weak<dyn Watcher> = Arc::downgrade(&sub) as Weak<dyn Watcher>;
        // The initial update goes through the queue too, so it cannot overtake a later post.
        c.pv.watch_initial(w, |snap| sub.push(snap));
        if let Some(old) = self.subs.insert(h.p2, sub) {
            old.cancel();
        }
    }

    fn event_cancel(&mut self, h: &Header, out: &mut Vec<Vec<u8>>) {
        match self.subs.remove(&h.p2) {
            Some(s) if s.sid == h.p1 => {
                s.cancel();
                out.push(message(
                    Header::new(cmd::EVENT_ADD, s.dbr, s.count, h.p1, h.p2),
                    &[],
                ));
            }
            other => {
                if let Some(s) = other {
                    self.subs.insert(h.p2, s);
                }
                out.push(error_message(h, 0, eca::BADCHID, "no such subscription"));
            }
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.close_all();
    }
}

/// A client's write decoded and converted to the channel's native type.
fn decode_put(c: &Chan, h: &Header, payload: &[u8]) -> Result<CaValue, (u32, String)> {
    if h.count == 0 {
        return Err((eca::BADCOUNT, "zero elements".into()));
    }
    let meta = c.pv.meta();
    // Never decode more than the channel can hold.
    let count = (h.count as usize).min(meta.max_count.max(1));
    let (_, vals) =
        dbr::decode(h.data_type, count, payload).map_err(|e| (eca::BADTYPE, e.to_string()))?;
    let fmt = Format {
        precision: meta.precision,
        enum_strings: &meta.enum_strings,
    };
    let want = if meta.max_count <= 1 { Some(1) } else { None };
    let mut conv = vals
        .convert(meta.native, want, &fmt)
        .map_err(|e| (eca::PUTFAIL, e.to_string()))?;
    if let crate::value::Values::Char(b) = &mut conv {
        b.truncate(meta.max_count.max(1));
    }
    if let crate::value::Values::Enum(e) = &conv {
        let n = meta.enum_strings.len();
        if n > 0 && e.first().is_some_and(|&i| usize::from(i) >= n) {
            return Err((eca::PUTFAIL, "enum index out of range".into()));
        }
    }
    if meta.native == NativeType::String {
        if let crate::value::Values::String(s) = &mut conv {
            s.truncate(1);
        }
    }
    Ok(conv.into_ca_value())
}

/// A message for the socket: bytes of its own, or a reply sharing a snapshot's wire-order
/// values with every other sender of that snapshot.
pub(crate) enum Outgoing {
    Bytes(Vec<u8>),
    Shared(SharedReply),
}

impl Outgoing {
    /// The whole message in one buffer (tests, the fuzz harness).
    pub(crate) fn into_vec(self) -> Vec<u8> {
        match self {
            Outgoing::Bytes(b) => b,
            Outgoing::Shared(s) => s.to_vec(),
        }
    }
}

/// The EVENT_ADD message for one queued snapshot of `sub`.
pub(crate) fn encode_update(sub: &Subscription, snap: &Snapshot, max_bytes: usize) -> Outgoing {
    let h = Header::new(cmd::EVENT_ADD, sub.dbr, 0, eca::NORMAL, sub.subid);
    if let Some(r) = fields::shared_reply(sub.field, &sub.record, snap, h, sub.count, max_bytes) {
        return Outgoing::Shared(r);
    }
    let v = fields::view(sub.field, &sub.record, snap);
    Outgoing::Bytes(
        match fields::encode_reply(&v, sub.dbr, sub.count, max_bytes) {
            Ok((body, n)) => message(Header { count: n, ..h }, &body),
            Err(status) => {
                let size = DbrType::from_code(sub.dbr)
                    .map(|t| t.size_n(sub.count as usize))
                    .filter(|&s| s <= max_bytes);
                let (n, body) = match size {
                    Some(s) => (sub.count, vec![0u8; s]),
                    None => (0, Vec::new()),
                };
                message(
                    Header::new(cmd::EVENT_ADD, sub.dbr, n, status, sub.subid),
                    &body,
                )
            }
        },
    )
}

/// A SEARCH reply: data type = server port, p1 = server address (~0 = "where this came from"),
/// p2 = cid, payload = our minor version.
pub(crate) fn search_reply(port: u16, ip: u32, cid: u32) -> Vec<u8> {
    message(
        Header::new(cmd::SEARCH, port, 0, ip, cid),
        &MINOR_VERSION.to_be_bytes(),
    )
}

pub(crate) fn not_found(h: &Header) -> Vec<u8> {
    message(
        Header::new(
            cmd::NOT_FOUND,
            DO_REPLY,
            u32::from(MINOR_VERSION),
            h.p1,
            h.p2,
        ),
        &[],
    )
}
