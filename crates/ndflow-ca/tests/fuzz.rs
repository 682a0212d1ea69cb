//! Randomized mutation tests of every handler: TCP message handling (framing, session,
//! monitor encoding), search datagrams, the DBR decoder and conversions. Valid messages are
//! generated, then mutated (bit flips, header fields set to extremes, truncation, splicing,
//! garbage) and fed in random chunks. Nothing may panic; buffers and channel counts stay
//! bounded. In release builds the TCP test dispatches over 10^6 messages to the handlers
//! (asserted), plus 10^5 datagrams and 4·10^5 DBR decodes; debug builds run 1/20.
//! `FUZZ_SCALE=N` multiplies the counts (the `#[ignore]`d test runs 10x).

use std::sync::Arc;

use ndflow_ca::dbr::{self, DbrType};
use ndflow_ca::header::{cmd, eca, message, string_message, FrameError, Header, DO_REPLY};
use ndflow_ca::server::fuzz::FuzzConn;
use ndflow_ca::testing::demo_pvs;
use ndflow_ca::value::Format;
use ndflow_ca::{NativeType, ServerConfig, StaticProvider, Values};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const NAMES: [&str; 16] = [
    "F:double",
    "F:float",
    "F:long",
    "F:short",
    "F:enum",
    "F:string",
    "F:char",
    "F:doubles",
    "F:ro",
    "F:fail",
    "F:double.EGU",
    "F:enum.SEVR",
    "F:doubles.NORD",
    "F:char.NELM",
    "F:nothing",
    "F:double.XYZ",
];

fn scale() -> usize {
    let s: usize = std::env::var("FUZZ_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    if cfg!(debug_assertions) {
        s.max(1)
    } else {
        s.max(1) * 20
    }
}

fn provider() -> Arc<StaticProvider> {
    let p = Arc::new(StaticProvider::new());
    // The image (large conversions) and the slow PV (a thread per put) would only slow the
    // fuzzing down; their code paths are covered by the loopback tests.
    for (n, pv) in demo_pvs("F:") {
        if !n.ends_with("image") && !n.ends_with("slow") {
            p.add(n, pv);
        }
    }
    p
}

fn cfg() -> ServerConfig {
    let mut c = ServerConfig::loopback_ephemeral();
    c.max_array_bytes = 65536;
    c.max_channels_per_conn = 500;
    c
}

/// A valid client message of a random kind.
fn valid(rng: &mut StdRng) -> Vec<u8> {
    let name = NAMES[rng.random_range(0..NAMES.len())];
    let sid = rng.random_range(0..40u32);
    let ty = rng.random_range(0..40u16);
    let count = [0u32, 1, 2, 10, 256, 70000][rng.random_range(0..6)];
    match rng.random_range(0..14) {
        0 => message(Header::new(cmd::VERSION, 0, 13, 0, 0), &[]),
        1 => string_message(Header::new(cmd::HOST_NAME, 0, 0, 0, 0), "host"),
        2 => string_message(Header::new(cmd::CLIENT_NAME, 0, 0, 0, 0), "user"),
        3 => string_message(Header::new(cmd::SEARCH, DO_REPLY, 13, sid, sid), name),
        4 | 5 => string_message(Header::new(cmd::CREATE_CHAN, 0, 0, sid, 13), name),
        6 => message(Header::new(cmd::READ_NOTIFY, ty, count, sid, 7), &[]),
        7 | 8 => {
            let t = NativeType::ALL[rng.random_range(0..7)];
            let n = rng.random_range(1..20usize);
            let vals = Values::Double((0..n).map(|i| i as f64 * 1.5).collect())
                .convert(t, None, &Format::default())
                .unwrap_or(Values::Long(vec![1]));
            let mut body = Vec::new();
            let ty = DbrType::new(ndflow_ca::Family::Plain, vals.native_type());
            dbr::encode(ty, &Default::default(), &vals, &mut body);
            let c = if rng.random_bool(0.5) {
                cmd::WRITE
            } else {
                cmd::WRITE_NOTIFY
            };
            message(Header::new(c, ty.code(), n as u32, sid, 9), &body)
        }
        9 | 10 => {
            let mut p = [0u8; 16];
            p[13] = rng.random_range(0..16);
            message(
                Header::new(cmd::EVENT_ADD, ty, count, sid, rng.random_range(0..50)),
                &p,
            )
        }
        11 => message(
            Header::new(cmd::EVENT_CANCEL, ty, 0, sid, rng.random_range(0..50)),
            &[],
        ),
        12 => message(Header::new(cmd::CLEAR_CHANNEL, 0, 0, sid, sid), &[]),
        _ => message(
            Header::new(rng.random_range(0..40), ty, count, sid, sid),
            &[0; 8],
        ),
    }
}

fn mutate(rng: &mut StdRng, mut m: Vec<u8>) -> Vec<u8> {
    for _ in 0..rng.random_range(1..4) {
        if m.is_empty() {
            m.push(rng.random());
        }
        let len = m.len();
        match rng.random_range(0..8) {
            0 => {
                let i = rng.random_range(0..len);
                m[i] ^= 1 << rng.random_range(0..8);
            }
            1 => {
                let i = rng.random_range(0..len);
                m[i] = rng.random();
            }
            2 => m.truncate(rng.random_range(0..len)),
            3 => {
                // A header field set to an extreme.
                let i = rng.random_range(0..8usize) * 2;
                if i + 2 <= len {
                    let v: u16 = [0, 1, 0xFFFF, 0x7FFF, 0x8000][rng.random_range(0..5)];
                    m[i..i + 2].copy_from_slice(&v.to_be_bytes());
                }
            }
            4 => {
                let n = rng.random_range(0..32);
                m.extend((0..n).map(|_| rng.random::<u8>()));
            }
            5 => {
                // Extended-header sizes.
                if len >= 8 {
                    m[2..4].copy_from_slice(&[0xFF, 0xFF]);
                    m[6..8].copy_from_slice(&[0, 0]);
                    let size: u32 = [0, 8, 65536, 1 << 20, u32::MAX][rng.random_range(0..5)];
                    let mut ext = size.to_be_bytes().to_vec();
                    ext.extend_from_slice(&rng.random::<u32>().to_be_bytes());
                    m.splice(16.min(len)..16.min(len), ext);
                }
            }
            6 => {
                let i = rng.random_range(0..len);
                m.insert(i, rng.random());
            }
            _ => {
                let i = rng.random_range(0..len);
                m.drain(i..(i + rng.random_range(0..8)).min(len));
            }
        }
    }
    m
}

/// A new client of the same server still gets a channel and a value after whatever the
/// fuzzed traffic did: the server's shared state survived it, not just the test process.
fn assert_still_serves(conn: &mut FuzzConn) {
    conn.discard_partial();
    // An extended header announcing more than the limit closes the connection; what follows
    // is a new client's session.
    let closed = conn.closed;
    let mut oversize = Vec::new();
    Header::new(cmd::VERSION, 0, 0, 0, 0).write(&mut oversize);
    oversize[2..4].copy_from_slice(&[0xFF, 0xFF]);
    oversize[6..8].copy_from_slice(&[0, 0]);
    oversize.splice(16..16, u32::MAX.to_be_bytes().into_iter().chain([0; 4]));
    assert!(conn.feed(&oversize).is_empty());
    assert_eq!(
        conn.closed,
        closed + 1,
        "an oversize payload closes the connection"
    );

    let parse = |m: &[u8]| {
        let (h, len) = Header::parse(m, usize::MAX)
            .expect("framed")
            .expect("a whole header");
        assert_eq!(m.len(), len + h.payload_size as usize, "reply {h:?} framed");
        h
    };
    let cid = 4242;
    let mut hello = message(Header::new(cmd::VERSION, 0, 13, 0, 0), &[]);
    hello.extend(string_message(
        Header::new(cmd::HOST_NAME, 0, 0, 0, 0),
        "host",
    ));
    hello.extend(string_message(
        Header::new(cmd::CLIENT_NAME, 0, 0, 0, 0),
        "user",
    ));
    hello.extend(string_message(
        Header::new(cmd::CREATE_CHAN, 0, 0, cid, 13),
        "F:double",
    ));
    let replies: Vec<Header> = conn.feed(&hello).iter().map(|m| parse(m)).collect();
    let created = replies
        .iter()
        .find(|h| h.command == cmd::CREATE_CHAN)
        .unwrap_or_else(|| panic!("no CREATE_CHAN reply: {replies:?}"));
    assert_eq!(created.p1, cid);

    let ioid = 99;
    let dbr_double = DbrType::new(ndflow_ca::Family::Plain, NativeType::Double);
    let read = message(
        Header::new(cmd::READ_NOTIFY, dbr_double.code(), 1, created.p2, ioid),
        &[],
    );
    let replies = conn.feed(&read);
    let heads: Vec<Header> = replies.iter().map(|m| parse(m)).collect();
    let i = heads
        .iter()
        .position(|h| h.command == cmd::READ_NOTIFY && h.p2 == ioid)
        .unwrap_or_else(|| panic!("no READ_NOTIFY reply: {heads:?}"));
    assert_eq!(heads[i].p1, eca::NORMAL, "{}", eca::name(heads[i].p1));
    assert_eq!((heads[i].data_type, heads[i].count), (dbr_double.code(), 1));
    assert_eq!(heads[i].payload_size, 8, "one double");
}

/// Messages handled (framed and dispatched) out of `n` generated.
fn fuzz_tcp(seed: u64, n: usize) -> usize {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut conn = FuzzConn::new(cfg(), provider());
    let mut sent = 0usize;
    let mut stream = Vec::new();
    while sent < n {
        // Mostly valid traffic (to reach deep states), with mutated messages mixed in.
        let m = valid(&mut rng);
        let m = if rng.random_bool(0.6) {
            mutate(&mut rng, m)
        } else {
            m
        };
        stream.extend_from_slice(&m);
        sent += 1;
        if stream.len() > 256 || rng.random_bool(0.5) {
            // Random chunking.
            let mut off = 0;
            while off < stream.len() {
                let k = rng.random_range(1..=stream.len() - off);
                let replies = conn.feed(&stream[off..off + k]);
                for r in &replies {
                    assert!(r.len() >= 16 && r.len() % 8 == 0, "reply not framed: {r:?}");
                }
                off += k;
            }
            stream.clear();
            conn.discard_partial();
        }
        assert!(
            conn.buffered() <= 65536 + 4096 + 24,
            "buffer grew to {}",
            conn.buffered()
        );
        assert!(conn.channels() <= 500);
    }
    eprintln!(
        "tcp fuzz seed {seed}: {n} generated, {} handled, {} closes",
        conn.handled, conn.closed
    );
    // Most of the traffic is valid or survives its mutation: if far fewer messages reached
    // the handlers, the generator or the framing broke and the fuzzing tested little.
    assert!(
        conn.handled * 3 >= n,
        "stream {seed}: only {} of {n} messages handled",
        conn.handled
    );
    assert_still_serves(&mut conn);
    conn.handled
}

#[test]
fn fuzz_tcp_messages() {
    let n = 5_000 * scale();
    let handled: usize = (0..20).map(|seed| fuzz_tcp(seed, n)).sum();
    eprintln!("tcp fuzz: {handled} messages handled");
    if !cfg!(debug_assertions) {
        assert!(handled >= 1_000_000, "{handled}");
    }
}

#[test]
#[ignore = "10x the traffic of fuzz_tcp_messages on other random streams"]
fn fuzz_tcp_messages_long() {
    let n = 5_000 * scale() * 10;
    let handled: usize = (100..120).map(|stream| fuzz_tcp(stream, n)).sum();
    assert!(handled * 2 >= 20 * n, "{handled} of {} handled", 20 * n);
}

#[test]
fn fuzz_search_datagrams() {
    let mut rng = StdRng::seed_from_u64(7);
    let conn = FuzzConn::new(cfg(), provider());
    let mut answered = 0;
    for _ in 0..5_000 * scale() {
        let mut d = message(Header::new(cmd::VERSION, 0, 13, 0, 0), &[]);
        for _ in 0..rng.random_range(1..6) {
            let name = NAMES[rng.random_range(0..NAMES.len())];
            let reply = if rng.random_bool(0.5) { DO_REPLY } else { 5 };
            d.extend(string_message(
                Header::new(cmd::SEARCH, reply, 13, 1, 1),
                name,
            ));
        }
        let d = if rng.random_bool(0.7) {
            mutate(&mut rng, d)
        } else {
            d
        };
        let r = conn.datagram(&d);
        if !r.is_empty() {
            answered += 1;
            assert_eq!(r.len() % 8, 0);
        }
    }
    assert!(answered > 0);
}

/// `Header::parse` on arbitrary bytes: needs more bytes, a header of 16 or 24 bytes within the
/// limit, or an error for a payload over it; never a panic or a header it did not read.
fn check_header_parse(p: &[u8], max: usize) {
    let extended = p.len() >= 8 && p[2..4] == [0xFF, 0xFF] && p[6..8] == [0, 0];
    match Header::parse(p, max) {
        Ok(None) => assert!(p.len() < 16 || (extended && p.len() < 24), "{p:?}"),
        Ok(Some((h, len))) => {
            assert_eq!(len, if extended { 24 } else { 16 });
            assert!(len <= p.len());
            assert!(h.payload_size as usize <= max);
            assert_eq!(h.command, u16::from_be_bytes([p[0], p[1]]));
        }
        Err(FrameError::TooLarge { size, limit }) => {
            assert!(p.len() >= 16);
            assert_eq!(limit, max);
            assert!(size as usize > max);
        }
    }
}

#[test]
fn fuzz_dbr_decode_and_convert() {
    let mut rng = StdRng::seed_from_u64(11);
    let (mut decoded, mut converted) = (0usize, 0usize);
    for _ in 0..20_000 * scale() {
        let code = rng.random_range(0..45u16);
        let count = [0usize, 1, 3, 100, usize::MAX, 1 << 40][rng.random_range(0..6)];
        let len = rng.random_range(0..600);
        let mut p: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        if let Ok((info, vals)) = dbr::decode(code, count, &p) {
            decoded += 1;
            let fmt = Format {
                precision: info.precision,
                enum_strings: &info.enum_strings,
            };
            let t = NativeType::ALL[rng.random_range(0..7)];
            let n = [None, Some(0), Some(1), Some(17)][rng.random_range(0..4)];
            match vals.convert(t, n, &fmt) {
                Ok(out) => {
                    converted += 1;
                    assert_eq!(out.native_type(), t);
                    if let Some(n) = n {
                        assert_eq!(out.len(), n, "{vals:?} as {t:?}");
                    }
                }
                // Only text can fail to convert (a string that is no number or choice).
                Err(e) => assert!(
                    matches!(vals, Values::String(_)) && t != NativeType::String,
                    "{vals:?} as {t:?}: {e:?}"
                ),
            }
            // Re-encoding what was decoded gives the same length.
            if let Some(ty) = DbrType::from_code(code) {
                let mut out = Vec::new();
                dbr::encode(ty, &info, &vals, &mut out);
                assert_eq!(out.len(), ty.size_n(vals.len()));
            }
        }
        // The same bytes as a message header, sometimes in the extended form and with limits
        // small enough that sizes go over them.
        if p.len() >= 8 && rng.random_bool(0.25) {
            p[2..4].copy_from_slice(&[0xFF, 0xFF]);
            p[6..8].copy_from_slice(&[0, 0]);
        }
        check_header_parse(&p, [0usize, 64, 1 << 20][rng.random_range(0..3)]);
    }
    // The random payloads reach the converters, not only the decoder's error paths.
    assert!(
        decoded > 0 && converted > 0,
        "{decoded} decoded, {converted} converted"
    );
}
