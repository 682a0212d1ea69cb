//! All of this crate's integration tests in one test binary: one link instead of 6
//! (each `tests/*.rs` file used to be a binary of its own). Each former file is a module,
//! so its tests are named `file::test`: run one file's tests with
//! `cargo test --release -p ndflow-ca --test integration file::`.

mod fuzz;
mod hostile;
mod loopback;
mod name_server;
mod shared_port;
mod softioc;
