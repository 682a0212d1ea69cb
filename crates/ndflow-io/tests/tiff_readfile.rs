//! NDFileTIFF ReadFile: a written file comes back as the same frame (pixels, shape, type,
//! colour mode, uniqueId, time stamps, attributes as text), and a missing or foreign file is
//! reported in WriteStatus/WriteMessage without a frame.

use crate::common::{frame, pattern, rgb, with_attrs, TempDir};
use ndflow_core::{with_pixel_type, AttrValue, ColorMode, DataType, NDArray, ParamValue, Pixel};
use ndflow_io::TiffFilePlugin;
use ndflow_runtime::{Plugin, PluginHarness};

/// What the plugin sends downstream after the last put.
fn taken(h: &PluginHarness<TiffFilePlugin>) -> Vec<std::sync::Arc<NDArray>> {
    let mut out = Vec::new();
    h.plugin.emit_after_put(&mut |f| out.push(f));
    out
}

fn harness(dir: &TempDir) -> PluginHarness<TiffFilePlugin> {
    let h = PluginHarness::new(TiffFilePlugin::new());
    h.put("FilePath", dir.path().to_string_lossy().as_ref())
        .unwrap();
    h.put("FileName", "rb").unwrap();
    h.put("AutoIncrement", "No").unwrap();
    h.put("FileWriteMode", "Single").unwrap();
    h.put("AutoSave", "Yes").unwrap();
    h
}

/// Writes `f` through the plugin, reads it back with ReadFile and returns the frame emitted.
fn round_trip(h: &PluginHarness<TiffFilePlugin>, f: NDArray) -> NDArray {
    h.process(f).unwrap();
    assert_eq!(
        h.get("WriteStatus"),
        ParamValue::Int(0),
        "{:?}",
        h.get("WriteMessage")
    );
    assert!(taken(h).is_empty(), "nothing before ReadFile");
    h.put("ReadFile", 1).unwrap();
    assert_eq!(h.get("ReadFile"), ParamValue::Int(0), "back to Done");
    let mut out = taken(h);
    assert_eq!(out.len(), 1, "{:?}", h.get("WriteMessage"));
    NDArray::clone(&out.remove(0))
}

fn check<T: Pixel>(h: &PluginHarness<TiffFilePlugin>) {
    let (w, hh) = (7usize, 5usize);
    let mono = with_attrs(frame(&[w, hh], &pattern::<T>(w * hh), 42));
    let back = round_trip(h, mono.clone());
    assert_eq!(back.sizes(), vec![w, hh]);
    assert_eq!(back.data_type, T::DATA_TYPE);
    assert_eq!(back.data_bytes(), mono.data_bytes(), "{:?}", T::DATA_TYPE);
    assert_eq!((back.unique_id, back.time_stamp), (42, mono.time_stamp));
    assert_eq!(back.epics_ts, mono.epics_ts);
    let text = |n: &str| back.attribute(n).map(|a| a.value.clone());
    assert_eq!(text("Gain"), Some(AttrValue::String("2.500000".into())));
    assert_eq!(text("Count"), Some(AttrValue::String("-7".into())));
    assert_eq!(text("Label"), Some(AttrValue::String("hello".into())));

    let data = pattern::<T>(w * hh * 3);
    let colour = rgb(frame(&[3, w, hh], &data, 7), ColorMode::RGB1);
    let back = round_trip(h, colour.clone());
    assert_eq!(back.sizes(), vec![3, w, hh]);
    assert_eq!(back.color_mode(), ColorMode::RGB1);
    assert_eq!(
        back.data_bytes(),
        colour.data_bytes(),
        "{:?} RGB1",
        T::DATA_TYPE
    );
}

#[test]
fn every_type_mono_and_rgb_reads_back_as_written() {
    let dir = TempDir::new("readfile");
    let h = harness(&dir);
    for dt in DataType::ALL {
        with_pixel_type!(dt, T => check::<T>(&h));
    }
}

#[test]
fn missing_and_foreign_files_set_write_status() {
    let dir = TempDir::new("readfile-bad");
    let h = harness(&dir);
    h.put("FileNumber", 99).unwrap();
    h.put("ReadFile", 1).unwrap();
    assert_eq!(h.get("ReadFile"), ParamValue::Int(0));
    assert_eq!(h.get("WriteStatus"), ParamValue::Int(1));
    let msg = h.get("WriteMessage").to_string();
    assert!(msg.contains("rb_099.tif"), "{msg}");
    assert!(taken(&h).is_empty());
    // A file that is not a TIFF.
    std::fs::write(dir.path().join("rb_099.tif"), b"not a tiff at all").unwrap();
    h.put("ReadFile", 1).unwrap();
    assert_eq!(h.get("WriteStatus"), ParamValue::Int(1));
    assert!(taken(&h).is_empty());
    // A good file afterwards clears the status.
    h.put("FileNumber", 1).unwrap();
    let back = round_trip(&h, frame(&[4, 3], &[5u16; 12], 3));
    assert_eq!(
        back.data_bytes(),
        frame(&[4, 3], &[5u16; 12], 3).data_bytes()
    );
    assert_eq!(h.get("WriteStatus"), ParamValue::Int(0));
}

/// A 1×1 8-bit TIFF whose uniqueId tag (65001) has type `ty`, `count` values and value or
/// offset `v`.
fn tiff_with_unique_id(ty: u16, count: u32, v: u32) -> Vec<u8> {
    let short = |tag: u16, v: u16| (tag, 3u16, 1u32, u32::from(v));
    let entries = [
        short(256, 1),         // ImageWidth
        short(257, 1),         // ImageLength
        short(258, 8),         // BitsPerSample
        short(259, 1),         // Compression: none
        short(262, 1),         // PhotometricInterpretation: BlackIsZero
        (273, 4, 1, 0),        // StripOffsets (patched below)
        short(277, 1),         // SamplesPerPixel
        short(278, 1),         // RowsPerStrip
        (279, 4, 1, 1),        // StripByteCounts
        (65001, ty, count, v), // uniqueId
    ];
    let pixels_at = 8 + 2 + 12 * entries.len() as u32 + 4;
    let mut b = b"II\x2a\x00\x08\x00\x00\x00".to_vec();
    b.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    for (tag, ty, n, v) in entries {
        let v = if tag == 273 { pixels_at } else { v };
        b.extend_from_slice(&tag.to_le_bytes());
        b.extend_from_slice(&ty.to_le_bytes());
        b.extend_from_slice(&n.to_le_bytes());
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.extend_from_slice(&0u32.to_le_bytes());
    b.push(7);
    b
}

/// Found by fuzzing: a tag whose count claims gigabytes made ReadFile allocate them (the
/// process aborted on allocation failure). Now the claim is refused as an error.
#[test]
fn a_tag_claiming_gigabytes_is_an_error_not_an_allocation() {
    let pool = ndflow_core::Pool::new(1 << 20);
    let read = |b: Vec<u8>| {
        ndflow_io::tiff::read::read_tiff_from(
            std::io::Cursor::new(b),
            std::path::Path::new("hostile.tif"),
            &pool,
        )
    };
    // 2^32 - 1 DOUBLEs (32 GiB) at offset 8.
    let err = read(tiff_with_unique_id(12, u32::MAX, 8)).expect_err("32 GiB of values refused");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData, "{err}");
    // The same file with one LONG is an image with that uniqueId.
    let f = read(tiff_with_unique_id(4, 1, 42)).expect("a 1×1 image");
    assert_eq!(f.unique_id, 42);
}

/// Found by fuzzing: an ASCII tag after the image (where the `name:value` attributes are)
/// claiming 4 GiB was allocated before being read: ASCII values are bounded by the decoding
/// limit, which images need large. The tags after the image are now read with 1 MiB.
#[test]
fn an_ascii_tag_claiming_gigabytes_is_an_error_not_an_allocation() {
    let pool = ndflow_core::Pool::new(1 << 20);
    let file = include_bytes!("data/fuzz-ascii-tag-4GiB.tif");
    let err = ndflow_io::tiff::read::read_tiff_from(
        std::io::Cursor::new(&file[..]),
        std::path::Path::new("hostile.tif"),
        &pool,
    )
    .expect_err("4 GiB of text refused");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData, "{err}");
}
