//! What the command-line clients (`ndflow ca …`, `ndflow pv …`) print, shared by both
//! protocols: arrays as their count and first elements, char waveforms as text, time stamps,
//! the "not found" message, and the line printer of `monitor`.

use std::io::Write;
use std::sync::mpsc::Receiver;
use std::time::{SystemTime, UNIX_EPOCH};

/// Elements of an array printed unless `-n` says otherwise.
pub const DEFAULT_ELEMENTS: usize = 10;

/// An array as `COUNT [e0 e1 …]`: its element count, then at most `limit` elements, `...` when
/// there are more (`limit` 0 prints the count and `[...]`).
pub fn array_text<I>(total: usize, elems: I, limit: usize) -> String
where
    I: IntoIterator,
    I::Item: std::fmt::Display,
{
    let shown: Vec<String> = elems
        .into_iter()
        .take(limit.min(total))
        .map(|e| e.to_string())
        .collect();
    let more = total > shown.len();
    match (shown.is_empty(), more) {
        (true, false) => format!("{total} []"),
        (true, true) => format!("{total} [...]"),
        (false, false) => format!("{total} [{}]", shown.join(" ")),
        (false, true) => format!("{total} [{} ...]", shown.join(" ")),
    }
}

/// A char waveform's bytes as the text it holds, as areaDetector's FilePath, FileName, …
/// (DBF_CHAR waveforms with a NUL-terminated string): `Some` when the bytes are printable
/// UTF-8 up to a NUL and only NULs after it. A zero-filled array longer than a path
/// (256 elements in ADCore's templates) is data, not an empty string.
pub fn char_text(b: &[u8]) -> Option<String> {
    let end = b.iter().position(|&x| x == 0)?;
    if b[end..].iter().any(|&x| x != 0) || (end == 0 && b.len() > 256) {
        return None;
    }
    let s = std::str::from_utf8(&b[..end]).ok()?;
    if s.chars().any(|c| c.is_control() && c != '\t') {
        return None;
    }
    Some(s.to_owned())
}

/// A time stamp as ISO 8601 UTC with microseconds: `2026-11-27T07:03:56.123456Z`.
pub fn stamp_text(t: SystemTime) -> String {
    let (secs, micros) = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (d.as_secs() as i64, d.subsec_micros()),
        Err(e) => {
            // Before 1970: whole seconds down, microseconds up.
            let d = e.duration();
            let mut s = -(d.as_secs() as i64);
            let mut us = d.subsec_micros();
            if us > 0 {
                s -= 1;
                us = 1_000_000 - us;
            }
            (s, us)
        }
    };
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = ndflow_core::calendar::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{micros:06}Z",
        sod / 3600,
        sod / 60 % 60,
        sod % 60
    )
}

/// Seconds and nanoseconds past the Unix epoch (pvAccess's `timeStamp`) as a time.
pub fn unix_time(secs: i64, nanos: i32) -> SystemTime {
    let nanos = u32::try_from(nanos.clamp(0, 999_999_999)).unwrap_or(0);
    let base = std::time::Duration::new(secs.unsigned_abs(), 0);
    let t = if secs >= 0 {
        UNIX_EPOCH + base
    } else {
        UNIX_EPOCH - base
    };
    t + std::time::Duration::from_nanos(u64::from(nanos))
}

/// Seconds for messages: `5`, `0.5`.
pub fn secs_text(s: f64) -> String {
    format!("{s}")
}

/// The message of a search that no server answered: which PV, how long, where the search
/// went and which variables change that. `protocol` is `CA` or `PVA`.
pub fn not_found(name: &str, timeout: f64, searched: &str, protocol: &str) -> String {
    format!(
        "{name}: not found within {} s: no server answered the search; searched: {searched}; \
         set EPICS_{protocol}_ADDR_LIST to the server's address (or its host's broadcast \
         address), or EPICS_{protocol}_NAME_SERVERS to search over TCP",
        secs_text(timeout)
    )
}

/// What a monitor thread hands to the printer: a line, or the error that ends the command.
pub type Update = Result<String, String>;

/// Prints the lines of the monitor threads as they come, until `count` lines (when given),
/// until every sender has gone, or until an error (returned). A closed stdout (`| head`) ends
/// it quietly.
pub fn print_updates(rx: &Receiver<Update>, count: Option<u64>) -> Result<(), String> {
    let stdout = std::io::stdout();
    for (printed, u) in (1u64..).zip(rx) {
        let line = u?;
        let mut out = stdout.lock();
        if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
            return Ok(());
        }
        if count.is_some_and(|c| printed >= c) {
            return Ok(());
        }
    }
    Ok(())
}

/// Prints `line` on stdout; false when stdout is closed.
pub fn print_line(line: &str) -> bool {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn arrays_print_their_count_and_first_elements() {
        assert_eq!(array_text(3, [1, 2, 3], 10), "3 [1 2 3]");
        assert_eq!(array_text(5, [1, 2, 3, 4, 5], 2), "5 [1 2 ...]");
        assert_eq!(array_text(5, [1, 2, 3, 4, 5], 0), "5 [...]");
        assert_eq!(array_text(0, Vec::<i32>::new(), 10), "0 []");
        assert_eq!(array_text(1_048_576, 0..3, 3), "1048576 [0 1 2 ...]");
        assert_eq!(array_text(2, [1.5, 2.0], 10), "2 [1.5 2]");
    }

    #[test]
    fn char_waveforms_with_text_are_text() {
        assert_eq!(char_text(b"/data/run1/\0").as_deref(), Some("/data/run1/"));
        assert_eq!(char_text(b"sim\0\0\0\0").as_deref(), Some("sim"));
        assert_eq!(char_text(b"\0").as_deref(), Some(""));
        assert_eq!(char_text(&[0u8; 256]).as_deref(), Some(""));
        assert_eq!(
            char_text("räksmörgås\0".as_bytes()).as_deref(),
            Some("räksmörgås")
        );
        // Data, not text: no NUL, bytes after the NUL, control bytes, a zeroed image.
        assert_eq!(char_text(b"abc"), None);
        assert_eq!(char_text(b"ab\0c"), None);
        assert_eq!(char_text(&[1, 2, 3, 0]), None);
        assert_eq!(char_text(&[0u8; 1024]), None);
        assert_eq!(char_text(&[0, 1, 2, 3]), None);
    }

    #[test]
    fn stamps_are_utc_iso8601() {
        assert_eq!(stamp_text(UNIX_EPOCH), "1970-01-01T00:00:00.000000Z");
        let t = UNIX_EPOCH + Duration::new(1_795_590_236, 123_456_789);
        assert_eq!(stamp_text(t), "2026-11-25T07:03:56.123456Z");
        // 2000-02-29 (a leap day) 12:00.
        assert_eq!(
            stamp_text(UNIX_EPOCH + Duration::from_secs(951_825_600)),
            "2000-02-29T12:00:00.000000Z"
        );
        // The EPICS epoch.
        assert_eq!(
            stamp_text(UNIX_EPOCH + Duration::from_secs(631_152_000)),
            "1990-01-01T00:00:00.000000Z"
        );
        assert_eq!(
            stamp_text(UNIX_EPOCH - Duration::from_micros(1)),
            "1969-12-31T23:59:59.999999Z"
        );
        assert_eq!(
            unix_time(951_825_600, 5_000),
            UNIX_EPOCH + Duration::new(951_825_600, 5_000)
        );
    }

    #[test]
    fn not_found_names_the_pv_the_destinations_and_the_variables() {
        let m = not_found("X:Y", 5.0, "udp 127.0.0.1:5064", "CA");
        assert_eq!(
            m,
            "X:Y: not found within 5 s: no server answered the search; searched: \
             udp 127.0.0.1:5064; set EPICS_CA_ADDR_LIST to the server's address (or its \
             host's broadcast address), or EPICS_CA_NAME_SERVERS to search over TCP"
        );
        assert!(not_found("X", 0.5, "nowhere", "PVA").contains("within 0.5 s"));
    }
}
