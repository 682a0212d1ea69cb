//! Which SIMPLON parameter backs each ADEiger record, as plain data for the driver to walk.
//!
//! Where this comes from: ADEiger's parameter table (the parameter creation calls of its
//! `eigerDetector` constructor, and the `EIG_<sub><section><type>_<key>` names its templates give
//! the records it creates on demand), its record templates (eigerBase, eiger1, eiger2,
//! pilatus4) for the menus, and the SIMPLON 1.8 API reference for the keys, value types, units
//! and enumeration strings.
//!
//! Conventions:
//! - [`KeyMap::record`] is the record's base name. With [`Access::ReadWrite`] the record writes
//!   the detector and `<record>_RBV` reads it back; [`Access::ReadOnly`] has only
//!   `<record>_RBV`; [`Access::WriteOnly`] has only `<record>`; [`Access::ReadOnlyPlain`] is a
//!   read-only record without the suffix (ADBase's `TemperatureActual`).
//! - [`Conv::Enum`] lists the SIMPLON strings in the order of the record's menu: menu index `i`
//!   is written as `strings[i]`, and a string read back is shown as the first index that holds it.
//!   ADEiger itself indexes the detector's own `allowed_values` list for most of these (only the
//!   `mode`, trigger-mode and link parameters have lists fixed in its code), so the lists here are
//!   what that gives on current firmware; a driver should check them against
//!   [`Param::allowed_values`](crate::simplon::Param) when it connects.
//! - Where the menus of two families differ there is one entry per family.
//! - [`KeyMap::scale`] converts SIMPLON units to the record's: `record = simplon × scale`.

use crate::simplon::Subsystem;

/// The part of a subsystem the key lives in: `/{sub}/api/1.8.0/{config|status}/{key}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Section {
    Config,
    Status,
}

impl Section {
    pub const fn as_str(self) -> &'static str {
        match self {
            Section::Config => "config",
            Section::Status => "status",
        }
    }
}

/// How a SIMPLON value becomes the record's value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Conv {
    /// JSON number ↔ double.
    Float,
    /// JSON integer ↔ integer record.
    Int,
    /// JSON `true`/`false` ↔ a bo/bi record (0 = false).
    Bool,
    /// JSON string ↔ string record. Some status strings arrive as a list of strings
    /// (`detector/status/error` is `[]` on 1.8 firmware): join them.
    Text,
    /// JSON string ↔ menu index; the SIMPLON strings in menu order.
    Enum(&'static [&'static str]),
}

impl Conv {
    /// The SIMPLON string for menu index `index` of an [`Conv::Enum`].
    pub fn simplon_value(&self, index: usize) -> Option<&'static str> {
        match self {
            Conv::Enum(values) => values.get(index).copied(),
            _ => None,
        }
    }

    /// The menu index shown for the SIMPLON string `value` of an [`Conv::Enum`] (the first
    /// index holding it: TriggerMode's `ints` reads back as Internal Series, not Continuous).
    pub fn menu_index(&self, value: &str) -> Option<usize> {
        match self {
            Conv::Enum(values) => values.iter().position(|v| *v == value),
            _ => None,
        }
    }
}

/// Which records exist and which side may write them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// `<record>` writes, `<record>_RBV` reads.
    ReadWrite,
    /// Only `<record>_RBV`.
    ReadOnly,
    /// Only `<record>` (a waveform written to the detector, not read back).
    WriteOnly,
    /// Only `<record>`, and it is read-only (no `_RBV` suffix).
    ReadOnlyPlain,
}

pub use crate::params::Family;

/// The families that have a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Families {
    pub eiger1: bool,
    pub eiger2: bool,
    pub pilatus4: bool,
}

impl Families {
    /// eigerBase.template: every family.
    pub const ALL: Families = Families {
        eiger1: true,
        eiger2: true,
        pilatus4: true,
    };
    /// eiger1.template. ADEiger creates these only when the server speaks API 1.6.0.
    pub const EIGER1: Families = Families {
        eiger1: true,
        eiger2: false,
        pilatus4: false,
    };
    /// eiger2.template: EIGER2 and PILATUS4 (which loads eiger2 and pilatus4).
    pub const EIGER2_UP: Families = Families {
        eiger1: false,
        eiger2: true,
        pilatus4: true,
    };
    /// pilatus4.template.
    pub const PILATUS4: Families = Families {
        eiger1: false,
        eiger2: false,
        pilatus4: true,
    };

    pub const fn has(self, family: Family) -> bool {
        match family {
            Family::Eiger1 => self.eiger1,
            Family::Eiger2 => self.eiger2,
            Family::Pilatus4 => self.pilatus4,
        }
    }
}

/// One record backed by one SIMPLON parameter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KeyMap {
    /// Record base name (see the module notes for `_RBV`).
    pub record: &'static str,
    pub sub: Subsystem,
    pub section: Section,
    /// The key below the section, e.g. `photon_energy`, `threshold/2/energy`,
    /// `board_000/th0_temp`.
    pub key: &'static str,
    pub conv: Conv,
    pub families: Families,
    /// record value = SIMPLON value × scale.
    pub scale: f64,
    pub access: Access,
}

const MODE: &[&str] = &["disabled", "enabled"];
const TRIGGER_MODE_1: &[&str] = &["ints", "inte", "exts", "exte", "ints"];
const TRIGGER_MODE_2: &[&str] = &["ints", "inte", "exts", "exte", "ints", "extg"];

const fn map(
    record: &'static str,
    sub: Subsystem,
    section: Section,
    key: &'static str,
    conv: Conv,
    families: Families,
    access: Access,
) -> KeyMap {
    KeyMap {
        record,
        sub,
        section,
        key,
        conv,
        families,
        scale: 1.0,
        access,
    }
}

/// Detector configuration, read/write.
const fn dc(record: &'static str, key: &'static str, conv: Conv, families: Families) -> KeyMap {
    map(
        record,
        Subsystem::Detector,
        Section::Config,
        key,
        conv,
        families,
        Access::ReadWrite,
    )
}

/// Detector configuration, read-only.
const fn dc_ro(record: &'static str, key: &'static str, conv: Conv) -> KeyMap {
    map(
        record,
        Subsystem::Detector,
        Section::Config,
        key,
        conv,
        Families::ALL,
        Access::ReadOnly,
    )
}

/// Detector status (always read-only).
const fn ds(record: &'static str, key: &'static str, conv: Conv, families: Families) -> KeyMap {
    map(
        record,
        Subsystem::Detector,
        Section::Status,
        key,
        conv,
        families,
        Access::ReadOnly,
    )
}

use Conv::{Bool, Enum, Float, Int, Text};

/// Every record of eigerBase, eiger1, eiger2 and pilatus4 that ADEiger backs with a SIMPLON
/// parameter, plus the ADBase/NDArrayBase records it binds to SIMPLON keys (AcquireTime,
/// AcquirePeriod, NumImages, NumExposures, TriggerMode, TemperatureActual, ArraySizeX/Y,
/// SerialNumber, FirmwareVersion, SDKVersion).
pub const KEYS: &[KeyMap] = &[
    // --- Acquisition (detector/config) -------------------------------------------------------
    dc("AcquireTime", "count_time", Float, Families::ALL),
    dc("AcquirePeriod", "frame_time", Float, Families::ALL),
    dc("NumImages", "nimages", Int, Families::ALL),
    dc("NumTriggers", "ntrigger", Int, Families::ALL),
    // Continuous is `ints` re-armed by the driver after each series.
    dc(
        "TriggerMode",
        "trigger_mode",
        Enum(TRIGGER_MODE_1),
        Families::EIGER1,
    ),
    dc(
        "TriggerMode",
        "trigger_mode",
        Enum(TRIGGER_MODE_2),
        Families::EIGER2_UP,
    ),
    // On detectors with several thresholds threshold_energy is threshold/1/energy.
    dc("PhotonEnergy", "photon_energy", Float, Families::ALL),
    dc("ThresholdEnergy", "threshold_energy", Float, Families::ALL),
    dc("Wavelength", "wavelength", Float, Families::ALL),
    // Set roi_mode before count_time/frame_time: changing it resets them.
    dc(
        "ROIMode",
        "roi_mode",
        Enum(&["disabled", "4M"]),
        Families::ALL,
    ),
    dc(
        "CompressionAlgo",
        "compression",
        Enum(&["lz4", "bslz4"]),
        Families::EIGER1,
    ),
    dc(
        "CompressionAlgo",
        "compression",
        Enum(&["lz4", "bslz4", "none"]),
        Families::EIGER2_UP,
    ),
    dc(
        "FlatfieldApplied",
        "flatfield_correction_applied",
        Bool,
        Families::ALL,
    ),
    dc(
        "CountrateCorrApplied",
        "countrate_correction_applied",
        Bool,
        Families::ALL,
    ),
    dc(
        "PixelMaskApplied",
        "pixel_mask_applied",
        Bool,
        Families::ALL,
    ),
    dc("AutoSummation", "auto_summation", Bool, Families::ALL),
    // --- Detector information (detector/config, read-only) ------------------------------------
    dc_ro("Description", "description", Text),
    dc_ro("SensorThickness", "sensor_thickness", Float),
    dc_ro("SensorMaterial", "sensor_material", Text),
    dc_ro("CountCutoff", "countrate_correction_count_cutoff", Int),
    dc_ro("XPixelSize", "x_pixel_size", Float),
    dc_ro("YPixelSize", "y_pixel_size", Float),
    dc_ro("BitDepthImage", "bit_depth_image", Int),
    dc_ro("DeadTime", "detector_readout_time", Float),
    // NDArrayBase's ArraySizeX_RBV/ArraySizeY_RBV: the image size in the current ROI mode.
    dc_ro("ArraySizeX", "x_pixels_in_detector", Int),
    dc_ro("ArraySizeY", "y_pixels_in_detector", Int),
    dc_ro("SerialNumber", "detector_number", Text),
    dc_ro("FirmwareVersion", "eiger_fw_version", Text),
    dc_ro("SDKVersion", "software_version", Text),
    // --- Acquisition metadata (detector/config) -----------------------------------------------
    dc("DetDist", "detector_distance", Float, Families::ALL),
    dc("BeamX", "beam_center_x", Float, Families::ALL),
    dc("BeamY", "beam_center_y", Float, Families::ALL),
    dc("ChiStart", "chi_start", Float, Families::ALL),
    dc("ChiIncr", "chi_increment", Float, Families::ALL),
    dc("KappaStart", "kappa_start", Float, Families::ALL),
    dc("KappaIncr", "kappa_increment", Float, Families::ALL),
    dc("OmegaStart", "omega_start", Float, Families::ALL),
    dc("OmegaIncr", "omega_increment", Float, Families::ALL),
    dc("PhiStart", "phi_start", Float, Families::ALL),
    dc("PhiIncr", "phi_increment", Float, Families::ALL),
    dc("TwoThetaStart", "two_theta_start", Float, Families::ALL),
    dc("TwoThetaIncr", "two_theta_increment", Float, Families::ALL),
    // --- Detector status ------------------------------------------------------------------------
    // na (not initialized), ready, initialize, configure, acquire, idle, test, error.
    ds("State", "state", Text, Families::ALL),
    ds("Error", "error", Text, Families::ALL),
    // board_000/th0_* are deprecated in 1.8 in favour of `temperature` and `humidity`, but are
    // what ADEiger reads.
    ds("Temp0", "board_000/th0_temp", Float, Families::ALL),
    ds("Humid0", "board_000/th0_humidity", Float, Families::ALL),
    map(
        "TemperatureActual",
        Subsystem::Detector,
        Section::Status,
        "board_000/th0_temp",
        Float,
        Families::ALL,
        Access::ReadOnlyPlain,
    ),
    // --- FileWriter -------------------------------------------------------------------------------
    map(
        "FWEnable",
        Subsystem::FileWriter,
        Section::Config,
        "mode",
        Enum(MODE),
        Families::ALL,
        Access::ReadWrite,
    ),
    map(
        "FWCompression",
        Subsystem::FileWriter,
        Section::Config,
        "compression_enabled",
        Bool,
        Families::ALL,
        Access::ReadWrite,
    ),
    map(
        "FWNamePattern",
        Subsystem::FileWriter,
        Section::Config,
        "name_pattern",
        Text,
        Families::ALL,
        Access::ReadWrite,
    ),
    map(
        "FWNImagesPerFile",
        Subsystem::FileWriter,
        Section::Config,
        "nimages_per_file",
        Int,
        Families::ALL,
        Access::ReadWrite,
    ),
    map(
        "FWState",
        Subsystem::FileWriter,
        Section::Status,
        "state",
        Text,
        Families::ALL,
        Access::ReadOnly,
    ),
    // Bytes on API 1.8 → GB. (API 1.6.0 reports KiB: there ADEiger multiplies by 1024e-9.)
    KeyMap {
        record: "FWFree",
        sub: Subsystem::FileWriter,
        section: Section::Status,
        key: "buffer_free",
        conv: Float,
        families: Families::ALL,
        scale: 1e-9,
        access: Access::ReadOnly,
    },
    // --- Stream -------------------------------------------------------------------------------
    map(
        "StreamEnable",
        Subsystem::Stream,
        Section::Config,
        "mode",
        Enum(MODE),
        Families::ALL,
        Access::ReadWrite,
    ),
    map(
        "StreamHdrDetail",
        Subsystem::Stream,
        Section::Config,
        "header_detail",
        Enum(&["all", "basic", "none"]),
        Families::EIGER1,
        Access::ReadWrite,
    ),
    // eiger2.template redefines the menu as None, Basic, All.
    map(
        "StreamHdrDetail",
        Subsystem::Stream,
        Section::Config,
        "header_detail",
        Enum(&["none", "basic", "all"]),
        Families::EIGER2_UP,
        Access::ReadWrite,
    ),
    map(
        "StreamHdrAppendix",
        Subsystem::Stream,
        Section::Config,
        "header_appendix",
        Text,
        Families::ALL,
        Access::WriteOnly,
    ),
    map(
        "StreamImgAppendix",
        Subsystem::Stream,
        Section::Config,
        "image_appendix",
        Text,
        Families::ALL,
        Access::WriteOnly,
    ),
    map(
        "StreamState",
        Subsystem::Stream,
        Section::Status,
        "state",
        Text,
        Families::ALL,
        Access::ReadOnly,
    ),
    // Reset to 0 by every arm.
    map(
        "StreamDropped",
        Subsystem::Stream,
        Section::Status,
        "dropped",
        Int,
        Families::ALL,
        Access::ReadOnly,
    ),
    // Stream (v1, legacy multipart JSON) or Stream2 (CBOR).
    map(
        "StreamVersion",
        Subsystem::Stream,
        Section::Config,
        "format",
        Enum(&["legacy", "cbor"]),
        Families::EIGER2_UP,
        Access::ReadWrite,
    ),
    // --- Monitor ------------------------------------------------------------------------------
    map(
        "MonitorEnable",
        Subsystem::Monitor,
        Section::Config,
        "mode",
        Enum(MODE),
        Families::ALL,
        Access::ReadWrite,
    ),
    map(
        "MonitorState",
        Subsystem::Monitor,
        Section::Status,
        "state",
        Text,
        Families::ALL,
        Access::ReadOnly,
    ),
    // --- eiger1.template (API 1.6.0 systems) ----------------------------------------------------
    ds("Link0", "link_0", Enum(&["down", "up"]), Families::EIGER1),
    ds("Link1", "link_1", Enum(&["down", "up"]), Families::EIGER1),
    ds("Link2", "link_2", Enum(&["down", "up"]), Families::EIGER1),
    ds("Link3", "link_3", Enum(&["down", "up"]), Families::EIGER1),
    // Percent free.
    ds(
        "DCUBufferFree",
        "builder/dcu_buffer_free",
        Float,
        Families::EIGER1,
    ),
    // --- eiger2.template (EIGER2 and PILATUS4) --------------------------------------------------
    // NA, OFF, RAMPING, READY.
    ds("HVState", "high_voltage/state", Text, Families::EIGER2_UP),
    dc(
        "CountingMode",
        "counting_mode",
        Enum(&["normal", "retrigger"]),
        Families::EIGER2_UP,
    ),
    dc(
        "Threshold1Enable",
        "threshold/1/mode",
        Enum(MODE),
        Families::EIGER2_UP,
    ),
    dc(
        "Threshold2Energy",
        "threshold/2/energy",
        Float,
        Families::EIGER2_UP,
    ),
    dc(
        "Threshold2Enable",
        "threshold/2/mode",
        Enum(MODE),
        Families::EIGER2_UP,
    ),
    // Needs every threshold/n/mode enabled first.
    dc(
        "ThresholdDiffEnable",
        "threshold/difference/mode",
        Enum(MODE),
        Families::EIGER2_UP,
    ),
    dc(
        "TriggerStartDelay",
        "trigger_start_delay",
        Float,
        Families::EIGER2_UP,
    ),
    // Menu HDR, Pump & Probe. SIMPLON 1.8: "double" = 32-bit HDR, "single" = both counters
    // (pump and probe); 2020 firmware named them "hdr" and "pump-and-probe". ADEiger indexes the
    // detector's allowed_values (alphabetical in both cases), so read them at connect time.
    dc(
        "ExtGateMode",
        "extg_mode",
        Enum(&["double", "single"]),
        Families::EIGER2_UP,
    ),
    // ADBase's NumExposures: exposures (gates) per image in extg mode.
    dc("NumExposures", "nexpi", Int, Families::EIGER2_UP),
    map(
        "FWHDF5Format",
        Subsystem::FileWriter,
        Section::Config,
        "format",
        Enum(&["hdf5 nexus legacy nxmx", "hdf5 nexus v2024.2 nxmx"]),
        Families::EIGER2_UP,
        Access::ReadWrite,
    ),
    // --- pilatus4.template ----------------------------------------------------------------------
    dc(
        "Threshold3Energy",
        "threshold/3/energy",
        Float,
        Families::PILATUS4,
    ),
    dc(
        "Threshold3Enable",
        "threshold/3/mode",
        Enum(MODE),
        Families::PILATUS4,
    ),
    dc(
        "Threshold4Energy",
        "threshold/4/energy",
        Float,
        Families::PILATUS4,
    ),
    dc(
        "Threshold4Enable",
        "threshold/4/mode",
        Enum(MODE),
        Families::PILATUS4,
    ),
];

/// Settings ADEiger writes once when it starts, without a record: (subsystem, config key, JSON
/// value). The FileWriter numbers images from 1, the Monitor keeps one image, and
/// auto-summation is always on (SIMPLON: "should always be enabled").
pub const STARTUP_WRITES: &[(Subsystem, &str, &str)] = &[
    (Subsystem::FileWriter, "image_nr_start", "1"),
    (Subsystem::Monitor, "buffer_size", "1"),
    (Subsystem::Detector, "auto_summation", "true"),
];

/// Records ADEiger implements in the driver (or with a SIMPLON command rather than a
/// parameter): (record, what it does).
pub const LOCAL: &[(&str, &str)] = &[
    (
        "Acquire",
        "1: arm (detector/command/arm, sequence id → SequenceId), then for ints/inte/Continuous \
         send ntrigger software triggers (or wait for Trigger writes when ManualTrigger), wait \
         until all images arrived or state leaves configure/ready/acquire, then disarm; 0 while \
         acquiring: detector/command/abort, status Aborted, the series is then disarmed",
    ),
    (
        "Trigger",
        "write (any value) = one software trigger while armed with ManualTrigger=Enable in ints \
         or inte; the value is ignored: inte sends the current AcquireTime as the exposure",
    ),
    (
        "ManualTrigger",
        "ints/inte: Disable = the driver triggers ntrigger times at once; Enable = each Trigger \
         write sends one trigger (polled every 0.1 s until ntrigger sent or Stop)",
    ),
    (
        "DataSource",
        "where NDArrays come from: None, FileWriter (download and read the HDF5 files) or \
         Stream; switching to Stream toggles stream/config/mode off and on and opens the socket, \
         switching away closes it so other clients get the frames",
    ),
    (
        "StreamDecompress",
        "Enable: decompress stream frames; Disable: pass the lz4/bslz4 bytes on as a compressed \
         NDArray",
    ),
    (
        "StreamAsTSSource",
        "Stream2 only: time-stamp NDArrays from series_date + start_time of each image",
    ),
    (
        "SignedData",
        "publish frames as signed integers of the same width (saturated/masked pixels read -1)",
    ),
    (
        "SaveFiles",
        "FileWriter source: also save the downloaded HDF5 files to FilePath",
    ),
    (
        "FWAutoRemove",
        "delete each FileWriter file on the detector once downloaded",
    ),
    ("FileOwner", "user that owns saved files (needs CAP_SETUID)"),
    ("FileOwnerGrp", "group of saved files (needs CAP_SETGID)"),
    (
        "FilePerms",
        "permission bits of saved files (masked with 0666)",
    ),
    (
        "SequenceId",
        "the sequence id the last arm returned (= the stream's series number)",
    ),
    (
        "Armed",
        "Armed between a successful arm and the disarm of the series",
    ),
    (
        "Restart",
        "system/command/restart (restarts the DCU's DAQ service; up to 240 s); Initialize must \
         follow",
    ),
    (
        "Initialize",
        "detector/command/initialize (up to 240 s; needed after power-up or restart, when \
         state is na); busy until it returns",
    ),
    (
        "HVReset",
        "EIGER2/PILATUS4: detector/command/hv_reset with {\"value\": HVResetTime in whole \
         seconds}, timeout HVResetTime + 1 s",
    ),
    (
        "HVResetTime",
        "seconds the high voltage stays off during HVReset (SIMPLON range 1-600)",
    ),
    (
        "FWClear",
        "EIGER1 (API 1.6.0): filewriter/command/clear, deletes every file on the DCU, then \
         re-reads FWFree",
    ),
    (
        "MonitorTimeout",
        "ms to wait in monitor/api/1.8.0/images/monitor?timeout= for a monitor image",
    ),
    (
        "WavelengthEps",
        "a Wavelength write closer than this to the current value is not sent (Å)",
    ),
    (
        "EnergyEps",
        "PhotonEnergy/Threshold*Energy writes closer than this are not sent (eV); a real \
         energy change recalibrates the detector and takes seconds",
    ),
    (
        "MaxSizeX",
        "x_pixels_in_detector read at start-up with roi_mode temporarily disabled",
    ),
    (
        "MaxSizeY",
        "y_pixels_in_detector read at start-up with roi_mode temporarily disabled",
    ),
    (
        "Manufacturer",
        "description up to its first space (Manufacturer_RBV)",
    ),
    ("Model", "description after its first space (Model_RBV)"),
];

/// The entry for `record` on `family`, if ADEiger backs it with a SIMPLON parameter there.
pub fn lookup(record: &str, family: Family) -> Option<&'static KeyMap> {
    KEYS.iter()
        .find(|k| k.record == record && k.families.has(family))
}

/// The entries that apply to `family`.
pub fn for_family(family: Family) -> impl Iterator<Item = &'static KeyMap> {
    KEYS.iter().filter(move |k| k.families.has(family))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    const FAMILIES: [Family; 3] = [Family::Eiger1, Family::Eiger2, Family::Pilatus4];

    #[test]
    fn keys_no_duplicate_record_per_family() {
        let mut seen = HashSet::new();
        for k in KEYS {
            for f in FAMILIES {
                if k.families.has(f) {
                    assert!(seen.insert((k.record, f)), "{} twice for {f:?}", k.record);
                }
            }
        }
    }

    #[test]
    fn keys_entries_are_well_formed() {
        for k in KEYS {
            assert!(
                k.families.eiger1 || k.families.eiger2 || k.families.pilatus4,
                "{}: no family",
                k.record
            );
            assert!(
                !k.record.is_empty() && !k.record.ends_with("_RBV"),
                "{}",
                k.record
            );
            assert!(
                !k.key.is_empty()
                    && !k.key.starts_with('/')
                    && !k.key.ends_with('/')
                    && !k.key.contains("//")
                    && !k.key.contains(char::is_whitespace),
                "{}: key {:?}",
                k.record,
                k.key
            );
            assert!(k.scale.is_finite() && k.scale != 0.0, "{}", k.record);
            if let Conv::Enum(values) = k.conv {
                assert!(values.len() >= 2, "{}: enum of {values:?}", k.record);
                assert!(values.iter().all(|v| !v.is_empty()), "{}", k.record);
            }
            if k.section == Section::Status {
                assert!(
                    matches!(k.access, Access::ReadOnly | Access::ReadOnlyPlain),
                    "{}: status keys are read-only",
                    k.record
                );
            }
        }
    }

    #[test]
    fn keys_local_records_are_distinct() {
        let mut seen = HashSet::new();
        for (record, meaning) in LOCAL {
            assert!(seen.insert(*record), "{record} twice in LOCAL");
            assert!(!meaning.is_empty());
            assert!(
                KEYS.iter().all(|k| k.record != *record),
                "{record} is both LOCAL and SIMPLON-backed"
            );
        }
    }

    #[test]
    fn keys_lookup_and_menus() {
        let tm1 = lookup("TriggerMode", Family::Eiger1).unwrap();
        let tm2 = lookup("TriggerMode", Family::Pilatus4).unwrap();
        assert_eq!(tm1.conv.simplon_value(4), Some("ints"));
        assert_eq!(tm1.conv.simplon_value(5), None);
        assert_eq!(tm2.conv.simplon_value(5), Some("extg"));
        assert_eq!(tm2.conv.menu_index("ints"), Some(0));
        assert_eq!(tm2.conv.menu_index("exte"), Some(3));

        let h1 = lookup("StreamHdrDetail", Family::Eiger1).unwrap();
        let h2 = lookup("StreamHdrDetail", Family::Eiger2).unwrap();
        assert_eq!(h1.conv.simplon_value(0), Some("all"));
        assert_eq!(h2.conv.simplon_value(0), Some("none"));

        assert!(lookup("Threshold3Energy", Family::Eiger2).is_none());
        assert_eq!(
            lookup("Threshold3Energy", Family::Pilatus4).unwrap().key,
            "threshold/3/energy"
        );
        assert!(lookup("Link0", Family::Eiger2).is_none());
        assert_eq!(lookup("FWFree", Family::Eiger1).unwrap().scale, 1e-9);
        assert!(for_family(Family::Pilatus4).count() > for_family(Family::Eiger2).count());
        assert_eq!(Conv::Float.menu_index("x"), None);
        assert_eq!(Section::Status.as_str(), "status");
    }

    #[test]
    fn keys_family_from_description() {
        assert_eq!(
            Family::from_description("Dectris EIGER2 Si 4M"),
            Family::Eiger2
        );
        assert_eq!(
            Family::from_description("Dectris Eiger2 CdTe 500K"),
            Family::Eiger2
        );
        assert_eq!(
            Family::from_description("DECTRIS PILATUS4 CdTe 1M"),
            Family::Pilatus4
        );
        assert_eq!(
            Family::from_description("Dectris Eiger 16M"),
            Family::Eiger1
        );
    }
}
