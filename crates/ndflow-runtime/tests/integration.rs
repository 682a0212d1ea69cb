//! All of this crate's integration tests in one test binary: one link instead of 7
//! (each `tests/*.rs` file used to be a binary of its own). Each former file is a module,
//! so its tests are named `file::test`: run one file's tests with
//! `cargo test --release -p ndflow-runtime --test integration file::`.

mod attr_file;
mod attr_funct;
mod common;
mod forwarding_driver;
mod graph;
mod multi_address;
mod plugin_pool;
mod scheduling;
