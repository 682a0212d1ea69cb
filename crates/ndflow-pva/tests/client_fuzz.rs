//! Randomized robustness of the client: truncated, bit-flipped and garbled server messages fed
//! (1) straight to the client's decoders and per-request handlers, and (2) over TCP from a server
//! that garbles its replies. Nothing may panic; every run prints how many executions it made.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::client_common::fake::{full_update, FakeServer, Script};
use crate::common::Rng;
use ndflow_pva::client::proto::{self, OpDecoder, OpKind};
use ndflow_pva::client::{Client, ClientConfig, MonitorOptions, PutValue};
use ndflow_pva::nt::ntndarray::{ntndarray_desc, Attribute, Dimension, NtNdArray};
use ndflow_pva::{
    BitSet, ByteOrder, FieldDesc, NumArray, ScalarType, SharedBytes, TypeCache, Value, Writer,
};

static PANICS: AtomicUsize = AtomicUsize::new(0);

/// Count panics anywhere (runtime tasks swallow theirs) while still printing them.
fn count_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::Relaxed);
            prev(info);
        }));
    });
}

fn body(order: ByteOrder, f: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut w = Writer::new(order);
    f(&mut w);
    w.into_inner()
}

fn nt_frame() -> Value {
    NtNdArray {
        value: Some(NumArray::from_slice(&[1u16, 2, 3, 4, 5, 6])),
        codec_name: "lz4".into(),
        codec_parameters: Some(6),
        compressed_size: 12,
        uncompressed_size: 12,
        dimension: vec![
            Dimension {
                size: 3,
                full_size: 3,
                binning: 1,
                ..Default::default()
            },
            Dimension {
                size: 2,
                full_size: 2,
                binning: 1,
                ..Default::default()
            },
        ],
        unique_id: 9,
        data_time_stamp: Default::default(),
        attribute: vec![Attribute {
            name: "ColorMode".into(),
            value: Some((FieldDesc::Scalar(ScalarType::I32), Value::I32(0))),
            descriptor: "colour".into(),
            source_type: 0,
            source: String::new(),
        }],
        alarm: (0, 0, String::new()),
        time_stamp: Default::default(),
    }
    .to_value()
}

/// What a seed is fed to.
#[derive(Clone)]
enum Target {
    Validation,
    Status,
    Search,
    Create,
    Destroy,
    Message,
    /// An op response, decoded by a handler in the state reached after `prime` (the INIT reply).
    Op(OpKind, Option<SharedBytes>),
}

fn seeds(order: ByteOrder) -> Vec<(Target, Vec<u8>)> {
    let desc = ntndarray_desc();
    let scalar = FieldDesc::structure(
        "epics:nt/NTScalar:1.0",
        vec![("value", FieldDesc::Scalar(ScalarType::F64))],
    );
    let init = |ioid: u32, d: &FieldDesc, cache: bool| {
        SharedBytes::from(body(order, |w| {
            w.u32(ioid);
            w.u8(8);
            w.u8(0xff);
            if cache {
                w.u8(0xfd);
                w.u16(3);
            }
            d.encode(w).unwrap();
        }))
    };
    let mon_init = init(1, desc, true);
    let get_init = init(2, &scalar, false);
    let update = body(order, |w| {
        w.u32(1);
        w.u8(0);
        w.bitset(&BitSet::from_bits(&[0])).unwrap();
        nt_frame().encode(desc, w).unwrap();
        w.bitset(&BitSet::from_bits(&[5])).unwrap();
    });
    let (uid_bit, _) = desc.find("uniqueId").unwrap();
    let partial = body(order, |w| {
        w.u32(1);
        w.u8(0);
        w.bitset(&BitSet::from_bits(&[1, uid_bit])).unwrap();
        let v = nt_frame();
        v.encode_partial(desc, &BitSet::from_bits(&[1, uid_bit]), w)
            .unwrap();
        w.u8(0);
    });
    let finish = body(order, |w| {
        w.u32(1);
        w.u8(0x10);
        w.status(&ndflow_pva::Status::error("gone")).unwrap();
    });
    let get_data = body(order, |w| {
        w.u32(2);
        w.u8(0);
        w.u8(0xff);
        w.bitset(&BitSet::from_bits(&[1])).unwrap();
        w.f64(1.5);
    });
    let put_done = body(order, |w| {
        w.u32(2);
        w.u8(0);
        w.status(&ndflow_pva::Status::error("read-only")).unwrap();
    });
    let get_field = body(order, |w| {
        w.u32(4);
        w.u8(0xff);
        w.u8(0xfe);
        w.u16(3);
    });
    let search = body(order, |w| {
        w.bytes(&[1; 12]);
        w.u32(5);
        w.bytes(&[0; 16]);
        w.u16(5075);
        w.string("tcp").unwrap();
        w.bool(true);
        w.u16(2);
        w.u32(1);
        w.u32(2);
    });
    let validation = body(order, |w| {
        w.i32(0x10000);
        w.i16(0x7fff);
        w.size(2).unwrap();
        w.string("anonymous").unwrap();
        w.string("ca").unwrap();
    });
    vec![
        (Target::Validation, validation),
        (
            Target::Status,
            body(order, |w| {
                w.status(&ndflow_pva::Status::error("no")).unwrap()
            }),
        ),
        (Target::Search, search),
        (
            Target::Create,
            body(order, |w| {
                w.u32(1);
                w.u32(2);
                w.u8(0xff);
            }),
        ),
        (
            Target::Destroy,
            body(order, |w| {
                w.u32(1);
                w.u32(2);
            }),
        ),
        (
            Target::Message,
            body(order, |w| {
                w.u32(1);
                w.u8(2);
                w.string("careful").unwrap();
            }),
        ),
        (Target::Op(OpKind::Monitor, None), mon_init.to_vec()),
        (Target::Op(OpKind::Monitor, Some(mon_init.clone())), update),
        (Target::Op(OpKind::Monitor, Some(mon_init.clone())), partial),
        (Target::Op(OpKind::Monitor, Some(mon_init)), finish),
        (
            Target::Op(OpKind::Get, Some(get_init.clone())),
            get_data.clone(),
        ),
        (Target::Op(OpKind::Put, Some(get_init.clone())), put_done),
        (Target::Op(OpKind::Put, Some(get_init)), get_data),
        (Target::Op(OpKind::GetField, None), get_field),
    ]
}

fn run(t: &Target, b: &[u8], order: ByteOrder, cache: &TypeCache) -> bool {
    match t {
        Target::Validation => proto::decode_validation_request(b, order).is_ok(),
        Target::Status => proto::decode_status(b, order).is_ok(),
        Target::Search => proto::decode_search_response(b, order).is_ok(),
        Target::Create => proto::decode_create_channel(b, order).is_ok(),
        Target::Destroy => proto::decode_destroy_channel(b, order).is_ok(),
        Target::Message => proto::decode_message(b, order).is_ok(),
        Target::Op(kind, prime) => {
            let mut cache = cache.clone();
            let mut dec = OpDecoder::new(*kind);
            if let Some(p) = prime {
                if dec.handle(p, order, &mut cache).is_err() {
                    return false;
                }
            }
            let msg = SharedBytes::copy_from_slice(b);
            // Twice: a handler must stay usable after an error.
            let first = dec.handle(&msg, order, &mut cache).is_ok();
            let _ = dec.handle(&msg, order, &mut cache);
            first
        }
    }
}

#[test]
fn handlers_never_panic_on_garbled_messages() {
    count_panics();
    let mut rng = Rng(0x5eed_c11e_0001);
    let mut executions = 0usize;
    let mut accepted = 0usize;
    for order in [ByteOrder::Little, ByteOrder::Big] {
        // The 0xFE reuse in the GET_FIELD seed needs key 3 defined.
        let mut cache = TypeCache::new();
        cache.insert(3, ntndarray_desc().clone());
        for (t, seed) in seeds(order) {
            assert!(run(&t, &seed, order, &cache), "seed must decode");
            // Every truncation.
            for n in 0..seed.len() {
                accepted += usize::from(run(&t, &seed[..n], order, &cache));
                executions += 1;
            }
            // Random byte flips, insertions, deletions and Size escapes.
            for _ in 0..2500 {
                let mut m = seed.clone();
                for _ in 0..1 + rng.below(4) {
                    let i = rng.below(m.len().max(1));
                    match rng.below(5) {
                        0 | 1 if !m.is_empty() => m[i] ^= 1 << rng.below(8),
                        2 if !m.is_empty() => m[i] = rng.next() as u8,
                        3 => m.insert(i.min(m.len()), [0xfe, 0xff, 0xfd][rng.below(3)]),
                        _ if !m.is_empty() => {
                            m.remove(i);
                        }
                        _ => {}
                    }
                }
                accepted += usize::from(run(&t, &m, order, &cache));
                executions += 1;
            }
        }
    }
    println!("client handler fuzz: {executions} executions, {accepted} decoded without error");
    assert!(executions > 60_000);
    assert_eq!(PANICS.load(Ordering::Relaxed), 0);
}

#[test]
fn garbling_server_never_panics_the_client() {
    count_panics();
    let desc = ntndarray_desc().clone();
    let mut script = Script::new("FUZZ:image", desc.clone(), nt_frame());
    script.cache = true;
    script.segment = Some(40);
    let upd = full_update(&desc, &nt_frame());
    script.updates = Arc::new(move |i| (i < 5).then(|| Arc::clone(&upd)));
    let mut good = script.clone();
    script.garble = Some(0xbad5eed);
    let bad = FakeServer::start(script);
    let cfg = |fs: &FakeServer| ClientConfig {
        addr_list: Vec::new(),
        auto_addr_list: false,
        name_servers: vec![fs.addr],
        loopback_only: true,
        search_min_interval: Duration::from_millis(5),
        search_max_interval: Duration::from_millis(20),
        ..ClientConfig::loopback(0)
    };
    let c = Client::new(cfg(&bad)).expect("client");
    let ok = AtomicUsize::new(0);
    let failed = AtomicUsize::new(0);
    let t = Duration::from_millis(80);
    let (workers, rounds) = (4, 10);
    let tally = |r: bool| {
        if r {
            ok.fetch_add(1, Ordering::Relaxed)
        } else {
            failed.fetch_add(1, Ordering::Relaxed)
        }
    };
    // Concurrent operations share (and break) the same connections.
    std::thread::scope(|s| {
        for w in 0..workers {
            let (c, tally) = (&c, &tally);
            s.spawn(move || {
                for i in 0..rounds {
                    tally(c.get("FUZZ:image", "", t).is_ok());
                    let v = PutValue::Int(i64::from(w * rounds + i));
                    tally(c.put("FUZZ:image", &[("uniqueId", v)], t).is_ok());
                    let m = c
                        .monitor("FUZZ:image", MonitorOptions::default())
                        .expect("monitor");
                    let mut n = 0;
                    while n < 20 && m.recv(Duration::from_millis(30)).is_ok() {
                        tally(true);
                        n += 1;
                    }
                }
            });
        }
    });
    let (ok, failed) = (ok.into_inner(), failed.into_inner());
    let conns = bad.connections.load(Ordering::Relaxed);
    println!(
        "garbling server: {} operations over {conns} connections: {ok} results, {failed} errors",
        3 * workers * rounds
    );
    assert!(conns > 1, "protocol errors must close connections");
    assert_eq!(PANICS.load(Ordering::Relaxed), 0);

    // A fresh client against a well-behaved server still works afterwards.
    good.names = vec!["FUZZ:image".into()];
    let fine = FakeServer::start(good);
    let c2 = Client::new(cfg(&fine)).expect("client");
    let (_, v) = c2
        .get("FUZZ:image", "", Duration::from_secs(5))
        .expect("get");
    assert_eq!(NtNdArray::from_value(&desc, &v).expect("nt").unique_id, 9);
}
