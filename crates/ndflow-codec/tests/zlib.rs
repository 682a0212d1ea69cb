//! zlib streams: round trips at every level, a stream from python's zlib, errors.

use ndflow_codec::zlib::{compress, decompress, max_compressed_len};
use ndflow_codec::CodecError;
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};

#[test]
fn round_trips_at_every_level() {
    let mut rng = StdRng::seed_from_u64(20);
    for level in -1..=10 {
        for len in [0usize, 1, 100, 5000, 70_000] {
            let mut data = vec![0u8; len];
            if level % 2 == 0 {
                rng.fill_bytes(&mut data);
            } else {
                data.iter_mut()
                    .enumerate()
                    .for_each(|(i, b)| *b = (i / 100) as u8);
            }
            let mut c = vec![0u8; max_compressed_len(len)];
            let n = compress(&data, level, &mut c).unwrap();
            assert!(n <= max_compressed_len(len));
            assert_eq!(c[0], 0x78, "zlib header, deflate with 32 KiB window");
            let mut back = vec![0u8; len];
            assert_eq!(decompress(&c[..n], &mut back).unwrap(), len);
            assert_eq!(back, data, "level {level} len {len}");
        }
    }
}

#[test]
fn level_changes_reuse_state_correctly() {
    let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
    let mut sizes = Vec::new();
    for level in [9, 0, 1, 9, 9, 0] {
        let mut c = vec![0u8; max_compressed_len(data.len())];
        let n = compress(&data, level, &mut c).unwrap();
        let mut back = vec![0u8; data.len()];
        decompress(&c[..n], &mut back).unwrap();
        assert_eq!(back, data);
        sizes.push(n);
    }
    // Same level, same output size (the state was reset between calls).
    assert_eq!(sizes[0], sizes[3]);
    assert_eq!(sizes[3], sizes[4]);
    assert_eq!(sizes[1], sizes[5]);
    assert!(sizes[1] > data.len(), "level 0 stores");
}

#[test]
fn decodes_python_zlib() {
    // python: zlib.compress(b'hello hello hello hello areaDetector', 6)
    let stream = hex("789ccb48cdc9c957c8c020138b52135d524b52934bf28b00f9390da4");
    let want = b"hello hello hello hello areaDetector";
    let mut out = vec![0u8; want.len()];
    assert_eq!(decompress(&stream, &mut out).unwrap(), want.len());
    assert_eq!(&out[..], want);
}

#[test]
fn errors() {
    let data: Vec<u8> = (0..10_000u32).map(|i| (i % 7) as u8).collect();
    let mut c = vec![0u8; max_compressed_len(data.len())];
    let n = compress(&data, 6, &mut c).unwrap();
    let s = &c[..n];
    let mut out = vec![0u8; data.len()];
    assert!(decompress(&s[..n - 1], &mut out).is_err(), "truncated");
    assert!(decompress(&s[..n - 5], &mut out).is_err(), "truncated");
    assert!(decompress(&[], &mut out).is_err(), "empty");
    assert!(decompress(s, &mut out[..9999]).is_err(), "too long for out");
    let mut long = vec![0u8; 10_001];
    assert!(decompress(s, &mut long).is_err(), "shorter than expected");
    let mut extra = s.to_vec();
    extra.push(1);
    assert!(decompress(&extra, &mut out).is_err(), "trailing bytes");
    let mut bad = s.to_vec();
    bad[n - 1] ^= 1;
    assert!(decompress(&bad, &mut out).is_err(), "adler32 mismatch");
    let mut small = vec![0u8; 10];
    assert!(matches!(
        compress(&data, 6, &mut small),
        Err(CodecError::OutputTooSmall { .. })
    ));
    // The state survives an error.
    let n2 = compress(&data, 6, &mut c).unwrap();
    assert_eq!(n2, n);
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}
