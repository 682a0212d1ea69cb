//! The EIGER driver: Acquire arms the detector over SIMPLON, triggers it as TriggerMode
//! says, receives the series over Stream v1 or v2 and disarms at its end; the detector times
//! the frames, so the acquisition thread only hands on what arrives.
//!
//! Addresses (ADEiger's): every frame goes to address 0; a series of several channels
//! (Stream v2: `threshold_1`, `threshold_2`, `difference`) sends channel n (0-based, in the
//! series' channel order) also to address n + 1, so a plugin with `NDArrayAddress = 2` takes
//! the second channel only. One channel (Stream v1, or v2 with one threshold): address 1.
//!
//! Threads: the receive thread (ZeroMQ, headers decoded, pixels untouched), the decode
//! workers (decompression or pass-through copies, results in arrival order), a trigger
//! thread while internal triggers run, the control thread (settings and status over REST),
//! and the port's acquisition thread running [`Driver::acquire`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ndflow_core::{AttrValue, EpicsTimeStamp, NDArray, NDAttribute, ParamDef, ParamStore, Pool};
use ndflow_runtime::port_params::{bind, driver_layout, DriverBase};
use ndflow_runtime::{ConnectionProbe, Driver, DriverError, PutHandler};
use serde_json::{json, Value};

use crate::control::Control;
use crate::decode::{make_array, MakeError, Ordered, Output};
use crate::params::{Eiger2Params, EigerBaseParams, Family};
use crate::receiver::{Incoming, StreamReceiver, StreamVersion};
use crate::series::Series;
use crate::simplon::{Simplon, Subsystem};
use crate::stream::{Event, Image, MetaValue, Start};

/// Where the detector is, from the port's constructor keys.
#[derive(Debug, Clone)]
pub struct Endpoints {
    /// SIMPLON REST "host[:port]".
    pub rest: String,
    /// The host part, for the streams.
    pub host: String,
    pub stream_port: u16,
    pub stream2_port: u16,
    /// Decode worker threads.
    pub workers: usize,
}

/// How long one `acquire` call waits for something to happen before letting the runtime
/// look at Acquire.
const POLL: Duration = Duration::from_millis(50);
/// Frames being decoded at once, per worker: enough to keep every worker busy.
const IN_FLIGHT_PER_WORKER: u64 = 4;
/// Events handled per `acquire` call before returning, so that a flood of bad messages
/// cannot keep the acquisition thread from seeing Stop.
const EVENT_BUDGET: usize = 64;
/// How often the stream counters are published while frames flow.
const COUNTER_PERIOD: Duration = Duration::from_millis(100);
/// REST timeout for ordinary requests.
const REST_TIMEOUT: Duration = Duration::from_secs(5);
/// Addresses the port publishes on, as ADEiger's but for its address 10 (the monitor image,
/// not served here): every frame on 0, and the image's channel n (0-based, in the series'
/// channel order: `threshold_1`, `threshold_2`, `difference`, …) also on n + 1.
pub const ADDRESSES: usize = 10;
/// After the internal triggers return (the detector says the series is taken), how long
/// to wait for its last images before disarming.
const TAIL_GRACE: Duration = Duration::from_secs(3);
/// After disarming, how long to wait for the end message.
const END_GRACE: Duration = Duration::from_secs(3);

/// SIMPLON's trigger_mode for each TriggerMode menu entry (Continuous is an internal series
/// triggered until Stop).
const TRIGGER_MODES: [&str; 6] = ["ints", "inte", "exts", "exte", "ints", "extg"];
const CONTINUOUS: i64 = 4;
/// ntrigger armed for Continuous mode: Stop ends it long before.
const CONTINUOUS_TRIGGERS: i64 = 1_000_000;

/// One acquisition in progress.
struct Run {
    series: Series,
    output: Output,
    ts_source: bool,
    /// NDAttributes from the start message, attached to every frame of the series.
    attrs: Arc<Vec<NDAttribute>>,
    triggers: Option<JoinHandle<Result<(), String>>>,
    stop_triggers: Arc<AtomicBool>,
    triggers_done_at: Option<Instant>,
    disarmed_at: Option<Instant>,
    published: (u64, u64, u64, u64, u64),
    published_at: Instant,
}

pub struct EigerDriver {
    family: Family,
    ends: Endpoints,
    base: DriverBase,
    p: EigerBaseParams,
    p2: Option<Eiger2Params>,
    simplon: Simplon,
    /// Started with the first acquisition (a port built only to list its parameters has none).
    /// Each result carries the address its frame also goes to (channel n: n + 1).
    decoder: Option<Ordered<(usize, Result<NDArray, MakeError>)>>,
    /// The address besides 0 of the frame `acquire` returned last ([`Driver::also_on`]).
    last_address: Option<usize>,
    control: Option<Control>,
    /// The stream socket, connected from the first acquisition on and kept (as ADEiger
    /// keeps it while DataSource is Stream): a PUSH peer that comes and goes per series
    /// races the series header, and a PUSH detector hands messages to whoever is connected.
    rx: Option<(StreamVersion, StreamReceiver)>,
    run: Option<Run>,
    /// The DataType of the last frame, shown in DataType_RBV.
    last_type: Option<ndflow_core::DataType>,
}

fn other(e: impl std::fmt::Display) -> DriverError {
    DriverError::Other(e.to_string())
}

impl EigerDriver {
    pub fn new(family: Family, ends: Endpoints) -> Result<EigerDriver, String> {
        let layout = driver_layout(family.table());
        let simplon = Simplon::new(&ends.rest, REST_TIMEOUT).map_err(|e| e.to_string())?;
        Ok(EigerDriver {
            family,
            base: DriverBase::of(&layout),
            p: bind(&layout, EigerBaseParams::bind),
            p2: Eiger2Params::bind(&layout).ok(),
            ends,
            simplon,
            decoder: None,
            last_address: None,
            control: None,
            rx: None,
            run: None,
            last_type: None,
        })
    }

    fn stream_version(&self, params: &ParamStore) -> StreamVersion {
        match self.p2 {
            Some(p2) if p2.stream_version.get(params) == 1 => StreamVersion::V2,
            _ => StreamVersion::V1,
        }
    }

    /// The menu string of enum parameter `idx`, lower-cased (SIMPLON's spelling).
    fn menu_str(params: &ParamStore, idx: usize) -> String {
        let v = params.get_i64(idx);
        params
            .def(idx)
            .and_then(|d| d.choices(false))
            .and_then(|c| usize::try_from(v).ok().and_then(|i| c.get(i)))
            .map(|s| s.to_ascii_lowercase())
            .unwrap_or_default()
    }

    /// The settings that define the series, sent before every arm so that the detector
    /// runs what the PVs show even if a write was missed while it was unreachable.
    fn configure(&self, params: &ParamStore) -> Result<(), DriverError> {
        let (ad, p) = (&self.base.driver, &self.p);
        let mode = ad.trigger_mode.get(params);
        let trigger_mode = usize::try_from(mode)
            .ok()
            .and_then(|m| TRIGGER_MODES.get(m))
            .ok_or_else(|| other(format!("TriggerMode {mode} is not a mode")))?;
        let ntrigger = if mode == CONTINUOUS {
            CONTINUOUS_TRIGGERS
        } else {
            p.num_triggers.get(params).max(1)
        };
        let det = [
            ("trigger_mode", json!(trigger_mode)),
            ("count_time", json!(ad.acquire_time.get(params))),
            ("frame_time", json!(ad.acquire_period.get(params))),
            // Enable modes take one image per trigger (ADEiger sends nimages = 1 for them).
            (
                "nimages",
                json!(if matches!(mode, 1 | 3) {
                    1
                } else {
                    ad.num_images.get(params).max(1)
                }),
            ),
            ("ntrigger", json!(ntrigger)),
        ];
        for (key, value) in det {
            self.simplon
                .put_config(Subsystem::Detector, key, value)
                .map_err(other)?;
        }
        let detail = Self::menu_str(params, p.stream_hdr_detail.index());
        let mut stream = vec![("mode", json!("enabled")), ("header_detail", json!(detail))];
        if self.family != Family::Eiger1 {
            let format = match self.stream_version(params) {
                StreamVersion::V1 => "legacy",
                StreamVersion::V2 => "cbor",
            };
            stream.push(("format", json!(format)));
        }
        for (key, value) in stream {
            self.simplon
                .put_config(Subsystem::Stream, key, value)
                .map_err(other)?;
        }
        Ok(())
    }

    /// Images the armed series will make (`None`: Continuous, until Stop).
    fn expected(&self, params: &ParamStore) -> Option<u64> {
        let ad = &self.base.driver;
        let mode = ad.trigger_mode.get(params);
        let triggers = u64::try_from(self.p.num_triggers.get(params).max(1)).unwrap_or(1);
        let images = u64::try_from(ad.num_images.get(params).max(1)).unwrap_or(1);
        match mode {
            CONTINUOUS => None,
            // Enable modes: one image per trigger.
            1 | 3 => Some(triggers),
            _ => Some(images * triggers),
        }
    }

    /// Starts the internal triggers on a thread of their own (a trigger call returns only
    /// when its images are taken).
    fn start_triggers(
        &self,
        params: &ParamStore,
        stop: Arc<AtomicBool>,
    ) -> Option<JoinHandle<Result<(), String>>> {
        let ad = &self.base.driver;
        let mode = ad.trigger_mode.get(params);
        if !matches!(mode, 0 | 1 | CONTINUOUS) || self.p.manual_trigger.get(params) {
            return None;
        }
        let count = if mode == CONTINUOUS {
            CONTINUOUS_TRIGGERS
        } else {
            self.p.num_triggers.get(params).max(1)
        };
        let exposure = ad.acquire_time.get(params).max(0.0);
        let images = ad.num_images.get(params).max(1) as f64;
        let period = ad.acquire_period.get(params).max(exposure);
        // A trigger's series takes images × period; allow generously for the detector.
        let timeout = Duration::from_secs_f64((images * period * 2.0 + 30.0).min(86_400.0));
        let body = (mode == 1).then(|| json!({ "value": exposure }));
        let simplon = self.simplon.clone();
        std::thread::Builder::new()
            .name("ndflow-eiger-trigger".into())
            .spawn(move || {
                for _ in 0..count {
                    if stop.load(Ordering::Acquire) {
                        return Ok(());
                    }
                    simplon
                        .command_with_timeout(Subsystem::Detector, "trigger", body.clone(), timeout)
                        .map_err(|e| e.to_string())?;
                }
                Ok(())
            })
            .ok()
    }

    fn start_attrs(start: &Start) -> Vec<NDAttribute> {
        let mut out = Vec::with_capacity(start.meta.len() + 1);
        for (name, v) in &start.meta {
            let value = match v {
                MetaValue::Int(i) => AttrValue::Int64(*i),
                MetaValue::Float(f) => AttrValue::Float64(*f),
                MetaValue::Bool(b) => AttrValue::Int32(i32::from(*b)),
                MetaValue::Text(t) => AttrValue::String(t.clone()),
            };
            out.push(NDAttribute::new(name.clone(), "EIGER series header", value));
        }
        if let Some(u) = &start.series_unique_id {
            out.push(NDAttribute::new(
                "series_unique_id",
                "EIGER series unique id",
                AttrValue::String(u.clone()),
            ));
        }
        out
    }

    /// The detector's time of an image: series_date + start_time (StreamAsTSSource).
    fn detector_time(img: &Image) -> Option<EpicsTimeStamp> {
        const POSIX_TO_EPICS: i128 = 631_152_000;
        let date = ndflow_core::calendar::parse_rfc3339_nanos(img.series_date.as_deref()?)?;
        let ns = date + i128::try_from(img.start_time?.as_nanos()?).ok()?;
        let secs = ns.div_euclid(1_000_000_000) - POSIX_TO_EPICS;
        Some(EpicsTimeStamp {
            sec: u32::try_from(secs).ok()?,
            nsec: u32::try_from(ns.rem_euclid(1_000_000_000)).ok()?,
        })
    }

    /// Queues one image's frames (one per channel) for the decode workers.
    fn submit_image(&mut self, img: Image, pool: &Pool) {
        let Some(run) = self.run.as_ref() else {
            return;
        };
        let (ts_source, stamp) = (run.ts_source, Self::detector_time(&img));
        let start = run.series.start.as_ref();
        for (n, frame) in img.frames.into_iter().enumerate() {
            let mut attrs: Vec<NDAttribute> = Vec::with_capacity(run.attrs.len() + 2);
            attrs.extend(run.attrs.iter().cloned());
            if !frame.channel.is_empty() {
                let number = frame
                    .channel
                    .strip_prefix("threshold_")
                    .and_then(|t| t.parse::<i32>().ok())
                    .unwrap_or(n as i32 + 1);
                attrs.push(NDAttribute::new(
                    "ThresholdNumber",
                    "Threshold number",
                    AttrValue::Int32(number),
                ));
                let energy = start.and_then(|s| {
                    s.threshold_energy
                        .iter()
                        .find(|(c, _)| *c == frame.channel)
                        .map(|(_, e)| *e)
                });
                if let Some(e) = energy {
                    attrs.push(NDAttribute::new(
                        "ThresholdEnergy",
                        "Threshold energy (eV)",
                        AttrValue::Float64(e),
                    ));
                }
            }
            let (pool, output) = (pool.clone(), run.output);
            let Some(decoder) = self.decoder.as_mut() else {
                return;
            };
            // ADEiger: channel n of the image also on address n + 1 (one channel: 1).
            let address = n + 1;
            decoder.submit(move || {
                let made = make_array(&frame, output, &pool).map(|mut a| {
                    for attr in attrs {
                        a.set_attribute(attr);
                    }
                    match stamp {
                        Some(ts) if ts_source => {
                            a.epics_ts = ts;
                            a.time_stamp = ts.as_f64();
                        }
                        // The detector's clock was asked for but this image has no date.
                        _ if ts_source => a.stamp_now(),
                        _ => {}
                    }
                    a
                });
                (address, made)
            });
        }
    }

    fn handle(&mut self, inc: Incoming, params: &ParamStore, pool: &Pool) {
        let Some(run) = self.run.as_mut() else {
            return;
        };
        match inc {
            Incoming::Connected => self.p.stream_connection.set(params, 1),
            Incoming::ConnectFailed(why) => {
                self.p.stream_connection.set(params, 0);
                self.p.error.set(params, why);
            }
            Incoming::Event(Event::Start(s)) => {
                run.series.on_start(s);
                if let Some(s) = &run.series.start {
                    run.attrs = Arc::new(Self::start_attrs(s));
                }
            }
            Incoming::Event(Event::Image(img)) => {
                if run.series.on_image(&img) {
                    self.submit_image(img, pool);
                }
            }
            Incoming::Event(Event::End { series_id, .. }) => run.series.on_end(series_id),
            Incoming::Invalid(e) => {
                run.series.on_invalid();
                self.p.error.set(params, format!("stream: {e}"));
            }
        }
    }

    fn publish_counters(&mut self, params: &ParamStore) {
        let Some(run) = self.run.as_mut() else {
            return;
        };
        let s = &run.series;
        let now = (
            s.expected.unwrap_or(0),
            s.received,
            s.lost,
            s.invalid,
            s.foreign,
        );
        if now != run.published {
            run.published = now;
            run.published_at = Instant::now();
            let p = &self.p;
            let i = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
            params.set_many(&[
                p.stream_expected.value(i(now.0)),
                p.stream_received.value(i(now.1)),
                p.stream_lost.value(i(now.2)),
                p.stream_invalid.value(i(now.3)),
                p.stream_foreign.value(i(now.4)),
            ]);
        }
    }

    /// Disarms once (ends the series on the detector; the end message follows).
    fn disarm(&mut self, params: &ParamStore) {
        let Some(run) = self.run.as_mut() else {
            return;
        };
        if run.disarmed_at.is_some() {
            return;
        }
        run.disarmed_at = Some(Instant::now());
        if let Err(e) = self.simplon.command(Subsystem::Detector, "disarm", None) {
            self.p.error.set(params, e.to_string());
        }
        self.p.armed.set(params, 0);
    }

    /// Whether the series is over; disarms when the detector is done with it.
    fn finished(&mut self, params: &ParamStore) -> Result<bool, DriverError> {
        let idle = self.in_flight() == 0;
        let Some(run) = self.run.as_mut() else {
            return Ok(true);
        };
        if let Some(t) = run.triggers.as_ref().filter(|t| t.is_finished()) {
            let _ = t;
            if let Some(Ok(Err(e))) = run.triggers.take().map(JoinHandle::join) {
                return Err(other(format!("trigger failed: {e}")));
            }
            run.triggers_done_at = Some(Instant::now());
        }
        if run.series.complete() && idle {
            self.disarm(params);
            return Ok(true);
        }
        let tail_over = run
            .triggers_done_at
            .is_some_and(|t| t.elapsed() > TAIL_GRACE);
        if tail_over && run.disarmed_at.is_none() {
            self.disarm(params);
        }
        let Some(run) = self.run.as_ref() else {
            return Ok(true);
        };
        Ok(idle && run.disarmed_at.is_some_and(|t| t.elapsed() > END_GRACE))
    }
}

impl Driver for EigerDriver {
    fn driver_type(&self) -> &'static str {
        "eigerDetector"
    }

    fn params(&self) -> &'static [ParamDef] {
        self.family.table()
    }

    fn init(&mut self, params: &ParamStore) -> Result<(), DriverError> {
        let (nd, ad) = (&self.base.array, &self.base.driver);
        let model = match self.family {
            Family::Eiger1 => "EIGER",
            Family::Eiger2 => "EIGER2",
            Family::Pilatus4 => "PILATUS4",
        };
        params.set_many(&[
            nd.manufacturer.value("DECTRIS".into()),
            nd.model.value(model.into()),
            ad.acquire_time.value(0.1),
            ad.acquire_period.value(0.1),
            ad.image_mode.value(1),
        ]);
        Ok(())
    }

    fn put_handler(&mut self, params: &Arc<ParamStore>) -> Option<PutHandler> {
        let control = Control::start(self.simplon.clone(), self.family, params.clone()).ok()?;
        let handler = control.put_handler();
        self.control = Some(control);
        Some(handler)
    }

    fn connection(&self) -> Option<ConnectionProbe> {
        let reachable = self.control.as_ref()?.reachable();
        Some(Arc::new(move || reachable.load(Ordering::Acquire)))
    }

    fn start(&mut self, params: &ParamStore) -> Result<(), DriverError> {
        if self.p.data_source.get(params) != 2 {
            return Err(other(
                "DataSource must be Stream: ndflow takes the frames from the detector's stream",
            ));
        }
        if self.decoder.is_none() {
            let d = Ordered::new(self.ends.workers)
                .map_err(|e| other(format!("cannot start the decode workers: {e}")))?;
            self.decoder = Some(d);
        }
        // Results of an earlier, aborted series are not this one's.
        while self.next_done(Duration::ZERO).is_some() {}
        let version = self.stream_version(params);
        let port = match version {
            StreamVersion::V1 => self.ends.stream_port,
            StreamVersion::V2 => self.ends.stream2_port,
        };
        self.configure(params)?;
        let stale = self.connect_stream(version, port, params)?;
        let id = self
            .simplon
            .command_with_timeout(Subsystem::Detector, "arm", None, Duration::from_secs(60))
            .map_err(|e| other(format!("cannot arm: {e}")))?;
        let expected = self.expected(params);
        let ts_source = self.p2.is_some_and(|p2| p2.stream_as_ts_source.get(params));
        params.set_many(&[
            self.p
                .sequence_id
                .value(id.unwrap_or(0).clamp(0, i64::from(i32::MAX))),
            self.p.armed.value(1),
            self.p.error.value(String::new()),
        ]);
        let stop_triggers = Arc::new(AtomicBool::new(false));
        let mut series = Series::new(expected);
        series.foreign = stale;
        let mut run = Run {
            series,
            output: Output {
                decompress: self.p.stream_decompress.get(params),
                signed: self.p.signed_data.get(params) == 1,
            },
            ts_source,
            attrs: Arc::new(Vec::new()),
            triggers: None,
            stop_triggers: stop_triggers.clone(),
            triggers_done_at: None,
            disarmed_at: None,
            published: (u64::MAX, 0, 0, 0, 0),
            published_at: Instant::now(),
        };
        run.triggers = self.start_triggers(params, stop_triggers);
        self.run = Some(run);
        if let Some(c) = &self.control {
            c.set_armed(true);
        }
        self.publish_counters(params);
        Ok(())
    }

    fn acquire(&mut self, params: &ParamStore, pool: &Pool) -> Result<NDArray, DriverError> {
        let workers = self.ends.workers.max(1) as u64;
        for _ in 0..EVENT_BUDGET {
            if let Some(res) = self.next_done(Duration::ZERO) {
                return self.deliver(res, params);
            }
            if self.run.is_none() {
                return Err(DriverError::Finished);
            }
            if self.in_flight() >= workers * IN_FLIGHT_PER_WORKER {
                break;
            }
            let wait = if self.in_flight() > 0 {
                Duration::ZERO
            } else {
                POLL
            };
            let Some((_, rx)) = self.rx.as_ref() else {
                return Err(DriverError::Finished);
            };
            match rx.recv(wait) {
                Some(inc) => self.handle(inc, params, pool),
                None => break,
            }
        }
        if self.in_flight() > 0 {
            if let Some(res) = self.next_done(POLL) {
                return self.deliver(res, params);
            }
        }
        self.publish_counters(params);
        if self.finished(params)? {
            return Err(DriverError::Finished);
        }
        Err(DriverError::NoFrame)
    }

    fn stop(&mut self, params: &ParamStore) {
        let complete = self.run.as_ref().is_some_and(|r| r.series.complete());
        if let Some(run) = self.run.as_ref() {
            run.stop_triggers.store(true, Ordering::Release);
            if run.disarmed_at.is_none() && !complete {
                // Stopped mid-series: abort what the detector is doing (this also ends a
                // trigger call in progress), then disarm.
                if let Err(e) = self.simplon.command(Subsystem::Detector, "abort", None) {
                    self.p.error.set(params, e.to_string());
                }
            }
        }
        self.disarm(params);
        if let Some(run) = self.run.as_mut() {
            if !run.series.ended() {
                run.series.settle();
            }
        }
        self.publish_counters(params);
        self.run = None;
        if let Some(c) = &self.control {
            c.set_armed(false);
            c.poll_now();
        }
    }

    fn paces_itself(&self) -> bool {
        true
    }

    fn addresses(&self) -> usize {
        ADDRESSES
    }

    fn also_on(&self, _frame: &NDArray) -> Option<usize> {
        self.last_address
    }

    fn keeps_timestamp(&self) -> bool {
        self.run.as_ref().is_some_and(|r| r.ts_source)
    }
}

impl EigerDriver {
    /// Connects the stream socket for `version` (once; again when the version changes) and
    /// waits for the connection before the arm sends the series header. Returns how many
    /// messages were waiting from before this series (discarded, counted as foreign).
    fn connect_stream(
        &mut self,
        version: StreamVersion,
        port: u16,
        params: &ParamStore,
    ) -> Result<u64, DriverError> {
        if self.rx.as_ref().is_none_or(|(v, _)| *v != version) {
            self.rx = None; // the other version's socket goes first
            let rx = StreamReceiver::start(&self.ends.host, port, version)
                .map_err(|e| other(format!("cannot start the stream receiver: {e}")))?;
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                match rx.recv(POLL) {
                    Some(Incoming::Connected) => break,
                    Some(Incoming::ConnectFailed(why)) if Instant::now() > deadline => {
                        return Err(other(why));
                    }
                    _ if Instant::now() > deadline => {
                        return Err(other("the stream did not connect in 5 s"));
                    }
                    _ => {}
                }
            }
            self.p.stream_connection.set(params, 1);
            self.rx = Some((version, rx));
        }
        let mut stale = 0;
        if let Some((_, rx)) = &self.rx {
            while let Some(inc) = rx.try_recv() {
                match inc {
                    Incoming::Event(_) | Incoming::Invalid(_) => stale += 1,
                    Incoming::Connected => self.p.stream_connection.set(params, 1),
                    Incoming::ConnectFailed(_) => self.p.stream_connection.set(params, 0),
                }
            }
        }
        Ok(stale)
    }

    fn in_flight(&self) -> u64 {
        self.decoder.as_ref().map_or(0, Ordered::in_flight)
    }

    fn next_done(&mut self, timeout: Duration) -> Option<(usize, Result<NDArray, MakeError>)> {
        self.decoder.as_mut()?.next(timeout)
    }

    fn deliver(
        &mut self,
        (address, res): (usize, Result<NDArray, MakeError>),
        params: &ParamStore,
    ) -> Result<NDArray, DriverError> {
        self.last_address = res.is_ok().then_some(address);
        match res {
            Ok(a) => {
                // While frames flow, the counters follow at the pace the runtime publishes.
                if self
                    .run
                    .as_ref()
                    .is_some_and(|r| r.published_at.elapsed() >= COUNTER_PERIOD)
                {
                    self.publish_counters(params);
                }
                if self.last_type != Some(a.data_type) {
                    self.last_type = Some(a.data_type);
                    let _ = params.set_by_name("DataType", a.data_type as i64);
                }
                Ok(a)
            }
            Err(MakeError::Pool(e)) => Err(DriverError::Core(e)),
            Err(MakeError::Stream(e)) => {
                if let Some(run) = self.run.as_mut() {
                    run.series.on_invalid();
                }
                self.p.error.set(params, format!("frame dropped: {e}"));
                self.publish_counters(params);
                Err(DriverError::NoFrame)
            }
        }
    }
}

/// A JSON number or bool as f64 (SIMPLON readbacks).
pub(crate) fn json_f64(v: &Value) -> Option<f64> {
    v.as_f64().or_else(|| v.as_bool().map(f64::from))
}
