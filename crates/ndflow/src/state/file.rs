//! The state file on disk: its format, reading it, and replacing it atomically.
//!
//! The format is the config's: TOML with one table per port, keyed by port name, holding
//! `Key = value` as a config file's `[[port]]` would (enums by their choice's name):
//!
//! ```toml
//! # ndflow saved settings ...
//! [SIM1]
//! AcquireTime = 0.25
//! ImageMode = "Continuous"
//!
//! [ROI1]
//! MinX = 10
//! ```
//!
//! A save writes a temporary file beside the state file, flushes it to disk, renames it over
//! the state file and flushes the directory: a crash at any moment leaves the old file or the
//! new one, never a part of either.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use ndflow_core::{ParamDef, ParamKind, ParamValue};
use toml_edit::{Document, DocumentMut, Item, Table, Value};

/// One saved `Key = value` of a port.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub port: String,
    pub key: String,
    pub value: ParamValue,
    /// The value as the file writes it (for messages).
    pub text: String,
    pub line: usize,
}

/// A saved key that is not restored, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub line: Option<usize>,
    pub port: String,
    pub key: String,
    /// The value as the file writes it.
    pub value: String,
    pub reason: String,
}

impl Problem {
    /// Where and what: `FILE:LINE: port 'P': key 'K' = V` (the caller adds the reason).
    pub fn at(&self, file: &Path) -> String {
        let line = self.line.map_or(String::new(), |l| format!(":{l}"));
        format!(
            "{}{line}: port '{}': key '{}' = {}",
            file.display(),
            self.port,
            self.key,
            self.value
        )
    }
}

/// The entries of a state file, and the keys that are not settings at all (a nested table, an
/// array value).
#[derive(Debug, Default)]
pub struct Parsed {
    pub entries: Vec<Entry>,
    pub problems: Vec<Problem>,
}

/// Reads a state file's text. `Err` when it is not TOML (the whole file is unusable); a key
/// that TOML reads but that cannot be a setting is a [`Problem`] and the rest is kept.
pub fn parse(text: &str) -> Result<Parsed, String> {
    let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
    let doc = Document::parse(text.to_string()).map_err(|e| {
        let at = e
            .span()
            .map_or(String::new(), |s| format!("line {}: ", line_of(s.start)));
        format!("{at}{}", e.message().trim())
    })?;
    let mut out = Parsed::default();
    let span_line = |item: Option<std::ops::Range<usize>>| item.map(|s| line_of(s.start));
    for (port, item) in doc.iter() {
        let Some(table) = item.as_table() else {
            out.problems.push(Problem {
                line: span_line(item.span()),
                port: port.to_string(),
                key: String::new(),
                value: value_text(item),
                reason: format!("expected a table [{port}] of the port's settings"),
            });
            continue;
        };
        for (key, item) in table.iter() {
            let line = span_line(
                table
                    .key(key)
                    .and_then(|k| k.span())
                    .or_else(|| item.span()),
            );
            let value = match item.as_value() {
                Some(Value::Integer(i)) => Some(ParamValue::Int(*i.value())),
                Some(Value::Float(f)) => Some(ParamValue::Float(*f.value())),
                Some(Value::String(s)) => Some(ParamValue::Str(s.value().clone())),
                Some(Value::Boolean(b)) => Some(ParamValue::Int(*b.value() as i64)),
                _ => None,
            };
            let text = value_text(item);
            match value {
                Some(value) => out.entries.push(Entry {
                    port: port.to_string(),
                    key: key.to_string(),
                    value,
                    text,
                    line: line.unwrap_or(0),
                }),
                None => out.problems.push(Problem {
                    line,
                    port: port.to_string(),
                    key: key.to_string(),
                    value: text,
                    reason: "value must be a number, string or boolean".into(),
                }),
            }
        }
    }
    Ok(out)
}

/// An item as the file writes it, trimmed (tables as `{…}`).
fn value_text(item: &Item) -> String {
    match item.as_value() {
        Some(v) => v.to_string().trim().to_string(),
        None => "{…}".into(),
    }
}

/// The value of parameter `def` as the file writes it: enums by their choice's name (or
/// position, where the name is empty or not unique), numbers and strings as they are. `None`
/// for what a file cannot hold (arrays, an enum value no choice stands for).
pub fn saved_value(def: &ParamDef, v: &ParamValue) -> Option<Value> {
    match (&def.kind, v) {
        (ParamKind::Array(_), _) | (_, ParamValue::Array(_)) => None,
        (ParamKind::Enum(choices), ParamValue::Int(i)) => {
            let pos = def.menu_index(*i)?;
            let name = *choices.get(usize::try_from(pos).ok()?)?;
            let unique = choices.iter().filter(|c| **c == name).count() == 1;
            if !name.trim().is_empty() && unique {
                Some(Value::from(name))
            } else {
                Some(Value::from(pos))
            }
        }
        (_, ParamValue::Int(i)) => Some(Value::from(*i)),
        (_, ParamValue::Float(f)) => Some(Value::from(*f)),
        (_, ParamValue::Str(s)) => Some(Value::from(s.as_str())),
    }
}

/// `value` as a message shows it (TOML syntax, as in the file).
pub fn shown(def: &ParamDef, value: &ParamValue) -> String {
    saved_value(def, value).map_or_else(|| value.to_string(), |v| v.to_string().trim().into())
}

/// The text of a state file holding `ports` (port name, then its keys and values, in the order
/// given); `config` names the config it belongs to, in the header.
pub fn render(config: &str, ports: &[(String, Vec<(String, Value)>)]) -> String {
    let mut doc = DocumentMut::new();
    for (port, keys) in ports.iter().filter(|(_, k)| !k.is_empty()) {
        let mut t = Table::new();
        for (k, v) in keys {
            t.insert(k, Item::Value(v.clone()));
        }
        doc.insert(port, Item::Table(t));
    }
    format!(
        "# ndflow saved settings of {config}: the settings that differ from what it gives.\n\
         # Written by `ndflow run` (docs/state.md); `ndflow state show|diff|clear` read it.\n\
         # Edit it only while the IOC is stopped.\n\n{doc}"
    )
}

/// Where a save writes before the rename: beside the state file (a rename is atomic only
/// within one file system).
pub fn tmp_path(path: &Path) -> PathBuf {
    sibling(path, ".tmp")
}

/// Where an unreadable state file is moved.
pub fn bad_path(path: &Path) -> PathBuf {
    sibling(path, ".bad")
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

/// The directory holding `path` (`.` for a bare file name).
fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Flushes a directory's entries (a rename or removal in it) to disk.
fn sync_dir(dir: &Path) -> io::Result<()> {
    match File::open(dir).and_then(|d| d.sync_all()) {
        // Some file systems cannot sync a directory; the rename itself is still atomic.
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::InvalidInput | io::ErrorKind::Unsupported
            ) =>
        {
            Ok(())
        }
        r => r,
    }
}

/// Replaces `path` with `bytes` so that a crash leaves the old file or the new one: writes
/// the temporary file, syncs it, renames it over `path`, syncs the directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = tmp_path(path);
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, path)?;
        sync_dir(dir_of(path))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Removes `path` (and a temporary file a crash left), durably; `Ok(false)` when there was
/// none.
pub fn remove(path: &Path) -> io::Result<bool> {
    let _ = fs::remove_file(tmp_path(path));
    match fs::remove_file(path) {
        Ok(()) => sync_dir(dir_of(path)).map(|()| true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether a save could write into `path`'s directory now (creates and removes the
/// temporary file).
pub fn probe_writable(path: &Path) -> io::Result<()> {
    let tmp = tmp_path(path);
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)?;
    fs::remove_file(&tmp)
}

/// What reading a state file found.
#[derive(Debug)]
pub enum Loaded {
    /// No file: nothing saved yet.
    Missing,
    /// The file's text and what it holds.
    Found { text: String, parsed: Parsed },
    /// Not TOML (or not UTF-8): the reason.
    Corrupt(String),
    /// The file exists but cannot be read (permissions, I/O).
    Unreadable(io::Error),
}

pub fn read(path: &Path) -> Loaded {
    match fs::read(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Loaded::Missing,
        Err(e) => Loaded::Unreadable(e),
        Ok(bytes) => match String::from_utf8(bytes) {
            Err(_) => Loaded::Corrupt("not UTF-8 text".into()),
            Ok(text) => match parse(&text) {
                Ok(parsed) => Loaded::Found { text, parsed },
                Err(e) => Loaded::Corrupt(e),
            },
        },
    }
}

/// Moves an unreadable state file to [`bad_path`] (replacing an older one there), so that the
/// next save does not overwrite what someone may want to look at.
pub fn set_aside(path: &Path) -> io::Result<PathBuf> {
    let bad = bad_path(path);
    fs::rename(path, &bad)?;
    sync_dir(dir_of(path))?;
    Ok(bad)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndflow_io::test_dir::Dir;

    fn def(kind: ParamKind) -> ParamDef {
        let mut d = ParamDef::int32("X", 0);
        d.kind = kind;
        d
    }

    #[test]
    fn values_round_trip_through_the_file() {
        let menu: &'static [&'static str] = &["Single", "Multiple", "Continuous"];
        let cases = [
            (def(ParamKind::Int32), ParamValue::Int(-7)),
            (def(ParamKind::Int64), ParamValue::Int(1 << 40)),
            (def(ParamKind::Float64), ParamValue::Float(0.1 + 0.2)),
            (def(ParamKind::Float64), ParamValue::Float(1e300)),
            (def(ParamKind::Float64), ParamValue::Float(f64::INFINITY)),
            (def(ParamKind::Float64), ParamValue::Float(3.0)),
            (
                def(ParamKind::String),
                ParamValue::Str("a \"q\" \\ é\n\t".into()),
            ),
            (def(ParamKind::String), ParamValue::Str(String::new())),
            (def(ParamKind::Enum(menu)), ParamValue::Int(2)),
        ];
        let keys: Vec<(String, Value)> = cases
            .iter()
            .enumerate()
            .map(|(i, (d, v))| (format!("K{i}"), saved_value(d, v).unwrap()))
            .collect();
        let text = render("ioc.toml", &[("SIM1".into(), keys)]);
        let parsed = parse(&text).unwrap();
        assert!(parsed.problems.is_empty());
        assert_eq!(parsed.entries.len(), cases.len());
        for (e, (d, v)) in parsed.entries.iter().zip(&cases) {
            assert_eq!(e.port, "SIM1");
            // Through the declaration, as a restore does: the same stored value.
            assert_eq!(&d.coerce(e.value.clone()).unwrap(), v, "{}", e.text);
        }
        assert_eq!(
            parsed.entries[8].value,
            ParamValue::Str("Continuous".into())
        );
        // NaN is not equal to itself: checked apart.
        let nan = saved_value(&def(ParamKind::Float64), &ParamValue::Float(f64::NAN)).unwrap();
        let parsed = parse(&render("c", &[("P".into(), vec![("N".into(), nan)])])).unwrap();
        assert!(matches!(parsed.entries[0].value, ParamValue::Float(f) if f.is_nan()));
    }

    #[test]
    fn odd_port_and_key_names_are_quoted() {
        let text = render(
            "c",
            &[(
                "ATTR PLOT.1".into(),
                vec![("Y1:DataSelect0".into(), Value::from(2))],
            )],
        );
        let e = &parse(&text).unwrap().entries[0];
        assert_eq!(
            (e.port.as_str(), e.key.as_str()),
            ("ATTR PLOT.1", "Y1:DataSelect0")
        );
    }

    #[test]
    fn enums_without_a_usable_name_are_saved_by_position() {
        let blank: &'static [&'static str] = &["", ""];
        let d = def(ParamKind::Enum(blank));
        assert_eq!(
            saved_value(&d, &ParamValue::Int(1)).unwrap().as_integer(),
            Some(1)
        );
        let arr = def(ParamKind::Array(ndflow_core::DataType::UInt8));
        assert!(saved_value(&arr, &ParamValue::Int(1)).is_none());
    }

    #[test]
    fn keys_that_cannot_be_settings_are_problems_and_the_rest_is_kept() {
        let text = "Loose = 3\n[SIM1]\nAcquireTime = 0.5\nList = [1, 2]\n[SIM1.Sub]\nX = 1\n";
        let p = parse(text).unwrap();
        assert_eq!(p.entries.len(), 1);
        assert_eq!(p.entries[0].key, "AcquireTime");
        assert_eq!(p.entries[0].line, 3);
        let keys: Vec<&str> = p.problems.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(keys, ["", "List", "Sub"]);
        assert_eq!(p.problems[1].line, Some(4));
        assert_eq!(
            p.problems[1].at(Path::new("s.toml")),
            "s.toml:4: port 'SIM1': key 'List' = [1, 2]"
        );
    }

    #[test]
    fn a_file_that_is_not_toml_is_an_error_naming_the_line() {
        let e = parse("[SIM1]\nAcquireTime = 0.5\nMinX = = 3\n").unwrap_err();
        assert!(e.starts_with("line 3: "), "{e}");
        assert!(parse("[A]\nX = 1\nX = 2\n").is_err(), "duplicate keys");
    }

    #[test]
    fn atomic_write_replaces_and_leaves_no_temporary() {
        let d = Dir::new("atomic");
        let p = d.0.join("ioc.state.toml");
        write_atomic(&p, b"[A]\nX = 1\n").unwrap();
        write_atomic(&p, b"[A]\nX = 2\n").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "[A]\nX = 2\n");
        assert_eq!(d.entries(), ["ioc.state.toml"]);
        assert!(remove(&p).unwrap());
        assert!(!remove(&p).unwrap());
        assert!(d.entries().is_empty());
    }

    #[test]
    fn a_stale_temporary_from_a_crash_does_not_matter() {
        let d = Dir::new("stale");
        let p = d.0.join("s.toml");
        fs::write(&p, "[A]\nX = 1\n").unwrap();
        fs::write(tmp_path(&p), "[A]\nX = ").unwrap();
        assert!(matches!(read(&p), Loaded::Found { .. }));
        write_atomic(&p, b"[A]\nX = 3\n").unwrap();
        assert_eq!(d.entries(), ["s.toml"]);
    }

    #[test]
    fn reading_tells_missing_corrupt_and_found_apart() {
        let d = Dir::new("read");
        let p = d.0.join("s.toml");
        assert!(matches!(read(&p), Loaded::Missing));
        fs::write(&p, [0xff, 0xfe, b'[']).unwrap();
        assert!(matches!(read(&p), Loaded::Corrupt(_)));
        fs::write(&p, "[A\n").unwrap();
        assert!(matches!(read(&p), Loaded::Corrupt(_)));
        let bad = set_aside(&p).unwrap();
        assert_eq!(bad, d.0.join("s.toml.bad"));
        assert!(!p.exists() && bad.exists());
        fs::write(&p, "[A]\nX = 1\n").unwrap();
        assert!(matches!(read(&p), Loaded::Found { parsed, .. } if parsed.entries.len() == 1));
    }

    #[test]
    fn a_directory_that_cannot_be_written_is_an_error_not_a_panic() {
        let p = Path::new("/proc/ndflow-no-such-dir/s.toml");
        assert!(write_atomic(p, b"x").is_err());
        assert!(probe_writable(p).is_err());
    }
}
