//! Blosc1 through c-blosc: round trips over every compiled-in compressor × shuffle × level ×
//! type size, frame headers against the parameters, and decoding of frames built by hand here
//! with a plain reference byte shuffle / bit shuffle (so c-blosc's SIMD unshuffles are checked
//! against obviously-correct code, independently of its compressors).

use ndflow_codec::blosc::{self, BloscCompressor, BloscParams, BloscShuffle, MAX_OVERHEAD};
use ndflow_codec::CodecError;

/// Deterministic test data: a ramp with a little noise, compressible but not trivial.
fn data(n_bytes: usize, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n_bytes)
        .map(|i| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((i / 7) as u8).wrapping_add((s & 3) as u8)
        })
        .collect()
}

fn available() -> Vec<BloscCompressor> {
    BloscCompressor::ALL
        .into_iter()
        .filter(|c| c.is_available())
        .collect()
}

#[test]
fn build_has_lz4_and_simd_shuffle() {
    let info = blosc::build_info();
    assert!(info.version.starts_with("1.21."), "{}", info.version);
    assert!(info.own_build);
    for c in [
        BloscCompressor::BloscLZ,
        BloscCompressor::LZ4,
        BloscCompressor::LZ4HC,
    ] {
        assert!(info.compressors.contains(&c), "{c:?} missing: {info:?}");
    }
    assert!(!BloscCompressor::Snappy.is_available());
    // Default builds on x86-64 have both SIMD shuffles (NDFLOW_BLOSC_SIMD unset).
    #[cfg(all(target_arch = "x86_64", ndflow_cblosc_avx2))]
    {
        let want = if std::arch::is_x86_feature_detected!("avx2") {
            "avx2"
        } else {
            "sse2"
        };
        assert_eq!(info.shuffle_impl, want);
    }
}

#[test]
fn round_trip_all_settings() {
    let mut comp = Vec::new();
    let mut back = Vec::new();
    for compressor in available() {
        for shuffle in BloscShuffle::ALL {
            for clevel in [0u8, 1, 5, 9] {
                for type_size in [1usize, 2, 4, 8] {
                    // Sizes: tiny (stored), odd (leftover block and leftover elements), large
                    // enough for several automatic blocks.
                    for n in [0usize, 100, 4099 * type_size, 70_000] {
                        let input = data(n, n as u64 + type_size as u64);
                        let params = BloscParams {
                            compressor,
                            clevel,
                            shuffle,
                            num_threads: 1,
                            block_size: 0,
                        };
                        comp.resize(blosc::max_compressed_len(n), 0);
                        let c = blosc::compress(&input, type_size, &params, &mut comp)
                            .unwrap_or_else(|e| panic!("{params:?} ts {type_size} n {n}: {e}"));
                        assert!(c <= n + MAX_OVERHEAD);
                        let info = blosc::frame_info(&comp[..c]).expect("header");
                        assert_eq!(info.nbytes, n);
                        assert_eq!(info.cbytes, c);
                        assert_eq!(info.type_size, type_size);
                        if !info.memcpyed {
                            let fmt = if compressor == BloscCompressor::LZ4HC {
                                BloscCompressor::LZ4
                            } else {
                                compressor
                            };
                            assert_eq!(info.compressor, Some(fmt));
                        }
                        if clevel == 0 {
                            assert!(info.memcpyed);
                            assert_eq!(&comp[MAX_OVERHEAD..c], &input[..]);
                        }
                        // c-blosc records the shuffle it was asked for.
                        assert_eq!(info.shuffle, shuffle, "{params:?} ts {type_size} n {n}");
                        back.clear();
                        back.resize(n + 3, 0xEE);
                        let d = blosc::decompress(&comp[..c], &mut back).expect("decompress");
                        assert_eq!(d, n);
                        assert_eq!(&back[..n], &input[..]);
                        assert_eq!(&back[n..], &[0xEE; 3], "wrote past the frame size");
                    }
                }
            }
        }
    }
}

#[test]
fn threads_and_block_sizes_round_trip() {
    let input = data(1 << 20, 7);
    let base = BloscParams {
        compressor: BloscCompressor::LZ4,
        clevel: 5,
        shuffle: BloscShuffle::Byte,
        num_threads: 1,
        block_size: 0,
    };
    let mut one = vec![0; blosc::max_compressed_len(input.len())];
    let n1 = blosc::compress(&input, 2, &base, &mut one).expect("1 thread");
    let mut four = vec![0; one.len()];
    let p4 = BloscParams {
        num_threads: 4,
        ..base
    };
    let n4 = blosc::compress(&input, 2, &p4, &mut four).expect("4 threads");
    // c-blosc's threads append blocks in the order they finish (the block-start table says
    // where each went), so only the size and the decoded data are reproducible.
    assert_eq!(n1, n4);
    let mut back = vec![0; input.len()];
    blosc::decompress_mt(&four[..n4], &mut back, 3).expect("3 threads");
    assert_eq!(back, input);
    back.fill(0);
    blosc::decompress(&one[..n1], &mut back).expect("1 thread");
    assert_eq!(back, input);

    for bs in [1usize, 128, 1000, 65_536, 1 << 30] {
        let p = BloscParams {
            block_size: bs,
            ..base
        };
        let n = blosc::compress(&input, 2, &p, &mut one).expect("forced block size");
        let info = blosc::frame_info(&one[..n]).expect("header");
        // c-blosc clamps forced sizes to 128 .. input (and enlarges them for split codecs),
        // always a multiple of the type size.
        assert!(info.block_size >= 128 && info.block_size <= input.len());
        assert_eq!(info.block_size % 2, 0);
        back.fill(0);
        blosc::decompress(&one[..n], &mut back).expect("decompress");
        assert_eq!(back, input);
    }
}

#[test]
fn incompressible_data_fits_max_len_and_small_output_errors() {
    let mut s = 0x1234_5678_9abc_def0u64;
    let input: Vec<u8> = (0..10_000)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 56) as u8
        })
        .collect();
    let p = BloscParams {
        compressor: BloscCompressor::LZ4,
        clevel: 9,
        shuffle: BloscShuffle::Bit,
        ..BloscParams::default()
    };
    let mut out = vec![0; blosc::max_compressed_len(input.len())];
    let n = blosc::compress(&input, 1, &p, &mut out).expect("compress");
    assert_eq!(n, input.len() + MAX_OVERHEAD);
    assert!(blosc::frame_info(&out[..n]).expect("header").memcpyed);

    let mut small = vec![0; 5_000];
    assert!(matches!(
        blosc::compress(&input, 1, &p, &mut small),
        Err(CodecError::OutputTooSmall { .. })
    ));
    assert!(matches!(
        blosc::compress(&input, 1, &p, &mut small[..10]),
        Err(CodecError::OutputTooSmall { .. })
    ));
    let mut back = vec![0; input.len() - 1];
    assert_eq!(
        blosc::decompress(&out[..n], &mut back),
        Err(CodecError::OutputTooSmall {
            need: input.len(),
            have: input.len() - 1
        })
    );
}

#[test]
fn invalid_arguments() {
    let input = [0u8; 64];
    let mut out = [0u8; 128];
    let p = BloscParams::default();
    for ts in [0usize, 256] {
        assert!(matches!(
            blosc::compress(&input, ts, &p, &mut out),
            Err(CodecError::InvalidArgument { .. })
        ));
    }
    let snappy = BloscParams {
        compressor: BloscCompressor::Snappy,
        ..p
    };
    assert!(matches!(
        blosc::compress(&input, 1, &snappy, &mut out),
        Err(CodecError::InvalidArgument { .. })
    ));
    // Out-of-range settings are clamped, not rejected.
    let wild = BloscParams {
        clevel: 200,
        num_threads: 0,
        ..p
    };
    let n = blosc::compress(&input, 1, &wild, &mut out).expect("clamped");
    let mut back = [1u8; 64];
    blosc::decompress(&out[..n], &mut back).expect("decompress");
    assert_eq!(back, input);
}

#[test]
fn trailing_bytes_are_ignored_and_truncation_is_an_error() {
    let input = data(50_000, 3);
    let p = BloscParams {
        compressor: BloscCompressor::LZ4,
        clevel: 5,
        shuffle: BloscShuffle::Byte,
        ..BloscParams::default()
    };
    let mut comp = vec![0; blosc::max_compressed_len(input.len()) + 10];
    let n = blosc::compress(&input, 2, &p, &mut comp).expect("compress");
    let mut back = vec![0; input.len()];
    assert_eq!(
        blosc::decompress(&comp[..n + 10], &mut back),
        Ok(input.len())
    );
    assert_eq!(back, input);
    for cut in [0, 1, 15, 16, 17, n / 2, n - 1] {
        assert!(
            matches!(
                blosc::decompress(&comp[..cut], &mut back),
                Err(CodecError::Corrupt { .. })
            ),
            "cut {cut}"
        );
    }
}

// ---- hand-built frames with reference shuffles ----------------------------------------

/// Plain byte shuffle: byte j of element i goes to `j * n_elems + i`; the bytes after the
/// last whole element are copied.
fn ref_byte_shuffle(block: &[u8], ts: usize) -> Vec<u8> {
    let n = block.len() / ts;
    let mut out = block.to_vec();
    for i in 0..n {
        for j in 0..ts {
            out[j * n + i] = block[i * ts + j];
        }
    }
    out
}

/// Plain bit shuffle (bitshuffle's layout): bit b of byte j of element i goes to bit
/// `i % 8` of byte `(8j + b) * n/8 + i/8`. Only when the element count is a multiple of 8;
/// otherwise c-blosc stores the block unchanged. Trailing bytes are copied.
fn ref_bit_shuffle(block: &[u8], ts: usize) -> Vec<u8> {
    let n = block.len() / ts;
    let mut out = block.to_vec();
    if n & 7 != 0 {
        return out;
    }
    out[..n * ts].fill(0);
    let row = n / 8;
    for i in 0..n {
        for j in 0..ts {
            for b in 0..8 {
                let bit = (block[i * ts + j] >> b) & 1;
                out[(8 * j + b) * row + i / 8] |= bit << (i % 8);
            }
        }
    }
    out
}

/// A frame whose every block/split is stored (compressed length == split length, which
/// c-blosc copies verbatim), after the reference shuffle. `split` writes `ts` splits per full
/// block where c-blosc's reader expects them.
fn stored_frame(
    input: &[u8],
    ts: usize,
    block: usize,
    shuffle: BloscShuffle,
    split: bool,
) -> Vec<u8> {
    let nblocks = input.len().div_ceil(block);
    let mut flags = 0u8; // compressor format 0 = BloscLZ
    match shuffle {
        BloscShuffle::None => {}
        BloscShuffle::Byte => flags |= 0x01,
        BloscShuffle::Bit => flags |= 0x04,
    }
    if !split {
        flags |= 0x10;
    }
    let mut f = vec![2u8, 1, flags, ts as u8];
    f.extend_from_slice(&(input.len() as u32).to_le_bytes());
    f.extend_from_slice(&(block as u32).to_le_bytes());
    f.extend_from_slice(&[0; 4]); // frame size, patched below
    let starts_at = f.len();
    f.resize(starts_at + 4 * nblocks, 0);
    for (k, chunk) in input.chunks(block).enumerate() {
        let start = f.len() as u32;
        f[starts_at + 4 * k..starts_at + 4 * k + 4].copy_from_slice(&start.to_le_bytes());
        let leftover = chunk.len() < block;
        let shuffled = match shuffle {
            BloscShuffle::Byte if ts > 1 => ref_byte_shuffle(chunk, ts),
            BloscShuffle::Bit if chunk.len() >= ts => ref_bit_shuffle(chunk, ts),
            _ => chunk.to_vec(),
        };
        let nsplits = if split && ts <= 16 && chunk.len() / ts >= 128 && !leftover {
            ts
        } else {
            1
        };
        for s in shuffled.chunks_exact(chunk.len() / nsplits) {
            f.extend_from_slice(&(s.len() as u32).to_le_bytes());
            f.extend_from_slice(s);
        }
    }
    let total = f.len() as u32;
    f[12..16].copy_from_slice(&total.to_le_bytes());
    f
}

#[test]
fn hand_built_frames_decode_with_reference_shuffles() {
    for ts in [1usize, 2, 3, 4, 8, 16] {
        for shuffle in BloscShuffle::ALL {
            for split in [false, true] {
                // Blocks large enough for the AVX2/SSE2 paths, plus odd sizes for the generic
                // remainders and a leftover block.
                for (n, block) in [
                    (4096 * ts, 2048 * ts),
                    (10_007, 4096),
                    (1000, 256),
                    (160, 128),
                ] {
                    let block = block / ts * ts;
                    let input = data(n, (ts * 31 + n) as u64);
                    let frame = stored_frame(&input, ts, block, shuffle, split);
                    let mut back = vec![0u8; n];
                    let r = blosc::decompress(&frame, &mut back);
                    assert_eq!(r, Ok(n), "ts {ts} {shuffle:?} split {split} n {n}");
                    assert_eq!(
                        back, input,
                        "ts {ts} {shuffle:?} split {split} n {n} block {block}"
                    );
                }
            }
        }
    }
}

#[test]
fn compressed_frames_match_hand_built_decoding() {
    // Our compressor's frame and a hand-built frame of the same data decode to the same
    // bytes, for shuffles that c-blosc applies (type sizes where SIMD kernels exist).
    for ts in [2usize, 4, 8] {
        for shuffle in [BloscShuffle::Byte, BloscShuffle::Bit] {
            let input = data(65_536 * ts, ts as u64);
            let p = BloscParams {
                compressor: BloscCompressor::BloscLZ,
                clevel: 9,
                shuffle,
                ..BloscParams::default()
            };
            let mut comp = vec![0; blosc::max_compressed_len(input.len())];
            let n = blosc::compress(&input, ts, &p, &mut comp).expect("compress");
            let mut a = vec![0; input.len()];
            blosc::decompress(&comp[..n], &mut a).expect("ours");
            let frame = stored_frame(&input, ts, 8192 * ts, shuffle, true);
            let mut b = vec![0; input.len()];
            blosc::decompress(&frame, &mut b).expect("hand-built");
            assert_eq!(a, input);
            assert_eq!(b, input);
        }
    }
}

#[test]
fn concurrent_calls_from_many_threads() {
    // The contextual API keeps no global state: results must not depend on concurrency.
    std::thread::scope(|s| {
        for t in 0..4u64 {
            s.spawn(move || {
                let input = data(200_000, t);
                let p = BloscParams {
                    compressor: BloscCompressor::ALL[(t % 3) as usize],
                    clevel: 5,
                    shuffle: BloscShuffle::ALL[(t % 3) as usize],
                    ..BloscParams::default()
                };
                let mut comp = vec![0; blosc::max_compressed_len(input.len())];
                let mut back = vec![0; input.len()];
                for _ in 0..20 {
                    let n = blosc::compress(&input, 4, &p, &mut comp).expect("compress");
                    blosc::decompress(&comp[..n], &mut back).expect("decompress");
                    assert_eq!(back, input);
                }
            });
        }
    });
}
