//! The log level as a PV: `$(P)NDFLOW:LogLevel` (and `_RBV`), an enum of error, warn, info,
//! debug and trace. Writing it replaces the process's `tracing` filter at once.
//!
//! The binary owns the subscriber (its filter comes from `NDFLOW_LOG`, default `warn`, behind
//! a reload layer) and hands the IOC a [`LogControl`]: the filter it started with and a
//! function that installs a new one. This crate only declares the parameter and calls that
//! function when the parameter is written.

use std::sync::Arc;

use ndflow_core::{ParamDef, ParamStore, ParamValue};

use crate::pvdir::IocPort;

/// The menu of `LogLevel`, least verbose first; each entry is also the filter it installs.
pub const LOG_LEVELS: &[&str] = &["error", "warn", "info", "debug", "trace"];

/// The name (and PV prefix, with a colon) of the IOC's own parameters.
pub const IOC_PORT: &str = "NDFLOW";

/// The IOC's own parameters.
pub static IOC_PARAMS: &[ParamDef] = &[ParamDef::enumeration("LogLevel", LOG_LEVELS, 1).doc(
    "Log filter of the whole process: error, warn, info, debug or trace (starts as NDFLOW_LOG)",
)];

/// Installs a `tracing` filter (EnvFilter syntax, e.g. `debug`); an error says why not.
pub type SetLogFilter = Arc<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

/// What the binary gives the IOC to change its log filter.
#[derive(Clone)]
pub struct LogControl {
    /// The filter in force at start-up (`NDFLOW_LOG`, or `warn`).
    pub initial: String,
    pub set: SetLogFilter,
}

/// The menu position standing for a filter: the most verbose level it enables anywhere
/// (`warn,ndflow_pva=debug` → debug; a bare target, `ndflow_pva`, enables trace). A filter
/// that enables nothing (`off`) shows as error, an empty one as warn (the default).
pub fn level_index(filter: &str) -> usize {
    let mut best: Option<usize> = None;
    let mut off_only = false;
    for directive in filter.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        // The level follows the last '=' outside a span filter `target[span{field=value}]`.
        let (level, has_level) = match directive.rfind(['=', ']', '}']) {
            Some(i) if directive.as_bytes()[i] == b'=' => (&directive[i + 1..], true),
            _ => (directive, false),
        };
        let level = level.trim().to_ascii_lowercase();
        let idx = match LOG_LEVELS.iter().position(|l| *l == level) {
            Some(i) => Some(i),
            None if level == "off" => {
                off_only = true;
                None
            }
            // A directive without a level names a target: everything from it, trace.
            None if !has_level => Some(LOG_LEVELS.len() - 1),
            None => None,
        };
        best = best.max(idx);
    }
    match best {
        Some(i) => i,
        None if off_only => 0,
        None => 1,
    }
}

/// The IOC's own parameter store, served as `$(P)NDFLOW:…` (with the servers' counters,
/// [`crate::server_stats`], and the process's health, [`crate::health`]). With `log`, `LogLevel` starts at
/// the level of its initial filter and installs the filter of each value written to it.
pub fn ioc_port(log: Option<&LogControl>) -> IocPort {
    let store = Arc::new(ParamStore::new(&[
        IOC_PARAMS,
        crate::server_stats::SERVER_STATS,
        crate::health::HEALTH,
    ]));
    if let Some(log) = log {
        let idx = store.index("LogLevel");
        if let Some(idx) = idx {
            let _ = store.set(idx, level_index(&log.initial) as i64);
        }
        let set = log.set.clone();
        store.subscribe(move |changed, v| {
            if Some(changed) != idx {
                return;
            }
            apply(&set, v);
        });
    }
    IocPort {
        name: IOC_PORT.to_string(),
        prefix: format!("{IOC_PORT}:"),
        store,
    }
}

fn apply(set: &SetLogFilter, v: &ParamValue) {
    let level = v
        .as_i64()
        .and_then(|i| usize::try_from(i).ok())
        .and_then(|i| LOG_LEVELS.get(i));
    let Some(level) = level else {
        return;
    };
    match set(level) {
        Ok(()) => tracing::info!("log level is now {level} (NDFLOW:LogLevel)"),
        Err(e) => tracing::error!("cannot set the log level to {level}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;

    #[test]
    fn level_of_a_filter_is_its_most_verbose_directive() {
        assert_eq!(LOG_LEVELS[level_index("warn")], "warn");
        assert_eq!(LOG_LEVELS[level_index("")], "warn");
        assert_eq!(LOG_LEVELS[level_index("INFO")], "info");
        assert_eq!(LOG_LEVELS[level_index("warn,ndflow_pva=debug")], "debug");
        assert_eq!(LOG_LEVELS[level_index("ndflow_pva=trace,error")], "trace");
        assert_eq!(LOG_LEVELS[level_index("ndflow_ca")], "trace");
        assert_eq!(LOG_LEVELS[level_index("error,x[span{f=1}]=info")], "info");
        assert_eq!(LOG_LEVELS[level_index("error,x[span{f=1}]")], "trace");
        assert_eq!(LOG_LEVELS[level_index("warn,x=bogus")], "warn");
        assert_eq!(LOG_LEVELS[level_index("off")], "error");
        assert_eq!(LOG_LEVELS[level_index("off,ndflow=debug")], "debug");
    }

    #[test]
    fn writing_log_level_installs_that_filter() {
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let rec = seen.clone();
        let log = LogControl {
            initial: "warn,ndflow_pva=info".into(),
            set: Arc::new(move |f| {
                rec.lock().push(f.to_string());
                Ok(())
            }),
        };
        let port = ioc_port(Some(&log));
        let store = &port.store;
        assert_eq!(port.prefix, "NDFLOW:");
        // Starts at the initial filter's level, without installing anything.
        assert_eq!(store.get_by_name("LogLevel").ok(), Some(ParamValue::Int(2)));
        assert!(seen.lock().is_empty());
        store
            .put("LogLevel", ParamValue::Str("debug".into()))
            .unwrap();
        store.put("LogLevel", ParamValue::Int(0)).unwrap();
        assert_eq!(*seen.lock(), ["debug", "error"]);
        // Not a level: refused, nothing installed.
        assert!(store
            .put("LogLevel", ParamValue::Str("loud".into()))
            .is_err());
        assert!(store.put("LogLevel", ParamValue::Int(7)).is_err());
        assert_eq!(seen.lock().len(), 2);
        assert_eq!(store.get_by_name("LogLevel").ok(), Some(ParamValue::Int(0)));
    }
}
