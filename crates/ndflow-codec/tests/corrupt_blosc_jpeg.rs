//! Randomized corruption of Blosc frames and JPEG streams: truncations, byte flips, random
//! bytes, garbage behind a plausible header, absurd header sizes, spliced streams, and
//! output buffers that are exact, short, long or empty. Every decode must return (an error
//! or the right length), never panic, never write past its output slice (checked with guard
//! bytes behind the slice) and never claim more bytes than the slice holds.
//!
//! Run with `--nocapture` to see the execution counts.

use std::time::Instant;

use ndflow_codec::blosc::{self, BloscCompressor, BloscParams, BloscShuffle};
use ndflow_codec::jpeg::{self, JpegDecoder};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const GUARD: usize = 64;
const GUARD_BYTE: u8 = 0xA5;

/// An output slice of `len` bytes followed by guard bytes.
struct Guarded {
    buf: Vec<u8>,
    len: usize,
}

impl Guarded {
    fn new() -> Self {
        Self {
            buf: Vec::new(),
            len: 0,
        }
    }

    fn reset(&mut self, len: usize) -> &mut [u8] {
        self.len = len;
        self.buf.clear();
        self.buf.resize(len + GUARD, GUARD_BYTE);
        &mut self.buf[..len]
    }

    fn check(&self, what: &str) {
        assert!(
            self.buf[self.len..].iter().all(|&b| b == GUARD_BYTE),
            "{what}: wrote past the {}-byte output",
            self.len
        );
    }
}

fn pick<T: Copy>(rng: &mut StdRng, items: &[T]) -> T {
    items[rng.random_range(0..items.len())]
}

/// Mutations shared by both formats; `header` is the length of the part worth aiming at.
fn mutate(rng: &mut StdRng, src: &[u8], other: &[u8], header: usize) -> Vec<u8> {
    let mut v = src.to_vec();
    match rng.random_range(0..8) {
        7 => {} // unchanged: the accepting path runs too
        0 => v.truncate(rng.random_range(0..src.len().max(1))),
        1 => {
            for _ in 0..rng.random_range(1..=8) {
                let i = if rng.random_bool(0.5) {
                    rng.random_range(0..header.min(v.len()).max(1))
                } else {
                    rng.random_range(0..v.len().max(1))
                };
                if let Some(b) = v.get_mut(i) {
                    *b ^= 1 << rng.random_range(0..8);
                }
            }
        }
        2 => {
            for _ in 0..rng.random_range(1..=4) {
                let i = rng.random_range(0..v.len().max(1));
                if let Some(b) = v.get_mut(i) {
                    *b = rng.random();
                }
            }
        }
        3 => {
            // Garbage behind the original header.
            let keep = header.min(v.len());
            v.truncate(keep);
            let extra = rng.random_range(0..2048);
            v.extend((0..extra).map(|_| rng.random::<u8>()));
        }
        4 => {
            // Splice: the head of one stream, the tail of another.
            let a = rng.random_range(0..=v.len());
            let b = rng.random_range(0..=other.len());
            v.truncate(a);
            v.extend_from_slice(&other[b..]);
        }
        5 => {
            let n = rng.random_range(0..300);
            v = (0..n).map(|_| rng.random()).collect();
        }
        _ => {
            // Zero or 0xFF a run.
            if !v.is_empty() {
                let a = rng.random_range(0..v.len());
                let b = (a + rng.random_range(1..64)).min(v.len());
                let fill = if rng.random_bool(0.5) { 0 } else { 0xFF };
                v[a..b].fill(fill);
            }
        }
    }
    v
}

fn blosc_corpus(rng: &mut StdRng) -> Vec<(Vec<u8>, usize)> {
    let mut corpus = Vec::new();
    let compressors: Vec<BloscCompressor> = BloscCompressor::ALL
        .into_iter()
        .filter(|c| c.is_available())
        .collect();
    for &compressor in &compressors {
        for shuffle in BloscShuffle::ALL {
            for ts in [1usize, 2, 4, 8, 3] {
                for (n, block) in [
                    (1000, 0),
                    (8_000, 0),
                    (8_000, 512),
                    (16_384, 2048),
                    (100, 0),
                ] {
                    let input: Vec<u8> = (0..n)
                        .map(|i| ((i / 5) as u8).wrapping_add(rng.random_range(0..3)))
                        .collect();
                    let p = BloscParams {
                        compressor,
                        clevel: pick(rng, &[0u8, 1, 5, 9]),
                        shuffle,
                        num_threads: 1,
                        block_size: block,
                    };
                    let mut out = vec![0; blosc::max_compressed_len(n)];
                    if let Ok(c) = blosc::compress(&input, ts, &p, &mut out) {
                        out.truncate(c);
                        corpus.push((out, n));
                    }
                }
            }
        }
    }
    corpus
}

/// Overwrites one header field of a Blosc frame with an absurd value.
fn absurd_blosc_header(rng: &mut StdRng, f: &mut [u8]) {
    if f.len() < 16 {
        return;
    }
    let len = f.len() as u32;
    let values = [
        0u32,
        1,
        15,
        16,
        17,
        len,
        len.wrapping_sub(1),
        len + 1,
        i32::MAX as u32,
        u32::MAX,
        0x8000_0000,
        0x7FFF_FFF0,
        rng.random(),
        rng.random_range(0..200_000),
    ];
    match rng.random_range(0..5) {
        0 => f[4..8].copy_from_slice(&pick(rng, &values).to_le_bytes()),
        1 => f[8..12].copy_from_slice(&pick(rng, &values).to_le_bytes()),
        2 => f[12..16].copy_from_slice(&pick(rng, &values).to_le_bytes()),
        3 => {
            let r = rng.random();
            f[3] = pick(rng, &[0u8, 1, 2, 16, 17, 255, r]);
        }
        _ => f[2] = rng.random(),
    }
    // Block-start table entries, when present.
    if rng.random_bool(0.3) && f.len() >= 20 {
        let i = 16 + 4 * rng.random_range(0..(f.len() - 16) / 4);
        f[i..i + 4].copy_from_slice(&pick(rng, &values).to_le_bytes());
    }
}

#[test]
fn blosc_decoder_survives_corruption() {
    let mut rng = StdRng::seed_from_u64(0xB105C);
    let corpus = blosc_corpus(&mut rng);
    assert!(corpus.len() > 100);
    for (f, n) in &corpus {
        let mut px = vec![0; *n];
        assert_eq!(blosc::decompress(f, &mut px), Ok(*n), "corpus entry");
    }
    let mut out = Guarded::new();
    let (mut headers, mut decodes, mut ok) = (0usize, 0usize, 0usize);
    let t = Instant::now();
    for round in 0..40_000usize {
        let (src, n) = &corpus[round % corpus.len()];
        let other = &corpus[rng.random_range(0..corpus.len())].0;
        let mut frame = mutate(&mut rng, src, other, 16 + 4 * (n / 512 + 1));
        if rng.random_bool(0.3) {
            absurd_blosc_header(&mut rng, &mut frame);
        }
        let _ = blosc::frame_info(&frame);
        headers += 1;
        let len = match rng.random_range(0..5) {
            0 => *n,
            1 => n.saturating_sub(rng.random_range(1..64)),
            2 => n + rng.random_range(1..4096),
            3 => 0,
            _ => rng.random_range(0..2 * n + 16),
        };
        let dst = out.reset(len);
        let threads = if round % 97 == 0 { 2 } else { 1 };
        let r = blosc::decompress_mt(&frame, dst, threads);
        decodes += 1;
        out.check("blosc");
        if let Ok(m) = r {
            assert!(m <= len);
            ok += 1;
        }
    }
    println!(
        "blosc: {decodes} decompress + {headers} header-parse executions \
         ({ok} decodes accepted) in {:.2} s",
        t.elapsed().as_secs_f64()
    );
    assert!(decodes >= 40_000 && ok > 1_000);
}

fn jpeg_corpus(rng: &mut StdRng) -> Vec<(Vec<u8>, usize)> {
    let mut corpus = Vec::new();
    for (w, h) in [(8usize, 8usize), (33, 17), (48, 40), (16, 64)] {
        for c in [1usize, 3] {
            let px: Vec<u8> = (0..w * h * c)
                .map(|i| {
                    ((i % (w * c)) as u8)
                        .wrapping_mul(3)
                        .wrapping_add(rng.random_range(0..20))
                })
                .collect();
            for q in [10u8, 75, 95] {
                let mut out = vec![0; jpeg::max_compressed_len(w, h, c)];
                if let Ok(n) = jpeg::compress(&px, w, h, c, q, &mut out) {
                    out.truncate(n);
                    corpus.push((out, w * h * c));
                }
            }
            // Progressive, optimized-Huffman and arithmetic-coded variants through the
            // TurboJPEG API directly (the decoder must cope with every scan type).
            let fmt = if c == 1 {
                turbojpeg::PixelFormat::GRAY
            } else {
                turbojpeg::PixelFormat::RGB
            };
            let img = turbojpeg::Image {
                pixels: &px[..],
                width: w,
                pitch: w * c,
                height: h,
                format: fmt,
            };
            for variant in 0..3 {
                let Ok(mut tj) = turbojpeg::Compressor::new() else {
                    continue;
                };
                let set = match variant {
                    0 => tj.set_progressive(true),
                    1 => tj.set_optimize(true),
                    _ => tj.set_arithmetic(true),
                };
                let sub = if c == 1 {
                    turbojpeg::Subsamp::Gray
                } else {
                    turbojpeg::Subsamp::Sub2x1
                };
                if set.and(tj.set_subsamp(sub)).is_ok() {
                    if let Ok(v) = tj.compress_to_vec(img) {
                        corpus.push((v, w * h * c));
                    }
                }
            }
        }
    }
    corpus
}

/// Patches a start-of-frame (dimensions, component count) or a segment length.
fn absurd_jpeg_header(rng: &mut StdRng, j: &mut [u8]) {
    let sof = j
        .windows(2)
        .position(|m| m[0] == 0xFF && matches!(m[1], 0xC0 | 0xC1 | 0xC2 | 0xC9 | 0xCA));
    let dims = [0u16, 1, 2, 7, 8, 9, 255, 4096, 65_535, rng.random()];
    match (sof, rng.random_range(0..4)) {
        (Some(p), 0) if p + 9 < j.len() => {
            j[p + 5..p + 7].copy_from_slice(&pick(rng, &dims).to_be_bytes()); // height
        }
        (Some(p), 1) if p + 9 < j.len() => {
            j[p + 7..p + 9].copy_from_slice(&pick(rng, &dims).to_be_bytes()); // width
        }
        (Some(p), 2) if p + 10 < j.len() => {
            j[p + 9] = pick(rng, &[0u8, 1, 2, 3, 4, 5, 255]); // components
        }
        _ => {
            // A random marker segment's length.
            let markers: Vec<usize> = j
                .windows(2)
                .enumerate()
                .filter(|(_, m)| m[0] == 0xFF && m[1] >= 0xC0 && m[1] != 0xFF && m[1] != 0xD8)
                .map(|(i, _)| i)
                .collect();
            if !markers.is_empty() {
                let p = pick(rng, &markers);
                if p + 4 <= j.len() {
                    j[p + 2..p + 4].copy_from_slice(&pick(rng, &dims).to_be_bytes());
                }
            }
        }
    }
}

#[test]
fn jpeg_decoder_survives_corruption() {
    let mut rng = StdRng::seed_from_u64(0x1FE6);
    let corpus = jpeg_corpus(&mut rng);
    assert!(corpus.len() > 40);
    let mut dec = JpegDecoder::new().expect("decoder");
    for (j, n) in &corpus {
        let mut px = vec![0; *n];
        assert_eq!(
            dec.decode(j, &mut px).map(|i| i.len()),
            Ok(*n),
            "corpus entry"
        );
    }
    let mut out = Guarded::new();
    let (mut headers, mut decodes, mut ok) = (0usize, 0usize, 0usize);
    let t = Instant::now();
    for round in 0..12_000usize {
        let (src, n) = &corpus[round % corpus.len()];
        let other = &corpus[rng.random_range(0..corpus.len())].0;
        let mut j = mutate(&mut rng, src, other, src.len().min(700));
        if rng.random_bool(0.4) {
            absurd_jpeg_header(&mut rng, &mut j);
        }
        let header = dec.read_header(&j);
        headers += 1;
        let len = match rng.random_range(0..4) {
            0 => *n,
            1 => n.saturating_sub(rng.random_range(1..16)),
            2 => header.map(|h| h.len().min(1 << 22)).unwrap_or(*n),
            _ => rng.random_range(0..2 * n + 1),
        };
        let dst = out.reset(len);
        let r = dec.decode(&j, dst);
        decodes += 1;
        out.check("jpeg");
        if let Ok(info) = r {
            assert!(info.len() <= len);
            ok += 1;
        }
    }
    println!(
        "jpeg: {decodes} decode + {headers} header-parse executions \
         ({ok} decodes accepted) in {:.2} s",
        t.elapsed().as_secs_f64()
    );
    assert!(decodes >= 12_000 && ok > 300);
}
