//! The `ndflow bench` command line: [`BenchCmd`] is the subcommand the `ndflow` binary adds,
//! [`run`] runs the benchmark it names and prints its table.

use std::path::PathBuf;

use clap::Subcommand;
use ndflow::config::parse_setting;

use crate::{aravis, ca, codec, eiger, hdf5, hop, host, pva, rivers2013, scaleout, web};

/// `ndflow bench WHICH`: one subcommand per benchmark, each with its own options.
#[derive(Subcommand)]
pub enum BenchCmd {
    /// Table 1 of the 2013 areaDetector plugin-scaling measurement: 11 plugins on a
    /// 1024x1024 UInt8 simulated detector at increasing frame rates.
    Rivers2013 {
        /// Write the results as JSON.
        #[arg(long, value_name = "FILE.json")]
        json: Option<PathBuf>,
        /// Seconds of acquisition per row (frames = seconds / AcquirePeriod).
        #[arg(long, default_value_t = 4.0)]
        seconds: f64,
        /// Frames for the AcquirePeriod = 0 row.
        #[arg(long, default_value_t = 4000)]
        max_rate_frames: u32,
        /// Comma-separated AcquirePeriods (s).
        #[arg(long, default_value = "0.05,0.02,0.01,0.005,0.002,0")]
        periods: String,
        /// Change a setting of the scenario, e.g. --set PROC1.FilterPrecision=Float32.
        #[arg(long, value_name = "PORT.PARAM=VALUE", value_parser = parse_setting)]
        set: Vec<(String, String, String)>,
    },
    /// Compression speed and ratio per codec next to the C libraries, and Codec plugin scaling.
    Codec {
        #[arg(long, value_name = "FILE.json")]
        json: Option<PathBuf>,
        /// Python with numpy and bitshuffle, the reference for bslz4 (default: .venv/bin/python).
        #[arg(long)]
        python: Option<PathBuf>,
        /// Interleaved pairs (ours, reference) per row.
        #[arg(long, default_value_t = 9)]
        reps: usize,
        /// Least duration of one timed batch of calls (ms).
        #[arg(long, default_value_t = 25.0)]
        batch_ms: f64,
        /// Frame side in pixels (smaller for a quick check).
        #[arg(long, default_value_t = 1024)]
        side: usize,
        /// Time batches by process CPU time (robust to other processes' load) or wall time.
        #[arg(long, default_value = "cpu", value_parser = ["cpu", "wall"])]
        clock: String,
        /// Only the codecs whose names contain this (repeatable), e.g. --only zlib.
        #[arg(long)]
        only: Vec<String>,
    },
    /// NTNDArray throughput over loopback: ndflow and p4p (pvxs) servers and clients next to
    /// raw loopback TCP.
    Pva {
        #[arg(long, value_name = "FILE.json")]
        json: Option<PathBuf>,
        /// Python with p4p (default: .venv/bin/python).
        #[arg(long)]
        python: Option<PathBuf>,
        /// Comma-separated WIDTHxHEIGHTxFRAMES rows (UInt16 frames).
        #[arg(long, default_value = "1024x1024x1000,4096x4096x60")]
        sizes: String,
        /// Repetitions, interleaved: every path runs next to its own raw TCP run, and the
        /// median of those per-pair ratios is reported with its spread.
        #[arg(long, default_value_t = 7)]
        reps: usize,
        /// How many of the repetitions also run the p4p paths (the first ones; 0 = no
        /// Python). They are slow and far from the ceiling, so fewer pairs suffice.
        #[arg(long, default_value_t = 3)]
        p4p_reps: usize,
        /// Frames each path receives before its clock starts: a new connection's start-up
        /// (its first 32 MiB frames took 20-90 ms each on a VM, then ~7 ms) is paid once, not
        /// per frame. 1 = time from the first frame.
        #[arg(long, default_value_t = 3)]
        warm_frames: usize,
    },
    /// HDF5 writing: uncompressed, filter pipeline, Codec plugin + direct chunk write, the
    /// writer alone, next to h5py + hdf5plugin in the same run.
    Hdf5 {
        #[arg(long, value_name = "FILE.json")]
        json: Option<PathBuf>,
        /// Python with h5py and hdf5plugin (default: .venv/bin/python).
        #[arg(long)]
        python: Option<PathBuf>,
        /// Frames (1024x1024 UInt32) per row.
        #[arg(long, default_value_t = 100)]
        frames: usize,
        /// Codec plugin threads for the pre-compressed rows.
        #[arg(long, default_value_t = 2)]
        codec_threads: usize,
        /// Interleaved pairs (ours, h5py) per row; the median ratio is reported.
        #[arg(long, default_value_t = 11)]
        reps: usize,
        /// Frames in the pipeline at once (0: all offered at once).
        #[arg(long, default_value_t = 0)]
        window: u64,
        /// Comma-separated row keys to run (none, bslz4_filter, blosc_filter, blosc_codec,
        /// bslz4_codec, blosc_write_only, bslz4_write_only); default all.
        #[arg(long, value_delimiter = ',')]
        rows: Vec<String>,
        /// Directory for the files (default: /dev/shm if present, else the temp dir).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Scale-out: 1 head + N writer processes (examples/scaleout), on loopback and,
    /// as root, in network namespaces with rate-limited links; aggregate GB/s, frames lost,
    /// scaling efficiency, next to one process writing one file.
    Scaleout {
        /// Comma-separated writer counts.
        #[arg(long, default_value = "1,2,4")]
        writers: String,
        /// Frames per row.
        #[arg(long, default_value_t = 1000)]
        frames: usize,
        /// Frame size WIDTHxHEIGHT (UInt16).
        #[arg(long, default_value = "1024x1024")]
        size: String,
        /// Rate of each writer's link in the namespace rows (tc units: 1gbit, 500mbit, ...).
        #[arg(long, default_value = "1gbit")]
        rate: String,
        /// Skip the network-namespace rows.
        #[arg(long)]
        no_netns: bool,
        /// Skip the loopback rows.
        #[arg(long)]
        no_loopback: bool,
        /// Runs per row, interleaved; the median run is reported with the spread.
        #[arg(long, default_value_t = 3)]
        reps: usize,
        /// Directory for the files (default /dev/shm if present, else the temp directory).
        #[arg(long)]
        dir: Option<PathBuf>,
        #[arg(long, value_name = "FILE.json")]
        json: Option<PathBuf>,
    },
    /// Runtime overhead per plugin hop (a chain of no-op plugins).
    Hop {
        #[arg(long, value_name = "FILE.json")]
        json: Option<PathBuf>,
    },
    /// Channel Access: monitor updates/s of 10,000 scalar PVs (ndflow_ca vs softioc/RSRV),
    /// 1024x1024 UInt16 frames to pyepics vs raw loopback TCP, and the IOC's pipeline rate
    /// with CA clients monitoring every PV.
    Ca {
        #[arg(long, value_name = "FILE.json")]
        json: Option<PathBuf>,
        /// Python with pyepics, pythonSoftIOC and numpy (default: .venv/bin/python).
        #[arg(long)]
        python: Option<PathBuf>,
        /// Counting window of every row (s).
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        /// Wait after the clients subscribed, before counting (s).
        #[arg(long, default_value_t = 1.0)]
        warmup: f64,
        /// Repetitions (interleaved); the best of each row is reported.
        #[arg(long, default_value_t = 2)]
        reps: usize,
        /// Scalar PVs of the updates/s rows.
        #[arg(long, default_value_t = 10_000)]
        pvs: usize,
        /// Client processes monitoring every IOC PV in the pipeline-rate rows.
        #[arg(long, default_value_t = 10)]
        clients: usize,
        /// The IOC's AcquirePeriod (s; 0 = free running).
        #[arg(long, default_value_t = 0.0)]
        acquire_period: f64,
    },
    /// EIGER Stream v2: a real 16M capture replayed over ZeroMQ on loopback into the eiger
    /// driver, (a) passed through into HDF5 and (b) decompressed, next to a pyzmq PULL
    /// receiving the same messages and the C decoders (dectris-compression, bitshuffle).
    Eiger {
        #[arg(long, value_name = "FILE.json")]
        json: Option<PathBuf>,
        /// Python with pyzmq, cbor2, dectris-compression, bitshuffle (default: .venv/bin/python).
        #[arg(long)]
        python: Option<PathBuf>,
        /// tickit-devices' eiger/data directory (the capture); default: asked of --tickit-python.
        #[arg(long)]
        capture: Option<PathBuf>,
        /// Python of a venv with tickit-devices (default: $NDFLOW_TICKIT_VENV/bin/python);
        /// without one the frames are generated.
        #[arg(long)]
        tickit_python: Option<PathBuf>,
        /// Images per pass-through run.
        #[arg(long, default_value_t = 2000)]
        pass_frames: usize,
        /// Images per decompress run.
        #[arg(long, default_value_t = 300)]
        decode_frames: usize,
        /// DecodeThreads of the decompress row.
        #[arg(long, default_value_t = 2)]
        workers: usize,
        /// Interleaved pairs (ours, pyzmq) per row.
        #[arg(long, default_value_t = 5)]
        reps: usize,
        /// Interleaved decode-per-core pairs.
        #[arg(long, default_value_t = 5)]
        decode_reps: usize,
        /// Directory for the HDF5 files (default /dev/shm if present, else the temp directory).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// GenICam GigE Vision: the aravis driver receiving from Aravis' fake GigE camera next to
    /// Aravis' arv-camera-test, in a network namespace it creates (root): frames/s, CPU per
    /// frame, loss on clean and lossy links.
    Aravis {
        #[arg(long, value_name = "FILE.json")]
        json: Option<PathBuf>,
        /// Interleaved pairs (ours, arv-camera-test) per row, order alternating.
        #[arg(long, default_value_t = 3)]
        pairs: usize,
        /// Seconds of acquisition per run (at least 2; the first is not counted).
        #[arg(long, default_value_t = 4)]
        seconds: u64,
        /// Comma-separated row numbers (1-5) to run; default all.
        #[arg(long, value_delimiter = ',')]
        rows: Vec<usize>,
        /// Internal: one run of ours inside the namespace (WxH,FORMAT,PACKET,RESEND,SECONDS);
        /// prints one JSON line.
        #[arg(long, hide = true)]
        child: Option<String>,
    },
    /// The live web viewer: pipeline frames/s with 0, 1 and 5 viewers (vs 0 in the same run),
    /// IOC CPU per viewer, and frames/s headless Chromium displays (requestAnimationFrame) for
    /// 1024x1024 and 4096x4096 (binned) UInt16 frames.
    Web {
        #[arg(long, value_name = "FILE.json")]
        json: Option<PathBuf>,
        /// Counting window of each (a)/(b) measurement (s).
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        /// Wait after viewers connect, before counting (s).
        #[arg(long, default_value_t = 1.0)]
        warmup: f64,
        /// Repetitions of (a) and (b), the order of the viewer counts rotating.
        #[arg(long, default_value_t = 3)]
        reps: usize,
        /// Comma-separated viewer counts compared with none.
        #[arg(long, default_value = "1,5")]
        viewers: String,
        /// Seconds counted in the browser per (c) row (0: no browser rows).
        #[arg(long, default_value_t = 5.0)]
        browser_seconds: f64,
        /// Python with Playwright for (c) (default: .venv/bin/python).
        #[arg(long)]
        python: Option<PathBuf>,
    },
}

/// Runs the benchmark `cmd` names; its table goes to stdout, progress to stderr.
pub fn run(cmd: BenchCmd) -> Result<(), String> {
    match cmd {
        BenchCmd::Rivers2013 {
            json,
            seconds,
            max_rate_frames,
            periods,
            set,
        } => rivers2013::rivers2013(&rivers2013::RiversOptions {
            set,
            json,
            seconds,
            max_rate_frames,
            periods,
        }),
        BenchCmd::Hop { json } => hop::hop(json.as_ref()),
        BenchCmd::Scaleout {
            writers,
            frames,
            size,
            rate,
            no_netns,
            no_loopback,
            reps,
            dir,
            json,
        } => parse_size(&size).and_then(|(width, height)| {
            let writers = scaleout::parse_writers(&writers)?;
            scaleout::run(&scaleout::ScaleoutOptions {
                writers,
                frames,
                width,
                height,
                dir,
                rate,
                netns: !no_netns,
                loopback: !no_loopback,
                json,
                reps,
            })
            .map(|table| print!("{table}"))
        }),
        BenchCmd::Hdf5 {
            json,
            python,
            frames,
            codec_threads,
            reps,
            window,
            rows,
            dir,
        } => hdf5::run(&hdf5::Hdf5Options {
            frames,
            codec_threads,
            reps,
            window,
            only: rows,
            dir,
            python,
            json,
        })
        .map(|table| print!("{table}")),
        BenchCmd::Pva {
            json,
            python,
            sizes,
            reps,
            p4p_reps,
            warm_frames,
        } => parse_sizes(&sizes).and_then(|sizes| {
            let python = python.unwrap_or_else(host::venv_python);
            pva::run(&pva::PvaBenchOptions {
                sizes,
                python,
                json,
                reps,
                p4p_reps,
                warm: warm_frames,
            })
            .map(|table| print!("{table}"))
        }),
        BenchCmd::Codec {
            json,
            python,
            reps,
            batch_ms,
            side,
            clock,
            only,
        } => codec::codec(&codec::CodecOptions {
            json,
            python,
            reps,
            batch_ms,
            side,
            clock: if clock == "wall" {
                codec::Clock::Wall
            } else {
                codec::Clock::Cpu
            },
            only,
        }),
        BenchCmd::Ca {
            json,
            python,
            seconds,
            warmup,
            reps,
            pvs,
            clients,
            acquire_period,
        } => ca::run(&ca::CaBenchOptions {
            python: python.unwrap_or_else(host::venv_python),
            json,
            seconds,
            warmup,
            reps,
            pvs,
            clients,
            acquire_period,
        })
        .map(|table| print!("{table}")),
        BenchCmd::Eiger {
            json,
            python,
            capture,
            tickit_python,
            pass_frames,
            decode_frames,
            workers,
            reps,
            decode_reps,
            dir,
        } => eiger::run(&eiger::EigerOptions {
            json,
            python,
            capture,
            tickit_python: tickit_python.or_else(|| {
                std::env::var_os("NDFLOW_TICKIT_VENV").map(|v| PathBuf::from(v).join("bin/python"))
            }),
            pass_frames,
            decode_frames,
            workers,
            reps,
            decode_reps,
            dir,
        })
        .map(|table| print!("{table}")),
        BenchCmd::Aravis {
            json,
            pairs,
            seconds,
            rows,
            child,
        } => aravis::run(&aravis::AravisOptions {
            json,
            pairs,
            seconds,
            rows,
            child,
        })
        .map(|table| print!("{table}")),
        BenchCmd::Web {
            json,
            seconds,
            warmup,
            reps,
            viewers,
            browser_seconds,
            python,
        } => web::parse_viewers(&viewers).and_then(|viewers| {
            web::run(&web::WebBenchOptions {
                json,
                seconds,
                warmup,
                reps,
                viewers,
                browser_seconds,
                python,
            })
            .map(|table| print!("{table}"))
        }),
    }
}

/// "1024x1024x1000,4096x4096x60" → [(1024, 1024, 1000), (4096, 4096, 60)].
fn parse_sizes(s: &str) -> Result<Vec<(usize, usize, usize)>, String> {
    s.split(',')
        .map(|row| {
            let n: Vec<usize> = row
                .trim()
                .split('x')
                .map(|v| v.parse::<usize>())
                .collect::<Result<_, _>>()
                .map_err(|_| format!("bad --sizes row '{row}': expected WIDTHxHEIGHTxFRAMES"))?;
            match n[..] {
                [w, h, f] if w > 0 && h > 0 && f >= 2 => Ok((w, h, f)),
                _ => Err(format!(
                    "bad --sizes row '{row}': expected WIDTHxHEIGHTxFRAMES (FRAMES >= 2)"
                )),
            }
        })
        .collect()
}

/// "1024x1024" → (1024, 1024).
fn parse_size(s: &str) -> Result<(usize, usize), String> {
    let bad = || format!("bad --size '{s}': expected WIDTHxHEIGHT, e.g. 1024x1024");
    let (w, h) = s.split_once('x').ok_or_else(bad)?;
    match (w.trim().parse::<usize>(), h.trim().parse::<usize>()) {
        (Ok(w), Ok(h)) if (1..=65536).contains(&w) && (1..=65536).contains(&h) => Ok((w, h)),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_size_parse_or_say_what_is_expected() {
        assert_eq!(
            parse_sizes("1024x1024x1000, 4096x4096x60"),
            Ok(vec![(1024, 1024, 1000), (4096, 4096, 60)])
        );
        assert!(parse_sizes("1024x1024x1").is_err_and(|e| e.contains("FRAMES >= 2")));
        assert!(parse_sizes("1024x1024").is_err());
        assert_eq!(parse_size("640x480"), Ok((640, 480)));
        assert!(parse_size("0x480").is_err_and(|e| e.contains("WIDTHxHEIGHT")));
    }

    #[test]
    fn every_benchmark_keeps_its_flags() {
        use clap::Parser;
        #[derive(Parser)]
        struct Top {
            #[command(subcommand)]
            which: BenchCmd,
        }
        let parse = |args: &[&str]| Top::try_parse_from([&["bench"], args].concat());
        assert!(parse(&["rivers2013", "--seconds", "0.5", "--periods", "0.01,0"]).is_ok());
        assert!(parse(&["rivers2013", "--set", "PROC1.FilterPrecision=Float32"]).is_ok());
        assert!(parse(&["rivers2013", "--set", "nodot"]).is_err());
        assert!(parse(&["hop", "--json", "x.json"]).is_ok());
        assert!(parse(&["codec", "--side", "64", "--clock", "wall", "--only", "zlib"]).is_ok());
        assert!(parse(&["codec", "--clock", "sundial"]).is_err());
        assert!(parse(&["pva", "--sizes", "64x64x10", "--p4p-reps", "0"]).is_ok());
        assert!(parse(&["hdf5", "--frames", "3", "--rows", "none,bslz4_filter"]).is_ok());
        assert!(parse(&["scaleout", "--writers", "1,2", "--no-netns"]).is_ok());
        assert!(parse(&["ca", "--pvs", "10", "--acquire-period", "0.01"]).is_ok());
        assert!(parse(&["eiger", "--pass-frames", "100", "--decode-frames", "10"]).is_ok());
        assert!(parse(&["aravis", "--pairs", "1", "--seconds", "2", "--rows", "1,4"]).is_ok());
        assert!(parse(&[
            "web",
            "--viewers",
            "1,5",
            "--browser-seconds",
            "0",
            "--reps",
            "2"
        ])
        .is_ok());
    }
}
