//! The control thread: owns the camera and its stream (Aravis objects stay on this thread),
//! connects and reconnects once a second, writes settings as they are put and reads back
//! what the camera made of them, starts and stops acquisition for the driver, and publishes
//! the stream's statistics (every 200 ms while acquiring, every second otherwise).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, unbounded, Receiver, RecvTimeoutError, Sender};
use ndflow_core::{ParamStore, ParamValue};
use ndflow_runtime::port_params::{DriverBase, DriverParams};
use ndflow_runtime::PutHandler;

use crate::camera::{Camera, CameraError};
use crate::features::FeatureList;
use crate::gc::GcFeatures;
use crate::params::{AravisParams, GenICamParams};
use crate::stream::{FrameSource, Stream, StreamOptions};

const RETRY: Duration = Duration::from_secs(1);
const TICK_IDLE: Duration = Duration::from_secs(1);
const TICK_ACQUIRING: Duration = Duration::from_millis(200);
/// At most one loss line in the log per this long.
const LOSS_LOG: Duration = Duration::from_secs(10);
/// At most how long a stop waits for frames still arriving before it counts them as
/// discarded (ARFrameRetention when shorter).
const STRAGGLERS: Duration = Duration::from_millis(300);

/// Where the camera is.
#[derive(Debug, Clone)]
pub enum Source {
    /// A GigE Vision camera at this IPv4 address (opened without discovery).
    Ip(String),
    /// Aravis' in-process fake camera with this serial (tests, simulation).
    Fake(String),
    /// No CameraId configured (a port built only to list its parameters).
    Unset,
}

impl Source {
    pub fn open(&self) -> Result<Camera, CameraError> {
        match self {
            Source::Ip(ip) => Camera::open(ip),
            Source::Fake(serial) => Camera::open_fake(serial),
            Source::Unset => Err(CameraError::Open {
                id: String::new(),
                message: "no CameraId configured".into(),
            }),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Source::Ip(ip) => ip.clone(),
            Source::Fake(s) => format!("fake:{s}"),
            Source::Unset => "(no CameraId)".into(),
        }
    }
}

/// The camera-filled menus: record name → the camera's full entry names, in menu order.
pub type Menus = Vec<(&'static str, Vec<String>)>;

pub(crate) type StartReply = Result<FrameSource, String>;

enum Msg {
    Put(usize, ParamValue),
    Start(Sender<StartReply>),
    Stop,
    Shutdown,
}

/// What the driver and the control thread share.
#[derive(Default)]
pub(crate) struct Shared {
    pub connected: AtomicBool,
    /// Frames of an acquisition the control thread restarted (a size, offset, binning, pixel
    /// format or frame count put while acquiring, as ADGenICam does): the driver takes them
    /// from here when `restarts` moves.
    pub restarted: parking_lot::Mutex<Option<FrameSource>>,
    pub restarts: std::sync::atomic::AtomicU64,
    /// Set while a restart is under way (the old stream's channel may close meanwhile).
    pub restarting: AtomicBool,
}

pub struct Control {
    tx: Sender<Msg>,
    pub(crate) shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Control {
    pub fn start(
        source: Source,
        n_buffers: usize,
        menus: Arc<Menus>,
        features: Arc<FeatureList>,
        params: Arc<ParamStore>,
    ) -> std::io::Result<Control> {
        let (tx, rx) = unbounded();
        let shared = Arc::new(Shared::default());
        let layout = params.layout();
        let state = State {
            base: DriverBase::of(layout),
            g: GenICamParams::bind(layout).map_err(std::io::Error::other)?,
            a: AravisParams::bind(layout).map_err(std::io::Error::other)?,
            gc: GcFeatures::bind(&features, &params),
            source,
            n_buffers,
            menus,
            params,
            shared: shared.clone(),
            cam: None,
            stream: None,
            acquiring: false,
            want_connected: true,
            last_attempt: None,
            pending: Vec::new(),
            last_error: String::new(),
            discarded: 0,
            lost: None,
            logged_loss: ((0, 0), None),
            packet_size_pending: false,
        };
        let thread = std::thread::Builder::new()
            .name("ndflow-aravis-ctl".into())
            .spawn(move || state.run(&rx))?;
        Ok(Control {
            tx,
            shared,
            thread: Some(thread),
        })
    }

    pub fn put_handler(&self) -> PutHandler {
        let tx = self.tx.clone();
        Box::new(move |idx, v| {
            let _ = tx.send(Msg::Put(idx, v.clone()));
        })
    }

    /// Applies the settings, opens the stream if needed and starts acquisition; the frames
    /// come on the returned channel.
    pub(crate) fn start_acquisition(&self, timeout: Duration) -> StartReply {
        let (tx, rx) = bounded(1);
        self.tx
            .send(Msg::Start(tx))
            .map_err(|_| "the camera control thread has ended".to_string())?;
        rx.recv_timeout(timeout)
            .map_err(|_| "the camera did not start in time".to_string())?
    }

    pub(crate) fn stop_acquisition(&self) {
        let _ = self.tx.send(Msg::Stop);
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        let _ = self.tx.send(Msg::Shutdown);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct State {
    base: DriverBase,
    g: GenICamParams,
    a: AravisParams,
    /// The camera's `GC_*` features.
    gc: GcFeatures,
    source: Source,
    n_buffers: usize,
    menus: Arc<Menus>,
    params: Arc<ParamStore>,
    shared: Arc<Shared>,
    cam: Option<Camera>,
    stream: Option<Stream>,
    acquiring: bool,
    /// ARConnectCamera: 0 stops the retries until 1 is written.
    want_connected: bool,
    last_attempt: Option<Instant>,
    /// Parameters put while no camera was connected: written when it connects.
    pending: Vec<usize>,
    last_error: String,
    /// Completed frames thrown away at a stop or restart (ARFramesDiscarded).
    discarded: u64,
    /// Why the camera was lost, kept in the status until it is back.
    lost: Option<String>,
    /// (failures, underruns) last said in the log, and when.
    logged_loss: ((u64, u64), Option<Instant>),
    /// ARPacketSize was put during an acquisition: applied at its end.
    packet_size_pending: bool,
}

/// The first of `names` the camera has.
fn first_available<'n>(cam: &Camera, names: &[&'n str]) -> Option<&'n str> {
    names.iter().copied().find(|n| cam.is_available(n))
}

const EXPOSURE: &[&str] = &["ExposureTime", "ExposureTimeAbs"];
const FRAME_RATE: &[&str] = &["AcquisitionFrameRate", "AcquisitionFrameRateAbs"];
const GAIN: &[&str] = &["Gain", "GainRaw", "GainRawChannelA"];
const TEMPERATURE: &[&str] = &["DeviceTemperature", "TemperatureAbs"];
const ACQUISITION_MODES: [&str; 3] = ["SingleFrame", "MultiFrame", "Continuous"];

impl State {
    fn run(mut self, rx: &Receiver<Msg>) {
        self.try_connect();
        let mut next_tick = Instant::now();
        loop {
            let wait = next_tick.saturating_duration_since(Instant::now());
            match rx.recv_timeout(wait) {
                Ok(Msg::Put(idx, v)) => self.on_put(idx, &v),
                Ok(Msg::Start(reply)) => {
                    let r = self.start();
                    if r.is_err() {
                        self.acquiring = false;
                    }
                    let _ = reply.send(r);
                }
                Ok(Msg::Stop) => self.stop(),
                Ok(Msg::Shutdown) | Err(RecvTimeoutError::Disconnected) => {
                    self.stop();
                    return;
                }
                Err(RecvTimeoutError::Timeout) => {
                    self.tick();
                    next_tick = Instant::now()
                        + if self.acquiring {
                            TICK_ACQUIRING
                        } else {
                            TICK_IDLE
                        };
                }
            }
        }
    }

    fn status(&self, msg: impl Into<String>) {
        self.base
            .driver
            .status_message
            .set(&self.params, msg.into());
    }

    fn tick(&mut self) {
        if self.cam.is_none() {
            self.try_connect();
            return;
        }
        if !self.acquiring {
            // Frames completed after the stop (held back behind an incomplete one for up to
            // ARFrameRetention) are counted as discarded here.
            self.discard_waiting();
        }
        self.publish_stats();
        // Once a second is enough to notice a camera that went away.
        let due = self
            .last_attempt
            .is_none_or(|t| t.elapsed() >= RETRY || !self.acquiring);
        if !due {
            return;
        }
        self.last_attempt = Some(Instant::now());
        let probe = self.cam.as_ref().map(Camera::payload_size);
        match probe {
            Some(Err(e)) => self.lost(&e.to_string()),
            _ => self.read_temperature(),
        }
    }

    fn lost(&mut self, why: &str) {
        // Dropping the stream closes it: the driver's FrameSource then reports Closed.
        self.stream = None;
        self.cam = None;
        self.acquiring = false;
        self.shared.connected.store(false, Ordering::Release);
        self.a.connect_camera.set(&self.params, 0);
        let lost = format!("camera {} lost ({why})", self.source.describe());
        self.status(format!("{lost}; retrying every second"));
        self.lost = Some(lost);
        self.last_attempt = Some(Instant::now());
    }

    fn try_connect(&mut self) {
        if !self.want_connected || self.last_attempt.is_some_and(|t| t.elapsed() < RETRY) {
            return;
        }
        self.last_attempt = Some(Instant::now());
        match self.source.open() {
            Ok(cam) => {
                self.cam = Some(cam);
                self.lost = None;
                self.shared.connected.store(true, Ordering::Release);
                self.a.connect_camera.set(&self.params, 1);
                self.read_identity();
                // What was put while the camera was away is the user's last word.
                let pending = std::mem::take(&mut self.pending);
                let mut errors = Vec::new();
                for idx in pending {
                    if let Err(e) = self.write(idx) {
                        errors.push(e);
                    }
                }
                let packet = match self.apply_packet_size() {
                    Ok(Some(n)) => format!(" (GigE packets of {n} bytes)"),
                    Ok(None) => String::new(),
                    Err(e) => {
                        errors.push(e);
                        String::new()
                    }
                };
                self.apply_stream_options();
                self.read_back();
                self.status(if errors.is_empty() {
                    format!("connected to {}{packet}", self.source.describe())
                } else {
                    errors.join("; ")
                });
            }
            Err(e) => {
                self.a.connect_camera.set(&self.params, 0);
                let msg = match &self.lost {
                    Some(lost) => format!("{lost}; not back yet: {e}; retrying every second"),
                    None => format!("camera not connected: {e}; retrying every second"),
                };
                if msg != self.last_error {
                    self.status(msg.clone());
                    self.last_error = msg;
                }
            }
        }
    }

    fn read_identity(&self) {
        let Some(cam) = &self.cam else { return };
        let nd = &self.base.array;
        let s = |names: &[&str]| {
            first_available(cam, names)
                .and_then(|n| cam.get_string(n).ok())
                .unwrap_or_default()
        };
        let mut w = vec![
            nd.manufacturer.value(s(&["DeviceVendorName"])),
            nd.model.value(s(&["DeviceModelName"])),
            nd.serial_number
                .value(s(&["DeviceSerialNumber", "DeviceID"])),
            nd.firmware_version
                .value(s(&["DeviceFirmwareVersion", "DeviceVersion"])),
        ];
        let ad = &self.base.driver;
        for (param, max_name, size_name) in [
            (ad.max_size_x, "WidthMax", "Width"),
            (ad.max_size_y, "HeightMax", "Height"),
        ] {
            let max = if cam.is_available(max_name) {
                cam.get_int(max_name).ok()
            } else {
                cam.bounds_int(size_name).ok().map(|(_, hi)| hi)
            };
            if let Some(m) = max {
                w.push(param.value(m));
            }
        }
        self.params.set_many(&w);
    }

    fn read_temperature(&self) {
        let Some(cam) = &self.cam else { return };
        if let Some(n) = first_available(cam, TEMPERATURE) {
            if let Ok(t) = cam.get_float(n) {
                self.base.driver.temperature_actual.set(&self.params, t);
            }
        }
    }

    fn on_put(&mut self, idx: usize, v: &ParamValue) {
        let (a, g) = (self.a, self.g);
        if a.connect_camera.is(idx) {
            let on = v.as_i64().unwrap_or(0) != 0;
            self.want_connected = on;
            if on {
                if self.cam.is_none() {
                    self.last_attempt = None;
                    self.try_connect();
                } else {
                    self.a.connect_camera.set(&self.params, 1);
                }
            } else {
                self.stream = None;
                self.cam = None;
                self.acquiring = false;
                self.shared.connected.store(false, Ordering::Release);
                self.a.connect_camera.set(&self.params, 0);
                self.status("disconnected (ARConnectCamera = 0)");
            }
            return;
        }
        if self.cam.is_none() {
            let _ = self.params.set(idx, v.clone());
            if !self.pending.contains(&idx) {
                self.pending.push(idx);
            }
            // Commands are not kept for later.
            let command = self
                .gc
                .get(idx)
                .is_some_and(|b| b.feature.kind == crate::features::FeatureType::Command);
            if g.trigger_software.is(idx) || a.reset_camera.is(idx) || command {
                self.params.set(idx, 0i64).ok();
                self.status("camera not connected");
                self.pending.retain(|&p| p != idx);
            }
            return;
        }
        if a.reset_camera.is(idx) {
            if v.as_i64().unwrap_or(0) != 0 {
                let r = self.cam.as_ref().map(|c| c.execute("DeviceReset"));
                a.reset_camera.set(&self.params, 0);
                match r {
                    Some(Err(e)) => self.status(e.to_string()),
                    _ => self.lost("DeviceReset executed"),
                }
            }
            return;
        }
        if a.packet_resend_enable.is(idx) || a.packet_timeout.is(idx) || a.frame_retention.is(idx) {
            self.apply_stream_options();
            return;
        }
        if a.packet_size.is(idx) {
            // Aravis sizes a stream's packet bookkeeping when it opens it: a new size needs a
            // new stream, so it is applied only while stopped (and the stream reopened).
            if self.acquiring {
                self.status("ARPacketSize is applied when the acquisition has stopped");
                self.packet_size_pending = true;
            } else {
                self.reapply_packet_size();
            }
            return;
        }
        // A read-back done between this put and now (after an earlier put) may have replaced
        // the value in the store: the put's own value is the one to write.
        let _ = self.params.set(idx, v.clone());
        if self.acquiring && self.restarts_acquisition(idx) {
            self.restart(idx);
            return;
        }
        match self.write(idx) {
            Ok(true) => {
                self.read_back();
                self.status(String::new());
            }
            Ok(false) => {}
            Err(e) => {
                self.read_back();
                self.status(e);
            }
        }
    }

    /// The settings a camera accepts only while stopped: ADGenICam stops, writes and starts
    /// again when one is put during an acquisition.
    fn restarts_acquisition(&self, idx: usize) -> bool {
        let ad = &self.base.driver;
        [
            ad.size_x.index(),
            ad.size_y.index(),
            ad.min_x.index(),
            ad.min_y.index(),
            ad.bin_x.index(),
            ad.bin_y.index(),
            ad.num_images.index(),
            self.g.pixel_format.index(),
        ]
        .contains(&idx)
    }

    /// Stops the acquisition, writes `idx` (then every setting, as a start does) and starts
    /// again; the driver picks the new frames up from [`Shared::restarted`].
    fn restart(&mut self, idx: usize) {
        self.shared.restarting.store(true, Ordering::Release);
        self.stop();
        let written = self.write(idx);
        match self.start() {
            Ok(frames) => {
                *self.shared.restarted.lock() = Some(frames);
                self.shared.restarts.fetch_add(1, Ordering::AcqRel);
                if let Err(e) = written {
                    self.status(format!("acquiring (restarted); {e}"));
                } else {
                    self.status("acquiring (restarted for the new setting)");
                }
            }
            Err(e) => {
                self.acquiring = false;
                // Dropping the stream closes the driver's channel: the acquisition ends.
                self.stream = None;
                self.status(format!("acquisition could not restart: {e}"));
            }
        }
        self.shared.restarting.store(false, Ordering::Release);
    }

    fn menu_entry(&self, record: &str, index: i64) -> Option<String> {
        let (_, entries) = self.menus.iter().find(|(n, _)| *n == record)?;
        entries.get(usize::try_from(index).ok()?).cloned()
    }

    /// Writes parameter `idx` (its value in the store) to the camera. `Ok(false)`: not a
    /// camera setting.
    fn write(&self, idx: usize) -> Result<bool, String> {
        let Some(cam) = &self.cam else {
            return Ok(false);
        };
        if let Some(b) = self.gc.get(idx) {
            self.gc.write(cam, b, &self.params)?;
            return Ok(true);
        }
        let (ad, g) = (&self.base.driver, &self.g);
        let p = &self.params;
        let e = |e: CameraError| e.to_string();
        let missing = |what: &str| format!("the camera has no {what}");
        let int_feature = |name: &str, v: i64| cam.set_int(name, v).map_err(e);
        if ad.size_x.is(idx) {
            int_feature("Width", ad.size_x.get(p))?;
        } else if ad.size_y.is(idx) {
            int_feature("Height", ad.size_y.get(p))?;
        } else if ad.min_x.is(idx) {
            int_feature("OffsetX", ad.min_x.get(p))?;
        } else if ad.min_y.is(idx) {
            int_feature("OffsetY", ad.min_y.get(p))?;
        } else if ad.bin_x.is(idx) {
            int_feature("BinningHorizontal", ad.bin_x.get(p))?;
        } else if ad.bin_y.is(idx) {
            int_feature("BinningVertical", ad.bin_y.get(p))?;
        } else if ad.acquire_time.is(idx) {
            let f = first_available(cam, EXPOSURE).ok_or_else(|| missing("ExposureTime"))?;
            cam.set_float(f, ad.acquire_time.get(p) * 1e6).map_err(e)?;
        } else if ad.acquire_period.is(idx) || g.frame_rate.is(idx) {
            let rate = if g.frame_rate.is(idx) {
                g.frame_rate.get(p)
            } else {
                let period = ad.acquire_period.get(p);
                if period <= 0.0 {
                    return Err("AcquirePeriod must be > 0 (it sets the frame rate)".into());
                }
                1.0 / period
            };
            let f =
                first_available(cam, FRAME_RATE).ok_or_else(|| missing("AcquisitionFrameRate"))?;
            cam.set_float(f, rate).map_err(e)?;
        } else if g.frame_rate_enable.is(idx) {
            if cam.is_available("AcquisitionFrameRateEnable") {
                cam.set_bool("AcquisitionFrameRateEnable", g.frame_rate_enable.get(p))
                    .map_err(e)?;
            }
        } else if ad.gain.is(idx) {
            let f = first_available(cam, GAIN).ok_or_else(|| missing("Gain"))?;
            let v = ad.gain.get(p);
            if f == "Gain" {
                cam.set_float(f, v).map_err(e)?;
            } else {
                cam.set_int(f, v.round() as i64).map_err(e)?;
            }
        } else if ad.image_mode.is(idx) {
            let m = usize::try_from(ad.image_mode.get(p)).unwrap_or(2).min(2);
            cam.set_enum("AcquisitionMode", ACQUISITION_MODES[m])
                .map_err(e)?;
        } else if ad.num_images.is(idx) {
            if cam.is_available("AcquisitionFrameCount") {
                int_feature("AcquisitionFrameCount", ad.num_images.get(p))?;
            }
        } else if ad.trigger_mode.is(idx) {
            let on = ad.trigger_mode.get(p) != 0;
            cam.set_enum("TriggerMode", if on { "On" } else { "Off" })
                .map_err(e)?;
        } else if g.trigger_software.is(idx) {
            if g.trigger_software.get(p) != 0 {
                let r = cam.execute("TriggerSoftware").map_err(e);
                g.trigger_software.set(p, 0);
                r?;
            }
            return Ok(false);
        } else {
            let Some(def) = p.def(idx) else {
                return Ok(false);
            };
            if !crate::params::CAMERA_MENUS.contains(&def.name) {
                return Ok(false);
            }
            let index = p.get_i64(idx);
            match self.menu_entry(def.name, index) {
                Some(entry) => cam.set_enum(def.name, &entry).map_err(e)?,
                // A menu of only N.A.: nothing to choose.
                None => return Ok(false),
            }
        }
        Ok(true)
    }

    /// Every camera setting the port shows, read from the camera into the store.
    fn read_back(&self) {
        let Some(cam) = &self.cam else { return };
        let (ad, g) = (&self.base.driver, &self.g);
        let mut w: Vec<(usize, ParamValue)> = Vec::new();
        let mut int = |param: ndflow_core::handle::Param<ndflow_core::handle::Int>, name: &str| {
            if let Ok(v) = cam.get_int(name) {
                w.push(param.value(v));
            }
        };
        int(ad.size_x, "Width");
        int(ad.size_y, "Height");
        int(ad.min_x, "OffsetX");
        int(ad.min_y, "OffsetY");
        int(ad.bin_x, "BinningHorizontal");
        int(ad.bin_y, "BinningVertical");
        if cam.is_available("AcquisitionFrameCount") {
            int(ad.num_images, "AcquisitionFrameCount");
        }
        if let Some(f) = first_available(cam, EXPOSURE) {
            if let Ok(us) = cam.get_float(f) {
                w.push(ad.acquire_time.value(us / 1e6));
            }
        }
        if let Some(f) = first_available(cam, FRAME_RATE) {
            if let Ok(rate) = cam.get_float(f) {
                w.push(g.frame_rate.value(rate));
                if rate > 0.0 {
                    w.push(ad.acquire_period.value(1.0 / rate));
                }
            }
        }
        if let Ok(b) = cam.get_bool("AcquisitionFrameRateEnable") {
            w.push(g.frame_rate_enable.value(b));
        }
        if let Some(f) = first_available(cam, GAIN) {
            let v = if f == "Gain" {
                cam.get_float(f).ok()
            } else {
                cam.get_int(f).ok().map(|i| i as f64)
            };
            if let Some(v) = v {
                w.push(ad.gain.value(v));
            }
        }
        if let Ok(m) = cam.get_enum("AcquisitionMode") {
            if let Some(i) = ACQUISITION_MODES.iter().position(|x| *x == m) {
                w.push(ad.image_mode.value(i as i64));
            }
        }
        if let Ok(m) = cam.get_enum("TriggerMode") {
            w.push(ad.trigger_mode.value(i64::from(m == "On")));
        }
        for (record, entries) in self.menus.iter() {
            let (Ok(current), Some(idx)) = (cam.get_enum(record), self.params.index(record)) else {
                continue;
            };
            let i = entries.iter().position(|e| *e == current).unwrap_or(0);
            w.push((idx, ParamValue::Int(i as i64)));
        }
        // One write may change others (Width moves OffsetX's maximum, PixelFormat moves
        // PayloadSize): every GC_ feature is read again, as ADGenICam does.
        w.extend(self.gc.read_all(cam));
        self.params.set_many(&w);
    }

    /// Every setting in the store, written to the camera (before AcquisitionStart).
    fn write_all(&self) -> Vec<String> {
        let ad: &DriverParams = &self.base.driver;
        let g = &self.g;
        let mut idxs = vec![
            ad.bin_x.index(),
            ad.bin_y.index(),
            ad.size_x.index(),
            ad.size_y.index(),
            ad.min_x.index(),
            ad.min_y.index(),
            g.pixel_format.index(),
            ad.acquire_time.index(),
            g.frame_rate_enable.index(),
            ad.acquire_period.index(),
            ad.gain.index(),
            ad.image_mode.index(),
            ad.num_images.index(),
            ad.trigger_mode.index(),
        ];
        for name in crate::params::CAMERA_MENUS {
            if let Some(i) = self.params.index(name) {
                if !idxs.contains(&i) {
                    idxs.push(i);
                }
            }
        }
        idxs.into_iter()
            .filter_map(|i| self.write(i).err())
            .collect()
    }

    fn reapply_packet_size(&mut self) {
        self.packet_size_pending = false;
        self.stream = None;
        match self.apply_packet_size() {
            Ok(Some(n)) => self.status(format!("GigE packets of {n} bytes")),
            Ok(None) => {}
            Err(e) => self.status(e),
        }
    }

    /// ARPacketSize to a GigE camera; the size in use, `None` for other cameras.
    fn apply_packet_size(&self) -> Result<Option<u32>, String> {
        let Some(cam) = self.cam.as_ref().filter(|c| c.is_gige()) else {
            return Ok(None);
        };
        let want = u32::try_from(self.a.packet_size.get(&self.params)).unwrap_or(0);
        cam.set_packet_size(want)
            .map(Some)
            .map_err(|e| e.to_string())
    }

    /// Frames waiting in the stream's channel that nobody will take: thrown away and counted.
    fn discard_waiting(&mut self) {
        let Some(s) = &self.stream else { return };
        let mut n = 0u64;
        while s.try_recv().is_some() {
            n += 1;
        }
        if n > 0 {
            self.discarded += n;
            let total = i64::try_from(self.discarded).unwrap_or(i64::MAX);
            self.a.frames_discarded.set(&self.params, total);
        }
    }

    fn apply_stream_options(&self) {
        let Some(s) = &self.stream else { return };
        let (a, p) = (&self.a, &self.params);
        if s.packet_resend().is_none() {
            return; // not GigE
        }
        let us = |v: i64| Duration::from_micros(u64::try_from(v).unwrap_or(0));
        let r = s
            .set_packet_resend(a.packet_resend_enable.get(p) != 0)
            .and_then(|()| s.set_packet_timeout(us(a.packet_timeout.get(p))))
            .and_then(|()| s.set_frame_retention(us(a.frame_retention.get(p))));
        if let Err(e) = r {
            self.status(e.to_string());
        }
    }

    fn publish_stats(&mut self) {
        let Some(s) = &self.stream else { return };
        let st = s.statistics();
        // Loss is said in the log too, at most every LOSS_LOG, with what it adds up to.
        let (lost, (before, at)) = ((st.failures, st.underruns), self.logged_loss);
        if (lost.0 > before.0 || lost.1 > before.1) && at.is_none_or(|t| t.elapsed() >= LOSS_LOG) {
            tracing::warn!(
                "camera {}: frames lost: {} failed (incomplete or timed out, {} packets missing), {} underruns (no free buffer) since the stream opened",
                self.source.describe(),
                st.failures,
                st.missing_packets,
                st.underruns
            );
            self.logged_loss = (lost, Some(Instant::now()));
        }
        let (a, p) = (&self.a, &self.params);
        let i = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        p.set_many(&[
            a.frames_completed.value(st.completed as f64),
            a.frame_failures.value(st.failures as f64),
            a.frame_underruns.value(st.underruns as f64),
            a.missing_packets.value(i(st.missing_packets)),
            a.resent_packets.value(i(st.resent_packets)),
        ]);
    }

    fn start(&mut self) -> StartReply {
        if self.cam.is_none() {
            return Err(format!("camera {} not connected", self.source.describe()));
        }
        if let Some(s) = self.stream.as_mut() {
            if self.acquiring {
                let _ = s.stop();
            }
        }
        let errors = self.write_all();
        self.read_back();
        let payload = match self.cam.as_ref().map(Camera::payload_size) {
            Some(Ok(p)) => p,
            Some(Err(e)) => return Err(e.to_string()),
            None => return Err("camera not connected".into()),
        };
        // The ring's buffers are PayloadSize bytes: a new size or format needs a new ring.
        if self.stream.as_ref().is_some_and(|s| s.payload() != payload) {
            self.stream = None;
        }
        if self.stream.is_none() {
            let Some(cam) = &self.cam else {
                return Err("camera not connected".into());
            };
            let s = Stream::open(
                cam,
                StreamOptions {
                    n_buffers: self.n_buffers,
                },
            )
            .map_err(|e| e.to_string())?;
            self.stream = Some(s);
            self.logged_loss = ((0, 0), None);
            self.apply_stream_options();
        }
        // Frames left from the last acquisition are not this one's.
        self.discard_waiting();
        let Some(s) = self.stream.as_mut() else {
            return Err("no stream".into());
        };
        s.start().map_err(|e| e.to_string())?;
        self.acquiring = true;
        let frames = s.frames();
        self.status(if errors.is_empty() {
            "acquiring".to_string()
        } else {
            format!("acquiring; {}", errors.join("; "))
        });
        self.publish_stats();
        Ok(frames)
    }

    fn stop(&mut self) {
        if !self.acquiring {
            return;
        }
        self.acquiring = false;
        if let Some(s) = self.stream.as_mut() {
            if let Err(e) = s.stop() {
                self.status(e.to_string());
            }
        }
        // A frame on the wire when the camera stopped completes a moment later, and frames
        // behind an incomplete one wait up to ARFrameRetention (later ones: the next tick).
        let retention = u64::try_from(self.a.frame_retention.get(&self.params)).unwrap_or(0);
        std::thread::sleep(STRAGGLERS.min(Duration::from_micros(retention)) + STRAGGLERS / 10);
        self.discard_waiting();
        self.publish_stats();
        if self.packet_size_pending {
            self.reapply_packet_size();
        }
    }
}
