//! Client-side message bodies: encoders for what a client sends and decoders for what
//! a server answers. Pure functions over byte buffers, so they can be tested (and fuzzed) without
//! sockets. Every decoder returns an error on malformed input; none panics.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use crate::wire::{
    BitSet, ByteOrder, DecodeError, EncodeError, FieldDesc, Reader, SharedBytes, Status, TypeCache,
    Value, Writer,
};

use super::config::AuthMethod;

/// Application command codes: the transport's, shared with the server.
pub use crate::transport::cmd;

/// Subcommand bits, under the names the client code uses (values from [`crate::transport::subcmd`]).
pub mod sub {
    use crate::transport::subcmd;
    pub const EXEC: u8 = 0x00;
    /// MONITOR start = PROCESS | GET (sent as 0x44).
    pub const START: u8 = subcmd::PROCESS;
    pub const INIT: u8 = subcmd::INIT;
    pub const DESTROY: u8 = subcmd::DESTROY;
    pub const GET: u8 = subcmd::GET;
    pub const PIPELINE: u8 = subcmd::PIPELINE;
}

/// Search flag: the request was sent unicast.
pub const SEARCH_UNICAST: u8 = 0x80;
/// pvxs' constant search sequence id ("find"); we use our own counter but any value works.
pub const SEARCH_SEQ: u32 = 0x6669_6E64;

/// The server's CONNECTION_VALIDATION request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidationRequest {
    pub buffer_size: i32,
    pub registry_size: i16,
    pub methods: Vec<String>,
}

pub fn decode_validation_request(
    payload: &[u8],
    order: ByteOrder,
) -> Result<ValidationRequest, DecodeError> {
    let mut r = Reader::new(payload, order);
    let buffer_size = r.i32()?;
    let registry_size = r.i16()?;
    // Old servers may send no method list at all.
    let methods = if r.is_empty() {
        Vec::new()
    } else {
        let n = r.bounded_count(1)?;
        (0..n).map(|_| r.string()).collect::<Result<_, _>>()?
    };
    Ok(ValidationRequest {
        buffer_size,
        registry_size,
        methods,
    })
}

/// The method we answer with: ours if offered (or if the server listed none), else anonymous.
pub fn choose_auth(offered: &[String], wanted: &AuthMethod) -> AuthMethod {
    if offered.is_empty() || offered.iter().any(|m| m == wanted.name()) {
        wanted.clone()
    } else {
        AuthMethod::Anonymous
    }
}

pub fn encode_validation_reply(w: &mut Writer, auth: &AuthMethod) -> Result<(), EncodeError> {
    w.i32(0x10000);
    w.i16(0x7fff);
    w.i16(0);
    w.string(auth.name())?;
    match auth {
        AuthMethod::Anonymous => w.null_size(),
        AuthMethod::Ca { user, host } => {
            use crate::wire::ScalarType;
            let desc = FieldDesc::structure(
                "",
                vec![
                    ("user", FieldDesc::Scalar(ScalarType::String)),
                    ("host", FieldDesc::Scalar(ScalarType::String)),
                ],
            );
            desc.encode(w)?;
            Value::Structure(vec![
                Value::String(user.clone()),
                Value::String(host.clone()),
            ])
            .encode(&desc, w)?;
        }
    }
    Ok(())
}

/// CONNECTION_VALIDATED: a Status.
pub fn decode_status(payload: &[u8], order: ByteOrder) -> Result<Status, DecodeError> {
    Reader::new(payload, order).status()
}

/// A SEARCH request carrying `(instance id, name)` pairs; replies go to the sender's address
/// (all-zero response address) on `reply_port`.
pub fn encode_search(
    w: &mut Writer,
    seq: u32,
    flags: u8,
    reply_port: u16,
    names: &[(u32, &str)],
) -> Result<(), EncodeError> {
    w.u32(seq);
    w.u8(flags);
    w.bytes(&[0, 0, 0]);
    w.bytes(&[0; 16]);
    w.u16(reply_port);
    w.size(1)?;
    w.string("tcp")?;
    let n = u16::try_from(names.len()).map_err(|_| EncodeError::SizeTooLarge(names.len()))?;
    w.u16(n);
    for &(id, name) in names {
        w.u32(id);
        w.string(name)?;
    }
    Ok(())
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchResponse {
    pub guid: [u8; 12],
    pub seq: u32,
    /// `None` when the server sent the zero address (or `::ffff:0.0.0.0`): use the source.
    pub addr: Option<IpAddr>,
    pub port: u16,
    pub protocol: String,
    pub found: bool,
    pub ids: Vec<u32>,
}

pub fn decode_search_response(
    payload: &[u8],
    order: ByteOrder,
) -> Result<SearchResponse, DecodeError> {
    let mut r = Reader::new(payload, order);
    let mut guid = [0u8; 12];
    guid.copy_from_slice(r.take(12)?);
    let seq = r.u32()?;
    let mut a = [0u8; 16];
    a.copy_from_slice(r.take(16)?);
    let port = r.u16()?;
    let protocol = r.string()?;
    let found = r.bool()?;
    let n = usize::from(r.u16()?);
    if n.saturating_mul(4) > r.remaining() {
        return Err(DecodeError::Truncated {
            at: r.position(),
            needed: n * 4 - r.remaining(),
        });
    }
    let ids = (0..n).map(|_| r.u32()).collect::<Result<_, _>>()?;
    Ok(SearchResponse {
        guid,
        seq,
        addr: ip_from_wire(a),
        port,
        protocol,
        found,
        ids,
    })
}

/// A 16-byte wire address; zero and IPv4-mapped zero mean "not given".
pub fn ip_from_wire(a: [u8; 16]) -> Option<IpAddr> {
    let v6 = Ipv6Addr::from(a);
    if let Some(v4) = v6.to_ipv4_mapped() {
        return (v4 != Ipv4Addr::UNSPECIFIED).then_some(IpAddr::V4(v4));
    }
    (!v6.is_unspecified()).then_some(IpAddr::V6(v6))
}

/// Split a UDP datagram into its messages `(header, payload)`; stops at the first malformed one.
/// Control and segmented messages are invalid on UDP and skipped.
pub fn split_datagram(buf: &[u8]) -> Vec<(crate::wire::Header, &[u8])> {
    use crate::wire::header::HEADER_LEN;
    let mut out = Vec::new();
    let mut rest = buf;
    while rest.len() >= HEADER_LEN {
        let Ok(h) = crate::wire::Header::decode(rest) else {
            break;
        };
        let end = HEADER_LEN.saturating_add(h.payload_len());
        let (Some(payload), Some(tail)) = (rest.get(HEADER_LEN..end), rest.get(end..)) else {
            break;
        };
        rest = tail;
        if !h.is_control() && h.segment() == crate::wire::Segment::None {
            out.push((h, payload));
        }
    }
    out
}

pub fn encode_create_channel(w: &mut Writer, cid: u32, name: &str) -> Result<(), EncodeError> {
    w.u16(1);
    w.u32(cid);
    w.string(name)
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreateChannelResponse {
    pub cid: u32,
    pub sid: u32,
    pub status: Status,
}

pub fn decode_create_channel(
    payload: &[u8],
    order: ByteOrder,
) -> Result<CreateChannelResponse, DecodeError> {
    let mut r = Reader::new(payload, order);
    Ok(CreateChannelResponse {
        cid: r.u32()?,
        sid: r.u32()?,
        status: r.status()?,
    })
}

/// DESTROY_CHANNEL, both directions: `(sid, cid)`.
pub fn encode_destroy_channel(w: &mut Writer, sid: u32, cid: u32) {
    w.u32(sid);
    w.u32(cid);
}

pub fn decode_destroy_channel(payload: &[u8], order: ByteOrder) -> Result<(u32, u32), DecodeError> {
    let mut r = Reader::new(payload, order);
    Ok((r.u32()?, r.u32()?))
}

/// INIT of GET/PUT/MONITOR: the pvRequest as type + full value, and for a pipelined MONITOR the
/// initial window (always non-zero: pvxs < 1.4 stalls on 0).
pub fn encode_op_init(
    w: &mut Writer,
    sid: u32,
    ioid: u32,
    subcmd: u8,
    request: (&FieldDesc, &Value),
    nfree: Option<u32>,
) -> Result<(), EncodeError> {
    w.u32(sid);
    w.u32(ioid);
    w.u8(subcmd);
    request.0.encode(w)?;
    request.1.encode(request.0, w)?;
    if let Some(n) = nfree {
        w.u32(n);
    }
    Ok(())
}

/// A body-less request message: GET exec, MONITOR start, PUT get, ...
pub fn encode_op_simple(w: &mut Writer, sid: u32, ioid: u32, subcmd: u8) {
    w.u32(sid);
    w.u32(ioid);
    w.u8(subcmd);
}

/// MONITOR pipeline ack: the client consumed `n` updates.
pub fn encode_monitor_ack(w: &mut Writer, sid: u32, ioid: u32, n: u32) {
    encode_op_simple(w, sid, ioid, sub::PIPELINE);
    w.u32(n);
}

/// PUT exec: changed fields as BitSet + partial value.
pub fn encode_put(
    w: &mut Writer,
    sid: u32,
    ioid: u32,
    desc: &FieldDesc,
    value: &Value,
    changed: &BitSet,
) -> Result<(), EncodeError> {
    encode_op_simple(w, sid, ioid, sub::EXEC);
    w.bitset(changed)?;
    value.encode_partial(desc, changed, w)
}

/// DESTROY_REQUEST / CANCEL_REQUEST body.
pub fn encode_sid_ioid(w: &mut Writer, sid: u32, ioid: u32) {
    w.u32(sid);
    w.u32(ioid);
}

pub fn encode_get_field(
    w: &mut Writer,
    sid: u32,
    ioid: u32,
    sub_field: &str,
) -> Result<(), EncodeError> {
    w.u32(sid);
    w.u32(ioid);
    w.string(sub_field)
}

/// The request id a server response is about (first int32 of GET/PUT/MONITOR/GET_FIELD/MESSAGE).
pub fn peek_ioid(payload: &[u8], order: ByteOrder) -> Result<u32, DecodeError> {
    Reader::new(payload, order).u32()
}

/// MESSAGE (0x12): `(ioid, type, text)`.
pub fn decode_message(payload: &[u8], order: ByteOrder) -> Result<(u32, u8, String), DecodeError> {
    let mut r = Reader::new(payload, order);
    Ok((r.u32()?, r.u8()?, r.string()?))
}

/// Which operation a request id belongs to; decides how its responses are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    Get,
    Put,
    Monitor,
    GetField,
}

impl OpKind {
    pub fn command(self) -> u8 {
        match self {
            OpKind::Get => cmd::GET,
            OpKind::Put => cmd::PUT,
            OpKind::Monitor => cmd::MONITOR,
            OpKind::GetField => cmd::GET_FIELD,
        }
    }
}

/// What one server response meant for its operation.
#[derive(Clone, Debug)]
pub enum OpEvent {
    /// INIT reply (GET/PUT/MONITOR) or GET_FIELD reply: the data type, absent on failure.
    Init {
        status: Status,
        desc: Option<Arc<FieldDesc>>,
    },
    /// GET exec or PUT-get: the value (defaults where not sent) and the fields sent.
    Data {
        status: Status,
        value: Value,
        changed: BitSet,
    },
    /// PUT exec done.
    Done { status: Status },
    /// MONITOR update: the value with this update applied over the previous ones.
    Update {
        value: Value,
        changed: BitSet,
        overrun: BitSet,
        bytes: usize,
    },
    /// MONITOR finished by the server (or any op destroyed by it).
    Finished { status: Status },
}

/// Per-request decoding state: the type learnt at INIT and, for monitors, the value so far.
#[derive(Clone, Debug)]
pub struct OpDecoder {
    pub kind: OpKind,
    desc: Option<Arc<FieldDesc>>,
    last: Option<Value>,
}

impl OpDecoder {
    pub fn new(kind: OpKind) -> Self {
        Self {
            kind,
            desc: None,
            last: None,
        }
    }

    pub fn desc(&self) -> Option<&Arc<FieldDesc>> {
        self.desc.as_ref()
    }

    /// Decode one response for this request. `payload` is the whole message body (ioid
    /// included); arrays in the returned value are views of it.
    pub fn handle(
        &mut self,
        payload: &SharedBytes,
        order: ByteOrder,
        cache: &mut TypeCache,
    ) -> Result<OpEvent, DecodeError> {
        let mut r = Reader::over_shared(payload, order);
        let _ioid = r.u32()?;
        if self.kind == OpKind::GetField {
            let status = r.status()?;
            let desc = if status.is_success() {
                FieldDesc::decode(&mut r, cache)?.map(Arc::new)
            } else {
                None
            };
            return Ok(OpEvent::Init { status, desc });
        }
        let subcmd = r.u8()?;
        if subcmd & sub::INIT != 0 {
            let status = r.status()?;
            let desc = if status.is_success() {
                let d = FieldDesc::decode(&mut r, cache)?.ok_or(DecodeError::UnexpectedNull)?;
                Some(Arc::new(d))
            } else {
                None
            };
            self.desc.clone_from(&desc);
            self.last = None;
            return Ok(OpEvent::Init { status, desc });
        }
        let desc = self
            .desc
            .clone()
            .ok_or(DecodeError::Invalid("data before INIT"))?;
        match self.kind {
            OpKind::Monitor if subcmd & sub::DESTROY != 0 => {
                // Final message: Status, possibly followed by a last update we do not need.
                let status = if r.is_empty() {
                    Status::ok()
                } else {
                    r.status()?
                };
                Ok(OpEvent::Finished { status })
            }
            OpKind::Monitor => {
                let changed = r.bitset()?;
                let mut value = self
                    .last
                    .take()
                    .unwrap_or_else(|| Value::default_for(&desc));
                let res = value.decode_partial(&desc, &changed, &mut r, cache);
                let overrun = match res {
                    Ok(()) if r.is_empty() => BitSet::new(),
                    Ok(()) => r.bitset()?,
                    Err(e) => return Err(e),
                };
                self.last = Some(value.clone());
                Ok(OpEvent::Update {
                    value,
                    changed,
                    overrun,
                    bytes: payload.len(),
                })
            }
            OpKind::Put if subcmd & sub::GET == 0 => Ok(OpEvent::Done {
                status: r.status()?,
            }),
            OpKind::Get | OpKind::Put => {
                let status = r.status()?;
                let mut value = Value::default_for(&desc);
                let mut changed = BitSet::new();
                if status.is_success() {
                    changed = r.bitset()?;
                    value.decode_partial(&desc, &changed, &mut r, cache)?;
                }
                Ok(OpEvent::Data {
                    status,
                    value,
                    changed,
                })
            }
            OpKind::GetField => Err(DecodeError::Invalid("unreachable op kind")),
        }
    }
}
