//! A client that stalls or disconnects mid-stream never stalls a poster: latest-wins posts stay
//! fast whatever the client does, and a lossless post blocked on a client's window is released
//! as soon as that client goes away (or at its deadline while the client merely stalls).

use std::io::Read;
use std::time::{Duration, Instant};

use crate::server_support;
use crate::server_support::{start, Raw};
use ndflow_pva::nt::ntndarray::ntndarray_desc;
use ndflow_pva::nt::scalar;
use ndflow_pva::server::{PostError, SharedPv};
use ndflow_pva::transport::{cmd, subcmd};
use ndflow_pva::{BitSet, NumArray, ScalarType, Value};

fn frame(uid: i32, pixels: &NumArray) -> Value {
    server_support::image_value(uid, pixels, 1024, 1024)
}

fn big_pixels() -> NumArray {
    NumArray::from_slice(&vec![7u16; 1024 * 1024])
}

fn i32_pv() -> SharedPv {
    SharedPv::new(
        scalar::desc(ScalarType::I32),
        scalar::value(ScalarType::I32, Value::I32(0)),
    )
}

fn post_i32(pv: &SharedPv, x: i32, deadline: Instant) -> Result<(), PostError> {
    let d = pv.desc();
    let mut v = pv.current();
    let b = scalar::set_value(&d, &mut v, Value::I32(x)).unwrap();
    pv.post_deadline(v, &b, deadline)
}

/// Subscribe with pipelining and a window of 1; returns the connection after the first update.
fn pipelined_subscriber(addr: std::net::SocketAddr, name: &str) -> Raw {
    let mut c = Raw::connect(addr);
    let sid = c.create(name).unwrap();
    let ioid = c.id();
    let desc = c
        .init(
            cmd::MONITOR,
            sid,
            ioid,
            subcmd::INIT | subcmd::PIPELINE,
            "record[queueSize=2,pipeline=true]",
            Some(1),
        )
        .unwrap();
    c.start(sid, ioid);
    let mut v = Value::default_for(&desc);
    c.monitor_update(ioid, &desc, &mut v);
    c
}

#[test]
fn lossless_post_released_when_client_disconnects() {
    let pv = i32_pv();
    pv.set_lossless(true);
    let (server, _p) = start(vec![("T:l", pv.clone())]);
    let c = pipelined_subscriber(server.tcp_addr(), "T:l");
    // Window used up: the queue (2) fills, the third post must wait.
    let far = Instant::now() + Duration::from_secs(30);
    post_i32(&pv, 1, far).unwrap();
    post_i32(&pv, 2, far).unwrap();
    let poster = {
        let pv = pv.clone();
        std::thread::spawn(move || {
            let t = Instant::now();
            let r = post_i32(&pv, 3, far);
            (r, t.elapsed())
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    assert!(!poster.is_finished(), "lossless post waits for the window");
    drop(c); // client vanishes mid-stream
    let (r, waited) = poster.join().unwrap();
    assert_eq!(r, Ok(()));
    assert!(waited < Duration::from_secs(3), "released after {waited:?}");
    // And later posts do not wait at all.
    let t = Instant::now();
    for x in 4..100 {
        post_i32(&pv, x, far).unwrap();
    }
    assert!(t.elapsed() < Duration::from_secs(1));
    assert_eq!(pv.subscribers(), 0);
}

#[test]
fn lossless_post_times_out_on_a_stalled_client() {
    let pv = i32_pv();
    pv.set_lossless(true);
    let (server, _p) = start(vec![("T:l", pv.clone())]);
    let _c = pipelined_subscriber(server.tcp_addr(), "T:l");
    let far = Instant::now() + Duration::from_secs(30);
    post_i32(&pv, 1, far).unwrap();
    post_i32(&pv, 2, far).unwrap();
    let t = Instant::now();
    let r = post_i32(&pv, 3, Instant::now() + Duration::from_millis(200));
    assert_eq!(r, Err(PostError::Timeout));
    assert!(t.elapsed() >= Duration::from_millis(190) && t.elapsed() < Duration::from_secs(2));
}

#[test]
fn latest_wins_posts_never_block_on_a_client_that_stops_reading_or_leaves() {
    let pixels = big_pixels();
    let pv = SharedPv::new(ntndarray_desc().clone(), frame(0, &pixels));
    let (server, _p) = start(vec![("T:img", pv.clone())]);
    // One client that subscribes and never reads, one that reads half a frame and leaves.
    let mut stalled = Raw::connect(server.tcp_addr());
    let mut leaver = Raw::connect(server.tcp_addr());
    for c in [&mut stalled, &mut leaver] {
        let sid = c.create("T:img").unwrap();
        let ioid = c.id();
        c.init(cmd::MONITOR, sid, ioid, subcmd::INIT, "", None)
            .unwrap();
        c.start(sid, ioid);
    }
    let mut half = vec![0u8; 1024 * 1024];
    leaver.s.read_exact(&mut half).unwrap();
    drop(leaver);
    let t = Instant::now();
    for uid in 1..=300 {
        pv.post(frame(uid, &pixels), &BitSet::new()).unwrap();
    }
    let took = t.elapsed();
    eprintln!("300 posts of 2 MiB frames with a stalled and a departed client: {took:?}");
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert!(pv.overruns() > 0, "the stalled client's queue squashes");
    // The server still serves newcomers.
    let mut c = Raw::connect(server.tcp_addr());
    assert!(c.create("T:img").is_ok());
    drop(stalled);
    let t = Instant::now();
    while server.stats().connections > 1 && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(server.stats().connections, 1);
}
