use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use ndflow_core::ParamValue;
use ndflow_runtime::{DropReason, Graph, PortHandle};

#[test]
fn multiple_mode_produces_num_images_and_counts_add_up() {
    let g = sim_graph(2);
    let p = Arc::new(TestPlugin::new());
    g.add_plugin("P1", p.clone()).unwrap();
    g.put("P1", "NDArrayPort", "DRV").unwrap();
    g.put("P1", "QueueSize", 1000).unwrap();
    configure_fast(&g, 200);
    g.put("DRV", "Acquire", 1).unwrap();
    wait_done(&g);
    let s = g.summary();
    assert_eq!(s["ports"]["DRV"]["ArrayCounter_RBV"], 200);
    assert_eq!(s["ports"]["DRV"]["NumImagesCounter_RBV"], 200);
    assert_eq!(s["ports"]["DRV"]["Acquire_RBV"], "Done");
    assert_eq!(s["ports"]["DRV"]["DetectorState_RBV"], "Idle");
    assert_eq!(s["ports"]["P1"]["ArrayCounter_RBV"], 200);
    assert_eq!(s["ports"]["P1"]["ArraysOffered_RBV"], 200);
    assert_eq!(s["ports"]["P1"]["UniqueId_RBV"], 200);
    assert_eq!(s["ports"]["P1"]["ArraySizeX_RBV"], 16);
    assert_eq!(s["ports"]["P1"]["DataType_RBV"], "UInt16");
    let a = g.plugin("P1").unwrap().accounting();
    assert!(a.is_conserved());
    assert_eq!((a.offered, a.processed), (200, 200));
}

#[test]
fn single_mode_produces_one_frame() {
    let g = sim_graph(1);
    g.put("DRV", "ImageMode", "Single").unwrap();
    g.put("DRV", "Acquire", 1).unwrap();
    wait_done(&g);
    assert_eq!(g.get("DRV", "ArrayCounter").unwrap(), ParamValue::Int(1));
}

#[test]
fn conservation_under_overload() {
    let g = sim_graph(2);
    let slow = Arc::new(TestPlugin::slow(Duration::from_millis(2)));
    g.add_plugin("SLOW", slow).unwrap();
    g.put("SLOW", "NDArrayPort", "DRV").unwrap();
    g.put("SLOW", "QueueSize", 3).unwrap();
    g.add_plugin("FAST", Arc::new(TestPlugin::new())).unwrap();
    g.put("FAST", "NDArrayPort", "SLOW").unwrap();
    configure_fast(&g, 500);
    g.put("DRV", "Acquire", 1).unwrap();
    // Check the balance repeatedly while frames flow.
    for _ in 0..50 {
        let a = g.plugin("SLOW").unwrap().accounting();
        assert!(a.is_conserved(), "{a:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
    wait_done(&g);
    let a = g.plugin("SLOW").unwrap().accounting();
    assert!(a.is_conserved());
    assert_eq!(a.offered, 500);
    assert!(
        a.dropped(DropReason::QueueFull) > 0,
        "overload must drop: {a:?}"
    );
    assert_eq!(a.processed + a.dropped(DropReason::QueueFull), 500);
    let f = g.plugin("FAST").unwrap().accounting();
    assert_eq!(f.offered, a.processed);
    g.publish_now();
    let s = g.summary();
    assert_eq!(
        s["ports"]["SLOW"]["DroppedArrays_RBV"].as_i64().unwrap() as u64,
        a.dropped(DropReason::QueueFull)
    );
}

#[test]
fn conservation_while_rewiring() {
    let g = sim_graph(2);
    g.add_plugin("A", Arc::new(TestPlugin::new())).unwrap();
    g.add_plugin("B", Arc::new(TestPlugin::slow(Duration::from_micros(200))))
        .unwrap();
    g.add_plugin("M", Arc::new(TestPlugin::new())).unwrap();
    g.put("A", "NDArrayPort", "DRV").unwrap();
    g.put("B", "NDArrayPort", "DRV").unwrap();
    g.put("B", "QueueSize", 2).unwrap();
    configure_fast(&g, 2000);
    g.put("DRV", "AcquirePeriod", 0.0002).unwrap();
    g.put("DRV", "Acquire", 1).unwrap();
    let mut i = 0;
    while g.driver("DRV").unwrap().is_busy() {
        let src = ["A", "B", "DRV", ""][i % 4];
        g.put("M", "NDArrayPort", src).unwrap();
        let m = g.plugin("M").unwrap().accounting();
        assert!(m.is_conserved(), "{m:?}");
        i += 1;
        std::thread::sleep(Duration::from_micros(500));
    }
    wait_done(&g);
    for name in ["A", "B", "M"] {
        assert!(g.plugin(name).unwrap().accounting().is_conserved());
    }
    let m = g.plugin("M").unwrap().accounting();
    assert!(m.offered > 0 && m.processed == m.offered - m.dropped_total());
    assert!(i > 4, "rewired {i} times");
}

#[test]
fn sorted_output_with_several_threads() {
    let g = sim_graph(4);
    let mut jittery = TestPlugin::new();
    jittery.jitter = true;
    jittery.threads = 4;
    g.add_plugin("J", Arc::new(jittery)).unwrap();
    let sink = Arc::new(TestPlugin::new());
    g.add_plugin("SINK", sink.clone()).unwrap();
    g.put("J", "NDArrayPort", "DRV").unwrap();
    g.put("J", "NumThreads", 4).unwrap();
    g.put("J", "QueueSize", 1000).unwrap();
    g.put("J", "SortMode", "Sorted").unwrap();
    g.put("J", "SortSize", 1000).unwrap();
    g.put("J", "SortTime", 5.0).unwrap();
    g.put("SINK", "NDArrayPort", "J").unwrap();
    g.put("SINK", "QueueSize", 1000).unwrap();
    configure_fast(&g, 300);
    g.put("DRV", "Acquire", 1).unwrap();
    wait_done(&g);
    let seen = sink.seen.lock().clone();
    assert_eq!(seen, (1..=300).collect::<Vec<i32>>());
    assert_eq!(g.plugin("J").unwrap().disordered(), 0);
}

#[test]
fn unsorted_multithreaded_output_counts_disorder() {
    let g = sim_graph(4);
    let mut jittery = TestPlugin::new();
    jittery.jitter = true;
    jittery.threads = 4;
    g.add_plugin("J", Arc::new(jittery)).unwrap();
    g.put("J", "NDArrayPort", "DRV").unwrap();
    g.put("J", "NumThreads", 4).unwrap();
    g.put("J", "QueueSize", 1000).unwrap();
    configure_fast(&g, 300);
    g.put("DRV", "Acquire", 1).unwrap();
    wait_done(&g);
    assert_eq!(g.plugin("J").unwrap().accounting().processed, 300);
    assert!(g.plugin("J").unwrap().disordered() > 0);
}

#[test]
fn blocking_callbacks_never_drop() {
    let g = sim_graph(1);
    g.add_plugin(
        "SLOW",
        Arc::new(TestPlugin::slow(Duration::from_micros(300))),
    )
    .unwrap();
    g.put("SLOW", "NDArrayPort", "DRV").unwrap();
    g.put("SLOW", "QueueSize", 1).unwrap();
    g.put("SLOW", "BlockingCallbacks", "Yes").unwrap();
    configure_fast(&g, 100);
    g.put("DRV", "Acquire", 1).unwrap();
    wait_done(&g);
    let a = g.plugin("SLOW").unwrap().accounting();
    assert_eq!((a.offered, a.processed, a.dropped_total()), (100, 100, 0));
}

#[test]
fn drop_reasons_min_time_disabled_error() {
    let g = sim_graph(2);
    g.add_plugin("MIN", Arc::new(TestPlugin::new())).unwrap();
    g.put("MIN", "NDArrayPort", "DRV").unwrap();
    g.put("MIN", "MinCallbackTime", 10.0).unwrap();
    g.add_plugin("OFF", Arc::new(TestPlugin::new())).unwrap();
    g.put("OFF", "NDArrayPort", "DRV").unwrap();
    g.put("OFF", "EnableCallbacks", "Disable").unwrap();
    let mut failing = TestPlugin::new();
    failing.fail_every = 5;
    g.add_plugin("ERR", Arc::new(failing)).unwrap();
    g.put("ERR", "NDArrayPort", "DRV").unwrap();
    g.put("ERR", "QueueSize", 100).unwrap();
    configure_fast(&g, 50);
    g.put("DRV", "Acquire", 1).unwrap();
    wait_done(&g);
    let m = g.plugin("MIN").unwrap().accounting();
    assert_eq!((m.processed, m.dropped(DropReason::MinTime)), (1, 49));
    let o = g.plugin("OFF").unwrap().accounting();
    assert_eq!(o.dropped(DropReason::Disabled), 50);
    let e = g.plugin("ERR").unwrap().accounting();
    assert_eq!((e.processed, e.dropped(DropReason::Error)), (40, 10));
    for a in [m, o, e] {
        assert!(a.is_conserved());
    }
}

#[test]
fn max_array_rate_is_min_callback_time_at_the_input() {
    let g = sim_graph(1);
    g.add_plugin("RATE", Arc::new(TestPlugin::new())).unwrap();
    g.put("RATE", "NDArrayPort", "DRV").unwrap();
    // As ADCore's MaxArrayRate_COUT: MinCallbackTime = 1 / MaxArrayRate.
    g.put("RATE", "MaxArrayRate", 0.1).unwrap();
    let p = g.plugin("RATE").unwrap();
    let get = |n: &str| g.get("RATE", n).unwrap().as_f64().unwrap();
    assert_eq!(get("MinCallbackTime"), 10.0);
    configure_fast(&g, 20);
    g.put("DRV", "Acquire", 1).unwrap();
    wait_done(&g);
    // Skipped at the input and counted there; nothing is dropped at the output.
    let a = p.accounting();
    assert_eq!((a.processed, a.dropped(DropReason::MinTime)), (1, 19));
    assert_eq!(a.dropped_output, 0);
    assert!(a.is_conserved());
    // And the rate follows MinCallbackTime (MaxArrayRate_RBV's calc); 0 lifts both.
    g.put("RATE", "MinCallbackTime", 0.5).unwrap();
    assert_eq!(get("MaxArrayRate"), 2.0);
    g.put("RATE", "MaxArrayRate", 0.0).unwrap();
    assert_eq!(get("MinCallbackTime"), 0.0);
}

#[test]
fn compressed_input_is_dropped_as_unsupported() {
    let g = Graph::new(1);
    let p = g.add_plugin("P", Arc::new(TestPlugin::new())).unwrap();
    assert!(matches!(g.port("P").unwrap(), PortHandle::Plugin(_)));
    let pool = ndflow_core::Pool::unlimited();
    let mut f = ndflow_core::NDArray::from_pixels(&pool, &[4], &[1u8, 2, 3, 4]).unwrap();
    f.codec.name = "lz4".into();
    p.offer(&Arc::new(f));
    assert!(g.wait_idle(Duration::from_secs(5)));
    let a = p.accounting();
    assert_eq!(
        (a.offered, a.processed, a.dropped(DropReason::Unsupported)),
        (1, 0, 1)
    );
    assert!(a.is_conserved());
}

#[test]
fn process_plugin_reruns_last_input() {
    let g = sim_graph(1);
    let p = Arc::new(TestPlugin::new());
    g.add_plugin("P", p.clone()).unwrap();
    g.put("P", "NDArrayPort", "DRV").unwrap();
    g.put("DRV", "ImageMode", "Single").unwrap();
    g.put("DRV", "Acquire", 1).unwrap();
    wait_done(&g);
    g.put("P", "ProcessPlugin", 1).unwrap();
    wait_done(&g);
    assert_eq!(*p.seen.lock(), vec![1, 1]);
}

#[test]
fn bad_wiring_is_refused_and_changes_nothing() {
    let g = sim_graph(1);
    g.add_plugin("A", Arc::new(TestPlugin::new())).unwrap();
    g.add_plugin("B", Arc::new(TestPlugin::new())).unwrap();
    g.put("A", "NDArrayPort", "DRV").unwrap();
    g.put("B", "NDArrayPort", "A").unwrap();
    let e = g.put("A", "NDArrayPort", "NOPE").unwrap_err().to_string();
    assert!(e.contains("NOPE") && e.contains("A"), "{e}");
    let e = g.put("A", "NDArrayPort", "B").unwrap_err().to_string();
    assert!(e.contains("loop"), "{e}");
    assert_eq!(
        g.get("A", "NDArrayPort").unwrap(),
        ParamValue::Str("DRV".into())
    );
    assert!(g.put("A", "QueueSize", 0).is_err());
    assert!(g
        .put("A", "Bogus", 1)
        .unwrap_err()
        .to_string()
        .contains("Bogus"));
    assert!(g.add_plugin("A", Arc::new(TestPlugin::new())).is_err());
}

#[test]
fn queue_resize_at_run_time_keeps_accounting() {
    let g = sim_graph(2);
    g.add_plugin("S", Arc::new(TestPlugin::slow(Duration::from_micros(500))))
        .unwrap();
    g.put("S", "NDArrayPort", "DRV").unwrap();
    g.put("S", "QueueSize", 50).unwrap();
    configure_fast(&g, 400);
    g.put("DRV", "AcquirePeriod", 0.0001).unwrap();
    g.put("DRV", "Acquire", 1).unwrap();
    for q in [1, 100, 2, 30, 1, 200] {
        std::thread::sleep(Duration::from_millis(5));
        g.put("S", "QueueSize", q).unwrap();
        assert!(g.plugin("S").unwrap().accounting().is_conserved());
    }
    wait_done(&g);
    let a = g.plugin("S").unwrap().accounting();
    assert!(a.is_conserved());
    assert_eq!(a.offered, 400);
}

#[test]
fn stop_in_continuous_mode_goes_idle() {
    let g = sim_graph(1);
    g.put("DRV", "AcquirePeriod", 0.001).unwrap();
    g.put("DRV", "Acquire", 1).unwrap();
    std::thread::sleep(Duration::from_millis(30));
    g.put("DRV", "Acquire", 0).unwrap();
    wait_done(&g);
    let s = g.summary();
    assert_eq!(s["ports"]["DRV"]["DetectorState_RBV"], "Idle");
    assert!(s["ports"]["DRV"]["ArrayCounter_RBV"].as_i64().unwrap() > 3);
}

#[test]
fn pool_cap_drops_at_the_source() {
    let g = Graph::new(1);
    g.add_driver("DRV", Box::new(TestDriver::new(100, 100)))
        .unwrap();
    // 3 frames of 20 kB fit in 0.07 MB; a slow plugin holding them starves the pool.
    g.put("DRV", "PoolMaxMem", 0.07).unwrap();
    g.add_plugin("S", Arc::new(TestPlugin::slow(Duration::from_millis(3))))
        .unwrap();
    g.put("S", "NDArrayPort", "DRV").unwrap();
    g.put("S", "QueueSize", 100).unwrap();
    configure_fast(&g, 1); // unused in Continuous
    g.put("DRV", "ImageMode", "Continuous").unwrap();
    g.put("DRV", "Acquire", 1).unwrap();
    std::thread::sleep(Duration::from_millis(60));
    g.put("DRV", "Acquire", 0).unwrap();
    wait_done(&g);
    let d = g.driver("DRV").unwrap();
    assert!(d.dropped() > 0, "pool cap must drop frames at the source");
    let s = g.summary();
    assert_eq!(
        s["ports"]["DRV"]["DroppedArrays_RBV"].as_u64().unwrap(),
        d.dropped()
    );
    assert!(s["ports"]["DRV"]["PoolAllocBuffers"].as_i64().unwrap() <= 3);
    let a = g.plugin("S").unwrap().accounting();
    assert_eq!(a.offered as i64, d.array_counter());
}

#[test]
fn wait_for_plugins_holds_acquire_until_drained() {
    let g = sim_graph(1);
    g.add_plugin("S", Arc::new(TestPlugin::slow(Duration::from_millis(2))))
        .unwrap();
    g.put("S", "NDArrayPort", "DRV").unwrap();
    g.put("S", "QueueSize", 100).unwrap();
    configure_fast(&g, 20);
    g.put("DRV", "WaitForPlugins", "Yes").unwrap();
    g.put("DRV", "Acquire", 1).unwrap();
    let d = g.driver("DRV").unwrap();
    while d.is_busy() {
        std::thread::sleep(Duration::from_micros(200));
    }
    // Acquire went back to Done only once the plugin had processed everything.
    assert_eq!(g.plugin("S").unwrap().accounting().processed, 20);
}

#[test]
fn max_byte_rate_drops_outputs_and_counts_them() {
    let g = sim_graph(2);
    g.add_plugin("T", Arc::new(TestPlugin::new())).unwrap();
    let sink = Arc::new(TestPlugin::new());
    g.add_plugin("SINK", sink.clone()).unwrap();
    g.put("T", "NDArrayPort", "DRV").unwrap();
    g.put("T", "QueueSize", 1000).unwrap();
    g.put("SINK", "NDArrayPort", "T").unwrap();
    g.put("SINK", "QueueSize", 1000).unwrap();
    // 16x8 UInt16 = 256 bytes a frame; 2560 bytes/s lets about 10 frames a second through
    // (plus the burst the bucket refills to in the test's few milliseconds).
    g.put("T", "MaxByteRate", 2560.0).unwrap();
    configure_fast(&g, 300);
    g.put("DRV", "Acquire", 1).unwrap();
    wait_done(&g);
    let t = g.plugin("T").unwrap().accounting();
    assert_eq!(t.processed, 300, "the input side is not throttled");
    let passed = sink.seen.lock().len() as u64;
    assert!(passed < 50, "throttled to ~10/s, got {passed}");
    assert_eq!(
        passed + t.dropped_output,
        300,
        "every output passed or counted"
    );
    g.publish_now();
    assert_eq!(
        g.get("T", "DroppedOutputArrays_RBV").ok(),
        None,
        "readback PVs are not parameter names"
    );
    assert_eq!(
        g.summary()["ports"]["T"]["DroppedOutputArrays_RBV"].as_u64(),
        Some(t.dropped_output)
    );
}

#[test]
fn array_rate_is_published() {
    let g = sim_graph(1);
    g.add_plugin("P", Arc::new(TestPlugin::new())).unwrap();
    g.put("P", "NDArrayPort", "DRV").unwrap();
    g.put("DRV", "AcquireTime", 0.0).unwrap();
    g.put("DRV", "AcquirePeriod", 0.005).unwrap();
    g.put("DRV", "Acquire", 1).unwrap();
    std::thread::sleep(Duration::from_millis(2300));
    g.put("DRV", "Acquire", 0).unwrap();
    wait_done(&g);
    let s = g.summary();
    for port in ["DRV", "P"] {
        let rate = s["ports"][port]["ArrayRate_RBV"].as_f64().unwrap();
        // 200 frames/s requested; sleeps overshoot, so accept a wide band.
        assert!((100.0..=210.0).contains(&rate), "{port}: {rate}");
    }
}

#[test]
fn time_remaining_counts_down() {
    let g = sim_graph(1);
    g.put("DRV", "AcquireTime", 0.0).unwrap();
    g.put("DRV", "AcquirePeriod", 0.01).unwrap();
    g.put("DRV", "ImageMode", "Multiple").unwrap();
    g.put("DRV", "NumImages", 100).unwrap();
    g.put("DRV", "Acquire", 1).unwrap();
    std::thread::sleep(Duration::from_millis(150));
    g.publish_now();
    let left = g.summary()["ports"]["DRV"]["TimeRemaining_RBV"]
        .as_f64()
        .unwrap();
    assert!(left > 0.3 && left < 1.0, "{left}");
    g.put("DRV", "Acquire", 0).unwrap();
    wait_done(&g);
    assert_eq!(g.summary()["ports"]["DRV"]["TimeRemaining_RBV"], 0.0);
    assert_eq!(g.summary()["ports"]["DRV"]["DetectorState_RBV"], "Aborted");
}

#[test]
fn wait_done_blocks_until_the_acquisition_has_ended() {
    let g = sim_graph(1);
    configure_fast(&g, 10);
    g.put("DRV", "AcquirePeriod", 0.02).unwrap();
    let d = g.driver("DRV").unwrap();
    assert!(d.wait_done(Duration::ZERO), "idle before the start");
    g.put("DRV", "Acquire", 1).unwrap();
    assert!(
        !d.wait_done(Duration::from_millis(1)),
        "10 frames 20 ms apart"
    );
    assert!(d.wait_done(Duration::from_secs(30)));
    assert_eq!(g.get("DRV", "ArrayCounter").unwrap(), ParamValue::Int(10));
    assert!(!d.is_busy());
}

/// This thread's voluntary context switches so far (how often it has slept and been woken).
#[cfg(target_os = "linux")]
fn voluntary_switches() -> u64 {
    let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

/// Waiting for a long acquisition does not poll: the waiting thread sleeps on the driver
/// until the acquisition ends (it used to wake every 2 ms, ~500 times a second).
#[cfg(target_os = "linux")]
#[test]
fn wait_idle_sleeps_through_an_acquisition() {
    let g = sim_graph(1);
    g.add_plugin("P1", Arc::new(TestPlugin::new())).unwrap();
    g.put("P1", "NDArrayPort", "DRV").unwrap();
    configure_fast(&g, 20);
    g.put("DRV", "AcquirePeriod", 0.05).unwrap();
    g.put("DRV", "Acquire", 1).unwrap();
    let before = voluntary_switches();
    assert!(g.wait_idle(Duration::from_secs(30)));
    let woken = voluntary_switches() - before;
    assert_eq!(g.get("DRV", "ArrayCounter").unwrap(), ParamValue::Int(20));
    // ~1 s of acquisition: a few wake-ups (the end, the drain's naps), not hundreds.
    assert!(woken < 60, "woken {woken} times");
}
