//! `ndflow pv get|put|wait`: a small pvAccess client for scripts (the scale-out launcher,
//! systemd units, a shell without EPICS installed). The server is found as for any pvAccess
//! client: EPICS_PVA_ADDR_LIST / EPICS_PVA_NAME_SERVERS / EPICS_PVA_BROADCAST_PORT.

use std::time::{Duration, Instant};

use ndflow_pva::client::{Client, PutValue};
use ndflow_pva::{FieldDesc, Value};

/// The `value` field of a normative-type PV as text: a number, a string, an enum's choice, or
/// for arrays the element count and the first elements.
pub fn value_text(desc: &FieldDesc, v: &Value) -> String {
    if let (Some(Value::I32(i)), Some(Value::StringArray(choices))) =
        (v.field(desc, "value.index"), v.field(desc, "value.choices"))
    {
        return usize::try_from(*i)
            .ok()
            .and_then(|i| choices.get(i).cloned())
            .unwrap_or_else(|| i.to_string());
    }
    match v.field(desc, "value").unwrap_or(v) {
        Value::Bool(b) => b.to_string(),
        Value::I8(x) => x.to_string(),
        Value::I16(x) => x.to_string(),
        Value::I32(x) => x.to_string(),
        Value::I64(x) => x.to_string(),
        Value::U8(x) => x.to_string(),
        Value::U16(x) => x.to_string(),
        Value::U32(x) => x.to_string(),
        Value::U64(x) => x.to_string(),
        Value::F32(x) => x.to_string(),
        Value::F64(x) => x.to_string(),
        Value::String(s) => s.clone(),
        Value::StringArray(s) => format!("[{}]", s.join(", ")),
        Value::Array(a) => format!("[{} elements]", a.len()),
        other => format!("{other:?}"),
    }
}

/// A put value from the command line: an integer or a float when it reads as one, else text
/// (an enum's choice name, a string).
fn put_value(s: &str) -> PutValue {
    if let Ok(i) = s.parse::<i64>() {
        PutValue::Int(i)
    } else if let Ok(f) = s.parse::<f64>() {
        PutValue::Float(f)
    } else {
        PutValue::Str(s.to_string())
    }
}

fn client() -> Result<Client, String> {
    Client::from_env().map_err(|e| format!("pvAccess client: {e}"))
}

/// Prints `NAME VALUE` for each PV.
pub fn get(names: &[String], timeout: f64) -> Result<(), String> {
    let c = client()?;
    for n in names {
        let (desc, v) = c
            .get(n, "", Duration::from_secs_f64(timeout))
            .map_err(|e| format!("{n}: {e}"))?;
        println!("{n} {}", value_text(&desc, &v));
    }
    Ok(())
}

pub fn put(name: &str, value: &str, timeout: f64) -> Result<(), String> {
    client()?
        .put(
            name,
            &[("value", put_value(value))],
            Duration::from_secs_f64(timeout),
        )
        .map_err(|e| format!("{name}: {e}"))
}

/// Waits until the PV's value reads as `want` (the same text `get` prints, or the same
/// number), polling every 50 ms; fails after `timeout` seconds with the last value seen.
pub fn wait(name: &str, want: &str, timeout: f64) -> Result<(), String> {
    let c = client()?;
    let deadline = Instant::now() + Duration::from_secs_f64(timeout);
    let want_num = want.parse::<f64>().ok();
    let mut last = String::from("(not connected)");
    while Instant::now() < deadline {
        let left = deadline.saturating_duration_since(Instant::now());
        if let Ok((desc, v)) = c.get(name, "", left.min(Duration::from_secs(2))) {
            last = value_text(&desc, &v);
            let num_eq = match (want_num, last.parse::<f64>()) {
                (Some(a), Ok(b)) => a == b,
                _ => false,
            };
            if last == want || num_eq {
                return Ok(());
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!(
        "{name}: still {last} after {timeout} s (waiting for {want})"
    ))
}
