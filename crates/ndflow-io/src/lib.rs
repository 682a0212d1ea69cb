//! # ndflow-io: file writers
//!
//! areaDetector's file plugins (NDPluginFile and its formats), rebuilt over the ndflow
//! runtime. The behaviour every format shares lives in [`file`]: the NDFile parameters
//! (FilePath, FileName, FileNumber, FileTemplate, AutoIncrement, AutoSave, FileWriteMode
//! Single/Capture/Stream, Capture, NumCapture, TempSuffix, CreateDirectory, WriteStatus, ...),
//! the capture buffer (frames held as `Arc`, no copy) and error reporting. A format implements
//! [`file::Format`] (open / write / close one file) and becomes a plugin through
//! [`file::FileWriterPlugin`]:
//!
//! - [`tiff`]: NDFileTIFF ([`TiffFilePlugin`]), all 10 types, Mono/RGB1/RGB2/RGB3, tags
//!   65000-65003 and attributes as ASCII tags from 65010.
//! - [`jpeg`]: NDFileJPEG ([`JpegFilePlugin`]), UInt8 Mono/RGB1, `JPEGQuality`.
//! - [`magick`]: NDFileMagick ([`MagickFilePlugin`]), PNG/TIFF/BMP/GIF/JPEG by extension,
//!   UInt8/UInt16 Mono/RGB, `Quality`, `BitDepth`, `CompressType`.
//! - [`null`]: NDFileNull ([`NullFilePlugin`]), writes nothing; NDFile's modes and counters,
//!   `DeleteDriverFile` removes the file a frame's `DriverFileName` attribute names.
//! - [`netcdf`]: NDFileNetCDF ([`NetcdfFilePlugin`]), areaDetector's netCDF layout through
//!   libnetcdf (`numArrays` frames, `Attr_<name>` variables).
//! - [`nexus`]: NDFileNexus ([`NexusFilePlugin`]), HDF5 laid out by a NeXus template.
//! - [`hdf5`]: NDFileHDF5 ([`Hdf5FilePlugin`]), NeXus layout, filters registered in-process,
//!   direct chunk write of frames compressed by the Codec plugin, SWMR.
//!
//! Trade-off: writing happens on the plugin's worker thread (one at a time, max_threads 1),
//! as in areaDetector; a slow disk back-pressures only this port's queue, which drops and
//! counts frames when full.

pub mod file;
pub mod hdf5;
pub mod jpeg;
pub mod magick;
pub mod netcdf;
pub mod nexus;
pub mod null;
pub mod tiff;

// Always built (not behind a feature): a feature only other crates' tests enable would make
// `cargo test --workspace` rebuild this crate and everything above it a second time.
#[doc(hidden)]
pub mod test_dir;

pub use file::{FileWriterPlugin, Format};
pub use hdf5::{Hdf5FilePlugin, Hdf5Format};
pub use jpeg::{JpegFilePlugin, JpegFormat};
pub use magick::{MagickFilePlugin, MagickFormat};
pub use netcdf::{NetcdfFilePlugin, NetcdfFormat};
pub use nexus::{NexusFilePlugin, NexusFormat};
pub use null::{NullFilePlugin, NullFormat};
pub use tiff::{TiffFilePlugin, TiffFormat};
