//! GenICam cameras through Aravis, testable without the pipeline: a camera opened by IP
//! address with its features by name ([`camera`]), zero-copy acquisition ([`stream`]), and
//! the per-camera feature list ADGenICam's makeDb.py makes from the GenICam XML ([`features`]).

pub mod camera;
pub mod features;
pub mod stream;

pub use camera::{Camera, CameraError, OpenOptions};
pub use stream::{Frame, Stats, Stream, StreamOptions};
