//! Lossless posts written by the posting thread itself (server/direct.rs): every frame arrives
//! intact and in order whether it went straight to the socket, through the connection's writer
//! (a slow client closes the window), or was left half written at the post's deadline.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::server_support;
use crate::server_support::Raw;
use ndflow_pva::client::{Client, ClientConfig, MonitorEvent, MonitorOptions};
use ndflow_pva::nt::ntndarray::{ntndarray_desc, NtNdArray};
use ndflow_pva::server::{Server, ServerConfig, SharedPv, StaticProvider};
use ndflow_pva::transport::{cmd, subcmd};
use ndflow_pva::{BitSet, NumArray, Value};

/// Pixel `i` of frame `uid`: every frame differs everywhere, so a mixed-up frame shows.
fn pixel(i: usize, uid: i32) -> u16 {
    (i as u32).wrapping_mul(7).wrapping_add(uid as u32 * 131) as u16
}

fn frame(uid: i32, nx: i32, ny: i32) -> Value {
    let px: Vec<u16> = (0..(nx * ny) as usize).map(|i| pixel(i, uid)).collect();
    server_support::image_value(uid, &NumArray::from_slice(&px), nx, ny)
}

/// Asserts `v` is frame `uid` exactly.
fn check(v: &Value, uid: i32, nx: i32, ny: i32) {
    let f = NtNdArray::from_value(ntndarray_desc(), v).expect("NTNDArray");
    assert_eq!(f.unique_id, uid, "frame lost or reordered");
    let px = f.value.expect("value").to_vec::<u16>().expect("u16 pixels");
    assert_eq!(px.len(), (nx * ny) as usize);
    let bad = (0..px.len()).find(|&i| px[i] != pixel(i, uid));
    assert_eq!(bad, None, "frame {uid}: first wrong pixel");
}

fn serve(direct: bool, nx: i32, ny: i32) -> (Server, SharedPv) {
    let pv = SharedPv::new(ntndarray_desc().clone(), frame(0, nx, ny));
    pv.set_lossless(true);
    let provider = Arc::new(StaticProvider::new());
    provider.add("DW:image", pv.clone());
    let mut cfg = ServerConfig::loopback_ephemeral();
    cfg.direct_write = direct;
    (Server::start(cfg, provider).expect("server"), pv)
}

/// Posts frames 1..=n from a thread while our client takes them (sleeping `pause` after each),
/// checking each one; returns the server's direct-write count.
fn stream(direct: bool, n: i32, pause: Duration) -> u64 {
    let (nx, ny) = (512, 256);
    let (server, pv) = serve(direct, nx, ny);
    let client = Client::new(ClientConfig::loopback(server.udp_addr().port())).expect("client");
    let opts = MonitorOptions {
        queue_size: 4,
        pipeline: true,
        ..Default::default()
    };
    let m = client.monitor("DW:image", opts).expect("monitor");
    let mut want = 0;
    let mut poster = None;
    while want <= n {
        match m.recv(Duration::from_secs(10)).expect("event") {
            MonitorEvent::Data { value, overrun, .. } => {
                check(&value, want, nx, ny);
                assert!(overrun.is_empty(), "nothing squashed");
                if want == 0 {
                    // Subscribed (the initial value came): start posting.
                    let pv = pv.clone();
                    poster = Some(std::thread::spawn(move || {
                        for uid in 1..=n {
                            pv.post(frame(uid, nx, ny), &BitSet::new())
                                .expect("lossless post");
                        }
                    }));
                }
                want += 1;
                std::thread::sleep(pause);
            }
            MonitorEvent::Connected(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    poster.expect("posting").join().expect("poster");
    assert_eq!(pv.overruns(), 0);
    assert_eq!(m.stats().squashed, 0);
    assert_eq!(m.stats().overrun_updates, 0);
    // Nothing more arrives.
    assert!(matches!(
        m.recv(Duration::from_millis(200)),
        Err(ndflow_pva::client::ClientError::Timeout(_))
    ));
    server.stats().direct_writes
}

#[test]
fn fast_client_gets_every_frame_mostly_written_by_the_poster() {
    let n = 300;
    let direct = stream(true, n, Duration::ZERO);
    eprintln!("{direct} of {n} frames written by the poster");
    assert!(direct > 0, "the direct path was taken");
}

#[test]
fn slow_client_still_gets_every_frame() {
    let n = 60;
    // The client takes 5 ms per frame: the window closes, posts queue, the poster waits for
    // room and writes the queued frames itself when an ack wakes it.
    let direct = stream(true, n, Duration::from_millis(5));
    eprintln!("{direct} of {n} frames written by the poster");
    assert!(direct >= 1, "the first frames go direct");
}

/// A raw pipelined subscriber to a lossless `nx` x `ny` frame PV with an initial window of
/// `window`; returns it with its ioid and sid, the initial frame taken.
fn raw_subscriber(server: &Server, window: u32, nx: i32, ny: i32) -> (Raw, u32, u32, Value) {
    let mut c = Raw::connect(server.tcp_addr());
    c.s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let sid = c.create("DW:image").unwrap();
    let ioid = c.id();
    c.init(
        cmd::MONITOR,
        sid,
        ioid,
        subcmd::INIT | subcmd::PIPELINE,
        "record[queueSize=4,pipeline=true]",
        Some(window),
    )
    .unwrap();
    c.start(sid, ioid);
    let desc = ntndarray_desc();
    let mut v = Value::default_for(desc);
    c.monitor_update(ioid, desc, &mut v);
    check(&v, 0, nx, ny);
    (c, sid, ioid, v)
}

#[test]
fn frames_queued_while_the_window_is_closed_go_through_the_writer() {
    let (nx, ny) = (64, 64);
    let (server, pv) = serve(true, nx, ny);
    // Window 2: the initial value takes one, frame 1 (written by the poster) the other.
    let (mut c, sid, ioid, mut v) = raw_subscriber(&server, 2, nx, ny);
    let desc = ntndarray_desc();
    let far = Instant::now() + Duration::from_secs(20);
    // Let the writer task let go of the socket after sending the initial value.
    std::thread::sleep(Duration::from_millis(100));
    for uid in 1..=3 {
        pv.post_deadline(frame(uid, nx, ny), &BitSet::new(), far)
            .expect("post");
    }
    assert_eq!(server.stats().direct_writes, 1, "frames 2 and 3 queued");
    c.monitor_update(ioid, desc, &mut v);
    check(&v, 1, nx, ny);
    assert!(c.quiet_for(Duration::from_millis(200)), "window closed");
    // No poster waits: the ack goes to the connection's writer, which sends the queue.
    c.ack(sid, ioid, 2);
    for uid in 2..=3 {
        c.monitor_update(ioid, desc, &mut v);
        check(&v, uid, nx, ny);
    }
    assert_eq!(server.stats().direct_writes, 1);
    // Window open again and nothing queued: the next frame goes direct again.
    c.ack(sid, ioid, 1);
    std::thread::sleep(Duration::from_millis(100));
    pv.post_deadline(frame(4, nx, ny), &BitSet::new(), far)
        .expect("post");
    c.monitor_update(ioid, desc, &mut v);
    check(&v, 4, nx, ny);
    assert_eq!(server.stats().direct_writes, 2);
}

#[test]
fn direct_write_off_sends_everything_through_the_writer() {
    assert_eq!(stream(false, 100, Duration::ZERO), 0);
}

#[test]
fn a_post_past_its_deadline_mid_frame_leaves_the_rest_to_the_writer() {
    // 32 MiB frames do not fit in the socket buffers of a client that is not reading.
    let (nx, ny) = (4096, 4096);
    let (server, pv) = serve(true, nx, ny);
    let (mut c, _sid, ioid, mut v) = raw_subscriber(&server, 4, nx, ny);
    let desc = ntndarray_desc();
    // Nobody reads: the post gives up waiting at its deadline, with the frame half sent.
    let t = Instant::now();
    pv.post_deadline(
        frame(1, nx, ny),
        &BitSet::new(),
        Instant::now() + Duration::from_millis(300),
    )
    .expect("post");
    let took = t.elapsed();
    assert!(took >= Duration::from_millis(250), "{took:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert_eq!(server.stats().direct_writes, 1);
    // A second post meanwhile must queue behind the half-written one.
    let second = {
        let pv = pv.clone();
        std::thread::spawn(move || {
            pv.post_deadline(
                frame(2, nx, ny),
                &BitSet::new(),
                Instant::now() + Duration::from_secs(20),
            )
        })
    };
    // The writer task finishes frame 1, then frame 2 follows intact.
    c.monitor_update(ioid, desc, &mut v);
    check(&v, 1, nx, ny);
    c.monitor_update(ioid, desc, &mut v);
    check(&v, 2, nx, ny);
    assert_eq!(second.join().expect("poster"), Ok(()));
}
