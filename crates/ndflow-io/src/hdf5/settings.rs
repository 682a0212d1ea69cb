//! NDFileHDF5's own parameters (names, enum strings and defaults of ADCore's NDFileHDF5.cpp
//! constructor and NDFileHDF5.template) and the settings read from them when a file opens.

use ndflow_codec::blosc::{BloscCompressor, BloscParams, BloscShuffle};
use ndflow_core::{NDArray, ParamDef, ParamStore, ParamValue};

use super::chunk::DataFilter;
use super::extra_dims::ExtraDims;
use super::layout::ChunkRequest;
use super::xml_layout::Layout;

/// The Compression menu, in NDFileHDF5.template's order.
pub const COMPRESSION_CHOICES: [&str; 8] = [
    "None", "N-bit", "szip", "zlib", "Blosc", "BSLZ4", "LZ4", "JPEG",
];

/// The chunk-size parameters in NDArray dim order (NumColChunks is dim 0).
pub const CHUNK_PARAMS: [&str; 10] = [
    "NumColChunks",
    "NumRowChunks",
    "ChunkSize2",
    "ChunkSize3",
    "ChunkSize4",
    "ChunkSize5",
    "ChunkSize6",
    "ChunkSize7",
    "ChunkSize8",
    "ChunkSize9",
];

const fn chunk(name: &'static str) -> ParamDef {
    ParamDef::int32(name, 0)
        .min(0.0)
        .doc("Chunk size along this NDArray dim (0 = whole dim; used when ChunkSizeAuto = No)")
}

/// NDFile's parameters followed by NDFileHDF5's.
pub const HDF5_PARAMS: &[ParamDef] = crate::ndfile_params!("%s%s_%3.3d.h5";
    ParamDef::enumeration("FlushNow", &["Done", "Flush"], 0).busy().doc("Flush the open file now (SWMR: publish to readers)");
    ParamDef::yes_no("ChunkSizeAuto", 1).doc("One chunk = one frame (Yes) or the chunk sizes below (No)");
    chunk("NumColChunks");
    chunk("NumRowChunks");
    chunk("ChunkSize2");
    chunk("ChunkSize3");
    chunk("ChunkSize4");
    chunk("ChunkSize5");
    chunk("ChunkSize6");
    chunk("ChunkSize7");
    chunk("ChunkSize8");
    chunk("ChunkSize9");
    ParamDef::int32("NumFramesChunks", 0).min(0.0).doc("Frames per chunk (0 = 1)");
    ParamDef::int32("NDAttributeChunk", 0).min(0.0).doc("Elements per chunk of the attribute datasets (0 = NumCapture, 16384 if unlimited)");
    ParamDef::int32("BoundaryAlign", 0).min(0.0).doc("H5Pset_alignment boundary in bytes (0 = off)");
    ParamDef::int32("BoundaryThreshold", 65536).min(0.0).doc("Objects at least this large are aligned");
    ParamDef::yes_no("StoreAttr", 1).doc("Write the NDAttributes as datasets");
    ParamDef::yes_no("StorePerform", 1).doc("Write /entry/instrument/performance/timestamp");
    ParamDef::float64("RunTime", 0.0).read_only_plain().doc("Seconds from open to close of the last file");
    ParamDef::float64("IOSpeed", 0.0).read_only_plain().doc("Mbit/s of the last file, open to close");
    ParamDef::int32("NumFramesFlush", 0).min(0.0).doc("Flush every N frames (0 = at close; SWMR: at least every chunk)");
    ParamDef::enumeration("Compression", &COMPRESSION_CHOICES, 0).doc("Filter of the detector dataset (follows the codec of a pre-compressed first frame)");
    ParamDef::int32("NumDataBits", 8).range(1.0, 64.0).doc("N-bit: bits of precision");
    ParamDef::int32("DataBitsOffset", 0).range(0.0, 63.0).doc("N-bit: bit offset");
    ParamDef::int32("SZipNumPixels", 16).range(2.0, 32.0).doc("szip: pixels per block (even)");
    ParamDef::int32("ZLevel", 6).range(0.0, 9.0).doc("zlib level");
    ParamDef::enumeration("BloscShuffle", &BloscShuffle::CHOICES, 1).doc("Blosc shuffle");
    ParamDef::enumeration("BloscCompressor", &BloscCompressor::CHOICES, 0).doc("Compressor inside Blosc");
    ParamDef::int32("BloscLevel", 5).range(0.0, 9.0).doc("Blosc level");
    ParamDef::int32("JPEGQuality", 90).range(1.0, 100.0).doc("JPEG quality");
    ParamDef::enumeration("SWMRSupported", &["Not Supported", "Supported"], 1).read_only().doc("Whether this HDF5 library can write SWMR");
    ParamDef::enumeration("SWMRMode", &["Off", "On"], 0).doc("Write files readable while they grow");
    ParamDef::enumeration("SWMRActive", &["Off", "Active"], 0).read_only().doc("The open file is in SWMR mode");
    ParamDef::int32("SWMRCbCounter", 0).read_only().doc("Flushes of the open file");
    ParamDef::float64("FillValue", 0.0).doc("Value of detector data never written");
    ParamDef::enumeration("FileFormat", &["HDF5", "Invalid"], 0).readback_choices(&["HDF5", "Undefined"]).doc("File format (HDF5 only)");
    ParamDef::int32("NumExtraDims", 0).range(0.0, 9.0).doc("Extra frame axes beyond N (sizes ExtraDimSize*; sets NumCapture to their product)");
    ParamDef::int32("ExtraDimSizeN", 1).min(1.0).doc("Size of extra dim N");
    ParamDef::int32("ExtraDimSizeX", 1).min(1.0).doc("Size of extra dim X");
    ParamDef::int32("ExtraDimSizeY", 1).min(1.0).doc("Size of extra dim Y");
    ParamDef::int32("ExtraDimSize3", 1).min(1.0).doc("Size of extra dim 3");
    ParamDef::int32("ExtraDimSize4", 1).min(1.0).doc("Size of extra dim 4");
    ParamDef::int32("ExtraDimSize5", 1).min(1.0).doc("Size of extra dim 5");
    ParamDef::int32("ExtraDimSize6", 1).min(1.0).doc("Size of extra dim 6");
    ParamDef::int32("ExtraDimSize7", 1).min(1.0).doc("Size of extra dim 7");
    ParamDef::int32("ExtraDimSize8", 1).min(1.0).doc("Size of extra dim 8");
    ParamDef::int32("ExtraDimSize9", 1).min(1.0).doc("Size of extra dim 9");
    ParamDef::string("ExtraDimNameN", "scan dimension 0").read_only().doc("Name of extra dim N");
    ParamDef::string("ExtraDimNameX", "scan dimension 1").read_only().doc("Name of extra dim X");
    ParamDef::string("ExtraDimNameY", "scan dimension 2").read_only().doc("Name of extra dim Y");
    ParamDef::string("ExtraDimName3", "scan dimension 3").read_only().doc("Name of extra dim 3");
    ParamDef::string("ExtraDimName4", "scan dimension 4").read_only().doc("Name of extra dim 4");
    ParamDef::string("ExtraDimName5", "scan dimension 5").read_only().doc("Name of extra dim 5");
    ParamDef::string("ExtraDimName6", "scan dimension 6").read_only().doc("Name of extra dim 6");
    ParamDef::string("ExtraDimName7", "scan dimension 7").read_only().doc("Name of extra dim 7");
    ParamDef::string("ExtraDimName8", "scan dimension 8").read_only().doc("Name of extra dim 8");
    ParamDef::string("ExtraDimName9", "scan dimension 9").read_only().doc("Name of extra dim 9");
    ParamDef::int32("ExtraDimChunkX", 0).min(0.0).doc("Chunk along extra dim X (0 = 1)");
    ParamDef::int32("ExtraDimChunkY", 0).min(0.0).doc("Chunk along extra dim Y (0 = 1)");
    ParamDef::int32("ExtraDimChunk3", 0).min(0.0).doc("Chunk along extra dim 3 (0 = 1)");
    ParamDef::int32("ExtraDimChunk4", 0).min(0.0).doc("Chunk along extra dim 4 (0 = 1)");
    ParamDef::int32("ExtraDimChunk5", 0).min(0.0).doc("Chunk along extra dim 5 (0 = 1)");
    ParamDef::int32("ExtraDimChunk6", 0).min(0.0).doc("Chunk along extra dim 6 (0 = 1)");
    ParamDef::int32("ExtraDimChunk7", 0).min(0.0).doc("Chunk along extra dim 7 (0 = 1)");
    ParamDef::int32("ExtraDimChunk8", 0).min(0.0).doc("Chunk along extra dim 8 (0 = 1)");
    ParamDef::int32("ExtraDimChunk9", 0).min(0.0).doc("Chunk along extra dim 9 (0 = 1)");
    ParamDef::yes_no("DimAttDatasets", 0).doc("NDAttribute datasets take the extra dims' shape");
    ParamDef::string("XMLFileName", "").long_string().doc("XML layout: a file path or the XML text (starts with <); empty = NeXus default");
    ParamDef::enumeration("XMLValid", &["No", "Yes"], 1).read_only().doc("The XML layout is valid");
    ParamDef::string("XMLErrorMsg", "").read_only().long_string().doc("Why the XML layout is invalid");
    ParamDef::enumeration("PositionMode", &["Off", "On"], 0).doc("Place frames at the indices held by the PosNameDim* attributes");
    ParamDef::string("PosNameDimN", "").doc("Position mode: NDAttribute holding the index along dim N");
    ParamDef::string("PosNameDimX", "").doc("Position mode: NDAttribute holding the index along dim X");
    ParamDef::string("PosNameDimY", "").doc("Position mode: NDAttribute holding the index along dim Y");
    ParamDef::string("PosNameDim3", "").doc("Position mode: NDAttribute holding the index along dim 3");
    ParamDef::string("PosNameDim4", "").doc("Position mode: NDAttribute holding the index along dim 4");
    ParamDef::string("PosNameDim5", "").doc("Position mode: NDAttribute holding the index along dim 5");
    ParamDef::string("PosNameDim6", "").doc("Position mode: NDAttribute holding the index along dim 6");
    ParamDef::string("PosNameDim7", "").doc("Position mode: NDAttribute holding the index along dim 7");
    ParamDef::string("PosNameDim8", "").doc("Position mode: NDAttribute holding the index along dim 8");
    ParamDef::string("PosNameDim9", "").doc("Position mode: NDAttribute holding the index along dim 9");
    ParamDef::string("PosIndexDimN", "").doc("NDAttribute that is an index (kept 1-D with DimAttDatasets)");
    ParamDef::string("PosIndexDimX", "").doc("NDAttribute that is an index (kept 1-D with DimAttDatasets)");
    ParamDef::string("PosIndexDimY", "").doc("NDAttribute that is an index (kept 1-D with DimAttDatasets)");
    ParamDef::string("PosIndexDim3", "").doc("NDAttribute that is an index (kept 1-D with DimAttDatasets)");
    ParamDef::string("PosIndexDim4", "").doc("NDAttribute that is an index (kept 1-D with DimAttDatasets)");
    ParamDef::string("PosIndexDim5", "").doc("NDAttribute that is an index (kept 1-D with DimAttDatasets)");
    ParamDef::string("PosIndexDim6", "").doc("NDAttribute that is an index (kept 1-D with DimAttDatasets)");
    ParamDef::string("PosIndexDim7", "").doc("NDAttribute that is an index (kept 1-D with DimAttDatasets)");
    ParamDef::string("PosIndexDim8", "").doc("NDAttribute that is an index (kept 1-D with DimAttDatasets)");
    ParamDef::string("PosIndexDim9", "").doc("NDAttribute that is an index (kept 1-D with DimAttDatasets)");
);

/// The detector dataset's compression, resolved at open.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Compression {
    None,
    NBit { precision: usize, offset: usize },
    Szip { pixels: u8 },
    Zlib { level: u8 },
    Blosc(BloscParams),
    Bslz4,
    Lz4,
    Jpeg { quality: u8 },
}

impl Compression {
    pub fn filter(&self) -> DataFilter {
        match self {
            Compression::None => DataFilter::None,
            Compression::NBit { .. } => DataFilter::NBit,
            Compression::Szip { .. } => DataFilter::Szip,
            Compression::Zlib { .. } => DataFilter::Deflate,
            Compression::Blosc(_) => DataFilter::Blosc,
            Compression::Bslz4 => DataFilter::Bslz4,
            Compression::Lz4 => DataFilter::Lz4,
            Compression::Jpeg { .. } => DataFilter::Jpeg,
        }
    }
}

/// What one file is written with.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub compression: Compression,
    pub chunks: ChunkRequest,
    pub attr_chunk: usize,
    pub align: u64,
    pub threshold: u64,
    pub store_attr: bool,
    pub store_perform: bool,
    pub flush_frames: i64,
    pub swmr: bool,
    pub fill: f64,
    /// Not Single mode: the dataset has a frame axis.
    pub multi: bool,
    /// The frame axes (multi-frame files only).
    pub extra: ExtraDims,
    pub dim_att: bool,
    /// XMLFileName's layout; None = the NeXus default.
    pub layout: Option<Layout>,
}

/// Loads XMLFileName (empty = the default layout) and publishes XMLValid / XMLErrorMsg.
pub(crate) fn load_layout(p: &ParamStore) -> Result<Option<Layout>, String> {
    let spec = p
        .index("XMLFileName")
        .map_or(String::new(), |i| p.get_str(i));
    let res = if spec.trim().is_empty() {
        Ok(None)
    } else {
        Layout::load(&spec).map(Some)
    };
    set(p, "XMLValid", i64::from(res.is_ok()));
    set(
        p,
        "XMLErrorMsg",
        res.as_ref().err().cloned().unwrap_or_default(),
    );
    res.map_err(|e| format!("XML layout invalid: {e}"))
}

fn int(p: &ParamStore, name: &str) -> i64 {
    p.index(name).map_or(0, |i| p.get_i64(i))
}

fn set(p: &ParamStore, name: &str, v: impl Into<ParamValue>) {
    if let Some(i) = p.index(name) {
        let _ = p.set(i, v);
    }
}

impl Settings {
    /// Reads the parameters; a pre-compressed first frame sets Compression (and its
    /// parameters) from its codec, as NDFileHDF5 does, and the values used are published.
    pub fn read(p: &ParamStore, first: &NDArray) -> Result<Settings, String> {
        match first.codec.name.as_str() {
            "" => {}
            "blosc" => {
                set(p, "Compression", 4i64);
                set(p, "BloscLevel", i64::from(first.codec.level));
                set(p, "BloscShuffle", i64::from(first.codec.shuffle));
                set(p, "BloscCompressor", i64::from(first.codec.compressor));
            }
            "zlib" => {
                set(p, "Compression", 3i64);
                set(p, "ZLevel", i64::from(first.codec.level));
            }
            "bslz4" => set(p, "Compression", 5i64),
            "lz4" | "lz4hdf5" => set(p, "Compression", 6i64),
            "jpeg" => set(p, "Compression", 7i64),
            other => return Err(format!("frames compressed with '{other}' cannot be stored")),
        }
        let compression = match int(p, "Compression") {
            1 => Compression::NBit {
                precision: int(p, "NumDataBits").clamp(1, 64) as usize,
                offset: int(p, "DataBitsOffset").clamp(0, 63) as usize,
            },
            2 => Compression::Szip {
                pixels: (int(p, "SZipNumPixels").clamp(2, 32) as u8) & !1,
            },
            3 => Compression::Zlib {
                level: int(p, "ZLevel").clamp(0, 9) as u8,
            },
            4 => Compression::Blosc(BloscParams {
                compressor: BloscCompressor::from_index(int(p, "BloscCompressor"))
                    .unwrap_or(BloscCompressor::BloscLZ),
                clevel: int(p, "BloscLevel").clamp(0, 9) as u8,
                shuffle: BloscShuffle::from_index(int(p, "BloscShuffle"))
                    .unwrap_or(BloscShuffle::Byte),
                num_threads: 1,
                block_size: 0,
            }),
            5 => Compression::Bslz4,
            6 => Compression::Lz4,
            7 => Compression::Jpeg {
                quality: int(p, "JPEGQuality").clamp(1, 100) as u8,
            },
            _ => Compression::None,
        };
        let mut dims = [0i64; 10];
        for (d, name) in dims.iter_mut().zip(CHUNK_PARAMS) {
            *d = int(p, name);
        }
        let multi = int(p, "FileWriteMode") != 0;
        let num_capture = int(p, "NumCapture");
        // NDFileHDF5::calculateAttributeChunking.
        let attr_chunk = match int(p, "NDAttributeChunk") {
            n if n > 0 => n,
            _ if !multi => 1,
            _ if num_capture > 0 => num_capture,
            _ => 16 * 1024,
        };
        Ok(Settings {
            compression,
            chunks: ChunkRequest {
                auto: int(p, "ChunkSizeAuto") != 0,
                dims,
                frames: int(p, "NumFramesChunks"),
            },
            attr_chunk: attr_chunk.clamp(1, 1 << 20) as usize,
            align: int(p, "BoundaryAlign").max(0) as u64,
            threshold: int(p, "BoundaryThreshold").max(0) as u64,
            store_attr: int(p, "StoreAttr") != 0,
            store_perform: int(p, "StorePerform") != 0,
            flush_frames: int(p, "NumFramesFlush"),
            swmr: int(p, "SWMRMode") != 0,
            fill: p.index("FillValue").map_or(0.0, |i| p.get_f64(i)),
            multi,
            extra: ExtraDims::read(p),
            dim_att: int(p, "DimAttDatasets") != 0,
            layout: load_layout(p)?,
        })
    }

    /// Publishes the chunk sizes and flush interval actually used (as NDFileHDF5 does).
    pub fn publish(p: &ParamStore, per_dim: &[i64], frames_per_chunk: usize, flush: i64) {
        for (name, v) in CHUNK_PARAMS.iter().zip(per_dim) {
            set(p, name, *v);
        }
        set(p, "NumFramesChunks", frames_per_chunk as i64);
        set(p, "NumFramesFlush", flush);
    }
}
