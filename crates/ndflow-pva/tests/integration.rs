//! All of this crate's integration tests in one test binary: one link instead of 22
//! (each `tests/*.rs` file used to be a binary of its own). Each former file is a module,
//! so its tests are named `file::test`: run one file's tests with
//! `cargo test --release -p ndflow-pva --test integration file::`.

mod client_common;
mod client_fake_server;
mod client_fuzz;
mod client_p4p;
mod client_proto;
mod client_pvapy;
mod client_server_loopback;
mod common;
mod direct_write;
mod golden;
mod ntndarray;
mod primitives;
mod robustness;
mod server_disconnect;
mod server_discovery;
mod server_fuzz;
mod server_hostile;
mod server_monitor;
mod server_ops;
mod server_request;
mod server_support;
mod server_throughput;
mod server_transport;
mod transport_recycle;
mod typedesc_value;
