//! The CA message header (16 bytes, or 24 in the extended form), command numbers, ECA status
//! codes and message building. All integers on the wire are big-endian; payloads are padded to a
//! multiple of 8 bytes.

/// Protocol minor version we speak (4.13: dynamic arrays, count 0 = current element count).
pub const MINOR_VERSION: u16 = 13;
/// Default server port (TCP and UDP) and repeater/beacon port.
pub const DEFAULT_SERVER_PORT: u16 = 5064;
pub const DEFAULT_REPEATER_PORT: u16 = 5065;
/// Default EPICS_CA_MAX_ARRAY_BYTES.
pub const DEFAULT_MAX_ARRAY_BYTES: usize = 16384;
/// Largest payload sent with a normal header; larger ones use the extended form. 16384 - 16 is
/// the historic buffer limit old clients were built with.
pub const MAX_SMALL_PAYLOAD: usize = 16368;

/// Command numbers.
pub mod cmd {
    pub const VERSION: u16 = 0;
    pub const EVENT_ADD: u16 = 1;
    pub const EVENT_CANCEL: u16 = 2;
    pub const READ: u16 = 3;
    pub const WRITE: u16 = 4;
    pub const SEARCH: u16 = 6;
    pub const EVENTS_OFF: u16 = 8;
    pub const EVENTS_ON: u16 = 9;
    pub const READ_SYNC: u16 = 10;
    pub const ERROR: u16 = 11;
    pub const CLEAR_CHANNEL: u16 = 12;
    pub const RSRV_IS_UP: u16 = 13;
    pub const NOT_FOUND: u16 = 14;
    pub const READ_NOTIFY: u16 = 15;
    pub const REPEATER_CONFIRM: u16 = 17;
    pub const CREATE_CHAN: u16 = 18;
    pub const WRITE_NOTIFY: u16 = 19;
    pub const CLIENT_NAME: u16 = 20;
    pub const HOST_NAME: u16 = 21;
    pub const ACCESS_RIGHTS: u16 = 22;
    pub const ECHO: u16 = 23;
    pub const REPEATER_REGISTER: u16 = 24;
    pub const CREATE_CH_FAIL: u16 = 26;
    pub const SERVER_DISCONN: u16 = 27;
}

/// SEARCH `data type` field: answer with NOT_FOUND when the name is unknown.
pub const DO_REPLY: u16 = 10;
pub const DONT_REPLY: u16 = 5;

/// ECA status codes (`code << 3 | severity`, as in caerr.h).
pub mod eca {
    pub const NORMAL: u32 = 1;
    pub const ALLOCMEM: u32 = 48;
    pub const TOLARGE: u32 = 72;
    pub const TIMEOUT: u32 = 80;
    pub const BADTYPE: u32 = 114;
    pub const INTERNAL: u32 = 142;
    pub const GETFAIL: u32 = 152;
    pub const PUTFAIL: u32 = 160;
    pub const BADCOUNT: u32 = 176;
    pub const BADSTR: u32 = 186;
    pub const DISCONN: u32 = 192;
    pub const NORDACCESS: u32 = 368;
    pub const NOWTACCESS: u32 = 376;
    pub const NOCONVERT: u32 = 400;
    pub const BADCHID: u32 = 410;
    pub const UNAVAILINSERV: u32 = 432;

    /// A short name for logs and errors.
    pub fn name(code: u32) -> &'static str {
        match code {
            NORMAL => "ECA_NORMAL",
            ALLOCMEM => "ECA_ALLOCMEM",
            TOLARGE => "ECA_TOLARGE",
            TIMEOUT => "ECA_TIMEOUT",
            BADTYPE => "ECA_BADTYPE",
            INTERNAL => "ECA_INTERNAL",
            GETFAIL => "ECA_GETFAIL",
            PUTFAIL => "ECA_PUTFAIL",
            BADCOUNT => "ECA_BADCOUNT",
            BADSTR => "ECA_BADSTR",
            DISCONN => "ECA_DISCONN",
            NORDACCESS => "ECA_NORDACCESS",
            NOWTACCESS => "ECA_NOWTACCESS",
            NOCONVERT => "ECA_NOCONVERT",
            BADCHID => "ECA_BADCHID",
            UNAVAILINSERV => "ECA_UNAVAILINSERV",
            _ => "ECA_?",
        }
    }
}

/// Event mask bits of EVENT_ADD.
pub const DBE_VALUE: u16 = 1;
pub const DBE_LOG: u16 = 2;
pub const DBE_ALARM: u16 = 4;
pub const DBE_PROPERTY: u16 = 8;

/// A decoded header; `payload_size` and `count` are the real values (extended form resolved).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header {
    pub command: u16,
    pub payload_size: u32,
    pub data_type: u16,
    pub count: u32,
    pub p1: u32,
    pub p2: u32,
}

/// Why a byte stream could not be framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("payload of {size} bytes exceeds the limit of {limit}")]
    TooLarge { size: u32, limit: usize },
}

impl Header {
    pub fn new(command: u16, data_type: u16, count: u32, p1: u32, p2: u32) -> Self {
        Self {
            command,
            payload_size: 0,
            data_type,
            count,
            p1,
            p2,
        }
    }

    /// Frame one message at the start of `buf`: `Ok(None)` = need more bytes, else the header and
    /// the header's own length (16 or 24). Payloads above `max_payload` are refused (the caller
    /// closes the connection: we never buffer absurd sizes).
    pub fn parse(buf: &[u8], max_payload: usize) -> Result<Option<(Header, usize)>, FrameError> {
        if buf.len() < 16 {
            return Ok(None);
        }
        let u16_at = |i: usize| u16::from_be_bytes([buf[i], buf[i + 1]]);
        let u32_at = |i: usize| u32::from_be_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        let mut h = Header {
            command: u16_at(0),
            payload_size: u32::from(u16_at(2)),
            data_type: u16_at(4),
            count: u32::from(u16_at(6)),
            p1: u32_at(8),
            p2: u32_at(12),
        };
        let mut len = 16;
        if h.payload_size == 0xFFFF && h.count == 0 {
            if buf.len() < 24 {
                return Ok(None);
            }
            h.payload_size = u32_at(16);
            h.count = u32_at(20);
            len = 24;
        }
        if h.payload_size as usize > max_payload {
            return Err(FrameError::TooLarge {
                size: h.payload_size,
                limit: max_payload,
            });
        }
        Ok(Some((h, len)))
    }

    /// Whether this header needs the extended form for its payload size and count.
    pub fn needs_extended(&self) -> bool {
        self.payload_size as usize > MAX_SMALL_PAYLOAD || self.count > 0xFFFF
    }

    /// Append the header (normal or extended form) with `payload_size` as given.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.command.to_be_bytes());
        if self.needs_extended() {
            out.extend_from_slice(&0xFFFFu16.to_be_bytes());
            out.extend_from_slice(&self.data_type.to_be_bytes());
            out.extend_from_slice(&0u16.to_be_bytes());
            out.extend_from_slice(&self.p1.to_be_bytes());
            out.extend_from_slice(&self.p2.to_be_bytes());
            out.extend_from_slice(&self.payload_size.to_be_bytes());
            out.extend_from_slice(&self.count.to_be_bytes());
        } else {
            out.extend_from_slice(&(self.payload_size as u16).to_be_bytes());
            out.extend_from_slice(&self.data_type.to_be_bytes());
            out.extend_from_slice(&(self.count as u16).to_be_bytes());
            out.extend_from_slice(&self.p1.to_be_bytes());
            out.extend_from_slice(&self.p2.to_be_bytes());
        }
    }

    /// The header as the 16 bytes an ERROR message echoes (extended sizes clipped).
    pub fn to_small_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0..2].copy_from_slice(&self.command.to_be_bytes());
        let size = u16::try_from(self.payload_size).unwrap_or(0xFFFF);
        b[2..4].copy_from_slice(&size.to_be_bytes());
        b[4..6].copy_from_slice(&self.data_type.to_be_bytes());
        let count = u16::try_from(self.count).unwrap_or(0xFFFF);
        b[6..8].copy_from_slice(&count.to_be_bytes());
        b[8..12].copy_from_slice(&self.p1.to_be_bytes());
        b[12..16].copy_from_slice(&self.p2.to_be_bytes());
        b
    }
}

/// Round up to the CA payload alignment (8).
pub fn padded(n: usize) -> usize {
    n.div_ceil(8) * 8
}

/// One message: header then `payload` padded with zeros to 8 bytes.
pub fn message(mut h: Header, payload: &[u8]) -> Vec<u8> {
    let size = padded(payload.len());
    h.payload_size = size as u32;
    let mut out = Vec::with_capacity(24 + size);
    h.write(&mut out);
    out.extend_from_slice(payload);
    out.resize(out.len() + size - payload.len(), 0);
    out
}

/// A message whose payload is a NUL-terminated string (SEARCH, CREATE_CHAN, HOST_NAME, ...).
pub fn string_message(h: Header, s: &str) -> Vec<u8> {
    let mut p = Vec::with_capacity(s.len() + 1);
    p.extend_from_slice(s.as_bytes());
    p.push(0);
    message(h, &p)
}

/// The text of a NUL-terminated (or NUL-padded) payload; invalid UTF-8 is replaced.
pub fn payload_str(p: &[u8]) -> String {
    let end = p.iter().position(|&b| b == 0).unwrap_or(p.len());
    String::from_utf8_lossy(&p[..end]).into_owned()
}

/// An ERROR message: echoes the offending header, then the message text.
pub fn error_message(offending: &Header, cid: u32, status: u32, text: &str) -> Vec<u8> {
    let mut p = Vec::with_capacity(16 + text.len() + 1);
    p.extend_from_slice(&offending.to_small_bytes());
    p.extend_from_slice(text.as_bytes());
    p.push(0);
    message(Header::new(cmd::ERROR, 0, 0, cid, status), &p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_header_round_trip() {
        let h = Header::new(cmd::READ_NOTIFY, 20, 5, 7, 9);
        let m = message(h, &[1, 2, 3]);
        assert_eq!(m.len(), 24);
        assert_eq!(&m[0..8], &[0, 15, 0, 8, 0, 20, 0, 5]);
        let (d, n) = Header::parse(&m, 1 << 20).unwrap().unwrap();
        assert_eq!(n, 16);
        assert_eq!(d.payload_size, 8);
        assert_eq!(
            (d.command, d.data_type, d.count, d.p1, d.p2),
            (15, 20, 5, 7, 9)
        );
    }

    #[test]
    fn extended_header_both_ways() {
        let h = Header::new(cmd::EVENT_ADD, 1, 1 << 20, 1, 2);
        let m = message(h, &vec![0u8; 2 << 20]);
        assert_eq!(&m[2..4], &[0xFF, 0xFF]);
        assert_eq!(&m[6..8], &[0, 0]);
        let (d, n) = Header::parse(&m, 4 << 20).unwrap().unwrap();
        assert_eq!(n, 24);
        assert_eq!((d.payload_size, d.count), (2 << 20, 1 << 20));
        // Count alone over 65535 also needs the extended form.
        let h = Header::new(cmd::READ_NOTIFY, 4, 70000, 0, 0);
        let m = message(h, &[0u8; 8]);
        assert_eq!(m.len(), 32);
        let (d, _) = Header::parse(&m, 1 << 20).unwrap().unwrap();
        assert_eq!((d.payload_size, d.count), (8, 70000));
        // Payload just over the small limit.
        let m = message(Header::new(15, 0, 1, 0, 0), &vec![0; MAX_SMALL_PAYLOAD + 1]);
        assert_eq!(&m[2..4], &[0xFF, 0xFF]);
        let m = message(Header::new(15, 0, 1, 0, 0), &vec![0; MAX_SMALL_PAYLOAD]);
        assert_eq!(u16::from_be_bytes([m[2], m[3]]) as usize, MAX_SMALL_PAYLOAD);
    }

    #[test]
    fn partial_and_oversized() {
        let m = message(Header::new(cmd::EVENT_ADD, 1, 1 << 20, 1, 2), &[0; 8]);
        assert_eq!(Header::parse(&m[..15], 100), Ok(None));
        assert_eq!(Header::parse(&m[..20], 100), Ok(None));
        let m = message(Header::new(1, 1, 1, 1, 2), &[0; 800]);
        assert!(Header::parse(&m, 100).is_err());
    }

    #[test]
    fn error_message_echoes_header() {
        let h = Header::new(cmd::WRITE, 6, 1, 3, 4);
        let m = error_message(&h, 3, eca::NOWTACCESS, "no");
        let (d, n) = Header::parse(&m, 100).unwrap().unwrap();
        assert_eq!((d.command, d.p1, d.p2), (cmd::ERROR, 3, eca::NOWTACCESS));
        let (inner, _) = Header::parse(&m[n..], 100).unwrap().unwrap();
        assert_eq!(inner.command, cmd::WRITE);
        assert_eq!(payload_str(&m[n + 16..]), "no");
    }
}
