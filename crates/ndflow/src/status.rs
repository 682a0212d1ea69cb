//! The live status line: frame rate at the source and drops per plugin, drawn in place on a
//! terminal. Shown only when someone watches: on a terminal (stderr), or with `--status`
//! ([`show_status_line`]); otherwise `ndflow run` prints state changes only (`events.rs`).

use std::io::{IsTerminal, Write};
use std::time::Instant;

use ndflow_runtime::{Graph, PortHandle};

/// Whether `ndflow run` shows the status line: not with `--quiet`; with `--status` (one line
/// a second when stderr is not a terminal); otherwise when stderr is a terminal.
pub fn show_status_line(quiet: bool, status: bool) -> bool {
    !quiet && (status || std::io::stderr().is_terminal())
}

pub struct StatusLine {
    start: Instant,
    last: Instant,
    last_count: i64,
    tty: bool,
    /// A status line is on the terminal, not ended by a newline.
    drawn: bool,
}

impl Default for StatusLine {
    fn default() -> Self {
        Self::new()
    }
}

impl StatusLine {
    pub fn new() -> StatusLine {
        StatusLine {
            start: Instant::now(),
            last: Instant::now(),
            last_count: 0,
            tty: std::io::stderr().is_terminal(),
            drawn: false,
        }
    }

    /// One compact line: elapsed, frames and rate per driver, total and worst drops.
    pub fn render(&mut self, graph: &Graph) -> String {
        let now = Instant::now();
        let mut parts = Vec::new();
        let mut total_count = 0;
        let mut drops: Vec<(String, u64)> = Vec::new();
        for p in graph.ports() {
            match p {
                PortHandle::Driver(d) => {
                    let c = d.array_counter();
                    total_count += c;
                    let mut s = format!("{} {} frames", d.name, c);
                    if d.dropped() > 0 {
                        s.push_str(&format!(" ({} dropped: pool full)", d.dropped()));
                    }
                    parts.push(s);
                }
                PortHandle::Plugin(pl) => {
                    let a = pl.accounting();
                    if a.dropped_total() + a.dropped_output > 0 {
                        drops.push((pl.name.clone(), a.dropped_total() + a.dropped_output));
                    }
                }
            }
        }
        let dt = now.duration_since(self.last).as_secs_f64();
        let rate = if dt > 0.0 {
            (total_count - self.last_count) as f64 / dt
        } else {
            0.0
        };
        self.last = now;
        self.last_count = total_count;
        let drop_text = if drops.is_empty() {
            "no drops".to_string()
        } else {
            drops.sort_by_key(|d| std::cmp::Reverse(d.1));
            let list: Vec<String> = drops
                .iter()
                .take(4)
                .map(|(n, d)| format!("{n} {d}"))
                .collect();
            format!("dropped: {}", list.join(", "))
        };
        format!(
            "[{:7.1}s] {} | {:.1} frames/s | {} | queued {}",
            now.duration_since(self.start).as_secs_f64(),
            parts.join(", "),
            rate,
            drop_text,
            graph.busy()
        )
    }

    pub fn print(&mut self, graph: &Graph) {
        let line = self.render(graph);
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[2K{line}");
            self.drawn = true;
        } else {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
    }

    /// Prints whole lines (state changes, messages) to stderr; a status line drawn on the
    /// terminal is cleared first and redrawn by the next [`StatusLine::print`].
    pub fn say(&mut self, lines: &[String]) {
        if lines.is_empty() {
            return;
        }
        let mut err = std::io::stderr().lock();
        if self.drawn {
            let _ = write!(err, "\r\x1b[2K");
            self.drawn = false;
        }
        for line in lines {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
    }

    pub fn finish(&mut self, graph: &Graph) {
        self.print(graph);
        if self.drawn {
            eprintln!();
            self.drawn = false;
        }
    }
}
