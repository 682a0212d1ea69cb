//! `ndflow bench rivers2013`: Table 1 of the 2013 areaDetector plugin-scaling measurement on
//! this machine, with the memory-bandwidth bound and a single-threaded reference
//! ([`sync_reference`]) measured in the same run.

pub mod sync_reference;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use ndflow::config::Config;
use ndflow_runtime::{Graph, PortHandle};
use serde_json::json;

use crate::host::process_cpu_seconds;
use sync_reference::{RefRow, SyncPipeline};

pub const RIVERS2013: &str = include_str!("../../../examples/rivers2013.toml");

/// Plugin rows in the order of the 2013 table.
const PLUGINS: [&str; 11] = [
    "Image1", "PROC1", "ROI1", "ROI2", "ROI3", "ROI4", "STATS1", "STATS2", "STATS3", "STATS4",
    "STATS5",
];

pub struct RiversOptions {
    /// Extra settings applied after the scenario, as (port, parameter, value).
    pub set: Vec<(String, String, String)>,
    pub json: Option<PathBuf>,
    pub seconds: f64,
    pub max_rate_frames: u32,
    pub periods: String,
}

/// memcpy bandwidth in bytes copied per second for `size`-byte buffers (best of 5).
pub fn memcpy_bandwidth(size: usize) -> f64 {
    let src = vec![1u8; size];
    let mut dst = vec![0u8; size];
    let reps = (256 << 20) / size.max(1);
    let mut best = 0.0f64;
    for _ in 0..5 {
        let t0 = Instant::now();
        for i in 0..reps {
            dst.copy_from_slice(std::hint::black_box(&src));
            std::hint::black_box(&mut dst)[i % size] ^= 1;
        }
        best = best.max((reps * size) as f64 / t0.elapsed().as_secs_f64());
    }
    best
}

#[derive(Debug, Clone)]
struct Row {
    period: f64,
    frames: i64,
    fps: f64,
    cpu_pct: f64,
    cpu_ms_per_frame: f64,
    dropped: Vec<u64>,
    source_dropped: u64,
}

fn run_row(period: f64, frames: u32, set: &[(String, String, String)]) -> Result<Row, String> {
    let cfg = Config::parse(RIVERS2013, "examples/rivers2013.toml").map_err(|e| e.to_string())?;
    let graph = Graph::new(cfg.threads);
    // Build without the Acquire line, set the row's timing, then start.
    let mut cfg_idle = cfg.clone();
    for p in &mut cfg_idle.ports {
        p.settings.retain(|s| s.key != "Acquire");
    }
    cfg_idle
        .build(&graph, &ndflow::pva::ImagePvs::default())
        .map_err(|e| e.to_string())?;
    let put = |k: &str, v: ndflow_core::ParamValue| {
        graph
            .put("SIM1", k, v)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    for (port, key, value) in set {
        graph
            .put(port, key, value.as_str())
            .map_err(|e| format!("--set {port}.{key}={value}: {e}"))?;
    }
    put("AcquirePeriod", period.into())?;
    put("NumImages", (frames as i64).into())?;
    let sim = graph.driver("SIM1").ok_or("the scenario has no SIM1")?;
    let cpu0 = process_cpu_seconds();
    let t0 = Instant::now();
    put("Acquire", 1.into())?;
    // Blocking, not polling: this thread's CPU counts in the figures.
    while !sim.wait_done(Duration::from_secs(3600)) {}
    let acq = t0.elapsed().as_secs_f64();
    graph.wait_idle(Duration::from_secs(60));
    let wall = t0.elapsed().as_secs_f64();
    let cpu = process_cpu_seconds() - cpu0;
    let produced = sim.array_counter();
    let dropped = PLUGINS
        .iter()
        .map(|n| {
            graph
                .plugin(n)
                .map_or(u64::MAX, |p| p.accounting().dropped_total())
        })
        .collect();
    let row = Row {
        period,
        frames: produced,
        fps: produced as f64 / acq,
        cpu_pct: 100.0 * cpu / wall,
        cpu_ms_per_frame: 1000.0 * cpu / produced.max(1) as f64,
        dropped,
        source_dropped: sim.dropped(),
    };
    // Every port's books must balance.
    for p in graph.ports() {
        if let PortHandle::Plugin(p) = p {
            let a = p.accounting();
            if !a.is_conserved() {
                return Err(format!("{}: accounting does not balance: {a:?}", p.name));
            }
        }
    }
    graph.shutdown();
    Ok(row)
}

/// Bytes each plugin reads + writes per 1024x1024 UInt8 frame (for the bandwidth bound).
fn bytes_touched() -> Vec<(&'static str, f64)> {
    let frame = 1024.0 * 1024.0;
    let quarter = frame / 4.0;
    let filter_elem = 8.0; // the recursive filter keeps one f64 per pixel
    vec![
        ("SIM1 (generate)", frame),
        ("Image1 (zero-copy)", 0.0),
        (
            "PROC1 (in, filter r/w, out)",
            frame + 2.0 * filter_elem * frame + frame,
        ),
        ("ROI1-4 (read+write quadrant)", 4.0 * 2.0 * quarter),
        ("STATS1-4 (read quadrant)", 4.0 * quarter),
        ("STATS5 (read frame)", frame),
    ]
}

pub fn rivers2013(opts: &RiversOptions) -> Result<(), String> {
    let periods: Vec<f64> = opts
        .periods
        .split(',')
        .map(|s| {
            s.trim()
                .parse::<f64>()
                .map_err(|_| format!("--periods: '{s}' is not a number"))
        })
        .collect::<Result<_, _>>()?;
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    eprintln!(
        "rivers2013: 1024x1024 UInt8, 11 plugins, {cores} cores; measuring memcpy bandwidth..."
    );
    let bw = memcpy_bandwidth(1 << 20);
    let mut rows = Vec::new();
    for &p in &periods {
        let frames = if p > 0.0 {
            ((opts.seconds / p).round() as u32).max(50)
        } else {
            opts.max_rate_frames
        };
        eprintln!("  AcquirePeriod {p}: {frames} frames...");
        rows.push(run_row(p, frames, &opts.set)?);
    }
    // The host's own price for pacing, measured with a fixed pass on the same schedules.
    eprintln!("  reference pass at each period...");
    let cfg = Config::parse(RIVERS2013, "examples/rivers2013.toml").map_err(|e| e.to_string())?;
    let sync = SyncPipeline::from_config(&cfg, 1024, 1024)?;
    let refs: Vec<RefRow> = periods
        .iter()
        .map(|&p| {
            let frames = if p > 0.0 {
                ((opts.seconds / 2.0 / p).round() as u32).clamp(10, 2000)
            } else {
                1000
            };
            sync.paced(p, frames)
        })
        .collect::<Result<_, _>>()?;
    // The 2013 table's layout: one column per AcquirePeriod.
    let col = |f: &dyn Fn(&Row) -> String| {
        rows.iter()
            .map(f)
            .map(|s| format!("{s:>9}"))
            .collect::<String>()
    };
    println!("Table 1 (2013 plugin scaling) on this machine: {cores} cores");
    for (p, k, v) in &opts.set {
        println!("with {p}.{k} = {v}");
    }
    println!(
        "{:<22}{}",
        "Acquire Period",
        col(&|r| format!("{}", r.period))
    );
    println!("{:<22}{}", "# Frames", col(&|r| r.frames.to_string()));
    println!(
        "{:<22}{}",
        "Detector Frames/s",
        col(&|r| format!("{:.0}", r.fps))
    );
    println!("{:<22}{}", "CPU %", col(&|r| format!("{:.0}", r.cpu_pct)));
    println!(
        "{:<22}{}",
        "CPU ms/frame",
        col(&|r| format!("{:.2}", r.cpu_ms_per_frame))
    );
    // Against the flat-out row (period 0), when the run has one.
    let flat = periods.iter().position(|&p| p == 0.0);
    if let Some(f) = flat {
        let ours = |i: usize| rows[i].cpu_ms_per_frame / rows[f].cpu_ms_per_frame;
        let host = |i: usize| refs[i].cpu_ms_per_frame / refs[f].cpu_ms_per_frame;
        let cols = |v: &dyn Fn(usize) -> f64| {
            (0..rows.len())
                .map(|i| format!("{:>9.2}", v(i)))
                .collect::<String>()
        };
        println!("{:<22}{}", "  x flat out", cols(&ours));
        println!(
            "{:<22}{}",
            "Reference ms/frame",
            cols(&|i| refs[i].cpu_ms_per_frame)
        );
        println!("{:<22}{}", "  x flat out", cols(&host));
        println!(
            "{:<22}{}",
            "ndflow / reference",
            cols(&|i| ours(i) / host(i))
        );
        println!(
            "(reference: the same plugins called in turn on one thread, no runtime, on the same \
             schedule; its 'x flat out' is what the host charges for work after an idle gap)"
        );
    }
    println!("Frames dropped");
    for (i, name) in PLUGINS.iter().enumerate() {
        println!("{:<22}{}", name, col(&|r| r.dropped[i].to_string()));
    }
    println!(
        "{:<22}{}",
        "SIM1 (pool full)",
        col(&|r| r.source_dropped.to_string())
    );
    let zero_drop = rows
        .iter()
        .filter(|r| r.dropped.iter().all(|d| *d == 0) && r.source_dropped == 0)
        .map(|r| r.fps)
        .fold(0.0f64, f64::max);
    println!("Highest frame rate with zero drops in all 11 plugins: {zero_drop:.0} frames/s");
    let touched = bytes_touched();
    let total: f64 = touched.iter().map(|t| t.1).sum();
    println!(
        "Memory-bandwidth bound: memcpy of 1 MiB = {:.1} GB/s here (reads+writes {:.1} GB/s)",
        bw / 1e9,
        2.0 * bw / 1e9
    );
    for (name, b) in &touched {
        println!(
            "  {:<30} {:>7.2} MB/frame  {:>8.3} ms at memcpy speed",
            name,
            b / 1e6,
            1e3 * b / (2.0 * bw)
        );
    }
    println!(
        "  total {:.2} MB/frame -> {:.3} ms/frame of one core, bound {:.0} frames/s per core",
        total / 1e6,
        1e3 * total / (2.0 * bw),
        2.0 * bw / total
    );
    if let Some(path) = &opts.json {
        let j = json!({
            "benchmark": "rivers2013",
            "cores": cores,
            "memcpy_1MiB_bytes_per_s": bw,
            "bytes_touched_per_frame": touched.iter().map(|(n, b)| json!({"what": n, "bytes": b})).collect::<Vec<_>>(),
            "zero_drop_max_fps": zero_drop,
            "settings": opts.set.iter().map(|(p, k, v)| format!("{p}.{k}={v}")).collect::<Vec<_>>(),
            "rows": rows.iter().enumerate().map(|(i, r)| json!({
                "acquire_period": r.period,
                "frames": r.frames,
                "detector_fps": r.fps,
                "cpu_percent": r.cpu_pct,
                "cpu_ms_per_frame": r.cpu_ms_per_frame,
                "reference_cpu_ms_per_frame": refs[i].cpu_ms_per_frame,
                "reference_frames": refs[i].frames,
                "source_dropped": r.source_dropped,
                "dropped": PLUGINS.iter().zip(&r.dropped).map(|(n, d)| (n.to_string(), json!(d))).collect::<serde_json::Map<_, _>>(),
            })).collect::<Vec<_>>(),
        });
        std::fs::write(
            path,
            serde_json::to_string_pretty(&j).map_err(|e| e.to_string())? + "\n",
        )
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}
