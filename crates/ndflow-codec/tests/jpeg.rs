//! JPEG through libjpeg-turbo: header fields, round-trip error bounds against the original
//! pixels (the reference), quality clamping and monotonicity, argument and buffer checks.

use ndflow_codec::jpeg::{self, JpegDecoder, JpegEncoder, JpegImageInfo, JpegSubsampling};
use ndflow_codec::CodecError;

/// A smooth test image (gradients + a soft blob): JPEG should reproduce it closely.
fn image(w: usize, h: usize, c: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(w * h * c);
    for y in 0..h {
        for x in 0..w {
            let dx = x as f64 - w as f64 / 2.0;
            let dy = y as f64 - h as f64 / 3.0;
            let blob = 80.0 * (-(dx * dx + dy * dy) / 800.0).exp();
            for k in 0..c {
                let base = match k {
                    0 => 20.0 + 1.5 * x as f64,
                    1 => 20.0 + 1.5 * y as f64,
                    _ => 128.0 + 60.0 * ((x + y) as f64 / 40.0).sin(),
                };
                v.push((0.6 * base + blob).clamp(0.0, 255.0) as u8);
            }
        }
    }
    v
}

/// Reference error measures: maximum and mean absolute difference.
fn errors(a: &[u8], b: &[u8]) -> (u8, f64) {
    assert_eq!(a.len(), b.len());
    let mut max = 0u8;
    let mut sum = 0u64;
    for (&x, &y) in a.iter().zip(b) {
        let d = x.abs_diff(y);
        max = max.max(d);
        sum += u64::from(d);
    }
    (max, sum as f64 / a.len() as f64)
}

fn encode(px: &[u8], w: usize, h: usize, c: usize, q: u8) -> Vec<u8> {
    let mut out = vec![0; jpeg::max_compressed_len(w, h, c)];
    let n = jpeg::compress(px, w, h, c, q, &mut out).expect("encode");
    out.truncate(n);
    out
}

#[test]
fn mono_and_rgb_round_trip_within_bounds() {
    for (w, h) in [(64, 48), (257, 131), (1, 1), (17, 3)] {
        for c in [1usize, 3] {
            let px = image(w, h, c);
            for (q, max_err, mean_err) in [(100u8, 8u8, 1.0), (90, 24, 2.5), (50, 60, 5.0)] {
                let j = encode(&px, w, h, c, q);
                assert_eq!(&j[..2], &[0xFF, 0xD8], "SOI marker");
                assert_eq!(&j[j.len() - 2..], &[0xFF, 0xD9], "EOI marker");
                let info = jpeg::read_header(&j).expect("header");
                assert_eq!(
                    info,
                    JpegImageInfo {
                        width: w,
                        height: h,
                        components: c
                    }
                );
                let mut back = vec![0xEEu8; w * h * c + 5];
                let got = jpeg::decompress(&j, &mut back).expect("decode");
                assert_eq!(got, info);
                assert_eq!(&back[w * h * c..], &[0xEE; 5], "wrote past the image");
                let (max, mean) = errors(&px, &back[..w * h * c]);
                assert!(
                    max <= max_err && mean <= mean_err,
                    "{w}x{h}x{c} q{q}: max {max} mean {mean:.2}"
                );
            }
        }
    }
}

#[test]
fn constant_images_are_exact_at_high_quality() {
    for c in [1usize, 3] {
        let px = vec![77u8; 40 * 24 * c];
        let j = encode(&px, 40, 24, c, 100);
        let mut back = vec![0; px.len()];
        jpeg::decompress(&j, &mut back).expect("decode");
        let (max, _) = errors(&px, &back);
        assert!(max <= 1, "constant image max error {max}");
    }
}

#[test]
fn quality_is_clamped_and_monotonic() {
    let (w, h) = (128, 96);
    let px = image(w, h, 3);
    assert_eq!(encode(&px, w, h, 3, 0), encode(&px, w, h, 3, 1));
    assert_eq!(encode(&px, w, h, 3, 255), encode(&px, w, h, 3, 100));
    let sizes: Vec<usize> = [5u8, 30, 60, 90, 100]
        .iter()
        .map(|&q| encode(&px, w, h, 3, q).len())
        .collect();
    assert!(sizes.windows(2).all(|s| s[0] < s[1]), "{sizes:?}");
}

#[test]
fn subsampling_changes_size_not_layout() {
    let (w, h) = (96, 64);
    let px = image(w, h, 3);
    let mut enc = JpegEncoder::new().expect("encoder");
    let mut dec = JpegDecoder::new().expect("decoder");
    let mut lens = Vec::new();
    for s in [
        JpegSubsampling::S420,
        JpegSubsampling::S422,
        JpegSubsampling::S444,
    ] {
        enc.set_subsampling(s);
        let mut out = vec![0; jpeg::max_compressed_len(w, h, 3)];
        let n = enc.encode(&px, w, h, 3, 90, &mut out).expect("encode");
        let mut back = vec![0; w * h * 3];
        let info = dec.decode(&out[..n], &mut back).expect("decode");
        assert_eq!(info.components, 3);
        let (max, _) = errors(&px, &back);
        assert!(max <= 40, "{s:?}: max {max}");
        lens.push(n);
    }
    assert!(lens[0] < lens[1] && lens[1] < lens[2], "{lens:?}");
    // The default matches the free function (4:2:0, NDPluginCodec's libjpeg default).
    let mut out = vec![0; jpeg::max_compressed_len(w, h, 3)];
    let mut e2 = JpegEncoder::new().expect("encoder");
    let n = e2.encode(&px, w, h, 3, 90, &mut out).expect("encode");
    assert_eq!(&out[..n], &encode(&px, w, h, 3, 90)[..]);
}

#[test]
fn argument_and_buffer_errors() {
    let px = image(16, 16, 3);
    let mut out = vec![0; 10_000];
    let bad = |r: Result<usize, CodecError>| matches!(r, Err(CodecError::InvalidArgument { .. }));
    assert!(bad(jpeg::compress(&px, 16, 16, 2, 90, &mut out)));
    assert!(bad(jpeg::compress(&px, 16, 16, 4, 90, &mut out)));
    assert!(bad(jpeg::compress(&px, 0, 16, 3, 90, &mut out)));
    assert!(bad(jpeg::compress(&px, 70_000, 1, 3, 90, &mut out)));
    assert!(bad(jpeg::compress(&px[1..], 16, 16, 3, 90, &mut out)));
    assert!(matches!(
        jpeg::compress(&px, 16, 16, 3, 90, &mut out[..50]),
        Err(CodecError::OutputTooSmall { .. })
    ));
    let j = encode(&px, 16, 16, 3, 90);
    let mut small = vec![0u8; 16 * 16 * 3 - 1];
    assert_eq!(
        jpeg::decompress(&j, &mut small),
        Err(CodecError::OutputTooSmall {
            need: 16 * 16 * 3,
            have: 16 * 16 * 3 - 1
        })
    );
    assert!(small.iter().all(|&b| b == 0), "nothing written on error");
    assert!(matches!(
        jpeg::read_header(b""),
        Err(CodecError::Corrupt { .. })
    ));
    assert!(matches!(
        jpeg::read_header(b"not a jpeg at all"),
        Err(CodecError::Corrupt { .. })
    ));
}

#[test]
fn truncated_stream_is_an_error_not_a_grey_image() {
    let px = image(64, 64, 1);
    let j = encode(&px, 64, 64, 1, 90);
    let mut back = vec![0; 64 * 64];
    for cut in [j.len() - 2, j.len() * 2 / 3, j.len() / 2] {
        assert!(
            jpeg::decompress(&j[..cut], &mut back).is_err(),
            "cut at {cut} of {} accepted",
            j.len()
        );
    }
}

#[test]
fn encoder_reuse_gives_identical_output() {
    let px = image(50, 40, 1);
    let mut enc = JpegEncoder::new().expect("encoder");
    let mut a = vec![0; jpeg::max_compressed_len(50, 40, 1)];
    let mut b = a.clone();
    let na = enc.encode(&px, 50, 40, 1, 75, &mut a).expect("first");
    let _ = enc
        .encode(&image(20, 20, 3), 20, 20, 3, 10, &mut b)
        .expect("other");
    let nb = enc.encode(&px, 50, 40, 1, 75, &mut b).expect("again");
    assert_eq!(&a[..na], &b[..nb]);
}

#[test]
fn handles_stay_usable_after_errors() {
    let (w, h) = (40, 32);
    let px = image(w, h, 3);
    let good = encode(&px, w, h, 3, 80);
    let mut want = vec![0; w * h * 3];
    jpeg::decompress(&good, &mut want).expect("decode");

    // A Huffman table whose code counts are impossible: libjpeg keeps tables in the
    // decompressor between images, so without a fresh handle every later decode failed.
    let dht = good
        .windows(2)
        .position(|m| m == [0xFF, 0xC4])
        .expect("DHT marker");
    let mut bad = good.clone();
    bad[dht + 5..dht + 21].fill(0xFF);
    let mut dec = JpegDecoder::new().expect("decoder");
    let mut back = vec![0; w * h * 3];
    assert!(dec.decode(&bad, &mut back).is_err());
    assert!(jpeg::decompress(&bad, &mut back).is_err());
    back.fill(0);
    assert!(dec.decode(&good, &mut back).is_ok(), "decoder poisoned");
    assert_eq!(back, want);
    back.fill(0);
    assert!(
        jpeg::decompress(&good, &mut back).is_ok(),
        "thread-local decoder poisoned"
    );
    assert_eq!(back, want);

    // The encoder after a too-small output buffer.
    let mut enc = JpegEncoder::new().expect("encoder");
    let mut out = vec![0; jpeg::max_compressed_len(w, h, 3)];
    assert!(enc.encode(&px, w, h, 3, 80, &mut out[..100]).is_err());
    let n = enc
        .encode(&px, w, h, 3, 80, &mut out)
        .expect("encode after error");
    assert_eq!(&out[..n], &good[..]);
}
