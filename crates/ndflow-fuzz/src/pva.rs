//! pvAccess: the server's framing and command handlers, its UDP search handler, the client's
//! reply decoders and the wire-level type/value decoders.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use ndflow_core::Pool;
use ndflow_pva::client::proto::{self, OpDecoder, OpKind};
use ndflow_pva::nt::ntndarray::{ntndarray_desc, NtNdArray};
use ndflow_pva::nt::{enumeration, scalar};
use ndflow_pva::request::PvRequest;
use ndflow_pva::server::fuzz::Harness;
use ndflow_pva::server::{ChannelProvider, SharedPv};
use ndflow_pva::transport::{cmd, Message, MessageReader};
use ndflow_pva::{
    BitSet, ByteOrder, FieldDesc, Header, Reader, ScalarType, SharedBytes, TypeCache, Value, Writer,
};

/// Largest message the framing accepts here (the servers' default is larger; a bigger limit
/// would only let the fuzzer allocate more).
const MAX_MESSAGE: usize = 1 << 20;

/// Names of the PVs every server target serves; the command target creates channels to them
/// in this order (server ids 1, 2, 3).
pub const PV_NAMES: [&str; 3] = ["F:i", "F:img", "F:e"];

/// The three PVs under their own names, and any other name (the captured seeds use an IOC's
/// real names) answered by one of them, chosen by the name's hash, so that a captured session
/// reaches gets, puts and monitors; names containing `NoSuch` are not found.
struct AnyName(Vec<(&'static str, SharedPv)>);

impl ChannelProvider for AnyName {
    fn lookup(&self, name: &str) -> Option<SharedPv> {
        if let Some((_, pv)) = self.0.iter().find(|(n, _)| *n == name) {
            return Some(pv.clone());
        }
        if name.contains("NoSuch") || self.0.is_empty() {
            return None;
        }
        let h = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, c| {
            (h ^ u64::from(c)).wrapping_mul(0x100_0000_01b3)
        });
        Some(self.0[(h % self.0.len() as u64) as usize].1.clone())
    }
}

fn provider() -> Arc<AnyName> {
    let accept =
        |pv: &SharedPv, v: &Value, b: &BitSet| pv.post(v.clone(), b).map_err(|e| e.to_string());
    Arc::new(AnyName(vec![
        (
            PV_NAMES[0],
            SharedPv::new(
                scalar::desc(ScalarType::I32),
                scalar::value(ScalarType::I32, Value::I32(1)),
            )
            .with_put_handler(accept),
        ),
        (
            PV_NAMES[1],
            SharedPv::new(
                ntndarray_desc().clone(),
                Value::default_for(ntndarray_desc()),
            )
            .with_put_handler(accept),
        ),
        (
            PV_NAMES[2],
            SharedPv::new(enumeration::desc(), enumeration::value(0, &["a", "b"]))
                .with_put_handler(accept),
        ),
    ]))
}

thread_local! {
    static RT: Option<tokio::runtime::Runtime> =
        tokio::runtime::Builder::new_current_thread().build().ok();
}

/// The messages the framing reader (segment joining included) yields from `data`, up to the
/// first error.
pub fn frames(data: &[u8]) -> Vec<Message> {
    RT.with(|rt| {
        let Some(rt) = rt else { return Vec::new() };
        rt.block_on(async {
            let mut r = MessageReader::new(data, MAX_MESSAGE);
            let mut out = Vec::new();
            while let Ok(Some(m)) = r.next().await {
                out.push(m);
            }
            out
        })
    })
}

/// Feeds one message, with pending monitor updates encoded after it as the writer would.
fn feed(h: &mut Harness, header: Header, payload: &[u8]) {
    h.feed(header, payload);
    h.drain_monitors();
}

/// A TCP connection's bytes as a client sends them: framing, then every message to the
/// server's session (validation, channels, get/put/monitor/rpc, ...).
pub fn server(data: &[u8]) {
    let mut h = Harness::new(provider());
    h.greeting();
    for m in frames(data) {
        if h.closed() {
            break;
        }
        feed(&mut h, m.header, &m.payload);
    }
}

fn body(order: ByteOrder, f: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut w = Writer::new(order);
    f(&mut w);
    w.into_inner()
}

/// A validated session with a channel to each of [`PV_NAMES`] (server ids 1, 2, 3).
fn ready_session(order: ByteOrder) -> Harness {
    let mut h = Harness::new(provider());
    h.greeting();
    let valid = body(order, |w| {
        w.u32(0x10000);
        w.u16(0x7fff);
        w.u16(0);
        let _ = w.string("anonymous");
        w.null_size();
    });
    let hd = Header::application(cmd::CONNECTION_VALIDATION, false, order, valid.len() as u32);
    h.feed(hd, &valid);
    for (cid, name) in (1u32..).zip(PV_NAMES) {
        let b = body(order, |w| {
            let _ = proto::encode_create_channel(w, cid, name);
        });
        h.feed(
            Header::application(cmd::CREATE_CHANNEL, false, order, b.len() as u32),
            &b,
        );
    }
    h
}

/// One command per record (see [`crate::records`]): the tag is the command, the record starts
/// with a flags byte (bit 7: big-endian, bit 6: segmented in two halves) and the rest is the
/// body; fed to a validated session that has channels 1–3 open. Every mutation of a body
/// reaches its command's decoder with a well-formed frame.
pub fn server_cmd(data: &[u8]) {
    let order = match data.get(1) {
        Some(f) if f & 0x80 != 0 => ByteOrder::Big,
        _ => ByteOrder::Little,
    };
    let mut h = ready_session(order);
    for (command, rec) in crate::records(data) {
        if h.closed() {
            break;
        }
        let (flags, body) = rec.split_first().unwrap_or((&0, &[]));
        let order = if flags & 0x80 != 0 {
            ByteOrder::Big
        } else {
            ByteOrder::Little
        };
        let hd = Header::application(command, false, order, body.len() as u32);
        if flags & 0x40 != 0 && body.len() > 1 {
            // As two segments through the framing reader.
            let (a, b) = body.split_at(body.len() / 2);
            let mut stream = Vec::new();
            for (part, seg) in [(a, 0x10u8), (b, 0x20)] {
                let mut sh = Header::application(command, false, order, part.len() as u32);
                sh.flags |= seg;
                stream.extend_from_slice(&sh.encode());
                stream.extend_from_slice(part);
            }
            for m in frames(&stream) {
                feed(&mut h, m.header, &m.payload);
            }
        } else {
            feed(&mut h, hd, body);
        }
    }
}

/// A UDP datagram at the server's search port, received directly and as forwarded by
/// another server.
pub fn datagram(data: &[u8]) {
    thread_local! {
        static HARNESS: Harness = Harness::new(provider());
    }
    HARNESS.with(|h| h.feed_datagram(data));
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool::new(crate::MAX_POOL))
}

/// A TCP connection's bytes as a server sends them, decoded as the client does: validation
/// request, channel replies, search responses over TCP, and each operation's replies through
/// its decoder (the operation kind follows the command; its type is learnt at INIT). A monitor
/// value that is an NTNDArray is also turned into a frame, as the pvAccess driver does. Then
/// the same bytes as UDP datagrams (search responses, beacons).
pub fn client(data: &[u8]) {
    let mut cache = TypeCache::new();
    let mut ops: HashMap<u32, OpDecoder> = HashMap::new();
    for m in frames(data) {
        let order = m.order();
        let p = &m.payload;
        if m.header.is_control() {
            continue;
        }
        let kind = match m.command() {
            cmd::CONNECTION_VALIDATION => {
                let _ = proto::decode_validation_request(p, order);
                continue;
            }
            cmd::CONNECTION_VALIDATED => {
                let _ = proto::decode_status(p, order);
                continue;
            }
            cmd::CREATE_CHANNEL => {
                let _ = proto::decode_create_channel(p, order);
                continue;
            }
            cmd::DESTROY_CHANNEL => {
                let _ = proto::decode_destroy_channel(p, order);
                continue;
            }
            cmd::SEARCH_RESPONSE => {
                let _ = proto::decode_search_response(p, order);
                continue;
            }
            cmd::MESSAGE => {
                let _ = proto::decode_message(p, order);
                continue;
            }
            cmd::GET => OpKind::Get,
            cmd::PUT => OpKind::Put,
            cmd::MONITOR => OpKind::Monitor,
            cmd::GET_FIELD => OpKind::GetField,
            _ => continue,
        };
        let Ok(ioid) = proto::peek_ioid(p, order) else {
            continue;
        };
        let op = ops.entry(ioid).or_insert_with(|| OpDecoder::new(kind));
        if op.kind != kind {
            continue;
        }
        match op.handle(p, order, &mut cache) {
            Ok(proto::OpEvent::Update { value, .. }) | Ok(proto::OpEvent::Data { value, .. }) => {
                if let Some(desc) = op.desc() {
                    if let Ok(nt) = NtNdArray::from_value(desc, &value) {
                        let _ = ndflow::pva::convert::from_nt(&nt, pool());
                    }
                }
            }
            Ok(_) => {}
            Err(_) => {
                ops.remove(&ioid);
            }
        }
    }
    for (h, payload) in proto::split_datagram(data) {
        if h.command == cmd::SEARCH_RESPONSE {
            let _ = proto::decode_search_response(payload, h.byte_order());
        }
    }
}

/// The wire layer on its own: flags byte (bit 0: big-endian), then a type description and a
/// value of that type, a bitset and a partial value over a default, and the pvRequest reading
/// of both.
pub fn wire(data: &[u8]) {
    let Some((flags, rest)) = data.split_first() else {
        return;
    };
    let order = if flags & 1 != 0 {
        ByteOrder::Big
    } else {
        ByteOrder::Little
    };
    let shared = SharedBytes::copy_from_slice(rest);
    let mut r = Reader::over_shared(&shared, order);
    let mut cache = TypeCache::new();
    let Ok(Some(desc)) = FieldDesc::decode(&mut r, &mut cache) else {
        return;
    };
    let value = Value::decode(&desc, &mut r, &mut cache);
    if let Ok(v) = &value {
        let req = PvRequest::decode(Some(&desc), Some(v));
        let _ = req.mask(ntndarray_desc());
        let _ = NtNdArray::from_value(&desc, v);
    }
    if let Ok(bits) = r.bitset() {
        let mut v = Value::default_for(&desc);
        let _ = v.decode_partial(&desc, &bits, &mut r, &mut cache);
    }
}
