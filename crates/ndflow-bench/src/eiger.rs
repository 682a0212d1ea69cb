//! `ndflow bench eiger`: the EIGER driver (`type = "eiger"`, Stream v2) receiving a real
//! EIGER2 16M capture replayed flat out over ZeroMQ on 127.0.0.1, next to pyzmq receiving the
//! same messages from the same replayer, and its decompression next to the C decoders.
//!
//! The messages: tickit-devices' recording of an EIGER2 Si 16M (`eiger/data/stream2`: start,
//! one 4148×4362 UInt16 bslz4 image of 513 kB, 36.19 MB decompressed, end), the image sent N
//! times with image_id 0..N-1, by `python/tools/eiger_replay.py`'s Replayer (pyzmq PUSH,
//! copy=False, SNDHWM 1000) driven from `python/bench/eiger_ref.py`. Without tickit-devices
//! the series is generated (`eiger_peer.make_v2_series`, same geometry) and the table says so.
//! The recorded start holds 4-byte stubs where flatfield, pixel_mask and the countrate table
//! should be tag-40 arrays, and the driver refuses the whole message for them (printed at
//! `[start]`); the start sent is the recording without those three fields (what
//! header_detail "basic" sends) plus image_dtype.
//!
//! Rows, each a fresh graph, a fresh PUSH socket and a fresh [`FakeDcu`] per run:
//! - **(a0) pass-through, no plugin**: the receive path alone (StreamDecompress Disable,
//!   nothing downstream), the figure to hold next to pyzmq's receive rate;
//! - **(a) pass-through**: StreamDecompress Disable, the bslz4 blocks go as they came into an
//!   HDF5 file (NDFileHDF5, direct chunk write, /dev/shm) — N frames (default 2000);
//! - **(b) decompress**: StreamDecompress Enable, DecodeThreads workers (default 2) make
//!   UInt16 frames, nothing downstream — fewer frames (default 300).
//!
//! The IOC is driven as an operator would: NumImages N, TriggerMode External Series (no
//! triggers sent), DataSource Stream, StreamVersion Stream2, Acquire 1; the driver configures
//! and arms the detector over SIMPLON REST, here a small in-process HTTP server ([`FakeDcu`])
//! that keeps what is PUT and answers arm with a sequence id. The replayer starts once the
//! driver shows Armed = 1 (the driver discards what waits on its socket at arm). The DCU is
//! new per run because the driver's control thread reads every setting back when it first
//! reaches the detector, and a detector still holding the previous run's nimages overwrote
//! the NumImages just put (the series then expected the old count).
//!
//! frames/s is taken at the receiver, first frame to last: ours from the driver's first
//! published frame to the last one (a) written (or dropped) by HDF1 or (b) published, polled
//! every 2 ms, counting the frames that arrived (for (a): were written);
//! the reference's (a pyzmq PULL, copy=False, in its own process) from its first message to
//! its last. CPU per frame is the whole process's CPU time (ours: the bench process, from the
//! start of sending to the end; pyzmq's: its process while receiving). Loss: images sent
//! (replayer) vs received (StreamReceived) vs published (ArrayCounter) vs written
//! (NumCaptured). Each of our runs is paired with a pyzmq run next to it (order alternating);
//! "vs pyzmq" is the median of the per-pair ratios ± half their range ([`crate::paired`]).
//!
//! **Decode per core**: the driver's own per-frame work ([`ndflow_eiger::decode::make_array`]:
//! a pool buffer, bitshuffle/LZ4 decode) on the bench thread, next to
//! `dectris.compression.decompress` and `bitshuffle.decompress_lz4` (the C libraries) on the
//! same payload in one Python process, interleaved, timed by CPU time (ours: this thread's;
//! theirs: the process's). The decoded pixels' sum must agree with theirs.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ndflow::config::Config;
use ndflow_core::Pool;
use ndflow_eiger::decode::{make_array, Output};
use ndflow_eiger::stream::{v2, Encoding, Event, Frame, PixelType};
use ndflow_runtime::Graph;
use serde_json::{json, Value as Json};

use crate::host::{self, process_cpu_seconds, PyWorker};
use crate::paired::{median, Paired};

pub struct EigerOptions {
    pub json: Option<PathBuf>,
    /// Python with pyzmq, cbor2, dectris-compression, bitshuffle (default .venv/bin/python).
    pub python: Option<PathBuf>,
    /// The capture directory (tickit-devices' `eiger/data`); default: asked of
    /// `tickit_python`; when neither has it, a generated series.
    pub capture: Option<PathBuf>,
    /// Python of a venv with tickit-devices, to find its capture.
    pub tickit_python: Option<PathBuf>,
    /// Images per (a) run.
    pub pass_frames: usize,
    /// Images per (b) run.
    pub decode_frames: usize,
    /// DecodeThreads of the (b) row.
    pub workers: usize,
    /// Interleaved pairs (ours, pyzmq) per row.
    pub reps: usize,
    /// Interleaved decode-per-core pairs.
    pub decode_reps: usize,
    /// Where HDF1 writes (default /dev/shm, else the temp directory).
    pub dir: Option<PathBuf>,
}

/// How often the bench thread looks at the counters during a run.
const POLL: Duration = Duration::from_millis(2);
/// A run gives up when no frame arrived for this long.
const STALL: Duration = Duration::from_secs(20);

// ---------------------------------------------------------------------------------------
// A stand-in DCU: SIMPLON REST on 127.0.0.1
// ---------------------------------------------------------------------------------------

/// A SIMPLON REST server small enough for the driver's needs: PUT config stores the value
/// (answer `[]`), GET config/status returns what was stored (`{"value": …}`; status/state is
/// "ready" while armed, else "idle"; anything never PUT: 404), PUT command/* answers
/// `{"sequence id": 1}`. HTTP/1.1 with Connection: close, one request per connection, as the
/// driver's client speaks it.
pub struct FakeDcu {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FakeDcu {
    pub fn start() -> Result<FakeDcu, String> {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("REST: {e}"))?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let store: Arc<Mutex<HashMap<String, Json>>> = Arc::default();
        let thread = std::thread::Builder::new()
            .name("bench-fake-dcu".into())
            .spawn(move || {
                let armed = AtomicBool::new(false);
                for conn in listener.incoming() {
                    if flag.load(Ordering::Acquire) {
                        return;
                    }
                    if let Ok(s) = conn {
                        let _ = serve(s, &store, &armed);
                    }
                }
            })
            .map_err(|e| e.to_string())?;
        Ok(FakeDcu {
            port,
            stop,
            thread: Some(thread),
        })
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for FakeDcu {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the accept loop.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(
    s: TcpStream,
    store: &Mutex<HashMap<String, Json>>,
    armed: &AtomicBool,
) -> std::io::Result<()> {
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut r = BufReader::new(s.try_clone()?);
    let mut line = String::new();
    r.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (method, path) = (
        parts.next().unwrap_or("").to_string(),
        parts.next().unwrap_or("").to_string(),
    );
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        if r.read_line(&mut h)? == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.trim().eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0u8; length];
    r.read_exact(&mut body)?;
    // /{sub}/api/{version}/{section}/{key}
    let seg: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (status, reply) = match (method.as_str(), seg.as_slice()) {
        ("GET", [_, "api", "version"]) => (200, json!({"value": "1.8.0"})),
        ("PUT", [sub, "api", _, "config", key]) => {
            let v = serde_json::from_slice::<Json>(&body)
                .ok()
                .and_then(|j| j.get("value").cloned())
                .unwrap_or(Json::Null);
            lock(store).insert(format!("{sub}/{key}"), v);
            (200, json!([]))
        }
        ("PUT", [_, "api", _, "command", cmd]) => {
            match *cmd {
                "arm" => armed.store(true, Ordering::Release),
                "disarm" | "abort" | "cancel" => armed.store(false, Ordering::Release),
                _ => {}
            }
            (200, json!({"sequence id": 1}))
        }
        ("GET", ["detector", "api", _, "status", "state"]) => {
            let state = if armed.load(Ordering::Acquire) {
                "ready"
            } else {
                "idle"
            };
            (200, json!({"value": state}))
        }
        ("GET", [sub, "api", _, _, key]) => match lock(store).get(&format!("{sub}/{key}")) {
            Some(v) => (200, json!({ "value": v })),
            None => (404, Json::Null),
        },
        _ => (404, Json::Null),
    };
    let text = if status == 200 {
        reply.to_string()
    } else {
        String::new()
    };
    let reason = if status == 200 { "OK" } else { "Not Found" };
    let mut w = s;
    write!(
        w,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{text}",
        text.len()
    )?;
    w.flush()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

// ---------------------------------------------------------------------------------------
// Runs
// ---------------------------------------------------------------------------------------

/// What the replayer sent in one run.
#[derive(Clone, Debug, Default)]
struct Sent {
    images: u64,
    bytes: u64,
    seconds: f64,
}

fn sent_of(j: &Json) -> Sent {
    Sent {
        images: j["images"].as_u64().unwrap_or(0),
        bytes: j["bytes"].as_u64().unwrap_or(0),
        seconds: j["seconds"].as_f64().unwrap_or(0.0),
    }
}

/// One run of a row, ours or the reference's.
#[derive(Clone, Debug, Default)]
struct Run {
    sent: Sent,
    received: u64,
    published: u64,
    written: Option<u64>,
    /// Frames dropped inside the IOC (HDF1's queue full, or the driver's pool).
    dropped: u64,
    lost: u64,
    invalid: u64,
    foreign: u64,
    /// First to last frame at the receiver.
    seconds: f64,
    /// Frames in that window (first excluded): the rate is frames / seconds.
    timed: u64,
    cpu: f64,
}

impl Run {
    fn fps(&self) -> f64 {
        if self.seconds > 0.0 {
            self.timed as f64 / self.seconds
        } else {
            0.0
        }
    }
    fn cpu_ms(&self) -> f64 {
        1e3 * self.cpu / self.received.max(1) as f64
    }
    fn json(&self) -> Json {
        json!({
            "sent": self.sent.images, "sent_bytes": self.sent.bytes,
            "sender_seconds": self.sent.seconds, "received": self.received,
            "published": self.published, "written": self.written, "dropped": self.dropped,
            "lost": self.lost,
            "invalid": self.invalid, "foreign": self.foreign, "seconds": self.seconds,
            "fps": self.fps(), "cpu_seconds": self.cpu, "cpu_ms_per_frame": self.cpu_ms(),
        })
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// StreamDecompress Disable into HDF1.
    PassThrough,
    /// StreamDecompress Disable, nothing downstream: the receive path alone.
    ReceiveOnly,
    Decompress,
}

struct Ctx<'a> {
    opts: &'a EigerOptions,
    dir: &'a Path,
    replayer: &'a mut PyWorker,
    puller: &'a mut PyWorker,
}

fn graph_for(
    ctx: &Ctx<'_>,
    dcu: &FakeDcu,
    mode: Mode,
    stream_port: u16,
    frames: usize,
    file: &str,
) -> String {
    let mut cfg = format!(
        "prefix = \"BENCH:\"\nthreads = 2\n\n[[port]]\nname = \"EIG1\"\ntype = \"eiger\"\n\
         prefix = \"cam1:\"\nHost = \"{}\"\nStream2Port = {stream_port}\nDecodeThreads = {}\n",
        dcu.addr(),
        if mode == Mode::Decompress {
            ctx.opts.workers
        } else {
            2
        },
    );
    if mode == Mode::PassThrough {
        let _ = write!(
            cfg,
            "\n[[port]]\nname = \"HDF1\"\ntype = \"hdf5\"\nprefix = \"HDF1:\"\n\
             NDArrayPort = \"EIG1\"\nQueueSize = 200\nFilePath = \"{}/\"\nFileName = \"{file}\"\n\
             FileTemplate = \"%s%s.h5\"\nFileWriteMode = \"Stream\"\nLazyOpen = \"Yes\"\n\
             NumCapture = {frames}\nCapture = 1\n",
            ctx.dir.display()
        );
    }
    cfg
}

fn put(
    g: &Graph,
    port: &str,
    k: &str,
    v: impl Into<ndflow_core::ParamValue>,
) -> Result<(), String> {
    g.put(port, k, v)
        .map(|_| ())
        .map_err(|e| format!("{port}.{k}: {e}"))
}

fn get_i64(g: &Graph, port: &str, k: &str) -> i64 {
    g.get(port, k).ok().and_then(|v| v.as_i64()).unwrap_or(-1)
}

/// One run of ours: a fresh graph, Acquire, the replayer started once armed.
fn ours(ctx: &mut Ctx<'_>, mode: Mode, frames: usize, tag: &str) -> Result<Run, String> {
    let port = ctx.replayer.call(&json!({"op": "bind"}))?["port"]
        .as_u64()
        .ok_or("the replayer gave no port")? as u16;
    let file = format!("eiger_bench_{tag}");
    let path = ctx.dir.join(format!("{file}.h5"));
    // A fresh detector per run: the control thread's first read-back of a detector that
    // still holds the previous run's nimages raced our NumImages put and won (see the
    // module docs).
    let dcu = FakeDcu::start()?;
    let text = graph_for(ctx, &dcu, mode, port, frames, &file);
    let cfg = Config::parse(&text, "eiger bench").map_err(|e| e.to_string())?;
    let g = Graph::new(cfg.threads);
    let r = (|| {
        cfg.build(&g, &ndflow::pva::ImagePvs::default())
            .map_err(|e| e.to_string())?;
        for (k, v) in [
            ("DataSource", "Stream"),
            ("StreamVersion", "Stream2"),
            ("TriggerMode", "External Series"),
            (
                "StreamDecompress",
                if mode == Mode::Decompress {
                    "Enable"
                } else {
                    "Disable"
                },
            ),
        ] {
            put(&g, "EIG1", k, v)?;
        }
        put(&g, "EIG1", "NumImages", frames as i64)?;
        put(&g, "EIG1", "NumTriggers", 1)?;
        let drv = g.driver("EIG1").ok_or("no EIG1")?;
        put(&g, "EIG1", "Acquire", 1)?;
        let t_arm = Instant::now();
        while get_i64(&g, "EIG1", "Armed") != 1 {
            if t_arm.elapsed() > Duration::from_secs(15) {
                return Err(format!(
                    "the driver did not arm within 15 s: {:?}",
                    g.get("EIG1", "Error_RBV")
                        .or_else(|_| g.get("EIG1", "Error"))
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let cpu0 = process_cpu_seconds();
        let replayer = &mut *ctx.replayer;
        std::thread::scope(|s| -> Result<Run, String> {
            let sender = s.spawn(move || replayer.call(&json!({"op": "send", "frames": frames})));
            let (mut t_first, mut t_last) = (None::<Instant>, None::<Instant>);
            let mut first_count = 0i64;
            let mut last_progress = (Instant::now(), 0i64);
            let hdf_dropped = || {
                g.plugin("HDF1")
                    .map_or(0, |p| p.accounting().dropped_total() as i64)
            };
            loop {
                let published = drv.array_counter();
                // Every frame written or dropped somewhere: the run is over.
                let done = drv.dropped() as i64
                    + match mode {
                        Mode::PassThrough => get_i64(&g, "HDF1", "NumCaptured") + hdf_dropped(),
                        Mode::ReceiveOnly | Mode::Decompress => published,
                    };
                let now = Instant::now();
                if t_first.is_none() && published >= 1 {
                    t_first = Some(now);
                    first_count = published;
                }
                if done >= frames as i64 {
                    t_last = Some(now);
                    break;
                }
                if done != last_progress.1 {
                    last_progress = (now, done);
                } else if now - last_progress.0 > STALL {
                    eprintln!("  stalled at {done} of {frames} frames");
                    break;
                }
                std::thread::sleep(POLL);
            }
            let cpu = process_cpu_seconds() - cpu0;
            let sent = sender.join().map_err(|_| "the sender panicked")??;
            drv.wait_done(Duration::from_secs(10));
            g.wait_idle(Duration::from_secs(10));
            // Frames that made it (written, for (a): frames HDF1 dropped do not count).
            let arrived = match mode {
                Mode::PassThrough => get_i64(&g, "HDF1", "NumCaptured"),
                Mode::ReceiveOnly | Mode::Decompress => drv.array_counter(),
            };
            let timed = (arrived - first_count).max(0) as u64;
            let seconds = match (t_first, t_last) {
                (Some(a), Some(b)) => (b - a).as_secs_f64(),
                _ => 0.0,
            };
            let n = |k| get_i64(&g, "EIG1", k).max(0) as u64;
            if n("StreamLost") + n("StreamInvalid") > 0 {
                eprintln!(
                    "  driver: StreamLost {} StreamInvalid {} StreamForeign {} StreamExpected {}; \
                     Error_RBV {:?}",
                    n("StreamLost"),
                    n("StreamInvalid"),
                    n("StreamForeign"),
                    n("StreamExpected"),
                    g.get("EIG1", "Error_RBV")
                        .or_else(|_| g.get("EIG1", "Error"))
                );
            }
            let written = (mode == Mode::PassThrough).then(|| {
                if get_i64(&g, "HDF1", "WriteStatus") != 0 {
                    eprintln!("  HDF1: {:?}", g.get("HDF1", "WriteMessage"));
                }
                get_i64(&g, "HDF1", "NumCaptured").max(0) as u64
            });
            Ok(Run {
                sent: sent_of(&sent),
                dropped: drv.dropped() + hdf_dropped().max(0) as u64,
                received: n("StreamReceived"),
                published: drv.array_counter().max(0) as u64,
                written,
                lost: n("StreamLost"),
                invalid: n("StreamInvalid"),
                foreign: n("StreamForeign"),
                seconds,
                timed,
                cpu,
            })
        })
    })();
    g.shutdown();
    drop(g);
    let _ = std::fs::remove_file(&path);
    r
}

/// One reference run: a pyzmq PULL (copy=False) in its own process, same replayer.
fn reference(ctx: &mut Ctx<'_>, frames: usize) -> Result<Run, String> {
    let port = ctx.replayer.call(&json!({"op": "bind"}))?["port"]
        .as_u64()
        .ok_or("the replayer gave no port")?;
    let (replayer, puller) = (&mut *ctx.replayer, &mut *ctx.puller);
    let messages = frames + 2;
    std::thread::scope(|s| -> Result<Run, String> {
        let pull = s.spawn(move || {
            puller.call(&json!({"op": "pull", "port": port, "messages": messages, "timeout": 60}))
        });
        let sent = replayer.call(&json!({"op": "send", "frames": frames}));
        let got = pull.join().map_err(|_| "the puller panicked")??;
        let sent = sent?;
        let received = got["received"].as_u64().unwrap_or(0);
        Ok(Run {
            sent: sent_of(&sent),
            // start and end are messages too; the images are the rest.
            received: received.saturating_sub(2),
            published: received.saturating_sub(2),
            written: None,
            dropped: 0,
            lost: (frames as u64 + 2).saturating_sub(received),
            invalid: 0,
            foreign: 0,
            seconds: got["first_to_last"].as_f64().unwrap_or(0.0),
            timed: received.saturating_sub(1),
            cpu: got["cpu"].as_f64().unwrap_or(0.0),
        })
    })
}

struct RowRuns {
    name: &'static str,
    frames: usize,
    pairs: Paired,
    ours: Vec<Run>,
    theirs: Vec<Run>,
}

fn run_row(
    ctx: &mut Ctx<'_>,
    mode: Mode,
    name: &'static str,
    frames: usize,
) -> Result<RowRuns, String> {
    let mut row = RowRuns {
        name,
        frames,
        pairs: Paired::default(),
        ours: Vec::new(),
        theirs: Vec::new(),
    };
    let reps = ctx.opts.reps.max(1);
    for rep in 1..=reps {
        let tag = format!("{}_{rep}", name.len());
        let (o, t) = if rep % 2 == 1 {
            let o = ours(ctx, mode, frames, &tag)?;
            (o, reference(ctx, frames)?)
        } else {
            let t = reference(ctx, frames)?;
            (ours(ctx, mode, frames, &tag)?, t)
        };
        eprintln!(
            "  [{rep}/{reps}] {name}: ours {:.0} frames/s ({}/{}/{}{} sent/received/published{}, \
             {} dropped, {:.2} CPU ms/frame), pyzmq {:.0} frames/s: {:.2}x",
            o.fps(),
            o.sent.images,
            o.received,
            o.published,
            o.written.map(|w| format!("/{w}")).unwrap_or_default(),
            if o.written.is_some() { "/written" } else { "" },
            o.dropped,
            o.cpu_ms(),
            t.fps(),
            o.fps() / t.fps().max(1e-9)
        );
        row.pairs.push(o.fps(), t.fps());
        row.ours.push(o);
        row.theirs.push(t);
    }
    Ok(row)
}

// ---------------------------------------------------------------------------------------
// Decode per core
// ---------------------------------------------------------------------------------------

fn thread_cpu_seconds() -> f64 {
    use nix::time::{clock_gettime, ClockId};
    match clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID) {
        Ok(t) => t.tv_sec() as f64 + t.tv_nsec() as f64 * 1e-9,
        Err(_) => f64::NAN,
    }
}

/// `calls` frames through the driver's make_array (decompress): CPU seconds, and the
/// pixel sum of the last. `fresh`: every frame in a newly allocated buffer (the pool's free
/// list emptied after each), as the Python libraries return a new array per call; else the
/// pool's recycled buffer, as the driver runs.
fn our_decode(frame: &Frame, pool: &Pool, calls: usize, fresh: bool) -> Result<(f64, u64), String> {
    let out = Output {
        decompress: true,
        signed: false,
    };
    let c0 = thread_cpu_seconds();
    for _ in 0..calls {
        let a = make_array(frame, out, pool).map_err(|e| format!("{e:?}"))?;
        std::hint::black_box(&a);
        drop(a);
        if fresh {
            pool.empty_free_list();
        }
    }
    let cpu = thread_cpu_seconds() - c0;
    let a = make_array(frame, out, pool).map_err(|e| format!("{e:?}"))?;
    let sum = a
        .data_bytes()
        .chunks_exact(2)
        .map(|b| u64::from(u16::from_le_bytes([b[0], b[1]])))
        .sum();
    Ok((cpu, sum))
}

struct DecodeRow {
    payload: &'static str,
    /// ms per frame: ours (pool buffer), ours (fresh buffer), dectris-compression,
    /// bitshuffle (per pair).
    ours: Vec<f64>,
    fresh: Vec<f64>,
    dectris: Vec<f64>,
    bitshuffle: Vec<f64>,
}

fn decode_rows(
    replayer: &mut PyWorker,
    frames: &[(&'static str, Frame)],
    reps: usize,
) -> Result<Vec<DecodeRow>, String> {
    let pool = Pool::unlimited();
    let mut rows = Vec::new();
    for (payload, frame) in frames {
        // About 0.3 s of decoding per batch at ~20 ms a frame.
        let calls = 15;
        let (_, our_sum) = our_decode(frame, &pool, 1, false)?;
        let mut row = DecodeRow {
            payload,
            ours: Vec::new(),
            fresh: Vec::new(),
            dectris: Vec::new(),
            bitshuffle: Vec::new(),
        };
        for rep in 1..=reps.max(1) {
            let mut theirs = |lib: &str| -> Result<f64, String> {
                let j = replayer.call(
                    &json!({"op": "decode", "lib": lib, "payload": payload, "calls": calls}),
                )?;
                let sum = j["checksum"].as_u64().unwrap_or(0);
                if sum != our_sum {
                    return Err(format!(
                        "{payload}: {lib} decodes to pixel sum {sum}, ours to {our_sum}"
                    ));
                }
                Ok(1e3 * j["cpu"].as_f64().unwrap_or(f64::NAN) / calls as f64)
            };
            let mine = |pool: &Pool, fresh: bool| -> Result<f64, String> {
                Ok(1e3 * our_decode(frame, pool, calls, fresh)?.0 / calls as f64)
            };
            let (o, f, d, b) = if rep % 2 == 1 {
                let o = mine(&pool, false)?;
                let f = mine(&pool, true)?;
                (o, f, theirs("dectris")?, theirs("bitshuffle")?)
            } else {
                let d = theirs("dectris")?;
                let b = theirs("bitshuffle")?;
                (mine(&pool, false)?, mine(&pool, true)?, d, b)
            };
            eprintln!(
                "  [{rep}/{reps}] decode {payload}: ours {o:.2} ms (fresh buffer {f:.2}), \
                 dectris-compression {d:.2} ms, bitshuffle {b:.2} ms per frame"
            );
            row.ours.push(o);
            row.fresh.push(f);
            row.dectris.push(d);
            row.bitshuffle.push(b);
        }
        rows.push(row);
    }
    Ok(rows)
}

/// Per-pair ratios theirs / ours of ms per frame (> 1: ours faster).
fn speedup(ours: &[f64], theirs: &[f64]) -> Paired {
    let mut p = Paired::default();
    for (o, t) in ours.iter().zip(theirs) {
        // Paired wants "larger is better": frames per ms.
        p.push(1.0 / o, 1.0 / t);
    }
    p
}

// ---------------------------------------------------------------------------------------
// The bench
// ---------------------------------------------------------------------------------------

/// tickit-devices' `eiger/data`, asked of its venv's Python.
fn find_capture(python: &Path) -> Option<PathBuf> {
    let out = Command::new(python)
        .args([
            "-c",
            "import tickit_devices, os; print(os.path.dirname(tickit_devices.__file__))",
        ])
        .output()
        .ok()?;
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("eiger/data");
    dir.join("stream2/image.cbor").exists().then_some(dir)
}

fn v2_frame(msg: &[u8]) -> Result<Frame, String> {
    let mut events = Vec::new();
    v2::decode_message(&[Bytes::copy_from_slice(msg)], &mut events)
        .map_err(|e| format!("the driver cannot decode the image message: {e}"))?;
    match events.pop() {
        Some(Event::Image(mut img)) if !img.frames.is_empty() => Ok(img.frames.remove(0)),
        _ => Err("the template is not an image message".into()),
    }
}

/// Says what the driver makes of the start messages (the recorded one and the one sent).
fn check_start(work: &Path) {
    for (name, what) in [
        ("start_recorded.cbor", "tickit's recorded start"),
        ("start.cbor", "the start sent"),
    ] {
        let Ok(msg) = std::fs::read(work.join(name)) else {
            continue;
        };
        let mut events = Vec::new();
        match v2::decode_message(&[Bytes::from(msg)], &mut events) {
            Ok(()) => eprintln!("[start] {what}: decoded"),
            Err(e) => eprintln!("[start] {what}: the driver refuses it: {e}"),
        }
    }
}

pub fn run(opts: &EigerOptions) -> Result<String, String> {
    let python = opts.python.clone().unwrap_or_else(host::venv_python);
    let script = host::repo_path("python/bench/eiger_ref.py");
    let work = std::env::temp_dir().join(format!("ndflow-bench-eiger-{}", std::process::id()));
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    let dir = opts.dir.clone().unwrap_or_else(|| {
        let shm = PathBuf::from("/dev/shm");
        if shm.is_dir() {
            shm
        } else {
            std::env::temp_dir()
        }
    });
    let capture = opts
        .capture
        .clone()
        .or_else(|| opts.tickit_python.as_deref().and_then(find_capture));
    let mut replayer = PyWorker::start(&python, &script, &["replayer"])?;
    let mut puller = PyWorker::start(&python, &script, &["pull"])?;
    let frames = opts.pass_frames.max(opts.decode_frames).max(2);
    eprintln!("[prepare] {frames} image messages");
    let prep = replayer.call(&json!({
        "op": "prepare", "frames": frames, "dir": work,
        "capture": capture.as_ref().map(|c| c.to_string_lossy().to_string()),
    }))?;
    let source = prep["source"].as_str().unwrap_or("?").to_string();
    let image_bytes = prep["image_bytes"].as_u64().unwrap_or(0) as f64;
    let template = std::fs::read(work.join("image.cbor")).map_err(|e| e.to_string())?;
    let frame = v2_frame(&template)?;
    let decoded = frame.decoded_len() as f64;
    let mut decode_frames: Vec<(&'static str, Frame)> = vec![("v2", frame.clone())];
    if let Ok(blob) = std::fs::read(work.join("frame_sample")) {
        decode_frames.push((
            "v1",
            Frame {
                channel: String::new(),
                width: frame.width,
                height: frame.height,
                pixel: PixelType::U16,
                encoding: Encoding::BsLz4 { elem_size: 2 },
                data: Bytes::from(blob),
            },
        ));
    }
    check_start(&work);
    let mut ctx = Ctx {
        opts,
        dir: &dir,
        replayer: &mut replayer,
        puller: &mut puller,
    };
    eprintln!("[warm-up]");
    ours(
        &mut ctx,
        Mode::PassThrough,
        50.min(opts.pass_frames),
        "warm",
    )?;
    reference(&mut ctx, 50.min(opts.pass_frames))?;
    eprintln!("[a0] pass-through, no plugin, {} frames", opts.pass_frames);
    let a0 = run_row(
        &mut ctx,
        Mode::ReceiveOnly,
        "(a0) pass-through, no plugin",
        opts.pass_frames,
    )?;
    eprintln!("[a] pass-through into HDF5, {} frames", opts.pass_frames);
    let a = run_row(
        &mut ctx,
        Mode::PassThrough,
        "(a) pass-through -> HDF5",
        opts.pass_frames,
    )?;
    eprintln!(
        "[b] decompress, {} workers, {} frames",
        opts.workers, opts.decode_frames
    );
    let b_name: &'static str = if opts.workers == 2 {
        "(b) decompress, 2 workers"
    } else {
        "(b) decompress"
    };
    let b = run_row(&mut ctx, Mode::Decompress, b_name, opts.decode_frames)?;
    eprintln!("[decode per core]");
    let dec = decode_rows(ctx.replayer, &decode_frames, opts.decode_reps)?;
    let _ = std::fs::remove_dir_all(&work);
    report(
        opts,
        &source,
        (frame.width, frame.height),
        image_bytes,
        decoded,
        &[a0, a, b],
        &dec,
    )
}

fn report(
    opts: &EigerOptions,
    source: &str,
    (w, h): (usize, usize),
    image_bytes: f64,
    decoded: f64,
    rows: &[RowRuns],
    dec: &[DecodeRow],
) -> Result<String, String> {
    let mut out = format!(
        "EIGER Stream v2 on 127.0.0.1, {source}: {w}x{h} UInt16, {image_bytes:.0} B per image \
         message, {:.2} MB decompressed; replayer: eiger_replay.py (pyzmq PUSH, copy=False)\n\
         {} interleaved pairs per row; figures: medians; vs pyzmq: median of the per-pair ratios \
         ± half their range (! = over ±10 %); sent/received/published/written: summed over the \
         row's runs\n",
        decoded / 1e6,
        opts.reps
    );
    let _ = writeln!(
        out,
        "{:<28} {:>6} {:>26} {:>9} {:>8} {:>8} {:>8} {:>10} {:>8} {:>12}",
        "row",
        "frames",
        "sent/recv/published/written",
        "frames/s",
        "GB/s cmp",
        "GB/s raw",
        "CPU ms/f",
        "pyzmq f/s",
        "pyzmq ms",
        "vs pyzmq"
    );
    let mut json_rows = Vec::new();
    for r in rows {
        let sum = |f: &dyn Fn(&Run) -> u64| r.ours.iter().map(f).sum::<u64>();
        let counts = format!(
            "{}/{}/{}/{}",
            sum(&|x| x.sent.images),
            sum(&|x| x.received),
            sum(&|x| x.published),
            if r.ours.iter().all(|x| x.written.is_some()) {
                sum(&|x| x.written.unwrap_or(0)).to_string()
            } else {
                "-".into()
            }
        );
        let fps = r.pairs.ours_median();
        let cpu = median(&r.ours.iter().map(Run::cpu_ms).collect::<Vec<_>>());
        let their_cpu = median(&r.theirs.iter().map(Run::cpu_ms).collect::<Vec<_>>());
        let _ = writeln!(
            out,
            "{:<28} {:>6} {:>26} {:>9.0} {:>8.2} {:>8.1} {:>8.2} {:>10.0} {:>8.2} {:>12}",
            r.name,
            r.frames,
            counts,
            fps,
            fps * image_bytes / 1e9,
            fps * decoded / 1e9,
            cpu,
            r.pairs.reference_median(),
            their_cpu,
            r.pairs.ratio_text()
        );
        let lost: u64 = r.ours.iter().map(|x| x.lost + x.invalid).sum();
        let dropped: u64 = r.ours.iter().map(|x| x.dropped).sum();
        let their_lost: u64 = r.theirs.iter().map(|x| x.lost).sum();
        if lost > 0 || their_lost > 0 || dropped > 0 {
            let _ = writeln!(
                out,
                "  loss: ours {lost} on the stream (StreamLost + StreamInvalid), {dropped} \
                 dropped in the IOC; pyzmq {their_lost}"
            );
        }
        json_rows.push(json!({
            "row": r.name, "frames": r.frames, "fps": fps,
            "gbps_compressed": fps * image_bytes / 1e9, "gbps_decompressed": fps * decoded / 1e9,
            "cpu_ms_per_frame": cpu, "pyzmq_fps": r.pairs.reference_median(),
            "pyzmq_cpu_ms_per_frame": their_cpu, "pairs": r.pairs.to_json(),
            "ours": r.ours.iter().map(Run::json).collect::<Vec<_>>(),
            "pyzmq": r.theirs.iter().map(Run::json).collect::<Vec<_>>(),
        }));
    }
    let _ = writeln!(
        out,
        "\ndecode per core (CPU ms per frame, one thread; ours: the driver's make_array, \
         bitshuffle/LZ4 into a recycled pool buffer, or a fresh one per frame as the C \
         libraries' Python calls return; vs: their ms / ours per pair)\n\
         {:<8} {:>8} {:>6} {:>9} {:>8} {:>10} {:>16} {:>16} {:>16} {:>16}",
        "payload",
        "ours ms",
        "GB/s",
        "fresh ms",
        "dectris",
        "bitshuffle",
        "vs dectris",
        "vs bitshuffle",
        "fresh vs dectris",
        "fresh vs bitsh."
    );
    let mut json_dec = Vec::new();
    for d in dec {
        let (o, f) = (median(&d.ours), median(&d.fresh));
        let (dc, bs) = (median(&d.dectris), median(&d.bitshuffle));
        let (vd, vb) = (
            speedup(&d.ours, &d.dectris),
            speedup(&d.ours, &d.bitshuffle),
        );
        let (fd, fb) = (
            speedup(&d.fresh, &d.dectris),
            speedup(&d.fresh, &d.bitshuffle),
        );
        let _ = writeln!(
            out,
            "{:<8} {:>8.2} {:>6.2} {:>9.2} {:>8.2} {:>10.2} {:>16} {:>16} {:>16} {:>16}",
            d.payload,
            o,
            decoded / o / 1e6,
            f,
            dc,
            bs,
            vd.ratio_text(),
            vb.ratio_text(),
            fd.ratio_text(),
            fb.ratio_text()
        );
        json_dec.push(json!({
            "payload": d.payload, "ours_ms": d.ours, "ours_fresh_ms": d.fresh,
            "vs_dectris_fresh": fd.to_json(), "vs_bitshuffle_fresh": fb.to_json(),
            "dectris_ms": d.dectris,
            "bitshuffle_ms": d.bitshuffle, "vs_dectris": vd.to_json(),
            "vs_bitshuffle": vb.to_json(),
        }));
    }
    if let Some(p) = &opts.json {
        let text = serde_json::to_string_pretty(&json!({
            "source": source, "width": w, "height": h, "image_bytes": image_bytes,
            "decoded_bytes": decoded, "rows": json_rows, "decode": json_dec,
        }))
        .map_err(|e| e.to_string())?;
        std::fs::write(p, text).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    }
    Ok(out)
}
