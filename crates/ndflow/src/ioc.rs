//! Running a configured graph: status line, clean stop on Ctrl-C, `--until-idle`, summary.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ndflow_runtime::{Graph, PortHandle};

use crate::config::Config;
use crate::pva::ImagePvs;
use crate::pvdir::PvDirectory;
use crate::serve;
use crate::status::StatusLine;

pub struct RunOptions {
    pub until_idle: bool,
    pub summary: Option<PathBuf>,
    pub quiet: bool,
    /// Print a per-port table at the end (demo).
    pub print_table: bool,
    /// Do not start the pvAccess server (overrides the config's `pva = true`).
    pub no_pva: bool,
    /// Do not start the Channel Access server (overrides the config's `ca = true`).
    pub no_ca: bool,
    /// `--prefix`: replaces the config's prefix.
    pub prefix: Option<String>,
    /// `--set PORT.KEY=VALUE` overrides, applied in order.
    pub sets: Vec<(String, String, String)>,
}

/// The embedded demo pipeline, acquiring `frames` frames.
pub fn demo_config(frames: u32) -> String {
    include_str!("../../../examples/demo.toml")
        .replace("NumImages = 2000", &format!("NumImages = {frames}"))
}

static STOP: AtomicBool = AtomicBool::new(false);

/// Builds the graph from `text` and runs it until idle (with `until_idle`) or Ctrl-C.
pub fn run(text: &str, file: &str, opts: &RunOptions) -> Result<(), String> {
    let mut cfg = Config::parse(text, file).map_err(|e| e.to_string())?;
    cfg.apply_overrides(opts.prefix.as_deref(), &opts.sets)
        .map_err(|e| e.to_string())?;
    let graph = Arc::new(Graph::new(cfg.threads));
    let pv_reader = serve::install_pv_reader(&graph);
    let images = Arc::new(ImagePvs::default());
    cfg.build(&graph, &images).map_err(|e| e.to_string())?;
    let port_prefixes = cfg.port_prefixes();
    serve::set_local_pvs(&pv_reader, &graph, &cfg.prefix, &port_prefixes);
    let servers = serve::serve(
        &graph,
        images,
        &serve::ServeOptions {
            pva: cfg.pva && !opts.no_pva,
            ca: cfg.ca && !opts.no_ca,
            prefix: &cfg.prefix,
            port_prefixes: &port_prefixes,
            access: cfg.access.clone(),
        },
    )?;
    if !opts.quiet {
        for line in servers.describe() {
            eprintln!("{line}");
        }
    }
    // A second Ctrl-C while stopping exits at once. The first wakes the loop below, which
    // otherwise sleeps a second between status lines (checking for idle every 20 ms only
    // with --until-idle): an idle IOC does not poll.
    let (stop_tx, stop_rx) = std::sync::mpsc::sync_channel::<()>(1);
    let _ = ctrlc::set_handler(move || {
        if STOP.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
        let _ = stop_tx.try_send(());
    });
    let mut status = StatusLine::new();
    let started = Instant::now();
    let mut last_print = Instant::now();
    let tick = if opts.until_idle {
        Duration::from_millis(20)
    } else {
        Duration::from_secs(1)
    };
    loop {
        let _ = stop_rx.recv_timeout(tick);
        if STOP.load(Ordering::SeqCst) {
            eprintln!("\nstopping: acquisition off, draining plugins (Ctrl-C again to quit now)");
            for name in cfg.driver_names() {
                let _ = graph.put(&name, "Acquire", 0);
            }
            if !graph.wait_idle(Duration::from_secs(30)) {
                eprintln!(
                    "warning: plugins still held {} frames after 30 s",
                    graph.busy()
                );
            }
            break;
        }
        if opts.until_idle && started.elapsed() > Duration::from_millis(100) && graph.is_idle() {
            break;
        }
        if !opts.quiet && last_print.elapsed() >= Duration::from_millis(990) {
            status.print(&graph);
            last_print = Instant::now();
        }
    }
    if !opts.quiet {
        status.finish(&graph);
    }
    let summary = graph.summary();
    if opts.print_table {
        print_table(&graph, &summary);
    }
    if let Some(path) = &opts.summary {
        let text = serde_json::to_string_pretty(&summary).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n")
            .map_err(|e| format!("cannot write summary {}: {e}", path.display()))?;
    }
    drop(servers);
    graph.shutdown();
    Ok(())
}

/// `ndflow check`: builds the graph and the PV directory of a config (with the command-line
/// overrides) exactly as `run` would, without starting acquisition or any server, and says
/// what it holds. For validating configs and service definitions before deploying them.
pub fn check(
    text: &str,
    file: &str,
    prefix: Option<&str>,
    sets: &[(String, String, String)],
) -> Result<String, String> {
    let mut cfg = Config::parse(text, file).map_err(|e| e.to_string())?;
    cfg.apply_overrides(prefix, sets)
        .map_err(|e| e.to_string())?;
    let dir = idle_directory(&cfg)?;
    let ports: Vec<String> = cfg
        .ports
        .iter()
        .map(|p| format!("{} ({})", p.name, p.type_name))
        .collect();
    Ok(format!(
        "{file}: OK: prefix {:?}, {} ports: {}; {} PVs\n",
        cfg.prefix,
        ports.len(),
        ports.join(", "),
        dir.len()
    ))
}

/// Every PV name `run` would serve for `cfg`, sorted; built like [`check`], nothing started.
pub fn pv_names(cfg: &Config) -> Result<Vec<String>, String> {
    Ok(idle_directory(cfg)?.names())
}

/// The PV directory of `cfg` on a graph that never acquires. CreateDirectory is left out too,
/// so a FilePath is not created: checking a config must not change the machine.
fn idle_directory(cfg: &Config) -> Result<Arc<PvDirectory>, String> {
    let mut idle = cfg.clone();
    for p in &mut idle.ports {
        p.settings
            .retain(|s| s.key != "Acquire" && s.key != "CreateDirectory");
    }
    let graph = Arc::new(Graph::new(1));
    let built = idle
        .build(&graph, &Arc::new(ImagePvs::default()))
        .map_err(|e| e.to_string())
        .and_then(|()| {
            PvDirectory::build(
                &graph,
                &idle.prefix,
                &idle.port_prefixes(),
                idle.access.clone(),
            )
        });
    graph.shutdown();
    built
}

fn print_table(graph: &Graph, summary: &serde_json::Value) {
    println!(
        "{:<8} {:<18} {:>9} {:>9} {:>8} {:>10}",
        "port", "type", "processed", "dropped", "queued", "exec ms"
    );
    for p in graph.ports() {
        let s = &summary["ports"][p.name()];
        match &p {
            PortHandle::Driver(d) => println!(
                "{:<8} {:<18} {:>9} {:>9} {:>8} {:>10}",
                d.name,
                "driver",
                d.array_counter(),
                d.dropped(),
                "-",
                "-"
            ),
            PortHandle::Plugin(pl) => {
                let a = pl.accounting();
                println!(
                    "{:<8} {:<18} {:>9} {:>9} {:>8} {:>10.3}",
                    pl.name,
                    pl.plugin_type(),
                    a.processed,
                    a.dropped_total(),
                    a.queued + a.in_flight,
                    s["ExecutionTime_RBV"].as_f64().unwrap_or(0.0)
                );
            }
        }
    }
}
