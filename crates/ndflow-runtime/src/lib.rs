//! # ndflow-runtime: ports, queues, workers, accounting
//!
//! A graph of named ports. A driver port ([`Driver`]) produces frames on its own
//! acquisition thread; a plugin port ([`Plugin`]) is a bounded input queue plus a
//! concurrency limit (NumThreads), run by a fixed pool of worker threads shared by all
//! plugins — not a thread per plugin. A worker that emits a frame queues the downstream
//! work on its own local deque, so the next plugin usually runs on the core whose cache
//! still holds the pixels; idle workers steal.
//!
//! Every frame offered to a port is accounted for: processed, dropped with a reason
//! (queue full, MinCallbackTime, unsupported input, disabled, error), or still queued or in
//! flight. Counters are atomics, published to parameters by a housekeeping thread at a
//! bounded rate (never a lock per frame).

pub mod driver;
pub mod harness;
pub mod params;
pub mod plugin;

pub use driver::{Driver, DriverError};
pub use harness::PluginHarness;
pub use plugin::{pool_of, Plugin, PluginError, ProcessContext};
