//! The fixed header in front of every binary WebSocket frame (little-endian, 48 bytes):
//!
//! | offset | type | field |
//! |---|---|---|
//! | 0 | 4 bytes | magic `NDFW` |
//! | 4 | u16 | version (2) |
//! | 6 | u16 | header length in bytes (48; pixels start there) |
//! | 8 | i32 | uniqueId |
//! | 12 | u8 | ndims: 2 (Mono), 3 (RGB) |
//! | 13 | u8 | data type of the pixels sent (areaDetector's NDDataType index) |
//! | 14 | u8 | codec of the pixels sent (0 = none: the server decodes) |
//! | 15 | u8 | colour mode of the pixels sent (NDColorMode: 0 Mono, 2 RGB1) |
//! | 16 | f64 | timeStamp (s, EPICS epoch) |
//! | 24 | u32 × 2 | dims sent: width, height |
//! | 32 | u32 × 2 | dims of the frame before binning: width, height |
//! | 40 | u16 × 2 | binning in x, y |
//! | 44 | u32 | frames this client skipped (latest-wins) since the previous one |
//!
//! Readers check magic and version and skip to the header length, so fields can be added.
//! Version 2 gave byte 15 (reserved in version 1, always 0 = Mono) the colour mode: an RGB
//! frame (RGB1, RGB2 or RGB3 at the source) is sent pixel-interleaved as RGB1, three values
//! per pixel, row by row. A version 1 header is still read (as Mono).

use ndflow_core::{ColorMode, DataType};

pub const MAGIC: [u8; 4] = *b"NDFW";
pub const VERSION: u16 = 2;
pub const HEADER_LEN: usize = 48;
/// Where the per-client field `skipped` lies: the rest of a message is the same for every
/// client that gets the frame at the same size, and is encoded once ([`set_skipped`]).
pub const SKIPPED_AT: usize = 44;

/// The `skipped` field of an encoded message (`None` when it is too short).
pub fn skipped_of(msg: &[u8]) -> Option<u32> {
    let b = msg.get(SKIPPED_AT..SKIPPED_AT + 4)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Rewrites the `skipped` field of an encoded message (nothing when it is too short).
pub fn set_skipped(msg: &mut [u8], n: u32) {
    if let Some(b) = msg.get_mut(SKIPPED_AT..SKIPPED_AT + 4) {
        b.copy_from_slice(&n.to_le_bytes());
    }
}

/// One frame's header.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FrameHeader {
    pub unique_id: i32,
    pub time_stamp: f64,
    /// Type of the pixels that follow.
    pub data_type: DataType,
    /// Mono (one value a pixel) or RGB1 (three, interleaved).
    pub color_mode: ColorMode,
    pub width: u32,
    pub height: u32,
    pub full_width: u32,
    pub full_height: u32,
    pub bin_x: u16,
    pub bin_y: u16,
    pub skipped: u32,
}

/// Why bytes are not a frame header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderError {
    Short(usize),
    Magic,
    Version(u16),
    DataType(u8),
    Codec(u8),
    ColorMode(u8),
}

impl std::fmt::Display for HeaderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeaderError::Short(n) => write!(f, "{n} bytes, a header needs {HEADER_LEN}"),
            HeaderError::Magic => write!(f, "not an ndflow frame (magic)"),
            HeaderError::Version(v) => {
                write!(f, "header version {v}, this reader knows 1 and {VERSION}")
            }
            HeaderError::DataType(t) => write!(f, "unknown data type {t}"),
            HeaderError::Codec(c) => write!(f, "unknown codec {c}"),
            HeaderError::ColorMode(c) => write!(f, "colour mode {c} (only 0 Mono, 2 RGB1)"),
        }
    }
}

impl std::error::Error for HeaderError {}

impl FrameHeader {
    /// Appends the header's bytes to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&(HEADER_LEN as u16).to_le_bytes());
        out.extend_from_slice(&self.unique_id.to_le_bytes());
        let ndims = if self.color_mode == ColorMode::Mono {
            2
        } else {
            3
        };
        out.extend_from_slice(&[ndims, self.data_type as u8, 0, self.color_mode as u8]);
        out.extend_from_slice(&self.time_stamp.to_le_bytes());
        for v in [self.width, self.height, self.full_width, self.full_height] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&self.bin_x.to_le_bytes());
        out.extend_from_slice(&self.bin_y.to_le_bytes());
        out.extend_from_slice(&self.skipped.to_le_bytes());
    }

    /// Reads a header; returns it and where the pixels start.
    pub fn decode(b: &[u8]) -> Result<(FrameHeader, usize), HeaderError> {
        if b.len() < HEADER_LEN {
            return Err(HeaderError::Short(b.len()));
        }
        if b[0..4] != MAGIC {
            return Err(HeaderError::Magic);
        }
        let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let version = u16_at(4);
        if version != VERSION && version != 1 {
            return Err(HeaderError::Version(version));
        }
        let len = (u16_at(6) as usize).max(HEADER_LEN);
        let data_type = DataType::from_index(b[13] as i64).ok_or(HeaderError::DataType(b[13]))?;
        if b[14] != 0 {
            return Err(HeaderError::Codec(b[14]));
        }
        let color_mode = match (version, b[15]) {
            (1, _) | (_, 0) => ColorMode::Mono,
            (_, 2) => ColorMode::RGB1,
            (_, c) => return Err(HeaderError::ColorMode(c)),
        };
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&b[16..24]);
        let h = FrameHeader {
            unique_id: u32_at(8) as i32,
            time_stamp: f64::from_le_bytes(ts),
            data_type,
            color_mode,
            width: u32_at(24),
            height: u32_at(28),
            full_width: u32_at(32),
            full_height: u32_at(36),
            bin_x: u16_at(40),
            bin_y: u16_at(42),
            skipped: u32_at(44),
        };
        Ok((h, len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> FrameHeader {
        FrameHeader {
            unique_id: -7,
            time_stamp: 1_100_000_000.25,
            data_type: DataType::UInt16,
            color_mode: ColorMode::Mono,
            width: 1024,
            height: 512,
            full_width: 4096,
            full_height: 2048,
            bin_x: 4,
            bin_y: 4,
            skipped: 3,
        }
    }

    #[test]
    fn layout_is_as_documented() {
        let mut b = Vec::new();
        sample().encode(&mut b);
        assert_eq!(b.len(), HEADER_LEN);
        assert_eq!(&b[0..4], b"NDFW");
        assert_eq!(&b[4..8], &[2, 0, 48, 0]);
        assert_eq!(&b[8..12], &(-7i32).to_le_bytes());
        assert_eq!(&b[12..16], &[2, 3, 0, 0]);
        assert_eq!(&b[16..24], &1_100_000_000.25f64.to_le_bytes());
        assert_eq!(&b[24..28], &1024u32.to_le_bytes());
        assert_eq!(&b[36..40], &2048u32.to_le_bytes());
        assert_eq!(&b[40..44], &[4, 0, 4, 0]);
        assert_eq!(&b[44..48], &3u32.to_le_bytes());
        // RGB: three dims, colour mode 2 in the byte version 1 reserved.
        let mut b = Vec::new();
        FrameHeader {
            color_mode: ColorMode::RGB1,
            ..sample()
        }
        .encode(&mut b);
        assert_eq!(&b[12..16], &[3, 3, 0, 2]);
    }

    #[test]
    fn the_skipped_field_is_rewritten_in_place() {
        let mut b = Vec::new();
        sample().encode(&mut b);
        assert_eq!(skipped_of(&b), Some(3));
        set_skipped(&mut b, 77);
        let (h, _) = FrameHeader::decode(&b).unwrap();
        assert_eq!(
            h,
            FrameHeader {
                skipped: 77,
                ..sample()
            }
        );
        assert_eq!(skipped_of(&b[..40]), None);
        set_skipped(&mut b[..40], 1);
    }

    #[test]
    fn round_trips_and_rejects_bad_input() {
        let mut b = Vec::new();
        sample().encode(&mut b);
        assert_eq!(FrameHeader::decode(&b), Ok((sample(), HEADER_LEN)));
        assert_eq!(FrameHeader::decode(&b[..47]), Err(HeaderError::Short(47)));
        let mut bad = b.clone();
        bad[0] = b'X';
        assert_eq!(FrameHeader::decode(&bad), Err(HeaderError::Magic));
        let mut bad = b.clone();
        bad[4] = 9;
        assert_eq!(FrameHeader::decode(&bad), Err(HeaderError::Version(9)));
        let mut bad = b.clone();
        bad[13] = 42;
        assert_eq!(FrameHeader::decode(&bad), Err(HeaderError::DataType(42)));
        let mut rgb = b.clone();
        rgb[15] = 2;
        assert_eq!(
            FrameHeader::decode(&rgb).unwrap().0.color_mode,
            ColorMode::RGB1
        );
        let mut v1 = rgb.clone();
        v1[4] = 1;
        assert_eq!(
            FrameHeader::decode(&v1).unwrap().0.color_mode,
            ColorMode::Mono,
            "version 1's reserved byte is not a colour mode"
        );
        let mut bad = b.clone();
        bad[15] = 4;
        assert_eq!(FrameHeader::decode(&bad), Err(HeaderError::ColorMode(4)));
        let mut bad = b;
        bad[14] = 1;
        assert!(FrameHeader::decode(&bad)
            .unwrap_err()
            .to_string()
            .contains("codec 1"));
    }
}
