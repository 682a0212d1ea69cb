//! NDPluginCodec: compresses frames once so that every consumer downstream (HDF5 direct chunk
//! write, pvAccess, viewers) passes the compressed bytes along; or decompresses them back.
//!
//! Compress: the output frame keeps dims, attributes, uniqueId, timestamps and the original
//! data type, and carries the codec (name, level, shuffle, compressor) and compressedSize.
//! Decompress: the codec is taken from the frame; the output is bit-exact with the frame that
//! was compressed. Frames are independent, so up to 8 threads run at once (the runtime can
//! re-sort the output by uniqueId).
//!
//! | Compressor | codec name | stream |
//! |---|---|---|
//! | JPEG | `jpeg` | JPEG, UInt8 Mono or RGB1, JPEGQuality |
//! | Zlib | `zlib` | zlib stream |
//! | Blosc | `blosc` | Blosc1 frame (BloscCompressor, BloscCLevel, BloscShuffle, BloscNumThreads) |
//! | LZ4 | `lz4` | raw LZ4 block |
//! | LZ4HDF5 | `lz4hdf5` | the HDF5/Dectris LZ4 framing (LZ4HDF5BlockSize) |
//! | BSLZ4 | `bslz4` | bitshuffle + LZ4 blocks, areaDetector's framing (no header) |

use ndflow_core::alarm::sev::{MAJOR, MINOR, NO};
use std::sync::Arc;

use ndflow_codec::blosc::{BloscCompressor, BloscParams, BloscShuffle};
use ndflow_codec::bslz4::BsFraming;
use ndflow_codec::{blosc, bslz4, jpeg, lz4, zlib, CodecError};
use ndflow_core::{Codec, ColorMode, DataType, NDArray, ParamDef, ParamStore, Pool};
use ndflow_runtime::port_params::{bind, plugin_layout};
use ndflow_runtime::{Built, PortType};
use ndflow_runtime::{Plugin, PluginError, ProcessContext};

/// Compressor menu, in NDCodec.template's order.
pub const COMPRESSORS: &[&str] = &["None", "JPEG", "Zlib", "Blosc", "LZ4", "LZ4HDF5", "BSLZ4"];

ndflow_core::params! {
    pub const CODEC_PARAMS, pub struct CodecParams {
        mode: enumeration("Mode", &["Compress", "Decompress"], 0).mbb()
            .doc("Compress with Compressor, or decompress whatever codec the frame has"),
        compressor: enumeration("Compressor", COMPRESSORS, 0).doc("Codec used in Compress mode"),
        comp_factor: float64("CompFactor", 1.0)
            .read_only()
            .doc("Uncompressed bytes / compressed bytes of the last frame"),
        jpeg_quality: int32("JPEGQuality", 85)
            .range(1.0, 100.0)
            .doc("JPEG quality (1-100)"),
        zlib_c_level: int32("ZlibCLevel", 6)
            .range(0.0, 9.0)
            .doc("Zlib compression level (0-9)"),
        blosc_compressor: enumeration("BloscCompressor", &BloscCompressor::CHOICES, 0)
            .doc("Compressor inside the Blosc frame"),
        blosc_c_level: int32("BloscCLevel", 5)
            .range(0.0, 9.0)
            .doc("Blosc compression level (0-9)"),
        blosc_shuffle: enumeration("BloscShuffle", &BloscShuffle::CHOICES, 0)
            .doc("Blosc shuffle: none, byte or bit"),
        blosc_num_threads: int32("BloscNumThreads", 1)
            .range(1.0, 256.0)
            .doc("Blosc internal threads"),
        lz4_hdf5_block_size: int32("LZ4HDF5BlockSize", 0)
            .min(0.0)
            .doc("LZ4HDF5 block size in bytes (0 = one block per frame)"),
        codec_status: enumeration("CodecStatus", &["Success", "Warning", "Error"], 0)
            .alarm_states(&[NO, MINOR, MAJOR])
            .read_only_plain()
            .doc("Result of the last frame"),
        codec_error: string("CodecError", "")
            .read_only_plain()
            .long_string()
            .doc("Why the last frame failed"),
    }
}

/// NDPluginCodec. Stateless per frame: up to 8 threads.
#[derive(Debug)]
pub struct CodecPlugin {
    p: CodecParams,
}

impl Default for CodecPlugin {
    fn default() -> Self {
        Self::new()
    }
}

/// One frame's settings, read under one lock.
struct Settings {
    decompress: bool,
    compressor: usize,
    jpeg_quality: u8,
    zlib_level: i32,
    blosc: BloscParams,
    lz4hdf5_block: usize,
}

fn codec_err(e: CodecError) -> PluginError {
    PluginError::Other(e.to_string())
}

impl CodecPlugin {
    pub fn new() -> CodecPlugin {
        CodecPlugin {
            p: bind(&plugin_layout(CODEC_PARAMS), CodecParams::bind),
        }
    }

    fn settings(&self, params: &ParamStore) -> Settings {
        let p = &self.p;
        params.with_values(|v| Settings {
            decompress: p.mode.read(v) == 1,
            compressor: p.compressor.read(v).clamp(0, COMPRESSORS.len() as i64 - 1) as usize,
            jpeg_quality: p.jpeg_quality.read(v).clamp(1, 100) as u8,
            zlib_level: p.zlib_c_level.read(v).clamp(0, 9) as i32,
            blosc: BloscParams {
                compressor: BloscCompressor::from_index(p.blosc_compressor.read(v))
                    .unwrap_or_default(),
                clevel: p.blosc_c_level.read(v).clamp(0, 9) as u8,
                shuffle: BloscShuffle::from_index(p.blosc_shuffle.read(v)).unwrap_or_default(),
                num_threads: p.blosc_num_threads.read(v).clamp(1, 256) as usize,
                block_size: 0,
            },
            lz4hdf5_block: p.lz4_hdf5_block_size.read(v).max(0) as usize,
        })
    }
}

/// Compresses `input` with compressor `which` (index into [`COMPRESSORS`], not None).
fn compress(
    input: &NDArray,
    which: usize,
    s: &Settings,
    ctx: &ProcessContext<'_>,
) -> Result<NDArray, PluginError> {
    let raw = input.data_bytes();
    let elem = input.data_type.size();
    let mut codec = Codec::default();
    let (name, bound) = match COMPRESSORS.get(which).copied().unwrap_or("None") {
        "JPEG" => {
            let (w, h, c) = jpeg_shape(input)?;
            ("jpeg", jpeg::max_compressed_len(w, h, c))
        }
        "Zlib" => ("zlib", zlib::max_compressed_len(raw.len())),
        "Blosc" => ("blosc", blosc::max_compressed_len(raw.len())),
        "LZ4" => ("lz4", lz4::max_compressed_len(raw.len())),
        "LZ4HDF5" => ("lz4hdf5", lz4::max_hdf5_len(raw.len(), s.lz4hdf5_block)),
        "BSLZ4" => (
            "bslz4",
            bslz4::max_compressed_len(raw.len(), elem, 0, BsFraming::AreaDetector)
                .map_err(codec_err)?,
        ),
        other => return Err(PluginError::Unsupported(format!("compressor {other}"))),
    };
    let mut buf = ctx.alloc(bound)?;
    let out: &mut [u8] = &mut buf;
    let n = match name {
        "jpeg" => {
            let (w, h, c) = jpeg_shape(input)?;
            codec.level = s.jpeg_quality as i32;
            jpeg::compress(raw, w, h, c, s.jpeg_quality, out)
        }
        "zlib" => {
            codec.level = s.zlib_level;
            zlib::compress(raw, s.zlib_level, out)
        }
        "blosc" => {
            codec.level = s.blosc.clevel as i32;
            codec.shuffle = s.blosc.shuffle as i32;
            codec.compressor = s.blosc.compressor as i32;
            blosc::compress(raw, elem, &s.blosc, out)
        }
        "lz4" => lz4::compress_block(raw, out),
        "lz4hdf5" => lz4::compress_hdf5(raw, s.lz4hdf5_block, out),
        _ => bslz4::compress(raw, elem, 0, BsFraming::AreaDetector, out),
    }
    .map_err(codec_err)?;
    buf.set_len(n);
    codec.name = name.to_string();
    let mut frame = input.with_buffer(input.data_type, buf.freeze());
    frame.codec = codec;
    frame.compressed_size = n;
    Ok(frame)
}

/// (width, height, components) of a frame JPEG can take: UInt8 Mono 2-D or RGB1.
fn jpeg_shape(f: &NDArray) -> Result<(usize, usize, usize), PluginError> {
    let sizes = f.sizes();
    let unsupported = || {
        PluginError::Unsupported(format!(
            "JPEG takes UInt8 Mono [x, y] or RGB1 [3, x, y] frames, not {} {:?} {:?}",
            f.data_type,
            f.color_mode(),
            sizes
        ))
    };
    if f.data_type != DataType::UInt8 {
        return Err(unsupported());
    }
    match (f.color_mode(), sizes.as_slice()) {
        (ColorMode::Mono, [w, h]) => Ok((*w, *h, 1)),
        (ColorMode::RGB1, [3, w, h]) => Ok((*w, *h, 3)),
        _ => Err(unsupported()),
    }
}

/// Restores the uncompressed frame into a buffer from `pool`; its size comes from the dims
/// and the original type.
pub fn decompress(input: &NDArray, pool: &Pool) -> Result<NDArray, PluginError> {
    let data = input.data_bytes();
    let total = input.total_bytes();
    let mut buf = pool.alloc(total)?;
    let out: &mut [u8] = &mut buf;
    let elem = input.data_type.size();
    let n = match input.codec.name.as_str() {
        "jpeg" => jpeg::decompress(data, out).map(|info| info.len()),
        "zlib" => zlib::decompress(data, out),
        "blosc" => blosc::decompress(data, out),
        "lz4" => lz4::decompress_block(data, out),
        "lz4hdf5" => lz4::decompress_hdf5(data, out),
        "bslz4" => bslz4::decompress(data, elem, BsFraming::AreaDetector, out),
        other => {
            return Err(PluginError::Unsupported(format!("unknown codec '{other}'")));
        }
    }
    .map_err(codec_err)?;
    if n != total {
        return Err(PluginError::Other(format!(
            "{} stream holds {n} bytes, the frame's dims and type need {total}",
            input.codec.name
        )));
    }
    Ok(input.with_buffer(input.data_type, buf.freeze()))
}

impl Plugin for CodecPlugin {
    fn plugin_type(&self) -> &'static str {
        "NDPluginCodec"
    }

    fn params(&self) -> &'static [ParamDef] {
        CODEC_PARAMS
    }

    fn max_threads(&self) -> usize {
        std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
    }

    fn accepts_compressed(&self) -> bool {
        true
    }

    fn process(
        &self,
        input: &Arc<NDArray>,
        ctx: &mut ProcessContext<'_>,
    ) -> Result<(), PluginError> {
        let p = &self.p;
        let s = self.settings(ctx.params);
        let result = if s.decompress {
            if input.is_compressed() {
                decompress(input, ctx.pool()).map(Some)
            } else {
                Ok(None)
            }
        } else if s.compressor == 0 || input.is_compressed() {
            Ok(None)
        } else {
            compress(input, s.compressor, &s, ctx).map(Some)
        };
        match result {
            Ok(out) => {
                let out = out.map(Arc::new).unwrap_or_else(|| input.clone());
                // Whichever side is compressed (the output when compressing).
                let packed = if out.is_compressed() { &out } else { input };
                let factor = match packed.compressed_size {
                    0 => 1.0,
                    n if packed.is_compressed() => packed.total_bytes() as f64 / n as f64,
                    _ => 1.0,
                };
                ctx.params.set_many(&[
                    p.comp_factor.value(factor),
                    p.codec_status.value(0),
                    p.codec_error.value(String::new()),
                ]);
                ctx.emit(out);
                Ok(())
            }
            Err(e) => {
                ctx.params
                    .set_many(&[p.codec_status.value(2), p.codec_error.value(e.to_string())]);
                Err(e)
            }
        }
    }
}

/// The port type `type = "codec"`.
pub const PORT: PortType = PortType::plugin(
    "codec",
    "NDPluginCodec",
    "Compress (JPEG, Zlib, Blosc, LZ4, LZ4HDF5, BSLZ4) or decompress",
    |_| Ok(Built::Plugin(std::sync::Arc::new(CodecPlugin::new()))),
);
