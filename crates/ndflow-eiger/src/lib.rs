//! DECTRIS EIGER, EIGER2 and PILATUS4 detectors: SIMPLON REST control
//! ([`simplon`]) and the two ZeroMQ image streams ([`stream`]: v1 multipart JSON, v2 CBOR),
//! decoded without the pipeline so that each piece is testable on its own.

pub mod control;
pub mod decode;
pub mod driver;
pub mod keys;
pub mod params;
pub mod port;
pub mod receiver;
pub mod series;
pub mod simplon;
pub mod stream;
