//! Direct writes: a lossless poster writes a monitor update to the client's socket itself when
//! the connection has nothing else to send, instead of queueing it and waking the connection's
//! writer task. On 2 cores that hand-off (a wake-up of the server's runtime per frame, plus the
//! poster's own wait for room) cost more than the frame's encoding; raw TCP has neither.
//!
//! The socket's write half sits behind an async mutex: the writer task locks it (awaiting)
//! whenever it has something to send, a poster only tries to lock it and queues as before when
//! that fails, so one message is never interleaved with another. A poster that cannot finish a
//! message before its deadline leaves the rest as the connection's `tail`, which whoever holds
//! the lock next writes first.

use std::io::{self, IoSlice};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::{Notify, OwnedMutexGuard};

use crate::transport::OutMessage;
use crate::wire::{ByteOrder, SharedBytes};

use super::ServerShared;

/// Longest single wait for the socket to take more bytes, so that a poster notices a closed
/// connection soon.
const POLL_SLICE: Duration = Duration::from_millis(50);

/// The write side of one connection, shared by its writer task and direct posters.
pub(crate) struct SockOut {
    sock: Arc<tokio::sync::Mutex<OwnedWriteHalf>>,
    /// Bytes of a message a poster started but did not finish; written before anything else.
    tail: Mutex<Vec<SharedBytes>>,
    /// The connection is over: a poster stops waiting on its socket.
    closed: AtomicBool,
    /// Posters may write (off: every update goes through the writer task, as before).
    enabled: bool,
    pub(crate) order: ByteOrder,
    wake: Arc<Notify>,
    srv: Arc<ServerShared>,
}

impl SockOut {
    pub(crate) fn new(
        wr: OwnedWriteHalf,
        order: ByteOrder,
        wake: Arc<Notify>,
        srv: Arc<ServerShared>,
    ) -> Self {
        Self {
            sock: Arc::new(tokio::sync::Mutex::new(wr)),
            tail: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
            enabled: srv.cfg.direct_write,
            order,
            wake,
            srv,
        }
    }

    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    /// The socket, for the writer task (waits while a poster writes).
    pub(crate) async fn lock(&self) -> OwnedMutexGuard<OwnedWriteHalf> {
        Arc::clone(&self.sock).lock_owned().await
    }

    /// The socket if nobody is writing to it and no message is half written.
    pub(crate) fn try_claim(&self) -> Option<OwnedMutexGuard<OwnedWriteHalf>> {
        if self.closed.load(Ordering::Relaxed) {
            return None;
        }
        let g = Arc::clone(&self.sock).try_lock_owned().ok()?;
        self.tail.lock().is_empty().then_some(g)
    }

    /// The rest of a message a poster left (empty if none); the caller holds the socket.
    pub(crate) fn take_tail(&self) -> Vec<SharedBytes> {
        std::mem::take(&mut *self.tail.lock())
    }

    pub(crate) fn has_tail(&self) -> bool {
        !self.tail.lock().is_empty()
    }

    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
    }

    /// Write `msgs` in order from the calling (non-runtime) thread, waiting for the socket as
    /// a blocking write would, until `deadline`; what is left then goes to the writer task. On
    /// an error the connection is shut down (a message may be half written). A message that no
    /// longer encodes is counted as malformed and skipped, as the writer does.
    pub(crate) fn write_blocking(
        &self,
        guard: OwnedMutexGuard<OwnedWriteHalf>,
        msgs: Vec<Result<OutMessage, crate::wire::EncodeError>>,
        deadline: Instant,
    ) {
        // One flat list of byte ranges (headers included) for vectored writes of the batch.
        let mut parts: Vec<SharedBytes> = Vec::new();
        let mut bytes = 0;
        for m in msgs {
            match m {
                Ok(m) => {
                    self.srv.stats.direct_write();
                    bytes += m.wire_len();
                    parts.push(SharedBytes::copy_from_slice(&m.header.encode()));
                    parts.extend(m.parts.into_iter().filter(|p| !p.is_empty()));
                }
                Err(_) => self.srv.stats.malformed(),
            }
        }
        // Counted once taken: bytes left to the writer task are written without a message.
        self.srv.stats.sent(bytes);
        let sock = socket2::SockRef::from(guard.as_ref());
        let fd = guard.as_ref().as_raw_fd();
        let (mut part, mut off) = (0usize, 0usize);
        while part < parts.len() {
            let slices: Vec<IoSlice<'_>> = std::iter::once(&parts[part][off..])
                .chain(parts[part + 1..].iter().map(|p| p.as_slice()))
                .take(MAX_IOV)
                .map(IoSlice::new)
                .collect();
            match sock.send_vectored_with_flags(&slices, libc::MSG_NOSIGNAL) {
                Ok(mut n) => {
                    while part < parts.len() && n >= parts[part].len() - off {
                        n -= parts[part].len() - off;
                        part += 1;
                        off = 0;
                    }
                    off += n;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let now = Instant::now();
                    if self.closed.load(Ordering::Relaxed) {
                        return;
                    }
                    if now >= deadline {
                        let mut rest: Vec<SharedBytes> = Vec::with_capacity(parts.len() - part);
                        let first = &parts[part];
                        rest.extend(first.slice(off, first.len() - off));
                        rest.extend(parts.drain(part + 1..));
                        *self.tail.lock() = rest;
                        drop(guard);
                        self.wake.notify_one();
                        return;
                    }
                    if wait_writable(fd, (deadline - now).min(POLL_SLICE)).is_err() {
                        let _ = sock.shutdown(std::net::Shutdown::Both);
                        return;
                    }
                }
                Err(_) => {
                    // Possibly half a message on the wire: the stream cannot go on.
                    let _ = sock.shutdown(std::net::Shutdown::Both);
                    return;
                }
            }
        }
    }
}

/// Byte ranges per vectored write (Linux takes at most 1024).
const MAX_IOV: usize = 64;

/// Wait until `fd` can take more bytes (or has an error to report), at most `timeout`.
fn wait_writable(fd: std::os::fd::RawFd, timeout: Duration) -> io::Result<()> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    let ms = libc::c_int::try_from(timeout.as_millis().max(1)).unwrap_or(libc::c_int::MAX);
    // SAFETY: `p` is one valid, initialised pollfd that lives across the call, and nfds is 1;
    // `fd` is kept open by the caller's socket guard for the duration of the call.
    let r = unsafe { libc::poll(&mut p, 1, ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(())
        } else {
            Err(e)
        };
    }
    Ok(())
}

/// Marks the connection closed however its task ends (also when the runtime drops it).
pub(crate) struct CloseOnDrop(pub(crate) Arc<SockOut>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}
