//! NDFileNexus: frames into NeXus (HDF5) files laid out by an areaDetector NeXus template
//! ([`template`]: `TemplateFilePath` + `TemplateFileName`, or the XML itself in
//! TemplateFileName), written through ndflow-io's HDF5 layer (hdf5-metno).
//!
//! * Groups get `NX_class` = their element's tag; `<Attr>` elements become HDF5 attributes;
//!   CONST and text datasets are written as the template says, ND_ATTR datasets and
//!   attributes from the first frame's NDAttributes (one missing or undefined is skipped, as
//!   areaDetector does).
//! * The `type="pArray"` dataset holds the frames: `[y, x]` (the NDArray dims reversed) in
//!   Single mode, `[n, y, x]` in Capture and Stream, growing by one frame per write (chunks of
//!   one frame; areaDetector sizes it NumCapture up front). All ten pixel types are stored
//!   natively.
//! * The template is read and checked at every file open and when TemplateFilePath or
//!   TemplateFileName changes: `FileTemplateValid` says whether it is usable; an invalid one
//!   opens no file and its error (line and element) goes to WriteMessage.
//! * The root carries `creator` ("ndflow NDFileNexus") and `file_name`.

pub mod template;

use std::io;
use std::path::Path;

use hdf5_metno as h5;
use hdf5_metno::types::VarLenUnicode;
use ndflow_core::{
    with_pixel_type, AttrValue, DataType, NDArray, ParamDef, ParamStore, ParamValue,
};
use ndflow_runtime::port_params::{bind, plugin_layout};
use ndflow_runtime::{Built, PortType};

use crate::file::{FileWriterPlugin, Format, NdFileParams};
use crate::hdf5::{string_attr, write_hyperslab};
use template::{Attr, Constant, DatasetKind, Group, Item, OutType, Template, Value};

ndflow_core::params! {
    /// NDFileNexus's own records.
    pub const NEXUS_OWN_PARAMS, pub struct NexusParams {
        file_format: enumeration("FileFormat", &["NeXus", "Invalid"], 0).mbb().readback_choices(&["NeXus", "Undefined"]).doc("File format (NeXus only)"),
        template_file_path: string("TemplateFilePath", "").long_string().doc("Directory of the NeXus template file"),
        template_file_name: string("TemplateFileName", "").long_string().doc("NeXus template file name, or the template XML itself (starts with <)"),
        file_template_valid: enumeration("FileTemplateValid", &["No", "Yes"], 0).read_only_plain().doc("The NeXus template was read and is valid"),
    }
}

/// NDFile's parameters plus NDFileNexus's.
pub const NEXUS_PARAMS: &[ParamDef] = crate::ndfile_params!("%s%s_%3.3d.nxs"; NEXUS_OWN_PARAMS);

/// The NDFileNexus plugin: `NexusFilePlugin::new()`.
pub type NexusFilePlugin = FileWriterPlugin<NexusFormat>;

/// The root's `creator` attribute.
pub const CREATOR: &str = "ndflow NDFileNexus";

/// The NeXus [`Format`]: one file per capture or stream.
pub struct NexusFormat {
    p: NexusParams,
    nd: NdFileParams,
    file: Option<OpenFile>,
}

impl Default for NexusFormat {
    fn default() -> Self {
        let layout = plugin_layout(NEXUS_PARAMS);
        NexusFormat {
            p: bind(&layout, NexusParams::bind),
            nd: bind(&layout, NdFileParams::bind),
            file: None,
        }
    }
}

struct OpenFile {
    file: h5::File,
    data: h5::Dataset,
    mem_type: h5::Datatype,
    shape: Vec<usize>,
    data_type: DataType,
    multi: bool,
    written: usize,
}

/// One value to store, typed.
#[derive(Debug, Clone, PartialEq)]
enum Scalar {
    I8(i8),
    U8(u8),
    I16(i16),
    U16(u16),
    I32(i32),
    U32(u32),
    I64(i64),
    U64(u64),
    F32(f32),
    F64(f64),
    Text(String),
}

fn resolve(v: &Value, attrs: &[ndflow_core::NDAttribute]) -> Option<Scalar> {
    Some(match v {
        Value::Constant(Constant::Text(s)) => Scalar::Text(s.clone()),
        // Ranges were checked when the template was parsed.
        Value::Constant(Constant::Int(t, i)) => match t {
            OutType::Int8 => Scalar::I8(*i as i8),
            OutType::UInt8 => Scalar::U8(*i as u8),
            OutType::Int16 => Scalar::I16(*i as i16),
            OutType::UInt16 => Scalar::U16(*i as u16),
            OutType::Int32 => Scalar::I32(*i as i32),
            OutType::UInt32 => Scalar::U32(*i as u32),
            OutType::Int64 => Scalar::I64(*i as i64),
            _ => Scalar::U64(*i as u64),
        },
        Value::Constant(Constant::Float(t, f)) => match t {
            OutType::Float32 => Scalar::F32(*f as f32),
            _ => Scalar::F64(*f),
        },
        Value::NdAttribute(name) => match &attrs.iter().find(|a| a.name == *name)?.value {
            AttrValue::Int8(x) => Scalar::I8(*x),
            AttrValue::UInt8(x) => Scalar::U8(*x),
            AttrValue::Int16(x) => Scalar::I16(*x),
            AttrValue::UInt16(x) => Scalar::U16(*x),
            AttrValue::Int32(x) => Scalar::I32(*x),
            AttrValue::UInt32(x) => Scalar::U32(*x),
            AttrValue::Int64(x) => Scalar::I64(*x),
            AttrValue::UInt64(x) => Scalar::U64(*x),
            AttrValue::Float32(x) => Scalar::F32(*x),
            AttrValue::Float64(x) => Scalar::F64(*x),
            AttrValue::String(s) => Scalar::Text(s.clone()),
            AttrValue::Undefined => return None,
        },
    })
}

/// A dataset of one element (`[1]`, as NAPI's NXmakedata), or a scalar string.
fn scalar_dataset(g: &h5::Group, name: &str, v: &Scalar) -> h5::Result<()> {
    macro_rules! one {
        ($x:expr) => {
            g.new_dataset_builder()
                .with_data(&[*$x])
                .create(name)
                .map(drop)
        };
    }
    match v {
        Scalar::I8(x) => one!(x),
        Scalar::U8(x) => one!(x),
        Scalar::I16(x) => one!(x),
        Scalar::U16(x) => one!(x),
        Scalar::I32(x) => one!(x),
        Scalar::U32(x) => one!(x),
        Scalar::I64(x) => one!(x),
        Scalar::U64(x) => one!(x),
        Scalar::F32(x) => one!(x),
        Scalar::F64(x) => one!(x),
        Scalar::Text(s) => {
            let text: String = s.chars().filter(|&c| c != '\0').collect();
            let v: VarLenUnicode = text
                .parse()
                .map_err(|e| h5::Error::from(format!("dataset {name}: {e}")))?;
            g.new_dataset::<VarLenUnicode>()
                .create(name)?
                .write_scalar(&v)
        }
    }
}

/// A scalar attribute; strings fixed-length ASCII as NDFileHDF5's.
fn scalar_attr(loc: &h5::Location, name: &str, v: &Scalar) -> h5::Result<()> {
    macro_rules! one {
        ($t:ty, $x:expr) => {
            loc.new_attr::<$t>().create(name)?.write_scalar($x)
        };
    }
    match v {
        Scalar::I8(x) => one!(i8, x),
        Scalar::U8(x) => one!(u8, x),
        Scalar::I16(x) => one!(i16, x),
        Scalar::U16(x) => one!(u16, x),
        Scalar::I32(x) => one!(i32, x),
        Scalar::U32(x) => one!(u32, x),
        Scalar::I64(x) => one!(i64, x),
        Scalar::U64(x) => one!(u64, x),
        Scalar::F32(x) => one!(f32, x),
        Scalar::F64(x) => one!(f64, x),
        Scalar::Text(s) => string_attr(loc, name, s),
    }
}

fn write_attrs(
    loc: &h5::Location,
    attrs: &[Attr],
    frame: &[ndflow_core::NDAttribute],
) -> h5::Result<()> {
    for a in attrs {
        if let Some(v) = resolve(&a.value, frame) {
            if loc.attr(&a.name).is_ok() {
                loc.delete_attr(&a.name)?;
            }
            scalar_attr(loc, &a.name, &v)
                .map_err(|e| h5::Error::from(format!("attribute {}: {e}", a.name)))?;
        }
    }
    Ok(())
}

struct Builder<'a> {
    frame: &'a NDArray,
    multi: bool,
    file_type: h5::Datatype,
    data: Option<h5::Dataset>,
}

impl Builder<'_> {
    fn group(&mut self, g: &h5::Group, spec: &Group, path: &str) -> h5::Result<()> {
        for item in &spec.items {
            match item {
                Item::Group(c) => {
                    let p = format!("{path}/{}", c.name);
                    let child = g
                        .create_group(&c.name)
                        .map_err(|e| h5::Error::from(format!("group {p}: {e}")))?;
                    string_attr(&child, "NX_class", &c.class)?;
                    write_attrs(&child, &c.attrs, &self.frame.attributes)?;
                    self.group(&child, c, &p)?;
                }
                Item::Dataset(d) => {
                    let p = format!("{path}/{}", d.name);
                    let at = |e: h5::Error| h5::Error::from(format!("dataset {p}: {e}"));
                    let ds = match &d.kind {
                        DatasetKind::Frames => Some(self.frames(g, &d.name).map_err(at)?),
                        DatasetKind::Value(v) => match resolve(v, &self.frame.attributes) {
                            Some(s) => {
                                scalar_dataset(g, &d.name, &s).map_err(at)?;
                                Some(g.dataset(&d.name)?)
                            }
                            None => None,
                        },
                    };
                    if let Some(ds) = ds {
                        write_attrs(&ds, &d.attrs, &self.frame.attributes)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn frames(&mut self, g: &h5::Group, name: &str) -> h5::Result<h5::Dataset> {
        let shape: Vec<usize> = self.frame.dims.iter().rev().map(|d| d.size).collect();
        let b = g.new_dataset_builder().empty_as(&self.file_type);
        let ds = if self.multi {
            let extents: Vec<h5::Extent> = std::iter::once(h5::Extent::new(0, None))
                .chain(shape.iter().map(|&d| h5::Extent::fixed(d)))
                .collect();
            let chunk: Vec<usize> = std::iter::once(1).chain(shape.iter().copied()).collect();
            b.shape(h5::SimpleExtents::from_vec(extents))
                .chunk(chunk)
                .create(name)?
        } else {
            b.shape(shape).create(name)?
        };
        self.data = Some(ds.clone());
        Ok(ds)
    }
}

impl OpenFile {
    fn create(path: &Path, frame: &NDArray, t: &Template, multi: bool) -> io::Result<OpenFile> {
        let h5err =
            |what: &'static str| move |e: h5::Error| io::Error::other(format!("{what}: {e}"));
        if frame.is_compressed() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("NeXus cannot store {}-compressed frames", frame.codec.name),
            ));
        }
        let file_type = with_pixel_type!(frame.data_type, T => h5::Datatype::from_type::<T>())
            .map_err(h5err("datatype"))?;
        let mem_type = file_type.clone();
        let file = h5::File::create(path).map_err(h5err("create"))?;
        let root = file.group("/").map_err(h5err("root group"))?;
        string_attr(&root, "creator", CREATOR).map_err(h5err("root attributes"))?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        string_attr(&root, "file_name", name.as_deref().unwrap_or(""))
            .map_err(h5err("root attributes"))?;
        write_attrs(&root, &t.root.attrs, &frame.attributes).map_err(h5err("root attributes"))?;
        let mut b = Builder {
            frame,
            multi,
            file_type,
            data: None,
        };
        b.group(&root, &t.root, "").map_err(h5err("template"))?;
        let data = b
            .data
            .ok_or_else(|| io::Error::other("the template made no frames dataset"))?;
        Ok(OpenFile {
            file,
            data,
            mem_type,
            shape: frame.dims.iter().rev().map(|d| d.size).collect(),
            data_type: frame.data_type,
            multi,
            written: 0,
        })
    }

    fn write(&mut self, frame: &NDArray) -> io::Result<()> {
        let bad = |why: String| io::Error::new(io::ErrorKind::InvalidInput, why);
        let shape: Vec<usize> = frame.dims.iter().rev().map(|d| d.size).collect();
        if frame.is_compressed() || shape != self.shape || frame.data_type != self.data_type {
            return Err(bad(format!(
                "frame {} is {} {:?}{}, the file holds {} {:?}",
                frame.unique_id,
                frame.data_type.name(),
                shape,
                if frame.is_compressed() {
                    " (compressed)"
                } else {
                    ""
                },
                self.data_type.name(),
                self.shape
            )));
        }
        let h5err = |e: h5::Error| io::Error::other(format!("write: {e}"));
        if self.multi {
            let n = self.written;
            let mut grown = vec![n + 1];
            grown.extend(&self.shape);
            self.data.resize(grown).map_err(h5err)?;
            let mut offset = vec![0; self.shape.len() + 1];
            offset[0] = n;
            let mut count = vec![1];
            count.extend(&self.shape);
            write_hyperslab(
                &self.data,
                &self.mem_type,
                &offset,
                &count,
                frame.data_bytes(),
            )
            .map_err(h5err)?;
        } else {
            if self.written > 0 {
                return Err(bad("a Single-mode NeXus file holds one frame".into()));
            }
            let offset = vec![0; self.shape.len()];
            write_hyperslab(
                &self.data,
                &self.mem_type,
                &offset,
                &self.shape,
                frame.data_bytes(),
            )
            .map_err(h5err)?;
        }
        self.written += 1;
        Ok(())
    }

    fn close(self) -> io::Result<()> {
        self.file
            .flush()
            .map_err(|e| io::Error::other(format!("flush: {e}")))?;
        drop(self.data);
        self.file
            .close()
            .map_err(|e| io::Error::other(format!("close: {e}")))
    }
}

impl NexusFormat {
    /// Reads the template TemplateFilePath/TemplateFileName name; publishes FileTemplateValid.
    fn load(&self, params: &ParamStore) -> Result<Template, String> {
        let res = Template::load(
            &self.p.template_file_path.get(params),
            &self.p.template_file_name.get(params),
        );
        self.p
            .file_template_valid
            .set(params, i64::from(res.is_ok()));
        res.map_err(|e| format!("NeXus template invalid: {e}"))
    }
}

impl Format for NexusFormat {
    const PLUGIN_TYPE: &'static str = "NDFileNexus";
    const PARAMS: &'static [ParamDef] = NEXUS_PARAMS;
    const MULTI_FRAME: bool = true;

    fn open(&mut self, path: &Path, frame: &NDArray, params: &ParamStore) -> io::Result<()> {
        self.file = None;
        // Checked before the file exists: an invalid template leaves no empty file behind.
        let t = self
            .load(params)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let multi = self.nd.file_write_mode.get(params) != 0;
        self.file = Some(OpenFile::create(path, frame, &t, multi)?);
        Ok(())
    }

    fn write(&mut self, frame: &NDArray, _params: &ParamStore) -> io::Result<()> {
        self.file
            .as_mut()
            .ok_or_else(|| io::Error::other("NeXus file not open"))?
            .write(frame)
    }

    fn close(&mut self, _params: &ParamStore) -> io::Result<()> {
        match self.file.take() {
            Some(f) => f.close(),
            None => Ok(()),
        }
    }

    fn param_changed(
        &mut self,
        params: &ParamStore,
        idx: usize,
        _value: &ParamValue,
    ) -> io::Result<()> {
        if self.p.template_file_path.is(idx) || self.p.template_file_name.is(idx) {
            if self.p.template_file_name.get(params).trim().is_empty() {
                self.p.file_template_valid.set(params, 0);
                return Ok(());
            }
            self.load(params)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        }
        Ok(())
    }
}

/// The port type `type = "nexus"`.
pub const PORT: PortType = PortType::plugin(
    "nexus",
    "NDFileNexus",
    "NeXus (HDF5) files laid out by an areaDetector NeXus template",
    |_| Ok(Built::Plugin(std::sync::Arc::new(NexusFilePlugin::new()))),
);

#[cfg(test)]
mod tests {
    use super::*;
    use ndflow_core::{NDAttribute, Pool};

    const T: &str = r#"<NXroot>
  <NXentry name="entry">
    <Attr name="run" type="CONST" outtype="NX_INT32">12</Attr>
    <title type="CONST">ramp</title>
    <NXinstrument name="instrument">
      <NXdetector name="detector">
        <data type="pArray"><Attr name="signal" type="CONST" outtype="NX_INT32">1</Attr></data>
        <gain type="ND_ATTR" source="Gain"><Attr name="units" type="CONST">e/ADU</Attr></gain>
        <absent type="ND_ATTR" source="NoSuchAttribute"/>
        <sample type="ND_ATTR" source="Sample"/>
      </NXdetector>
    </NXinstrument>
  </NXentry>
</NXroot>"#;

    fn frame(id: i32) -> NDArray {
        let px: Vec<u16> = (0..6).map(|i| i as u16 + 10 * id as u16).collect();
        let mut f = NDArray::from_pixels(&Pool::unlimited(), &[3, 2], &px).unwrap();
        f.unique_id = id;
        f.set_attribute(NDAttribute::new("Gain", "", AttrValue::Float32(2.5)));
        f.set_attribute(NDAttribute::new(
            "Sample",
            "",
            AttrValue::String("lyso".into()),
        ));
        f
    }

    #[test]
    fn writes_the_template_layout_and_frames() {
        let dir = std::env::temp_dir().join(format!("ndflow-nx-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.nxs");
        let t = Template::parse(T).unwrap();
        let mut f = OpenFile::create(&path, &frame(1), &t, true).unwrap();
        f.write(&frame(1)).unwrap();
        f.write(&frame(2)).unwrap();
        let other = NDArray::from_pixels(&Pool::unlimited(), &[2, 2], &[0u16; 4]).unwrap();
        assert!(f.write(&other).unwrap_err().to_string().contains("[2, 2]"));
        f.close().unwrap();

        let file = h5::File::open(&path).unwrap();
        let entry = file.group("entry").unwrap();
        let class: h5::types::FixedAscii<16> =
            entry.attr("NX_class").unwrap().read_scalar().unwrap();
        assert_eq!(class.as_str(), "NXentry");
        assert_eq!(entry.attr("run").unwrap().read_scalar::<i32>().unwrap(), 12);
        let data = file.dataset("entry/instrument/detector/data").unwrap();
        assert_eq!(data.shape(), vec![2, 2, 3]);
        let px: Vec<u16> = data.read_raw().unwrap();
        assert_eq!(&px[6..], &[20, 21, 22, 23, 24, 25]);
        let gain = file.dataset("entry/instrument/detector/gain").unwrap();
        assert_eq!(gain.read_raw::<f32>().unwrap(), vec![2.5]);
        assert!(file.dataset("entry/instrument/detector/absent").is_err());
        let title: VarLenUnicode = file.dataset("entry/title").unwrap().read_scalar().unwrap();
        assert_eq!(title.as_str(), "ramp");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn single_mode_has_no_frame_axis_and_open_errors_are_io_errors() {
        let dir = std::env::temp_dir().join(format!("ndflow-nx1-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let t = Template::parse(T).unwrap();
        let mut f = OpenFile::create(&dir.join("s.nxs"), &frame(3), &t, false).unwrap();
        f.write(&frame(3)).unwrap();
        assert!(f.write(&frame(4)).is_err());
        f.close().unwrap();
        let file = h5::File::open(dir.join("s.nxs")).unwrap();
        assert_eq!(
            file.dataset("entry/instrument/detector/data")
                .unwrap()
                .shape(),
            vec![2, 3]
        );
        let e = OpenFile::create(&dir.join("no/dir.nxs"), &frame(1), &t, true)
            .err()
            .unwrap();
        assert!(e.to_string().starts_with("create"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
