//! (b) of `ndflow bench ca`: 1024x1024 UInt16 frames over Channel Access to pyepics, from the
//! `ndflow_ca` server alone, next to raw loopback TCP into Rust and into Python. The IOC's
//! ArrayData row is measured with the IOC ([`super::ioc`]).

use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ndflow_ca::{CaPv, CaValue, NativeType, PvMeta, Server, ServerConfig, StaticProvider};
use serde_json::Value as Json;

use super::{f, Ctx, Row, FRAME_BYTES, FRAME_H, FRAME_W, IOC_PREFIX};
use crate::host::{self, Proc};

/// Raw loopback TCP into Rust: `frames` writes of `bytes`, read into one reused buffer, timed
/// from the first.
pub(super) fn raw_tcp_to_rust(bytes: usize, frames: usize) -> Result<Row, String> {
    let secs = host::raw_tcp(bytes, frames, 1)?;
    let n = frames.saturating_sub(1) as f64;
    Ok(Row {
        group: "b",
        path: "raw loopback TCP -> Rust".into(),
        rate: if secs > 0.0 { n / secs } else { 0.0 },
        unit: "frames/s",
        gbps: Some(if secs > 0.0 {
            n * bytes as f64 / secs / 1e9
        } else {
            0.0
        }),
        reference: "raw loopback TCP -> Rust",
        note: format!("{frames} messages of {bytes} bytes"),
    })
}

/// Raw loopback TCP into Python (`recv_into` one reused buffer).
pub(super) fn raw_tcp_to_python(ctx: &Ctx, bytes: usize, frames: usize) -> Result<Row, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let mut p = ctx.python(
        "tcprecv",
        &[
            "tcprecv".into(),
            addr.port().to_string(),
            bytes.to_string(),
            frames.to_string(),
        ],
        None,
    )?;
    let accepted = host::accept_within(&listener, Duration::from_secs(30))
        .map_err(|e| format!("the Python receiver: {e}"))?;
    let sent = std::thread::spawn(move || host::write_frames(accepted, bytes, frames));
    let j = p.json_line(Duration::from_secs(60));
    p.finish(Duration::from_secs(5));
    let _ = sent.join();
    let j = j?;
    let secs = f(&j, "seconds");
    let n = f(&j, "frames");
    Ok(Row {
        group: "b",
        path: "raw loopback TCP -> Python recv_into".into(),
        rate: if secs > 0.0 { n / secs } else { 0.0 },
        unit: "frames/s",
        gbps: Some(if secs > 0.0 {
            f(&j, "bytes") / secs / 1e9
        } else {
            0.0
        }),
        reference: "raw loopback TCP -> Rust",
        note: format!("{frames} messages of {bytes} bytes"),
    })
}

/// A (b) row from a pyepics `arrays` client's answer.
pub(super) fn array_row(path: &str, j: &Json, note: String) -> Row {
    Row {
        group: "b",
        path: path.into(),
        rate: f(j, "fps"),
        unit: "frames/s",
        gbps: Some(f(j, "gbps")),
        reference: "raw loopback TCP -> Rust",
        note: format!(
            "{note}; the pyepics client used {:.0}% of a core",
            f(j, "cpu") * 100.0
        ),
    }
}

/// A pyepics client taking the frames of `pv` (numpy arrays) for a window, then answering.
pub(super) fn arrays_client(ctx: &Ctx, pv: &str, port: u16, repeater: u16) -> Result<Proc, String> {
    ctx.python(
        "pyepics arrays",
        &[
            "arrays".into(),
            pv.into(),
            ctx.opts.warmup.to_string(),
            ctx.opts.seconds.to_string(),
        ],
        Some((port, repeater)),
    )
}

/// (b) the `ndflow_ca` server alone: one 1024x1024 DBR_SHORT waveform posted every 250 µs
/// (more often than any client here takes them; a subscription keeps the latest).
pub(super) fn ndflow_server(ctx: &Ctx) -> Result<Row, String> {
    let name = format!("{IOC_PREFIX}wave");
    let provider = Arc::new(StaticProvider::new());
    let pixels: Vec<u8> = (0..FRAME_W * FRAME_H)
        .flat_map(|i| ((i % 65521) as u16).to_ne_bytes())
        .collect();
    let bytes: Arc<dyn AsRef<[u8]> + Send + Sync> = Arc::new(pixels);
    let frame = CaValue::Shared {
        ty: NativeType::Short,
        bytes,
    };
    let pv = CaPv::new(
        PvMeta::array(NativeType::Short, FRAME_W * FRAME_H),
        frame.clone(),
    );
    provider.add(name.clone(), pv.clone());
    let repeater = host::free_udp_port()?;
    let mut cfg = ServerConfig::loopback_ephemeral();
    cfg.beacon_port = repeater;
    cfg.max_array_bytes = FRAME_BYTES + 4096;
    let server = Server::start(cfg, provider).map_err(|e| format!("CA server: {e}"))?;
    let port = server.tcp_addr().port();
    let stop = Arc::new(AtomicBool::new(false));
    let posts = Arc::new(AtomicU64::new(0));
    let poster = {
        let (stop, posts) = (stop.clone(), posts.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                pv.post(frame.clone());
                posts.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_micros(250));
            }
        })
    };
    let t0 = Instant::now();
    let res = arrays_client(ctx, &name, port, repeater).and_then(|mut p| {
        let j = p.json_line(ctx.client_timeout());
        p.finish(Duration::from_secs(5));
        j
    });
    let secs = t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let _ = poster.join();
    server.stop();
    let j = res?;
    Ok(array_row(
        "ndflow_ca server (in-process) -> pyepics",
        &j,
        format!(
            "DBR_SHORT waveform posted {:.0}/s",
            posts.load(Ordering::Relaxed) as f64 / secs
        ),
    ))
}
