//! `ndflow bench pva`: NTNDArray throughput over loopback on this host, next to p4p (pvxs) and
//! raw TCP.
//!
//! For each frame size, four paths measured in the same run:
//! - raw loopback TCP (one socket, the frame bytes written back to back): the ceiling;
//! - ndflow server → ndflow client (lossless: pipelined monitor, the poster waits for acks);
//! - ndflow server → p4p client (p4p asks `pipeline=true`, so lossless applies too);
//! - p4p server → p4p client (pvxs on both ends: the reference; p4p's server squashes what a
//!   slow client misses, so its loss is reported, not prevented).
//!
//! GB/s counts pixel bytes delivered, first to last frame at the receiver. Every run of a path
//! is paired with a raw TCP run next to it; the "vs TCP" figure is the median of those per-pair
//! ratios with their spread ([`crate::paired::Paired`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ndflow::pva::plugin::PvaPlugin;
use ndflow::pva::ImagePvs;

use ndflow_pva::client::{Client, ClientConfig, MonitorEvent, MonitorOptions};
use ndflow_pva::nt::ntndarray::{Dimension, NtNdArray, TimeStamp};
use ndflow_pva::server::{Server, ServerConfig};
use ndflow_pva::{BitSet, ByteOrder, NumArray, SharedBytes};
use serde_json::{json, Value as Json};

use crate::host::{self, Proc};
use crate::paired::{median, relative_spread, Paired};

pub struct PvaBenchOptions {
    /// (width, height, frames) per row.
    pub sizes: Vec<(usize, usize, usize)>,
    pub python: PathBuf,
    pub json: Option<PathBuf>,
    /// Interleaved repetitions of every path, each next to its own raw TCP run.
    pub reps: usize,
    /// Repetitions that also run the p4p paths (the first ones; 0 = none). They take ~6 s
    /// each (Python start-up, p4p's own pace), ndflow -> ndflow ~1 s.
    pub p4p_reps: usize,
    /// Frames every path receives before its clock starts (at least 1): a connection's
    /// start-up (first touch of its receive buffers, and more) is paid once, not per frame.
    pub warm: usize,
}

#[derive(Clone, Debug)]
struct Row {
    path: &'static str,
    frame: String,
    frames: u64,
    lost: u64,
    seconds: f64,
    bytes: u64,
}

impl Row {
    fn gbps(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes as f64 / self.seconds / 1e9
        } else {
            0.0
        }
    }
    fn fps(&self) -> f64 {
        if self.seconds > 0.0 {
            self.frames as f64 / self.seconds
        } else {
            0.0
        }
    }
}

/// Raw loopback TCP with the frames of a row; timed like every path, after `warm` frames.
fn raw_tcp(bytes: usize, frames: usize, warm: usize, label: &str) -> Result<Row, String> {
    let seconds = host::raw_tcp(bytes, frames, warm)?;
    Ok(Row {
        path: "raw loopback TCP",
        frame: label.into(),
        frames: (frames - warm) as u64,
        lost: 0,
        seconds,
        bytes: (bytes * (frames - warm)) as u64,
    })
}

fn frame_value(
    pixels: &SharedBytes,
    w: usize,
    h: usize,
    uid: i32,
) -> Result<ndflow_pva::Value, String> {
    let value = NumArray::from_shared(
        ndflow_pva::ScalarType::U16,
        ByteOrder::NATIVE,
        pixels.clone(),
    )
    .ok_or("bad pixel buffer")?;
    let dim = |n: usize| Dimension {
        size: n as i32,
        offset: 0,
        full_size: n as i32,
        binning: 1,
        reverse: false,
    };
    Ok(NtNdArray {
        value: Some(value),
        codec_name: String::new(),
        codec_parameters: Some(6),
        compressed_size: pixels.len() as i64,
        uncompressed_size: pixels.len() as i64,
        dimension: vec![dim(w), dim(h)],
        unique_id: uid,
        data_time_stamp: TimeStamp::default(),
        attribute: Vec::new(),
        alarm: (0, 0, String::new()),
        time_stamp: TimeStamp::default(),
    }
    .to_value())
}

fn pixels(w: usize, h: usize) -> SharedBytes {
    let v: Vec<u8> = (0..w * h)
        .flat_map(|i| ((i % 65521) as u16).to_ne_bytes())
        .collect();
    SharedBytes::from(v)
}

/// An ndflow server with one lossless NTNDArray PV; returns (server, pv, udp port).
fn ndflow_server(name: &str) -> Result<(Server, ndflow_pva::server::SharedPv, u16), String> {
    let dir = Arc::new(ImagePvs::default());
    let pv = PvaPlugin::new_pv();
    pv.set_lossless(true);
    dir.add(name.to_string(), pv.clone())?;
    let server =
        Server::start(ServerConfig::loopback_ephemeral(), dir).map_err(|e| e.to_string())?;
    let udp = server.udp_addr().port();
    Ok((server, pv, udp))
}

/// Posts `frames` frames once a subscriber is there (lossless: each post waits for room).
fn post_frames(
    pv: &ndflow_pva::server::SharedPv,
    w: usize,
    h: usize,
    frames: usize,
) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while pv.subscribers() == 0 {
        if Instant::now() > deadline {
            return Err("no subscriber within 20 s".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let px = pixels(w, h);
    let all = BitSet::from_bits(&[0]);
    for uid in 1..=frames as i32 {
        let v = frame_value(&px, w, h, uid)?;
        pv.post_deadline(v, &all, Instant::now() + Duration::from_secs(20))
            .map_err(|e| format!("post of frame {uid}: {e}"))?;
    }
    Ok(())
}

fn ndflow_to_ndflow(
    w: usize,
    h: usize,
    frames: usize,
    warm: usize,
    label: &str,
) -> Result<Row, String> {
    let name = "BENCH:ndflow:Image";
    let (server, pv, _) = ndflow_server(name)?;
    let mut cfg = ClientConfig::from_env().map_err(|e| e.to_string())?;
    cfg.addr_list = Vec::new();
    cfg.auto_addr_list = false;
    cfg.name_servers = vec![server.tcp_addr()];
    let client = Client::new(cfg).map_err(|e| e.to_string())?;
    let mon = client
        .monitor(
            name,
            MonitorOptions {
                request: String::new(),
                queue_size: 4,
                pipeline: true,
                ack_any: None,
            },
        )
        .map_err(|e| e.to_string())?;
    let poster = {
        let pv = pv.clone();
        std::thread::spawn(move || post_frames(&pv, w, h, frames))
    };
    let (mut got, mut bytes, mut lost, mut last) = (0u64, 0u64, 0u64, 0i64);
    let mut t0 = None;
    while got < frames as u64 {
        match mon.recv(Duration::from_secs(20)) {
            Ok(MonitorEvent::Data { value, .. }) => {
                let desc = ndflow_pva::nt::ntndarray::ntndarray_desc();
                let nt = NtNdArray::from_value(desc, &value).map_err(|e| e.to_string())?;
                let uid = i64::from(nt.unique_id);
                lost += (uid - last - 1).max(0) as u64;
                last = uid;
                got += 1;
                if got == warm as u64 {
                    t0 = Some(Instant::now());
                } else if got > warm as u64 {
                    bytes += nt.value.map_or(0, |a| a.bytes().len() as u64);
                }
            }
            Ok(_) => {}
            Err(e) => return Err(format!("ndflow client: {e} after {got} frames")),
        }
    }
    let secs = t0.map_or(0.0, |t| t.elapsed().as_secs_f64());
    poster.join().map_err(|_| "poster panicked")??;
    drop(mon);
    server.stop();
    Ok(Row {
        path: "ndflow -> ndflow (lossless)",
        frame: label.into(),
        frames: got.saturating_sub(warm as u64),
        lost,
        seconds: secs,
        bytes,
    })
}

/// How long a p4p process may take to answer (Python start-up and imports included; the
/// client gives up by itself after 30 s without frames).
const PY_TIMEOUT: Duration = Duration::from_secs(300);

/// `python/bench/pva_ref.py ARGS` on loopback, with `env` on top (the ports to use).
fn spawn_python(python: &Path, args: &[String], env: &[(String, String)]) -> Result<Proc, String> {
    let mut cmd = Command::new(python);
    cmd.arg(host::repo_path("python/bench/pva_ref.py"))
        .args(args);
    host::loopback_env(&mut cmd).envs(env.iter().map(|(k, v)| (k, v)));
    Proc::piped(&format!("pva_ref.py {}", args[0]), cmd, None)
}

fn client_row(path: &'static str, label: &str, j: &Json) -> Row {
    Row {
        path,
        frame: label.into(),
        frames: j["timed_frames"].as_u64().unwrap_or(0),
        lost: j["lost"].as_u64().unwrap_or(0),
        seconds: j["seconds"].as_f64().unwrap_or(0.0),
        bytes: j["timed_bytes"].as_u64().unwrap_or(0),
    }
}

fn ndflow_to_p4p(
    w: usize,
    h: usize,
    frames: usize,
    warm: usize,
    label: &str,
    python: &Path,
) -> Result<Row, String> {
    let name = "BENCH:ndflow:Image";
    let (server, pv, udp) = ndflow_server(name)?;
    let env = vec![
        ("EPICS_PVA_BROADCAST_PORT".to_string(), udp.to_string()),
        (
            "EPICS_PVA_SERVER_PORT".to_string(),
            server.tcp_addr().port().to_string(),
        ),
    ];
    let mut child = spawn_python(
        python,
        &[
            "client".into(),
            name.into(),
            frames.to_string(),
            "30".into(),
            warm.to_string(),
        ],
        &env,
    )?;
    let posted = post_frames(&pv, w, h, frames);
    let j = child.json_line(PY_TIMEOUT);
    child.finish(Duration::from_secs(10));
    server.stop();
    posted?;
    Ok(client_row("ndflow -> p4p (lossless)", label, &j?))
}

fn p4p_to_p4p(
    w: usize,
    h: usize,
    frames: usize,
    warm: usize,
    label: &str,
    python: &Path,
) -> Result<Row, String> {
    let name = "BENCH:p4p:Image";
    let mut server = spawn_python(
        python,
        &[
            "server".into(),
            name.into(),
            h.to_string(),
            w.to_string(),
            frames.to_string(),
        ],
        &[],
    )?;
    let conf = server.json_line(PY_TIMEOUT)?;
    let env: Vec<(String, String)> = conf
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| {
                    v.as_str()
                        .filter(|s| !s.is_empty())
                        .map(|s| (k.clone(), s.to_string()))
                })
                .collect()
        })
        .unwrap_or_default();
    let mut client = spawn_python(
        python,
        &[
            "client".into(),
            name.into(),
            frames.to_string(),
            "30".into(),
            warm.to_string(),
        ],
        &env,
    )?;
    // Let the client connect and subscribe before the first frame.
    std::thread::sleep(Duration::from_millis(1500));
    server.send_line("go")?;
    let j = client.json_line(PY_TIMEOUT);
    client.finish(Duration::from_secs(10));
    server.finish(Duration::from_secs(60));
    Ok(client_row("p4p -> p4p (pvxs reference)", label, &j?))
}

/// One path's runs, each paired with the raw TCP run next to it.
struct PathRuns {
    path: &'static str,
    frame: String,
    pairs: Paired,
    /// The last run (frames and seconds for the table), and the frames lost over all runs.
    last: Row,
    lost: u64,
    runs: Vec<Json>,
}

/// Runs `path` and raw TCP back to back (raw first on odd repetitions, last on even ones, so a
/// drift in load during a pair does not always favour the same side) and records the pair.
/// `stream` = (bytes per frame, frames, warm-up frames) of the raw TCP run.
fn paired_run(
    all: &mut Vec<PathRuns>,
    tcp: &mut Vec<Row>,
    rep: usize,
    stream: (usize, usize, usize),
    label: &str,
    path: impl FnOnce() -> Result<Row, String>,
) -> Result<(), String> {
    let (bytes, frames, warm) = stream;
    let (r, t) = if rep % 2 == 1 {
        let t = raw_tcp(bytes, frames, warm, label)?;
        (path()?, t)
    } else {
        let r = path()?;
        (r, raw_tcp(bytes, frames, warm, label)?)
    };
    eprintln!(
        "  {:<30} {:>6.2} GB/s, raw TCP {:>6.2} GB/s: {:.2}x",
        r.path,
        r.gbps(),
        t.gbps(),
        r.gbps() / t.gbps().max(1e-9)
    );
    let run = json!({
        "gbps": r.gbps(), "tcp_gbps": t.gbps(), "frames": r.frames, "lost": r.lost,
        "seconds": r.seconds, "tcp_seconds": t.seconds,
    });
    match all
        .iter_mut()
        .find(|x| x.path == r.path && x.frame == r.frame)
    {
        Some(x) => {
            x.pairs.push(r.gbps(), t.gbps());
            x.lost += r.lost;
            x.runs.push(run);
            x.last = r;
        }
        None => {
            let mut pairs = Paired::default();
            pairs.push(r.gbps(), t.gbps());
            all.push(PathRuns {
                path: r.path,
                frame: r.frame.clone(),
                pairs,
                lost: r.lost,
                runs: vec![run],
                last: r,
            });
        }
    }
    tcp.push(t);
    Ok(())
}

pub fn run(opts: &PvaBenchOptions) -> Result<String, String> {
    let mut paths: Vec<PathRuns> = Vec::new();
    let mut tcp: Vec<Row> = Vec::new();
    let reps = opts.reps.max(1);
    // Every path runs next to its own raw TCP run, repetitions interleaved: on a shared
    // 2-core machine load moves every figure by tens of percent, and a ratio is only
    // meaningful between numbers taken under the same load. The row's figure is the median
    // of the per-pair ratios, with their spread.
    // One unrecorded pass first: the first raw TCP run of a process came out 30-60 % slower
    // than the later ones (8 processes of 10 on 2026-11-23), which flattered the first pair's
    // ratio.
    let warm = opts.warm.max(1);
    for &(w, h, frames) in &opts.sizes {
        if frames <= warm {
            return Err(format!(
                "--sizes {w}x{h}x{frames}: needs more frames than --warm-frames ({warm})"
            ));
        }
    }
    for &(w, h, frames) in &opts.sizes {
        let label = format!("{w}x{h} UInt16");
        eprintln!("[warm-up] {label}");
        raw_tcp(w * h * 2, frames, warm, &label)?;
        ndflow_to_ndflow(w, h, frames, warm, &label)?;
    }
    for rep in 1..=reps {
        for &(w, h, frames) in &opts.sizes {
            let label = format!("{w}x{h} UInt16");
            let bytes = w * h * 2;
            eprintln!("[{rep}/{reps}] {label}");
            paired_run(
                &mut paths,
                &mut tcp,
                rep,
                (bytes, frames, warm),
                &label,
                || ndflow_to_ndflow(w, h, frames, warm, &label),
            )?;
            if rep > opts.p4p_reps {
                continue;
            }
            let p4p = paired_run(
                &mut paths,
                &mut tcp,
                rep,
                (bytes, frames, warm),
                &label,
                || ndflow_to_p4p(w, h, frames, warm, &label, &opts.python),
            );
            if let Err(e) = p4p {
                eprintln!("  ndflow -> p4p skipped: {e}");
            }
            let p4p = paired_run(
                &mut paths,
                &mut tcp,
                rep,
                (bytes, frames, warm),
                &label,
                || p4p_to_p4p(w, h, frames, warm, &label, &opts.python),
            );
            if let Err(e) = p4p {
                eprintln!("  p4p -> p4p skipped: {e}");
            }
        }
    }
    report(opts, reps, &paths, &tcp)
}

fn report(
    opts: &PvaBenchOptions,
    reps: usize,
    paths: &[PathRuns],
    tcp: &[Row],
) -> Result<String, String> {
    let mut out = format!(
        "{reps} interleaved repetitions ({} with the p4p paths); GB/s and frames/s: medians; \
         vs TCP: median of the per-pair ratios ± half their range (! = spread over ±10 %); \
         lost: over all runs\n",
        opts.p4p_reps.min(reps)
    );
    out.push_str(&format!(
        "{:<30} {:<18} {:>7} {:>6} {:>8} {:>9} {:>12}\n",
        "path", "frame", "frames", "lost", "GB/s", "frames/s", "vs TCP"
    ));
    let mut json_rows = Vec::new();
    for &(w, h, _) in &opts.sizes {
        let label = format!("{w}x{h} UInt16");
        let raw: Vec<&Row> = tcp.iter().filter(|t| t.frame == label).collect();
        if let Some(last) = raw.last() {
            let gbps: Vec<f64> = raw.iter().map(|t| t.gbps()).collect();
            let fps: Vec<f64> = raw.iter().map(|t| t.fps()).collect();
            out.push_str(&format!(
                "{:<30} {:<18} {:>7} {:>6} {:>8.2} {:>9.1} {:>12}\n",
                last.path,
                label,
                last.frames,
                0,
                median(&gbps),
                median(&fps),
                "1.00x"
            ));
            json_rows.push(json!({
                "path": last.path, "frame": label, "frames": last.frames, "lost": 0,
                "gbps": median(&gbps), "fps": median(&fps), "gbps_samples": gbps,
                "gbps_spread": relative_spread(&gbps),
            }));
        }
        for p in paths.iter().filter(|p| p.frame == label) {
            let fps = p.pairs.ours_median() * 1e9 / ((w * h * 2) as f64);
            out.push_str(&format!(
                "{:<30} {:<18} {:>7} {:>6} {:>8.2} {:>9.1} {:>12}\n",
                p.path,
                p.frame,
                p.last.frames,
                p.lost,
                p.pairs.ours_median(),
                fps,
                p.pairs.ratio_text()
            ));
            json_rows.push(json!({
                "path": p.path, "frame": p.frame, "frames": p.last.frames, "lost": p.lost,
                "gbps": p.pairs.ours_median(), "fps": fps,
                "vs_tcp": p.pairs.ratio_median(), "vs_tcp_spread": p.pairs.ratio_spread(),
                "unsteady": p.pairs.unsteady(), "pairs": p.pairs.to_json(), "runs": p.runs,
            }));
        }
    }
    if let Some(p) = &opts.json {
        let text = serde_json::to_string_pretty(&json_rows).map_err(|e| e.to_string())?;
        std::fs::write(p, text).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    }
    Ok(out)
}
