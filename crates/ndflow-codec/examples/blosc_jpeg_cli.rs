//! Command-line access to `ndflow_codec::blosc` and `ndflow_codec::jpeg`, for interop tests
//! against python-blosc and Pillow (python/tests/test_codec_blosc_jpeg.py).
//!
//! ```text
//! blosc_jpeg_cli info
//!     blosc version, compressors, shuffle implementation (key=value lines)
//! blosc_jpeg_cli compress blosc [--compressor C] [--clevel N] [--shuffle none|byte|bit]
//!                           [--typesize N] [--threads N] [--blocksize N] IN OUT
//! blosc_jpeg_cli decompress blosc [--threads N] IN OUT
//! blosc_jpeg_cli compress jpeg --width W --height H [--components 1|3] [--quality Q]
//!                          [--subsampling 444|422|420] IN OUT
//! blosc_jpeg_cli decompress jpeg IN OUT          (prints "W H C")
//! blosc_jpeg_cli bench blosc [blosc options] [--iters N] IN
//!     prints ratio and compress/decompress MB/s (best of N, MB = 10^6 input bytes)
//! blosc_jpeg_cli bench jpeg --width W --height H [--components C] [--quality Q] [--iters N] IN
//! blosc_jpeg_cli gen poisson|ramp OUT
//!     1024×1024 uint16 LE test frame, identical to benches/blosc_jpeg.rs and the Python test
//!     (Poisson mean 0.5 from splitmix64 with integer CDF thresholds; ramp (x+y)·16)
//! ```
//! IN/OUT are raw files; `-` as OUT writes to stdout.

use std::collections::HashMap;
use std::io::Write;
use std::process::ExitCode;
use std::time::Instant;

use ndflow_codec::blosc::{self, BloscCompressor, BloscParams, BloscShuffle};
use ndflow_codec::jpeg::{self, JpegEncoder, JpegSubsampling};

type Res<T> = Result<T, String>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("blosc_jpeg_cli: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Splits `--key value` options from positional arguments.
fn parse(args: &[String]) -> Res<(HashMap<String, String>, Vec<String>)> {
    let mut opts = HashMap::new();
    let mut pos = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if let Some(k) = a.strip_prefix("--") {
            let v = it.next().ok_or_else(|| format!("--{k} needs a value"))?;
            opts.insert(k.to_string(), v.clone());
        } else {
            pos.push(a.clone());
        }
    }
    Ok((opts, pos))
}

fn num(opts: &HashMap<String, String>, key: &str, default: usize) -> Res<usize> {
    match opts.get(key) {
        Some(v) => v.parse().map_err(|_| format!("--{key}: not a number: {v}")),
        None => Ok(default),
    }
}

fn blosc_params(opts: &HashMap<String, String>) -> Res<(BloscParams, usize)> {
    let compressor = match opts.get("compressor") {
        Some(c) => {
            BloscCompressor::from_name(c).ok_or_else(|| format!("unknown compressor {c}"))?
        }
        None => BloscCompressor::LZ4,
    };
    let shuffle = match opts.get("shuffle") {
        Some(s) => BloscShuffle::from_name(s).ok_or_else(|| format!("unknown shuffle {s}"))?,
        None => BloscShuffle::Byte,
    };
    let clevel = u8::try_from(num(opts, "clevel", 5)?).map_err(|_| "clevel too large")?;
    let params = BloscParams {
        compressor,
        clevel,
        shuffle,
        num_threads: num(opts, "threads", 1)?,
        block_size: num(opts, "blocksize", 0)?,
    };
    Ok((params, num(opts, "typesize", 1)?))
}

fn read(path: &str) -> Res<Vec<u8>> {
    std::fs::read(path).map_err(|e| format!("{path}: {e}"))
}

fn write(path: &str, data: &[u8]) -> Res<()> {
    if path == "-" {
        std::io::stdout()
            .write_all(data)
            .map_err(|e| format!("stdout: {e}"))
    } else {
        std::fs::write(path, data).map_err(|e| format!("{path}: {e}"))
    }
}

fn io_paths(pos: &[String], n: usize) -> Res<&[String]> {
    pos.get(2..2 + n)
        .ok_or_else(|| format!("expected {n} file argument(s)"))
}

fn run(args: &[String]) -> Res<()> {
    let (opts, pos) = parse(args)?;
    let verb = pos.first().map(String::as_str).unwrap_or("");
    let codec = pos.get(1).map(String::as_str).unwrap_or("");
    match (verb, codec) {
        ("info", _) => {
            let info = blosc::build_info();
            let names: Vec<&str> = info.compressors.iter().map(|c| c.c_name()).collect();
            println!("blosc_version={}", info.version);
            println!("blosc_compressors={}", names.join(","));
            println!("blosc_own_build={}", info.own_build);
            println!("blosc_shuffle_impl={}", info.shuffle_impl);
            Ok(())
        }
        ("compress", "blosc") => {
            let (params, type_size) = blosc_params(&opts)?;
            let p = io_paths(&pos, 2)?;
            let input = read(&p[0])?;
            let mut out = vec![0u8; blosc::max_compressed_len(input.len())];
            let n =
                blosc::compress(&input, type_size, &params, &mut out).map_err(|e| e.to_string())?;
            write(&p[1], &out[..n])
        }
        ("decompress", "blosc") => {
            let p = io_paths(&pos, 2)?;
            let input = read(&p[0])?;
            let mut out = vec![0u8; blosc::decompressed_len(&input).map_err(|e| e.to_string())?];
            let n = blosc::decompress_mt(&input, &mut out, num(&opts, "threads", 1)?)
                .map_err(|e| e.to_string())?;
            write(&p[1], &out[..n])
        }
        ("compress", "jpeg") => {
            let p = io_paths(&pos, 2)?;
            let input = read(&p[0])?;
            let (w, h, c) = (
                num(&opts, "width", 0)?,
                num(&opts, "height", 0)?,
                num(&opts, "components", 1)?,
            );
            let q = u8::try_from(num(&opts, "quality", 85)?.min(255)).unwrap_or(u8::MAX);
            let mut enc = JpegEncoder::new().map_err(|e| e.to_string())?;
            enc.set_subsampling(match opts.get("subsampling").map(String::as_str) {
                Some("444") => JpegSubsampling::S444,
                Some("422") => JpegSubsampling::S422,
                Some("420") | None => JpegSubsampling::S420,
                Some(s) => return Err(format!("unknown subsampling {s}")),
            });
            let mut out = vec![0u8; jpeg::max_compressed_len(w, h, c)];
            let n = enc
                .encode(&input, w, h, c, q, &mut out)
                .map_err(|e| e.to_string())?;
            write(&p[1], &out[..n])
        }
        ("decompress", "jpeg") => {
            let p = io_paths(&pos, 2)?;
            let input = read(&p[0])?;
            let info = jpeg::read_header(&input).map_err(|e| e.to_string())?;
            let mut out = vec![0u8; info.len()];
            let info = jpeg::decompress(&input, &mut out).map_err(|e| e.to_string())?;
            write(&p[1], &out)?;
            if p[1] != "-" {
                println!("{} {} {}", info.width, info.height, info.components);
            }
            Ok(())
        }
        ("gen", kind) => {
            let p = io_paths(&pos, 1)?;
            let frame = match kind {
                "poisson" => poisson_frame(1024 * 1024),
                "ramp" => ramp_frame(1024, 1024),
                _ => return Err(format!("unknown data set {kind}")),
            };
            let bytes: Vec<u8> = frame.iter().flat_map(|v| v.to_le_bytes()).collect();
            write(&p[0], &bytes)
        }
        ("bench", "blosc") => bench_blosc(&opts, &pos),
        ("bench", "jpeg") => bench_jpeg(&opts, &pos),
        _ => Err(
            "usage: blosc_jpeg_cli info | compress|decompress|bench blosc|jpeg [options] IN [OUT]"
                .into(),
        ),
    }
}

/// Best-of-`iters` timing; returns seconds.
fn best_of(iters: usize, mut f: impl FnMut() -> Res<()>) -> Res<f64> {
    let mut best = f64::INFINITY;
    for _ in 0..iters.max(1) {
        let t = Instant::now();
        f()?;
        best = best.min(t.elapsed().as_secs_f64());
    }
    Ok(best)
}

fn bench_blosc(opts: &HashMap<String, String>, pos: &[String]) -> Res<()> {
    let (params, type_size) = blosc_params(opts)?;
    let input = read(&io_paths(pos, 1)?[0])?;
    let iters = num(opts, "iters", 50)?;
    let mut comp = vec![0u8; blosc::max_compressed_len(input.len())];
    let mut back = vec![0u8; input.len()];
    let mut n = 0;
    let tc = best_of(iters, || {
        n = blosc::compress(&input, type_size, &params, &mut comp).map_err(|e| e.to_string())?;
        Ok(())
    })?;
    let td = best_of(iters, || {
        blosc::decompress_mt(&comp[..n], &mut back, params.num_threads)
            .map(|_| ())
            .map_err(|e| e.to_string())
    })?;
    if back != input {
        return Err("round trip mismatch".into());
    }
    let mb = input.len() as f64 / 1e6;
    println!(
        "ratio={:.3} compress_MBps={:.0} decompress_MBps={:.0}",
        input.len() as f64 / n as f64,
        mb / tc,
        mb / td
    );
    Ok(())
}

fn bench_jpeg(opts: &HashMap<String, String>, pos: &[String]) -> Res<()> {
    let input = read(&io_paths(pos, 1)?[0])?;
    let (w, h, c) = (
        num(opts, "width", 0)?,
        num(opts, "height", 0)?,
        num(opts, "components", 1)?,
    );
    let q = u8::try_from(num(opts, "quality", 90)?.min(255)).unwrap_or(u8::MAX);
    let iters = num(opts, "iters", 20)?;
    let mut out = vec![0u8; jpeg::max_compressed_len(w, h, c)];
    let mut back = vec![0u8; input.len()];
    let mut n = 0;
    let te = best_of(iters, || {
        n = jpeg::compress(&input, w, h, c, q, &mut out).map_err(|e| e.to_string())?;
        Ok(())
    })?;
    let td = best_of(iters, || {
        jpeg::decompress(&out[..n], &mut back)
            .map(|_| ())
            .map_err(|e| e.to_string())
    })?;
    let mpix = (w * h) as f64 / 1e6;
    println!(
        "bytes={n} encode_Mpixps={:.0} decode_Mpixps={:.0}",
        mpix / te,
        mpix / td
    );
    Ok(())
}

/// P(X < k+1) · 2^64 for X ~ Poisson(0.5), k = 0..11 (exact decimal computation).
const POISSON_HALF_CDF: [u64; 12] = [
    0x9B45_97E3_7CB0_4FF3,
    0xE8E8_63D5_3B08_77ED,
    0xFC51_16D1_AA9E_81EC,
    0xFF8D_34A6_67E2_2E41,
    0xFFF4_B860_FF8A_A3CB,
    0xFFFF_125A_0EB5_15F3,
    0xFFFF_EF2E_CFF8_9F76,
    0xFFFF_FEF4_DDC6_9700,
    0xFFFF_FFF1_3EA3_7678,
    0xFFFF_FFFF_4405_111B,
    0xFFFF_FFFF_F77D_25A3,
    0xFFFF_FFFF_FFA5_83AA,
];

fn splitmix64(i: u64, seed: u64) -> u64 {
    let mut z = seed.wrapping_add((i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn poisson_frame(n: usize) -> Vec<u16> {
    (0..n as u64)
        .map(|i| {
            let x = splitmix64(i, 2026);
            POISSON_HALF_CDF.iter().take_while(|&&t| x >= t).count() as u16
        })
        .collect()
}

fn ramp_frame(w: usize, h: usize) -> Vec<u16> {
    (0..h)
        .flat_map(|y| (0..w).map(move |x| ((x + y) * 16) as u16))
        .collect()
}
