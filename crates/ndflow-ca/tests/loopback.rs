//! Our client against our server over loopback: every native type and DBR family, puts
//! (plain, notify, slow, refused, failing), monitors, enum, char waveform, a 2 MiB image with
//! extended headers, record fields, alarms, unknown PVs, and search over UDP.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ndflow_ca::header::{cmd, eca, message, string_message, Header, DBE_VALUE};
use ndflow_ca::testing::{demo_provider, image_ramp, IMAGE_LEN, PATH_TEXT};
use ndflow_ca::{
    CaValue, Client, ClientConfig, ClientError, DbrType, Family, NativeType, Server, ServerConfig,
    StaticProvider, Values,
};

const T: Duration = Duration::from_secs(5);

fn start() -> (Server, Client, Arc<StaticProvider>) {
    let provider = demo_provider("T:");
    let mut cfg = ServerConfig::loopback_ephemeral();
    cfg.max_array_bytes = 100_000_000;
    let srv = Server::start(cfg, provider.clone()).unwrap();
    assert!(srv.tcp_addr().ip().is_loopback());
    assert_eq!(srv.tcp_addr().port(), srv.udp_addr().port());
    let client = Client::new(ClientConfig::loopback(srv.udp_addr().port())).unwrap();
    (srv, client, provider)
}

#[test]
fn get_every_type_and_family() {
    let (_srv, c, _) = start();
    let r = c.get("T:double", T).unwrap();
    assert_eq!(r.value, CaValue::Double(vec![1.5]));
    assert!(r.stamp.is_some());
    let r = c
        .get_as(
            "T:double",
            DbrType::new(Family::Ctrl, NativeType::Double),
            T,
        )
        .unwrap();
    assert_eq!(r.info.units, "mm");
    assert_eq!(r.info.precision, 3);
    assert_eq!(
        (r.info.lower_disp_limit, r.info.upper_disp_limit),
        (-10.0, 10.0)
    );
    assert_eq!(
        (r.info.lower_ctrl_limit, r.info.upper_ctrl_limit),
        (-5.0, 5.0)
    );
    // Every PV in every family × type: conversions succeed or fail cleanly.
    for pv in [
        "double", "float", "long", "short", "enum", "string", "char", "doubles", "ro",
    ] {
        let name = format!("T:{pv}");
        for fam in Family::ALL {
            for t in NativeType::ALL {
                let r = c.get_as(&name, DbrType::new(fam, t), T);
                match (pv, t, &r) {
                    // "hello" is no number.
                    ("string", t, Err(ClientError::Eca { code, .. }))
                        if t != NativeType::String =>
                    {
                        assert_eq!(*code, eca::GETFAIL)
                    }
                    (_, _, Ok(r)) => assert_eq!(r.dbr, DbrType::new(fam, t)),
                    _ => panic!("{name} as {fam:?} {t:?}: {r:?}"),
                }
            }
        }
    }
    let r = c
        .get_as(
            "T:double",
            DbrType::new(Family::Plain, NativeType::String),
            T,
        )
        .unwrap();
    assert_eq!(r.value, CaValue::String("1.500".into()));
    let r = c
        .get_as("T:double", DbrType::new(Family::Plain, NativeType::Long), T)
        .unwrap();
    assert_eq!(r.value, CaValue::Long(vec![1]));
    let r = c.get_as("T:double", DbrType::ClassName, T).unwrap();
    assert_eq!(r.value, CaValue::String("ao".into()));
}

#[test]
fn enum_by_index_and_string() {
    let (_srv, c, _) = start();
    let r = c
        .get_as("T:enum", DbrType::new(Family::Gr, NativeType::Enum), T)
        .unwrap();
    assert_eq!(r.info.enum_strings, vec!["Off", "On", "Auto"]);
    assert_eq!(r.value, CaValue::Enum(1));
    let s = c
        .get_as("T:enum", DbrType::new(Family::Plain, NativeType::String), T)
        .unwrap();
    assert_eq!(s.value, CaValue::String("On".into()));
    c.put("T:enum", CaValue::String("Auto".into()), true, T)
        .unwrap();
    assert_eq!(c.get("T:enum", T).unwrap().value, CaValue::Enum(2));
    c.put("T:enum", CaValue::Short(vec![0]), true, T).unwrap();
    assert_eq!(c.get("T:enum", T).unwrap().value, CaValue::Enum(0));
    let e = c.put("T:enum", CaValue::String("Maybe".into()), true, T);
    assert_eq!(e.unwrap_err().eca(), Some(eca::PUTFAIL));
    let e = c.put("T:enum", CaValue::Short(vec![9]), true, T);
    assert_eq!(e.unwrap_err().eca(), Some(eca::PUTFAIL));
}

#[test]
fn char_waveform_text() {
    let (_srv, c, _) = start();
    let info = c.info("T:char", T).unwrap();
    assert_eq!((info.native, info.count), (NativeType::Char, 256));
    let r = c.get("T:char", T).unwrap();
    let CaValue::Char(b) = &r.value else { panic!() };
    assert_eq!(&b[..PATH_TEXT.len()], PATH_TEXT.as_bytes());
    let s = c
        .get_as("T:char", DbrType::new(Family::Plain, NativeType::String), T)
        .unwrap();
    assert_eq!(s.value, CaValue::String(PATH_TEXT.into()));
    c.put("T:char", CaValue::String("/tmp/new".into()), true, T)
        .unwrap();
    let s = c
        .get_as("T:char", DbrType::new(Family::Plain, NativeType::String), T)
        .unwrap();
    assert_eq!(s.value, CaValue::String("/tmp/new".into()));
    // Count larger than the current one: zero padded.
    let r = c
        .get_count(
            "T:char",
            DbrType::new(Family::Plain, NativeType::Char),
            256,
            T,
        )
        .unwrap();
    let CaValue::Char(b) = &r.value else { panic!() };
    assert_eq!(b.len(), 256);
    assert_eq!(&b[..9], b"/tmp/new\0");
}

#[test]
fn large_image_with_extended_header() {
    let (_srv, c, _) = start();
    let t0 = Instant::now();
    let r = c.get("T:image", T).unwrap();
    let CaValue::Short(v) = &r.value else {
        panic!()
    };
    assert_eq!(v.len(), IMAGE_LEN);
    assert!(v.iter().enumerate().all(|(k, &x)| x == image_ramp(k)));
    eprintln!("1 MiB-element image in {:?}", t0.elapsed());
    // As doubles (8 MiB): converted by the server.
    let r = c
        .get_as(
            "T:image",
            DbrType::new(Family::Plain, NativeType::Double),
            T,
        )
        .unwrap();
    let CaValue::Double(v) = &r.value else {
        panic!()
    };
    assert_eq!(v[12345], f64::from(image_ramp(12345)));
    // A large put both ways.
    let big: Vec<f64> = (0..100).map(f64::from).collect();
    c.put("T:doubles", CaValue::Double(big.clone()), true, T)
        .unwrap();
    assert_eq!(c.get("T:doubles", T).unwrap().value, CaValue::Double(big));
    let long: Vec<i16> = (0..40_000).map(|k| (k % 1000) as i16).collect();
    c.put("T:image", CaValue::Short(long.clone()), true, T)
        .unwrap();
    assert_eq!(c.get("T:image", T).unwrap().value, CaValue::Short(long));
}

#[test]
fn too_large_is_refused_with_default_limit() {
    let provider = demo_provider("T:");
    let srv = Server::start(ServerConfig::loopback_ephemeral(), provider).unwrap();
    let c = Client::new(ClientConfig::loopback(srv.udp_addr().port())).unwrap();
    let e = c.get("T:image", T).unwrap_err();
    assert_eq!(e.eca(), Some(eca::TOLARGE), "{e}");
    // The circuit survives.
    assert_eq!(c.get("T:long", T).unwrap().value, CaValue::Long(vec![42]));
}

#[test]
fn puts_notify_slow_refused_failing() {
    let (_srv, c, _) = start();
    c.put("T:double", CaValue::Double(vec![2.25]), true, T)
        .unwrap();
    assert_eq!(
        c.get("T:double", T).unwrap().value,
        CaValue::Double(vec![2.25])
    );
    c.put("T:double", CaValue::String("4.5".into()), true, T)
        .unwrap();
    assert_eq!(
        c.get("T:double", T).unwrap().value,
        CaValue::Double(vec![4.5])
    );
    let e = c.put("T:double", CaValue::String("abc".into()), true, T);
    assert_eq!(e.unwrap_err().eca(), Some(eca::PUTFAIL));
    c.put("T:long", CaValue::Double(vec![7.9]), false, T)
        .unwrap();
    let deadline = Instant::now() + T;
    while c.get("T:long", T).unwrap().value != CaValue::Long(vec![7]) {
        assert!(Instant::now() < deadline);
    }
    c.put("T:string", CaValue::String("x".repeat(60)), true, T)
        .unwrap();
    assert_eq!(
        c.get("T:string", T).unwrap().value,
        CaValue::String("x".repeat(39))
    );
    let t0 = Instant::now();
    c.put("T:slow", CaValue::Double(vec![3.0]), true, T)
        .unwrap();
    assert!(t0.elapsed() >= Duration::from_millis(500));
    assert_eq!(
        c.get("T:slow", T).unwrap().value,
        CaValue::Double(vec![3.0])
    );
    let info = c.info("T:ro", T).unwrap();
    assert!(info.read && !info.write);
    assert!(matches!(
        c.put("T:ro", CaValue::Double(vec![1.0]), true, T),
        Err(ClientError::NoWriteAccess)
    ));
    let e = c
        .put("T:fail", CaValue::Long(vec![1]), true, T)
        .unwrap_err();
    assert_eq!(e.eca(), Some(eca::PUTFAIL));
    assert_eq!(c.get("T:fail", T).unwrap().value, CaValue::Long(vec![0]));
}

/// The next whole message on `s` (header, payload).
fn read_message(s: &mut std::net::TcpStream) -> (Header, Vec<u8>) {
    use std::io::Read;
    let mut buf = vec![0u8; 16];
    s.read_exact(&mut buf).unwrap();
    let (h, _) = Header::parse(&buf, usize::MAX).unwrap().unwrap();
    let mut payload = vec![0u8; h.payload_size as usize];
    s.read_exact(&mut payload).unwrap();
    (h, payload)
}

/// A raw CA client of `srv`, past VERSION, HOST_NAME and CLIENT_NAME.
fn raw_client(srv: &Server) -> std::net::TcpStream {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(srv.tcp_addr()).unwrap();
    s.set_read_timeout(Some(T)).unwrap();
    let mut hello = message(Header::new(cmd::VERSION, 0, 13, 0, 0), &[]);
    hello.extend(string_message(Header::new(cmd::HOST_NAME, 0, 0, 0, 0), "h"));
    hello.extend(string_message(
        Header::new(cmd::CLIENT_NAME, 0, 0, 0, 0),
        "u",
    ));
    s.write_all(&hello).unwrap();
    s
}

/// Asks for channel `name` as `cid`; the server's CREATE_CHAN or CREATE_CH_FAIL.
fn create_raw(s: &mut std::net::TcpStream, cid: u32, name: &str) -> Header {
    use std::io::Write;
    s.write_all(&string_message(
        Header::new(cmd::CREATE_CHAN, 0, 0, cid, 13),
        name,
    ))
    .unwrap();
    loop {
        let (h, _) = read_message(s);
        if matches!(h.command, cmd::CREATE_CHAN | cmd::CREATE_CH_FAIL) {
            return h;
        }
    }
}

/// Subscribes `subid` to channel `sid` as DBR_LONG, DBE_VALUE; the server's first answer.
fn subscribe_raw(s: &mut std::net::TcpStream, sid: u32, subid: u32) -> Header {
    use std::io::Write;
    let long = DbrType::new(Family::Plain, NativeType::Long).code();
    let mut mask = [0u8; 16];
    mask[12..14].copy_from_slice(&DBE_VALUE.to_be_bytes());
    s.write_all(&message(
        Header::new(cmd::EVENT_ADD, long, 1, sid, subid),
        &mask,
    ))
    .unwrap();
    read_message(s).0
}

/// On the wire, a put's completion never overtakes the monitor update of the value it wrote,
/// as in an EPICS IOC: pyepics reads its monitored copy right after `caput(wait=True)` and
/// must see the write.
#[test]
fn a_put_completion_follows_its_monitor_update() {
    use std::io::Write;
    let (srv, _c, _) = start();
    let mut s = raw_client(&srv);
    let created = create_raw(&mut s, 1, "T:long");
    assert_eq!(created.command, cmd::CREATE_CHAN);
    let sid = created.p2;
    assert_eq!(subscribe_raw(&mut s, sid, 7).command, cmd::EVENT_ADD);
    let long = DbrType::new(Family::Plain, NativeType::Long).code();
    for i in 0..200i32 {
        let put = Header::new(cmd::WRITE_NOTIFY, long, 1, sid, 1000 + i as u32);
        s.write_all(&message(put, &i.to_be_bytes())).unwrap();
        let mut seen = None;
        loop {
            let (h, p) = read_message(&mut s);
            match h.command {
                cmd::EVENT_ADD => seen = Some(i32::from_be_bytes([p[0], p[1], p[2], p[3]])),
                cmd::WRITE_NOTIFY => {
                    assert_eq!(h.p1, eca::NORMAL);
                    break;
                }
                _ => {}
            }
        }
        assert_eq!(
            seen,
            Some(i),
            "put {i}: the update came after the completion"
        );
    }
}

/// A connection may hold `max_channels_per_conn` channels and as many subscriptions: one more
/// is refused (CREATE_CH_FAIL, ECA_ALLOCMEM) and counted, and the connection keeps working.
#[test]
fn channels_and_subscriptions_over_a_connections_limit_are_refused_and_counted() {
    let mut cfg = ServerConfig::loopback_ephemeral();
    cfg.max_channels_per_conn = 2;
    let srv = Server::start(cfg, demo_provider("T:")).unwrap();
    let mut s = raw_client(&srv);
    let mut sid = 0;
    for (cid, name) in [(1, "T:long"), (2, "T:double"), (3, "T:string")] {
        let h = create_raw(&mut s, cid, name);
        let want = if cid < 3 {
            cmd::CREATE_CHAN
        } else {
            cmd::CREATE_CH_FAIL
        };
        assert_eq!((h.command, h.p1), (want, cid), "{name}");
        if cid == 1 {
            sid = h.p2;
        }
    }
    assert_eq!(srv.limit_refusals(), 1);
    for subid in [10, 11, 12] {
        let h = subscribe_raw(&mut s, sid, subid);
        if subid < 12 {
            assert_eq!((h.command, h.p2), (cmd::EVENT_ADD, subid));
        } else {
            assert_eq!(h.command, cmd::ERROR);
            assert_eq!(h.p2, eca::ALLOCMEM, "{}", eca::name(h.p2));
        }
    }
    assert_eq!(srv.limit_refusals(), 2);
}

#[test]
fn monitors_values_alarms_properties() {
    let (_srv, c, p) = start();
    let m = c.monitor("T:long").unwrap();
    assert_eq!(m.recv_timeout(T).unwrap().value, CaValue::Long(vec![42]));
    c.put("T:long", CaValue::Long(vec![43]), true, T).unwrap();
    assert_eq!(m.recv_timeout(T).unwrap().value, CaValue::Long(vec![43]));
    use ndflow_ca::PvProvider;
    let pv = p.lookup("T:long").unwrap();
    pv.set_alarm(3, 2);
    let r = m.recv_timeout(T).unwrap();
    assert_eq!((r.status, r.severity), (3, 2));
    let sevr = c.get("T:long.SEVR", T).unwrap();
    assert_eq!(sevr.value, CaValue::Enum(2));
    let s = c
        .get_as(
            "T:long.SEVR",
            DbrType::new(Family::Plain, NativeType::String),
            T,
        )
        .unwrap();
    assert_eq!(s.value, CaValue::String("MAJOR".into()));
    // Posting many values quickly: the monitor sees the last one.
    for i in 0..1000 {
        pv.post(CaValue::Long(vec![i]));
    }
    let mut last = None;
    while let Ok(r) = m.recv_timeout(Duration::from_millis(300)) {
        last = Some(r.value);
    }
    assert_eq!(last, Some(CaValue::Long(vec![999])));
    // Property monitor on .EGU.
    let egu = c
        .monitor_as("T:long.EGU", None, ndflow_ca::header::DBE_VALUE)
        .unwrap();
    assert_eq!(
        egu.recv_timeout(T).unwrap().value,
        CaValue::String("counts".into())
    );
    let mut meta = (*pv.meta()).clone();
    meta.units = "mm".into();
    pv.set_meta(meta);
    assert_eq!(
        egu.recv_timeout(T).unwrap().value,
        CaValue::String("mm".into())
    );
    drop(m);
    drop(egu);
    // Many monitors on one circuit.
    let subs: Vec<_> = (0..200).map(|_| c.monitor("T:double").unwrap()).collect();
    for s in &subs {
        assert!(s.recv_timeout(T).is_ok());
    }
    c.put("T:double", CaValue::Double(vec![-1.0]), true, T)
        .unwrap();
    for s in &subs {
        assert_eq!(
            s.recv_timeout(T).unwrap().value,
            CaValue::Double(vec![-1.0])
        );
    }
}

#[test]
fn fields_and_unknown_names() {
    let (_srv, c, _) = start();
    let g = |n: &str| c.get(n, T).map(|r| r.value);
    assert_eq!(g("T:double.VAL").unwrap(), CaValue::Double(vec![1.5]));
    assert_eq!(g("T:double.EGU").unwrap(), CaValue::String("mm".into()));
    assert_eq!(
        g("T:double.DESC").unwrap(),
        CaValue::String("A double".into())
    );
    assert_eq!(
        g("T:double.NAME").unwrap(),
        CaValue::String("T:double".into())
    );
    assert_eq!(g("T:double.RTYP").unwrap(), CaValue::String("ao".into()));
    assert_eq!(g("T:double.PREC").unwrap(), CaValue::Short(vec![3]));
    assert_eq!(g("T:double.HOPR").unwrap(), CaValue::Double(vec![10.0]));
    assert_eq!(g("T:double.LOPR").unwrap(), CaValue::Double(vec![-10.0]));
    assert_eq!(g("T:double.DRVH").unwrap(), CaValue::Double(vec![5.0]));
    assert_eq!(g("T:double.DRVL").unwrap(), CaValue::Double(vec![-5.0]));
    assert_eq!(g("T:double.STAT").unwrap(), CaValue::Enum(0));
    assert_eq!(g("T:char.NELM").unwrap(), CaValue::Long(vec![256]));
    assert_eq!(g("T:doubles.NORD").unwrap(), CaValue::Long(vec![10]));
    assert!(c.get("T:double.NORD", Duration::from_millis(300)).is_err());
    assert!(c.get("T:double.FOO", Duration::from_millis(300)).is_err());
    assert!(matches!(
        c.get("T:nothing", Duration::from_millis(300)),
        Err(ClientError::NotFound(_))
    ));
    // Fields are read-only.
    assert!(c
        .put("T:double.EGU", CaValue::String("m".into()), true, T)
        .is_err());
    // Dynamic count: count 0 = current element count.
    let r = c.get("T:doubles", T).unwrap();
    assert_eq!(r.values.len(), 10);
}

#[test]
fn server_stop_disconnects_clients() {
    let (srv, c, _) = start();
    let m = c.monitor("T:long").unwrap();
    m.recv_timeout(T).unwrap();
    srv.stop();
    let deadline = Instant::now() + T;
    loop {
        match m.recv_timeout(Duration::from_millis(100)) {
            Err(ClientError::Disconnected) => break,
            _ => assert!(Instant::now() < deadline, "no disconnect"),
        }
    }
    assert!(c.get("T:long", Duration::from_millis(300)).is_err());
}

#[test]
fn values_helpers() {
    let (_srv, c, _) = start();
    let r = c
        .get_as(
            "T:doubles",
            DbrType::new(Family::Plain, NativeType::String),
            T,
        )
        .unwrap();
    assert_eq!(
        r.values,
        Values::String(
            (0..10)
                .map(|i| format!("{:.2}", f64::from(i) * 0.5))
                .collect()
        )
    );
}

#[test]
fn udp_search_datagram_and_beacons() {
    use ndflow_ca::header::{cmd, message, string_message, Header, DO_REPLY};
    let beacon_rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    beacon_rx
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut cfg = ServerConfig::loopback_ephemeral();
    cfg.beacon_addrs = vec![beacon_rx.local_addr().unwrap()];
    let srv = Server::start(cfg, demo_provider("T:")).unwrap();
    let port = srv.tcp_addr().port();
    // Beacons: RSRV_IS_UP with our port and increasing ids.
    let mut ids = Vec::new();
    let mut buf = [0u8; 1024];
    for _ in 0..3 {
        let (n, _) = beacon_rx.recv_from(&mut buf).unwrap();
        let (h, _) = Header::parse(&buf[..n], 0).unwrap().unwrap();
        assert_eq!(
            (h.command, h.data_type, h.count),
            (cmd::RSRV_IS_UP, 13, u32::from(port))
        );
        ids.push(h.p1);
    }
    assert!(ids.windows(2).all(|w| w[1] > w[0]), "{ids:?}");
    // One datagram: VERSION, a known name, an unknown one with DO_REPLY, a field.
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut d = message(Header::new(cmd::VERSION, 0, 13, 0, 0), &[]);
    d.extend(string_message(
        Header::new(cmd::SEARCH, 5, 13, 11, 11),
        "T:long",
    ));
    d.extend(string_message(
        Header::new(cmd::SEARCH, DO_REPLY, 13, 12, 12),
        "T:none",
    ));
    d.extend(string_message(
        Header::new(cmd::SEARCH, 5, 13, 13, 13),
        "T:long.EGU",
    ));
    d.extend(string_message(
        Header::new(cmd::SEARCH, 5, 13, 14, 14),
        "T:none2",
    ));
    s.send_to(&d, srv.udp_addr()).unwrap();
    let (n, _) = s.recv_from(&mut buf).unwrap();
    let mut off = 0;
    let mut got = Vec::new();
    while off < n {
        let (h, hl) = Header::parse(&buf[off..n], 1024).unwrap().unwrap();
        got.push((h.command, h.data_type, h.p2));
        off += hl + h.payload_size as usize;
    }
    assert_eq!(
        got,
        vec![
            (cmd::VERSION, 0, 0),
            (cmd::SEARCH, port, 11),
            (cmd::NOT_FOUND, DO_REPLY, 12),
            (cmd::SEARCH, port, 13)
        ]
    );
}
