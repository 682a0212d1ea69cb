//! File-to-file driver for the interop tests against the C libraries
//! (`python/tests/test_codec_plugin_compressors.py`).
//!
//! ```text
//! codec_cli compress   CODEC ELEM_SIZE IN OUT [PARAM]
//! codec_cli decompress CODEC ELEM_SIZE IN OUT [OUTLEN]
//! ```
//! CODEC: `lz4` (raw block), `lz4hdf5`, `bslz4` (areaDetector framing), `bslz4-hdf5`
//! (filter 32008 chunk), `zlib`, `bitshuffle` (transpose only). PARAM on compress: block
//! size (elements for bslz4, bytes for lz4hdf5) or the zlib level; default 0 / 6.
//! OUTLEN on decompress: uncompressed bytes; optional for the HDF5 framings (header),
//! and for `bitshuffle` (same as input).

use ndflow_codec::bslz4::BsFraming;
use ndflow_codec::{bitshuffle, bslz4, lz4, zlib};
use std::error::Error;

type Res<T> = Result<T, Box<dyn Error>>;

fn arg<T: std::str::FromStr>(args: &[String], i: usize, what: &str) -> Res<Option<T>>
where
    T::Err: Error + 'static,
{
    match args.get(i) {
        None => Ok(None),
        Some(s) => Ok(Some(
            s.parse().map_err(|e| format!("bad {what} {s:?}: {e}"))?,
        )),
    }
}

fn compress(codec: &str, s: usize, data: &[u8], param: Option<i64>) -> Res<Vec<u8>> {
    let p = param.unwrap_or(0);
    let block = usize::try_from(p).map_err(|_| format!("negative block size {p}"))?;
    let mut out;
    let n = match codec {
        "lz4" => {
            out = vec![0u8; lz4::max_compressed_len(data.len())];
            lz4::compress_block(data, &mut out)?
        }
        "lz4hdf5" => {
            out = vec![0u8; lz4::max_hdf5_len(data.len(), block)];
            lz4::compress_hdf5(data, block, &mut out)?
        }
        "bslz4" | "bslz4-hdf5" => {
            let f = if codec == "bslz4" {
                BsFraming::AreaDetector
            } else {
                BsFraming::Hdf5
            };
            out = vec![0u8; bslz4::max_compressed_len(data.len(), s, block, f)?];
            bslz4::compress(data, s, block, f, &mut out)?
        }
        "zlib" => {
            out = vec![0u8; zlib::max_compressed_len(data.len())];
            let level = i32::try_from(param.unwrap_or(6)).unwrap_or(9);
            zlib::compress(data, level, &mut out)?
        }
        "bitshuffle" => {
            out = vec![0u8; data.len()];
            bitshuffle::bitshuffle(data, s, &mut out)?
        }
        _ => return Err(format!("unknown codec {codec}").into()),
    };
    out.truncate(n);
    Ok(out)
}

fn decompress(codec: &str, s: usize, data: &[u8], len: Option<usize>) -> Res<Vec<u8>> {
    let need = |what: &str| len.ok_or_else(|| format!("{what} needs OUTLEN"));
    let len = match codec {
        "lz4hdf5" => len.map_or_else(|| lz4::hdf5_decompressed_len(data), Ok)?,
        "bslz4-hdf5" => len.map_or_else(|| bslz4::hdf5_decompressed_len(data), Ok)?,
        "bitshuffle" => len.unwrap_or(data.len()),
        _ => need(codec)?,
    };
    let mut out = vec![0u8; len];
    match codec {
        "lz4" => lz4::decompress_block(data, &mut out)?,
        "lz4hdf5" => lz4::decompress_hdf5(data, &mut out)?,
        "bslz4" => bslz4::decompress(data, s, BsFraming::AreaDetector, &mut out)?,
        "bslz4-hdf5" => bslz4::decompress(data, s, BsFraming::Hdf5, &mut out)?,
        "zlib" => zlib::decompress(data, &mut out)?,
        "bitshuffle" => bitshuffle::bitunshuffle(data, s, &mut out)?,
        _ => return Err(format!("unknown codec {codec}").into()),
    };
    Ok(out)
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 6 {
        return Err("usage: codec_cli compress|decompress CODEC ELEM_SIZE IN OUT [PARAM]".into());
    }
    let codec = args[2].as_str();
    let s: usize = arg(&args, 3, "ELEM_SIZE")?.unwrap_or(1);
    let data = std::fs::read(&args[4])?;
    let out = match args[1].as_str() {
        "compress" => compress(codec, s, &data, arg(&args, 6, "PARAM")?)?,
        "decompress" => decompress(codec, s, &data, arg(&args, 6, "OUTLEN")?)?,
        m => return Err(format!("unknown mode {m}").into()),
    };
    std::fs::write(&args[5], out)?;
    Ok(())
}
