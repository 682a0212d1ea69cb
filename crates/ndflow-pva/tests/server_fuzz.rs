//! Randomized robustness: valid client messages, truncated, bit-flipped, spliced and with random
//! commands/subcommands, fed to the server's handlers (through the test harness), to the framing
//! reader, to the UDP search handler, and as raw bytes to a live server. Nothing may panic, and
//! the live server must keep serving. Execution counts are printed.

use std::io::Write;
use std::sync::Arc;

use crate::common::Rng;
use crate::server_support::{start, Raw};
use ndflow_pva::nt::ntndarray::ntndarray_desc;
use ndflow_pva::nt::{enumeration, scalar};
use ndflow_pva::server::fuzz::Harness;
use ndflow_pva::server::{SharedPv, StaticProvider};
use ndflow_pva::transport::{cmd, MessageReader};
use ndflow_pva::{BitSet, ByteOrder, Header, ScalarType, Value, Writer};

fn provider() -> Arc<StaticProvider> {
    let p = Arc::new(StaticProvider::new());
    let accept =
        |pv: &SharedPv, v: &Value, b: &BitSet| pv.post(v.clone(), b).map_err(|e| e.to_string());
    p.add(
        "F:i",
        SharedPv::new(
            scalar::desc(ScalarType::I32),
            scalar::value(ScalarType::I32, Value::I32(1)),
        )
        .with_put_handler(accept),
    );
    p.add(
        "F:e",
        SharedPv::new(enumeration::desc(), enumeration::value(0, &["a", "b"]))
            .with_put_handler(accept),
    );
    p.add(
        "F:img",
        SharedPv::new(
            ntndarray_desc().clone(),
            Value::default_for(ntndarray_desc()),
        )
        .with_put_handler(accept),
    );
    p
}

fn body(order: ByteOrder, f: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut w = Writer::new(order);
    f(&mut w);
    w.into_inner()
}

/// Well-formed message templates for sid 1 (the first channel a session creates).
fn templates(order: ByteOrder) -> Vec<(u8, Vec<u8>)> {
    let (rd, rv) = ndflow_pva::request::build(
        "value,alarm.severity",
        &[("queueSize", "3"), ("pipeline", "true")],
    );
    let req = body(order, |w| {
        rd.encode(w).unwrap();
        rv.encode(&rd, w).unwrap();
    });
    let desc = scalar::desc(ScalarType::I32);
    let put = body(order, |w| {
        let bits = BitSet::from_bits(&[1]);
        w.bitset(&bits).unwrap();
        scalar::value(ScalarType::I32, Value::I32(9))
            .encode_partial(&desc, &bits, w)
            .unwrap();
    });
    let ids = |w: &mut Writer, sub: u8| {
        w.u32(1);
        w.u32(5);
        w.u8(sub);
    };
    let mut t = vec![
        (
            cmd::CREATE_CHANNEL,
            body(order, |w| {
                w.u16(1);
                w.u32(3);
                w.string("F:i").unwrap();
            }),
        ),
        (
            cmd::CREATE_CHANNEL,
            body(order, |w| {
                w.u16(2);
                w.u32(4);
                w.string("F:img").unwrap();
                w.u32(6);
                w.string("F:e").unwrap();
            }),
        ),
        (
            cmd::GET_FIELD,
            body(order, |w| {
                w.u32(1);
                w.u32(5);
                w.string("alarm").unwrap();
            }),
        ),
        (cmd::ECHO, b"abc".to_vec()),
        (
            cmd::DESTROY_REQUEST,
            body(order, |w| {
                w.u32(1);
                w.u32(5);
            }),
        ),
        (
            cmd::DESTROY_CHANNEL,
            body(order, |w| {
                w.u32(1);
                w.u32(3);
            }),
        ),
        (cmd::SEARCH, {
            let mut b = body(order, |w| {
                w.u32(1);
                w.u8(0x81);
                w.bytes(&[0; 19]);
                w.u16(5076);
                w.size(1).unwrap();
                w.string("tcp").unwrap();
                w.u16(1);
                w.u32(1);
            });
            b.extend(body(order, |w| w.string("F:i").unwrap()));
            b
        }),
    ];
    for c in [cmd::GET, cmd::PUT, cmd::MONITOR, cmd::RPC, cmd::PROCESS] {
        for sub in [0x08u8, 0x88] {
            let mut b = body(order, |w| ids(w, sub));
            b.extend_from_slice(&req);
            b.extend(body(order, |w| w.u32(4)));
            t.push((c, b));
        }
    }
    for (c, sub) in [
        (cmd::GET, 0x40),
        (cmd::PUT, 0x40),
        (cmd::MONITOR, 0x44),
        (cmd::MONITOR, 0x04),
        (cmd::MONITOR, 0x10),
    ] {
        t.push((c, body(order, |w| ids(w, sub))));
    }
    t.push((
        cmd::MONITOR,
        body(order, |w| {
            ids(w, 0x80);
            w.u32(2);
        }),
    ));
    let mut b = body(order, |w| ids(w, 0x00));
    b.extend(put);
    t.push((cmd::PUT, b));
    t
}

fn mutate(rng: &mut Rng, mut b: Vec<u8>) -> Vec<u8> {
    match rng.below(6) {
        0 => b.truncate(rng.below(b.len() + 1)),
        1 => {
            for _ in 0..1 + rng.below(4) {
                if !b.is_empty() {
                    let i = rng.below(b.len());
                    b[i] ^= 1 << rng.below(8);
                }
            }
        }
        2 => {
            for _ in 0..1 + rng.below(3) {
                if !b.is_empty() {
                    let i = rng.below(b.len());
                    b[i] = [0x00, 0xFF, 0xFE, 0xFD, 0x80, 0x7F][rng.below(6)];
                }
            }
        }
        3 => {
            let i = rng.below(b.len() + 1);
            let junk: Vec<u8> = (0..rng.below(12)).map(|_| rng.next() as u8).collect();
            b.splice(i..i, junk);
        }
        4 => b = (0..rng.below(64)).map(|_| rng.next() as u8).collect(),
        _ => {}
    }
    b
}

fn validation(order: ByteOrder) -> (Header, Vec<u8>) {
    let b = body(order, |w| {
        w.u32(1);
        w.u16(1);
        w.u16(0);
        w.string("anonymous").unwrap();
        w.null_size();
    });
    (
        Header::application(cmd::CONNECTION_VALIDATION, false, order, b.len() as u32),
        b,
    )
}

#[test]
fn fuzz_message_handlers() {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut executions = 0u64;
    let mut replies = 0usize;
    let mut sessions = 0;
    while executions < 300_000 {
        let order = if rng.below(2) == 0 {
            ByteOrder::Little
        } else {
            ByteOrder::Big
        };
        let mut h = Harness::new(provider());
        sessions += 1;
        h.greeting();
        let (vh, vb) = validation(order);
        h.feed(vh, &vb);
        let t = templates(order);
        for _ in 0..200 {
            let (mut c, b) = t[rng.below(t.len())].clone();
            let b = if rng.below(4) == 0 {
                b
            } else {
                mutate(&mut rng, b)
            };
            if rng.below(50) == 0 {
                c = rng.next() as u8;
            }
            let mut hd = Header::application(c, false, order, b.len() as u32);
            if rng.below(100) == 0 {
                hd.flags ^= 1 << rng.below(8);
            }
            replies += h.feed(hd, &b).len();
            executions += 1;
            if rng.below(10) == 0 {
                replies += h.drain_monitors().len();
            }
            if h.closed() {
                break;
            }
        }
    }
    println!("fuzz_message_handlers: {executions} executions in {sessions} sessions, {replies} replies, no panic");
    assert!(
        replies > executions as usize / 4,
        "most well-formed paths were reached"
    );
}

#[test]
fn fuzz_framing_and_udp() {
    let mut rng = Rng(0x00dd_ba11_5eed);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let h = Harness::new(provider());
    let t = templates(ByteOrder::Big);
    let mut framed = 0u64;
    let mut messages = 0u64;
    let mut datagrams = 0u64;
    for _ in 0..20_000 {
        // A stream of a few messages, some segmented, some controls, then mutated.
        let mut stream = Vec::new();
        for _ in 0..1 + rng.below(4) {
            let (c, b) = &t[rng.below(t.len())];
            let order = if rng.below(2) == 0 {
                ByteOrder::Little
            } else {
                ByteOrder::Big
            };
            if rng.below(3) == 0 && b.len() > 2 {
                let cut = 1 + rng.below(b.len() - 1);
                for (i, part) in [&b[..cut], &b[cut..]].into_iter().enumerate() {
                    let mut hd = Header::application(*c, false, order, part.len() as u32);
                    hd.flags |= if i == 0 { 0x10 } else { 0x20 };
                    stream.extend_from_slice(&hd.encode());
                    stream.extend_from_slice(part);
                }
            } else {
                stream.extend_from_slice(
                    &Header::application(*c, false, order, b.len() as u32).encode(),
                );
                stream.extend_from_slice(b);
            }
            if rng.below(4) == 0 {
                stream.extend_from_slice(&Header::control(2, false, order, 0).encode());
            }
        }
        let stream = mutate(&mut rng, stream);
        rt.block_on(async {
            let mut r = MessageReader::new(&stream[..], 1 << 16);
            while let Ok(Some(_)) = r.next().await {
                messages += 1;
            }
        });
        framed += 1;
        // The same bytes as a datagram.
        h.feed_datagram(&stream);
        datagrams += 1;
    }
    println!("fuzz_framing_and_udp: {framed} streams ({messages} messages framed), {datagrams} datagrams, no panic");
}

#[test]
fn live_server_survives_garbage_connections() {
    let (server, _p) = start(vec![]);
    let p = provider();
    for n in ["F:i", "F:e", "F:img"] {
        _p.add(
            n,
            ndflow_pva::server::ChannelProvider::lookup(&*p, n).unwrap(),
        );
    }
    let mut rng = Rng(42);
    let t = templates(ByteOrder::Little);
    let mut sent = 0;
    for _ in 0..40 {
        let mut c = Raw::connect(server.tcp_addr());
        let mut bytes = Vec::new();
        for _ in 0..50 {
            let (cm, b) = &t[rng.below(t.len())];
            let b = mutate(&mut rng, b.clone());
            bytes.extend_from_slice(
                &Header::application(*cm, false, ByteOrder::Little, b.len() as u32).encode(),
            );
            bytes.extend_from_slice(&b);
            sent += 1;
        }
        if rng.below(3) == 0 {
            bytes.extend((0..100).map(|_| rng.next() as u8));
        }
        let _ = c.s.write_all(&bytes);
    }
    // A well-behaved client still gets served.
    let mut c = Raw::connect(server.tcp_addr());
    assert!(c.create("F:i").is_ok());
    println!("live_server_survives_garbage_connections: {sent} mutated messages on 40 connections");
}
