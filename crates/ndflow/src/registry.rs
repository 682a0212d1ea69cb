//! Port types by name: the one place a new driver or plugin is registered.

use std::sync::Arc;

use ndflow_core::{ParamDef, ParamValue};
use ndflow_plugins::{
    codec::CodecPlugin, process::ProcessPlugin, roi::RoiPlugin, roistat::RoiStatPlugin,
    stats::StatsPlugin, std_arrays::StdArraysPlugin, timeseries::TimeSeriesPlugin,
};
use ndflow_runtime::params::{ARRAY_BASE_PARAMS, DRIVER_PARAMS, PLUGIN_BASE_PARAMS};
use ndflow_runtime::{Driver, Graph, Plugin};
use ndflow_sim::SimDetector;

use crate::config::PortConfig;
use crate::pva::driver::{PvaDriver, PVA_DRIVER_PARAMS};
use crate::pva::plugin::{PvaPlugin, PVA_PARAMS};
use crate::pva::ImagePvs;

/// (config type, areaDetector class, is driver, one-line description)
pub const TYPES: &[(&str, &str, bool, &str)] = &[
    (
        "sim",
        "simDetector",
        true,
        "Simulated detector: ramp, peaks, sine, offset & noise",
    ),
    (
        "roi",
        "NDPluginROI",
        false,
        "N-D region of interest with binning, reverse, scale, type",
    ),
    (
        "stats",
        "NDPluginStats",
        false,
        "Statistics, centroid and moments, profiles, histogram",
    ),
    (
        "process",
        "NDPluginProcess",
        false,
        "Background, flat field, offset/scale, clipping, recursive filter",
    ),
    (
        "stdarrays",
        "NDPluginStdArrays",
        false,
        "The latest frame as an array parameter (waveform)",
    ),
    (
        "codec",
        "NDPluginCodec",
        false,
        "Compress (JPEG, Zlib, Blosc, LZ4, LZ4HDF5, BSLZ4) or decompress",
    ),
    (
        "pvadriver",
        "pvaDriver",
        true,
        "Frames from an NTNDArray PV (another IOC, p4p); uniqueId gaps counted",
    ),
    (
        "pva",
        "NDPluginPva",
        false,
        "Publishes frames as an NTNDArray PV (zero-copy; latest-wins or lossless)",
    ),
    (
        "tiff",
        "NDFileTIFF",
        false,
        "TIFF files: all types, Mono/RGB, uniqueId/timestamps/attributes as tags",
    ),
    (
        "hdf5",
        "NDFileHDF5",
        false,
        "HDF5 files (NeXus layout): all types, filters, direct chunk write, SWMR",
    ),
    (
        "jpeg",
        "NDFileJPEG",
        false,
        "JPEG files: UInt8 Mono/RGB, JPEGQuality",
    ),
    (
        "transform",
        "NDPluginTransform",
        false,
        "Rotations (90/180/270 clockwise) and mirrors of a Mono/RGB image",
    ),
    (
        "colorconvert",
        "NDPluginColorConvert",
        false,
        "Colour mode conversion: Mono/Bayer/RGB1/2/3, false colour",
    ),
    (
        "badpixel",
        "NDPluginBadPixel",
        false,
        "Bad pixels from a JSON file: Set, Replace or Median, following ROI/binning",
    ),
    (
        "fft",
        "NDPluginFFT",
        false,
        "1-D/2-D FFT: averaged |FFT| frame, real/imaginary/abs waveforms",
    ),
    (
        "overlay",
        "NDPluginOverlay",
        false,
        "8 crosses/rectangles/ellipses/text lines drawn on Mono or RGB images, Set or XOR",
    ),
    (
        "circularbuff",
        "NDPluginCircularBuff",
        false,
        "PreCount ring sent around a calc-expression or soft trigger, then PostCount frames",
    ),
    (
        "attribute",
        "NDPluginAttribute",
        false,
        "8 chosen frame attributes (or uniqueId/time stamps) as value, sum and time series",
    ),
    (
        "pos",
        "NDPosPlugin",
        false,
        "Scan positions from an XML list as frame attributes; missing/duplicate frame IDs",
    ),
    (
        "roistat",
        "NDPluginROIStat",
        false,
        "Min/max/mean/total/net of up to 32 ROIs (MaxROIs, default 8) in one pass, time series",
    ),
    (
        "timeseries",
        "NDPluginTimeSeries",
        false,
        "Time series of up to 32 signals (MaxSignals, default 8): fixed/circular, averaging",
    ),
    (
        "scatter",
        "NDPluginScatter",
        false,
        "Each frame to ONE downstream port, round-robin, skipping full queues (scale-out)",
    ),
    (
        "gather",
        "NDPluginGather",
        false,
        "Up to 8 upstream ports (NDArrayPort_1..8) merged into one stream; SortMode orders it",
    ),
];

pub fn type_names() -> Vec<&'static str> {
    TYPES.iter().map(|t| t.0).collect()
}

pub fn is_driver(type_name: &str) -> bool {
    TYPES.iter().any(|t| t.0 == type_name && t.2)
}

/// Keys consumed when the port is constructed rather than set as parameters.
pub fn is_constructor_key(type_name: &str, key: &str) -> bool {
    (type_name == "sim" && matches!(key, "MaxSizeX" | "MaxSizeY"))
        || (type_name == "pva" && key == "PvName")
        || (type_name == "roistat" && key == "MaxROIs")
        || (type_name == "timeseries" && key == "MaxSignals")
}

fn new_plugin(type_name: &str) -> Option<Arc<dyn Plugin>> {
    Some(match type_name {
        "roi" => Arc::new(RoiPlugin::new()),
        "stats" => Arc::new(StatsPlugin::new()),
        "process" => Arc::new(ProcessPlugin::new()),
        "stdarrays" => Arc::new(StdArraysPlugin::new()),
        "codec" => Arc::new(CodecPlugin::new()),
        "tiff" => Arc::new(ndflow_io::TiffFilePlugin::new()),
        "jpeg" => Arc::new(ndflow_io::JpegFilePlugin::new()),
        "hdf5" => Arc::new(ndflow_io::Hdf5FilePlugin::new()),
        "transform" => Arc::new(ndflow_plugins::transform::TransformPlugin::new()),
        "colorconvert" => Arc::new(ndflow_plugins::color_convert::ColorConvertPlugin::new()),
        "badpixel" => Arc::new(ndflow_plugins::bad_pixel::BadPixelPlugin::new()),
        "fft" => Arc::new(ndflow_plugins::fft::FftPlugin::new()),
        "overlay" => Arc::new(ndflow_plugins::overlay::OverlayPlugin::new()),
        "circularbuff" => Arc::new(ndflow_plugins::circular_buff::CircularBuffPlugin::new()),
        "attribute" => Arc::new(ndflow_plugins::attribute::AttributePlugin::new()),
        "pos" => Arc::new(ndflow_plugins::pos::PosPlugin::new()),
        "roistat" => Arc::new(RoiStatPlugin::new()),
        "timeseries" => Arc::new(TimeSeriesPlugin::new()),
        "scatter" => Arc::new(ndflow_plugins::scatter::ScatterPlugin::new()),
        "gather" => Arc::new(ndflow_plugins::gather::GatherPlugin::new()),
        _ => return None,
    })
}

fn new_sim(max_x: usize, max_y: usize) -> Box<dyn Driver> {
    Box::new(SimDetector::new(max_x, max_y))
}

/// Creates the port described by `p` in `graph`; `pva` ports register their image PV in `pvs`.
pub fn create(graph: &Graph, p: &PortConfig, prefix: &str, pvs: &ImagePvs) -> Result<(), String> {
    if p.type_name == "pvadriver" {
        graph
            .add_driver(&p.name, Box::new(PvaDriver::new()))
            .map_err(|e| e.to_string())?;
        return Ok(());
    }
    if p.type_name == "pva" {
        let name = match p
            .settings
            .iter()
            .find(|s| s.key == "PvName")
            .map(|s| &s.value)
        {
            None => format!("{prefix}{}Image", p.prefix),
            Some(ParamValue::Str(s)) if !s.is_empty() => s.clone(),
            Some(v) => return Err(format!("PvName must be a non-empty string, not {v}")),
        };
        let pv = PvaPlugin::new_pv();
        pvs.add(name.clone(), pv.clone())?;
        graph
            .add_plugin(&p.name, Arc::new(PvaPlugin::new(pv.clone(), name.clone())))
            .map_err(|e| e.to_string())?;
        if let Some(port) = graph.port(&p.name) {
            port.params()
                .set_by_name("PvName", name)
                .map_err(|e| e.to_string())?;
            let params = Arc::clone(port.params());
            pv.on_subscribers_changed(move |n| {
                let _ = params.set_by_name("Subscribers", n as i64);
            });
        }
        return Ok(());
    }
    if p.type_name == "sim" {
        let size = |k: &str| -> Result<usize, String> {
            match p.settings.iter().find(|s| s.key == k).map(|s| &s.value) {
                None => Ok(1024),
                Some(ParamValue::Int(v)) if (1..=65536).contains(v) => Ok(*v as usize),
                Some(v) => Err(format!("{k} must be an integer 1..65536, not {v}")),
            }
        };
        graph
            .add_driver(&p.name, new_sim(size("MaxSizeX")?, size("MaxSizeY")?))
            .map_err(|e| e.to_string())?;
        return Ok(());
    }
    // Address counts fixed at construction (areaDetector's maxROIs / maxSignals).
    let count = |k: &str| -> Result<Option<usize>, String> {
        match p.settings.iter().find(|s| s.key == k).map(|s| &s.value) {
            None => Ok(None),
            Some(ParamValue::Int(v)) if (1..=32).contains(v) => Ok(Some(*v as usize)),
            Some(v) => Err(format!("{k} must be an integer 1..32, not {v}")),
        }
    };
    let plugin: Arc<dyn Plugin> = match p.type_name.as_str() {
        "roistat" => match count("MaxROIs")? {
            Some(n) => Arc::new(RoiStatPlugin::with_rois(n)),
            None => Arc::new(RoiStatPlugin::new()),
        },
        "timeseries" => match count("MaxSignals")? {
            Some(n) => Arc::new(TimeSeriesPlugin::with_signals(n)),
            None => Arc::new(TimeSeriesPlugin::new()),
        },
        t => new_plugin(t).ok_or_else(|| format!("unknown port type '{t}'"))?,
    };
    graph
        .add_plugin(&p.name, plugin)
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// All parameter tables of a port type, base tables first.
pub fn param_tables(type_name: &str) -> Vec<(&'static str, &'static [ParamDef])> {
    if type_name == "pvadriver" {
        return vec![
            ("NDArrayBase", ARRAY_BASE_PARAMS),
            ("ADBase", DRIVER_PARAMS),
            ("pvaDriver", PVA_DRIVER_PARAMS),
        ];
    }
    if type_name == "pva" {
        return vec![
            ("NDArrayBase", ARRAY_BASE_PARAMS),
            ("NDPluginBase", PLUGIN_BASE_PARAMS),
            ("NDPluginPva", PVA_PARAMS),
        ];
    }
    if type_name == "sim" {
        let sim = new_sim(8, 8);
        return vec![
            ("NDArrayBase", ARRAY_BASE_PARAMS),
            ("ADBase", DRIVER_PARAMS),
            ("simDetector", sim.params()),
        ];
    }
    match new_plugin(type_name) {
        Some(p) => vec![
            ("NDArrayBase", ARRAY_BASE_PARAMS),
            ("NDPluginBase", PLUGIN_BASE_PARAMS),
            (p.plugin_type(), p.params()),
        ],
        None => Vec::new(),
    }
}
