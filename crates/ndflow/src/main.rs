//! `ndflow`: the IOC command line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use ndflow::{bench, bench_codec, bench_hdf5, bench_pva, ioc, pv_cmd, reference, registry, vds};

#[derive(Parser)]
#[command(
    name = "ndflow",
    version,
    about = "ndflow: an areaDetector-compatible detector pipeline"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build the graph from a TOML config file and run it (Ctrl-C stops cleanly).
    Run {
        /// The config file (see docs/config-reference.md).
        config: PathBuf,
        /// Exit when every driver is back to Idle and every plugin has drained.
        #[arg(long)]
        until_idle: bool,
        /// On exit, write every port's parameters as JSON to this file.
        #[arg(long, value_name = "FILE.json")]
        summary: Option<PathBuf>,
        /// No live status line.
        #[arg(long, short)]
        quiet: bool,
        /// Do not serve PVs over pvAccess (the config's `pva = false` does the same).
        #[arg(long)]
        no_pva: bool,
        /// Do not serve PVs over Channel Access (the config's `ca = false` does the same).
        #[arg(long)]
        no_ca: bool,
        /// Replace the config's PV prefix (e.g. one writer config for many processes).
        #[arg(long, value_name = "PREFIX")]
        prefix: Option<String>,
        /// Override a port's setting, e.g. --set HDF1.FileName=w1 (repeatable; a quoted
        /// value, PORT.KEY='"007"', stays a string).
        #[arg(long, value_name = "PORT.KEY=VALUE", value_parser = bench::parse_setting)]
        set: Vec<(String, String, String)>,
    },
    /// Validate a config file (with the same --prefix/--set as `run`): builds every port and
    /// PV name without acquiring or serving, and prints what it holds.
    Check {
        config: PathBuf,
        #[arg(long, value_name = "PREFIX")]
        prefix: Option<String>,
        #[arg(long, value_name = "PORT.KEY=VALUE", value_parser = bench::parse_setting)]
        set: Vec<(String, String, String)>,
    },
    /// Run the embedded default pipeline (simulated detector → ROI/Stats/Process/StdArrays).
    Demo {
        /// Frames to acquire.
        #[arg(long, default_value_t = 2000)]
        frames: u32,
        #[arg(long, value_name = "FILE.json")]
        summary: Option<PathBuf>,
        #[arg(long, short)]
        quiet: bool,
        /// Serve PVs over pvAccess while the demo runs (off by default: the demo is a
        /// self-contained run that should not claim network ports).
        #[arg(long)]
        pva: bool,
        /// Serve PVs over Channel Access while the demo runs (off by default).
        #[arg(long)]
        ca: bool,
    },
    /// Benchmarks that reproduce the seed documents' tables on this machine.
    Bench {
        #[command(subcommand)]
        which: BenchCmd,
    },
    /// Stitch the HDF5 files of several writers into one master file: a virtual dataset of
    /// every frame in uniqueId order (gaps reported and read as 0), plus the per-frame
    /// attributes. See docs/scale-out.md.
    Vds {
        /// The master file to write (replaced if it exists; nothing is written on error).
        #[arg(long, short)]
        output: PathBuf,
        /// The writers' files (any order).
        #[arg(required = true, value_name = "PART.h5")]
        parts: Vec<PathBuf>,
        /// The frame dataset in each part.
        #[arg(long, default_value = ndflow_io::hdf5::LINK_PATH)]
        data: String,
        /// The group of per-frame attribute datasets in each part.
        #[arg(long, default_value = ndflow_io::hdf5::ATTR_GROUP)]
        attributes: String,
        /// The uniqueId dataset's name in that group.
        #[arg(long, default_value = "NDArrayUniqueId")]
        unique_id: String,
        /// Also write the report as JSON.
        #[arg(long, value_name = "FILE.json")]
        json: Option<PathBuf>,
        /// Exit with an error when frames are missing (the master is still written).
        #[arg(long)]
        strict: bool,
        #[arg(long, short)]
        quiet: bool,
    },
    /// Read, write or wait for PVs over pvAccess (for scripts; the server is found through
    /// EPICS_PVA_ADDR_LIST / EPICS_PVA_NAME_SERVERS as by any pvAccess client).
    Pv {
        #[command(subcommand)]
        op: PvCmd,
    },
    /// Print the parameters of a port type (or of all, as Markdown with --markdown).
    Params {
        /// Port type (sim, roi, stats, process, stdarrays); all when omitted.
        #[arg(value_name = "TYPE")]
        type_name: Option<String>,
        #[arg(long)]
        markdown: bool,
    },
}

#[derive(Subcommand)]
enum PvCmd {
    /// Print `NAME VALUE` for each PV (enums as their choice, arrays as their length).
    Get {
        #[arg(required = true)]
        names: Vec<String>,
        #[arg(long, default_value_t = 5.0)]
        timeout: f64,
    },
    /// Write a value (a number, or text such as an enum's choice).
    Put {
        name: String,
        value: String,
        #[arg(long, default_value_t = 5.0)]
        timeout: f64,
    },
    /// Wait until a PV reads VALUE (as `get` prints it, or the same number).
    Wait {
        name: String,
        value: String,
        #[arg(long, default_value_t = 30.0)]
        timeout: f64,
    },
}

#[derive(Subcommand)]
enum BenchCmd {
    /// Table 1 of the 2013 plugin-scaling measurement (seed 000): 11 plugins on a
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
        #[arg(long, value_name = "PORT.PARAM=VALUE", value_parser = bench::parse_setting)]
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
    /// raw loopback TCP (seed 001).
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
    /// HDF5 writing (seed 002): uncompressed, filter pipeline, Codec plugin + direct chunk
    /// write, the writer alone, next to h5py + hdf5plugin in the same run.
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
    /// Scale-out (seed 003): 1 head + N writer processes (examples/scaleout), on loopback and,
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

fn read_config(path: &std::path::Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
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

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("NDFLOW_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Run {
            config,
            until_idle,
            summary,
            quiet,
            no_pva,
            no_ca,
            prefix,
            set,
        } => read_config(&config).and_then(|text| {
            ioc::run(
                &text,
                &config.display().to_string(),
                &ioc::RunOptions {
                    until_idle,
                    summary,
                    quiet,
                    print_table: false,
                    no_pva,
                    no_ca,
                    prefix,
                    sets: set,
                },
            )
        }),
        Cmd::Check {
            config,
            prefix,
            set,
        } => read_config(&config)
            .and_then(|text| {
                ioc::check(
                    &text,
                    &config.display().to_string(),
                    prefix.as_deref(),
                    &set,
                )
            })
            .map(|s| print!("{s}")),
        Cmd::Demo {
            frames,
            summary,
            quiet,
            pva,
            ca,
        } => ioc::run(
            &ioc::demo_config(frames),
            "demo.toml (embedded)",
            &ioc::RunOptions {
                until_idle: true,
                summary,
                quiet,
                print_table: true,
                no_pva: !pva,
                no_ca: !ca,
                prefix: None,
                sets: Vec::new(),
            },
        ),
        Cmd::Bench { which } => match which {
            BenchCmd::Rivers2013 {
                json,
                seconds,
                max_rate_frames,
                periods,
                set,
            } => bench::rivers2013(&bench::RiversOptions {
                set,
                json,
                seconds,
                max_rate_frames,
                periods,
            }),
            BenchCmd::Hop { json } => bench::hop(json.as_ref()),
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
                let writers = ndflow::bench_scaleout::parse_writers(&writers)?;
                ndflow::bench_scaleout::run(&ndflow::bench_scaleout::ScaleoutOptions {
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
            } => bench_hdf5::run(&bench_hdf5::Hdf5Options {
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
                let python = python.unwrap_or_else(|| {
                    PathBuf::from(concat!(
                        env!("CARGO_MANIFEST_DIR"),
                        "/../../.venv/bin/python"
                    ))
                });
                bench_pva::run(&bench_pva::PvaBenchOptions {
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
            } => bench_codec::codec(&bench_codec::CodecOptions {
                json,
                python,
                reps,
                batch_ms,
                side,
                clock: if clock == "wall" {
                    bench_codec::Clock::Wall
                } else {
                    bench_codec::Clock::Cpu
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
            } => ndflow::bench_ca::run(&ndflow::bench_ca::CaBenchOptions {
                python: python.unwrap_or_else(|| {
                    PathBuf::from(concat!(
                        env!("CARGO_MANIFEST_DIR"),
                        "/../../.venv/bin/python"
                    ))
                }),
                json,
                seconds,
                warmup,
                reps,
                pvs,
                clients,
                acquire_period,
            })
            .map(|table| print!("{table}")),
        },
        Cmd::Vds {
            output,
            parts,
            data,
            attributes,
            unique_id,
            json,
            strict,
            quiet,
        } => vds::run(&vds::VdsArgs {
            output,
            parts,
            options: ndflow_io::hdf5::vds::VdsOptions {
                data,
                attributes,
                unique_id,
            },
            json,
            strict,
            quiet,
        }),
        Cmd::Pv { op } => match op {
            PvCmd::Get { names, timeout } => pv_cmd::get(&names, timeout),
            PvCmd::Put {
                name,
                value,
                timeout,
            } => pv_cmd::put(&name, &value, timeout),
            PvCmd::Wait {
                name,
                value,
                timeout,
            } => pv_cmd::wait(&name, &value, timeout),
        },
        Cmd::Params {
            type_name,
            markdown,
        } => match type_name {
            None if markdown => {
                print!("{}", reference::full_markdown());
                Ok(())
            }
            None => {
                for (t, class, _, desc) in registry::TYPES {
                    println!("{t:10} {class:18} {desc}");
                }
                Ok(())
            }
            Some(t) if registry::type_names().contains(&t.as_str()) => {
                print!("{}", reference::markdown(&t));
                Ok(())
            }
            Some(t) => Err(format!(
                "unknown port type '{t}'; one of: {}",
                registry::type_names().join(", ")
            )),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
