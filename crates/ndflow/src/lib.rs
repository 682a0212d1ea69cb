//! # ndflow: the IOC
//!
//! Where the crates meet: a TOML config file becomes a [`ndflow_runtime::Graph`] of ports
//! ([`config`], [`registry`]); [`ioc::run`] runs it with a live status line and writes the
//! JSON summary; [`bench`] reproduces the seed documents' measurements.

pub mod access;
pub mod bench;
pub mod bench_ab;
pub mod bench_ca;
pub mod bench_codec;
pub mod bench_hdf5;
pub mod bench_paced_ref;
pub mod bench_pva;
pub mod bench_scaleout;
pub mod ca;
pub mod config;
pub mod ioc;
pub mod pv_attrs;
pub mod pv_cmd;
pub mod pva;
pub mod pvdir;
pub mod reference;
pub mod registry;
pub mod status;
pub mod vds;
