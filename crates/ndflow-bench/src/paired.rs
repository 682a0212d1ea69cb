//! Interleaved A/B measurement shared by the benchmarks that compare ndflow with a reference.
//!
//! On a shared machine two timings taken minutes apart disagree by tens of percent, so a ratio
//! of two "best of N" figures measured one after the other says little. Here ours (A) and the
//! reference (B) run in turns, A B A B …, on the same data, and the ratio is taken per pair:
//! load that lasts longer than one pair hits both sides alike and cancels. The reported figure
//! is the median of the pair ratios, with their spread, so a reader sees how far to trust it.
//!
//! References that live in Python (h5py, python-bitshuffle) run in one long-running process
//! ([`crate::host::PyWorker`]), so that a single repetition of theirs can be interleaved with ours.

use serde_json::Value as Json;

/// Spread above which a row's figure is marked as not to be trusted (±10 %).
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
}
