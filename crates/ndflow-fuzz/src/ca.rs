//! Channel Access: the server's framing and command handlers, its UDP search handler, the
//! client's reply decoding and the DBR decoder.

use std::sync::Arc;

use ndflow_ca::dbr::decode as dbr_decode;
use ndflow_ca::header::{cmd, message, payload_str, string_message, Header};
use ndflow_ca::server::fuzz::FuzzConn;
use ndflow_ca::testing::demo_pvs;
use ndflow_ca::{CaPv, PvProvider, ServerConfig};

/// Largest payload accepted here (EPICS_CA_MAX_ARRAY_BYTES of the fuzzed server): 64 kB keeps
/// the conversions of a mutated element count cheap.
const MAX_ARRAY_BYTES: usize = 1 << 16;

/// The PVs every server target serves (the demo set of the interop tests, without its image
/// and its slow PV: a thread per put would only slow the fuzzing down), and the names the
/// command target opens channels to, in this order (client ids 1, 2, ...).
pub const PV_NAMES: [&str; 10] = [
    "F:double",
    "F:float",
    "F:long",
    "F:short",
    "F:enum",
    "F:string",
    "F:char",
    "F:doubles",
    "F:double.EGU",
    "F:enum.SEVR",
];

/// The demo PVs under their own names, and any other name (the captured seeds use an IOC's
/// real names) answered by one of them, chosen by the name's hash, so that a captured session
/// reaches reads, writes and monitors; names containing `NoSuch` are not found.
struct AnyName(Vec<(String, CaPv)>);

impl PvProvider for AnyName {
    fn lookup(&self, name: &str) -> Option<CaPv> {
        if let Some((_, pv)) = self.0.iter().find(|(n, _)| n == name) {
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

/// A fresh connection to a server of the demo PVs. The PVs are made once per thread (the set
/// includes a 1024×1024 image, built before it is left out): like a real server's, their values
/// persist from one connection (input) to the next.
fn conn() -> FuzzConn {
    thread_local! {
        static PROVIDER: Arc<AnyName> = Arc::new(AnyName(
            demo_pvs("F:")
                .into_iter()
                .filter(|(n, _)| !n.ends_with("image") && !n.ends_with("slow"))
                .collect(),
        ));
    }
    let p = PROVIDER.with(Arc::clone);
    let mut cfg = ServerConfig::loopback_ephemeral();
    cfg.max_array_bytes = MAX_ARRAY_BYTES;
    FuzzConn::new(cfg, p)
}

/// A TCP connection's bytes as a client sends them: framing, then every message to the
/// server's session; the replies and monitor updates are encoded.
pub fn server(data: &[u8]) {
    let mut c = conn();
    c.feed(data);
}

/// One message per record (see [`crate::records`]): the tag is the command, the record is
/// data type (u16), count (u32), parameters 1 and 2 (u32), all big-endian, then the payload;
/// framed well (padded, extended header when needed) and fed to a session that has sent
/// VERSION, HOST_NAME and CLIENT_NAME and asked for a channel to each of [`PV_NAMES`].
pub fn server_cmd(data: &[u8]) {
    let mut c = conn();
    let mut prelude = message(Header::new(cmd::VERSION, 0, 13, 0, 0), &[]);
    prelude.extend(string_message(
        Header::new(cmd::HOST_NAME, 0, 0, 0, 0),
        "fuzz",
    ));
    prelude.extend(string_message(
        Header::new(cmd::CLIENT_NAME, 0, 0, 0, 0),
        "fuzz",
    ));
    for (cid, name) in (1u32..).zip(PV_NAMES) {
        prelude.extend(string_message(
            Header::new(cmd::CREATE_CHAN, 0, 0, cid, 13),
            name,
        ));
    }
    c.feed(&prelude);
    for (command, rec) in crate::records(data) {
        let field = |at: usize, n: usize| crate::be(rec.get(at..).unwrap_or(&[]), n);
        let h = Header::new(
            u16::from(command),
            field(0, 2) as u16,
            field(2, 4) as u32,
            field(6, 4) as u32,
            field(10, 4) as u32,
        );
        c.feed(&message(h, rec.get(14..).unwrap_or(&[])));
    }
}

/// A UDP datagram at the server's search port.
pub fn datagram(data: &[u8]) {
    thread_local! {
        static CONN: FuzzConn = conn();
    }
    CONN.with(|c| c.datagram(data));
}

/// A TCP connection's bytes as a server sends them (or a search reply datagram), read as the
/// client's circuit does: framing, values and monitor updates through the DBR decoder, error
/// replies with the offending header inside.
pub fn client(data: &[u8]) {
    let mut rest = data;
    while let Ok(Some((h, hlen))) = Header::parse(rest, MAX_ARRAY_BYTES) {
        let total = hlen + h.payload_size as usize;
        let Some(payload) = rest.get(hlen..total) else {
            break;
        };
        match h.command {
            cmd::READ_NOTIFY | cmd::EVENT_ADD | cmd::READ => {
                let _ = dbr_decode(h.data_type, h.count as usize, payload);
            }
            cmd::ERROR => {
                if let Ok(Some((_orig, olen))) = Header::parse(payload, usize::MAX) {
                    let _ = payload_str(payload.get(olen..).unwrap_or(&[]));
                }
            }
            _ => {}
        }
        rest = &rest[total..];
    }
}

/// The DBR decoder: type code (u16 BE), element count (u32 BE, as an extended header gives
/// it), then the payload.
pub fn dbr(data: &[u8]) {
    let code = crate::be(data, 2) as u16;
    let count = crate::be(data.get(2..).unwrap_or(&[]), 4) as usize;
    let _ = dbr_decode(code, count, data.get(6..).unwrap_or(&[]));
}
