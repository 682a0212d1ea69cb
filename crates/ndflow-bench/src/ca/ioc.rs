//! The IOC rows of `ndflow bench ca`: an `ndflow run` process serving the simulator's frames
//! over Channel Access. (b) its ArrayData to pyepics; (c) its pipeline rate free running,
//! alone and with CA clients monitoring every PV; (d) the same paced at 100 frames/s.

use std::net::SocketAddr;
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ndflow::config::Config;
use ndflow_ca::{CaValue, Client, ClientConfig, Values};
use nix::sys::signal::Signal;

use super::frames::{array_row, arrays_client};
use super::{f, write_names, Ctx, Row, FRAME_BYTES, FRAME_H, FRAME_W, IOC_PREFIX};
use crate::host::{self, Proc};

/// The IOC of the (b), (c) and (d) rows: the simulator, StdArrays, Stats and ROI on its frames.
fn ioc_config(period: f64) -> String {
    format!(
        r#"prefix = "{IOC_PREFIX}"

[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = {FRAME_W}
MaxSizeY = {FRAME_H}
DataType = "UInt16"
ImageMode = "Continuous"
AcquireTime = 0.0
AcquirePeriod = {period:?}
Acquire = 1

[[port]]
name = "IMAGE1"
type = "stdarrays"
prefix = "image1:"
NDArrayPort = "SIM1"
ArrayDataType = "UInt16"

[[port]]
name = "STATS1"
type = "stats"
prefix = "Stats1:"
NDArrayPort = "SIM1"

[[port]]
name = "ROI1"
type = "roi"
prefix = "ROI1:"
NDArrayPort = "SIM1"
"#
    )
}

/// Every PV name of the IOC scenario, as the PV directory of `ndflow run` lists them.
fn ioc_names() -> Result<Vec<String>, String> {
    let cfg = Config::parse(&ioc_config(0.0), "bench-ca-ioc.toml").map_err(|e| e.to_string())?;
    ndflow::ioc::pv_names(&cfg)
}

/// The number a scalar CA value holds (None for text and arrays).
fn as_f64(v: &CaValue) -> Option<f64> {
    match v.to_values() {
        Values::Long(v) => v.first().map(|&x| f64::from(x)),
        Values::Double(v) => v.first().copied(),
        Values::Short(v) => v.first().map(|&x| f64::from(x)),
        Values::Float(v) => v.first().map(|&x| f64::from(x)),
        _ => None,
    }
}

/// An `ndflow run` IOC serving CA on its own ports, and our client reading its counters.
struct Ioc {
    proc: Proc,
    client: Client,
    port: u16,
    repeater: u16,
}

impl Ioc {
    fn start(ctx: &Ctx, period: f64) -> Result<Ioc, String> {
        let cfg_path = ctx.dir.join("ioc.toml");
        std::fs::write(&cfg_path, ioc_config(period))
            .map_err(|e| format!("cannot write {}: {e}", cfg_path.display()))?;
        let (port, repeater) = host::free_ca_ports()?;
        let mut cmd = Command::new(host::ndflow_exe()?);
        cmd.arg("run").arg(&cfg_path).arg("--quiet").arg("--no-pva");
        host::loopback_env(&mut cmd);
        host::ca_ports_env(&mut cmd, port, repeater);
        let n = ctx.seq.fetch_add(1, Ordering::Relaxed);
        let log = ctx.dir.join(format!("ioc-{n}.log"));
        // SIGTERM: the IOC stops acquiring and exits cleanly.
        let proc = Proc::logged("ndflow IOC", cmd, &log)?
            .stopped_by(Signal::SIGTERM, Duration::from_secs(20));
        let client = Client::new(ClientConfig {
            addr_list: vec![SocketAddr::from(([127, 0, 0, 1], port))],
            auto_addr_list: false,
            server_port: port,
            ..ClientConfig::default()
        })
        .map_err(|e| format!("CA client: {e}"))?;
        let mut ioc = Ioc {
            proc,
            client,
            port,
            repeater,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            ioc.proc.check()?;
            if ioc.counter("cam1:ArrayCounter_RBV").is_ok() {
                return Ok(ioc);
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "the IOC did not serve CA within 30 s\n{}",
                    ioc.proc.log_tail(8)
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn counter(&self, pv: &str) -> Result<f64, String> {
        let name = format!("{IOC_PREFIX}{pv}");
        let r = self
            .client
            .get(&name, Duration::from_secs(15))
            .map_err(|e| format!("{name}: {e}"))?;
        as_f64(&r.value).ok_or_else(|| format!("{name}: not a number"))
    }

    /// A counter and when it was read (the middle of the get: under load a get can take a
    /// while, and the window must not include that wait).
    fn stamped(&self, pv: &str) -> Result<(f64, Instant), String> {
        let t0 = Instant::now();
        let v = self.counter(pv)?;
        Ok((v, t0 + t0.elapsed() / 2))
    }

    /// Driver frames/s (cam1:ArrayCounter_RBV) and StdArrays frames/s over `secs`.
    fn rate(&self, secs: f64) -> Result<(f64, f64), String> {
        let (c0, i0) = (
            self.stamped("cam1:ArrayCounter_RBV")?,
            self.stamped("image1:ArrayCounter_RBV")?,
        );
        std::thread::sleep(Duration::from_secs_f64(secs));
        let (c1, i1) = (
            self.stamped("cam1:ArrayCounter_RBV")?,
            self.stamped("image1:ArrayCounter_RBV")?,
        );
        let per_s = |a: (f64, Instant), b: (f64, Instant)| {
            let dt = b.1.duration_since(a.1).as_secs_f64();
            if dt > 0.0 {
                (b.0 - a.0) / dt
            } else {
                0.0
            }
        };
        Ok((per_s(c0, c1), per_s(i0, i1)))
    }
}

/// The (c) rows' reference: the free-running pipeline with no CA client.
const NO_CLIENT_REF: &str = "IOC pipeline, no CA client";

fn pipeline_row(path: String, rate: (f64, f64), note: String) -> Row {
    Row {
        group: "c",
        path,
        rate: rate.0,
        unit: "frames/s",
        gbps: Some(rate.0 * FRAME_BYTES as f64 / 1e9),
        reference: NO_CLIENT_REF,
        note: format!("image1 {:.0} frames/s; {note}", rate.1),
    }
}

/// (b) and (c) on one free-running IOC.
pub(super) fn free_running_rows(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    let mut ioc = Ioc::start(ctx, ctx.opts.acquire_period)?;
    let res = (|| -> Result<(), String> {
        std::thread::sleep(Duration::from_secs_f64(ctx.opts.warmup));
        // The no-client rate is the reference of every (c) row. It is measured before the
        // clients and again after they have gone, and the higher window is kept: this VM
        // has phases of a few seconds in which everything runs several times slower, and
        // one such phase in a single baseline window made the rows with clients look faster
        // than the pipeline alone (2.16x in one run).
        let before = ioc.rate(ctx.opts.seconds)?;
        rows.push(pipeline_row(
            NO_CLIENT_REF.into(),
            before,
            "free-running sim".into(),
        ));
        // (b) one pyepics client on image1:ArrayData; the pipeline rate meanwhile.
        let mut p = arrays_client(
            ctx,
            &format!("{IOC_PREFIX}image1:ArrayData"),
            ioc.port,
            ioc.repeater,
        )?;
        std::thread::sleep(Duration::from_secs_f64(ctx.opts.warmup + 1.0));
        let r1 = ioc.rate(ctx.opts.seconds);
        let j = p.json_line(ctx.client_timeout());
        p.finish(Duration::from_secs(5));
        let j = j?;
        rows.push(array_row(
            "IOC image1:ArrayData -> pyepics",
            &j,
            "posted per frame, each client keeps the latest".into(),
        ));
        rows.push(pipeline_row(
            "IOC pipeline, 1 ArrayData client".into(),
            r1?,
            String::new(),
        ));
        // (c) N client processes monitoring every PV: scalars only, then with ArrayData.
        let all = ioc_names()?;
        let scalars: Vec<String> = all
            .iter()
            .filter(|n| !n.ends_with("ArrayData"))
            .cloned()
            .collect();
        for (label, names) in [("every PV but ArrayData", &scalars), ("every PV", &all)] {
            rows.push(clients_row(ctx, &ioc, "c", label, names)?);
        }
        std::thread::sleep(Duration::from_secs_f64(ctx.opts.warmup));
        let after = ioc.rate(ctx.opts.seconds)?;
        rows[0] = pipeline_row(
            NO_CLIENT_REF.into(),
            if after.0 > before.0 { after } else { before },
            format!(
                "free-running sim; the better of two windows, before the clients {:.0} and after them {:.0} frames/s",
                before.0, after.0
            ),
        );
        Ok(())
    })();
    ioc.proc.stop();
    res.map(|()| rows)
}

/// The pipeline rate while `ctx.opts.clients` pyepics processes each monitor every PV of
/// `names` (what they receive counted, ArrayData apart).
fn clients_row(
    ctx: &Ctx,
    ioc: &Ioc,
    group: &'static str,
    label: &str,
    names: &[String],
) -> Result<Row, String> {
    let file = ctx.dir.join("ioc-names.txt");
    write_names(&file, names)?;
    let mut procs = Vec::new();
    for _ in 0..ctx.opts.clients {
        procs.push(ctx.python(
            "pyepics monitor (load)",
            &[
                "monitor".into(),
                file.display().to_string(),
                "0".into(),
                "0".into(),
                "ready".into(),
            ],
            Some((ioc.port, ioc.repeater)),
        )?);
    }
    let mut connected = 0.0;
    for p in &mut procs {
        connected += f(&p.json_line(Duration::from_secs(120))?, "ready");
    }
    std::thread::sleep(Duration::from_secs_f64(ctx.opts.warmup));
    let r = ioc.rate(ctx.opts.seconds);
    let (mut updates, mut frames) = (0.0, Vec::new());
    for p in &mut procs {
        p.close_stdin();
    }
    for p in &mut procs {
        if let Ok(j) = p.json_line(Duration::from_secs(20)) {
            updates += f(&j, "rate");
            frames.push(f(&j, "array_rate"));
        }
        p.finish(Duration::from_secs(5));
    }
    let prefix = if group == "d" {
        "paced IOC pipeline"
    } else {
        "IOC pipeline"
    };
    let path = format!("{prefix}, {} clients x {label}", ctx.opts.clients);
    let r = match r {
        Ok(r) => r,
        Err(e) => {
            // Recorded, not fatal: under this load the rate's own gets can time out.
            eprintln!("  {path}: not measured: {e}");
            (0.0, 0.0)
        }
    };
    let arrays = if frames.iter().any(|&x| x > 0.0) {
        let lo = frames.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = frames.iter().copied().fold(0.0, f64::max);
        format!(" (ArrayData {lo:.0}-{hi:.0} frames/s per client)")
    } else {
        String::new()
    };
    let mut row = pipeline_row(
        path,
        r,
        format!(
            "{} PVs each, {connected:.0} channels connected; clients got {updates:.0} updates/s in all{arrays}",
            names.len()
        ),
    );
    row.group = group;
    if group == "d" {
        row.reference = PACED_REF;
    }
    Ok(row)
}

/// AcquirePeriod of the paced rows: 100 frames/s, a rate the pipeline keeps with CPU to spare.
pub(super) const PACED_PERIOD: f64 = 0.01;
const PACED_REF: &str = "paced IOC pipeline, no CA client";

/// (d) the pipeline paced at 100 frames/s, alone and with the clients monitoring every PV
/// including ArrayData: whether CA clients cost frames when the IOC is not saturated.
pub(super) fn paced_rows(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    let mut ioc = Ioc::start(ctx, PACED_PERIOD)?;
    let res = (|| -> Result<(), String> {
        std::thread::sleep(Duration::from_secs_f64(ctx.opts.warmup));
        let mut r0 = pipeline_row(
            PACED_REF.into(),
            ioc.rate(ctx.opts.seconds)?,
            format!("AcquirePeriod {PACED_PERIOD}"),
        );
        r0.group = "d";
        r0.reference = PACED_REF;
        rows.push(r0);
        rows.push(clients_row(ctx, &ioc, "d", "every PV", &ioc_names()?)?);
        Ok(())
    })();
    ioc.proc.stop();
    res.map(|()| rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ioc_names_are_every_pv_of_its_ports() {
        let names = match ioc_names() {
            Ok(n) => n,
            Err(e) => panic!("{e}"),
        };
        for pv in [
            "cam1:ArrayCounter_RBV",
            "cam1:Acquire",
            "image1:ArrayData",
            "image1:ArrayCounter_RBV",
            "Stats1:MeanValue_RBV",
            "ROI1:MinX",
        ] {
            let name = format!("{IOC_PREFIX}{pv}");
            assert!(names.contains(&name), "{name} missing");
        }
        // The ports' PVs, and the IOC's own (NDFLOW:LogLevel).
        let ports = ["cam1:", "image1:", "Stats1:", "ROI1:", "NDFLOW:"];
        for n in &names {
            let rest = n.strip_prefix(IOC_PREFIX).unwrap_or_default();
            assert!(ports.iter().any(|p| rest.starts_with(p)), "{n}");
        }
        let mut unique = names.clone();
        unique.dedup();
        assert_eq!(unique.len(), names.len());
    }
}
