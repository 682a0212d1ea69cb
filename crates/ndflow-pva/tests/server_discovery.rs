//! Discovery: UDP search (found / silent / mustReply / several messages per datagram with an
//! ORIGIN_TAG), several servers sharing one search port (a unicast search reaches them all),
//! replies refused to other hosts, TCP search (name-server mode), beacons to the configured
//! list, and the EPICS_PVAS_* configuration. Everything on 127.0.0.1.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::Duration;

use crate::server_support::{start, Raw};
use ndflow_net::Listen;
use ndflow_pva::nt::scalar;
use ndflow_pva::server::{Server, ServerConfig, SharedPv, StaticProvider};
use ndflow_pva::transport::cmd;
use ndflow_pva::wire::header::HEADER_LEN;
use ndflow_pva::{ByteOrder, Header, Reader, ScalarType, Value, Writer};

fn pv() -> SharedPv {
    SharedPv::new(
        scalar::desc(ScalarType::F64),
        scalar::value(ScalarType::F64, Value::F64(1.0)),
    )
}

fn search_msg(order: ByteOrder, flags: u8, reply_port: u16, names: &[(u32, &str)]) -> Vec<u8> {
    let mut w = Writer::new(order);
    w.u32(0x6669_6e64);
    w.u8(flags);
    w.bytes(&[0, 0, 0]);
    w.bytes(&[0u8; 16]);
    w.u16(reply_port);
    w.size(1).unwrap();
    w.string("tcp").unwrap();
    w.u16(names.len() as u16);
    for (id, n) in names {
        w.u32(*id);
        w.string(n).unwrap();
    }
    let mut out = Header::application(cmd::SEARCH, false, order, w.len() as u32)
        .encode()
        .to_vec();
    out.extend_from_slice(w.as_slice());
    out
}

struct Response {
    seq: u32,
    port: u16,
    found: bool,
    ids: Vec<u32>,
}

fn parse_response(b: &[u8]) -> Response {
    let h = Header::decode(b).unwrap();
    assert_eq!(h.command, cmd::SEARCH_RESPONSE);
    assert!(h.is_from_server());
    let mut r = Reader::new(
        &b[HEADER_LEN..HEADER_LEN + h.payload_size as usize],
        h.byte_order(),
    );
    r.take(12).unwrap();
    let seq = r.u32().unwrap();
    r.take(16).unwrap();
    let port = r.u16().unwrap();
    assert_eq!(r.string().unwrap(), "tcp");
    let found = r.bool().unwrap();
    let n = r.u16().unwrap();
    let ids = (0..n).map(|_| r.u32().unwrap()).collect();
    Response {
        seq,
        port,
        found,
        ids,
    }
}

fn client_socket() -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    s
}

fn recv(s: &UdpSocket) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 65536];
    s.recv(&mut buf).ok().map(|n| buf[..n].to_vec())
}

#[test]
fn udp_search_found_silent_and_must_reply() {
    let (server, _p) = start(vec![("T:a", pv()), ("T:b", pv())]);
    let s = client_socket();
    let port = s.local_addr().unwrap().port();
    for order in [ByteOrder::Big, ByteOrder::Little] {
        s.send_to(
            &search_msg(order, 0x80, port, &[(1, "T:a"), (2, "T:zz"), (3, "T:b")]),
            server.udp_addr(),
        )
        .unwrap();
        let r = parse_response(&recv(&s).expect("response"));
        assert_eq!(
            (r.seq, r.port, r.found),
            (0x6669_6e64, server.tcp_addr().port(), true)
        );
        assert_eq!(r.ids, [1, 3]);
    }
    // Unknown name, no mustReply: silence.
    s.send_to(
        &search_msg(ByteOrder::Big, 0x80, port, &[(4, "T:zz")]),
        server.udp_addr(),
    )
    .unwrap();
    assert!(recv(&s).is_none());
    // mustReply: an answer saying "not found".
    s.send_to(
        &search_msg(ByteOrder::Big, 0x81, port, &[(5, "T:zz")]),
        server.udp_addr(),
    )
    .unwrap();
    let r = parse_response(&recv(&s).expect("response"));
    assert!(!r.found);
    assert_eq!(r.ids, [5]);
    assert!(server.stats().searches >= 4);
}

#[test]
fn several_messages_per_datagram_with_origin_tag() {
    let (server, _p) = start(vec![("T:a", pv())]);
    let s = client_socket();
    let port = s.local_addr().unwrap().port();
    let mut w = Writer::new(ByteOrder::Big);
    w.bytes(&std::net::Ipv4Addr::LOCALHOST.to_ipv6_mapped().octets());
    let mut dgram = Header::application(cmd::ORIGIN_TAG, false, ByteOrder::Big, 16)
        .encode()
        .to_vec();
    dgram.extend_from_slice(w.as_slice());
    dgram.extend(search_msg(ByteOrder::Big, 0, port, &[(7, "T:a")]));
    dgram.extend(search_msg(ByteOrder::Little, 0, port, &[(8, "T:a")]));
    // Trailing garbage ends the parse without harm.
    dgram.extend_from_slice(&[0xCA, 0x02, 0x00]);
    s.send_to(&dgram, server.udp_addr()).unwrap();
    let mut ids: Vec<u32> = (0..2)
        .flat_map(|_| parse_response(&recv(&s).unwrap()).ids)
        .collect();
    ids.sort();
    assert_eq!(ids, [7, 8]);
}

#[test]
fn tcp_search_name_server_mode() {
    let (server, _p) = start(vec![("T:a", pv())]);
    let mut c = Raw::connect(server.tcp_addr());
    let bytes = search_msg(ByteOrder::Little, 0x00, 0, &[(11, "T:a"), (12, "T:no")]);
    std::io::Write::write_all(&mut c.s, &bytes).unwrap();
    let m = c.recv();
    let mut all = m.header.encode().to_vec();
    all.extend_from_slice(&m.payload);
    let r = parse_response(&all);
    assert!(r.found);
    assert_eq!(r.ids, [11]);
    assert_eq!(r.port, server.tcp_addr().port());
}

#[test]
fn beacons_go_to_the_configured_list() {
    let listener = client_socket();
    listener
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let mut cfg = ServerConfig::loopback_ephemeral();
    cfg.beacon_addrs = vec![listener.local_addr().unwrap()];
    cfg.beacon_period = Duration::from_millis(100);
    let server = Server::start(cfg, Arc::new(StaticProvider::new())).unwrap();
    for _ in 0..2 {
        let b = recv(&listener).expect("beacon");
        let h = Header::decode(&b).unwrap();
        assert_eq!(h.command, cmd::BEACON);
        let mut r = Reader::new(&b[HEADER_LEN..], h.byte_order());
        r.take(12 + 4 + 16).unwrap();
        assert_eq!(r.u16().unwrap(), server.tcp_addr().port());
        assert_eq!(r.string().unwrap(), "tcp");
    }
}

#[test]
fn config_from_epics_variables() {
    let vars = [
        ("EPICS_PVAS_INTF_ADDR_LIST", "127.0.0.1"),
        ("EPICS_PVA_SERVER_PORT", "15075"),
        ("EPICS_PVAS_BROADCAST_PORT", "15076"),
        ("EPICS_PVA_BROADCAST_PORT", "1"),
        ("EPICS_PVAS_BEACON_ADDR_LIST", "127.0.0.1 127.0.0.2:999"),
        ("EPICS_PVA_CONN_TMO", "3"),
    ];
    let look = |k: &str| {
        vars.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| (*v).to_owned())
    };
    let cfg = ServerConfig::from_lookup(look).unwrap();
    assert_eq!(cfg.listen, Listen::Local);
    assert_eq!((cfg.tcp_port, cfg.udp_port), (15075, 15076));
    let want: Vec<SocketAddr> = vec![
        "127.0.0.1:15076".parse().unwrap(),
        "127.0.0.2:999".parse().unwrap(),
    ];
    assert_eq!(cfg.beacon_addrs, want);
    assert_eq!(cfg.conn_timeout, Duration::from_secs(4));
    // Defaults: this host only, standard ports, beacons to the client list and the loopback
    // group.
    let cfg =
        ServerConfig::from_lookup(|k| (k == "EPICS_PVA_ADDR_LIST").then(|| "127.0.0.1".into()))
            .unwrap();
    assert_eq!(cfg.listen, Listen::Local);
    assert_eq!(
        cfg.beacon_destinations(),
        vec![
            "127.0.0.1:5076".parse::<SocketAddr>().unwrap(),
            "224.0.0.128:5076".parse::<SocketAddr>().unwrap()
        ]
    );
    assert_eq!((cfg.tcp_port, cfg.udp_port), (5075, 5076));
    assert_eq!(
        cfg.beacon_addrs,
        vec!["127.0.0.1:5076".parse::<SocketAddr>().unwrap()]
    );
    let err = ServerConfig::from_lookup(|k| (k == "EPICS_PVA_SERVER_PORT").then(|| "x".into()))
        .unwrap_err();
    assert_eq!(err.var, "EPICS_PVA_SERVER_PORT");
    // Every interface, as pvxs: beacons to the list only when the automatic list is off.
    let all = [
        ("EPICS_PVAS_INTF_ADDR_LIST", "0.0.0.0"),
        ("EPICS_PVAS_BEACON_ADDR_LIST", "192.0.2.1"),
        ("EPICS_PVAS_AUTO_BEACON_ADDR_LIST", "NO"),
    ];
    let cfg = ServerConfig::from_lookup(|k| {
        all.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| (*v).to_owned())
    })
    .unwrap();
    assert_eq!(cfg.listen, Listen::all());
    assert_eq!(
        cfg.beacon_destinations(),
        vec!["192.0.2.1:5076".parse::<SocketAddr>().unwrap()]
    );
    // Serving this host only, a beacon list naming another host is not used.
    let cfg = ServerConfig::from_lookup(|k| {
        (k == "EPICS_PVAS_BEACON_ADDR_LIST").then(|| "192.0.2.1 127.0.0.1".into())
    })
    .unwrap();
    assert!(!cfg
        .beacon_destinations()
        .contains(&"192.0.2.1:5076".parse().unwrap()));
    let err =
        ServerConfig::from_lookup(|k| (k == "EPICS_PVAS_INTF_ADDR_LIST").then(|| "eth0".into()))
            .unwrap_err();
    assert_eq!(err.var, "EPICS_PVAS_INTF_ADDR_LIST");
}

#[test]
fn a_unicast_search_reaches_every_server_sharing_the_port() {
    let pa = Arc::new(StaticProvider::new());
    pa.add("T:one", pv());
    let a = Server::start(ServerConfig::loopback_ephemeral(), pa).unwrap();
    let pb = Arc::new(StaticProvider::new());
    pb.add("T:two", pv());
    let cfg = ServerConfig {
        udp_port: a.udp_addr().port(),
        ..ServerConfig::loopback_ephemeral()
    };
    let b = Server::start(cfg, pb).unwrap();
    assert_eq!(a.udp_addr(), b.udp_addr());
    let s = client_socket();
    let port = s.local_addr().unwrap().port();
    // One datagram to 127.0.0.1 (the kernel hands it to one of the two sockets) asks for both
    // names: each server answers for its own.
    s.send_to(
        &search_msg(ByteOrder::Big, 0x80, port, &[(1, "T:one"), (2, "T:two")]),
        a.udp_addr(),
    )
    .unwrap();
    let mut got: Vec<(u16, Vec<u32>)> = (0..2)
        .map(|_| {
            let r = parse_response(&recv(&s).expect("a response from each server"));
            (r.port, r.ids)
        })
        .collect();
    got.sort();
    let mut want = vec![
        (a.tcp_addr().port(), vec![1]),
        (b.tcp_addr().port(), vec![2]),
    ];
    want.sort();
    assert_eq!(got, want);
    assert_eq!(
        a.stats().searches_forwarded + b.stats().searches_forwarded,
        1
    );
    // Stop one: the other still answers.
    drop(a);
    s.send_to(
        &search_msg(ByteOrder::Big, 0x80, port, &[(3, "T:two")]),
        b.udp_addr(),
    )
    .unwrap();
    let r = parse_response(&recv(&s).expect("the remaining server answers"));
    assert_eq!((r.port, r.ids), (b.tcp_addr().port(), vec![3]));
}

#[test]
fn serving_this_host_only_never_replies_elsewhere() {
    let (server, _p) = start(vec![("T:a", pv())]);
    let s = client_socket();
    // The search asks for its reply to go to another host (a documentation address).
    let mut m = search_msg(ByteOrder::Big, 0x00, 5076, &[(1, "T:a")]);
    let other = std::net::Ipv4Addr::new(192, 0, 2, 1)
        .to_ipv6_mapped()
        .octets();
    m[HEADER_LEN + 8..HEADER_LEN + 24].copy_from_slice(&other);
    s.send_to(&m, server.udp_addr()).unwrap();
    let t0 = std::time::Instant::now();
    while server.stats().searches_refused == 0 && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(server.stats().searches_refused, 1);
}
