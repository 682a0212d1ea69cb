//! All of this crate's integration tests in one test binary: one link instead of 18
//! (each `tests/*.rs` file used to be a binary of its own). Each former file is a module,
//! so its tests are named `file::test`: run one file's tests with
//! `cargo test --release -p ndflow-plugins --test integration file::`.

mod attribute;
mod bad_pixel;
mod capture_overload;
mod circular_buff;
mod codec;
mod color_convert;
mod common;
mod example_plugin;
mod fft;
mod overlay;
mod pos;
mod process;
mod roi;
mod roistat;
mod scatter_gather;
mod stats;
mod std_arrays;
mod timeseries;
mod transform;
