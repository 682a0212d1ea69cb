//! GenICam cameras through Aravis, testable without the pipeline: a camera opened by IP
//! address with its features by name ([`camera`]), zero-copy acquisition ([`stream`]), and
//! the per-camera feature list ADGenICam's makeDb.py makes from the GenICam XML ([`features`])
//! and its `GC_*` parameters ([`gc`]);
//! and the `aravis` port type built on them ([`port`], [`driver`], [`control`], [`params`]).

pub mod camera;
pub mod control;
pub mod driver;
pub mod features;
pub mod gc;
pub mod params;
pub mod pixels;
pub mod port;
pub mod stream;

pub use camera::{Camera, CameraError, OpenOptions};
pub use stream::{Frame, HeldFrame, Stats, Stream, StreamOptions};
