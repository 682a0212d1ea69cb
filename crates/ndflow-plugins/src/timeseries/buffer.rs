//! The time-series store shared by TimeSeries, ROIStat and Stats: `n_signals` series of
//! `n_points` points each, filled one time point at a time, each point the average of
//! `num_average` inputs, in Fixed length (stop when full) or Circ. buffer (wrap) mode.

/// One store of time series. Not thread-safe: owners keep it under a lock.
#[derive(Debug, Clone)]
pub struct TsBuffer {
    n_signals: usize,
    n_points: usize,
    circular: bool,
    num_average: usize,
    /// `data[signal * n_points + t]`, in the order written (a ring in Circ. buffer mode).
    data: Vec<f64>,
    /// Time stamp of the last input of each point.
    stamps: Vec<f64>,
    /// Running sums of the point being averaged.
    sums: Vec<f64>,
    n_averaged: usize,
    current: usize,
    /// Whether new inputs are recorded.
    pub acquiring: bool,
}

/// What [`TsBuffer::push`] did with one input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pushed {
    /// Not acquiring: ignored.
    Ignored,
    /// Added to the running average of the next point.
    Averaging,
    /// Completed a point.
    Point,
    /// Completed the last point of a Fixed length series: acquisition has stopped.
    Full,
}

impl TsBuffer {
    pub fn new(n_signals: usize, n_points: usize) -> TsBuffer {
        let mut b = TsBuffer {
            n_signals: 0,
            n_points: 0,
            circular: false,
            num_average: 1,
            data: Vec::new(),
            stamps: Vec::new(),
            sums: Vec::new(),
            n_averaged: 0,
            current: 0,
            acquiring: false,
        };
        b.resize(n_signals, n_points);
        b
    }

    pub fn n_signals(&self) -> usize {
        self.n_signals
    }

    pub fn n_points(&self) -> usize {
        self.n_points
    }

    /// The next point to be written (TSCurrentPoint).
    pub fn current(&self) -> usize {
        self.current
    }

    pub fn circular(&self) -> bool {
        self.circular
    }

    pub fn num_average(&self) -> usize {
        self.num_average
    }

    /// New sizes; everything recorded is erased (areaDetector reallocates zeroed arrays).
    pub fn resize(&mut self, n_signals: usize, n_points: usize) {
        self.n_signals = n_signals;
        self.n_points = n_points.max(1);
        self.data = vec![0.0; self.n_signals * self.n_points];
        self.stamps = vec![0.0; self.n_points];
        self.sums = vec![0.0; self.n_signals];
        self.erase();
    }

    /// Fixed length (`false`) or Circ. buffer (`true`); erases, as areaDetector's mode write.
    pub fn set_circular(&mut self, circular: bool) {
        self.circular = circular;
        self.erase();
    }

    /// Inputs per point (at least 1); restarts the point being averaged.
    pub fn set_num_average(&mut self, n: usize) {
        self.num_average = n.max(1);
        self.n_averaged = 0;
        self.sums.fill(0.0);
    }

    /// Zeroes every series and starts again at point 0.
    pub fn erase(&mut self) {
        self.data.fill(0.0);
        self.stamps.fill(0.0);
        self.sums.fill(0.0);
        self.n_averaged = 0;
        self.current = 0;
    }

    /// Adds one input: `values[s]` for signal `s` (missing signals count as 0, extra ones
    /// are ignored). A completed point is `quantise(sum / n)` (the TimeSeries plugin stores
    /// points in the input's data type).
    pub fn push(&mut self, values: &[f64], stamp: f64, quantise: impl Fn(f64) -> f64) -> Pushed {
        if !self.acquiring {
            return Pushed::Ignored;
        }
        for (s, v) in self.sums.iter_mut().zip(values) {
            *s += v;
        }
        self.n_averaged += 1;
        if self.n_averaged < self.num_average {
            return Pushed::Averaging;
        }
        let n = self.n_averaged as f64;
        let t = self.current;
        for (s, sum) in self.sums.iter_mut().enumerate() {
            self.data[s * self.n_points + t] = quantise(*sum / n);
            *sum = 0.0;
        }
        self.n_averaged = 0;
        self.stamps[t] = stamp;
        self.current += 1;
        if self.current >= self.n_points {
            if !self.circular {
                self.acquiring = false;
                return Pushed::Full;
            }
            self.current = 0;
        }
        Pushed::Point
    }

    /// Points in a published series: those written so far (Fixed length) or all of them,
    /// oldest first (Circ. buffer).
    pub fn len(&self) -> usize {
        if self.circular {
            self.n_points
        } else {
            self.current
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `row` (length `n_points`) in published order, into `out`.
    fn ordered(&self, row: &[f64], out: &mut Vec<f64>) {
        out.clear();
        if self.circular {
            out.extend_from_slice(&row[self.current..]);
            out.extend_from_slice(&row[..self.current]);
        } else {
            out.extend_from_slice(&row[..self.current]);
        }
    }

    /// Signal `s`'s series in published order (empty for an unknown signal).
    pub fn series(&self, s: usize) -> Vec<f64> {
        let mut out = Vec::new();
        if s < self.n_signals {
            let row = &self.data[s * self.n_points..(s + 1) * self.n_points];
            self.ordered(row, &mut out);
        }
        out
    }

    /// The points' time stamps in published order.
    pub fn stamps(&self) -> Vec<f64> {
        let mut out = Vec::new();
        self.ordered(&self.stamps, &mut out);
        out
    }

    /// All signals, each `n_points` long, oldest first: `[signal][time]` flattened (the
    /// TimeSeries plugin's `[NTime, NSignals]` output; Fixed length keeps unwritten zeros).
    pub fn all_points(&self) -> Vec<f64> {
        let mut out = Vec::with_capacity(self.data.len());
        for row in self.data.chunks_exact(self.n_points) {
            if self.circular {
                out.extend_from_slice(&row[self.current..]);
                out.extend_from_slice(&row[..self.current]);
            } else {
                out.extend_from_slice(row);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(v: f64) -> f64 {
        v
    }

    #[test]
    fn fixed_stops_when_full() {
        let mut b = TsBuffer::new(2, 3);
        b.acquiring = true;
        assert_eq!(b.push(&[1.0, 10.0], 0.1, id), Pushed::Point);
        assert_eq!(b.push(&[2.0, 20.0], 0.2, id), Pushed::Point);
        assert_eq!(b.push(&[3.0, 30.0], 0.3, id), Pushed::Full);
        assert!(!b.acquiring);
        assert_eq!(b.push(&[4.0, 40.0], 0.4, id), Pushed::Ignored);
        assert_eq!(b.series(0), vec![1.0, 2.0, 3.0]);
        assert_eq!(b.series(1), vec![10.0, 20.0, 30.0]);
        assert_eq!(b.stamps(), vec![0.1, 0.2, 0.3]);
    }

    #[test]
    fn circular_wraps_oldest_first() {
        let mut b = TsBuffer::new(1, 3);
        b.set_circular(true);
        b.acquiring = true;
        for i in 1..=5 {
            assert_eq!(b.push(&[i as f64], i as f64, id), Pushed::Point);
        }
        assert_eq!(b.series(0), vec![3.0, 4.0, 5.0]);
        assert_eq!(b.all_points(), vec![3.0, 4.0, 5.0]);
        assert!(b.acquiring);
    }

    #[test]
    fn averages_num_average_inputs() {
        let mut b = TsBuffer::new(1, 4);
        b.set_num_average(3);
        b.acquiring = true;
        let got: Vec<Pushed> = (0..6).map(|i| b.push(&[i as f64], 0.0, id)).collect();
        assert_eq!(got[2], Pushed::Point);
        assert_eq!(got[5], Pushed::Point);
        assert_eq!(b.series(0), vec![1.0, 4.0]);
    }
}
