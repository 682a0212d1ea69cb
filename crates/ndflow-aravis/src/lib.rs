//! GenICam cameras through Aravis, testable without the pipeline: a camera opened by IP
//! address with its features by name ([`camera`]), zero-copy acquisition ([`stream`]), and
//! the per-camera feature list ADGenICam's makeDb.py makes from the GenICam XML ([`features`]);
//! and the `aravis` port type built on them ([`port`], [`driver`], [`control`], [`params`]).

pub mod camera;
pub mod control;
pub mod driver;
pub mod features;
pub mod params;
pub mod port;
pub mod stream;

pub use camera::{Camera, CameraError, OpenOptions};
pub use stream::{Frame, Stats, Stream, StreamOptions};
