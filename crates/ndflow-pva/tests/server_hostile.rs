//! Clients that begin large messages and do not finish them: each is closed once its message
//! has stayed incomplete for `conn_timeout` (counted), and the bytes all connections hold in
//! incomplete messages are capped together (the connection that takes the total over is closed
//! and counted, the others stay).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ndflow_pva::server::{Server, ServerConfig, StaticProvider};
use ndflow_pva::{ByteOrder, Header};

/// The header of a client's GET (command 10) declaring `size` bytes.
fn big_header(size: u32) -> Vec<u8> {
    Header::application(10, false, ByteOrder::Little, size)
        .encode()
        .to_vec()
}

/// True when the server closed the connection within `limit`.
fn closed_within(s: &mut TcpStream, limit: Duration) -> bool {
    let t0 = Instant::now();
    let _ = s.set_read_timeout(Some(Duration::from_millis(50)));
    let mut b = [0u8; 4096];
    while t0.elapsed() < limit {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => {}
        }
    }
    false
}

fn wait(mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !done() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_message_left_incomplete_is_cut_off_and_counted() {
    let cfg = ServerConfig {
        conn_timeout: Duration::from_millis(600),
        ..ServerConfig::loopback_ephemeral()
    };
    let srv = Server::start(cfg, Arc::new(StaticProvider::new())).expect("server on loopback");
    let mut s = TcpStream::connect(srv.tcp_addr()).expect("connect");
    s.write_all(&big_header(8 << 20)).expect("header");
    s.write_all(&[0u8; 1000]).expect("some of it");
    assert!(closed_within(&mut s, Duration::from_secs(5)));
    wait(|| srv.stats().partial_timeouts == 1);
    assert_eq!(srv.stats().partial_timeouts, 1);
    // A client that only goes quiet between messages is closed too, but not counted as one.
    let mut idle = TcpStream::connect(srv.tcp_addr()).expect("connect");
    assert!(closed_within(&mut idle, Duration::from_secs(5)));
    assert_eq!(srv.stats().partial_timeouts, 1);
    srv.stop();
}

#[test]
fn incomplete_messages_of_all_clients_are_capped_together() {
    let cfg = ServerConfig {
        max_partial_bytes: 1 << 20,
        ..ServerConfig::loopback_ephemeral()
    };
    let srv = Server::start(cfg, Arc::new(StaticProvider::new())).expect("server on loopback");
    // Each client declares 8 MB and sends 300 KB of it: the fourth takes the total over 1 MiB.
    let chunk = vec![0x5Au8; 300 << 10];
    let mut conns = Vec::new();
    for _ in 0..4 {
        let mut s = TcpStream::connect(srv.tcp_addr()).expect("connect");
        s.write_all(&big_header(8 << 20)).expect("header");
        // The server may close this one mid-write: that is the point.
        let _ = s.write_all(&chunk);
        conns.push(s);
        std::thread::sleep(Duration::from_millis(100));
    }
    wait(|| srv.stats().partial_over_cap == 1);
    assert_eq!(
        srv.stats().partial_over_cap,
        1,
        "the newest offender is closed"
    );
    let mut last = conns.pop().expect("four clients");
    assert!(closed_within(&mut last, Duration::from_secs(2)));
    for s in &mut conns {
        assert!(
            !closed_within(s, Duration::from_millis(300)),
            "the others stay"
        );
    }
    assert_eq!(srv.stats().connections, 3);
    srv.stop();
}

/// A connection may hold `max_channels_per_conn` channels and `max_requests_per_conn` open
/// requests: one more of either is refused with the reason and counted; the connection stays
/// usable, and another connection has its own allowance.
#[test]
fn channels_and_requests_over_a_connections_limit_are_refused_and_counted() {
    use crate::server_support::Raw;
    use ndflow_pva::nt::scalar;
    use ndflow_pva::server::SharedPv;
    use ndflow_pva::transport::{cmd, subcmd};
    use ndflow_pva::{ScalarType, Value};

    let provider = Arc::new(StaticProvider::new());
    let pv = SharedPv::new(
        scalar::desc(ScalarType::I32),
        scalar::value(ScalarType::I32, Value::I32(7)),
    );
    provider.add("T:x", pv);
    let cfg = ServerConfig {
        max_channels_per_conn: 3,
        max_requests_per_conn: 2,
        ..ServerConfig::loopback_ephemeral()
    };
    let srv = Server::start(cfg, provider).expect("server on loopback");
    let mut c = Raw::connect(srv.tcp_addr());
    let sids: Vec<u32> = (0..3).map(|_| c.create("T:x").unwrap()).collect();
    let refused = c.create("T:x").unwrap_err();
    assert!(refused.message.contains("too many channels"), "{refused:?}");
    for _ in 0..2 {
        let ioid = c.id();
        c.init(cmd::GET, sids[0], ioid, subcmd::INIT, "", None)
            .unwrap();
    }
    let ioid = c.id();
    let refused = c
        .init(cmd::MONITOR, sids[1], ioid, subcmd::INIT, "", None)
        .unwrap_err();
    assert!(refused.message.contains("too many requests"), "{refused:?}");
    assert_eq!(srv.stats().limit_refusals, 2);
    // Still served: a GET on an open request answers.
    let mut other = Raw::connect(srv.tcp_addr());
    let sid = other.create("T:x").unwrap();
    let ioid = other.id();
    let desc = other
        .init(cmd::GET, sid, ioid, subcmd::INIT, "", None)
        .unwrap();
    let (_, v) = other.get_exec(sid, ioid, &desc);
    assert_eq!(crate::server_support::value_of(&desc, &v), &Value::I32(7));
    assert_eq!(srv.stats().limit_refusals, 2);
    srv.stop();
}
