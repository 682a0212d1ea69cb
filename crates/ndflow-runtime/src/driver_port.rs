//! A driver port: the acquisition thread with ADDriver's behaviour:
//! ImageMode Single/Multiple/Continuous, exposure and period timing, DetectorState,
//! uniqueId and timestamps, ArrayCallbacks, WaitForPlugins, and the pool.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ndflow_core::{CoreError, NDArray, ParamStore, ParamValue, Pool};
use parking_lot::{Condvar, Mutex};

use crate::attr_file::PortAttributes;
use crate::driver::{ConnectionProbe, Driver, DriverError, PutHandler};
use crate::meta::FrameMeta;
use crate::plugin_port::Fanout;
use crate::port_params::{ArrayBaseParams, DetectorState, DriverBase};

/// Frames held by plugins downstream (for WaitForPlugins and NumQueuedArrays).
pub(crate) type BusyProbe = Arc<dyn Fn() -> u64 + Send + Sync>;
/// Publishes every port's counters to its parameters now (outside the graph's 100 ms round).
pub(crate) type PublishAll = Arc<dyn Fn() + Send + Sync>;

#[derive(Default)]
struct Control {
    acquire: bool,
    shutdown: bool,
}

pub struct DriverPort {
    pub name: String,
    pub params: Arc<ParamStore>,
    pub pool: Pool,
    pub(crate) fanout: Fanout,
    ctl: Mutex<Control>,
    cv: Condvar,
    array_counter: AtomicI64,
    images_counter: AtomicI64,
    dropped: AtomicU64,
    state: AtomicU8,
    /// True from Acquire = 1 until the acquisition (and WaitForPlugins) is complete.
    busy: AtomicBool,
    meta: Mutex<FrameMeta>,
    /// The handles of NDArrayBase's and ADDriver's parameters in this port's store.
    base: DriverBase,
    rate: Mutex<(Instant, i64)>,
    thread: Mutex<Option<JoinHandle<()>>>,
    busy_probe: BusyProbe,
    publish_all: PublishAll,
    /// NDAttributesFile: attached to every frame this driver publishes.
    pub(crate) attrs: PortAttributes,
    /// The driver's own reaction to external writes (see [`Driver::put_handler`]).
    put_handler: Option<PutHandler>,
    /// Whether the detector is reachable ([`Driver::connection`]).
    connection: Option<ConnectionProbe>,
    /// Addresses this port publishes on ([`Driver::addresses`]).
    addresses: usize,
    /// Frames published on an address besides 0 that is not one of the port's (a driver's
    /// mistake; each still went to address 0).
    bad_address: AtomicU64,
    /// The queue of the thread that makes ShutterControl's moves ([`Self::move_shutter`]).
    shutter_moves: Mutex<Option<std::sync::mpsc::Sender<bool>>>,
    /// Held while the shutter moves.
    shutter_moving: Mutex<()>,
}

impl DriverPort {
    pub(crate) fn start(
        name: &str,
        mut driver: Box<dyn Driver>,
        params: Arc<ParamStore>,
        busy_probe: BusyProbe,
        publish_all: PublishAll,
    ) -> Result<Arc<DriverPort>, DriverError> {
        let base = DriverBase::of(params.layout());
        base.array.port_name.set(&params, name.to_string());
        // What an operator reads first on a fresh IOC: which ndflow runs it (a driver may
        // replace it at once with its own news).
        base.driver
            .status_message
            .set(&params, format!("ndflow {}", env!("CARGO_PKG_VERSION")));
        driver.init(&params)?;
        let put_handler = driver.put_handler(&params);
        let connection = driver.connection();
        let addresses = driver.addresses().max(1);
        let max_mb = base.array.pool_max_mem.get(&params);
        let pool = Pool::new((max_mb * 1e6) as usize);
        let port = Arc::new(DriverPort {
            name: name.to_string(),
            base,
            params,
            pool,
            fanout: Fanout::default(),
            ctl: Mutex::new(Control::default()),
            cv: Condvar::new(),
            array_counter: AtomicI64::new(0),
            images_counter: AtomicI64::new(0),
            dropped: AtomicU64::new(0),
            state: AtomicU8::new(DetectorState::Idle as u8),
            busy: AtomicBool::new(false),
            meta: Mutex::new(FrameMeta::default()),
            rate: Mutex::new((Instant::now(), 0)),
            thread: Mutex::new(None),
            busy_probe,
            publish_all,
            attrs: PortAttributes::default(),
            put_handler,
            connection,
            addresses,
            bad_address: AtomicU64::new(0),
            shutter_moves: Mutex::new(None),
            shutter_moving: Mutex::new(()),
        });
        let p = port.clone();
        let handle = std::thread::Builder::new()
            .name(format!("ndflow-driver-{name}"))
            .spawn(move || p.thread_main(driver))
            .map_err(|e| DriverError::Other(format!("cannot start the acquisition thread: {e}")))?;
        *port.thread.lock() = Some(handle);
        Ok(port)
    }

    /// True while an acquisition is running (including the wait for plugins).
    pub fn is_busy(&self) -> bool {
        self.busy.load(Ordering::Acquire) || self.ctl.lock().acquire
    }

    /// Blocks until no acquisition is running (true), or for at most `timeout` (false).
    pub fn wait_done(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut c = self.ctl.lock();
        while self.busy.load(Ordering::Acquire) || c.acquire {
            if self.cv.wait_until(&mut c, deadline).timed_out() {
                return !(self.busy.load(Ordering::Acquire) || c.acquire);
            }
        }
        true
    }

    pub fn array_counter(&self) -> i64 {
        self.array_counter.load(Ordering::Acquire)
    }

    /// Frames dropped at the source because the pool was exhausted.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Acquire)
    }

    /// The handles of NDArrayBase's parameters in this port's store.
    pub fn array_base(&self) -> &ArrayBaseParams {
        &self.base.array
    }

    pub fn subscriber_names(&self) -> Vec<String> {
        self.fanout.subscriber_names()
    }

    /// How many addresses this port publishes on ([`Driver::addresses`]).
    pub fn addresses(&self) -> usize {
        self.addresses
    }

    /// Frames a driver asked to publish on an address the port does not have (each went to
    /// address 0 only).
    pub fn bad_address_frames(&self) -> u64 {
        self.bad_address.load(Ordering::Acquire)
    }

    pub(crate) fn on_put(self: &Arc<Self>, idx: usize, value: &ParamValue) {
        let (a, d, p) = (&self.base.array, &self.base.driver, &*self.params);
        let v = value.as_f64().unwrap_or(0.0);
        if let Some(h) = &self.put_handler {
            h(idx, value);
        }
        if a.acquire.is(idx) {
            let mut c = self.ctl.lock();
            c.acquire = v != 0.0;
            if c.acquire {
                self.busy.store(true, Ordering::Release);
            }
            self.cv.notify_all();
        } else if a.array_counter.is(idx) {
            self.array_counter.store(v as i64, Ordering::Release);
        } else if d.shutter_control.is(idx) {
            if let Err(e) = self.move_shutter(v != 0.0) {
                d.status_message
                    .set(p, format!("cannot move the shutter: {e}"));
            }
        } else if a.pool_max_mem.is(idx) {
            self.pool.set_max_mem((v.max(0.0) * 1e6) as usize);
        } else if a.empty_free_list.is(idx) && v != 0.0 {
            self.pool.empty_free_list();
            a.empty_free_list.set(p, 0);
        } else if a.pre_alloc_buffers.is(idx) && v != 0.0 {
            let n = a.num_pre_alloc_buffers.get(p).max(0) as usize;
            let bytes = a.array_size.get(p).max(0) as usize;
            if let Err(e) = self.pool.preallocate(n, bytes) {
                d.status_message.set(p, e.to_string());
            }
            a.pre_alloc_buffers.set(p, 0);
        }
        self.publish(false);
    }

    /// A move by hand (ShutterControl). It happens in the background, as its delays must not
    /// hold the put, on one thread that makes the moves in the order they were put: a close
    /// and an open in quick succession end open, and each move's status follows its control.
    fn move_shutter(self: &Arc<Self>, open: bool) -> Result<(), String> {
        let mut moves = self.shutter_moves.lock();
        if let Some(tx) = moves.as_ref() {
            if tx.send(open).is_ok() {
                return Ok(());
            }
        }
        let (tx, rx) = std::sync::mpsc::channel::<bool>();
        // Weak: the thread ends with the port (its sender is the port's).
        let port = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("ndflow-shutter".into())
            .spawn(move || {
                for open in rx {
                    match port.upgrade() {
                        Some(port) => port.set_shutter(open),
                        None => break,
                    }
                }
            })
            .map_err(|e| e.to_string())?;
        tx.send(open)
            .map_err(|_| "the shutter thread has stopped".to_string())?;
        *moves = Some(tx);
        Ok(())
    }

    /// ADDriver's setShutter: with ShutterMode EPICS PV or Detector output, opens (closes) the
    /// simulated shutter and waits ShutterOpenDelay (ShutterCloseDelay) for it to move.
    fn set_shutter(&self, open: bool) {
        // One move at a time (the acquisition's and those by hand): each status follows its
        // own control.
        let _moving = self.shutter_moving.lock();
        let (d, p) = (&self.base.driver, &*self.params);
        let mode = d.shutter_mode.get(p);
        if mode == 0 {
            return;
        }
        if mode == 1 {
            d.shutter_control_epics.set(p, open as i64);
        }
        let delay = if open {
            d.shutter_open_delay.get(p)
        } else {
            d.shutter_close_delay.get(p)
        };
        if delay > 0.0 {
            std::thread::sleep(Duration::from_secs_f64(delay.min(60.0)));
        }
        d.shutter_status.set(p, open as i64);
        if mode == 1 {
            d.shutter_status_epics.set(p, open as i64);
        }
    }

    fn set_state(&self, s: DetectorState) {
        self.state.store(s as u8, Ordering::Release);
    }

    /// Waits up to `d`; returns false if acquisition was stopped meanwhile.
    fn wait_running(&self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        let mut c = self.ctl.lock();
        while c.acquire && !c.shutdown {
            if self.cv.wait_until(&mut c, deadline).timed_out() {
                break;
            }
        }
        c.acquire && !c.shutdown
    }

    fn thread_main(self: Arc<Self>, mut driver: Box<dyn Driver>) {
        loop {
            {
                let mut c = self.ctl.lock();
                while !c.acquire && !c.shutdown {
                    self.cv.wait(&mut c);
                }
                if c.shutdown {
                    return;
                }
            }
            self.acquisition(driver.as_mut());
        }
    }

    fn acquisition(&self, driver: &mut dyn Driver) {
        self.busy.store(true, Ordering::Release);
        let (p, a, d) = (&self.params, &self.base.array, &self.base.driver);
        a.acquire_busy.set(p, 1);
        d.status_message.set(p, "Acquiring".into());
        self.images_counter.store(0, Ordering::Release);
        let mut outcome = DetectorState::Idle;
        let mode = d.image_mode.get(p);
        self.set_shutter(true);
        if let Err(e) = driver.start(p) {
            d.status_message.set(p, e.to_string());
            outcome = DetectorState::Error;
        }
        // Frames run on an absolute schedule: frame n is due at start + n·period, so the time
        // spent publishing and the wake-up latency of each wait do not add up over a run.
        let mut schedule: Option<(Instant, f64, u32)> = None;
        let (paced, keep_identity, keep_stamp) = (
            driver.paces_itself(),
            driver.keeps_frame_identity(),
            driver.keeps_timestamp(),
        );
        while outcome == DetectorState::Idle {
            if !self.ctl.lock().acquire {
                outcome = DetectorState::Aborted;
                break;
            }
            let t0 = Instant::now();
            self.set_state(DetectorState::Acquire);
            let result = driver.acquire(p, &self.pool);
            let also = result.as_ref().ok().and_then(|f| driver.also_on(f));
            match result {
                Err(DriverError::NoFrame) => continue,
                Err(DriverError::Finished) => break,
                Ok(frame) if paced => {
                    self.publish_frame(frame, also, keep_identity, keep_stamp);
                    continue;
                }
                _ => {}
            }
            let exposure = d.acquire_time.get(p).max(0.0);
            let left = exposure - t0.elapsed().as_secs_f64();
            if left > 0.0 && !self.wait_running(Duration::from_secs_f64(left)) {
                outcome = DetectorState::Aborted;
                break;
            }
            self.set_state(DetectorState::Readout);
            match result {
                Ok(frame) => self.publish_frame(frame, also, keep_identity, keep_stamp),
                Err(DriverError::Core(CoreError::PoolExhausted { .. })) => {
                    self.dropped.fetch_add(1, Ordering::AcqRel);
                }
                Err(e) => {
                    d.status_message.set(p, format!("Error: {e}"));
                    tracing::error!("{}: acquisition stopped: {e}", self.name);
                    outcome = DetectorState::Error;
                    break;
                }
            }
            let done = self.images_counter.load(Ordering::Acquire);
            let num = d.num_images.get(p).max(1);
            if (mode == 0 && done >= 1) || (mode == 1 && done >= num) {
                break;
            }
            let period = d.acquire_period.get(p).max(0.0);
            let (start, n) = match schedule {
                Some((start, p, n)) if p == period => (start, n + 1),
                _ => (t0, 1), // first frame, or the period was changed: restart from this frame
            };
            schedule = Some((start, period, n));
            let due = start + Duration::from_secs_f64(period * f64::from(n));
            let now = Instant::now();
            if due > now {
                self.set_state(DetectorState::Waiting);
                if !self.wait_running(due - now) {
                    outcome = DetectorState::Aborted;
                    break;
                }
            } else if now - due > Duration::from_secs_f64(period) {
                // Running late by more than a period (generation is slower than the period):
                // start afresh rather than bursting to catch up.
                schedule = None;
            }
        }
        driver.stop(p);
        self.set_shutter(false);
        if outcome == DetectorState::Aborted && mode == 2 {
            outcome = DetectorState::Idle; // stopping Continuous mode is the normal end
        }
        self.set_state(outcome);
        self.publish(false);
        if a.wait_for_plugins.get(p) {
            while (self.busy_probe)() > 0 && !self.ctl.lock().shutdown {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        // The plugins' counters as they are now, before Acquire = 0: after a blocking chain a
        // client that sees the end reads final counts (areaDetector's blocking callbacks
        // update them before the driver's callParamCallbacks).
        (self.publish_all)();
        self.ctl.lock().acquire = false;
        a.acquire.set(p, 0);
        a.acquire_busy.set(p, 0);
        let msg = match outcome {
            DetectorState::Aborted => "Aborted".to_string(),
            DetectorState::Error => d.status_message.get(p),
            _ => "Acquisition complete".to_string(),
        };
        d.status_message.set(p, msg);
        {
            // Under the lock, so that `wait_done` cannot miss the end.
            let _c = self.ctl.lock();
            self.busy.store(false, Ordering::Release);
        }
        self.cv.notify_all();
        self.publish(false);
    }

    /// Publishes a frame on address 0 and, when `also` names one, on that address too.
    fn publish_frame(
        &self,
        mut frame: NDArray,
        also: Option<usize>,
        keep_identity: bool,
        keep_stamp: bool,
    ) {
        let id = self.array_counter.fetch_add(1, Ordering::AcqRel) + 1;
        if !keep_identity {
            frame.unique_id = id as i32;
        }
        if !keep_stamp {
            frame.stamp_now();
        }
        self.images_counter.fetch_add(1, Ordering::AcqRel);
        self.attrs.apply(&mut frame, &self.params);
        self.meta.lock().update(&frame);
        if self.base.array.array_callbacks.get(&self.params) {
            let frame = Arc::new(frame);
            self.fanout.offer_all(&frame, 0);
            if let Some(a) = also.filter(|&a| a > 0) {
                if a < self.addresses {
                    self.fanout.offer_all(&frame, a);
                } else if self.bad_address.fetch_add(1, Ordering::AcqRel) == 0 {
                    tracing::warn!(
                        "{}: frame {} not published on address {a}: the port publishes 0..{} (sent on address 0 only)",
                        self.name,
                        frame.unique_id,
                        self.addresses - 1
                    );
                }
            }
        }
    }

    /// Writes counters, state and pool statistics to the parameters.
    pub(crate) fn publish(&self, rate_tick: bool) {
        let (p, a, d) = (&self.params, &self.base.array, &self.base.driver);
        let mut w: Vec<(usize, ParamValue)> = Vec::with_capacity(40);
        let counter = self.array_counter();
        w.push(a.array_counter.value(counter));
        w.push(
            d.num_images_counter
                .value(self.images_counter.load(Ordering::Acquire)),
        );
        // Between acquisitions a detector that cannot be reached is shown as such, over the
        // outcome of the last acquisition (an Error because it went away says less).
        let mut state = self.state.load(Ordering::Acquire);
        let between = [
            DetectorState::Idle,
            DetectorState::Error,
            DetectorState::Aborted,
        ]
        .iter()
        .any(|s| *s as u8 == state);
        if between && !self.connection.as_ref().is_none_or(|c| c()) {
            state = DetectorState::Disconnected as u8;
        }
        w.push(d.detector_state.value(state as i64));
        w.push(d.dropped_arrays.value(self.dropped() as i64));
        w.push(d.time_remaining.value(self.time_remaining()));
        w.push(a.num_queued_arrays.value((self.busy_probe)() as i64));
        let s = self.pool.stats();
        w.push(a.pool_max_mem.value(s.max_mem as f64 / 1e6));
        w.push(a.pool_used_mem.value(s.used_mem as f64 / 1e6));
        w.push(a.pool_alloc_buffers.value(s.alloc_buffers as i64));
        w.push(a.pool_free_buffers.value(s.free_buffers as i64));
        w.push(
            a.pool_used_buffers
                .value(s.alloc_buffers as i64 - s.free_buffers as i64),
        );
        if rate_tick {
            let mut r = self.rate.lock();
            let dt = r.0.elapsed().as_secs_f64();
            if dt > 0.0 {
                w.push(a.array_rate.value(((counter - r.1).max(0)) as f64 / dt));
            }
            *r = (Instant::now(), counter);
        }
        self.meta.lock().write_to(a, false, &mut w);
        p.set_many(&w);
    }

    /// Seconds left in a Single/Multiple acquisition at the configured timing (0 when idle
    /// or in Continuous mode).
    fn time_remaining(&self) -> f64 {
        if !self.busy.load(Ordering::Acquire) {
            return 0.0;
        }
        let (p, d) = (&*self.params, &self.base.driver);
        let per_frame = d.acquire_period.get(p).max(d.acquire_time.get(p));
        let done = self.images_counter.load(Ordering::Acquire) as f64;
        let total = match d.image_mode.get(p) {
            0 => 1.0,
            1 => d.num_images.get(p).max(1) as f64,
            _ => return 0.0,
        };
        ((total - done).max(0.0) * per_frame).max(0.0)
    }

    pub(crate) fn shutdown(&self) {
        {
            let mut c = self.ctl.lock();
            c.shutdown = true;
            c.acquire = false;
            self.cv.notify_all();
        }
        if let Some(h) = self.thread.lock().take() {
            let _ = h.join();
        }
    }
}
