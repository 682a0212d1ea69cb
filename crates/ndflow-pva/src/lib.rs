//! pvAccess for ndflow.
//!
//! The crate is split by concern, after pvxs: [`wire`] is the byte-level encoding (header,
//! primitives, type descriptions, values), [`nt`] holds the normative types. Nothing here needs the
//! frame pipeline, sockets or an async runtime; every decoder returns an error on malformed input
//! instead of panicking, because all of it is fed from the network.

pub mod nt;
pub mod wire;

pub use wire::{
    BitSet, ByteOrder, DecodeError, EncodeError, FieldDesc, Header, Members, NumArray, Reader,
    ScalarType, Segment, SegmentAssembler, SharedBytes, Status, StatusKind, TypeCache, Value,
    Writer,
};
