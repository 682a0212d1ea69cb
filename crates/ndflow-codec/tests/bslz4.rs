//! Bitshuffle-LZ4 against a reference built from the definition (bit-by-bit transpose +
//! `LZ4_compress_default` per block), known answers from python `bitshuffle`, both
//! framings, block sizes, and decode errors.

use ndflow_codec::bitshuffle::default_block_elems;
use ndflow_codec::bslz4::{
    compress, decompress, decompress_with_block, hdf5_decompressed_len, max_compressed_len,
    BsFraming,
};
use ndflow_codec::lz4;
use ndflow_codec::CodecError;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn ref_trans(input: &[u8], s: usize) -> Vec<u8> {
    let n = input.len() / s;
    let nrow = n / 8;
    let mut out = vec![0u8; input.len()];
    for i in 0..n {
        for j in 0..s {
            for b in 0..8 {
                if (input[i * s + j] >> b) & 1 == 1 {
                    out[(8 * j + b) * nrow + i / 8] |= 1 << (i % 8);
                }
            }
        }
    }
    out
}

/// `bshuf_compress_lz4` from the definition (+ the 32008 header for Hdf5).
fn reference(input: &[u8], s: usize, block_elems: usize, framing: BsFraming) -> Vec<u8> {
    let bs = if block_elems == 0 {
        default_block_elems(s)
    } else {
        block_elems
    };
    let n = input.len() / s;
    let mut out = Vec::new();
    if framing == BsFraming::Hdf5 {
        out.extend((input.len() as u64).to_be_bytes());
        out.extend(((bs * s) as u32).to_be_bytes());
    }
    let mut blocks = vec![bs * s; n / bs];
    if (n % bs) / 8 > 0 {
        blocks.push((n % bs) / 8 * 8 * s);
    }
    let mut pos = 0;
    for b in blocks {
        let t = ref_trans(&input[pos..pos + b], s);
        let mut c = vec![0u8; lz4::max_compressed_len(b)];
        let cn = lz4::compress_block(&t, &mut c).unwrap();
        out.extend((cn as u32).to_be_bytes());
        out.extend(&c[..cn]);
        pos += b;
    }
    out.extend(&input[pos..]);
    out
}

/// Detector-like data: mostly small counts, some large values.
fn frame(rng: &mut StdRng, n: usize, s: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(n * s);
    for _ in 0..n {
        let x: u64 = if rng.random_ratio(1, 50) {
            rng.random()
        } else {
            rng.random_range(0..3)
        };
        v.extend(&x.to_le_bytes()[..s.min(8)]);
        v.extend(std::iter::repeat_n(0u8, s.saturating_sub(8)));
    }
    v
}

#[test]
fn matches_reference_in_both_framings() {
    let mut rng = StdRng::seed_from_u64(30);
    for s in [1usize, 2, 3, 4, 8, 16] {
        for n in [0usize, 5, 8, 13, 1000, 4096, 5003, 9000 / s + 3] {
            for block in [0usize, 8, 256, 1024] {
                let input = frame(&mut rng, n, s);
                for framing in [BsFraming::AreaDetector, BsFraming::Hdf5] {
                    let want = reference(&input, s, block, framing);
                    let bound = max_compressed_len(input.len(), s, block, framing).unwrap();
                    let mut out = vec![0u8; bound];
                    let w = compress(&input, s, block, framing, &mut out).unwrap();
                    assert_eq!(
                        &out[..w],
                        &want[..],
                        "s={s} n={n} block={block} {framing:?}"
                    );
                    let mut back = vec![0u8; input.len()];
                    let r = decompress_with_block(&out[..w], s, block, framing, &mut back);
                    assert_eq!(r.unwrap(), input.len());
                    assert_eq!(back, input);
                }
            }
        }
    }
}

#[test]
fn known_answers_from_python_bitshuffle() {
    // python: bitshuffle.compress_lz4(np.zeros(1000, np.uint16))
    let zeros = vec![0u8; 2000];
    let mut out = vec![0u8; 100];
    let n = compress(&zeros, 2, 0, BsFraming::AreaDetector, &mut out).unwrap();
    assert_eq!(
        hex(&out[..n]),
        "000000121f000100ffffffffffffffbe500000000000"
    );
    // python: bitshuffle.compress_lz4(np.arange(20, dtype=np.uint8)): 16 elements in one
    // block, the last 4 verbatim.
    let ramp: Vec<u8> = (0..20).collect();
    let n = compress(&ramp, 1, 0, BsFraming::AreaDetector, &mut out).unwrap();
    assert_eq!(
        hex(&out[..n]),
        "00000012f001aaaaccccf0f000ff000000000000000010111213"
    );
    // The HDF5 chunk is the same body behind the 12-byte header.
    let h = compress(&ramp, 1, 0, BsFraming::Hdf5, &mut out).unwrap();
    assert_eq!(
        hex(&out[..h]),
        "0000000000000014".to_owned()
            + "00002000"
            + "00000012f001aaaaccccf0f000ff000000000000000010111213"
    );
    assert_eq!(hdf5_decompressed_len(&out[..h]).unwrap(), 20);
    let mut back = [0u8; 20];
    decompress(&out[..h], 1, BsFraming::Hdf5, &mut back).unwrap();
    assert_eq!(&back[..], &ramp[..]);
}

#[test]
fn hdf5_header_block_size_wins() {
    let mut rng = StdRng::seed_from_u64(31);
    let input = frame(&mut rng, 10_000, 2);
    let mut out = vec![0u8; max_compressed_len(input.len(), 2, 512, BsFraming::Hdf5).unwrap()];
    let n = compress(&input, 2, 512, BsFraming::Hdf5, &mut out).unwrap();
    assert_eq!(&out[8..12], &1024u32.to_be_bytes());
    let mut back = vec![0u8; input.len()];
    // The block argument is ignored for Hdf5: the header says 512 elements.
    decompress_with_block(&out[..n], 2, 64, BsFraming::Hdf5, &mut back).unwrap();
    assert_eq!(back, input);
    // Header block size 0 means the default, as in bshuf_h5_filter.
    let d = compress(&input, 2, 0, BsFraming::Hdf5, &mut out).unwrap();
    let mut zeroed = out[..d].to_vec();
    zeroed[8..12].copy_from_slice(&[0; 4]);
    decompress(&zeroed, 2, BsFraming::Hdf5, &mut back).unwrap();
    assert_eq!(back, input);
    // A header block that is not a multiple of 8 elements is rejected.
    zeroed[8..12].copy_from_slice(&(2 * 100u32).to_be_bytes());
    assert!(decompress(&zeroed, 2, BsFraming::Hdf5, &mut back).is_err());
}

#[test]
fn bound_holds_for_incompressible_data() {
    let mut rng = StdRng::seed_from_u64(32);
    for s in [1usize, 2, 4, 8] {
        let mut input = vec![0u8; 33_333 * s];
        rng.fill(&mut input[..]);
        for framing in [BsFraming::AreaDetector, BsFraming::Hdf5] {
            let bound = max_compressed_len(input.len(), s, 0, framing).unwrap();
            let mut out = vec![0u8; bound];
            let n = compress(&input, s, 0, framing, &mut out).unwrap();
            assert!(n <= bound && n > input.len());
            let mut small = vec![0u8; n - 1];
            assert!(matches!(
                compress(&input, s, 0, framing, &mut small),
                Err(CodecError::OutputTooSmall { .. })
            ));
            let mut back = vec![0u8; input.len()];
            decompress(&out[..n], s, framing, &mut back).unwrap();
            assert_eq!(back, input);
        }
    }
}

#[test]
fn argument_and_decode_errors() {
    let mut out = vec![0u8; 1000];
    let ad = BsFraming::AreaDetector;
    assert!(matches!(
        compress(&[0; 10], 0, 0, ad, &mut out),
        Err(CodecError::InvalidArgument { .. })
    ));
    assert!(matches!(
        compress(&[0; 10], 4, 0, ad, &mut out),
        Err(CodecError::InvalidArgument { .. })
    ));
    assert!(matches!(
        compress(&[0; 16], 2, 12, ad, &mut out),
        Err(CodecError::InvalidArgument { .. })
    ));
    let mut rng = StdRng::seed_from_u64(33);
    let input = frame(&mut rng, 3001, 4);
    for framing in [BsFraming::AreaDetector, BsFraming::Hdf5] {
        let n = compress(&input, 4, 0, framing, &mut vec![0u8; 0][..]).unwrap_or(0);
        assert_eq!(n, 0, "an empty output buffer cannot hold anything");
        let mut c = vec![0u8; max_compressed_len(input.len(), 4, 0, framing).unwrap()];
        let n = compress(&input, 4, 0, framing, &mut c).unwrap();
        let c = &c[..n];
        let mut back = vec![0u8; input.len()];
        assert!(
            decompress(&c[..n - 1], 4, framing, &mut back).is_err(),
            "truncated tail"
        );
        assert!(
            decompress(&c[..n / 2], 4, framing, &mut back).is_err(),
            "truncated"
        );
        let mut extra = c.to_vec();
        extra.push(0);
        assert!(
            decompress(&extra, 4, framing, &mut back).is_err(),
            "trailing"
        );
        assert!(
            decompress(c, 4, framing, &mut back[..4 * 3000]).is_err(),
            "wrong size"
        );
        assert!(
            decompress(c, 3, framing, &mut back[..3 * 3001]).is_err(),
            "wrong elem"
        );
        assert!(decompress(c, 0, framing, &mut back).is_err(), "elem 0");
        let mut flipped = c.to_vec();
        let at = if framing == BsFraming::Hdf5 { 12 } else { 0 };
        flipped[at] ^= 0x80;
        assert!(
            decompress(&flipped, 4, framing, &mut back).is_err(),
            "block length"
        );
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
