//! `pva_get NAME [--request "field(value)"] [--timeout SECONDS] [--type]`
//!
//! Reads one pvAccess channel and prints its value tree (`--type`: its type). Configured from the
//! EPICS_PVA_* environment like pvget; in tests source scripts/loopback.env first.

use std::process::ExitCode;
use std::time::Duration;

use ndflow_pva::client::Client;
use ndflow_pva::{FieldDesc, Value};

fn usage() -> ExitCode {
    eprintln!("usage: pva_get NAME [--request REQ] [--timeout SECONDS] [--type]");
    ExitCode::from(2)
}

/// One line per leaf: `path = value`; arrays show their length and first elements.
fn print_tree(desc: &FieldDesc, v: &Value, path: &str) {
    match (desc, v) {
        (FieldDesc::Structure(m), Value::Structure(vals)) => {
            for ((name, d), fv) in m.fields.iter().zip(vals) {
                let p = if path.is_empty() {
                    name.clone()
                } else {
                    format!("{path}.{name}")
                };
                print_tree(d, fv, &p);
            }
        }
        (_, Value::Array(a)) => {
            println!("{path} = {:?}[{}]{}", a.scalar_type(), a.len(), preview(a))
        }
        (_, Value::Union(Some(b))) => {
            let member = desc
                .members()
                .and_then(|m| m.fields.get(b.0))
                .map(|(n, d)| (n.clone(), d.clone()));
            match member {
                Some((n, d)) => print_tree(&d, &b.1, &format!("{path}.{n}")),
                None => println!("{path} = ?"),
            }
        }
        (_, Value::StructureArray(el)) => println!("{path} = [{} elements]", el.len()),
        (_, other) => println!("{path} = {}", scalar_text(other)),
    }
}

fn preview(a: &ndflow_pva::NumArray) -> String {
    let b = a.bytes_in(ndflow_pva::ByteOrder::NATIVE);
    let n = a.scalar_type().size().unwrap_or(1);
    let shown: Vec<String> = b
        .chunks_exact(n)
        .take(8)
        .map(|c| format!("{c:02x?}"))
        .collect();
    if shown.is_empty() {
        String::new()
    } else {
        format!(" bytes {}…", shown.join(" "))
    }
}

fn scalar_text(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::StringArray(a) => format!("{a:?}"),
        Value::Any(Some(b)) => scalar_text(&b.1),
        Value::Any(None) | Value::Union(None) => "(empty)".into(),
        other => other
            .as_f64()
            .map(|x| x.to_string())
            .unwrap_or_else(|| format!("{other:?}")),
    }
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (mut name, mut request, mut timeout, mut show_type) = (None, String::new(), 5.0, false);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--request" => match args.next() {
                Some(r) => request = r,
                None => return usage(),
            },
            "--timeout" => match args.next().and_then(|t| t.parse::<f64>().ok()) {
                Some(t) if t > 0.0 && t < 1e6 => timeout = t,
                _ => return usage(),
            },
            "--type" => show_type = true,
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
            eprintln!("pva_get: {e}");
            return ExitCode::from(2);
        }
    };
    match client.get(&name, &request, Duration::from_secs_f64(timeout)) {
        Ok((desc, value)) => {
            if show_type {
                println!("{desc:#?}");
            }
            println!("{name} ({})", desc.type_id());
            print_tree(&desc, &value, "");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("pva_get: {name}: {e}");
            ExitCode::FAILURE
        }
    }
}
