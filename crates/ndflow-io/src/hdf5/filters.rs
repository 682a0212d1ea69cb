//! The HDF5 compression filters of NDFileHDF5, registered in-process with `H5Zregister` and
//! implemented with ndflow-codec, so writing never depends on `HDF5_PLUGIN_PATH`. Each one
//! uses the registered filter id and the `cd_values` layout of the filter that hdf5plugin and
//! ADSupport ship, so h5py + hdf5plugin and `h5dump` read the files.
//!
//! | Compression | filter | cd_values written | chunk bytes |
//! |---|---|---|---|
//! | zlib | 1 (deflate, built in) | `[ZLevel]` | zlib stream |
//! | szip | 4 (built in) | set by HDF5 | |
//! | N-bit | 5 (built in) | set by HDF5 | |
//! | Blosc | 32001 | `[2, 2, typesize, chunk bytes, level, shuffle, compressor]` | one Blosc1 frame |
//! | LZ4 | 32004 | `[0]` (block size, 0 = 1 GiB) | `lz4hdf5`: u64 BE size, u32 BE block, blocks |
//! | BSLZ4 | 32008 | `[0, 4, elem size, 0, 2]` (bitshuffle 0.4, auto block, LZ4) | 12-byte header + blocks |
//! | JPEG | 32019 | `[quality, nx, ny, rgb]` | one JPEG image (UInt8 Mono or RGB1) |
//!
//! A filter function runs inside an HDF5 call (under hdf5-metno's global lock, on the writer
//! thread). It reads HDF5's buffer, writes the result into a new buffer from
//! `H5allocate_memory` and frees the old one with `H5free_memory`, as the HDF5 filter API
//! requires. It never panics across the C boundary: any failure returns 0, which HDF5 turns
//! into an error of the write or read (an optional filter's failure on write stores the chunk
//! unfiltered with its filter-mask bit set, which readers honour).

use std::ffi::{c_uint, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

use hdf5_metno_sys::h5::{H5allocate_memory, H5free_memory};
use hdf5_metno_sys::h5z::{
    H5Z_class2_t, H5Z_filter_t, H5Zregister, H5Z_CLASS_T_VERS, H5Z_FLAG_REVERSE,
};
use ndflow_codec::blosc::{BloscCompressor, BloscParams, BloscShuffle};
use ndflow_codec::bslz4::BsFraming;
use ndflow_codec::{blosc, bslz4, jpeg, lz4};

pub const FILTER_DEFLATE: H5Z_filter_t = 1;
pub const FILTER_BLOSC: H5Z_filter_t = 32001;
pub const FILTER_LZ4: H5Z_filter_t = 32004;
pub const FILTER_BSLZ4: H5Z_filter_t = 32008;
pub const FILTER_JPEG: H5Z_filter_t = 32019;

/// Blosc filter format version (`FILTER_BLOSC_VERSION`) and Blosc1 frame format.
const BLOSC_FILTER_VERSION: c_uint = 2;
const BLOSC_FORMAT_VERSION: c_uint = 2;

/// cd_values of filter 32001 (hdf5plugin's `Blosc` after its `set_local`).
pub fn blosc_cd_values(type_size: usize, chunk_bytes: usize, p: &BloscParams) -> Vec<c_uint> {
    vec![
        BLOSC_FILTER_VERSION,
        BLOSC_FORMAT_VERSION,
        type_size as c_uint,
        c_uint::try_from(chunk_bytes).unwrap_or(c_uint::MAX),
        c_uint::from(p.clevel.min(9)),
        p.shuffle as c_uint,
        p.compressor as c_uint,
    ]
}

/// cd_values of filter 32004: the block size in bytes, 0 = the filter's default (1 GiB).
pub fn lz4_cd_values() -> Vec<c_uint> {
    vec![0]
}

/// cd_values of filter 32008 as hdf5plugin 7 stores them: bitshuffle 0.4, element size,
/// automatic block, LZ4.
pub fn bslz4_cd_values(elem_size: usize) -> Vec<c_uint> {
    vec![0, 4, elem_size as c_uint, 0, 2]
}

/// cd_values of filter 32019 (ADSupport's JPEG filter): quality, width, height, 1 for RGB.
pub fn jpeg_cd_values(quality: u8, width: usize, height: usize, rgb: bool) -> Vec<c_uint> {
    vec![
        c_uint::from(quality),
        width as c_uint,
        height as c_uint,
        c_uint::from(rgb),
    ]
}

/// Registers the four filter classes once per process; later calls return the first result.
pub fn register_filters() -> Result<(), String> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        hdf5_metno::sync::sync(|| {
            for (id, class) in [
                (FILTER_BLOSC, BLOSC_CLASS),
                (FILTER_LZ4, LZ4_CLASS),
                (FILTER_BSLZ4, BSLZ4_CLASS),
                (FILTER_JPEG, JPEG_CLASS),
            ] {
                let class: *const H5Z_class2_t = class;
                // SAFETY: `class` points to a 'static H5Z_class2_t whose name is a 'static
                // NUL-terminated string and whose callbacks match H5Z_func_t; HDF5 copies the
                // struct into its filter table. Called under hdf5-metno's lock.
                let ret = unsafe { H5Zregister(class.cast::<c_void>()) };
                if ret < 0 {
                    return Err(format!("cannot register HDF5 filter {id}"));
                }
            }
            Ok(())
        })
    })
    .clone()
}

const fn class(
    id: H5Z_filter_t,
    name: &'static [u8],
    filter: hdf5_metno_sys::h5z::H5Z_func_t,
) -> H5Z_class2_t {
    H5Z_class2_t {
        version: H5Z_CLASS_T_VERS as _,
        id,
        encoder_present: 1,
        decoder_present: 1,
        name: name.as_ptr().cast(),
        can_apply: None,
        set_local: None,
        filter,
    }
}

const BLOSC_CLASS: &H5Z_class2_t = &class(FILTER_BLOSC, b"blosc\0", Some(filter_blosc));
const LZ4_CLASS: &H5Z_class2_t = &class(FILTER_LZ4, b"lz4\0", Some(filter_lz4));
const BSLZ4_CLASS: &H5Z_class2_t = &class(FILTER_BSLZ4, b"bitshuffle\0", Some(filter_bslz4));
const JPEG_CLASS: &H5Z_class2_t = &class(FILTER_JPEG, b"jpeg\0", Some(filter_jpeg));

/// What one filter does to one chunk: `encode`/`decode` return the output length after
/// writing into a buffer of the size they asked for.
trait ChunkCodec {
    /// Upper bound of the encoded size, or None if the input cannot be encoded.
    fn encode_bound(cd: &[c_uint], input: &[u8]) -> Option<usize>;
    fn encode(cd: &[c_uint], input: &[u8], out: &mut [u8]) -> Option<usize>;
    /// Exact decoded size read from the chunk.
    fn decoded_len(cd: &[c_uint], input: &[u8]) -> Option<usize>;
    fn decode(cd: &[c_uint], input: &[u8], out: &mut [u8]) -> Option<usize>;
}

struct Blosc;
struct Lz4;
struct Bslz4;
struct Jpeg;

fn cd_at(cd: &[c_uint], i: usize) -> Option<usize> {
    cd.get(i).map(|&v| v as usize)
}

impl ChunkCodec for Blosc {
    fn encode_bound(_cd: &[c_uint], input: &[u8]) -> Option<usize> {
        Some(blosc::max_compressed_len(input.len()))
    }
    fn encode(cd: &[c_uint], input: &[u8], out: &mut [u8]) -> Option<usize> {
        // As the C filter: a type size outside c-blosc's range compresses as bytes.
        let type_size = cd_at(cd, 2).filter(|t| (1..=blosc::MAX_TYPE_SIZE).contains(t));
        let params = BloscParams {
            compressor: cd_at(cd, 6)
                .and_then(|c| BloscCompressor::from_index(c as i64))
                .unwrap_or(BloscCompressor::BloscLZ),
            clevel: cd_at(cd, 4).unwrap_or(5).min(9) as u8,
            shuffle: cd_at(cd, 5)
                .and_then(|s| BloscShuffle::from_index(s as i64))
                .unwrap_or(BloscShuffle::Byte),
            num_threads: 1,
            block_size: 0,
        };
        blosc::compress(input, type_size.unwrap_or(1), &params, out).ok()
    }
    fn decoded_len(_cd: &[c_uint], input: &[u8]) -> Option<usize> {
        blosc::decompressed_len(input).ok()
    }
    fn decode(_cd: &[c_uint], input: &[u8], out: &mut [u8]) -> Option<usize> {
        blosc::decompress(input, out).ok()
    }
}

impl ChunkCodec for Lz4 {
    fn encode_bound(cd: &[c_uint], input: &[u8]) -> Option<usize> {
        Some(lz4::max_hdf5_len(input.len(), cd_at(cd, 0).unwrap_or(0)))
    }
    fn encode(cd: &[c_uint], input: &[u8], out: &mut [u8]) -> Option<usize> {
        lz4::compress_hdf5(input, cd_at(cd, 0).unwrap_or(0), out).ok()
    }
    fn decoded_len(_cd: &[c_uint], input: &[u8]) -> Option<usize> {
        lz4::hdf5_decompressed_len(input).ok()
    }
    fn decode(_cd: &[c_uint], input: &[u8], out: &mut [u8]) -> Option<usize> {
        lz4::decompress_hdf5(input, out).ok()
    }
}

/// cd[2] is the element size, cd[3] the block (elements, 0 = auto), cd[4] the compressor:
/// only LZ4 (2) is implemented.
fn bslz4_geometry(cd: &[c_uint]) -> Option<(usize, usize)> {
    let elem = cd_at(cd, 2).filter(|&e| e > 0)?;
    (cd_at(cd, 4) == Some(2)).then_some((elem, cd_at(cd, 3).unwrap_or(0)))
}

impl ChunkCodec for Bslz4 {
    fn encode_bound(cd: &[c_uint], input: &[u8]) -> Option<usize> {
        let (elem, block) = bslz4_geometry(cd)?;
        bslz4::max_compressed_len(input.len(), elem, block, BsFraming::Hdf5).ok()
    }
    fn encode(cd: &[c_uint], input: &[u8], out: &mut [u8]) -> Option<usize> {
        let (elem, block) = bslz4_geometry(cd)?;
        bslz4::compress(input, elem, block, BsFraming::Hdf5, out).ok()
    }
    fn decoded_len(_cd: &[c_uint], input: &[u8]) -> Option<usize> {
        bslz4::hdf5_decompressed_len(input).ok()
    }
    fn decode(cd: &[c_uint], input: &[u8], out: &mut [u8]) -> Option<usize> {
        let (elem, _) = bslz4_geometry(cd)?;
        bslz4::decompress(input, elem, BsFraming::Hdf5, out).ok()
    }
}

/// (quality, width, height, components) from cd_values.
fn jpeg_geometry(cd: &[c_uint]) -> Option<(u8, usize, usize, usize)> {
    let q = cd_at(cd, 0)?.clamp(1, 100) as u8;
    let comps = if cd_at(cd, 3)? != 0 { 3 } else { 1 };
    Some((q, cd_at(cd, 1)?, cd_at(cd, 2)?, comps))
}

impl ChunkCodec for Jpeg {
    fn encode_bound(cd: &[c_uint], input: &[u8]) -> Option<usize> {
        let (_, w, h, c) = jpeg_geometry(cd)?;
        (w.checked_mul(h)?.checked_mul(c)? == input.len())
            .then(|| jpeg::max_compressed_len(w, h, c))
            .filter(|&n| n != usize::MAX)
    }
    fn encode(cd: &[c_uint], input: &[u8], out: &mut [u8]) -> Option<usize> {
        let (q, w, h, c) = jpeg_geometry(cd)?;
        jpeg::compress(input, w, h, c, q, out).ok()
    }
    fn decoded_len(_cd: &[c_uint], input: &[u8]) -> Option<usize> {
        jpeg::read_header(input).ok().map(|i| i.len())
    }
    fn decode(_cd: &[c_uint], input: &[u8], out: &mut [u8]) -> Option<usize> {
        jpeg::decompress(input, out).ok().map(|i| i.len())
    }
}

/// Runs one direction of `C` on HDF5's buffer; see the module doc for the contract.
///
/// # Safety
/// Called by HDF5 only: `cd_values` holds `cd_nelmts` values, `*buf` holds at least `nbytes`
/// readable bytes allocated by HDF5's allocator, and `buf_size`/`buf` are writable.
unsafe fn run_filter<C: ChunkCodec>(
    flags: c_uint,
    cd_nelmts: usize,
    cd_values: *const c_uint,
    nbytes: usize,
    buf_size: *mut usize,
    buf: *mut *mut c_void,
) -> usize {
    let work = || -> Option<usize> {
        if buf.is_null() || buf_size.is_null() {
            return None;
        }
        let cd: &[c_uint] = if cd_values.is_null() || cd_nelmts == 0 {
            &[]
        } else {
            // SAFETY: HDF5 passes `cd_nelmts` valid values at `cd_values` for this call.
            unsafe { std::slice::from_raw_parts(cd_values, cd_nelmts) }
        };
        // SAFETY: `buf` is non-null and HDF5 passes a valid pointer to its buffer pointer.
        let src_ptr = unsafe { *buf };
        if src_ptr.is_null() {
            return None;
        }
        // SAFETY: HDF5's buffer holds `nbytes` valid bytes, not aliased during this call.
        let input = unsafe { std::slice::from_raw_parts(src_ptr.cast::<u8>(), nbytes) };
        let decode = flags & H5Z_FLAG_REVERSE != 0;
        let cap = if decode {
            C::decoded_len(cd, input)?
        } else {
            C::encode_bound(cd, input)?
        };
        // SAFETY: plain allocation through HDF5's allocator (as the filter API requires for
        // buffers handed back to HDF5); checked for null below.
        let dst_ptr = unsafe { H5allocate_memory(cap.max(1), 0) };
        if dst_ptr.is_null() {
            return None;
        }
        // SAFETY: `dst_ptr` is a fresh allocation of at least `cap` bytes, distinct from `input`.
        let out = unsafe { std::slice::from_raw_parts_mut(dst_ptr.cast::<u8>(), cap) };
        let n = if decode {
            C::decode(cd, input, out)
        } else {
            C::encode(cd, input, out)
        };
        match n {
            Some(n) if n <= cap => {
                // SAFETY: `src_ptr` was allocated by HDF5 and is replaced by `dst_ptr`, which
                // HDF5 now owns together with its size; nothing reads `input` afterwards.
                unsafe {
                    H5free_memory(src_ptr);
                    *buf = dst_ptr;
                    *buf_size = cap.max(1);
                }
                Some(n)
            }
            _ => {
                // SAFETY: `dst_ptr` came from H5allocate_memory and is not used again.
                unsafe { H5free_memory(dst_ptr) };
                None
            }
        }
    };
    catch_unwind(AssertUnwindSafe(work))
        .ok()
        .flatten()
        .unwrap_or(0)
}

macro_rules! filter_fn {
    ($name:ident, $codec:ty) => {
        /// # Safety
        /// Called by HDF5 with the H5Z_func_t contract (see `run_filter`).
        unsafe extern "C" fn $name(
            flags: c_uint,
            cd_nelmts: usize,
            cd_values: *const c_uint,
            nbytes: usize,
            buf_size: *mut usize,
            buf: *mut *mut c_void,
        ) -> usize {
            // SAFETY: forwarded unchanged from HDF5, which upholds run_filter's contract.
            unsafe { run_filter::<$codec>(flags, cd_nelmts, cd_values, nbytes, buf_size, buf) }
        }
    };
}

filter_fn!(filter_blosc, Blosc);
filter_fn!(filter_lz4, Lz4);
filter_fn!(filter_bslz4, Bslz4);
filter_fn!(filter_jpeg, Jpeg);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cd_values_match_hdf5plugin() {
        assert_eq!(bslz4_cd_values(2), [0, 4, 2, 0, 2]);
        let p = BloscParams {
            compressor: BloscCompressor::LZ4,
            clevel: 5,
            shuffle: BloscShuffle::Byte,
            num_threads: 1,
            block_size: 0,
        };
        assert_eq!(blosc_cd_values(4, 4 << 20, &p), [2, 2, 4, 4 << 20, 5, 1, 1]);
        assert_eq!(jpeg_cd_values(90, 64, 32, true), [90, 64, 32, 1]);
    }

    fn round_trip<C: ChunkCodec>(cd: &[c_uint], data: &[u8]) {
        let mut packed = vec![0u8; C::encode_bound(cd, data).unwrap()];
        let n = C::encode(cd, data, &mut packed).unwrap();
        assert_eq!(C::decoded_len(cd, &packed[..n]), Some(data.len()));
        let mut back = vec![0u8; data.len()];
        assert_eq!(C::decode(cd, &packed[..n], &mut back), Some(data.len()));
        assert_eq!(back, data);
        assert!(
            C::decode(cd, &packed[..n / 2], &mut back).is_none(),
            "truncated chunk"
        );
    }

    #[test]
    fn codecs_round_trip_and_refuse_bad_input() {
        let data: Vec<u8> = (0..4096u32).flat_map(|i| (i / 7).to_le_bytes()).collect();
        round_trip::<Bslz4>(&bslz4_cd_values(4), &data);
        round_trip::<Lz4>(&lz4_cd_values(), &data);
        round_trip::<Blosc>(
            &blosc_cd_values(4, data.len(), &BloscParams::default()),
            &data,
        );
        // Bitshuffle without LZ4 (cd[4] = 0) is not implemented: refused, not mangled.
        assert!(Bslz4::encode_bound(&[0, 4, 4, 0, 0], &data).is_none());
        // JPEG needs the size in cd_values to match the chunk.
        assert!(Jpeg::encode_bound(&jpeg_cd_values(90, 10, 10, false), &data).is_none());
    }

    #[test]
    fn registration_is_idempotent() {
        assert_eq!(register_filters(), Ok(()));
        assert_eq!(register_filters(), Ok(()));
        for id in [FILTER_BLOSC, FILTER_LZ4, FILTER_BSLZ4, FILTER_JPEG] {
            // SAFETY: H5Zfilter_avail only reads the filter table; called under the lock.
            let avail =
                hdf5_metno::sync::sync(|| unsafe { hdf5_metno_sys::h5z::H5Zfilter_avail(id) });
            assert_eq!(avail, 1, "filter {id}");
        }
    }
}
