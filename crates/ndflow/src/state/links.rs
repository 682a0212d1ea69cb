//! The link fields in the config and the state file: what ADCore's request files save of the
//! link records (`PositionXLink.DOL` of each overlay, ADBase's `ShutterOpenEPICS.OUT`/`.OCAL`,
//! `ShutterStatusEPICS_RBV.INP`/`.ZRVL`/`.ONVL`), with `.OMSL` besides. Keyed
//! `"RECORD.FIELD"` in the port's table. The links live in the PV directory, which exists
//! once the servers start: the config's are applied then ([`apply_config`]), the saved ones
//! after them ([`super::saver::Saver::attach_links`]), through the same checks as a client's
//! write; until then (or for good, with no server) the state file's entries are carried over
//! unchanged.

use std::sync::Arc;

use ndflow_core::{LinkKind, ParamStore};
use ndflow_core::{ParamDef, ParamValue};
use parking_lot::Mutex;
use toml_edit::Value;

use super::file::{Entry, Problem};
use crate::config::{Config, ConfigError, PortConfig};
use crate::links::{parse_link, LinkName, DEFAULT_OMSL, DEFAULT_ONVL, DEFAULT_ZRVL, OMSL_MENU};
use crate::pvdir::{faces, link_field_of, PvDirectory};
use crate::record_fields::RecordField;

/// The fields saved, in the order a port's table lists them.
const FIELDS: [RecordField; 7] = [
    RecordField::Dol,
    RecordField::Omsl,
    RecordField::Inp,
    RecordField::Zrvl,
    RecordField::Onvl,
    RecordField::Out,
    RecordField::Ocal,
];

/// Why link fields are not applied in an IOC without PV servers.
pub const NEED_SERVERS: &str = "link records are served only with pvAccess or Channel Access on";

/// Whether a state file key names a link field (`RECORD.FIELD`; parameter names have no dot).
pub fn is_link_key(key: &str) -> bool {
    key.contains('.')
}

/// Checks `key` (`RECORD.FIELD`) against the parameters of a port: the record must be a link
/// record and the field one of its link fields. The error lists what the port has.
pub fn check_key(store: &ParamStore, key: &str) -> Result<(), String> {
    let keys: Vec<String> = store
        .defs()
        .iter()
        .flat_map(|d| link_keys(d).into_iter().map(|(_, k)| k))
        .collect();
    if keys.iter().any(|k| k == key) {
        return Ok(());
    }
    Err(if keys.is_empty() {
        format!("no link field '{key}': this port has no link records")
    } else {
        format!("no link field '{key}' (link fields: {})", listed(&keys))
    })
}

/// The first few keys of a list (an overlay port has 128), and how many there are.
fn listed<S: AsRef<str>>(keys: &[S]) -> String {
    const SHOWN: usize = 6;
    let n = keys.len();
    // Cut only where it saves more than it costs.
    let shown = if n > SHOWN + 2 { SHOWN } else { n };
    let first: Vec<&str> = keys.iter().take(shown).map(|k| k.as_ref()).collect();
    if shown < n {
        format!("{}, … {n} in all", first.join(", "))
    } else {
        first.join(", ")
    }
}

/// The field a link key names (`RECORD.FIELD` → FIELD).
fn field_of(key: &str) -> Option<RecordField> {
    key.rsplit_once('.')
        .and_then(|(_, f)| RecordField::parse(f))
        .filter(|f| f.is_link())
}

/// Checks a config's, `--set`'s or a state file's link field setting: the key as
/// [`check_key`] does, and the value as the field's write will (ZRVL/ONVL integers, OMSL a
/// menu choice, OCAL a number, the links a PV name or, for an input, a number; `pva://`
/// refused). What needs the running IOC (a link naming its own record) is checked then.
pub fn check_setting(store: &ParamStore, key: &str, value: &ParamValue) -> Result<(), String> {
    check_key(store, key)?;
    let field = field_of(key).ok_or_else(|| format!("no link field '{key}'"))?;
    coerce(field, value)
        .map(|_| ())
        .map_err(|m| format!("{key} {m}"))
}

/// A link field's value in the form its write takes: ZRVL/ONVL and OMSL an integer (from a
/// number or its text, OMSL from its choice too), OCAL and the links text. The error says
/// what the field takes.
fn coerce(field: RecordField, value: &ParamValue) -> Result<ParamValue, String> {
    let int = match value {
        ParamValue::Int(i) => Some(*i),
        ParamValue::Str(s) => s.trim().parse::<i64>().ok(),
        _ => None,
    };
    match field {
        RecordField::Zrvl | RecordField::Onvl => int
            .map(ParamValue::Int)
            .ok_or_else(|| "takes an integer".to_string()),
        RecordField::Omsl => {
            let by_name = match value {
                ParamValue::Str(s) => OMSL_MENU.iter().position(|m| *m == s.trim()),
                _ => None,
            };
            by_name
                .map(|i| i as i64)
                .or(int.filter(|i| (0..OMSL_MENU.len() as i64).contains(i)))
                .map(ParamValue::Int)
                .ok_or_else(|| format!("takes one of {}", OMSL_MENU.join(", ")))
        }
        // Served as the text of the number it holds (the calcout's expression is a constant).
        RecordField::Ocal => match value {
            ParamValue::Str(s) => s.trim().parse::<f64>().ok(),
            ParamValue::Int(i) => Some(*i as f64),
            ParamValue::Float(x) => Some(*x),
            ParamValue::Array(_) => None,
        }
        .map(|x| ParamValue::Str(x.to_string()))
        .ok_or_else(|| "takes a number (OCAL here is a constant)".to_string()),
        _ => {
            let text = match value {
                ParamValue::Str(s) => s.trim().to_string(),
                ParamValue::Int(i) => i.to_string(),
                ParamValue::Float(x) => x.to_string(),
                ParamValue::Array(_) => return Err("takes a PV name".into()),
            };
            match parse_link(&text)? {
                Some(LinkName::Constant(_)) if field == RecordField::Out => {
                    Err("takes a PV name: an output link names a PV, not a number".into())
                }
                _ => Ok(ParamValue::Str(text)),
            }
        }
    }
}

/// A coerced value as the file holds it (and [`value_now`] reads it back).
fn file_value(field: RecordField, coerced: ParamValue) -> Value {
    match (field, coerced) {
        (RecordField::Omsl, ParamValue::Int(i)) => {
            let name = usize::try_from(i).ok().and_then(|i| OMSL_MENU.get(i));
            name.map_or_else(|| Value::from(i), |n| Value::from(*n))
        }
        (_, ParamValue::Int(i)) => Value::from(i),
        (_, ParamValue::Float(x)) => Value::from(x),
        (_, ParamValue::Str(s)) => Value::from(s),
        (_, ParamValue::Array(_)) => Value::from(""),
    }
}

/// A link field's value before anything sets it (what [`crate::links::Links::new`] gives).
fn default_value(kind: LinkKind, field: RecordField) -> Value {
    let v = match (field, kind) {
        (RecordField::Omsl, _) => ParamValue::Int(DEFAULT_OMSL),
        (RecordField::Zrvl, _) => ParamValue::Int(DEFAULT_ZRVL),
        (RecordField::Onvl, _) => ParamValue::Int(DEFAULT_ONVL),
        (RecordField::Ocal, LinkKind::Output { ocal, .. }) => ParamValue::Str(ocal.to_string()),
        _ => ParamValue::Str(String::new()),
    };
    file_value(field, v)
}

/// A port's link field `key` as the config leaves it: the config's (or `--set`'s) value, else
/// the default. `None` when the key names no link field of the port.
pub fn config_value(store: &ParamStore, port: &PortConfig, key: &str) -> Option<Value> {
    let (def, field) = store.defs().iter().find_map(|d| {
        let (f, _) = link_keys(d).into_iter().find(|(_, k)| k == key)?;
        Some((d, f))
    })?;
    Some(configured(port, key, field).unwrap_or_else(|| default_value(def.link, field)))
}

/// The config's value of link field `key` of `port`, as the file would hold it.
fn configured(port: &PortConfig, key: &str, field: RecordField) -> Option<Value> {
    let s = port.settings.iter().rev().find(|s| s.key == key)?;
    coerce(field, &s.value).ok().map(|v| file_value(field, v))
}

/// A state file's value of link field `key`, as the file would hold it once applied (`None`:
/// not a value the field takes).
pub fn saved_value(key: &str, value: &ParamValue) -> Option<Value> {
    let field = field_of(key)?;
    coerce(field, value).ok().map(|v| file_value(field, v))
}

/// Applies the config's link field settings (checked at build by [`check_setting`]) to the
/// PV directory, before the state file's are ([`LiveLinks`] takes these as the baseline).
/// Returns how many; an error is the config's, naming its line.
pub fn apply_config(dir: &Arc<PvDirectory>, cfg: &Config) -> Result<usize, ConfigError> {
    let entries: Vec<Entry> = cfg
        .ports
        .iter()
        .flat_map(|p| {
            p.settings
                .iter()
                .filter(|s| is_link_key(&s.key))
                .map(|s| Entry {
                    port: p.name.clone(),
                    key: s.key.clone(),
                    value: s.value.clone(),
                    text: String::new(),
                    line: s.line,
                })
        })
        .collect();
    if entries.is_empty() {
        return Ok(0);
    }
    let (applied, problems) = LiveLinks::new(dir.clone(), cfg).restore(&entries);
    match problems.into_iter().next() {
        Some(p) => Err(ConfigError {
            file: cfg.file.clone(),
            line: p.line,
            port: Some(p.port),
            key: Some(p.key),
            message: p.reason,
        }),
        None => Ok(applied),
    }
}

/// Whether the config sets any link field.
pub fn in_config(cfg: &Config) -> bool {
    cfg.ports
        .iter()
        .any(|p| p.settings.iter().any(|s| is_link_key(&s.key)))
}

/// The link fields of one parameter's records, with their keys (`RECORD.FIELD`); none for a
/// parameter that is no link record. An output's fields are on each of its PVs: the first
/// (the setpoint, as the directory lists a slot's entries) names them.
fn link_keys(d: &ParamDef) -> Vec<(RecordField, String)> {
    if d.link == LinkKind::None {
        return Vec::new();
    }
    let names = faces(d);
    FIELDS
        .into_iter()
        .filter_map(|f| {
            let (record, _) = names
                .iter()
                .find(|(_, face)| link_field_of(d.link, *face, f))?;
            Some((f, format!("{record}.{}", f.name())))
        })
        .collect()
}

/// One saved link field of the directory.
struct Field {
    port: String,
    key: String,
    entry: usize,
    field: RecordField,
    /// Its value as the config leaves it (its default if the config does not set it).
    baseline: Value,
}

/// A link field's value as the file holds it: the link's text, OMSL by name, ZRVL/ONVL as
/// integers, OCAL as text.
fn value_now(dir: &PvDirectory, entry: usize, f: RecordField) -> Value {
    let v = match f {
        RecordField::Omsl | RecordField::Zrvl | RecordField::Onvl => {
            ParamValue::Int(dir.field(entry, f))
        }
        // OCAL is a calcout's expression: text, as its record serves it.
        _ => ParamValue::Str(dir.field_text(entry, f)),
    };
    file_value(f, v)
}

/// Equal as the file writes them.
pub fn same(a: &Value, b: &Value) -> bool {
    a.to_string().trim() == b.to_string().trim()
}

/// Applies a saved value to a link field, as a client's write would (without a client:
/// access rules are for clients).
fn apply(dir: &PvDirectory, entry: usize, f: RecordField, v: &ParamValue) -> Result<(), String> {
    let result = Arc::new(Mutex::new(None));
    let r2 = result.clone();
    let done: crate::pvdir::PutDone = Box::new(move |r| *r2.lock() = Some(r));
    match coerce(f, v)? {
        ParamValue::Int(i) => dir.put_field(entry, f, i, None, false, done),
        ParamValue::Str(s) => dir.put_field_text(entry, f, &s, None, done),
        _ => return Err("not a link field's value".into()),
    }
    let r = result.lock().take();
    r.unwrap_or_else(|| Err("the write did not complete".into()))
}

/// The link fields of a running directory, with their values at start.
pub struct LiveLinks {
    dir: Arc<PvDirectory>,
    fields: Vec<Field>,
}

impl LiveLinks {
    /// Every link field of the ports of `cfg` in `dir` (in the config's order), with the
    /// value the config gives it (or its default) as the baseline: not the directory's value
    /// now, which a client may already have changed.
    pub fn new(dir: Arc<PvDirectory>, cfg: &Config) -> LiveLinks {
        let mut fields = Vec::new();
        for pc in &cfg.ports {
            let port = &pc.name;
            for slot in dir.slots().iter().filter(|s| &s.port == port) {
                for (f, key) in link_keys(slot.def) {
                    let Some(&entry) = slot.entries.iter().find(|&&e| dir.has_field(e, f)) else {
                        continue;
                    };
                    let baseline =
                        configured(pc, &key, f).unwrap_or_else(|| default_value(slot.def.link, f));
                    fields.push(Field {
                        port: port.clone(),
                        key,
                        entry,
                        field: f,
                        baseline,
                    });
                }
            }
        }
        LiveLinks { dir, fields }
    }

    /// Per port, the link fields that differ from their value at start.
    pub fn snapshot(&self) -> Vec<(String, Vec<(String, Value)>)> {
        let mut out: Vec<(String, Vec<(String, Value)>)> = Vec::new();
        for f in &self.fields {
            let now = value_now(&self.dir, f.entry, f.field);
            if same(&now, &f.baseline) {
                continue;
            }
            match out.last_mut() {
                Some((p, keys)) if *p == f.port => keys.push((f.key.clone(), now)),
                _ => out.push((f.port.clone(), vec![(f.key.clone(), now)])),
            }
        }
        out
    }

    /// Applies the saved link fields; the ones that fit nothing or are refused come back
    /// with why. Returns the count applied.
    pub fn restore(&self, entries: &[Entry]) -> (usize, Vec<Problem>) {
        let mut applied = 0;
        let mut problems = Vec::new();
        for e in entries {
            let found = self
                .fields
                .iter()
                .find(|f| f.port == e.port && f.key == e.key);
            let r = match found {
                Some(f) => apply(&self.dir, f.entry, f.field, &e.value),
                None => Err(self.unknown(e)),
            };
            match r {
                Ok(()) => applied += 1,
                Err(reason) => problems.push(Problem {
                    line: Some(e.line).filter(|&l| l != 0),
                    port: e.port.clone(),
                    key: e.key.clone(),
                    value: e.text.clone(),
                    reason,
                }),
            }
        }
        (applied, problems)
    }

    fn unknown(&self, e: &Entry) -> String {
        let keys: Vec<&str> = self
            .fields
            .iter()
            .filter(|f| f.port == e.port)
            .map(|f| f.key.as_str())
            .collect();
        if keys.is_empty() {
            format!(
                "no link field '{}' on port '{}': it has no link records",
                e.key, e.port
            )
        } else {
            format!("no link field '{}' (link fields: {})", e.key, listed(&keys))
        }
    }
}

/// The link fields' part of the state.
pub enum LinkPart {
    /// No directory yet (or none this run): the file's link entries, written back as read.
    Carried(Vec<Entry>),
    /// The directory's link fields.
    Live(LiveLinks),
}

impl Default for LinkPart {
    fn default() -> Self {
        LinkPart::Carried(Vec::new())
    }
}

impl LinkPart {
    /// Per port, what the file holds of the link fields now.
    pub fn snapshot(&self) -> Vec<(String, Vec<(String, Value)>)> {
        match self {
            LinkPart::Live(l) => l.snapshot(),
            // Checked when read (check_setting): each has its file form.
            LinkPart::Carried(entries) => merge(
                Vec::new(),
                entries
                    .iter()
                    .filter_map(|e| {
                        let v = saved_value(&e.key, &e.value)?;
                        Some((e.port.clone(), vec![(e.key.clone(), v)]))
                    })
                    .collect(),
            ),
        }
    }
}

/// Adds the link fields' keys to the parameters' snapshot, port by port (a port only in
/// `links` comes after the others).
pub fn merge(
    mut params: Vec<(String, Vec<(String, Value)>)>,
    links: Vec<(String, Vec<(String, Value)>)>,
) -> Vec<(String, Vec<(String, Value)>)> {
    for (port, keys) in links {
        match params.iter_mut().find(|(p, _)| *p == port) {
            Some((_, k)) => k.extend(keys),
            None => params.push((port, keys)),
        }
    }
    params
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_keys_have_a_dot_and_parameters_do_not() {
        assert!(is_link_key("1:PositionXLink.DOL"));
        assert!(!is_link_key("MinX"));
    }

    #[test]
    fn values_take_the_form_their_field_writes() {
        use ParamValue::{Float, Int, Str};
        let s = |x: &str| Str(x.into());
        assert_eq!(coerce(RecordField::Zrvl, &s(" 5 ")), Ok(Int(5)));
        assert_eq!(coerce(RecordField::Onvl, &Int(2)), Ok(Int(2)));
        assert!(coerce(RecordField::Zrvl, &s("open")).is_err());
        assert_eq!(coerce(RecordField::Omsl, &s("supervisory")), Ok(Int(0)));
        assert_eq!(coerce(RecordField::Omsl, &s("1")), Ok(Int(1)));
        let e = coerce(RecordField::Omsl, &Int(2)).unwrap_err();
        assert_eq!(e, "takes one of supervisory, closed_loop");
        assert_eq!(coerce(RecordField::Ocal, &Float(2.5)), Ok(s("2.5")));
        assert_eq!(coerce(RecordField::Ocal, &s("2.0")), Ok(s("2")));
        assert!(coerce(RecordField::Ocal, &s("open")).is_err());
        assert_eq!(coerce(RecordField::Out, &s(" A:B PP ")), Ok(s("A:B PP")));
        assert!(
            coerce(RecordField::Out, &Int(3)).is_err(),
            "an output names a PV"
        );
        assert_eq!(coerce(RecordField::Dol, &Int(3)), Ok(s("3")), "a constant");
        let e = coerce(RecordField::Inp, &s("pva://X:Y")).unwrap_err();
        assert!(e.contains("not supported"), "{e}");
    }

    #[test]
    fn a_long_list_of_keys_is_cut_and_counted() {
        let keys: Vec<String> = (0..9).map(|i| format!("{i}:L.DOL")).collect();
        assert_eq!(
            listed(&keys),
            "0:L.DOL, 1:L.DOL, 2:L.DOL, 3:L.DOL, 4:L.DOL, 5:L.DOL, … 9 in all"
        );
        assert_eq!(listed(&keys[..2]), "0:L.DOL, 1:L.DOL");
    }

    #[test]
    fn merge_keeps_port_order_and_appends_new_ports() {
        let p = vec![("A".to_string(), vec![("X".to_string(), Value::from(1))])];
        let l = vec![
            (
                "B".to_string(),
                vec![("R.DOL".to_string(), Value::from("pv"))],
            ),
            (
                "A".to_string(),
                vec![("L.OUT".to_string(), Value::from("q"))],
            ),
        ];
        let m = merge(p, l);
        let keys: Vec<String> = m
            .iter()
            .flat_map(|(p, k)| k.iter().map(move |(k, _)| format!("{p}.{k}")))
            .collect();
        assert_eq!(keys, ["A.X", "A.L.OUT", "B.R.DOL"]);
    }
}
