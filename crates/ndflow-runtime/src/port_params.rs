//! The base parameter tables every port gets, with areaDetector's names and enum strings
//! (NDArrayBase.template, NDPluginBase.template, ADBase.template). Declared once here: the
//! PV names, config keys, JSON summary and docs all derive from these tables.

use ndflow_core::alarm::sev::{INVALID, MAJOR, MINOR, NO};
use ndflow_core::Levels;
use ndflow_core::{ColorMode, DataType, Derive, ParamDef, ParamError, ParamLayout};

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

/// NDPluginBase.template's calcout records set `QueueFree.LOW` to a quarter of `QueueSize`
/// (LOLO 0: the queue is full and frames are being dropped).
const QUEUE_FREE_LEVELS: Levels = Levels {
    of: "QueueSize",
    hihi: None,
    high: None,
    low: Some(0.25),
    lolo: Some(0.0),
};
/// `QueueUse.HIGH` at 75 % of `QueueSize`, HIHI when full.
const QUEUE_USE_LEVELS: Levels = Levels {
    of: "QueueSize",
    hihi: Some(1.0),
    high: Some(0.75),
    low: None,
    lolo: None,
};
/// `SortFree.LOW` at a quarter of `SortSize`.
const SORT_FREE_LEVELS: Levels = Levels {
    of: "SortSize",
    hihi: None,
    high: None,
    low: Some(0.25),
    lolo: Some(0.0),
};
/// ndflow's own: a pool near its cap (`PoolMaxMem`, when set) is about to drop frames at the
/// source; MINOR from 90 %, MAJOR when full.
const POOL_USE_LEVELS: Levels = Levels {
    of: "PoolMaxMem",
    hihi: Some(1.0),
    high: Some(0.9),
    low: None,
    lolo: None,
};

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

ndflow_core::params! {
    /// Common to drivers and plugins (NDArrayBase).
    pub const ARRAY_BASE_PARAMS, pub struct ArrayBaseParams {
        port_name: string("PortName", "")
            .read_only()
            .doc("Port name"),
        ad_core_version: string("ADCoreVersion", "3.15.0")
            .read_only()
            .doc("areaDetector core version this port follows"),
        driver_version: string("DriverVersion", env!("CARGO_PKG_VERSION"))
            .read_only()
            .doc("ndflow version"),
        manufacturer: string("Manufacturer", "")
            .read_only()
            .doc("Detector manufacturer"),
        model: string("Model", "")
            .read_only()
            .doc("Detector model"),
        serial_number: string("SerialNumber", "")
            .read_only()
            .doc("Serial number"),
        sdk_version: string("SDKVersion", "")
            .read_only()
            .doc("Vendor SDK version"),
        firmware_version: string("FirmwareVersion", "")
            .read_only()
            .doc("Firmware version"),
        acquire: enumeration("Acquire", &["Done", "Acquire"], 0)
            .alarm_states(&[NO, MINOR])
            .readback_choices(&["Done", "Acquiring"])
            .completes_when_done()
            .doc("Start (1) / stop (0) acquisition; a put completes when it has ended (plugins: no effect)"),
        acquire_busy: enumeration("AcquireBusy", &["Done", "Acquiring"], 0)
            .alarm_states(&[NO, MINOR])
            .read_only_plain()
            .busy()
            .doc("Acquiring, or waiting for plugins (WaitForPlugins)"),
        acquire_busy_cb: enumeration("AcquireBusyCB", &["Done", "Acquiring"], 0)
            .alarm_states(&[NO, MINOR])
            .read_only_plain()
            .doc("AcquireBusy as seen by the driver callback (same as AcquireBusy in ndflow)"),
        wait_for_plugins: yes_no("WaitForPlugins", 0)
            .doc("Acquisition completes only when plugins have drained (plugins: no effect)"),
        array_counter: int32("ArrayCounter", 0).doc("Arrays produced/processed; write to reset"),
        array_rate: float64("ArrayRate", 0.0)
            .helper("calc")
            .read_only()
            .doc("Arrays per second over the last second"),
        n_dimensions: int32("NDimensions", 0)
            .doc("Dimensions of the last array (a write has no effect in ndflow)"),
        dimensions: array("Dimensions", DataType::Int32)
            .read_only_both()
            .doc("Sizes of every dimension of the last array"),
        array_size0: int32("ArraySize0", 0).read_only_both().doc("Size of dimension 0 of the last array"),
        array_size1: int32("ArraySize1", 0).read_only_both().doc("Size of dimension 1 of the last array"),
        array_size2: int32("ArraySize2", 0).read_only_both().doc("Size of dimension 2 of the last array"),
        array_size3: int32("ArraySize3", 0).read_only_both().doc("Size of dimension 3 of the last array"),
        array_size4: int32("ArraySize4", 0).read_only_both().doc("Size of dimension 4 of the last array"),
        array_size5: int32("ArraySize5", 0).read_only_both().doc("Size of dimension 5 of the last array"),
        array_size6: int32("ArraySize6", 0).read_only_both().doc("Size of dimension 6 of the last array"),
        array_size7: int32("ArraySize7", 0).read_only_both().doc("Size of dimension 7 of the last array"),
        array_size8: int32("ArraySize8", 0).read_only_both().doc("Size of dimension 8 of the last array"),
        array_size9: int32("ArraySize9", 0).read_only_both().doc("Size of dimension 9 of the last array"),
        array_size_x: int32("ArraySizeX", 0)
            .read_only()
            .doc("Size of the last array in X"),
        array_size_y: int32("ArraySizeY", 0)
            .read_only()
            .doc("Size of the last array in Y"),
        array_size_z: int32("ArraySizeZ", 0)
            .read_only()
            .doc("Size of the last array in Z (colour)"),
        // longin in NDArrayBase.template: int32 (frames over 2 GiB read 2147483647).
        array_size: int32("ArraySize", 0)
            .read_only()
            .doc("Bytes of the last array (uncompressed)"),
        unique_id: int32("UniqueId", 0)
            .read_only()
            .doc("uniqueId of the last array"),
        time_stamp: float64("TimeStamp", 0.0)
            .read_only()
            .doc("timeStamp of the last array (s, EPICS epoch)"),
        epics_ts_sec: int32("EpicsTSSec", 0)
            .read_only()
            .doc("EPICS timestamp seconds of the last array"),
        epics_ts_nsec: int32("EpicsTSNsec", 0)
            .read_only()
            .doc("EPICS timestamp nanoseconds of the last array"),
        codec: string("Codec", "")
            .read_only()
            .doc("Codec of the last array (empty = uncompressed)"),
        compressed_size: int32("CompressedSize", 0)
            .read_only()
            .doc("Bytes of data in the last array"),
        bayer_pattern: enumeration("BayerPattern", &["RGGB", "GBRG", "GRBG", "BGGR"], 0)
            .read_only()
            .doc("Bayer pattern of the last array"),
        data_type: enumeration("DataType", DATA_TYPE_CHOICES, 1)
            .doc("Output data type (drivers); data type of the last array (plugins, a write has no effect)"),
        color_mode: enumeration("ColorMode", COLOR_MODE_CHOICES, 0)
            .doc("Output colour mode (drivers); colour mode of the last array (plugins, a write has no effect)"),
        array_callbacks: enable("ArrayCallbacks", 1)
            .alarm_states_both(&[NO, MINOR])
            .doc("Pass arrays downstream"),
        nd_attributes_macros: string("NDAttributesMacros", "")
            .long_string()
            .doc("Macro substitutions for the attribute file (NAME=value,...)"),
        nd_attributes_file: string("NDAttributesFile", "")
            .long_string()
            .doc("Attribute definition file"),
        nd_attributes_status: enumeration(
            "NDAttributesStatus",
            &[
            "Attributes file OK",
            "File not found",
            "XML syntax error",
            "Macro substitution error",
            ],
            0,
            )
            .alarm_states(&[NO, MINOR, MAJOR, MAJOR])
            .read_only_plain()
            .doc("Result of reading NDAttributesFile"),
        pool_max_mem: float64("PoolMaxMem", 0.0)
            .min(0.0)
            .doc("Pool memory cap (MB, 0 = unlimited). Plugins: the cap of the pool their outputs come from (their source driver's); a write sets that pool's cap"),
        pool_poll_stats: enumeration("PoolPollStats", &["", ""], 0)
            .doc("Refresh the pool records now (they are refreshed continuously in ndflow)"),
        pool_used_mem: float64("PoolUsedMem", 0.0)
            .alarm_levels(POOL_USE_LEVELS)
            .read_only_plain()
            .doc("Pool memory allocated (MB). Plugins: that of the pool their outputs come from (their source's), 0 before a first array"),
        pool_alloc_buffers: int32("PoolAllocBuffers", 0)
            .read_only_plain()
            .doc("Buffers allocated by the pool (plugins: their source's pool)"),
        pool_free_buffers: int32("PoolFreeBuffers", 0)
            .read_only_plain()
            .doc("Buffers on the pool's free list (plugins: their source's pool)"),
        pool_used_buffers: int32("PoolUsedBuffers", 0)
            .helper("calc")
            .read_only_plain()
            .doc("Buffers in use (plugins: in their source's pool)"),
        empty_free_list: enumeration("EmptyFreeList", &["", ""], 0)
            .doc("Write 1 to free the pool's free buffers (plugins: their source's pool)"),
        pre_alloc_buffers: enumeration("PreAllocBuffers", &["Done", "Allocate"], 0)
            .busy()
            .doc("Write 1 to pre-allocate NumPreAllocBuffers of the current array size (plugins: in their source's pool, of their last array's size)"),
        num_pre_alloc_buffers: int32("NumPreAllocBuffers", 0)
            .min(0.0)
            .doc("Buffers to pre-allocate"),
        num_queued_arrays: int32("NumQueuedArrays", 0)
            .read_only_plain()
            .doc("Arrays queued or in flight in all plugins"),
        // NDArrayBase.template's helper records: one subArray per element of Dimensions and of
        // Dimensions_RBV (the sizes ADCore's screens show), and the calcouts that drive
        // AcquireBusy from Acquire and AcquireBusyCB.
        dim0_sa: int32("Dim0SA", 0)
            .read_only_plain()
            .helper("subArray")
            .derived(Derive::Element("Dimensions", 0))
            .doc("Dimensions[0] (subArray)"),
        dim1_sa: int32("Dim1SA", 0)
            .read_only_plain()
            .helper("subArray")
            .derived(Derive::Element("Dimensions", 1))
            .doc("Dimensions[1] (subArray)"),
        dim2_sa: int32("Dim2SA", 0)
            .read_only_plain()
            .helper("subArray")
            .derived(Derive::Element("Dimensions", 2))
            .doc("Dimensions[2] (subArray)"),
        dim3_sa: int32("Dim3SA", 0)
            .read_only_plain()
            .helper("subArray")
            .derived(Derive::Element("Dimensions", 3))
            .doc("Dimensions[3] (subArray)"),
        dim4_sa: int32("Dim4SA", 0)
            .read_only_plain()
            .helper("subArray")
            .derived(Derive::Element("Dimensions", 4))
            .doc("Dimensions[4] (subArray)"),
        dim5_sa: int32("Dim5SA", 0)
            .read_only_plain()
            .helper("subArray")
            .derived(Derive::Element("Dimensions", 5))
            .doc("Dimensions[5] (subArray)"),
        dim6_sa: int32("Dim6SA", 0)
            .read_only_plain()
            .helper("subArray")
            .derived(Derive::Element("Dimensions", 6))
            .doc("Dimensions[6] (subArray)"),
        dim7_sa: int32("Dim7SA", 0)
            .read_only_plain()
            .helper("subArray")
            .derived(Derive::Element("Dimensions", 7))
            .doc("Dimensions[7] (subArray)"),
        dim8_sa: int32("Dim8SA", 0)
            .read_only_plain()
            .helper("subArray")
            .derived(Derive::Element("Dimensions", 8))
            .doc("Dimensions[8] (subArray)"),
        dim9_sa: int32("Dim9SA", 0)
            .read_only_plain()
            .helper("subArray")
            .derived(Derive::Element("Dimensions", 9))
            .doc("Dimensions[9] (subArray)"),
        dim0_sa_rbv: int32("Dim0SA_RBV", 0)
            .read_only_plain()
            .helper("subArray")
            .derived(Derive::Element("Dimensions", 0))
            .doc("Dimensions_RBV[0] (subArray)"),
        dim1_sa_rbv: int32("Dim1SA_RBV", 0)
            .read_only_plain()
            .helper("subArray")
            .derived(Derive::Element("Dimensions", 1))
            .doc("Dimensions_RBV[1] (subArray)"),
        dim2_sa_rbv: int32("Dim2SA_RBV", 0)
            .read_only_plain()
            .helper("subArray")
            .derived(Derive::Element("Dimensions", 2))
            .doc("Dimensions_RBV[2] (subArray)"),
        dim3_sa_rbv: int32("Dim3SA_RBV", 0)
            .read_only_plain()
            .helper("subArray")
            .derived(Derive::Element("Dimensions", 3))
            .doc("Dimensions_RBV[3] (subArray)"),
        dim4_sa_rbv: int32("Dim4SA_RBV", 0)
            .read_only_plain()
            .helper("subArray")
            .derived(Derive::Element("Dimensions", 4))
            .doc("Dimensions_RBV[4] (subArray)"),
        dim5_sa_rbv: int32("Dim5SA_RBV", 0)
            .read_only_plain()
            .helper("subArray")
            .derived(Derive::Element("Dimensions", 5))
            .doc("Dimensions_RBV[5] (subArray)"),
        dim6_sa_rbv: int32("Dim6SA_RBV", 0)
            .read_only_plain()
            .helper("subArray")
            .derived(Derive::Element("Dimensions", 6))
            .doc("Dimensions_RBV[6] (subArray)"),
        dim7_sa_rbv: int32("Dim7SA_RBV", 0)
            .read_only_plain()
            .helper("subArray")
            .derived(Derive::Element("Dimensions", 7))
            .doc("Dimensions_RBV[7] (subArray)"),
        dim8_sa_rbv: int32("Dim8SA_RBV", 0)
            .read_only_plain()
            .helper("subArray")
            .derived(Derive::Element("Dimensions", 8))
            .doc("Dimensions_RBV[8] (subArray)"),
        dim9_sa_rbv: int32("Dim9SA_RBV", 0)
            .read_only_plain()
            .helper("subArray")
            .derived(Derive::Element("Dimensions", 9))
            .doc("Dimensions_RBV[9] (subArray)"),
        set_acquire_busy: int32("SetAcquireBusy", 0)
            .read_only_plain()
            .helper("calcout")
            .derived(Derive::Copy("Acquire"))
            .doc("Acquire, which sets AcquireBusy on its transition to non-zero (calcout)"),
        clear_acquire_busy: int32("ClearAcquireBusy", 0)
            .read_only_plain()
            .helper("calcout")
            .derived(Derive::Copy("AcquireBusyCB"))
            .doc("AcquireBusyCB, which clears AcquireBusy on its transition to zero (calcout)"),
    }
}

ndflow_core::params! {
    /// NDPluginDriver's parameters plus ndflow's per-reason drop accounting.
    pub const PLUGIN_BASE_PARAMS, pub struct PluginBaseParams {
        plugin_type: string("PluginType", "")
            .read_only()
            .doc("Plugin class"),
        nd_array_port: string("NDArrayPort", "").doc("Source port name (re-wirable while running)"),
        nd_array_address: int32("NDArrayAddress", 0)
            .min(0.0)
            .doc("Address of the source port whose arrays this port takes (0 = its main output; others as the source publishes them, e.g. a time series port's signals); an address the source does not publish is refused; re-wirable while running"),
        enable_callbacks: enable("EnableCallbacks", 1)
            .alarm_states(&[NO, MINOR])
            .doc("Accept arrays (a disabled plugin counts offers as DroppedDisabled)"),
        blocking_callbacks: yes_no("BlockingCallbacks", 0)
            .doc("Yes: process in the caller's thread (never drops, slows the source)"),
        queue_size: int32("QueueSize", 10)
            .range(1.0, 100000.0)
            .doc("Input queue depth (resizable at run time)"),
        queue_free: int32("QueueFree", 10)
            .alarm_levels(QUEUE_FREE_LEVELS)
            .read_only_plain()
            .doc("Free input queue slots"),
        queue_use: int32("QueueUse", 0)
            .helper("calc")
            .alarm_levels(QUEUE_USE_LEVELS)
            .read_only_plain()
            .doc("Arrays waiting in the input queue"),
        max_threads: int32("MaxThreads", 1)
            .read_only()
            .doc("Most worker threads this plugin can use"),
        num_threads: int32("NumThreads", 1)
            .range(1.0, 64.0)
            .doc("Worker threads used (1..MaxThreads)"),
        sort_mode: enumeration("SortMode", &["Unsorted", "Sorted"], 0).mbb()
            .doc("Re-order output by uniqueId"),
        sort_time: float64("SortTime", 0.1)
            .min(0.0)
            .doc("Longest wait (s) for a missing uniqueId before emitting"),
        sort_size: int32("SortSize", 10)
            .min(1.0)
            .doc("Most arrays held for sorting"),
        sort_free: int32("SortFree", 10)
            .alarm_levels(SORT_FREE_LEVELS)
            .read_only_plain()
            .doc("Free sort slots"),
        disordered_arrays: int32("DisorderedArrays", 0)
            .doc("Outputs whose uniqueId was not previous+1; write to reset"),
        dropped_output_arrays: int32("DroppedOutputArrays", 0)
            .doc("Outputs dropped (MaxByteRate, sort buffer full); write to reset"),
        min_callback_time: float64("MinCallbackTime", 0.0)
            .min(0.0)
            .doc("Ignore arrays arriving sooner than this (s) after the last"),
        max_array_rate: float64("MaxArrayRate", 0.0).min(0.0).helper_readback("calc").doc(
            "Input frame-rate cap in arrays/s (0 = none): sets MinCallbackTime to 1/MaxArrayRate, and follows it, as ADCore's records do; frames over it are skipped (DroppedMinTime)",
            ),
        max_byte_rate: float64("MaxByteRate", 0.0)
            .min(0.0)
            .doc("Output bandwidth cap in bytes/s (0 = none)"),
        dropped_arrays: int32("DroppedArrays", 0)
            .alarm_non_zero(MINOR)
            .doc("Input arrays dropped: queue full or unsupported input; write to reset"),
        // NDPluginBase.template's helper records: the rate calcout and the calcouts that set
        // the queue and sort alarm limits from their sizes (those limits are served with
        // QueueFree, QueueUse and SortFree), and the asyn record of the port.
        max_array_rate_cout: float64("MaxArrayRate_COUT", 0.0)
            .read_only_plain()
            .helper("calcout")
            .derived(Derive::Reciprocal("MaxArrayRate"))
            .doc("1/MaxArrayRate, written to MinCallbackTime (calcout)"),
        queue_free_low: float64("QueueFreeLow", 0.0)
            .read_only_plain()
            .helper("calcout")
            .derived(Derive::Scale("QueueSize", 0.25))
            .doc("QueueFree's LOW limit: a quarter of QueueSize (calcout)"),
        queue_use_high: float64("QueueUseHIGH", 0.0)
            .read_only_plain()
            .helper("calcout")
            .derived(Derive::Scale("QueueSize", 0.75))
            .doc("QueueUse's HIGH limit: three quarters of QueueSize (calcout)"),
        queue_use_hihi: float64("QueueUseHIHI", 0.0)
            .read_only_plain()
            .helper("calcout")
            .derived(Derive::Scale("QueueSize", 1.0))
            .doc("QueueUse's HIHI limit: QueueSize (calcout)"),
        sort_free_low: float64("SortFreeLow", 0.0)
            .read_only_plain()
            .helper("calcout")
            .derived(Derive::Scale("SortSize", 0.25))
            .doc("SortFree's LOW limit: a quarter of SortSize (calcout)"),
        asyn_io: string("AsynIO", "")
            .read_only_plain()
            .helper("asyn")
            .doc("The port's asyn record"),
        execution_time: float64("ExecutionTime", 0.0)
            .read_only()
            .doc("Time of the last processing (ms)"),
        process_plugin: enumeration("ProcessPlugin", &["", ""], 0)
            .doc("Write 1 to process the last input array again"),
        arrays_offered: int64("ArraysOffered", 0)
            .read_only()
            .doc("Arrays offered to this port since start"),
        arrays_processed: int64("ArraysProcessed", 0)
            .read_only()
            .doc("Arrays processed since start"),
        dropped_queue_full: int64("DroppedQueueFull", 0)
            .read_only()
            .doc("Dropped: input queue full"),
        dropped_min_time: int64("DroppedMinTime", 0)
            .read_only()
            .doc("Dropped: sooner than MinCallbackTime"),
        dropped_unsupported: int64("DroppedUnsupported", 0)
            .read_only()
            .doc("Dropped: input the plugin cannot take (e.g. compressed)"),
        dropped_disabled: int64("DroppedDisabled", 0)
            .read_only()
            .doc("Dropped: offered while EnableCallbacks = Disable"),
        dropped_errors: int64("DroppedErrors", 0)
            .read_only()
            .doc("Dropped: processing failed (message in the log)"),
        in_flight: int64("InFlight", 0)
            .read_only()
            .doc("Arrays being processed now"),
    }
}

ndflow_core::params! {
    /// ADBase (+ pool) parameters of a driver port.
    pub const DRIVER_PARAMS, pub struct DriverParams {
        max_size_x: int32("MaxSizeX", 1024)
            .read_only()
            .doc("Sensor size in X"),
        max_size_y: int32("MaxSizeY", 1024)
            .read_only()
            .doc("Sensor size in Y"),
        min_x: int32("MinX", 0)
            .min(0.0)
            .doc("Region start in X (unbinned pixels)"),
        min_y: int32("MinY", 0)
            .min(0.0)
            .doc("Region start in Y (unbinned pixels)"),
        size_x: int32("SizeX", 1024)
            .min(1.0)
            .doc("Region size in X (unbinned pixels)"),
        size_y: int32("SizeY", 1024)
            .min(1.0)
            .doc("Region size in Y (unbinned pixels)"),
        bin_x: int32("BinX", 1).min(1.0).doc("Binning in X"),
        bin_y: int32("BinY", 1).min(1.0).doc("Binning in Y"),
        reverse_x: yes_no("ReverseX", 0).doc("Reverse the image in X"),
        reverse_y: yes_no("ReverseY", 0).doc("Reverse the image in Y"),
        gain: float64("Gain", 1.0).doc("Detector gain"),
        image_mode: enumeration("ImageMode", &["Single", "Multiple", "Continuous"], 2)
            .doc("Frames per Acquire: 1, NumImages, or until stopped"),
        trigger_mode: enumeration("TriggerMode", &["Internal", "External"], 0).mbb().doc("Trigger source"),
        frame_type: enumeration(
            "FrameType",
            &["Normal", "Background", "FlatField", "DblCorrelation"],
            0,
            )
            .doc("Frame type"),
        acquire_time: float64("AcquireTime", 0.001)
            .min(0.0)
            .doc("Exposure time (s)"),
        acquire_period: float64("AcquirePeriod", 0.005)
            .min(0.0)
            .doc("Time between frames (s); 0 = as fast as possible"),
        num_images: int32("NumImages", 100)
            .min(1.0)
            .doc("Frames per acquisition in Multiple mode"),
        num_images_counter: int32("NumImagesCounter", 0)
            .read_only()
            .doc("Frames acquired in this acquisition"),
        num_exposures: int32("NumExposures", 1)
            .min(1.0)
            .doc("Exposures per image"),
        num_exposures_counter: int32("NumExposuresCounter", 0)
            .read_only()
            .doc("Exposures in this image"),
        time_remaining: float64("TimeRemaining", 0.0)
            .read_only()
            .doc("Time remaining in this acquisition (s)"),
        detector_state: enumeration("DetectorState", DETECTOR_STATES, 0)
            .alarm_states(&[NO, NO, NO, NO, NO, MINOR, MAJOR, NO, NO, INVALID, MINOR])
            .read_only()
            .doc("Detector state"),
        status_message: string("StatusMessage", "")
            .read_only()
            .long_string()
            .doc("Status or error message"),
        string_to_server: string("StringToServer", "")
            .read_only()
            .long_string()
            .doc("Last string sent to the detector (none for the simulator)"),
        string_from_server: string("StringFromServer", "")
            .read_only()
            .long_string()
            .doc("Last string received from the detector (none for the simulator)"),
        read_status: enumeration("ReadStatus", &["", ""], 0).doc("Write 1 to refresh readbacks"),
        shutter_mode: enumeration("ShutterMode", &["None", "EPICS PV", "Detector output"], 0)
            .readback_choices(&["None", "EPICS PV", "Camera output"])
            .doc("Who drives the shutter: nobody, an EPICS PV, or the detector (simulated)"),
        shutter_control: enumeration("ShutterControl", &["Close", "Open"], 0)
            .doc("Open (1) / close (0) the shutter by hand"),
        shutter_status: enumeration("ShutterStatus", &["Closed", "Open"], 0)
            .alarm_states(&[NO, MINOR])
            .read_only()
            .doc("Shutter state (simulated: follows ShutterControl after the delays)"),
        shutter_open_delay: float64("ShutterOpenDelay", 0.0)
            .min(0.0)
            .doc("Time the shutter takes to open (s); acquisition waits for it"),
        shutter_close_delay: float64("ShutterCloseDelay", 0.0)
            .min(0.0)
            .doc("Time the shutter takes to close (s)"),
        shutter_control_epics: enumeration("ShutterControlEPICS", &["Closed", "Open"], 0)
            .alarm_states(&[NO, MINOR])
            .read_only_plain()
            .doc("Output to an EPICS shutter PV (ShutterMode = EPICS PV)"),
        shutter_status_epics: enumeration("ShutterStatusEPICS", &["Closed", "Open"], 0).mbb()
            .alarm_states(&[NO, MINOR])
            .read_only()
            .raw_input_link()
            .doc("Status read back from an EPICS shutter PV: ShutterStatusEPICS_RBV.INP names it, .ZRVL/.ONVL are its closed/open values (else the simulated shutter's)"),
        // ADBase.template's helper records: the fanout that processes the two calcouts, which
        // write the EPICS shutter PV on ShutterControlEPICS's transitions; and the asyn record.
        shutter_fanout: int32("ShutterFanout", 0)
            .read_only_plain()
            .helper("fanout")
            .doc("Processes ShutterOpenEPICS and ShutterCloseEPICS (fanout)"),
        shutter_open_epics: int32("ShutterOpenEPICS", 0)
            .read_only_plain()
            .helper("calcout")
            .derived(Derive::Copy("ShutterControlEPICS"))
            .output_link(true, 1.0)
            .doc("ShutterControlEPICS; on its transition to non-zero writes .OCAL (1) to the PV its .OUT names: opens the EPICS shutter (calcout)"),
        shutter_close_epics: int32("ShutterCloseEPICS", 0)
            .read_only_plain()
            .helper("calcout")
            .derived(Derive::Copy("ShutterControlEPICS"))
            .output_link(false, 0.0)
            .doc("ShutterControlEPICS; on its transition to zero writes .OCAL (0) to the PV its .OUT names: closes the EPICS shutter (calcout)"),
        asyn_io: string("AsynIO", "")
            .read_only_plain()
            .helper("asyn")
            .doc("The port's asyn record"),
        temperature: float64("Temperature", 25.0).doc("Temperature set point"),
        temperature_actual: float64("TemperatureActual", 25.0)
            .read_only_plain()
            .doc("Measured temperature"),
        dropped_arrays: int32("DroppedArrays", 0)
            .alarm_non_zero(MINOR)
            .read_only()
            .doc("Frames dropped at the source (pool cap reached)"),
    }
}

/// A plugin port's parameters in store order: NDArrayBase, NDPluginDriver, then the plugin's
/// own table. The store and the plugin's handles are both made from this, so every handle is
/// the position the store holds its parameter at.
pub fn plugin_layout(own: &'static [ParamDef]) -> ParamLayout {
    ParamLayout::new(&[ARRAY_BASE_PARAMS, PLUGIN_BASE_PARAMS, own])
}

/// A driver port's parameters in store order: NDArrayBase, ADDriver, then the driver's own.
pub fn driver_layout(own: &'static [ParamDef]) -> ParamLayout {
    ParamLayout::new(&[ARRAY_BASE_PARAMS, DRIVER_PARAMS, own])
}

ndflow_core::params! {
    /// NDFile.template's parameters: the first part of every file plugin's table (ndflow-io's
    /// `ndfile_params!` also sets FileTemplate's default to the format's extension).
    pub const NDFILE_PARAMS, pub struct NdFileParams {
        file_path: string("FilePath", "").long_string().doc("Directory of the files (a trailing / is added)"),
        file_path_exists: enumeration("FilePathExists", &["No", "Yes"], 0)
            .alarm_states(&[MAJOR, NO]).read_only()
            .doc("Whether FilePath is an existing directory"),
        create_directory: int32("CreateDirectory", 0).doc("0 none; -N create at most the last N levels; +N require the first N levels"),
        file_name: string("FileName", "").long_string().doc("Base file name"),
        file_number: int32("FileNumber", 0).doc("Number of the next file"),
        auto_increment: yes_no("AutoIncrement", 0).doc("Increment FileNumber after each file"),
        file_template: string("FileTemplate", "%s%s_%3.3d").long_string().doc("printf of (FilePath, FileName, FileNumber): %s %s %d forms"),
        full_file_name: string("FullFileName", "").read_only().long_string().doc("Name of the last file written"),
        auto_save: yes_no("AutoSave", 0).doc("Single: write every frame; Capture: write when the buffer is full"),
        write_file: enumeration("WriteFile", &["Done", "Write"], 0)
            .alarm_states(&[NO, MINOR]).readback_choices(&["Done", "Writing"]).busy()
            .doc("Write the latest frame (Single) or the capture buffer (Capture)"),
        read_file: enumeration("ReadFile", &["Done", "Read"], 0)
            .alarm_states(&[NO, MINOR]).readback_choices(&["Done", "Reading"]).busy()
            .doc("Read the file FileNumber names back into the pipeline (TIFF); completes when read"),
        file_write_mode: enumeration("FileWriteMode", &["Single", "Capture", "Stream"], 0).doc("Single / Capture / Stream"),
        capture: enumeration("Capture", &["Done", "Capture"], 0)
            .alarm_states(&[NO, MINOR]).readback_choices(&["Done", "Capturing"]).busy()
            .doc("Start (1) / stop (0) Capture or Stream"),
        num_capture: int32("NumCapture", 1).min(0.0).doc("Frames to capture or stream (Stream: 0 = unlimited)"),
        num_captured: int32("NumCaptured", 0).read_only().doc("Frames captured or streamed so far"),
        free_capture: enumeration("FreeCapture", &["Done", "Free"], 0).doc("Discard the capture buffer"),
        delete_driver_file: yes_no("DeleteDriverFile", 0).doc("Delete the file named by the DriverFileName attribute after writing"),
        lazy_open: yes_no("LazyOpen", 0).doc("Stream: open the file on the first frame, not on Capture"),
        temp_suffix: string("TempSuffix", "").doc("Write to name+suffix, rename on close"),
        write_status: enumeration("WriteStatus", &["Write OK", "Write error"], 0)
            .alarm_states(&[NO, MAJOR]).read_only_plain()
            .doc("Status of the last write"),
        write_message: string("WriteMessage", "").read_only_plain().long_string().doc("Error message of the last write"),
        frames_not_written: int32("FramesNotWritten", 0).read_only().doc("Frames lost to write errors"),
    }
}

/// Binds handles that a port's own tables declare. Every name in those tables is in the
/// layout by construction, so the only failure is a declaration bug (one name declared in
/// two tables with different kinds); constructing every port type in the tests finds it.
pub fn bind<H>(layout: &ParamLayout, bind: fn(&ParamLayout) -> Result<H, ParamError>) -> H {
    match bind(layout) {
        Ok(h) => h,
        Err(e) => panic!("parameter declarations disagree: {e}"),
    }
}

/// [`bind`] for the handles of the first `n` addresses of an addressed (`N:`) table.
pub fn bind_first<S>(
    layout: &ParamLayout,
    n: usize,
    bind_first: fn(&ParamLayout, usize) -> Result<Vec<S>, ParamError>,
) -> Vec<S> {
    match bind_first(layout, n) {
        Ok(h) => h,
        Err(e) => panic!("parameter declarations disagree: {e}"),
    }
}

/// The base handles every plugin port has.
#[derive(Debug, Clone, Copy)]
pub struct PluginBase {
    pub array: ArrayBaseParams,
    pub plugin: PluginBaseParams,
}

impl PluginBase {
    pub fn of(layout: &ParamLayout) -> PluginBase {
        PluginBase {
            array: bind(layout, ArrayBaseParams::bind),
            plugin: bind(layout, PluginBaseParams::bind),
        }
    }
}

/// The base handles every driver port has.
#[derive(Debug, Clone, Copy)]
pub struct DriverBase {
    pub array: ArrayBaseParams,
    pub driver: DriverParams,
}

impl DriverBase {
    pub fn of(layout: &ParamLayout) -> DriverBase {
        DriverBase {
            array: bind(layout, ArrayBaseParams::bind),
            driver: bind(layout, DriverParams::bind),
        }
    }
}

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
