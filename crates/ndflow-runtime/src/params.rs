//! The base parameter tables every port gets, with areaDetector's names and enum strings
//! (NDArrayBase.template, NDPluginBase.template, ADBase.template). Declared once here: the
//! PV names, config keys, JSON summary and docs all derive from these tables.

use ndflow_core::{ColorMode, DataType, ParamDef};

pub const DATA_TYPE_CHOICES: &[&str] = &DataType::NAMES;
pub const COLOR_MODE_CHOICES: &[&str] = &ColorMode::NAMES;
/// Output-type menus of ROI/Process: "Automatic" keeps the input type. It comes last, as in
/// NDROI/NDProcess.template, so index `i < 10` is `DataType::from_index(i)`.
pub const DATA_TYPE_OUT_CHOICES: &[&str] = &[
    "Int8",
    "UInt8",
    "Int16",
    "UInt16",
    "Int32",
    "UInt32",
    "Int64",
    "UInt64",
    "Float32",
    "Float64",
    "Automatic",
];
/// Index of "Automatic" in [`DATA_TYPE_OUT_CHOICES`].
pub const DATA_TYPE_AUTOMATIC: i32 = 10;
pub const DETECTOR_STATES: &[&str] = &[
    "Idle",
    "Acquire",
    "Readout",
    "Correct",
    "Saving",
    "Aborting",
    "Error",
    "Waiting",
    "Initializing",
    "Disconnected",
    "Aborted",
];

/// DetectorState_RBV values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DetectorState {
    Idle = 0,
    Acquire = 1,
    Readout = 2,
    Correct = 3,
    Saving = 4,
    Aborting = 5,
    Error = 6,
    Waiting = 7,
    Initializing = 8,
    Disconnected = 9,
    Aborted = 10,
}

/// Common to drivers and plugins (NDArrayBase).
pub const ARRAY_BASE_PARAMS: &[ParamDef] = &[
    ParamDef::string("PortName", "")
        .read_only()
        .doc("Port name"),
    ParamDef::string("ADCoreVersion", "3.15.0")
        .read_only()
        .doc("areaDetector core version this port follows"),
    ParamDef::string("DriverVersion", env!("CARGO_PKG_VERSION"))
        .read_only()
        .doc("ndflow version"),
    ParamDef::string("Manufacturer", "")
        .read_only()
        .doc("Detector manufacturer"),
    ParamDef::string("Model", "")
        .read_only()
        .doc("Detector model"),
    ParamDef::string("SerialNumber", "")
        .read_only()
        .doc("Serial number"),
    ParamDef::string("SDKVersion", "")
        .read_only()
        .doc("Vendor SDK version"),
    ParamDef::string("FirmwareVersion", "")
        .read_only()
        .doc("Firmware version"),
    ParamDef::enumeration("Acquire", &["Done", "Acquire"], 0)
        .readback_choices(&["Done", "Acquiring"])
        .completes_when_done()
        .doc("Start (1) / stop (0) acquisition; a put completes when it has ended (plugins: no effect)"),
    ParamDef::enumeration("AcquireBusy", &["Done", "Acquiring"], 0)
        .read_only_plain()
        .busy()
        .doc("Acquiring, or waiting for plugins (WaitForPlugins)"),
    ParamDef::enumeration("AcquireBusyCB", &["Done", "Acquiring"], 0)
        .read_only_plain()
        .doc("AcquireBusy as seen by the driver callback (same as AcquireBusy in ndflow)"),
    ParamDef::yes_no("WaitForPlugins", 0)
        .doc("Acquisition completes only when plugins have drained (plugins: no effect)"),
    ParamDef::int32("ArrayCounter", 0).doc("Arrays produced/processed; write to reset"),
    ParamDef::float64("ArrayRate", 0.0)
        .read_only()
        .doc("Arrays per second over the last second"),
    ParamDef::int32("NDimensions", 0)
        .doc("Dimensions of the last array (a write has no effect in ndflow)"),
    ParamDef::array("Dimensions", DataType::Int32)
        .read_only_both()
        .doc("Sizes of every dimension of the last array"),
    ParamDef::int32("ArraySize0", 0).read_only_both().doc("Size of dimension 0 of the last array"),
    ParamDef::int32("ArraySize1", 0).read_only_both().doc("Size of dimension 1 of the last array"),
    ParamDef::int32("ArraySize2", 0).read_only_both().doc("Size of dimension 2 of the last array"),
    ParamDef::int32("ArraySize3", 0).read_only_both().doc("Size of dimension 3 of the last array"),
    ParamDef::int32("ArraySize4", 0).read_only_both().doc("Size of dimension 4 of the last array"),
    ParamDef::int32("ArraySize5", 0).read_only_both().doc("Size of dimension 5 of the last array"),
    ParamDef::int32("ArraySize6", 0).read_only_both().doc("Size of dimension 6 of the last array"),
    ParamDef::int32("ArraySize7", 0).read_only_both().doc("Size of dimension 7 of the last array"),
    ParamDef::int32("ArraySize8", 0).read_only_both().doc("Size of dimension 8 of the last array"),
    ParamDef::int32("ArraySize9", 0).read_only_both().doc("Size of dimension 9 of the last array"),
    ParamDef::int32("ArraySizeX", 0)
        .read_only()
        .doc("Size of the last array in X"),
    ParamDef::int32("ArraySizeY", 0)
        .read_only()
        .doc("Size of the last array in Y"),
    ParamDef::int32("ArraySizeZ", 0)
        .read_only()
        .doc("Size of the last array in Z (colour)"),
    // longin in NDArrayBase.template: int32 (frames over 2 GiB read 2147483647).
    ParamDef::int32("ArraySize", 0)
        .read_only()
        .doc("Bytes of the last array (uncompressed)"),
    ParamDef::int32("UniqueId", 0)
        .read_only()
        .doc("uniqueId of the last array"),
    ParamDef::float64("TimeStamp", 0.0)
        .read_only()
        .doc("timeStamp of the last array (s, EPICS epoch)"),
    ParamDef::int32("EpicsTSSec", 0)
        .read_only()
        .doc("EPICS timestamp seconds of the last array"),
    ParamDef::int32("EpicsTSNsec", 0)
        .read_only()
        .doc("EPICS timestamp nanoseconds of the last array"),
    ParamDef::string("Codec", "")
        .read_only()
        .doc("Codec of the last array (empty = uncompressed)"),
    ParamDef::int32("CompressedSize", 0)
        .read_only()
        .doc("Bytes of data in the last array"),
    ParamDef::enumeration("BayerPattern", &["RGGB", "GBRG", "GRBG", "BGGR"], 0)
        .read_only()
        .doc("Bayer pattern of the last array"),
    ParamDef::enumeration("DataType", DATA_TYPE_CHOICES, 1)
        .doc("Output data type (drivers); data type of the last array (plugins, a write has no effect)"),
    ParamDef::enumeration("ColorMode", COLOR_MODE_CHOICES, 0)
        .doc("Output colour mode (drivers); colour mode of the last array (plugins, a write has no effect)"),
    ParamDef::enable("ArrayCallbacks", 1).doc("Pass arrays downstream"),
    ParamDef::string("NDAttributesMacros", "")
        .long_string()
        .doc("Macro substitutions for the attribute file (NAME=value,...)"),
    ParamDef::string("NDAttributesFile", "")
        .long_string()
        .doc("Attribute definition file"),
    ParamDef::enumeration(
        "NDAttributesStatus",
        &[
            "Attributes file OK",
            "File not found",
            "XML syntax error",
            "Macro substitution error",
        ],
        0,
    )
    .read_only_plain()
    .doc("Result of reading NDAttributesFile"),
    ParamDef::float64("PoolMaxMem", 0.0)
        .min(0.0)
        .doc("Pool memory cap (MB, 0 = unlimited). Plugins: the cap of the pool their outputs come from (their source driver's); a write sets that pool's cap"),
    ParamDef::enumeration("PoolPollStats", &["", ""], 0)
        .doc("Refresh the pool records now (they are refreshed continuously in ndflow)"),
    ParamDef::float64("PoolUsedMem", 0.0)
        .read_only_plain()
        .doc("Pool memory allocated (MB). Plugins: that of the pool their outputs come from (their source's), 0 before a first array"),
    ParamDef::int32("PoolAllocBuffers", 0)
        .read_only_plain()
        .doc("Buffers allocated by the pool (plugins: their source's pool)"),
    ParamDef::int32("PoolFreeBuffers", 0)
        .read_only_plain()
        .doc("Buffers on the pool's free list (plugins: their source's pool)"),
    ParamDef::int32("PoolUsedBuffers", 0)
        .read_only_plain()
        .doc("Buffers in use (plugins: in their source's pool)"),
    ParamDef::enumeration("EmptyFreeList", &["", ""], 0)
        .doc("Write 1 to free the pool's free buffers (plugins: their source's pool)"),
    ParamDef::enumeration("PreAllocBuffers", &["Done", "Allocate"], 0)
        .busy()
        .doc("Write 1 to pre-allocate NumPreAllocBuffers of the current array size (plugins: in their source's pool, of their last array's size)"),
    ParamDef::int32("NumPreAllocBuffers", 0)
        .min(0.0)
        .doc("Buffers to pre-allocate"),
    ParamDef::int32("NumQueuedArrays", 0)
        .read_only_plain()
        .doc("Arrays queued or in flight in all plugins"),
];

/// NDPluginDriver's parameters plus ndflow's per-reason drop accounting.
pub const PLUGIN_BASE_PARAMS: &[ParamDef] = &[
    ParamDef::string("PluginType", "")
        .read_only()
        .doc("Plugin class"),
    ParamDef::string("NDArrayPort", "").doc("Source port name (re-wirable while running)"),
    ParamDef::int32("NDArrayAddress", 0)
        .min(0.0)
        .doc("Source address"),
    ParamDef::enable("EnableCallbacks", 1)
        .doc("Accept arrays (a disabled plugin counts offers as DroppedDisabled)"),
    ParamDef::yes_no("BlockingCallbacks", 0)
        .doc("Yes: process in the caller's thread (never drops, slows the source)"),
    ParamDef::int32("QueueSize", 10)
        .range(1.0, 100000.0)
        .doc("Input queue depth (resizable at run time)"),
    ParamDef::int32("QueueFree", 10)
        .read_only_plain()
        .doc("Free input queue slots"),
    ParamDef::int32("QueueUse", 0)
        .read_only_plain()
        .doc("Arrays waiting in the input queue"),
    ParamDef::int32("MaxThreads", 1)
        .read_only()
        .doc("Most worker threads this plugin can use"),
    ParamDef::int32("NumThreads", 1)
        .range(1.0, 64.0)
        .doc("Worker threads used (1..MaxThreads)"),
    ParamDef::enumeration("SortMode", &["Unsorted", "Sorted"], 0)
        .doc("Re-order output by uniqueId"),
    ParamDef::float64("SortTime", 0.1)
        .min(0.0)
        .doc("Longest wait (s) for a missing uniqueId before emitting"),
    ParamDef::int32("SortSize", 10)
        .min(1.0)
        .doc("Most arrays held for sorting"),
    ParamDef::int32("SortFree", 10)
        .read_only_plain()
        .doc("Free sort slots"),
    ParamDef::int32("DisorderedArrays", 0)
        .doc("Outputs whose uniqueId was not previous+1; write to reset"),
    ParamDef::int32("DroppedOutputArrays", 0)
        .doc("Outputs dropped (MaxByteRate, sort buffer full); write to reset"),
    ParamDef::float64("MinCallbackTime", 0.0)
        .min(0.0)
        .doc("Ignore arrays arriving sooner than this (s) after the last"),
    ParamDef::float64("MaxArrayRate", 0.0).min(0.0).doc(
        "Output frame-rate cap in arrays/s (0 = none); the outputs over it are dropped and counted",
    ),
    ParamDef::float64("MaxByteRate", 0.0)
        .min(0.0)
        .doc("Output bandwidth cap in bytes/s (0 = none)"),
    ParamDef::int32("DroppedArrays", 0)
        .doc("Input arrays dropped: queue full or unsupported input; write to reset"),
    ParamDef::float64("ExecutionTime", 0.0)
        .read_only()
        .doc("Time of the last processing (ms)"),
    ParamDef::enumeration("ProcessPlugin", &["", ""], 0)
        .doc("Write 1 to process the last input array again"),
    ParamDef::int64("ArraysOffered", 0)
        .read_only()
        .doc("Arrays offered to this port since start"),
    ParamDef::int64("ArraysProcessed", 0)
        .read_only()
        .doc("Arrays processed since start"),
    ParamDef::int64("DroppedQueueFull", 0)
        .read_only()
        .doc("Dropped: input queue full"),
    ParamDef::int64("DroppedMinTime", 0)
        .read_only()
        .doc("Dropped: sooner than MinCallbackTime"),
    ParamDef::int64("DroppedUnsupported", 0)
        .read_only()
        .doc("Dropped: input the plugin cannot take (e.g. compressed)"),
    ParamDef::int64("DroppedDisabled", 0)
        .read_only()
        .doc("Dropped: offered while EnableCallbacks = Disable"),
    ParamDef::int64("DroppedErrors", 0)
        .read_only()
        .doc("Dropped: processing failed (message in the log)"),
    ParamDef::int64("InFlight", 0)
        .read_only()
        .doc("Arrays being processed now"),
];

/// ADBase (+ pool) parameters of a driver port.
pub const DRIVER_PARAMS: &[ParamDef] = &[
    ParamDef::int32("MaxSizeX", 1024)
        .read_only()
        .doc("Sensor size in X"),
    ParamDef::int32("MaxSizeY", 1024)
        .read_only()
        .doc("Sensor size in Y"),
    ParamDef::int32("MinX", 0)
        .min(0.0)
        .doc("Region start in X (unbinned pixels)"),
    ParamDef::int32("MinY", 0)
        .min(0.0)
        .doc("Region start in Y (unbinned pixels)"),
    ParamDef::int32("SizeX", 1024)
        .min(1.0)
        .doc("Region size in X (unbinned pixels)"),
    ParamDef::int32("SizeY", 1024)
        .min(1.0)
        .doc("Region size in Y (unbinned pixels)"),
    ParamDef::int32("BinX", 1).min(1.0).doc("Binning in X"),
    ParamDef::int32("BinY", 1).min(1.0).doc("Binning in Y"),
    ParamDef::yes_no("ReverseX", 0).doc("Reverse the image in X"),
    ParamDef::yes_no("ReverseY", 0).doc("Reverse the image in Y"),
    ParamDef::float64("Gain", 1.0).doc("Detector gain"),
    ParamDef::enumeration("ImageMode", &["Single", "Multiple", "Continuous"], 2)
        .doc("Frames per Acquire: 1, NumImages, or until stopped"),
    ParamDef::enumeration("TriggerMode", &["Internal", "External"], 0).doc("Trigger source"),
    ParamDef::enumeration(
        "FrameType",
        &["Normal", "Background", "FlatField", "DblCorrelation"],
        0,
    )
    .doc("Frame type"),
    ParamDef::float64("AcquireTime", 0.001)
        .min(0.0)
        .doc("Exposure time (s)"),
    ParamDef::float64("AcquirePeriod", 0.005)
        .min(0.0)
        .doc("Time between frames (s); 0 = as fast as possible"),
    ParamDef::int32("NumImages", 100)
        .min(1.0)
        .doc("Frames per acquisition in Multiple mode"),
    ParamDef::int32("NumImagesCounter", 0)
        .read_only()
        .doc("Frames acquired in this acquisition"),
    ParamDef::int32("NumExposures", 1)
        .min(1.0)
        .doc("Exposures per image"),
    ParamDef::int32("NumExposuresCounter", 0)
        .read_only()
        .doc("Exposures in this image"),
    ParamDef::float64("TimeRemaining", 0.0)
        .read_only()
        .doc("Time remaining in this acquisition (s)"),
    ParamDef::enumeration("DetectorState", DETECTOR_STATES, 0)
        .read_only()
        .doc("Detector state"),
    ParamDef::string("StatusMessage", "")
        .read_only()
        .long_string()
        .doc("Status or error message"),
    ParamDef::string("StringToServer", "")
        .read_only()
        .long_string()
        .doc("Last string sent to the detector (none for the simulator)"),
    ParamDef::string("StringFromServer", "")
        .read_only()
        .long_string()
        .doc("Last string received from the detector (none for the simulator)"),
    ParamDef::enumeration("ReadStatus", &["", ""], 0).doc("Write 1 to refresh readbacks"),
    ParamDef::enumeration("ShutterMode", &["None", "EPICS PV", "Detector output"], 0)
        .readback_choices(&["None", "EPICS PV", "Camera output"])
        .doc("Who drives the shutter: nobody, an EPICS PV, or the detector (simulated)"),
    ParamDef::enumeration("ShutterControl", &["Close", "Open"], 0)
        .doc("Open (1) / close (0) the shutter by hand"),
    ParamDef::enumeration("ShutterStatus", &["Closed", "Open"], 0)
        .read_only()
        .doc("Shutter state (simulated: follows ShutterControl after the delays)"),
    ParamDef::float64("ShutterOpenDelay", 0.0)
        .min(0.0)
        .doc("Time the shutter takes to open (s); acquisition waits for it"),
    ParamDef::float64("ShutterCloseDelay", 0.0)
        .min(0.0)
        .doc("Time the shutter takes to close (s)"),
    ParamDef::enumeration("ShutterControlEPICS", &["Closed", "Open"], 0)
        .read_only_plain()
        .doc("Output to an EPICS shutter PV (ShutterMode = EPICS PV)"),
    ParamDef::enumeration("ShutterStatusEPICS", &["Closed", "Open"], 0)
        .read_only()
        .doc("Status read back from an EPICS shutter PV"),
    ParamDef::float64("Temperature", 25.0).doc("Temperature set point"),
    ParamDef::float64("TemperatureActual", 25.0)
        .read_only_plain()
        .doc("Measured temperature"),
    ParamDef::int32("DroppedArrays", 0)
        .read_only()
        .doc("Frames dropped at the source (pool cap reached)"),
];

#[cfg(test)]
mod tests {
    use super::*;
    use ndflow_core::ParamStore;

    #[test]
    fn tables_have_no_duplicates() {
        assert!(ParamStore::duplicate_names(&[ARRAY_BASE_PARAMS, PLUGIN_BASE_PARAMS]).is_empty());
        assert!(ParamStore::duplicate_names(&[ARRAY_BASE_PARAMS, DRIVER_PARAMS]).is_empty());
        assert!(ParamStore::duplicate_names(&[ARRAY_BASE_PARAMS]).is_empty());
        assert_eq!(DETECTOR_STATES.len(), 11);
    }
}
