//! TIFF files read back with the `tiff` crate's decoder: every type, Mono and RGB1/2/3,
//! the 65000-65003 tags and attribute tags; JPEG read back with the codec's decoder.

use std::io::Cursor;

use crate::common::{frame, pattern, rgb, with_attrs};
use ndflow_core::{with_pixel_type, ColorMode, DataType, NDArray, Pixel, Pool};
use ndflow_io::jpeg::encode_jpeg;
use ndflow_io::tiff::write_tiff;
use tiff::decoder::{Decoder, DecodingResult};
use tiff::tags::Tag;

fn decoded_bytes(r: DecodingResult) -> Vec<u8> {
    macro_rules! b {
        ($v:expr) => {
            $v.iter().flat_map(|x| x.to_ne_bytes()).collect()
        };
    }
    match r {
        DecodingResult::U8(v) => v,
        DecodingResult::I8(v) => b!(v),
        DecodingResult::U16(v) => b!(v),
        DecodingResult::I16(v) => b!(v),
        DecodingResult::U32(v) => b!(v),
        DecodingResult::I32(v) => b!(v),
        DecodingResult::U64(v) => b!(v),
        DecodingResult::I64(v) => b!(v),
        DecodingResult::F32(v) => b!(v),
        DecodingResult::F64(v) => b!(v),
        other => panic!("unexpected {other:?}"),
    }
}

fn write(f: &NDArray) -> Vec<u8> {
    let mut c = Cursor::new(Vec::new());
    write_tiff(&mut c, f).unwrap();
    c.into_inner()
}

/// Reference: the pixel-interleaved RGB of an RGBn frame, element by element.
fn interleaved_ref<T: Pixel>(data: &[T], w: usize, h: usize, mode: ColorMode) -> Vec<T> {
    let mut out = Vec::new();
    for y in 0..h {
        for x in 0..w {
            for c in 0..3 {
                out.push(match mode {
                    ColorMode::RGB1 => data[c + 3 * x + 3 * w * y],
                    ColorMode::RGB2 => data[x + w * c + 3 * w * y],
                    _ => data[x + w * y + w * h * c],
                });
            }
        }
    }
    out
}

fn check_type<T: Pixel>() {
    let (w, h) = (7usize, 5usize);
    // Mono 2-D.
    let data = pattern::<T>(w * h);
    let f = with_attrs(frame(&[w, h], &data, 42));
    let bytes = write(&f);
    let mut d = Decoder::new(Cursor::new(&bytes)).unwrap();
    assert_eq!(d.dimensions().unwrap(), (w as u32, h as u32));
    let got = decoded_bytes(d.read_image().unwrap());
    assert_eq!(got, f.data_bytes(), "{:?} mono", T::DATA_TYPE);
    assert_eq!(d.get_tag_f64(Tag::Unknown(65000)).unwrap(), 1042.5);
    assert_eq!(d.get_tag_u32(Tag::Unknown(65001)).unwrap(), 42);
    assert_eq!(d.get_tag_u32(Tag::Unknown(65002)).unwrap(), 1_000_042);
    assert_eq!(d.get_tag_u32(Tag::Unknown(65003)).unwrap(), 123_456_789);
    let sf = d.get_tag_u32(Tag::SampleFormat).unwrap();
    let want_sf = match T::DATA_TYPE {
        DataType::Float32 | DataType::Float64 => 3,
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => 2,
        _ => 1,
    };
    assert_eq!(sf, want_sf);
    assert_eq!(
        d.get_tag_u32(Tag::BitsPerSample).unwrap() as usize,
        8 * T::DATA_TYPE.size()
    );

    // RGB1/2/3.
    for (mode, sizes) in [
        (ColorMode::RGB1, [3, w, h]),
        (ColorMode::RGB2, [w, 3, h]),
        (ColorMode::RGB3, [w, h, 3]),
    ] {
        let data = pattern::<T>(w * h * 3);
        let f = rgb(frame(&sizes, &data, 1), mode);
        let bytes = write(&f);
        let mut d = Decoder::new(Cursor::new(&bytes)).unwrap();
        assert_eq!(d.dimensions().unwrap(), (w as u32, h as u32));
        let want = interleaved_ref(&data, w, h, mode);
        let want_frame = NDArray::from_pixels(&Pool::unlimited(), &[want.len()], &want).unwrap();
        let got = decoded_bytes(d.read_image().unwrap());
        assert_eq!(got, want_frame.data_bytes(), "{:?} {mode:?}", T::DATA_TYPE);
    }

    // 1-D: one row.
    let f = frame(&[9], &pattern::<T>(9), 3);
    let mut d = Decoder::new(Cursor::new(write(&f))).unwrap();
    assert_eq!(d.dimensions().unwrap(), (9, 1));
}

#[test]
fn all_types_read_back_bit_exact() {
    for dt in DataType::ALL {
        with_pixel_type!(dt, T => check_type::<T>());
    }
}

#[test]
fn attributes_as_ascii_tags() {
    let f = with_attrs(frame(&[4, 4], &[1u16; 16], 1));
    let mut d = Decoder::new(Cursor::new(write(&f))).unwrap();
    assert_eq!(
        d.get_tag_ascii_string(Tag::Unknown(65010)).unwrap(),
        "Gain:2.500000"
    );
    assert_eq!(
        d.get_tag_ascii_string(Tag::Unknown(65011)).unwrap(),
        "Count:-7"
    );
    assert_eq!(
        d.get_tag_ascii_string(Tag::Unknown(65012)).unwrap(),
        "Label:hello"
    );
    // Undefined attributes are skipped.
    assert!(d.find_tag(Tag::Unknown(65013)).unwrap().is_none());
    assert_eq!(
        d.get_tag_ascii_string(Tag::Software).unwrap(),
        "EPICS areaDetector"
    );
    assert_eq!(d.get_tag_ascii_string(Tag::Model).unwrap(), "Unknown");
}

#[test]
fn unsupported_structures_are_errors() {
    let f = frame(&[2, 2, 2], &[0u8; 8], 1);
    let e = write_tiff(&mut Cursor::new(Vec::new()), &f).unwrap_err();
    assert!(e.to_string().contains("unsupported array structure"), "{e}");
    let f = rgb(frame(&[4, 3, 2], &[0u8; 24], 1), ColorMode::RGB1);
    assert!(write_tiff(&mut Cursor::new(Vec::new()), &f).is_err());
}

#[test]
fn jpeg_mono_and_rgb_decode() {
    let (w, h) = (16usize, 8usize);
    let data: Vec<u8> = (0..w * h).map(|i| (i * 2) as u8).collect();
    let mut out = Vec::new();
    let n = encode_jpeg(&frame(&[w, h], &data, 1), 95, &mut out).unwrap();
    let mut pix = vec![0u8; w * h];
    let info = ndflow_codec::jpeg::decompress(&out[..n], &mut pix).unwrap();
    assert_eq!((info.width, info.height, info.components), (w, h, 1));
    let max_err = pix
        .iter()
        .zip(&data)
        .map(|(a, b)| a.abs_diff(*b))
        .max()
        .unwrap();
    assert!(max_err <= 8, "{max_err}");

    for (mode, sizes) in [
        (ColorMode::RGB1, [3, w, h]),
        (ColorMode::RGB2, [w, 3, h]),
        (ColorMode::RGB3, [w, h, 3]),
    ] {
        let data = vec![100u8; w * h * 3];
        let n = encode_jpeg(&rgb(frame(&sizes, &data, 1), mode), 90, &mut out).unwrap();
        let mut pix = vec![0u8; w * h * 3];
        let info = ndflow_codec::jpeg::decompress(&out[..n], &mut pix).unwrap();
        assert_eq!((info.width, info.height, info.components), (w, h, 3));
        assert!(pix.iter().all(|p| p.abs_diff(100) <= 3));
    }
    let e = encode_jpeg(&frame(&[4, 4], &[0u16; 16], 1), 50, &mut out).unwrap_err();
    assert!(e.to_string().contains("UInt16"), "{e}");
    let e = encode_jpeg(&frame(&[4], &[0u8; 4], 1), 50, &mut out).unwrap_err();
    assert!(e.to_string().contains("Mono"), "{e}");
}
