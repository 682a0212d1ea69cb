//! `ndflow bench hdf5`: the HDF5 writing table of "Smaller and faster" (areaDetector, 2019) on
//! this machine. 1024x1024 UInt32 frames like the simulator's LinearRamp (compressible) go into one
//! HDF5 file per row through the real ports:
//!
//! 1. no compression (raw chunks, direct chunk write);
//! 2. compression inside the HDF5 filter pipeline (BSLZ4; Blosc LZ4 byte shuffle level 6):
//!    one writer thread compresses;
//! 3. pre-compressed by the Codec plugin (Blosc LZ4 byte shuffle level 6; BSLZ4) on
//!    `codec_threads` threads, then direct chunk write;
//! 4. the writer alone on frames compressed beforehand (the HDF5 overhead of a direct chunk
//!    write; the 2019 measurement needed 5.4 GB/s), on 20x as many frames so the file's creation (a few
//!    ms) does not dominate and each file takes 0.1 s or more.
//!
//! Each of our files is timed from the first frame offered until the writer has closed it,
//! with every frame offered at once by default (`--window` bounds the frames in the pipeline,
//! as a detector with a bounded buffer pool); queues never overflow, so drops should be 0.
//! Beside each of our files the same frames are written by h5py + hdf5plugin (libhdf5 and the
//! C filters, one thread) in one long-running Python process (`python/bench/hdf5_ref.py`),
//! interleaved A B, B A, … ([`crate::paired`]): "x C" is the median over the pairs of our
//! frames/s over theirs, with its spread. Files go to /dev/shm when it exists (tmpfs: memory
//! speed, the disk is not measured), else the temp directory; each file is deleted after it
//! is timed.
//!
//! Our files hold what NDFileHDF5 writes (the NeXus layout with uniqueId, timestamps and the
//! performance dataset, one row per frame); the reference writes the frame dataset only, so
//! any difference in extra work counts against us.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ndflow_core::{NDArray, ParamValue, Pool};
use ndflow_runtime::{Graph, PluginHarness};
use serde_json::json;

use crate::host::{self, PyWorker};
use crate::paired::Paired;

pub struct Hdf5Options {
    /// Frames per file (default 100: 400 MB uncompressed per row).
    pub frames: usize,
    /// Codec plugin threads for the pre-compressed rows.
    pub codec_threads: usize,
    /// Interleaved pairs (ours, reference) per row, after one unpaired warm-up run of each.
    pub reps: usize,
    /// Frames in the pipeline at once (0: all offered at once).
    pub window: u64,
    /// Only the rows with these keys (`none`, `bslz4_filter`, …; empty: all).
    pub only: Vec<String>,
    /// Where to write (default /dev/shm if present, else the temp directory).
    pub dir: Option<PathBuf>,
    /// Python with h5py, hdf5plugin, bitshuffle, blosc (default .venv/bin/python if present).
    pub python: Option<PathBuf>,
    pub json: Option<PathBuf>,
}

impl Default for Hdf5Options {
    fn default() -> Self {
        Hdf5Options {
            frames: 100,
            codec_threads: 2,
            reps: 11,
            window: 0,
            only: Vec::new(),
            dir: None,
            python: None,
            json: None,
        }
    }
}

const WIDTH: usize = 1024;
const HEIGHT: usize = 1024;
/// Distinct base frames (the rest reuse their pixels with new uniqueIds).
const BASES: usize = 8;
/// The writer-alone rows write this many times more frames.
const WRITE_ONLY_FACTOR: usize = 20;

/// The simulator's LinearRamp with unit gains: frame k holds x + y + k.
fn base_frames(pool: &Pool) -> Result<Vec<NDArray>, String> {
    (0..BASES)
        .map(|k| {
            let px: Vec<u32> = (0..WIDTH * HEIGHT)
                .map(|i| (i % WIDTH + i / WIDTH + k) as u32)
                .collect();
            NDArray::from_pixels(pool, &[WIDTH, HEIGHT], &px).map_err(|e| e.to_string())
        })
        .collect()
}

/// Frame `i` of a file: base `i % BASES` under uniqueId `i + 1`.
fn frame_at(bases: &[Arc<NDArray>], i: usize) -> Arc<NDArray> {
    let mut f = (*bases[i % bases.len()]).clone();
    f.unique_id = i as i32 + 1;
    f.time_stamp = i as f64;
    Arc::new(f)
}

/// What one of our runs measured.
struct Run {
    seconds: f64,
    file_bytes: u64,
    dropped: u64,
}

fn put(g: &Graph, port: &str, k: &str, v: impl Into<ParamValue>) -> Result<(), String> {
    g.put(port, k, v)
        .map(|_| ())
        .map_err(|e| format!("{port}.{k}: {e}"))
}

/// Sets up HDF1 in `g`.
fn hdf5_port(
    g: &Graph,
    dir: &Path,
    name: &str,
    frames: usize,
    settings: &[(&str, &str)],
) -> Result<(), String> {
    g.add_plugin("HDF1", Arc::new(ndflow_io::Hdf5FilePlugin::new()))
        .map_err(|e| e.to_string())?;
    put(g, "HDF1", "FilePath", dir.to_string_lossy().as_ref())?;
    put(g, "HDF1", "FileName", name)?;
    put(g, "HDF1", "FileTemplate", "%s%s.h5")?;
    put(g, "HDF1", "FileWriteMode", "Stream")?;
    put(g, "HDF1", "LazyOpen", "Yes")?;
    put(g, "HDF1", "NumCapture", frames as i64)?;
    put(g, "HDF1", "QueueSize", frames as i64 + 1)?;
    for (k, v) in settings {
        put(g, "HDF1", k, *v)?;
    }
    put(g, "HDF1", "Capture", 1)
}

/// Sets up CODEC1 in `g`, feeding HDF1.
fn codec_port(
    g: &Graph,
    frames: usize,
    threads: usize,
    settings: &[(&str, &str)],
) -> Result<(), String> {
    g.add_plugin(
        "CODEC1",
        Arc::new(ndflow_plugins::codec::CodecPlugin::new()),
    )
    .map_err(|e| e.to_string())?;
    put(g, "CODEC1", "QueueSize", frames as i64 + 1)?;
    put(g, "CODEC1", "NumThreads", threads as i64)?;
    for (k, v) in settings {
        put(g, "CODEC1", k, *v)?;
    }
    put(g, "HDF1", "NDArrayPort", "CODEC1")
}

/// One of our files: a fresh graph (optional Codec plugin, then the HDF5 writer); offers
/// `frames` to the first port (at most `window` in the pipeline at once, 0 = all at once),
/// waits until every port is idle and the file is closed, then checks the counters.
fn our_run(
    dir: &Path,
    row: &RowSpec,
    frames: &[Arc<NDArray>],
    codec_threads: usize,
    window: u64,
) -> Result<Run, String> {
    let g = Graph::new(0);
    let r = our_run_in(&g, dir, row, frames, codec_threads, window);
    g.shutdown();
    r
}

fn our_run_in(
    g: &Graph,
    dir: &Path,
    row: &RowSpec,
    frames: &[Arc<NDArray>],
    codec_threads: usize,
    window: u64,
) -> Result<Run, String> {
    let name = row.key;
    hdf5_port(g, dir, name, frames.len(), row.hdf)?;
    let first = match row.codec {
        Some(settings) => {
            codec_port(g, frames.len(), codec_threads, settings)?;
            "CODEC1"
        }
        None => "HDF1",
    };
    let path = dir.join(format!("{name}.h5"));
    let port = g.plugin(first).ok_or("no first port")?;
    let t0 = Instant::now();
    for f in frames {
        while window > 0 && g.busy() >= window {
            std::thread::sleep(Duration::from_micros(50));
        }
        port.offer(f);
    }
    // The last frame closes the file. The waiting thread sleeps half the time the frames
    // still in the pipeline but the last should take at the rate so far, 200 µs at the end:
    // a few dozen wake-ups per file instead of one every 200 µs (5,000/s, each of which
    // could preempt the writer on a 2-core machine). No nap is longer than 2 % of the time
    // so far: right after the offers the rate is a guess from one or two frames (and the
    // file's creation), and a 50 ms nap then, in a file that took 28 ms, was measured as
    // half our frames/s in some files and not in others.
    let deadline = t0 + Duration::from_secs(300);
    let total = frames.len() as f64;
    loop {
        let left = g.busy();
        if left == 0 || Instant::now() >= deadline {
            break;
        }
        let done = (total - left as f64).max(1.0);
        let elapsed = t0.elapsed().as_secs_f64();
        let per_frame = elapsed / done;
        let nap = (per_frame * (left - 1) as f64 / 2.0)
            .min(elapsed / 50.0)
            .clamp(200e-6, 0.05);
        std::thread::sleep(Duration::from_secs_f64(nap));
    }
    let seconds = t0.elapsed().as_secs_f64();
    if !g.wait_idle(Duration::from_secs(1)) {
        return Err(format!("{name}: the ports did not drain"));
    }
    let mut dropped = 0;
    for p in ["CODEC1", "HDF1"] {
        if let Some(p) = g.plugin(p) {
            dropped += p.accounting().dropped_total();
        }
    }
    let get = |k: &str| g.get("HDF1", k).ok().and_then(|v| v.as_i64()).unwrap_or(-1);
    if get("WriteStatus") != 0 {
        return Err(format!("{name}: {:?}", g.get("HDF1", "WriteMessage")));
    }
    let written = get("NumCaptured");
    if written != frames.len() as i64 {
        return Err(format!(
            "{name}: {written} of {} frames written",
            frames.len()
        ));
    }
    let file_bytes = std::fs::metadata(&path)
        .map_err(|e| format!("{name}: {e}"))?
        .len();
    let _ = std::fs::remove_file(&path);
    Ok(Run {
        seconds,
        file_bytes,
        dropped,
    })
}

/// One row of the table: how our side is set up and which reference row it is paired with.
struct RowSpec {
    label: &'static str,
    /// Our file's name and the JSON key.
    key: &'static str,
    /// The row of `hdf5_ref.py`.
    reference: &'static str,
    hdf: &'static [(&'static str, &'static str)],
    codec: Option<&'static [(&'static str, &'static str)]>,
    /// Frames compressed beforehand with these Codec settings (the writer-alone rows).
    packed: Option<&'static [(&'static str, &'static str)]>,
}

const BLOSC: &[(&str, &str)] = &[
    ("Compressor", "Blosc"),
    ("BloscCompressor", "LZ4"),
    ("BloscCLevel", "6"),
    ("BloscShuffle", "Byte"),
];
const BSLZ4: &[(&str, &str)] = &[("Compressor", "BSLZ4")];

const ROWS: &[RowSpec] = &[
    RowSpec {
        label: "no compression",
        key: "none",
        reference: "none",
        hdf: &[],
        codec: None,
        packed: None,
    },
    RowSpec {
        label: "HDF5 filter: BSLZ4",
        key: "bslz4_filter",
        reference: "bslz4_filter",
        hdf: &[("Compression", "BSLZ4")],
        codec: None,
        packed: None,
    },
    RowSpec {
        label: "HDF5 filter: Blosc LZ4 byte 6",
        key: "blosc_filter",
        reference: "blosc_filter",
        hdf: &[
            ("Compression", "Blosc"),
            ("BloscCompressor", "LZ4"),
            ("BloscLevel", "6"),
            ("BloscShuffle", "Byte"),
        ],
        codec: None,
        packed: None,
    },
    RowSpec {
        label: "Codec Blosc LZ4 byte 6 + DCW",
        key: "blosc_codec",
        reference: "blosc_dcw",
        hdf: &[],
        codec: Some(BLOSC),
        packed: None,
    },
    RowSpec {
        label: "Codec BSLZ4 + DCW",
        key: "bslz4_codec",
        reference: "bslz4_dcw",
        hdf: &[],
        codec: Some(BSLZ4),
        packed: None,
    },
    RowSpec {
        label: "writer alone, Blosc chunks",
        key: "blosc_write_only",
        reference: "blosc_dcw_write",
        hdf: &[],
        codec: None,
        packed: Some(BLOSC),
    },
    RowSpec {
        label: "writer alone, BSLZ4 chunks",
        key: "bslz4_write_only",
        reference: "bslz4_dcw_write",
        hdf: &[],
        codec: None,
        packed: Some(BSLZ4),
    },
];

fn precompress(
    frames: &[Arc<NDArray>],
    settings: &[(&str, &str)],
) -> Result<Vec<Arc<NDArray>>, String> {
    let h = PluginHarness::new(ndflow_plugins::codec::CodecPlugin::new());
    for (k, v) in settings {
        h.put(k, *v).map_err(|e| e.to_string())?;
    }
    frames
        .iter()
        .map(|f| {
            h.process_arc(f)
                .map_err(|e| e.to_string())?
                .pop()
                .ok_or_else(|| "the Codec plugin emitted nothing".to_string())
        })
        .collect()
}

/// Starts the h5py worker on the base frames (written to `dir` for it to read once).
fn start_reference(python: &Path, dir: &Path, bases: &[Arc<NDArray>]) -> Result<PyWorker, String> {
    let mut raw = Vec::with_capacity(bases.len() * WIDTH * HEIGHT * 4);
    for b in bases {
        raw.extend_from_slice(b.data_bytes());
    }
    std::fs::write(dir.join("frames.raw"), &raw).map_err(|e| e.to_string())?;
    std::fs::write(
        dir.join("frames.json"),
        json!({"k": bases.len(), "height": HEIGHT, "width": WIDTH}).to_string(),
    )
    .map_err(|e| e.to_string())?;
    let script = host::repo_path("python/bench/hdf5_ref.py");
    let dir_arg = dir.to_string_lossy();
    PyWorker::start(python, &script, &[dir_arg.as_ref()])
}

/// One reference file: frames/s and file bytes.
fn reference_run(py: &mut PyWorker, row: &str, frames: usize) -> Result<(f64, f64), String> {
    let a = py.call(&json!({"row": row, "frames": frames}))?;
    let seconds = a["seconds"].as_f64().filter(|s| *s > 0.0);
    let bytes = a["bytes"].as_f64();
    match (seconds, bytes) {
        (Some(s), Some(b)) => Ok((frames as f64 / s, b)),
        _ => Err(format!("reference row {row}: answer {a}")),
    }
}

/// Runs every row and returns the table (also printed by the caller).
pub fn run(opts: &Hdf5Options) -> Result<String, String> {
    let n = opts.frames.max(2);
    let shm = Path::new("/dev/shm");
    let base_dir = opts.dir.clone().unwrap_or_else(|| {
        if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        }
    });
    let dir = base_dir.join(format!("ndflow-bench-hdf5-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let result = rows(opts, n, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// What a row measured over its pairs.
struct RowResult {
    frames: usize,
    /// Frames/s, ours and the reference's, per interleaved pair.
    fps: Paired,
    file_bytes: u64,
    c_file_bytes: Option<f64>,
    dropped: u64,
}

fn rows(opts: &Hdf5Options, n: usize, dir: &Path) -> Result<String, String> {
    let chosen: Vec<&RowSpec> = ROWS
        .iter()
        .filter(|r| opts.only.is_empty() || opts.only.iter().any(|k| k == r.key))
        .collect();
    if chosen.is_empty() {
        let keys: Vec<&str> = ROWS.iter().map(|r| r.key).collect();
        return Err(format!(
            "--rows {:?}: no such row (rows: {})",
            opts.only,
            keys.join(", ")
        ));
    }
    let pool = Pool::unlimited();
    let bases: Vec<Arc<NDArray>> = base_frames(&pool)?.into_iter().map(Arc::new).collect();
    let t = opts.codec_threads.max(1);
    let reps = opts.reps.max(1);
    let python = opts.python.clone().or_else(host::venv_python_if_present);
    let mut reference = match &python {
        Some(py) => {
            eprintln!(
                "h5py + hdf5plugin ({}) writes the same frames, interleaved with ours ...",
                py.display()
            );
            Some(start_reference(py, dir, &bases)?)
        }
        None => {
            eprintln!("no Python with h5py + hdf5plugin found (--python): C columns left empty");
            None
        }
    };
    let mut results = Vec::new();
    for row in chosen.iter().copied() {
        let count = if row.packed.is_some() {
            WRITE_ONLY_FACTOR * n
        } else {
            n
        };
        let frames: Vec<Arc<NDArray>> = match row.packed {
            // Compressed once per base frame; the copies share the compressed bytes.
            Some(settings) => {
                let packed = precompress(&bases, settings)?;
                (0..count).map(|i| frame_at(&packed, i)).collect()
            }
            None => (0..count).map(|i| frame_at(&bases, i)).collect(),
        };
        let mut res = RowResult {
            frames: count,
            fps: Paired::default(),
            file_bytes: 0,
            c_file_bytes: None,
            dropped: 0,
        };
        // One unpaired run of each side first (caches, tmpfs pages, the interpreter's
        // imports), then A B, B A, A B, … so neither side always goes first.
        for rep in 0..=reps {
            let ours_first = rep % 2 == 0;
            let mut ours = None;
            let mut theirs = None;
            for side in 0..2 {
                if (side == 0) == ours_first {
                    let r = our_run(dir, row, &frames, t, opts.window)?;
                    ours = Some(r);
                } else if let Some(py) = reference.as_mut() {
                    theirs = Some(reference_run(py, row.reference, count)?);
                }
            }
            if rep == 0 {
                continue;
            }
            let Some(ours) = ours else { continue };
            res.file_bytes = ours.file_bytes;
            res.dropped += ours.dropped;
            let ours_fps = count as f64 / ours.seconds;
            match theirs {
                Some((fps, bytes)) => {
                    res.c_file_bytes = Some(bytes);
                    res.fps.push(ours_fps, fps);
                }
                None => res.fps.push(ours_fps, f64::NAN),
            }
        }
        results.push((row, res));
    }
    drop(reference);
    let _ = std::fs::remove_file(dir.join("frames.raw"));
    let _ = std::fs::remove_file(dir.join("frames.json"));
    table(opts, n, t, reps, dir, &results)
}

fn table(
    opts: &Hdf5Options,
    n: usize,
    t: usize,
    reps: usize,
    dir: &Path,
    results: &[(&RowSpec, RowResult)],
) -> Result<String, String> {
    let frame_mb = (WIDTH * HEIGHT * 4) as f64 / 1e6;
    let mut table = String::new();
    let window = match opts.window {
        0 => "all frames offered at once".to_string(),
        w => format!("at most {w} frames in the pipeline"),
    };
    let _ = writeln!(
        table,
        "HDF5 writing, {n} frames ({} for the writer alone) of {WIDTH}x{HEIGHT} UInt32 \
         (LinearRamp) per file, into {} (Codec plugin: {t} threads; {window}; medians of \
         {reps} interleaved pairs; MB = 10^6 bytes):",
        WRITE_ONLY_FACTOR * n,
        dir.parent().unwrap_or(dir).display()
    );
    let _ = writeln!(
        table,
        "{:<30} {:>8} {:>9} {:>8} {:>7} | {:>8} {:>9} {:>7} | {:>13}",
        "mode",
        "frames/s",
        "MB/s",
        "file MB",
        "dropped",
        "C fr/s",
        "C MB/s",
        "C file",
        "x C (median)"
    );
    let mut out = Vec::new();
    let mut unsteady = false;
    for (row, r) in results {
        let fps = r.fps.ours_median();
        let c_fps = r.fps.reference_median();
        let has_c = c_fps.is_finite();
        unsteady |= has_c && r.fps.unsteady();
        let fmt = |v: f64, p: usize| {
            if v.is_finite() {
                format!("{v:.p$}")
            } else {
                "-".to_string()
            }
        };
        let _ = writeln!(
            table,
            "{:<30} {:>8.0} {:>9.0} {:>8.1} {:>7} | {:>8} {:>9} {:>7} | {:>13}",
            row.label,
            fps,
            fps * frame_mb,
            r.file_bytes as f64 / 1e6,
            r.dropped,
            fmt(c_fps, 0),
            fmt(c_fps * frame_mb, 0),
            r.c_file_bytes
                .map_or("-".to_string(), |b| format!("{:.1}", b / 1e6)),
            if has_c {
                r.fps.ratio_text()
            } else {
                "-".to_string()
            },
        );
        out.push(json!({
            "mode": row.label, "key": row.key, "reference_row": row.reference,
            "frames": r.frames, "frames_per_s": fps, "mb_s_uncompressed": fps * frame_mb,
            "file_bytes": r.file_bytes, "dropped": r.dropped,
            "c_frames_per_s": if has_c { json!(c_fps) } else { json!(null) },
            "c_file_bytes": r.c_file_bytes,
            "frames_per_s_pairs": r.fps.to_json(),
        }));
    }
    let _ = writeln!(
        table,
        "C = h5py + hdf5plugin (libhdf5 of its wheel), one thread, in one long-running process; \
         \"DCW\" rows of C compress with python bitshuffle/blosc in the same thread. \
         x C = median of per-pair ratios ± half their range{}.",
        if unsteady {
            "; \"!\" = spread above ±10 %, not to be trusted"
        } else {
            ""
        }
    );
    if let Some(path) = &opts.json {
        let j = json!({
            "rows": out, "dir": dir.parent().map(|p| p.display().to_string()),
            "codec_threads": t, "pairs": reps, "window": opts.window,
        });
        std::fs::write(
            path,
            serde_json::to_string_pretty(&j).map_err(|e| e.to_string())? + "\n",
        )
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(table)
}
