//! Primitive encodings: fixed-size scalars in the message byte order, Size, String, BitSet
//! and Status, plus the [`Reader`]/[`Writer`] cursors every other encoder is built on.

use super::{ByteOrder, DecodeError, EncodeError, SharedBytes};

/// Largest Size we emit. pvData escapes 0x7fffffff to a following int64 and pvxs reads a plain
/// uint32, so anything from 2^31-1 up would be read differently by the two; refuse it.
pub const MAX_SIZE: usize = 0x7fff_fffe;

/// A bounds-checked cursor over one message payload.
#[derive(Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    order: ByteOrder,
    owner: Option<&'a SharedBytes>,
}

macro_rules! read_num {
    ($name:ident, $t:ty) => {
        pub fn $name(&mut self) -> Result<$t, DecodeError> {
            let mut b = [0u8; std::mem::size_of::<$t>()];
            b.copy_from_slice(self.take(std::mem::size_of::<$t>())?);
            Ok(match self.order {
                ByteOrder::Little => <$t>::from_le_bytes(b),
                ByteOrder::Big => <$t>::from_be_bytes(b),
            })
        }
    };
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8], order: ByteOrder) -> Self {
        Self {
            buf,
            pos: 0,
            order,
            owner: None,
        }
    }

    /// A reader whose array payloads borrow `bytes` (an `Arc` clone) instead of copying.
    pub fn over_shared(bytes: &'a SharedBytes, order: ByteOrder) -> Self {
        Self {
            buf: bytes.as_slice(),
            pos: 0,
            order,
            owner: Some(bytes),
        }
    }

    pub fn order(&self) -> ByteOrder {
        self.order
    }

    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The unread part of the payload.
    pub fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(DecodeError::Truncated {
                at: self.pos,
                needed: n - self.remaining(),
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// `n` bytes as shared bytes: a view of the owner when there is one, else a copy.
    pub fn take_shared(&mut self, n: usize) -> Result<SharedBytes, DecodeError> {
        let start = self.pos;
        let bytes = self.take(n)?;
        match self.owner.and_then(|o| o.slice(start, n)) {
            Some(s) => Ok(s),
            None => Ok(SharedBytes::copy_from_slice(bytes)),
        }
    }

    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    pub fn i8(&mut self) -> Result<i8, DecodeError> {
        Ok(self.u8()? as i8)
    }

    pub fn bool(&mut self) -> Result<bool, DecodeError> {
        Ok(self.u8()? != 0)
    }

    read_num!(u16, u16);
    read_num!(i16, i16);
    read_num!(u32, u32);
    read_num!(i32, i32);
    read_num!(u64, u64);
    read_num!(i64, i64);
    read_num!(f32, f32);
    read_num!(f64, f64);

    /// Size: `None` is the 0xFF null (empty union, null string).
    pub fn size(&mut self) -> Result<Option<usize>, DecodeError> {
        match self.u8()? {
            b @ 0..=253 => Ok(Some(b as usize)),
            254 => {
                let v = self.u32()?;
                if v == 0x7fff_ffff {
                    // pvData's escape: the real size follows as int64.
                    let wide = self.i64()?;
                    return usize::try_from(wide)
                        .map(Some)
                        .map_err(|_| DecodeError::BadSize);
                }
                Ok(Some(v as usize))
            }
            _ => Ok(None),
        }
    }

    /// A Size where null is not allowed.
    pub fn count(&mut self) -> Result<usize, DecodeError> {
        self.size()?.ok_or(DecodeError::UnexpectedNull)
    }

    /// A count of items each at least `min_item` bytes long, checked against the bytes left so a
    /// hostile count cannot make us reserve memory the message does not contain.
    pub fn bounded_count(&mut self, min_item: usize) -> Result<usize, DecodeError> {
        let n = self.count()?;
        let need = n.saturating_mul(min_item.max(1));
        if need > self.remaining() && min_item > 0 {
            return Err(DecodeError::Truncated {
                at: self.pos,
                needed: need - self.remaining(),
            });
        }
        Ok(n)
    }

    /// String; a null Size reads as "" (pvxs does the same).
    pub fn string(&mut self) -> Result<String, DecodeError> {
        let n = self.size()?.unwrap_or(0);
        let b = self.take(n)?;
        std::str::from_utf8(b)
            .map(str::to_owned)
            .map_err(|_| DecodeError::BadUtf8)
    }

    pub fn bitset(&mut self) -> Result<BitSet, DecodeError> {
        let n = self.count()?;
        let bytes = self.take(n)?;
        let mut words = Vec::with_capacity(n.div_ceil(8));
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            words.push(match self.order {
                ByteOrder::Little => u64::from_le_bytes(w),
                ByteOrder::Big => u64::from_be_bytes(w),
            });
        }
        let tail = chunks.remainder();
        if !tail.is_empty() {
            // Trailing bytes are LSB-first whatever the message order.
            let w = tail
                .iter()
                .enumerate()
                .fold(0u64, |acc, (i, &b)| acc | (u64::from(b) << (8 * i)));
            words.push(w);
        }
        let mut bs = BitSet { words };
        bs.trim();
        Ok(bs)
    }

    pub fn status(&mut self) -> Result<Status, DecodeError> {
        let t = self.u8()?;
        if t == 0xff {
            return Ok(Status::ok());
        }
        let kind = match t {
            0 => StatusKind::Ok,
            1 => StatusKind::Warning,
            2 => StatusKind::Error,
            3 => StatusKind::Fatal,
            other => return Err(DecodeError::BadStatus(other)),
        };
        let message = self.string()?;
        let call_tree = self.string()?;
        Ok(Status {
            kind,
            message,
            call_tree,
        })
    }
}

/// A growable output buffer in one byte order.
///
/// A writer made with [`Writer::zero_copy`] keeps large shared payloads (frame pixels) out of
/// line: [`Writer::shared`] records a reference instead of copying, and [`Writer::into_parts`]
/// yields the ordered pieces for a vectored write. Plain writers copy everything, as before.
#[derive(Clone, Debug)]
pub struct Writer {
    buf: Vec<u8>,
    order: ByteOrder,
    /// Out-of-line payloads, each inserted at an offset of `buf` (ascending offsets).
    out_of_line: Vec<(usize, SharedBytes)>,
    out_of_line_len: usize,
    /// Smallest payload kept out of line; `None` = always copy.
    zero_copy_min: Option<usize>,
}

/// Payloads at least this long are kept out of line by [`Writer::zero_copy`] writers: below it
/// one more iovec costs more than copying the bytes.
pub const ZERO_COPY_MIN: usize = 4096;

macro_rules! write_num {
    ($name:ident, $t:ty) => {
        pub fn $name(&mut self, v: $t) {
            match self.order {
                ByteOrder::Little => self.buf.extend_from_slice(&v.to_le_bytes()),
                ByteOrder::Big => self.buf.extend_from_slice(&v.to_be_bytes()),
            }
        }
    };
}

impl Writer {
    pub fn new(order: ByteOrder) -> Self {
        Self::with_buffer(Vec::new(), order)
    }

    /// Append to an existing buffer (e.g. one that already holds a header placeholder).
    pub fn with_buffer(buf: Vec<u8>, order: ByteOrder) -> Self {
        Self {
            buf,
            order,
            out_of_line: Vec::new(),
            out_of_line_len: 0,
            zero_copy_min: None,
        }
    }

    /// A writer that keeps shared payloads of at least [`ZERO_COPY_MIN`] bytes out of line.
    pub fn zero_copy(order: ByteOrder) -> Self {
        Self::zero_copy_above(order, ZERO_COPY_MIN)
    }

    /// As [`Writer::zero_copy`] with an explicit threshold.
    pub fn zero_copy_above(order: ByteOrder, min: usize) -> Self {
        let mut w = Self::new(order);
        w.zero_copy_min = Some(min);
        w
    }

    pub fn order(&self) -> ByteOrder {
        self.order
    }

    /// Total bytes written, out-of-line payloads included.
    pub fn len(&self) -> usize {
        self.buf.len() + self.out_of_line_len
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes written inline. Complete only when nothing was kept out of line (always the
    /// case for writers not made with [`Writer::zero_copy`]); use [`Writer::into_parts`] otherwise.
    pub fn as_slice(&self) -> &[u8] {
        &self.buf
    }

    /// All bytes in one buffer (out-of-line payloads are copied in).
    pub fn into_inner(self) -> Vec<u8> {
        if self.out_of_line.is_empty() {
            return self.buf;
        }
        let mut out = Vec::with_capacity(self.len());
        for part in self.into_parts() {
            out.extend_from_slice(&part);
        }
        out
    }

    /// The message body as ordered pieces for a vectored write: inline runs (one shared
    /// buffer, sliced) interleaved with the out-of-line payloads, none copied.
    pub fn into_parts(self) -> Vec<SharedBytes> {
        let mut parts = Vec::with_capacity(2 * self.out_of_line.len() + 1);
        let inline = SharedBytes::from(self.buf);
        let mut at = 0;
        for (off, payload) in self.out_of_line {
            if off > at {
                parts.extend(inline.slice(at, off - at));
            }
            at = off;
            if !payload.is_empty() {
                parts.push(payload);
            }
        }
        if inline.len() > at {
            parts.extend(inline.slice(at, inline.len() - at));
        }
        parts
    }

    /// Append a payload; a zero-copy writer keeps a reference to it when it is large enough.
    pub fn shared(&mut self, b: &SharedBytes) {
        match self.zero_copy_min {
            Some(min) if b.len() >= min => {
                self.out_of_line_len += b.len();
                self.out_of_line.push((self.buf.len(), b.clone()));
            }
            _ => self.buf.extend_from_slice(b),
        }
    }

    pub fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    pub fn i8(&mut self, v: i8) {
        self.buf.push(v as u8);
    }

    pub fn bool(&mut self, v: bool) {
        self.buf.push(u8::from(v));
    }

    write_num!(u16, u16);
    write_num!(i16, i16);
    write_num!(u32, u32);
    write_num!(i32, i32);
    write_num!(u64, u64);
    write_num!(i64, i64);
    write_num!(f32, f32);
    write_num!(f64, f64);

    pub fn size(&mut self, n: usize) -> Result<(), EncodeError> {
        if n < 254 {
            self.buf.push(n as u8);
        } else if n <= MAX_SIZE {
            self.buf.push(254);
            self.u32(n as u32);
        } else {
            return Err(EncodeError::SizeTooLarge(n));
        }
        Ok(())
    }

    /// The 0xFF null Size (empty union, null type).
    pub fn null_size(&mut self) {
        self.buf.push(0xff);
    }

    pub fn string(&mut self, s: &str) -> Result<(), EncodeError> {
        self.size(s.len())?;
        self.bytes(s.as_bytes());
        Ok(())
    }

    pub fn bitset(&mut self, bs: &BitSet) -> Result<(), EncodeError> {
        let nbytes = bs.wire_len();
        self.size(nbytes)?;
        let full = nbytes / 8;
        for &w in &bs.words[..full] {
            self.u64(w);
        }
        if let Some(&last) = bs.words.get(full) {
            for i in 0..nbytes % 8 {
                self.buf.push((last >> (8 * i)) as u8);
            }
        }
        Ok(())
    }

    pub fn status(&mut self, st: &Status) -> Result<(), EncodeError> {
        if st.kind == StatusKind::Ok && st.message.is_empty() && st.call_tree.is_empty() {
            self.buf.push(0xff);
            return Ok(());
        }
        self.buf.push(st.kind as u8);
        self.string(&st.message)?;
        self.string(&st.call_tree)
    }
}

/// Set of field numbers (depth-first pre-order, bit 0 = root) marking changed or present fields.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct BitSet {
    words: Vec<u64>,
}

impl BitSet {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn from_bits(bits: &[usize]) -> Self {
        let mut b = Self::new();
        for &i in bits {
            b.set(i);
        }
        b
    }

    pub fn set(&mut self, i: usize) {
        let w = i / 64;
        if self.words.len() <= w {
            self.words.resize(w + 1, 0);
        }
        self.words[w] |= 1 << (i % 64);
    }

    pub fn clear(&mut self, i: usize) {
        if let Some(w) = self.words.get_mut(i / 64) {
            *w &= !(1 << (i % 64));
        }
        self.trim();
    }

    pub fn get(&self, i: usize) -> bool {
        self.words
            .get(i / 64)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Smallest set bit `>= from`.
    pub fn next_set(&self, from: usize) -> Option<usize> {
        let mut wi = from / 64;
        let mut w = *self.words.get(wi)? & (u64::MAX << (from % 64));
        loop {
            if w != 0 {
                return Some(wi * 64 + w.trailing_zeros() as usize);
            }
            wi += 1;
            w = *self.words.get(wi)?;
        }
    }

    /// Whether any bit in `start..end` is set.
    pub fn any_in(&self, start: usize, end: usize) -> bool {
        self.next_set(start).is_some_and(|i| i < end)
    }

    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        let mut next = self.next_set(0);
        std::iter::from_fn(move || {
            let cur = next?;
            next = self.next_set(cur + 1);
            Some(cur)
        })
    }

    pub fn union_with(&mut self, other: &BitSet) {
        if self.words.len() < other.words.len() {
            self.words.resize(other.words.len(), 0);
        }
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= b;
        }
    }

    /// Bytes on the wire: up to the last non-zero byte.
    fn wire_len(&self) -> usize {
        match self.words.last() {
            None => 0,
            Some(&last) => {
                (self.words.len() - 1) * 8 + (64 - last.leading_zeros() as usize).div_ceil(8)
            }
        }
    }

    fn trim(&mut self) {
        while self.words.last() == Some(&0) {
            self.words.pop();
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum StatusKind {
    Ok = 0,
    Warning = 1,
    Error = 2,
    Fatal = 3,
}

/// Operation status; OK with no text is the single byte 0xFF.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    pub kind: StatusKind,
    pub message: String,
    pub call_tree: String,
}

impl Status {
    pub fn ok() -> Self {
        Self {
            kind: StatusKind::Ok,
            message: String::new(),
            call_tree: String::new(),
        }
    }

    pub fn error(message: impl Into<String>) -> Self {
        Self {
            kind: StatusKind::Error,
            message: message.into(),
            call_tree: String::new(),
        }
    }

    /// OK or WARNING.
    pub fn is_success(&self) -> bool {
        matches!(self.kind, StatusKind::Ok | StatusKind::Warning)
    }
}
