//! Every port type ndflow can build: a plain list of the records ([`PortType`]) defined
//! beside each driver and plugin. Adding a port type is its file (with its `PORT` record)
//! and one line in [`TYPES`]; the config reader, `ndflow params`, the PV directory, the
//! Python package and the generated reference all read this list.

use ndflow_core::ParamDef;
use ndflow_plugins::{
    attr_plot, attribute, bad_pixel, circular_buff, codec, color_convert, fft, gather, overlay,
    pos, process, roi, roistat, scatter, stats, std_arrays, timeseries, transform,
};
use ndflow_runtime::{Built, Graph, PortArgs, PortType};

use crate::config::{put_setting, Config, ConfigError, PortConfig, Setting};
use crate::pva::{self, ImagePvs};

/// The port types, in the order listings show them.
pub const TYPES: &[&PortType] = &[
    &ndflow_sim::PORT,
    &pva::driver::PORT,
    &ndflow_eiger::port::EIGER2,
    &ndflow_eiger::port::EIGER1,
    &ndflow_eiger::port::PILATUS4,
    #[cfg(feature = "aravis")]
    &ndflow_aravis::port::PORT,
    &roi::PORT,
    &stats::PORT,
    &process::PORT,
    &std_arrays::PORT,
    &codec::PORT,
    &pva::plugin::PORT,
    &crate::web::plugin::PORT,
    &ndflow_io::tiff::PORT,
    &ndflow_io::netcdf::PORT,
    &ndflow_io::nexus::PORT,
    &ndflow_io::hdf5::PORT,
    &ndflow_io::jpeg::PORT,
    &ndflow_io::null::PORT,
    &ndflow_io::magick::PORT,
    &transform::PORT,
    &color_convert::PORT,
    &bad_pixel::PORT,
    &fft::PORT,
    &overlay::PORT,
    &circular_buff::PORT,
    &attribute::PORT,
    &attr_plot::PORT,
    &pos::PORT,
    &roistat::PORT,
    &timeseries::PORT,
    &scatter::PORT,
    &gather::PORT,
];

/// The record of `type = "name"`.
pub fn find(name: &str) -> Option<&'static PortType> {
    TYPES.iter().copied().find(|t| t.name == name)
}

pub fn type_names() -> Vec<&'static str> {
    TYPES.iter().map(|t| t.name).collect()
}

/// The record of `name`, or an error listing every type.
pub fn require(name: &str) -> Result<&'static PortType, String> {
    find(name).ok_or_else(|| {
        format!(
            "unknown port type '{name}'; one of: {}",
            type_names().join(", ")
        )
    })
}

pub fn is_driver(type_name: &str) -> bool {
    find(type_name).is_some_and(|t| t.driver)
}

/// Keys consumed when the port is constructed rather than set as parameters.
pub fn is_constructor_key(type_name: &str, key: &str) -> bool {
    find(type_name).is_some_and(|t| t.is_constructor_key(key))
}

/// Creates the port described by `p` in `graph`, under the IOC prefix `prefix`; ports that
/// publish their own PV (`pva`) register it in `pvs`.
pub fn create(graph: &Graph, p: &PortConfig, prefix: &str, pvs: &ImagePvs) -> Result<(), String> {
    let t = require(&p.type_name)?;
    let pv_prefix = format!("{prefix}{}", p.prefix);
    let mut args = PortArgs::new(&p.name, &pv_prefix).with_services(pvs);
    for s in p.settings.iter().filter(|s| t.is_constructor_key(&s.key)) {
        args = args.with_value(&s.key, &s.value);
    }
    match (t.build)(&args)? {
        Built::Driver(d) => graph.add_driver(&p.name, d).map(|_| ()),
        Built::Plugin(plugin) => graph.add_plugin(&p.name, plugin).map(|_| ()),
    }
    .map_err(|e| e.to_string())
}

/// When a port's setting is applied: wiring (`NDArrayPort`, Gather's `NDArrayPort_N`) first,
/// then the others in file order, `Acquire` last, so acquisition starts on a complete graph.
pub fn setting_phase(key: &str) -> u8 {
    match key {
        k if k == "NDArrayPort" || k.starts_with("NDArrayPort_") => 0,
        "Acquire" => 2,
        _ => 1,
    }
}

/// Creates every port of `cfg`, then applies the settings by [`setting_phase`] (constructor
/// keys were consumed by the constructors). An error names the file, line, port and key.
pub fn build(cfg: &Config, graph: &Graph, pvs: &ImagePvs) -> Result<(), ConfigError> {
    let at = |p: &PortConfig, s: Option<&Setting>, msg: String| ConfigError {
        file: cfg.file.clone(),
        // Line 0: a command-line override, which has no line in the file.
        line: Some(s.map_or(p.line, |s| s.line)).filter(|&l| l != 0),
        port: Some(p.name.clone()),
        key: s.map(|s| s.key.clone()),
        message: msg,
    };
    for p in &cfg.ports {
        create(graph, p, &cfg.prefix, pvs).map_err(|m| at(p, None, m))?;
    }
    for step in 0..3 {
        for p in &cfg.ports {
            apply_settings(graph, p, step).map_err(|(s, m)| at(p, Some(s), m))?;
        }
    }
    Ok(())
}

/// Applies the settings of port `p` whose [`setting_phase`] is `phase`; the error names the
/// setting.
pub fn apply_settings<'p>(
    graph: &Graph,
    p: &'p PortConfig,
    phase: u8,
) -> Result<(), (&'p Setting, String)> {
    let t = find(&p.type_name);
    for s in p.settings.iter().filter(|s| setting_phase(&s.key) == phase) {
        if t.is_some_and(|t| t.is_constructor_key(&s.key)) {
            continue;
        }
        // A link field (`RECORD.FIELD`) is checked here and applied once the PV directory
        // exists (crate::state::links::apply_config).
        if crate::state::links::is_link_key(&s.key) {
            let store = graph.port(&p.name).map(|h| h.params().clone());
            let checked = store.map_or(Ok(()), |st| {
                crate::state::links::check_setting(&st, &s.key, &s.value)
            });
            checked.map_err(|m| (s, m))?;
            continue;
        }
        put_setting(graph, &p.name, &s.key, s.value.clone()).map_err(|m| (s, m))?;
    }
    Ok(())
}

/// All parameter tables of a port type with its constructor keys at their defaults, base
/// tables first; empty for an unknown type.
pub fn param_tables(type_name: &str) -> Vec<(&'static str, &'static [ParamDef])> {
    find(type_name)
        .and_then(|t| t.param_tables(&PortArgs::defaults()).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_builds_with_its_defaults_and_names_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for t in TYPES {
            assert!(seen.insert(t.name), "{} listed twice", t.name);
            let tables = t.param_tables(&PortArgs::defaults()).unwrap();
            let own: Vec<_> = tables.iter().map(|(_, d)| *d).collect();
            assert!(
                ndflow_core::ParamStore::duplicate_names(&own).is_empty(),
                "{}: a name declared twice",
                t.name
            );
            assert_eq!(tables.len(), 3, "{}", t.name);
        }
    }
}
