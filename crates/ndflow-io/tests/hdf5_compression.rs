//! Each Compression choice through the HDF5 filter pipeline, and the direct chunk write of
//! frames compressed by the Codec plugin: the stored chunks are the codec's bytes (plus the
//! 12/16-byte header for bslz4/lz4), the filter and cd_values are the registered ones, and
//! everything reads back through HDF5 (our in-process filters) bit-exactly.

use std::sync::Arc;

use crate::common::{frame, hdf5_harness, hdf5_stream, read_all, TempDir};
use hdf5_metno::filters::Filter;
use ndflow_codec::bitshuffle;
use ndflow_core::{DataType, NDArray};
use ndflow_io::hdf5::{read_raw_chunk, DATA_PATH};
use ndflow_plugins::codec::CodecPlugin;
use ndflow_runtime::PluginHarness;

/// Detector-like u32 frames (compressible, different per frame).
fn frames_u32(n: usize) -> (Vec<NDArray>, Vec<u32>) {
    let (w, h) = (64usize, 48usize);
    let mut all = Vec::new();
    let fr = (0..n)
        .map(|k| {
            let px: Vec<u32> = (0..w * h)
                .map(|i| ((i % w + i / w + k) as u32 * 37) % 1000 + (i as u32 % 3))
                .collect();
            all.extend_from_slice(&px);
            frame(&[w, h], &px, k as i32 + 1)
        })
        .collect();
    (fr, all)
}

/// Parameter settings, as (name, value).
type Settings<'a, V> = &'a [(&'a str, V)];

fn dataset_filters(path: &std::path::Path) -> Vec<Filter> {
    let f = hdf5_metno::File::open(path).unwrap();
    f.dataset(DATA_PATH).unwrap().filters()
}

#[test]
fn each_compression_through_the_pipeline() {
    let dir = TempDir::new("h5-comp");
    let chunk_bytes = 64 * 48 * 4;
    let cases: [(&str, Settings<i64>, Filter); 6] = [
        ("None", &[], Filter::User(0, vec![])),
        ("zlib", &[("ZLevel", 4)], Filter::Deflate(4)),
        (
            "Blosc",
            &[
                ("BloscCompressor", 1),
                ("BloscLevel", 6),
                ("BloscShuffle", 2),
            ],
            Filter::User(32001, vec![2, 2, 4, chunk_bytes, 6, 2, 1]),
        ),
        (
            "Blosc",
            &[
                ("BloscCompressor", 5),
                ("BloscLevel", 3),
                ("BloscShuffle", 0),
            ],
            Filter::User(32001, vec![2, 2, 4, chunk_bytes, 3, 0, 5]),
        ),
        ("BSLZ4", &[], Filter::User(32008, vec![0, 4, 4, 0, 2])),
        ("LZ4", &[], Filter::User(32004, vec![0])),
    ];
    for (i, (comp, extra, want)) in cases.into_iter().enumerate() {
        let h = hdf5_harness(&dir, &format!("c{i}"));
        h.put("Compression", comp).unwrap();
        for (k, v) in extra {
            h.put(k, *v).unwrap();
        }
        let (fr, data) = frames_u32(4);
        let path = hdf5_stream(&h, fr);
        let filters = dataset_filters(&path);
        if comp == "None" {
            assert!(filters.is_empty());
        } else {
            assert_eq!(filters, [want], "{comp}");
        }
        assert_eq!(read_all::<u32>(&path, DATA_PATH), data, "{comp}");
    }
}

#[test]
fn nbit_and_szip() {
    let dir = TempDir::new("h5-nbit");
    let h = hdf5_harness(&dir, "nbit");
    h.put("Compression", "N-bit").unwrap();
    h.put("NumDataBits", 12).unwrap();
    let data: Vec<u16> = (0..400).map(|i| (i * 13 % 4096) as u16).collect();
    let fr: Vec<NDArray> = (0..2).map(|k| frame(&[20, 20], &data, k + 1)).collect();
    let path = hdf5_stream(&h, fr);
    assert_eq!(dataset_filters(&path)[0].id(), 5);
    assert_eq!(
        read_all::<u16>(&path, DATA_PATH),
        [data.clone(), data.clone()].concat()
    );

    // N-bit is for integers.
    let h = hdf5_harness(&dir, "nbitf");
    h.put("Compression", "N-bit").unwrap();
    h.put("Capture", 1).unwrap();
    assert!(h.process(frame(&[4], &[1.0f32; 4], 1)).is_err());
    assert_eq!(h.get_f64("FramesNotWritten"), 1.0);
    let msg = h.get("WriteMessage").to_string();
    assert!(msg.contains("N-bit"), "{msg}");
    h.put("Capture", 0).unwrap();

    if hdf5_metno::filters::szip_available() {
        let h = hdf5_harness(&dir, "szip");
        h.put("Compression", "szip").unwrap();
        h.put("SZipNumPixels", 8).unwrap();
        let fr: Vec<NDArray> = (0..2).map(|k| frame(&[20, 20], &data, k + 1)).collect();
        let path = hdf5_stream(&h, fr);
        assert_eq!(dataset_filters(&path)[0].id(), 4);
        assert_eq!(
            read_all::<u16>(&path, DATA_PATH),
            [data.clone(), data].concat()
        );
    }
}

#[test]
fn jpeg_filter_for_uint8() {
    let dir = TempDir::new("h5-jpeg");
    let h = hdf5_harness(&dir, "jpeg");
    h.put("Compression", "JPEG").unwrap();
    h.put("JPEGQuality", 100).unwrap();
    let data: Vec<u8> = (0..32 * 16).map(|i| ((i % 32) * 4) as u8).collect();
    let fr: Vec<NDArray> = (0..2).map(|k| frame(&[32, 16], &data, k + 1)).collect();
    let path = hdf5_stream(&h, fr);
    assert_eq!(
        dataset_filters(&path),
        [Filter::User(32019, vec![100, 32, 16, 0])]
    );
    let back: Vec<u8> = read_all(&path, DATA_PATH);
    let err = back
        .iter()
        .zip(data.iter().chain(&data))
        .map(|(a, b)| (i32::from(*a) - i32::from(*b)).abs())
        .max()
        .unwrap();
    assert!(err <= 3, "JPEG q100 error {err}");
}

/// Compresses frames with the Codec plugin, configured by `settings`.
fn codec_frames(frames: &[NDArray], settings: Settings<&str>) -> Vec<Arc<NDArray>> {
    let h = PluginHarness::new(CodecPlugin::new());
    for (k, v) in settings {
        h.put(k, *v).unwrap();
    }
    frames
        .iter()
        .map(|f| h.process(f.clone()).unwrap().remove(0))
        .collect()
}

/// The chunk bytes NDFileHDF5 stores for a codec frame.
fn stored(f: &NDArray) -> Vec<u8> {
    let body = f.data_bytes();
    let total = f.total_bytes();
    match f.codec.name.as_str() {
        "bslz4" => {
            let elem = f.data_type.size();
            let mut v = (total as u64).to_be_bytes().to_vec();
            v.extend_from_slice(
                &((bitshuffle::default_block_elems(elem) * elem) as u32).to_be_bytes(),
            );
            v.extend_from_slice(body);
            v
        }
        "lz4" => {
            let mut v = (total as u64).to_be_bytes().to_vec();
            v.extend_from_slice(&(total as u32).to_be_bytes());
            v.extend_from_slice(&(body.len() as u32).to_be_bytes());
            v.extend_from_slice(body);
            v
        }
        _ => body.to_vec(),
    }
}

#[test]
fn direct_chunk_write_of_codec_frames() {
    let dir = TempDir::new("h5-direct");
    let cases: [(Settings<&str>, f64, u32); 5] = [
        (&[("Compressor", "BSLZ4")], 5.0, 32008),
        (&[("Compressor", "LZ4")], 6.0, 32004),
        (&[("Compressor", "LZ4HDF5")], 6.0, 32004),
        (
            &[
                ("Compressor", "Blosc"),
                ("BloscCompressor", "LZ4"),
                ("BloscCLevel", "6"),
                ("BloscShuffle", "Byte"),
            ],
            4.0,
            32001,
        ),
        (&[("Compressor", "Zlib")], 3.0, 1),
    ];
    for (i, (settings, compression, filter_id)) in cases.into_iter().enumerate() {
        let (raw, data) = frames_u32(4);
        let packed = codec_frames(&raw, settings);
        let h = hdf5_harness(&dir, &format!("d{i}"));
        h.put("Capture", 1).unwrap();
        for f in &packed {
            h.process_arc(f).unwrap();
        }
        h.put("Capture", 0).unwrap();
        assert_eq!(h.get_f64("WriteStatus"), 0.0, "{:?}", h.get("WriteMessage"));
        // The dataset's filter follows the first frame's codec.
        assert_eq!(h.get_f64("Compression"), compression, "{settings:?}");
        let path = dir.path().join(format!("d{i}_0.h5"));
        assert_eq!(dataset_filters(&path)[0].id() as u32, filter_id);
        let file = hdf5_metno::File::open(&path).unwrap();
        let ds = file.dataset(DATA_PATH).unwrap();
        for (k, f) in packed.iter().enumerate() {
            let (mask, bytes) = read_raw_chunk(&ds, &[k, 0, 0]).unwrap();
            assert_eq!(mask, 0);
            assert_eq!(bytes, stored(f), "{settings:?} frame {k}: stored as sent");
        }
        assert_eq!(ds.read_raw::<u32>().unwrap(), data, "{settings:?}");
    }
    // Blosc settings of the codec are published as NDFileHDF5 does.
    let h = hdf5_harness(&dir, "blosc-params");
    let (raw, _) = frames_u32(1);
    let packed = codec_frames(
        &raw,
        &[
            ("Compressor", "Blosc"),
            ("BloscCompressor", "ZSTD"),
            ("BloscCLevel", "2"),
            ("BloscShuffle", "Bit"),
        ],
    );
    h.put("Capture", 1).unwrap();
    h.process_arc(&packed[0]).unwrap();
    h.put("Capture", 0).unwrap();
    assert_eq!(h.get_f64("BloscCompressor"), 5.0);
    assert_eq!(h.get_f64("BloscLevel"), 2.0);
    assert_eq!(h.get_f64("BloscShuffle"), 2.0);
}

#[test]
fn direct_write_of_jpeg_and_uncompressed_frames() {
    let dir = TempDir::new("h5-direct2");
    let data: Vec<u8> = (0..32 * 16).map(|i| ((i % 32) * 4) as u8).collect();
    let raw: Vec<NDArray> = (0..2).map(|k| frame(&[32, 16], &data, k + 1)).collect();
    let packed = codec_frames(&raw, &[("Compressor", "JPEG"), ("JPEGQuality", "90")]);
    let h = hdf5_harness(&dir, "jpeg");
    h.put("Capture", 1).unwrap();
    for f in &packed {
        h.process_arc(f).unwrap();
    }
    h.put("Capture", 0).unwrap();
    let path = dir.path().join("jpeg_0.h5");
    let file = hdf5_metno::File::open(&path).unwrap();
    let ds = file.dataset(DATA_PATH).unwrap();
    assert_eq!(ds.filters(), [Filter::User(32019, vec![90, 32, 16, 0])]);
    assert_eq!(
        read_raw_chunk(&ds, &[1, 0, 0]).unwrap().1,
        packed[1].data_bytes()
    );
    // What HDF5 decodes is what the Codec plugin decodes.
    let dec = PluginHarness::new(CodecPlugin::new());
    dec.put("Mode", "Decompress").unwrap();
    let back = dec.process_arc(&packed[0]).unwrap().remove(0);
    assert_eq!(ds.read_raw::<u8>().unwrap()[..512], *back.data_bytes());

    // Uncompressed frames without a filter also go in as raw chunks.
    let (raw, _) = frames_u32(2);
    let h = hdf5_harness(&dir, "raw");
    let path = hdf5_stream(&h, raw.clone());
    let file = hdf5_metno::File::open(&path).unwrap();
    let ds = file.dataset(DATA_PATH).unwrap();
    assert_eq!(
        read_raw_chunk(&ds, &[1, 0, 0]).unwrap().1,
        raw[1].data_bytes()
    );
}

#[test]
fn mismatched_or_unchunkable_codec_frames_are_decompressed() {
    let dir = TempDir::new("h5-mismatch");
    let (raw, data) = frames_u32(4);
    let bs = codec_frames(&raw[..2], &[("Compressor", "BSLZ4")]);
    let bl = codec_frames(&raw[2..3], &[("Compressor", "Blosc")]);
    // The dataset follows the first frame (bslz4); a blosc frame and an uncompressed frame
    // go through the pipeline, stored as bslz4 chunks.
    let h = hdf5_harness(&dir, "mixed");
    h.put("Capture", 1).unwrap();
    h.process_arc(&bs[0]).unwrap();
    h.process_arc(&bs[1]).unwrap();
    h.process_arc(&bl[0]).unwrap();
    h.process(raw[3].clone()).unwrap();
    h.put("Capture", 0).unwrap();
    assert_eq!(h.get_f64("FramesNotWritten"), 0.0);
    let path = dir.path().join("mixed_0.h5");
    assert_eq!(read_all::<u32>(&path, DATA_PATH), data);
    let file = hdf5_metno::File::open(&path).unwrap();
    let ds = file.dataset(DATA_PATH).unwrap();
    let (_, c2) = read_raw_chunk(&ds, &[2, 0, 0]).unwrap();
    assert_eq!(
        &c2[..8],
        &((64 * 48 * 4) as u64).to_be_bytes(),
        "a 32008 chunk"
    );

    // Chunks of two frames: no direct write, the codec frames are decompressed.
    let h = hdf5_harness(&dir, "twoframes");
    h.put("NumFramesChunks", 2).unwrap();
    let packed = codec_frames(&raw, &[("Compressor", "LZ4")]);
    h.put("Capture", 1).unwrap();
    for f in &packed {
        h.process_arc(f).unwrap();
    }
    h.put("Capture", 0).unwrap();
    let path = dir.path().join("twoframes_0.h5");
    assert_eq!(read_all::<u32>(&path, DATA_PATH), data);
}

#[test]
fn incompressible_lz4_frames_fall_back() {
    let dir = TempDir::new("h5-lz4-raw");
    // xorshift bytes: LZ4 cannot shrink them, so the raw block is larger than the data.
    let mut x = 0x1234_5678_9abc_def0u64;
    let data: Vec<u8> = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let raw = vec![frame(&[64, 64], &data, 1)];
    let packed = codec_frames(&raw, &[("Compressor", "LZ4")]);
    assert!(packed[0].compressed_size >= 4096);
    let h = hdf5_harness(&dir, "lz4raw");
    h.put("Capture", 1).unwrap();
    h.process_arc(&packed[0]).unwrap();
    h.put("Capture", 0).unwrap();
    let path = dir.path().join("lz4raw_0.h5");
    assert_eq!(read_all::<u8>(&path, DATA_PATH), data);
    assert_eq!(DataType::UInt8, packed[0].data_type);
}
