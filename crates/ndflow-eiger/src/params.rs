//! ADEiger's records (eigerBase, eiger1, eiger2 and pilatus4 templates), declared once, and
//! ndflow's own counters of the stream. A family's table is the concatenation of the
//! templates it loads; a later template's record of the same name replaces the earlier one
//! (eiger2's TriggerMode adds External Gate; its StreamHdrDetail menu runs None/Basic/All).

use ndflow_core::handle::join;
use ndflow_core::ParamDef;
use ndflow_runtime::port_params::NDFILE_PARAMS;

pub const TRIGGER_MODES: &[&str] = &[
    "Internal Series",
    "Internal Enable",
    "External Series",
    "External Enable",
    "Continuous",
];
pub const TRIGGER_MODES_2: &[&str] = &[
    "Internal Series",
    "Internal Enable",
    "External Series",
    "External Enable",
    "Continuous",
    "External Gate",
];

ndflow_core::params! {
    /// eigerBase.template: every EIGER, EIGER2 and PILATUS4.
    pub const EIGER_BASE_PARAMS, pub struct EigerBaseParams {
        // NDFile.template's own FileFormat record (the file plugins declare theirs).
        file_format: enumeration("FileFormat", &["Undefined", "Invalid"], 0).mbb()
            .readback_choices(&["netCDF", "Undefined"])
            .doc("File format of FileWriter downloads (not done by ndflow)"),
        description: string("Description", "").read_only().doc("Detector model and serial"),
        sensor_thickness: float64("SensorThickness", 0.0).read_only().doc("Sensor thickness (m)"),
        sensor_material: string("SensorMaterial", "").read_only().doc("Sensor material"),
        count_cutoff: float64("CountCutoff", 0.0)
            .read_only()
            .doc("Counts above which the countrate correction gives up (per pixel)"),
        x_pixel_size: float64("XPixelSize", 0.0).read_only().doc("Pixel size in x (m)"),
        y_pixel_size: float64("YPixelSize", 0.0).read_only().doc("Pixel size in y (m)"),
        restart: enumeration("Restart", &["Done", "Restart"], 0)
            .busy()
            .doc("Restart the detector control unit (system/command/restart), then initialize"),
        initialize: enumeration("Initialize", &["Done", "Initialize"], 0)
            .busy()
            .doc("Initialize the detector (detector/command/initialize; takes tens of seconds)"),
        state: string("State", "disconnected")
            .read_only()
            .doc("Detector state (na, idle, ready, acquire, configure, initialize, error) or 'disconnected'"),
        error: string("Error", "").read_only().doc("The detector's or the connection's last error"),
        temp0: float64("Temp0", 0.0).read_only().doc("Detector temperature (°C)"),
        humid0: float64("Humid0", 0.0).read_only().doc("Detector humidity (%)"),
        photon_energy: float64("PhotonEnergy", 8041.0).doc("X-ray energy (eV); sets the threshold to half of it"),
        threshold_energy: float64("ThresholdEnergy", 4020.5).doc("Threshold energy (eV)"),
        trigger_mode: enumeration("TriggerMode", TRIGGER_MODES, 0).mbb()
            .overrides()
            .doc("ints, inte, exts, exte, or Continuous (internal series re-armed until Stop)"),
        num_triggers: int32("NumTriggers", 1).min(1.0).doc("Triggers per series (ntrigger)"),
        manual_trigger: enable("ManualTrigger", 0)
            .doc("Internal modes: wait for writes to Trigger instead of triggering at once"),
        trigger: float64("Trigger", 0.0)
            .doc("Write to send one software trigger (ManualTrigger; inte exposes for AcquireTime)"),
        roi_mode: enumeration("ROIMode", &["Disable", "4M"], 0).mbb().doc("Read out a 4M region of a larger detector"),
        compression_algo: enumeration("CompressionAlgo", &["LZ4", "BS LZ4"], 1).mbb()
            .doc("Compression the detector applies to the stream"),
        data_source: enumeration("DataSource", &["None", "FileWriter", "Stream"], 2)
            .doc("Where frames come from: Stream (ZeroMQ), FileWriter (not read by ndflow) or None"),
        flatfield_applied: enable("FlatfieldApplied", 1).doc("Flatfield correction on the detector"),
        countrate_corr_applied: enable("CountrateCorrApplied", 1).doc("Countrate correction on the detector"),
        pixel_mask_applied: enable("PixelMaskApplied", 1).doc("Pixel mask applied on the detector"),
        auto_summation: enable("AutoSummation", 1).doc("Sum sub-frames into the image (keeps counts exact)"),
        signed_data: enumeration("SignedData", &["Unsigned", "Signed"], 0)
            .doc("Publish frames as signed integers (saturated/bad pixels become -1)"),
        bit_depth_image: int32("BitDepthImage", 16).read_only().doc("Bits per pixel of the image"),
        dead_time: float64("DeadTime", 0.0).read_only().doc("Detector dead time (s)"),
        armed: enumeration("Armed", &["Unarmed", "Armed"], 0)
            .read_only_plain()
            .doc("Whether the detector is armed"),
        fw_enable: enable("FWEnable", 0).doc("The detector's own HDF5 FileWriter"),
        fw_compression: enable("FWCompression", 1).doc("FileWriter compression"),
        fw_name_pattern: string("FWNamePattern", "series_$id").long_string().doc("FileWriter name pattern"),
        fw_n_images_per_file: int32("FWNImagesPerFile", 1000).min(1.0).doc("FileWriter images per data file"),
        fw_auto_remove: enable("FWAutoRemove", 0).doc("Delete FileWriter files once downloaded"),
        fw_free: float64("FWFree", 0.0).read_only().doc("FileWriter buffer free (GB)"),
        fw_state: string("FWState", "").read_only().doc("FileWriter state"),
        save_files: enable("SaveFiles", 0).doc("Download FileWriter files (not done by ndflow)"),
        file_owner: string("FileOwner", "").doc("Owner of downloaded files"),
        file_owner_grp: string("FileOwnerGrp", "").doc("Group of downloaded files"),
        file_perms: float64("FilePerms", 420.0).doc("Permissions of downloaded files"),
        sequence_id: int32("SequenceId", 0).read_only_plain().doc("Sequence id the last arm returned"),
        stream_enable: enable("StreamEnable", 1).doc("The detector's ZeroMQ stream"),
        stream_dropped: int32("StreamDropped", 0)
            .read_only()
            .doc("Images the detector's stream dropped (stream/status/dropped)"),
        stream_state: string("StreamState", "").read_only().doc("Stream state"),
        stream_hdr_detail: enumeration("StreamHdrDetail", &["All", "Basic", "None"], 1)
            .doc("Series header detail: All adds flatfield, pixel mask and countrate table"),
        stream_hdr_appendix: string("StreamHdrAppendix", "").long_string().doc("Text appended to the series header"),
        stream_img_appendix: string("StreamImgAppendix", "").long_string().doc("Text appended to every image"),
        stream_decompress: enable("StreamDecompress", 1)
            .doc("Decompress frames in ndflow (Disable: pass the detector's bslz4/lz4 bytes on)"),
        monitor_enable: enable("MonitorEnable", 0).doc("The detector's monitor interface"),
        monitor_timeout: float64("MonitorTimeout", 500.0).doc("Monitor timeout (ms)"),
        monitor_state: string("MonitorState", "").read_only().doc("Monitor state"),
        wavelength: float64("Wavelength", 1.54).doc("X-ray wavelength (Å)"),
        det_dist: float64("DetDist", 0.0).doc("Detector distance (m)"),
        beam_x: float64("BeamX", 0.0).doc("Beam centre x (pixels)"),
        beam_y: float64("BeamY", 0.0).doc("Beam centre y (pixels)"),
        chi_start: float64("ChiStart", 0.0).doc("Chi at the first image (deg)"),
        chi_incr: float64("ChiIncr", 0.0).doc("Chi step per image (deg)"),
        kappa_start: float64("KappaStart", 0.0).doc("Kappa at the first image (deg)"),
        kappa_incr: float64("KappaIncr", 0.0).doc("Kappa step per image (deg)"),
        omega_start: float64("OmegaStart", 0.0).doc("Omega at the first image (deg)"),
        omega_incr: float64("OmegaIncr", 0.0).doc("Omega step per image (deg)"),
        phi_start: float64("PhiStart", 0.0).doc("Phi at the first image (deg)"),
        phi_incr: float64("PhiIncr", 0.0).doc("Phi step per image (deg)"),
        two_theta_start: float64("TwoThetaStart", 0.0).doc("Two theta at the first image (deg)"),
        two_theta_incr: float64("TwoThetaIncr", 0.0).doc("Two theta step per image (deg)"),
        wavelength_eps: float64("WavelengthEps", 0.0005).doc("Wavelength change below which it is not sent (Å)"),
        energy_eps: float64("EnergyEps", 0.05).doc("Energy change below which it is not sent (eV)"),
        // ndflow's own accounting of the stream (every image lost is counted here).
        stream_expected: int64("StreamExpected", 0)
            .read_only()
            .doc("Images the armed series announced (nimages × ntrigger)"),
        stream_received: int64("StreamReceived", 0)
            .read_only()
            .doc("Images received from the stream in this series"),
        stream_lost: int64("StreamLost", 0)
            .read_only()
            .doc("Images missing from the series (gaps in image_id, and short at its end)"),
        stream_invalid: int64("StreamInvalid", 0)
            .read_only()
            .doc("Stream messages that could not be decoded (dropped; Error_RBV says why)"),
        stream_foreign: int64("StreamForeign", 0)
            .read_only()
            .doc("Messages of another series, duplicate ends, images before their start (ignored)"),
        stream_connection: enumeration("StreamConnection", &["Down", "Up"], 0)
            .read_only()
            .doc("Whether the stream socket is connected to the detector"),
    }
}

ndflow_core::params! {
    /// eiger1.template: the first-generation EIGER.
    pub const EIGER1_PARAMS, pub struct Eiger1Params {
        link0: enumeration("Link0", &["Down", "Up"], 0).read_only().doc("Data link 0"),
        link1: enumeration("Link1", &["Down", "Up"], 0).read_only().doc("Data link 1"),
        link2: enumeration("Link2", &["Down", "Up"], 0).read_only().doc("Data link 2"),
        link3: enumeration("Link3", &["Down", "Up"], 0).read_only().doc("Data link 3"),
        dcu_buffer_free: float64("DCUBufferFree", 0.0).read_only().doc("DCU buffer free (%)"),
        fw_clear: float64("FWClear", 0.0).doc("Write to delete every FileWriter file on the detector"),
    }
}

ndflow_core::params! {
    /// eiger2.template: EIGER2 (and PILATUS4, which loads it too).
    pub const EIGER2_PARAMS, pub struct Eiger2Params {
        hv_reset_time: float64("HVResetTime", 1.0).doc("High-voltage reset duration (s)"),
        hv_reset: enumeration("HVReset", &["Done", "Reset"], 0).doc("Reset the high voltage"),
        hv_state: string("HVState", "").read_only().doc("High-voltage state"),
        counting_mode: enumeration("CountingMode", &["Normal", "Retrigger"], 0).doc("Counting mode"),
        threshold1_enable: enable("Threshold1Enable", 1).doc("Threshold 1"),
        threshold2_energy: float64("Threshold2Energy", 0.0).doc("Threshold 2 energy (eV)"),
        threshold2_enable: enable("Threshold2Enable", 0).doc("Threshold 2"),
        threshold_diff_enable: enable("ThresholdDiffEnable", 0).doc("Difference channel (threshold 1 − 2)"),
        trigger_start_delay: float64("TriggerStartDelay", 0.0).doc("Delay from trigger to exposure (s)"),
        trigger_mode: enumeration("TriggerMode", TRIGGER_MODES_2, 0).mbb()
            .overrides()
            .doc("ints, inte, exts, exte, Continuous, or extg (external gate)"),
        ext_gate_mode: enumeration("ExtGateMode", &["HDR", "Pump & Probe"], 1).mbb().doc("External gate mode"),
        compression_algo: enumeration("CompressionAlgo", &["LZ4", "BS LZ4", "None"], 1).mbb()
            .overrides()
            .doc("Compression the detector applies to the stream"),
        stream_version: enumeration("StreamVersion", &["Stream", "Stream2"], 1).mbb()
            .doc("Stream v1 (ZeroMQ multipart JSON, StreamPort) or v2 (CBOR, Stream2Port)"),
        stream_hdr_detail: enumeration("StreamHdrDetail", &["None", "Basic", "All"], 1)
            .overrides()
            .doc("Series header detail: All adds flatfield, pixel mask and countrate table"),
        stream_as_ts_source: yes_no("StreamAsTSSource", 0)
            .doc("Time-stamp frames with the detector's clock (series_date + start_time)"),
        fw_hdf5_format: enumeration("FWHDF5Format", &["Legacy", "v2024.2"], 0).mbb().doc("FileWriter HDF5 format"),
    }
}

ndflow_core::params! {
    /// pilatus4.template: thresholds 3 and 4.
    pub const PILATUS4_PARAMS, pub struct Pilatus4Params {
        threshold3_enable: enable("Threshold3Enable", 0).doc("Threshold 3"),
        threshold3_energy: float64("Threshold3Energy", 0.0).doc("Threshold 3 energy (eV)"),
        threshold4_enable: enable("Threshold4Enable", 0).doc("Threshold 4"),
        threshold4_energy: float64("Threshold4Energy", 0.0).doc("Threshold 4 energy (eV)"),
    }
}

// ADEiger loads NDFile.template too (for its FileWriter download, which ndflow does not do:
// the records are served so that clients written for ADEiger find them).
const BASE: usize = NDFILE_PARAMS.len() + EIGER_BASE_PARAMS.len();
const LEN1: usize = BASE + EIGER1_PARAMS.len();
const LEN2: usize = BASE + EIGER2_PARAMS.len();
const LEN4: usize = LEN2 + PILATUS4_PARAMS.len();
/// EIGER: NDFile + eigerBase + eiger1.
pub static EIGER1_TABLE: [ParamDef; LEN1] =
    join(&[NDFILE_PARAMS, EIGER_BASE_PARAMS, EIGER1_PARAMS]);
/// EIGER2: NDFile + eigerBase + eiger2.
pub static EIGER2_TABLE: [ParamDef; LEN2] =
    join(&[NDFILE_PARAMS, EIGER_BASE_PARAMS, EIGER2_PARAMS]);
/// PILATUS4: NDFile + eigerBase + eiger2 + pilatus4.
pub static PILATUS4_TABLE: [ParamDef; LEN4] = join(&[
    NDFILE_PARAMS,
    EIGER_BASE_PARAMS,
    EIGER2_PARAMS,
    PILATUS4_PARAMS,
]);

/// The detector families, each a port type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    Eiger1,
    Eiger2,
    Pilatus4,
}

impl Family {
    /// ADEiger's rule on `detector/config/description`: "EIGER2" in it means EIGER2, "PILATUS4"
    /// means PILATUS4, anything else EIGER (1). (ADEiger matches "Eiger2"/"EIGER2" and
    /// "Pilatus4"/"PILATUS4"; this ignores case.)
    pub fn from_description(description: &str) -> Family {
        let d = description.to_ascii_uppercase();
        if d.contains("EIGER2") {
            Family::Eiger2
        } else if d.contains("PILATUS4") {
            Family::Pilatus4
        } else {
            Family::Eiger1
        }
    }

    pub fn table(self) -> &'static [ParamDef] {
        match self {
            Family::Eiger1 => &EIGER1_TABLE,
            Family::Eiger2 => &EIGER2_TABLE,
            Family::Pilatus4 => &PILATUS4_TABLE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndflow_core::{ParamKind, ParamStore};
    use ndflow_runtime::port_params::driver_layout;

    #[test]
    fn later_templates_replace_earlier_records() {
        let store = ParamStore::from_layout(driver_layout(Family::Eiger2.table()));
        let tm = store.def(store.index("TriggerMode").unwrap()).unwrap();
        assert_eq!(tm.kind, ParamKind::Enum(TRIGGER_MODES_2));
        let store = ParamStore::from_layout(driver_layout(Family::Eiger1.table()));
        let tm = store.def(store.index("TriggerMode").unwrap()).unwrap();
        assert_eq!(tm.kind, ParamKind::Enum(TRIGGER_MODES));
        assert!(store.index("Threshold2Energy").is_none());
        let store = ParamStore::from_layout(driver_layout(Family::Pilatus4.table()));
        assert!(store.index("Threshold4Energy").is_some());
        let hd = store.def(store.index("StreamHdrDetail").unwrap()).unwrap();
        assert_eq!(hd.kind, ParamKind::Enum(&["None", "Basic", "All"]));
    }

    #[test]
    fn every_family_binds_its_handles() {
        for f in [Family::Eiger1, Family::Eiger2, Family::Pilatus4] {
            let layout = driver_layout(f.table());
            EigerBaseParams::bind(&layout).unwrap();
            assert_eq!(Eiger1Params::bind(&layout).is_ok(), f == Family::Eiger1);
            assert_eq!(Eiger2Params::bind(&layout).is_ok(), f != Family::Eiger1);
            assert_eq!(Pilatus4Params::bind(&layout).is_ok(), f == Family::Pilatus4);
        }
    }
}
