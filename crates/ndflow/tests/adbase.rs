//! ADBase behaviour behind the parity records: the simulated shutter opens around an
//! acquisition and closes after it, and the pool records follow the real pool as it fills.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ndflow::config::Config;
use ndflow::pva::ImagePvs;
use ndflow_core::ParamValue;
use ndflow_runtime::Graph;

fn graph(cfg: &str) -> Arc<Graph> {
    let cfg = Config::parse(cfg, "t.toml").unwrap();
    let g = Arc::new(Graph::new(1));
    cfg.build(&g, &ImagePvs::default()).unwrap();
    g
}

fn int(g: &Graph, port: &str, name: &str) -> i64 {
    g.publish_now();
    g.get(port, name).unwrap().as_i64().unwrap()
}

#[test]
fn shutter_opens_for_the_acquisition_and_closes_after() {
    let g = graph(
        r#"
[[port]]
name = "SIM1"
type = "sim"
MaxSizeX = 16
MaxSizeY = 8
ImageMode = "Multiple"
NumImages = 10
AcquireTime = 0.0
AcquirePeriod = 0.03
ShutterMode = "Detector output"
ShutterOpenDelay = 0.02
"#,
    );
    assert_eq!(int(&g, "SIM1", "ShutterStatus"), 0);
    g.put("SIM1", "Acquire", 1).unwrap();
    let t0 = Instant::now();
    let mut seen_open = false;
    while t0.elapsed() < Duration::from_secs(10) {
        if int(&g, "SIM1", "ShutterStatus") == 1 && int(&g, "SIM1", "Acquire") == 1 {
            seen_open = true;
        }
        if int(&g, "SIM1", "Acquire") == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        seen_open,
        "the shutter never showed Open during the acquisition"
    );
    assert_eq!(int(&g, "SIM1", "ArrayCounter"), 10);
    assert_eq!(
        int(&g, "SIM1", "ShutterStatus"),
        0,
        "closed after the acquisition"
    );
    // By hand, with ShutterMode None nothing moves; with EPICS PV the output follows.
    g.put("SIM1", "ShutterMode", "EPICS PV").unwrap();
    g.put("SIM1", "ShutterControl", "Open").unwrap();
    let t0 = Instant::now();
    while int(&g, "SIM1", "ShutterStatus") != 1 && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(int(&g, "SIM1", "ShutterStatus"), 1);
    assert_eq!(int(&g, "SIM1", "ShutterControlEPICS"), 1);
    g.shutdown();
}

#[test]
fn shutter_moves_by_hand_happen_in_the_order_they_were_put() {
    // An open that takes 0.2 s and a close put right after it: the close comes second, so the
    // shutter ends closed, its status with it (once, each move ran on its own thread and the
    // open's status could land after the close).
    let g = graph(
        r#"
[[port]]
name = "SIM1"
type = "sim"
MaxSizeX = 16
MaxSizeY = 8
ShutterMode = "EPICS PV"
ShutterOpenDelay = 0.2
"#,
    );
    let settled = |want: i64| {
        let t0 = Instant::now();
        let names = ["ShutterControlEPICS", "ShutterStatus", "ShutterStatusEPICS"];
        while t0.elapsed() < Duration::from_secs(5) {
            if names.iter().all(|n| int(&g, "SIM1", n) == want) {
                // Still so a moment later: no move left to land.
                std::thread::sleep(Duration::from_millis(400));
                return names.map(|n| int(&g, "SIM1", n));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        names.map(|n| int(&g, "SIM1", n))
    };
    g.put("SIM1", "ShutterControl", "Open").unwrap();
    g.put("SIM1", "ShutterControl", "Close").unwrap();
    assert_eq!(settled(0), [0, 0, 0], "closed, as last put");
    // Many quick moves without delays: the last one wins.
    g.put("SIM1", "ShutterOpenDelay", 0.0).unwrap();
    for i in 0..41 {
        let v = if i % 2 == 0 { "Open" } else { "Close" };
        g.put("SIM1", "ShutterControl", v).unwrap();
    }
    assert_eq!(settled(1), [1, 1, 1], "open, as last put");
    g.shutdown();
}

#[test]
fn pool_records_follow_the_pool_as_it_fills() {
    // A blocking StdArrays holds the newest frame; the sim's pool grows to what is in use.
    let g = graph(
        r#"
[[port]]
name = "SIM1"
type = "sim"
MaxSizeX = 64
MaxSizeY = 32
DataType = "UInt16"
ImageMode = "Multiple"
NumImages = 20
AcquireTime = 0.0
AcquirePeriod = 0.0

[[port]]
name = "IMAGE1"
type = "stdarrays"
NDArrayPort = "SIM1"
BlockingCallbacks = "Yes"
"#,
    );
    assert_eq!(int(&g, "SIM1", "PoolAllocBuffers"), 0);
    g.put("SIM1", "Acquire", 1).unwrap();
    assert!(g.wait_idle(Duration::from_secs(20)));
    g.publish_now();
    let alloc = int(&g, "SIM1", "PoolAllocBuffers");
    let used_mb = g.get("SIM1", "PoolUsedMem").unwrap().as_f64().unwrap();
    assert!(alloc >= 1, "{alloc} buffers");
    // Each buffer holds one 64x32 UInt16 frame (4096 bytes; the pool may round up).
    assert!(
        used_mb >= alloc as f64 * 4096.0 / 1e6,
        "{used_mb} MB for {alloc} buffers"
    );
    // Buffers are reused: 20 frames never need 20 allocations with one held at a time.
    assert!(alloc < 20, "{alloc} allocations for 20 frames");
    // EmptyFreeList frees what is not in use.
    g.put("SIM1", "EmptyFreeList", 1).unwrap();
    g.publish_now();
    assert_eq!(int(&g, "SIM1", "PoolFreeBuffers"), 0);
    assert_eq!(g.get("SIM1", "EmptyFreeList").unwrap(), ParamValue::Int(0));
    g.shutdown();
}
