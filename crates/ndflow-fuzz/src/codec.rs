//! The codec decoders, as the Codec plugin, the HDF5 reader and the EIGER stream use them.
//! Where the format does not say the decoded size, the first bytes of the input do (capped at
//! [`crate::MAX_OUT`]); where it does, a claim over the cap is refused before allocating.

use ndflow_codec::bitshuffle::{self as bs, Kernel};
use ndflow_codec::bslz4::{self, BsFraming};
use ndflow_codec::{blosc as bl, jpeg as jp, lz4 as l4, zlib as zl};

use crate::{be, MAX_OUT};

/// A buffer for a declared size, or `None` over the cap.
fn out_for(len: usize) -> Option<Vec<u8>> {
    (len <= MAX_OUT).then(|| vec![0u8; len])
}

/// Byte 0 bit 0: framing (0 raw block, 1 `lz4hdf5`). Raw: bytes 1–3 are the decoded size
/// (BE), the block follows; `lz4hdf5`: the stream follows byte 0 and its header gives the size.
pub fn lz4(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 0 {
        let mut out = vec![0u8; (be(rest, 3) as usize).min(MAX_OUT)];
        let _ = l4::decompress_block(rest.get(3..).unwrap_or(&[]), &mut out);
    } else if let Some(mut out) = l4::hdf5_decompressed_len(rest).ok().and_then(out_for) {
        let _ = l4::decompress_hdf5(rest, &mut out);
    }
}

/// Byte 0 bit 0: framing (0 areaDetector, 1 HDF5 filter 32008); byte 1: element size;
/// byte 2: block size in units of 8 elements (0: default). areaDetector framing: bytes 3–5 are
/// the decoded size (BE), the blocks follow; HDF5: the chunk follows byte 2 and its header
/// gives the size.
pub fn bslz4(data: &[u8]) {
    let byte = |i: usize| usize::from(data.get(i).copied().unwrap_or(0));
    let (mode, elem, block) = (byte(0), byte(1), byte(2) * 8);
    let rest = data.get(3..).unwrap_or(&[]);
    if mode & 1 == 0 {
        let mut out = vec![0u8; (be(rest, 3) as usize).min(MAX_OUT)];
        let input = rest.get(3..).unwrap_or(&[]);
        let _ = bslz4::decompress_with_block(input, elem, block, BsFraming::AreaDetector, &mut out);
    } else if let Some(mut out) = bslz4::hdf5_decompressed_len(rest).ok().and_then(out_for) {
        let _ = bslz4::decompress(rest, elem, BsFraming::Hdf5, &mut out);
    }
}

/// A Blosc1 frame: its header gives the size.
pub fn blosc(data: &[u8]) {
    if let Some(mut out) = bl::decompressed_len(data).ok().and_then(out_for) {
        let _ = bl::decompress(data, &mut out);
    }
}

/// Bytes 0–2: the decoded size (BE); a zlib stream follows.
pub fn zlib(data: &[u8]) {
    let mut out = vec![0u8; (be(data, 3) as usize).min(MAX_OUT)];
    let _ = zl::decompress(data.get(3..).unwrap_or(&[]), &mut out);
}

/// A JPEG file: the header, then the image into a buffer of the size the header gives.
pub fn jpeg(data: &[u8]) {
    let Ok(info) = jp::read_header(data) else {
        return;
    };
    if let Some(mut out) = out_for(info.len()) {
        let _ = jp::decompress(data, &mut out);
    }
}

/// Byte 0: element size; byte 1: block size in units of 8 elements (0: default); the rest is
/// bit-shuffled data. Unshuffled by every kernel this CPU has, which must agree; the bare
/// block transpose too.
pub fn bitshuffle(data: &[u8]) {
    let elem = usize::from(data.first().copied().unwrap_or(0));
    let block = usize::from(data.get(1).copied().unwrap_or(0)) * 8;
    let input = data.get(2..).unwrap_or(&[]);
    let mut first: Option<Result<Vec<u8>, String>> = None;
    for k in Kernel::ALL.into_iter().filter(|k| k.is_available()) {
        let mut out = vec![0u8; input.len()];
        let r = bs::bitunshuffle_with(k, input, elem, block, &mut out)
            .map(|_| out)
            .map_err(|e| e.to_string());
        match &first {
            None => first = Some(r),
            Some(Ok(a)) => assert_eq!(Some(a), r.as_ref().ok(), "kernels disagree: {k:?}"),
            Some(Err(_)) => assert!(r.is_err(), "only {k:?} accepted the input"),
        }
        let mut out = vec![0u8; input.len()];
        let _ = bs::untrans_bit_elem_with(k, input, elem, &mut out);
    }
}
