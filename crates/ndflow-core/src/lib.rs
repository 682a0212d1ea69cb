//! # ndflow-core: frames, pixel types, pool, parameters
//!
//! The data model every other ndflow crate shares, with areaDetector's semantics
//! :
//!
//! - [`NDArray`]: an N-dimensional frame. Metadata (dims with offset/binning/reverse,
//!   data type, uniqueId, both timestamps, attributes, codec) lives in the struct; pixels
//!   live in a pooled, 64-byte-aligned [`Buffer`] shared by `Arc`. A frame is immutable
//!   once published; a plugin that only changes metadata clones the struct and shares the
//!   pixels (no copy).
//! - [`Pool`]: one per driver. Reuses free buffers (smallest fitting, re-allocated when more
//!   than 1.5x too large), enforces a memory cap and fails cleanly when the cap is hit, so the
//!   caller can count a dropped frame instead of aborting.
//! - [`param`]: parameters declared once ([`ParamDef`]) and stored in a [`ParamStore`] that
//!   validates writes (type, range, enum) and refuses with a message naming key and value.
//!
//! Trade-off: attributes are a plain `Vec` cloned with the metadata. Frames carry a handful
//! of attributes, so this is cheaper than a shared list with a lock (areaDetector's choice).

pub mod alarm;
mod aligned;
mod attribute;
pub mod calendar;
mod datatype;
mod error;
pub mod handle;
mod ndarray;
pub mod param;
mod pool;

pub use alarm::{Alarm, AlarmRule, AlarmStatus, Levels, Severity};
pub use aligned::{AlignedBuf, HUGE_PAGE};
pub use attribute::{AttrValue, NDAttribute, SourceType};
pub use datatype::{convert_slice, DataType, Pixel};
pub use error::CoreError;
pub use handle::{Param, ParamLayout};
pub use ndarray::{
    ArrayInfo, BayerPattern, Codec, ColorMode, Dim, EpicsTimeStamp, NDArray, MAX_DIMS,
    POSIX_TO_EPICS_EPOCH,
};
pub use param::{
    Access, ArrayValue, Derive, LinkKind, ParamDef, ParamError, ParamKind, ParamStore, ParamValue,
    RecordHint,
};
pub use pool::{Buffer, BufferMut, ExternalBytes, Misaligned, Pool, PoolStats, EXTERNAL_ALIGN};
