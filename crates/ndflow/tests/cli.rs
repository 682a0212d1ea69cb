//! The `ndflow` binary end to end: run --until-idle --summary, demo, errors, params.

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

/// `bench codec` in its quick form: every row has the speed ratio columns filled with numbers
/// for the in-process C references, LZ4 and Blosc streams as long as the C libraries' (the
/// bench itself fails if the bytes differ), and the JSON keeps every interleaved sample.
#[test]
fn bench_codec_prints_ratio_columns_and_keeps_the_samples() {
    let json = tmp("codec.json");
    let out = ndflow()
        .args([
            "bench",
            "codec",
            "--side",
            "64",
            "--reps",
            "3",
            "--batch-ms",
            "1",
        ])
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let header = text.lines().find(|l| l.starts_with("data")).unwrap();
    assert!(
        header.contains("comp×") && header.contains("dec×"),
        "{header}"
    );
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("_u16 ") || l.contains("_u32 "))
        .collect();
    assert_eq!(rows.len(), 6 * 5, "{text}");
    let ratio = |s: &str| s.strip_suffix('!').unwrap_or(s).to_string();
    for row in &rows {
        let f: Vec<&str> = row.split_whitespace().collect();
        if f[1] == "bslz4" && f[3] == "-" {
            continue; // no Python with bitshuffle here: ours alone
        }
        // data codec ratio cratio | comp ccomp comp× ±s | dec cdec dec× ±s
        assert_eq!(f.len(), 14, "{row}");
        for i in [7, 12] {
            let x: f64 = f[i].strip_suffix('x').unwrap().parse().unwrap();
            assert!(x > 0.0 && x.is_finite(), "{row}");
            assert!(ratio(f[i + 1]).starts_with('±'), "{row}");
        }
        if f[1].starts_with("blosc") || f[1] == "lz4" {
            assert_eq!(f[2], f[3], "same stream, same ratio: {row}");
        }
    }
    let j: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let r = &j["rows"][3];
    assert_eq!(r["codec"], "lz4");
    for side in ["compress", "decompress"] {
        assert_eq!(r[side]["ours"].as_array().unwrap().len(), 3);
        assert_eq!(r[side]["reference"].as_array().unwrap().len(), 3);
        assert!(r[side]["ratio_median"].as_f64().unwrap() > 0.0);
    }
    assert!(text.contains("Codec plugin, BSLZ4"), "{text}");
}
