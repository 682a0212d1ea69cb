//! `ndflow bench codec`: compression speed and ratio per core on detector-like data, next to
//! the C libraries (python `bitshuffle`, `blosc`, `lz4`, `zlib`, one thread) timed in the same
//! run on the same bytes, and the scaling of the Codec plugin from 1 to 2 threads.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ndflow_codec::blosc::{BloscCompressor, BloscParams, BloscShuffle};
use ndflow_codec::bslz4::BsFraming;
use ndflow_codec::{blosc, bslz4, lz4, zlib, CodecError};
use ndflow_core::{NDArray, Pool};
use ndflow_runtime::Graph;
use serde_json::json;

pub struct CodecOptions {
    pub json: Option<PathBuf>,
    /// Python with bitshuffle, blosc, lz4 and numpy (default: .venv/bin/python if present).
    pub python: Option<PathBuf>,
    pub reps: usize,
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

fn datasets() -> Vec<Dataset> {
    let (w, h) = (1024usize, 1024usize);
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

type Compress = Box<dyn Fn(&[u8], usize, &mut [u8]) -> Result<usize, CodecError>>;
type Decompress = Box<dyn Fn(&[u8], usize, &mut [u8]) -> Result<usize, CodecError>>;

fn blosc_params(shuffle: BloscShuffle) -> BloscParams {
    BloscParams {
        compressor: BloscCompressor::LZ4,
        clevel: 5,
        shuffle,
        num_threads: 1,
        block_size: 0,
    }
}

fn codecs() -> Vec<(&'static str, Compress, Decompress)> {
    vec![
        (
            "bslz4",
            Box::new(|i, e, o| bslz4::compress(i, e, 0, BsFraming::AreaDetector, o)),
            Box::new(|i, e, o| bslz4::decompress(i, e, BsFraming::AreaDetector, o)),
        ),
        (
            "blosc-lz4-byte5",
            Box::new(|i, e, o| blosc::compress(i, e, &blosc_params(BloscShuffle::Byte), o)),
            Box::new(|i, _, o| blosc::decompress(i, o)),
        ),
        (
            "blosc-lz4-bit5",
            Box::new(|i, e, o| blosc::compress(i, e, &blosc_params(BloscShuffle::Bit), o)),
            Box::new(|i, _, o| blosc::decompress(i, o)),
        ),
        (
            "lz4",
            Box::new(|i, _, o| lz4::compress_block(i, o)),
            Box::new(|i, _, o| lz4::decompress_block(i, o)),
        ),
        (
            "zlib6",
            Box::new(|i, _, o| zlib::compress(i, 6, o)),
            Box::new(|i, _, o| zlib::decompress(i, o)),
        ),
    ]
}

fn best_rate(
    reps: usize,
    bytes: usize,
    mut f: impl FnMut() -> Result<usize, CodecError>,
) -> Result<(f64, usize), String> {
    let mut best = f64::INFINITY;
    let mut n = 0;
    for _ in 0..reps.max(1) {
        let t0 = Instant::now();
        n = f().map_err(|e| e.to_string())?;
        best = best.min(t0.elapsed().as_secs_f64());
    }
    Ok((bytes as f64 / best / 1e6, n))
}

fn c_reference(
    python: &Path,
    dir: &Path,
    sets: &[Dataset],
    reps: usize,
) -> Result<serde_json::Value, String> {
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
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../python/bench/codec_ref.py"
    );
    let out = std::process::Command::new(python)
        .arg(script)
        .arg(dir)
        .arg(reps.to_string())
        .env("OMP_NUM_THREADS", "1")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "C reference failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("C reference output: {e}"))
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
    let sets = datasets();
    let python = opts.python.clone().or_else(|| {
        let p = PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../.venv/bin/python"
        ));
        p.exists().then_some(p)
    });
    let dir = std::env::temp_dir().join(format!("ndflow-bench-codec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let reference = match &python {
        Some(py) => {
            eprintln!("timing the C libraries with {} ...", py.display());
            Some(c_reference(py, &dir, &sets, opts.reps)?)
        }
        None => {
            eprintln!("no Python with the C codecs found (--python): C columns left empty");
            None
        }
    };
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "Compression per core, 1024x1024 frames, MB/s of uncompressed data (best of {}):",
        opts.reps
    );
    println!(
        "{:<18} {:<16} {:>7} {:>9} {:>9} | {:>7} {:>9} {:>9} | {:>6} {:>6}",
        "data",
        "codec",
        "ratio",
        "comp",
        "decomp",
        "C ratio",
        "C comp",
        "C decomp",
        "comp×",
        "dec×"
    );
    let mut rows = Vec::new();
    for d in &sets {
        let n = d.bytes.len();
        let mut packed = vec![0u8; n * 2 + 65536];
        let mut back = vec![0u8; n];
        for (name, comp, decomp) in codecs() {
            let (c_rate, size) = best_rate(opts.reps, n, || comp(&d.bytes, d.elem, &mut packed))?;
            let (d_rate, _) =
                best_rate(opts.reps, n, || decomp(&packed[..size], d.elem, &mut back))?;
            if back != d.bytes {
                return Err(format!("{} {name}: round trip differs", d.name));
            }
            let r = reference.as_ref().map(|j| &j[format!("{}/{name}", d.name)]);
            let get = |k: &str| r.and_then(|v| v[k].as_f64());
            let (cr, cc, cd) = (get("ratio"), get("compress_mb_s"), get("decompress_mb_s"));
            let fmt = |v: Option<f64>, p: usize| v.map_or("-".to_string(), |x| format!("{x:.p$}"));
            println!(
                "{:<18} {:<16} {:>7.2} {:>9.0} {:>9.0} | {:>7} {:>9} {:>9} | {:>6} {:>6}",
                d.name,
                name,
                n as f64 / size as f64,
                c_rate,
                d_rate,
                fmt(cr, 2),
                fmt(cc, 0),
                fmt(cd, 0),
                fmt(cc.map(|c| c_rate / c), 2),
                fmt(cd.map(|c| d_rate / c), 2),
            );
            rows.push(json!({
                "data": d.name, "codec": name, "ratio": n as f64 / size as f64,
                "compress_mb_s": c_rate, "decompress_mb_s": d_rate,
                "c_ratio": cr, "c_compress_mb_s": cc, "c_decompress_mb_s": cd,
            }));
        }
    }
    let pool = Pool::unlimited();
    let sample = &sets[0];
    let words: Vec<u16> = sample
        .bytes
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    let frame =
        Arc::new(NDArray::from_pixels(&pool, &[1024, 1024], &words).map_err(|e| e.to_string())?);
    let one = plugin_rate(&frame, 1, 400)?;
    let two = plugin_rate(&frame, 2, 400)?;
    println!(
        "Codec plugin, BSLZ4 on {}: 1 thread {:.0} frames/s, 2 threads {:.0} frames/s, scaling {:.2}x",
        sample.name,
        one,
        two,
        two / one
    );
    if let Some(path) = &opts.json {
        let j =
            json!({"rows": rows, "plugin_bslz4_fps": {"1": one, "2": two, "scaling": two / one}});
        std::fs::write(
            path,
            serde_json::to_string_pretty(&j).map_err(|e| e.to_string())? + "\n",
        )
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}
