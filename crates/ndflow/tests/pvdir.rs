//! The PV directory every protocol reads: names and record types from the declarations, puts
//! validated by the graph, busy records completing when their operation has ended, access rules.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ndflow::access::{AccessRule, AccessRules, Rights};
use ndflow::config::Config;
use ndflow::pva::ImagePvs;
use ndflow::pvdir::{ClientInfo, Face, PvDirectory, RecordType};
use ndflow_core::ParamValue;
use ndflow_runtime::Graph;

const CFG: &str = r#"prefix = "D:"
[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = 32
MaxSizeY = 16
ImageMode = "Multiple"
NumImages = 5
AcquireTime = 0.0
AcquirePeriod = 0.02

[[port]]
name = "HDF1"
type = "hdf5"
prefix = "HDF1:"
NDArrayPort = "SIM1"
"#;

fn setup(rules: AccessRules) -> (Arc<Graph>, Arc<PvDirectory>) {
    let cfg = Config::parse(CFG, "t.toml").unwrap();
    let g = Arc::new(Graph::new(1));
    cfg.build(&g, &ImagePvs::default()).unwrap();
    let dir = PvDirectory::build(&g, &cfg.prefix, &cfg.port_prefixes(), rules).unwrap();
    (g, dir)
}

fn local() -> ClientInfo {
    ClientInfo {
        host: "127.0.0.1".into(),
        user: "tester".into(),
        protocol: "test",
    }
}

/// Every value posted for `slots`, in order, as (slot, value).
type Posts = Arc<parking_lot::Mutex<Vec<(usize, ParamValue)>>>;

fn record(dir: &PvDirectory, slots: &[usize]) -> Posts {
    let seen: Posts = Arc::default();
    let (seen2, slots) = (seen.clone(), slots.to_vec());
    dir.add_sink(Arc::new(move |s, v| {
        if slots.contains(&s) {
            seen2.lock().push((s, v.clone()));
        }
    }));
    seen
}

/// Puts through the directory and returns the outcome and how long completion took.
fn put(
    dir: &PvDirectory,
    name: &str,
    v: ParamValue,
    c: Option<&ClientInfo>,
) -> (Result<(), String>, Duration) {
    let id = dir.find(name).unwrap_or_else(|| panic!("no PV {name}"));
    let (tx, rx) = mpsc::channel();
    let t0 = Instant::now();
    dir.put(
        id,
        v,
        c,
        true,
        Box::new(move |r| {
            let _ = tx.send(r);
        }),
    );
    let r = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("put never completed");
    (r, t0.elapsed())
}

#[test]
fn names_faces_and_record_types_follow_the_declarations() {
    let (g, dir) = setup(AccessRules::default());
    let rec = |n: &str| {
        dir.entry(dir.find(n).unwrap_or_else(|| panic!("{n}")))
            .unwrap()
            .record
    };
    assert_eq!(rec("D:cam1:SizeX"), RecordType::Longout);
    assert_eq!(rec("D:cam1:SizeX_RBV"), RecordType::Longin);
    assert_eq!(rec("D:cam1:AcquireTime"), RecordType::Ao);
    assert_eq!(rec("D:cam1:ImageMode"), RecordType::Mbbo);
    assert_eq!(rec("D:cam1:ImageMode_RBV"), RecordType::Mbbi);
    assert_eq!(rec("D:cam1:Acquire"), RecordType::Bo);
    assert_eq!(rec("D:HDF1:Capture"), RecordType::Busy);
    assert_eq!(rec("D:HDF1:Capture_RBV"), RecordType::Bi);
    assert_eq!(rec("D:HDF1:FilePath"), RecordType::Waveform);
    assert_eq!(rec("D:HDF1:FullFileName_RBV"), RecordType::Waveform);
    assert_eq!(rec("D:HDF1:NDArrayPort"), RecordType::Stringout);
    let e = dir.entry(dir.find("D:cam1:SizeX_RBV").unwrap()).unwrap();
    assert_eq!(e.face, Face::Readback);
    assert!(dir.is_writable(dir.find("D:cam1:SizeX").unwrap()));
    assert!(!dir.is_writable(dir.find("D:cam1:SizeX_RBV").unwrap()));
    g.shutdown();
}

#[test]
fn acquire_put_completes_when_the_acquisition_has_ended() {
    let (g, dir) = setup(AccessRules::default());
    let (r, took) = put(&dir, "D:cam1:Acquire", "Acquire".into(), Some(&local()));
    assert_eq!(r, Ok(()));
    // Five frames 20 ms apart: completion waits for the last one.
    assert!(
        took >= Duration::from_millis(70),
        "completed after {took:?}"
    );
    assert_eq!(g.get("SIM1", "ArrayCounter").unwrap(), ParamValue::Int(5));
    assert_eq!(g.get("SIM1", "Acquire").unwrap(), ParamValue::Int(0));
    // Stopping completes at once.
    let (r, _) = put(&dir, "D:cam1:Acquire", 0.into(), Some(&local()));
    assert_eq!(r, Ok(()));
    g.shutdown();
}

#[test]
fn refused_puts_change_nothing_and_say_why() {
    let (g, dir) = setup(AccessRules::default());
    let (r, _) = put(&dir, "D:cam1:SizeX", (-4).into(), Some(&local()));
    let msg = r.unwrap_err();
    assert!(msg.contains("SizeX") && msg.contains("-4"), "{msg}");
    assert_eq!(g.get("SIM1", "SizeX").unwrap(), ParamValue::Int(32));
    let (r, _) = put(&dir, "D:cam1:SizeX_RBV", 4.into(), Some(&local()));
    assert!(r.unwrap_err().contains("read-only"));
    // A refused busy put completes at once with the refusal.
    let (r, _) = put(&dir, "D:cam1:Acquire", "Sometimes".into(), Some(&local()));
    assert!(r.unwrap_err().contains("Acquire"));
    g.shutdown();
}

#[test]
fn access_rules_decide_rights_per_pv_host_and_user() {
    let rules = AccessRules {
        rules: vec![
            AccessRule {
                pvs: "D:cam1:*".into(),
                hosts: vec![],
                users: vec!["operator".into()],
                rights: Rights::Write,
            },
            AccessRule {
                pvs: "D:cam1:*".into(),
                hosts: vec![],
                users: vec![],
                rights: Rights::Read,
            },
            AccessRule {
                pvs: "D:HDF1:FilePath*".into(),
                hosts: vec![],
                users: vec![],
                rights: Rights::None,
            },
        ],
    };
    let (g, dir) = setup(rules);
    let (r, _) = put(&dir, "D:cam1:SizeX", 8.into(), Some(&local()));
    assert!(r.unwrap_err().contains("no write access"));
    assert_eq!(g.get("SIM1", "SizeX").unwrap(), ParamValue::Int(32));
    let op = ClientInfo {
        host: "127.0.0.1".into(),
        user: "operator".into(),
        protocol: "test",
    };
    assert_eq!(put(&dir, "D:cam1:SizeX", 8.into(), Some(&op)).0, Ok(()));
    assert_eq!(g.get("SIM1", "SizeX").unwrap(), ParamValue::Int(8));
    assert_eq!(dir.rights("D:HDF1:FilePath", &op), Rights::None);
    assert_eq!(dir.rights("D:HDF1:FileName", &op), Rights::Write);
    // Readbacks are never writable, whatever the rules say.
    assert_eq!(dir.rights("D:cam1:SizeX_RBV", &op), Rights::Read);
    g.shutdown();
}

#[test]
fn changes_reach_every_sink_at_a_bounded_rate() {
    let (g, dir) = setup(AccessRules::default());
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let slot = dir
        .slot_of(dir.find("D:cam1:NumImages").unwrap())
        .map(|s| (s.store.clone(), s.idx))
        .unwrap();
    let target = dir
        .entry(dir.find("D:cam1:NumImages").unwrap())
        .unwrap()
        .slot;
    dir.add_sink(Arc::new(move |s, v| {
        if s == target {
            seen2.lock().push(v.clone());
        }
    }));
    let _publisher = dir.start_publisher().unwrap();
    for i in 1..=10_000i64 {
        slot.0.set(slot.1, i).unwrap();
    }
    std::thread::sleep(Duration::from_millis(200));
    let seen = seen.lock();
    assert!(!seen.is_empty() && seen.len() < 100, "{} posts", seen.len());
    assert_eq!(seen.last(), Some(&ParamValue::Int(10_000)));
    g.shutdown();
}

/// Posts come from the publisher and from put threads at once (a put flushes what it changed).
/// However the threads interleave, the last value a view is given is the parameter's current
/// value: a slow view must never be handed an older value after a newer one.
#[test]
fn concurrent_posts_never_leave_a_view_with_a_stale_value() {
    let (g, dir) = setup(AccessRules::default());
    let id = dir.find("D:cam1:NumImages").unwrap();
    let target = dir.entry(id).unwrap().slot;
    let (store, idx) = dir.slot_of(id).map(|s| (s.store.clone(), s.idx)).unwrap();
    let last = Arc::new(parking_lot::Mutex::new(None));
    let last2 = last.clone();
    dir.add_sink(Arc::new(move |s, v| {
        if s == target {
            // A view that is sometimes slow (a lock held by a sender, a busy core).
            if let ParamValue::Int(i) = v {
                std::thread::sleep(Duration::from_micros((*i as u64 * 37) % 300));
            }
            *last2.lock() = Some(v.clone());
        }
    }));
    let _publisher = dir.start_publisher().unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let putters: Vec<_> = (0..2)
        .map(|k| {
            let (dir, stop) = (dir.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    n += 1;
                    let v = ParamValue::Float(0.001 * ((n % 7) as f64 + k as f64));
                    put(&dir, "D:cam1:AcquireTime", v, None).0.unwrap();
                }
            })
        })
        .collect();
    for round in 0..20 {
        for i in 1..=200i64 {
            store.set(idx, round * 1000 + i).unwrap();
            if i % 50 == 0 {
                std::thread::sleep(Duration::from_micros(300));
            }
        }
        std::thread::sleep(Duration::from_millis(30));
        let want = ParamValue::Int(round * 1000 + 200);
        assert_eq!(last.lock().clone(), Some(want), "round {round}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for p in putters {
        p.join().unwrap();
    }
    g.shutdown();
}

/// A busy record's transitions all reach the views, however short the operation: a single
/// frame with no exposure still shows Acquire going to 1 and back to 0 (clients arm by
/// watching for the 1), and the last value posted is the current one.
#[test]
fn busy_record_transitions_are_never_folded_away() {
    let (g, dir) = setup(AccessRules::default());
    let target = dir.entry(dir.find("D:cam1:Acquire").unwrap()).unwrap().slot;
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    dir.add_sink(Arc::new(move |s, v| {
        if s == target {
            seen2.lock().push(v.clone());
        }
    }));
    let _publisher = dir.start_publisher().unwrap();
    for (k, v) in [
        ("ImageMode", ParamValue::Str("Single".into())),
        ("AcquireTime", ParamValue::Float(0.0)),
        ("AcquirePeriod", ParamValue::Float(0.0)),
    ] {
        put(&dir, &format!("D:cam1:{k}"), v, None).0.unwrap();
    }
    for round in 0..20 {
        std::thread::sleep(Duration::from_millis(15)); // the publisher's initial round is over
        seen.lock().clear();
        let (r, _) = put(&dir, "D:cam1:Acquire", ParamValue::Int(1), Some(&local()));
        r.unwrap();
        assert!(g.wait_idle(Duration::from_secs(10)));
        let deadline = Instant::now() + Duration::from_secs(5);
        while seen.lock().last() != Some(&ParamValue::Int(0)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let seen = seen.lock();
        assert!(
            seen.contains(&ParamValue::Int(1)),
            "round {round}: {seen:?}"
        );
        assert_eq!(seen.last(), Some(&ParamValue::Int(0)), "round {round}");
    }
    g.shutdown();
}

/// A client that sees an operation end (Acquire back to 0) and then reads a counter must read
/// its final value: what the operation changed is posted before its end, even when no put is
/// waiting for it (the acquisition was started by another client or by the config).
#[test]
fn an_operation_end_is_posted_after_what_it_changed() {
    let (g, dir) = setup(AccessRules::default());
    let acquire = dir.entry(dir.find("D:cam1:Acquire").unwrap()).unwrap().slot;
    let counter = dir
        .entry(dir.find("D:cam1:ArrayCounter_RBV").unwrap())
        .unwrap()
        .slot;
    let seen = record(&dir, &[acquire, counter]);
    let _publisher = dir.start_publisher().unwrap();
    g.put("SIM1", "AcquirePeriod", 0.0).unwrap();
    for round in 1..=10i64 {
        g.put("SIM1", "ArrayCounter", 0i64).unwrap();
        std::thread::sleep(Duration::from_millis(15));
        seen.lock().clear();
        g.put("SIM1", "Acquire", 1i64).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let done = |s: &Vec<(usize, ParamValue)>| {
            s.iter()
                .any(|(slot, v)| *slot == acquire && *v == ParamValue::Int(0))
        };
        while !done(&seen.lock()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let seen = seen.lock();
        let end = seen
            .iter()
            .position(|(slot, v)| *slot == acquire && *v == ParamValue::Int(0))
            .unwrap_or_else(|| panic!("round {round}: no end posted: {seen:?}"));
        let last_count = seen[..end]
            .iter()
            .rev()
            .find(|(slot, _)| *slot == counter)
            .map(|(_, v)| v.clone());
        assert_eq!(
            last_count,
            Some(ParamValue::Int(5)),
            "round {round}: {seen:?}"
        );
    }
    g.shutdown();
}

/// The start of an operation is posted after what the start changed: a client that sees
/// `Capture_RBV` = 1 and then reads `NumCaptured_RBV` reads the new capture's 0, not the last
/// capture's count (ophyd-async counts its frames from that read).
#[test]
fn an_operation_start_is_posted_after_what_it_reset() {
    let (g, dir) = setup(AccessRules::default());
    let slot = |name: &str| dir.entry(dir.find(name).unwrap()).unwrap().slot;
    let (capture, captured) = (slot("D:HDF1:Capture"), slot("D:HDF1:NumCaptured_RBV"));
    let seen = record(&dir, &[capture, captured]);
    let _publisher = dir.start_publisher().unwrap();
    for (k, v) in [
        ("FileWriteMode", ParamValue::Str("Stream".into())),
        ("LazyOpen", ParamValue::Str("Yes".into())),
        ("NumCapture", ParamValue::Int(0)),
    ] {
        put(&dir, &format!("D:HDF1:{k}"), v, None).0.unwrap();
    }
    let hdf = g.port("HDF1").unwrap().params().clone();
    for round in 0..10 {
        // What the previous capture left (as if it had written 7 frames).
        hdf.set_by_name("NumCaptured", 7i64).unwrap();
        std::thread::sleep(Duration::from_millis(25));
        seen.lock().clear();
        let id = dir.find("D:HDF1:Capture").unwrap();
        dir.put(
            id,
            ParamValue::Int(1),
            Some(&local()),
            true,
            Box::new(|_| {}),
        );
        let seen = seen.lock().clone();
        let start = seen
            .iter()
            .position(|(s, v)| *s == capture && *v == ParamValue::Int(1))
            .unwrap_or_else(|| panic!("round {round}: Capture = 1 not posted: {seen:?}"));
        assert!(
            seen[..start]
                .iter()
                .any(|(s, v)| *s == captured && *v == ParamValue::Int(0)),
            "round {round}: NumCaptured = 0 must come before Capture = 1: {seen:?}"
        );
        put(&dir, "D:HDF1:Capture", ParamValue::Int(0), None)
            .0
            .unwrap();
    }
    g.shutdown();
}

/// After a blocking plugin chain, the plugin's counters reach clients before the driver's
/// Acquire = 0, as areaDetector's blocking callbacks update them first: a client that sees
/// the end and reads a plugin's ArrayCounter_RBV reads the final count.
#[test]
fn blocking_plugin_counters_are_final_when_the_acquisition_ends() {
    let cfg = Config::parse(
        &CFG.replace(
            "[[port]]\nname = \"HDF1\"",
            "[[port]]\nname = \"ROI1\"\ntype = \"roi\"\nprefix = \"ROI1:\"\nNDArrayPort = \"SIM1\"\nBlockingCallbacks = \"Yes\"\n\n[[port]]\nname = \"HDF1\"",
        ),
        "t.toml",
    )
    .unwrap();
    let g = Arc::new(Graph::new(1));
    cfg.build(&g, &ImagePvs::default()).unwrap();
    let dir = PvDirectory::build(
        &g,
        &cfg.prefix,
        &cfg.port_prefixes(),
        AccessRules::default(),
    )
    .unwrap();
    let slot = |name: &str| dir.entry(dir.find(name).unwrap()).unwrap().slot;
    let (acquire, counter) = (slot("D:cam1:Acquire"), slot("D:ROI1:ArrayCounter_RBV"));
    let seen = record(&dir, &[acquire, counter]);
    let _publisher = dir.start_publisher().unwrap();
    g.put("SIM1", "AcquirePeriod", 0.0).unwrap();
    for round in 1..=5i64 {
        std::thread::sleep(Duration::from_millis(15));
        seen.lock().clear();
        g.put("SIM1", "Acquire", 1i64).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let end = loop {
            let s = seen.lock().clone();
            if let Some(i) = s
                .iter()
                .position(|(slot, v)| *slot == acquire && *v == ParamValue::Int(0))
            {
                break (i, s);
            }
            assert!(Instant::now() < deadline, "round {round}: no end posted");
            std::thread::sleep(Duration::from_millis(1));
        };
        let (i, s) = end;
        let last = s[..i]
            .iter()
            .rev()
            .find(|(slot, _)| *slot == counter)
            .map(|(_, v)| v.clone());
        assert_eq!(
            last,
            Some(ParamValue::Int(5 * round)),
            "round {round}: {s:?}"
        );
    }
    g.shutdown();
}
