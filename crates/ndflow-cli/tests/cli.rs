//! The `ndflow` binary end to end: run --until-idle --summary, demo, errors, params, bench.

use std::process::Command;

fn ndflow() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ndflow"))
}

fn tmp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ndflow-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[test]
fn run_until_idle_writes_a_summary_whose_counters_add_up() {
    let cfg = tmp("pipe.toml");
    std::fs::write(
        &cfg,
        r#"prefix = "T:"
[[port]]
name = "SIM1"
type = "sim"
MaxSizeX = 128
MaxSizeY = 64
ImageMode = "Multiple"
NumImages = 50
AcquireTime = 0.0
AcquirePeriod = 0.0
Acquire = 1

[[port]]
name = "ROI1"
type = "roi"
NDArrayPort = "SIM1"
QueueSize = 100
SizeX = 32
SizeY = 16

[[port]]
name = "STATS1"
type = "stats"
NDArrayPort = "ROI1"
QueueSize = 100
"#,
    )
    .unwrap();
    let summary = tmp("summary.json");
    let out = ndflow()
        .args([
            "run",
            cfg.to_str().unwrap(),
            "--until-idle",
            "--quiet",
            "--summary",
        ])
        .arg(&summary)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let p = &j["ports"];
    assert_eq!(p["SIM1"]["ArrayCounter_RBV"], 50);
    assert_eq!(p["SIM1"]["DataType"], "UInt8");
    assert_eq!(p["SIM1"]["DetectorState_RBV"], "Idle");
    for name in ["ROI1", "STATS1"] {
        let s = &p[name];
        assert_eq!(s["ArraysOffered_RBV"], 50, "{name}");
        assert_eq!(s["ArrayCounter_RBV"], 50, "{name}");
        assert_eq!(s["DroppedArrays_RBV"], 0, "{name}");
    }
    assert_eq!(p["ROI1"]["NDArrayPort"], "SIM1");
    assert_eq!(p["STATS1"]["ArraySizeX_RBV"], 32);
    assert_eq!(p["STATS1"]["ArraySizeY_RBV"], 16);
}

#[test]
fn config_error_exits_nonzero_with_location() {
    let cfg = tmp("bad.toml");
    std::fs::write(
        &cfg,
        "[[port]]\nname = \"SIM1\"\ntype = \"sim\"\nSimMode = \"Zigzag\"\n",
    )
    .unwrap();
    let out = ndflow()
        .args(["run", cfg.to_str().unwrap(), "--until-idle"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.toml:4: port 'SIM1': key 'SimMode'"),
        "{err}"
    );
    assert!(err.contains("LinearRamp"), "choices listed: {err}");
    let out = ndflow()
        .args(["run", "/nonexistent/x.toml"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read /nonexistent/x.toml"));
}

#[test]
fn demo_runs_to_completion() {
    let summary = tmp("demo.json");
    let out = ndflow()
        .args(["demo", "--frames", "40", "--quiet", "--summary"])
        .arg(&summary)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("NDPluginStats") && table.contains("SIM1"),
        "{table}"
    );
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_eq!(j["ports"]["SIM1"]["ArrayCounter_RBV"], 40);
}

#[test]
fn params_lists_types_and_parameters() {
    let out = ndflow().args(["params"]).output().unwrap();
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("sim") && s.contains("NDPluginROI"));
    let out = ndflow().args(["params", "roi"]).output().unwrap();
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("| NDArrayPort |") && s.contains("MinX"), "{s}");
    let out = ndflow().args(["params", "nope"]).output().unwrap();
    assert!(!out.status.success());
}

#[test]
fn bench_lists_every_benchmark() {
    let out = ndflow().args(["bench", "--help"]).output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for which in [
        "rivers2013",
        "codec",
        "pva",
        "hdf5",
        "scaleout",
        "hop",
        "ca",
    ] {
        assert!(
            help.lines().any(|l| l.trim_start().starts_with(which)),
            "{which}: {help}"
        );
    }
}
