//! NDFileHDF5: frames into one HDF5 file per capture or stream, in NDFileHDF5's NeXus
//! default layout ([`layout`]), readable by h5py + hdf5plugin and `h5dump`.
//!
//! * **Layout**: `/entry/instrument/detector/data` is `[n, y, x]` (the NDArray dims
//!   reversed: `[n, y, x, 3]` for RGB1, `[n, y, 3, x]` RGB2, `[n, 3, y, x]` RGB3; no frame
//!   axis in Single mode), linked as `/entry/data/data`; NDAttributes, uniqueId and
//!   timestamps as one dataset each; the performance dataset `[n, 5]`.
//! * **Chunks**: one frame per chunk by default (ChunkSizeAuto); NumColChunks,
//!   NumRowChunks, ChunkSize2..9 and NumFramesChunks otherwise; BoundaryAlign /
//!   BoundaryThreshold set `H5Pset_alignment`.
//! * **Compression**: N-bit, szip and zlib are HDF5's own filters; Blosc (32001), LZ4
//!   (32004), BSLZ4 (32008) and JPEG (32019) are filters registered in-process ([`filters`]),
//!   with the ids and cd_values readers' plugins expect.
//! * **Direct chunk write**: a frame already compressed by the Codec plugin with the codec of
//!   the dataset's filter, or an uncompressed frame without filter, is stored with
//!   `H5Dwrite_chunk` when a chunk is one frame — no recompression, no copy but the 12/16-byte
//!   header bslz4/lz4 need ([`chunk`]). The first frame's codec picks the filter, as in
//!   areaDetector. A compressed frame that does not match (or chunks that are not one frame)
//!   is decompressed and written through the pipeline; areaDetector refuses it.
//! * **SWMR** ([`swmr`]): SWMRMode, NumFramesFlush, FlushNow, SWMRActive_RBV,
//!   SWMRCbCounter_RBV.
//! * **Errors**: disk space is reserved ahead of HDF5 ([`reserve`]), so a full disk or a file
//!   size limit refuses the frame before HDF5 sees it and the file closes cleanly with every
//!   frame written before; the NDFile machinery reports it (WriteStatus, WriteMessage,
//!   FramesNotWritten) and the pipeline goes on.
//!
//! * **XML layouts** ([`xml_layout`], [`xml_write`]): XMLFileName (a path or the XML text)
//!   replaces the NeXus layout; an invalid one sets XMLValid = No, XMLErrorMsg, and no file
//!   opens. Several detector datasets: the `detector_data_destination` NDAttribute names a
//!   frame's dataset (unknown or absent: the default one).
//! * **Extra dims and position mode** ([`extra_dims`]): frame axes `[…, Y, X, N]` filled N
//!   fastest, or at the indices of the PosNameDim* attributes; DimAttDatasets gives the
//!   NDAttribute datasets the same axes. Direct chunk write still applies when every extra
//!   dim's chunk is 1.
//!
//! NumFramesChunks above 1 is written through the pipeline (HDF5 caches the partial chunk),
//! not in memory.

mod attributes;
mod chunk;
pub mod extra_dims;
mod filters;
mod heap;
mod layout;
mod reserve;
mod settings;
mod swmr;
pub mod vds;
pub mod xml_layout;
mod xml_write;

use std::io;
use std::path::{Path, PathBuf};
use std::time::Instant;

use hdf5_metno as h5;
use hdf5_metno::filters::{Filter, SZip};
use hdf5_metno_sys::h5t::{H5Tcopy, H5Tset_offset, H5Tset_precision};
use ndflow_core::{
    with_pixel_type, AttrValue, ColorMode, DataType, NDArray, NDAttribute, ParamDef, ParamStore,
    ParamValue,
};

use crate::file::{FileWriterPlugin, Format};
use attributes::{AttributeColumns, DimShape, Performance, Target};
use extra_dims::ExtraDims;
use ndflow_runtime::{Built, PortType};
use reserve::Reserve;
use settings::{Compression, Handles, Settings};
use swmr::FlushPolicy;
use xml_layout::{Layout, When};

/// For NDFileNexus, which writes through the same HDF5 layer.
pub(crate) use chunk::write_hyperslab;
pub use chunk::{read_raw_chunk, DataFilter};
pub use filters::{
    blosc_cd_values, bslz4_cd_values, jpeg_cd_values, lz4_cd_values, register_filters,
    FILTER_BLOSC, FILTER_BSLZ4, FILTER_JPEG, FILTER_LZ4,
};
pub(crate) use layout::string_attr;
pub use layout::{
    chunk_shape, frame_shape, ChunkRequest, ATTR_GROUP, DATA_PATH, DETECTOR_ATTR_GROUP, LINK_PATH,
    PERFORMANCE_PATH,
};
pub use settings::{Hdf5Params, COMPRESSION_CHOICES, HDF5_OWN_PARAMS, HDF5_PARAMS};

/// The NDFileHDF5 plugin: `Hdf5FilePlugin::new()`.
pub type Hdf5FilePlugin = FileWriterPlugin<Hdf5Format>;

/// Attribute values are written at least every this many frames (bounded memory).
const ATTR_BATCH: usize = 1024;

/// The HDF5 [`Format`]: one file holds the frames of a capture or stream.
pub struct Hdf5Format {
    h: Handles,
    file: Option<OpenFile>,
}

impl Default for Hdf5Format {
    fn default() -> Self {
        Hdf5Format {
            h: Handles::new(),
            file: None,
        }
    }
}

/// One detector dataset: frames written to it and its current frame-axes extent.
struct DetData {
    name: String,
    ds: h5::Dataset,
    written: u64,
    extent: Vec<usize>,
}

struct OpenFile {
    /// The port's parameters this file publishes to.
    h: Handles,
    path: PathBuf,
    file: h5::File,
    /// The default detector dataset first.
    dets: Vec<DetData>,
    /// Frame axes (None in Single mode: no frame axis).
    extra: Option<ExtraDims>,
    /// `detector_data_destination`: the NDAttribute naming a frame's dataset.
    destination: Option<String>,
    /// XML layout with OnFileClose attributes, and the last frame's NDAttributes for them.
    close_attrs: Option<(Layout, Vec<NDAttribute>)>,
    mem_type: h5::Datatype,
    frame_shape: Vec<usize>,
    data_type: DataType,
    filter: DataFilter,
    /// A chunk is exactly one frame.
    one_frame_chunks: bool,
    multi: bool,
    written: u64,
    attrs: Option<AttributeColumns>,
    perf: Option<Performance>,
    flush: FlushPolicy,
    flushes: i64,
    /// Header + chunk for direct writes; decompressed frames.
    scratch: Vec<u8>,
    unpacked: Vec<u8>,
    reserve: Option<Reserve>,
    opened: Instant,
}

fn bad(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

fn h5err(what: &str) -> impl Fn(h5::Error) -> io::Error + '_ {
    move |e| io::Error::other(format!("{what}: {e}"))
}

/// The file type of the detector data: the native type, with N-bit's precision and offset.
fn data_type(dt: DataType, c: &Compression) -> io::Result<h5::Datatype> {
    let native =
        with_pixel_type!(dt, T => h5::Datatype::from_type::<T>()).map_err(h5err("datatype"))?;
    let Compression::NBit { precision, offset } = *c else {
        return Ok(native);
    };
    let bits = dt.size() * 8;
    if dt.is_float() || precision + offset > bits {
        return Err(bad(format!(
            "N-bit needs an integer type with NumDataBits + DataBitsOffset <= {bits}, got {} with {precision} + {offset}",
            dt.name()
        )));
    }
    h5::sync::sync(|| {
        // SAFETY: `native` is a valid datatype id; the copy is checked, then owned by the
        // returned Datatype (from_id takes the reference) or closed on error by it.
        unsafe {
            let id = h5::h5check(H5Tcopy(native.id()))?;
            let t: h5::Datatype = h5::from_id(id)?;
            h5::h5check(H5Tset_precision(t.id(), precision))?;
            h5::h5check(H5Tset_offset(t.id(), offset))?;
            Ok(t)
        }
    })
    .map_err(h5err("N-bit datatype"))
}

/// JPEG frames: UInt8 Mono `[x, y]` or RGB1 `[3, x, y]`; returns (width, height, rgb).
fn jpeg_geometry(frame: &NDArray) -> io::Result<(usize, usize, bool)> {
    match (frame.sizes().as_slice(), frame.color_mode()) {
        (&[w, h], _) if frame.data_type == DataType::UInt8 => Ok((w, h, false)),
        (&[3, w, h], ColorMode::RGB1) if frame.data_type == DataType::UInt8 => Ok((w, h, true)),
        _ => Err(bad(format!(
            "JPEG compression needs UInt8 2-D Mono or 3-D RGB1 frames, got {} {:?} {}",
            frame.data_type.name(),
            frame.sizes(),
            frame.color_mode().name()
        ))),
    }
}

fn filters_for(
    s: &Settings,
    frame: &NDArray,
    chunk: &[usize],
    one_frame_chunks: bool,
) -> io::Result<Vec<Filter>> {
    let elem = frame.data_type.size();
    let chunk_bytes = chunk.iter().product::<usize>() * elem;
    Ok(match s.compression {
        Compression::None => vec![],
        Compression::NBit { .. } => vec![Filter::nbit()],
        Compression::Szip { pixels } => {
            if !h5::filters::szip_available() {
                return Err(bad("szip is not available in this HDF5 library".into()));
            }
            vec![Filter::szip(SZip::NearestNeighbor, pixels)]
        }
        Compression::Zlib { level } => vec![Filter::deflate(level)],
        Compression::Blosc(p) => vec![Filter::user(
            FILTER_BLOSC,
            &blosc_cd_values(elem, chunk_bytes, &p),
        )],
        Compression::Bslz4 => vec![Filter::user(FILTER_BSLZ4, &bslz4_cd_values(elem))],
        Compression::Lz4 => vec![Filter::user(FILTER_LZ4, &lz4_cd_values())],
        Compression::Jpeg { quality } => {
            let (w, h, rgb) = jpeg_geometry(frame)?;
            if !one_frame_chunks {
                return Err(bad("JPEG compression needs one frame per chunk".into()));
            }
            vec![Filter::user(
                FILTER_JPEG,
                &jpeg_cd_values(quality, w, h, rgb),
            )]
        }
    })
}

/// The NDAttribute datasets of an XML layout: where the layout names them (with their
/// `when`), the others in the ndattr_default group (or not at all).
fn xml_columns(
    file: &h5::File,
    l: &Layout,
    frame: &NDArray,
    chunk: usize,
    dims: Option<&DimShape>,
) -> h5::Result<AttributeColumns> {
    let placed = l.ndattr_datasets();
    let default_group = l.ndattr_default_group();
    let place = |name: &str| -> h5::Result<Vec<Target>> {
        let mine: Vec<_> = placed.iter().filter(|(_, a, _)| a == name).collect();
        if !mine.is_empty() {
            return mine
                .into_iter()
                .map(|(path, _, when)| {
                    let (g, ds) = xml_write::split(path);
                    Ok(Target {
                        group: file.group(g)?,
                        name: ds.to_string(),
                        when: *when,
                    })
                })
                .collect();
        }
        // Someone else's dataset may already hold the name: ADCore skips those too.
        let Some(g) = &default_group else {
            return Ok(Vec::new());
        };
        let group = file.group(g)?;
        let ds = attributes::safe_name(name);
        if group.link_exists(&ds) {
            return Ok(Vec::new());
        }
        Ok(vec![Target {
            group,
            name: ds,
            when: When::OnFileWrite,
        }])
    };
    let wanted: Vec<String> = placed.iter().map(|(_, a, _)| a.clone()).collect();
    AttributeColumns::create_placed(frame, chunk, dims, &wanted, &place)
}

impl OpenFile {
    fn create(path: &Path, frame: &NDArray, p: &ParamStore, h: Handles) -> io::Result<OpenFile> {
        register_filters().map_err(io::Error::other)?;
        heap::keep_chunk_buffers();
        let s = Settings::read(p, &h, frame).map_err(bad)?;
        let shape = frame_shape(frame);
        if shape.contains(&0) {
            return Err(bad(format!(
                "frame dims {:?} hold an empty dim",
                frame.sizes()
            )));
        }
        let (frame_chunk, per_dim) = chunk_shape(&shape, &s.chunks, false);
        let extra = s.multi.then(|| s.extra.clone());
        let axes = extra.as_ref().map_or(&[][..], |e| &e.sizes[..]);
        let axis_chunks = extra.as_ref().map_or(&[][..], |e| &e.chunks[..]);
        let chunk: Vec<usize> = axis_chunks.iter().chain(&frame_chunk).copied().collect();
        let frames_per_chunk = axis_chunks.last().copied().unwrap_or(1);
        let one_frame_chunks = frame_chunk == shape && axis_chunks.iter().all(|&c| c == 1);
        let (flush, flush_frames) = FlushPolicy::new(s.flush_frames, frames_per_chunk, s.swmr);
        Settings::publish(p, &h.own, &per_dim, frames_per_chunk, flush_frames);
        let filters = filters_for(&s, frame, &chunk, one_frame_chunks)?;
        let file_type = data_type(frame.data_type, &s.compression)?;
        let mem_type = data_type(frame.data_type, &Compression::None)?;

        let mut builder = h5::File::with_options();
        builder.with_fapl(|f| {
            f.fclose_degree(h5::file::FileCloseDegree::Strong);
            if s.align > 0 {
                f.alignment(s.threshold, s.align);
            }
            if s.swmr {
                f.libver_v110();
            }
            f
        });
        let file = builder.create(path).map_err(h5err("create"))?;
        // Frame axes start empty and grow with the frames written.
        let extents: Vec<h5::Extent> = axes
            .iter()
            .map(|&n| h5::Extent::new(0, (n > 0).then_some(n)))
            .chain(shape.iter().map(|&d| h5::Extent::fixed(d)))
            .collect();
        let make_detector = |g: &h5::Group, name: &str| -> h5::Result<h5::Dataset> {
            let data = with_pixel_type!(frame.data_type, T => {
                g.new_dataset_builder()
                    .empty_as(&file_type)
                    .shape(h5::SimpleExtents::from_vec(extents.clone()))
                    .chunk(chunk.clone())
                    .set_filters(&filters)
                    .fill_value(s.fill as T)
                    .create(name)
            })?;
            layout::data_attributes(&data, frame)?;
            Ok(data)
        };
        let dim_shape = (s.dim_att && extra.is_some()).then(|| DimShape {
            sizes: axes.to_vec(),
            chunks: axis_chunks.iter().map(|&c| c.max(1)).collect(),
            keep_1d: match &extra {
                Some(e) if e.pos_names.is_some() => e.index_names.clone(),
                _ => Vec::new(),
            },
        });
        let (detectors, attrs, perf) = match &s.layout {
            None => {
                let groups = layout::create_groups(&file).map_err(h5err("layout"))?;
                let data =
                    make_detector(&groups.detector, "data").map_err(h5err("detector dataset"))?;
                layout::link_data(&groups).map_err(h5err("layout"))?;
                let attrs = s
                    .store_attr
                    .then(|| {
                        AttributeColumns::create(&groups, frame, s.attr_chunk, dim_shape.as_ref())
                    })
                    .transpose()
                    .map_err(h5err("attribute datasets"))?;
                let perf = s
                    .store_perform
                    .then(|| {
                        Performance::create(&groups.performance, frame.total_bytes(), s.attr_chunk)
                    })
                    .transpose()
                    .map_err(h5err("performance dataset"))?;
                (vec![("data".to_string(), data)], attrs, perf)
            }
            Some(l) => {
                let built = xml_write::build(&file, l, &frame.attributes, &make_detector)
                    .map_err(h5err("XML layout"))?;
                let attrs = s
                    .store_attr
                    .then(|| xml_columns(&file, l, frame, s.attr_chunk, dim_shape.as_ref()))
                    .transpose()
                    .map_err(h5err("attribute datasets"))?;
                let perf = match l.performance_group() {
                    Some(g) if s.store_perform => Some(
                        file.group(&g)
                            .and_then(|g| {
                                Performance::create(&g, frame.total_bytes(), s.attr_chunk)
                            })
                            .map_err(h5err("performance dataset"))?,
                    ),
                    _ => None,
                };
                xml_write::finish_open(&file, l, &frame.attributes).map_err(h5err("XML layout"))?;
                (built.detectors, attrs, perf)
            }
        };
        if s.swmr {
            file.start_swmr().map_err(h5err("start SWMR"))?;
        }
        p.set_many(&[
            h.own.swmr_active.value(i64::from(s.swmr)),
            h.own.swmr_cb_counter.value(0),
        ]);
        let chunk_bytes = attrs.as_ref().map_or(0, |a| a.chunk_bytes())
            + perf.as_ref().map_or(0, |p| p.chunk_bytes());
        let close_attrs = s
            .layout
            .clone()
            .filter(xml_write::has_close_attrs)
            .map(|l| (l, frame.attributes.clone()));
        Ok(OpenFile {
            h,
            path: path.to_path_buf(),
            // No reservation where a second descriptor cannot be had: writes still work.
            reserve: Reserve::open(path, reserve::margin(chunk_bytes as u64)).ok(),
            file,
            dets: detectors
                .into_iter()
                .map(|(name, ds)| DetData {
                    name,
                    ds,
                    written: 0,
                    extent: vec![0; axes.len()],
                })
                .collect(),
            destination: s.layout.as_ref().and_then(|l| l.destination.clone()),
            close_attrs,
            extra,
            mem_type,
            frame_shape: shape,
            data_type: frame.data_type,
            filter: s.compression.filter(),
            one_frame_chunks,
            multi: s.multi,
            written: 0,
            attrs,
            perf,
            flush,
            flushes: 0,
            scratch: Vec::new(),
            unpacked: Vec::new(),
            opened: Instant::now(),
        })
    }

    /// The detector dataset a frame goes to: the one its destination attribute names, else
    /// the default (ADCore `detector_data_destination`).
    fn route(&self, frame: &NDArray) -> usize {
        let Some(attr) = &self.destination else {
            return 0;
        };
        let name = match frame.attribute(attr).map(|a| &a.value) {
            Some(AttrValue::String(s)) => s.trim().to_string(),
            Some(v) => v
                .as_f64()
                .map(|x| (x as i64).to_string())
                .unwrap_or_default(),
            None => return 0,
        };
        self.dets.iter().position(|d| d.name == name).unwrap_or(0)
    }

    fn write(&mut self, frame: &NDArray, p: &ParamStore) -> io::Result<()> {
        if frame_shape(frame) != self.frame_shape || frame.data_type != self.data_type {
            return Err(bad(format!(
                "frame {} is {} {:?}, the file holds {} {:?}",
                frame.unique_id,
                frame.data_type.name(),
                frame_shape(frame),
                self.data_type.name(),
                self.frame_shape
            )));
        }
        if !self.multi && self.written > 0 {
            return Err(bad("a Single-mode file holds one frame".into()));
        }
        let start = Instant::now();
        let codec = frame.codec.name.as_str();
        let direct = self.one_frame_chunks && self.filter.takes_directly(codec);
        let direct_bytes = if direct {
            chunk::direct_chunk(frame, &mut self.scratch).map(<[u8]>::len)
        } else {
            None
        };
        // Anything not written as it is goes through its uncompressed bytes.
        let raw_len = if direct_bytes.is_none() && frame.is_compressed() {
            chunk::decompress_frame(frame, &mut self.unpacked).map_err(bad)?;
            self.unpacked.len()
        } else {
            frame.total_bytes()
        };
        let short = || bad(format!("frame {} holds too few bytes", frame.unique_id));
        if direct_bytes.is_none() && !frame.is_compressed() && frame.data_bytes().len() < raw_len {
            return Err(short());
        }
        let need = direct_bytes.unwrap_or(raw_len + raw_len / 8 + 65536) as u64;
        if let Some(r) = &mut self.reserve {
            let eoa = reserve::end_of_allocation(&self.file).map_err(h5err("end of allocation"))?;
            r.ensure(eoa, need).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("no room for frame {}: {e}", frame.unique_id),
                )
            })?;
        }
        let di = self.route(frame);
        let axes = match &self.extra {
            Some(e) => e.offset(frame, self.dets[di].written).map_err(bad)?,
            None => Vec::new(),
        };
        let det = &mut self.dets[di];
        let offset: Vec<usize> = axes
            .iter()
            .copied()
            .chain(self.frame_shape.iter().map(|_| 0))
            .collect();
        let old_extent = det.extent.clone();
        let grown: Vec<usize> = old_extent
            .iter()
            .zip(&axes)
            .map(|(&e, &o)| e.max(o + 1))
            .collect();
        let full = |ext: &[usize]| -> Vec<usize> {
            ext.iter().chain(&self.frame_shape).copied().collect()
        };
        if grown != old_extent {
            det.ds.resize(full(&grown)).map_err(h5err("extend"))?;
            det.extent = grown;
        }
        let res = if let Some(len) = direct_bytes {
            let bytes = if frame.codec.name == "bslz4" || frame.codec.name == "lz4" {
                self.scratch.get(..len)
            } else {
                frame.data_bytes().get(..len)
            };
            chunk::write_chunk(&det.ds, &offset, bytes.ok_or_else(short)?)
        } else {
            let bytes = if frame.is_compressed() {
                &self.unpacked[..]
            } else {
                frame.data_bytes().get(..raw_len).ok_or_else(short)?
            };
            if self.filter == DataFilter::None && self.one_frame_chunks {
                chunk::write_chunk(&det.ds, &offset, bytes)
            } else {
                let count: Vec<usize> = axes
                    .iter()
                    .map(|_| 1)
                    .chain(self.frame_shape.iter().copied())
                    .collect();
                chunk::write_hyperslab(&det.ds, &self.mem_type, &offset, &count, bytes)
            }
        };
        if let Err(e) = res {
            if det.extent != old_extent {
                // Do not leave an extent claiming a frame that is not there.
                let _ = det.ds.resize(full(&old_extent));
                det.extent = old_extent;
            }
            return Err(h5err("write")(e));
        }
        det.written += 1;
        self.written += 1;
        if let Some(a) = &mut self.attrs {
            a.push(frame, &axes);
        }
        if let Some((_, last)) = &mut self.close_attrs {
            last.clone_from(&frame.attributes);
        }
        if let Some(perf) = &mut self.perf {
            perf.push(start, Instant::now());
        }
        if self.flush.due(self.written) {
            self.flush(p)?;
        } else if self
            .attrs
            .as_ref()
            .is_some_and(|a| a.pending() >= ATTR_BATCH)
        {
            self.write_metadata()?;
        }
        Ok(())
    }

    fn write_metadata(&mut self) -> io::Result<()> {
        if let Some(perf) = &mut self.perf {
            perf.write().map_err(h5err("performance"))?;
        }
        if let Some(a) = &mut self.attrs {
            a.write().map_err(h5err("attributes"))?;
        }
        Ok(())
    }

    /// Publishes everything written so far (see [`swmr`]).
    fn flush(&mut self, p: &ParamStore) -> io::Result<()> {
        self.write_metadata()?;
        if self.flush.swmr {
            for d in &self.dets {
                d.ds.flush().map_err(h5err("flush"))?;
            }
            if let Some(perf) = &self.perf {
                perf.flush().map_err(h5err("flush"))?;
            }
            if let Some(a) = &self.attrs {
                a.flush().map_err(h5err("flush"))?;
            }
        } else {
            self.file.flush().map_err(h5err("flush"))?;
        }
        self.flushes += 1;
        self.h.own.swmr_cb_counter.set(p, self.flushes);
        Ok(())
    }

    fn close(self, p: &ParamStore) -> io::Result<()> {
        let runtime = self.opened.elapsed().as_secs_f64();
        let mbit = self.written as f64
            * 8.0
            * (self.data_type.size() as f64)
            * self.frame_shape.iter().product::<usize>() as f64
            / (1024.0 * 1024.0);
        let own = self.h.own;
        let res = self.finish();
        let speed = if runtime > 0.0 { mbit / runtime } else { 0.0 };
        p.set_many(&[
            own.run_time.value(runtime),
            own.io_speed.value(speed),
            own.swmr_active.value(0),
        ]);
        res
    }

    /// Writes what is buffered and closes the file.
    fn finish(mut self) -> io::Result<()> {
        let meta = self.write_metadata();
        let OpenFile {
            path,
            file,
            dets,
            attrs,
            perf,
            reserve,
            close_attrs,
            ..
        } = self;
        drop((dets, attrs, perf));
        let xml = match &close_attrs {
            Some((layout, last)) => {
                xml_write::finish_close(&file, layout, last).map_err(h5err("XML layout"))
            }
            None => Ok(()),
        };
        let closed = file.close().map_err(h5err("close"));
        if let Some(r) = reserve {
            r.release(&path);
        }
        meta.and(xml).and(closed)
    }
}

impl Drop for Hdf5Format {
    /// A plugin dropped mid-stream still leaves a complete file (hdf5-metno keeps HDF5 from
    /// closing files at process exit).
    fn drop(&mut self) {
        if let Some(f) = self.file.take() {
            let _ = f.finish();
        }
    }
}

impl Format for Hdf5Format {
    const PLUGIN_TYPE: &'static str = "NDFileHDF5";
    const PARAMS: &'static [ParamDef] = HDF5_PARAMS;
    const MULTI_FRAME: bool = true;
    const ACCEPTS_COMPRESSED: bool = true;

    fn open(&mut self, path: &Path, frame: &NDArray, params: &ParamStore) -> io::Result<()> {
        if let Some(old) = self.file.take() {
            let _ = old.close(params);
        }
        self.file = Some(OpenFile::create(path, frame, params, self.h)?);
        Ok(())
    }

    fn write(&mut self, frame: &NDArray, params: &ParamStore) -> io::Result<()> {
        self.file
            .as_mut()
            .ok_or_else(|| io::Error::other("HDF5 file not open"))?
            .write(frame, params)
    }

    fn close(&mut self, params: &ParamStore) -> io::Result<()> {
        match self.file.take() {
            Some(f) => f.close(params),
            None => Ok(()),
        }
    }

    fn param_changed(
        &mut self,
        params: &ParamStore,
        idx: usize,
        value: &ParamValue,
    ) -> io::Result<()> {
        let own = &self.h.own;
        if own.xml_file_name.is(idx) {
            // Checked now so XMLValid / XMLErrorMsg answer before any file opens.
            return settings::load_layout(params, own).map(drop).map_err(bad);
        }
        if own.num_extra_dims.is(idx) || own.extra_dim_sizes().iter().any(|s| s.is(idx)) {
            extra_dims::publish_num_capture(params, &self.h);
            return Ok(());
        }
        if !own.flush_now.is(idx) || value.as_i64() != Some(1) {
            return Ok(());
        }
        let res = match &mut self.file {
            Some(f) => f.flush(params),
            None => Ok(()),
        };
        own.flush_now.set(params, 0);
        res
    }
}

/// The port type `type = "hdf5"`.
pub const PORT: PortType = PortType::plugin(
    "hdf5",
    "NDFileHDF5",
    "HDF5 files (NeXus layout): all types, filters, direct chunk write, SWMR",
    |_| Ok(Built::Plugin(std::sync::Arc::new(Hdf5FilePlugin::new()))),
);
