//! Server channel operations over a real loopback socket: handshake (anonymous and ca), ECHO,
//! channels, GET with field selection, PUT (accepted, refused, read-only, fetch-current),
//! GET_FIELD, RPC refusal, big-endian clients, segmented requests and the type cache.

use std::io::Write;

use crate::server_support::{start, value_of, Raw};
use ndflow_pva::nt::{enumeration, scalar};
use ndflow_pva::server::SharedPv;
use ndflow_pva::transport::{cmd, subcmd};
use ndflow_pva::{BitSet, ByteOrder, FieldDesc, Header, ScalarType, StatusKind, Value, Writer};

fn f64_pv(x: f64) -> SharedPv {
    SharedPv::new(
        scalar::desc(ScalarType::F64),
        scalar::value(ScalarType::F64, Value::F64(x)),
    )
}

fn writable_i32() -> SharedPv {
    SharedPv::new(
        scalar::desc(ScalarType::I32),
        scalar::value(ScalarType::I32, Value::I32(1)),
    )
    .with_put_handler(|pv, v, bits| {
        let x = v
            .field(&pv.desc(), "value")
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
        if x > 100.0 {
            return Err(format!("{x} too large"));
        }
        pv.post(v.clone(), bits).map_err(|e| e.to_string())
    })
}

#[test]
fn handshake_anonymous_and_ca_echo_and_unknown_channel() {
    let (server, _p) = start(vec![("T:x", f64_pv(1.5))]);
    for method in ["anonymous", "ca"] {
        for order in [ByteOrder::Little, ByteOrder::Big] {
            let mut c = Raw::connect_with(server.tcp_addr(), method, order);
            c.send(cmd::ECHO, |w| w.bytes(b"ping"));
            let m = c.recv_any();
            assert_eq!(m.header.command, cmd::ECHO);
            assert_eq!(m.payload, b"ping");
            let err = c.create("T:nope").unwrap_err();
            assert_eq!(err.kind, StatusKind::Error);
            assert!(c.create("T:x").is_ok());
        }
    }
    assert_eq!(server.stats().connections_total, 4);
}

#[test]
fn unsupported_auth_method_is_refused() {
    let (server, _p) = start(vec![("T:x", f64_pv(1.0))]);
    let mut c = Raw::connect_raw(server.tcp_addr(), ByteOrder::Little);
    c.recv_any();
    c.recv();
    // Channel requests before validation are ignored.
    c.send(cmd::CREATE_CHANNEL, |w| {
        w.u16(1);
        w.u32(1);
        w.string("T:x").unwrap();
    });
    c.send(cmd::CONNECTION_VALIDATION, |w| {
        w.u32(1);
        w.u16(1);
        w.u16(0);
        w.string("x509").unwrap();
        w.null_size();
    });
    let m = c.recv();
    assert_eq!(m.header.command, cmd::CONNECTION_VALIDATED);
    assert_eq!(m.reader().status().unwrap().kind, StatusKind::Error);
}

#[test]
fn get_with_field_selection_and_get_field() {
    let (server, _p) = start(vec![("T:x", f64_pv(2.5))]);
    let mut c = Raw::connect(server.tcp_addr());
    let sid = c.create("T:x").unwrap();

    let ioid = c.id();
    let desc = c.init(cmd::GET, sid, ioid, subcmd::INIT, "", None).unwrap();
    assert_eq!(desc, scalar::desc(ScalarType::F64), "full type in INIT");
    let (bits, v) = c.get_exec(sid, ioid, &desc);
    assert_eq!(bits, BitSet::from_bits(&[0]));
    assert_eq!(value_of(&desc, &v), &Value::F64(2.5));

    let ioid = c.id();
    let desc = c
        .init(
            cmd::GET,
            sid,
            ioid,
            subcmd::INIT,
            "field(value,alarm.severity)",
            None,
        )
        .unwrap();
    let (bits, _) = c.get_exec(sid, ioid, &desc);
    let (vb, _) = desc.find("value").unwrap();
    let (sb, _) = desc.find("alarm.severity").unwrap();
    assert_eq!(bits, BitSet::from_bits(&[vb, sb]));

    // Selecting nothing that exists is an error, as in pvxs.
    let ioid = c.id();
    let err = c
        .init(cmd::GET, sid, ioid, subcmd::INIT, "field(nosuch)", None)
        .unwrap_err();
    assert_eq!(err.kind, StatusKind::Error);

    // GET_FIELD: whole type and a sub-field; no subcommand byte in the reply.
    for (path, want) in [
        ("", scalar::desc(ScalarType::F64)),
        ("value", FieldDesc::Scalar(ScalarType::F64)),
    ] {
        let ioid = c.id();
        c.send(cmd::GET_FIELD, |w| {
            w.u32(sid);
            w.u32(ioid);
            w.string(path).unwrap();
        });
        let m = c.recv();
        let mut r = m.reader();
        assert_eq!(r.u32().unwrap(), ioid);
        assert!(r.status().unwrap().is_success());
        let d = FieldDesc::decode(&mut r, &mut c.cache).unwrap().unwrap();
        assert_eq!(d, want);
    }
}

#[test]
fn put_accepted_refused_and_read_only() {
    let (server, _p) = start(vec![("T:w", writable_i32()), ("T:ro", f64_pv(1.0))]);
    let mut c = Raw::connect(server.tcp_addr());
    let sid = c.create("T:w").unwrap();
    let ioid = c.id();
    let desc = c.init(cmd::PUT, sid, ioid, subcmd::INIT, "", None).unwrap();
    assert!(c
        .put_exec(sid, ioid, &desc, "value", Value::I32(42))
        .is_success());
    // Fetch current through the PUT request (0x40), as p4p does before a put.
    c.send(cmd::PUT, |w| {
        w.u32(sid);
        w.u32(ioid);
        w.u8(subcmd::GET);
    });
    let m = c.recv();
    let mut r = m.reader();
    assert_eq!(r.u32().unwrap(), ioid);
    assert_eq!(r.u8().unwrap(), subcmd::GET);
    assert!(r.status().unwrap().is_success());
    let bits = r.bitset().unwrap();
    let mut v = Value::default_for(&desc);
    v.decode_partial(&desc, &bits, &mut r, &mut c.cache)
        .unwrap();
    assert_eq!(value_of(&desc, &v), &Value::I32(42));

    let st = c.put_exec(sid, ioid, &desc, "value", Value::I32(500));
    assert_eq!(st.kind, StatusKind::Error);
    assert!(st.message.contains("too large"), "{st:?}");

    let sid = c.create("T:ro").unwrap();
    let ioid = c.id();
    let desc = c.init(cmd::PUT, sid, ioid, subcmd::INIT, "", None).unwrap();
    let st = c.put_exec(sid, ioid, &desc, "value", Value::F64(9.0));
    assert_eq!(
        (st.kind, st.message.as_str()),
        (StatusKind::Error, "read-only")
    );
    // A refused write changes nothing.
    let ioid = c.id();
    let desc = c.init(cmd::GET, sid, ioid, subcmd::INIT, "", None).unwrap();
    assert_eq!(
        value_of(&desc, &c.get_exec(sid, ioid, &desc).1),
        &Value::F64(1.0)
    );
}

/// On the wire, a PUT's reply never overtakes the monitor update of the value it wrote, as
/// from an EPICS IOC: a client that reads its monitored copy once the PUT returns (ophyd-async's
/// cached reads) sees the write.
#[test]
fn a_put_reply_follows_its_monitor_update() {
    let (server, _p) = start(vec![("T:w", writable_i32())]);
    let mut c = Raw::connect(server.tcp_addr());
    let sid = c.create("T:w").unwrap();
    let mon = c.id();
    let mdesc = c
        .init(cmd::MONITOR, sid, mon, subcmd::INIT, "", None)
        .unwrap();
    c.start(sid, mon);
    let mut seen = Value::default_for(&mdesc);
    c.monitor_update(mon, &mdesc, &mut seen);
    let put = c.id();
    let desc = c.init(cmd::PUT, sid, put, subcmd::INIT, "", None).unwrap();
    let (bit, _) = desc.find("value").unwrap();
    let bits = BitSet::from_bits(&[bit]);
    for i in 0..100 {
        let mut v = Value::default_for(&desc);
        *v.field_mut(&desc, "value").unwrap() = Value::I32(i);
        let d = desc.clone();
        c.send(cmd::PUT, |w| {
            w.u32(sid);
            w.u32(put);
            w.u8(0x00);
            w.bitset(&bits).unwrap();
            v.encode_partial(&d, &bits, w).unwrap();
        });
        loop {
            let m = c.recv();
            let mut r = m.reader();
            let ioid = r.u32().unwrap();
            if m.header.command == cmd::MONITOR && ioid == mon {
                assert_eq!(r.u8().unwrap(), 0x00);
                let changed = r.bitset().unwrap();
                seen.decode_partial(&mdesc, &changed, &mut r, &mut c.cache)
                    .unwrap();
            } else if m.header.command == cmd::PUT && ioid == put {
                r.u8().unwrap();
                assert!(r.status().unwrap().is_success());
                break;
            }
        }
        assert_eq!(
            value_of(&mdesc, &seen),
            &Value::I32(i),
            "put {i}: the update came after the reply"
        );
    }
}

#[test]
fn enum_put_by_index() {
    let pv = SharedPv::new(enumeration::desc(), enumeration::value(0, &["A", "B", "C"]))
        .with_put_handler(|pv, v, bits| pv.post(v.clone(), bits).map_err(|e| e.to_string()));
    let (server, _p) = start(vec![("T:e", pv.clone())]);
    let mut c = Raw::connect(server.tcp_addr());
    let sid = c.create("T:e").unwrap();
    let ioid = c.id();
    let desc = c
        .init(
            cmd::PUT,
            sid,
            ioid,
            subcmd::INIT,
            "field(value.index)",
            None,
        )
        .unwrap();
    assert!(c
        .put_exec(sid, ioid, &desc, "value.index", Value::I32(2))
        .is_success());
    assert_eq!(enumeration::index(&pv.desc(), &pv.current()), Some(2));
    assert_eq!(
        enumeration::choices(&pv.desc(), &pv.current())
            .unwrap()
            .len(),
        3
    );
}

#[test]
fn rpc_is_refused_and_unknown_commands_ignored() {
    let (server, _p) = start(vec![("T:x", f64_pv(1.0))]);
    let mut c = Raw::connect(server.tcp_addr());
    let sid = c.create("T:x").unwrap();
    let ioid = c.id();
    let err = c
        .init(cmd::RPC, sid, ioid, subcmd::INIT, "", None)
        .unwrap_err();
    assert!(err.message.contains("not supported"));
    c.send(0x5e, |w| w.bytes(b"whatever"));
    c.send(cmd::MESSAGE, |w| w.bytes(b"\x00"));
    // Still alive and answering.
    assert!(c.create("T:x").is_ok());
}

#[test]
fn segmented_request_with_type_cache_from_a_big_endian_client() {
    let (server, _p) = start(vec![("T:x", f64_pv(4.0))]);
    let mut c = Raw::connect_with(server.tcp_addr(), "anonymous", ByteOrder::Big);
    let sid = c.create("T:x").unwrap();
    // pvRequest sent through the type cache (0xFD define), as pvAccessCPP does.
    let (rd, rv) = ndflow_pva::request::build("value", &[]);
    let mut w = Writer::new(ByteOrder::Big);
    w.u32(sid);
    w.u32(7);
    w.u8(subcmd::INIT);
    w.u8(0xFD);
    w.u16(1);
    rd.encode(&mut w).unwrap();
    rv.encode(&rd, &mut w).unwrap();
    let body = w.into_inner();
    // Three segments: first, middle, last, with an ECHO control... (controls may interleave).
    let cuts = [0, 3, 11, body.len()];
    let mut bytes = Vec::new();
    for (i, seg) in cuts.windows(2).enumerate() {
        let mut h = Header::application(cmd::GET, false, ByteOrder::Big, (seg[1] - seg[0]) as u32);
        h.flags |= match i {
            0 => 0x10,
            1 => 0x30,
            _ => 0x20,
        };
        bytes.extend_from_slice(&h.encode());
        bytes.extend_from_slice(&body[seg[0]..seg[1]]);
        if i == 0 {
            bytes.extend_from_slice(&Header::control(0x02, false, ByteOrder::Big, 0).encode());
        }
    }
    c.s.write_all(&bytes).unwrap();
    let m = c.recv();
    assert_eq!(m.header.command, cmd::GET);
    let mut r = m.reader();
    assert_eq!(r.u32().unwrap(), 7);
    r.u8().unwrap();
    assert!(r.status().unwrap().is_success());
    let desc = FieldDesc::decode(&mut r, &mut c.cache).unwrap().unwrap();
    // A second request reusing the cached pvRequest type (0xFE).
    c.send(cmd::GET, |w| {
        w.u32(sid);
        w.u32(8);
        w.u8(subcmd::INIT);
        w.u8(0xFE);
        w.u16(1);
        rv.encode(&rd, w).unwrap();
    });
    let m = c.recv();
    let mut r = m.reader();
    assert_eq!(r.u32().unwrap(), 8);
    r.u8().unwrap();
    assert!(r.status().unwrap().is_success());
    let (bits, v) = c.get_exec(sid, 8, &desc);
    assert_eq!(bits, BitSet::from_bits(&[1]));
    assert_eq!(value_of(&desc, &v), &Value::F64(4.0));
}

#[test]
fn destroy_channel_and_late_messages() {
    let (server, _p) = start(vec![("T:x", f64_pv(1.0))]);
    let mut c = Raw::connect(server.tcp_addr());
    let sid = c.create("T:x").unwrap();
    let ioid = c.id();
    let desc = c.init(cmd::GET, sid, ioid, subcmd::INIT, "", None).unwrap();
    c.send(cmd::DESTROY_CHANNEL, |w| {
        w.u32(sid);
        w.u32(101);
    });
    let m = c.recv();
    assert_eq!(m.header.command, cmd::DESTROY_CHANNEL);
    // Late GET on the destroyed request: ignored, connection stays.
    c.send(cmd::GET, |w| {
        w.u32(sid);
        w.u32(ioid);
        w.u8(0);
    });
    let sid2 = c.create("T:x").unwrap();
    let ioid2 = c.id();
    let d2 = c
        .init(cmd::GET, sid2, ioid2, subcmd::INIT, "", None)
        .unwrap();
    assert_eq!(d2, desc);
    assert_eq!(server.stats().channels, 1);
}

#[test]
fn echo_keepalive_then_idle_connection_closed() {
    let provider = std::sync::Arc::new(ndflow_pva::server::StaticProvider::new());
    let mut cfg = ndflow_pva::server::ServerConfig::loopback_ephemeral();
    cfg.echo_period = std::time::Duration::from_millis(100);
    cfg.conn_timeout = std::time::Duration::from_millis(500);
    let server = ndflow_pva::server::Server::start(cfg, provider).unwrap();
    let mut c = Raw::connect(server.tcp_addr());
    let t = std::time::Instant::now();
    let m = c.recv_any();
    assert_eq!(m.header.command, cmd::ECHO, "server keep-alive");
    // We never answer: after conn_timeout of silence the server closes the connection.
    while let Ok(m) = c.try_recv_any() {
        assert_eq!(m.header.command, cmd::ECHO);
    }
    let took = t.elapsed();
    assert!(
        took >= std::time::Duration::from_millis(400) && took < std::time::Duration::from_secs(3),
        "{took:?}"
    );
}

#[test]
fn start_and_drop_inside_a_tokio_runtime() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (server, _p) = start(vec![("T:x", f64_pv(1.0))]);
        let addr = server.tcp_addr();
        let s = tokio::task::spawn_blocking(move || {
            let mut c = Raw::connect(addr);
            c.create("T:x").is_ok()
        })
        .await
        .unwrap();
        assert!(s);
        drop(server);
    });
}
