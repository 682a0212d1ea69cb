//! `pva_monitor NAME [--count N] [--pipeline] [--queue N] [--request REQ] [--timeout SECONDS]`
//!
//! Subscribes to a pvAccess channel and prints one line per update: for an NTNDArray its
//! uniqueId, dimensions and value size, otherwise its `value` field. Stops after `--count`
//! updates (default: never) and exits non-zero when no update arrives within `--timeout`
//! (default 10 s). Configured from the EPICS_PVA_* environment; in tests source
//! scripts/loopback.env first.

use std::process::ExitCode;
use std::time::Duration;

use ndflow_pva::client::{Client, MonitorEvent, MonitorOptions};
use ndflow_pva::nt::ntndarray::NtNdArray;
use ndflow_pva::{FieldDesc, Value};

fn usage() -> ExitCode {
    eprintln!(
        "usage: pva_monitor NAME [--count N] [--pipeline] [--queue N] [--request REQ] \
         [--timeout SECONDS]"
    );
    ExitCode::from(2)
}

fn line(desc: &FieldDesc, v: &Value) -> String {
    if desc.type_id().starts_with("epics:nt/NTNDArray") {
        if let Ok(f) = NtNdArray::from_value(desc, v) {
            let dims: Vec<String> = f.dimension.iter().map(|d| d.size.to_string()).collect();
            let (ty, bytes) = f
                .value
                .as_ref()
                .map(|a| (format!("{:?}", a.scalar_type()), a.bytes().len()))
                .unwrap_or_else(|| ("none".into(), 0));
            return format!(
                "uniqueId={} dims=[{}] type={ty} size={bytes}{}",
                f.unique_id,
                dims.join(","),
                if f.codec_name.is_empty() {
                    String::new()
                } else {
                    format!(" codec={}", f.codec_name)
                }
            );
        }
    }
    match v.field(desc, "value") {
        Some(Value::String(s)) => format!("value={s:?}"),
        Some(Value::Structure(_)) => {
            match (v.field(desc, "value.index"), v.field(desc, "value.choices")) {
                (Some(i), Some(Value::StringArray(c))) => {
                    let i = i.as_f64().unwrap_or(-1.0) as i64;
                    let name = usize::try_from(i)
                        .ok()
                        .and_then(|i| c.get(i))
                        .cloned()
                        .unwrap_or_default();
                    format!("value={i} ({name})")
                }
                _ => "value=(structure)".into(),
            }
        }
        Some(Value::Array(a)) => format!("value={:?}[{}]", a.scalar_type(), a.len()),
        Some(other) => match other.as_f64() {
            Some(x) => format!("value={x}"),
            None => format!("value={other:?}"),
        },
        None => format!("{v:?}"),
    }
}

fn num(args: &mut impl Iterator<Item = String>) -> Option<f64> {
    args.next().and_then(|s| s.parse::<f64>().ok())
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut name = None;
    let mut count: Option<u64> = None;
    let mut timeout = 10.0;
    let mut opts = MonitorOptions::default();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--count" => match num(&mut args) {
                Some(n) if n >= 1.0 => count = Some(n as u64),
                _ => return usage(),
            },
            "--queue" => match num(&mut args) {
                Some(n) if (1.0..=1e6).contains(&n) => opts.queue_size = n as u32,
                _ => return usage(),
            },
            "--timeout" => match num(&mut args) {
                Some(t) if t > 0.0 && t < 1e6 => timeout = t,
                _ => return usage(),
            },
            "--pipeline" => opts.pipeline = true,
            "--request" => match args.next() {
                Some(r) => opts.request = r,
                None => return usage(),
            },
            _ if a.starts_with('-') || name.is_some() => return usage(),
            _ => name = Some(a),
        }
    }
    let Some(name) = name else {
        return usage();
    };
    let client = match Client::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("pva_monitor: {e}");
            return ExitCode::from(2);
        }
    };
    let m = match client.monitor(&name, opts) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("pva_monitor: {name}: {e}");
            return ExitCode::from(2);
        }
    };
    let mut seen = 0u64;
    let mut desc: Option<std::sync::Arc<FieldDesc>> = None;
    while count.is_none_or(|c| seen < c) {
        match m.recv(Duration::from_secs_f64(timeout)) {
            Ok(MonitorEvent::Connected(d)) => {
                eprintln!("{name} connected ({})", d.type_id());
                desc = Some(d);
            }
            Ok(MonitorEvent::Data { value, overrun, .. }) => {
                seen += 1;
                let text = desc.as_deref().map(|d| line(d, &value)).unwrap_or_default();
                let over = if overrun.is_empty() { "" } else { " (overrun)" };
                println!("{name} {text}{over}");
            }
            Ok(MonitorEvent::Disconnected) => eprintln!("{name} disconnected"),
            Ok(MonitorEvent::Finished) => {
                eprintln!("{name}: the server ended the subscription");
                break;
            }
            Ok(MonitorEvent::Failed(msg)) => {
                eprintln!("pva_monitor: {name}: subscription refused: {msg}");
                return ExitCode::FAILURE;
            }
            Err(e) => {
                eprintln!("pva_monitor: {name}: {e} (after {seen} updates)");
                return ExitCode::FAILURE;
            }
        }
    }
    let st = m.stats();
    eprintln!(
        "{name}: {seen} updates, {} bytes, {} overrun, {} squashed locally",
        st.bytes, st.overrun_updates, st.squashed
    );
    ExitCode::SUCCESS
}
