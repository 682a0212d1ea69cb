//! Throughput of one monitor of 1024x1024 uint16 NTNDArray frames over loopback, against a raw
//! TCP copy of the same bytes, and the cost of encoding a frame with and without copying the
//! pixels. A measurement, not a check: run with
//! `cargo test --release -p ndflow-pva --test server_throughput -- --ignored --nocapture`.

mod server_support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ndflow_pva::nt::ntndarray::ntndarray_desc;
use ndflow_pva::server::SharedPv;
use ndflow_pva::transport::{cmd, subcmd};
use ndflow_pva::wire::header::HEADER_LEN;
use ndflow_pva::{BitSet, ByteOrder, Header, NumArray, Value, Writer};
use server_support::{start, Raw};

const NX: i32 = 1024;
const NY: i32 = 1024;
const SECONDS: f64 = 3.0;

fn frame(uid: i32, pixels: &NumArray) -> Value {
    server_support::image_value(uid, pixels, NX, NY)
}

/// Read one message into `buf` (reused); returns its header.
fn read_msg(s: &mut TcpStream, buf: &mut Vec<u8>) -> Header {
    loop {
        let mut hb = [0u8; HEADER_LEN];
        s.read_exact(&mut hb).unwrap();
        let h = Header::decode(&hb).unwrap();
        buf.resize(h.payload_len(), 0);
        s.read_exact(buf).unwrap();
        if !h.is_control() && h.command != cmd::ECHO {
            return h;
        }
    }
}

fn monitor_rate(pipeline: bool) -> (f64, f64) {
    let pixels = NumArray::from_slice(
        &(0..(NX * NY) as usize)
            .map(|i| i as u16)
            .collect::<Vec<_>>(),
    );
    let pv = SharedPv::new(ntndarray_desc().clone(), frame(0, &pixels));
    let (server, _p) = start(vec![("T:img", pv.clone())]);
    let mut c = Raw::connect(server.tcp_addr());
    let sid = c.create("T:img").unwrap();
    let ioid = c.id();
    let (sub, req, nfree) = if pipeline {
        (
            subcmd::INIT | subcmd::PIPELINE,
            "record[queueSize=4,pipeline=true]",
            Some(4),
        )
    } else {
        (subcmd::INIT, "", None)
    };
    c.init(cmd::MONITOR, sid, ioid, sub, req, nfree).unwrap();
    c.start(sid, ioid);
    let stop = Arc::new(AtomicBool::new(false));
    let poster = {
        let (pv, stop, pixels) = (pv.clone(), Arc::clone(&stop), pixels.clone());
        std::thread::spawn(move || {
            let mut uid = 0;
            while !stop.load(Ordering::Relaxed) {
                uid += 1;
                pv.post(frame(uid, &pixels), &BitSet::new()).unwrap();
                // A detector-like cadence well above what the link can carry.
                std::thread::sleep(Duration::from_micros(200));
            }
            uid
        })
    };
    let mut buf = Vec::new();
    let mut s = c.s.try_clone().unwrap();
    read_msg(&mut s, &mut buf); // initial
    let t = Instant::now();
    let (mut frames, mut bytes, mut unacked) = (0u64, 0u64, 0);
    while t.elapsed().as_secs_f64() < SECONDS {
        let h = read_msg(&mut s, &mut buf);
        assert_eq!(h.command, cmd::MONITOR);
        assert!(buf.len() > (NX * NY * 2) as usize);
        frames += 1;
        bytes += (HEADER_LEN + buf.len()) as u64;
        if pipeline {
            unacked += 1;
            if unacked >= 2 {
                c.ack(sid, ioid, unacked);
                unacked = 0;
            }
        }
    }
    let dt = t.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let posted = poster.join().unwrap();
    eprintln!(
        "  monitor (pipeline={pipeline}): {frames} frames of {} posted, {:.0} frames/s, {:.0} MB/s, squashed {}",
        posted,
        frames as f64 / dt,
        bytes as f64 / dt / 1e6,
        pv.overruns()
    );
    (frames as f64 / dt, bytes as f64 / dt / 1e6)
}

fn raw_tcp_rate() -> f64 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let msg = vec![0x5au8; (NX * NY * 2) as usize + 200];
    let stop = Arc::new(AtomicBool::new(false));
    let st = Arc::clone(&stop);
    let w = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        while !st.load(Ordering::Relaxed) {
            if s.write_all(&msg).is_err() {
                break;
            }
        }
    });
    let mut s = TcpStream::connect(addr).unwrap();
    let mut buf = vec![0u8; (NX * NY * 2) as usize + 200];
    let t = Instant::now();
    let mut bytes = 0u64;
    while t.elapsed().as_secs_f64() < SECONDS {
        s.read_exact(&mut buf).unwrap();
        bytes += buf.len() as u64;
    }
    let dt = t.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    drop(s);
    let _ = w.join();
    let mbs = bytes as f64 / dt / 1e6;
    eprintln!(
        "  raw TCP copy, same message size: {:.0} MB/s ({:.0} msgs/s)",
        mbs,
        bytes as f64 / dt / buf.len() as f64
    );
    mbs
}

fn encode_cost() {
    let pixels = NumArray::from_slice(&vec![1u16; (NX * NY) as usize]);
    let v = frame(1, &pixels);
    let bits = BitSet::from_bits(&[0]);
    let n = 200;
    let t = Instant::now();
    for _ in 0..n {
        let mut w = Writer::new(ByteOrder::NATIVE);
        v.encode_partial(ntndarray_desc(), &bits, &mut w).unwrap();
        std::hint::black_box(w.len());
    }
    let copy = t.elapsed() / n;
    let t = Instant::now();
    for _ in 0..n {
        let mut w = Writer::zero_copy(ByteOrder::NATIVE);
        v.encode_partial(ntndarray_desc(), &bits, &mut w).unwrap();
        std::hint::black_box(w.into_parts().len());
    }
    let zc = t.elapsed() / n;
    eprintln!("  encode one 2 MiB frame: copying writer {copy:?}, zero-copy writer {zc:?}");
}

#[test]
#[ignore = "measurement; run in release with --ignored --nocapture"]
fn monitor_throughput_vs_raw_tcp() {
    eprintln!("1024x1024 uint16 NTNDArray frames over loopback ({SECONDS} s each):");
    encode_cost();
    let raw = raw_tcp_rate();
    let (_, plain) = monitor_rate(false);
    let (_, piped) = monitor_rate(true);
    eprintln!(
        "  monitor / raw TCP: {:.0} % (no pipeline), {:.0} % (pipeline, ack every 2)",
        100.0 * plain / raw,
        100.0 * piped / raw
    );
}
