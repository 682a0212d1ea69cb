//! Bit transpose: every kernel against a bit-by-bit reference, SIMD against scalar,
//! round trips, known answers from the C library, argument errors.

use ndflow_codec::bitshuffle::{
    bitshuffle, bitshuffle_with, bitunshuffle, bitunshuffle_with, default_block_elems,
    trans_bit_elem_with, untrans_bit_elem_with, Kernel,
};
use ndflow_codec::CodecError;
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

const SIZES: [usize; 9] = [1, 2, 3, 4, 5, 8, 12, 16, 32];

/// The definition: row 8j+b, byte i/8, bit i%8 = bit b of byte j of element i.
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

/// `bshuf_bitshuffle` from the definition: blocks, last block `(n % bs) & !7`, tail verbatim.
fn ref_bitshuffle(input: &[u8], s: usize, block_elems: usize) -> Vec<u8> {
    let bs = if block_elems == 0 {
        default_block_elems(s)
    } else {
        block_elems
    };
    let n = input.len() / s;
    let mut out = Vec::with_capacity(input.len());
    let mut pos = 0;
    for _ in 0..n / bs {
        out.extend(ref_trans(&input[pos..pos + bs * s], s));
        pos += bs * s;
    }
    let last = (n % bs) / 8 * 8 * s;
    out.extend(ref_trans(&input[pos..pos + last], s));
    pos += last;
    out.extend_from_slice(&input[pos..]);
    out
}

fn kernels() -> Vec<Kernel> {
    Kernel::ALL
        .into_iter()
        .filter(|k| k.is_available())
        .collect()
}

fn random_bytes(rng: &mut StdRng, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    // Mix dense noise with sparse data so whole zero rows and one-bit rows both occur.
    if rng.random_bool(0.5) {
        rng.fill_bytes(&mut v);
    } else {
        for b in v.iter_mut() {
            if rng.random_ratio(1, 8) {
                *b = 1 << rng.random_range(0..8);
            }
        }
    }
    v
}

#[test]
fn default_block_size_matches_c() {
    assert_eq!(default_block_elems(1), 8192);
    assert_eq!(default_block_elems(2), 4096);
    assert_eq!(default_block_elems(3), 2728);
    assert_eq!(default_block_elems(4), 2048);
    assert_eq!(default_block_elems(8), 1024);
    assert_eq!(default_block_elems(16), 512);
    assert_eq!(default_block_elems(64), 128);
    assert_eq!(default_block_elems(100), 128);
    assert_eq!(default_block_elems(10000), 128);
}

#[test]
fn every_kernel_matches_reference_on_blocks() {
    let mut rng = StdRng::seed_from_u64(1);
    for kernel in kernels() {
        for s in SIZES {
            // Lengths around every chunk boundary of the SIMD kernels (4 and 32 groups).
            for groups in [0usize, 1, 3, 4, 5, 31, 32, 33, 64, 65, 100, 257] {
                let input = random_bytes(&mut rng, groups * 8 * s);
                let want = ref_trans(&input, s);
                let mut got = vec![0xAAu8; input.len()];
                let n = trans_bit_elem_with(kernel, &input, s, &mut got).unwrap();
                assert_eq!(n, input.len());
                assert_eq!(got, want, "{kernel:?} trans s={s} groups={groups}");
                let mut back = vec![0x55u8; input.len()];
                untrans_bit_elem_with(kernel, &got, s, &mut back).unwrap();
                assert_eq!(back, input, "{kernel:?} untrans s={s} groups={groups}");
            }
        }
    }
}

#[test]
fn simd_matches_scalar_on_random_lengths() {
    let mut rng = StdRng::seed_from_u64(2);
    let simd: Vec<Kernel> = kernels()
        .into_iter()
        .filter(|k| *k != Kernel::Scalar)
        .collect();
    if simd.is_empty() {
        eprintln!("no SIMD kernel on this CPU: nothing to compare");
        return;
    }
    for s in SIZES {
        // Up to 20000 elements; fewer for wide elements to keep the debug run short.
        for _ in 0..8 {
            let n = rng.random_range(0..20000usize * 2 / s.max(2));
            let block = if rng.random_bool(0.5) {
                0
            } else {
                8 * rng.random_range(1..600)
            };
            let input = random_bytes(&mut rng, n * s);
            let mut want = vec![0u8; input.len()];
            bitshuffle_with(Kernel::Scalar, &input, s, block, &mut want).unwrap();
            let mut want_back = vec![0u8; input.len()];
            bitunshuffle_with(Kernel::Scalar, &want, s, block, &mut want_back).unwrap();
            assert_eq!(want_back, input);
            for &k in &simd {
                let mut got = vec![0u8; input.len()];
                bitshuffle_with(k, &input, s, block, &mut got).unwrap();
                assert_eq!(got, want, "{k:?} s={s} n={n} block={block}");
                let mut back = vec![0u8; input.len()];
                bitunshuffle_with(k, &got, s, block, &mut back).unwrap();
                assert_eq!(back, input, "{k:?} unshuffle s={s} n={n} block={block}");
            }
        }
    }
}

#[test]
fn whole_buffer_matches_reference_and_round_trips() {
    let mut rng = StdRng::seed_from_u64(3);
    for s in SIZES {
        for n in [0usize, 1, 7, 8, 9, 127, 1000, 4099 / s + 8, 8197 / s + 8] {
            for block in [0usize, 8, 136] {
                let input = random_bytes(&mut rng, n * s);
                let want = ref_bitshuffle(&input, s, block);
                for k in kernels() {
                    // A larger output buffer is fine; bytes past input.len() stay untouched.
                    let mut got = vec![0xEEu8; input.len() + 5];
                    let w = bitshuffle_with(k, &input, s, block, &mut got).unwrap();
                    assert_eq!(w, input.len());
                    assert_eq!(&got[..w], &want[..], "{k:?} s={s} n={n} block={block}");
                    assert!(got[w..].iter().all(|&b| b == 0xEE));
                    let mut back = vec![0u8; input.len()];
                    bitunshuffle_with(k, &got[..w], s, block, &mut back).unwrap();
                    assert_eq!(back, input);
                }
            }
        }
    }
}

#[test]
fn known_answers_from_c_bitshuffle() {
    // python: bitshuffle.bitshuffle(((np.arange(27, dtype=np.uint64) * 2654435761)
    //                                % 65536).astype(np.uint16))
    let a: Vec<u16> = (0..27u64)
        .map(|i| ((i * 2_654_435_761) % 65536) as u16)
        .collect();
    let bytes: Vec<u8> = a.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut out = vec![0u8; bytes.len()];
    bitshuffle(&bytes, 2, &mut out).unwrap();
    assert_eq!(
        hex(&out),
        "aaaaaaccccccf0f0f000ff00aaaa556666ccb4b496926db28ee371d44aa51873c64a29adc618633ef8e0fe07e05455b5986849e2fa5b"
    );
    // python: bitshuffle.bitshuffle(np.arange(19, dtype=np.uint32) * 0x01020304)
    let x: Vec<u8> = (0..19u32)
        .flat_map(|i| (i.wrapping_mul(0x0102_0304)).to_le_bytes())
        .collect();
    let mut out = vec![0u8; x.len()];
    bitshuffle(&x, 4, &mut out).unwrap();
    assert_eq!(
        hex(&out),
        "00000000aaaaccccf0f000ff00000000aaaa6666b4b438c7c00700f8000000000000aaaaccccf0f000ff000000000000aaaaccccf0f000ff0000000000000000403020104433221148362412"
    );
    let mut back = vec![0u8; x.len()];
    bitunshuffle(&out, 4, &mut back).unwrap();
    assert_eq!(back, x);
}

#[test]
fn argument_errors() {
    let data = [0u8; 64];
    let mut out = [0u8; 64];
    assert!(matches!(
        bitshuffle(&data, 0, &mut out),
        Err(CodecError::InvalidArgument { .. })
    ));
    assert!(matches!(
        bitshuffle(&data[..63], 2, &mut out),
        Err(CodecError::InvalidArgument { .. })
    ));
    assert!(matches!(
        bitshuffle(&data, 2, &mut out[..63]),
        Err(CodecError::OutputTooSmall { need: 64, have: 63 })
    ));
    assert!(matches!(
        bitshuffle_with(Kernel::best(), &data, 2, 12, &mut out),
        Err(CodecError::InvalidArgument { .. })
    ));
    assert!(matches!(
        bitshuffle_with(Kernel::best(), &data, usize::MAX, 8, &mut out),
        Err(CodecError::InvalidArgument { .. })
    ));
    for k in Kernel::ALL {
        // Blocks must be whole groups of 8 elements, and out exactly as long.
        assert!(trans_bit_elem_with(k, &data[..48], 4, &mut out[..48]).is_err());
        assert!(trans_bit_elem_with(k, &data[..32], 4, &mut out[..40]).is_err());
        assert!(untrans_bit_elem_with(k, &data[..30], 3, &mut out[..30]).is_err());
        assert!(untrans_bit_elem_with(k, &data[..24], 0, &mut out[..24]).is_err());
        assert!(trans_bit_elem_with(k, &data[..32], usize::MAX / 4, &mut out[..32]).is_err());
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
