//! `ndflow vds`: the command line around [`ndflow_io::hdf5::vds::build_vds`] — what it prints
//! and the JSON report.

use std::path::PathBuf;

use ndflow_io::hdf5::vds::{build_vds, VdsOptions, VdsReport};
use serde_json::json;

/// Gaps listed one by one before the rest is summed up.
const GAPS_SHOWN: usize = 20;

pub struct VdsArgs {
    pub output: PathBuf,
    pub parts: Vec<PathBuf>,
    pub options: VdsOptions,
    pub json: Option<PathBuf>,
    /// Fail (after writing the master) when frames are missing.
    pub strict: bool,
    pub quiet: bool,
}

/// Builds the master and prints what it holds. Gaps are warnings unless `strict`.
pub fn run(args: &VdsArgs) -> Result<(), String> {
    let report = build_vds(&args.output, &args.parts, &args.options).map_err(|e| e.to_string())?;
    if !args.quiet {
        print!("{}", describe(&report));
    }
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&to_json(&report)).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n")
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    let missing = report.missing();
    if missing > 0 {
        eprintln!(
            "warning: {missing} of {} frames are missing from every part (uniqueIds {}); \
             they read as 0",
            report.frames,
            gap_list(&report)
        );
        if args.strict {
            return Err(format!("{missing} frames missing (--strict)"));
        }
    }
    Ok(())
}

fn gap_list(r: &VdsReport) -> String {
    let mut s: Vec<String> = r
        .gaps
        .iter()
        .take(GAPS_SHOWN)
        .map(|g| match g.count {
            1 => g.first_uid.to_string(),
            n => format!("{}-{}", g.first_uid, g.first_uid + n as i64 - 1),
        })
        .collect();
    if r.gaps.len() > GAPS_SHOWN {
        s.push(format!("and {} more runs", r.gaps.len() - GAPS_SHOWN));
    }
    s.join(", ")
}

fn describe(r: &VdsReport) -> String {
    let mut out = format!(
        "{}: {} frames (uniqueId {}..={}), {} with data from {} parts, {} missing; {} mappings\n",
        r.output.display(),
        r.frames,
        r.first_uid,
        r.last_uid,
        r.mapped,
        r.parts.len(),
        r.missing(),
        r.mappings
    );
    for p in &r.parts {
        let range = match (p.first_uid, p.last_uid) {
            (Some(a), Some(b)) => format!("uniqueId {a}..={b}"),
            _ => "no frames".into(),
        };
        let swmr = if p.swmr {
            " (still being written: SWMR)"
        } else {
            ""
        };
        out += &format!(
            "  {}: {} frames, {range}{swmr}\n",
            p.path.display(),
            p.frames
        );
    }
    if !r.attributes.is_empty() {
        out += &format!("  per-frame attributes: {}\n", r.attributes.join(", "));
    }
    for s in &r.skipped_attributes {
        out += &format!("  left out: {s}\n");
    }
    out
}

fn to_json(r: &VdsReport) -> serde_json::Value {
    json!({
        "output": r.output.display().to_string(),
        "frames": r.frames,
        "first_unique_id": r.first_uid,
        "last_unique_id": r.last_uid,
        "mapped": r.mapped,
        "missing": r.missing(),
        "gaps": r.gaps.iter().map(|g| json!({"first_unique_id": g.first_uid, "count": g.count})).collect::<Vec<_>>(),
        "mappings": r.mappings,
        "attributes": r.attributes,
        "skipped_attributes": r.skipped_attributes,
        "parts": r.parts.iter().map(|p| json!({
            "path": p.path.display().to_string(),
            "frames": p.frames,
            "first_unique_id": p.first_uid,
            "last_unique_id": p.last_uid,
            "swmr": p.swmr,
        })).collect::<Vec<_>>(),
    })
}
