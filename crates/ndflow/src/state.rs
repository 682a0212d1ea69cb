//! Settings that survive restarts: what EPICS autosave gives an areaDetector IOC, without
//! request files (docs/state.md).
//!
//! `ndflow run CONFIG` keeps a state file beside the config ([`default_path`]:
//! `ioc.toml` → `ioc.state.toml`, with `--prefix W1:` `ioc.W1.state.toml`; `--state FILE`
//! elsewhere, `--no-state` none). It holds every
//! saved parameter ([`rule`]) whose value differs from what the config and `--set` gave it at
//! start, written shortly after a change ([`saver`]) and atomically ([`file`]). At start the
//! config's values come first, then the state file's, then `--set`: [`start`] restores the file
//! through the same validated path as a config key ([`config::put_setting`]), and a key that
//! does not fit the config (unknown port or key, refused value) is a one-line warning while the
//! rest is restored. The link records' fields (`PositionXLink.DOL`, `ShutterOpenEPICS.OUT`, …)
//! are saved as well ([`links`]) and restored once the PV servers are up ([`attach_links`]).
//! `ndflow state show|diff|clear` read the file ([`show`], [`diff`], [`clear`]).

pub mod file;
pub mod links;
pub mod rule;
pub mod saver;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ndflow_core::{ParamDef, ParamStore};
use ndflow_runtime::Graph;

use crate::config::{put_setting, Config, PortConfig};
use crate::pva::ImagePvs;
use crate::pvdir::PvDirectory;
use crate::registry;
use file::{Entry, Loaded, Parsed, Problem};
pub use rule::{is_saved, why_not_saved};
pub use saver::{Saver, Timing, Tracked};

/// The state file of a config: beside it, its stem plus this (`ioc.toml` → `ioc.state.toml`).
pub const SUFFIX: &str = ".state.toml";

/// Where `ndflow run CONFIG [--prefix P]` keeps its state without `--state`. The IOCs of a
/// scale-out set share one config and differ by `--prefix`: each gets its own file
/// (`writer.toml --prefix W1:` → `writer.W1.state.toml`).
pub fn default_path(config: &Path, prefix: Option<&str>) -> PathBuf {
    let stem = config
        .file_stem()
        .map_or_else(|| "ndflow".into(), |s| s.to_string_lossy().into_owned());
    // The prefix as a file name part: letters, digits, - and _ (others become _).
    let tag: String = prefix
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    match tag.trim_matches('_') {
        "" => config.with_file_name(format!("{stem}{SUFFIX}")),
        t => config.with_file_name(format!("{stem}.{t}{SUFFIX}")),
    }
}

/// `--set` pairs (port, key), which win over the state file.
type Sets = [(String, String, String)];

fn overridden(sets: &Sets, e: &Entry) -> bool {
    sets.iter().any(|(p, k, _)| *p == e.port && *k == e.key)
}

/// The saved parameters of every port of `cfg` in `graph`, their values now as the baseline.
pub fn track(graph: &Graph, cfg: &Config) -> Vec<Tracked> {
    cfg.ports
        .iter()
        .filter_map(|p| {
            let port = graph.port(&p.name)?;
            Some(Tracked::new(&p.name, &p.type_name, port.params().clone()))
        })
        .collect()
}

/// What a saved key names in the config and the graph, or why it names nothing that could be
/// restored.
struct Target<'c> {
    port: &'c PortConfig,
    store: Arc<ParamStore>,
    idx: usize,
    def: &'static ParamDef,
}

fn target<'c>(cfg: &'c Config, graph: &Graph, e: &Entry) -> Result<Target<'c>, String> {
    let names = || {
        cfg.ports
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let port = cfg.ports.iter().find(|p| p.name == e.port).ok_or_else(|| {
        format!(
            "no port named '{}' in the config (ports: {})",
            e.port,
            names()
        )
    })?;
    let store = graph
        .port(&e.port)
        .map(|h| h.params().clone())
        .ok_or_else(|| format!("port '{}' was not built", e.port))?;
    let unknown = || {
        format!(
            "port '{}' (type {}) has no parameter '{}'",
            e.port, port.type_name, e.key
        )
    };
    let idx = store.index(&e.key).ok_or_else(unknown)?;
    let def = store.def(idx).ok_or_else(unknown)?;
    if let Some(why) = why_not_saved(&port.type_name, def) {
        return Err(format!("not a saved setting: {why}"));
    }
    Ok(Target {
        port,
        store,
        idx,
        def,
    })
}

/// What [`restore`] did.
#[derive(Debug, Default)]
pub struct Restored {
    /// Keys applied.
    pub applied: usize,
    /// Keys not restored, with why.
    pub problems: Vec<Problem>,
    /// Keys left alone because `--set` gives them.
    pub overridden: Vec<Entry>,
    /// Link fields (`RECORD.FIELD`) of link records the ports have: applied once the PV
    /// directory exists ([`attach_links`]).
    pub links: Vec<Entry>,
}

/// Whether link field setting `e` fits a port of `cfg` in `graph` (see
/// [`links::check_setting`]).
fn link_target(cfg: &Config, graph: &Graph, e: &Entry) -> Result<(), String> {
    if !cfg.ports.iter().any(|p| p.name == e.port) {
        return Err(format!("no port named '{}' in the config", e.port));
    }
    let store = graph
        .port(&e.port)
        .map(|h| h.params().clone())
        .ok_or_else(|| format!("port '{}' was not built", e.port))?;
    links::check_setting(&store, &e.key, &e.value)
}

/// Applies the saved keys to `graph` as config keys are applied (wiring first, then the
/// others in file order), except those `--set` gives. A key that fits nothing, or that the
/// parameter refuses, is reported and skipped; the others are applied.
pub fn restore(graph: &Graph, cfg: &Config, parsed: &Parsed, sets: &Sets) -> Restored {
    let mut out = Restored {
        problems: parsed.problems.clone(),
        ..Restored::default()
    };
    let mut todo = Vec::new();
    for e in &parsed.entries {
        if overridden(sets, e) {
            out.overridden.push(e.clone());
            continue;
        }
        if links::is_link_key(&e.key) {
            match link_target(cfg, graph, e) {
                Ok(()) => out.links.push(e.clone()),
                Err(reason) => out.problems.push(problem(e, reason)),
            }
            continue;
        }
        match target(cfg, graph, e) {
            Ok(t) => todo.push((registry::setting_phase(&e.key), e, t.port)),
            Err(reason) => out.problems.push(problem(e, reason)),
        }
    }
    todo.sort_by_key(|(phase, _, _)| *phase);
    for (_, e, port) in todo {
        match put_setting(graph, &port.name, &e.key, e.value.clone()) {
            Ok(_) => out.applied += 1,
            Err(reason) => out.problems.push(problem(e, reason)),
        }
    }
    // In file order, as a reader goes through them.
    out.problems.sort_by_key(|p| p.line);
    out
}

fn problem(e: &Entry, reason: String) -> Problem {
    Problem {
        line: Some(e.line).filter(|&l| l != 0),
        port: e.port.clone(),
        key: e.key.clone(),
        value: e.text.clone(),
        reason,
    }
}

/// The IOC's start: with a state file, tracks the saved parameters of `graph` (their values
/// now, config and `--set` applied, are the baseline), restores the file and starts saving.
/// Everything that goes wrong is a warning on stderr: the IOC runs on, from the config.
/// Call it after the config's settings and before `Acquire` is applied.
pub fn start(graph: &Graph, cfg: &Config, path: Option<&Path>, sets: &Sets) -> Option<Saver> {
    let path = path?;
    let tracked = track(graph, cfg);
    let shown = path.display();
    let mut carried = Vec::new();
    let written = match file::read(path) {
        Loaded::Missing => None,
        Loaded::Unreadable(e) => {
            eprintln!(
                "warning: cannot read the state file {shown}: {e}; settings are neither \
                 restored nor saved this run"
            );
            return None;
        }
        Loaded::Corrupt(reason) => match file::set_aside(path) {
            Ok(bad) => {
                eprintln!(
                    "warning: state file {shown} is unreadable ({reason}): starting from the \
                     config; the file was moved to {}",
                    bad.display()
                );
                None
            }
            Err(e) => {
                eprintln!(
                    "warning: state file {shown} is unreadable ({reason}) and could not be \
                     moved aside ({e}): starting from the config, not saving this run so as \
                     not to overwrite it"
                );
                return None;
            }
        },
        Loaded::Found { text, parsed } => {
            let r = restore(graph, cfg, &parsed, sets);
            warn_not_restored(&r.problems, path);
            for e in &r.overridden {
                eprintln!(
                    "state: {shown}: {}.{} = {} not restored: --set {}.{} wins",
                    e.port, e.key, e.text, e.port, e.key
                );
            }
            if r.applied > 0 {
                eprintln!("state: restored {} settings from {shown}", r.applied);
            }
            carried = r.links;
            Some(text)
        }
    };
    match Saver::start(
        path.to_path_buf(),
        &cfg.file,
        tracked,
        written,
        carried,
        Timing::DEFAULT,
    ) {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("warning: cannot start saving settings to {shown}: {e}");
            None
        }
    }
}

/// Once the PV servers are up (`dir`, none when neither protocol is served): applies the
/// state file's link fields and saves later writes of them. Problems are warnings, as at
/// [`start`]; without a directory the saved link fields stay in the file, unapplied.
pub fn attach_links(saver: &Saver, dir: Option<&Arc<PvDirectory>>, cfg: &Config, path: &Path) {
    let shown = path.display();
    let Some(dir) = dir else {
        let n = saver.carried_links();
        if n > 0 {
            eprintln!(
                "state: {shown}: {n} link fields kept, not applied: {}",
                links::NEED_SERVERS
            );
        }
        return;
    };
    let (applied, problems) = saver.attach_links(dir, cfg);
    warn_not_restored(&problems, path);
    if applied > 0 {
        eprintln!("state: restored {applied} link fields from {shown}");
    }
}

fn warn_not_restored(problems: &[Problem], path: &Path) {
    for p in problems {
        eprintln!("warning: state {}: not restored: {}", p.at(path), p.reason);
    }
}

/// `ndflow state show`: the saved values, `PORT.KEY = VALUE` a line.
pub fn show(path: &Path) -> Result<String, String> {
    let Some(parsed) = read_for_command(path)? else {
        return Ok(format!("{}: no saved settings\n", path.display()));
    };
    let mut out = String::new();
    for e in &parsed.entries {
        out += &format!("{}.{} = {}\n", e.port, e.key, e.text);
    }
    for p in &parsed.problems {
        out += &format!("# not a setting: {}: {}\n", p.at(path), p.reason);
    }
    if out.is_empty() {
        out = format!("{}: no saved settings\n", path.display());
    }
    Ok(out)
}

/// `ndflow state clear`: removes the state file (the next start is the config's alone).
pub fn clear(path: &Path) -> Result<String, String> {
    match file::remove(path) {
        Ok(true) => Ok(format!("removed {}\n", path.display())),
        Ok(false) => Ok(format!("{}: no saved settings\n", path.display())),
        Err(e) => Err(format!("cannot remove {}: {e}", path.display())),
    }
}

/// The state file's entries, `None` without a file; an unreadable file is an error (the
/// commands leave it where it is).
fn read_for_command(path: &Path) -> Result<Option<Parsed>, String> {
    match file::read(path) {
        Loaded::Missing => Ok(None),
        Loaded::Found { parsed, .. } => Ok(Some(parsed)),
        Loaded::Corrupt(reason) => Err(format!(
            "state file {} is unreadable: {reason} (the IOC moves such a file to {} at start)",
            path.display(),
            file::bad_path(path).display()
        )),
        Loaded::Unreadable(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// `ndflow state diff`: per saved key, the config's value (with `sets`) → the saved one, then
/// the keys that no longer fit the config. The config is built as `ndflow check` builds it
/// (nothing acquires, no directory is created); saved values are checked against their
/// parameter's declaration, not applied.
pub fn diff(text: &str, file_name: &str, path: &Path, sets: &Sets) -> Result<String, String> {
    let mut cfg = Config::parse(text, file_name).map_err(|e| e.to_string())?;
    cfg.apply_overrides(None, sets).map_err(|e| e.to_string())?;
    let Some(parsed) = read_for_command(path)? else {
        return Ok(format!("{}: no saved settings\n", path.display()));
    };
    let graph = idle_graph(&cfg)?;
    let mut lines = Vec::new();
    let mut problems = parsed.problems.clone();
    for e in &parsed.entries {
        if links::is_link_key(&e.key) {
            match link_target(&cfg, &graph, e) {
                Ok(()) => lines.push(link_diff_line(&cfg, &graph, e, sets)),
                Err(reason) => problems.push(problem(e, reason)),
            }
            continue;
        }
        let checked = target(&cfg, &graph, e).and_then(|t| {
            let saved = t
                .def
                .coerce(e.value.clone())
                .map_err(|err| err.to_string())?;
            let now = t.store.get(t.idx).unwrap_or_else(|| t.def.default_value());
            Ok((t.def, now, saved))
        });
        match checked {
            Ok((def, now, saved)) => {
                let note = if overridden(sets, e) {
                    "  (--set wins)"
                } else if saver::same(&now, &saved) {
                    "  (same as the config)"
                } else {
                    ""
                };
                lines.push(format!(
                    "  {}.{}: {} -> {}{note}",
                    e.port,
                    e.key,
                    file::shown(def, &now),
                    file::shown(def, &saved)
                ));
            }
            Err(reason) => problems.push(problem(e, reason)),
        }
    }
    problems.sort_by_key(|p| p.line);
    graph.shutdown();
    let mut out = format!(
        "{} (config {file_name}): {} saved settings, config -> saved\n",
        path.display(),
        lines.len()
    );
    for l in lines {
        out += &l;
        out.push('\n');
    }
    if !problems.is_empty() {
        out += &format!(
            "{} keys do not fit the config (not restored at start, dropped at the next save):\n",
            problems.len()
        );
        for p in &problems {
            out += &format!("  {}: {}\n", p.at(path), p.reason);
        }
    }
    Ok(out)
}

/// `ndflow state diff`'s line for a saved link field (checked by [`link_target`]): the
/// config's value (or the default) → the saved one, noted as a parameter's line is.
fn link_diff_line(cfg: &Config, graph: &Graph, e: &Entry, sets: &Sets) -> String {
    let now = cfg.ports.iter().find(|p| p.name == e.port).and_then(|pc| {
        let store = graph.port(&e.port)?.params().clone();
        links::config_value(&store, pc, &e.key)
    });
    let saved = links::saved_value(&e.key, &e.value);
    let note = if overridden(sets, e) {
        "  (--set wins)"
    } else if matches!((&now, &saved), (Some(a), Some(b)) if links::same(a, b)) {
        "  (same as the config)"
    } else {
        ""
    };
    let shown = |v: Option<toml_edit::Value>| v.map_or_else(|| "?".into(), |v| v.to_string());
    format!(
        "  {}.{} (link field): {} -> {}{note}",
        e.port,
        e.key,
        shown(now).trim(),
        shown(saved).trim()
    )
}

/// The graph of `cfg` with nothing started: no `Acquire`, no `CreateDirectory` (as
/// `ndflow check` builds it: reading a config must not change the machine).
fn idle_graph(cfg: &Config) -> Result<Graph, String> {
    let mut idle = cfg.clone();
    for p in &mut idle.ports {
        p.settings
            .retain(|s| s.key != "Acquire" && s.key != "CreateDirectory");
    }
    let graph = Graph::new(1);
    if let Err(e) = idle.build(&graph, &ImagePvs::default()) {
        graph.shutdown();
        return Err(e.to_string());
    }
    Ok(graph)
}

/// A hidden test mode (`ndflow state stress-write FILE`): rewrites `path` as fast as it can
/// through [`file::write_atomic`], each version a full state file whose every value is the
/// version number, so that a test can kill it at random moments and check that the file is
/// always one whole version. Prints `ready` once the first version is on disk; stops after
/// `limit` (a test harness that dies leaves no writer running for long).
pub fn stress_write(path: &Path, limit: Duration) -> Result<(), String> {
    let started = Instant::now();
    let write = |n: i64| {
        let ports: Vec<(String, Vec<(String, toml_edit::Value)>)> = (0..20)
            .map(|p| {
                let keys = (0..50)
                    .map(|k| (format!("Key{k}"), toml_edit::Value::from(n)))
                    .collect();
                (format!("PORT{p}"), keys)
            })
            .collect();
        let text = file::render("stress", &ports);
        file::write_atomic(path, text.as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    };
    write(0)?;
    let mut stdout = std::io::stdout();
    let _ = writeln!(stdout, "ready");
    let _ = stdout.flush();
    let mut n = 1;
    while started.elapsed() < limit {
        write(n)?;
        n += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndflow_core::ParamValue;
    use ndflow_io::test_dir::Dir;

    const CONFIG: &str = r#"
prefix = "ST:"
[[port]]
name = "SIM1"
type = "sim"
MaxSizeX = 64
MaxSizeY = 64
AcquireTime = 0.1
[[port]]
name = "ROI1"
type = "roi"
NDArrayPort = "SIM1"
MinX = 1
[[port]]
name = "ROI2"
type = "roi"
"#;

    fn set(p: &str, k: &str, v: &str) -> (String, String, String) {
        (p.into(), k.into(), v.into())
    }

    /// The config built with `sets`, as `ndflow run` builds it.
    fn built(sets: &Sets) -> (Config, Graph) {
        let mut cfg = Config::parse(CONFIG, "ioc.toml").unwrap();
        cfg.apply_overrides(None, sets).unwrap();
        let graph = Graph::new(1);
        cfg.build(&graph, &ImagePvs::default()).unwrap();
        (cfg, graph)
    }

    #[test]
    fn the_default_path_is_beside_the_config() {
        assert_eq!(
            default_path(Path::new("/etc/ndflow/ioc.toml"), None),
            Path::new("/etc/ndflow/ioc.state.toml")
        );
        assert_eq!(
            default_path(Path::new("ioc"), None),
            Path::new("ioc.state.toml")
        );
        assert_eq!(
            default_path(Path::new("/etc/ndflow/writer.toml"), Some("W1:")),
            Path::new("/etc/ndflow/writer.W1.state.toml")
        );
        assert_eq!(
            default_path(Path::new("w.toml"), Some("BL 7:det/1:")),
            Path::new("w.BL_7_det_1.state.toml")
        );
        assert_eq!(
            default_path(Path::new("w.toml"), Some(":")),
            Path::new("w.state.toml")
        );
    }

    #[test]
    fn config_then_state_then_set_and_misfits_are_reported_key_by_key() {
        let sets = [set("ROI1", "SizeX", "5")];
        let (cfg, graph) = built(&sets);
        let state = r#"
[SIM1]
AcquireTime = 0.5
Acquire = "Acquire"
[ROI1]
MinX = 7
SizeX = 9
Bogus = 1
MinY = "abc"
NDArrayPort = "ROI2"
[SIM9]
AcquireTime = 0.25
"#;
        let r = restore(&graph, &cfg, &file::parse(state).unwrap(), &sets);
        let get = |p: &str, k: &str| graph.get(p, k).unwrap();
        assert_eq!(get("SIM1", "AcquireTime"), ParamValue::Float(0.5));
        assert_eq!(get("ROI1", "MinX"), ParamValue::Int(7));
        assert_eq!(get("ROI1", "SizeX"), ParamValue::Int(5), "--set wins");
        assert_eq!(get("ROI1", "NDArrayPort"), ParamValue::Str("ROI2".into()));
        assert_eq!(get("SIM1", "Acquire"), ParamValue::Int(0), "never restored");
        assert_eq!(r.applied, 3);
        assert_eq!(r.overridden.len(), 1);
        let mut seen: Vec<(String, String)> = r
            .problems
            .iter()
            .map(|p| (format!("{}.{}", p.port, p.key), p.reason.clone()))
            .collect();
        seen.sort();
        let keys: Vec<&str> = seen.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "ROI1.Bogus",
                "ROI1.MinY",
                "SIM1.Acquire",
                "SIM9.AcquireTime"
            ]
        );
        assert!(seen[0].1.contains("no parameter 'Bogus'"), "{}", seen[0].1);
        assert!(seen[1].1.contains("abc"), "{}", seen[1].1);
        assert!(seen[2].1.contains("not a saved setting"), "{}", seen[2].1);
        assert!(seen[3].1.contains("no port named 'SIM9'"), "{}", seen[3].1);
        let line = r
            .problems
            .iter()
            .find(|p| p.port == "SIM9")
            .unwrap()
            .at(Path::new("s.toml"));
        assert_eq!(line, "s.toml:12: port 'SIM9': key 'AcquireTime' = 0.25");
        graph.shutdown();
    }

    #[test]
    fn the_baseline_is_config_plus_set_and_only_differences_are_saved() {
        let sets = [set("SIM1", "AcquireTime", "0.3")];
        let (cfg, graph) = built(&sets);
        let tracked = track(&graph, &cfg);
        assert!(snapshot_keys(&tracked).is_empty());
        graph.put("SIM1", "AcquireTime", 0.3).unwrap();
        graph.put("ROI1", "MinX", 4).unwrap();
        graph.put("ROI1", "EnableCallbacks", "Disable").unwrap();
        graph.put("SIM1", "Acquire", 1).unwrap();
        // In declaration order.
        assert_eq!(
            snapshot_keys(&tracked),
            ["ROI1.EnableCallbacks", "ROI1.MinX"]
        );
        graph.put("SIM1", "Acquire", 0).unwrap();
        graph.put("ROI1", "MinX", 1).unwrap();
        assert_eq!(snapshot_keys(&tracked), ["ROI1.EnableCallbacks"]);
        graph.shutdown();
    }

    fn snapshot_keys(tracked: &[Tracked]) -> Vec<String> {
        saver::snapshot(tracked)
            .into_iter()
            .flat_map(|(p, keys)| keys.into_iter().map(move |(k, _)| format!("{p}.{k}")))
            .collect()
    }

    #[test]
    fn start_restores_saves_and_sets_a_corrupt_file_aside() {
        let d = Dir::new("start");
        let path = d.0.join("ioc.state.toml");
        std::fs::write(&path, "[SIM1]\nAcquireTime = \n").unwrap();
        let (cfg, graph) = built(&[]);
        let saver = start(&graph, &cfg, Some(&path), &[]).unwrap();
        assert_eq!(d.entries(), ["ioc.state.toml.bad"]);
        graph.put("ROI1", "MinX", 6).unwrap();
        drop(saver);
        graph.shutdown();
        // A new IOC on the same config gets it back.
        let (cfg, graph) = built(&[]);
        let saver = start(&graph, &cfg, Some(&path), &[]).unwrap();
        assert_eq!(graph.get("ROI1", "MinX").unwrap(), ParamValue::Int(6));
        drop(saver);
        graph.shutdown();
        assert!(show(&path).unwrap().contains("ROI1.MinX = 6\n"));
        let diff = diff(CONFIG, "ioc.toml", &path, &[]).unwrap();
        assert!(diff.contains("  ROI1.MinX: 1 -> 6\n"), "{diff}");
        assert!(clear(&path).unwrap().starts_with("removed"));
        assert!(show(&path).unwrap().contains("no saved settings"));
    }

    #[test]
    fn diff_lists_what_no_longer_fits() {
        let d = Dir::new("diff");
        let path = d.0.join("s.toml");
        std::fs::write(&path, "[ROI1]\nMinX = 3\nSizeX = -4\n[OLD]\nX = 1\n").unwrap();
        let out = diff(CONFIG, "ioc.toml", &path, &[set("ROI1", "MinX", "2")]).unwrap();
        assert!(out.contains("  ROI1.MinX: 2 -> 3  (--set wins)\n"), "{out}");
        assert!(out.contains("2 keys do not fit"), "{out}");
        assert!(out.contains("key 'SizeX' = -4: "), "{out}");
        assert!(out.contains("no port named 'OLD'"), "{out}");
        std::fs::write(&path, "[ROI1\n").unwrap();
        assert!(diff(CONFIG, "ioc.toml", &path, &[]).is_err());
        assert!(show(&path).unwrap_err().contains("unreadable"));
        // The commands leave a bad file where it is.
        assert_eq!(d.entries(), ["s.toml"]);
    }
}
