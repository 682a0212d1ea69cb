//! The short run of every fuzz target, on stable Rust (CI has no nightly, so cargo-fuzz cannot
//! run there): each target's seed corpus (`fuzz/corpus/<name>/`), then a fixed number of
//! seeded random mutations of it (bit flips, interesting bytes, truncation, insertion,
//! splicing, random bytes). Deterministic: the same inputs every run. Nothing may panic.
//! The long, coverage-guided run is `scripts/fuzz.sh` (libFuzzer).
//!
//! `FUZZ_SMOKE_RUNS=N` changes the mutations per target (default 20,000 in release builds,
//! 1,000 in debug builds).

use std::path::PathBuf;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn runs() -> usize {
    std::env::var("FUZZ_SMOKE_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if cfg!(debug_assertions) {
            1_000
        } else {
            20_000
        })
}

fn corpus(name: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(name);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect()
}

const INTERESTING: [u8; 8] = [0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF, 0x10, 0x20];

fn mutate(rng: &mut StdRng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut b = seeds[rng.random_range(0..seeds.len())].clone();
    for _ in 0..rng.random_range(1..4) {
        match rng.random_range(0..7) {
            0 if !b.is_empty() => {
                let i = rng.random_range(0..b.len());
                b[i] ^= 1 << rng.random_range(0..8);
            }
            1 if !b.is_empty() => {
                let i = rng.random_range(0..b.len());
                b[i] = INTERESTING[rng.random_range(0..INTERESTING.len())];
            }
            2 => {
                let n = rng.random_range(0..=b.len());
                b.truncate(n);
            }
            3 => {
                let i = rng.random_range(0..=b.len());
                let junk: Vec<u8> = (0..rng.random_range(1..16)).map(|_| rng.random()).collect();
                b.splice(i..i, junk);
            }
            4 if b.len() >= 4 => {
                // A 16- or 32-bit field set to an extreme, at any offset.
                let i = rng.random_range(0..b.len() - 3);
                let w = if rng.random_bool(0.5) { 2 } else { 4 };
                let v = [0u8, 0xFF, 0x7F][rng.random_range(0..3)];
                b[i..i + w].fill(v);
            }
            5 => {
                // The tail of another seed spliced in.
                let other = &seeds[rng.random_range(0..seeds.len())];
                let i = rng.random_range(0..=b.len());
                let j = rng.random_range(0..=other.len());
                b.truncate(i);
                b.extend_from_slice(&other[j..]);
            }
            6 => b = (0..rng.random_range(0..64)).map(|_| rng.random()).collect(),
            _ => {}
        }
    }
    b
}

fn smoke(name: &str) {
    let f = ndflow_fuzz::target(name).expect("a target of that name");
    let seeds = corpus(name);
    assert!(!seeds.is_empty(), "{name}: no seed corpus");
    for s in &seeds {
        f(s);
    }
    let mut rng = StdRng::seed_from_u64(name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, c| {
        (h ^ u64::from(c)).wrapping_mul(0x100_0000_01b3)
    }));
    let n = runs();
    let start = std::time::Instant::now();
    for _ in 0..n {
        f(&mutate(&mut rng, &seeds));
    }
    println!(
        "{name}: {} seeds + {n} mutations in {:.2} s, no panic",
        seeds.len(),
        start.elapsed().as_secs_f64()
    );
}

macro_rules! smoke_tests {
    ($($name:ident),* $(,)?) => {
        $(#[test] fn $name() { smoke(stringify!($name)); })*

        /// Every target of the library has its test here.
        #[test]
        fn every_target_is_smoked() {
            let here = [$(stringify!($name)),*];
            for (t, _) in ndflow_fuzz::TARGETS {
                assert!(here.contains(t), "{t} has no smoke test");
            }
            assert_eq!(here.len(), ndflow_fuzz::TARGETS.len());
        }
    };
}

smoke_tests!(
    pva_server,
    pva_server_cmd,
    pva_datagram,
    pva_client,
    pva_wire,
    ca_server,
    ca_server_cmd,
    ca_datagram,
    ca_client,
    ca_dbr,
    eiger_stream,
    codec_lz4,
    codec_bslz4,
    codec_blosc,
    codec_zlib,
    codec_jpeg,
    codec_bitshuffle,
    tiff_read,
    hdf5_layout,
    ndattr_xml,
    config_toml,
    genicam_xml,
);
