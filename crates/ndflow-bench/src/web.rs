//! `ndflow bench web`: what the live web viewer costs the IOC, and what a browser shows.
//!
//! Every row runs an `ndflow run` IOC of this build (sim → STATS1 and WEB1, web server on a
//! free loopback port, no CA or pva server) and reads it through its own HTTP API:
//!
//! - **(a) pipeline rate with viewers**: the simulated detector free running (1024×1024
//!   UInt16, AcquirePeriod 0); frames/s completed by STATS1 (ArrayCounter_RBV over a window)
//!   with 0, 1 and 5 viewers attached. The **reference** is the 0-viewer window of the same
//!   repetition; windows are interleaved (the order of the viewer counts rotates per
//!   repetition) and the median per-repetition ratio is reported with its spread. Target ≥
//!   0.95×.
//! - **(b) IOC CPU per viewer**: the same IOC paced (AcquirePeriod 0.01, 100 frames/s; its
//!   pipeline rate with and without viewers is reported with (a) too); the
//!   IOC's CPU time (all its threads, `/proc/PID/task/*/schedstat`) per second with k viewers
//!   minus the 0-viewer figure of the same repetition, per viewer and per frame sent; and
//!   the same for 4096×4096 frames paced at 10 frames/s, binned 4×4 for the viewers (each
//!   viewer takes every frame, so they share one binning per frame).
//! - Viewers in (a) and (b) are WebSocket clients of `/ws/frames/WEB1` in this process, one
//!   thread each (at nice 19: they stand for browsers on other machines), that read every
//!   frame, check its header and acknowledge it (`ack`) as the
//!   page does; the port's MaxRate (30 frames/s per viewer) applies as it would to a browser.
//! - **(c) frames displayed in a browser**: `python/tools/bench_web.py` opens the page in
//!   headless Chromium (Playwright, Debian's `/usr/bin/chromium`, WebGL2 through SwiftShader)
//!   and counts, in a `requestAnimationFrame` loop, the animation frames in which a new image
//!   had been drawn; the **reference** is the number of animation frames per second in the
//!   same window (the most the page could display). 1024×1024 UInt16 (sent as is) and
//!   4096×4096 UInt16 (binned 4×4 on the server to 1024×1024), WEB1 MaxRate 0 (the browser
//!   is the limit).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ndflow_web::FrameHeader;
use nix::sys::signal::Signal;
use serde_json::{json, Value as Json};

use crate::host::{self, Proc};
use crate::paired::{format_ratio, median, relative_spread, Paired};

/// Options of `ndflow bench web`.
pub struct WebBenchOptions {
    pub json: Option<PathBuf>,
    /// Counting window of each (a)/(b) measurement (s).
    pub seconds: f64,
    /// Wait after the viewers connected, before counting (s).
    pub warmup: f64,
    /// Repetitions of (a) and (b).
    pub reps: usize,
    /// Viewer counts compared with 0.
    pub viewers: Vec<usize>,
    /// Seconds counted in the browser per (c) row; 0: no browser rows.
    pub browser_seconds: f64,
    /// Python with Playwright (default: .venv/bin/python).
    pub python: Option<PathBuf>,
}

/// Parses "1,5" into viewer counts (each 1..=64).
pub fn parse_viewers(s: &str) -> Result<Vec<usize>, String> {
    s.split(',')
        .map(|v| match v.trim().parse::<usize>() {
            Ok(n) if (1..=64).contains(&n) => Ok(n),
            _ => Err(format!(
                "bad --viewers entry '{v}': expected counts 1..64, e.g. 1,5"
            )),
        })
        .collect()
}

pub fn run(opts: &WebBenchOptions) -> Result<String, String> {
    let ok = |v: f64| v.is_finite() && v >= 0.0;
    if !(opts.seconds > 0.0 && ok(opts.seconds) && ok(opts.warmup) && ok(opts.browser_seconds)) {
        return Err("--seconds must be > 0, --warmup and --browser-seconds >= 0".into());
    }
    if opts.viewers.is_empty() {
        return Err("--viewers needs at least one count".into());
    }
    let browser = if opts.browser_seconds > 0.0 {
        Some(check_browser(opts)?)
    } else {
        None
    };
    let dir = std::env::temp_dir().join(format!("ndflow-bench-web-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let result = run_all(opts, &dir, browser.as_ref());
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// The Python and the script of (c), or why they cannot run.
fn check_browser(opts: &WebBenchOptions) -> Result<(PathBuf, PathBuf), String> {
    let python = opts.python.clone().unwrap_or_else(host::venv_python);
    if !python.exists() {
        return Err(format!(
            "{} not found: (c) needs the repository's .venv with Playwright (scripts/setup.sh); \
             --browser-seconds 0 runs (a) and (b) alone",
            python.display()
        ));
    }
    if !Path::new(CHROMIUM).exists() {
        return Err(format!(
            "{CHROMIUM} not found: (c) drives Debian's chromium (apt install chromium); \
             --browser-seconds 0 runs (a) and (b) alone"
        ));
    }
    let script = host::repo_path("python/tools/bench_web.py");
    if !script.exists() {
        return Err(format!("{} not found", script.display()));
    }
    Ok((python, script))
}

const CHROMIUM: &str = "/usr/bin/chromium";

fn run_all(
    opts: &WebBenchOptions,
    dir: &Path,
    browser: Option<&(PathBuf, PathBuf)>,
) -> Result<String, String> {
    let mut counts = vec![0];
    counts.extend(opts.viewers.iter().copied().filter(|&k| k > 0));
    counts.dedup();
    let reps = opts.reps.max(1);

    // (a) free running.
    eprintln!("(a) free-running 1024x1024 UInt16: STATS1 frames/s with {counts:?} viewers");
    let mut ioc = Ioc::start(dir, "a", 1024, 1024, 0.0, 30.0)?;
    let a = windows(opts, &mut ioc, &counts, reps)?;
    drop(ioc);
    // (b) paced.
    eprintln!("(b) paced at 100 frames/s: IOC CPU with {counts:?} viewers");
    let mut ioc = Ioc::start(dir, "b", 1024, 1024, PACED_PERIOD, 30.0)?;
    let b = windows(opts, &mut ioc, &counts, reps)?;
    drop(ioc);
    // (b) binned: every viewer takes every frame, so they share one binning per frame.
    eprintln!("(b) 4096x4096 paced at 10 frames/s, binned 4x4: IOC CPU with {counts:?} viewers");
    let mut ioc = Ioc::start(dir, "b4096", 4096, 4096, BINNED_PERIOD, 30.0)?;
    let b4096 = windows(opts, &mut ioc, &counts, reps)?;
    drop(ioc);

    let mut out = String::new();
    let mut rows_json = Vec::new();
    out.push_str(
        "(a) pipeline rate, sim 1024x1024 UInt16 free running -> STATS1 + WEB1 (MaxRate 30)\n",
    );
    out.push_str(&format!(
        "  {:<10} {:>12} {:>12} {:>16} {:>14}\n",
        "viewers", "frames/s", "0 viewers", "ratio", "frames/viewer/s"
    ));
    for &k in &counts[1..] {
        let p = paired(&a, k, |w| w.rate);
        let per_viewer = median(&per(&a, k, |w| w.received / w.secs / k as f64));
        out.push_str(&format!(
            "  {k:<10} {:>12.0} {:>12.0} {:>16} {:>14.1}\n",
            p.ours_median(),
            p.reference_median(),
            p.ratio_text(),
            per_viewer
        ));
        rows_json.push(json!({"row": "a", "viewers": k, "paired": p.to_json(),
                              "frames_per_viewer_s": per_viewer}));
    }
    // The same question at a detector's pace (the usual case: the detector, not the CPU,
    // sets the rate): (b)'s windows, whose rate is also counted.
    out.push_str(&format!(
        "(a) pipeline rate, sim paced at {:.0} frames/s (1024x1024 UInt16) -> STATS1 + WEB1 (MaxRate 30)\n",
        1.0 / PACED_PERIOD
    ));
    for &k in &counts[1..] {
        let p = paired(&b, k, |w| w.rate);
        out.push_str(&format!(
            "  {k:<10} {:>12.1} {:>12.1} {:>16}\n",
            p.ours_median(),
            p.reference_median(),
            p.ratio_text()
        ));
        rows_json.push(json!({"row": "a_paced", "viewers": k, "paired": p.to_json()}));
    }
    out.push_str(&format!(
        "  target >= 0.95x the 0-viewer rate of the same repetition; {reps} repetitions of {} s\n",
        opts.seconds
    ));

    cpu_table(
        &mut out,
        &mut rows_json,
        "b",
        &format!(
            "(b) IOC CPU, sim paced at {:.0} frames/s (1024x1024 UInt16, sent as is) -> STATS1 + WEB1 (MaxRate 30)",
            1.0 / PACED_PERIOD
        ),
        &b,
        &counts,
    );
    cpu_table(
        &mut out,
        &mut rows_json,
        "b4096",
        &format!(
            "(b) IOC CPU, sim paced at {:.0} frames/s (4096x4096 UInt16, binned 4x4 for the viewers) -> STATS1 + WEB1",
            1.0 / BINNED_PERIOD
        ),
        &b4096,
        &counts,
    );
    out.push_str("  per viewer: (CPU with k viewers - CPU with none, same repetition) / k\n");

    if let Some((python, script)) = browser {
        out.push_str(
            "(c) frames displayed by headless Chromium (requestAnimationFrame), WEB1 MaxRate 0\n",
        );
        out.push_str(&format!(
            "  {:<34} {:>10} {:>10} {:>10} {:>8} {:>10}\n",
            "frame", "displayed/s", "drawn/s", "rAF/s", "ratio", "sent as"
        ));
        for (side, period) in [(1024usize, 0.01f64), (4096, 0.02)] {
            eprintln!("(c) {side}x{side} UInt16 in headless Chromium");
            let ioc = Ioc::start(dir, &format!("c{side}"), side, side, period, 0.0)?;
            let r = browser_row(opts, python, script, &ioc)?;
            drop(ioc);
            let f = |k: &str| r.get(k).and_then(Json::as_f64).unwrap_or(f64::NAN);
            let (shown, raf) = (f("displayed_per_s"), f("raf_per_s"));
            let sent = format!(
                "{}x{} bin {}",
                f("width") as u64,
                f("height") as u64,
                f("bin") as u64
            );
            out.push_str(&format!(
                "  {:<34} {:>10.1} {:>10.1} {:>10.1} {:>8} {:>10}\n",
                format!("{side}x{side} UInt16, offered {:.0}/s", 1.0 / period),
                shown,
                f("drawn_per_s"),
                raf,
                format_ratio(shown / raf, 0.0),
                sent
            ));
            rows_json.push(json!({"row": "c", "side": side, "result": r}));
        }
        out.push_str("  ratio: frames displayed / animation frames in the same window\n");
    }
    if let Some(p) = &opts.json {
        let doc = json!({
            "options": {"seconds": opts.seconds, "warmup": opts.warmup, "reps": reps,
                        "viewers": counts, "browser_seconds": opts.browser_seconds},
            "rows": rows_json,
            "windows": {"a": a.iter().map(Window::to_json).collect::<Vec<_>>(),
                        "b": b.iter().map(Window::to_json).collect::<Vec<_>>(),
                        "b4096": b4096.iter().map(Window::to_json).collect::<Vec<_>>()},
        });
        let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
        std::fs::write(p, text + "\n").map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    }
    Ok(out)
}

/// AcquirePeriod of (b).
const PACED_PERIOD: f64 = 0.01;
/// AcquirePeriod of (b) at 4096x4096.
const BINNED_PERIOD: f64 = 0.1;

/// The IOC's CPU with k viewers against none, per viewer and per frame sent.
fn cpu_table(
    out: &mut String,
    rows_json: &mut Vec<Json>,
    row: &str,
    title: &str,
    b: &[Window],
    counts: &[usize],
) {
    out.push_str(title);
    out.push('\n');
    out.push_str(&format!(
        "  {:<10} {:>14} {:>14} {:>18} {:>16} {:>10}\n",
        "viewers", "IOC CPU ms/s", "0 viewers", "ms/s per viewer", "ms per frame sent", "spread"
    ));
    for &k in &counts[1..] {
        let extra: Vec<f64> = per_pair(b, k, |w, w0| (w.cpu_ms_per_s - w0.cpu_ms_per_s) / k as f64);
        let per_frame: Vec<f64> = per_pair(b, k, |w, w0| {
            let sent = w.received / w.secs;
            if sent > 0.0 {
                (w.cpu_ms_per_s - w0.cpu_ms_per_s) / sent
            } else {
                f64::NAN
            }
        });
        let cpu_k = median(&per(b, k, |w| w.cpu_ms_per_s));
        let cpu_0 = median(&per(b, 0, |w| w.cpu_ms_per_s));
        let spread = relative_spread(&extra);
        out.push_str(&format!(
            "  {k:<10} {cpu_k:>14.1} {cpu_0:>14.1} {:>18.2} {:>16.3} {:>9.0}%\n",
            median(&extra),
            median(&per_frame),
            spread * 100.0
        ));
        rows_json.push(json!({"row": row, "viewers": k, "cpu_ms_per_s": cpu_k,
            "cpu_ms_per_s_no_viewer": cpu_0, "cpu_ms_per_s_per_viewer": extra,
            "cpu_ms_per_frame_sent": per_frame}));
    }
}

/// One counting window: `viewers` connected, repetition `rep`.
#[derive(Clone, Debug)]
struct Window {
    rep: usize,
    viewers: usize,
    secs: f64,
    /// STATS1 frames/s.
    rate: f64,
    /// Driver frames/s.
    driver_rate: f64,
    /// IOC CPU, ms per s of wall time.
    cpu_ms_per_s: f64,
    /// Frames all viewers received in the window.
    received: f64,
}

impl Window {
    fn to_json(&self) -> Json {
        json!({"rep": self.rep, "viewers": self.viewers, "secs": self.secs, "rate": self.rate,
               "driver_rate": self.driver_rate, "cpu_ms_per_s": self.cpu_ms_per_s,
               "received": self.received})
    }
}

fn per(ws: &[Window], k: usize, f: impl Fn(&Window) -> f64) -> Vec<f64> {
    ws.iter().filter(|w| w.viewers == k).map(f).collect()
}

/// `f(window with k viewers, 0-viewer window)` per repetition.
fn per_pair(ws: &[Window], k: usize, f: impl Fn(&Window, &Window) -> f64) -> Vec<f64> {
    ws.iter()
        .filter(|w| w.viewers == k)
        .filter_map(|w| {
            ws.iter()
                .find(|z| z.viewers == 0 && z.rep == w.rep)
                .map(|z| f(w, z))
        })
        .collect()
}

fn paired(ws: &[Window], k: usize, f: impl Fn(&Window) -> f64) -> Paired {
    let mut p = Paired::default();
    for w in ws.iter().filter(|w| w.viewers == k) {
        if let Some(z) = ws.iter().find(|z| z.viewers == 0 && z.rep == w.rep) {
            p.push(f(w), f(z));
        }
    }
    p
}

/// Every viewer count once per repetition, the order rotating.
fn windows(
    opts: &WebBenchOptions,
    ioc: &mut Ioc,
    counts: &[usize],
    reps: usize,
) -> Result<Vec<Window>, String> {
    // The pipeline settles (pool filled, queues at their level) before the first window.
    std::thread::sleep(Duration::from_secs_f64(opts.warmup.max(1.0)));
    let mut out = Vec::new();
    for rep in 0..reps {
        for i in 0..counts.len() {
            let k = counts[(i + rep) % counts.len()];
            let viewers = (0..k)
                .map(|_| Viewer::connect(ioc.addr, "WEB1"))
                .collect::<Result<Vec<_>, _>>()?;
            std::thread::sleep(Duration::from_secs_f64(opts.warmup));
            let (c0, d0, cpu0, t0) = (
                ioc.counter("STATS1:ArrayCounter_RBV")?,
                ioc.counter("cam1:ArrayCounter_RBV")?,
                ioc.cpu_seconds(),
                Instant::now(),
            );
            let r0: u64 = viewers.iter().map(Viewer::frames).sum();
            std::thread::sleep(Duration::from_secs_f64(opts.seconds));
            let (c1, d1, cpu1, secs) = (
                ioc.counter("STATS1:ArrayCounter_RBV")?,
                ioc.counter("cam1:ArrayCounter_RBV")?,
                ioc.cpu_seconds(),
                t0.elapsed().as_secs_f64(),
            );
            let r1: u64 = viewers.iter().map(Viewer::frames).sum();
            for v in viewers {
                v.close()?;
            }
            let w = Window {
                rep,
                viewers: k,
                secs,
                rate: (c1 - c0) / secs,
                driver_rate: (d1 - d0) / secs,
                cpu_ms_per_s: 1e3 * (cpu1 - cpu0) / secs,
                received: (r1 - r0) as f64,
            };
            eprintln!(
                "  rep {} viewers {k}: STATS1 {:.0}/s, driver {:.0}/s, IOC CPU {:.0} ms/s, viewers got {:.1} frames/s each",
                rep + 1,
                w.rate,
                w.driver_rate,
                w.cpu_ms_per_s,
                if k > 0 { w.received / secs / k as f64 } else { 0.0 }
            );
            ioc.proc_check()?;
            out.push(w);
        }
    }
    Ok(out)
}

/// Runs the browser helper against `ioc` and returns its JSON result.
fn browser_row(
    opts: &WebBenchOptions,
    python: &Path,
    script: &Path,
    ioc: &Ioc,
) -> Result<Json, String> {
    let mut cmd = Command::new(python);
    cmd.arg(script)
        .arg("--url")
        .arg(format!("http://{}/", ioc.addr))
        .arg("--seconds")
        .arg(opts.browser_seconds.to_string())
        .arg("--warmup")
        .arg(opts.warmup.max(1.0).to_string())
        .arg("--chromium")
        .arg(CHROMIUM);
    host::loopback_env(&mut cmd);
    let log = ioc.dir.join("bench_web.log");
    let mut helper = Proc::piped("browser helper (bench_web.py)", cmd, Some(log))?;
    let timeout = Duration::from_secs_f64(90.0 + opts.browser_seconds + opts.warmup);
    let r = helper.json_line(timeout)?;
    helper.finish(Duration::from_secs(10));
    if let Some(e) = r.get("error") {
        return Err(format!("browser helper: {e}"));
    }
    Ok(r)
}

/// An `ndflow run` IOC of this build with the bench's pipeline and its web server.
struct Ioc {
    proc: Proc,
    pid: u32,
    addr: SocketAddr,
    prefix: String,
    dir: PathBuf,
}

impl Ioc {
    fn start(
        dir: &Path,
        tag: &str,
        w: usize,
        h: usize,
        period: f64,
        max_rate: f64,
    ) -> Result<Ioc, String> {
        let prefix = format!("BW{tag}:");
        let cfg = format!(
            r#"prefix = "{prefix}"
pva = false
ca = false

[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = {w}
MaxSizeY = {h}
DataType = "UInt16"
SimMode = "LinearRamp"
ImageMode = "Continuous"
AcquireTime = 0
AcquirePeriod = {period}
Acquire = 1

[[port]]
name = "STATS1"
type = "stats"
prefix = "STATS1:"
NDArrayPort = "SIM1"
ComputeStatistics = "Yes"

[[port]]
name = "WEB1"
type = "web"
prefix = "web1:"
NDArrayPort = "SIM1"
MaxRate = {max_rate}
"#
        );
        let cfg_path = dir.join(format!("web-{tag}.toml"));
        std::fs::write(&cfg_path, cfg)
            .map_err(|e| format!("cannot write {}: {e}", cfg_path.display()))?;
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
            l.local_addr().map_err(|e| e.to_string())?.port()
        };
        let mut cmd = Command::new(host::ndflow_exe()?);
        cmd.arg("run")
            .arg(&cfg_path)
            .arg("--quiet")
            .arg("--no-state")
            .arg("--web")
            .arg(port.to_string());
        host::loopback_env(&mut cmd);
        let log = dir.join(format!("ioc-{tag}.log"));
        let proc = Proc::logged("ndflow IOC", cmd, &log)?
            .stopped_by(Signal::SIGTERM, Duration::from_secs(10));
        let pid = proc.id();
        let mut ioc = Ioc {
            proc,
            pid,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            prefix,
            dir: dir.to_path_buf(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            ioc.proc.check()?;
            if ioc.counter("cam1:ArrayCounter_RBV").is_ok_and(|n| n > 2.0) {
                return Ok(ioc);
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "the IOC's web server did not answer with frames counted within 30 s\n{}",
                    ioc.proc.log_tail(20)
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn proc_check(&mut self) -> Result<(), String> {
        self.proc.check()
    }

    /// A numeric PV of the IOC (name after the prefix), through `/api/values`.
    fn counter(&self, name: &str) -> Result<f64, String> {
        let full = format!("{}{name}", self.prefix);
        let body = http_get(self.addr, &format!("/api/values?names={full}"))?;
        let v: Json = serde_json::from_str(&body)
            .map_err(|e| format!("/api/values answered {body:?}: {e}"))?;
        v.get(&full)
            .and_then(Json::as_f64)
            .ok_or_else(|| format!("{full}: no number in {body}"))
    }

    /// CPU time of all the IOC's threads (s).
    fn cpu_seconds(&self) -> f64 {
        process_cpu_of(self.pid)
    }
}

/// CPU time (s) of every thread of process `pid`: the first field of each thread's
/// `schedstat` (ns on a CPU), else utime + stime of `stat` (in clock ticks of 10 ms).
pub fn process_cpu_of(pid: u32) -> f64 {
    let tasks = format!("/proc/{pid}/task");
    if let Ok(rd) = std::fs::read_dir(&tasks) {
        let mut ns = 0u64;
        let mut any = false;
        for e in rd.flatten() {
            let p = e.path().join("schedstat");
            if let Some(v) = std::fs::read_to_string(p)
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
            {
                ns += v;
                any = true;
            }
        }
        if any {
            return ns as f64 * 1e-9;
        }
    }
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return f64::NAN;
    };
    // Fields after the command name (in parentheses, which may hold spaces).
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return f64::NAN;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    match (f.get(11), f.get(12)) {
        (Some(u), Some(s)) => match (u.parse::<f64>(), s.parse::<f64>()) {
            (Ok(u), Ok(s)) => (u + s) / 100.0,
            _ => f64::NAN,
        },
        _ => f64::NAN,
    }
}

/// GET `path` from the IOC's web server; the body of a 200 answer.
fn http_get(addr: SocketAddr, path: &str) -> Result<String, String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| format!("web server {addr}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| format!("web server {addr}: {e}"))?;
    let mut text = String::new();
    s.read_to_string(&mut text)
        .map_err(|e| format!("web server {addr}: {e}"))?;
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("web server {addr}: no HTTP answer"))?;
    if !head.starts_with("HTTP/1.1 200") {
        return Err(format!(
            "GET {path}: {}",
            head.lines().next().unwrap_or_default()
        ));
    }
    Ok(body.to_string())
}

/// A WebSocket viewer of `/ws/frames/{port}` on its own thread: reads each frame, checks its
/// header and acknowledges it, as the page does once it has drawn one.
pub struct Viewer {
    frames: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    socket: TcpStream,
    thread: JoinHandle<Result<(), String>>,
}

impl Viewer {
    pub fn connect(addr: SocketAddr, port: &str) -> Result<Viewer, String> {
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            .map_err(|e| format!("web server {addr}: {e}"))?;
        s.set_nodelay(true).map_err(|e| e.to_string())?;
        write!(
            s,
            "GET /ws/frames/{port} HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\n\
             Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
             Sec-WebSocket-Version: 13\r\n\r\n"
        )
        .map_err(|e| format!("web socket: {e}"))?;
        let mut reader = BufReader::new(s.try_clone().map_err(|e| e.to_string())?);
        let mut status = String::new();
        reader
            .read_line(&mut status)
            .map_err(|e| format!("web socket: {e}"))?;
        if !status.starts_with("HTTP/1.1 101") {
            return Err(format!("web socket /ws/frames/{port}: {}", status.trim()));
        }
        loop {
            let mut line = String::new();
            let n = reader
                .read_line(&mut line)
                .map_err(|e| format!("web socket: {e}"))?;
            if n == 0 || line == "\r\n" {
                break;
            }
        }
        let frames = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (f, st) = (Arc::clone(&frames), Arc::clone(&stop));
        let writer = s.try_clone().map_err(|e| e.to_string())?;
        let thread = std::thread::spawn(move || {
            stand_aside();
            let r = read_frames(reader, writer, &f);
            // An error after close() is the socket being shut down.
            if st.load(Ordering::Relaxed) {
                Ok(())
            } else {
                r
            }
        });
        Ok(Viewer {
            frames,
            stop,
            socket: s,
            thread,
        })
    }

    pub fn frames(&self) -> u64 {
        self.frames.load(Ordering::Relaxed)
    }

    /// Disconnects; an error if the viewer had failed before.
    pub fn close(self) -> Result<(), String> {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.socket.shutdown(std::net::Shutdown::Both);
        self.thread
            .join()
            .map_err(|_| "viewer thread panicked".to_string())?
    }
}

/// A viewer stands for a browser on another machine: on the IOC's host its thread takes only
/// CPU the IOC leaves (nice 19), so that (a) measures what serving viewers costs the IOC, not
/// what this process's stand-ins for remote browsers take from a 2-core host.
fn stand_aside() {
    if let Err(e) = ndflow_web::set_this_thread_nice(19) {
        eprintln!("bench web: a viewer thread keeps its priority: {e}");
    }
}

/// One client → server frame (masked, as RFC 6455 requires of clients).
fn client_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [0x3a, 0x91, 0x5c, 0x07];
    let mut f = vec![0x80 | opcode, 0x80 | payload.len().min(125) as u8];
    f.extend_from_slice(&mask);
    f.extend(
        payload
            .iter()
            .take(125)
            .enumerate()
            .map(|(i, b)| b ^ mask[i % 4]),
    );
    f
}

/// Reads server frames until the connection ends: each complete binary message must carry
/// a frame header; it is counted and acknowledged.
fn read_frames(
    mut r: BufReader<TcpStream>,
    mut w: TcpStream,
    count: &AtomicU64,
) -> Result<(), String> {
    let err = |e: std::io::Error| format!("web socket: {e}");
    let mut message = Vec::new();
    let mut kind = 0u8;
    loop {
        let mut h = [0u8; 2];
        if let Err(e) = r.read_exact(&mut h) {
            return if e.kind() == std::io::ErrorKind::UnexpectedEof {
                Ok(())
            } else {
                Err(err(e))
            };
        }
        let (fin, opcode, masked) = (h[0] & 0x80 != 0, h[0] & 0x0f, h[1] & 0x80 != 0);
        let len = match h[1] & 0x7f {
            126 => {
                let mut b = [0u8; 2];
                r.read_exact(&mut b).map_err(err)?;
                u16::from_be_bytes(b) as u64
            }
            127 => {
                let mut b = [0u8; 8];
                r.read_exact(&mut b).map_err(err)?;
                u64::from_be_bytes(b)
            }
            n => n as u64,
        };
        if masked || len > (1 << 31) {
            return Err(format!(
                "web socket: bad server frame (masked {masked}, {len} bytes)"
            ));
        }
        let start = message.len();
        message.resize(start + len as usize, 0);
        r.read_exact(&mut message[start..]).map_err(err)?;
        match opcode {
            // Text, binary, or a continuation of either: a message ends with FIN.
            0..=2 => {
                if opcode != 0 {
                    kind = opcode;
                }
                if fin {
                    if kind == 2 {
                        FrameHeader::decode(&message)
                            .map_err(|e| format!("web socket: not a frame: {e}"))?;
                        count.fetch_add(1, Ordering::Relaxed);
                        w.write_all(&client_frame(1, b"ack")).map_err(err)?;
                    }
                    message.clear();
                }
            }
            8 => return Ok(()),
            9 => {
                let ping = message.split_off(start);
                w.write_all(&client_frame(10, &ping)).map_err(err)?;
            }
            _ => {
                message.truncate(start);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn viewer_counts_parse_or_say_what_is_expected() {
        assert_eq!(parse_viewers("1,5"), Ok(vec![1, 5]));
        assert!(parse_viewers("0").is_err_and(|e| e.contains("1..64")));
        assert!(parse_viewers("x").is_err());
    }

    #[test]
    fn a_viewer_thread_stands_aside_and_no_other() {
        let nice = || {
            let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
            // Field 19 (nice), counted after the ")" that closes the thread's name.
            let rest = stat.rsplit_once(')').unwrap().1.to_string();
            rest.split_whitespace().nth(16).unwrap().to_string()
        };
        let before = nice();
        let inside = std::thread::spawn(move || {
            stand_aside();
            nice()
        })
        .join()
        .unwrap();
        assert_eq!(inside, "19");
        assert_eq!(nice(), before);
    }

    #[test]
    fn client_frames_are_masked() {
        let f = client_frame(1, b"ack");
        assert_eq!(&f[..2], &[0x81, 0x83]);
        let mask = &f[2..6];
        let text: Vec<u8> = f[6..]
            .iter()
            .zip(mask.iter().cycle())
            .map(|(b, m)| b ^ m)
            .collect();
        assert_eq!(text, b"ack");
    }

    #[test]
    fn own_cpu_time_is_read_from_proc() {
        let t = process_cpu_of(std::process::id());
        assert!(t.is_finite() && t > 0.0, "{t}");
    }
}
