//! Running a configured graph: state changes or the live status line, clean stop on Ctrl-C,
//! `--until-idle`, the exit summary and the JSON summary.
//!
//! The run loop sleeps until Ctrl-C, the start or end of an acquisition (the drivers wake it)
//! or its tick (a second; 20 ms with `--until-idle`). Each time it prints what changed
//! ([`crate::events`]: nothing while idle) and, when someone watches, the status line
//! ([`crate::status`]).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ndflow_runtime::{Graph, PortHandle};

use crate::config::{Config, ConfigError};
use crate::events::Events;
use crate::logging::{self, LogControl};
use crate::pva::ImagePvs;
use crate::pvdir::PvDirectory;
use crate::registry;
use crate::serve;
use crate::status::{show_status_line, StatusLine};

pub struct RunOptions {
    pub until_idle: bool,
    pub summary: Option<PathBuf>,
    /// No status line, even on a terminal (state changes are still printed).
    pub quiet: bool,
    /// `--status`: the status line even when stderr is not a terminal.
    pub status: bool,
    /// The log filter and how to change it, for `$(P)NDFLOW:LogLevel` (none: the PV is
    /// served but changes nothing).
    pub log: Option<LogControl>,
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
    /// `--listen`: whom to serve, over the config's `listen` and the EPICS variables.
    pub listen: Option<ndflow_net::Listen>,
    /// The state file: settings saved across restarts ([`crate::state`]); `None`: none.
    pub state: Option<PathBuf>,
    /// `--put-log FILE`: accepted client writes appended there too ([`crate::put_log`]).
    pub put_log: Option<PathBuf>,
    /// `--web [ADDR:]PORT`: the web viewer's address, over the config's `[web]`.
    pub web: Option<std::net::SocketAddr>,
}

/// The embedded demo pipeline, acquiring `frames` frames.
pub fn demo_config(frames: u32) -> String {
    include_str!("../../../examples/demo.toml")
        .replace("NumImages = 2000", &format!("NumImages = {frames}"))
}

static STOP: AtomicBool = AtomicBool::new(false);

/// The [`registry::setting_phase`] of `Acquire`, applied last.
const ACQUIRE_PHASE: u8 = 2;

/// Builds the graph from `text` and runs it until idle (with `until_idle`) or Ctrl-C.
pub fn run(text: &str, file: &str, opts: &RunOptions) -> Result<(), String> {
    let mut cfg = Config::parse(text, file).map_err(|e| e.to_string())?;
    cfg.apply_overrides(opts.prefix.as_deref(), &opts.sets)
        .map_err(|e| e.to_string())?;
    let graph = Arc::new(Graph::new(cfg.threads));
    let pv_reader = serve::install_pv_reader(&graph);
    let images = Arc::new(ImagePvs::default());
    let web_frames = Arc::clone(images.web_frames());
    // The graph without the config's `Acquire = 1`, which is applied (last, as `build` would)
    // once the drivers are watched, so that the acquisition it starts is reported in full.
    let mut built = cfg.clone();
    for p in &mut built.ports {
        p.settings
            .retain(|s| registry::setting_phase(&s.key) != ACQUIRE_PHASE);
    }
    built.build(&graph, &images).map_err(|e| e.to_string())?;
    let (stop_tx, stop_rx) = std::sync::mpsc::sync_channel::<()>(1);
    let wake = stop_tx.clone();
    let mut events = Events::attach(
        &graph,
        Arc::new(move || {
            let _ = wake.try_send(());
        }),
    );
    let port_prefixes = cfg.port_prefixes();
    serve::set_local_pvs(&pv_reader, &graph, &cfg.prefix, &port_prefixes);
    // The saved settings over the config's (keys --set gives stay as given), before Acquire.
    let state = crate::state::start(&graph, &cfg, opts.state.as_deref(), &opts.sets);
    let put_log = opts
        .put_log
        .as_deref()
        .map(crate::put_log::PutLog::open)
        .transpose()?;
    let ioc_port = logging::ioc_port(opts.log.as_ref());
    let servers = serve::serve_with(
        &graph,
        images,
        &serve::ServeOptions {
            pva: cfg.pva && !opts.no_pva,
            ca: cfg.ca && !opts.no_ca,
            prefix: &cfg.prefix,
            port_prefixes: &port_prefixes,
            access: cfg.access.clone(),
            listen: opts.listen.clone().or_else(|| cfg.listen.clone()),
        },
        std::slice::from_ref(&ioc_port),
    )?;
    if let (Some(log), Some(dir)) = (put_log, &servers.dir) {
        dir.set_put_log(log);
    }
    // The link fields: the config's, then the state file's (the directory exists now).
    match &servers.dir {
        Some(dir) => {
            crate::state::links::apply_config(dir, &cfg).map_err(|e| e.to_string())?;
        }
        None if crate::state::links::in_config(&cfg) => eprintln!(
            "warning: {}: the link fields it sets are not applied: {}",
            cfg.file,
            crate::state::links::NEED_SERVERS
        ),
        None => {}
    }
    if let (Some(saver), Some(path)) = (&state, opts.state.as_deref()) {
        crate::state::attach_links(saver, servers.dir.as_ref(), &cfg, path);
    }
    // Acquire last, once everything it may use is set (an EPICS-PV shutter's links too).
    for p in &cfg.ports {
        registry::apply_settings(&graph, p, ACQUIRE_PHASE).map_err(|(s, message)| {
            ConfigError {
                file: cfg.file.clone(),
                line: Some(s.line).filter(|&l| l != 0),
                port: Some(p.name.clone()),
                key: Some(s.key.clone()),
                message,
            }
            .to_string()
        })?;
    }
    let web = match opts.web.or(cfg.web) {
        Some(addr) => Some(crate::web::start(
            addr,
            &graph,
            &cfg,
            servers.dir.clone(),
            web_frames,
            std::slice::from_ref(&ioc_port),
        )?),
        None => None,
    };
    // A second Ctrl-C (or SIGTERM, SIGHUP) while stopping exits at once. The first wakes the
    // loop below, as does the start or end of an acquisition; otherwise it sleeps a second
    // (20 ms with --until-idle, to notice idle) and, while idle, prints nothing.
    let _ = ctrlc::set_handler(move || {
        if STOP.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
        let _ = stop_tx.try_send(());
    });
    // Always, quiet or not: where the IOC can be reached is what a user needs first. Printed
    // once a stop signal is handled, so a supervisor seeing it may stop the IOC cleanly.
    if let Some(line) = servers.banner() {
        eprintln!("{line}");
    }
    if let Some(w) = &web {
        eprintln!("web viewer: http://{}/", w.local_addr());
    }
    let show_status = show_status_line(opts.quiet, opts.status);
    let mut status = StatusLine::new();
    let started = Instant::now();
    let mut health = crate::health::Health::start(&ioc_port.store, file);
    let mut last_print = Instant::now();
    let tick = if opts.until_idle {
        Duration::from_millis(20)
    } else {
        Duration::from_secs(1)
    };
    loop {
        let _ = stop_rx.recv_timeout(tick);
        crate::server_stats::update(&ioc_port.store, &servers);
        health.update(&ioc_port.store, &graph);
        if STOP.load(Ordering::SeqCst) {
            status.say(&[
                "stopping: acquisition off, draining plugins (Ctrl-C again to quit now)".into(),
            ]);
            for name in cfg.driver_names() {
                let _ = graph.put(&name, "Acquire", 0);
            }
            if !graph.wait_idle(Duration::from_secs(30)) {
                status.say(&[format!(
                    "warning: plugins still held {} frames after 30 s",
                    graph.busy()
                )]);
            }
            break;
        }
        status.say(&events.poll(&graph));
        if opts.until_idle && started.elapsed() > Duration::from_millis(100) && graph.is_idle() {
            break;
        }
        if show_status && last_print.elapsed() >= Duration::from_millis(990) {
            status.print(&graph);
            last_print = Instant::now();
        }
    }
    if show_status {
        status.finish(&graph);
    }
    status.say(&events.poll(&graph));
    status.say(&events.summary(&graph));
    let summary = graph.summary();
    if opts.print_table {
        print_table(&graph, &summary);
    }
    if let Some(path) = &opts.summary {
        let text = serde_json::to_string_pretty(&summary).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n")
            .map_err(|e| format!("cannot write summary {}: {e}", path.display()))?;
    }
    drop(state); // writes what is still pending
    drop(web);
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
pub fn idle_directory(cfg: &Config) -> Result<Arc<PvDirectory>, String> {
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
            PvDirectory::build_with(
                &graph,
                &idle.prefix,
                &idle.port_prefixes(),
                idle.access.clone(),
                &[logging::ioc_port(None)],
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
