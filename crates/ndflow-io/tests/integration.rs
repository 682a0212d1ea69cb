//! All of this crate's integration tests in one test binary: one link instead of 15
//! (each `tests/*.rs` file used to be a binary of its own). Each former file is a module,
//! so its tests are named `file::test`: run one file's tests with
//! `cargo test --release -p ndflow-io --test integration file::`.
//! `tests/hdf5_disk_full.rs` stays a binary of its own (see its doc comment).

mod common;
mod file_attr_control;
mod file_modes;
mod hdf5_compression;
mod hdf5_errors;
mod hdf5_extra_dims;
mod hdf5_layout;
mod hdf5_position;
mod hdf5_types;
mod hdf5_xml_layout;
mod multi_frame;
mod netcdf_nexus;
mod stream_stop;
mod template;
mod tiff_readback;
mod tiff_readfile;
