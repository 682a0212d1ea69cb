//! `ndflow bench aravis`: the `aravis` driver (GenICam GigE Vision through Aravis 0.8)
//! receiving from Aravis' fake GigE camera, next to Aravis' own `arv-camera-test-0.8` receiving
//! from the same fake, in the same run.
//!
//! **Where.** Aravis and `arv-fake-gv-camera-0.8` talk on UDP port 3956 and Aravis broadcasts
//! to 255.255.255.255, so everything Aravis-related runs inside a network namespace that the
//! bench creates (`ip netns add`, only `lo` up) and deletes at the end: nothing can leave the
//! machine, and no camera is ever opened in the host's namespace. That needs root; without it
//! (or without `ip`, the fake or arv-camera-test) the bench prints SKIPPED and exits 0.
//!
//! **Runs.** Every run gets a fresh fake (`-i 127.0.0.1`, `-r N` on the lossy rows: N of every
//! thousand GVSP packets dropped, never resent), started in the namespace and killed by PID
//! after the run, since the fake keeps its settings between clients. Ours is this binary
//! re-run in the namespace (`ip netns exec NS ndflow bench aravis --child …`): a Graph built
//! from a one-port config (`type = "aravis"`, CameraId 127.0.0.1, NumBuffers 16, nothing
//! downstream, as arv-camera-test has no consumer either), ARConnectCamera awaited, then SizeX,
//! SizeY, MinX/MinY 0, PixelFormat, AcquirePeriod 0.001, ImageMode Continuous, ARPacketSize,
//! ARPacketResendEnable and Acquire 1; it prints one JSON line. The reference is
//! `stdbuf -oL arv-camera-test-0.8 -n 127.0.0.1 -w W -h H -f 1000 -i PACKETSIZE [-r]
//! [--features PixelFormat=Mono16]`, stopped with SIGINT, which makes it print its totals.
//! Both ask the fake for 1000 frames/s; the fake, sharing the machine's cores with the
//! receiver, is the limit, so a receiver that takes more CPU also gets fewer frames.
//!
//! **Figures.** One-second windows, the first dropped as warm-up. Ours samples ArrayCounter
//! and its process CPU time once a second from its first frame on; the reference's figures are
//! its own per-second "N frames/s" lines, with its process CPU time read as each line arrives
//! (its process CPU-time clock by PID, to the nanosecond like ours; /proc/PID/stat's utime +
//! stime, in clock ticks, only where that clock cannot be read). frames/s = frames in
//! the windows after the first / their duration; CPU ms/frame = the whole process's CPU time
//! over the same windows / those frames. Loss is counted over the whole run: ours from the
//! driver's counters read 1.5 s after Acquire = 0 (ARFramesCompleted, ARFrameFailures,
//! ARFrameUnderruns, ARMissingPackets, ARFrameIdGaps, ARFramesDiscarded, DroppedArrays,
//! ArrayCounter), theirs from n_completed_buffers, n_failures, n_missing_packets. "loss
//! counted" says whether ARFramesCompleted = ArrayCounter + DroppedArrays + ARFramesDiscarded
//! held in every run (no frame vanished uncounted). Each row runs `--pairs` pairs, which side
//! goes first alternating; ratios are medians of the per-pair ratios ± half their range
//! ([`crate::paired`]): frames/s ours/theirs, CPU per frame theirs/ours (> 1: ours cheaper).

use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::time::{Duration, Instant};

use ndflow::config::Config;
use ndflow_runtime::Graph;
use serde_json::{json, Value as Json};

use crate::host::{self, process_cpu_seconds, Proc};
use crate::paired::{median, Paired};

const FAKE: &str = "arv-fake-gv-camera-0.8";
const TEST: &str = "arv-camera-test-0.8";

pub struct AravisOptions {
    pub json: Option<PathBuf>,
    /// Interleaved pairs (ours, arv-camera-test) per row.
    pub pairs: usize,
    /// Seconds of acquisition per run, the first not counted.
    pub seconds: u64,
    /// Rows to run (1-based); empty: all.
    pub rows: Vec<usize>,
    /// Set inside the namespace: `ROW,SECONDS`, one run of ours.
    pub child: Option<String>,
}

struct Row {
    width: u32,
    height: u32,
    format: &'static str,
    packet: u32,
    /// The fake's `-r`: GVSP packets dropped per thousand; such rows run without resend.
    lost: u32,
}

const fn row(width: u32, height: u32, format: &'static str, packet: u32, lost: u32) -> Row {
    Row {
        width,
        height,
        format,
        packet,
        lost,
    }
}

const ROWS: [Row; 5] = [
    row(640, 480, "Mono8", 1400, 0),
    row(2048, 2048, "Mono8", 8000, 0),
    row(2048, 2048, "Mono16", 8000, 0),
    row(640, 480, "Mono8", 1400, 1),
    row(640, 480, "Mono8", 1400, 10),
];

impl Row {
    fn resend(&self) -> bool {
        self.lost == 0
    }
    fn name(&self) -> String {
        let (w, h, f, p) = (self.width, self.height, self.format, self.packet);
        let lossy = match self.lost {
            0 => String::new(),
            n => format!(", {n}/1000 lost, no resend"),
        };
        format!("{w}x{h} {f}, packets {p}{lossy}")
    }
}

/// A number of a run's JSON (NaN when absent).
fn f(j: &Json, k: &str) -> f64 {
    j[k].as_f64().unwrap_or(f64::NAN)
}

/// frames/s and CPU ms per frame from one-second samples `(s, frames so far, CPU s so far)`,
/// `[0]` the start: over `[1]..=[last]`, the first second left out.
fn window(samples: Vec<(f64, f64, f64)>) -> Json {
    let (a, b) = (
        samples[1.min(samples.len() - 1)],
        samples[samples.len() - 1],
    );
    let (secs, frames, cpu) = (b.0 - a.0, b.1 - a.1, b.2 - a.2);
    json!({
        "window_s": secs, "frames": frames, "cpu_s": cpu, "samples": samples,
        "fps": if secs > 0.0 { frames / secs } else { 0.0 },
        "cpu_ms_per_frame": if frames > 0.0 { 1e3 * cpu / frames } else { f64::NAN },
    })
}

fn merge(mut a: Json, b: Json) -> Json {
    if let (Json::Object(a), Json::Object(b)) = (&mut a, b) {
        a.extend(b);
    }
    a
}

// ---------------------------------------------------------------------------------------
// The namespace, the fake camera
// ---------------------------------------------------------------------------------------

fn cannot_run() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let uid = status.lines().find(|l| l.starts_with("Uid:"));
    if uid.and_then(|l| l.split_whitespace().nth(2)) != Some("0") {
        return Some("needs root to create a network namespace".into());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    ["ip", "stdbuf", FAKE, TEST]
        .into_iter()
        .find(|t| !std::env::split_paths(&path).any(|d| d.join(t).is_file()))
        .map(|t| format!("`{t}` not found (apt: iproute2, coreutils, aravis-tools)"))
}

/// A network namespace with only `lo` up, deleted on drop.
struct Netns(String);

impl Netns {
    fn create(name: &str) -> Result<Netns, String> {
        let ip = |args: &[&str]| match Command::new("ip").args(args).output() {
            Ok(o) if o.status.success() => Ok(()),
            Ok(o) => Err(format!(
                "`ip {}`: {}",
                args.join(" "),
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            Err(e) => Err(format!("cannot run ip: {e}")),
        };
        ip(&["netns", "add", name])?;
        let ns = Netns(name.to_string());
        ip(&["-n", name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    fn exec(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.0]).arg(program);
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// A process of ours, killed by PID and reaped when dropped (`ip netns exec` execs the
/// program, so the child is the program itself).
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A fresh fake camera in `ns`, returned once it listens on 127.0.0.1:3956.
fn fake(ns: &Netns, lost: u32) -> Result<Killed, String> {
    let mut cmd = ns.exec(FAKE);
    cmd.args(["-i", "127.0.0.1"]);
    if lost > 0 {
        cmd.args(["-r", &lost.to_string()]);
    }
    let null = Stdio::null;
    let child = (cmd.stdin(null()).stdout(null()).stderr(null()).spawn())
        .map_err(|e| format!("cannot start {FAKE}: {e}"))?;
    let mut fake = Killed(child);
    let pid = fake.0.id();
    let t0 = Instant::now();
    loop {
        // Its own /proc entry once `ip` has exec'd it, showing the namespace's sockets.
        let read =
            |f: &str| std::fs::read_to_string(format!("/proc/{pid}/{f}")).unwrap_or_default();
        if read("comm").starts_with("arv-fake") && read("net/udp").contains("0100007F:0F74") {
            return Ok(fake);
        }
        if let Ok(Some(status)) = fake.0.try_wait() {
            return Err(format!("{FAKE} exited at start ({status})"));
        }
        if t0.elapsed() > Duration::from_secs(10) {
            return Err(format!("{FAKE} not listening on 127.0.0.1:3956 after 10 s"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

// ---------------------------------------------------------------------------------------
// Ours: the child inside the namespace
// ---------------------------------------------------------------------------------------

fn put(g: &Graph, k: &str, v: impl Into<ndflow_core::ParamValue>) -> Result<(), String> {
    g.put("CAM", k, v)
        .map(|_| ())
        .map_err(|e| format!("CAM.{k}: {e}"))
}

fn num(g: &Graph, k: &str) -> Result<f64, String> {
    let v = g.get("CAM", k).map_err(|e| format!("CAM.{k}: {e}"))?;
    v.as_f64()
        .ok_or_else(|| format!("CAM.{k} is not a number: {v:?}"))
}

fn status(g: &Graph) -> String {
    g.get("CAM", "StatusMessage")
        .map(|v| v.to_string())
        .unwrap_or_default()
}

/// Waits up to 15 s for `ok`, else an error naming `what` and StatusMessage.
fn wait(g: &Graph, what: &str, ok: impl Fn() -> Result<bool, String>) -> Result<(), String> {
    let t0 = Instant::now();
    while !ok()? {
        if t0.elapsed() > Duration::from_secs(15) {
            return Err(format!("{what} within 15 s: {}", status(g)));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// One run of ours (`ROW,SECONDS`), in the namespace, with the fake already there.
fn child(spec: &str) -> Result<Json, String> {
    let bad = || format!("bad --child '{spec}': expected ROW,SECONDS");
    let (i, secs) = spec.split_once(',').ok_or_else(bad)?;
    let r = (i.parse::<usize>().ok())
        .and_then(|i| ROWS.get(i.wrapping_sub(1)))
        .ok_or_else(bad)?;
    let seconds = secs.parse::<u64>().map_err(|_| bad())?.max(2);
    let text = "prefix = \"BENCH:\"\nthreads = 2\n\n[[port]]\nname = \"CAM\"\ntype = \"aravis\"\n\
                prefix = \"cam1:\"\nCameraId = \"127.0.0.1\"\nNumBuffers = 16\n";
    let cfg = Config::parse(text, "aravis bench").map_err(|e| e.to_string())?;
    let g = Graph::new(cfg.threads);
    let result = (|| {
        cfg.build(&g, &ndflow::pva::ImagePvs::default())
            .map_err(|e| e.to_string())?;
        wait(&g, "no camera", || Ok(num(&g, "ARConnectCamera")? == 1.0))?;
        let (w, h) = (i64::from(r.width), i64::from(r.height));
        for (k, v) in [("SizeX", w), ("SizeY", h), ("MinX", 0), ("MinY", 0)] {
            put(&g, k, v)?;
        }
        put(&g, "PixelFormat", r.format)?;
        put(&g, "AcquirePeriod", 0.001)?;
        put(&g, "ImageMode", "Continuous")?;
        put(&g, "ARPacketSize", i64::from(r.packet))?;
        let resend = if r.resend() { "Always" } else { "Never" };
        put(&g, "ARPacketResendEnable", resend)?;
        let drv = g.driver("CAM").ok_or("no driver port CAM")?;
        put(&g, "Acquire", 1)?;
        wait(&g, "no frame", || Ok(drv.array_counter() >= 1))?;
        let t0 = Instant::now();
        let sample = || {
            let t = t0.elapsed().as_secs_f64();
            (t, drv.array_counter() as f64, process_cpu_seconds())
        };
        let mut samples = vec![sample()];
        for k in 1..=seconds {
            let at = t0 + Duration::from_secs(k);
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
            samples.push(sample());
        }
        put(&g, "Acquire", 0)?;
        std::thread::sleep(Duration::from_millis(1500));
        let c = |k| num(&g, k);
        let got = (c("ArraySizeX")?, c("ArraySizeY")?, c("DataType")?);
        let want_type = if r.format == "Mono16" { 3.0 } else { 1.0 };
        if got != (w as f64, h as f64, want_type) {
            let want = format!("{w}x{h} {}", r.format);
            return Err(format!("frames came {got:?} (x, y, DataType), not {want}"));
        }
        let (done, arrays) = (c("ARFramesCompleted")?, c("ArrayCounter")?);
        let (dropped, discarded) = (c("DroppedArrays")?, c("ARFramesDiscarded")?);
        Ok(merge(
            window(samples),
            json!({
                "completed": done, "array_counter": arrays, "dropped": dropped,
                "discarded": discarded, "failures": c("ARFrameFailures")?,
                "underruns": c("ARFrameUnderruns")?, "missing_packets": c("ARMissingPackets")?,
                "id_gaps": c("ARFrameIdGaps")?, "balanced": done == arrays + dropped + discarded,
                "status": status(&g),
            }),
        ))
    })();
    g.shutdown();
    result
}

/// One run of ours: this binary in the namespace with `--child`, next to a fresh fake.
fn ours(ns: &Netns, i: usize, seconds: u64, dir: &Path) -> Result<Json, String> {
    let _fake = fake(ns, ROWS[i].lost)?;
    let mut cmd = ns.exec(host::ndflow_exe()?);
    let args = format!("bench aravis --child {},{seconds}", i + 1);
    cmd.args(args.split(' '));
    let log = Some(dir.join("child.log"));
    let mut p = Proc::piped("ndflow bench aravis --child", cmd, log)?;
    let j = p.json_line(Duration::from_secs(seconds + 60))?;
    // The graph is shut down before the line is printed: the child is on its way out.
    p.finish(Duration::from_secs(15));
    Ok(j)
}

// ---------------------------------------------------------------------------------------
// The reference: arv-camera-test
// ---------------------------------------------------------------------------------------

/// Clock ticks per second of /proc/PID/stat: the kernel's AT_CLKTCK (17) in the auxiliary
/// vector, where libc's sysconf(_SC_CLK_TCK) reads it.
fn clock_ticks() -> Result<f64, String> {
    let auxv = std::fs::read("/proc/self/auxv").map_err(|e| format!("/proc/self/auxv: {e}"))?;
    let words: Vec<usize> = auxv
        .chunks_exact(std::mem::size_of::<usize>())
        .filter_map(|b| b.try_into().ok().map(usize::from_ne_bytes))
        .collect();
    (words.chunks_exact(2).find(|kv| kv[0] == 17))
        .map(|kv| kv[1] as f64)
        .filter(|t| *t > 0.0)
        .ok_or_else(|| "no AT_CLKTCK in /proc/self/auxv".into())
}

/// utime + stime of `pid` in ticks (NaN when unreadable).
fn cpu_ticks(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let v: Vec<f64> = after_name
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(f64::NAN))
        .collect();
    match v.get(11..13) {
        Some([utime, stime]) => utime + stime,
        _ => f64::NAN,
    }
}

/// CPU seconds of process `pid`, all its threads, to the nanosecond: its process CPU-time
/// clock (`(!pid << 3) | 2`, what clock_getcpuclockid gives), the clock ours reads of itself.
fn pid_cpu_clock(pid: u32) -> Option<f64> {
    let clock = nix::time::ClockId::from_raw((!i32::try_from(pid).ok()? << 3) | 2);
    let t = clock.now().ok()?;
    Some(t.tv_sec() as f64 + t.tv_nsec() as f64 * 1e-9)
}

/// [`pid_cpu_clock`], else /proc/PID/stat's utime + stime in `tck` ticks a second.
fn cpu_seconds(pid: u32, tck: f64) -> f64 {
    pid_cpu_clock(pid).unwrap_or_else(|| cpu_ticks(pid) / tck)
}

/// One run of arv-camera-test next to a fresh fake, stopped by SIGINT after `seconds` lines.
fn reference(ns: &Netns, r: &Row, seconds: u64, tck: f64, dir: &Path) -> Result<Json, String> {
    let _fake = fake(ns, r.lost)?;
    let mut cmd = ns.exec("stdbuf");
    let (w, h, p) = (r.width, r.height, r.packet);
    let args = format!("-oL {TEST} -n 127.0.0.1 -w {w} -h {h} -f 1000 -i {p}");
    cmd.args(args.split(' '));
    if !r.resend() {
        cmd.arg("-r");
    }
    if r.format != "Mono8" {
        cmd.args(["--features", &format!("PixelFormat={}", r.format)]);
    }
    let log = dir.join("reference.log");
    let err = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(err);
    let mut test = Killed(
        cmd.spawn()
            .map_err(|e| format!("cannot start {TEST}: {e}"))?,
    );
    let (pid, out) = (test.0.id(), test.0.stdout.take().ok_or("no stdout")?);
    let (tx, lines) = channel();
    let t0 = Instant::now();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            // When the line arrived, and the process's CPU then.
            let now = (t0.elapsed().as_secs_f64(), cpu_seconds(pid, tck));
            if tx.send((l, now.0, now.1)).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let fail = |seen: &[String], why: &str| {
        let err = std::fs::read_to_string(&log).unwrap_or_default();
        format!("{why}\n--- {TEST}:\n{}\n{}", seen.join("\n"), err.trim())
    };
    // [0] the start; the window runs from the first line, the end of the warm-up second.
    let (mut samples, mut frames) = (vec![(0.0, 0.0, f64::NAN)], 0.0);
    while samples.len() <= seconds as usize {
        let patience = Duration::from_secs(if samples.len() == 1 { 20 } else { 5 });
        let (l, t, cpu) = match lines.recv_timeout(patience) {
            Ok(x) => x,
            Err(RecvTimeoutError::Timeout) => return Err(fail(&seen, "no per-second line")),
            Err(RecvTimeoutError::Disconnected) => return Err(fail(&seen, "it exited")),
        };
        let per_second = l
            .split_once("frames/s")
            .map(|(n, _)| n.trim().parse::<f64>());
        if let Some(Ok(n)) = per_second {
            frames += n;
            samples.push((t, frames, cpu));
        }
        seen.push(l);
    }
    // It prints the camera's payload first: a setting the camera did not take shows there.
    let bytes = u64::from(r.width) * u64::from(r.height) * if r.format == "Mono16" { 2 } else { 1 };
    let want = format!("{bytes} bytes");
    if !(seen.iter()).any(|l| l.starts_with("payload") && l.ends_with(&want)) {
        return Err(fail(
            &seen,
            &format!("payload not {want}: a setting not taken"),
        ));
    }
    let clock = ["/proc stat", "process clock"][usize::from(pid_cpu_clock(pid).is_some())];
    let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).map_err(|_| "bad pid")?);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT)
        .map_err(|e| format!("SIGINT to {TEST}: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while let Ok((l, ..)) = lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        seen.push(l);
    }
    let total = |k: &str| {
        (seen.iter().filter_map(|l| l.split_once('=')))
            .find(|(name, _)| name.trim() == k)
            .and_then(|(_, v)| v.trim().parse::<f64>().ok())
            .ok_or_else(|| fail(&seen, &format!("no {k} after SIGINT")))
    };
    Ok(merge(
        window(samples),
        json!({
            "completed": total("n_completed_buffers")?, "failures": total("n_failures")?,
            "underruns": total("n_underruns")?, "missing_packets": total("n_missing_packets")?,
            "resent_packets": total("n_resent_packets")?,
            "cpu_clock": clock,
        }),
    ))
}

// ---------------------------------------------------------------------------------------
// The bench
// ---------------------------------------------------------------------------------------

struct RowRuns {
    row: usize,
    fps: Paired,
    /// Frames per CPU ms (larger is better): the ratio is theirs/ours of CPU per frame.
    cpu: Paired,
    ours: Vec<Json>,
    theirs: Vec<Json>,
    /// Why the reference was given up for this row (its first failure).
    reference_error: Option<String>,
}

fn loss_text(j: &Json) -> String {
    let (done, failed, missing) = (f(j, "completed"), f(j, "failures"), f(j, "missing_packets"));
    format!("{done} completed, {failed} failed, {missing} missing packets")
}

fn run_row(ns: &Netns, i: usize, opts: &AravisOptions, tck: f64, dir: &Path) -> RowRuns {
    let mut rr = RowRuns {
        row: i,
        fps: Paired::default(),
        cpu: Paired::default(),
        ours: Vec::new(),
        theirs: Vec::new(),
        reference_error: None,
    };
    let pairs = opts.pairs.max(1);
    let theirs = |rr: &mut RowRuns| {
        rr.reference_error.is_none().then(|| {
            reference(ns, &ROWS[i], opts.seconds, tck, dir)
                .map_err(|e| {
                    eprintln!("  {TEST} failed; no reference for this row: {e}");
                    rr.reference_error = e.lines().next().map(str::to_string);
                })
                .ok()
        })?
    };
    for pair in 1..=pairs {
        let (o, t) = if pair % 2 == 1 {
            let o = ours(ns, i, opts.seconds, dir);
            (o, theirs(&mut rr))
        } else {
            let t = theirs(&mut rr);
            (ours(ns, i, opts.seconds, dir), t)
        };
        let o = match o {
            Ok(o) => o,
            Err(e) => {
                eprintln!("  [{pair}/{pairs}] ours failed: {e}");
                continue;
            }
        };
        let balanced = o["balanced"].as_bool() == Some(true);
        eprintln!(
            "  [{pair}/{pairs}] ours {:.1} frames/s, {:.3} CPU ms/frame ({}; counters {})",
            f(&o, "fps"),
            f(&o, "cpu_ms_per_frame"),
            loss_text(&o),
            ["DO NOT BALANCE", "balance"][usize::from(balanced)],
        );
        if let Some(t) = t {
            eprintln!(
                "  [{pair}/{pairs}] {TEST} {:.1} frames/s, {:.3} CPU ms/frame ({}): {:.2}x",
                f(&t, "fps"),
                f(&t, "cpu_ms_per_frame"),
                loss_text(&t),
                f(&o, "fps") / f(&t, "fps"),
            );
            rr.fps.push(f(&o, "fps"), f(&t, "fps"));
            let per_ms = |j: &Json| 1.0 / f(j, "cpu_ms_per_frame");
            rr.cpu.push(per_ms(&o), per_ms(&t));
            rr.theirs.push(t);
        }
        rr.ours.push(o);
    }
    rr
}

pub fn run(opts: &AravisOptions) -> Result<String, String> {
    if let Some(spec) = &opts.child {
        return child(spec).map(|j| format!("{j}\n"));
    }
    let skipped = |why: &str| Ok(format!("SKIPPED: ndflow bench aravis: {why}\n"));
    if let Some(why) = cannot_run() {
        return skipped(&why);
    }
    let tck = clock_ticks()?;
    let ns = match Netns::create(&format!("ndflow-bench-arv-{}", std::process::id())) {
        Ok(ns) => ns,
        Err(e) => return skipped(&format!("no network namespace: {e}")),
    };
    let dir = std::env::temp_dir().join(format!("ndflow-bench-aravis-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let opts = AravisOptions {
        seconds: opts.seconds.max(2),
        pairs: opts.pairs.max(1),
        json: opts.json.clone(),
        rows: opts.rows.clone(),
        child: None,
    };
    let mut rows = Vec::new();
    for (i, r) in ROWS.iter().enumerate() {
        if opts.rows.is_empty() || opts.rows.contains(&(i + 1)) {
            let (name, pairs, secs) = (r.name(), opts.pairs, opts.seconds);
            eprintln!("[{}] {name} ({pairs} pairs, {secs} s per run)", i + 1);
            rows.push(run_row(&ns, i, &opts, tck, &dir));
        }
    }
    drop(ns);
    let _ = std::fs::remove_dir_all(&dir);
    report(&opts, &rows)
}

fn report(opts: &AravisOptions, rows: &[RowRuns]) -> Result<String, String> {
    let mut out = format!(
        "aravis driver vs {TEST}, both on a fresh {FAKE} per run (127.0.0.1 in a network \
         namespace), 1000 frames/s asked; {} pairs per row, {} s per run, the first second not \
         counted; figures: medians; ratios: median of the per-pair ratios ± half their range \
         (! = over ±10 %); CPU: the whole process; loss: summed over the row's runs\n\n\
         | row | frames/s | reference frames/s | ratio | CPU ms/frame | reference CPU ms/frame \
         | CPU ratio (ref/ours) | failed frames (%) / missing packets | reference failed (%) / \
         missing | loss counted |\n|---|---|---|---|---|---|---|---|---|---|\n",
        opts.pairs, opts.seconds
    );
    let mut json_rows = Vec::new();
    for rr in rows {
        let med = |v: &[Json], k| median(&v.iter().map(|j| f(j, k)).collect::<Vec<_>>());
        let loss = |v: &[Json]| {
            let sum = |k| v.iter().map(|j| f(j, k)).sum::<f64>();
            let (done, failed) = (sum("completed"), sum("failures"));
            let pct = 100.0 * failed / (done + failed).max(1.0);
            format!("{failed} ({pct:.2} %) / {}", sum("missing_packets"))
        };
        let reference = if rr.theirs.is_empty() {
            let why = rr.reference_error.as_deref().unwrap_or("no run");
            let dash = String::from("-");
            let failed = format!("{TEST} failed: {why}");
            [failed, dash.clone(), dash.clone(), dash.clone(), dash]
        } else {
            [
                format!("{:.1}", med(&rr.theirs, "fps")),
                rr.fps.ratio_text(),
                format!("{:.3}", med(&rr.theirs, "cpu_ms_per_frame")),
                rr.cpu.ratio_text(),
                loss(&rr.theirs),
            ]
        };
        let balanced = rr
            .ours
            .iter()
            .all(|j| j["balanced"].as_bool() == Some(true));
        let counted = match (rr.ours.is_empty(), balanced) {
            (true, _) => "-",
            (false, true) => "yes",
            (false, false) => "no",
        };
        let [ref_fps, ratio, ref_cpu, cpu_ratio, ref_loss] = &reference;
        let _ = writeln!(
            out,
            "| {} | {:.1} | {ref_fps} | {ratio} | {:.3} | {ref_cpu} | {cpu_ratio} | {} | \
             {ref_loss} | {counted} |",
            ROWS[rr.row].name(),
            med(&rr.ours, "fps"),
            med(&rr.ours, "cpu_ms_per_frame"),
            loss(&rr.ours),
        );
        let r = &ROWS[rr.row];
        json_rows.push(json!({
            "row": r.name(), "width": r.width, "height": r.height, "pixel_format": r.format,
            "packet_size": r.packet, "lost_per_mille": r.lost, "resend": r.resend(),
            "fps": rr.fps.to_json(), "frames_per_cpu_ms": rr.cpu.to_json(),
            "loss_counted": counted, "reference_error": rr.reference_error,
            "ours": rr.ours, "reference": rr.theirs,
        }));
    }
    if let Some(p) = &opts.json {
        let j = json!({"pairs": opts.pairs, "seconds": opts.seconds, "rows": json_rows});
        let text = serde_json::to_string_pretty(&j).map_err(|e| e.to_string())?;
        std::fs::write(p, text).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_leave_the_first_second_out() {
        let s = vec![
            (0.0, 0.0, 0.0),
            (1.0, 100.0, 0.5),
            (2.0, 300.0, 0.7),
            (3.0, 500.0, 0.9),
        ];
        let j = window(s);
        assert_eq!((f(&j, "frames"), f(&j, "fps")), (400.0, 200.0));
        assert!((f(&j, "cpu_ms_per_frame") - 1.0).abs() < 1e-9);
    }

    #[test]
    fn clock_ticks_and_a_process_cpu_are_read() {
        let tck = clock_ticks();
        assert!(matches!(tck, Ok(t) if t >= 1.0), "{tck:?}");
        assert!(cpu_ticks(std::process::id()) >= 0.0);
        assert!(cpu_ticks(u32::MAX).is_nan());
        // Our own clock read by PID agrees with CLOCK_PROCESS_CPUTIME_ID; a child's reads.
        let (a, b) = (process_cpu_seconds(), pid_cpu_clock(std::process::id()));
        assert!(b.is_some_and(|b| b >= a && b - a < 0.5), "{a} {b:?}");
        let Ok(mut sleeper) = Command::new("sleep").arg("5").spawn() else {
            return;
        };
        assert!(pid_cpu_clock(sleeper.id()).is_some_and(|t| t >= 0.0));
        let _ = sleeper.kill();
        let _ = sleeper.wait();
    }

    #[test]
    fn rows_are_named_and_a_bad_child_spec_is_refused() {
        assert_eq!(
            ROWS[4].name(),
            "640x480 Mono8, packets 1400, 10/1000 lost, no resend"
        );
        assert!(!ROWS[3].resend() && ROWS[2].resend());
        assert!(child("9,4").is_err_and(|e| e.contains("ROW,SECONDS")));
    }
}
