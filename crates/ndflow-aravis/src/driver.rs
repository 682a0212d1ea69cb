//! The `aravis` driver (areaDetector's aravisCamera): the camera times the frames
//! ([`Driver::paces_itself`]); Acquire asks the control thread to apply the settings, open
//! the stream (once per PayloadSize) and start; each frame becomes an NDArray.
//!
//! This version copies each frame into a pool buffer (one memcpy per frame) and gives the
//! Aravis buffer straight back to the ring; handing the Aravis buffer itself to the pipeline
//! (zero-copy, the Frame living as long as the NDArray) is the follow-up.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};
use ndflow_core::{
    AttrValue, BayerPattern, ColorMode, DataType, NDArray, NDAttribute, ParamDef, ParamStore, Pool,
};
use ndflow_runtime::port_params::{bind, driver_layout, DriverBase};
use ndflow_runtime::{Driver, DriverError, PutHandler};

use crate::control::{Control, Menus, Source};
use crate::params::AravisParams;
use crate::stream::Frame;

/// How long one `acquire` call waits for a frame before letting the runtime look at Acquire.
const POLL: Duration = Duration::from_millis(100);
/// Applying the settings and starting can take a few GigE round trips (and a stream).
const START_TIMEOUT: Duration = Duration::from_secs(15);

/// PFNC pixel formats this version turns into NDArrays.
pub mod pfnc {
    pub const MONO8: u32 = 0x0108_0001;
    pub const MONO10: u32 = 0x0110_0003;
    pub const MONO12: u32 = 0x0110_0005;
    pub const MONO14: u32 = 0x0110_0025;
    pub const MONO16: u32 = 0x0110_0007;
    pub const RGB8: u32 = 0x0218_0014;
    pub const BAYER_GR8: u32 = 0x0108_0008;
    pub const BAYER_RG8: u32 = 0x0108_0009;
    pub const BAYER_GB8: u32 = 0x0108_000A;
    pub const BAYER_BG8: u32 = 0x0108_000B;
}

/// How a pixel format becomes an NDArray: data type, colour mode, Bayer pattern.
pub fn layout_of(pixel_format: u32) -> Option<(DataType, ColorMode, Option<BayerPattern>)> {
    use pfnc::*;
    Some(match pixel_format {
        MONO8 => (DataType::UInt8, ColorMode::Mono, None),
        MONO10 | MONO12 | MONO14 | MONO16 => (DataType::UInt16, ColorMode::Mono, None),
        RGB8 => (DataType::UInt8, ColorMode::RGB1, None),
        BAYER_RG8 => (DataType::UInt8, ColorMode::Bayer, Some(BayerPattern::RGGB)),
        BAYER_GB8 => (DataType::UInt8, ColorMode::Bayer, Some(BayerPattern::GBRG)),
        BAYER_GR8 => (DataType::UInt8, ColorMode::Bayer, Some(BayerPattern::GRBG)),
        BAYER_BG8 => (DataType::UInt8, ColorMode::Bayer, Some(BayerPattern::BGGR)),
        _ => return None,
    })
}

/// ARShiftDir / ARShiftBits applied to 16-bit pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shift {
    None,
    Left(u32),
    Right(u32),
}

/// One frame as an NDArray from `pool` (a copy; see the module comment).
pub fn frame_to_array(frame: &Frame, shift: Shift, pool: &Pool) -> Result<NDArray, DriverError> {
    let (dt, mode, bayer) = layout_of(frame.pixel_format).ok_or_else(|| {
        DriverError::Other(format!(
            "pixel format {:#010x} is not supported yet (Mono8/10/12/14/16, RGB8, Bayer??8)",
            frame.pixel_format
        ))
    })?;
    let (w, h) = (frame.width as usize, frame.height as usize);
    let channels = if mode == ColorMode::RGB1 { 3 } else { 1 };
    let len = w * h * channels * dt.size();
    let bytes = frame.as_bytes();
    let src = bytes.get(..len).ok_or_else(|| {
        DriverError::Other(format!(
            "frame {} has {} bytes, {w}×{h} {dt:?} needs {len}",
            frame.frame_id,
            bytes.len()
        ))
    })?;
    let mut buf = pool.alloc(len)?;
    buf.as_mut_slice::<u8>().copy_from_slice(src);
    if dt == DataType::UInt16 && shift != Shift::None {
        for px in buf.as_mut_slice::<u16>() {
            *px = match shift {
                Shift::Left(n) => px.wrapping_shl(n),
                Shift::Right(n) => *px >> n,
                Shift::None => *px,
            };
        }
    }
    let dims: Vec<usize> = if channels == 3 {
        vec![3, w, h]
    } else {
        vec![w, h]
    };
    let mut a = NDArray::new(&dims, dt, buf.freeze())?;
    a.set_color_mode(mode);
    if let Some(b) = bayer {
        a.set_attribute(NDAttribute::new(
            "BayerPattern",
            "Bayer pattern",
            AttrValue::Int32(b as i32),
        ));
    }
    a.set_attribute(NDAttribute::new(
        "FrameId",
        "Camera frame (block) id",
        AttrValue::Int64(i64::try_from(frame.frame_id).unwrap_or(i64::MAX)),
    ));
    a.set_attribute(NDAttribute::new(
        "CameraTimestamp",
        "Camera timestamp (ns)",
        AttrValue::Int64(i64::try_from(frame.timestamp_ns).unwrap_or(i64::MAX)),
    ));
    Ok(a)
}

pub struct AravisDriver {
    source: Source,
    n_buffers: usize,
    menus: Arc<Menus>,
    table: &'static [ParamDef],
    base: DriverBase,
    a: AravisParams,
    control: Option<Control>,
    frames: Option<Receiver<Frame>>,
    /// Frames this acquisition ends after (None: Continuous).
    target: Option<u64>,
    delivered: u64,
    last_format: Option<(DataType, ColorMode)>,
}

impl AravisDriver {
    /// `table` is the port's own parameter table ([`crate::params::table_with_menus`]) and
    /// `menus` the camera's entries behind its camera-filled menus.
    pub fn new(
        source: Source,
        n_buffers: usize,
        menus: Menus,
        table: &'static [ParamDef],
    ) -> AravisDriver {
        let layout = driver_layout(table);
        AravisDriver {
            source,
            n_buffers,
            menus: Arc::new(menus),
            table,
            base: DriverBase::of(&layout),
            a: bind(&layout, AravisParams::bind),
            control: None,
            frames: None,
            target: None,
            delivered: 0,
            last_format: None,
        }
    }

    fn shift(&self, params: &ParamStore) -> Shift {
        let bits = u32::try_from(self.a.shift_bits.get(params).clamp(0, 7)).unwrap_or(0) + 1;
        match self.a.shift_dir.get(params) {
            1 => Shift::Left(bits),
            2 => Shift::Right(bits),
            _ => Shift::None,
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
        Ok(())
    }

    fn put_handler(&mut self, params: &Arc<ParamStore>) -> Option<PutHandler> {
        let control = match Control::start(
            self.source.clone(),
            self.n_buffers,
            self.menus.clone(),
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
        let frames = control.start_acquisition(START_TIMEOUT).map_err(other)?;
        self.frames = Some(frames);
        Ok(())
    }

    fn acquire(&mut self, params: &ParamStore, pool: &Pool) -> Result<NDArray, DriverError> {
        if self.target.is_some_and(|t| self.delivered >= t) {
            return Err(DriverError::Finished);
        }
        let Some(rx) = &self.frames else {
            return Err(DriverError::Finished);
        };
        let frame = match rx.recv_timeout(POLL) {
            Ok(f) => f,
            Err(RecvTimeoutError::Timeout) => {
                let connected = self
                    .control
                    .as_ref()
                    .is_some_and(|c| c.shared.connected.load(Ordering::Acquire));
                if !connected {
                    return Err(other("the camera went away during the acquisition"));
                }
                return Err(DriverError::NoFrame);
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(other("the camera's stream ended during the acquisition"));
            }
        };
        let a = frame_to_array(&frame, self.shift(params), pool)?;
        drop(frame);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pixel_formats() {
        assert_eq!(
            layout_of(pfnc::MONO12),
            Some((DataType::UInt16, ColorMode::Mono, None))
        );
        assert_eq!(
            layout_of(pfnc::BAYER_GB8),
            Some((DataType::UInt8, ColorMode::Bayer, Some(BayerPattern::GBRG)))
        );
        assert_eq!(layout_of(0x010C_0006), None); // Mono12Packed
    }
}
