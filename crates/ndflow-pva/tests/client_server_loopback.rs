//! ndflow server → ndflow client over 127.0.0.1: lossless pipelined streaming (every uniqueId,
//! in order) and a client that disappears mid-stream without stalling the poster.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ndflow_pva::client::{Client, ClientConfig, MonitorEvent, MonitorOptions, PutValue};
use ndflow_pva::nt::ntndarray::{ntndarray_desc, Dimension, NtNdArray};
use ndflow_pva::server::{Server, ServerConfig, SharedPv, StaticProvider};
use ndflow_pva::{BitSet, NumArray, Value};

const N: i32 = 10_000;
const NX: usize = 8;
const NY: usize = 4;

fn frame(uid: i32) -> Value {
    let px: Vec<u8> = (0..NX * NY).map(|i| (i as i32 + uid) as u8).collect();
    NtNdArray {
        value: Some(NumArray::from_slice(&px)),
        codec_name: String::new(),
        codec_parameters: None,
        compressed_size: (NX * NY) as i64,
        uncompressed_size: (NX * NY) as i64,
        dimension: [NX, NY]
            .iter()
            .map(|&n| Dimension {
                size: n as i32,
                full_size: n as i32,
                binning: 1,
                ..Default::default()
            })
            .collect(),
        unique_id: uid,
        data_time_stamp: Default::default(),
        attribute: Vec::new(),
        alarm: (0, 0, String::new()),
        time_stamp: Default::default(),
    }
    .to_value()
}

fn serve(name: &str) -> (Server, SharedPv) {
    let pv = SharedPv::new(ntndarray_desc().clone(), frame(0));
    pv.set_lossless(true);
    let provider = Arc::new(StaticProvider::new());
    provider.add(name, pv.clone());
    let server = Server::start(ServerConfig::loopback_ephemeral(), provider).expect("server");
    (server, pv)
}

fn pipelined() -> MonitorOptions {
    MonitorOptions {
        queue_size: 8,
        pipeline: true,
        ..Default::default()
    }
}

/// Receive until uniqueId `last`, checking the sequence is exactly `first`, `first + 1`, ...
fn consume_exact(m: &ndflow_pva::client::Monitor, first: i32, last: i32) -> i32 {
    let desc = ntndarray_desc();
    let mut want = first;
    while want <= last {
        match m.recv(Duration::from_secs(10)).expect("event") {
            MonitorEvent::Data { value, overrun, .. } => {
                let f = NtNdArray::from_value(desc, &value).expect("nt");
                assert_eq!(f.unique_id, want, "frame lost or reordered");
                assert!(overrun.is_empty());
                if want % 997 == 0 {
                    let px = f.value.expect("value").to_vec::<u8>().expect("u8");
                    let exp: Vec<u8> = (0..NX * NY).map(|i| (i as i32 + want) as u8).collect();
                    assert_eq!(px, exp);
                }
                want += 1;
            }
            MonitorEvent::Connected(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    want
}

/// Wait until the subscription runs: its first update is the initial value (uniqueId 0).
fn wait_started(m: &ndflow_pva::client::Monitor) {
    consume_exact(m, 0, 0);
}

#[test]
fn lossless_pipelined_stream_is_exact() {
    let (server, pv) = serve("LB:image");
    // UDP search to the server's ephemeral port.
    let c = Client::new(ClientConfig::loopback(server.udp_addr().port())).expect("client");
    let m = c.monitor("LB:image", pipelined()).expect("monitor");
    wait_started(&m);
    let t0 = Instant::now();
    let producer = {
        let pv = pv.clone();
        std::thread::spawn(move || {
            for uid in 1..=N {
                pv.post(frame(uid), &BitSet::new()).expect("lossless post");
            }
        })
    };
    let got = consume_exact(&m, 1, N);
    producer.join().expect("producer");
    let secs = t0.elapsed().as_secs_f64();
    let st = m.stats();
    println!(
        "lossless: {} frames exact in {secs:.2} s ({:.0} frames/s), {} acks, server overruns {}",
        got - 1,
        f64::from(N) / secs,
        st.acks_sent,
        pv.overruns()
    );
    assert_eq!(st.squashed, 0);
    assert_eq!(st.overrun_updates, 0);
    assert_eq!(pv.overruns(), 0);
    // PUT and GET through the same server while we are here.
    let (d, v) = c
        .get("LB:image", "field(uniqueId)", Duration::from_secs(5))
        .expect("get");
    assert_eq!(v.field(&d, "uniqueId"), Some(&Value::I32(N)));
    let e = c
        .put(
            "LB:image",
            &[("uniqueId", PutValue::Int(1))],
            Duration::from_secs(5),
        )
        .unwrap_err();
    println!("put to a PV without handler: {e}");
    drop(m);
    server.stop();
}

#[test]
fn vanishing_client_does_not_stall_the_poster() {
    let (server, pv) = serve("LB:image2");
    let cfg = || ClientConfig {
        addr_list: Vec::new(),
        auto_addr_list: false,
        name_servers: vec![server.tcp_addr()],
        loopback_only: true,
        ..ClientConfig::loopback(0)
    };
    let good = Client::new(cfg()).expect("client");
    let m = good.monitor("LB:image2", pipelined()).expect("monitor");
    // A second client subscribes pipelined and never reads: its window fills up and lossless
    // posts must wait for it — until it goes away.
    let stalled = Client::new(cfg()).expect("client");
    let sm = stalled.monitor("LB:image2", pipelined()).expect("monitor");
    wait_started(&m);
    wait_started(&sm);
    assert_eq!(pv.subscribers(), 2);

    let posted = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let longest = Arc::new(AtomicU64::new(0));
    let producer = {
        let (pv, posted, done, longest) = (
            pv.clone(),
            Arc::clone(&posted),
            Arc::clone(&done),
            Arc::clone(&longest),
        );
        std::thread::spawn(move || {
            for uid in 1..=2000 {
                let t = Instant::now();
                pv.post(frame(uid), &BitSet::new())
                    .expect("post must not time out");
                longest.fetch_max(t.elapsed().as_millis() as u64, Ordering::Relaxed);
                posted.fetch_add(1, Ordering::Relaxed);
            }
            done.store(true, Ordering::Relaxed);
        })
    };
    let reader = std::thread::spawn(move || {
        let n = consume_exact(&m, 1, 2000);
        (n, m.stats())
    });
    // Let the stalled subscriber block the poster, then make it vanish.
    std::thread::sleep(Duration::from_millis(300));
    let blocked_at = posted.load(Ordering::Relaxed);
    assert!(blocked_at < 2000, "the stalled window must hold the poster");
    let t_drop = Instant::now();
    drop(sm);
    drop(stalled);
    producer.join().expect("producer");
    let resume = t_drop.elapsed();
    let (n, st) = reader.join().expect("reader");
    println!(
        "poster blocked at {blocked_at} posts by the stalled client; finished {:?} after it \
         vanished; longest post {} ms; good client got {} frames exact ({} acks)",
        resume,
        longest.load(Ordering::Relaxed),
        n - 1,
        st.acks_sent
    );
    assert!(done.load(Ordering::Relaxed));
    assert!(resume < Duration::from_secs(4), "poster stalled {resume:?}");
    server.stop();
}
