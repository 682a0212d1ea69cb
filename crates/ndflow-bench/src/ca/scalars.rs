//! (a) of `ndflow bench ca`: monitor updates/s of N scalar PVs changing at full rate, from the
//! `ndflow_ca` server in this process and from pythonSoftIOC (RSRV), to one pyepics client.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ndflow_ca::{CaPv, CaValue, NativeType, PvMeta, Server, ServerConfig, StaticProvider};

use super::{f, scalar_names, Ctx, Row, IOC_PREFIX};
use crate::host;

/// (a) the `ndflow_ca` server in this process, every PV posted in turn by one thread.
pub(super) fn ndflow_server(ctx: &Ctx, names: &Path) -> Result<Row, String> {
    let provider = Arc::new(StaticProvider::new());
    let pvs: Vec<CaPv> = scalar_names(ctx.opts.pvs)
        .into_iter()
        .map(|n| {
            let pv = CaPv::new(
                PvMeta::scalar(NativeType::Double),
                CaValue::Double(vec![0.0]),
            );
            provider.add(n, pv.clone());
            pv
        })
        .collect();
    let repeater = host::free_udp_port()?;
    let mut cfg = ServerConfig::loopback_ephemeral();
    cfg.beacon_port = repeater;
    let server = Server::start(cfg, provider).map_err(|e| format!("CA server: {e}"))?;
    let port = server.tcp_addr().port();
    let stop = Arc::new(AtomicBool::new(false));
    let posts = Arc::new(AtomicU64::new(0));
    let poster = {
        let (stop, posts) = (stop.clone(), posts.clone());
        std::thread::spawn(move || {
            let mut x = 0.0;
            while !stop.load(Ordering::Relaxed) {
                x += 1.0;
                for pv in &pvs {
                    pv.post(CaValue::Double(vec![x]));
                }
                posts.fetch_add(pvs.len() as u64, Ordering::Relaxed);
            }
        })
    };
    let t0 = Instant::now();
    let res = ctx.monitor(names, port, repeater);
    let secs = t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let _ = poster.join();
    server.stop();
    let j = res?;
    let post_rate = posts.load(Ordering::Relaxed) as f64 / secs;
    Ok(Row {
        group: "a",
        path: "ndflow_ca server (in-process) -> pyepics".into(),
        rate: f(&j, "rate"),
        unit: "updates/s",
        gbps: None,
        reference: RSRV_REF,
        note: format!(
            "{} of {} connected; server posted {:.0}/s over the client's life",
            j["connected"], ctx.opts.pvs, post_rate
        ),
    })
}

const RSRV_REF: &str = "softioc (RSRV) calc, C event scan -> pyepics";

/// (a) pythonSoftIOC: N ao records set in turn by one Python thread (`ao`), or N calc records
/// processed by EPICS' event scan thread on an event posted every 1 ms (`calc`).
pub(super) fn softioc(ctx: &Ctx, names: &Path, mode: &str) -> Result<Row, String> {
    let (port, repeater) = host::free_ca_ports()?;
    let mut ioc = ctx.python(
        "softioc",
        &[
            "softioc".into(),
            IOC_PREFIX.into(),
            ctx.opts.pvs.to_string(),
            mode.into(),
        ],
        Some((port, repeater)),
    )?;
    ioc.json_line(Duration::from_secs(120))?;
    let res = ctx.monitor(names, port, repeater);
    ioc.close_stdin();
    let sets = ioc.json_line(Duration::from_secs(20));
    ioc.finish(Duration::from_secs(10));
    let j = res?;
    let set_rate = sets.map(|s| f(&s, "sets_per_s")).unwrap_or(0.0);
    Ok(Row {
        group: "a",
        path: if mode == "ao" {
            "softioc (RSRV) ao, Python set() -> pyepics".into()
        } else {
            RSRV_REF.into()
        },
        rate: f(&j, "rate"),
        unit: "updates/s",
        gbps: None,
        reference: RSRV_REF,
        note: if mode == "ao" {
            format!(
                "{} of {} connected; one Python thread set {set_rate:.0} records/s",
                j["connected"], ctx.opts.pvs
            )
        } else {
            format!(
                "{} of {} connected; {set_rate:.0} record processings/s scheduled (event every 1 ms)",
                j["connected"], ctx.opts.pvs
            )
        },
    })
}
