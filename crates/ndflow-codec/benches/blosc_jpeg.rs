//! Blosc (LZ4 level 5 with byte and bit shuffle, one c-blosc thread) and JPEG (q90) speed on
//! 1024×1024 frames. MB/s count uncompressed bytes; for JPEG "elem/s" are pixels.
//!
//! The frames are the ones `blosc_jpeg_cli gen` writes and the Python test generates, so
//! `python python/tests/test_codec_blosc_jpeg.py bench` gives python-blosc's numbers for the
//! same data. Run: `cargo bench -p ndflow-codec --bench blosc_jpeg`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ndflow_codec::blosc::{self, BloscCompressor, BloscParams, BloscShuffle};
use ndflow_codec::jpeg;

const W: usize = 1024;
const H: usize = 1024;

/// P(X < k+1) · 2^64 for X ~ Poisson(0.5), k = 0..11 (same table as blosc_jpeg_cli and Python).
const POISSON_HALF_CDF: [u64; 12] = [
    0x9B45_97E3_7CB0_4FF3,
    0xE8E8_63D5_3B08_77ED,
    0xFC51_16D1_AA9E_81EC,
    0xFF8D_34A6_67E2_2E41,
    0xFFF4_B860_FF8A_A3CB,
    0xFFFF_125A_0EB5_15F3,
    0xFFFF_EF2E_CFF8_9F76,
    0xFFFF_FEF4_DDC6_9700,
    0xFFFF_FFF1_3EA3_7678,
    0xFFFF_FFFF_4405_111B,
    0xFFFF_FFFF_F77D_25A3,
    0xFFFF_FFFF_FFA5_83AA,
];

fn splitmix64(i: u64, seed: u64) -> u64 {
    let mut z = seed.wrapping_add((i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn poisson_frame() -> Vec<u8> {
    (0..(W * H) as u64)
        .flat_map(|i| {
            let x = splitmix64(i, 2026);
            let k = POISSON_HALF_CDF.iter().take_while(|&&t| x >= t).count() as u16;
            k.to_le_bytes()
        })
        .collect()
}

fn ramp_frame() -> Vec<u8> {
    (0..H)
        .flat_map(|y| (0..W).flat_map(move |x| (((x + y) * 16) as u16).to_le_bytes()))
        .collect()
}

/// 8-bit camera-like image for JPEG: a gentle gradient with Poisson-like noise.
fn mono8_frame() -> Vec<u8> {
    (0..(W * H) as u64)
        .map(|i| {
            let (x, y) = (i as usize % W, i as usize / W);
            let noise = POISSON_HALF_CDF
                .iter()
                .take_while(|&&t| splitmix64(i, 7) >= t)
                .count();
            (((x + y) / 8) as u8).wrapping_add(noise as u8 * 4)
        })
        .collect()
}

fn bench_blosc(c: &mut Criterion) {
    for (data_name, data) in [("poisson0.5", poisson_frame()), ("ramp", ramp_frame())] {
        for (shuffle_name, shuffle) in [("byte", BloscShuffle::Byte), ("bit", BloscShuffle::Bit)] {
            let params = BloscParams {
                compressor: BloscCompressor::LZ4,
                clevel: 5,
                shuffle,
                num_threads: 1,
                block_size: 0,
            };
            let mut comp = vec![0u8; blosc::max_compressed_len(data.len())];
            let n = blosc::compress(&data, 2, &params, &mut comp).expect("compress");
            let mut back = vec![0u8; data.len()];
            blosc::decompress(&comp[..n], &mut back).expect("decompress");
            assert_eq!(back, data);
            eprintln!(
                "blosc lz4/5 {shuffle_name} {data_name}: ratio {:.3}",
                data.len() as f64 / n as f64
            );

            let mut g = c.benchmark_group(format!("blosc_lz4_5_{shuffle_name}/{data_name}"));
            g.throughput(Throughput::Bytes(data.len() as u64));
            g.bench_function("compress", |b| {
                b.iter(|| blosc::compress(black_box(&data), 2, &params, &mut comp))
            });
            let frame = comp[..n].to_vec();
            g.bench_function("decompress", |b| {
                b.iter(|| blosc::decompress(black_box(&frame), &mut back))
            });
            g.finish();
        }
    }
}

fn bench_jpeg(c: &mut Criterion) {
    let px = mono8_frame();
    let mut out = vec![0u8; jpeg::max_compressed_len(W, H, 1)];
    let n = jpeg::compress(&px, W, H, 1, 90, &mut out).expect("encode");
    eprintln!("jpeg mono q90 1024x1024: {n} bytes");
    let mut g = c.benchmark_group("jpeg_mono_q90_1024");
    g.throughput(Throughput::Elements((W * H) as u64));
    g.bench_function("encode", |b| {
        b.iter(|| jpeg::compress(black_box(&px), W, H, 1, 90, &mut out))
    });
    let j = out[..n].to_vec();
    let mut back = vec![0u8; W * H];
    g.bench_function("decode", |b| {
        b.iter(|| jpeg::decompress(black_box(&j), &mut back))
    });
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_blosc, bench_jpeg
}
criterion_main!(benches);
