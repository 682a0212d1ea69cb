//! Randomised corruption of every decoder of this crate's lz4 / lz4hdf5 / bslz4 / zlib /
//! bitshuffle modules: truncation at every length, flipped bytes, random garbage, absurd
//! header sizes. Each call must return `Err` or `Ok(out.len())`, must not panic (nothing
//! is caught: a panic fails the test) and must not write past `out` (guard bytes after the
//! output slice are checked after every call).
//!
//! 237 656 decoder executions in total (printed; asserted to be at least 100 000), about
//! 5 s in a debug build on a busy 2-core machine.

use ndflow_codec::bslz4::{self, BsFraming};
use ndflow_codec::{bitshuffle, lz4, zlib, CodecError};
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

const GUARD: usize = 64;
const GUARD_BYTE: u8 = 0xA5;

#[derive(Clone, Copy, Debug)]
enum Dec {
    Lz4,
    Lz4Hdf5,
    Bslz4(usize, usize, BsFraming),
    Zlib,
    Unshuffle(usize),
}

struct Harness {
    buf: Vec<u8>,
    runs: usize,
    oks: usize,
}

impl Harness {
    /// Decodes `input` into an `out_len` window followed by guard bytes.
    fn run(&mut self, dec: Dec, input: &[u8], out_len: usize) {
        self.buf.clear();
        self.buf.resize(out_len + GUARD, GUARD_BYTE);
        let out = &mut self.buf[..out_len];
        let r: Result<usize, CodecError> = match dec {
            Dec::Lz4 => lz4::decompress_block(input, out),
            Dec::Lz4Hdf5 => lz4::decompress_hdf5(input, out),
            Dec::Bslz4(s, block, f) => bslz4::decompress_with_block(input, s, block, f, out),
            Dec::Zlib => zlib::decompress(input, out),
            Dec::Unshuffle(s) => bitshuffle::bitunshuffle(input, s, out),
        };
        if let Ok(n) = r {
            // Bit-unshuffling any bytes is valid; it writes exactly the input length.
            let want = match dec {
                Dec::Unshuffle(_) => input.len(),
                _ => out_len,
            };
            assert_eq!(n, want, "{dec:?}: Ok with the wrong length");
            self.oks += 1;
        }
        assert!(
            self.buf[out_len..].iter().all(|&b| b == GUARD_BYTE),
            "{dec:?}: wrote past the output buffer"
        );
        self.runs += 1;
    }
}

fn sample(rng: &mut StdRng, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    match rng.random_range(0..3) {
        0 => rng.fill_bytes(&mut v),
        1 => v.iter_mut().for_each(|b| {
            *b = if rng.random_ratio(1, 6) {
                rng.random()
            } else {
                0
            }
        }),
        _ => v
            .iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = (i / 7) as u8),
    }
    v
}

/// A valid compressed stream, the decoder for it and the uncompressed length.
fn seed(rng: &mut StdRng, kind: usize) -> (Vec<u8>, Dec, usize) {
    let s = [1usize, 2, 4, 8, 3][rng.random_range(0..5)];
    let n = rng.random_range(0..400usize);
    let data = sample(rng, n * s);
    let len = data.len();
    // Enough for every codec, including lz4hdf5 with 1-byte blocks (5 bytes per byte).
    let mut out = vec![0u8; 5 * len + 4096];
    match kind {
        0 => {
            let c = lz4::compress_block(&data, &mut out).unwrap();
            (out[..c].to_vec(), Dec::Lz4, len)
        }
        1 => {
            let block = [0usize, 1, 16, 100, 333][rng.random_range(0..5)];
            let c = lz4::compress_hdf5(&data, block, &mut out).unwrap();
            (out[..c].to_vec(), Dec::Lz4Hdf5, len)
        }
        2 | 3 => {
            let f = if kind == 2 {
                BsFraming::AreaDetector
            } else {
                BsFraming::Hdf5
            };
            let block = [0usize, 8, 16, 64][rng.random_range(0..4)];
            let c = bslz4::compress(&data, s, block, f, &mut out).unwrap();
            (out[..c].to_vec(), Dec::Bslz4(s, block, f), len)
        }
        _ => {
            let c = zlib::compress(&data, rng.random_range(0..10), &mut out).unwrap();
            (out[..c].to_vec(), Dec::Zlib, len)
        }
    }
}

#[test]
fn decoders_survive_corruption() {
    let mut rng = StdRng::seed_from_u64(0xC0DEC);
    let mut h = Harness {
        buf: Vec::new(),
        runs: 0,
        oks: 0,
    };
    for round in 0..300 {
        let kind = round % 5;
        let (good, dec, len) = seed(&mut rng, kind);
        // The pristine stream decodes.
        let before = h.oks;
        h.run(dec, &good, len);
        assert_eq!(h.oks, before + 1, "{dec:?}: a valid stream failed");
        // Truncation at every length (every 3rd for long zlib streams, which are slow in
        // a debug build).
        let step = if good.len() > 600 { 3 } else { 1 };
        for cut in (0..good.len()).step_by(step) {
            h.run(dec, &good[..cut], len);
        }
        // Wrong expected sizes.
        for out_len in [0, len.saturating_sub(1), len + 1, len + 8, 2 * len + 1] {
            h.run(dec, &good, out_len);
        }
        // 1 to 4 random byte changes.
        for _ in 0..400 {
            let mut bad = good.clone();
            if bad.is_empty() {
                break;
            }
            for _ in 0..rng.random_range(1..=4) {
                let at = rng.random_range(0..bad.len());
                if rng.random_bool(0.5) {
                    bad[at] ^= 1 << rng.random_range(0..8);
                } else {
                    bad[at] = rng.random();
                }
            }
            h.run(dec, &bad, len);
        }
        // Garbage appended or spliced in.
        let mut extra = good.clone();
        extra.extend_from_slice(&[0, 1, 2]);
        h.run(dec, &extra, len);
    }
    // Random garbage for every decoder and several element sizes / lengths.
    let decs = [
        Dec::Lz4,
        Dec::Lz4Hdf5,
        Dec::Zlib,
        Dec::Bslz4(1, 0, BsFraming::AreaDetector),
        Dec::Bslz4(2, 0, BsFraming::Hdf5),
        Dec::Bslz4(4, 8, BsFraming::AreaDetector),
        Dec::Bslz4(8, 0, BsFraming::Hdf5),
        Dec::Bslz4(0, 0, BsFraming::AreaDetector),
        Dec::Unshuffle(2),
        Dec::Unshuffle(5),
    ];
    for i in 0..20_000 {
        let dec = decs[i % decs.len()];
        let n = rng.random_range(0..200);
        let mut g = vec![0u8; n];
        rng.fill_bytes(&mut g);
        let out_len = rng.random_range(0..300);
        h.run(dec, &g, out_len);
    }
    // Absurd headers: huge totals, huge / zero / odd block sizes, huge block lengths.
    let totals = [0u64, 1, 7, 8, 100, 1 << 31, u64::MAX, u64::MAX / 2];
    let blocks = [0u32, 1, 8, 7, 16, 1 << 30, u32::MAX];
    let lens = [0u32, 1, 4, 100, 0x7FFF_FFFF, u32::MAX];
    for &t in &totals {
        for &b in &blocks {
            for &l in &lens {
                let mut s = Vec::new();
                s.extend(t.to_be_bytes());
                s.extend(b.to_be_bytes());
                s.extend(l.to_be_bytes());
                s.extend([0x10, 0x41, 0x42, 0x43]);
                let out_len = usize::try_from(t).unwrap_or(usize::MAX).min(256);
                h.run(Dec::Lz4Hdf5, &s, out_len);
                h.run(Dec::Bslz4(2, 0, BsFraming::Hdf5), &s, out_len & !1);
                h.run(Dec::Bslz4(1, 0, BsFraming::AreaDetector), &s[12..], out_len);
                h.run(Dec::Lz4, &s[12..], out_len);
            }
        }
    }
    println!("decoder executions: {} ({} Ok)", h.runs, h.oks);
    assert!(h.runs >= 100_000, "only {} executions", h.runs);
}
