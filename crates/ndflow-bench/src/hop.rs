//! `ndflow bench hop`: the runtime's overhead per plugin hop, measured on a chain of plugins
//! that do nothing, so every microsecond is queueing, scheduling and accounting.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ndflow_core::{NDArray, ParamDef, Pool};
use ndflow_runtime::{Graph, Plugin, PluginError, ProcessContext};
use serde_json::json;

use crate::host::process_cpu_seconds;

/// A plugin that passes its input on untouched: the cost of a hop is all runtime.
struct NoOp;

impl Plugin for NoOp {
    fn plugin_type(&self) -> &'static str {
        "NoOp"
    }
    fn params(&self) -> &'static [ParamDef] {
        &[]
    }
    fn process(
        &self,
        input: &Arc<NDArray>,
        ctx: &mut ProcessContext<'_>,
    ) -> Result<(), PluginError> {
        ctx.emit(input.clone());
        Ok(())
    }
}

/// Runtime overhead per plugin hop: frames pushed through a chain of no-op plugins.
/// Returns (CPU µs per hop, wall µs per hop).
pub fn hop_overhead(
    chain: usize,
    frames: usize,
    workers: usize,
    one_at_a_time: bool,
) -> Result<(f64, f64), String> {
    let graph = Graph::new(workers);
    let mut prev = String::new();
    for i in 0..chain {
        let name = format!("N{i}");
        graph
            .add_plugin(&name, Arc::new(NoOp))
            .map_err(|e| e.to_string())?;
        graph
            .put(&name, "QueueSize", (frames as i64).min(100_000))
            .map_err(|e| e.to_string())?;
        if !prev.is_empty() {
            graph
                .put(&name, "NDArrayPort", prev.as_str())
                .map_err(|e| e.to_string())?;
        }
        prev = name;
    }
    let head = graph.plugin("N0").ok_or("no head")?;
    let pool = Pool::unlimited();
    let frame =
        Arc::new(NDArray::from_pixels(&pool, &[64, 64], &[0u8; 4096]).map_err(|e| e.to_string())?);
    let cpu0 = process_cpu_seconds();
    let t0 = Instant::now();
    let tail = graph.plugin(&prev).ok_or("no tail")?;
    if one_at_a_time {
        // Latency: each frame crosses the whole chain before the next is offered, so every
        // hop pays a wake-up (the caller spins, to time the chain and not its own sleep).
        for i in 0..frames {
            head.offer(&frame);
            while tail.accounting().processed <= i as u64 {
                std::hint::spin_loop();
            }
        }
    } else {
        // Throughput: feed in batches the queues can hold, so nothing is dropped.
        let mut sent = 0;
        while sent < frames {
            let batch = (frames - sent).min(10_000);
            for _ in 0..batch {
                head.offer(&frame);
            }
            sent += batch;
            graph.wait_idle(Duration::from_secs(60));
        }
    }
    let wall = t0.elapsed().as_secs_f64();
    let cpu = process_cpu_seconds() - cpu0;
    let last = tail.accounting();
    if last.processed != frames as u64 {
        return Err(format!("tail processed {} of {frames}", last.processed));
    }
    let hops = (chain * frames) as f64;
    graph.shutdown();
    Ok((1e6 * cpu / hops, 1e6 * wall / hops))
}

pub fn hop(json: Option<&PathBuf>) -> Result<(), String> {
    let mut results = Vec::new();
    println!("Runtime overhead per plugin hop (chain of 10 no-op plugins, 64x64 UInt8 frames)");
    println!(
        "{:<20} {:>8} {:>12} {:>12}",
        "mode", "workers", "CPU us/hop", "wall us/hop"
    );
    let modes = [
        ("streaming", false, 200_000),
        ("one at a time", true, 5_000),
    ];
    for (mode, one, frames) in modes {
        for workers in [1, 2] {
            let (cpu, wall) = hop_overhead(10, frames, workers, one)?;
            println!("{mode:<20} {workers:>8} {cpu:>12.3} {wall:>12.3}");
            results.push(json!({
                "mode": mode, "workers": workers, "cpu_us_per_hop": cpu, "wall_us_per_hop": wall
            }));
        }
    }
    println!("(CPU includes the feeding thread; in one-at-a-time mode it spins while it waits)");
    if let Some(path) = json {
        std::fs::write(
            path,
            serde_json::to_string_pretty(&results).map_err(|e| e.to_string())? + "\n",
        )
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}
