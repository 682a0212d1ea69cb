//! `ndflow bench codec`: compression speed and ratio per core on detector-like data, next to
//! the C libraries, and the scaling of the Codec plugin from 1 to 2 threads.
//!
//! Each row times ours and its reference in interleaved pairs on the same bytes with warm,
//! preallocated buffers (see [`crate::paired`]): liblz4, c-blosc and zlib are called in this
//! process through their C APIs ([`crate::c_ref`]); python `bitshuffle`, whose C library
//! we do not link, runs in a long-lived worker (`python/bench/codec_ref.py`) one batch per
//! request.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ndflow_codec::blosc::{BloscCompressor, BloscParams, BloscShuffle};
use ndflow_codec::bslz4::BsFraming;
use ndflow_codec::{blosc, bslz4, lz4, zlib, CodecError};
use ndflow_core::{NDArray, Pool};
use ndflow_runtime::Graph;
use serde_json::json;

use crate::c_ref;
use crate::host::{self, PyWorker};
use crate::paired::Paired;

pub struct CodecOptions {
    pub json: Option<PathBuf>,
    /// Python with bitshuffle, blosc, lz4 and numpy (default: .venv/bin/python if present).
    pub python: Option<PathBuf>,
    /// Interleaved pairs (ours, reference) per row.
    pub reps: usize,
    /// Least duration of one timed batch of calls, in ms.
    pub batch_ms: f64,
    /// Frame side in pixels (1024 for the recorded figures; smaller for quick checks).
    pub side: usize,
    pub clock: Clock,
    /// Only the codecs whose names contain one of these (all when empty).
    pub only: Vec<String>,
}

struct Dataset {
    name: String,
    elem: usize,
    bytes: Vec<u8>,
}

/// xorshift64*: deterministic data without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn uniform(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    /// Poisson(λ): Knuth's product method below 30, the normal approximation above.
    fn poisson(&mut self, lambda: f64) -> u64 {
        if lambda < 30.0 {
            let limit = (-lambda).exp();
            let (mut k, mut p) = (0u64, 1.0);
            loop {
                p *= self.uniform();
                if p <= limit {
                    return k;
                }
                k += 1;
            }
        }
        let z = (-2.0 * self.uniform().ln()).sqrt()
            * (2.0 * std::f64::consts::PI * self.uniform()).cos();
        (lambda + lambda.sqrt() * z).round().max(0.0) as u64
    }
}

fn datasets(side: usize) -> Vec<Dataset> {
    let (w, h) = (side, side);
    let mut out = Vec::new();
    for elem in [2usize, 4] {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let low: Vec<u64> = (0..w * h).map(|_| rng.poisson(0.5)).collect();
        let ramp: Vec<u64> = (0..w * h)
            .map(|i| rng.poisson(1.0 + 199.0 * (i % w) as f64 / (w - 1) as f64))
            .collect();
        // The simulator's LinearRamp with unit gains: (x + y + 1), wrapping in UInt16.
        let sim: Vec<u64> = (0..w * h).map(|i| ((i % w) + (i / w) + 1) as u64).collect();
        for (name, v) in [
            ("poisson_low", low),
            ("poisson_ramp", ramp),
            ("sim_ramp", sim),
        ] {
            let bytes: Vec<u8> = if elem == 2 {
                v.iter().flat_map(|x| (*x as u16).to_le_bytes()).collect()
            } else {
                v.iter().flat_map(|x| (*x as u32).to_le_bytes()).collect()
            };
            out.push(Dataset {
                name: format!("{name}_u{}", elem * 8),
                elem,
                bytes,
            });
        }
    }
    out
}

type Codec1 = Box<dyn Fn(&[u8], usize, &mut [u8]) -> Result<usize, CodecError>>;

/// Who the reference is for a codec.
enum Reference {
    /// A C library this binary links, called straight through its C API in this process.
    /// `same_bytes`: our stream must equal the C library's byte for byte.
    InProcess {
        label: &'static str,
        comp: Codec1,
        decomp: Codec1,
        same_bytes: bool,
    },
    /// A Python package's codec run by the long-running worker `python/bench/codec_ref.py`.
    Python { label: &'static str },
}

struct Codec {
    name: &'static str,
    comp: Codec1,
    decomp: Codec1,
    reference: Reference,
}

fn blosc_params(shuffle: BloscShuffle) -> BloscParams {
    BloscParams {
        compressor: BloscCompressor::LZ4,
        clevel: 5,
        shuffle,
        num_threads: 1,
        block_size: 0,
    }
}

fn codecs() -> Vec<Codec> {
    let blosc_row = |name, shuffle: BloscShuffle| Codec {
        name,
        comp: Box::new(move |i, e, o| blosc::compress(i, e, &blosc_params(shuffle), o)),
        decomp: Box::new(|i, _, o| blosc::decompress(i, o)),
        reference: Reference::InProcess {
            label: "c-blosc blosc_*_ctx",
            comp: Box::new(move |i, e, o| c_ref::blosc_compress(i, e, &blosc_params(shuffle), o)),
            decomp: Box::new(|i, _, o| c_ref::blosc_decompress(i, o)),
            same_bytes: true,
        },
    };
    vec![
        Codec {
            name: "bslz4",
            comp: Box::new(|i, e, o| bslz4::compress(i, e, 0, BsFraming::AreaDetector, o)),
            decomp: Box::new(|i, e, o| bslz4::decompress(i, e, BsFraming::AreaDetector, o)),
            reference: Reference::Python {
                label: "python bitshuffle",
            },
        },
        blosc_row("blosc-lz4-byte5", BloscShuffle::Byte),
        blosc_row("blosc-lz4-bit5", BloscShuffle::Bit),
        Codec {
            name: "lz4",
            comp: Box::new(|i, _, o| lz4::compress_block(i, o)),
            decomp: Box::new(|i, _, o| lz4::decompress_block(i, o)),
            reference: Reference::InProcess {
                label: "liblz4",
                comp: Box::new(|i, _, o| c_ref::lz4_compress(i, o)),
                decomp: Box::new(|i, _, o| c_ref::lz4_decompress(i, o)),
                same_bytes: true,
            },
        },
        Codec {
            name: "zlib6",
            comp: Box::new(|i, _, o| zlib::compress(i, 6, o)),
            decomp: Box::new(|i, _, o| zlib::decompress(i, o)),
            reference: Reference::InProcess {
                label: "C zlib compress2/uncompress",
                comp: Box::new(|i, _, o| c_ref::zlib_compress(i, 6, o)),
                decomp: Box::new(|i, _, o| c_ref::zlib_decompress(i, o)),
                same_bytes: false,
            },
        },
    ]
}

/// Times `calls` back-to-back calls; seconds.
type Timer<'a> = Box<dyn FnMut(usize) -> Result<f64, String> + 'a>;

/// What a batch is timed with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    /// CPU time of the process (Python: `time.process_time`): on a shared machine the slices
    /// other processes take while a batch runs are not counted against it. Both sides are
    /// single-threaded compute, so on a quiet machine this equals the wall time.
    Cpu,
    /// Wall-clock time.
    Wall,
}

impl Clock {
    pub fn name(self) -> &'static str {
        match self {
            Clock::Cpu => "cpu",
            Clock::Wall => "wall",
        }
    }

    fn now(self) -> f64 {
        if self == Clock::Cpu {
            let t = host::process_cpu_seconds();
            if t.is_finite() {
                return t;
            }
        }
        static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_secs_f64()
    }
}

fn rust_timer<'a>(
    clock: Clock,
    mut f: impl FnMut() -> Result<usize, CodecError> + 'a,
) -> Timer<'a> {
    Box::new(move |calls| {
        let t0 = clock.now();
        for _ in 0..calls {
            f().map_err(|e| e.to_string())?;
        }
        Ok(clock.now() - t0)
    })
}

fn python_timer<'a>(
    clock: Clock,
    worker: &'a mut PyWorker,
    data: &'a str,
    codec: &'a str,
    op: &'a str,
) -> Timer<'a> {
    Box::new(move |calls| {
        let a = worker.call(
            &json!({"data": data, "codec": codec, "op": op, "calls": calls, "clock": clock.name()}),
        )?;
        a["seconds"]
            .as_f64()
            .ok_or_else(|| format!("the reference answered {a} without seconds"))
    })
}

/// Interleaved pairs of batches, ours and the reference's turn first alternating, in MB/s of
/// uncompressed data. A batch repeats the call until it lasts `batch_s` on the faster side,
/// so the clock's resolution and per-request costs stay small; both sides run the same count.
fn measure(
    reps: usize,
    batch_s: f64,
    bytes: usize,
    ours: &mut Timer<'_>,
    reference: Option<&mut Timer<'_>>,
) -> Result<(Paired, usize), String> {
    // Warm-up (buffers, caches, branch predictors), then one timed call of each side.
    let mut single = ours(1).and_then(|_| ours(1))?;
    let mut reference = reference;
    if let Some(r) = reference.as_mut() {
        single = single.min(r(1).and_then(|_| r(1))?);
    }
    let calls = ((batch_s / single.max(1e-9)).ceil() as usize).clamp(1, 100_000);
    let rate = |s: f64| (bytes * calls) as f64 / s / 1e6;
    let mut p = Paired::default();
    for i in 0..reps.max(1) {
        match reference.as_mut() {
            Some(r) if i % 2 == 1 => {
                let b = r(calls)?;
                p.push(rate(ours(calls)?), rate(b));
            }
            Some(r) => {
                let a = ours(calls)?;
                p.push(rate(a), rate(r(calls)?));
            }
            None => p.push(rate(ours(calls)?), f64::NAN),
        }
    }
    Ok((p, calls))
}

/// [`measure`] against the Python worker's `(data, codec, op)`, or ours alone without one.
fn measure_py(
    opts: &CodecOptions,
    batch_s: f64,
    bytes: usize,
    mut ours: Timer<'_>,
    worker: Option<&mut PyWorker>,
    (data, codec, op): (&str, &str, &str),
) -> Result<(Paired, usize), String> {
    match worker {
        Some(w) => {
            // Python's scalar code and our SIMD code slow down by different amounts when the
            // other core is busy, so these pair ratios scatter more than those of two C calls
            // in one process: three times the pairs keep the median steady from run to run.
            let mut py = python_timer(opts.clock, w, data, codec, op);
            measure(opts.reps * 3, batch_s, bytes, &mut ours, Some(&mut py))
        }
        None => measure(opts.reps, batch_s, bytes, &mut ours, None),
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// Writes the data sets for the Python worker and starts it.
fn start_python(python: &Path, dir: &Path, sets: &[Dataset]) -> Result<PyWorker, String> {
    let meta: Vec<serde_json::Value> = sets
        .iter()
        .map(|d| {
            let file = format!("{}.raw", d.name);
            std::fs::write(dir.join(&file), &d.bytes).map_err(|e| e.to_string())?;
            Ok(json!({"name": d.name, "file": file, "dtype": if d.elem == 2 { "<u2" } else { "<u4" }}))
        })
        .collect::<Result<_, String>>()?;
    std::fs::write(
        dir.join("datasets.json"),
        serde_json::to_string(&meta).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let script = host::repo_path("python/bench/codec_ref.py");
    let dir_arg = dir.to_string_lossy();
    PyWorker::start(python, &script, &[dir_arg.as_ref()])
}

/// Frames/s of the Codec plugin (BSLZ4) with `threads` threads on `frame`.
fn plugin_rate(frame: &Arc<NDArray>, threads: i64, frames: usize) -> Result<f64, String> {
    let g = Graph::new(threads as usize);
    let codec = g
        .add_plugin(
            "CODEC1",
            Arc::new(ndflow_plugins::codec::CodecPlugin::new()),
        )
        .map_err(|e| e.to_string())?;
    let put = |k: &str, v: ndflow_core::ParamValue| {
        g.put("CODEC1", k, v).map(|_| ()).map_err(|e| e.to_string())
    };
    put("Compressor", "BSLZ4".into())?;
    put("NumThreads", threads.into())?;
    put("QueueSize", (frames as i64).into())?;
    let t0 = Instant::now();
    for _ in 0..frames {
        codec.offer(frame);
    }
    g.wait_idle(Duration::from_secs(120));
    let dt = t0.elapsed().as_secs_f64();
    let a = codec.accounting();
    if a.processed != frames as u64 {
        return Err(format!(
            "codec plugin processed {} of {frames}",
            a.processed
        ));
    }
    g.shutdown();
    Ok(frames as f64 / dt)
}

pub fn codec(opts: &CodecOptions) -> Result<(), String> {
    let side = opts.side.max(8);
    let sets = datasets(side);
    let python = opts.python.clone().or_else(host::venv_python_if_present);
    let dir = std::env::temp_dir().join(format!("ndflow-bench-codec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let worker = match &python {
        Some(py) => start_python(py, &dir, &sets),
        None => Err("no Python with bitshuffle found (--python)".into()),
    };
    let mut worker = match worker {
        Ok(w) => Some(w),
        Err(e) => {
            eprintln!("{e}: the python-bitshuffle columns are left empty");
            None
        }
    };
    let load_before = load_average();
    let batch_s = opts.batch_ms / 1e3;
    println!(
        "Compression per core, {side}x{side} frames, MB/s of uncompressed data. Ours and the \
         reference interleaved, {} pairs of batches ≥ {} ms per row (3× that for python); speed figures are medians, \
         × = median of the pair ratios ±half their range (! = more than ±10 %), {} time. \
         Reference: the C library in this process (liblz4, c-blosc, zlib), python bitshuffle \
         for bslz4. Load average {load_before}.",
        opts.reps,
        opts.batch_ms,
        opts.clock.name()
    );
    println!(
        "{:<17} {:<15} {:>7} {:>7} | {:>7} {:>7} {:>12} | {:>7} {:>7} {:>12}",
        "data", "codec", "ratio", "C ratio", "comp", "C comp", "comp×", "dec", "C dec", "dec×"
    );
    let mut rows = Vec::new();
    let mut result = Ok(());
    'sets: for d in &sets {
        let n = d.bytes.len();
        let cap = n * 2 + 65536;
        let (mut packed, mut c_packed) = (vec![0u8; cap], vec![0u8; cap]);
        let (mut back, mut c_back) = (vec![0u8; n], vec![0u8; n]);
        for codec in codecs() {
            if !opts.only.is_empty() && !opts.only.iter().any(|o| codec.name.contains(o.as_str())) {
                continue;
            }
            let row = measure_row(
                opts,
                batch_s,
                d,
                &codec,
                worker.as_mut(),
                [&mut packed, &mut c_packed, &mut back, &mut c_back],
            );
            match row {
                Ok(r) => rows.push(r),
                Err(e) => {
                    result = Err(format!("{} {}: {e}", d.name, codec.name));
                    break 'sets;
                }
            }
        }
    }
    drop(worker);
    let _ = std::fs::remove_dir_all(&dir);
    result?;
    let (one, two, sample) = plugin_scaling(&sets[0], side)?;
    println!(
        "Codec plugin, BSLZ4 on {sample}: 1 thread {one:.0} frames/s, 2 threads {two:.0} frames/s, \
         scaling {:.2}x",
        two / one
    );
    let load_after = load_average();
    println!("Load average at the end: {load_after}");
    if let Some(path) = &opts.json {
        let j = json!({
            "side": side, "reps": opts.reps, "batch_ms": opts.batch_ms, "clock": opts.clock.name(),
            "load_average_before": load_before, "load_average_after": load_after,
            "rows": rows,
            "plugin_bslz4_fps": {"1": one, "2": two, "scaling": two / one},
        });
        std::fs::write(
            path,
            serde_json::to_string_pretty(&j).map_err(|e| e.to_string())? + "\n",
        )
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// One (data set, codec) row: compression then decompression, each interleaved with the
/// reference; prints the row and returns it as JSON.
fn measure_row(
    opts: &CodecOptions,
    batch_s: f64,
    d: &Dataset,
    codec: &Codec,
    mut worker: Option<&mut PyWorker>,
    bufs: [&mut Vec<u8>; 4],
) -> Result<serde_json::Value, String> {
    let [packed, c_packed, back, c_back] = bufs;
    let (n, e, input) = (d.bytes.len(), d.elem, &d.bytes[..]);
    let size = (codec.comp)(input, e, packed).map_err(|e| e.to_string())?;
    let (comp, dec, c_size, label) = match &codec.reference {
        Reference::InProcess {
            label,
            comp,
            decomp,
            same_bytes,
        } => {
            let c_size = comp(input, e, c_packed).map_err(|e| e.to_string())?;
            if *same_bytes && packed[..size] != c_packed[..c_size] {
                return Err(format!("our stream differs from {label}'s"));
            }
            if decomp(&c_packed[..c_size], e, c_back).map_err(|e| e.to_string())? != n
                || *c_back != d.bytes
            {
                return Err(format!("{label} round trip differs"));
            }
            // While timed, both sides write into the same buffer (so neither gains from where
            // its output lies), and both decoders read the same bytes: our stream.
            let work = RefCell::new(&mut c_packed[..]);
            let (comp_p, comp_calls) = measure(
                opts.reps,
                batch_s,
                n,
                &mut rust_timer(opts.clock, || {
                    (codec.comp)(input, e, &mut work.borrow_mut())
                }),
                Some(&mut rust_timer(opts.clock, || {
                    comp(input, e, &mut work.borrow_mut())
                })),
            )?;
            let src = &packed[..size];
            let work = RefCell::new(&mut back[..]);
            let (dec_p, dec_calls) = measure(
                opts.reps,
                batch_s,
                n,
                &mut rust_timer(opts.clock, || {
                    (codec.decomp)(src, e, &mut work.borrow_mut())
                }),
                Some(&mut rust_timer(opts.clock, || {
                    decomp(src, e, &mut work.borrow_mut())
                })),
            )?;
            // The last timed call may have been the reference's: decode ours once more for
            // the round-trip check below.
            (codec.decomp)(src, e, back).map_err(|e| e.to_string())?;
            (
                (comp_p, comp_calls),
                (dec_p, dec_calls),
                Some(c_size),
                *label,
            )
        }
        Reference::Python { label } => {
            let comp = measure_py(
                opts,
                batch_s,
                n,
                rust_timer(opts.clock, || (codec.comp)(input, e, packed)),
                worker.as_deref_mut(),
                (&d.name, codec.name, "compress"),
            )?;
            let src = &packed[..size];
            let dec = measure_py(
                opts,
                batch_s,
                n,
                rust_timer(opts.clock, || (codec.decomp)(src, e, back)),
                worker.as_deref_mut(),
                (&d.name, codec.name, "decompress"),
            )?;
            let c_size = match worker {
                Some(w) => w.call(&json!({
                    "data": d.name, "codec": codec.name, "op": "compress", "calls": 1
                }))?["size"]
                    .as_u64()
                    .map(|s| s as usize),
                None => None,
            };
            (comp, dec, c_size, *label)
        }
    };
    if *back != d.bytes {
        return Err("our round trip differs".into());
    }
    let ((comp, comp_calls), (dec, dec_calls)) = (comp, dec);
    let ratio = n as f64 / size as f64;
    let c_ratio = c_size.map(|c| n as f64 / c as f64);
    let fmt = |v: f64| {
        if v.is_finite() {
            format!("{v:.0}")
        } else {
            "-".into()
        }
    };
    println!(
        "{:<17} {:<15} {:>7.2} {:>7} | {:>7} {:>7} {:>12} | {:>7} {:>7} {:>12}",
        d.name,
        codec.name,
        ratio,
        c_ratio.map_or("-".into(), |r| format!("{r:.2}")),
        fmt(comp.ours_median()),
        fmt(comp.reference_median()),
        comp.ratio_text(),
        fmt(dec.ours_median()),
        fmt(dec.reference_median()),
        dec.ratio_text(),
    );
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    let side_json = |p: &Paired, calls: usize| {
        let mut j = p.to_json();
        j["ours_median_mb_s"] = json!(p.ours_median());
        j["reference_median_mb_s"] = json!(p.reference_median());
        j["calls_per_batch"] = json!(calls);
        j
    };
    Ok(json!({
        "data": d.name, "codec": codec.name, "reference": label,
        "ratio": ratio, "c_ratio": c_ratio,
        "compress": side_json(&comp, comp_calls),
        "decompress": side_json(&dec, dec_calls),
    }))
}

/// Frames/s of the Codec plugin (BSLZ4) with 1 and 2 threads on the first data set.
fn plugin_scaling(sample: &Dataset, side: usize) -> Result<(f64, f64, String), String> {
    let pool = Pool::unlimited();
    let words: Vec<u16> = sample
        .bytes
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    let frame =
        Arc::new(NDArray::from_pixels(&pool, &[side, side], &words).map_err(|e| e.to_string())?);
    // About 400 frames of 1024x1024; fewer bytes, more frames.
    let frames = (400 * 1024 * 1024 / (side * side)).clamp(400, 20_000);
    let one = plugin_rate(&frame, 1, frames)?;
    let two = plugin_rate(&frame, 2, frames)?;
    Ok((one, two, sample.name.clone()))
}
