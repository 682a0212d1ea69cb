//! Which parameters the state file keeps: the one rule, used when saving, when restoring and
//! by `ndflow state diff`.
//!
//! A parameter is saved when it is a setting: writable with a readback (`Name` and
//! `Name_RBV`), not an array, not consumed when the port is built, and not an action. Actions
//! are what areaDetector's autosave request files (ADCore's `*_settings.req`) leave out too:
//! records whose put completes when an operation ends (Acquire, Capture, WriteFile, ReadFile,
//! FlushNow), commands served without a readback ([`Access::WritePlain`]), one-shot triggers
//! (Reset, ResetFilter, Trigger, …), counters a write resets (ArrayCounter, DroppedArrays) and
//! inputs copied into another saved parameter (PositionXLink). Restoring any of them at start
//! would start something or count from a stale number.

use ndflow_core::{Access, ParamDef, ParamKind};

use crate::registry;

/// Writable parameters with a readback that are still not settings: a write does something
/// now (commands, triggers, loads), resets a counter the pipeline keeps, or is copied into
/// another parameter that is saved itself. A name means the same in every port type and in
/// every group of a repeated one (`1:PositionXLink`).
pub const NOT_SETTINGS: &[&str] = &[
    // Commands and triggers: a write acts once.
    "ReadStatus",
    "Reset",
    "ResetAll",
    "ResetFilter",
    "SaveBackground",
    "SaveFlatField",
    "AutoOffsetScale",
    "ProcessPlugin",
    "PreAllocBuffers",
    "EmptyFreeList",
    "PoolPollStats",
    "FFTResetAverage",
    "TSRead",
    "TSControl",
    "TSAcquire",
    "Trigger",
    "SoftwareTrigger",
    "TriggerSoftware",
    "FWClear",
    "HVReset",
    "Initialize",
    "Restart",
    "FreeCapture",
    "ARResetCamera",
    // Connection state, not a choice: 1 while connected.
    "ARConnectCamera",
    // Opening a shutter by hand at start is not a setting (ADBase does not save it either).
    "ShutterControl",
    // The position plugin: each Filename write appends positions, Delete empties the list,
    // Running attaches them.
    "Filename",
    "Delete",
    "Running",
    // Counters: the pipeline counts, a write resets.
    "ArrayCounter",
    "DroppedArrays",
    "DroppedOutputArrays",
    "DisorderedArrays",
    "Missing",
    "Duplicate",
    "NDimensions",
    // Input links: the value is copied into the parameter they name, which is saved.
    "CenterXLink",
    "CenterYLink",
    "PositionXLink",
    "PositionYLink",
    "SizeXLink",
    "SizeYLink",
    "WidthXLink",
    "WidthYLink",
    "TSTimePerPointLink",
    "FFTTimePerPointLink",
];

/// NDArrayBase parameters that a plugin writes itself (the last array's data type and colour
/// mode; a write to them has no effect on a plugin). A driver's are settings.
const PLUGIN_READOUTS: &[&str] = &["DataType", "ColorMode"];

/// Why parameter `def` of a port of type `type_name` is not saved; `None` when it is.
pub fn why_not_saved(type_name: &str, def: &ParamDef) -> Option<&'static str> {
    match def.access {
        Access::ReadWrite => {}
        Access::WritePlain => return Some("a command (written without readback)"),
        Access::ReadOnly | Access::ReadOnlyPlain | Access::ReadOnlyBoth => {
            return Some("read-only")
        }
    }
    if def.record.completes_when_done() {
        return Some("an action (its put completes when the operation ends)");
    }
    if matches!(def.kind, ParamKind::Array(_)) {
        return Some("an array");
    }
    // Repeated groups are declared as `N:Name` (overlay 1:PositionXLink, ROI 1:Reset).
    let base = def.name.rsplit_once(':').map_or(def.name, |(_, b)| b);
    if NOT_SETTINGS.contains(&base) {
        return Some("a one-shot command, counter or input link");
    }
    if !registry::is_driver(type_name) && PLUGIN_READOUTS.contains(&base) {
        return Some("what the plugin last received (a write has no effect)");
    }
    if registry::is_constructor_key(type_name, def.name) {
        return Some("used when the port is built (change it in the config)");
    }
    None
}

/// Whether the state file keeps this parameter ([`why_not_saved`] is `None`).
pub fn is_saved(type_name: &str, def: &ParamDef) -> bool {
    why_not_saved(type_name, def).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(type_name: &str, name: &str) -> &'static ParamDef {
        registry::param_tables(type_name)
            .into_iter()
            .flat_map(|(_, t)| t.iter())
            .find(|d| d.name == name)
            .unwrap_or_else(|| panic!("{type_name} has no {name}"))
    }

    #[test]
    fn settings_are_saved_actions_are_not() {
        for (t, name) in [
            ("sim", "AcquireTime"),
            ("sim", "ImageMode"),
            ("sim", "DataType"),
            ("roi", "MinX"),
            ("roi", "NDArrayPort"),
            ("hdf5", "FilePath"),
            ("hdf5", "FileNumber"),
            ("hdf5", "NumCapture"),
            ("overlay", "1:PositionX"),
        ] {
            assert!(is_saved(t, def(t, name)), "{t}.{name} should be saved");
        }
        for (t, name) in [
            ("sim", "Acquire"),
            ("sim", "ArrayCounter"),
            ("sim", "Reset"),
            ("sim", "ArraySize0"),
            ("hdf5", "Capture"),
            ("hdf5", "WriteFile"),
            ("hdf5", "FlushNow"),
            ("process", "ResetFilter"),
            ("roi", "DataType"),
            ("roi", "DroppedArrays"),
            ("stdarrays", "ArrayData"),
            ("overlay", "1:PositionXLink"),
            ("roistat", "2:Reset"),
        ] {
            assert!(!is_saved(t, def(t, name)), "{t}.{name} should not be saved");
        }
    }

    #[test]
    fn every_listed_name_exists_somewhere() {
        // A renamed parameter would silently become saved again; keep the list honest.
        for name in NOT_SETTINGS {
            let found = registry::TYPES.iter().any(|t| {
                registry::param_tables(t.name).iter().any(|(_, defs)| {
                    defs.iter()
                        .any(|d| d.name.rsplit(':').next() == Some(*name))
                })
            });
            // SoftwareTrigger is the common areaDetector name; no ndflow port declares it yet.
            // The aravis port's exist only with the feature that builds it.
            let aravis_only = ["ARResetCamera", "ARConnectCamera", "TriggerSoftware"];
            let optional = *name == "SoftwareTrigger"
                || (!cfg!(feature = "aravis") && aravis_only.contains(name));
            assert!(found || optional, "{name} is no parameter");
        }
    }
}
