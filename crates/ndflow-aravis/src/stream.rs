//! Acquisition: a ring of Aravis buffers whose completed ones the consumer pops itself as
//! [`Frame`]s ([`FrameSource`]: no thread of ours between Aravis' stream thread and the
//! driver, so a frame costs one wake-up), and the stream's statistics.
//!
//! A Frame owns its Aravis buffer (zero-copy) and pushes it back to the stream when dropped,
//! so a consumer that keeps frames starves the ring and Aravis counts underruns — the loss
//! shows in [`Stats`], not in a silent queue. Buffers that arrive failed (missing packets,
//! timeout, size mismatch) are counted and pushed straight back, never handed out.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aravis::glib::prelude::Cast;
use aravis::glib::translate::ToGlibPtr;
use aravis::prelude::*;
use aravis::{Buffer, BufferPayloadType, BufferStatus, GvStream, GvStreamPacketResend};

use crate::camera::{Camera, CameraError};

#[derive(Debug, Clone, Copy)]
pub struct StreamOptions {
    /// Buffers in the ring, each of the camera's PayloadSize at creation.
    pub n_buffers: usize,
}

impl Default for StreamOptions {
    fn default() -> Self {
        StreamOptions { n_buffers: 16 }
    }
}

/// The stream's counters. The first three come from `arv_stream_get_statistics`, the packet
/// counts from `arv_gv_stream_get_statistics` (zero for a non-GigE camera).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub completed: u64,
    pub failures: u64,
    /// Frames the camera sent while no buffer was free.
    pub underruns: u64,
    /// For a failed frame Aravis counts every packet it did not get, not only lost ones.
    pub missing_packets: u64,
    pub resent_packets: u64,
    /// Buffers popped and pushed back without handing out (failed status or no image).
    pub rejected: u64,
}

/// A completed image. Holds the Aravis buffer until dropped, then gives it back to the stream.
pub struct Frame {
    buffer: Option<Buffer>,
    /// Where the buffer goes back to: the stream while it is open, nothing once it is closed.
    home: Home,
    /// Where the image starts in the buffer's memory and how many bytes it has.
    offset: usize,
    len: usize,
    pub width: u32,
    pub height: u32,
    /// PFNC number (`Mono8` = 0x01080001).
    pub pixel_format: u32,
    /// The camera's block id (16-bit on GigE Vision 1.x, never 0).
    pub frame_id: u64,
    /// Camera timestamp in ns (the host's receive time when the camera has no tick frequency).
    pub timestamp_ns: u64,
    /// The host's time when the leader packet arrived, ns since the epoch.
    pub system_timestamp_ns: u64,
    /// Always `Success`: failed buffers never become Frames.
    pub status: FrameStatus,
    /// Buffers waiting in the ring for the camera's next frames when this one was taken out
    /// (a consumer holding many frames leaves few: time to copy instead of holding more).
    pub ring_free: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameStatus {
    Success,
}

impl std::fmt::Debug for Frame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Frame")
            .field("width", &self.width)
            .field("height", &self.height)
            .field("pixel_format", &format_args!("{:#010x}", self.pixel_format))
            .field("frame_id", &self.frame_id)
            .field("bytes", &self.len)
            .finish()
    }
}

impl Frame {
    /// The image bytes, in the buffer Aravis wrote them to.
    pub fn as_bytes(&self) -> &[u8] {
        let Some(buffer) = &self.buffer else {
            return &[];
        };
        let (base, _) = buffer.data();
        if base.is_null() || self.len == 0 {
            return &[];
        }
        // SAFETY: `base` is the start of the buffer's memory, allocated by Aravis with the
        // ring's capacity and freed only when the buffer object is; `offset + len <= capacity`
        // was checked in `image_range`. This Frame owns the buffer (it was popped from the
        // stream's output queue and is pushed back only in Drop), so no Aravis thread writes to
        // it while the returned slice, which borrows `self`, is alive.
        unsafe { std::slice::from_raw_parts(base.add(self.offset), self.len) }
    }
}

/// A frame's image bytes as memory an NDArray can hold without a copy
/// ([`ndflow_core::Buffer::from_external`]): the Aravis buffer goes back to the ring when the
/// last NDArray using it drops.
pub struct HeldFrame {
    /// `frame.as_bytes()[..len]`, taken once: reading it needs no call into Aravis.
    address: usize,
    len: usize,
    frame: Frame,
}

impl HeldFrame {
    pub fn frame(&self) -> &Frame {
        &self.frame
    }

    pub fn into_frame(self) -> Frame {
        self.frame
    }
}

// SAFETY: a HeldFrame is shared between the threads of the plugins reading one NDArray.
// Through `&HeldFrame` only `bytes()` (a read of memory no Aravis thread writes while the
// buffer is out of the ring, see `Frame::as_bytes`) and `frame()` (plain fields of a
// Frame that is already `Send`) are reachable; the Aravis objects inside the Frame are used
// only by its Drop, which has the value to itself.
unsafe impl Sync for HeldFrame {}

impl ndflow_core::ExternalBytes for HeldFrame {
    fn bytes(&self) -> &[u8] {
        // SAFETY: `address..address + len` lies within the buffer (checked in `Frame::hold`),
        // which this value owns until it drops, so the memory is valid and unchanged for as
        // long as the returned slice (borrowing `self`) lives.
        unsafe { std::slice::from_raw_parts(self.address as *const u8, self.len) }
    }
}

impl Frame {
    /// The first `len` bytes of the image as lendable memory, or the frame back when it has
    /// fewer.
    pub fn hold(self, len: usize) -> Result<HeldFrame, Frame> {
        let bytes = self.as_bytes();
        if bytes.len() < len || bytes.is_empty() {
            return Err(self);
        }
        let address = bytes.as_ptr() as usize;
        Ok(HeldFrame {
            address,
            len,
            frame: self,
        })
    }
}

impl Drop for Frame {
    fn drop(&mut self) {
        if let Some(b) = self.buffer.take() {
            if let Some(stream) = self.home.read().as_ref() {
                stream.push(b);
            }
        }
    }
}

/// The image's `(offset, len)` within a buffer of `capacity` bytes, if it has a single image
/// part that fits.
fn image_range(buffer: &Buffer, capacity: usize) -> Option<(usize, usize)> {
    if !matches!(
        buffer.payload_type(),
        BufferPayloadType::Image | BufferPayloadType::ExtendedChunkData
    ) || buffer.n_parts() < 1
    {
        return None;
    }
    let (base, _) = buffer.data();
    let mut size = 0usize;
    // SAFETY: the buffer is a valid ArvBuffer (we hold a reference) with at least one part, so
    // `arv_buffer_get_image_data` returns part 0's address and writes its size; it reads only
    // the buffer's bookkeeping.
    let part = unsafe { aravis_sys::arv_buffer_get_image_data(buffer.to_glib_none().0, &mut size) };
    let offset = (part as usize).checked_sub(base as usize)?;
    (!base.is_null() && offset.checked_add(size)? <= capacity).then_some((offset, size))
}

/// The stream a frame's buffer returns to. Frames must not keep the Aravis stream itself
/// alive: a GigE stream that finalizes writes 0 to the camera's stream-channel port, and one
/// finalized late (when a plugin let go of its last frame) would cut off the stream opened
/// after it. So the stream is dropped when [`Stream`] is, and later frames just free their
/// buffer.
/// Pops and pushes share it (read lock); closing takes it (write lock), waiting for a pop in
/// progress to return.
type Home = Arc<parking_lot::RwLock<Option<QueueEnds>>>;

/// The two ends of an Aravis stream's buffer queues: the only calls made on a stream from
/// several threads at once.
struct QueueEnds(aravis::Stream);

// SAFETY: through `&QueueEnds` only `arv_stream_timeout_pop_buffer`, `arv_stream_try_pop_buffer`,
// `arv_stream_push_buffer` and `arv_stream_get_n_buffers` are called. Aravis implements them on
// GAsyncQueues (its own stream thread pushes and pops them concurrently with the application),
// which are safe to use from any number of threads at once; the GObject's reference count is
// atomic. Exercised by the stream tests: buffers pushed back from reader threads while the
// consumer pops.
unsafe impl Sync for QueueEnds {}

impl QueueEnds {
    fn pop(&self, timeout_us: u64) -> Option<Buffer> {
        self.0.timeout_pop_buffer(timeout_us)
    }
    fn try_pop(&self) -> Option<Buffer> {
        self.0.try_pop_buffer()
    }
    fn push(&self, b: Buffer) {
        self.0.push_buffer(b)
    }
    /// Buffers waiting for the camera.
    fn free(&self) -> usize {
        usize::try_from(self.0.n_buffers().0).unwrap_or(0)
    }
}

/// Where a consumer takes completed frames from: Aravis' output queue, popped on the
/// consumer's own thread. Cloneable; once the [`Stream`] is dropped it reports
/// [`Closed`].
#[derive(Clone)]
pub struct FrameSource {
    home: Home,
    capacity: usize,
    rejected: Arc<AtomicU64>,
}

/// The stream a [`FrameSource`] took frames from has been closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed;

impl FrameSource {
    /// The next completed frame, `Ok(None)` after `timeout`. Buffers that arrived failed (or
    /// hold no image) are counted and pushed back on the way.
    pub fn recv(&self, timeout: Duration) -> Result<Option<Frame>, Closed> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let us = u64::try_from(left.as_micros()).unwrap_or(u64::MAX).max(1);
            match self.take(|s| s.pop(us))? {
                Some(Taken::Frame(f)) => return Ok(Some(f)),
                Some(Taken::Rejected) => {}
                None => return Ok(None),
            }
        }
    }

    /// A completed frame if one is waiting.
    pub fn try_recv(&self) -> Result<Option<Frame>, Closed> {
        loop {
            match self.take(|s| s.try_pop())? {
                Some(Taken::Frame(f)) => return Ok(Some(f)),
                Some(Taken::Rejected) => {}
                None => return Ok(None),
            }
        }
    }

    fn take(
        &self,
        pop: impl FnOnce(&QueueEnds) -> Option<Buffer>,
    ) -> Result<Option<Taken>, Closed> {
        let guard = self.home.read();
        let stream = guard.as_ref().ok_or(Closed)?;
        let Some(buffer) = pop(stream) else {
            return Ok(None);
        };
        let range = match buffer.status() {
            BufferStatus::Success => image_range(&buffer, self.capacity),
            _ => None,
        };
        let Some((offset, len)) = range else {
            self.rejected.fetch_add(1, Ordering::Relaxed);
            stream.push(buffer);
            return Ok(Some(Taken::Rejected));
        };
        Ok(Some(Taken::Frame(Frame {
            width: u32::try_from(buffer.image_width()).unwrap_or(0),
            height: u32::try_from(buffer.image_height()).unwrap_or(0),
            pixel_format: buffer.image_pixel_format().raw(),
            frame_id: buffer.frame_id(),
            timestamp_ns: buffer.timestamp(),
            system_timestamp_ns: buffer.system_timestamp(),
            status: FrameStatus::Success,
            ring_free: stream.free(),
            offset,
            len,
            buffer: Some(buffer),
            home: self.home.clone(),
        })))
    }
}

enum Taken {
    Frame(Frame),
    Rejected,
}

/// An open stream: the ring and where its frames are taken from.
pub struct Stream {
    camera: aravis::Camera,
    stream: aravis::Stream,
    source: FrameSource,
    payload: usize,
    acquiring: bool,
}

impl Stream {
    /// Creates the camera's stream with `n_buffers` buffers of its current PayloadSize.
    /// Acquisition itself starts with [`Stream::start`].
    pub fn open(camera: &Camera, options: StreamOptions) -> Result<Stream, CameraError> {
        let payload = camera.payload_size()?;
        if payload == 0 {
            return Err(CameraError::Stream(
                "the camera reports a PayloadSize of 0".into(),
            ));
        }
        let stream = camera
            .cam
            .create_stream()
            .map_err(|e| CameraError::Stream(format!("creating the stream: {}", e.message())))?;
        let n = options.n_buffers.max(1);
        for _ in 0..n {
            stream.push_buffer(Buffer::new_allocate(payload));
        }
        let source = FrameSource {
            home: Arc::new(parking_lot::RwLock::new(Some(QueueEnds(stream.clone())))),
            capacity: payload,
            rejected: Arc::new(AtomicU64::new(0)),
        };
        Ok(Stream {
            camera: camera.cam.clone(),
            stream,
            source,
            payload,
            acquiring: false,
        })
    }

    /// Bytes per buffer (PayloadSize when the stream was opened).
    pub fn payload(&self) -> usize {
        self.payload
    }

    /// AcquisitionStart (through `arv_camera_start_acquisition`, which also locks TLParamsLocked).
    pub fn start(&mut self) -> Result<(), CameraError> {
        self.camera
            .start_acquisition()
            .map_err(|e| CameraError::feature("executing", "AcquisitionStart", e))?;
        self.acquiring = true;
        Ok(())
    }

    /// AcquisitionStop. Frames already completed stay in the output queue.
    pub fn stop(&mut self) -> Result<(), CameraError> {
        self.acquiring = false;
        self.camera
            .stop_acquisition()
            .map_err(|e| CameraError::feature("executing", "AcquisitionStop", e))
    }

    /// The next frame, or `None` after `timeout`.
    pub fn recv(&self, timeout: Duration) -> Option<Frame> {
        self.source.recv(timeout).ok().flatten()
    }

    pub fn try_recv(&self) -> Option<Frame> {
        self.source.try_recv().ok().flatten()
    }

    /// Where another thread takes the frames from (the driver's).
    pub fn frames(&self) -> FrameSource {
        self.source.clone()
    }

    pub fn statistics(&self) -> Stats {
        let (completed, failures, underruns) = self.stream.statistics();
        let (resent_packets, missing_packets) = self.gv().map(|g| g.statistics()).unwrap_or((0, 0));
        Stats {
            completed,
            failures,
            underruns,
            missing_packets,
            resent_packets,
            rejected: self.source.rejected.load(Ordering::Relaxed),
        }
    }

    fn gv(&self) -> Option<&GvStream> {
        self.stream.downcast_ref::<GvStream>()
    }

    fn gv_or_err(&self, what: &str) -> Result<&GvStream, CameraError> {
        self.gv()
            .ok_or_else(|| CameraError::Stream(format!("{what}: not a GigE Vision stream")))
    }

    /// GigE `packet-resend`: ask the camera for missing packets (Aravis' default is on).
    pub fn set_packet_resend(&self, enable: bool) -> Result<(), CameraError> {
        self.gv_or_err("packet-resend")?
            .set_packet_resend(if enable {
                GvStreamPacketResend::Always
            } else {
                GvStreamPacketResend::Never
            });
        Ok(())
    }

    pub fn packet_resend(&self) -> Option<bool> {
        self.gv()
            .map(|g| g.packet_resend() == GvStreamPacketResend::Always)
    }

    /// GigE `packet-timeout`: how long a missing packet is waited for before a resend request.
    pub fn set_packet_timeout(&self, timeout: Duration) -> Result<(), CameraError> {
        let us = u32::try_from(timeout.as_micros()).unwrap_or(u32::MAX);
        self.gv_or_err("packet-timeout")?.set_packet_timeout(us);
        Ok(())
    }

    pub fn packet_timeout(&self) -> Option<Duration> {
        self.gv()
            .map(|g| Duration::from_micros(g.packet_timeout().into()))
    }

    /// GigE `frame-retention`: how long an incomplete frame is kept before it counts as failed.
    pub fn set_frame_retention(&self, retention: Duration) -> Result<(), CameraError> {
        let us = u32::try_from(retention.as_micros()).unwrap_or(u32::MAX);
        self.gv_or_err("frame-retention")?.set_frame_retention(us);
        Ok(())
    }

    pub fn frame_retention(&self) -> Option<Duration> {
        self.gv()
            .map(|g| Duration::from_micros(g.frame_retention().into()))
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.acquiring {
            let _ = self.camera.stop_acquisition();
        }
        // Frames still held no longer return to the ring (see [`Home`]) and sources report
        // Closed: the stream is finalized when this value's own reference drops, now, before
        // a new one can open. Not `arv_stream_stop_thread`: finalize stops Aravis' thread
        // itself and complains when it is already stopped.
        self.source.home.write().take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send<T: Send>() {}

    /// Aravis' in-process fake device: no socket is opened, so this runs anywhere and
    /// exercises `as_bytes` and the buffer's return to the ring.
    #[test]
    fn in_process_fake_frames_are_zero_copy_and_recycled() {
        assert_send::<Frame>();
        let cam = Camera::open_fake("NDFLOW0").unwrap();
        cam.set_int("Width", 64).unwrap();
        cam.set_int("Height", 48).unwrap();
        cam.set_enum("PixelFormat", "Mono8").unwrap();
        cam.set_float("AcquisitionFrameRate", 200.0).unwrap();
        let mut s = Stream::open(&cam, StreamOptions { n_buffers: 2 }).unwrap();
        assert_eq!(s.payload(), 64 * 48);
        assert!(s.set_packet_resend(true).is_err(), "not a GigE stream");
        s.start().unwrap();
        let mut ids = Vec::new();
        // 6 frames through a ring of 2: only possible if dropped frames go back to it.
        for _ in 0..6 {
            let f = s
                .recv(Duration::from_secs(5))
                .expect("a frame from the fake device");
            assert_eq!((f.width, f.height, f.pixel_format), (64, 48, 0x0108_0001));
            let px = f.as_bytes();
            assert_eq!(px.len(), 64 * 48);
            // The fake's ramp at its default gain and exposure: (x + y + frame_id) mod 255.
            let id = f.frame_id as usize;
            for (y, row) in px.chunks(64).enumerate().step_by(7) {
                for (x, &v) in row.iter().enumerate() {
                    assert_eq!(
                        v as usize,
                        (x + y + id) % 255,
                        "pixel ({x},{y}) of frame {id}"
                    );
                }
            }
            // Frames cross threads.
            let id2 = std::thread::spawn(move || f.frame_id).join().unwrap();
            ids.push(id2);
        }
        s.stop().unwrap();
        assert!(ids.windows(2).all(|w| w[1] > w[0]), "{ids:?}");
        let st = s.statistics();
        assert!(st.completed >= 6, "{st:?}");
        assert_eq!(
            (st.missing_packets, st.resent_packets, st.rejected),
            (0, 0, 0)
        );
    }

    /// Held frames are NDArray memory read from several threads; the ring gets each buffer
    /// back only when the last reference drops.
    #[test]
    fn held_frames_lend_their_buffer_until_the_last_reference_drops() {
        use ndflow_core::Buffer as NdBuffer;
        let cam = Camera::open_fake("NDFLOW1").unwrap();
        cam.set_int("Width", 32).unwrap();
        cam.set_int("Height", 16).unwrap();
        cam.set_enum("PixelFormat", "Mono8").unwrap();
        cam.set_float("AcquisitionFrameRate", 200.0).unwrap();
        let mut s = Stream::open(&cam, StreamOptions { n_buffers: 2 }).unwrap();
        s.start().unwrap();
        let first = s.recv(Duration::from_secs(5)).expect("a frame");
        let (id, address) = (first.frame_id, first.as_bytes().as_ptr());
        let held = first.hold(32 * 16).map_err(|_| "too short").unwrap();
        let buf = NdBuffer::from_external(held)
            .map_err(|(_, e)| e)
            .expect("Aravis buffers are 8-byte aligned");
        assert_eq!(
            buf.as_ptr(),
            address,
            "the NDArray's memory is the Aravis buffer"
        );
        let readers: Vec<_> = (0..3)
            .map(|_| {
                let b = buf.clone();
                std::thread::spawn(move || b.iter().map(|&v| u64::from(v)).sum::<u64>())
            })
            .collect();
        let sums: Vec<u64> = readers.into_iter().map(|t| t.join().unwrap()).collect();
        let want: u64 = (0..16)
            .flat_map(|y| (0..32).map(move |x| ((x + y + id as usize) % 255) as u64))
            .sum();
        assert_eq!(sums, [want; 3]);
        // With one of the two buffers lent out, frames still flow through the other.
        for _ in 0..3 {
            let f = s
                .recv(Duration::from_secs(5))
                .expect("a frame from the other buffer");
            assert!(f.ring_free <= 1, "{}", f.ring_free);
        }
        drop(buf);
        // Both buffers circulate again.
        let a = s.recv(Duration::from_secs(5)).expect("a frame");
        let b = s
            .recv(Duration::from_secs(5))
            .expect("a second frame held at once");
        assert_ne!(a.as_bytes().as_ptr(), b.as_bytes().as_ptr());
        s.stop().unwrap();
        let short = a.hold(1 << 30);
        assert!(short.is_err(), "more bytes than the image has");
    }
}
