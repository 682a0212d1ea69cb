//! A frame made ready for the page: decoded, two-dimensional, binned down to the size the
//! client asked for, in a type a WebGL2 texture takes at full depth (UInt8 → R8UI,
//! UInt16 → R16UI, everything else → R32F).
//!
//! Binning **averages** each `b × b` block (integers rounded to nearest), so values keep
//! their type and range and a window/level set on the full frame still fits the binned one.
//! Columns and rows left over at the right and bottom edges (when the size is not a
//! multiple of `b`) are not shown.

use ndflow_core::{with_pixel_type, ColorMode, DataType, NDArray, Pixel, Pool};

use crate::header::FrameHeader;

/// Width and height of a frame the viewer can show: Mono 1-D (one row) or 2-D.
pub fn shape(frame: &NDArray) -> Result<(usize, usize), String> {
    if frame.color_mode() != ColorMode::Mono {
        return Err(format!(
            "colour mode {} cannot be shown (Mono only)",
            frame.color_mode().name()
        ));
    }
    match frame.sizes().as_slice() {
        [w] => Ok((*w, 1)),
        [w, h] => Ok((*w, *h)),
        other => Err(format!(
            "{} dimensions cannot be shown (1 or 2)",
            other.len()
        )),
    }
}

/// The smallest factor that brings both sides to at most `max_side` (0: no limit).
pub fn bin_factor(width: usize, height: usize, max_side: usize) -> usize {
    if max_side == 0 {
        return 1;
    }
    width.max(height).div_ceil(max_side).max(1)
}

/// The type pixels are sent as.
pub fn wire_type(t: DataType) -> DataType {
    match t {
        DataType::UInt8 | DataType::UInt16 => t,
        _ => DataType::Float32,
    }
}

/// The whole message for `frame`: header, then pixels binned for `max_side`. A compressed
/// frame is decoded first.
pub fn encode_frame(frame: &NDArray, max_side: usize, skipped: u32) -> Result<Vec<u8>, String> {
    let decoded;
    let frame = if frame.is_compressed() {
        decoded = ndflow_plugins::codec::decompress(frame, &Pool::unlimited())
            .map_err(|e| format!("frame {}: {e}", frame.unique_id))?;
        &decoded
    } else {
        frame
    };
    let (w, h) = shape(frame)?;
    let b = bin_factor(w, h, max_side);
    let (ow, oh) = (w / b, h / b);
    let out_type = wire_type(frame.data_type);
    let header = FrameHeader {
        unique_id: frame.unique_id,
        time_stamp: frame.time_stamp,
        data_type: out_type,
        width: ow as u32,
        height: oh as u32,
        full_width: w as u32,
        full_height: h as u32,
        bin_x: b.min(u16::MAX as usize) as u16,
        bin_y: b.min(u16::MAX as usize) as u16,
        skipped,
    };
    let mut out = Vec::with_capacity(crate::header::HEADER_LEN + ow * oh * out_type.size());
    header.encode(&mut out);
    with_pixel_type!(frame.data_type, T => {
        let px = frame.pixels::<T>().map_err(|e| e.to_string())?;
        let px = px.get(..w * h).ok_or("frame holds fewer pixels than its dims")?;
        match out_type {
            DataType::UInt8 => push_binned(px, w, b, &mut out, |v| [v.round() as u8]),
            DataType::UInt16 => {
                push_binned(px, w, b, &mut out, |v| (v.round() as u16).to_le_bytes())
            }
            _ => push_binned(px, w, b, &mut out, |v| (v as f32).to_le_bytes()),
        }
    });
    Ok(out)
}

/// Appends the `b × b` block means of `px` (rows of `w`), each as `bytes(mean)`.
fn push_binned<T: Pixel, const N: usize>(
    px: &[T],
    w: usize,
    b: usize,
    out: &mut Vec<u8>,
    bytes: impl Fn(f64) -> [u8; N],
) {
    let h = px.len() / w.max(1);
    let (ow, oh) = (w / b, h / b);
    if b == 1 {
        for &v in px {
            out.extend_from_slice(&bytes(v.to_f64()));
        }
        return;
    }
    let mut acc = vec![0.0f64; ow];
    let n = (b * b) as f64;
    for oy in 0..oh {
        acc.fill(0.0);
        for row in px.chunks_exact(w).skip(oy * b).take(b) {
            for (a, block) in acc.iter_mut().zip(row.chunks_exact(b)) {
                *a += block.iter().map(|v| v.to_f64()).sum::<f64>();
            }
        }
        for a in &acc {
            out.extend_from_slice(&bytes(a / n));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::HEADER_LEN;

    fn frame<T: Pixel>(w: usize, h: usize, f: impl Fn(usize, usize) -> T) -> NDArray {
        let px: Vec<T> = (0..w * h).map(|i| f(i % w, i / w)).collect();
        NDArray::from_pixels(&Pool::unlimited(), &[w, h], &px).unwrap()
    }

    #[test]
    fn factor_fits_both_sides() {
        assert_eq!(bin_factor(4096, 4096, 1024), 4);
        assert_eq!(bin_factor(4097, 10, 1024), 5);
        assert_eq!(bin_factor(1024, 1024, 1024), 1);
        assert_eq!(bin_factor(640, 480, 0), 1);
    }

    #[test]
    fn unbinned_u16_is_sent_as_is() {
        let f = frame::<u16>(5, 3, |x, y| (x + 100 * y) as u16);
        let m = encode_frame(&f, 1024, 0).unwrap();
        let (h, at) = FrameHeader::decode(&m).unwrap();
        assert_eq!(
            (h.width, h.height, h.bin_x, h.data_type),
            (5, 3, 1, DataType::UInt16)
        );
        assert_eq!(&m[at..], f.data_bytes());
    }

    #[test]
    fn binning_averages_blocks_and_drops_the_ragged_edge() {
        // 4x4 binning of a 4096x4096 ramp: each block's mean is its centre's value.
        let f = frame::<u16>(4096, 4096, |x, y| (x + y) as u16);
        let m = encode_frame(&f, 1024, 0).unwrap();
        let (h, at) = FrameHeader::decode(&m).unwrap();
        assert_eq!(
            (h.width, h.height, h.full_width, h.bin_x),
            (1024, 1024, 4096, 4)
        );
        let px: Vec<u16> = m[at..]
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        assert_eq!(px.len(), 1024 * 1024);
        // Block (0,0) holds x+y for x,y in 0..4: mean 3; block (1,2): mean 4+1.5+8+1.5 = 15.
        assert_eq!(px[0], 3);
        assert_eq!(px[2 * 1024 + 1], 15);
        // 5x3 UInt8 to at most 2 a side: bin 3, one block; columns 3 and 4 dropped.
        let f = frame::<u8>(5, 3, |x, y| (10 * x + y) as u8);
        let m = encode_frame(&f, 2, 0).unwrap();
        let (h, at) = FrameHeader::decode(&m).unwrap();
        assert_eq!((h.width, h.height, h.bin_x), (1, 1, 3));
        // bin 3: block (0,0) = x 0..3, y 0..3: mean 10 + 1 = 11.
        assert_eq!(&m[at..], &[11]);
    }

    #[test]
    fn other_types_are_sent_as_float32() {
        let f = frame::<i32>(2, 2, |x, y| x as i32 - 2 * y as i32);
        let m = encode_frame(&f, 0, 5).unwrap();
        let (h, at) = FrameHeader::decode(&m).unwrap();
        assert_eq!((h.data_type, h.skipped), (DataType::Float32, 5));
        let px: Vec<f32> = m[at..]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert_eq!(px, vec![0.0, 1.0, -2.0, -1.0]);
        assert_eq!(m.len(), HEADER_LEN + 16);
    }

    #[test]
    fn compressed_frames_are_decoded_and_bad_shapes_refused() {
        let f = frame::<u16>(64, 64, |x, y| (x * y) as u16);
        let mut packed = vec![0u8; 64 * 64 * 2 + 1024];
        let n = ndflow_codec_lz4(f.data_bytes(), &mut packed);
        let mut c = f.with_buffer(DataType::UInt16, {
            let mut b = Pool::unlimited().alloc(n).unwrap();
            b.as_mut_slice::<u8>().copy_from_slice(&packed[..n]);
            b.freeze()
        });
        c.codec.name = "lz4".into();
        c.compressed_size = n;
        let m = encode_frame(&c, 0, 0).unwrap();
        assert_eq!(&m[HEADER_LEN..], f.data_bytes());
        c.codec.name = "nonsense".into();
        assert!(encode_frame(&c, 0, 0).unwrap_err().contains("nonsense"));
        let cube = NDArray::from_pixels(&Pool::unlimited(), &[2, 2, 2], &[0u8; 8]).unwrap();
        assert!(shape(&cube).unwrap_err().contains("3 dimensions"));
    }

    fn ndflow_codec_lz4(src: &[u8], out: &mut [u8]) -> usize {
        ndflow_codec::lz4::compress_block(src, out).unwrap()
    }
}
