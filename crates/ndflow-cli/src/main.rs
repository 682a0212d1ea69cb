//! `ndflow`: the IOC command line (run, check, demo, vds, pv, ca, params) and `ndflow bench`
//! (ndflow-bench's [`ndflow_bench::cli`]).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use ndflow::config::parse_setting;
use ndflow::{ca_cmd, cli_fmt, ioc, pv_cmd, reference, registry, vds};

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
        /// No live status line, even on a terminal (state changes are still printed).
        #[arg(long, short)]
        quiet: bool,
        /// Show the live status line even when stderr is not a terminal (a line a second).
        /// Without it, and off a terminal, only state changes are printed.
        #[arg(long, conflicts_with = "quiet")]
        status: bool,
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
        #[arg(long, value_name = "PORT.KEY=VALUE", value_parser = parse_setting)]
        set: Vec<(String, String, String)>,
        /// Whom the pvAccess and Channel Access servers serve: `local` (this host only, the
        /// default), `all` / `0.0.0.0` (every interface), or interface addresses. Overrides
        /// the config's `listen` and EPICS_PVAS_INTF_ADDR_LIST / EPICS_CAS_INTF_ADDR_LIST.
        #[arg(long, value_name = "local|all|ADDR", value_parser = parse_listen)]
        listen: Option<ndflow_net::Listen>,
        /// Where settings changed while running are saved and restored from at the next start
        /// (default: beside the config, ioc.toml -> ioc.state.toml; see docs/state.md).
        #[arg(long, value_name = "FILE")]
        state: Option<PathBuf>,
        /// Neither restore nor save settings.
        #[arg(long, conflicts_with = "state")]
        no_state: bool,
        /// Append every accepted client write (time, protocol, user@host, PV, old -> new) to
        /// this file; the log has them at info level anyway (target ndflow::put).
        #[arg(long, value_name = "FILE")]
        put_log: Option<PathBuf>,
        /// Serve the live web viewer on [ADDR:]PORT (default address 127.0.0.1: this host
        /// only); overrides the config's [web] (docs/web.md).
        #[arg(long, value_name = "[ADDR:]PORT", value_parser = ndflow::web::parse_addr)]
        web: Option<std::net::SocketAddr>,
    },
    /// Validate a config file (with the same --prefix/--set as `run`): builds every port and
    /// PV name without acquiring or serving, and prints what it holds.
    Check {
        config: PathBuf,
        #[arg(long, value_name = "PREFIX")]
        prefix: Option<String>,
        #[arg(long, value_name = "PORT.KEY=VALUE", value_parser = parse_setting)]
        set: Vec<(String, String, String)>,
    },
    /// Write Phoebus operator screens (.bob) for a config (same --prefix/--set as `run`): one
    /// per port and one of the pipeline (docs/screens.md).
    Screens {
        config: PathBuf,
        /// The directory to write the screens to (created if missing).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        #[arg(long, value_name = "PREFIX")]
        prefix: Option<String>,
        #[arg(long, value_name = "PORT.KEY=VALUE", value_parser = parse_setting)]
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
    /// Benchmarks, each next to its reference measured in the same run (docs/benchmarks.md).
    Bench {
        #[command(subcommand)]
        which: ndflow_bench::cli::BenchCmd,
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
    /// Read, write or monitor PVs over Channel Access (servers found as by libca:
    /// EPICS_CA_ADDR_LIST, EPICS_CA_AUTO_ADDR_LIST, EPICS_CA_NAME_SERVERS, EPICS_CA_SERVER_PORT).
    Ca {
        #[command(subcommand)]
        op: CaCmd,
    },
    /// The settings `ndflow run` saved for a config (docs/state.md): show, diff, clear.
    State {
        #[command(subcommand)]
        op: StateCmd,
    },
    /// Print the parameters of a port type (or of all, as Markdown with --markdown).
    Params {
        /// A port type, e.g. `sim` or `hdf5`. Without one, every type is listed (with
        /// --markdown, every type's parameters).
        #[arg(value_name = "TYPE")]
        type_name: Option<String>,
        #[arg(long)]
        markdown: bool,
        /// Print the README's table of port types.
        #[arg(long, conflicts_with_all = ["markdown", "type_name"])]
        readme: bool,
        /// A constructor key for building the port, KEY=VALUE (repeatable): what the
        /// parameters depend on, e.g. `--key GenICamXml=cam.xml` for an `aravis` port.
        #[arg(long = "key", value_name = "KEY=VALUE", requires = "type_name")]
        keys: Vec<String>,
        /// The camera's IPv4 address (the `aravis` port's CameraId): lists its GC_ records
        /// as the camera describes them.
        #[arg(long, value_name = "ADDRESS", requires = "type_name")]
        camera: Option<String>,
    },
}

#[derive(Subcommand)]
enum PvCmd {
    /// Print `NAME VALUE` for each PV (enums as their choice, arrays as `COUNT [first
    /// elements]`).
    Get {
        #[arg(required = true)]
        names: Vec<String>,
        #[arg(long, default_value_t = 5.0)]
        timeout: f64,
        /// Array elements printed.
        #[arg(short = 'n', value_name = "N", default_value_t = cli_fmt::DEFAULT_ELEMENTS)]
        elements: usize,
    },
    /// Write a value (a number, or text such as an enum's choice).
    Put {
        name: String,
        /// The value; a negative number is a value, not an option (`ndflow pv put X -1.5`).
        #[arg(allow_hyphen_values = true)]
        value: String,
        #[arg(long, default_value_t = 5.0)]
        timeout: f64,
    },
    /// Wait until a PV reads VALUE (as `get` prints it, or the same number).
    Wait {
        name: String,
        #[arg(allow_hyphen_values = true)]
        value: String,
        #[arg(long, default_value_t = 30.0)]
        timeout: f64,
    },
    /// Print `NAME TIMESTAMP VALUE` for every update (the current value first) until Ctrl-C.
    Monitor {
        #[arg(required = true)]
        names: Vec<String>,
        /// Exit after N updates (lines, all PVs together).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        count: Option<u64>,
        /// Seconds to find each PV.
        #[arg(long, default_value_t = 5.0)]
        timeout: f64,
        /// Array elements printed.
        #[arg(short = 'n', value_name = "N", default_value_t = cli_fmt::DEFAULT_ELEMENTS)]
        elements: usize,
    },
}

#[derive(Subcommand)]
enum CaCmd {
    /// Print `NAME VALUE` for each PV: enums as their strings, char waveforms holding text
    /// (FilePath, FileName, …) as the text, arrays as `COUNT [first elements]`.
    Get {
        #[arg(required = true)]
        names: Vec<String>,
        #[arg(long, default_value_t = 5.0)]
        timeout: f64,
        /// Array elements printed.
        #[arg(short = 'n', value_name = "N", default_value_t = cli_fmt::DEFAULT_ELEMENTS)]
        elements: usize,
    },
    /// Write a value: an enum's string or index, text into a char waveform, numbers (an
    /// array's separated by spaces or commas).
    Put {
        name: String,
        #[arg(allow_hyphen_values = true)]
        value: String,
        /// Wait for completion: a busy record (Acquire, Capture) returns when its operation
        /// has ended (within --timeout). Without it the put returns once applied and leaves
        /// such an operation running.
        #[arg(long, short = 'c')]
        wait: bool,
        #[arg(long, default_value_t = 5.0)]
        timeout: f64,
    },
    /// Print `NAME TIMESTAMP VALUE` for every update (the current value first) until Ctrl-C.
    Monitor {
        #[arg(required = true)]
        names: Vec<String>,
        /// Exit after N updates (lines, all PVs together).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        count: Option<u64>,
        /// Seconds to find each PV.
        #[arg(long, default_value_t = 5.0)]
        timeout: f64,
        /// Array elements printed.
        #[arg(short = 'n', value_name = "N", default_value_t = cli_fmt::DEFAULT_ELEMENTS)]
        elements: usize,
    },
}

#[derive(Subcommand)]
enum StateCmd {
    /// Print the saved values, `PORT.KEY = VALUE` a line.
    Show {
        config: PathBuf,
        /// The state file, if not the config's default (CONFIG stem + .state.toml).
        #[arg(long, value_name = "FILE")]
        state: Option<PathBuf>,
        /// As given to `run`: an IOC run with `--prefix W1:` keeps CONFIG stem.W1.state.toml.
        #[arg(long, value_name = "PREFIX")]
        prefix: Option<String>,
    },
    /// Per saved key: the config's value -> the saved one; then the keys that no longer fit
    /// the config (unknown port or key, a value the parameter refuses).
    Diff {
        config: PathBuf,
        #[arg(long, value_name = "FILE")]
        state: Option<PathBuf>,
        #[arg(long, value_name = "PREFIX")]
        prefix: Option<String>,
        /// As given to `run` (the config's values are compared with these applied).
        #[arg(long, value_name = "PORT.KEY=VALUE", value_parser = parse_setting)]
        set: Vec<(String, String, String)>,
    },
    /// Remove the state file: the next start is the config's alone.
    Clear {
        config: PathBuf,
        #[arg(long, value_name = "FILE")]
        state: Option<PathBuf>,
        #[arg(long, value_name = "PREFIX")]
        prefix: Option<String>,
    },
    /// Test mode: rewrite FILE as fast as possible for a few seconds (the tests kill it).
    #[command(hide = true)]
    StressWrite {
        file: PathBuf,
        #[arg(long, default_value_t = 30.0)]
        seconds: f64,
    },
}

/// `--state FILE`, else the default state file of the config (and `--prefix`).
fn state_path(config: &std::path::Path, prefix: Option<&str>, state: Option<PathBuf>) -> PathBuf {
    state.unwrap_or_else(|| ndflow::state::default_path(config, prefix))
}

fn parse_listen(s: &str) -> Result<ndflow_net::Listen, String> {
    ndflow_net::Listen::parse(s).map_err(|e| e.to_string())
}

fn read_config(path: &std::path::Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// Logs to stderr through a filter from `NDFLOW_LOG` (default `warn`) that the IOC can
/// replace while running (`$(P)NDFLOW:LogLevel`).
fn init_logging() -> ndflow::logging::LogControl {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    use tracing_subscriber::{fmt, layer::SubscriberExt, reload, util::SubscriberInitExt};
    let env = std::env::var("NDFLOW_LOG").unwrap_or_default();
    let bad = EnvFilter::try_new(&env)
        .err()
        .filter(|_| !env.trim().is_empty());
    let initial = if env.trim().is_empty() || bad.is_some() {
        "warn".to_string()
    } else {
        env.clone()
    };
    let (filter, handle) = reload::Layer::new(EnvFilter::new(&initial));
    tracing_subscriber::registry()
        .with(filter)
        .with(
            fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(std::io::stderr().is_terminal()),
        )
        .init();
    if let Some(e) = bad {
        eprintln!("warning: NDFLOW_LOG={env:?} is not a log filter ({e}); using \"warn\"");
    }
    ndflow::logging::LogControl {
        initial,
        set: std::sync::Arc::new(move |spec: &str| {
            let f = EnvFilter::try_new(spec).map_err(|e| e.to_string())?;
            handle.reload(f).map_err(|e| e.to_string())
        }),
    }
}

fn main() -> ExitCode {
    let log = init_logging();
    // `ndflow params --help` lists the port types from the registry's records.
    let command = Cli::command().mut_subcommand("params", |c| {
        c.after_help(format!("Port types:\n{}", reference::types_text()))
    });
    let cli = match Cli::from_arg_matches(&command.get_matches()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let result = match cli.cmd {
        Cmd::Run {
            config,
            until_idle,
            summary,
            quiet,
            status,
            no_pva,
            no_ca,
            prefix,
            set,
            listen,
            state,
            no_state,
            put_log,
            web,
        } => read_config(&config).and_then(|text| {
            ioc::run(
                &text,
                &config.display().to_string(),
                &ioc::RunOptions {
                    until_idle,
                    summary,
                    quiet,
                    status,
                    log: Some(log),
                    print_table: false,
                    no_pva,
                    no_ca,
                    // Before `prefix` moves: the default state file depends on it.
                    state: (!no_state).then(|| state_path(&config, prefix.as_deref(), state)),
                    prefix,
                    sets: set,
                    listen,
                    put_log,
                    web,
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
        Cmd::Screens {
            config,
            out,
            prefix,
            set,
        } => read_config(&config)
            .and_then(|text| {
                ndflow::screens::run(
                    &text,
                    &config.display().to_string(),
                    &ndflow::screens::ScreenOptions {
                        prefix: prefix.as_deref(),
                        sets: &set,
                        out: &out,
                    },
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
                status: false,
                log: Some(log),
                print_table: true,
                no_pva: !pva,
                no_ca: !ca,
                prefix: None,
                sets: Vec::new(),
                listen: None,
                state: None,
                put_log: None,
                web: None,
            },
        ),
        Cmd::Bench { which } => ndflow_bench::cli::run(which),
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
            PvCmd::Get {
                names,
                timeout,
                elements,
            } => pv_cmd::get(&names, timeout, elements),
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
            PvCmd::Monitor {
                names,
                count,
                timeout,
                elements,
            } => pv_cmd::monitor(&names, count, timeout, elements),
        },
        Cmd::Ca { op } => match op {
            CaCmd::Get {
                names,
                timeout,
                elements,
            } => ca_cmd::get(&names, ca_cmd::Opts { timeout, elements }),
            CaCmd::Put {
                name,
                value,
                wait,
                timeout,
            } => ca_cmd::put(
                &name,
                &value,
                wait,
                ca_cmd::Opts {
                    timeout,
                    ..ca_cmd::Opts::default()
                },
            ),
            CaCmd::Monitor {
                names,
                count,
                timeout,
                elements,
            } => ca_cmd::monitor(&names, count, ca_cmd::Opts { timeout, elements }),
        },
        Cmd::State { op } => match op {
            StateCmd::Show {
                config,
                state,
                prefix,
            } => ndflow::state::show(&state_path(&config, prefix.as_deref(), state))
                .map(|s| print!("{s}")),
            StateCmd::Diff {
                config,
                state,
                prefix,
                set,
            } => read_config(&config)
                .and_then(|text| {
                    ndflow::state::diff(
                        &text,
                        &config.display().to_string(),
                        &state_path(&config, prefix.as_deref(), state),
                        &set,
                    )
                })
                .map(|s| print!("{s}")),
            StateCmd::Clear {
                config,
                state,
                prefix,
            } => ndflow::state::clear(&state_path(&config, prefix.as_deref(), state))
                .map(|s| print!("{s}")),
            StateCmd::StressWrite { file, seconds } => ndflow::state::stress_write(
                &file,
                std::time::Duration::try_from_secs_f64(seconds.clamp(0.0, 600.0))
                    .unwrap_or(std::time::Duration::from_secs(30)),
            ),
        },
        Cmd::Params {
            type_name,
            markdown,
            readme,
            keys,
            camera,
        } => match type_name {
            None if readme => {
                print!("{}", reference::types_markdown());
                Ok(())
            }
            None if markdown => {
                print!("{}", reference::full_markdown());
                Ok(())
            }
            None => {
                print!("{}", reference::types_text());
                Ok(())
            }
            Some(t) if registry::type_names().contains(&t.as_str()) => {
                match constructor_keys(&keys, camera) {
                    Ok(k) if k.is_empty() => {
                        print!("{}", reference::markdown(&t));
                        Ok(())
                    }
                    Ok(k) => reference::markdown_with(&t, &k).map(|text| print!("{text}")),
                    Err(e) => Err(e),
                }
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

/// `--key K=V` and `--camera ADDR` as constructor values: integers as numbers, the rest as
/// text.
fn constructor_keys(
    keys: &[String],
    camera: Option<String>,
) -> Result<Vec<(String, ndflow_core::ParamValue)>, String> {
    let mut out = Vec::new();
    for kv in keys {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("--key {kv}: expected KEY=VALUE"))?;
        let v = match v.trim().parse::<i64>() {
            Ok(i) => ndflow_core::ParamValue::Int(i),
            Err(_) => ndflow_core::ParamValue::Str(v.to_string()),
        };
        out.push((k.trim().to_string(), v));
    }
    if let Some(c) = camera {
        out.push(("CameraId".to_string(), ndflow_core::ParamValue::Str(c)));
    }
    Ok(out)
}
