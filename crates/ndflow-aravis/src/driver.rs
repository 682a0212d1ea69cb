//! The `aravis` driver (areaDetector's aravisCamera): the camera times the frames
//! ([`Driver::paces_itself`]); Acquire asks the control thread to apply the settings, open
//! the stream (once per PayloadSize) and start; each frame becomes an NDArray.
//!
//! An unpacked frame is handed on in the Aravis buffer itself (zero-copy: the buffer returns
//! to the ring when the last NDArray using it drops) while enough buffers remain in the ring
//! for the camera; packed, BGR and shifted frames, and frames that arrive while downstream
//! queues hold most of the ring, are converted or copied into the pool in one pass.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ndflow_core::{
    AttrValue, Buffer, ColorMode, DataType, NDArray, NDAttribute, ParamDef, ParamStore, Pool,
};
use ndflow_runtime::port_params::{bind, driver_layout, DriverBase};
use ndflow_runtime::{ConnectionProbe, Driver, DriverError, PutHandler};

use crate::control::{Control, Menus, Source};
use crate::features::FeatureList;
use crate::gc::GcFeatures;
use crate::params::{port_table, AravisParams};
use crate::pixels::{layout_of, unpack, Layout, Packing};
use crate::port::Description;
use crate::stream::{Closed, Frame, FrameSource};

/// How long one `acquire` call waits for a frame before letting the runtime look at Acquire.
const POLL: Duration = Duration::from_millis(100);
/// Applying the settings and starting can take a few GigE round trips (and a stream).
const START_TIMEOUT: Duration = Duration::from_secs(15);

/// ARShiftDir / ARShiftBits applied to 16-bit pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shift {
    None,
    Left(u32),
    Right(u32),
}

/// How frames become NDArrays: the user's conversions, and when to lend the camera's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conversion {
    pub shift: Shift,
    /// ARConvertPixelFormat = Mono16High: unpacked values in the top bits.
    pub high: bool,
    /// Lend the Aravis buffer only while at least this many wait in the ring for the camera
    /// (below it, downstream queues hold the ring: copy, so the camera keeps buffers).
    pub lend_above: usize,
}

/// One frame as an NDArray: the Aravis buffer itself when its bytes are the NDArray's
/// (unpacked formats, no shift, enough buffers left in the ring), else one pass into a
/// buffer from `pool` (unpacking, swapping BGR, shifting).
pub fn frame_to_array(frame: Frame, conv: Conversion, pool: &Pool) -> Result<NDArray, DriverError> {
    let layout = layout_of(frame.pixel_format).ok_or_else(|| {
        DriverError::Other(format!(
            "pixel format {:#010x} is not supported (Mono8/10/12/14/16 and their packed forms, RGB8, BGR8, Bayer 8/10/12/16 and packed)",
            frame.pixel_format
        ))
    })?;
    let (w, h) = (frame.width as usize, frame.height as usize);
    let channels = if layout.color_mode == ColorMode::RGB1 {
        3
    } else {
        1
    };
    let values = w * h * channels;
    let len = values * layout.data_type.size();
    let needed = layout.packed_len(values);
    let (frame_id, timestamp_ns) = (frame.frame_id, frame.timestamp_ns);
    if frame.as_bytes().len() < needed {
        return Err(DriverError::Other(format!(
            "frame {frame_id} has {} bytes, {w}×{h} {:#010x} needs {needed}",
            frame.as_bytes().len(),
            frame.pixel_format
        )));
    }
    let shifts = layout.data_type == DataType::UInt16 && conv.shift != Shift::None;
    let lend = layout.is_verbatim() && !shifts && frame.ring_free >= conv.lend_above;
    let frame = if lend {
        match frame.hold(len).map(Buffer::from_external) {
            Ok(Ok(buffer)) => return finish(buffer, layout, [w, h], frame_id, timestamp_ns),
            Ok(Err((held, _misaligned))) => held.into_frame(),
            Err(frame) => frame,
        }
    } else {
        frame
    };
    let src = frame.as_bytes();
    let mut buf = pool.alloc(len)?;
    match layout.packing {
        Packing::None => buf.as_mut_slice::<u8>().copy_from_slice(&src[..len]),
        Packing::Bgr => {
            for (d, s) in buf
                .as_mut_slice::<u8>()
                .chunks_exact_mut(3)
                .zip(src.chunks_exact(3))
            {
                d.copy_from_slice(&[s[2], s[1], s[0]]);
            }
        }
        Packing::GigE { .. } | Packing::Lsb { .. } => {
            unpack(&layout, src, buf.as_mut_slice::<u16>(), conv.high)
        }
    }
    drop(frame);
    if shifts {
        for px in buf.as_mut_slice::<u16>() {
            *px = match conv.shift {
                Shift::Left(n) => px.wrapping_shl(n),
                Shift::Right(n) => *px >> n,
                Shift::None => *px,
            };
        }
    }
    finish(buf.freeze(), layout, [w, h], frame_id, timestamp_ns)
}

fn finish(
    buffer: Buffer,
    layout: Layout,
    [w, h]: [usize; 2],
    frame_id: u64,
    timestamp_ns: u64,
) -> Result<NDArray, DriverError> {
    let dims: Vec<usize> = if layout.color_mode == ColorMode::RGB1 {
        vec![3, w, h]
    } else {
        vec![w, h]
    };
    let mut a = NDArray::new(&dims, layout.data_type, buffer)?;
    a.set_color_mode(layout.color_mode);
    if let Some(b) = layout.bayer {
        a.set_attribute(NDAttribute::new(
            "BayerPattern",
            "Bayer pattern",
            AttrValue::Int32(b as i32),
        ));
    }
    a.set_attribute(NDAttribute::new(
        "FrameId",
        "Camera frame (block) id",
        AttrValue::Int64(i64::try_from(frame_id).unwrap_or(i64::MAX)),
    ));
    a.set_attribute(NDAttribute::new(
        "CameraTimestamp",
        "Camera timestamp (ns)",
        AttrValue::Int64(i64::try_from(timestamp_ns).unwrap_or(i64::MAX)),
    ));
    Ok(a)
}

pub struct AravisDriver {
    source: Source,
    n_buffers: usize,
    menus: Arc<Menus>,
    features: Arc<FeatureList>,
    described_from: String,
    table: &'static [ParamDef],
    base: DriverBase,
    a: AravisParams,
    control: Option<Control>,
    frames: Option<FrameSource>,
    /// The control thread's restart count this `frames` belongs to.
    restarts: u64,
    /// The last frame's block id, for counting the ids that never arrived.
    last_frame_id: Option<u64>,
    frame_id_gaps: u64,
    /// Frames this acquisition ends after (None: Continuous).
    target: Option<u64>,
    delivered: u64,
    last_format: Option<(DataType, ColorMode)>,
}

impl AravisDriver {
    /// `description`: the camera-filled menus' entries and the features that become `GC_*`
    /// records ([`crate::port::describe`]); the port's table is built from it.
    pub fn new(source: Source, n_buffers: usize, description: Description) -> AravisDriver {
        let Description {
            menus,
            features,
            from,
        } = description;
        let table = port_table(&menus, GcFeatures::declarations(&features));
        let layout = driver_layout(table);
        AravisDriver {
            source,
            n_buffers,
            menus: Arc::new(menus),
            features: Arc::new(features),
            described_from: from,
            table,
            base: DriverBase::of(&layout),
            a: bind(&layout, AravisParams::bind),
            control: None,
            frames: None,
            restarts: 0,
            last_frame_id: None,
            frame_id_gaps: 0,
            target: None,
            delivered: 0,
            last_format: None,
        }
    }

    fn conversion(&self, params: &ParamStore) -> Conversion {
        let bits = u32::try_from(self.a.shift_bits.get(params).clamp(0, 7)).unwrap_or(0) + 1;
        let shift = match self.a.shift_dir.get(params) {
            1 => Shift::Left(bits),
            2 => Shift::Right(bits),
            _ => Shift::None,
        };
        Conversion {
            shift,
            high: self.a.convert_pixel_format.get(params) == 1,
            // A quarter of the ring (at least 2) stays with the camera.
            lend_above: (self.n_buffers / 4).max(2),
        }
    }
}

fn other(e: impl std::fmt::Display) -> DriverError {
    DriverError::Other(e.to_string())
}

impl Driver for AravisDriver {
    fn driver_type(&self) -> &'static str {
        "aravisCamera"
    }

    fn params(&self) -> &'static [ParamDef] {
        self.table
    }

    fn init(&mut self, params: &ParamStore) -> Result<(), DriverError> {
        let ad = &self.base.driver;
        params.set_many(&[
            ad.status_message
                .value(format!("camera {}: connecting", self.source.describe())),
            ad.image_mode.value(2),
            self.a.connect_camera.value(0),
        ]);
        if self.described_from.is_empty() {
            tracing::info!(
                "camera {}: not there at start-up and no GenICamXml: no GC_ records, template menus",
                self.source.describe()
            );
        } else {
            tracing::info!(
                "camera {}: {} GC_ records and the camera-filled menus from {}",
                self.source.describe(),
                self.features.features.len(),
                self.described_from
            );
        }
        Ok(())
    }

    fn put_handler(&mut self, params: &Arc<ParamStore>) -> Option<PutHandler> {
        let control = match Control::start(
            self.source.clone(),
            self.n_buffers,
            self.menus.clone(),
            self.features.clone(),
            params.clone(),
        ) {
            Ok(c) => c,
            Err(e) => {
                self.base
                    .driver
                    .status_message
                    .set(params, format!("cannot start the control thread: {e}"));
                return None;
            }
        };
        let handler = control.put_handler();
        self.control = Some(control);
        Some(handler)
    }

    fn connection(&self) -> Option<ConnectionProbe> {
        let shared = self.control.as_ref()?.shared.clone();
        Some(Arc::new(move || shared.connected.load(Ordering::Acquire)))
    }

    fn start(&mut self, params: &ParamStore) -> Result<(), DriverError> {
        let control = self
            .control
            .as_ref()
            .ok_or_else(|| other("the camera control thread is not running"))?;
        let ad = &self.base.driver;
        self.target = match ad.image_mode.get(params) {
            0 => Some(1),
            1 => Some(u64::try_from(ad.num_images.get(params).max(1)).unwrap_or(1)),
            _ => None,
        };
        self.delivered = 0;
        self.last_frame_id = None;
        self.frame_id_gaps = 0;
        self.a.frame_id_gaps.set(params, 0);
        self.restarts = control.shared.restarts.load(Ordering::Acquire);
        let frames = control.start_acquisition(START_TIMEOUT).map_err(other)?;
        self.frames = Some(frames);
        Ok(())
    }

    fn acquire(&mut self, params: &ParamStore, pool: &Pool) -> Result<NDArray, DriverError> {
        if self.target.is_some_and(|t| self.delivered >= t) {
            return Err(DriverError::Finished);
        }
        if let Some(c) = &self.control {
            let restarts = c.shared.restarts.load(Ordering::Acquire);
            if restarts != self.restarts {
                self.restarts = restarts;
                if let Some(f) = c.shared.restarted.lock().take() {
                    self.frames = Some(f);
                    self.last_frame_id = None;
                }
            }
        }
        let Some(rx) = &self.frames else {
            return Err(DriverError::Finished);
        };
        let frame = match rx.recv(POLL) {
            Ok(Some(f)) => f,
            Ok(None) => {
                let connected = self
                    .control
                    .as_ref()
                    .is_some_and(|c| c.shared.connected.load(Ordering::Acquire));
                if !connected {
                    return Err(other("the camera went away during the acquisition"));
                }
                return Err(DriverError::NoFrame);
            }
            Err(Closed) => {
                let restarting = self.control.as_ref().is_some_and(|c| {
                    c.shared.restarting.load(Ordering::Acquire)
                        || c.shared.restarts.load(Ordering::Acquire) != self.restarts
                });
                if restarting {
                    return Err(DriverError::NoFrame);
                }
                return Err(other("the camera's stream ended during the acquisition"));
            }
        };
        // Ids count up by one per frame the camera sent; one that goes back is a new
        // sequence (a restart, or the 16-bit GigE block id wrapping), not a loss.
        if let Some(last) = self.last_frame_id {
            if frame.frame_id > last + 1 {
                self.frame_id_gaps += frame.frame_id - last - 1;
                let gaps = i64::try_from(self.frame_id_gaps).unwrap_or(i64::MAX);
                self.a.frame_id_gaps.set(params, gaps);
            }
        }
        self.last_frame_id = Some(frame.frame_id);
        let a = frame_to_array(frame, self.conversion(params), pool)?;
        self.delivered += 1;
        let format = (a.data_type, a.color_mode());
        if self.last_format != Some(format) {
            self.last_format = Some(format);
            let _ = params.set_by_name("DataType", a.data_type as i64);
            let _ = params.set_by_name("ColorMode", format.1 as i64);
        }
        Ok(a)
    }

    fn stop(&mut self, _params: &ParamStore) {
        if let Some(c) = &self.control {
            c.stop_acquisition();
        }
        self.frames = None;
    }

    fn paces_itself(&self) -> bool {
        true
    }
}
