//! Interleaved A/B measurement shared by the benchmarks that compare ndflow with a reference.
//!
//! On a shared machine two timings taken minutes apart disagree by tens of percent, so a ratio
//! of two "best of N" figures measured one after the other says little. Here ours (A) and the
//! reference (B) run in turns, A B A B …, on the same data, and the ratio is taken per pair:
//! load that lasts longer than one pair hits both sides alike and cancels. The reported figure
//! is the median of the pair ratios, with their spread, so a reader sees how far to trust it.
//!
//! References that live in Python (h5py, python-bitshuffle, p4p) are kept in one long-running
//! process ([`PyWorker`]) that answers one JSON request per line, so its interpreter start-up
//! and imports are paid once and a single repetition can be interleaved with ours.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::Value as Json;

/// Spread above which a row's figure is marked as not trustworthy (±10 %, issue 15).
pub const SPREAD_LIMIT: f64 = 0.10;

/// Median of `v` (the mean of the two middle values for an even count); NaN when empty.
pub fn median(v: &[f64]) -> f64 {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return f64::NAN;
    }
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// Paired measurements of ours (A) and a reference (B), in the same unit where larger is
/// better (MB/s, frames/s, GB/s).
#[derive(Clone, Debug, Default)]
pub struct Paired {
    pub ours: Vec<f64>,
    pub reference: Vec<f64>,
}

impl Paired {
    pub fn push(&mut self, ours: f64, reference: f64) {
        self.ours.push(ours);
        self.reference.push(reference);
    }

    /// Per-pair ratios ours / reference.
    pub fn ratios(&self) -> Vec<f64> {
        self.ours
            .iter()
            .zip(&self.reference)
            .map(|(a, b)| if *b > 0.0 { a / b } else { f64::NAN })
            .collect()
    }

    pub fn ours_median(&self) -> f64 {
        median(&self.ours)
    }

    pub fn reference_median(&self) -> f64 {
        median(&self.reference)
    }

    /// Median of the per-pair ratios: the row's figure.
    pub fn ratio_median(&self) -> f64 {
        median(&self.ratios())
    }

    /// Half the range of the pair ratios relative to their median (0.08 = ±8 %).
    pub fn ratio_spread(&self) -> f64 {
        relative_spread(&self.ratios())
    }

    /// True when the ratio is too scattered to be trusted ([`SPREAD_LIMIT`]).
    pub fn unsteady(&self) -> bool {
        self.ratio_spread() > SPREAD_LIMIT
    }

    /// "1.23x ±4%" (with a trailing "!" when [`Self::unsteady`]) for the tables.
    pub fn ratio_text(&self) -> String {
        format_ratio(self.ratio_median(), self.ratio_spread())
    }

    pub fn to_json(&self) -> Json {
        serde_json::json!({
            "ours": self.ours,
            "reference": self.reference,
            "ratio_median": finite_or_null(self.ratio_median()),
            "ratio_spread": finite_or_null(self.ratio_spread()),
            "unsteady": self.unsteady(),
        })
    }
}

/// Half the range of `v` relative to its median; 0 for fewer than two values.
pub fn relative_spread(v: &[f64]) -> f64 {
    let finite: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if finite.len() < 2 {
        return 0.0;
    }
    let (lo, hi) = finite
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
            (lo.min(*x), hi.max(*x))
        });
    let m = median(&finite);
    if m > 0.0 {
        (hi - lo) / 2.0 / m
    } else {
        f64::NAN
    }
}

/// "1.23x ±4%", with "!" appended when the spread exceeds [`SPREAD_LIMIT`].
pub fn format_ratio(ratio: f64, spread: f64) -> String {
    if !ratio.is_finite() {
        return "-".to_string();
    }
    let mark = if spread > SPREAD_LIMIT { "!" } else { "" };
    format!("{ratio:.2}x ±{:.0}%{mark}", spread * 100.0)
}

fn finite_or_null(x: f64) -> Json {
    if x.is_finite() {
        Json::from(x)
    } else {
        Json::Null
    }
}

/// A long-running Python reference: started once, then one JSON request per line on stdin,
/// one JSON answer per line on stdout. An answer with an `"error"` key is returned as an error
/// (the Python side reports its own exceptions that way); stderr goes to ours.
pub struct PyWorker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl PyWorker {
    /// Starts `python script args…`.
    pub fn start(python: &Path, script: &Path, args: &[&str]) -> Result<PyWorker, String> {
        let mut child = Command::new(python)
            .arg(script)
            .args(args)
            .env("OMP_NUM_THREADS", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| {
                format!(
                    "cannot start {} {}: {e}",
                    python.display(),
                    script.display()
                )
            })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{}: no pipes to the reference", script.display()));
        };
        Ok(PyWorker {
            child,
            stdin,
            stdout: BufReader::new(stdout),
        })
    }

    /// Sends one request and waits for its answer.
    pub fn call(&mut self, request: &Json) -> Result<Json, String> {
        let line = request.to_string();
        writeln!(self.stdin, "{line}")
            .and_then(|_| self.stdin.flush())
            .map_err(|e| format!("reference closed its input: {e}"))?;
        let mut answer = String::new();
        let n = self
            .stdout
            .read_line(&mut answer)
            .map_err(|e| format!("reading the reference's answer: {e}"))?;
        if n == 0 {
            return Err(format!("the reference exited while answering {line}"));
        }
        let value: Json = serde_json::from_str(answer.trim())
            .map_err(|e| format!("the reference answered {answer:?}, not JSON: {e}"))?;
        if let Some(err) = value.get("error") {
            return Err(format!("the reference failed: {err}"));
        }
        Ok(value)
    }
}

impl Drop for PyWorker {
    fn drop(&mut self) {
        // Closing stdin ends the worker's loop; kill it if it does not go within a second.
        let _ = self.stdin.flush();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) | Err(_) => return,
                Ok(None) if std::time::Instant::now() >= deadline => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return;
                }
                Ok(None) => std::thread::sleep(std::time::Duration::from_millis(10)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
        assert_eq!(median(&[f64::NAN, 5.0]), 5.0);
    }

    #[test]
    fn ratios_are_taken_per_pair() {
        let mut p = Paired::default();
        // Load doubles both sides of the second pair: the per-pair ratio is unchanged.
        p.push(200.0, 100.0);
        p.push(100.0, 50.0);
        p.push(208.0, 100.0);
        assert_eq!(p.ratios(), vec![2.0, 2.0, 2.08]);
        assert_eq!(p.ratio_median(), 2.0);
        assert!((p.ratio_spread() - 0.02).abs() < 1e-12);
        assert!(!p.unsteady());
        assert_eq!(p.ratio_text(), "2.00x ±2%");
    }

    #[test]
    fn a_scattered_row_is_marked() {
        let mut p = Paired::default();
        p.push(1.0, 1.0);
        p.push(1.5, 1.0);
        p.push(1.2, 1.0);
        assert!(p.unsteady());
        assert!(p.ratio_text().ends_with('!'));
        assert_eq!(p.to_json()["unsteady"], Json::Bool(true));
    }

    #[test]
    fn a_python_worker_answers_line_by_line_and_reports_errors() {
        let Ok(python) = which_python() else {
            return;
        };
        let dir = std::env::temp_dir().join(format!("ndflow-pyworker-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let script = dir.join("echo.py");
        let body = "import json, sys\nfor line in sys.stdin:\n    r = json.loads(line)\n    \
                    out = {'error': 'bad'} if r.get('fail') else {'twice': r['x'] * 2}\n    \
                    print(json.dumps(out), flush=True)\n";
        assert!(std::fs::write(&script, body).is_ok());
        let mut w = match PyWorker::start(&python, &script, &[]) {
            Ok(w) => w,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(
            w.call(&serde_json::json!({"x": 21})).ok(),
            Some(serde_json::json!({"twice": 42}))
        );
        let err = w.call(&serde_json::json!({"fail": true}));
        assert!(matches!(err, Err(ref e) if e.contains("bad")), "{err:?}");
        assert_eq!(
            w.call(&serde_json::json!({"x": 1})).ok(),
            Some(serde_json::json!({"twice": 2}))
        );
        drop(w);
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn which_python() -> Result<std::path::PathBuf, ()> {
        for p in ["python3", "/usr/bin/python3"] {
            if Command::new(p)
                .arg("-c")
                .arg("pass")
                .status()
                .is_ok_and(|s| s.success())
            {
                return Ok(p.into());
            }
        }
        Err(())
    }
}
