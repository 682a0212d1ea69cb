//! Raw LZ4 blocks and the lz4hdf5 framing: round trips, the framing's layout rules
//! (header, raw fallback, last short block), known answers from python lz4, errors.

use ndflow_codec::lz4::{
    compress_block, compress_hdf5, decompress_block, decompress_hdf5, hdf5_decompressed_len,
    max_compressed_len, max_hdf5_len, HDF5_DEFAULT_BLOCK_SIZE, MAX_INPUT_SIZE,
};
use ndflow_codec::CodecError;
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

fn sample(rng: &mut StdRng, len: usize, compressible: bool) -> Vec<u8> {
    let mut v = vec![0u8; len];
    if compressible {
        for (i, b) in v.iter_mut().enumerate() {
            *b = if rng.random_ratio(1, 10) {
                rng.random()
            } else {
                (i / 64) as u8
            };
        }
    } else {
        rng.fill_bytes(&mut v);
    }
    v
}

fn be32(b: &[u8]) -> usize {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize
}

#[test]
fn block_round_trips() {
    let mut rng = StdRng::seed_from_u64(10);
    for len in [
        0usize, 1, 5, 12, 13, 100, 4096, 65535, 65536, 70000, 300_000,
    ] {
        for compressible in [false, true] {
            let data = sample(&mut rng, len, compressible);
            let mut c = vec![0u8; max_compressed_len(len)];
            let cn = compress_block(&data, &mut c).unwrap();
            assert!(cn <= max_compressed_len(len));
            let mut back = vec![0u8; len];
            assert_eq!(decompress_block(&c[..cn], &mut back).unwrap(), len);
            assert_eq!(back, data);
            // A decoder told the wrong size fails rather than returning a short result.
            if len > 0 {
                let mut short = vec![0u8; len - 1];
                assert!(decompress_block(&c[..cn], &mut short).is_err());
            }
            let mut long = vec![0u8; len + 1];
            assert!(decompress_block(&c[..cn], &mut long).is_err());
            // Truncated and trailing input.
            assert!(decompress_block(&c[..cn - 1], &mut back).is_err());
            let mut extra = c[..cn].to_vec();
            extra.push(0);
            assert!(decompress_block(&extra, &mut back).is_err());
        }
    }
}

#[test]
fn block_known_answer_from_python_lz4() {
    // python: lz4.block.compress(bytes(range(64)) * 4 + bytes(100), store_size=False)
    let data: Vec<u8> = (0..4).flat_map(|_| 0u8..64).chain([0u8; 100]).collect();
    let want = "ff31000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f4000ae0f01004b500000000000";
    let mut c = vec![0u8; max_compressed_len(data.len())];
    let n = compress_block(&data, &mut c).unwrap();
    assert_eq!(hex(&c[..n]), want);
    let mut back = vec![0u8; data.len()];
    decompress_block(&c[..n], &mut back).unwrap();
    assert_eq!(back, data);
}

#[test]
fn block_output_too_small() {
    let mut rng = StdRng::seed_from_u64(11);
    let data = sample(&mut rng, 1000, false);
    let mut c = vec![0u8; 999];
    assert!(matches!(
        compress_block(&data, &mut c),
        Err(CodecError::OutputTooSmall { have: 999, .. })
    ));
    // Compressible data fits a buffer smaller than the bound.
    let zeros = vec![0u8; 1000];
    assert!(compress_block(&zeros, &mut c[..20]).is_ok());
    assert!(compress_block(&zeros, &mut []).is_err());
}

#[test]
fn hdf5_layout_follows_the_c_filter() {
    let mut rng = StdRng::seed_from_u64(12);
    // 3 compressible blocks of 1000 bytes, 1 random (stored raw), 1 short last block.
    let mut data = sample(&mut rng, 3000, true);
    data.extend(sample(&mut rng, 1000, false));
    data.extend(sample(&mut rng, 345, true));
    let mut out = vec![0u8; max_hdf5_len(data.len(), 1000)];
    let n = compress_hdf5(&data, 1000, &mut out).unwrap();
    let out = &out[..n];
    assert_eq!(
        u64::from_be_bytes(out[..8].try_into().unwrap()),
        data.len() as u64
    );
    assert_eq!(be32(&out[8..]), 1000);
    let mut pos = 12;
    for (i, chunk) in data.chunks(1000).enumerate() {
        let stored = be32(&out[pos..]);
        pos += 4;
        if i == 3 {
            assert_eq!(stored, 1000, "incompressible block is stored raw");
            assert_eq!(&out[pos..pos + stored], chunk);
        } else {
            assert!(stored < chunk.len());
            let mut c = vec![0u8; max_compressed_len(chunk.len())];
            let cn = compress_block(chunk, &mut c).unwrap();
            assert_eq!(
                &out[pos..pos + stored],
                &c[..cn],
                "block {i} = LZ4_compress_default"
            );
        }
        pos += stored;
    }
    assert_eq!(pos, n);
    assert_eq!(hdf5_decompressed_len(out).unwrap(), data.len());
    let mut back = vec![0u8; data.len()];
    assert_eq!(decompress_hdf5(out, &mut back).unwrap(), data.len());
    assert_eq!(back, data);
}

#[test]
fn hdf5_default_block_is_capped_to_the_input() {
    let data = vec![7u8; 5000];
    let mut out = vec![0u8; max_hdf5_len(5000, 0)];
    let n = compress_hdf5(&data, 0, &mut out).unwrap();
    assert_eq!(be32(&out[8..]), 5000);
    assert_eq!(max_hdf5_len(5000, 0), 12 + 4 + 5000);
    let mut back = vec![0u8; 5000];
    decompress_hdf5(&out[..n], &mut back).unwrap();
    assert_eq!(back, data);
    const { assert!(HDF5_DEFAULT_BLOCK_SIZE < MAX_INPUT_SIZE) };
    // Empty input: header only, and it decodes.
    let mut out = [0u8; 12];
    assert_eq!(compress_hdf5(&[], 0, &mut out).unwrap(), 12);
    assert_eq!(decompress_hdf5(&out, &mut []).unwrap(), 0);
    // 1-byte blocks never compress: all raw.
    let mut out = vec![0u8; max_hdf5_len(3, 1)];
    let n = compress_hdf5(&[1, 2, 3], 1, &mut out).unwrap();
    assert_eq!(
        hex(&out[..n]),
        "000000000000000300000001000000010100000001020000000103"
    );
}

#[test]
fn hdf5_round_trips_and_bound() {
    let mut rng = StdRng::seed_from_u64(13);
    for _ in 0..40 {
        let len = rng.random_range(0..50_000);
        let block = [0, 1, 7, 100, 4096, 65536, 1 << 20][rng.random_range(0..7)];
        let compressible = rng.random_bool(0.5);
        let data = sample(&mut rng, len, compressible);
        let bound = max_hdf5_len(len, block);
        let mut out = vec![0u8; bound];
        let n = compress_hdf5(&data, block, &mut out).unwrap();
        assert!(n <= bound);
        let mut back = vec![0u8; len];
        decompress_hdf5(&out[..n], &mut back).unwrap();
        assert_eq!(back, data);
        // One byte less than the actual output must fail cleanly.
        if n > 0 {
            let mut small = vec![0u8; n - 1];
            assert!(matches!(
                compress_hdf5(&data, block, &mut small),
                Err(CodecError::OutputTooSmall { .. })
            ));
        }
    }
}

#[test]
fn hdf5_decode_errors() {
    let data: Vec<u8> = (0..3000u32).map(|i| (i / 7) as u8).collect();
    let mut out = vec![0u8; max_hdf5_len(data.len(), 1024)];
    let n = compress_hdf5(&data, 1024, &mut out).unwrap();
    let s = &out[..n];
    let mut back = vec![0u8; data.len()];
    assert!(decompress_hdf5(&s[..11], &mut back).is_err());
    assert!(decompress_hdf5(&s[..n - 1], &mut back).is_err());
    let mut extra = s.to_vec();
    extra.push(0);
    assert!(decompress_hdf5(&extra, &mut back).is_err());
    assert!(decompress_hdf5(s, &mut back[..2999]).is_err());
    let mut zero_block = s.to_vec();
    zero_block[8..12].copy_from_slice(&[0; 4]);
    assert!(decompress_hdf5(&zero_block, &mut back).is_err());
    let mut huge = s.to_vec();
    huge[..8].copy_from_slice(&u64::MAX.to_be_bytes());
    assert!(decompress_hdf5(&huge, &mut back).is_err());
    let mut bad_len = s.to_vec();
    bad_len[12..16].copy_from_slice(&u32::MAX.to_be_bytes());
    assert!(decompress_hdf5(&bad_len, &mut back).is_err());
    assert!(
        compress_hdf5(&data, MAX_INPUT_SIZE + 1, &mut out).is_ok(),
        "capped to the input"
    );
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
