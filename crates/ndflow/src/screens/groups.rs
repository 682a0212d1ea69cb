//! Which group of a port's screen each parameter goes to, as areaDetector's screens group
//! them. The base tables a declaration belongs to decide first (NDArrayBase, ADBase,
//! NDPluginBase, NDFile or the port type's own); a few name prefixes then split the driver
//! bases into setup / collect / readout / shutter / attributes / buffers, as ADSetup,
//! ADCollect, ADReadout, ADShutter, ADAttrFile and ADBuffers do.

use ndflow_core::{ParamDef, ParamKind, RecordHint};
use ndflow_runtime::port_params::{
    ARRAY_BASE_PARAMS, DRIVER_PARAMS, NDFILE_PARAMS, PLUGIN_BASE_PARAMS,
};

/// The base table a declaration belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    ArrayBase,
    Driver,
    PluginBase,
    File,
    Own,
}

/// A group of a port screen, in the order a screen shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Section {
    Setup,
    PluginBase,
    Collect,
    File,
    Own,
    Readout,
    Shutter,
    Attributes,
    Buffers,
}

/// Base-table parameters by name prefix (the rest: identity strings are Setup, others
/// Collect). Own-table names never reach this list, so a ROI's own `MinX` stays its own.
const BASE_SECTIONS: &[(&str, Section)] = &[
    ("NDAttributes", Section::Attributes),
    ("Shutter", Section::Shutter),
    ("Pool", Section::Buffers),
    ("EmptyFreeList", Section::Buffers),
    ("PreAllocBuffers", Section::Buffers),
    ("NumPreAllocBuffers", Section::Buffers),
    ("NumQueuedArrays", Section::Buffers),
    ("MaxSize", Section::Readout),
    ("Min", Section::Readout),
    ("Size", Section::Readout),
    ("Bin", Section::Readout),
    ("Reverse", Section::Readout),
    ("ArraySize", Section::Readout),
    ("NDimensions", Section::Readout),
    ("Dimensions", Section::Readout),
    ("DataType", Section::Readout),
    ("ColorMode", Section::Readout),
    ("BayerPattern", Section::Readout),
    ("Codec", Section::Readout),
    ("CompressedSize", Section::Readout),
    ("Gain", Section::Readout),
];

/// The base table of `name` in a driver's (`driver`) or a plugin's layout.
pub fn table_of(name: &str, driver: bool) -> Table {
    let has = |t: &[ParamDef]| t.iter().any(|d| d.name == name);
    if has(ARRAY_BASE_PARAMS) {
        Table::ArrayBase
    } else if driver && has(DRIVER_PARAMS) {
        Table::Driver
    } else if !driver && has(PLUGIN_BASE_PARAMS) {
        Table::PluginBase
    } else if !driver && has(NDFILE_PARAMS) {
        Table::File
    } else {
        Table::Own
    }
}

/// The group `def` goes to on a driver's or a plugin's screen.
pub fn section(def: &ParamDef, driver: bool) -> Section {
    match table_of(def.name, driver) {
        Table::Own => Section::Own,
        Table::File => Section::File,
        Table::PluginBase => Section::PluginBase,
        Table::ArrayBase | Table::Driver => {
            let s = BASE_SECTIONS
                .iter()
                .find(|(p, _)| def.name.starts_with(p))
                .map_or_else(
                    || {
                        if is_identity(def) {
                            Section::Setup
                        } else {
                            Section::Collect
                        }
                    },
                    |(_, s)| *s,
                );
            match s {
                // A plugin's screen shows these with NDPluginBase's, as NDPluginBase.adl does.
                Section::Setup | Section::Collect if !driver => Section::PluginBase,
                s => s,
            }
        }
    }
}

/// Who the port is: read-only short strings (PortName, Model, versions).
fn is_identity(def: &ParamDef) -> bool {
    def.kind == ParamKind::String && !def.writable() && def.record != RecordHint::LongString
}

/// The group's title; `class` titles the port type's own parameters.
pub fn title(s: Section, driver: bool, class: &str) -> String {
    match s {
        Section::Setup => "Setup",
        Section::PluginBase => "Plugin base",
        Section::Collect => "Collect",
        Section::File => "File",
        Section::Own => class,
        Section::Readout if driver => "Readout",
        Section::Readout => "Array",
        Section::Shutter => "Shutter",
        Section::Attributes => "Attributes",
        Section::Buffers => "Buffers",
    }
    .to_string()
}

/// `defs` in groups, in screen order; within a group in declaration order, except that a
/// plugin's NDPluginBase parameters (its source, queue, counters) come before NDArrayBase's
/// (a driver's NDArrayBase ones, Acquire first, stay before ADBase's).
pub fn grouped(defs: &[&'static ParamDef], driver: bool) -> Vec<(Section, Vec<&'static ParamDef>)> {
    let mut keyed: Vec<(Section, bool, &'static ParamDef)> = defs
        .iter()
        .map(|d| {
            let array_base = !driver && table_of(d.name, driver) == Table::ArrayBase;
            (section(d, driver), array_base, *d)
        })
        .collect();
    keyed.sort_by_key(|(s, array_base, _)| (*s, *array_base));
    let mut out: Vec<(Section, Vec<&'static ParamDef>)> = Vec::new();
    for (s, _, d) in keyed {
        match out.last_mut() {
            Some((last, list)) if *last == s => list.push(d),
            _ => out.push((s, vec![d])),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndflow_runtime::port_params::{driver_layout, plugin_layout};

    const OWN: &[ParamDef] = &[
        ParamDef::int32("MinX", 0),
        ParamDef::float64("Threshold", 1.0),
    ];

    fn names(groups: &[(Section, Vec<&'static ParamDef>)], s: Section) -> Vec<&'static str> {
        groups
            .iter()
            .filter(|(g, _)| *g == s)
            .flat_map(|(_, d)| d.iter().map(|d| d.name))
            .collect()
    }

    #[test]
    fn a_plugin_groups_by_base_table_and_keeps_its_own_names() {
        let layout = plugin_layout(OWN);
        let groups = grouped(layout.defs(), false);
        let order: Vec<Section> = groups.iter().map(|(s, _)| *s).collect();
        assert_eq!(
            order,
            [
                Section::PluginBase,
                Section::Own,
                Section::Readout,
                Section::Attributes,
                Section::Buffers
            ]
        );
        // A plugin's own MinX is its own, not ADBase's region start.
        assert_eq!(names(&groups, Section::Own), ["MinX", "Threshold"]);
        let base = names(&groups, Section::PluginBase);
        assert_eq!(base[0], "PluginType", "NDPluginBase first");
        for n in [
            "NDArrayPort",
            "EnableCallbacks",
            "QueueSize",
            "ArrayRate",
            "PortName",
        ] {
            assert!(base.contains(&n), "{n} in the plugin base group");
        }
        assert!(names(&groups, Section::Readout).contains(&"ArraySizeX"));
        assert_eq!(
            names(&groups, Section::Attributes),
            [
                "NDAttributesMacros",
                "NDAttributesFile",
                "NDAttributesStatus"
            ]
        );
        // Every parameter once.
        let total: usize = groups.iter().map(|(_, d)| d.len()).sum();
        assert_eq!(total, layout.defs().len());
    }

    #[test]
    fn a_driver_has_setup_readout_collect_and_attributes() {
        let layout = driver_layout(OWN);
        let groups = grouped(layout.defs(), true);
        assert!(names(&groups, Section::Setup).contains(&"Manufacturer"));
        let readout = names(&groups, Section::Readout);
        for n in ["MaxSizeX", "MinX", "SizeY", "BinX", "DataType", "ColorMode"] {
            assert!(readout.contains(&n), "{n} in readout");
        }
        let collect = names(&groups, Section::Collect);
        for n in [
            "Acquire",
            "AcquireTime",
            "ImageMode",
            "ArrayCounter",
            "StatusMessage",
        ] {
            assert!(collect.contains(&n), "{n} in collect");
        }
        assert!(names(&groups, Section::Shutter).contains(&"ShutterMode"));
        assert!(names(&groups, Section::Buffers).contains(&"PoolUsedMem"));
        assert!(names(&groups, Section::Attributes).contains(&"NDAttributesFile"));
        // The driver's own table shares a name with ADBase: the first declaration wins.
        assert_eq!(names(&groups, Section::Own), ["Threshold"]);
    }

    #[test]
    fn file_writers_get_a_file_group() {
        assert_eq!(table_of("FilePath", false), Table::File);
        assert_eq!(table_of("FilePath", true), Table::Own);
        assert_eq!(title(Section::Readout, false, "X"), "Array");
        assert_eq!(title(Section::Own, false, "NDPluginROI"), "NDPluginROI");
    }
}
