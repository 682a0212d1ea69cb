//! NDPluginCodec: every compressor round-trips every data type bit-exactly through the
//! plugin, keeping the frame's metadata.

use std::sync::Arc;

use ndflow_core::{
    with_pixel_type, AttrValue, ColorMode, DataType, NDArray, NDAttribute, Pixel, Pool,
};
use ndflow_plugins::codec::{CodecPlugin, COMPRESSORS};
use ndflow_runtime::PluginHarness;

fn frame_of(dt: DataType, sizes: &[usize], seed: u64) -> NDArray {
    let n: usize = sizes.iter().product();
    let pool = Pool::unlimited();
    // Detector-like data: a ramp with small noise, so that every codec has something to do.
    let mut x = seed | 1;
    let mut frame = with_pixel_type!(dt, T => {
        let data: Vec<T> = (0..n)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                T::from_f64(((i % 97) as f64) + (x % 5) as f64)
            })
            .collect();
        NDArray::from_pixels(&pool, sizes, &data).unwrap()
    });
    frame.unique_id = 42;
    frame.time_stamp = 12.5;
    frame.set_attribute(NDAttribute::new("Temp", "", AttrValue::Float64(21.5)));
    frame
}

fn compress(h: &PluginHarness<CodecPlugin>, f: NDArray) -> Arc<NDArray> {
    let out = h.process(f).unwrap();
    assert_eq!(out.len(), 1);
    out[0].clone()
}

#[test]
fn every_lossless_compressor_round_trips_every_type() {
    let c = PluginHarness::new(CodecPlugin::new());
    let d = PluginHarness::new(CodecPlugin::new());
    d.put("Mode", "Decompress").unwrap();
    for (name, codec) in [
        ("Zlib", "zlib"),
        ("Blosc", "blosc"),
        ("LZ4", "lz4"),
        ("LZ4HDF5", "lz4hdf5"),
        ("BSLZ4", "bslz4"),
    ] {
        c.put("Compressor", name).unwrap();
        for shuffle in ["None", "Byte", "Bit"] {
            c.put("BloscShuffle", shuffle).unwrap();
            for dt in DataType::ALL {
                let original = frame_of(dt, &[123, 45], dt as u64 + 7);
                let packed = compress(&c, original.clone());
                assert_eq!(packed.codec.name, codec);
                assert_eq!(packed.data_type, dt, "original type kept");
                assert_eq!(packed.sizes(), vec![123, 45]);
                assert_eq!(packed.unique_id, 42);
                assert_eq!(packed.time_stamp, 12.5);
                assert!(packed.attribute("Temp").is_some());
                // (BloscLZ without a useful shuffle may store this noise as it is.)
                if name != "Blosc" || (shuffle != "None" && dt.size() > 1) {
                    let (n, total) = (packed.compressed_size, original.total_bytes());
                    assert!(n < total, "{name} {dt}: {n} of {total}");
                }
                let factor = c.get_f64("CompFactor");
                let want = original.total_bytes() as f64 / packed.compressed_size as f64;
                assert!((factor - want).abs() < 1e-9);
                let restored = d.process_arc(&packed).unwrap().remove(0);
                assert!(!restored.is_compressed());
                assert_eq!(restored.data_bytes(), original.data_bytes(), "{name} {dt}");
                assert_eq!(restored.data_type, dt);
                assert_eq!(restored.unique_id, 42);
                assert_eq!(c.get("CodecStatus"), ndflow_core::ParamValue::Int(0));
            }
            if name != "Blosc" {
                break;
            }
        }
    }
}

#[test]
fn jpeg_takes_uint8_mono_and_rgb1_only() {
    let c = PluginHarness::new(CodecPlugin::new());
    let d = PluginHarness::new(CodecPlugin::new());
    d.put("Mode", "Decompress").unwrap();
    c.put("Compressor", "JPEG").unwrap();
    c.put("JPEGQuality", 95).unwrap();
    let mono = frame_of(DataType::UInt8, &[64, 48], 3);
    let packed = compress(&c, mono.clone());
    assert_eq!(packed.codec.name, "jpeg");
    assert_eq!(packed.codec.level, 95);
    let back = d.process_arc(&packed).unwrap().remove(0);
    let (a, b) = (mono.pixels::<u8>().unwrap(), back.pixels::<u8>().unwrap());
    let worst = a
        .iter()
        .zip(b)
        .map(|(x, y)| (*x as i32 - *y as i32).abs())
        .max()
        .unwrap();
    assert!(worst <= 12, "JPEG q95 error {worst}");
    let mut rgb = frame_of(DataType::UInt8, &[3, 32, 16], 4);
    rgb.set_color_mode(ColorMode::RGB1);
    let packed = compress(&c, rgb);
    assert_eq!(packed.sizes(), vec![3, 32, 16]);
    let wrong = frame_of(DataType::UInt16, &[64, 48], 5);
    let e = c.process(wrong).unwrap_err().to_string();
    assert!(e.contains("JPEG takes UInt8"), "{e}");
    assert_eq!(c.get("CodecStatus"), ndflow_core::ParamValue::Int(2));
}

#[test]
fn none_and_passthrough_cases_share_the_frame() {
    let c = PluginHarness::new(CodecPlugin::new());
    let f = Arc::new(frame_of(DataType::UInt16, &[10, 10], 1));
    assert!(
        Arc::ptr_eq(&c.process_arc(&f).unwrap()[0], &f),
        "Compressor None"
    );
    let d = PluginHarness::new(CodecPlugin::new());
    d.put("Mode", "Decompress").unwrap();
    assert!(
        Arc::ptr_eq(&d.process_arc(&f).unwrap()[0], &f),
        "uncompressed input"
    );
    assert_eq!(COMPRESSORS.len(), 7);
}

#[test]
fn corrupt_compressed_frame_is_an_error_not_a_panic() {
    let c = PluginHarness::new(CodecPlugin::new());
    let d = PluginHarness::new(CodecPlugin::new());
    d.put("Mode", "Decompress").unwrap();
    for name in ["Zlib", "Blosc", "LZ4", "LZ4HDF5", "BSLZ4"] {
        c.put("Compressor", name).unwrap();
        let packed = compress(&c, frame_of(DataType::UInt32, &[64, 64], 9));
        let mut bad = (*packed).clone();
        bad.compressed_size /= 2;
        assert!(d.process(bad).is_err(), "{name} truncated");
        assert_eq!(d.get("CodecStatus"), ndflow_core::ParamValue::Int(2));
    }
}
