//! Message framing over a byte stream (TCP), shared by the server and the client.
//!
//! Receiving: [`MessageReader`] yields one [`Message`] per application message, with segmented
//! messages already joined, and passes control messages through as they come (they may sit
//! between segments). Each payload is read straight into one buffer of its exact size, so the
//! arrays a decoder takes from it ([`Reader::over_shared`](crate::wire::Reader::over_shared)) are
//! views of that buffer, not copies.
//!
//! Sending: [`write_message`] writes the header and the body parts with vectored writes; a body
//! made by a [`Writer::zero_copy`] writer keeps frame pixels ([`SharedBytes`]) out of line, so they
//! go from the frame buffer to the socket without being copied. pvxs never segments on send and
//! neither do we.

use std::io::{self, IoSlice};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};

use crate::wire::header::HEADER_LEN;
use crate::wire::{ByteOrder, DecodeError, EncodeError, Header, Segment, SharedBytes, Writer};

/// Default upper bound on one (reassembled) message: large enough for an 8k x 8k float64 frame.
pub const DEFAULT_MAX_MESSAGE: usize = 1 << 30;

/// Read buffer for headers and small messages; larger payloads bypass it.
const READ_BUFFER: usize = 64 * 1024;

/// Payloads at least this large are read into recycled buffers.
const RECYCLE_MIN: usize = 256 * 1024;
/// Idle payload buffers kept per reader, and their total size.
const RECYCLE_KEEP: usize = 8;
const RECYCLE_KEEP_BYTES: usize = 512 << 20;

type FreeList = std::sync::Arc<parking_lot::Mutex<Vec<Vec<u8>>>>;

/// Sets the socket's receive low-water mark (`SO_RCVLOWAT`) to the given number of bytes.
pub type LowWater = Box<dyn Fn(usize) + Send + Sync>;

/// While a large payload is read, the socket reports readable only once this much of it has
/// arrived (or all that is left, if less). Without it a reader that drains the socket faster
/// than loopback fills it wakes for every few hundred kB: ~55 wake-ups per 32 MiB frame,
/// against ~8 with it.
const LOW_WATER: usize = 4 << 20;

/// The low-water mark of a TCP socket, through `setsockopt`. Errors are ignored: the mark only
/// saves wake-ups, and reads are correct without it.
#[cfg(unix)]
pub fn tcp_low_water(fd: std::os::fd::RawFd) -> LowWater {
    Box::new(move |bytes| {
        let v = libc::c_int::try_from(bytes.max(1)).unwrap_or(libc::c_int::MAX);
        // SAFETY: `fd` is the socket of the stream the reader owns (it outlives this closure,
        // which the reader holds); `v` is a c_int on the stack passed with its exact size.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVLOWAT,
                (&v as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    })
}

/// A large payload buffer that goes back to its reader's free list when the last view of it
/// (the message, the arrays decoded from it) is dropped. A fresh 32 MB `Vec` per frame costs a
/// page fault per 4 KiB (the allocator maps and unmaps it each time): half the loopback
/// bandwidth. Reusing mapped memory keeps receive at socket speed and stays zero-copy.
struct Recycled {
    buf: Vec<u8>,
    home: std::sync::Weak<parking_lot::Mutex<Vec<Vec<u8>>>>,
}

impl AsRef<[u8]> for Recycled {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Recycled {
    fn drop(&mut self) {
        let Some(home) = self.home.upgrade() else {
            return;
        };
        let mut free = home.lock();
        let held: usize = free.iter().map(Vec::capacity).sum();
        if free.len() < RECYCLE_KEEP && held + self.buf.capacity() <= RECYCLE_KEEP_BYTES {
            let mut buf = std::mem::take(&mut self.buf);
            buf.clear();
            free.push(buf);
        }
    }
}

/// Why a stream stopped yielding messages.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    #[error("malformed message: {0}")]
    Decode(#[from] DecodeError),
    #[error("message of {0} bytes exceeds the configured maximum")]
    TooLarge(usize),
    /// The incomplete messages of every reader sharing a [`PartialBudget`] would hold more
    /// than its cap with this one's bytes.
    #[error("incomplete messages would hold {0} bytes, over the cap")]
    OverBudget(usize),
}

/// Bytes that a set of readers (a server's connections) may hold together in messages not yet
/// complete: a crowd of clients that each begin a large message and never finish it costs at
/// most this, and the reader whose bytes take the total over fails.
#[derive(Debug)]
pub struct PartialBudget {
    held: std::sync::atomic::AtomicUsize,
    cap: usize,
}

impl PartialBudget {
    pub fn new(cap: usize) -> std::sync::Arc<PartialBudget> {
        std::sync::Arc::new(PartialBudget {
            held: std::sync::atomic::AtomicUsize::new(0),
            cap,
        })
    }

    /// Bytes of incomplete messages held now.
    pub fn held(&self) -> usize {
        self.held.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// One application message (segments joined) or one control message (empty payload; its value
/// is `header.payload_size`).
#[derive(Clone, Debug)]
pub struct Message {
    /// For a reassembled message: the first segment's header with the segment bits cleared and
    /// `payload_size` set to the joined length.
    pub header: Header,
    pub payload: SharedBytes,
}

impl Message {
    pub fn command(&self) -> u8 {
        self.header.command
    }

    pub fn order(&self) -> ByteOrder {
        self.header.byte_order()
    }
}

/// A message's buffer grows by at most what has arrived, or this when less has: a peer that
/// claims a huge message costs what it sends, and a real one takes O(n) copies to read.
const READ_STEP: usize = 64 * 1024;

/// Reads framed messages from a stream. Not cancel-safe: dropping a pending [`Self::next`] loses
/// a partly read message, which is fine only when the connection is being abandoned.
pub struct MessageReader<R> {
    r: BufReader<R>,
    max_message: usize,
    /// First header and joined payload of a segmented message in progress.
    pending: Option<(Header, Vec<u8>)>,
    bytes_read: u64,
    free: FreeList,
    low_water: Option<LowWater>,
    budget: Option<std::sync::Arc<PartialBudget>>,
    /// Bytes of the message in progress charged to `budget`.
    charged: usize,
    /// A message's header has arrived and the message has not been returned yet.
    in_message: bool,
}

impl<R> MessageReader<R> {
    /// A message is complete (or abandoned): its bytes are no longer held.
    fn release(&mut self) {
        if let Some(b) = &self.budget {
            b.held
                .fetch_sub(self.charged, std::sync::atomic::Ordering::Relaxed);
        }
        self.charged = 0;
        self.in_message = false;
    }
}

impl<R> Drop for MessageReader<R> {
    fn drop(&mut self) {
        self.release();
    }
}

impl<R: AsyncRead + Unpin> MessageReader<R> {
    /// `max_message`: largest payload (after joining segments) accepted; a peer announcing more
    /// gets [`TransportError::TooLarge`].
    pub fn new(r: R, max_message: usize) -> Self {
        Self {
            r: BufReader::with_capacity(READ_BUFFER, r),
            max_message,
            pending: None,
            bytes_read: 0,
            free: FreeList::default(),
            low_water: None,
            budget: None,
            charged: 0,
            in_message: false,
        }
    }

    /// Charges the bytes of incomplete messages to `budget` (shared by a server's readers).
    pub fn with_budget(mut self, budget: std::sync::Arc<PartialBudget>) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Whether a message has begun and not completed (or a segmented one is being joined):
    /// the peer stalled in the middle of one.
    pub fn mid_message(&self) -> bool {
        self.in_message || self.pending.is_some()
    }

    /// Raises the stream's receive low-water mark while large payloads are read (see
    /// [`LOW_WATER`]); `set` is [`tcp_low_water`] for a TCP socket.
    pub fn with_low_water(mut self, set: LowWater) -> Self {
        self.low_water = Some(set);
        self
    }

    /// An empty buffer with room for `len` bytes: the smallest idle one that fits, else new.
    fn take_buffer(&self, len: usize) -> Vec<u8> {
        let mut free = self.free.lock();
        let best = free
            .iter()
            .enumerate()
            .filter(|(_, b)| b.capacity() >= len)
            .min_by_key(|(_, b)| b.capacity())
            .map(|(i, _)| i);
        match best {
            Some(i) => free.swap_remove(i),
            None => Vec::new(),
        }
    }

    /// Bytes consumed from the stream so far (headers included).
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    /// The next message; `Ok(None)` on a clean end of stream (between messages).
    pub async fn next(&mut self) -> Result<Option<Message>, TransportError> {
        let r = self.next_message().await;
        if r.is_ok() {
            self.release();
        }
        r
    }

    async fn next_message(&mut self) -> Result<Option<Message>, TransportError> {
        loop {
            let Some(header) = self.read_header().await? else {
                if self.pending.is_some() {
                    return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
                }
                return Ok(None);
            };
            self.in_message = !header.is_control();
            if header.is_control() {
                return Ok(Some(Message {
                    header,
                    payload: SharedBytes::empty(),
                }));
            }
            let len = header.payload_size as usize;
            match (header.segment(), self.pending.take()) {
                (Segment::None, None) => {
                    self.check(len)?;
                    if len < RECYCLE_MIN {
                        let mut buf = Vec::new();
                        self.read_into(&mut buf, len).await?;
                        return Ok(Some(Message {
                            header,
                            payload: buf.into(),
                        }));
                    }
                    let mut buf = self.take_buffer(len);
                    self.read_into(&mut buf, len).await?;
                    let owner = Recycled {
                        buf,
                        home: std::sync::Arc::downgrade(&self.free),
                    };
                    return Ok(Some(Message {
                        header,
                        payload: SharedBytes::from_owner(owner),
                    }));
                }
                (Segment::First, None) => {
                    self.check(len)?;
                    let mut buf = Vec::new();
                    self.read_into(&mut buf, len).await?;
                    self.pending = Some((header, buf));
                }
                (seg @ (Segment::Middle | Segment::Last), Some((first, mut buf))) => {
                    if header.command != first.command {
                        return Err(DecodeError::BadSegment.into());
                    }
                    self.check(buf.len().saturating_add(len))?;
                    self.read_into(&mut buf, len).await?;
                    if seg == Segment::Middle {
                        self.pending = Some((first, buf));
                        continue;
                    }
                    let mut header = first;
                    header.flags &= !crate::wire::header::FLAG_SEGMENT_MASK;
                    header.payload_size = u32::try_from(buf.len()).unwrap_or(u32::MAX);
                    return Ok(Some(Message {
                        header,
                        payload: buf.into(),
                    }));
                }
                _ => return Err(DecodeError::BadSegment.into()),
            }
        }
    }

    fn check(&self, len: usize) -> Result<(), TransportError> {
        if len > self.max_message {
            Err(TransportError::TooLarge(len))
        } else {
            Ok(())
        }
    }

    /// A header, or `None` on end of stream before its first byte.
    async fn read_header(&mut self) -> Result<Option<Header>, TransportError> {
        let mut hb = [0u8; HEADER_LEN];
        let n = self.r.read(&mut hb).await?;
        if n == 0 {
            return Ok(None);
        }
        if n < HEADER_LEN {
            self.r.read_exact(&mut hb[n..]).await?;
        }
        self.bytes_read += HEADER_LEN as u64;
        Ok(Some(Header::decode(&hb)?))
    }

    /// Append exactly `len` bytes to `buf`. The buffer grows as data arrives, at most doubling
    /// ([`READ_STEP`] at first): a peer announcing a huge message it never sends costs the bytes
    /// it sends, not the size it claims. Large reads go straight from the socket into it.
    async fn read_into(&mut self, buf: &mut Vec<u8>, len: usize) -> Result<(), TransportError> {
        let target = buf.len() + len;
        // The mark never exceeds what is left of this message, so the peer always sends
        // enough to reach it; it goes back to 1 before the next header.
        let low_water = self.low_water.as_ref().filter(|_| len >= RECYCLE_MIN);
        let mut mark = 1;
        let budget = self.budget.as_deref();
        let mut charged = 0usize;
        let result: Result<(), TransportError> = async {
            while buf.len() < target {
                let left = target - buf.len();
                if let Some(set) = low_water {
                    let want = left.min(LOW_WATER);
                    if want != mark {
                        set(want);
                        mark = want;
                    }
                }
                buf.reserve(left.min(buf.len().max(READ_STEP)));
                let n = (&mut self.r).take(left as u64).read_buf(buf).await?;
                if n == 0 {
                    return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
                }
                if let Some(b) = budget {
                    charged += n;
                    let total = b.held.fetch_add(n, std::sync::atomic::Ordering::Relaxed) + n;
                    if total > b.cap {
                        return Err(TransportError::OverBudget(total));
                    }
                }
            }
            Ok(())
        }
        .await;
        if let (Some(set), true) = (low_water, mark != 1) {
            set(1);
        }
        self.charged += charged;
        result?;
        self.bytes_read += len as u64;
        Ok(())
    }
}

/// A message ready to send: header plus body parts (shared, so queueing it copies nothing).
#[derive(Clone, Debug)]
pub struct OutMessage {
    pub header: Header,
    pub parts: Vec<SharedBytes>,
}

impl OutMessage {
    /// Build an application message whose body is produced by `body` on a zero-copy writer in
    /// `order`.
    pub fn build(
        command: u8,
        from_server: bool,
        order: ByteOrder,
        body: impl FnOnce(&mut Writer) -> Result<(), EncodeError>,
    ) -> Result<Self, EncodeError> {
        let mut w = Writer::zero_copy(order);
        body(&mut w)?;
        let len = w.len();
        let size = u32::try_from(len).map_err(|_| EncodeError::SizeTooLarge(len))?;
        Ok(Self {
            header: Header::application(command, from_server, order, size),
            parts: w.into_parts(),
        })
    }

    /// A control message (no body).
    pub fn control(command: u8, from_server: bool, order: ByteOrder, value: u32) -> Self {
        Self {
            header: Header::control(command, from_server, order, value),
            parts: Vec::new(),
        }
    }

    /// Header plus body length.
    pub fn wire_len(&self) -> usize {
        HEADER_LEN + self.parts.iter().map(|p| p.len()).sum::<usize>()
    }

    pub async fn write_to<W: AsyncWrite + Unpin>(&self, w: &mut W) -> io::Result<()> {
        let refs: Vec<&[u8]> = self.parts.iter().map(|p| p.as_slice()).collect();
        write_message(w, self.header, &refs).await
    }
}

/// Write one message: `header` followed by `parts`, with vectored writes (no part is copied).
/// For application messages `payload_size` is set to the parts' total length; for control
/// messages the header is sent as given and `parts` must be empty.
pub async fn write_message<W: AsyncWrite + Unpin>(
    w: &mut W,
    mut header: Header,
    parts: &[&[u8]],
) -> io::Result<()> {
    let total: usize = parts.iter().map(|p| p.len()).sum();
    if header.is_control() {
        if total != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "control messages carry no payload",
            ));
        }
    } else {
        header.payload_size = u32::try_from(total).map_err(|_| {
            io::Error::new(io::ErrorKind::InvalidInput, "message larger than 4 GiB")
        })?;
    }
    let hb = header.encode();
    let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(parts.len() + 1);
    slices.push(IoSlice::new(&hb));
    slices.extend(
        parts
            .iter()
            .filter(|p| !p.is_empty())
            .map(|p| IoSlice::new(p)),
    );
    let mut bufs = &mut slices[..];
    while !bufs.is_empty() {
        let n = w.write_vectored(bufs).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        IoSlice::advance_slices(&mut bufs, n);
    }
    Ok(())
}

/// Application command codes.
pub mod cmd {
    pub const BEACON: u8 = 0x00;
    pub const CONNECTION_VALIDATION: u8 = 0x01;
    pub const ECHO: u8 = 0x02;
    pub const SEARCH: u8 = 0x03;
    pub const SEARCH_RESPONSE: u8 = 0x04;
    pub const AUTHNZ: u8 = 0x05;
    pub const ACL_CHANGE: u8 = 0x06;
    pub const CREATE_CHANNEL: u8 = 0x07;
    pub const DESTROY_CHANNEL: u8 = 0x08;
    pub const CONNECTION_VALIDATED: u8 = 0x09;
    pub const GET: u8 = 0x0A;
    pub const PUT: u8 = 0x0B;
    pub const PUT_GET: u8 = 0x0C;
    pub const MONITOR: u8 = 0x0D;
    pub const ARRAY: u8 = 0x0E;
    pub const DESTROY_REQUEST: u8 = 0x0F;
    pub const PROCESS: u8 = 0x10;
    pub const GET_FIELD: u8 = 0x11;
    pub const MESSAGE: u8 = 0x12;
    pub const MULTIPLE_DATA: u8 = 0x13;
    pub const RPC: u8 = 0x14;
    pub const CANCEL_REQUEST: u8 = 0x15;
    pub const ORIGIN_TAG: u8 = 0x16;
}

/// Sub-command bits of GET/PUT/MONITOR/RPC (pvAccessCPP names).
pub mod subcmd {
    pub const INIT: u8 = 0x08;
    pub const DESTROY: u8 = 0x10;
    /// PUT: fetch the current value. MONITOR: (with PROCESS) start.
    pub const GET: u8 = 0x40;
    /// MONITOR: start (0x44 with GET) / stop (alone).
    pub const PROCESS: u8 = 0x04;
    /// MONITOR: pipeline (INIT) / ack (exec). PUT: get-put.
    pub const PIPELINE: u8 = 0x80;
}
