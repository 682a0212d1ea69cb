//! Searching over TCP (EPICS_CA_NAME_SERVERS, as libca): a client with no UDP destination at
//! all finds channels through a circuit to the server, whose SEARCH replies arrive on that
//! circuit. Loopback only: the server binds 127.0.0.1 and the client's automatic list is off.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ndflow_ca::testing::demo_provider;
use ndflow_ca::{CaValue, Client, ClientConfig, ClientError, Server, ServerConfig};

const T: Duration = Duration::from_secs(5);

fn name_server_client(ns: SocketAddr) -> Client {
    let cfg = ClientConfig {
        addr_list: Vec::new(),
        auto_addr_list: false,
        name_servers: vec![ns],
        ..ClientConfig::loopback(ns.port())
    };
    assert!(cfg.search_targets().is_empty(), "no UDP search");
    Client::new(cfg).unwrap()
}

#[test]
fn the_server_answers_searches_on_a_tcp_circuit() {
    let srv = Server::start(ServerConfig::loopback_ephemeral(), demo_provider("NS:")).unwrap();
    let c = name_server_client(srv.tcp_addr());
    assert_eq!(c.get("NS:long", T).unwrap().value, CaValue::Long(vec![42]));
    // A second channel reuses the name server's circuit.
    assert_eq!(
        c.get("NS:double", T).unwrap().value,
        CaValue::Double(vec![1.5])
    );
    c.put("NS:long", CaValue::Long(vec![7]), true, T).unwrap();
    assert_eq!(c.get("NS:long", T).unwrap().value, CaValue::Long(vec![7]));
}

#[test]
fn a_name_unknown_to_the_name_server_is_not_found_in_time() {
    let srv = Server::start(ServerConfig::loopback_ephemeral(), demo_provider("NS:")).unwrap();
    let c = name_server_client(srv.tcp_addr());
    let t0 = Instant::now();
    let e = c
        .get("NS:no_such_pv", Duration::from_millis(600))
        .unwrap_err();
    assert!(
        matches!(e, ClientError::NotFound(ref n) if n == "NS:no_such_pv"),
        "{e}"
    );
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    // The circuit is still good for names the server has.
    assert_eq!(c.get("NS:long", T).unwrap().value, CaValue::Long(vec![42]));
}

#[test]
fn an_unreachable_name_server_is_retried_and_reported_as_not_found() {
    // A port nobody listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let c = name_server_client(port);
    let e = c.get("NS:long", Duration::from_millis(500)).unwrap_err();
    assert!(matches!(e, ClientError::NotFound(_)), "{e}");
}
