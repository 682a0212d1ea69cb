//! pvAccess wire encoding: message header, primitives, type descriptions and values.
//!
//! Byte order is a property of each message (header flag bit 7), so every [`Reader`] and [`Writer`]
//! carries one. Numeric array payloads are kept as raw bytes plus their byte order
//! ([`NumArray`]), which lets a decoded value borrow the received message ([`SharedBytes`]) and lets
//! an encoder send a frame's pixel buffer without converting it first.

pub mod header;
pub mod primitives;
pub mod typedesc;
pub mod value;

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

pub use header::{Header, Segment, SegmentAssembler};
pub use primitives::{BitSet, Reader, Status, StatusKind, Writer, ZERO_COPY_MIN};
pub use typedesc::{FieldDesc, Members, ScalarType, TypeCache};
pub use value::{NumArray, Value};

/// Byte order of one message (pvAccess flags it per message).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ByteOrder {
    Little,
    Big,
}

impl ByteOrder {
    /// The order of the machine we run on.
    pub const NATIVE: ByteOrder = if cfg!(target_endian = "big") {
        ByteOrder::Big
    } else {
        ByteOrder::Little
    };
}

/// Why a decoder refused its input. Decoders never panic on network data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("truncated: needed {needed} more bytes at offset {at}")]
    Truncated { at: usize, needed: usize },
    #[error("bad magic byte 0x{0:02x}")]
    BadMagic(u8),
    #[error("unsupported protocol version {0}")]
    BadVersion(u8),
    #[error("invalid size encoding")]
    BadSize,
    #[error("null where a value is required")]
    UnexpectedNull,
    #[error("invalid UTF-8 in string")]
    BadUtf8,
    #[error("unknown or unsupported type code 0x{0:02x}")]
    BadTypeCode(u8),
    #[error("type cache key {0} not defined")]
    UnknownCacheKey(u16),
    #[error("nesting deeper than {0}")]
    TooDeep(usize),
    #[error("invalid status type {0}")]
    BadStatus(u8),
    #[error("union selector {selector} out of range ({members} members)")]
    BadSelector { selector: usize, members: usize },
    #[error("bad segmentation sequence")]
    BadSegment,
    #[error("message too large ({0} bytes)")]
    TooLarge(usize),
    #[error("{0}")]
    Invalid(&'static str),
}

/// Why an encoder refused its input (a value that does not match its type, or a size the protocol
/// cannot carry).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    #[error("size {0} cannot be encoded (limit 2^31-2)")]
    SizeTooLarge(usize),
    #[error("value does not match type: {0}")]
    Mismatch(&'static str),
    #[error("union selector {selector} out of range ({members} members)")]
    BadSelector { selector: usize, members: usize },
}

/// An immutable byte range with a shared owner: a received message, a frame buffer, a `Vec`.
/// Cloning is an `Arc` increment; slicing never copies.
#[derive(Clone)]
pub struct SharedBytes {
    owner: Arc<dyn AsRef<[u8]> + Send + Sync>,
    start: usize,
    len: usize,
}

impl SharedBytes {
    /// Share any byte owner (e.g. a frame buffer) without copying it.
    pub fn from_owner<O: AsRef<[u8]> + Send + Sync + 'static>(owner: O) -> Self {
        let len = owner.as_ref().len();
        Self {
            owner: Arc::new(owner),
            start: 0,
            len,
        }
    }

    /// Copy a slice into a new owner.
    pub fn copy_from_slice(bytes: &[u8]) -> Self {
        Self::from_owner(bytes.to_vec())
    }

    pub fn empty() -> Self {
        Self::from_owner(Vec::new())
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_slice(&self) -> &[u8] {
        let all: &[u8] = (*self.owner).as_ref();
        all.get(self.start..self.start + self.len).unwrap_or(&[])
    }

    /// A sub-range sharing the same owner; `None` if out of bounds.
    pub fn slice(&self, start: usize, len: usize) -> Option<Self> {
        let end = start.checked_add(len)?;
        if end > self.len {
            return None;
        }
        Some(Self {
            owner: Arc::clone(&self.owner),
            start: self.start + start,
            len,
        })
    }
}

impl Deref for SharedBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for SharedBytes {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl PartialEq for SharedBytes {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for SharedBytes {}

impl fmt::Debug for SharedBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SharedBytes({} bytes)", self.len)
    }
}

impl From<Vec<u8>> for SharedBytes {
    fn from(v: Vec<u8>) -> Self {
        Self::from_owner(v)
    }
}
