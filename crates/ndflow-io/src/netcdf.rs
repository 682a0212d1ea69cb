//! NDFileNetCDF: frames into one netCDF file per capture or stream (one frame in Single
//! mode), in the layout areaDetector's NDFileNetCDF writes, through libnetcdf ([`ffi`]).
//!
//! * **Dimensions**: `numArrays` (unlimited in Capture/Stream, 1 in Single), `dim0`..`dimN-1`
//!   the frame's dims slowest first (`[numArrays, y, x]` for a Mono frame), `attrStringSize`
//!   (256) for string attributes.
//! * **Variables**: `array_data` of the frame's type (Int8/UInt8 NC_BYTE, Int16/UInt16
//!   NC_SHORT, Int32/UInt32 NC_INT, Float32 NC_FLOAT, Float64 NC_DOUBLE, as NDFileNetCDF; the
//!   unsigned ones also carry `_Unsigned = "true"`, the netCDF convention netCDF4-python and
//!   xarray read as unsigned), per frame `uniqueId`, `timeStamp`, `epicsTSSec`, `epicsTSNsec`,
//!   and one `Attr_<name>` per NDAttribute of the first frame (`[numArrays]`, strings
//!   `[numArrays, attrStringSize]`).
//! * **Global attributes**: `dataType` (NDDataType_t), `NDNetCDFFileVersion` (3.1),
//!   `numArrayDims`, `dimSize`/`dimOffset`/`dimBinning`/`dimReverse` (NDArray order), and
//!   per NDAttribute `Attr_<name>_DataType`, `_Description`, `_Source`, `_SourceType`.
//! * **File format**: CDF-2 (64-bit offsets, files over 2 GiB); Int64/UInt64 frames or
//!   attributes (which NDFileNetCDF cannot store) make a CDF-5 file with NC_INT64/NC_UINT64.
//! * **Attributes**: the set is fixed by the first frame, as in areaDetector; a later frame
//!   lacking one writes 0 (empty string), an extra one is not stored, a changed type is
//!   converted.
//!
//! Every libnetcdf error (full disk, vanished directory) is an `io::Error` the NDFile machinery
//! reports in WriteStatus/WriteMessage.

pub mod ffi;

use std::ffi::c_int;
use std::io;
use std::path::Path;

use ndflow_core::{AttrValue, DataType, NDArray, ParamDef, ParamStore};
use ndflow_runtime::port_params::{bind, plugin_layout};
use ndflow_runtime::{Built, PortType};

use crate::file::{FileWriterPlugin, Format, NdFileParams};
use ffi::{NcFile, NcType, NC_GLOBAL, NC_UNLIMITED};

ndflow_core::params! {
    /// NDFileNetCDF's own records.
    pub const NETCDF_OWN_PARAMS, pub struct NetcdfParams {
        file_format: enumeration("FileFormat", &["netCDF", "Invalid"], 0).mbb().readback_choices(&["netCDF", "Undefined"]).doc("File format (netCDF only)"),
    }
}

/// NDFile's parameters plus NDFileNetCDF's.
pub const NETCDF_PARAMS: &[ParamDef] = crate::ndfile_params!("%s%s_%3.3d.nc"; NETCDF_OWN_PARAMS);

/// The NDFileNetCDF plugin: `NetcdfFilePlugin::new()`.
pub type NetcdfFilePlugin = FileWriterPlugin<NetcdfFormat>;

/// `NDNetCDFFileVersion` (areaDetector 3.1: the ten NDDataType_t values, Int64 after UInt32).
pub const FILE_VERSION: f64 = 3.1;
/// Length of the `attrStringSize` dimension (a string attribute keeps 255 bytes + NUL).
pub const ATTR_STRING_SIZE: usize = 256;

/// The netCDF [`Format`]: one file per capture or stream.
pub struct NetcdfFormat {
    nd: NdFileParams,
    file: Option<OpenFile>,
}

impl Default for NetcdfFormat {
    fn default() -> Self {
        NetcdfFormat {
            nd: bind(&plugin_layout(NETCDF_PARAMS), NdFileParams::bind),
            file: None,
        }
    }
}

struct AttrVar {
    name: String,
    var: c_int,
    t: NcType,
}

struct OpenFile {
    nc: NcFile,
    multi: bool,
    next: usize,
    sizes: Vec<usize>,
    data_type: DataType,
    unique_id: c_int,
    time_stamp: c_int,
    ts_sec: c_int,
    ts_nsec: c_int,
    data: c_int,
    attrs: Vec<AttrVar>,
    /// Per-record scratch: start/count of the frame slab.
    start: Vec<usize>,
    count: Vec<usize>,
}

/// netCDF type of a frame: areaDetector's mapping, plus the CDF-5 64-bit types.
pub fn nc_type(t: DataType) -> NcType {
    match t {
        DataType::Int8 | DataType::UInt8 => ffi::NC_BYTE,
        DataType::Int16 | DataType::UInt16 => ffi::NC_SHORT,
        DataType::Int32 | DataType::UInt32 => ffi::NC_INT,
        DataType::Int64 => ffi::NC_INT64,
        DataType::UInt64 => ffi::NC_UINT64,
        DataType::Float32 => ffi::NC_FLOAT,
        DataType::Float64 => ffi::NC_DOUBLE,
    }
}

fn is_unsigned(t: DataType) -> bool {
    matches!(t, DataType::UInt8 | DataType::UInt16 | DataType::UInt32)
}

/// `Attr_<name>_DataType`'s text and the variable's type.
fn attr_type(v: &AttrValue) -> (&'static str, NcType, bool) {
    match v {
        AttrValue::String(_) => ("String", ffi::NC_CHAR, false),
        AttrValue::Undefined => ("Undefined", ffi::NC_BYTE, false),
        v => match v.data_type() {
            Some(t) => (t.name(), nc_type(t), is_unsigned(t)),
            None => ("Undefined", ffi::NC_BYTE, false),
        },
    }
}

/// netCDF names cannot hold '/'.
fn nc_name(name: &str) -> String {
    name.replace('/', "_")
}

/// An attribute value as one element of type `t` (integers by bit pattern, as
/// NDFileNetCDF's casts; strings zero-padded to [`ATTR_STRING_SIZE`]).
fn attr_bytes(v: Option<&AttrValue>, t: NcType, out: &mut Vec<u8>) {
    out.clear();
    if t == ffi::NC_CHAR {
        if let Some(AttrValue::String(s)) = v {
            let b = s.as_bytes();
            out.extend_from_slice(&b[..b.len().min(ATTR_STRING_SIZE - 1)]);
        }
        out.resize(ATTR_STRING_SIZE, 0);
        return;
    }
    let int: i128 = match v {
        Some(AttrValue::Int8(x)) => (*x).into(),
        Some(AttrValue::UInt8(x)) => (*x).into(),
        Some(AttrValue::Int16(x)) => (*x).into(),
        Some(AttrValue::UInt16(x)) => (*x).into(),
        Some(AttrValue::Int32(x)) => (*x).into(),
        Some(AttrValue::UInt32(x)) => (*x).into(),
        Some(AttrValue::Int64(x)) => (*x).into(),
        Some(AttrValue::UInt64(x)) => (*x).into(),
        Some(AttrValue::Float32(x)) => *x as i128,
        Some(AttrValue::Float64(x)) => *x as i128,
        _ => 0,
    };
    let float = v.and_then(AttrValue::as_f64).unwrap_or(0.0);
    match t {
        ffi::NC_BYTE => out.extend_from_slice(&(int as i8).to_ne_bytes()),
        ffi::NC_SHORT => out.extend_from_slice(&(int as i16).to_ne_bytes()),
        ffi::NC_INT => out.extend_from_slice(&(int as i32).to_ne_bytes()),
        ffi::NC_INT64 => out.extend_from_slice(&(int as i64).to_ne_bytes()),
        ffi::NC_UINT64 => out.extend_from_slice(&(int as u64).to_ne_bytes()),
        ffi::NC_FLOAT => out.extend_from_slice(&(float as f32).to_ne_bytes()),
        _ => out.extend_from_slice(&float.to_ne_bytes()),
    }
}

fn as_i32(v: usize) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}

impl OpenFile {
    fn create(path: &Path, frame: &NDArray, multi: bool) -> io::Result<OpenFile> {
        let bad = |why: String| io::Error::new(io::ErrorKind::InvalidInput, why);
        if frame.is_compressed() {
            return Err(bad(format!(
                "netCDF cannot store {}-compressed frames",
                frame.codec.name
            )));
        }
        let wide = |t: DataType| matches!(t, DataType::Int64 | DataType::UInt64);
        let cdf5 = wide(frame.data_type)
            || frame
                .attributes
                .iter()
                .any(|a| a.value.data_type().is_some_and(wide));
        let mut nc = NcFile::create(path, cdf5)?;
        let ndims = frame.ndims();
        nc.put_att_i32(NC_GLOBAL, "dataType", &[frame.data_type as i32])?;
        nc.put_att_f64(NC_GLOBAL, "NDNetCDFFileVersion", &[FILE_VERSION])?;
        nc.put_att_i32(NC_GLOBAL, "numArrayDims", &[as_i32(ndims)])?;
        let records = nc.def_dim("numArrays", if multi { NC_UNLIMITED } else { 1 })?;
        let mut dim_ids = vec![records];
        for i in 0..ndims {
            let size = frame.dims[ndims - 1 - i].size;
            dim_ids.push(nc.def_dim(&format!("dim{i}"), size)?);
        }
        let string_dim = nc.def_dim("attrStringSize", ATTR_STRING_SIZE)?;
        let field =
            |f: fn(&ndflow_core::Dim) -> i32| -> Vec<i32> { frame.dims.iter().map(f).collect() };
        nc.put_att_i32(NC_GLOBAL, "dimSize", &field(|d| as_i32(d.size)))?;
        nc.put_att_i32(NC_GLOBAL, "dimOffset", &field(|d| as_i32(d.offset)))?;
        nc.put_att_i32(NC_GLOBAL, "dimBinning", &field(|d| as_i32(d.binning)))?;
        nc.put_att_i32(NC_GLOBAL, "dimReverse", &field(|d| i32::from(d.reverse)))?;

        let unique_id = nc.def_var("uniqueId", ffi::NC_INT, &[records])?;
        let time_stamp = nc.def_var("timeStamp", ffi::NC_DOUBLE, &[records])?;
        let ts_sec = nc.def_var("epicsTSSec", ffi::NC_INT, &[records])?;
        let ts_nsec = nc.def_var("epicsTSNsec", ffi::NC_INT, &[records])?;
        let data = nc.def_var("array_data", nc_type(frame.data_type), &dim_ids)?;
        if is_unsigned(frame.data_type) {
            nc.put_att_text(data, "_Unsigned", "true")?;
        }

        let mut attrs: Vec<AttrVar> = Vec::new();
        for a in &frame.attributes {
            let name = nc_name(&a.name);
            if attrs.iter().any(|x| x.name == a.name) {
                continue;
            }
            let (type_name, t, unsigned) = attr_type(&a.value);
            let g = |suffix: &str| format!("Attr_{name}_{suffix}");
            nc.put_att_text(NC_GLOBAL, &g("DataType"), type_name)?;
            nc.put_att_text(NC_GLOBAL, &g("Description"), &a.description)?;
            nc.put_att_text(NC_GLOBAL, &g("Source"), &a.source)?;
            nc.put_att_text(NC_GLOBAL, &g("SourceType"), a.source_type.name())?;
            let dims: &[c_int] = if t == ffi::NC_CHAR {
                &[records, string_dim]
            } else {
                &[records]
            };
            let var = nc.def_var(&format!("Attr_{name}"), t, dims)?;
            if unsigned {
                nc.put_att_text(var, "_Unsigned", "true")?;
            }
            attrs.push(AttrVar {
                name: a.name.clone(),
                var,
                t,
            });
        }
        nc.enddef()?;
        let mut count = vec![1];
        count.extend(frame.dims.iter().rev().map(|d| d.size));
        Ok(OpenFile {
            nc,
            multi,
            next: 0,
            sizes: frame.sizes(),
            data_type: frame.data_type,
            unique_id,
            time_stamp,
            ts_sec,
            ts_nsec,
            data,
            attrs,
            start: vec![0; ndims + 1],
            count,
        })
    }

    fn write(&mut self, frame: &NDArray) -> io::Result<()> {
        let bad = |why: String| io::Error::new(io::ErrorKind::InvalidInput, why);
        if frame.is_compressed() {
            return Err(bad(format!(
                "netCDF cannot store {}-compressed frames",
                frame.codec.name
            )));
        }
        if frame.sizes() != self.sizes || frame.data_type != self.data_type {
            return Err(bad(format!(
                "frame {} is {} {:?}, the file holds {} {:?}",
                frame.unique_id,
                frame.data_type.name(),
                frame.sizes(),
                self.data_type.name(),
                self.sizes
            )));
        }
        if !self.multi && self.next > 0 {
            return Err(bad("a Single-mode netCDF file holds one frame".into()));
        }
        let r = self.next;
        let one = |v: &[u8]| v.to_vec();
        self.nc.put_vara(
            self.unique_id,
            &[r],
            &[1],
            &one(&frame.unique_id.to_ne_bytes()),
        )?;
        self.nc
            .put_vara(self.time_stamp, &[r], &[1], &frame.time_stamp.to_ne_bytes())?;
        // epicsTimeStamp's unsigned fields in NC_INT, as NDFileNetCDF's (int *) casts.
        self.nc.put_vara(
            self.ts_sec,
            &[r],
            &[1],
            &(frame.epics_ts.sec as i32).to_ne_bytes(),
        )?;
        self.nc.put_vara(
            self.ts_nsec,
            &[r],
            &[1],
            &(frame.epics_ts.nsec as i32).to_ne_bytes(),
        )?;
        self.start[0] = r;
        self.nc
            .put_vara(self.data, &self.start, &self.count, frame.data_bytes())?;
        let mut buf = Vec::new();
        for a in &self.attrs {
            let value = frame.attribute(&a.name).map(|x| &x.value);
            attr_bytes(value, a.t, &mut buf);
            if a.t == ffi::NC_CHAR {
                self.nc
                    .put_vara(a.var, &[r, 0], &[1, ATTR_STRING_SIZE], &buf)?;
            } else {
                self.nc.put_vara(a.var, &[r], &[1], &buf)?;
            }
        }
        self.next += 1;
        Ok(())
    }
}

impl Format for NetcdfFormat {
    const PLUGIN_TYPE: &'static str = "NDFileNetCDF";
    const PARAMS: &'static [ParamDef] = NETCDF_PARAMS;
    const MULTI_FRAME: bool = true;

    fn open(&mut self, path: &Path, frame: &NDArray, params: &ParamStore) -> io::Result<()> {
        self.file = None;
        let multi = self.nd.file_write_mode.get(params) != 0;
        self.file = Some(OpenFile::create(path, frame, multi)?);
        Ok(())
    }

    fn write(&mut self, frame: &NDArray, _params: &ParamStore) -> io::Result<()> {
        self.file
            .as_mut()
            .ok_or_else(|| io::Error::other("netCDF file not open"))?
            .write(frame)
    }

    fn close(&mut self, _params: &ParamStore) -> io::Result<()> {
        match self.file.take() {
            Some(f) => f.nc.close(),
            None => Ok(()),
        }
    }
}

/// The port type `type = "netcdf"`.
pub const PORT: PortType = PortType::plugin(
    "netcdf",
    "NDFileNetCDF",
    "netCDF files: numArrays frames, uniqueId/timestamps, NDAttributes as Attr_ variables",
    |_| Ok(Built::Plugin(std::sync::Arc::new(NetcdfFilePlugin::new()))),
);

#[cfg(test)]
mod tests {
    use super::*;
    use ndflow_core::{NDAttribute, Pool};

    fn frame(id: i32, data: &[u16]) -> NDArray {
        let mut f = NDArray::from_pixels(&Pool::unlimited(), &[3, 2], data).unwrap();
        f.unique_id = id;
        f.set_attribute(NDAttribute::new("Gain", "gain", AttrValue::Float64(1.5)));
        f.set_attribute(NDAttribute::new(
            "Name",
            "",
            AttrValue::String("sample".into()),
        ));
        f
    }

    #[test]
    fn writes_the_ndfilenetcdf_header_and_records() {
        let dir = std::env::temp_dir().join(format!("ndflow-nc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.nc");
        let mut f = OpenFile::create(&path, &frame(1, &[0; 6]), true).unwrap();
        f.write(&frame(1, &[1, 2, 3, 4, 5, 6])).unwrap();
        f.write(&frame(2, &[7, 8, 9, 10, 11, 65535])).unwrap();
        // A frame of another shape is refused with both shapes named, not a panic.
        let other = NDArray::from_pixels(&Pool::unlimited(), &[2, 2], &[0u16; 4]).unwrap();
        let e = f.write(&other).unwrap_err();
        assert!(e.to_string().contains("[2, 2]"), "{e}");
        f.nc.close().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..4], b"CDF\x02");
        let has = |s: &str| bytes.windows(s.len()).any(|w| w == s.as_bytes());
        for name in [
            "numArrays",
            "dim0",
            "dim1",
            "attrStringSize",
            "array_data",
            "uniqueId",
            "timeStamp",
            "epicsTSSec",
            "epicsTSNsec",
            "Attr_Gain",
            "Attr_Name_SourceType",
            "NDNetCDFFileVersion",
            "dimReverse",
            "_Unsigned",
        ] {
            assert!(has(name), "{name} missing");
        }
        // Big-endian UInt16 pixels of the second record.
        assert!(bytes.windows(4).any(|w| w == [0, 11, 0xff, 0xff]));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn int64_frames_make_a_cdf5_file_and_errors_are_io_errors() {
        let dir = std::env::temp_dir().join(format!("ndflow-nc5-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("b.nc");
        let fr = NDArray::from_pixels(&Pool::unlimited(), &[2], &[-1i64, 2]).unwrap();
        let mut f = OpenFile::create(&path, &fr, false).unwrap();
        f.write(&fr).unwrap();
        assert!(f.write(&fr).is_err(), "Single mode holds one frame");
        f.nc.close().unwrap();
        assert_eq!(&std::fs::read(&path).unwrap()[..4], b"CDF\x05");
        assert!(OpenFile::create(&dir.join("no/such/dir.nc"), &fr, true).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn attribute_values_convert_to_the_variable_type() {
        let mut b = Vec::new();
        attr_bytes(Some(&AttrValue::UInt8(200)), ffi::NC_BYTE, &mut b);
        assert_eq!(b, [200]);
        attr_bytes(Some(&AttrValue::Float64(2.5)), ffi::NC_INT, &mut b);
        assert_eq!(b, 2i32.to_ne_bytes());
        attr_bytes(None, ffi::NC_DOUBLE, &mut b);
        assert_eq!(b, 0f64.to_ne_bytes());
        attr_bytes(
            Some(&AttrValue::String("x".repeat(300))),
            ffi::NC_CHAR,
            &mut b,
        );
        assert_eq!(b.len(), ATTR_STRING_SIZE);
        assert_eq!(b[ATTR_STRING_SIZE - 1], 0);
    }
}
