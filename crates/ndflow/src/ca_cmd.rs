//! `ndflow ca get|put|monitor`: a Channel Access client for scripts and shells without EPICS
//! base, on crates/ndflow-ca's client. Servers are found as libca finds them:
//! EPICS_CA_ADDR_LIST, EPICS_CA_AUTO_ADDR_LIST (default YES: the interfaces' broadcast
//! addresses), EPICS_CA_NAME_SERVERS (TCP), EPICS_CA_SERVER_PORT; EPICS_CA_MAX_ARRAY_BYTES
//! bounds arrays.
//!
//! Values print as areaDetector users read them: enums as their strings (DBR_CTRL_ENUM), char
//! waveforms holding text (FilePath, FileName, …) as the text, arrays as their count and first
//! elements.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use ndflow_ca::client::ChannelInfo;
use ndflow_ca::header::eca;
use ndflow_ca::value::MAX_STRING_SIZE;
use ndflow_ca::{
    CaValue, Client, ClientConfig, ClientError, DbrType, Family, NativeType, Reading, Values,
};

use crate::cli_fmt::{self, array_text, char_text, print_line, stamp_text};

/// Options shared by the commands.
#[derive(Clone, Copy, Debug)]
pub struct Opts {
    /// Seconds to find a PV (and for an operation to complete).
    pub timeout: f64,
    /// Array elements printed.
    pub elements: usize,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            timeout: 5.0,
            elements: cli_fmt::DEFAULT_ELEMENTS,
        }
    }
}

/// The client and the configuration it was built from (for messages).
struct Ca {
    client: Client,
    cfg: ClientConfig,
    opts: Opts,
}

impl Ca {
    fn new(opts: Opts) -> Result<Ca, String> {
        if !(opts.timeout.is_finite() && opts.timeout > 0.0 && opts.timeout < 1e6) {
            return Err(format!(
                "--timeout {}: expected seconds above 0",
                opts.timeout
            ));
        }
        let mut cfg = ClientConfig::from_env();
        cfg.connect_timeout = Duration::from_secs_f64(opts.timeout);
        let client = Client::new(cfg.clone()).map_err(|e| format!("Channel Access client: {e}"))?;
        Ok(Ca { client, cfg, opts })
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.opts.timeout)
    }

    /// A failure as the user should read it, naming the PV.
    fn error(&self, name: &str, e: ClientError) -> String {
        match e {
            ClientError::NotFound(_) => cli_fmt::not_found(
                name,
                self.opts.timeout,
                &self.cfg.describe_destinations(),
                "CA",
            ),
            ClientError::Timeout => format!(
                "{name}: the server did not answer within {} s",
                cli_fmt::secs_text(self.opts.timeout)
            ),
            ClientError::NoWriteAccess => format!("{name}: no write access"),
            e if e.eca() == Some(eca::TOLARGE) => format!(
                "{name}: the array is larger than the server's EPICS_CA_MAX_ARRAY_BYTES allows"
            ),
            ClientError::Disconnected => format!(
                "{name}: the server closed the connection (an array larger than \
                 EPICS_CA_MAX_ARRAY_BYTES={}? raise it)",
                self.cfg.max_array_bytes
            ),
            e => format!("{name}: {e}"),
        }
    }

    fn info(&self, name: &str) -> Result<ChannelInfo, String> {
        self.client
            .info(name, self.timeout())
            .map_err(|e| self.error(name, e))
    }

    /// An enum's strings (DBR_CTRL_ENUM); empty for other types.
    fn enum_strings(&self, name: &str, info: &ChannelInfo) -> Result<Vec<String>, String> {
        if info.native != NativeType::Enum {
            return Ok(Vec::new());
        }
        self.client
            .get_as(
                name,
                DbrType::new(Family::Ctrl, NativeType::Enum),
                self.timeout(),
            )
            .map(|r| r.info.enum_strings)
            .map_err(|e| self.error(name, e))
    }

    /// Elements to ask for: all (0 = the current count), unless the whole array would not fit
    /// EPICS_CA_MAX_ARRAY_BYTES, then only those printed.
    fn read_count(&self, info: &ChannelInfo) -> u32 {
        let bytes = (info.count as usize).saturating_mul(info.native.elem_size());
        if bytes + 64 > self.cfg.max_array_bytes {
            u32::try_from(self.opts.elements.clamp(1, info.count.max(1) as usize)).unwrap_or(1)
        } else {
            0
        }
    }

    /// `NAME VALUE`.
    fn get_line(&self, name: &str) -> Result<String, String> {
        let info = self.info(name)?;
        let strings = self.enum_strings(name, &info)?;
        let count = self.read_count(&info);
        let dbr = DbrType::new(Family::Time, info.native);
        let r = match self.client.get_count(name, dbr, count, self.timeout()) {
            // The server's limit is lower than ours: only what is printed.
            Err(e) if e.eca() == Some(eca::TOLARGE) && count == 0 => {
                let n = u32::try_from(self.opts.elements.clamp(1, info.count.max(1) as usize))
                    .unwrap_or(1);
                self.client.get_count(name, dbr, n, self.timeout())
            }
            r => r,
        }
        .map_err(|e| self.error(name, e))?;
        let total = if count == 0 {
            r.values.len()
        } else {
            info.count as usize
        };
        Ok(format!(
            "{name} {}",
            value_text(&info, &r.values, &strings, total, self.opts.elements)
        ))
    }
}

/// The text of a value: enums as their string (the index when the server names none), char
/// waveforms holding text as that text, arrays (a channel of more than one element) as
/// `COUNT [e0 e1 …]` with at most `limit` elements, scalars as themselves. `total` is the
/// array's element count when fewer elements were read.
pub fn value_text(
    info: &ChannelInfo,
    values: &Values,
    enum_strings: &[String],
    total: usize,
    limit: usize,
) -> String {
    let array = info.count > 1;
    let total = total.max(values.len());
    match values {
        Values::Enum(v) if !array => match v.first() {
            Some(&i) => enum_strings
                .get(usize::from(i))
                .filter(|s| !s.is_empty())
                .cloned()
                .unwrap_or_else(|| i.to_string()),
            None => String::new(),
        },
        Values::Char(b) if array => match char_text(b) {
            Some(t) if total == b.len() => t,
            _ => array_text(total, b, limit),
        },
        Values::String(v) if !array => v.first().cloned().unwrap_or_default(),
        _ if !array && values.len() == 1 => scalar_text(values),
        Values::String(v) => array_text(total, v, limit),
        Values::Short(v) => array_text(total, v, limit),
        Values::Float(v) => array_text(total, v, limit),
        Values::Enum(v) => array_text(total, v, limit),
        Values::Char(v) => array_text(total, v, limit),
        Values::Long(v) => array_text(total, v, limit),
        Values::Double(v) => array_text(total, v, limit),
    }
}

fn scalar_text(values: &Values) -> String {
    match values {
        Values::String(v) => v.first().cloned(),
        Values::Short(v) => v.first().map(|x| x.to_string()),
        Values::Float(v) => v.first().map(|x| x.to_string()),
        Values::Enum(v) => v.first().map(|x| x.to_string()),
        Values::Char(v) => v.first().map(|x| x.to_string()),
        Values::Long(v) => v.first().map(|x| x.to_string()),
        Values::Double(v) => v.first().map(|x| x.to_string()),
    }
    .unwrap_or_default()
}

/// The value to write for `text` into a channel: an enum takes one of its strings or an index;
/// a char waveform takes text (stored NUL-terminated); a DBR_STRING at most 39 bytes; numbers
/// one number, or for an array channel several (separated by spaces or commas).
pub fn put_value(
    info: &ChannelInfo,
    text: &str,
    enum_strings: &[String],
) -> Result<CaValue, String> {
    let array = info.count > 1;
    match info.native {
        NativeType::Enum => {
            if let Some(i) = enum_strings.iter().position(|s| s == text) {
                return u16::try_from(i)
                    .map(CaValue::Enum)
                    .map_err(|_| format!("{text:?}: too many choices"));
            }
            match text.trim().parse::<u16>() {
                Ok(i) if enum_strings.is_empty() || usize::from(i) < enum_strings.len() => {
                    Ok(CaValue::Enum(i))
                }
                _ => Err(format!(
                    "{text:?} is not one of {} (or an index 0 to {})",
                    enum_strings
                        .iter()
                        .map(|s| format!("{s:?}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    enum_strings.len().saturating_sub(1)
                )),
            }
        }
        NativeType::Char if array => {
            let mut b = text.as_bytes().to_vec();
            b.push(0);
            if b.len() > info.count as usize {
                return Err(format!(
                    "the text is {} bytes; the waveform holds at most {}",
                    text.len(),
                    info.count.saturating_sub(1)
                ));
            }
            Ok(CaValue::Char(b))
        }
        NativeType::String => {
            if text.len() >= MAX_STRING_SIZE {
                return Err(format!(
                    "the text is {} bytes; a DBR_STRING holds at most {}",
                    text.len(),
                    MAX_STRING_SIZE - 1
                ));
            }
            Ok(CaValue::String(text.to_owned()))
        }
        _ => {
            let parts: Vec<&str> = if array {
                text.split(|c: char| c.is_whitespace() || c == ',')
                    .filter(|s| !s.is_empty())
                    .collect()
            } else {
                vec![text.trim()]
            };
            if parts.len() > info.count.max(1) as usize {
                return Err(format!(
                    "{} values; the channel holds at most {}",
                    parts.len(),
                    info.count
                ));
            }
            let integer = !matches!(info.native, NativeType::Float | NativeType::Double);
            let ints: Option<Vec<i32>> = if integer {
                parts.iter().map(|p| p.parse::<i32>().ok()).collect()
            } else {
                None
            };
            if let Some(v) = ints {
                return Ok(CaValue::Long(v));
            }
            let floats: Result<Vec<f64>, String> = parts
                .iter()
                .map(|p| {
                    p.parse::<f64>()
                        .ok()
                        .filter(|x| x.is_finite() || !integer)
                        .ok_or_else(|| format!("{p:?} is not a number"))
                })
                .collect();
            Ok(CaValue::Double(floats?))
        }
    }
}

/// Prints `NAME VALUE` for each PV.
pub fn get(names: &[String], opts: Opts) -> Result<(), String> {
    let ca = Ca::new(opts)?;
    for n in names {
        if !print_line(&ca.get_line(n)?) {
            break;
        }
    }
    Ok(())
}

/// How long a put without `--wait` waits for its completion: a refusal (bad value, out of
/// range, read-only) comes back at once, while a busy record's operation (Acquire, Capture)
/// may last any time and is left running.
const PUT_GRACE: Duration = Duration::from_millis(500);

/// Writes `value` (see [`put_value`]) as a put with completion (WRITE_NOTIFY), so that a
/// refusal is reported. With `wait`, returns when the server has finished (a busy record such
/// as Acquire: when the operation has ended; `timeout` bounds it); without, returns once the
/// put is applied, or after [`PUT_GRACE`] when it started an operation still running (as
/// `caput` without `-c` would).
pub fn put(name: &str, value: &str, wait: bool, opts: Opts) -> Result<(), String> {
    let ca = Ca::new(opts)?;
    let info = ca.info(name)?;
    if !info.write {
        return Err(format!("{name}: no write access"));
    }
    let strings = ca.enum_strings(name, &info)?;
    let v = put_value(&info, value, &strings).map_err(|e| format!("{name}: {e}"))?;
    let t = if wait {
        ca.timeout()
    } else {
        ca.timeout().min(PUT_GRACE)
    };
    match ca.client.put(name, v, true, t) {
        Ok(()) => Ok(()),
        // Applied; the operation it started goes on.
        Err(ClientError::Timeout) if !wait => Ok(()),
        Err(ClientError::Timeout) => Err(format!(
            "{name}: the put did not complete within {} s",
            cli_fmt::secs_text(opts.timeout)
        )),
        Err(e)
            if e.eca()
                .is_some_and(|c| c != eca::NOWTACCESS && c != eca::TOLARGE) =>
        {
            Err(format!("{name}: the server refused {value:?} ({e})"))
        }
        Err(e) => Err(ca.error(name, e)),
    }
}

/// Prints `NAME TIMESTAMP VALUE` for every update of every PV (the current value first) until
/// Ctrl-C, or until `count` lines. A PV that disconnects is reported on stderr and subscribed
/// again when its server is back.
pub fn monitor(names: &[String], count: Option<u64>, opts: Opts) -> Result<(), String> {
    let ca = Arc::new(Ca::new(opts)?);
    let (tx, rx) = mpsc::channel::<cli_fmt::Update>();
    for n in names {
        let info = ca.info(n)?;
        let strings = ca.enum_strings(n, &info)?;
        let sub = ca.subscribe(n, &info)?;
        let (ca, tx, name) = (Arc::clone(&ca), tx.clone(), n.clone());
        std::thread::Builder::new()
            .name(format!("ca monitor {n}"))
            .spawn(move || ca.forward(&name, info, &strings, sub, &tx))
            .map_err(|e| format!("cannot start a thread: {e}"))?;
    }
    drop(tx);
    cli_fmt::print_updates(&rx, count)
}

impl Ca {
    fn subscribe(&self, name: &str, info: &ChannelInfo) -> Result<ndflow_ca::Subscription, String> {
        let dbr = DbrType::new(Family::Time, info.native);
        self.client
            .monitor_as(
                name,
                Some(dbr),
                ndflow_ca::header::DBE_VALUE | ndflow_ca::header::DBE_ALARM,
            )
            .map_err(|e| self.error(name, e))
    }

    fn line(&self, name: &str, info: &ChannelInfo, strings: &[String], r: &Reading) -> String {
        let stamp = r.stamp.map_or_else(|| "-".to_owned(), stamp_text);
        let v = value_text(info, &r.values, strings, r.values.len(), self.opts.elements);
        format!("{name} {stamp} {v}")
    }

    /// One PV's updates into `tx`, re-subscribing after a disconnect, until the printer is gone.
    fn forward(
        &self,
        name: &str,
        info: ChannelInfo,
        strings: &[String],
        mut sub: ndflow_ca::Subscription,
        tx: &mpsc::Sender<cli_fmt::Update>,
    ) {
        loop {
            for u in &mut sub {
                let msg = match u {
                    Ok(r) => Ok(self.line(name, &info, strings, &r)),
                    Err(ClientError::Disconnected) => break,
                    Err(e) => Err(self.error(name, e)),
                };
                let fatal = msg.is_err();
                if tx.send(msg).is_err() || fatal {
                    return;
                }
            }
            eprintln!("{name}: disconnected; waiting for the server");
            loop {
                std::thread::sleep(Duration::from_millis(500));
                if let Ok(s) = self.subscribe(name, &info) {
                    sub = s;
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(native: NativeType, count: u32) -> ChannelInfo {
        ChannelInfo {
            native,
            count,
            read: true,
            write: true,
        }
    }

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn enums_print_their_strings() {
        let modes = s(&["Single", "Multiple", "Continuous"]);
        let i = info(NativeType::Enum, 1);
        assert_eq!(
            value_text(&i, &Values::Enum(vec![1]), &modes, 1, 10),
            "Multiple"
        );
        // No string for the index: the index.
        assert_eq!(value_text(&i, &Values::Enum(vec![7]), &modes, 1, 10), "7");
        assert_eq!(value_text(&i, &Values::Enum(vec![0]), &[], 1, 10), "0");
    }

    #[test]
    fn char_waveforms_print_their_text() {
        let i = info(NativeType::Char, 256);
        let mut b = b"/tmp/ndflow-data/".to_vec();
        b.push(0);
        let n = b.len();
        assert_eq!(
            value_text(&i, &Values::Char(b), &[], n, 10),
            "/tmp/ndflow-data/"
        );
        // A byte image is an array.
        let img = Values::Char((0..=255u8).cycle().take(1000).collect());
        assert_eq!(
            value_text(&info(NativeType::Char, 1000), &img, &[], 1000, 4),
            "1000 [0 1 2 3 ...]"
        );
    }

    #[test]
    fn arrays_print_count_and_n_elements() {
        let i = info(NativeType::Short, 1_048_576);
        let v = Values::Short((0..20).collect());
        // Only 20 read of 1048576 (EPICS_CA_MAX_ARRAY_BYTES).
        assert_eq!(value_text(&i, &v, &[], 1_048_576, 3), "1048576 [0 1 2 ...]");
        assert_eq!(
            value_text(
                &info(NativeType::Double, 4),
                &Values::Double(vec![0.5, 1.0, 2.0, 3.0]),
                &[],
                4,
                10
            ),
            "4 [0.5 1 2 3]"
        );
        assert_eq!(
            value_text(
                &info(NativeType::Long, 4),
                &Values::Long(vec![1, 2]),
                &[],
                2,
                0
            ),
            "2 [...]"
        );
        // Scalars.
        assert_eq!(
            value_text(
                &info(NativeType::Double, 1),
                &Values::Double(vec![0.25]),
                &[],
                1,
                10
            ),
            "0.25"
        );
        assert_eq!(
            value_text(
                &info(NativeType::String, 1),
                &Values::String(s(&["hello world"])),
                &[],
                1,
                10
            ),
            "hello world"
        );
    }

    #[test]
    fn puts_take_enum_strings_or_indexes_and_text() {
        let modes = s(&["Single", "Multiple", "Continuous"]);
        let e = info(NativeType::Enum, 1);
        assert_eq!(put_value(&e, "Continuous", &modes), Ok(CaValue::Enum(2)));
        assert_eq!(put_value(&e, "1", &modes), Ok(CaValue::Enum(1)));
        let err = put_value(&e, "Sometimes", &modes).unwrap_err();
        assert!(
            err.contains("\"Single\", \"Multiple\", \"Continuous\""),
            "{err}"
        );
        assert!(put_value(&e, "3", &modes).is_err());
        let w = info(NativeType::Char, 8);
        assert_eq!(
            put_value(&w, "/tmp/x", &[]),
            Ok(CaValue::Char(b"/tmp/x\0".to_vec()))
        );
        assert!(
            put_value(&w, "/tmp/xyz", &[]).is_err(),
            "7 bytes + NUL > 8 is refused"
        );
        let st = info(NativeType::String, 1);
        assert_eq!(
            put_value(&st, "abc", &[]),
            Ok(CaValue::String("abc".into()))
        );
        assert!(put_value(&st, &"x".repeat(40), &[]).is_err());
    }

    #[test]
    fn puts_of_numbers() {
        let l = info(NativeType::Long, 1);
        assert_eq!(put_value(&l, "42", &[]), Ok(CaValue::Long(vec![42])));
        assert_eq!(put_value(&l, "2.5", &[]), Ok(CaValue::Double(vec![2.5])));
        assert!(put_value(&l, "abc", &[])
            .unwrap_err()
            .contains("not a number"));
        assert!(put_value(&l, "inf", &[]).is_err());
        let d = info(NativeType::Double, 1);
        assert_eq!(
            put_value(&d, " 1e-3 ", &[]),
            Ok(CaValue::Double(vec![1e-3]))
        );
        let a = info(NativeType::Double, 3);
        assert_eq!(
            put_value(&a, "1, 2 3", &[]),
            Ok(CaValue::Double(vec![1.0, 2.0, 3.0]))
        );
        assert!(put_value(&a, "1 2 3 4", &[]).is_err());
    }
}
