//! The NeXus layout of NDFileHDF5's default XML layout (ADCore `LayoutXML::DEFAULT_LAYOUT`),
//! the shapes of the detector dataset and its chunks, and HDF5 attribute helpers.
//!
//! ```text
//! /                              default = "entry"
//! /entry                         NX_class = NXentry, default = "data"
//! /entry/instrument              NX_class = NXinstrument
//! /entry/instrument/detector     NX_class = NXdetector
//! /entry/instrument/detector/data            [n, y, x] (+ colour dim as the frame has it),
//!                                            signal = 1, NDArrayNumDims, NDArrayDim{Offset,Binning,Reverse}
//! /entry/instrument/detector/NDAttributes    NX_class = NXcollection: ColorMode
//! /entry/instrument/NDAttributes             NX_class = NXcollection: every other NDAttribute,
//!                                            NDArrayUniqueId, NDArrayTimeStamp, NDArrayEpicsTSSec, NDArrayEpicsTSnSec
//! /entry/instrument/performance/timestamp    [n, 5] float64
//! /entry/data                    NX_class = NXdata, signal = "data"
//! /entry/data/data               hard link to /entry/instrument/detector/data
//! ```
//! The root and `/entry` `default` attributes and the NXdata `signal` string are the NeXus
//! 2014 conventions, added to areaDetector's layout so NeXus readers find the plot.
//! String attributes are fixed-length ASCII, as NDFileHDF5 writes them.

use std::ffi::CString;

use hdf5_metno as h5;
use hdf5_metno_sys::h5a::{H5Aclose, H5Acreate2, H5Awrite};
use hdf5_metno_sys::h5p::H5P_DEFAULT;
use hdf5_metno_sys::h5s::{H5S_class_t, H5Sclose, H5Screate};
use hdf5_metno_sys::h5t::{H5Tclose, H5Tcopy, H5Tset_size, H5T_C_S1};
use ndflow_core::NDArray;

pub const DATA_PATH: &str = "/entry/instrument/detector/data";
pub const LINK_PATH: &str = "/entry/data/data";
pub const ATTR_GROUP: &str = "/entry/instrument/NDAttributes";
pub const DETECTOR_ATTR_GROUP: &str = "/entry/instrument/detector/NDAttributes";
pub const PERFORMANCE_PATH: &str = "/entry/instrument/performance/timestamp";

/// The groups datasets go into.
pub(crate) struct Groups {
    pub detector: h5::Group,
    pub detector_attrs: h5::Group,
    pub attrs: h5::Group,
    pub performance: h5::Group,
    pub data: h5::Group,
}

fn group(parent: &h5::Group, name: &str, nx_class: Option<&str>) -> h5::Result<h5::Group> {
    let g = parent.create_group(name)?;
    if let Some(c) = nx_class {
        string_attr(&g, "NX_class", c)?;
    }
    Ok(g)
}

/// Creates the groups of the default layout with their NX_class attributes.
pub(crate) fn create_groups(file: &h5::File) -> h5::Result<Groups> {
    string_attr(file, "default", "entry")?;
    let entry = group(file, "entry", Some("NXentry"))?;
    string_attr(&entry, "default", "data")?;
    let instrument = group(&entry, "instrument", Some("NXinstrument"))?;
    let detector = group(&instrument, "detector", Some("NXdetector"))?;
    let detector_attrs = group(&detector, "NDAttributes", Some("NXcollection"))?;
    let attrs = group(&instrument, "NDAttributes", Some("NXcollection"))?;
    let performance = group(&instrument, "performance", None)?;
    let data = group(&entry, "data", Some("NXdata"))?;
    string_attr(&data, "signal", "data")?;
    Ok(Groups {
        detector,
        detector_attrs,
        attrs,
        performance,
        data,
    })
}

/// The detector data's attributes (NDFileHDF5's `signal` and `writeDefaultDatasetAttributes`).
pub(crate) fn data_attributes(data: &h5::Dataset, frame: &NDArray) -> h5::Result<()> {
    data.new_attr::<i32>().create("signal")?.write_scalar(&1)?;
    let n = frame.ndims() as i32;
    data.new_attr::<i32>()
        .create("NDArrayNumDims")?
        .write_scalar(&n)?;
    let per_dim = |f: fn(&ndflow_core::Dim) -> i32| frame.dims.iter().map(f).collect::<Vec<_>>();
    for (name, v) in [
        ("NDArrayDimOffset", per_dim(|d| d.offset as i32)),
        ("NDArrayDimBinning", per_dim(|d| d.binning as i32)),
        ("NDArrayDimReverse", per_dim(|d| i32::from(d.reverse))),
    ] {
        data.new_attr_builder().with_data(&v).create(name)?;
    }
    Ok(())
}

/// The `/entry/data/data` hard link.
pub(crate) fn link_data(groups: &Groups) -> h5::Result<()> {
    groups.data.link_hard(DATA_PATH, "data")
}

/// The frame's shape in HDF5 order (slowest first): the NDArray dims reversed, so a Mono
/// frame is `[y, x]`, RGB1 `[y, x, 3]`, RGB2 `[y, 3, x]`, RGB3 `[3, y, x]`.
pub fn frame_shape(frame: &NDArray) -> Vec<usize> {
    frame.dims.iter().rev().map(|d| d.size).collect()
}

/// The chunking parameters: ChunkSizeAuto, per-NDArray-dim sizes (NumColChunks = dim 0,
/// NumRowChunks = dim 1, ChunkSize2..9) and NumFramesChunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkRequest {
    pub auto: bool,
    pub dims: [i64; 10],
    pub frames: i64,
}

/// Chunk shape in HDF5 order as NDFileHDF5 computes it: a dim's chunk is its request clamped
/// to the frame size, the whole dim when ChunkSizeAuto = Yes or the request is < 1; the frame
/// axis (multi-frame files) gets NumFramesChunks (at least 1). Returns the shape and the
/// per-NDArray-dim values to publish back.
pub fn chunk_shape(frame: &[usize], req: &ChunkRequest, multi: bool) -> (Vec<usize>, Vec<i64>) {
    let n = frame.len();
    let mut published = Vec::with_capacity(n);
    let mut chunk: Vec<usize> = Vec::with_capacity(n + 1);
    if multi {
        chunk.push(req.frames.max(1) as usize);
    }
    // frame[n - 1 - i] is NDArray dim i.
    let mut per_dim = vec![0usize; n];
    for (i, slot) in per_dim.iter_mut().enumerate() {
        let max = frame[n - 1 - i].max(1);
        let want = req.dims.get(i).copied().unwrap_or(0);
        let c = if req.auto || want < 1 {
            max
        } else {
            (want as usize).min(max)
        };
        *slot = c;
        published.push(c as i64);
    }
    chunk.extend(per_dim.iter().rev());
    (chunk, published)
}

/// Writes a scalar fixed-length ASCII string attribute (`H5T_C_S1`, NUL-terminated), as
/// NDFileHDF5's `writeStringAttribute`. Interior NULs end the string.
pub(crate) fn string_attr(loc: &h5::Location, name: &str, value: &str) -> h5::Result<()> {
    let cname = CString::new(name).map_err(|_| h5::Error::from("attribute name holds a NUL"))?;
    let text: Vec<u8> = value.bytes().take_while(|&b| b != 0).take(65000).collect();
    // NDFileHDF5 sizes the type to strlen; an empty string still needs one byte.
    let size = text.len().max(1);
    let mut buf = text;
    buf.resize(size, 0);
    let id = loc.id();
    h5::sync::sync(|| {
        // SAFETY: H5T_C_S1 is a valid predefined type once the library is open (sync() opens
        // it); every id created here is checked and closed before returning.
        unsafe {
            let t = h5::h5check(H5Tcopy(*H5T_C_S1))?;
            let res = (|| {
                h5::h5check(H5Tset_size(t, size))?;
                let space = h5::h5check(H5Screate(H5S_class_t::H5S_SCALAR))?;
                let res = (|| {
                    let a = h5::h5check(H5Acreate2(
                        id,
                        cname.as_ptr(),
                        t,
                        space,
                        H5P_DEFAULT,
                        H5P_DEFAULT,
                    ))?;
                    // `buf` holds exactly `size` bytes, the size of type `t`.
                    let w = h5::h5check(H5Awrite(a, t, buf.as_ptr().cast()));
                    H5Aclose(a);
                    w.map(|_| ())
                })();
                H5Sclose(space);
                res
            })();
            H5Tclose(t);
            res
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_follow_ndfilehdf5() {
        let auto = ChunkRequest {
            auto: true,
            dims: [0; 10],
            frames: 0,
        };
        assert_eq!(chunk_shape(&[4, 6], &auto, true).0, [1, 4, 6]);
        assert_eq!(chunk_shape(&[4, 6], &auto, false).0, [4, 6]);
        let mut dims = [0; 10];
        dims[0] = 4; // NumColChunks (x)
        dims[1] = 100; // NumRowChunks (y) clamped
        let manual = ChunkRequest {
            auto: false,
            dims,
            frames: 3,
        };
        let (c, published) = chunk_shape(&[5, 6], &manual, true);
        assert_eq!(c, [3, 5, 4]);
        assert_eq!(published, [4, 5]);
        // RGB1 frame [y, x, 3]: NumColChunks applies to the colour dim (NDArray dim 0).
        let (c, _) = chunk_shape(&[5, 6, 3], &manual, true);
        assert_eq!(c, [3, 5, 6, 3]);
    }
}
