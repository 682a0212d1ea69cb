//! The IOC configuration file: TOML with a top-level `prefix` and one `[[port]]` table per
//! port. Every key of a port other than `name`, `type` and `prefix` sets the parameter of
//! that PV name. A port's `prefix` defaults to its name and a colon. Errors name the file, line, port and key.
//!
//! ```toml
//! prefix = "13SIM1:"
//! [[port]]
//! name = "SIM1"
//! type = "sim"
//! prefix = "cam1:"
//! DataType = "UInt8"
//! Acquire = 1
//! ```

use ndflow_core::ParamValue;
use ndflow_runtime::Graph;
use toml_edit::{Document, Item, Table, Value};

use crate::access::{AccessRule, AccessRules, Rights};
use crate::pva::ImagePvs;
use crate::registry;

/// An error in a config file, with where it is.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    pub file: String,
    pub line: Option<usize>,
    pub port: Option<String>,
    pub key: Option<String>,
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        write!(f, ": ")?;
        if let Some(p) = &self.port {
            write!(f, "port '{p}': ")?;
        }
        if let Some(k) = &self.key {
            write!(f, "key '{k}': ")?;
        }
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for ConfigError {}

/// One `key = value` of a port table.
#[derive(Debug, Clone)]
pub struct Setting {
    pub key: String,
    pub value: ParamValue,
    pub line: usize,
}

#[derive(Debug, Clone)]
pub struct PortConfig {
    pub name: String,
    pub type_name: String,
    pub prefix: String,
    pub line: usize,
    pub settings: Vec<Setting>,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub file: String,
    pub prefix: String,
    /// Worker threads for plugins (0 = one per core).
    pub threads: usize,
    /// Serve every parameter (and `pva` ports' images) over pvAccess (default true).
    pub pva: bool,
    /// Serve every parameter over Channel Access (default true).
    pub ca: bool,
    /// `[[access]]` rules for both protocols (see [`crate::access`]).
    pub access: AccessRules,
    /// Whom the servers serve (`listen = "local" | "all" | "ADDR …"`); `None`: the EPICS
    /// variables decide (EPICS_PVAS_INTF_ADDR_LIST / EPICS_CAS_INTF_ADDR_LIST), else this host
    /// only.
    pub listen: Option<ndflow_net::Listen>,
    /// `[web]`: where the web viewer's HTTP server listens (`crate::web`); `None`: no server.
    pub web: Option<std::net::SocketAddr>,
    pub ports: Vec<PortConfig>,
}

struct LineIndex(Vec<usize>);

impl LineIndex {
    fn new(text: &str) -> LineIndex {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex(starts)
    }
    fn line(&self, offset: usize) -> usize {
        match self.0.binary_search(&offset) {
            Ok(i) => i + 1,
            Err(i) => i,
        }
    }
}

impl Config {
    pub fn parse(text: &str, file: &str) -> Result<Config, ConfigError> {
        let lines = LineIndex::new(text);
        let err =
            |line: Option<usize>, port: Option<&str>, key: Option<&str>, msg: String| ConfigError {
                file: file.to_string(),
                line,
                port: port.map(str::to_string),
                key: key.map(str::to_string),
                message: msg,
            };
        let doc = Document::parse(text.to_string()).map_err(|e| {
            let line = e.span().map(|s| lines.line(s.start));
            err(line, None, None, e.message().trim().to_string())
        })?;
        let span_line = |item: &Item| item.span().map(|s| lines.line(s.start));
        let mut cfg = Config {
            file: file.to_string(),
            prefix: String::new(),
            threads: 0,
            pva: true,
            ca: true,
            access: AccessRules::default(),
            listen: None,
            web: None,
            ports: Vec::new(),
        };
        for (key, item) in doc.iter() {
            let line = span_line(item);
            match key {
                "prefix" => {
                    cfg.prefix = item
                        .as_str()
                        .ok_or_else(|| err(line, None, Some(key), "must be a string".into()))?
                        .to_string()
                }
                "threads" => {
                    cfg.threads = item
                        .as_integer()
                        .filter(|n| (0..=256).contains(n))
                        .ok_or_else(|| {
                            err(
                                line,
                                None,
                                Some(key),
                                "must be an integer 0..256 (0 = one per core)".into(),
                            )
                        })? as usize
                }
                "pva" => {
                    cfg.pva = item
                        .as_bool()
                        .ok_or_else(|| err(line, None, Some(key), "must be true or false".into()))?
                }
                "ca" => {
                    cfg.ca = item
                        .as_bool()
                        .ok_or_else(|| err(line, None, Some(key), "must be true or false".into()))?
                }
                "listen" => {
                    let text = item.as_str().ok_or_else(|| {
                        err(
                            line,
                            None,
                            Some(key),
                            "must be a string: \"local\", \"all\" or addresses".into(),
                        )
                    })?;
                    cfg.listen = Some(
                        ndflow_net::Listen::parse(text)
                            .map_err(|e| err(line, None, Some(key), e.to_string()))?,
                    );
                }
                "web" => {
                        let t = item.as_table().ok_or_else(|| {
                            err(line, None, Some(key), "must be a [web] table".into())
                        })?;
                        cfg.web = Some(crate::web::parse_table(t).map_err(|(k, m)| {
                            err(line, None, Some(&format!("web.{k}")), m)
                        })?);
                    }
                "access" => {
                    let tables = item.as_array_of_tables().ok_or_else(|| {
                        err(
                            line,
                            None,
                            Some(key),
                            "must be written as [[access]] tables".into(),
                        )
                    })?;
                    for t in tables.iter() {
                        let line = t.span().map(|s| lines.line(s.start));
                        let rule = parse_access(t)
                            .map_err(|(k, m)| err(line, None, Some(&format!("access.{k}")), m))?;
                        cfg.access.rules.push(rule);
                    }
                }
                "port" => {
                    let tables = item.as_array_of_tables().ok_or_else(|| {
                        err(
                            line,
                            None,
                            Some(key),
                            "must be written as [[port]] tables".into(),
                        )
                    })?;
                    for t in tables.iter() {
                        let line = t.span().map_or(0, |s| lines.line(s.start));
                        cfg.ports.push(parse_port(t, line, &lines, &err)?);
                    }
                }
                other => {
                    return Err(err(
                        line,
                        None,
                        Some(other),
                        "unknown top-level key (expected prefix, threads, pva, ca, listen, [web], [[access]], [[port]])".into(),
                    ))
                }
            }
        }
        let mut seen = std::collections::HashSet::new();
        for p in &cfg.ports {
            if !seen.insert(p.name.clone()) {
                return Err(err(
                    Some(p.line),
                    Some(&p.name),
                    Some("name"),
                    "duplicate port name".into(),
                ));
            }
        }
        Ok(cfg)
    }

    /// Applies command-line overrides (`ndflow run --prefix P --set PORT.KEY=VALUE`): one
    /// config file serves many processes that differ only in a few settings (the writers of
    /// a scale-out set, a systemd template unit). A set replaces the file's value of that key.
    /// VALUE is an integer or a float when it reads as one, else a string; quote it
    /// (`PORT.KEY="007"`) to force a string.
    pub fn apply_overrides(
        &mut self,
        prefix: Option<&str>,
        sets: &[(String, String, String)],
    ) -> Result<(), ConfigError> {
        if let Some(p) = prefix {
            self.prefix = p.to_string();
        }
        for (port, key, value) in sets {
            let names: Vec<&str> = self.ports.iter().map(|p| p.name.as_str()).collect();
            let err = |message: String| ConfigError {
                file: format!("--set {port}.{key}"),
                line: None,
                port: None,
                key: None,
                message,
            };
            let names_list = names.join(", ");
            let Some(pc) = self.ports.iter_mut().find(|p| &p.name == port) else {
                return Err(err(format!("no port named '{port}' (ports: {names_list})")));
            };
            if key == "name" || key == "type" || key == "prefix" || key.is_empty() {
                return Err(err(format!(
                    "'{key}' cannot be overridden (only a port's parameters can)"
                )));
            }
            pc.settings.retain(|s| &s.key != key);
            pc.settings.push(Setting {
                key: key.clone(),
                value: override_value(value),
                line: 0,
            });
        }
        Ok(())
    }

    /// Builds the graph this config describes ([`registry::build`]).
    pub fn build(&self, graph: &Graph, pvs: &ImagePvs) -> Result<(), ConfigError> {
        registry::build(self, graph, pvs)
    }

    /// Port name → port prefix (for PV names).
    pub fn port_prefixes(&self) -> std::collections::HashMap<String, String> {
        self.ports
            .iter()
            .map(|p| (p.name.clone(), p.prefix.clone()))
            .collect()
    }

    /// Ports of driver type (for status and --until-idle).
    pub fn driver_names(&self) -> Vec<String> {
        self.ports
            .iter()
            .filter(|p| registry::is_driver(&p.type_name))
            .map(|p| p.name.clone())
            .collect()
    }
}

/// Sets one parameter as a config file's `key = value` does; the error is the message a
/// config file shows for it (without file, port and key, which the caller adds).
pub fn put_setting(
    graph: &Graph,
    port: &str,
    key: &str,
    value: ParamValue,
) -> Result<ParamValue, String> {
    graph
        .put(port, key, value)
        .map_err(|e| strip_port(&e.to_string(), port))
}

/// Parses one `--set PORT.KEY=VALUE` argument into (port, key, value) for
/// [`Config::apply_overrides`] (the `run`, `check` and `bench rivers2013` commands).
pub fn parse_setting(s: &str) -> Result<(String, String, String), String> {
    let bad = || format!("--set '{s}': expected PORT.PARAM=VALUE");
    let (lhs, value) = s.split_once('=').ok_or_else(bad)?;
    let (port, key) = lhs.split_once('.').ok_or_else(bad)?;
    Ok((port.to_string(), key.to_string(), value.to_string()))
}

/// Graph errors start with "port 'X': "; the config error already says which port.
fn strip_port(msg: &str, port: &str) -> String {
    msg.strip_prefix(&format!("port '{port}': "))
        .unwrap_or(msg)
        .to_string()
}

/// Builds an error from (line, port, key, message).
type ErrorAt<'a> = &'a dyn Fn(Option<usize>, Option<&str>, Option<&str>, String) -> ConfigError;

fn parse_port(
    t: &Table,
    line: usize,
    lines: &LineIndex,
    err: ErrorAt<'_>,
) -> Result<PortConfig, ConfigError> {
    let name = t
        .get("name")
        .and_then(Item::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            err(
                Some(line),
                None,
                Some("name"),
                "every [[port]] needs name = \"...\"".into(),
            )
        })?
        .to_string();
    let type_name = t
        .get("type")
        .and_then(Item::as_str)
        .ok_or_else(|| {
            err(
                Some(line),
                Some(&name),
                Some("type"),
                format!(
                    "missing type; one of: {}",
                    registry::type_names().join(", ")
                ),
            )
        })?
        .to_string();
    if !registry::type_names().contains(&type_name.as_str()) {
        let l = t
            .get("type")
            .and_then(|i| i.span())
            .map(|s| lines.line(s.start));
        return Err(err(
            l,
            Some(&name),
            Some("type"),
            format!(
                "unknown port type '{type_name}'; one of: {}",
                registry::type_names().join(", ")
            ),
        ));
    }
    // Every port needs its own PV prefix (its PVs would collide otherwise); without one, the
    // port's name and a colon, e.g. "ROI1:".
    let prefix = t
        .get("prefix")
        .and_then(Item::as_str)
        .map_or_else(|| format!("{name}:"), str::to_string);
    let mut settings = Vec::new();
    for (key, item) in t.iter() {
        if matches!(key, "name" | "type" | "prefix") {
            continue;
        }
        let kline = t
            .key(key)
            .and_then(|k| k.span())
            .or_else(|| item.span())
            .map_or(line, |s| lines.line(s.start));
        let value = match item.as_value() {
            Some(Value::Integer(i)) => ParamValue::Int(*i.value()),
            Some(Value::Float(f)) => ParamValue::Float(*f.value()),
            Some(Value::String(s)) => ParamValue::Str(s.value().clone()),
            Some(Value::Boolean(b)) => ParamValue::Int(*b.value() as i64),
            _ => {
                return Err(err(
                    Some(kline),
                    Some(&name),
                    Some(key),
                    "value must be a number, string or boolean".into(),
                ))
            }
        };
        settings.push(Setting {
            key: key.to_string(),
            value,
            line: kline,
        });
    }
    Ok(PortConfig {
        name,
        type_name,
        prefix,
        line,
        settings,
    })
}

/// One `[[access]]` table: `pvs` (glob, required), `hosts`, `users` (lists of globs; absent =
/// any), `rights` ("write", "read", "none"). Errors name the key.
fn parse_access(t: &Table) -> Result<AccessRule, (String, String)> {
    let mut rule = AccessRule {
        pvs: String::new(),
        hosts: Vec::new(),
        users: Vec::new(),
        rights: Rights::Read,
    };
    let mut have = (false, false);
    for (k, item) in t.iter() {
        let bad = |m: &str| (k.to_string(), m.to_string());
        match k {
            "pvs" => {
                rule.pvs = item
                    .as_str()
                    .ok_or_else(|| bad("must be a string (a glob over PV names)"))?
                    .to_string();
                have.0 = true;
            }
            "hosts" | "users" => {
                let list = item
                    .as_array()
                    .ok_or_else(|| bad("must be a list of strings"))?
                    .iter()
                    .map(|v| v.as_str().map(str::to_string))
                    .collect::<Option<Vec<String>>>()
                    .ok_or_else(|| bad("must be a list of strings"))?;
                if k == "hosts" {
                    rule.hosts = list;
                } else {
                    rule.users = list;
                }
            }
            "rights" => {
                let s = item
                    .as_str()
                    .ok_or_else(|| bad("must be \"write\", \"read\" or \"none\""))?;
                rule.rights = Rights::parse(s).map_err(|m| bad(&m))?;
                have.1 = true;
            }
            _ => return Err(bad("unknown key (expected pvs, hosts, users, rights)")),
        }
    }
    if !have.0 {
        return Err((
            "pvs".into(),
            "missing (a glob over PV names, e.g. \"*\")".into(),
        ));
    }
    if !have.1 {
        return Err((
            "rights".into(),
            "missing (\"write\", \"read\" or \"none\")".into(),
        ));
    }
    Ok(rule)
}

/// An override's value: `"text"` a string, else an integer or float when it reads as one.
fn override_value(v: &str) -> ParamValue {
    let t = v.trim();
    if t.len() >= 2 && t.starts_with('"') && t.ends_with('"') {
        return ParamValue::Str(t[1..t.len() - 1].to_string());
    }
    if let Ok(i) = t.parse::<i64>() {
        return ParamValue::Int(i);
    }
    match t.parse::<f64>() {
        Ok(f) if f.is_finite() => ParamValue::Float(f),
        _ => ParamValue::Str(v.to_string()),
    }
}
