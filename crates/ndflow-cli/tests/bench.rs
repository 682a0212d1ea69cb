//! `ndflow bench codec` and `ndflow bench hdf5` in their quick forms, run by the binary: every
//! row prints its median ratio to the reference with its spread, and the JSON holds every
//! interleaved pair.

use std::path::PathBuf;
use std::process::Command;

fn ndflow() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ndflow"))
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ndflow-bench-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Python with h5py + hdf5plugin: $NDFLOW_PYTHON, else the repository's .venv.
fn python() -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("NDFLOW_PYTHON").map(PathBuf::from),
        Some(PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../.venv/bin/python"
        ))),
    ];
    candidates.into_iter().flatten().find(|p| {
        Command::new(p)
            .args(["-c", "import h5py, hdf5plugin, bitshuffle, blosc"])
            .status()
            .is_ok_and(|s| s.success())
    })
}

#[test]
fn every_row_prints_a_median_ratio_and_the_json_holds_the_pairs() {
    // The reference is part of the test: without it the rows would have no ratio to check.
    let Some(py) = python() else {
        panic!(
            "no Python with h5py, hdf5plugin, bitshuffle and blosc: run scripts/setup.sh (it \
             installs them into .venv) or point NDFLOW_PYTHON at one"
        );
    };
    let json = tmp("hdf5.json");
    let out = ndflow()
        .args(["bench", "hdf5", "--frames", "3", "--reps", "3", "--python"])
        .arg(&py)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{table}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<&str> = table.lines().filter(|l| l.contains(" | ")).collect();
    // The header and the seven rows.
    assert_eq!(rows.len(), 8, "{table}");
    assert!(rows[0].ends_with("x C (median)"), "{table}");
    for row in &rows[1..] {
        // "1.23x ±4%" (or with "!"): a number, the x, a spread in percent.
        let ratio = row.rsplit(" | ").next().unwrap().trim();
        let (r, spread) = ratio.split_once("x ±").unwrap_or_else(|| panic!("{row}"));
        assert!(r.parse::<f64>().is_ok_and(|r| r > 0.0), "{row}");
        let pct = spread.trim_end_matches('!').trim_end_matches('%');
        assert!(pct.parse::<f64>().is_ok(), "{row}");
    }
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    let rows = j["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 7);
    for r in rows {
        let pairs = &r["frames_per_s_pairs"];
        let ours = pairs["ours"].as_array().unwrap();
        let theirs = pairs["reference"].as_array().unwrap();
        assert_eq!((ours.len(), theirs.len()), (3, 3), "{r}");
        // The median ratio is the median of the per-pair ratios.
        let mut ratios: Vec<f64> = ours
            .iter()
            .zip(theirs)
            .map(|(a, b)| a.as_f64().unwrap() / b.as_f64().unwrap())
            .collect();
        ratios.sort_by(f64::total_cmp);
        let median = pairs["ratio_median"].as_f64().unwrap();
        assert!((median - ratios[1]).abs() < 1e-9, "{r}");
        assert_eq!(r["dropped"], 0, "{r}");
        // Both sides wrote files of (nearly) the same size: the same frames, the same chunks.
        let (a, b) = (
            r["file_bytes"].as_f64().unwrap(),
            r["c_file_bytes"].as_f64().unwrap(),
        );
        assert!((a - b).abs() < 0.05 * b + 200_000.0, "{r}");
    }
}

#[test]
fn an_unknown_row_is_refused_with_the_list() {
    let out = ndflow()
        .args([
            "bench",
            "hdf5",
            "--rows",
            "nope",
            "--python",
            "/nonexistent",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("nope") && err.contains("bslz4_write_only"),
        "{err}"
    );
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
