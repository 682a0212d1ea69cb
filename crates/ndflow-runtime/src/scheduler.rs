//! A fixed pool of worker threads that runs whichever plugin ports have work.
//!
//! A task is "one worker's permission to run one port" (the port keeps at most NumThreads of
//! them alive). Tasks submitted from a worker go on that worker's own LIFO deque, so the
//! plugin downstream of the one that just ran usually runs next on the same core, with the
//! pixels still in cache; other workers steal when idle. Tasks from elsewhere (the driver
//! thread) go to a global FIFO injector.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_deque::{Injector, Steal, Stealer, Worker};
use parking_lot::{Condvar, Mutex};

use crate::plugin_port::PluginPort;

pub(crate) type Task = Arc<PluginPort>;

/// How long an idle worker sleeps before looking for work on its own. Wake-ups are never
/// lost (see `worker_loop`), so this is a safety net, not a poll: idle workers used to wake
/// every 20 ms each.
const SAFETY_WAIT: Duration = Duration::from_secs(1);

pub(crate) struct Scheduler {
    injector: Injector<Task>,
    stealers: Mutex<Vec<Stealer<Task>>>,
    sleepers: AtomicUsize,
    missed_wakeups: AtomicU64,
    sleep_lock: Mutex<()>,
    wake: Condvar,
    shutdown: AtomicBool,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

thread_local! {
    /// The local deque of the current worker, with the address of its scheduler.
    static LOCAL: RefCell<Option<(usize, Worker<Task>)>> = const { RefCell::new(None) };
    /// Inside [`batch`]: nesting depth, and the scheduler to wake once at the end.
    static BATCH: RefCell<(u32, Option<Arc<Scheduler>>)> = const { RefCell::new((0, None)) };
}

/// Runs `f` (a fan-out that may submit many tasks) and wakes at most one sleeping worker at
/// the end, instead of one per task. Waking a worker can preempt the waking thread on its own
/// core; a driver thread that woke eleven workers per frame lost ~0.4 ms a frame that way.
/// The woken worker wakes the next if more work is waiting (see `worker_loop`).
pub(crate) fn batch<R>(f: impl FnOnce() -> R) -> R {
    BATCH.with(|b| b.borrow_mut().0 += 1);
    let r = f();
    let wake = BATCH.with(|b| {
        let mut b = b.borrow_mut();
        b.0 -= 1;
        if b.0 == 0 {
            b.1.take()
        } else {
            None
        }
    });
    if let Some(s) = wake {
        s.wake_one();
    }
    r
}

impl Scheduler {
    /// (worker threads, workers running a port now): an idle worker sleeps.
    pub(crate) fn worker_counts(&self) -> (usize, usize) {
        let total = self.threads.lock().len();
        let asleep = self.sleepers.load(Ordering::Relaxed);
        (total, total.saturating_sub(asleep))
    }

    pub(crate) fn start(workers: usize) -> Arc<Scheduler> {
        let sched = Arc::new(Scheduler {
            injector: Injector::new(),
            stealers: Mutex::new(Vec::new()),
            sleepers: AtomicUsize::new(0),
            missed_wakeups: AtomicU64::new(0),
            sleep_lock: Mutex::new(()),
            wake: Condvar::new(),
            shutdown: AtomicBool::new(false),
            threads: Mutex::new(Vec::new()),
        });
        let mut locals = Vec::new();
        for _ in 0..workers.max(1) {
            let w = Worker::new_lifo();
            sched.stealers.lock().push(w.stealer());
            locals.push(w);
        }
        for (i, local) in locals.into_iter().enumerate() {
            let s = sched.clone();
            let handle = std::thread::Builder::new()
                .name(format!("ndflow-worker-{i}"))
                .spawn(move || s.worker_loop(local));
            match handle {
                Ok(h) => sched.threads.lock().push(h),
                Err(e) => tracing::error!("cannot start worker thread {i}: {e}"),
            }
        }
        sched
    }

    fn id(&self) -> usize {
        self as *const Scheduler as usize
    }

    pub(crate) fn submit(self: &Arc<Self>, task: Task) {
        let pushed_local = LOCAL.with(|l| match &*l.borrow() {
            Some((id, w)) if *id == self.id() => {
                w.push(task.clone());
                true
            }
            _ => false,
        });
        if !pushed_local {
            self.injector.push(task);
        }
        self.wake_soon();
    }

    /// Submits to the global queue (fair re-scheduling of a port with more work).
    pub(crate) fn submit_global(self: &Arc<Self>, task: Task) {
        self.injector.push(task);
        self.wake_soon();
    }

    /// True on a worker of this scheduler when no task waits in the global queue, in this
    /// worker's deque or in any other worker's deque, and the pool is not stopping: a port
    /// that just ran may then go on with its next frame on the same worker
    /// ([`PluginPort::run_task`]). False off the pool's workers.
    pub(crate) fn nothing_waiting(&self) -> bool {
        if self.shutdown.load(Ordering::Acquire) || !self.injector.is_empty() {
            return false;
        }
        let local_empty = LOCAL.with(|l| match &*l.borrow() {
            Some((id, w)) if *id == self.id() => w.is_empty(),
            _ => false,
        });
        local_empty && self.stealers.lock().iter().all(|s| s.is_empty())
    }

    /// Wakes a worker now, or at the end of the current [`batch`].
    fn wake_soon(self: &Arc<Self>) {
        let deferred = BATCH.with(|b| {
            let mut b = b.borrow_mut();
            if b.0 > 0 {
                b.1 = Some(self.clone());
                true
            } else {
                false
            }
        });
        if !deferred {
            self.wake_one();
        }
    }

    /// No task in the global queue or in any worker's deque.
    fn all_empty(&self) -> bool {
        self.injector.is_empty() && self.stealers.lock().iter().all(|s| s.is_empty())
    }

    /// Wake-ups that were lost and made up for by the safety time-out (0 unless the
    /// protocol above is broken; tests check it).
    pub(crate) fn missed_wakeups(&self) -> u64 {
        self.missed_wakeups.load(Ordering::Relaxed)
    }

    fn wake_one(&self) {
        // Orders the caller's push before the read of `sleepers` (see `worker_loop`).
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            let _g = self.sleep_lock.lock();
            self.wake.notify_one();
        }
    }

    fn find_task(&self, local: &Worker<Task>) -> Option<Task> {
        if let Some(t) = local.pop() {
            return Some(t);
        }
        loop {
            match self.injector.steal_batch_and_pop(local) {
                Steal::Success(t) => return Some(t),
                Steal::Retry => continue,
                Steal::Empty => break,
            }
        }
        let stealers = self.stealers.lock().clone();
        for s in &stealers {
            loop {
                match s.steal() {
                    Steal::Success(t) => return Some(t),
                    Steal::Retry => continue,
                    Steal::Empty => break,
                }
            }
        }
        None
    }

    fn worker_loop(self: Arc<Self>, local: Worker<Task>) {
        let stealer_probe = local.stealer();
        LOCAL.with(|l| *l.borrow_mut() = Some((self.id(), local)));
        loop {
            if self.shutdown.load(Ordering::Acquire) {
                break;
            }
            let task = LOCAL.with(|l| l.borrow().as_ref().and_then(|(_, w)| self.find_task(w)));
            match task {
                Some(port) => {
                    // More work waiting: pass the wake-up on (one worker wakes the next).
                    if !self.injector.is_empty() || !stealer_probe.is_empty() {
                        self.wake_one();
                    }
                    port.run_task(&self)
                }
                None => {
                    let mut g = self.sleep_lock.lock();
                    self.sleepers.fetch_add(1, Ordering::SeqCst);
                    // Re-check every queue after announcing ourselves asleep: a submitter
                    // pushes, fences, then reads `sleepers` (`wake_one`), so either it sees
                    // us and notifies (it needs `sleep_lock`, held until we wait), or we see
                    // its task here. No wake-up is lost, so the wait needs no polling
                    // timeout; the long one only bounds the harm of a bug, and a worker
                    // that it wakes to find work counts it in `missed_wakeups`.
                    if !self.shutdown.load(Ordering::Acquire) && self.all_empty() {
                        let timed_out = self.wake.wait_for(&mut g, SAFETY_WAIT).timed_out();
                        if timed_out && !self.all_empty() {
                            self.missed_wakeups.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    self.sleepers.fetch_sub(1, Ordering::SeqCst);
                }
            }
        }
        LOCAL.with(|l| *l.borrow_mut() = None);
    }

    pub(crate) fn stop(&self) {
        self.shutdown.store(true, Ordering::Release);
        {
            let _g = self.sleep_lock.lock();
            self.wake.notify_all();
        }
        let threads: Vec<JoinHandle<()>> = std::mem::take(&mut *self.threads.lock());
        for t in threads {
            let _ = t.join();
        }
    }
}
