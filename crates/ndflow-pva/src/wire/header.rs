//! The 8-byte message header and reassembly of segmented messages.

use super::{ByteOrder, DecodeError};

pub const MAGIC: u8 = 0xCA;
/// Protocol version sent by pvxs and pvAccessCPP 7.x.
pub const VERSION: u8 = 2;
pub const HEADER_LEN: usize = 8;

pub const FLAG_CONTROL: u8 = 0x01;
pub const FLAG_SEGMENT_MASK: u8 = 0x30;
pub const FLAG_SERVER: u8 = 0x40;
pub const FLAG_BIG_ENDIAN: u8 = 0x80;

/// Control command: set byte order (first thing a server sends on TCP).
pub const CTRL_SET_BYTE_ORDER: u8 = 0x02;

/// Where a message sits in a segmented sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Segment {
    None,
    First,
    Middle,
    Last,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub version: u8,
    pub flags: u8,
    pub command: u8,
    /// Payload length; for control messages a value with no payload behind it.
    pub payload_size: u32,
}

impl Header {
    /// An unsegmented application message.
    pub fn application(command: u8, from_server: bool, order: ByteOrder, size: u32) -> Self {
        let mut flags = if from_server { FLAG_SERVER } else { 0 };
        if order == ByteOrder::Big {
            flags |= FLAG_BIG_ENDIAN;
        }
        Self {
            version: VERSION,
            flags,
            command,
            payload_size: size,
        }
    }

    /// A control message (no payload follows; `value` sits in the size field).
    pub fn control(command: u8, from_server: bool, order: ByteOrder, value: u32) -> Self {
        let mut h = Self::application(command, from_server, order, value);
        h.flags |= FLAG_CONTROL;
        h
    }

    pub fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        let Some(b) = b.get(..HEADER_LEN) else {
            return Err(DecodeError::Truncated {
                at: b.len(),
                needed: HEADER_LEN - b.len(),
            });
        };
        if b[0] != MAGIC {
            return Err(DecodeError::BadMagic(b[0]));
        }
        if b[1] == 0 {
            return Err(DecodeError::BadVersion(b[1]));
        }
        let flags = b[2];
        let sz = [b[4], b[5], b[6], b[7]];
        let payload_size = if flags & FLAG_BIG_ENDIAN != 0 {
            u32::from_be_bytes(sz)
        } else {
            u32::from_le_bytes(sz)
        };
        Ok(Self {
            version: b[1],
            flags,
            command: b[3],
            payload_size,
        })
    }

    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let sz = match self.byte_order() {
            ByteOrder::Big => self.payload_size.to_be_bytes(),
            ByteOrder::Little => self.payload_size.to_le_bytes(),
        };
        [
            MAGIC,
            self.version,
            self.flags,
            self.command,
            sz[0],
            sz[1],
            sz[2],
            sz[3],
        ]
    }

    pub fn byte_order(&self) -> ByteOrder {
        if self.flags & FLAG_BIG_ENDIAN != 0 {
            ByteOrder::Big
        } else {
            ByteOrder::Little
        }
    }

    pub fn is_control(&self) -> bool {
        self.flags & FLAG_CONTROL != 0
    }

    pub fn is_from_server(&self) -> bool {
        self.flags & FLAG_SERVER != 0
    }

    /// Bytes of payload that follow this header on the wire (none for control messages).
    pub fn payload_len(&self) -> usize {
        if self.is_control() {
            0
        } else {
            self.payload_size as usize
        }
    }

    pub fn segment(&self) -> Segment {
        match self.flags & FLAG_SEGMENT_MASK {
            0x10 => Segment::First,
            0x30 => Segment::Middle,
            0x20 => Segment::Last,
            _ => Segment::None,
        }
    }
}

/// Joins segmented application messages into one payload. Control messages must be handled by the
/// caller before feeding (they may be interleaved and are never segmented).
#[derive(Debug, Default)]
pub struct SegmentAssembler {
    pending: Option<(u8, Vec<u8>)>,
    limit: usize,
}

impl SegmentAssembler {
    /// `limit`: largest reassembled payload accepted, so a peer cannot grow it without bound.
    pub fn new(limit: usize) -> Self {
        Self {
            pending: None,
            limit,
        }
    }

    /// Feed one application message; returns `(command, payload)` when a whole message is ready.
    pub fn push(
        &mut self,
        header: &Header,
        payload: &[u8],
    ) -> Result<Option<(u8, Vec<u8>)>, DecodeError> {
        let seg = header.segment();
        match (seg, self.pending.take()) {
            (Segment::None, None) => Ok(Some((header.command, payload.to_vec()))),
            (Segment::First, None) => {
                self.check(payload.len())?;
                self.pending = Some((header.command, payload.to_vec()));
                Ok(None)
            }
            (Segment::Middle | Segment::Last, Some((cmd, mut buf))) => {
                if cmd != header.command {
                    return Err(DecodeError::BadSegment);
                }
                self.check(buf.len().saturating_add(payload.len()))?;
                buf.extend_from_slice(payload);
                if seg == Segment::Last {
                    Ok(Some((cmd, buf)))
                } else {
                    self.pending = Some((cmd, buf));
                    Ok(None)
                }
            }
            _ => Err(DecodeError::BadSegment),
        }
    }

    fn check(&self, len: usize) -> Result<(), DecodeError> {
        if len > self.limit {
            Err(DecodeError::TooLarge(len))
        } else {
            Ok(())
        }
    }
}
