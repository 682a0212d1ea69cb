//! # ndflow: the IOC
//!
//! Where the crates meet: a TOML config file becomes a [`ndflow_runtime::Graph`] of ports
//! ([`config`], [`registry`]); [`pvdir`] names every parameter of every port as a PV, served
//! over pvAccess ([`pva`]) and Channel Access ([`ca`]) under the config's access rules
//! ([`access`]); [`ioc::run`] runs it, printing state changes ([`events`]) or a live status
//! line ([`status`]), with the log level a PV ([`logging`]), alarms declared with the
//! parameters and the IOC's own health and server counters as PVs ([`health`],
//! [`server_stats`]), settings kept across restarts ([`state`]), and writes the JSON summary;
//! [`screens`] writes operator screens from the declarations.
//! [`vds`] joins the files of several writers, [`pv_cmd`] and [`ca_cmd`] are the scripts'
//! pvAccess and Channel Access clients (printing through [`cli_fmt`]) and [`reference`] prints
//! the parameter tables.
//!
//! The `ndflow` command is the `ndflow-cli` package; the benchmarks are `ndflow-bench`, kept
//! out of this library so that what links it (the Python package) carries none of them.

pub mod access;
pub mod asyn_fields;
pub mod ca;
pub mod ca_cmd;
pub mod ca_fields;
pub mod cli_fmt;
pub mod config;
pub mod events;
pub mod health;
pub mod ioc;
pub mod links;
pub mod logging;
pub mod put_log;
pub mod pv_attrs;
pub mod pv_cmd;
pub mod pva;
pub mod pvdir;
pub mod record_fields;
pub mod reference;
pub mod registry;
pub mod screens;
pub mod serve;
pub mod server_stats;
pub mod state;
pub mod status;
pub mod vds;
pub mod web;
