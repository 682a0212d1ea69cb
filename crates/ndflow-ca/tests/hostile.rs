//! Clients that declare large payloads and do not send them: each is disconnected after
//! `partial_timeout` and counted, the server keeps serving, and a legitimate large message
//! sent slowly but in time still arrives.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ndflow_ca::header::{cmd, Header};
use ndflow_ca::testing::demo_pvs;
use ndflow_ca::{Server, ServerConfig, StaticProvider};

fn server(partial_timeout: Duration) -> Server {
    let p = Arc::new(StaticProvider::new());
    for (n, pv) in demo_pvs("H:") {
        p.add(n, pv);
    }
    let mut cfg = ServerConfig::loopback_ephemeral();
    cfg.max_array_bytes = 64 << 20;
    cfg.partial_timeout = partial_timeout;
    Server::start(cfg, p).expect("server starts on loopback")
}

/// A CA VERSION message, then the header of a WRITE declaring `size` bytes (extended form).
fn greeting_and_big_header(size: u32) -> Vec<u8> {
    let mut m = Vec::new();
    // VERSION: command 0, priority 0, minor version 13.
    m.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 13, 0, 0, 0, 0, 0, 0, 0, 0]);
    // Extended header: payload 0xFFFF and count 0 mark it; the real size and count follow.
    // Command, then payload 0xFFFF, type 6 (DOUBLE), count 0, p1 = sid 1, p2 = ioid 1.
    m.extend_from_slice(&cmd::WRITE.to_be_bytes());
    m.extend_from_slice(&[0xFF, 0xFF, 0, 6, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1]);
    m.extend_from_slice(&size.to_be_bytes());
    m.extend_from_slice(&(size / 8).to_be_bytes());
    m
}

/// Reads until the server closes the connection (or `limit` passes); returns when it closed.
fn closed_within(s: &mut TcpStream, limit: Duration, drip: bool) -> Option<Duration> {
    let t0 = Instant::now();
    s.set_read_timeout(Some(Duration::from_millis(100))).ok()?;
    let mut b = [0u8; 4096];
    while t0.elapsed() < limit {
        match s.read(&mut b) {
            Ok(0) => return Some(t0.elapsed()),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Some(t0.elapsed()),
            Err(_) => {}
        }
        if drip && s.write_all(&[0x5A]).is_err() {
            return Some(t0.elapsed());
        }
    }
    None
}

#[test]
fn declared_but_unsent_payloads_are_cut_off_and_counted() {
    let srv = server(Duration::from_millis(800));
    let addr = srv.tcp_addr();
    // 20 clients each claim 60 MB: 3 of them stall, the rest drip a byte per read tick.
    let mut conns: Vec<(TcpStream, bool)> = (0..20)
        .map(|i| {
            let mut s = TcpStream::connect(addr).expect("connect");
            s.write_all(&greeting_and_big_header(60 << 20))
                .expect("send header");
            (s, i % 7 != 0)
        })
        .collect();
    let handles: Vec<_> = conns
        .drain(..)
        .map(|(mut s, drip)| {
            std::thread::spawn(move || closed_within(&mut s, Duration::from_secs(10), drip))
        })
        .collect();
    for h in handles {
        let closed = h.join().expect("client thread");
        let t = closed.expect("the server closed the connection");
        assert!(
            t >= Duration::from_millis(500),
            "closed after {t:?}: too early"
        );
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while srv.partial_timeouts() < 20 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(srv.partial_timeouts(), 20);

    // Still serving: a whole message that arrives slowly but within the timeout is handled
    // (an ECHO answered), and the server's clock restarts with each message.
    let mut s = TcpStream::connect(addr).expect("connect after the flood");
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    s.write_all(&[0, 0, 0, 0, 0, 0, 0, 13, 0, 0, 0, 0, 0, 0, 0, 0])
        .expect("version");
    for _ in 0..3 {
        let echo = Header::new(cmd::ECHO, 0, 0, 0, 0).to_small_bytes();
        for b in echo {
            s.write_all(&[b]).expect("one byte");
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(400));
    }
    let mut got = Vec::new();
    let mut b = [0u8; 256];
    let t0 = Instant::now();
    while got.len() < 16 * 4 && t0.elapsed() < Duration::from_secs(5) {
        match s.read(&mut b) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&b[..n]),
            Err(_) => break,
        }
    }
    let echoes = got
        .chunks(16)
        .filter(|h| h.len() == 16 && u16::from_be_bytes([h[0], h[1]]) == cmd::ECHO)
        .count();
    assert_eq!(echoes, 3, "{got:?}");
    assert_eq!(
        srv.partial_timeouts(),
        20,
        "the slow but complete client was not cut off"
    );
    srv.stop();
}

#[test]
fn incomplete_messages_of_all_clients_are_capped_together() {
    let p = Arc::new(StaticProvider::new());
    for (n, pv) in demo_pvs("C:") {
        p.add(n, pv);
    }
    let mut cfg = ServerConfig::loopback_ephemeral();
    cfg.max_array_bytes = 64 << 20;
    cfg.max_partial_bytes = 1 << 20;
    let srv = Server::start(cfg, p).expect("server starts on loopback");
    let addr = srv.tcp_addr();
    // Each client claims 60 MB and sends 300 KB of it: the fourth takes the total over 1 MiB.
    let chunk = vec![0x5Au8; 300 << 10];
    let mut conns = Vec::new();
    for _ in 0..4 {
        let mut s = TcpStream::connect(addr).expect("connect");
        s.write_all(&greeting_and_big_header(60 << 20))
            .expect("send header");
        // The server may close this one mid-write: that is the point.
        let _ = s.write_all(&chunk);
        conns.push(s);
        std::thread::sleep(Duration::from_millis(100));
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while srv.partial_over_cap() < 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        srv.partial_over_cap(),
        1,
        "the newest offender is closed (held {})",
        srv.partial_bytes()
    );
    assert!(srv.partial_bytes() <= 1 << 20, "{}", srv.partial_bytes());
    // The first three stay connected; the fourth was closed.
    let last = conns.pop().expect("four clients");
    let mut last = last;
    assert!(closed_within(&mut last, Duration::from_secs(2), false).is_some());
    for s in &mut conns {
        assert!(closed_within(s, Duration::from_millis(300), false).is_none());
    }
    // Closing them gives their bytes back.
    drop(conns);
    let deadline = Instant::now() + Duration::from_secs(5);
    while srv.partial_bytes() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(srv.partial_bytes(), 0);
    srv.stop();
}
