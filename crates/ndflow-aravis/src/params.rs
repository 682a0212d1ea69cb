//! ADGenICam.template's and aravisCamera.template's records, declared once; ADBase's
//! (AcquireTime, SizeX, Gain, ...) come from the runtime's base tables.
//!
//! Camera-filled menus: ADGenICam fills TriggerSource, TriggerOverlap, ExposureMode,
//! ExposureAuto, GainAuto and PixelFormat with the camera's entries at iocInit; their
//! templates say only `N.A.`. Here the port's table is built when the port is constructed:
//! if the camera answers then (a short probe, see `port.rs`), those six menus get its entries
//! (first 16, names cut to 16 characters for the records, the full names kept for writing;
//! the strings are leaked once per port); otherwise the entries of a saved GenICam XML
//! (`GenICamXml`) are used, and without one they stay `N.A.` for the life of the port, and the camera's current entry is still shown by name in `StatusMessage` on a
//! write. A table cannot change after the port is built, so a camera that appears later or
//! changes its entries keeps the menus of construction time.

use ndflow_core::handle::join;
use ndflow_core::{ParamDef, ParamKind};

/// The menu ADGenICam's template gives the camera-filled records.
pub const NA: &[&str] = &["N.A."];

/// Records whose menu is the camera's enumeration of the same name.
pub const CAMERA_MENUS: [&str; 6] = [
    "TriggerSource",
    "TriggerOverlap",
    "ExposureMode",
    "ExposureAuto",
    "GainAuto",
    "PixelFormat",
];

ndflow_core::params! {
    /// ADGenICam.template (AcquirePeriod is ADBase's record, also in this template).
    pub const GENICAM_PARAMS, pub struct GenICamParams {
        frame_rate: float64("FrameRate", 0.0)
            .doc("AcquisitionFrameRate (Hz); AcquirePeriod follows as 1/rate"),
        frame_rate_enable: yes_no("FrameRateEnable", 0)
            .doc("AcquisitionFrameRateEnable, where the camera has it"),
        trigger_source: enumeration("TriggerSource", NA, 0).mbb()
            .doc("TriggerSource (menu filled from the camera at construction, else N.A.)"),
        trigger_overlap: enumeration("TriggerOverlap", NA, 0).mbb()
            .doc("TriggerOverlap (menu filled from the camera at construction, else N.A.)"),
        trigger_software: enumeration("TriggerSoftware", &["Done", "Trigger"], 0)
            .doc("Write Trigger to execute the camera's TriggerSoftware command"),
        exposure_mode: enumeration("ExposureMode", NA, 0).mbb()
            .doc("ExposureMode (menu filled from the camera at construction, else N.A.)"),
        exposure_auto: enumeration("ExposureAuto", NA, 0).mbb()
            .doc("ExposureAuto (menu filled from the camera at construction, else N.A.)"),
        gain_auto: enumeration("GainAuto", NA, 0).mbb()
            .doc("GainAuto (menu filled from the camera at construction, else N.A.)"),
        pixel_format: enumeration("PixelFormat", NA, 0).mbb()
            .doc("PixelFormat (menu filled from the camera at construction, else N.A.)"),
    }
}

ndflow_core::params! {
    /// aravisCamera.template: the stream's counters and settings, connection and reset.
    pub const ARAVIS_PARAMS, pub struct AravisParams {
        frames_completed: float64("ARFramesCompleted", 0.0)
            .read_only_plain()
            .doc("Frames the stream completed (Aravis statistics)"),
        frame_failures: float64("ARFrameFailures", 0.0)
            .read_only_plain()
            .doc("Frames that arrived incomplete or timed out (lost frames)"),
        frame_underruns: float64("ARFrameUnderruns", 0.0)
            .read_only_plain()
            .doc("Frames the camera sent while no buffer was free (raise NumBuffers)"),
        missing_packets: int32("ARMissingPackets", 0)
            .read_only_plain()
            .doc("GigE packets not received (a failed frame counts all its unreceived part)"),
        resent_packets: int32("ARResentPackets", 0)
            .read_only_plain()
            .doc("GigE packets received after a resend request"),
        frame_id_gaps: int64("ARFrameIdGaps", 0)
            .read_only_plain()
            .doc("ndflow: frame (block) ids this acquisition skipped: frames the camera sent that never became NDArrays (failed, underrun, lost before Aravis); 0 at each Acquire"),
        frames_discarded: int64("ARFramesDiscarded", 0)
            .read_only_plain()
            .doc("ndflow: completed frames not handed on because they arrived after Acquire = 0 or before a restart (counted since the IOC started)"),
        packet_size: int32("ARPacketSize", 0)
            .min(0.0)
            .max(65535.0)
            .doc("ndflow: GigE packet size (GevSCPSPacketSize) in bytes, written at connect and when put while stopped (the stream is then reopened); 0 = the largest the network path carries, negotiated with the camera (the size in use is in the connect message)"),
        packet_resend_enable: enumeration("ARPacketResendEnable", &["Never", "Always"], 1)
            .doc("GigE stream: ask the camera to resend missing packets"),
        packet_timeout: int32("ARPacketTimeout", 20000)
            .min(0.0)
            .doc("GigE stream packet-timeout (µs) before a resend request"),
        frame_retention: int32("ARFrameRetention", 100000)
            .min(0.0)
            .doc("GigE stream frame-retention (µs): an incomplete frame is failed after this"),
        reset_camera: int32("ARResetCamera", 0)
            .doc("Write 1 to execute DeviceReset (the camera reconnects)"),
        connect_camera: int32("ARConnectCamera", 0)
            .doc("1 while connected; write 1 to reconnect now, 0 to disconnect and stop retrying"),
        convert_pixel_format: enumeration("ARConvertPixelFormat", &["Mono16Low", "Mono16High"], 0).mbb()
            .doc("Packed-format conversion (accepted; packed formats are not supported yet)"),
        shift_dir: enumeration("ARShiftDir", &["None", "Left", "Right"], 0)
            .doc("Shift 16-bit pixels left or right by ARShiftBits"),
        shift_bits: enumeration("ARShiftBits", &["1", "2", "3", "4", "5", "6", "7", "8"], 4)
            .doc("Bits to shift by (menu entry n shifts by n + 1)"),
    }
}

const LEN: usize = GENICAM_PARAMS.len() + ARAVIS_PARAMS.len();
/// The port's own table with the template menus (`N.A.`).
pub static ARAVIS_TABLE: [ParamDef; LEN] = join(&[GENICAM_PARAMS, ARAVIS_PARAMS]);

/// The first 16 entries, names cut to 16 characters, as mbbo states.
fn record_states(entries: &[String]) -> Vec<String> {
    entries
        .iter()
        .take(crate::features::MAX_ENUM_STATES)
        .map(|e| e.chars().take(crate::features::MAX_ENUM_NAME).collect())
        .collect()
}

/// The port's table: the template's records with the camera-filled menus replaced by `menus`
/// (record name → the camera's entries), then `features` (the camera's `GC_*` records, see
/// [`crate::gc`]); leaked, once per port. With neither, the static table is returned.
pub fn port_table(
    menus: &[(&'static str, Vec<String>)],
    features: Vec<ParamDef>,
) -> &'static [ParamDef] {
    if features.is_empty() && menus.iter().all(|(_, e)| e.is_empty()) {
        return &ARAVIS_TABLE;
    }
    let mut table = ARAVIS_TABLE.to_vec();
    for def in table.iter_mut() {
        let Some((_, entries)) = menus.iter().find(|(n, _)| *n == def.name) else {
            continue;
        };
        if entries.is_empty() {
            continue;
        }
        let states: Vec<&'static str> = record_states(entries)
            .into_iter()
            .map(|s| &*Box::leak(s.into_boxed_str()))
            .collect();
        def.kind = ParamKind::Enum(Box::leak(states.into_boxed_slice()));
    }
    table.extend(features);
    Box::leak(table.into_boxed_slice())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndflow_core::ParamStore;
    use ndflow_runtime::port_params::driver_layout;

    #[test]
    fn handles_bind_to_the_template_and_to_a_camera_table() {
        let layout = driver_layout(&ARAVIS_TABLE);
        GenICamParams::bind(&layout).unwrap();
        AravisParams::bind(&layout).unwrap();
        let menus = vec![
            (
                "PixelFormat",
                vec!["Mono8".to_string(), "BayerRG8".into(), "X".repeat(20)],
            ),
            ("GainAuto", vec![]),
        ];
        let table = port_table(&menus, Vec::new());
        let layout = driver_layout(table);
        let g = GenICamParams::bind(&layout).unwrap();
        let store = ParamStore::from_layout(layout);
        let pf = store.def(g.pixel_format.index()).unwrap();
        assert_eq!(
            pf.kind,
            ParamKind::Enum(&["Mono8", "BayerRG8", "XXXXXXXXXXXXXXXX"])
        );
        let ga = store.def(g.gain_auto.index()).unwrap();
        assert_eq!(ga.kind, ParamKind::Enum(NA));
        assert!(ParamStore::duplicate_names(&[table]).is_empty());
    }
}
