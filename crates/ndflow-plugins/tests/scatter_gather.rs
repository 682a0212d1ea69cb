//! Scatter and Gather on the real runtime: distribution, skipping, dropping and conservation
//! of NDPluginScatter; merging, ordering and re-wiring of NDPluginGather.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ndflow_core::{Buffer, DataType, NDArray, ParamDef, ParamStore, ParamValue, Pool};
use ndflow_plugins::gather::GatherPlugin;
use ndflow_plugins::scatter::ScatterPlugin;
use ndflow_runtime::{Driver, DriverError, DropReason, Graph, Plugin, PluginError, ProcessContext};
use parking_lot::{Condvar, Mutex};

/// 8×4 UInt16 frames whose pixels all equal the frame number.
struct Counter(u16);

impl Driver for Counter {
    fn driver_type(&self) -> &'static str {
        "counter"
    }
    fn params(&self) -> &'static [ParamDef] {
        &[]
    }
    fn init(&mut self, _params: &ParamStore) -> Result<(), DriverError> {
        Ok(())
    }
    fn acquire(&mut self, _params: &ParamStore, pool: &Pool) -> Result<NDArray, DriverError> {
        self.0 = self.0.wrapping_add(1);
        let mut buf = pool.alloc(8 * 4 * 2)?;
        buf.as_mut_slice::<u16>().fill(self.0);
        Ok(NDArray::new(&[8, 4], DataType::UInt16, buf.freeze())?)
    }
}

/// Records the uniqueIds it processes (after an optional delay, or once a gate opens) and
/// passes the frame on.
#[derive(Default)]
struct Worker {
    delay: Option<fn(i32) -> Duration>,
    gate: Option<Arc<Gate>>,
    seen: Mutex<Vec<i32>>,
}

impl Worker {
    fn new() -> Arc<Worker> {
        Arc::new(Worker::default())
    }
    fn slow(delay: fn(i32) -> Duration) -> Arc<Worker> {
        Arc::new(Worker {
            delay: Some(delay),
            ..Worker::default()
        })
    }
    fn gated(gate: &Arc<Gate>) -> Arc<Worker> {
        Arc::new(Worker {
            gate: Some(gate.clone()),
            ..Worker::default()
        })
    }
    fn seen(&self) -> Vec<i32> {
        self.seen.lock().clone()
    }
}

impl Plugin for Worker {
    fn plugin_type(&self) -> &'static str {
        "Worker"
    }
    fn params(&self) -> &'static [ParamDef] {
        &[]
    }
    fn process(
        &self,
        input: &Arc<NDArray>,
        ctx: &mut ProcessContext<'_>,
    ) -> Result<(), PluginError> {
        if let Some(g) = &self.gate {
            g.pass();
        }
        if let Some(d) = self.delay {
            std::thread::sleep(d(input.unique_id));
        }
        self.seen.lock().push(input.unique_id);
        ctx.emit(input.clone());
        Ok(())
    }
}

/// Holds every worker that reaches it until opened; counts who is waiting.
#[derive(Default)]
struct Gate {
    state: Mutex<(bool, usize)>,
    cv: Condvar,
}

impl Gate {
    fn pass(&self) {
        let mut s = self.state.lock();
        s.1 += 1;
        self.cv.notify_all();
        while !s.0 {
            self.cv.wait(&mut s);
        }
    }
    fn wait_entered(&self, n: usize) {
        let mut s = self.state.lock();
        while s.1 < n {
            assert!(
                !self
                    .cv
                    .wait_for(&mut s, Duration::from_secs(10))
                    .timed_out(),
                "nobody reached the gate"
            );
        }
    }
    fn open(&self) {
        self.state.lock().0 = true;
        self.cv.notify_all();
    }
}

fn graph(workers: usize) -> Graph {
    let g = Graph::new(workers);
    g.add_driver("DRV", Box::new(Counter(0))).unwrap();
    g.put("DRV", "AcquireTime", 0.0).unwrap();
    g.put("DRV", "AcquirePeriod", 0.0).unwrap();
    g.put("DRV", "ImageMode", "Multiple").unwrap();
    g
}

fn acquire(g: &Graph, n: i64) {
    g.put("DRV", "NumImages", n).unwrap();
    g.put("DRV", "Acquire", 1).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert!(
        g.wait_idle(Duration::from_secs(60)),
        "graph did not go idle"
    );
}

fn add(g: &Graph, name: &str, plugin: Arc<dyn Plugin>, source: &str, queue: i64) {
    g.add_plugin(name, plugin).unwrap();
    g.put(name, "QueueSize", queue).unwrap();
    g.put(name, "NDArrayPort", source).unwrap();
}

fn frame(id: i32) -> Arc<NDArray> {
    let mut f = NDArray::new(&[2], DataType::UInt8, Buffer::from_bytes(&[0, 1])).unwrap();
    f.unique_id = id;
    Arc::new(f)
}

#[test]
fn scatter_is_round_robin_while_queues_have_room() {
    let g = graph(2);
    add(&g, "SC", Arc::new(ScatterPlugin::new()), "DRV", 1000);
    let w: Vec<_> = (0..3).map(|_| Worker::new()).collect();
    for (i, w) in w.iter().enumerate() {
        add(&g, &format!("W{i}"), w.clone(), "SC", 1000);
    }
    acquire(&g, 300);
    for (i, w) in w.iter().enumerate() {
        let want: Vec<i32> = (1..=300).filter(|id| (id - 1) % 3 == i as i32).collect();
        assert_eq!(w.seen(), want, "W{i}");
    }
    let a = g.plugin("SC").unwrap().accounting();
    assert_eq!((a.offered, a.processed, a.dropped_total()), (300, 300, 0));
    assert_eq!(g.get("SC", "ScatterMethod").unwrap(), ParamValue::Int(0));
    assert_eq!(
        g.get("SC", "PluginType").unwrap(),
        ParamValue::Str("NDPluginScatter".into())
    );
}

#[test]
fn scatter_skips_full_queues_and_drops_only_when_all_are_full() {
    // One worker thread, held by the gate: frames stay where the scatter put them.
    let g = Graph::new(1);
    let gate = Arc::new(Gate::default());
    add(&g, "SC", Arc::new(ScatterPlugin::new()), "", 10);
    // The scatter runs in the test's thread, so every decision is made before the next offer.
    g.put("SC", "BlockingCallbacks", "Yes").unwrap();
    let w: Vec<_> = (0..3).map(|_| Worker::gated(&gate)).collect();
    for (i, w) in w.iter().enumerate() {
        add(
            &g,
            &format!("W{i}"),
            w.clone(),
            "SC",
            if i == 2 { 2 } else { 1 },
        );
    }
    let sc = g.plugin("SC").unwrap();
    for id in 1..=3 {
        sc.offer(&frame(id));
    }
    gate.wait_entered(1); // W0 is processing frame 1; W1 holds 2, W2 holds 3.
    sc.offer(&frame(4)); // W0's queue is free again.
    sc.offer(&frame(5)); // W1 (next in turn) is full: skipped, W2 has one slot left.
    sc.offer(&frame(6)); // W0, W1, W2 all full: dropped on the scatter.
    let a = sc.accounting();
    assert_eq!(
        (a.offered, a.processed, a.dropped(DropReason::QueueFull)),
        (6, 5, 1)
    );
    gate.open();
    assert!(g.wait_idle(Duration::from_secs(10)));
    assert_eq!(w[0].seen(), vec![1, 4]);
    assert_eq!(w[1].seen(), vec![2]);
    assert_eq!(w[2].seen(), vec![3, 5]);
    for i in 0..3 {
        let d = g.plugin(&format!("W{i}")).unwrap().accounting();
        assert_eq!(
            d.dropped_total(),
            0,
            "W{i} was never handed a frame it had no room for"
        );
    }
    g.publish_now();
    assert_eq!(g.get("SC", "DroppedArrays").unwrap(), ParamValue::Int(1));
    assert_eq!(g.get("SC", "DroppedQueueFull").unwrap(), ParamValue::Int(1));
}

#[test]
fn scatter_conserves_frames_under_overload() {
    let g = graph(3);
    add(&g, "SC", Arc::new(ScatterPlugin::new()), "DRV", 20);
    let w: Vec<_> = (0..3)
        .map(|_| Worker::slow(|_| Duration::from_micros(300)))
        .collect();
    for (i, w) in w.iter().enumerate() {
        add(&g, &format!("W{i}"), w.clone(), "SC", 2);
    }
    g.put("DRV", "NumImages", 3000).unwrap();
    g.put("DRV", "Acquire", 1).unwrap();
    let sc = g.plugin("SC").unwrap();
    for _ in 0..50 {
        let a = sc.accounting();
        assert!(a.is_conserved(), "{a:?}");
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(g.wait_idle(Duration::from_secs(60)));
    let a = sc.accounting();
    assert_eq!(a.offered, 3000);
    assert!(
        a.dropped(DropReason::QueueFull) > 0,
        "overload must drop: {a:?}"
    );
    let downstream: Vec<_> = (0..3)
        .map(|i| g.plugin(&format!("W{i}")).unwrap().accounting())
        .collect();
    let delivered: u64 = downstream.iter().map(|d| d.offered).sum();
    assert_eq!(a.processed, delivered);
    assert_eq!(a.offered, delivered + a.dropped_total());
    for d in &downstream {
        assert_eq!((d.processed, d.dropped_total()), (d.offered, 0), "{d:?}");
        assert!(d.offered > 0);
    }
    // Each delivered frame went to exactly one worker.
    let mut all: Vec<i32> = w.iter().flat_map(|w| w.seen()).collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len() as u64, delivered);
    g.publish_now();
    let offered: i64 = (0..3)
        .map(|i| {
            g.get(&format!("W{i}"), "ArraysOffered")
                .unwrap()
                .as_i64()
                .unwrap()
        })
        .sum();
    assert_eq!(
        g.get("SC", "ArraysProcessed").unwrap(),
        ParamValue::Int(offered)
    );
}

#[test]
fn scatter_to_blocking_ports_drops_nothing() {
    let g = graph(4);
    add(&g, "SC", Arc::new(ScatterPlugin::new()), "DRV", 10);
    // Blocking all the way: the workers run in the scatter's threads, which back-pressure
    // the driver; three scatter threads keep the three workers busy at once.
    g.put("SC", "BlockingCallbacks", "Yes").unwrap();
    let w: Vec<_> = (0..3)
        .map(|_| Worker::slow(|_| Duration::from_micros(200)))
        .collect();
    for (i, w) in w.iter().enumerate() {
        add(&g, &format!("W{i}"), w.clone(), "SC", 1);
        g.put(&format!("W{i}"), "BlockingCallbacks", "Yes").unwrap();
    }
    acquire(&g, 600);
    let a = g.plugin("SC").unwrap().accounting();
    assert_eq!((a.offered, a.processed, a.dropped_total()), (600, 600, 0));
    // One scatter thread and idle workers: strict turns.
    for w in &w {
        assert_eq!(w.seen().len(), 200);
    }
    // Non-blocking scatter with several threads in front of blocking workers.
    g.put("SC", "BlockingCallbacks", "No").unwrap();
    g.put("SC", "QueueSize", 1000).unwrap();
    g.put("SC", "NumThreads", 3).unwrap();
    acquire(&g, 600);
    let a = g.plugin("SC").unwrap().accounting();
    assert_eq!((a.offered, a.processed, a.dropped_total()), (1200, 1200, 0));
    let mut all: Vec<i32> = w.iter().flat_map(|w| w.seen()).collect();
    all.sort_unstable();
    assert_eq!(all, (1..=1200).collect::<Vec<i32>>());
    for i in 0..3 {
        let d = g.plugin(&format!("W{i}")).unwrap().accounting();
        assert_eq!(d.dropped_total(), 0);
    }
}

/// DRV → SC → W0..W{n-1} (jittered) → G (NDArrayPort_1..n) → SINK.
fn scatter_gather(n: usize, sorted: bool) -> (Graph, Arc<Worker>) {
    let g = graph(4);
    add(&g, "SC", Arc::new(ScatterPlugin::new()), "DRV", 1000);
    add(&g, "G", Arc::new(GatherPlugin::new()), "", 1000);
    for i in 0..n {
        let name = format!("W{i}");
        // Deterministic pseudo-random delays, so workers finish out of uniqueId order.
        add(
            &g,
            &name,
            Worker::slow(|id| Duration::from_micros(((id as u64 * 7919) % 13) * 60)),
            "SC",
            1000,
        );
        g.put("G", &format!("NDArrayPort_{}", i + 1), name.as_str())
            .unwrap();
    }
    if sorted {
        g.put("G", "SortMode", "Sorted").unwrap();
        g.put("G", "SortSize", 1000).unwrap();
        g.put("G", "SortTime", 2.0).unwrap();
    }
    let sink = Worker::new();
    add(&g, "SINK", sink.clone(), "G", 10000);
    (g, sink)
}

#[test]
fn gather_merges_every_frame_once() {
    for n in 2..=4 {
        let (g, sink) = scatter_gather(n, false);
        acquire(&g, 400);
        let mut seen = sink.seen();
        seen.sort_unstable();
        assert_eq!(seen, (1..=400).collect::<Vec<i32>>(), "{n} inputs");
        let a = g.plugin("G").unwrap().accounting();
        assert_eq!((a.offered, a.processed, a.dropped_total()), (400, 400, 0));
        let mut sources = g.plugin("G").unwrap().sources();
        sources.sort();
        assert_eq!(sources, (0..n).map(|i| format!("W{i}")).collect::<Vec<_>>());
    }
}

#[test]
fn gather_fed_twice_by_fan_out_sees_each_frame_per_input() {
    let g = graph(2);
    add(&g, "A", Worker::new(), "DRV", 1000);
    add(&g, "B", Worker::new(), "DRV", 1000);
    add(&g, "G", Arc::new(GatherPlugin::new()), "", 1000);
    g.put("G", "NDArrayPort_1", "A").unwrap();
    g.put("G", "NDArrayPort_2", "B").unwrap();
    let sink = Worker::new();
    add(&g, "SINK", sink.clone(), "G", 10000);
    acquire(&g, 100);
    let mut count = BTreeMap::new();
    for id in sink.seen() {
        *count.entry(id).or_insert(0) += 1;
    }
    assert_eq!(count.len(), 100);
    assert!(count.values().all(|&c| c == 2), "{count:?}");
}

#[test]
fn gather_with_sort_mode_emits_unique_ids_in_order() {
    let (g, sink) = scatter_gather(3, true);
    acquire(&g, 600);
    assert_eq!(sink.seen(), (1..=600).collect::<Vec<i32>>());
    assert_eq!(g.plugin("G").unwrap().disordered(), 0);
    // The same graph unsorted: the jittered workers really do finish out of order.
    let (g, sink) = scatter_gather(3, false);
    acquire(&g, 600);
    assert_ne!(sink.seen(), (1..=600).collect::<Vec<i32>>());
    assert!(g.plugin("G").unwrap().disordered() > 0);
}

#[test]
fn gather_inputs_rewire_at_run_time() {
    let g = graph(2);
    add(&g, "A", Worker::new(), "DRV", 1000);
    add(&g, "B", Worker::new(), "DRV", 1000);
    add(&g, "G", Arc::new(GatherPlugin::new()), "", 1000);
    let sink = Worker::new();
    add(&g, "SINK", sink.clone(), "G", 10000);
    let str_of = |p: &str| g.get("G", p).unwrap();
    // NDArrayPort and NDArrayPort_1 are one input.
    g.put("G", "NDArrayPort_1", "A").unwrap();
    assert_eq!(str_of("NDArrayPort"), ParamValue::Str("A".into()));
    // Two inputs naming one port subscribe once.
    g.put("G", "NDArrayPort_2", "A").unwrap();
    assert_eq!(
        g.plugin("A").unwrap().subscriber_names(),
        vec!["G".to_string()]
    );
    acquire(&g, 50);
    assert_eq!(sink.seen().len(), 50);
    // Input 2 moves to B: A still feeds input 1.
    g.put("G", "NDArrayPort_2", "B").unwrap();
    assert_eq!(
        g.plugin("A").unwrap().subscriber_names(),
        vec!["G".to_string()]
    );
    acquire(&g, 50);
    assert_eq!(sink.seen().len(), 150);
    // Clearing input 1 through NDArrayPort unsubscribes from A.
    g.put("G", "NDArrayPort", "").unwrap();
    assert_eq!(str_of("NDArrayPort_1"), ParamValue::Str(String::new()));
    assert!(g.plugin("A").unwrap().subscriber_names().is_empty());
    acquire(&g, 50);
    assert_eq!(sink.seen().len(), 200);
    assert_eq!(g.plugin("G").unwrap().sources(), vec!["B".to_string()]);
    // A loop through any input, or an unknown port, is refused and changes nothing.
    let err = g.put("G", "NDArrayPort_3", "SINK").unwrap_err().to_string();
    assert!(
        err.contains("NDArrayPort_3") && err.contains("loop"),
        "{err}"
    );
    assert!(g.put("G", "NDArrayPort_4", "NOPE").is_err());
    assert_eq!(str_of("NDArrayPort_3"), ParamValue::Str(String::new()));
    assert_eq!(str_of("NDArrayPort_4"), ParamValue::Str(String::new()));
    g.add_plugin("X", Worker::new()).unwrap();
    g.put("X", "NDArrayPort", "G").unwrap();
    let err = g.put("G", "NDArrayPort_8", "X").unwrap_err().to_string();
    assert!(err.contains("loop"), "{err}");
}

/// Records the sizes of every frame it is given.
#[derive(Default)]
struct Shapes(Mutex<Vec<(i32, Vec<usize>)>>);

impl Plugin for Shapes {
    fn plugin_type(&self) -> &'static str {
        "Shapes"
    }
    fn params(&self) -> &'static [ParamDef] {
        &[]
    }
    fn process(&self, input: &Arc<NDArray>, _: &mut ProcessContext<'_>) -> Result<(), PluginError> {
        self.0.lock().push((input.unique_id, input.sizes()));
        Ok(())
    }
}

#[test]
fn gather_inputs_take_the_address_each_names() {
    let g = graph(2);
    add(
        &g,
        "STATS",
        Arc::new(ndflow_plugins::stats::StatsPlugin::new()),
        "DRV",
        1000,
    );
    add(&g, "G", Arc::new(GatherPlugin::new()), "", 1000);
    let sink = Arc::new(Shapes::default());
    add(&g, "SINK", sink.clone(), "G", 10000);
    g.put("G", "NDArrayPort_1", "STATS").unwrap();
    g.put("G", "NDArrayPort_2", "STATS").unwrap();
    // Input 2 takes the stats port's address 1 (its time-series points); NDArrayAddress_1 is
    // NDArrayAddress.
    g.put("G", "NDArrayAddress_2", 1).unwrap();
    g.put("G", "NDArrayAddress", 0).unwrap();
    assert_eq!(g.get("G", "NDArrayAddress_1").unwrap(), ParamValue::Int(0));
    let mut subs = g.port("STATS").unwrap().subscriptions();
    subs.sort();
    assert_eq!(subs, vec![("G".into(), 0), ("G".into(), 1)]);
    // An address the stats port does not publish is refused, naming both.
    let err = g.put("G", "NDArrayAddress_3", 0).map(|_| ());
    assert!(err.is_ok(), "no source yet: any address is kept");
    let err = g.put("G", "NDArrayAddress_2", 2).unwrap_err().to_string();
    assert!(
        err.contains("'STATS'") && err.contains("address 2"),
        "{err}"
    );
    acquire(&g, 20);
    let seen = sink.0.lock().clone();
    let images = seen.iter().filter(|(_, s)| *s == vec![8, 4]).count();
    let points = seen.iter().filter(|(_, s)| *s == vec![23]).count();
    assert_eq!((images, points, seen.len()), (20, 20, 40), "{seen:?}");
}
