//! The configuration/PV reference, generated from the parameter declarations.

use ndflow_core::param::DefaultValue;
use ndflow_core::{AlarmRule, ParamDef, ParamKind, ParamValue, Severity};
use ndflow_runtime::PortArgs;

use crate::registry;

fn kind(d: &ParamDef) -> String {
    match d.kind {
        ParamKind::Enum(choices) => format!("enum: {}", choices.join(" / ")),
        ParamKind::Array(dt) => format!("array of {dt}"),
        k => k.name().to_string(),
    }
}

fn default(d: &ParamDef) -> String {
    match (d.default, d.kind) {
        (DefaultValue::Int(i), ParamKind::Enum(c)) => c
            .get(i as usize)
            .map_or(i.to_string(), |s| format!("\"{s}\"")),
        (DefaultValue::Int(i), _) => i.to_string(),
        (DefaultValue::Float(f), _) => f.to_string(),
        (DefaultValue::Str(s), _) => format!("\"{s}\""),
        (DefaultValue::EmptyArray, _) => "[]".into(),
    }
}

fn limits(d: &ParamDef) -> String {
    match (d.min, d.max) {
        (None, None) => String::new(),
        (Some(a), None) => format!(">= {a}"),
        (None, Some(b)) => format!("<= {b}"),
        (Some(a), Some(b)) => format!("{a} .. {b}"),
    }
}

/// Markdown tables for one port type.
pub fn markdown(type_name: &str) -> String {
    tables_markdown(&registry::param_tables(type_name))
}

/// Markdown tables for one port type built with these constructor keys (an `aravis` port's
/// `GC_*` records come from the camera its `CameraId` names); the error names a bad key.
pub fn markdown_with(type_name: &str, keys: &[(String, ParamValue)]) -> Result<String, String> {
    let t = registry::find(type_name).ok_or_else(|| format!("unknown port type '{type_name}'"))?;
    for (k, _) in keys {
        if !t.is_constructor_key(k) {
            let known: Vec<&str> = t.constructor_keys.iter().map(|c| c.name).collect();
            return Err(format!(
                "'{k}' is not a constructor key of type '{type_name}' (its keys: {})",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ));
        }
    }
    let mut args = PortArgs::defaults();
    for (k, v) in keys {
        args = args.with_value(k, v);
    }
    Ok(tables_markdown(&t.param_tables(&args)?))
}

/// "; alarm: …" — when the parameter's records alarm ([`ndflow_core::alarm`]).
fn alarm_text(d: &ParamDef) -> String {
    let pct = |f: f64| format!("{}%", (f * 100.0).round());
    match d.alarm {
        AlarmRule::None => String::new(),
        AlarmRule::States {
            severities,
            outputs,
        } => {
            let names = d.choices(true).unwrap_or(&[]);
            let states: Vec<String> = severities
                .iter()
                .zip(names)
                .filter(|(s, _)| **s != Severity::NoAlarm)
                .map(|(s, n)| format!("{} on {n:?}", s.name()))
                .collect();
            let on = if outputs { "both records" } else { "readback" };
            format!("; alarm ({on}): {}", states.join(", "))
        }
        AlarmRule::Levels(l) => {
            let mut parts = Vec::new();
            let mut add = |f: Option<f64>, what: &str, sev: &str| {
                if let Some(f) = f {
                    parts.push(format!("{what} {} of {} {sev}", pct(f), l.of));
                }
            };
            add(l.hihi, "HIHI at >=", "MAJOR");
            add(l.high, "HIGH at >=", "MINOR");
            add(l.low, "LOW at <=", "MINOR");
            add(l.lolo, "LOLO at <=", "MAJOR");
            format!("; alarm: {}", parts.join(", "))
        }
        AlarmRule::NonZero(sev) => format!("; alarm: {} while non-zero", sev.name()),
    }
}

fn tables_markdown(tables: &[(&'static str, &'static [ParamDef])]) -> String {
    let mut out = String::new();
    // A declaration a later table overrides (the sim's ColorMode) is listed only there.
    let overridden = |name: &str, at: usize| {
        tables[at + 1..]
            .iter()
            .any(|(_, t)| t.iter().any(|d| d.overrides && d.name == name))
    };
    for (at, (group, table)) in tables.iter().enumerate() {
        out.push_str(&format!("\n#### {group}\n\n"));
        out.push_str("| config key | PV suffixes | type | default | limits | description |\n");
        out.push_str("|---|---|---|---|---|---|\n");
        for d in table.iter().filter(|d| !overridden(d.name, at)) {
            let key = if d.writable() { d.name } else { "(read-only)" };
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                key,
                d.pv_names().join(", "),
                kind(d),
                default(d),
                limits(d),
                format!("{}{}", d.desc, alarm_text(d))
                    .trim_start_matches("; ")
                    .replace('|', "\\|")
            ));
        }
    }
    out
}

/// The whole reference: every port type.
pub fn full_markdown() -> String {
    let mut out = String::from(
        "# ndflow configuration and PV reference\n\n\
         Generated by `ndflow params --markdown` from the parameter declarations (do not edit by hand).\n\
         Every writable parameter is a config key of its `[[port]]` table and the PV \
         `{prefix}{port prefix}{Name}` with readback `{Name}_RBV`; read-only ones are served as the \
         PV suffixes listed. Enums take their string or their index. The link records' fields \
         (`.DOL`/`.OMSL`, `.INP`/`.ZRVL`/`.ONVL`, `.OUT`/`.OCAL`) are config keys too, quoted: \
         `\"ShutterOpenEPICS.OUT\" = \"BL:SHUTTER:CMD PP\"` (docs/operations.md, Links).\n",
    );
    for t in registry::TYPES {
        out.push_str(&format!(
            "\n## `type = \"{}\"` — {}{}\n\n{}.\n",
            t.name,
            t.class,
            if t.driver { " (driver)" } else { "" },
            t.description
        ));
        if !t.constructor_keys.is_empty() {
            out.push_str("\nRead once, when the port is built (not parameters):\n\n");
            for k in t.constructor_keys {
                out.push_str(&format!("- `{}`: {}\n", k.name, k.doc));
            }
        }
        out.push_str(&markdown(t.name));
    }
    out
}

/// The port types as a Markdown table (the README's list).
pub fn types_markdown() -> String {
    let mut out = String::from("| type | areaDetector class | what it does |\n|---|---|---|\n");
    for t in registry::TYPES {
        let keys: Vec<String> = t
            .constructor_keys
            .iter()
            .map(|k| format!("`{}`", k.name))
            .collect();
        let keys = if keys.is_empty() {
            String::new()
        } else {
            format!(" (built with {})", keys.join(", "))
        };
        out.push_str(&format!(
            "| `{}` | {}{} | {}{} |\n",
            t.name,
            t.class,
            if t.driver { " (driver)" } else { "" },
            t.description.replace('|', "\\|"),
            keys
        ));
    }
    out
}

/// One line per port type: what `ndflow params` prints.
pub fn types_text() -> String {
    registry::TYPES
        .iter()
        .map(|t| format!("{:12} {:22} {}\n", t.name, t.class, t.description))
        .collect()
}

/// `text` with the part between the README's port-type markers replaced by
/// [`types_markdown`]; `None` when the markers are missing.
pub fn readme_with_types(text: &str) -> Option<String> {
    const BEGIN: &str = "<!-- port-types:";
    const END: &str = "<!-- end port-types -->";
    let b = text.find(BEGIN)?;
    let b = b + text[b..].find('\n')? + 1;
    let e = text[b..].find(END)? + b;
    Some(format!("{}{}{}", &text[..b], types_markdown(), &text[e..]))
}
