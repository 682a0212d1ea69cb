//! Our client against a scripted server that does what pvAccessCPP peers do and p4p never does:
//! segmented messages and cached type definitions (0xFD/0xFE). Discovery goes over TCP (name
//! server mode), so no UDP is involved.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client_common::fake::{full_update, full_update_in, FakeServer, Script};
use ndflow_pva::client::{Client, ClientConfig, ClientError, MonitorEvent, MonitorOptions};
use ndflow_pva::nt::ntndarray::{ntndarray_desc, Dimension, NtNdArray};
use ndflow_pva::{ByteOrder, NumArray, Value};

const T: Duration = Duration::from_secs(10);

fn frame(nx: usize, ny: usize, uid: i32) -> Value {
    let px: Vec<u16> = (0..nx * ny)
        .map(|i| (i as i32).wrapping_mul(7).wrapping_add(uid) as u16)
        .collect();
    NtNdArray {
        value: Some(NumArray::from_slice(&px)),
        codec_name: String::new(),
        codec_parameters: None,
        compressed_size: (nx * ny * 2) as i64,
        uncompressed_size: (nx * ny * 2) as i64,
        dimension: [nx, ny]
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

fn check(v: &Value, nx: usize, ny: usize, uid: i32) {
    let f = NtNdArray::from_value(ntndarray_desc(), v).expect("nt");
    assert_eq!(f.unique_id, uid);
    let px = f.value.expect("value").to_vec::<u16>().expect("u16");
    assert_eq!(px.len(), nx * ny);
    for (i, p) in px.iter().enumerate() {
        assert_eq!(*p, (i as i32).wrapping_mul(7).wrapping_add(uid) as u16);
    }
}

/// TCP-only discovery through the fake server as name server.
fn config(fs: &FakeServer) -> ClientConfig {
    ClientConfig {
        addr_list: Vec::new(),
        auto_addr_list: false,
        name_servers: vec![fs.addr],
        loopback_only: true,
        ..ClientConfig::loopback(0)
    }
}

#[test]
fn segmented_messages_and_type_cache() {
    // Big-endian too: pvAccess byte order is per message and BE IOCs (PowerPC) exist.
    for order in [ByteOrder::Little, ByteOrder::Big] {
        segmented_and_cached(order);
    }
}

fn segmented_and_cached(order: ByteOrder) {
    let (nx, ny) = (200, 150);
    let mut script = Script::new("FAKE:image", ntndarray_desc().clone(), frame(nx, ny, 1));
    script.segment = Some(16 * 1024);
    script.cache = true;
    script.order = order;
    script.updates = Arc::new(move |i| {
        (i < 20).then(|| full_update_in(order, ntndarray_desc(), &frame(nx, ny, 2 + i as i32)))
    });
    let fs = FakeServer::start(script);
    let c = Client::new(config(&fs)).expect("client");

    // Two GETs on one connection: the second INIT reply reuses the cached type (0xFE).
    for _ in 0..2 {
        let (d, v) = c.get("FAKE:image", "", T).expect("get");
        assert_eq!(&d, ntndarray_desc());
        check(&v, nx, ny, 1);
    }
    let m = c
        .monitor(
            "FAKE:image",
            MonitorOptions {
                queue_size: 64,
                ..Default::default()
            },
        )
        .expect("monitor");
    assert!(matches!(m.recv(T), Ok(MonitorEvent::Connected(_))));
    for uid in 1..=21 {
        match m.recv(T).expect("update") {
            MonitorEvent::Data { value, .. } => check(&value, nx, ny, uid),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(m.stats().squashed, 0);
    assert_eq!(fs.connections.load(std::sync::atomic::Ordering::Relaxed), 1);

    let e = c
        .get("FAKE:other", "", Duration::from_millis(300))
        .unwrap_err();
    assert!(matches!(e, ClientError::Timeout(_)), "{e}");
}

/// Receive throughput of the client alone (the fake server writes one pre-encoded 32 MB update
/// over and over). `cargo test --release -p ndflow-pva --test integration
/// client_fake_server:: -- --ignored --nocapture`.
#[test]
#[ignore]
fn bench_client_receive_32mb() {
    let (nx, ny, count) = (4096usize, 4096usize, 60usize);
    let big = full_update(ntndarray_desc(), &frame(nx, ny, 5));
    let mut script = Script::new("FAKE:big", ntndarray_desc().clone(), frame(2, 2, 0));
    script.updates = Arc::new(move |i| (i < count).then(|| Arc::clone(&big)));
    let fs = FakeServer::start(script);
    let c = Client::new(config(&fs)).expect("client");
    let m = c
        .monitor(
            "FAKE:big",
            MonitorOptions {
                queue_size: 4,
                ..Default::default()
            },
        )
        .expect("monitor");
    let mut t0 = None;
    let mut n = 0usize;
    while m.stats().updates < count as u64 + 1 {
        let Ok(ev) = m.recv(Duration::from_millis(200)) else {
            continue;
        };
        match ev {
            MonitorEvent::Data { value, .. } => {
                let f = NtNdArray::from_value(ntndarray_desc(), &value).expect("nt");
                if f.unique_id == 5 {
                    assert_eq!(f.value.map(|a| a.len()), Some(nx * ny));
                    t0.get_or_insert_with(Instant::now);
                    n += 1;
                }
            }
            MonitorEvent::Connected(_) => {}
            other => panic!("{other:?}"),
        }
    }
    let st = m.stats();
    let secs = t0.map(|t| t.elapsed().as_secs_f64()).unwrap_or(1.0);
    let bytes = st.bytes as f64 - 100.0;
    println!(
        "fake server -> ndflow client: {} updates of {} MB received, {} handed over ({} squashed) \
         in {secs:.2} s = {:.0} MB/s",
        st.updates - 1,
        nx * ny * 2 / 1_000_000,
        n,
        st.squashed,
        bytes / 1e6 / secs
    );
}
