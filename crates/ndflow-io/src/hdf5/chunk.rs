//! Putting one frame into the detector dataset.
//!
//! * **Direct chunk write** (`H5Dwrite_chunk`, filter mask 0) when a chunk is exactly one
//!   frame: an uncompressed frame into a dataset without filter, or a frame compressed by the
//!   Codec plugin whose codec matches the dataset's filter. The bytes HDF5 stores are the
//!   frame's own; only two codecs need a header in front, built in a reused scratch buffer:
//!   `bslz4` (areaDetector stores the blocks only; filter 32008 wants the 12-byte
//!   `u64 size, u32 block bytes` header) and `lz4` (one raw LZ4 block; filter 32004 wants
//!   `u64 size, u32 block size, u32 compressed size` before it, as NDFileHDF5 adds).
//! * **Pipeline write** (`H5Dwrite` of a hyperslab) otherwise: HDF5 chunks and runs the
//!   filter. A compressed frame that cannot be written directly (other codec, or chunks that
//!   are not one frame) is first decompressed here — areaDetector refuses it instead.

use hdf5_metno as h5;
use hdf5_metno_sys::h5::{herr_t, hsize_t};
use hdf5_metno_sys::h5d::{H5Dget_space, H5Dread_chunk1, H5Dwrite, H5Dwrite_chunk};
use hdf5_metno_sys::h5i::hid_t;
use hdf5_metno_sys::h5p::H5P_DEFAULT;
use hdf5_metno_sys::h5s::{H5S_seloper_t, H5Sclose, H5Screate_simple, H5Sselect_hyperslab};
use ndflow_codec::bslz4::BsFraming;
use ndflow_codec::{bitshuffle, blosc, bslz4, jpeg, lz4, zlib};
use ndflow_core::NDArray;

use super::filters::{FILTER_BLOSC, FILTER_BSLZ4, FILTER_DEFLATE, FILTER_JPEG, FILTER_LZ4};

// Not bound by hdf5-metno-sys 0.12 (exists since HDF5 1.10.2).
extern "C" {
    fn H5Dget_chunk_storage_size(
        dset_id: hid_t,
        offset: *const hsize_t,
        chunk_bytes: *mut hsize_t,
    ) -> herr_t;
}

/// The compression filter of a detector dataset (`None` = no filter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataFilter {
    None,
    NBit,
    Szip,
    Deflate,
    Blosc,
    Bslz4,
    Lz4,
    Jpeg,
}

impl DataFilter {
    /// Whether a frame with `codec` ("" = uncompressed) can be stored as the chunk's bytes.
    pub fn takes_directly(self, codec: &str) -> bool {
        matches!(
            (self, codec),
            (DataFilter::None, "")
                | (DataFilter::Deflate, "zlib")
                | (DataFilter::Blosc, "blosc")
                | (DataFilter::Bslz4, "bslz4")
                | (DataFilter::Lz4, "lz4" | "lz4hdf5")
                | (DataFilter::Jpeg, "jpeg")
        )
    }

    /// The HDF5 filter id, for the readers' sake (None for no filter).
    pub fn id(self) -> Option<i32> {
        match self {
            DataFilter::None => None,
            DataFilter::NBit => Some(5),
            DataFilter::Szip => Some(4),
            DataFilter::Deflate => Some(FILTER_DEFLATE),
            DataFilter::Blosc => Some(FILTER_BLOSC),
            DataFilter::Bslz4 => Some(FILTER_BSLZ4),
            DataFilter::Lz4 => Some(FILTER_LZ4),
            DataFilter::Jpeg => Some(FILTER_JPEG),
        }
    }
}

/// The chunk bytes for a direct write of `frame` (codec already checked against the filter):
/// the frame's bytes, or `scratch` holding them behind the header the filter expects.
/// `None`: this frame cannot go directly (an LZ4 block not smaller than the data, which the
/// 32004 format would read as stored raw).
pub fn direct_chunk<'a>(frame: &'a NDArray, scratch: &'a mut Vec<u8>) -> Option<&'a [u8]> {
    let body = frame.data_bytes();
    let total = frame.total_bytes();
    match frame.codec.name.as_str() {
        "bslz4" => {
            let elem = frame.data_type.size();
            let block = bitshuffle::default_block_elems(elem) * elem;
            scratch.clear();
            scratch.extend_from_slice(&(total as u64).to_be_bytes());
            scratch.extend_from_slice(&u32::try_from(block).ok()?.to_be_bytes());
            scratch.extend_from_slice(body);
            Some(scratch)
        }
        "lz4" => {
            if body.len() >= total || u32::try_from(total).is_err() {
                return None;
            }
            scratch.clear();
            scratch.extend_from_slice(&(total as u64).to_be_bytes());
            scratch.extend_from_slice(&(total as u32).to_be_bytes());
            scratch.extend_from_slice(&(body.len() as u32).to_be_bytes());
            scratch.extend_from_slice(body);
            Some(scratch)
        }
        "" => body.get(..total),
        _ => Some(body),
    }
}

/// Decompresses a frame compressed by the Codec plugin into `out` (its uncompressed bytes).
pub fn decompress_frame(frame: &NDArray, out: &mut Vec<u8>) -> Result<(), String> {
    let total = frame.total_bytes();
    out.resize(total, 0);
    let data = frame.data_bytes();
    let name = frame.codec.name.as_str();
    let n = match name {
        "jpeg" => jpeg::decompress(data, out).map(|i| i.len()),
        "zlib" => zlib::decompress(data, out),
        "blosc" => blosc::decompress(data, out),
        "lz4" => lz4::decompress_block(data, out),
        "lz4hdf5" => lz4::decompress_hdf5(data, out),
        "bslz4" => bslz4::decompress(data, frame.data_type.size(), BsFraming::AreaDetector, out),
        other => return Err(format!("unknown codec '{other}'")),
    }
    .map_err(|e| {
        format!(
            "cannot decompress the {name} frame {}: {e}",
            frame.unique_id
        )
    })?;
    if n != total {
        return Err(format!(
            "{name} frame {} holds {n} bytes, expected {total}",
            frame.unique_id
        ));
    }
    Ok(())
}

fn to_hsize(v: &[usize]) -> Vec<hsize_t> {
    v.iter().map(|&x| x as hsize_t).collect()
}

/// `H5Dwrite_chunk` of `bytes` as the chunk at `offset` (dataset coordinates, slowest first),
/// filter mask 0 (every filter of the dataset applied). The dataset must already extend over
/// the chunk.
pub fn write_chunk(ds: &h5::Dataset, offset: &[usize], bytes: &[u8]) -> h5::Result<()> {
    let off = to_hsize(offset);
    if off.len() != ds.ndim() {
        return Err(format!("chunk offset {offset:?} for a {}-D dataset", ds.ndim()).into());
    }
    h5::sync::sync(|| {
        // SAFETY: `off` has one entry per dataset dim (checked above); `bytes` is valid for
        // `bytes.len()` reads for the whole call, and HDF5 copies it before returning.
        h5::h5check(unsafe {
            H5Dwrite_chunk(
                ds.id(),
                H5P_DEFAULT,
                0,
                off.as_ptr(),
                bytes.len(),
                bytes.as_ptr().cast(),
            )
        })
        .map(|_| ())
    })
}

/// `H5Dwrite` of the block `count` at `offset` from `bytes` (C order, element type
/// `mem_type`), through the filter pipeline.
pub fn write_hyperslab(
    ds: &h5::Dataset,
    mem_type: &h5::Datatype,
    offset: &[usize],
    count: &[usize],
    bytes: &[u8],
) -> h5::Result<()> {
    let (off, cnt) = (to_hsize(offset), to_hsize(count));
    let rank = ds.ndim();
    if off.len() != rank || cnt.len() != rank {
        return Err(format!("selection {offset:?}+{count:?} for a {rank}-D dataset").into());
    }
    let need = count.iter().product::<usize>() * mem_type.size();
    if bytes.len() != need {
        return Err(format!("{} bytes for a selection of {need} bytes", bytes.len()).into());
    }
    h5::sync::sync(|| {
        // SAFETY: every id created here is checked and closed; `off`/`cnt` have `rank`
        // entries; the memory space describes exactly `bytes.len()` bytes of `mem_type`
        // elements (checked above), which HDF5 only reads during the call.
        unsafe {
            let file_space = h5::h5check(H5Dget_space(ds.id()))?;
            let res = (|| {
                h5::h5check(H5Sselect_hyperslab(
                    file_space,
                    H5S_seloper_t::H5S_SELECT_SET,
                    off.as_ptr(),
                    std::ptr::null(),
                    cnt.as_ptr(),
                    std::ptr::null(),
                ))?;
                let mem_space =
                    h5::h5check(H5Screate_simple(rank as _, cnt.as_ptr(), std::ptr::null()))?;
                let w = h5::h5check(H5Dwrite(
                    ds.id(),
                    mem_type.id(),
                    mem_space,
                    file_space,
                    H5P_DEFAULT,
                    bytes.as_ptr().cast(),
                ));
                H5Sclose(mem_space);
                w.map(|_| ())
            })();
            H5Sclose(file_space);
            res
        }
    })
}

/// The stored (filtered) bytes of the chunk at `offset` and its filter mask, as
/// `H5Dread_chunk` returns them: what a direct chunk write put there, byte for byte.
pub fn read_raw_chunk(ds: &h5::Dataset, offset: &[usize]) -> h5::Result<(u32, Vec<u8>)> {
    let off = to_hsize(offset);
    if off.len() != ds.ndim() {
        return Err(format!("chunk offset {offset:?} for a {}-D dataset", ds.ndim()).into());
    }
    h5::sync::sync(|| {
        let mut size: hsize_t = 0;
        // SAFETY: `off` has one entry per dataset dim; `size` is a valid out-pointer.
        h5::h5check(unsafe { H5Dget_chunk_storage_size(ds.id(), off.as_ptr(), &mut size) })?;
        let mut buf = vec![0u8; size as usize];
        let mut mask: u32 = 0;
        // SAFETY: `buf` holds the chunk's stored size, which H5Dread_chunk writes at most;
        // `mask` is a valid out-pointer.
        h5::h5check(unsafe {
            H5Dread_chunk1(
                ds.id(),
                H5P_DEFAULT,
                off.as_ptr(),
                &mut mask,
                buf.as_mut_ptr().cast(),
            )
        })?;
        Ok((mask, buf))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndflow_core::{Buffer, DataType};

    fn compressed(codec: &str, body: &[u8], dims: &[usize], dt: DataType) -> NDArray {
        let raw = vec![0u8; dims.iter().product::<usize>() * dt.size()];
        let mut f = NDArray::new(dims, dt, Buffer::from_bytes(&raw)).unwrap();
        f.buffer = Buffer::from_bytes(body);
        f.compressed_size = body.len();
        f.codec.name = codec.into();
        f
    }

    #[test]
    fn headers_for_bslz4_and_lz4() {
        let mut scratch = Vec::new();
        let f = compressed("bslz4", &[1, 2, 3], &[8, 4], DataType::UInt16);
        let c = direct_chunk(&f, &mut scratch).unwrap();
        assert_eq!(&c[..8], &64u64.to_be_bytes());
        assert_eq!(
            &c[8..12],
            &8192u32.to_be_bytes(),
            "4096 elements of 2 bytes"
        );
        assert_eq!(&c[12..], &[1, 2, 3]);
        let f = compressed("lz4", &[9, 9], &[4, 4], DataType::UInt32);
        let c = direct_chunk(&f, &mut scratch).unwrap();
        assert_eq!(&c[..8], &64u64.to_be_bytes());
        assert_eq!(&c[8..12], &64u32.to_be_bytes());
        assert_eq!(&c[12..16], &2u32.to_be_bytes());
        assert_eq!(&c[16..], &[9, 9]);
        // A block as large as the data would read as "stored raw": not written directly.
        let f = compressed("lz4", &[7; 16], &[4, 4], DataType::UInt8);
        assert!(direct_chunk(&f, &mut scratch).is_none());
        let f = compressed("blosc", &[5; 20], &[4, 4], DataType::UInt8);
        assert_eq!(direct_chunk(&f, &mut scratch).unwrap(), &[5; 20]);
    }

    #[test]
    fn filters_take_matching_codecs_only() {
        assert!(DataFilter::Bslz4.takes_directly("bslz4"));
        assert!(DataFilter::Lz4.takes_directly("lz4hdf5"));
        assert!(DataFilter::None.takes_directly(""));
        assert!(!DataFilter::None.takes_directly("lz4"));
        assert!(!DataFilter::Blosc.takes_directly("bslz4"));
        assert!(!DataFilter::Deflate.takes_directly(""));
    }

    #[test]
    fn unknown_codec_is_an_error() {
        let f = compressed("zstd", &[1], &[2], DataType::UInt8);
        assert!(decompress_frame(&f, &mut Vec::new())
            .unwrap_err()
            .contains("zstd"));
    }
}
