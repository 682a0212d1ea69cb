//! NDFileHDF5's own parameters (names, enum strings and defaults of ADCore's NDFileHDF5.cpp
//! constructor and NDFileHDF5.template) and the settings read from them when a file opens.

use ndflow_codec::blosc::{BloscCompressor, BloscParams, BloscShuffle};
use ndflow_core::alarm::sev::{MAJOR, NO};
use ndflow_core::handle::{Int, Str};
use ndflow_core::{NDArray, Param, ParamDef, ParamStore, ParamValue};
use ndflow_runtime::port_params::{bind, plugin_layout};

use super::chunk::DataFilter;
use super::extra_dims::ExtraDims;
use super::layout::ChunkRequest;
use super::xml_layout::Layout;
use crate::file::NdFileParams;

/// The Compression menu, in NDFileHDF5.template's order.
pub const COMPRESSION_CHOICES: [&str; 8] = [
    "None", "N-bit", "szip", "zlib", "Blosc", "BSLZ4", "LZ4", "JPEG",
];

ndflow_core::params! {
    /// NDFileHDF5's own parameters.
    pub const HDF5_OWN_PARAMS, pub struct Hdf5Params {
        flush_now: enumeration("FlushNow", &["Done", "Flush"], 0).busy().doc("Flush the open file now (SWMR: publish to readers)"),
        chunk_size_auto: yes_no("ChunkSizeAuto", 1).doc("One chunk = one frame (Yes) or the chunk sizes below (No)"),
        num_col_chunks: int32("NumColChunks", 0).min(0.0).doc("Chunk size along this NDArray dim (0 = whole dim; used when ChunkSizeAuto = No)"),
        num_row_chunks: int32("NumRowChunks", 0).min(0.0).doc("Chunk size along this NDArray dim (0 = whole dim; used when ChunkSizeAuto = No)"),
        chunk_size2: int32("ChunkSize2", 0).min(0.0).doc("Chunk size along this NDArray dim (0 = whole dim; used when ChunkSizeAuto = No)"),
        chunk_size3: int32("ChunkSize3", 0).min(0.0).doc("Chunk size along this NDArray dim (0 = whole dim; used when ChunkSizeAuto = No)"),
        chunk_size4: int32("ChunkSize4", 0).min(0.0).doc("Chunk size along this NDArray dim (0 = whole dim; used when ChunkSizeAuto = No)"),
        chunk_size5: int32("ChunkSize5", 0).min(0.0).doc("Chunk size along this NDArray dim (0 = whole dim; used when ChunkSizeAuto = No)"),
        chunk_size6: int32("ChunkSize6", 0).min(0.0).doc("Chunk size along this NDArray dim (0 = whole dim; used when ChunkSizeAuto = No)"),
        chunk_size7: int32("ChunkSize7", 0).min(0.0).doc("Chunk size along this NDArray dim (0 = whole dim; used when ChunkSizeAuto = No)"),
        chunk_size8: int32("ChunkSize8", 0).min(0.0).doc("Chunk size along this NDArray dim (0 = whole dim; used when ChunkSizeAuto = No)"),
        chunk_size9: int32("ChunkSize9", 0).min(0.0).doc("Chunk size along this NDArray dim (0 = whole dim; used when ChunkSizeAuto = No)"),
        num_frames_chunks: int32("NumFramesChunks", 0).min(0.0).doc("Frames per chunk (0 = 1)"),
        nd_attribute_chunk: int32("NDAttributeChunk", 0).min(0.0).doc("Elements per chunk of the attribute datasets (0 = NumCapture, 16384 if unlimited)"),
        boundary_align: int32("BoundaryAlign", 0).min(0.0).doc("H5Pset_alignment boundary in bytes (0 = off)"),
        boundary_threshold: int32("BoundaryThreshold", 65536).min(0.0).doc("Objects at least this large are aligned"),
        store_attr: yes_no("StoreAttr", 1).doc("Write the NDAttributes as datasets"),
        store_perform: yes_no("StorePerform", 1).doc("Write /entry/instrument/performance/timestamp"),
        run_time: float64("RunTime", 0.0).read_only_plain().doc("Seconds from open to close of the last file"),
        io_speed: float64("IOSpeed", 0.0).read_only_plain().doc("Mbit/s of the last file, open to close"),
        num_frames_flush: int32("NumFramesFlush", 0).min(0.0).doc("Flush every N frames (0 = at close; SWMR: at least every chunk)"),
        compression: enumeration("Compression", &COMPRESSION_CHOICES, 0).doc("Filter of the detector dataset (follows the codec of a pre-compressed first frame)"),
        num_data_bits: int32("NumDataBits", 8).range(1.0, 64.0).doc("N-bit: bits of precision"),
        data_bits_offset: int32("DataBitsOffset", 0).range(0.0, 63.0).doc("N-bit: bit offset"),
        szip_num_pixels: int32("SZipNumPixels", 16).range(2.0, 32.0).doc("szip: pixels per block (even)"),
        z_level: int32("ZLevel", 6).range(0.0, 9.0).doc("zlib level"),
        blosc_shuffle: enumeration("BloscShuffle", &BloscShuffle::CHOICES, 1).doc("Blosc shuffle"),
        blosc_compressor: enumeration("BloscCompressor", &BloscCompressor::CHOICES, 0).doc("Compressor inside Blosc"),
        blosc_level: int32("BloscLevel", 5).range(0.0, 9.0).doc("Blosc level"),
        jpeg_quality: int32("JPEGQuality", 90).range(1.0, 100.0).doc("JPEG quality"),
        swmr_supported: enumeration("SWMRSupported", &["Not Supported", "Supported"], 1).read_only().doc("Whether this HDF5 library can write SWMR"),
        swmr_mode: enumeration("SWMRMode", &["Off", "On"], 0).doc("Write files readable while they grow"),
        swmr_active: enumeration("SWMRActive", &["Off", "Active"], 0).read_only().doc("The open file is in SWMR mode"),
        swmr_cb_counter: int32("SWMRCbCounter", 0).read_only().doc("Flushes of the open file"),
        fill_value: float64("FillValue", 0.0).doc("Value of detector data never written"),
        file_format: enumeration("FileFormat", &["HDF5", "Invalid"], 0).mbb().readback_choices(&["HDF5", "Undefined"]).doc("File format (HDF5 only)"),
        num_extra_dims: int32("NumExtraDims", 0).range(0.0, 9.0).doc("Extra frame axes beyond N (sizes ExtraDimSize*; sets NumCapture to their product)"),
        extra_dim_size_n: int32("ExtraDimSizeN", 1).min(1.0).doc("Size of extra dim N"),
        extra_dim_size_x: int32("ExtraDimSizeX", 1).min(1.0).doc("Size of extra dim X"),
        extra_dim_size_y: int32("ExtraDimSizeY", 1).min(1.0).doc("Size of extra dim Y"),
        extra_dim_size3: int32("ExtraDimSize3", 1).min(1.0).doc("Size of extra dim 3"),
        extra_dim_size4: int32("ExtraDimSize4", 1).min(1.0).doc("Size of extra dim 4"),
        extra_dim_size5: int32("ExtraDimSize5", 1).min(1.0).doc("Size of extra dim 5"),
        extra_dim_size6: int32("ExtraDimSize6", 1).min(1.0).doc("Size of extra dim 6"),
        extra_dim_size7: int32("ExtraDimSize7", 1).min(1.0).doc("Size of extra dim 7"),
        extra_dim_size8: int32("ExtraDimSize8", 1).min(1.0).doc("Size of extra dim 8"),
        extra_dim_size9: int32("ExtraDimSize9", 1).min(1.0).doc("Size of extra dim 9"),
        extra_dim_name_n: string("ExtraDimNameN", "scan dimension 0").read_only().doc("Name of extra dim N"),
        extra_dim_name_x: string("ExtraDimNameX", "scan dimension 1").read_only().doc("Name of extra dim X"),
        extra_dim_name_y: string("ExtraDimNameY", "scan dimension 2").read_only().doc("Name of extra dim Y"),
        extra_dim_name3: string("ExtraDimName3", "scan dimension 3").read_only().doc("Name of extra dim 3"),
        extra_dim_name4: string("ExtraDimName4", "scan dimension 4").read_only().doc("Name of extra dim 4"),
        extra_dim_name5: string("ExtraDimName5", "scan dimension 5").read_only().doc("Name of extra dim 5"),
        extra_dim_name6: string("ExtraDimName6", "scan dimension 6").read_only().doc("Name of extra dim 6"),
        extra_dim_name7: string("ExtraDimName7", "scan dimension 7").read_only().doc("Name of extra dim 7"),
        extra_dim_name8: string("ExtraDimName8", "scan dimension 8").read_only().doc("Name of extra dim 8"),
        extra_dim_name9: string("ExtraDimName9", "scan dimension 9").read_only().doc("Name of extra dim 9"),
        extra_dim_chunk_x: int32("ExtraDimChunkX", 0).min(0.0).doc("Chunk along extra dim X (0 = 1)"),
        extra_dim_chunk_y: int32("ExtraDimChunkY", 0).min(0.0).doc("Chunk along extra dim Y (0 = 1)"),
        extra_dim_chunk3: int32("ExtraDimChunk3", 0).min(0.0).doc("Chunk along extra dim 3 (0 = 1)"),
        extra_dim_chunk4: int32("ExtraDimChunk4", 0).min(0.0).doc("Chunk along extra dim 4 (0 = 1)"),
        extra_dim_chunk5: int32("ExtraDimChunk5", 0).min(0.0).doc("Chunk along extra dim 5 (0 = 1)"),
        extra_dim_chunk6: int32("ExtraDimChunk6", 0).min(0.0).doc("Chunk along extra dim 6 (0 = 1)"),
        extra_dim_chunk7: int32("ExtraDimChunk7", 0).min(0.0).doc("Chunk along extra dim 7 (0 = 1)"),
        extra_dim_chunk8: int32("ExtraDimChunk8", 0).min(0.0).doc("Chunk along extra dim 8 (0 = 1)"),
        extra_dim_chunk9: int32("ExtraDimChunk9", 0).min(0.0).doc("Chunk along extra dim 9 (0 = 1)"),
        dim_att_datasets: yes_no("DimAttDatasets", 0).doc("NDAttribute datasets take the extra dims' shape"),
        xml_file_name: string("XMLFileName", "").long_string().doc("XML layout: a file path or the XML text (starts with <); empty = NeXus default"),
        xml_valid: enumeration("XMLValid", &["No", "Yes"], 1)
            .alarm_states(&[MAJOR, NO]).read_only()
            .doc("The XML layout is valid"),
        xml_error_msg: string("XMLErrorMsg", "").read_only().long_string().doc("Why the XML layout is invalid"),
        position_mode: enumeration("PositionMode", &["Off", "On"], 0).doc("Place frames at the indices held by the PosNameDim* attributes"),
        pos_name_dim_n: string("PosNameDimN", "").doc("Position mode: NDAttribute holding the index along dim N"),
        pos_name_dim_x: string("PosNameDimX", "").doc("Position mode: NDAttribute holding the index along dim X"),
        pos_name_dim_y: string("PosNameDimY", "").doc("Position mode: NDAttribute holding the index along dim Y"),
        pos_name_dim3: string("PosNameDim3", "").doc("Position mode: NDAttribute holding the index along dim 3"),
        pos_name_dim4: string("PosNameDim4", "").doc("Position mode: NDAttribute holding the index along dim 4"),
        pos_name_dim5: string("PosNameDim5", "").doc("Position mode: NDAttribute holding the index along dim 5"),
        pos_name_dim6: string("PosNameDim6", "").doc("Position mode: NDAttribute holding the index along dim 6"),
        pos_name_dim7: string("PosNameDim7", "").doc("Position mode: NDAttribute holding the index along dim 7"),
        pos_name_dim8: string("PosNameDim8", "").doc("Position mode: NDAttribute holding the index along dim 8"),
        pos_name_dim9: string("PosNameDim9", "").doc("Position mode: NDAttribute holding the index along dim 9"),
        pos_index_dim_n: string("PosIndexDimN", "").doc("NDAttribute that is an index (kept 1-D with DimAttDatasets)"),
        pos_index_dim_x: string("PosIndexDimX", "").doc("NDAttribute that is an index (kept 1-D with DimAttDatasets)"),
        pos_index_dim_y: string("PosIndexDimY", "").doc("NDAttribute that is an index (kept 1-D with DimAttDatasets)"),
        pos_index_dim3: string("PosIndexDim3", "").doc("NDAttribute that is an index (kept 1-D with DimAttDatasets)"),
        pos_index_dim4: string("PosIndexDim4", "").doc("NDAttribute that is an index (kept 1-D with DimAttDatasets)"),
        pos_index_dim5: string("PosIndexDim5", "").doc("NDAttribute that is an index (kept 1-D with DimAttDatasets)"),
        pos_index_dim6: string("PosIndexDim6", "").doc("NDAttribute that is an index (kept 1-D with DimAttDatasets)"),
        pos_index_dim7: string("PosIndexDim7", "").doc("NDAttribute that is an index (kept 1-D with DimAttDatasets)"),
        pos_index_dim8: string("PosIndexDim8", "").doc("NDAttribute that is an index (kept 1-D with DimAttDatasets)"),
        pos_index_dim9: string("PosIndexDim9", "").doc("NDAttribute that is an index (kept 1-D with DimAttDatasets)"),
    }
}

/// NDFile's parameters followed by NDFileHDF5's.
pub const HDF5_PARAMS: &[ParamDef] = crate::ndfile_params!("%s%s_%3.3d.h5"; HDF5_OWN_PARAMS);

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

impl Hdf5Params {
    /// NumColChunks, NumRowChunks, ChunkSize2..9: the chunk size of each NDArray dim
    /// (NumColChunks is dim 0).
    pub fn chunk_sizes(&self) -> [Param<Int>; 10] {
        [
            self.num_col_chunks,
            self.num_row_chunks,
            self.chunk_size2,
            self.chunk_size3,
            self.chunk_size4,
            self.chunk_size5,
            self.chunk_size6,
            self.chunk_size7,
            self.chunk_size8,
            self.chunk_size9,
        ]
    }

    /// ExtraDimSizeN, X, Y, 3..9 (extra dim index 0..9).
    pub fn extra_dim_sizes(&self) -> [Param<Int>; 10] {
        [
            self.extra_dim_size_n,
            self.extra_dim_size_x,
            self.extra_dim_size_y,
            self.extra_dim_size3,
            self.extra_dim_size4,
            self.extra_dim_size5,
            self.extra_dim_size6,
            self.extra_dim_size7,
            self.extra_dim_size8,
            self.extra_dim_size9,
        ]
    }

    /// ExtraDimChunkX, Y, 3..9 (extra dim index 1..9; N's chunk is NumFramesChunks).
    pub fn extra_dim_chunks(&self) -> [Param<Int>; 9] {
        [
            self.extra_dim_chunk_x,
            self.extra_dim_chunk_y,
            self.extra_dim_chunk3,
            self.extra_dim_chunk4,
            self.extra_dim_chunk5,
            self.extra_dim_chunk6,
            self.extra_dim_chunk7,
            self.extra_dim_chunk8,
            self.extra_dim_chunk9,
        ]
    }

    /// PosNameDimN, X, Y, 3..9 (extra dim index 0..9).
    pub fn pos_name_dims(&self) -> [Param<Str>; 10] {
        [
            self.pos_name_dim_n,
            self.pos_name_dim_x,
            self.pos_name_dim_y,
            self.pos_name_dim3,
            self.pos_name_dim4,
            self.pos_name_dim5,
            self.pos_name_dim6,
            self.pos_name_dim7,
            self.pos_name_dim8,
            self.pos_name_dim9,
        ]
    }

    /// PosIndexDimN, X, Y, 3..9 (extra dim index 0..9).
    pub fn pos_index_dims(&self) -> [Param<Str>; 10] {
        [
            self.pos_index_dim_n,
            self.pos_index_dim_x,
            self.pos_index_dim_y,
            self.pos_index_dim3,
            self.pos_index_dim4,
            self.pos_index_dim5,
            self.pos_index_dim6,
            self.pos_index_dim7,
            self.pos_index_dim8,
            self.pos_index_dim9,
        ]
    }
}

/// The handles NDFileHDF5 reads and writes (NDFile's and its own), bound in the layout the
/// runtime builds its port from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Handles {
    pub nd: NdFileParams,
    pub own: Hdf5Params,
}

impl Handles {
    pub fn new() -> Handles {
        let layout = plugin_layout(HDF5_PARAMS);
        Handles {
            nd: bind(&layout, NdFileParams::bind),
            own: bind(&layout, Hdf5Params::bind),
        }
    }
}

/// Loads XMLFileName (empty = the default layout) and publishes XMLValid / XMLErrorMsg.
pub(crate) fn load_layout(p: &ParamStore, h: &Hdf5Params) -> Result<Option<Layout>, String> {
    let spec = h.xml_file_name.get(p);
    let res = if spec.trim().is_empty() {
        Ok(None)
    } else {
        Layout::load(&spec).map(Some)
    };
    p.set_many(&[
        h.xml_valid.value(i64::from(res.is_ok())),
        h.xml_error_msg
            .value(res.as_ref().err().cloned().unwrap_or_default()),
    ]);
    res.map_err(|e| format!("XML layout invalid: {e}"))
}

impl Settings {
    /// Reads the parameters; a pre-compressed first frame sets Compression (and its
    /// parameters) from its codec, as NDFileHDF5 does, and the values used are published.
    pub fn read(p: &ParamStore, h: &Handles, first: &NDArray) -> Result<Settings, String> {
        let own = &h.own;
        let codec = &first.codec;
        match codec.name.as_str() {
            "" => {}
            "blosc" => p.set_many(&[
                own.compression.value(4),
                own.blosc_level.value(i64::from(codec.level)),
                own.blosc_shuffle.value(i64::from(codec.shuffle)),
                own.blosc_compressor.value(i64::from(codec.compressor)),
            ]),
            "zlib" => p.set_many(&[
                own.compression.value(3),
                own.z_level.value(i64::from(codec.level)),
            ]),
            "bslz4" => own.compression.set(p, 5),
            "lz4" | "lz4hdf5" => own.compression.set(p, 6),
            "jpeg" => own.compression.set(p, 7),
            other => return Err(format!("frames compressed with '{other}' cannot be stored")),
        }
        let layout = load_layout(p, own)?;
        Ok(p.with_values(|v| Settings::from_values(v, h, layout)))
    }

    /// The settings in one snapshot of the values.
    fn from_values(v: &[ParamValue], h: &Handles, layout: Option<Layout>) -> Settings {
        let own = &h.own;
        let compression = match own.compression.read(v) {
            1 => Compression::NBit {
                precision: own.num_data_bits.read(v).clamp(1, 64) as usize,
                offset: own.data_bits_offset.read(v).clamp(0, 63) as usize,
            },
            2 => Compression::Szip {
                pixels: (own.szip_num_pixels.read(v).clamp(2, 32) as u8) & !1,
            },
            3 => Compression::Zlib {
                level: own.z_level.read(v).clamp(0, 9) as u8,
            },
            4 => Compression::Blosc(BloscParams {
                compressor: BloscCompressor::from_index(own.blosc_compressor.read(v))
                    .unwrap_or(BloscCompressor::BloscLZ),
                clevel: own.blosc_level.read(v).clamp(0, 9) as u8,
                shuffle: BloscShuffle::from_index(own.blosc_shuffle.read(v))
                    .unwrap_or(BloscShuffle::Byte),
                num_threads: 1,
                block_size: 0,
            }),
            5 => Compression::Bslz4,
            6 => Compression::Lz4,
            7 => Compression::Jpeg {
                quality: own.jpeg_quality.read(v).clamp(1, 100) as u8,
            },
            _ => Compression::None,
        };
        let dims = own.chunk_sizes().map(|c| c.read(v));
        let multi = h.nd.file_write_mode.read(v) != 0;
        let num_capture = h.nd.num_capture.read(v);
        // NDFileHDF5::calculateAttributeChunking.
        let attr_chunk = match own.nd_attribute_chunk.read(v) {
            n if n > 0 => n,
            _ if !multi => 1,
            _ if num_capture > 0 => num_capture,
            _ => 16 * 1024,
        };
        Settings {
            compression,
            chunks: ChunkRequest {
                auto: own.chunk_size_auto.read(v),
                dims,
                frames: own.num_frames_chunks.read(v),
            },
            attr_chunk: attr_chunk.clamp(1, 1 << 20) as usize,
            align: own.boundary_align.read(v).max(0) as u64,
            threshold: own.boundary_threshold.read(v).max(0) as u64,
            store_attr: own.store_attr.read(v),
            store_perform: own.store_perform.read(v),
            flush_frames: own.num_frames_flush.read(v),
            swmr: own.swmr_mode.read(v) != 0,
            fill: own.fill_value.read(v),
            multi,
            extra: ExtraDims::read(v, h),
            dim_att: own.dim_att_datasets.read(v),
            layout,
        }
    }

    /// Publishes the chunk sizes and flush interval actually used (as NDFileHDF5 does).
    pub fn publish(
        p: &ParamStore,
        h: &Hdf5Params,
        per_dim: &[i64],
        frames_per_chunk: usize,
        flush: i64,
    ) {
        let mut writes: Vec<_> = h
            .chunk_sizes()
            .iter()
            .zip(per_dim)
            .map(|(c, &n)| c.value(n))
            .collect();
        writes.push(h.num_frames_chunks.value(frames_per_chunk as i64));
        writes.push(h.num_frames_flush.value(flush));
        p.set_many(&writes);
    }
}
