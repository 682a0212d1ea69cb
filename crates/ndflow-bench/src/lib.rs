//! # ndflow-bench: the benchmarks of `ndflow bench`
//!
//! Each benchmark measures ndflow next to a reference in the same run, on the same machine,
//! so that its figures are ratios a reader can trust rather than numbers from elsewhere:
//!
//! | module | `ndflow bench` | reference |
//! |---|---|---|
//! | [`rivers2013`] | `rivers2013`: Table 1 of the 2013 plugin-scaling measurement | memcpy bandwidth; the same plugins called on one thread |
//! | [`hop`] | `hop`: runtime overhead per plugin hop | none (a chain of no-op plugins) |
//! | [`codec`] | `codec`: compression per core, Codec plugin scaling | the C libraries ([`c_ref`]), python bitshuffle |
//! | [`pva`] | `pva`: NTNDArray over loopback | raw TCP, p4p (pvxs) |
//! | [`hdf5`] | `hdf5`: HDF5 writing | h5py + hdf5plugin |
//! | [`scaleout`] | `scaleout`: 1 head + N writer processes | one process writing one file |
//! | [`ca`] | `ca`: Channel Access updates, frames and pipeline rate | pythonSoftIOC (RSRV), raw TCP |
//! | [`eiger`] | `eiger`: EIGER Stream v2 replayed over ZeroMQ, pass-through and decompress | pyzmq PULL; dectris-compression, bitshuffle |
//! | [`aravis`] | `aravis`: GenICam GigE Vision from Aravis' fake camera, in a network namespace | arv-camera-test (Aravis 0.8) |
//! | [`web`] | `web`: the live web viewer: pipeline rate and IOC CPU with viewers, frames a browser displays | the same IOC with no viewer; requestAnimationFrame's rate |
//!
//! Shared by them: [`paired`] (interleaved A/B pairs, median ratio and spread) and [`host`]
//! (child processes, free loopback ports, the loopback EPICS environment, raw TCP, CPU time).
//! [`cli`] is the command line the `ndflow` binary mounts as `ndflow bench`.
//!
//! The crate depends on the `ndflow` library and only the binary depends on it, so the
//! libraries and the Python package carry no benchmark code.

pub mod aravis;
pub mod c_ref;
pub mod ca;
pub mod cli;
pub mod codec;
pub mod eiger;
pub mod hdf5;
pub mod hop;
pub mod host;
pub mod paired;
pub mod pva;
pub mod rivers2013;
pub mod scaleout;
pub mod web;
