//! All of this crate's integration tests in one test binary: one link instead of 6
//! (each `tests/*.rs` file used to be a binary of its own). Each former file is a module,
//! so its tests are named `file::test`: run one file's tests with
//! `cargo test --release -p ndflow --test integration file::`.

mod adbase;
mod codec_pipeline;
mod config;
mod param_pvs;
mod pvdir;
mod reference;
