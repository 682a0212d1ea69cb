//! A frame made ready for the page: decoded, two-dimensional, binned down to the size the
//! client asked for, in a type a WebGL2 texture takes at full depth (UInt8 → R8UI,
//! UInt16 → R16UI, everything else → R32F; RGB frames, sent interleaved as RGB1 whatever
//! their layout, as RGB8UI, RGB16UI, RGB32F).
//!
//! Binning **averages** each `b × b` block (integers rounded to nearest), so values keep
//! their type and range and a window/level set on the full frame still fits the binned one.
//! Columns and rows left over at the right and bottom edges (when the size is not a
//! multiple of `b`) are not shown.

use ndflow_core::{with_pixel_type, ColorMode, DataType, NDArray, Pixel, Pool};

use crate::header::FrameHeader;

/// Where a frame's values lie: `w × h` pixels of `colors` values each (1 Mono, 3 RGB), value
/// (x, y, c) at element `x·xs + y·ys + c·cs`. RGB1 (dims 3, X, Y), RGB2 (X, 3, Y) and RGB3
/// (X, Y, 3) differ only in the strides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub w: usize,
    pub h: usize,
    pub colors: usize,
    pub xs: usize,
    pub ys: usize,
    pub cs: usize,
}

impl Shape {
    /// Elements the layout spans.
    pub fn len(&self) -> usize {
        self.w * self.h * self.colors
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The shape of a frame the viewer can show: Mono 1-D (one row) or 2-D, or RGB1/RGB2/RGB3
/// 3-D with a colour dim of 3.
pub fn shape(frame: &NDArray) -> Result<Shape, String> {
    let dims = frame.sizes();
    let mode = frame.color_mode();
    let mono = |w: usize, h: usize| Shape {
        w,
        h,
        colors: 1,
        xs: 1,
        ys: w,
        cs: 0,
    };
    match (mode, dims.as_slice()) {
        (ColorMode::Mono, [w]) => Ok(mono(*w, 1)),
        (ColorMode::Mono, [w, h]) => Ok(mono(*w, *h)),
        (ColorMode::Mono, other) => Err(format!(
            "{} dimensions cannot be shown (Mono: 1 or 2)",
            other.len()
        )),
        (ColorMode::RGB1, [3, w, h]) => Ok(Shape {
            w: *w,
            h: *h,
            colors: 3,
            xs: 3,
            ys: 3 * w,
            cs: 1,
        }),
        (ColorMode::RGB2, [w, 3, h]) => Ok(Shape {
            w: *w,
            h: *h,
            colors: 3,
            xs: 1,
            ys: 3 * w,
            cs: *w,
        }),
        (ColorMode::RGB3, [w, h, 3]) => Ok(Shape {
            w: *w,
            h: *h,
            colors: 3,
            xs: 1,
            ys: *w,
            cs: w * h,
        }),
        (ColorMode::RGB1 | ColorMode::RGB2 | ColorMode::RGB3, d) => Err(format!(
            "colour mode {} with dims {d:?} cannot be shown (no colour dim of 3 where {} puts it)",
            mode.name(),
            mode.name()
        )),
        (other, _) => Err(format!(
            "colour mode {} cannot be shown (Mono, RGB1, RGB2, RGB3)",
            other.name()
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

/// The whole message for `frame`: header, then pixels binned for `max_side` (RGB frames
/// pixel-interleaved, as RGB1). A compressed frame is decoded first.
pub fn encode_frame(frame: &NDArray, max_side: usize, skipped: u32) -> Result<Vec<u8>, String> {
    let decoded;
    let frame = if frame.is_compressed() {
        decoded = ndflow_plugins::codec::decompress(frame, &Pool::unlimited())
            .map_err(|e| format!("frame {}: {e}", frame.unique_id))?;
        &decoded
    } else {
        frame
    };
    let s = shape(frame)?;
    let b = bin_factor(s.w, s.h, max_side);
    let (ow, oh) = (s.w / b, s.h / b);
    let out_type = wire_type(frame.data_type);
    let header = FrameHeader {
        unique_id: frame.unique_id,
        time_stamp: frame.time_stamp,
        data_type: out_type,
        color_mode: if s.colors == 1 {
            ColorMode::Mono
        } else {
            ColorMode::RGB1
        },
        width: ow as u32,
        height: oh as u32,
        full_width: s.w as u32,
        full_height: s.h as u32,
        bin_x: b.min(u16::MAX as usize) as u16,
        bin_y: b.min(u16::MAX as usize) as u16,
        skipped,
    };
    let bytes = ow * oh * s.colors * out_type.size();
    let mut out = Vec::with_capacity(crate::header::HEADER_LEN + bytes);
    header.encode(&mut out);
    // As it is: the frame's own bytes (wire order is little-endian).
    if b == 1 && s.colors == 1 && out_type == frame.data_type && cfg!(target_endian = "little") {
        let raw = frame
            .data_bytes()
            .get(..bytes)
            .ok_or("frame holds fewer pixels than its dims")?;
        out.extend_from_slice(raw);
        return Ok(out);
    }
    with_pixel_type!(frame.data_type, T => {
        let px = frame.pixels::<T>().map_err(|e| e.to_string())?;
        let px = px.get(..s.len()).ok_or("frame holds fewer pixels than its dims")?;
        match out_type {
            DataType::UInt8 => push_binned(px, &s, b, &mut out, |v| [v.round() as u8]),
            DataType::UInt16 => {
                push_binned(px, &s, b, &mut out, |v| (v.round() as u16).to_le_bytes())
            }
            _ => push_binned(px, &s, b, &mut out, |v| (v as f32).to_le_bytes()),
        }
    });
    Ok(out)
}

/// Appends the `b × b` block means of `px` (laid out as `s`, holding at least `s.len()`
/// values), pixel by pixel and colour by colour within a pixel, each as `bytes(mean)`.
fn push_binned<T: Pixel, const N: usize>(
    px: &[T],
    s: &Shape,
    b: usize,
    out: &mut Vec<u8>,
    bytes: impl Fn(f64) -> [u8; N],
) {
    let (ow, oh) = (s.w / b, s.h / b);
    if s.colors == 1 {
        // Mono: whole rows at a time.
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
            for row in px.chunks_exact(s.w.max(1)).skip(oy * b).take(b) {
                for (a, block) in acc.iter_mut().zip(row.chunks_exact(b)) {
                    *a += block.iter().map(|v| v.to_f64()).sum::<f64>();
                }
            }
            for a in &acc {
                out.extend_from_slice(&bytes(a / n));
            }
        }
        return;
    }
    let c = s.colors;
    let mut acc = vec![0.0f64; ow * c];
    let n = (b * b) as f64;
    for oy in 0..oh {
        acc.fill(0.0);
        for y in oy * b..(oy + 1) * b {
            for (ox, a) in acc.chunks_exact_mut(c).enumerate() {
                for x in ox * b..(ox + 1) * b {
                    let at = x * s.xs + y * s.ys;
                    for (k, ak) in a.iter_mut().enumerate() {
                        // In bounds: x < w, y < h, k < colors and px holds s.len() values.
                        *ak += px[at + k * s.cs].to_f64();
                    }
                }
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

    #[test]
    fn rgb_frames_are_sent_interleaved_and_binned_per_colour() {
        // Value (x, y, c) = 100·c + 10·y + x, in each of the three layouts.
        let (w, h) = (4usize, 2usize);
        let v = |x: usize, y: usize, c: usize| (100 * c + 10 * y + x) as u16;
        let make = |mode: ColorMode| {
            // Element strides of x, y and colour.
            let (dims, [xs, ys, cs]) = match mode {
                ColorMode::RGB1 => (vec![3, w, h], [3, 3 * w, 1]),
                ColorMode::RGB2 => (vec![w, 3, h], [1, 3 * w, w]),
                _ => (vec![w, h, 3], [1, w, w * h]),
            };
            let at = |x: usize, y: usize, c: usize| x * xs + y * ys + c * cs;
            let mut px = vec![0u16; w * h * 3];
            for y in 0..h {
                for x in 0..w {
                    for c in 0..3 {
                        px[at(x, y, c)] = v(x, y, c);
                    }
                }
            }
            let mut f = NDArray::from_pixels(&Pool::unlimited(), &dims, &px).unwrap();
            f.set_color_mode(mode);
            f
        };
        let want: Vec<u16> = (0..h)
            .flat_map(|y| (0..w).flat_map(move |x| (0..3).map(move |c| v(x, y, c))))
            .collect();
        for mode in [ColorMode::RGB1, ColorMode::RGB2, ColorMode::RGB3] {
            let m = encode_frame(&make(mode), 0, 0).unwrap();
            let (hd, at) = FrameHeader::decode(&m).unwrap();
            assert_eq!(
                (hd.color_mode, hd.width, hd.height, hd.data_type),
                (ColorMode::RGB1, 4, 2, DataType::UInt16),
                "{mode:?}"
            );
            let px: Vec<u16> = m[at..]
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect();
            assert_eq!(px, want, "{mode:?}");
            // Binned 2x2: two pixels, each colour the mean of its block.
            let m = encode_frame(&make(mode), 2, 0).unwrap();
            let (hd, at) = FrameHeader::decode(&m).unwrap();
            assert_eq!((hd.width, hd.height, hd.bin_x), (2, 1, 2));
            let px: Vec<u16> = m[at..]
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect();
            // Block (0,0): x 0..2, y 0..2: mean 100c + 5 + 0.5 -> rounded to nearest.
            assert_eq!(px, vec![6, 106, 206, 8, 108, 208], "{mode:?}");
        }
        let mut bad = make(ColorMode::RGB1);
        bad.set_color_mode(ColorMode::RGB3);
        assert!(shape(&bad).unwrap_err().contains("RGB3"));
        bad.set_color_mode(ColorMode::Bayer);
        assert!(shape(&bad).unwrap_err().contains("Bayer"));
    }

    fn ndflow_codec_lz4(src: &[u8], out: &mut [u8]) -> usize {
        ndflow_codec::lz4::compress_block(src, out).unwrap()
    }
}
