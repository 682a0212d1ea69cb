//! Which worker runs a port's queued frames: a port goes on with its next frame on the same
//! worker only while no other task waits; otherwise ports take turns frame by frame.

mod common;

use std::sync::Arc;
use std::thread::ThreadId;
use std::time::Duration;

use common::*;
use ndflow_core::{NDArray, ParamDef, Pool};
use ndflow_runtime::{Graph, Plugin, PluginError, ProcessContext};
use parking_lot::Mutex;

/// Sleeps `delay` per frame and records (port tag, worker thread) in a shared log.
struct Recorder {
    tag: char,
    delay: Duration,
    log: Arc<Mutex<Vec<(char, ThreadId)>>>,
}

impl Plugin for Recorder {
    fn plugin_type(&self) -> &'static str {
        "Recorder"
    }
    fn params(&self) -> &'static [ParamDef] {
        &[]
    }
    fn process(&self, _: &Arc<NDArray>, _: &mut ProcessContext<'_>) -> Result<(), PluginError> {
        std::thread::sleep(self.delay);
        self.log
            .lock()
            .push((self.tag, std::thread::current().id()));
        Ok(())
    }
}

fn frames(n: usize) -> Vec<Arc<NDArray>> {
    let pool = Pool::unlimited();
    (0..n)
        .map(|i| {
            let mut f = NDArray::from_pixels(&pool, &[4, 4], &[0u16; 16]).unwrap();
            f.unique_id = i as i32 + 1;
            Arc::new(f)
        })
        .collect()
}

fn recorder(g: &Graph, name: &str, tag: char, log: &Arc<Mutex<Vec<(char, ThreadId)>>>) {
    let r = Recorder {
        tag,
        delay: Duration::from_micros(500),
        log: log.clone(),
    };
    g.add_plugin(name, Arc::new(r)).unwrap();
    g.put(name, "QueueSize", 100).unwrap();
}

#[test]
fn a_lone_port_keeps_its_worker_for_its_queued_frames() {
    let g = Graph::new(2);
    let log = Arc::new(Mutex::new(Vec::new()));
    recorder(&g, "A", 'a', &log);
    let a = g.plugin("A").unwrap();
    for f in frames(40) {
        a.offer(&f);
    }
    wait_done(&g);
    let log = log.lock();
    assert_eq!(log.len(), 40);
    let first = log[0].1;
    // Handing the port back to the pool after each frame woke the idle second worker, which
    // then took it: the frames were spread over both workers.
    assert!(
        log.iter().all(|(_, t)| *t == first),
        "the frames moved between workers: {:?}",
        log.iter().map(|(_, t)| *t == first).collect::<Vec<_>>()
    );
    let acc = a.accounting();
    assert!(acc.is_conserved());
    assert_eq!((acc.offered, acc.processed), (40, 40));
    g.shutdown();
}

#[test]
fn ports_with_queued_frames_still_take_turns_on_one_worker() {
    let g = Graph::new(1);
    let log = Arc::new(Mutex::new(Vec::new()));
    recorder(&g, "A", 'a', &log);
    recorder(&g, "B", 'b', &log);
    let (a, b) = (g.plugin("A").unwrap(), g.plugin("B").unwrap());
    let fs = frames(20);
    // All of A's frames are queued before B's: B must not wait for A's queue to empty.
    for f in &fs {
        a.offer(f);
    }
    for f in &fs {
        b.offer(f);
    }
    wait_done(&g);
    let order: String = log.lock().iter().map(|(c, _)| *c).collect();
    assert_eq!(order.len(), 40);
    // Runs of one port's frames: at most 2 at the start (B's task arrives while A's first
    // frame runs), then one frame each in turn until one port's queue is empty.
    let runs: Vec<usize> = order
        .as_bytes()
        .chunk_by(|x, y| x == y)
        .map(<[u8]>::len)
        .collect();
    assert!(runs[0] <= 2, "B waited behind A's queue: {order}");
    assert!(
        runs[1..runs.len() - 1].iter().all(|&n| n == 1),
        "the ports did not take turns: {order}"
    );
    g.shutdown();
}
