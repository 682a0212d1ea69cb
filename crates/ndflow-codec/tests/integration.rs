//! All of this crate's integration tests in one test binary: one link instead of 8
//! (each `tests/*.rs` file used to be a binary of its own). Each former file is a module,
//! so its tests are named `file::test`: run one file's tests with
//! `cargo test --release -p ndflow-codec --test integration file::`.

mod bitshuffle;
mod blosc;
mod bslz4;
mod corrupt;
mod corrupt_blosc_jpeg;
mod jpeg;
mod lz4;
mod zlib;
