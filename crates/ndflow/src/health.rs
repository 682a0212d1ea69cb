//! The IOC's own health as PVs (what devIocStats gives an EPICS IOC): `$(P)NDFLOW:Uptime`,
//! `CpuPercent`, `ResidentMB`, `Threads`, `OpenFiles`, the frame pools' use, the plugin workers
//! busy, when it started, its version, config file, host and process id. The connections per
//! protocol are the servers' counters beside them ([`crate::server_stats`]).
//!
//! Read from `/proc/self` once a second by the IOC's main loop: an operator sees an IOC that
//! leaks memory, threads or files, or runs hot, without logging into its host.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ndflow_core::{ParamDef, ParamStore, ParamValue};
use ndflow_runtime::{Graph, PortHandle};

/// The declarations, part of the IOC port (`crate::logging::ioc_port`).
pub static HEALTH: &[ParamDef] = &[
    ParamDef::string("Version", env!("CARGO_PKG_VERSION"))
        .read_only_plain()
        .doc("ndflow version of this IOC"),
    ParamDef::string("StartTime", "")
        .read_only_plain()
        .doc("When the IOC started (UTC, YYYY-MM-DD hh:mm:ss)"),
    ParamDef::float64("Uptime", 0.0)
        .read_only_plain()
        .doc("Seconds since the IOC started"),
    ParamDef::string("ConfigFile", "")
        .long_string()
        .read_only_plain()
        .doc("The config file this IOC runs"),
    ParamDef::string("HostName", "")
        .read_only_plain()
        .doc("Host the IOC runs on"),
    ParamDef::int32("ProcessId", 0)
        .read_only_plain()
        .doc("Process id of the IOC"),
    ParamDef::float64("CpuPercent", 0.0)
        .read_only_plain()
        .doc("CPU the IOC used over the last second, in % of one core (200 = two cores)"),
    ParamDef::int32("CpuCount", 0)
        .read_only_plain()
        .doc("Cores available to the IOC"),
    ParamDef::float64("ResidentMB", 0.0)
        .read_only_plain()
        .doc("Resident memory of the IOC (MB)"),
    ParamDef::int32("Threads", 0)
        .read_only_plain()
        .doc("Threads of the IOC process"),
    ParamDef::int32("OpenFiles", 0)
        .read_only_plain()
        .doc("Open file descriptors (files and sockets)"),
    ParamDef::float64("PoolUsedMB", 0.0)
        .read_only_plain()
        .doc("Frame memory allocated by every driver's pool (MB)"),
    ParamDef::float64("PoolMaxMB", 0.0)
        .read_only_plain()
        .doc("Sum of the drivers' pool caps (MB; 0 when none is capped)"),
    ParamDef::int32("WorkerThreads", 0)
        .read_only_plain()
        .doc("Plugin worker threads"),
    ParamDef::int32("WorkersBusy", 0)
        .read_only_plain()
        .doc("Plugin worker threads running a plugin at the last look"),
];

/// `/proc/self/stat` counts CPU time in clock ticks of 1/100 s (USER_HZ, 100 on every Linux
/// architecture ndflow builds for).
const TICKS_PER_SECOND: f64 = 100.0;

/// The sampler: keeps the previous CPU reading to turn it into a rate.
pub struct Health {
    started: Instant,
    last: Option<(Instant, f64)>,
    last_update: Option<Instant>,
}

impl Health {
    /// Starts the clock and sets what does not change (start time, config, host, pid).
    pub fn start(store: &ParamStore, config_file: &str) -> Health {
        let mut w: Vec<(usize, ParamValue)> = Vec::new();
        let mut put = |name: &str, v: ParamValue| {
            if let Some(i) = store.index(name) {
                w.push((i, v));
            }
        };
        let file = Path::new(config_file);
        let shown = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
        put(
            "ConfigFile",
            ParamValue::Str(shown.to_string_lossy().into_owned()),
        );
        put("StartTime", ParamValue::Str(utc_now()));
        put("HostName", ParamValue::Str(host_name()));
        put("ProcessId", ParamValue::Int(i64::from(std::process::id())));
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        put("CpuCount", ParamValue::Int(cores as i64));
        store.set_many(&w);
        Health {
            started: Instant::now(),
            last: cpu_seconds().map(|c| (Instant::now(), c)),
            last_update: None,
        }
    }

    /// Refreshes the readings (at most once a second, whatever the caller's tick).
    pub fn update(&mut self, store: &ParamStore, graph: &Graph) {
        let now = Instant::now();
        if self
            .last_update
            .is_some_and(|t| now - t < Duration::from_millis(950))
        {
            return;
        }
        self.last_update = Some(now);
        let mut w: Vec<(usize, ParamValue)> = Vec::new();
        let mut put = |name: &str, v: ParamValue| {
            if let Some(i) = store.index(name) {
                w.push((i, v));
            }
        };
        put(
            "Uptime",
            ParamValue::Float((now - self.started).as_secs_f64().floor()),
        );
        if let Some(cpu) = cpu_seconds() {
            if let Some((t0, c0)) = self.last {
                let dt = (now - t0).as_secs_f64();
                if dt > 0.0 {
                    let pct = ((cpu - c0) / dt * 100.0).max(0.0);
                    put("CpuPercent", ParamValue::Float((pct * 10.0).round() / 10.0));
                }
            }
            self.last = Some((now, cpu));
        }
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        if let Some(kb) = status_field(&status, "VmRSS:") {
            put(
                "ResidentMB",
                ParamValue::Float((kb / 1024.0 * 10.0).round() / 10.0),
            );
        }
        if let Some(n) = status_field(&status, "Threads:") {
            put("Threads", ParamValue::Int(n as i64));
        }
        if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
            // The directory handle itself is one of them.
            put("OpenFiles", ParamValue::Int(fds.count() as i64 - 1));
        }
        let (mut used, mut max) = (0usize, 0usize);
        for p in graph.ports() {
            if let PortHandle::Driver(d) = p {
                let s = d.pool.stats();
                used += s.used_mem;
                max += s.max_mem;
            }
        }
        put("PoolUsedMB", ParamValue::Float(used as f64 / 1e6));
        put("PoolMaxMB", ParamValue::Float(max as f64 / 1e6));
        let (workers, busy) = graph.workers();
        put("WorkerThreads", ParamValue::Int(workers as i64));
        put("WorkersBusy", ParamValue::Int(busy as i64));
        store.set_many(&w);
    }
}

/// User plus system CPU time of the whole process, in seconds.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 11 and 12 after the name.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / TICKS_PER_SECOND)
}

/// The number after `key` in /proc/self/status ("VmRSS:   1234 kB" → 1234).
fn status_field(status: &str, key: &str) -> Option<f64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// "YYYY-MM-DD hh:mm:ss" in UTC.
fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let (y, m, d, h, mi, s) = ndflow_core::calendar::utc_from_secs(secs);
    format!("{y:04}-{m:02}-{d:02} {h:02}:{mi:02}:{s:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let cpu = cpu_seconds().expect("/proc/self/stat");
        assert!(cpu >= 0.0);
        let status = std::fs::read_to_string("/proc/self/status").expect("status");
        assert!(status_field(&status, "VmRSS:").is_some_and(|kb| kb > 100.0));
        assert!(status_field(&status, "Threads:").is_some_and(|n| n >= 1.0));
        assert_eq!(status_field("Threads:\t7\n", "Threads:"), Some(7.0));
        assert_eq!(status_field("", "Threads:"), None);
        let t = utc_now();
        assert_eq!((t.len(), &t[4..5], &t[13..14]), (19, "-", ":"), "{t}");
    }

    #[test]
    fn start_and_update_fill_the_store() {
        let store = ParamStore::new(&[HEALTH]);
        let graph = Graph::new(2);
        let mut h = Health::start(&store, "no/such/config.toml");
        // Burn a little CPU so the rate has something to show.
        let mut x = 0u64;
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(50) {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        std::hint::black_box(x);
        h.update(&store, &graph);
        let get = |n: &str| store.index(n).and_then(|i| store.get(i));
        assert_eq!(
            get("ConfigFile"),
            Some(ParamValue::Str("no/such/config.toml".into()))
        );
        assert_eq!(
            get("ProcessId"),
            Some(ParamValue::Int(i64::from(std::process::id())))
        );
        assert!(get("ResidentMB").and_then(|v| v.as_f64()).unwrap_or(0.0) > 0.0);
        assert!(get("Threads").and_then(|v| v.as_i64()).unwrap_or(0) >= 1);
        assert_eq!(get("WorkerThreads"), Some(ParamValue::Int(2)));
        assert!(get("OpenFiles").and_then(|v| v.as_i64()).unwrap_or(0) >= 3);
        graph.shutdown();
    }
}
