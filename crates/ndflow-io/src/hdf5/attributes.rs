//! Per-frame metadata datasets: one 1-D dataset per NDAttribute (one element per frame),
//! the four virtual attributes NDArrayUniqueId, NDArrayTimeStamp, NDArrayEpicsTSSec and
//! NDArrayEpicsTSnSec, and the performance dataset `[n, 5]`.
//!
//! As NDFileHDF5: the attribute list is frozen at open from the first frame (later
//! newcomers are ignored; a missing value is written as the fill value: 0, "" or NaN), each
//! dataset carries the HDF5 attributes NDAttrName, NDAttrDescription, NDAttrSourceType and
//! NDAttrSource, strings are fixed 256-byte C strings and undefined attributes are float32
//! NaN. ColorMode goes to the detector's NDAttributes group, the rest to the instrument's.
//!
//! Values are buffered and written in blocks (at each flush and at close) rather than with
//! one `H5Dwrite` per attribute per frame; NDArrayUniqueId is written and flushed last, so a
//! SWMR reader that sizes its view by it never sees an id without its frame.

use std::time::Instant;

use hdf5_metno as h5;
use hdf5_metno::types::TypeDescriptor;
use ndflow_core::{with_pixel_type, AttrValue, DataType, NDArray, NDAttribute};

use super::chunk::write_hyperslab;
use super::layout::{string_attr, Groups};
use super::xml_layout::When;

/// Bytes of a string attribute value (MAX_ATTRIBUTE_STRING_SIZE).
pub const STRING_SIZE: usize = 256;
const UNIQUE_ID: &str = "NDArrayUniqueId";

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Num(DataType),
    Str,
    Undefined,
}

/// Where a column's value comes from.
#[derive(Debug, Clone, PartialEq)]
enum Source {
    Attribute(String),
    UniqueId,
    TimeStamp,
    EpicsSec,
    EpicsNsec,
}

struct Column {
    /// Bytes of one chunk of the dataset.
    chunk_bytes: usize,
    source: Source,
    kind: Kind,
    ds: h5::Dataset,
    mem: h5::Datatype,
    when: When,
    /// DimAttDatasets: the dataset has the extra dims' shape; `extent` is its current one.
    extent: Option<Vec<usize>>,
    rows: usize,
    /// Values not yet written (with their offsets in extra-dims mode).
    pending: Vec<u8>,
    offsets: Vec<Vec<usize>>,
    /// OnFileOpen: the first value was taken.
    taken: bool,
}

/// Where an NDAttribute's dataset goes: group, dataset name, when it is written.
pub(crate) struct Target {
    pub group: h5::Group,
    pub name: String,
    pub when: When,
}

enum Num {
    I(i64),
    U(u64),
    F(f64),
}

fn as_num(v: &AttrValue) -> Option<Num> {
    Some(match *v {
        AttrValue::Int8(x) => Num::I(x.into()),
        AttrValue::Int16(x) => Num::I(x.into()),
        AttrValue::Int32(x) => Num::I(x.into()),
        AttrValue::Int64(x) => Num::I(x),
        AttrValue::UInt8(x) => Num::U(x.into()),
        AttrValue::UInt16(x) => Num::U(x.into()),
        AttrValue::UInt32(x) => Num::U(x.into()),
        AttrValue::UInt64(x) => Num::U(x),
        AttrValue::Float32(x) => Num::F(x.into()),
        AttrValue::Float64(x) => Num::F(x),
        AttrValue::String(ref s) => Num::F(s.trim().parse().ok()?),
        AttrValue::Undefined => return None,
    })
}

/// Appends `v` as a `dt` element (exact for integers of the same kind, `as` otherwise; a
/// missing value is 0).
#[allow(clippy::unnecessary_cast)] // `as T` is a no-op for some of the ten types
fn push_num(out: &mut Vec<u8>, dt: DataType, v: Option<Num>) {
    with_pixel_type!(dt, T => {
        let x: T = match v {
            Some(Num::I(i)) => i as T,
            Some(Num::U(u)) => u as T,
            Some(Num::F(f)) => f as T,
            None => 0 as T,
        };
        out.extend_from_slice(&x.to_ne_bytes());
    })
}

fn push_str(out: &mut Vec<u8>, v: Option<&AttrValue>) {
    let text = match v {
        Some(AttrValue::String(s)) => s.clone(),
        Some(AttrValue::Undefined) | None => String::new(),
        Some(other) => other.as_f64().map(|x| x.to_string()).unwrap_or_default(),
    };
    let bytes: Vec<u8> = text
        .bytes()
        .take_while(|&b| b != 0)
        .take(STRING_SIZE - 1)
        .collect();
    let start = out.len();
    out.extend_from_slice(&bytes);
    out.resize(start + STRING_SIZE, 0);
}

/// HDF5 link names cannot hold '/' and "." is the group itself.
fn dataset_name(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| if c == '/' { '_' } else { c })
        .collect();
    if s.is_empty() || s == "." {
        "_".into()
    } else {
        s
    }
}

fn native(dt: DataType) -> h5::Result<h5::Datatype> {
    with_pixel_type!(dt, T => h5::Datatype::from_type::<T>())
}

/// The NDAttribute datasets of one file.
pub(crate) struct AttributeColumns {
    cols: Vec<Column>,
    pending: usize,
}

/// DimAttDatasets: the extra dims (sizes, 0 = unlimited, and chunks) and the index
/// attributes that stay 1-D.
pub(crate) struct DimShape {
    pub sizes: Vec<usize>,
    pub chunks: Vec<usize>,
    pub keep_1d: Vec<String>,
}

/// HDF5 link names cannot hold '/' and "." is the group itself.
pub(crate) fn safe_name(name: &str) -> String {
    dataset_name(name)
}

impl AttributeColumns {
    /// The default layout: ColorMode in the detector's NDAttributes group, the rest in the
    /// instrument's.
    pub fn create(
        groups: &Groups,
        frame: &NDArray,
        chunk: usize,
        dims: Option<&DimShape>,
    ) -> h5::Result<Self> {
        let place = |name: &str| {
            let group = if name == "ColorMode" {
                &groups.detector_attrs
            } else {
                &groups.attrs
            };
            Ok(vec![Target {
                group: group.clone(),
                name: dataset_name(name),
                when: When::OnFileWrite,
            }])
        };
        Self::create_placed(frame, chunk, dims, &[], &place)
    }

    /// Creates the datasets of the virtual attributes, the first frame's attributes and
    /// `wanted` (attributes a layout names that the first frame may lack), each where
    /// `place` puts it (nowhere: not stored; a layout may place one in several datasets).
    pub fn create_placed(
        frame: &NDArray,
        chunk: usize,
        dims: Option<&DimShape>,
        wanted: &[String],
        place: &dyn Fn(&str) -> h5::Result<Vec<Target>>,
    ) -> h5::Result<Self> {
        let virtual_attrs = [
            (
                UNIQUE_ID,
                "The unique ID of the NDArray",
                DataType::Int32,
                Source::UniqueId,
            ),
            (
                "NDArrayTimeStamp",
                "The timestamp of the NDArray as float64",
                DataType::Float64,
                Source::TimeStamp,
            ),
            (
                "NDArrayEpicsTSSec",
                "The NDArray EPICS timestamp seconds past epoch",
                DataType::UInt32,
                Source::EpicsSec,
            ),
            (
                "NDArrayEpicsTSnSec",
                "The NDArray EPICS timestamp nanoseconds",
                DataType::UInt32,
                Source::EpicsNsec,
            ),
        ];
        let mut cols: Vec<Column> = Vec::new();
        let mut names: Vec<String> = Vec::new();
        for (name, desc, dt, source) in virtual_attrs {
            names.push(name.to_string());
            let attr = NDAttribute::new(name, desc, AttrValue::Undefined);
            for t in place(name)? {
                let kind = Kind::Num(dt);
                cols.push(Self::column(&t, &attr, kind, source.clone(), chunk, dims)?);
            }
        }
        let missing: Vec<NDAttribute> = wanted
            .iter()
            .filter(|w| frame.attribute(w).is_none())
            .map(|w| NDAttribute::new(w, "", AttrValue::Undefined))
            .collect();
        for a in frame.attributes.iter().chain(&missing) {
            if names.contains(&a.name) {
                continue;
            }
            names.push(a.name.clone());
            let kind = match (&a.value, a.value.data_type()) {
                (_, Some(dt)) => Kind::Num(dt),
                (AttrValue::String(_), None) => Kind::Str,
                _ => Kind::Undefined,
            };
            for t in place(&a.name)? {
                let source = Source::Attribute(a.name.clone());
                cols.push(Self::column(&t, a, kind, source, chunk, dims)?);
            }
        }
        // The uniqueId column goes last: written and flushed after the others.
        if let Some(i) = cols.iter().position(|c| c.source == Source::UniqueId) {
            let c = cols.remove(i);
            cols.push(c);
        }
        Ok(AttributeColumns { cols, pending: 0 })
    }

    fn column(
        t: &Target,
        attr: &NDAttribute,
        kind: Kind,
        source: Source,
        chunk: usize,
        dims: Option<&DimShape>,
    ) -> h5::Result<Column> {
        let (desc, mem) = match kind {
            Kind::Num(dt) => (native(dt)?.to_descriptor()?, native(dt)?),
            Kind::Str => {
                let d = TypeDescriptor::FixedAscii(STRING_SIZE);
                (d.clone(), h5::Datatype::from_descriptor(&d)?)
            }
            Kind::Undefined => (
                native(DataType::Float32)?.to_descriptor()?,
                native(DataType::Float32)?,
            ),
        };
        let elem = mem.size().max(1);
        let chunk = chunk.clamp(1, (1 << 20) / elem);
        let dims = dims.filter(|d| t.when == When::OnFileWrite && !d.keep_1d.contains(&attr.name));
        let (shape, chunks, extent) = match (t.when, dims) {
            (When::OnFileWrite, None) => {
                (h5::SimpleExtents::resizable([0usize]), vec![chunk], None)
            }
            (When::OnFileWrite, Some(d)) => (
                h5::SimpleExtents::from_vec(
                    d.sizes
                        .iter()
                        .map(|&s| h5::Extent::new(0, (s > 0).then_some(s)))
                        .collect(),
                ),
                d.chunks.clone(),
                Some(vec![0; d.sizes.len()]),
            ),
            _ => (
                h5::SimpleExtents::from_vec(vec![h5::Extent::fixed(1)]),
                vec![1],
                None,
            ),
        };
        let chunk_bytes = chunks.iter().product::<usize>() * elem;
        let mut b = t
            .group
            .new_dataset_builder()
            .empty_as(&desc)
            .shape(shape)
            .chunk(chunks);
        if kind == Kind::Undefined {
            b = b.fill_value(f32::NAN);
        }
        let ds = b.create(t.name.as_str())?;
        string_attr(&ds, "NDAttrName", &attr.name)?;
        string_attr(&ds, "NDAttrDescription", &attr.description)?;
        string_attr(&ds, "NDAttrSourceType", attr.source_type.name())?;
        string_attr(&ds, "NDAttrSource", &attr.source)?;
        Ok(Column {
            chunk_bytes,
            source,
            kind,
            ds,
            mem,
            when: t.when,
            extent,
            rows: 0,
            pending: Vec::new(),
            offsets: Vec::new(),
            taken: false,
        })
    }

    /// Buffers this frame's values; `offset` is the frame's place in the extra dims.
    pub fn push(&mut self, frame: &NDArray, offset: &[usize]) {
        for c in &mut self.cols {
            match c.when {
                When::OnFileOpen if c.taken => continue,
                When::OnFileOpen => c.taken = true,
                When::OnFileClose => c.pending.clear(),
                When::OnFileWrite => {}
            }
            let value = match &c.source {
                Source::Attribute(name) => frame.attribute(name).map(|a| a.value.clone()),
                Source::UniqueId => Some(AttrValue::Int32(frame.unique_id)),
                Source::TimeStamp => Some(AttrValue::Float64(frame.time_stamp)),
                Source::EpicsSec => Some(AttrValue::UInt32(frame.epics_ts.sec)),
                Source::EpicsNsec => Some(AttrValue::UInt32(frame.epics_ts.nsec)),
            };
            match c.kind {
                Kind::Num(dt) => push_num(&mut c.pending, dt, value.as_ref().and_then(as_num)),
                Kind::Str => push_str(&mut c.pending, value.as_ref()),
                Kind::Undefined => {
                    let v = value.as_ref().and_then(|v| v.as_f64()).unwrap_or(f64::NAN);
                    c.pending.extend_from_slice(&(v as f32).to_ne_bytes());
                }
            }
            if c.extent.is_some() {
                c.offsets.push(offset.to_vec());
            }
        }
        self.pending += 1;
    }

    /// Bytes of one chunk of every dataset together.
    pub fn chunk_bytes(&self) -> usize {
        self.cols.iter().map(|c| c.chunk_bytes).sum()
    }

    /// Buffered frames not yet in the file.
    pub fn pending(&self) -> usize {
        self.pending
    }

    /// Extends every dataset and writes the buffered values (NDArrayUniqueId last).
    pub fn write(&mut self) -> h5::Result<()> {
        for c in &mut self.cols {
            c.write()?;
        }
        self.pending = 0;
        Ok(())
    }

    /// `H5Dflush` of every dataset (SWMR), NDArrayUniqueId last.
    pub fn flush(&self) -> h5::Result<()> {
        self.cols.iter().try_for_each(|c| c.ds.flush())
    }
}

impl Column {
    fn write(&mut self) -> h5::Result<()> {
        let elem = self.mem.size().max(1);
        let n = self.pending.len() / elem;
        if n == 0 {
            return Ok(());
        }
        match (&mut self.extent, self.when) {
            (_, When::OnFileOpen | When::OnFileClose) => {
                // One value: the first (OnFileOpen) or the latest (OnFileClose).
                let last = &self.pending[(n - 1) * elem..];
                write_hyperslab(&self.ds, &self.mem, &[0], &[1], last)?;
            }
            (None, When::OnFileWrite) => {
                let rows = self.rows + n;
                self.ds.resize([rows])?;
                write_hyperslab(&self.ds, &self.mem, &[self.rows], &[n], &self.pending)?;
                self.rows = rows;
            }
            (Some(extent), When::OnFileWrite) => {
                let mut grown = extent.clone();
                for o in &self.offsets {
                    for (g, &x) in grown.iter_mut().zip(o) {
                        *g = (*g).max(x + 1);
                    }
                }
                if grown != *extent {
                    self.ds.resize(grown.clone())?;
                    *extent = grown;
                }
                let ones = vec![1usize; extent.len()];
                for (o, v) in self.offsets.iter().zip(self.pending.chunks_exact(elem)) {
                    write_hyperslab(&self.ds, &self.mem, o, &ones, v)?;
                }
            }
        }
        self.pending.clear();
        self.offsets.clear();
        Ok(())
    }
}

/// `/entry/instrument/performance/timestamp`: per frame the write time, the period since the
/// previous frame, the run time since the first frame (s), and the frame's and the average
/// write rate (Mbit/s, NDFileHDF5's units).
pub(crate) struct Performance {
    ds: h5::Dataset,
    chunk_rows: usize,
    mem: h5::Datatype,
    frame_mbit: f64,
    first: Option<Instant>,
    prev: Option<Instant>,
    count: usize,
    rows: usize,
    pending: Vec<u8>,
}

impl Performance {
    pub fn create(group: &h5::Group, frame_bytes: usize, chunk: usize) -> h5::Result<Self> {
        let chunk_rows = chunk.clamp(1, 1 << 15);
        let ds = group
            .new_dataset::<f64>()
            .shape(h5::SimpleExtents::resizable([0usize, 5]))
            .chunk([chunk_rows, 5])
            .create("timestamp")?;
        Ok(Performance {
            ds,
            chunk_rows,
            mem: native(DataType::Float64)?,
            frame_mbit: 8.0 * frame_bytes as f64 / (1024.0 * 1024.0),
            first: None,
            prev: None,
            count: 0,
            rows: 0,
            pending: Vec::new(),
        })
    }

    pub fn chunk_bytes(&self) -> usize {
        self.chunk_rows * 40
    }

    /// Records one frame written between `start` and `end`.
    pub fn push(&mut self, start: Instant, end: Instant) {
        let first = *self.first.get_or_insert(start);
        let prev = self.prev.replace(end).unwrap_or(first);
        self.count += 1;
        let period = end.duration_since(prev).as_secs_f64();
        let runtime = end.duration_since(first).as_secs_f64();
        let rate = |mbit: f64, t: f64| if t > 0.0 { mbit / t } else { 0.0 };
        for v in [
            end.duration_since(start).as_secs_f64(),
            period,
            runtime,
            rate(self.frame_mbit, period),
            rate(self.count as f64 * self.frame_mbit, runtime),
        ] {
            self.pending.extend_from_slice(&v.to_ne_bytes());
        }
    }

    pub fn write(&mut self) -> h5::Result<()> {
        let n = self.pending.len() / 40;
        if n == 0 {
            return Ok(());
        }
        self.ds.resize([self.rows + n, 5])?;
        write_hyperslab(&self.ds, &self.mem, &[self.rows, 0], &[n, 5], &self.pending)?;
        self.rows += n;
        self.pending.clear();
        Ok(())
    }

    pub fn flush(&self) -> h5::Result<()> {
        self.ds.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_convert_and_strings_pad() {
        let mut out = Vec::new();
        push_num(
            &mut out,
            DataType::Int64,
            as_num(&AttrValue::Int64(i64::MIN)),
        );
        assert_eq!(out, i64::MIN.to_ne_bytes());
        out.clear();
        push_num(
            &mut out,
            DataType::UInt64,
            as_num(&AttrValue::UInt64(u64::MAX)),
        );
        assert_eq!(out, u64::MAX.to_ne_bytes());
        out.clear();
        push_num(&mut out, DataType::Float32, as_num(&AttrValue::Int16(-3)));
        assert_eq!(out, (-3.0f32).to_ne_bytes());
        out.clear();
        push_num(&mut out, DataType::Int32, None);
        assert_eq!(out, 0i32.to_ne_bytes());
        out.clear();
        push_str(&mut out, Some(&AttrValue::String("ab\0cd".into())));
        assert_eq!(out.len(), STRING_SIZE);
        assert_eq!(&out[..3], b"ab\0");
        out.clear();
        push_str(&mut out, Some(&AttrValue::String("x".repeat(999))));
        assert_eq!(out.len(), STRING_SIZE);
        assert_eq!(out[STRING_SIZE - 1], 0, "always NUL-terminated");
        assert_eq!(dataset_name("a/b"), "a_b");
        assert_eq!(dataset_name("."), "_");
    }
}
