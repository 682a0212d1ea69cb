//! Several servers on one host, as beamlines run them: the second finds the TCP port taken and
//! takes another, both share the UDP search port, and a unicast search to 127.0.0.1 (which
//! the kernel hands to one socket only) is answered by each server for its own names.

use std::time::Duration;

use ndflow_ca::header::{cmd, message, string_message, Header};
use ndflow_ca::testing::demo_provider;
use ndflow_ca::{Client, ClientConfig, Server, ServerConfig};

const T: Duration = Duration::from_secs(5);

#[test]
fn two_servers_one_port_each_found_and_read() {
    let a = Server::start(ServerConfig::loopback_ephemeral(), demo_provider("A:")).unwrap();
    let port = a.tcp_addr().port();
    // The second asks for the same port, as two IOCs with default settings do.
    let cfg = ServerConfig {
        tcp_port: port,
        udp_port: port,
        ..ServerConfig::loopback_ephemeral()
    };
    let b = Server::start(cfg, demo_provider("B:")).unwrap();
    assert_ne!(b.tcp_addr().port(), port, "a taken TCP port falls back");
    assert_eq!(a.udp_addr(), b.udp_addr());

    // One datagram asking for a name of each: two replies, each with its server's port and
    // 127.0.0.1 as the address to connect to.
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(T)).unwrap();
    let mut d = message(Header::new(cmd::VERSION, 0, 13, 0, 0), &[]);
    d.extend(string_message(
        Header::new(cmd::SEARCH, 5, 13, 1, 1),
        "A:long",
    ));
    d.extend(string_message(
        Header::new(cmd::SEARCH, 5, 13, 2, 2),
        "B:long",
    ));
    s.send_to(&d, a.udp_addr()).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    for _ in 0..2 {
        let (n, _) = s.recv_from(&mut buf).expect("a reply from each server");
        let mut off = 0;
        while off < n {
            let (h, hl) = Header::parse(&buf[off..n], 1024).unwrap().unwrap();
            if h.command == cmd::SEARCH {
                assert_eq!(h.p1, u32::from(std::net::Ipv4Addr::LOCALHOST));
                got.push((h.p2, h.data_type));
            }
            off += hl + h.payload_size as usize;
        }
    }
    got.sort();
    assert_eq!(got, vec![(1, port), (2, b.tcp_addr().port())]);
    let forwarded = a.search_counts().1 + b.search_counts().1;
    assert_eq!(forwarded, 1);

    // Our client, searching 127.0.0.1 only, reads from both; with one gone the other stays.
    let c = Client::new(ClientConfig::loopback(a.udp_addr().port())).unwrap();
    assert!(c.get("A:long", T).is_ok());
    assert!(c.get("B:long", T).is_ok());
    drop(a);
    let c = Client::new(ClientConfig::loopback(b.udp_addr().port())).unwrap();
    assert!(c.get("B:long", T).is_ok());
}

#[test]
fn a_search_flood_gets_limited_replies_and_is_counted() {
    let cfg = ServerConfig {
        search_replies_per_second: (50.0, 1000.0),
        ..ServerConfig::loopback_ephemeral()
    };
    let a = Server::start(cfg, demo_provider("F:")).unwrap();
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut d = message(Header::new(cmd::VERSION, 0, 13, 0, 0), &[]);
    d.extend(string_message(
        Header::new(cmd::SEARCH, 5, 13, 1, 1),
        "F:long",
    ));
    // 1000 searches from one address, limited to 50 replies a second: at most two seconds'
    // worth (100) of replies, plus what refills while they are sent.
    let t0 = std::time::Instant::now();
    // Paced a little, so that the kernel's socket buffers do not drop most of them.
    for i in 0..1000 {
        s.send_to(&d, a.udp_addr()).unwrap();
        if i % 50 == 49 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let mut replies = 0u64;
    let mut buf = [0u8; 1024];
    while s.recv_from(&mut buf).is_ok() {
        replies += 1;
    }
    let allowed = 100.0 + 50.0 * t0.elapsed().as_secs_f64();
    assert!(
        replies > 0 && replies as f64 <= allowed,
        "{replies} replies"
    );
    let limited = a.searches_limited();
    assert!(limited > 0, "counted");
    // Datagrams the kernel dropped got neither: replies + limited <= sent.
    assert!(replies + limited <= 1000, "{replies} + {limited}");
}
