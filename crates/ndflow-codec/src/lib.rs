//! # ndflow-codec: compression, byte-compatible with the C libraries
//!
//! Pure functions over byte slices, no pipeline types. Every function compresses or
//! decompresses into a caller-provided buffer (no allocation per call in steady state) and
//! returns the number of bytes written. Malformed or truncated input is an error, never a
//! panic and never a write past the output buffer.
//!
//! | module | format |
//! |---|---|
//! | [`lz4`] | raw LZ4 block; the HDF5/Dectris LZ4 framing (`lz4hdf5`) |
//! | [`bitshuffle`] | the bit transpose of the bitshuffle library (scalar + AVX2) |
//! | [`bslz4`] | bitshuffle + LZ4, areaDetector framing and HDF5-filter-32008 framing |
//! | [`zlib`] | zlib streams |
//! | [`blosc`] | Blosc1 frames through c-blosc |
//! | [`jpeg`] | JPEG, UInt8 mono and RGB, through libjpeg-turbo |

pub mod bitshuffle;
pub mod blosc;
pub mod bslz4;
mod error;
pub mod jpeg;
pub mod lz4;
pub mod zlib;

pub use error::CodecError;
