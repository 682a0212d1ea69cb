//! The detector's image streams: v1 ("legacy", multipart JSON) and v2 (CBOR), decoded into
//! one set of events, and the frame encodings both carry.
//!
//! Decoding borrows nothing and copies no pixels: a frame's bytes are a [`Bytes`] slice of
//! the ZeroMQ message they came in. One ZeroMQ message may hold several logical messages (a
//! header and the first image arrive together when arm and trigger are close), so the
//! decoders walk every part and append every event they find.

use bytes::Bytes;

pub mod encoding;
pub mod v1;
pub mod v2;

/// A frame's element type as the stream names it (`type` in v1, `image_dtype` or the typed
/// array tag in v2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PixelType {
    U8,
    U16,
    U32,
    I8,
    I16,
    I32,
}

impl PixelType {
    pub fn size(self) -> usize {
        match self {
            PixelType::U8 | PixelType::I8 => 1,
            PixelType::U16 | PixelType::I16 => 2,
            PixelType::U32 | PixelType::I32 => 4,
        }
    }
}

/// How a frame's bytes are encoded on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// v1 `<`, a v2 plain byte string: the pixels, little-endian.
    Raw,
    /// v1 `lz4<`: one raw LZ4 block of the whole frame, no header; the size comes from the shape.
    Lz4Block,
    /// v1 `bsNN-lz4<`, v2 `["bslz4", n, …]`: the HDF5 bitshuffle (32008) chunk format with its
    /// 12-byte header.
    BsLz4 { elem_size: usize },
    /// v2 `["lz4", 0, …]`: the HDF5 LZ4 filter (32004) framing, unlike v1's `lz4<`.
    Lz4Hdf5,
}

impl Encoding {
    /// The NDArray codec name ADEiger gives a compressed pass-through frame ("" = raw).
    pub fn codec_name(self) -> &'static str {
        match self {
            Encoding::Raw => "",
            Encoding::Lz4Block => "lz4",
            Encoding::BsLz4 { .. } => "bslz4",
            Encoding::Lz4Hdf5 => "lz4hdf5",
        }
    }
}

/// One channel's image: its geometry, element type, encoding and the encoded bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    /// v2's channel name (`threshold_1`, `difference`, …); v1 has one channel, `""`.
    pub channel: String,
    /// Pixels per row (NDArray dims[0]).
    pub width: usize,
    /// Rows (NDArray dims[1]).
    pub height: usize,
    pub pixel: PixelType,
    pub encoding: Encoding,
    /// The encoded bytes, a slice of the received message.
    pub data: Bytes,
}

impl Frame {
    /// Bytes of the decoded frame.
    pub fn decoded_len(&self) -> usize {
        self.width * self.height * self.pixel.size()
    }
}

/// A time as the stream gives it: `num / den` seconds (v2: 50 MHz ticks; v1: ns, den = 1e9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rational {
    pub num: u64,
    pub den: u64,
}

impl Rational {
    /// Nanoseconds, or `None` for a zero denominator.
    pub fn as_nanos(self) -> Option<u128> {
        (self.den != 0).then(|| u128::from(self.num) * 1_000_000_000 / u128::from(self.den))
    }
}

/// A value from a start message or v1 header that becomes an NDAttribute.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaValue {
    Int(i64),
    Float(f64),
    Bool(bool),
    Text(String),
}

/// An array from the series header: flatfield, pixel mask or countrate table.
#[derive(Debug, Clone, PartialEq)]
pub struct HeaderArray {
    /// `flatfield`, `pixel_mask` or `countrate_table`, then `/channel` in v2 (`pixel_mask/threshold_1`).
    pub name: String,
    /// NDArray order: dims[0] varies fastest (v1 `shape` as sent; v2 tag-40 dims reversed).
    pub dims: Vec<usize>,
    pub kind: ArrayKind,
    /// Little-endian elements, decompressed.
    pub data: Bytes,
}

/// The element type of a [`HeaderArray`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArrayKind {
    U8,
    U16,
    U32,
    U64,
    I8,
    I16,
    I32,
    I64,
    F32,
    F64,
}

/// The start of a series (v1 global header, v2 `start`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Start {
    /// v1 `series`, v2 `series_id`.
    pub series_id: u64,
    /// v2 `series_unique_id`.
    pub series_unique_id: Option<String>,
    /// v1 `header_detail` (`all` / `basic` / `none`).
    pub header_detail: Option<String>,
    /// v2 `channels` in order; empty for v1.
    pub channels: Vec<String>,
    /// v2 `threshold_energy` per channel (eV); v1: empty.
    pub threshold_energy: Vec<(String, f64)>,
    /// v2 `image_dtype`, when present.
    pub image_dtype: Option<PixelType>,
    /// v2 `image_size_x` / `image_size_y`, when present.
    pub image_size: Option<(usize, usize)>,
    /// Scalar settings (v1 config dict, v2 start fields): `count_time`, `beam_center_x`, …
    /// Nested v2 maps are flattened with `/` (`goniometer/omega/start`).
    pub meta: Vec<(String, MetaValue)>,
    pub arrays: Vec<HeaderArray>,
    /// v1 header appendix part / v2 `user_data`, as text (CBOR non-text is shown as debug).
    pub appendix: Option<String>,
}

/// One image: one frame per channel, in the start message's channel order.
#[derive(Debug, Clone, PartialEq)]
pub struct Image {
    pub series_id: u64,
    /// v1 `frame`, v2 `image_id` (0-based).
    pub image_id: u64,
    pub series_unique_id: Option<String>,
    pub frames: Vec<Frame>,
    pub start_time: Option<Rational>,
    pub stop_time: Option<Rational>,
    pub real_time: Option<Rational>,
    /// v2 `series_date` (RFC 3339 text).
    pub series_date: Option<String>,
    /// v1 image appendix / v2 `user_data`.
    pub appendix: Option<String>,
}

/// One logical stream message.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Start(Start),
    Image(Image),
    End {
        series_id: u64,
        series_unique_id: Option<String>,
    },
}

/// Why a message (or part of one) could not be decoded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StreamError {
    /// Not JSON / not CBOR / not the expected structure.
    #[error("malformed {what}: {detail}")]
    Malformed { what: &'static str, detail: String },
    #[error("unknown encoding '{0}'")]
    UnknownEncoding(String),
    #[error("unknown pixel type '{0}'")]
    UnknownType(String),
    /// Sizes that do not agree (header vs blob, shape vs decoded length) or are absurd.
    #[error("bad size: {0}")]
    BadSize(String),
    /// The compressed bytes do not decode.
    #[error("cannot decode the frame: {0}")]
    Decode(String),
}

impl StreamError {
    /// A short, fixed label for the drop counter's reason.
    pub fn reason(&self) -> &'static str {
        match self {
            StreamError::Malformed { .. } => "malformed",
            StreamError::UnknownEncoding(_) => "unknown encoding",
            StreamError::UnknownType(_) => "unknown type",
            StreamError::BadSize(_) => "bad size",
            StreamError::Decode(_) => "decode",
        }
    }
}

/// The largest frame accepted, in decoded bytes: a 16M EIGER2 in 32-bit is 145 MB, so 1 GiB
/// refuses absurd shapes without refusing any real detector.
pub const MAX_FRAME_BYTES: usize = 1 << 30;
