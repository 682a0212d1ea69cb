//! `ndflow screens`: Phoebus operator screens generated from the parameter declarations.
//!
//! The config is read exactly as `ndflow check` reads it (the same graph and PV directory,
//! nothing started), then one screen is written per port (`PORT.bob`: every parameter in
//! areaDetector's groups, see [`groups`]) and one for the pipeline (each port in the column
//! of its depth, with its rate, drops and a button opening its screen). PV names are
//! `$(P)$(R)Name`, areaDetector's macros: the pipeline screen passes P and R, and each file
//! falls back to this config's values when opened alone, so a site can point the port
//! screens at its own IOCs. See docs/screens.md.

mod bob;
mod groups;
mod layout;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ndflow_core::{ParamDef, ParamValue};

use crate::config::{Config, ConfigError, PortConfig};
use crate::{ioc, registry};

/// What `ndflow screens` writes where.
pub struct ScreenOptions<'a> {
    /// `--prefix`: replaces the config's prefix.
    pub prefix: Option<&'a str>,
    /// `--set PORT.KEY=VALUE` overrides, applied in order.
    pub sets: &'a [(String, String, String)],
    /// The directory the files go to (created if missing).
    pub out: &'a Path,
}

/// One port as its screens show it.
pub struct Port {
    pub name: String,
    pub type_name: String,
    /// areaDetector's class, titling the port type's own parameters.
    pub class: &'static str,
    pub driver: bool,
    /// The port's PV prefix: R.
    pub prefix: String,
    pub defs: Vec<&'static ParamDef>,
    /// The ports it takes arrays from (NDArrayPort, Gather's NDArrayPort_N).
    pub sources: Vec<String>,
    /// The NTNDArray PV it publishes.
    pub image: Option<ImagePv>,
}

/// The name of an image PV: after the port's prefix (the default, `$(P)$(R)Image`), or a
/// full name of its own (a `PvName` outside the IOC's prefixes).
pub enum ImagePv {
    Suffix(String),
    Full(String),
}

impl ImagePv {
    fn with(&self, p_and_r: &str) -> String {
        match self {
            ImagePv::Suffix(s) => format!("pva://{p_and_r}{s}"),
            ImagePv::Full(n) => format!("pva://{n}"),
        }
    }
    pub fn for_port_screen(&self) -> String {
        self.with("$(P)$(R)")
    }
    pub fn for_pipeline_screen(&self, port_prefix: &str) -> String {
        self.with(&format!("$(P){port_prefix}"))
    }
}

/// Builds the screens of config `text` (named `file` in messages) and writes them under
/// `opts.out`; returns one line per file written.
pub fn run(text: &str, file: &str, opts: &ScreenOptions) -> Result<String, String> {
    let mut cfg = Config::parse(text, file).map_err(|e| e.to_string())?;
    cfg.apply_overrides(opts.prefix, opts.sets)
        .map_err(|e| e.to_string())?;
    check_names(&cfg)?;
    let ports = ports(&cfg)?;
    let top = top_name(file, &ports).map_err(|m| config_error(&cfg, None, None, m))?;
    std::fs::create_dir_all(opts.out)
        .map_err(|e| format!("cannot create {}: {e}", opts.out.display()))?;
    let mut report = String::new();
    for p in &ports {
        let s = layout::port_screen(p);
        let doc = document(&p.name, &s, &[("P", &cfg.prefix), ("R", &p.prefix)]);
        let path = write_atomic(opts.out, &screen_file(p), &doc)?;
        report += &format!(
            "wrote {}: port {} ({}), {} parameters in {} groups\n",
            path.display(),
            p.name,
            p.type_name,
            p.defs.len(),
            s.groups
        );
    }
    let title = format!("ndflow pipeline {top}");
    let s = layout::top_screen(&ports, &title, screen_file);
    let doc = document(&title, &s, &[("P", &cfg.prefix)]);
    let path = write_atomic(opts.out, &format!("{top}.bob"), &doc)?;
    report += &format!(
        "wrote {}: pipeline of {} port{}, P = {}\n",
        path.display(),
        ports.len(),
        if ports.len() == 1 { "" } else { "s" },
        cfg.prefix
    );
    Ok(report)
}

fn screen_file(p: &Port) -> String {
    format!("{}.bob", p.name)
}

fn document(name: &str, s: &layout::Screen, macros: &[(&str, &str)]) -> String {
    let mut d = bob::display(name, s.width, s.height, macros);
    for w in &s.widgets {
        d.push(w.clone());
    }
    d.to_document()
}

fn config_error(cfg: &Config, p: Option<&PortConfig>, key: Option<&str>, m: String) -> String {
    ConfigError {
        file: cfg.file.clone(),
        line: p.map(|p| p.line).filter(|&l| l != 0),
        port: p.map(|p| p.name.clone()),
        key: key.map(str::to_string),
        message: m,
    }
    .to_string()
}

/// Whether `name` can name a screen file next to the others (no path, no hidden file).
fn is_file_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// Port names become file names and prefixes macro values: refuse what cannot be either.
fn check_names(cfg: &Config) -> Result<(), String> {
    // Phoebus reads `$(`, `${` and their closing braces as macro syntax; EPICS record names
    // never hold them.
    let macro_safe = |s: &str| !s.contains(['$', '(', ')', '{', '}', '\\']);
    if !macro_safe(&cfg.prefix) {
        return Err(config_error(
            cfg,
            None,
            Some("prefix"),
            format!(
                "{:?} cannot be a screen macro (no $ ( ) {{ }} \\)",
                cfg.prefix
            ),
        ));
    }
    for p in &cfg.ports {
        if !is_file_name(&p.name) {
            return Err(config_error(
                cfg,
                Some(p),
                Some("name"),
                "cannot name a screen file: use letters, digits, '_', '-' and '.' (not first)"
                    .into(),
            ));
        }
        if !macro_safe(&p.prefix) {
            return Err(config_error(
                cfg,
                Some(p),
                Some("prefix"),
                format!(
                    "{:?} cannot be a screen macro (no $ ( ) {{ }} \\)",
                    p.prefix
                ),
            ));
        }
    }
    Ok(())
}

/// The pipeline screen's name: the config's, unless a port's screen has it.
fn top_name(file: &str, ports: &[Port]) -> Result<String, String> {
    let stem = Path::new(file)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("");
    [stem, "ndflow"]
        .into_iter()
        .find(|n| is_file_name(n) && !ports.iter().any(|p| p.name == *n))
        .map(str::to_string)
        .ok_or_else(|| {
            format!(
                "the pipeline screen needs a name no port has ({stem:?} and \"ndflow\" are ports)"
            )
        })
}

/// The ports of `cfg` as the idle graph built from it holds them (every setting applied).
fn ports(cfg: &Config) -> Result<Vec<Port>, String> {
    let dir = ioc::idle_directory(cfg)?;
    let mut by_port: HashMap<&str, Vec<&crate::pvdir::ParamSlot>> = HashMap::new();
    for s in dir.slots() {
        by_port.entry(s.port.as_str()).or_default().push(s);
    }
    let names: Vec<&str> = cfg.ports.iter().map(|p| p.name.as_str()).collect();
    let mut out = Vec::new();
    for p in &cfg.ports {
        let t = registry::require(&p.type_name)
            .map_err(|m| config_error(cfg, Some(p), Some("type"), m))?;
        let slots = by_port.get(p.name.as_str()).cloned().unwrap_or_default();
        let text = |s: &crate::pvdir::ParamSlot| match s.value() {
            ParamValue::Str(v) => v,
            _ => String::new(),
        };
        let sources = slots
            .iter()
            .filter(|s| s.def.name == "NDArrayPort" || s.def.name.starts_with("NDArrayPort_"))
            .map(|s| text(s))
            .filter(|v| names.contains(&v.as_str()))
            .collect();
        let image = (p.type_name == crate::pva::plugin::PORT.name).then(|| {
            let own = format!("{}{}", cfg.prefix, p.prefix);
            let name = slots
                .iter()
                .find(|s| s.def.name == "PvName")
                .map(|s| text(s))
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| format!("{own}Image"));
            match name.strip_prefix(&own) {
                Some(suffix) => ImagePv::Suffix(suffix.to_string()),
                None => ImagePv::Full(name),
            }
        });
        out.push(Port {
            name: p.name.clone(),
            type_name: p.type_name.clone(),
            class: t.class,
            driver: t.driver,
            prefix: p.prefix.clone(),
            defs: slots.iter().map(|s| s.def).collect(),
            sources,
            image,
        });
    }
    Ok(out)
}

/// Writes `text` to `dir/name` through a temporary file renamed over it (the state file's
/// write), so a display manager never reads half a file.
fn write_atomic(dir: &Path, name: &str, text: &str) -> Result<PathBuf, String> {
    let path = dir.join(name);
    crate::state::file::write_atomic(&path, text.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r#"
prefix = "T1:"
[[port]]
name = "CAM"
type = "sim"
prefix = "cam1:"
[[port]]
name = "ROI1"
type = "roi"
NDArrayPort = "CAM"
[[port]]
name = "PVA1"
type = "pva"
prefix = "Pva1:"
NDArrayPort = "ROI1"
"#;

    fn out_dir(tag: &str) -> PathBuf {
        std::env::temp_dir().join(format!("ndflow-screens-{tag}-{}", std::process::id()))
    }

    #[test]
    fn writes_a_screen_per_port_and_the_pipeline() {
        let out = out_dir("ok");
        let report = run(
            CONFIG,
            "cfg/site.toml",
            &ScreenOptions {
                prefix: Some("T2:"),
                sets: &[],
                out: &out,
            },
        )
        .unwrap();
        assert_eq!(report.lines().count(), 4, "{report}");
        let top = std::fs::read_to_string(out.join("site.bob")).unwrap();
        assert!(top.contains("<P>$(P=T2:)</P>"), "--prefix is the default P");
        assert!(top.contains("<file>ROI1.bob</file>") && top.contains("<R>ROI1:</R>"));
        assert!(top.contains("<pv_name>pva://$(P)Pva1:Image</pv_name>"));
        let roi = std::fs::read_to_string(out.join("ROI1.bob")).unwrap();
        assert!(roi.contains("<R>$(R=ROI1:)</R>") && roi.contains("$(P)$(R)MinX_RBV"));
        let pva = std::fs::read_to_string(out.join("PVA1.bob")).unwrap();
        assert!(pva.contains("<pv_name>pva://$(P)$(R)Image</pv_name>"));
        let _ = std::fs::remove_dir_all(&out);
        // Errors name the key (here: a port's prefix cannot be overridden).
        let sets = [("ROI1".to_string(), "prefix".to_string(), "R1:".to_string())];
        let e = run(
            CONFIG,
            "site.toml",
            &ScreenOptions {
                prefix: None,
                sets: &sets,
                out: &out,
            },
        )
        .unwrap_err();
        assert!(e.contains("prefix"), "{e}");
        assert!(!out.exists(), "nothing written on error");
    }

    fn port(name: &str, driver: bool, sources: &[&str]) -> Port {
        Port {
            name: name.into(),
            type_name: String::new(),
            class: "",
            driver,
            prefix: String::new(),
            defs: Vec::new(),
            sources: sources.iter().map(|s| s.to_string()).collect(),
            image: None,
        }
    }

    #[test]
    fn ports_sit_at_their_depth_in_the_graph() {
        let ports = [
            port("GATH", false, &["S1", "S2"]),
            port("SIM", true, &[]),
            port("S2", false, &["SCAT"]),
            port("SCAT", false, &["SIM"]),
            port("S1", false, &["SCAT"]),
            port("LOOSE", false, &[]),
        ];
        let depth: Vec<usize> = layout::positions(&ports).iter().map(|p| p.0).collect();
        assert_eq!(depth, [3, 0, 2, 1, 2, 1]);
    }
}
