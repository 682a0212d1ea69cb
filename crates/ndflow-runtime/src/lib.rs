//! # ndflow-runtime: ports, queues, workers, accounting
//!
//! A [`Graph`] of named ports. A driver port ([`Driver`]) produces frames on its own
//! acquisition thread with ADDriver's behaviour (ImageMode, timing, DetectorState,
//! WaitForPlugins). A plugin port ([`Plugin`]) is a bounded input queue plus a concurrency
//! limit (NumThreads), run by a fixed pool of worker threads shared by all plugins — not a
//! thread per plugin, which costs a context switch per hop and thrashes when plugins
//! outnumber cores. A worker that emits a frame queues the downstream work on its own local
//! deque, so the next plugin usually runs on the core whose cache still holds the pixels;
//! idle workers steal.
//!
//! Every frame offered to a port is accounted for ([`Accounting`]): processed, dropped with
//! a reason (queue full, MinCallbackTime, unsupported input, disabled, error), or still
//! queued or in flight. Counters are kept next to the queue and published to parameters by
//! a housekeeping thread at a bounded rate (never a parameter write per frame).

mod accounting;
pub mod attr_file;
pub mod attr_funct;
pub mod driver;
mod driver_port;
mod graph;
pub mod harness;
mod meta;
pub mod plugin;
mod plugin_port;
pub mod port_params;
pub mod port_type;
mod scheduler;
mod wakeup;

pub use accounting::{Accounting, DropReason};
pub use attr_file::{PortAttributes, PvCell, PvRead, PvReader, PvSource};
pub use driver::{ConnectionProbe, Driver, DriverError, PutHandler};
pub use driver_port::DriverPort;
pub use graph::{Graph, GraphError, PortHandle};
pub use harness::PluginHarness;
pub use plugin::{pool_of, Plugin, PluginError, ProcessContext, Routing};
pub use plugin_port::PluginPort;
pub use port_type::{Built, ConstructorKey, PortArgs, PortType};
