//! # ndflow-plugins: processing plugins, one file each
//!
//! Each plugin implements [`ndflow_runtime::Plugin`]: it declares its parameters once (a
//! `const` table, areaDetector's names) and turns one input frame into results (parameters)
//! and/or output frames. Queues, threads, counters, sorting and throttling are the runtime's.
//! Pixel kernels are generic over [`ndflow_core::Pixel`] and monomorphised per data type with
//! [`ndflow_core::with_pixel_type!`].
//!
//! | file | areaDetector plugin |
//! |---|---|
//! | `attr_plot.rs` | NDPluginAttrPlot: numeric attributes cached per acquisition, 9 selected as waveforms |
//! | `attribute.rs` | NDPluginAttribute: 8 chosen attributes (or virtual ones) as value, sum, series |
//! | `circular_buff.rs` | NDPluginCircularBuff: PreCount ring, calc or soft trigger, PostCount |
//! | `color_convert.rs` | NDPluginColorConvert: Mono/Bayer/RGB1/2/3 conversions, false colour |
//! | `bad_pixel.rs` | NDPluginBadPixel: Set / Replace / Median of the pixels listed in a JSON file |
//! | `codec.rs` | NDPluginCodec: compress / decompress (JPEG, Zlib, Blosc, LZ4, LZ4HDF5, BSLZ4) |
//! | `gather.rs` | NDPluginGather: up to 8 upstream ports merged into one stream (sortable) |
//! | `fft.rs` | NDPluginFFT: 1-D/2-D FFT, averaged |FFT| frame and waveforms |
//! | `overlay.rs` | NDPluginOverlay: 8 crosses/rectangles/ellipses/text lines, Set or XOR |
//! | `pos.rs` | NDPosPlugin: XML scan positions as attributes, missing/duplicate frame IDs |
//! | `process.rs` | NDPluginProcess: background, flat field, offset/scale, clipping, recursive filter |
//! | `roi.rs` | NDPluginROI: N-D region, binning, reverse, scale, type, collapse |
//! | `roistat.rs` | NDPluginROIStat: min/max/mean/total/net of up to 32 ROIs in one pass, time series |
//! | `scatter.rs` | NDPluginScatter: each frame to one downstream port, round-robin |
//! | `stats.rs` | NDPluginStats: statistics, centroid/moments, profiles, histogram |
//! | `std_arrays.rs` | NDPluginStdArrays: the latest frame as an array parameter |
//! | `timeseries.rs` | NDPluginTimeSeries: per-signal time series, Fixed length / Circ. buffer, averaging |
//! | `transform.rs` | NDPluginTransform: rotations and mirrors of a 2-D Mono/RGB image |

pub mod attr_plot;
pub mod attribute;
pub mod bad_pixel;
pub mod circular_buff;
pub mod codec;
pub mod color_convert;
pub mod fft;
pub mod gather;
pub mod overlay;
pub mod pos;
pub mod process;
pub mod roi;
pub mod roistat;
pub mod scatter;
pub mod stats;
pub mod std_arrays;
pub mod timeseries;
pub mod transform;
