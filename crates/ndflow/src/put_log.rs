//! The put log (what caPutLog gives an EPICS IOC): every write a client made that the IOC
//! accepted, one line each — time (UTC), protocol, user@host, PV, old → new value — to the
//! log (target `ndflow::put`, level info) and, with `--put-log FILE`, appended to a file.
//!
//! ```text
//! 2026-11-27T16:40:01.123Z pva alice@127.0.0.1 13SIM1:cam1:AcquireTime 0.001 -> 0.5
//! 2026-11-27T16:40:02.020Z ca bob@beamline-ws 13SIM1:HDF1:FilePath "/data/a" -> "/data/b"
//! ```
//!
//! Values print as in the JSON summary: numbers as numbers, menu entries and text quoted.
//! Refused writes are not in the put log (they changed nothing); they are logged at debug
//! level with the reason.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use ndflow_core::{ParamDef, ParamValue};
use parking_lot::Mutex;

use crate::pvdir::ClientInfo;

/// Where accepted writes are recorded besides the log.
pub struct PutLog {
    file: Option<(PathBuf, Mutex<File>)>,
}

impl PutLog {
    /// Log only (no file).
    pub fn log_only() -> PutLog {
        PutLog { file: None }
    }

    /// Appends to `path` (created if missing); an error names the file.
    pub fn open(path: &Path) -> Result<PutLog, String> {
        let f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("cannot open the put log {}: {e}", path.display()))?;
        Ok(PutLog {
            file: Some((path.to_path_buf(), Mutex::new(f))),
        })
    }

    /// Records one accepted write of `pv` by `client` from `old` to `new`.
    pub fn record(
        &self,
        pv: &str,
        def: &ParamDef,
        client: Option<&ClientInfo>,
        old: &ParamValue,
        new: &ParamValue,
    ) {
        let (old, new) = (def.to_json(old).to_string(), def.to_json(new).to_string());
        self.record_text(pv, client, &old, &new);
    }

    /// [`Self::record`] with the values already as text (a record field's write).
    pub fn record_text(&self, pv: &str, client: Option<&ClientInfo>, old: &str, new: &str) {
        let who = match client {
            Some(c) => format!(
                "{} {}@{}",
                if c.protocol.is_empty() {
                    "?"
                } else {
                    c.protocol
                },
                if c.user.is_empty() { "?" } else { &c.user },
                if c.host.is_empty() { "?" } else { &c.host }
            ),
            None => "? ?@?".to_string(),
        };
        let line = format!(
            "{} {who} {pv} {old} -> {new}",
            utc_millis(SystemTime::now())
        );
        tracing::info!(target: "ndflow::put", "{line}");
        if let Some((path, f)) = &self.file {
            let mut f = f.lock();
            if let Err(e) = writeln!(f, "{line}") {
                tracing::error!("cannot append to the put log {}: {e}", path.display());
            }
        }
    }
}

/// "2026-11-27T16:40:01.123Z".
fn utc_millis(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let (y, m, day, h, mi, s) = ndflow_core::calendar::utc_from_secs(d.as_secs() as i64);
    format!(
        "{y:04}-{m:02}-{day:02}T{h:02}:{mi:02}:{s:02}.{:03}Z",
        d.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn lines_name_who_what_and_both_values() {
        let dir = std::env::temp_dir().join(format!("ndflow-putlog-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("puts.log");
        let _ = std::fs::remove_file(&path);
        let log = PutLog::open(&path).expect("open");
        const MODE: ParamDef = ParamDef::enumeration("ImageMode", &["Single", "Multiple"], 0);
        const PATH: ParamDef = ParamDef::string("FilePath", "");
        let who = ClientInfo {
            host: "127.0.0.1".into(),
            user: "alice".into(),
            protocol: "pva",
        };
        log.record(
            "X:ImageMode",
            &MODE,
            Some(&who),
            &ParamValue::Int(0),
            &ParamValue::Int(1),
        );
        log.record(
            "X:FilePath",
            &PATH,
            None,
            &ParamValue::Str("/a".into()),
            &ParamValue::Str("/b c".into()),
        );
        let text = std::fs::read_to_string(&path).expect("read");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].ends_with(r#" pva alice@127.0.0.1 X:ImageMode "Single" -> "Multiple""#),
            "{text}"
        );
        assert!(
            lines[1].ends_with(r#" ? ?@? X:FilePath "/a" -> "/b c""#),
            "{text}"
        );
        // Appends, never truncates.
        drop(log);
        let again = PutLog::open(&path).expect("reopen");
        again.record(
            "X:FilePath",
            &PATH,
            None,
            &ParamValue::Str("/b c".into()),
            &ParamValue::Str("/d".into()),
        );
        assert_eq!(
            std::fs::read_to_string(&path)
                .expect("read")
                .lines()
                .count(),
            3
        );
        let _ = std::fs::remove_dir_all(&dir);
        assert!(PutLog::open(Path::new("/no/such/dir/puts.log"))
            .err()
            .is_some_and(|e| e.contains("/no/such/dir/puts.log")));
    }

    #[test]
    fn time_is_utc_with_milliseconds() {
        let t = UNIX_EPOCH + Duration::from_millis(1_795_000_000_123);
        assert_eq!(utc_millis(t), "2026-11-18T11:06:40.123Z");
    }
}
