//! Our client against a pvapy (pvAccessCPP) server on 127.0.0.1: large frames arrive segmented
//! and types come through the 0xFD/0xFE cache. Fails when the project's .venv is missing.

use std::time::{Duration, Instant};

use crate::client_common::{pixel, PyServer};
use ndflow_pva::client::{Client, MonitorEvent, MonitorOptions, PutValue};
use ndflow_pva::nt::ntndarray::NtNdArray;
use ndflow_pva::{ScalarType, Value};

const T: Duration = Duration::from_secs(15);

const TYPES: [(&str, ScalarType); 10] = [
    ("int8", ScalarType::I8),
    ("uint8", ScalarType::U8),
    ("int16", ScalarType::I16),
    ("uint16", ScalarType::U16),
    ("int32", ScalarType::I32),
    ("uint32", ScalarType::U32),
    ("int64", ScalarType::I64),
    ("uint64", ScalarType::U64),
    ("float32", ScalarType::F32),
    ("float64", ScalarType::F64),
];

fn as_f64(a: &ndflow_pva::NumArray) -> Vec<f64> {
    macro_rules! conv {
        ($t:ty) => {
            a.to_vec::<$t>()
                .expect("typed")
                .into_iter()
                .map(|x| x as f64)
                .collect()
        };
    }
    match a.scalar_type() {
        ScalarType::I8 => conv!(i8),
        ScalarType::U8 => conv!(u8),
        ScalarType::I16 => conv!(i16),
        ScalarType::U16 => conv!(u16),
        ScalarType::I32 => conv!(i32),
        ScalarType::U32 => conv!(u32),
        ScalarType::I64 => conv!(i64),
        ScalarType::U64 => conv!(u64),
        ScalarType::F32 => conv!(f32),
        ScalarType::F64 => conv!(f64),
        t => panic!("unexpected {t:?}"),
    }
}

fn next_data(m: &ndflow_pva::client::Monitor) -> Value {
    loop {
        match m.recv(T).expect("event") {
            MonitorEvent::Data { value, .. } => return value,
            MonitorEvent::Connected(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[test]
fn segmented_frames_of_all_types_and_scalar_put() {
    let Some(mut s) = PyServer::start("pvapy_server.py", "PY:") else {
        return;
    };
    let c = Client::new(s.client_config()).expect("client");
    let (d, v) = c.get(&s.pv("dbl"), "", T).expect("get");
    assert_eq!(v.field(&d, "value"), Some(&Value::F64(1.5)));
    c.put(&s.pv("dbl"), &[("value", PutValue::Float(-4.5))], T)
        .expect("put");
    let (d, v) = c.get(&s.pv("dbl"), "", T).expect("get");
    assert_eq!(v.field(&d, "value"), Some(&Value::F64(-4.5)));

    // Not pipelined: pvDatabase's pipelined monitors (pvapy 5.6) repeat values and stall now
    // and then even with pvapy's own client.
    let m = c
        .monitor(
            &s.pv("image"),
            MonitorOptions {
                queue_size: 4,
                ..Default::default()
            },
        )
        .expect("monitor");
    let _initial = next_data(&m);
    // 300 x 200 pixels: 60 kB to 480 kB per frame, far above pvAccessCPP's segment size.
    let (nx, ny) = (300usize, 200usize);
    for (uid, (name, st)) in (10..).zip(TYPES) {
        s.cmd(&format!("frames {name} {nx} {ny} 1 {uid}"));
        let desc = m.desc().expect("desc");
        // Skip a repeated earlier value should one come, but never accept a later uniqueId.
        let f = loop {
            let f = NtNdArray::from_value(&desc, &next_data(&m)).expect("nt");
            assert!(f.unique_id <= uid, "{name}: skipped a frame");
            if f.unique_id == uid {
                break f;
            }
        };
        let dims: Vec<i32> = f.dimension.iter().map(|d| d.size).collect();
        assert_eq!(dims, vec![nx as i32, ny as i32]);
        let a = f.value.expect("value");
        assert_eq!(a.scalar_type(), st, "{name}");
        let px = as_f64(&a);
        let off = if name.starts_with("float") { 0.25 } else { 0.0 };
        for y in 0..ny {
            for x in 0..nx {
                assert_eq!(px[y * nx + x], pixel(x, y, uid) + off, "{name} {x},{y}");
            }
        }
    }
    assert_eq!(m.stats().overrun_updates, 0);
    drop(m);
    s.stop();
}

/// Throughput of 32 MB frames from pvAccessCPP (segmented). `cargo test --release -p
/// ndflow-pva --test integration client_pvapy:: -- --ignored --nocapture`.
#[test]
#[ignore]
fn bench_32mb_frames_pvapy() {
    let Some(mut s) = PyServer::start("pvapy_server.py", "PY:") else {
        return;
    };
    let c = Client::new(s.client_config()).expect("client");
    let (nx, ny, count) = (4096usize, 4096usize, 40);
    let m = c
        .monitor(
            &s.pv("image"),
            MonitorOptions {
                queue_size: 4,
                ..Default::default()
            },
        )
        .expect("monitor");
    let _ = next_data(&m);
    let t0 = Instant::now();
    let (received, post) = std::thread::scope(|sc| {
        let h = sc.spawn(|| {
            let mut n = 0;
            loop {
                let desc = m.desc().expect("desc");
                let Ok(MonitorEvent::Data { value, .. }) = m.recv(Duration::from_secs(20)) else {
                    break n;
                };
                let f = NtNdArray::from_value(&desc, &value).expect("nt");
                // pvDatabase may repeat the small initial frame first.
                if f.value.map(|a| a.len()) != Some(nx * ny) {
                    continue;
                }
                n += 1;
                if f.unique_id == count {
                    break n;
                }
            }
        });
        let post = s.cmd(&format!("bench {nx} {ny} {count}"));
        (h.join().expect("consumer"), post)
    });
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "pvapy -> ndflow client: {received}/{count} frames of 33 MB in {secs:.2} s = {:.0} MB/s \
         (pvapy update loop {post} s)",
        (received * nx * ny * 2) as f64 / 1e6 / secs
    );
    s.stop();
}
