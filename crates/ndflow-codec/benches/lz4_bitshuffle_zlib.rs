//! Throughput of bitshuffle (scalar vs AVX2), bitshuffle-LZ4, raw LZ4, lz4hdf5 and zlib on
//! 1024x1024 uint16 frames, one thread, output buffers reused across iterations.
//! MB/s are of uncompressed bytes. Data sets as in the reference study: `poisson_low`
//! (Poisson, mean 0.5), `poisson_ramp` (mean 1 -> 200 across x), `ramp` ((x + y) * 16).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ndflow_codec::bitshuffle::{bitshuffle_with, bitunshuffle_with, Kernel};
use ndflow_codec::bslz4::{self, BsFraming};
use ndflow_codec::{lz4, zlib};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::hint::black_box;

const W: usize = 1024;

fn poisson(rng: &mut StdRng, lambda: f64) -> u16 {
    if lambda < 30.0 {
        // Knuth: multiply uniforms until below e^-lambda.
        let limit = (-lambda).exp();
        let mut k = 0u16;
        let mut p: f64 = rng.random();
        while p > limit {
            k += 1;
            p *= rng.random::<f64>();
        }
        k
    } else {
        // Normal approximation (Box-Muller) is close enough for a compression benchmark.
        let u1: f64 = rng.random::<f64>().max(1e-300);
        let u2: f64 = rng.random();
        let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        (lambda + z * lambda.sqrt()).round().max(0.0) as u16
    }
}

fn datasets() -> Vec<(&'static str, Vec<u8>)> {
    let mut rng = StdRng::seed_from_u64(7);
    let low: Vec<u16> = (0..W * W).map(|_| poisson(&mut rng, 0.5)).collect();
    let pramp: Vec<u16> = (0..W * W)
        .map(|i| poisson(&mut rng, 1.0 + 199.0 * (i % W) as f64 / (W - 1) as f64))
        .collect();
    let ramp: Vec<u16> = (0..W * W).map(|i| ((i % W + i / W) * 16) as u16).collect();
    let bytes = |v: Vec<u16>| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    vec![
        ("poisson_low", bytes(low)),
        ("poisson_ramp", bytes(pramp)),
        ("ramp", bytes(ramp)),
    ]
}

fn bench(c: &mut Criterion) {
    let sets = datasets();
    let n = W * W * 2;
    let mut out = vec![0u8; lz4::max_hdf5_len(n, 0).max(zlib::max_compressed_len(n))];
    let mut back = vec![0u8; n];

    let mut g = c.benchmark_group("bitshuffle");
    g.throughput(Throughput::Bytes(n as u64));
    let (_, low) = &sets[0];
    for k in Kernel::ALL.into_iter().filter(|k| k.is_available()) {
        g.bench_function(BenchmarkId::new("shuffle", format!("{k:?}")), |b| {
            b.iter(|| bitshuffle_with(k, black_box(low), 2, 0, &mut out[..n]))
        });
        bitshuffle_with(k, low, 2, 0, &mut back).unwrap();
        g.bench_function(BenchmarkId::new("unshuffle", format!("{k:?}")), |b| {
            b.iter(|| bitunshuffle_with(k, black_box(&back), 2, 0, &mut out[..n]))
        });
    }
    g.finish();

    for (name, data) in &sets {
        let mut g = c.benchmark_group(format!("lz4_bitshuffle_zlib/{name}"));
        g.throughput(Throughput::Bytes(n as u64));
        let cn = bslz4::compress(data, 2, 0, BsFraming::AreaDetector, &mut out).unwrap();
        let comp = out[..cn].to_vec();
        println!("{name}: bslz4 ratio {:.2}", n as f64 / cn as f64);
        g.bench_function("bslz4_compress", |b| {
            b.iter(|| bslz4::compress(black_box(data), 2, 0, BsFraming::AreaDetector, &mut out))
        });
        g.bench_function("bslz4_decompress", |b| {
            b.iter(|| bslz4::decompress(black_box(&comp), 2, BsFraming::AreaDetector, &mut back))
        });

        let cn = lz4::compress_block(data, &mut out).unwrap();
        let comp = out[..cn].to_vec();
        println!("{name}: lz4 ratio {:.2}", n as f64 / cn as f64);
        g.bench_function("lz4_compress", |b| {
            b.iter(|| lz4::compress_block(black_box(data), &mut out))
        });
        g.bench_function("lz4_decompress", |b| {
            b.iter(|| lz4::decompress_block(black_box(&comp), &mut back))
        });

        let cn = lz4::compress_hdf5(data, 0, &mut out).unwrap();
        let comp = out[..cn].to_vec();
        g.bench_function("lz4hdf5_decompress", |b| {
            b.iter(|| lz4::decompress_hdf5(black_box(&comp), &mut back))
        });

        let cn = zlib::compress(data, 1, &mut out).unwrap();
        let comp = out[..cn].to_vec();
        println!("{name}: zlib(1) ratio {:.2}", n as f64 / cn as f64);
        g.bench_function("zlib1_compress", |b| {
            b.iter(|| zlib::compress(black_box(data), 1, &mut out))
        });
        g.bench_function("zlib_decompress", |b| {
            b.iter(|| zlib::decompress(black_box(&comp), &mut back))
        });
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
