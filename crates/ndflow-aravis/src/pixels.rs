//! GenICam (PFNC) pixel formats as NDArrays: data type, colour mode, Bayer pattern, and how
//! the camera packs the pixels. Unpacked formats are handed on as they are (zero-copy where
//! the driver can); packed ones are unpacked to 16 bits in one pass, as ADAravis'
//! `ARConvertPixelFormat` does: `Mono16Low` keeps the value (12-bit data in bits 0–11),
//! `Mono16High` moves it to the top bits (bits 4–15), so that 16-bit displays scale it.

use ndflow_core::{BayerPattern, ColorMode, DataType};

/// PFNC numbers (the `PixelFormat` enumeration's values).
pub mod pfnc {
    pub const MONO8: u32 = 0x0108_0001;
    pub const MONO10: u32 = 0x0110_0003;
    pub const MONO10_PACKED: u32 = 0x010C_0004;
    pub const MONO12: u32 = 0x0110_0005;
    pub const MONO12_PACKED: u32 = 0x010C_0006;
    pub const MONO14: u32 = 0x0110_0025;
    pub const MONO16: u32 = 0x0110_0007;
    pub const MONO10P: u32 = 0x010A_0046;
    pub const MONO12P: u32 = 0x010C_0047;
    pub const RGB8: u32 = 0x0218_0014;
    pub const BGR8: u32 = 0x0218_0015;
    pub const BAYER_GR8: u32 = 0x0108_0008;
    pub const BAYER_RG8: u32 = 0x0108_0009;
    pub const BAYER_GB8: u32 = 0x0108_000A;
    pub const BAYER_BG8: u32 = 0x0108_000B;
}

/// How the pixels lie in the camera's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packing {
    /// As the NDArray wants them (8 or 16 bits per value, little-endian).
    None,
    /// BGR triplets: the NDArray's RGB1 needs the outer two swapped.
    Bgr,
    /// GigE Vision `…Packed`: two pixels in three bytes, the first and last byte each one
    /// pixel's high bits, the middle one both pixels' low bits (pixel 0 in bits 0–3).
    GigE { bits: u32 },
    /// PFNC `…p`: pixels as one little-endian bit stream, `bits` each, no padding.
    Lsb { bits: u32 },
}

/// What a pixel format becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub data_type: DataType,
    pub color_mode: ColorMode,
    pub bayer: Option<BayerPattern>,
    pub packing: Packing,
    /// Significant bits per value (8 for 8-bit formats, 10/12/14/16 otherwise).
    pub bits: u32,
}

/// The Bayer pattern of the PFNC Bayer families (GR, RG, GB, BG) by their number's low byte.
fn bayer_of(low: u32) -> Option<BayerPattern> {
    use BayerPattern::*;
    Some(match low {
        // 8-bit, 10, 12, 16 unpacked; 10/12 GigE-packed.
        0x08 | 0x0C | 0x10 | 0x2E | 0x26 | 0x2A => GRBG,
        0x09 | 0x0D | 0x11 | 0x2F | 0x27 | 0x2B => RGGB,
        0x0A | 0x0E | 0x12 | 0x30 | 0x28 | 0x2C => GBRG,
        0x0B | 0x0F | 0x13 | 0x31 | 0x29 | 0x2D => BGGR,
        // PFNC 10p/12p.
        0x56 | 0x57 => GRBG,
        0x58 | 0x59 => RGGB,
        0x54 | 0x55 => GBRG,
        0x52 | 0x53 => BGGR,
        _ => return None,
    })
}

/// The layout of a PFNC pixel format, or `None` when ndflow does not take it (YUV, 10-bit
/// RGB, planar, …).
pub fn layout_of(pixel_format: u32) -> Option<Layout> {
    use pfnc::*;
    let mono = |bits, packing| Layout {
        data_type: if bits == 8 {
            DataType::UInt8
        } else {
            DataType::UInt16
        },
        color_mode: ColorMode::Mono,
        bayer: None,
        packing,
        bits,
    };
    let rgb = |packing| Layout {
        data_type: DataType::UInt8,
        color_mode: ColorMode::RGB1,
        bayer: None,
        packing,
        bits: 8,
    };
    Some(match pixel_format {
        MONO8 => mono(8, Packing::None),
        MONO10 => mono(10, Packing::None),
        MONO12 => mono(12, Packing::None),
        MONO14 => mono(14, Packing::None),
        MONO16 => mono(16, Packing::None),
        MONO10_PACKED => mono(10, Packing::GigE { bits: 10 }),
        MONO12_PACKED => mono(12, Packing::GigE { bits: 12 }),
        MONO10P => mono(10, Packing::Lsb { bits: 10 }),
        MONO12P => mono(12, Packing::Lsb { bits: 12 }),
        RGB8 => rgb(Packing::None),
        BGR8 => rgb(Packing::Bgr),
        f => {
            let bayer = bayer_of(f & 0xFF)?;
            // PFNC: bits 16–23 are the bits per pixel in the buffer.
            let stored = (f >> 16) & 0xFF;
            let (bits, packing) = match (f & 0xFF, stored) {
                (0x08..=0x0B, 8) => (8, Packing::None),
                (0x0C..=0x0F, 16) => (10, Packing::None),
                (0x10..=0x13, 16) => (12, Packing::None),
                (0x2E..=0x31, 16) => (16, Packing::None),
                (0x26..=0x29, 12) => (10, Packing::GigE { bits: 10 }),
                (0x2A..=0x2D, 12) => (12, Packing::GigE { bits: 12 }),
                (0x52 | 0x54 | 0x56 | 0x58, 10) => (10, Packing::Lsb { bits: 10 }),
                (0x53 | 0x55 | 0x57 | 0x59, 12) => (12, Packing::Lsb { bits: 12 }),
                _ => return None,
            };
            Layout {
                data_type: if bits == 8 {
                    DataType::UInt8
                } else {
                    DataType::UInt16
                },
                color_mode: ColorMode::Bayer,
                bayer: Some(bayer),
                packing,
                bits,
            }
        }
    })
}

impl Layout {
    /// Bytes the camera's buffer holds for `n` pixel values (values: pixels × channels).
    pub fn packed_len(&self, n: usize) -> usize {
        match self.packing {
            Packing::None | Packing::Bgr => n * self.data_type.size(),
            Packing::GigE { .. } => n.div_ceil(2) * 3,
            Packing::Lsb { bits } => (n * bits as usize).div_ceil(8),
        }
    }

    /// Whether the camera's bytes are the NDArray's bytes.
    pub fn is_verbatim(&self) -> bool {
        self.packing == Packing::None
    }
}

/// Unpacks `n = dst.len()` values of a packed layout from `src` (at least
/// [`Layout::packed_len`] bytes), moving them to the top bits when `high`.
pub fn unpack(layout: &Layout, src: &[u8], dst: &mut [u16], high: bool) {
    let shift = if high { 16 - layout.bits } else { 0 };
    match layout.packing {
        Packing::GigE { bits } => unpack_gige(src, dst, bits, shift),
        Packing::Lsb { bits } => unpack_lsb(src, dst, bits, shift),
        Packing::None | Packing::Bgr => {}
    }
}

fn unpack_gige(src: &[u8], dst: &mut [u16], bits: u32, shift: u32) {
    let low_bits = bits - 8;
    let low_mask = (1u16 << low_bits) - 1;
    let tail_at = dst.len() / 2 * 3;
    let mut pairs = dst.chunks_exact_mut(2);
    for (d, s) in (&mut pairs).zip(src.chunks_exact(3)) {
        let (b0, b1, b2) = (u16::from(s[0]), u16::from(s[1]), u16::from(s[2]));
        d[0] = ((b0 << low_bits) | (b1 & low_mask)) << shift;
        d[1] = ((b2 << low_bits) | ((b1 >> 4) & low_mask)) << shift;
    }
    let rest = pairs.into_remainder();
    if let (Some(d), Some(s)) = (rest.first_mut(), src.get(tail_at..)) {
        let (b0, b1) = (
            u16::from(s.first().copied().unwrap_or(0)),
            u16::from(s.get(1).copied().unwrap_or(0)),
        );
        *d = ((b0 << low_bits) | (b1 & low_mask)) << shift;
    }
}

fn unpack_lsb(src: &[u8], dst: &mut [u16], bits: u32, shift: u32) {
    if bits == 12 {
        // Two pixels per three bytes: the common case, without the bit reader.
        let mut pairs = dst.chunks_exact_mut(2);
        for (d, s) in (&mut pairs).zip(src.chunks_exact(3)) {
            let (b0, b1, b2) = (u16::from(s[0]), u16::from(s[1]), u16::from(s[2]));
            d[0] = (b0 | ((b1 & 0x0F) << 8)) << shift;
            d[1] = ((b1 >> 4) | (b2 << 4)) << shift;
        }
        let done = dst.len() / 2 * 2;
        unpack_bits(src, &mut dst[done..], done, bits, shift);
        return;
    }
    unpack_bits(src, dst, 0, bits, shift);
}

/// The general bit reader: values `first..first + dst.len()` of a little-endian stream.
fn unpack_bits(src: &[u8], dst: &mut [u16], first: usize, bits: u32, shift: u32) {
    let mask = (1u32 << bits) - 1;
    for (i, d) in dst.iter_mut().enumerate() {
        let bit = (first + i) * bits as usize;
        let byte = bit / 8;
        let mut word = 0u32;
        for k in 0..3 {
            word |= u32::from(src.get(byte + k).copied().unwrap_or(0)) << (8 * k);
        }
        *d = (((word >> (bit % 8)) & mask) as u16) << shift;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packs values as the camera would (the inverse of `unpack`, written independently).
    fn pack(values: &[u16], packing: Packing) -> Vec<u8> {
        match packing {
            Packing::GigE { bits } => {
                let lb = bits - 8;
                let mut out = Vec::new();
                for pair in values.chunks(2) {
                    let p0 = pair[0];
                    let p1 = pair.get(1).copied().unwrap_or(0);
                    let lo_mask = (1 << lb) - 1;
                    out.push((p0 >> lb) as u8);
                    out.push(((p0 & lo_mask) | ((p1 & lo_mask) << 4)) as u8);
                    out.push((p1 >> lb) as u8);
                }
                out
            }
            Packing::Lsb { bits } => {
                let mut out = vec![0u8; (values.len() * bits as usize).div_ceil(8)];
                for (i, v) in values.iter().enumerate() {
                    for b in 0..bits as usize {
                        if v >> b & 1 == 1 {
                            let at = i * bits as usize + b;
                            out[at / 8] |= 1 << (at % 8);
                        }
                    }
                }
                out
            }
            _ => unreachable!(),
        }
    }

    #[test]
    fn every_packed_format_round_trips_in_both_placements() {
        for (format, bits) in [
            (pfnc::MONO12_PACKED, 12),
            (pfnc::MONO10_PACKED, 10),
            (pfnc::MONO12P, 12),
            (pfnc::MONO10P, 10),
            (0x010C_002B, 12), // BayerRG12Packed
            (0x010C_0059, 12), // BayerRG12p
            (0x010A_0058, 10), // BayerRG10p
        ] {
            let l = layout_of(format).unwrap();
            assert_eq!(l.bits, bits, "{format:#x}");
            for n in [1usize, 2, 3, 7, 640 * 3 + 1] {
                let values: Vec<u16> = (0..n)
                    .map(|i| ((i * 2654435761usize) >> 7) as u16 & ((1 << bits) - 1))
                    .collect();
                let packed = pack(&values, l.packing);
                assert_eq!(packed.len(), l.packed_len(n), "{format:#x} n={n}");
                let mut low = vec![0u16; n];
                unpack(&l, &packed, &mut low, false);
                assert_eq!(low, values, "{format:#x} n={n}");
                let mut high = vec![0u16; n];
                unpack(&l, &packed, &mut high, true);
                let shifted: Vec<u16> = values.iter().map(|v| v << (16 - bits)).collect();
                assert_eq!(high, shifted, "{format:#x} n={n} high");
            }
        }
    }

    #[test]
    fn mono12_packed_by_hand() {
        // Pixels 0xABC and 0x123: 0xAB, 0x3C (low nibbles 0xC | 0x3 << 4), 0x12.
        let l = layout_of(pfnc::MONO12_PACKED).unwrap();
        let mut out = [0u16; 2];
        unpack(&l, &[0xAB, 0x3C, 0x12], &mut out, false);
        assert_eq!(out, [0xABC, 0x123]);
        // Mono12p: 0xABC then 0x123 as a bit stream: 0xBC, 0x3A, 0x12.
        let l = layout_of(pfnc::MONO12P).unwrap();
        unpack(&l, &[0xBC, 0x3A, 0x12], &mut out, false);
        assert_eq!(out, [0xABC, 0x123]);
    }

    #[test]
    fn layouts() {
        let m12 = layout_of(pfnc::MONO12).unwrap();
        assert_eq!(
            (m12.data_type, m12.color_mode, m12.packing),
            (DataType::UInt16, ColorMode::Mono, Packing::None)
        );
        let gb8 = layout_of(pfnc::BAYER_GB8).unwrap();
        assert_eq!(gb8.bayer, Some(BayerPattern::GBRG));
        assert_eq!(gb8.data_type, DataType::UInt8);
        let bg12 = layout_of(0x0110_0013).unwrap();
        assert_eq!((bg12.bayer, bg12.bits), (Some(BayerPattern::BGGR), 12));
        assert_eq!(layout_of(0x0210_001F), None, "YUV422Packed");
        assert_eq!(layout_of(pfnc::BGR8).unwrap().packing, Packing::Bgr);
    }
}
