//! `ndflow bench ca`: Channel Access speed on this host.
//!
//! Measured in the same run, repetitions interleaved, best of each row kept:
//! - (a) monitor updates/s received by one pyepics (libca) process subscribed to N scalar PVs
//!   (default 10,000) that change at full rate: the `ndflow_ca` server in this process, a
//!   thread posting every PV in turn as fast as it can, against pythonSoftIOC (EPICS base's
//!   RSRV) serving N calc records that EPICS' event scan thread processes (C, no Python per
//!   record; the reference) and N ao records that one Python thread sets in turn. The client
//!   (`python/bench/ca_ref.py monitor`) is the same for both and only counts callbacks.
//! - (b) 1024x1024 UInt16 frames over CA to pyepics (numpy arrays, as pyepics users get them):
//!   from the full IOC (`image1:ArrayData`, posted per frame, each client keeps the latest)
//!   and from the `ndflow_ca` server alone (one DBR_SHORT waveform posted every 250 µs), next
//!   to raw loopback TCP with the same message size, into Rust and into Python. The notes give
//!   the pyepics client's CPU (near 100% of a core = the client is the limit).
//! - (c) the IOC's pipeline rate (the sim driver's frames/s, free running) with no CA client
//!   (the better of a window before and one after the clients), with the (b) ArrayData
//!   client, and with 10 client processes each monitoring every PV of the IOC (scalars only,
//!   then every PV including ArrayData).
//! - (d) the same pipeline paced at 100 frames/s (AcquirePeriod 0.01), alone and with the 10
//!   clients monitoring every PV including ArrayData: with CPU to spare, CA clients should
//!   cost it no frames.
//!
//! Everything is on 127.0.0.1 with free ports chosen per run (server, repeater); the child
//! processes are ours and are stopped by PID ([`crate::host`]). The rows are measured by
//! [`scalars`] (a), [`frames`] (b) and [`ioc`] (the IOC's rows of (b), (c) and (d)).

mod frames;
mod ioc;
mod scalars;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{json, Value as Json};

use crate::host::{self, Proc};

const FRAME_W: usize = 1024;
const FRAME_H: usize = 1024;
const FRAME_BYTES: usize = FRAME_W * FRAME_H * 2;
/// The PV prefix of every server of the bench (the IOC's, the scalars', the waveform's).
const IOC_PREFIX: &str = "CABENCH:";

pub struct CaBenchOptions {
    /// Python with pyepics, pythonSoftIOC and numpy.
    pub python: PathBuf,
    pub json: Option<PathBuf>,
    /// Counting window of every row (s).
    pub seconds: f64,
    /// Wait after subscribing before counting (s).
    pub warmup: f64,
    /// Repetitions (interleaved); the best of each row is reported.
    pub reps: usize,
    /// Scalar PVs of (a).
    pub pvs: usize,
    /// Client processes of (c).
    pub clients: usize,
    /// The IOC's AcquirePeriod in (b) and (c) (0 = free running).
    pub acquire_period: f64,
}

#[derive(Clone, Debug)]
struct Row {
    group: &'static str,
    path: String,
    /// Updates/s or frames/s.
    rate: f64,
    unit: &'static str,
    gbps: Option<f64>,
    /// The row this one is divided by (same group, same repetition's best).
    reference: &'static str,
    /// Context: the server side's post rate, what was connected ...
    note: String,
}

/// What every row needs: the options, the helper script and the directory for names and logs.
struct Ctx<'a> {
    opts: &'a CaBenchOptions,
    script: PathBuf,
    dir: PathBuf,
    seq: AtomicU64,
}

impl Ctx<'_> {
    /// `ca_ref.py ARGS` on loopback, its CA client looking for the server on `ca_ports`
    /// (port, repeater), its stderr in a log of its own.
    fn python(
        &self,
        name: &str,
        args: &[String],
        ca_ports: Option<(u16, u16)>,
    ) -> Result<Proc, String> {
        let mut cmd = Command::new(&self.opts.python);
        cmd.arg(&self.script).args(args);
        host::loopback_env(&mut cmd);
        if let Some((port, repeater)) = ca_ports {
            host::ca_ports_env(&mut cmd, port, repeater);
        }
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        Proc::piped(name, cmd, Some(self.dir.join(format!("{name}-{n}.log"))))
    }

    fn client_timeout(&self) -> Duration {
        Duration::from_secs_f64(60.0 + self.opts.warmup + self.opts.seconds)
    }

    fn monitor(&self, names: &Path, port: u16, repeater: u16) -> Result<Json, String> {
        let mut p = self.python(
            "pyepics monitor",
            &[
                "monitor".into(),
                names.display().to_string(),
                self.opts.warmup.to_string(),
                self.opts.seconds.to_string(),
            ],
            Some((port, repeater)),
        )?;
        let j = p.json_line(self.client_timeout());
        p.finish(Duration::from_secs(5));
        j
    }
}

/// The PV names of the scalar rows (a).
fn scalar_names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{IOC_PREFIX}v{i}")).collect()
}

fn write_names(path: &Path, names: &[String]) -> Result<(), String> {
    let mut text = names.join("\n");
    text.push('\n');
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// A number of a helper's JSON answer (0 when missing).
fn f(j: &Json, k: &str) -> f64 {
    j[k].as_f64().unwrap_or(0.0)
}

/// Keeps the higher rate of two measurements of the same row.
fn keep_best(rows: &mut Vec<Row>, r: Row, all: &mut Vec<Json>, rep: usize) {
    all.push(json!({
        "rep": rep, "group": r.group, "path": r.path, "rate": r.rate, "unit": r.unit,
        "gbps": r.gbps, "note": r.note,
    }));
    match rows
        .iter_mut()
        .find(|x| x.group == r.group && x.path == r.path)
    {
        Some(x) if x.rate >= r.rate => {}
        Some(x) => *x = r,
        None => rows.push(r),
    }
}

fn check_python(ctx: &Ctx) -> Result<(), String> {
    if !ctx.opts.python.exists() {
        return Err(format!(
            "{} not found: run scripts/setup.sh (the bench needs pyepics, pythonSoftIOC and numpy), or pass --python",
            ctx.opts.python.display()
        ));
    }
    if !ctx.script.exists() {
        return Err(format!("{} not found", ctx.script.display()));
    }
    let out = Command::new(&ctx.opts.python)
        .arg(&ctx.script)
        .arg("check")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", ctx.opts.python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{}: {}",
            ctx.opts.python.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

pub fn run(opts: &CaBenchOptions) -> Result<String, String> {
    let seconds_ok = opts.seconds > 0.0 && opts.seconds.is_finite();
    let warmup_ok = opts.warmup >= 0.0 && opts.warmup.is_finite();
    if !seconds_ok || !warmup_ok {
        return Err("--seconds must be > 0 and --warmup >= 0".into());
    }
    if opts.pvs == 0 {
        return Err("--pvs must be at least 1".into());
    }
    let dir = std::env::temp_dir().join(format!("ndflow-bench-ca-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let ctx = Ctx {
        opts,
        script: host::repo_path("python/bench/ca_ref.py"),
        dir: dir.clone(),
        seq: AtomicU64::new(0),
    };
    let result = run_all(&ctx);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn run_all(ctx: &Ctx) -> Result<String, String> {
    check_python(ctx)?;
    let opts = ctx.opts;
    let names = ctx.dir.join("scalar-names.txt");
    write_names(&names, &scalar_names(opts.pvs))?;
    let mut rows = Vec::new();
    let mut samples = Vec::new();
    let reps = opts.reps.max(1);
    let tcp_frames = 1000;
    for rep in 1..=reps {
        eprintln!(
            "[{rep}/{reps}] (a) {} scalar PVs: ndflow_ca server, softioc calc, softioc ao",
            opts.pvs
        );
        let r = scalars::ndflow_server(ctx, &names)?;
        keep_best(&mut rows, r, &mut samples, rep);
        for mode in ["calc", "ao"] {
            let r = scalars::softioc(ctx, &names, mode)?;
            keep_best(&mut rows, r, &mut samples, rep);
        }
        eprintln!("[{rep}/{reps}] (b) 1024x1024 UInt16: raw TCP, ndflow_ca server -> pyepics");
        let r = frames::raw_tcp_to_rust(FRAME_BYTES, tcp_frames)?;
        keep_best(&mut rows, r, &mut samples, rep);
        let r = frames::raw_tcp_to_python(ctx, FRAME_BYTES, tcp_frames)?;
        keep_best(&mut rows, r, &mut samples, rep);
        let r = frames::ndflow_server(ctx)?;
        keep_best(&mut rows, r, &mut samples, rep);
        eprintln!(
            "[{rep}/{reps}] (b, c) IOC: pipeline alone, ArrayData -> pyepics, {} clients",
            opts.clients
        );
        for r in ioc::free_running_rows(ctx)? {
            keep_best(&mut rows, r, &mut samples, rep);
        }
        eprintln!(
            "[{rep}/{reps}] (d) IOC paced at AcquirePeriod {}: alone, {} clients",
            ioc::PACED_PERIOD,
            opts.clients
        );
        for r in ioc::paced_rows(ctx)? {
            keep_best(&mut rows, r, &mut samples, rep);
        }
    }
    let group_title = |g: &str| match g {
        "a" => format!(
            "(a) monitor updates/s, {} scalar PVs changing at full rate, one pyepics client",
            opts.pvs
        ),
        "b" => "(b) 1024x1024 UInt16 frames over CA to pyepics, vs raw loopback TCP".to_string(),
        "d" => format!(
            "(d) IOC pipeline rate paced at AcquirePeriod {} with CA clients",
            ioc::PACED_PERIOD
        ),
        _ => format!(
            "(c) IOC pipeline rate (sim 1024x1024 UInt16, AcquirePeriod {}) with CA clients",
            opts.acquire_period
        ),
    };
    let mut out = String::new();
    let mut json_rows = Vec::new();
    for g in ["a", "b", "c", "d"] {
        out.push_str(&format!("{}\n", group_title(g)));
        out.push_str(&format!(
            "  {:<52} {:>12} {:<10} {:>7} {:>8}\n",
            "path", "rate", "unit", "GB/s", "ratio"
        ));
        for r in rows.iter().filter(|r| r.group == g) {
            let reference = rows
                .iter()
                .find(|x| x.group == g && x.path == r.reference)
                .map_or(0.0, |x| {
                    if g == "b" {
                        x.gbps.unwrap_or(0.0)
                    } else {
                        x.rate
                    }
                });
            let mine = if g == "b" {
                r.gbps.unwrap_or(0.0)
            } else {
                r.rate
            };
            let ratio = if reference > 0.0 {
                mine / reference
            } else {
                0.0
            };
            let gb = r.gbps.map_or("-".to_string(), |v| format!("{v:.3}"));
            out.push_str(&format!(
                "  {:<52} {:>12.0} {:<10} {:>7} {:>7.2}x\n",
                r.path, r.rate, r.unit, gb, ratio
            ));
            out.push_str(&format!("      {}\n", r.note));
            json_rows.push(json!({
                "group": r.group, "path": r.path, "rate": r.rate, "unit": r.unit,
                "gbps": r.gbps, "ratio": ratio, "reference": r.reference, "note": r.note,
            }));
        }
    }
    out.push_str(&format!(
        "ratio: (a) vs softioc calc updates/s, (b) vs raw TCP -> Rust GB/s, (c, d) vs no-client pipeline frames/s; best of {reps}, {} s windows after {} s warm-up\n",
        opts.seconds, opts.warmup
    ));
    if let Some(p) = &opts.json {
        let doc = json!({
            "options": {
                "seconds": opts.seconds, "warmup": opts.warmup, "reps": reps, "pvs": opts.pvs,
                "clients": opts.clients, "acquire_period": opts.acquire_period,
            },
            "best": json_rows,
            "samples": samples,
        });
        let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
        std::fs::write(p, text).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    }
    Ok(out)
}
