//! `ndflow bench scaleout`: many writer processes sharing one detector's frames, on this
//! machine.
//!
//! Each row runs the example set-up as separate processes — the head
//! (`examples/scaleout/head.toml`: simulator → Scatter → lossless pva ports) and N writers
//! (`examples/scaleout/writer.toml`: pvadriver → HDF5 file, SWMR) — and times the frames from
//! the put to `HEAD:cam1:Acquire` until every frame is in a writer's file (the writers'
//! NumCaptured_RBV). Then the writers close their files and `ndflow vds` joins them: the
//! frames it maps are the frames that arrived; the rest are reported lost.
//!
//! Modes: `loopback` (every process on 127.0.0.1, sharing the machine's cores) and, where the
//! bench runs as root, `netns` (head and writers in network namespaces of their own, each
//! writer on its own veth link rate-limited to `--rate`: separate hosts on their own links, as
//! far as one machine can show them). The baseline is one process writing the same frames
//! into one file without any network. Scaling efficiency = aggregate(N) / (N · aggregate(1))
//! of the same mode.
//!
//! The bench's own control client polls the PVs every 20 ms (in netns mode from inside the
//! head's namespace, where the head and every writer's control server are reachable).

mod netns;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use ndflow::pv_cmd::value_text;
use ndflow_io::hdf5::vds::{build_vds, VdsOptions};
use ndflow_pva::client::{Client, ClientConfig, PutValue};
use nix::sys::signal::Signal;
use serde_json::json;

use crate::host::{self, Proc};

const HEAD_TOML: &str = include_str!("../../../examples/scaleout/head.toml");
const WRITER_TOML: &str = include_str!("../../../examples/scaleout/writer.toml");
/// Writer servers and the head listen here inside their own namespaces.
const NS_PORT: u16 = 5075;
const POLL: Duration = Duration::from_millis(20);

pub struct ScaleoutOptions {
    pub writers: Vec<usize>,
    pub frames: usize,
    pub width: usize,
    pub height: usize,
    pub dir: Option<PathBuf>,
    /// tc rate of each writer's link in netns mode (e.g. "1gbit").
    pub rate: String,
    pub netns: bool,
    pub loopback: bool,
    pub json: Option<PathBuf>,
    /// Runs per row (interleaved: every row once, then again); the median counts.
    pub reps: usize,
}

/// "1,2,4" → [1, 2, 4].
pub fn parse_writers(s: &str) -> Result<Vec<usize>, String> {
    s.split(',')
        .map(|t| match t.trim().parse::<usize>() {
            Ok(n) if (1..=16).contains(&n) => Ok(n),
            _ => Err(format!(
                "bad --writers entry '{t}': expected 1..16 (e.g. 1,2,4)"
            )),
        })
        .collect()
}

/// The pvAccess side of one process: its server on `bind`:`tcp` (searches on UDP `udp`), its
/// client looking only at `name_servers`.
struct PvaPorts<'a> {
    bind: &'a str,
    tcp: u16,
    udp: u16,
    name_servers: Option<&'a str>,
}

/// `ndflow ARGS` in network namespace `netns` (or here), its output in `log`. Stopping it
/// (and dropping it) sends SIGINT: the IOC drains its queues and closes its files, which the
/// frame count after the row reads.
fn ndflow_process(
    netns: Option<&str>,
    args: &[String],
    pva: PvaPorts<'_>,
    log: &Path,
    what: &str,
) -> Result<Proc, String> {
    let exe = host::ndflow_exe()?;
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    cmd.args(args);
    host::loopback_env(&mut cmd);
    host::pva_ports_env(&mut cmd, pva.bind, pva.tcp, pva.udp, pva.name_servers);
    Ok(Proc::logged(what, cmd, log)?.stopped_by(Signal::SIGINT, Duration::from_secs(60)))
}

/// Waits until every `host:port` accepts a TCP connection (the processes' servers are up), so
/// the control client's first search reaches them all.
fn wait_listening(servers: &[String], timeout: Duration) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    for s in servers {
        let addr: std::net::SocketAddr = s.parse().map_err(|_| format!("bad address {s}"))?;
        loop {
            if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("nothing listens on {s} after {timeout:?}"));
            }
            std::thread::sleep(POLL);
        }
    }
    Ok(())
}

/// The control client: finds PVs only on `servers` (host:port each).
fn control_client(servers: &[String]) -> Result<Client, String> {
    let list = servers.join(" ");
    let cfg = ClientConfig::from_lookup(|k| match k {
        "EPICS_PVA_NAME_SERVERS" => Some(list.clone()),
        "EPICS_PVA_AUTO_ADDR_LIST" => Some("NO".into()),
        "EPICS_PVA_ADDR_LIST" => Some("127.0.0.1".into()),
        "EPICS_PVA_INTF_ADDR_LIST" => Some("127.0.0.1".into()),
        _ => None,
    })
    .map_err(|e| e.to_string())?;
    Client::new(cfg).map_err(|e| format!("control client: {e}"))
}

fn read(c: &Client, name: &str) -> Result<String, String> {
    let (d, v) = c
        .get(name, "", Duration::from_secs(5))
        .map_err(|e| format!("{name}: {e}"))?;
    Ok(value_text(&d, &v))
}

fn number(c: &Client, name: &str) -> Result<f64, String> {
    let t = read(c, name)?;
    t.parse::<f64>()
        .map_err(|_| format!("{name}: '{t}' is not a number"))
}

fn put(c: &Client, name: &str, v: PutValue) -> Result<(), String> {
    c.put(name, &[("value", v)], Duration::from_secs(10))
        .map_err(|e| format!("{name}: {e}"))
}

/// Polls until `ok(value)` or `timeout`.
fn wait(c: &Client, name: &str, timeout: f64, ok: impl Fn(&str) -> bool) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs_f64(timeout);
    let mut last = String::from("(not connected)");
    while Instant::now() < deadline {
        if let Ok(v) = read(c, name) {
            if ok(&v) {
                return Ok(());
            }
            last = v;
        }
        std::thread::sleep(POLL);
    }
    Err(format!("{name} still {last} after {timeout} s"))
}

/// What the control client saw in one row.
struct Measured {
    seconds: f64,
    /// Frames in each writer's file (NumCaptured_RBV), writer order.
    captured: Vec<u64>,
}

/// Puts 1 to `acquire` once every `subscribers` PV shows a subscriber, and waits until the `files` (PV prefixes of the
/// HDF5 ports) hold `frames` frames in all; then closes the files.
fn measure(
    c: &Client,
    acquire: &str,
    subscribers: &[String],
    files: &[String],
    frames: usize,
) -> Result<Measured, String> {
    for s in subscribers {
        wait(c, s, 30.0, |v| v.parse::<f64>().is_ok_and(|n| n >= 1.0))?;
    }
    let t0 = Instant::now();
    put(c, acquire, PutValue::Int(1))?;
    let deadline = t0 + Duration::from_secs(900);
    let (mut last_sum, mut last_change) = (0u64, Instant::now());
    let (seconds, captured) = loop {
        std::thread::sleep(POLL);
        let captured: Vec<u64> = files
            .iter()
            .map(|f| number(c, &format!("{f}NumCaptured_RBV")).map(|n| n as u64))
            .collect::<Result<_, _>>()?;
        let sum: u64 = captured.iter().sum();
        if sum >= frames as u64 {
            break (t0.elapsed().as_secs_f64(), captured);
        }
        if sum != last_sum {
            (last_sum, last_change) = (sum, Instant::now());
        }
        // Acquisition over and nothing arriving for 5 s: the rest is lost.
        let idle = read(c, &format!("{}_RBV", acquire)).is_ok_and(|v| v == "Done");
        if (idle && last_change.elapsed() > Duration::from_secs(5)) || Instant::now() > deadline {
            break (last_change.duration_since(t0).as_secs_f64(), captured);
        }
    };
    for f in files {
        put(c, &format!("{f}Capture"), PutValue::Int(0))?;
        wait(c, &format!("{f}Capture_RBV"), 60.0, |v| v == "Done")?;
    }
    Ok(Measured { seconds, captured })
}

#[derive(Clone)]
struct Row {
    mode: String,
    writers: usize,
    seconds: f64,
    captured: Vec<u64>,
    /// Frames `ndflow vds` found in the files.
    mapped: u64,
    frames: usize,
    frame_bytes: usize,
    /// Seconds of every run of this row (the row itself is the median run).
    runs: Vec<f64>,
}

impl Row {
    fn gbps(&self) -> f64 {
        self.mapped as f64 * self.frame_bytes as f64 / self.seconds / 1e9
    }
    fn lost(&self) -> u64 {
        (self.frames as u64).saturating_sub(self.mapped)
    }
}

/// `ndflow run CONFIG` of a process with a simulator (the head, the one-process baseline).
fn run_args(cfg: &Path, o: &ScaleoutOptions) -> Vec<String> {
    let mut args = vec![
        "run".to_string(),
        cfg.display().to_string(),
        "--quiet".into(),
        "--no-ca".into(),
    ];
    args.extend(sim_sets(o));
    args
}

fn sim_sets(o: &ScaleoutOptions) -> Vec<String> {
    [
        format!("SIM1.MaxSizeX={}", o.width),
        format!("SIM1.MaxSizeY={}", o.height),
        format!("SIM1.SizeX={}", o.width),
        format!("SIM1.SizeY={}", o.height),
        format!("SIM1.NumImages={}", o.frames),
    ]
    .into_iter()
    .flat_map(|s| ["--set".to_string(), s])
    .collect()
}

/// The head config: the example's, with a pva port per writer beyond its four.
fn head_config(writers: usize) -> String {
    let mut text = HEAD_TOML.to_string();
    for k in 5..=writers {
        let _ = write!(
            text,
            "\n[[port]]\nname = \"PVA{k}\"\ntype = \"pva\"\nprefix = \"Pva{k}:\"\nNDArrayPort = \"SCAT\"\nBlockingCallbacks = \"Yes\"\nLossless = \"Yes\"\n"
        );
    }
    text
}

fn one_process_config(o: &ScaleoutOptions, dir: &Path) -> String {
    format!(
        r#"prefix = "ONE:"
[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
DataType = "UInt16"
SimMode = "Peaks"
ImageMode = "Multiple"
NumImages = {frames}
AcquireTime = 0.0
AcquirePeriod = 0.0

[[port]]
name = "HDF1"
type = "hdf5"
prefix = "HDF1:"
NDArrayPort = "SIM1"
BlockingCallbacks = "Yes"
FilePath = "{dir}"
FileName = "one"
FileTemplate = "%s%s.h5"
AutoIncrement = "No"
FileWriteMode = "Stream"
NumCapture = 0
LazyOpen = "Yes"
SWMRMode = "On"
Capture = 1
"#,
        frames = o.frames,
        dir = dir.display()
    )
}

/// Counts the frames in `parts` through `ndflow vds` (master written beside them).
fn count_frames(dir: &Path, parts: &[PathBuf]) -> Result<u64, String> {
    let report = build_vds(&dir.join("master.h5"), parts, &VdsOptions::default())
        .map_err(|e| e.to_string())?;
    Ok(report.mapped)
}

fn one_process_row(o: &ScaleoutOptions, base: &Path) -> Result<Row, String> {
    let dir = base.join("one");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let cfg = dir.join("one.toml");
    std::fs::write(&cfg, one_process_config(o, &dir)).map_err(|e| e.to_string())?;
    let (tcp, udp) = host::free_ports(1)?;
    let (tcp, udp) = (tcp[0], udp[0]);
    let args = run_args(&cfg, o);
    let pva = PvaPorts {
        bind: "127.0.0.1",
        tcp,
        udp,
        name_servers: None,
    };
    let mut p = ndflow_process(None, &args, pva, &dir.join("one.log"), "one-process writer")?;
    let c = control_client(&[format!("127.0.0.1:{tcp}")])?;
    let m = measure(
        &c,
        "ONE:cam1:Acquire",
        &[],
        &["ONE:HDF1:".to_string()],
        o.frames,
    );
    let m = m.map_err(|e| p.check().err().unwrap_or(e))?;
    p.stop();
    let mapped = count_frames(&dir, &[dir.join("one.h5")])?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Row {
        mode: "one process, no network".into(),
        writers: 1,
        seconds: m.seconds,
        captured: m.captured,
        mapped,
        frames: o.frames,
        frame_bytes: o.width * o.height * 2,
        runs: Vec::new(),
    })
}

/// One head + `n` writers, on loopback or in namespaces.
fn scaleout_row(o: &ScaleoutOptions, base: &Path, n: usize, in_netns: bool) -> Result<Row, String> {
    let mode = if in_netns {
        format!("netns, {} links", o.rate)
    } else {
        "loopback".to_string()
    };
    let dir = base.join(format!(
        "{}-{n}",
        if in_netns { "netns" } else { "loopback" }
    ));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let tag = format!("ndso{}", std::process::id() % 100_000);
    // Namespaces are deleted when `ns` drops, after the processes (declared later) stop.
    let ns = if in_netns {
        Some(netns::Netns::create(&tag, n, &o.rate)?)
    } else {
        None
    };
    let head_cfg = dir.join("head.toml");
    std::fs::write(&head_cfg, head_config(n)).map_err(|e| e.to_string())?;
    let writer_cfg = dir.join("writer.toml");
    // In namespaces the bench's control client reaches the writers from the head's side of
    // their links, which is not loopback: let that address write.
    let writer_text = if in_netns {
        format!(
            "{WRITER_TOML}\n[[access]]\npvs = \"*\"\nhosts = [\"10.231.*\"]\nrights = \"write\"\n"
        )
    } else {
        WRITER_TOML.to_string()
    };
    std::fs::write(&writer_cfg, writer_text).map_err(|e| e.to_string())?;

    // Loopback: ports [0] for the head, [k] for writer k.
    let (tcps, udps) = host::free_ports(n + 1)?;
    let (head_tcp, head_udp, bind) = if in_netns {
        (NS_PORT, NS_PORT + 1, "0.0.0.0")
    } else {
        (tcps[0], udps[0], "127.0.0.1")
    };
    let mut procs = Vec::new();
    let mut control = vec![format!("127.0.0.1:{head_tcp}")];
    for k in 1..=n {
        let (tcp, udp, head_at, place) = match &ns {
            Some(ns) => (
                NS_PORT,
                NS_PORT + 1,
                format!("{}:{NS_PORT}", netns::Netns::head_addr(k)),
                Some(ns.writers[k - 1].clone()),
            ),
            None => (tcps[k], udps[k], format!("127.0.0.1:{head_tcp}"), None),
        };
        control.push(match &ns {
            Some(_) => format!("{}:{NS_PORT}", netns::Netns::writer_addr(k)),
            None => format!("127.0.0.1:{tcp}"),
        });
        let args: Vec<String> = [
            "run",
            &writer_cfg.display().to_string(),
            "--quiet",
            "--no-ca",
            "--prefix",
            &format!("W{k}:"),
            "--set",
            &format!("PVAD1.PvName=HEAD:Pva{k}:Image"),
            "--set",
            &format!("HDF1.FilePath={}", dir.display()),
            "--set",
            &format!("HDF1.FileName=w{k}"),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let pva = PvaPorts {
            bind,
            tcp,
            udp,
            name_servers: Some(&head_at),
        };
        procs.push(ndflow_process(
            place.as_deref(),
            &args,
            pva,
            &dir.join(format!("w{k}.log")),
            &format!("writer {k}"),
        )?);
    }
    let mut args = run_args(&head_cfg, o);
    for k in n + 1..=4 {
        args.extend(["--set".into(), format!("PVA{k}.EnableCallbacks=Disable")]);
    }
    let pva = PvaPorts {
        bind,
        tcp: head_tcp,
        udp: head_udp,
        name_servers: None,
    };
    procs.push(ndflow_process(
        ns.as_ref().map(|n| n.head.as_str()),
        &args,
        pva,
        &dir.join("head.log"),
        "head",
    )?);

    let subscribers: Vec<String> = (1..=n)
        .map(|k| format!("HEAD:Pva{k}:Subscribers_RBV"))
        .collect();
    let files: Vec<String> = (1..=n).map(|k| format!("W{k}:HDF1:")).collect();
    let frames = o.frames;
    let head_ns = ns.as_ref().map(|n| n.head.clone());
    // The control client runs in the head's namespace (netns) on a thread of its own.
    let m = std::thread::spawn(move || -> Result<Measured, String> {
        if let Some(h) = &head_ns {
            netns::enter(h)?;
        }
        wait_listening(&control, Duration::from_secs(30))?;
        let c = control_client(&control)?;
        measure(&c, "HEAD:cam1:Acquire", &subscribers, &files, frames)
    })
    .join()
    .map_err(|_| "the control thread panicked".to_string())?;
    let m = match m {
        Ok(m) => m,
        Err(e) => {
            let why = procs.iter_mut().find_map(|p| p.check().err());
            let logs: String = procs.iter().map(|p| p.log_tail(15) + "\n").collect();
            return Err(format!(
                "{}\n{logs}",
                why.map_or(e.clone(), |w| format!("{e}\n{w}"))
            ));
        }
    };
    for p in &mut procs {
        p.stop();
    }
    drop(procs);
    drop(ns);
    let parts: Vec<PathBuf> = (1..=n).map(|k| dir.join(format!("w{k}.h5"))).collect();
    let mapped = count_frames(&dir, &parts)?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Row {
        mode,
        writers: n,
        seconds: m.seconds,
        captured: m.captured,
        mapped,
        frames: o.frames,
        frame_bytes: o.width * o.height * 2,
        runs: Vec::new(),
    })
}

/// "±x %": half the range of the runs' seconds over the median ("-" for one run).
fn spread(runs: &[f64], median: f64) -> String {
    let (lo, hi) = runs
        .iter()
        .fold((f64::MAX, f64::MIN), |(l, h), &x| (l.min(x), h.max(x)));
    if runs.len() < 2 || median <= 0.0 {
        "-".into()
    } else {
        format!("±{:.0}%", (hi - lo) / 2.0 / median * 100.0)
    }
}

pub fn run(o: &ScaleoutOptions) -> Result<String, String> {
    let base = match &o.dir {
        Some(d) => d.clone(),
        None if Path::new("/dev/shm").is_dir() => PathBuf::from("/dev/shm"),
        None => std::env::temp_dir(),
    }
    .join(format!("ndflow-scaleout-{}", std::process::id()));
    std::fs::create_dir_all(&base).map_err(|e| format!("{}: {e}", base.display()))?;
    let result = run_rows(o, &base);
    let _ = std::fs::remove_dir_all(&base);
    result
}

fn run_rows(o: &ScaleoutOptions, base: &Path) -> Result<String, String> {
    let frame_mb = o.width as f64 * o.height as f64 * 2.0 / 1e6;
    let mut out = format!(
        "scale-out: {} frames of {}x{} UInt16 ({frame_mb:.2} MB), HDF5 with SWMR into {}\n",
        o.frames,
        o.width,
        o.height,
        base.display()
    );
    let mut modes = Vec::new();
    if o.loopback {
        modes.push(false);
    }
    if o.netns {
        match netns::available() {
            Ok(()) => modes.push(true),
            Err(why) => {
                let _ = writeln!(
                    out,
                    "netns rows skipped: {why} (they need root and `ip netns`)"
                );
            }
        }
    }
    // (None = the one-process baseline, Some((netns, writers))).
    let mut plan: Vec<Option<(bool, usize)>> = vec![None];
    for &in_netns in &modes {
        plan.extend(o.writers.iter().map(|&n| Some((in_netns, n))));
    }
    let mut runs: Vec<Vec<Row>> = vec![Vec::new(); plan.len()];
    for rep in 1..=o.reps.max(1) {
        for (i, what) in plan.iter().enumerate() {
            let row = match *what {
                None => {
                    eprintln!("[scaleout] run {rep}: one process, no network ...");
                    one_process_row(o, base)?
                }
                Some((in_netns, n)) => {
                    let m = if in_netns { "netns" } else { "loopback" };
                    eprintln!("[scaleout] run {rep}: {m} with {n} writer(s) ...");
                    scaleout_row(o, base, n, in_netns)?
                }
            };
            runs[i].push(row);
        }
    }
    let rows: Vec<Row> = runs
        .into_iter()
        .map(|mut r| {
            let secs: Vec<f64> = r.iter().map(|x| x.seconds).collect();
            r.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
            let mut median = r.swap_remove(r.len() / 2);
            median.runs = secs;
            median
        })
        .collect();
    let baseline = rows[0].gbps();
    let _ = writeln!(
        out,
        "{:<26} {:>7} {:>8} {:>7} {:>9} {:>7} {:>10} {:>6}  per writer GB/s",
        "path", "writers", "seconds", "spread", "agg GB/s", "lost", "efficiency", "x one"
    );
    let mut json_rows = Vec::new();
    for r in &rows {
        let one = rows
            .iter()
            .find(|x| x.mode == r.mode && x.writers == 1)
            .map(Row::gbps);
        let eff = one.map(|g1| r.gbps() / (r.writers as f64 * g1));
        let per: Vec<f64> = r
            .captured
            .iter()
            .map(|&c| c as f64 * r.frame_bytes as f64 / r.seconds / 1e9)
            .collect();
        let _ = writeln!(
            out,
            "{:<26} {:>7} {:>8.2} {:>7} {:>9.3} {:>7} {:>10} {:>5.2}x  {}",
            r.mode,
            r.writers,
            r.seconds,
            spread(&r.runs, r.seconds),
            r.gbps(),
            r.lost(),
            eff.map_or("-".into(), |e| format!("{e:.2}")),
            r.gbps() / baseline,
            per.iter()
                .map(|g| format!("{g:.3}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        json_rows.push(json!({
            "mode": r.mode, "writers": r.writers, "seconds": r.seconds,
            "frames": r.frames, "mapped": r.mapped, "lost": r.lost(),
            "aggregate_gbps": r.gbps(), "per_writer_gbps": per, "run_seconds": r.runs,
            "efficiency": eff, "vs_one_process": r.gbps() / baseline,
        }));
    }
    if let Some(p) = &o.json {
        let doc = json!({
            "frames": o.frames, "width": o.width, "height": o.height, "rate": o.rate,
            "rows": json_rows,
        });
        std::fs::write(
            p,
            serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n",
        )
        .map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(out)
}
