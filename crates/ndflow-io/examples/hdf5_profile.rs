//! Profiles the HDF5 writer alone on pre-compressed frames (the "writer alone" rows of
//! `ndflow bench hdf5`): 1024x1024 UInt32 LinearRamp frames, compressed once per base frame
//! by the Codec plugin, then written with direct chunk writes, file after file.
//!
//! ```text
//! hdf5_profile [--codec bslz4|blosc|none] [--frames 500] [--files 10] [--dir /dev/shm]
//!              [--mode direct,graph,graphall] [--workers 0] [--window 16] [--poll-us 50]
//!              [--set Param=Value]...
//! ```
//! `direct` calls the plugin in this thread (PluginHarness); `graph` offers the frames to a
//! Graph port as the bench does (at most `--window` in flight, polled every `--poll-us`);
//! `graphall` offers them all at once. Several modes alternate file by file, so that they
//! see the same load on a shared machine. Prints per file the time per frame
//! (and, for `direct`, this thread's time on a CPU), then the best and median frames/s.
//! Run it under `perf record` for a profile of the writer.

use std::error::Error;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ndflow_core::{NDArray, ParamValue, Pool};
use ndflow_io::Hdf5FilePlugin;
use ndflow_plugins::codec::CodecPlugin;
use ndflow_runtime::{Graph, PluginHarness};

type Res<T> = Result<T, Box<dyn Error>>;

const WIDTH: usize = 1024;
const HEIGHT: usize = 1024;
const BASES: usize = 8;

/// This thread's time on a CPU (ns), from /proc (0 elsewhere).
fn cpu_ns() -> u64 {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    text.split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The Graph workers' time on a CPU and waiting for one (ns), summed (0 elsewhere).
fn workers_ns() -> (u64, u64) {
    let mut sum = (0, 0);
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return sum;
    };
    for t in dir.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if !comm.starts_with("ndflow-worker") {
            continue;
        }
        let text = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
        let mut it = text
            .split_whitespace()
            .map(|v| v.parse::<u64>().unwrap_or(0));
        sum.0 += it.next().unwrap_or(0);
        sum.1 += it.next().unwrap_or(0);
    }
    sum
}

/// The settings every file gets, then the caller's.
fn settings(
    dir: &Path,
    name: &str,
    frames: usize,
    sets: &[(String, String)],
) -> Vec<(String, ParamValue)> {
    let mut v: Vec<(String, ParamValue)> = vec![
        ("FilePath".into(), dir.to_string_lossy().as_ref().into()),
        ("FileName".into(), name.into()),
        ("FileTemplate".into(), "%s%s.h5".into()),
        ("FileWriteMode".into(), "Stream".into()),
        ("LazyOpen".into(), "Yes".into()),
        ("NumCapture".into(), (frames as i64).into()),
    ];
    v.extend(sets.iter().map(|(k, x)| (k.clone(), x.as_str().into())));
    v
}

/// One file written in this thread: (seconds, CPU seconds).
fn direct_file(put: &[(String, ParamValue)], frames: &[Arc<NDArray>]) -> Res<(f64, f64)> {
    let h = PluginHarness::new(Hdf5FilePlugin::new());
    for (k, v) in put {
        h.put(k, v.clone())?;
    }
    h.put("Capture", 1)?;
    let c0 = cpu_ns();
    let t0 = Instant::now();
    for f in frames {
        h.process_arc(f)?;
    }
    let s = t0.elapsed().as_secs_f64();
    let cpu = cpu_ns().saturating_sub(c0) as f64 / 1e9;
    if h.get_f64("NumCaptured") != frames.len() as f64 || h.get_f64("WriteStatus") != 0.0 {
        return Err(format!("write failed: {}", h.get("WriteMessage")).into());
    }
    Ok((s, cpu))
}

/// One file through a Graph port of `workers` threads (0 = one per core), at most `window`
/// frames in flight, as `ndflow bench hdf5` does (0, 16).
fn graph_file(
    put: &[(String, ParamValue)],
    frames: &[Arc<NDArray>],
    workers: usize,
    window: u64,
    poll_us: u64,
) -> Res<f64> {
    let g = Graph::new(workers);
    g.add_plugin("HDF1", Arc::new(Hdf5FilePlugin::new()))?;
    for (k, v) in put {
        g.put("HDF1", k, v.clone())?;
    }
    g.put("HDF1", "QueueSize", frames.len() as i64 + 1)?;
    g.put("HDF1", "Capture", 1i64)?;
    let port = g.plugin("HDF1").ok_or("no port")?;
    let t0 = Instant::now();
    for f in frames {
        while g.busy() >= window {
            std::thread::sleep(Duration::from_micros(poll_us));
        }
        port.offer(f);
    }
    // Graph::wait_idle sleeps 2 ms between looks: too coarse for 20-60 ms files.
    while g.busy() > 0 {
        if t0.elapsed() > Duration::from_secs(60) {
            return Err("the port did not drain".into());
        }
        std::thread::sleep(Duration::from_micros(poll_us));
    }
    let s = t0.elapsed().as_secs_f64();
    let (cpu, wait) = workers_ns();
    println!(
        "        workers (since the Graph started): on CPU {:.1} us/frame, runnable {:.1} us/frame",
        cpu as f64 / 1e3 / frames.len() as f64,
        wait as f64 / 1e3 / frames.len() as f64
    );
    let ok = g.get("HDF1", "WriteStatus")?.as_i64() == Some(0);
    g.shutdown();
    if !ok {
        return Err("write failed".into());
    }
    Ok(s)
}

fn main() -> Res<()> {
    let mut it = std::env::args().skip(1);
    let (mut codec, mut frames, mut files) = ("bslz4".to_string(), 500usize, 10usize);
    let (mut dir, mut mode) = (std::path::PathBuf::from("/dev/shm"), "direct".to_string());
    let mut sets = Vec::new();
    let (mut workers, mut window, mut poll_us) = (0usize, 16u64, 50u64);
    while let Some(flag) = it.next() {
        let v = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--codec" => codec = v,
            "--frames" => frames = v.parse::<usize>()?.max(1),
            "--files" => files = v.parse()?,
            "--dir" => dir = v.into(),
            "--mode" => mode = v,
            "--workers" => workers = v.parse()?,
            "--window" => window = v.parse()?,
            "--poll-us" => poll_us = v.parse()?,
            "--set" => {
                let (k, x) = v.split_once('=').ok_or("--set wants NAME=VALUE")?;
                sets.push((k.to_string(), x.to_string()));
            }
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    let codec_settings: &[(&str, &str)] = match codec.as_str() {
        "bslz4" => &[("Compressor", "BSLZ4")],
        "blosc" => &[
            ("Compressor", "Blosc"),
            ("BloscCompressor", "LZ4"),
            ("BloscCLevel", "6"),
            ("BloscShuffle", "Byte"),
        ],
        "none" => &[],
        other => return Err(format!("unknown codec {other}").into()),
    };
    let modes: Vec<&str> = mode.split(',').collect();
    if let Some(m) = modes
        .iter()
        .find(|m| !["direct", "graph", "graphall"].contains(m))
    {
        return Err(format!("unknown mode {m}").into());
    }
    let pool = Pool::unlimited();
    let c = PluginHarness::new(CodecPlugin::new());
    for (k, v) in codec_settings {
        c.put(k, *v)?;
    }
    let mut packed = Vec::new();
    for k in 0..BASES {
        let px: Vec<u32> = (0..WIDTH * HEIGHT)
            .map(|i| (i % WIDTH + i / WIDTH + k) as u32)
            .collect();
        let f = NDArray::from_pixels(&pool, &[WIDTH, HEIGHT], &px)?;
        let f = if codec_settings.is_empty() {
            Arc::new(f)
        } else {
            c.process(f)?.pop().ok_or("no codec output")?
        };
        packed.push(f);
    }
    let all: Vec<Arc<NDArray>> = (0..frames)
        .map(|i| {
            let mut f = (*packed[i % BASES]).clone();
            f.unique_id = i as i32 + 1;
            f.time_stamp = i as f64;
            Arc::new(f)
        })
        .collect();
    let name = format!("ndflow-hdf5-profile-{}", std::process::id());
    let path = dir.join(format!("{name}.h5"));
    let put = settings(&dir, &name, frames, &sets);
    let mut rates = vec![Vec::new(); modes.len()];
    for _ in 0..files {
        for (m, rate) in modes.iter().zip(&mut rates) {
            let (s, cpu) = match *m {
                "graph" => (graph_file(&put, &all, workers, window, poll_us)?, None),
                "graphall" => (graph_file(&put, &all, workers, u64::MAX, poll_us)?, None),
                _ => {
                    let (s, cpu) = direct_file(&put, &all)?;
                    (s, Some(cpu))
                }
            };
            let bytes = std::fs::metadata(&path)?.len();
            std::fs::remove_file(&path)?;
            rate.push(frames as f64 / s);
            let per = |t: f64| t * 1e6 / frames as f64;
            println!(
                "{m:>6}: {:.1} ms, {:.0} frames/s, {:.0} MB/s disk; {:.1} us/frame{}",
                s * 1e3,
                frames as f64 / s,
                bytes as f64 / 1e6 / s,
                per(s),
                cpu.map_or(String::new(), |c| format!(" (on CPU {:.1})", per(c)))
            );
        }
    }
    for (m, mut r) in modes.iter().zip(rates) {
        r.sort_by(f64::total_cmp);
        if let (Some(best), Some(median)) = (r.last(), r.get(r.len() / 2)) {
            println!("{codec} {m}: best {best:.0} frames/s, median {median:.0}");
        }
    }
    Ok(())
}
