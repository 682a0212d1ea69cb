//! pvAccess for ndflow.
//!
//! The crate is split by concern, after pvxs: [`wire`] is the byte-level encoding (header,
//! primitives, type descriptions, values), [`nt`] holds the normative types, [`request`] the
//! pvRequest, [`transport`] the message framing shared by the Tokio [`server`] and [`client`].
//! The wire layer needs no sockets or runtime; every decoder returns an error on malformed input
//! instead of panicking, because all of it is fed from the network. Frame pixels travel as
//! [`SharedBytes`]: received arrays are views of the received message, and sent arrays go from
//! the frame buffer to the socket with vectored writes.

pub mod client;
pub mod nt;
pub mod request;
pub mod server;
pub mod transport;
pub mod wire;

pub use wire::{
    BitSet, ByteOrder, DecodeError, EncodeError, FieldDesc, Header, Members, NumArray, Reader,
    ScalarType, Segment, SegmentAssembler, SharedBytes, Status, StatusKind, TypeCache, Value,
    Writer,
};
