//! `ndflow pv get|put|wait|monitor`: a small pvAccess client for scripts (the scale-out
//! launcher, systemd units, a shell without EPICS installed). The server is found as for any
//! pvAccess client: EPICS_PVA_ADDR_LIST, EPICS_PVA_AUTO_ADDR_LIST (default YES: the
//! interfaces' broadcast addresses), EPICS_PVA_BROADCAST_PORT, EPICS_PVA_NAME_SERVERS (TCP).

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ndflow_pva::client::{Client, ClientError, MonitorEvent, MonitorOptions, PutValue};
use ndflow_pva::{FieldDesc, NumArray, ScalarType, Value};

use crate::cli_fmt::{self, array_text, print_line, stamp_text};

/// The `value` field of a normative-type PV as text: a number, a string, an enum's choice, or
/// for arrays the element count and the first elements ([`cli_fmt::DEFAULT_ELEMENTS`]).
pub fn value_text(desc: &FieldDesc, v: &Value) -> String {
    value_text_n(desc, v, cli_fmt::DEFAULT_ELEMENTS)
}

/// [`value_text`] printing at most `limit` array elements: `COUNT [e0 e1 ...]`.
pub fn value_text_n(desc: &FieldDesc, v: &Value, limit: usize) -> String {
    if let (Some(Value::I32(i)), Some(Value::StringArray(choices))) =
        (v.field(desc, "value.index"), v.field(desc, "value.choices"))
    {
        return usize::try_from(*i)
            .ok()
            .and_then(|i| choices.get(i).cloned())
            .unwrap_or_else(|| i.to_string());
    }
    plain_text(v.field(desc, "value").unwrap_or(v), limit)
}

fn plain_text(v: &Value, limit: usize) -> String {
    match v {
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
        Value::StringArray(s) => array_text(s.len(), s, limit),
        Value::Array(a) => num_array_text(a, limit),
        // NTNDArray's value: the member array.
        Value::Union(Some(m)) => plain_text(&m.1, limit),
        Value::Union(None) => "(empty)".into(),
        Value::Any(Some(m)) => plain_text(&m.1, limit),
        Value::Any(None) => "(empty)".into(),
        Value::Structure(_) => "(structure)".into(),
        Value::StructureArray(a) => format!("{} structures", a.len()),
        Value::UnionArray(a) => format!("{} unions", a.len()),
        Value::AnyArray(a) => format!("{} values", a.len()),
    }
}

/// A numeric array as `COUNT [e0 e1 ...]`.
fn num_array_text(a: &NumArray, limit: usize) -> String {
    fn first<T: ndflow_pva::wire::value::Element + std::fmt::Display>(
        a: &NumArray,
        limit: usize,
    ) -> String {
        let n = a.len();
        let size = std::mem::size_of::<T>();
        let bytes = a.bytes_in(ndflow_pva::ByteOrder::NATIVE);
        let elems = bytes
            .chunks_exact(size)
            .take(limit)
            .map(bytemuck::pod_read_unaligned::<T>);
        array_text(n, elems, limit)
    }
    match a.scalar_type() {
        ScalarType::Bool => array_text(a.len(), a.to_bools().unwrap_or_default(), limit),
        ScalarType::I8 => first::<i8>(a, limit),
        ScalarType::I16 => first::<i16>(a, limit),
        ScalarType::I32 => first::<i32>(a, limit),
        ScalarType::I64 => first::<i64>(a, limit),
        ScalarType::U8 => first::<u8>(a, limit),
        ScalarType::U16 => first::<u16>(a, limit),
        ScalarType::U32 => first::<u32>(a, limit),
        ScalarType::U64 => first::<u64>(a, limit),
        ScalarType::F32 => first::<f32>(a, limit),
        ScalarType::F64 => first::<f64>(a, limit),
        ScalarType::String => format!("{} elements", a.len()),
    }
}

/// The PV's `timeStamp` (NTScalar, NTEnum, NTNDArray, …) as text; `-` when it has none.
fn stamp_of(desc: &FieldDesc, v: &Value) -> String {
    let secs = match v.field(desc, "timeStamp.secondsPastEpoch") {
        Some(Value::I64(s)) => *s,
        _ => return "-".into(),
    };
    let nanos = match v.field(desc, "timeStamp.nanoseconds") {
        Some(Value::I32(n)) => *n,
        _ => 0,
    };
    stamp_text(cli_fmt::unix_time(secs, nanos))
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

fn client(timeout: f64) -> Result<Client, String> {
    if !(timeout.is_finite() && timeout > 0.0 && timeout < 1e6) {
        return Err(format!("--timeout {timeout}: expected seconds above 0"));
    }
    Client::from_env().map_err(|e| format!("pvAccess client: {e}"))
}

/// A failure as the user should read it, naming the PV.
fn error(c: &Client, name: &str, timeout: f64, e: ClientError) -> String {
    if e.is_not_found() {
        cli_fmt::not_found(name, timeout, &c.config().describe_destinations(), "PVA")
    } else {
        format!("{name}: {e}")
    }
}

/// Prints `NAME VALUE` for each PV, arrays with at most `elements` elements.
pub fn get(names: &[String], timeout: f64, elements: usize) -> Result<(), String> {
    let c = client(timeout)?;
    for n in names {
        let (desc, v) = c
            .get(n, "", Duration::from_secs_f64(timeout))
            .map_err(|e| error(&c, n, timeout, e))?;
        if !print_line(&format!("{n} {}", value_text_n(&desc, &v, elements))) {
            break;
        }
    }
    Ok(())
}

/// Writes `value`: a number, or text (an enum's choice, which an index also selects).
pub fn put(name: &str, value: &str, timeout: f64) -> Result<(), String> {
    let c = client(timeout)?;
    c.put(
        name,
        &[("value", put_value(value))],
        Duration::from_secs_f64(timeout),
    )
    .map_err(|e| error(&c, name, timeout, e))
}

/// Prints `NAME TIMESTAMP VALUE` for every update of every PV (the current value first) until
/// Ctrl-C, or until `count` lines. A PV that disconnects is reported on stderr; the client
/// subscribes again when its server is back.
pub fn monitor(
    names: &[String],
    count: Option<u64>,
    timeout: f64,
    elements: usize,
) -> Result<(), String> {
    let c = Arc::new(client(timeout)?);
    let (tx, rx) = mpsc::channel::<cli_fmt::Update>();
    for n in names {
        let m = c
            .monitor(n, MonitorOptions::default())
            .map_err(|e| error(&c, n, timeout, e))?;
        // Connected, or not found in time.
        let deadline = Instant::now() + Duration::from_secs_f64(timeout);
        let mut desc = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match m.recv(left) {
                Ok(MonitorEvent::Connected(d)) => break d,
                Ok(MonitorEvent::Disconnected) | Ok(MonitorEvent::Data { .. }) => continue,
                Ok(MonitorEvent::Failed(e)) => return Err(format!("{n}: {e}")),
                Ok(MonitorEvent::Finished) => return Err(format!("{n}: the server ended it")),
                Err(ClientError::Timeout(_)) => {
                    return Err(cli_fmt::not_found(
                        n,
                        timeout,
                        &c.config().describe_destinations(),
                        "PVA",
                    ))
                }
                Err(e) => return Err(format!("{n}: {e}")),
            }
        };
        let (tx, name, _client) = (tx.clone(), n.clone(), Arc::clone(&c));
        let forward = move || loop {
            let msg = match m.recv(Duration::from_secs(3600)) {
                Ok(MonitorEvent::Connected(d)) => {
                    desc = d;
                    continue;
                }
                Ok(MonitorEvent::Data { value, .. }) => Ok(format!(
                    "{name} {} {}",
                    stamp_of(&desc, &value),
                    value_text_n(&desc, &value, elements)
                )),
                Ok(MonitorEvent::Disconnected) => {
                    eprintln!("{name}: disconnected; waiting for the server");
                    continue;
                }
                Ok(MonitorEvent::Failed(e)) => Err(format!("{name}: {e}")),
                Ok(MonitorEvent::Finished) | Err(ClientError::Closed(_)) => return,
                Err(ClientError::Timeout(_)) => continue,
                Err(e) => Err(format!("{name}: {e}")),
            };
            let fatal = msg.is_err();
            if tx.send(msg).is_err() || fatal {
                return;
            }
        };
        std::thread::Builder::new()
            .name(format!("pva monitor {n}"))
            .spawn(forward)
            .map_err(|e| format!("cannot start a thread: {e}"))?;
    }
    drop(tx);
    cli_fmt::print_updates(&rx, count)
}

/// Waits until the PV's value reads as `want` (the same text `get` prints, or the same
/// number), polling every 50 ms; fails after `timeout` seconds with the last value seen.
pub fn wait(name: &str, want: &str, timeout: f64) -> Result<(), String> {
    let c = client(timeout)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use ndflow_pva::nt;

    #[test]
    fn arrays_print_count_and_n_elements() {
        let desc = FieldDesc::ScalarArray(ScalarType::U16);
        let v = Value::Array(NumArray::from_slice(&(0u16..1000).collect::<Vec<_>>()));
        assert_eq!(value_text_n(&desc, &v, 3), "1000 [0 1 2 ...]");
        assert_eq!(value_text_n(&desc, &v, 0), "1000 [...]");
        let v = Value::Array(NumArray::from_slice(&[0.5f64, 2.0]));
        assert_eq!(
            value_text_n(&FieldDesc::ScalarArray(ScalarType::F64), &v, 10),
            "2 [0.5 2]"
        );
        let v = Value::StringArray(vec!["a".into(), "b".into(), "c".into()]);
        assert_eq!(
            value_text_n(&FieldDesc::ScalarArray(ScalarType::String), &v, 2),
            "3 [a b ...]"
        );
        assert_eq!(
            value_text_n(&FieldDesc::Scalar(ScalarType::F64), &Value::F64(0.25), 2),
            "0.25"
        );
    }

    #[test]
    fn enums_print_their_choice_and_stamps_come_from_time_stamp() {
        let d = nt::enumeration::desc();
        let mut v = nt::enumeration::value(2, &["Single", "Multiple", "Continuous"]);
        assert_eq!(value_text_n(&d, &v, 10), "Continuous");
        let ts = nt::TimeStamp {
            seconds_past_epoch: 951_825_600,
            nanoseconds: 250_000_000,
            user_tag: 0,
        };
        nt::set_time_stamp(&d, &mut v, ts);
        assert_eq!(stamp_of(&d, &v), "2000-02-29T12:00:00.250000Z");
        let d = nt::scalar::desc(ScalarType::String);
        let v = nt::scalar::value(ScalarType::String, Value::String("/tmp/data/".into()));
        assert_eq!(value_text_n(&d, &v, 10), "/tmp/data/");
        assert_eq!(
            stamp_of(&FieldDesc::Scalar(ScalarType::F64), &Value::F64(1.0)),
            "-"
        );
    }
}
