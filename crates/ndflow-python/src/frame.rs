//! `ndflow.Frame`: one frame of the pipeline, its pixels a read-only numpy view.

use std::ffi::c_void;
use std::sync::Arc;

use ndflow_core::{AttrValue, NDArray, Pool};
use numpy::npyffi::{npy_intp, NpyTypes, PY_ARRAY_API};
use numpy::PyArrayDescrMethods;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::convert::dtype_of;

/// One frame: metadata plus pixels shared with the pipeline (never copied into Python).
///
/// `array` is a read-only numpy view of the pooled buffer; the Frame keeps the buffer alive,
/// so the view stays valid after the pipeline is stopped or closed. The buffer returns to
/// its pool when the last Frame and view holding it are gone.
#[pyclass(frozen, module = "ndflow", name = "Frame")]
pub struct Frame {
    pub(crate) arr: Arc<NDArray>,
}

impl Frame {
    pub fn new(arr: Arc<NDArray>) -> Frame {
        Frame { arr }
    }
}

/// A read-only numpy array over the frame's pixels whose base object is `owner` (the Frame).
fn array_view<'py>(owner: &Bound<'py, Frame>) -> PyResult<Bound<'py, PyAny>> {
    let py = owner.py();
    let arr = &owner.get().arr;
    if arr.is_compressed() {
        return Err(PyValueError::new_err(format!(
            "frame {} is compressed (codec '{}'): use .decompressed() for its pixels",
            arr.unique_id, arr.codec.name
        )));
    }
    let need = arr.total_bytes();
    let bytes: &[u8] = &arr.buffer;
    if bytes.len() < need {
        return Err(PyValueError::new_err(format!(
            "frame {} holds {} bytes, its dims and type need {need}",
            arr.unique_id,
            bytes.len()
        )));
    }
    // numpy's first axis is the slowest: areaDetector's dims reversed.
    let mut shape: Vec<npy_intp> = arr.dims.iter().rev().map(|d| d.size as npy_intp).collect();
    let descr = dtype_of(py, arr.data_type).into_dtype_ptr();
    // SAFETY: numpy's C API is called with the GIL held (`py`). `descr` is a new reference
    // that PyArray_NewFromDescr steals. `shape` has `nd` entries and outlives the call (numpy
    // copies it). The data pointer addresses `need` initialised bytes (checked above) of a
    // buffer that is immutable while shared (`Arc<NDArray>`), 64-byte aligned, and kept
    // alive by `owner`, which becomes the array's base object below: the array (and any view
    // of it) holds a reference to the Frame, which holds the Arc. Flags 0 make the array
    // read-only, so Python can never write to pixels other frames may share. Null strides
    // mean C-contiguous, which is the frame's layout (dims[0] fastest).
    unsafe {
        let ptr = PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            PY_ARRAY_API.get_type_object(py, NpyTypes::PyArray_Type),
            descr,
            shape.len() as i32,
            shape.as_mut_ptr(),
            std::ptr::null_mut(),
            bytes.as_ptr() as *mut c_void,
            0,
            std::ptr::null_mut(),
        );
        let view = Bound::from_owned_ptr_or_err(py, ptr)?;
        // SetBaseObject steals the reference we hand it (the clone of `owner`).
        let base = owner.clone().into_any().into_ptr();
        if PY_ARRAY_API.PyArray_SetBaseObject(py, ptr as *mut _, base) < 0 {
            return Err(PyErr::fetch(py));
        }
        Ok(view)
    }
}

fn attr_value<'py>(py: Python<'py>, v: &AttrValue) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        AttrValue::Int8(x) => x.into_pyobject(py)?.into_any(),
        AttrValue::UInt8(x) => x.into_pyobject(py)?.into_any(),
        AttrValue::Int16(x) => x.into_pyobject(py)?.into_any(),
        AttrValue::UInt16(x) => x.into_pyobject(py)?.into_any(),
        AttrValue::Int32(x) => x.into_pyobject(py)?.into_any(),
        AttrValue::UInt32(x) => x.into_pyobject(py)?.into_any(),
        AttrValue::Int64(x) => x.into_pyobject(py)?.into_any(),
        AttrValue::UInt64(x) => x.into_pyobject(py)?.into_any(),
        AttrValue::Float32(x) => x.into_pyobject(py)?.into_any(),
        AttrValue::Float64(x) => x.into_pyobject(py)?.into_any(),
        AttrValue::String(s) => s.into_pyobject(py)?.into_any(),
        AttrValue::Undefined => py.None().into_bound(py),
    })
}

#[pymethods]
impl Frame {
    /// The pixels as a read-only numpy array (no copy), shape = dims reversed
    /// (e.g. (SizeY, SizeX) for Mono, (SizeY, SizeX, 3) for RGB1).
    #[getter]
    fn array<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        array_view(slf)
    }

    /// numpy's protocol: `np.asarray(frame)` is `frame.array`.
    #[pyo3(signature = (dtype=None, copy=None))]
    fn __array__<'py>(
        slf: &Bound<'py, Self>,
        dtype: Option<Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let view = array_view(slf)?;
        let view = match dtype {
            Some(d) => view.call_method1("astype", (d,))?,
            None => view,
        };
        if copy == Some(true) {
            return view.call_method0("copy");
        }
        Ok(view)
    }

    /// The frame's uniqueId (the source's ArrayCounter).
    #[getter]
    fn unique_id(&self) -> i32 {
        self.arr.unique_id
    }

    /// Seconds since the EPICS epoch (1990), as areaDetector's timeStamp.
    #[getter]
    fn timestamp(&self) -> f64 {
        self.arr.time_stamp
    }

    /// (seconds, nanoseconds) since the EPICS epoch.
    #[getter]
    fn epics_ts(&self) -> (u32, u32) {
        (self.arr.epics_ts.sec, self.arr.epics_ts.nsec)
    }

    /// Per dimension (fastest first): size, offset, binning and reverse.
    #[getter]
    fn dims<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items = self
            .arr
            .dims
            .iter()
            .map(|d| {
                let x = PyDict::new(py);
                x.set_item("size", d.size)?;
                x.set_item("offset", d.offset)?;
                x.set_item("binning", d.binning)?;
                x.set_item("reverse", d.reverse)?;
                Ok(x)
            })
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    /// "Mono", "RGB1", ... (the ColorMode attribute; Mono when absent).
    #[getter]
    fn color_mode(&self) -> &'static str {
        self.arr.color_mode().name()
    }

    /// The pixel type name ("UInt16", ...); for compressed frames the uncompressed type.
    #[getter]
    fn data_type(&self) -> &'static str {
        self.arr.data_type.name()
    }

    /// Attributes by name: numbers, strings, or None (undefined).
    #[getter]
    fn attributes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for a in &self.arr.attributes {
            d.set_item(&a.name, attr_value(py, &a.value)?)?;
        }
        Ok(d)
    }

    /// The codec name ("jpeg", "blosc", "lz4", "bslz4", ...) or None when uncompressed.
    #[getter]
    fn codec(&self) -> Option<String> {
        self.arr
            .is_compressed()
            .then(|| self.arr.codec.name.clone())
    }

    /// Bytes of data the frame holds (the compressed size when compressed).
    #[getter]
    fn nbytes(&self) -> usize {
        self.arr.compressed_size
    }

    /// This frame if uncompressed; otherwise a new frame holding the decompressed pixels
    /// (allocated from the frame's pool), with the same metadata.
    fn decompressed(slf: &Bound<'_, Self>) -> PyResult<Py<Frame>> {
        let py = slf.py();
        let arr = slf.get().arr.clone();
        if !arr.is_compressed() {
            return Ok(slf.clone().unbind());
        }
        let pool = arr.buffer.pool().unwrap_or_else(Pool::unlimited);
        let out = py
            .detach(|| ndflow_plugins::codec::decompress(&arr, &pool))
            .map_err(|e| PyValueError::new_err(format!("frame {}: {e}", arr.unique_id)))?;
        Py::new(py, Frame::new(Arc::new(out)))
    }

    /// The address of the pooled pixel buffer (for tests of zero-copy delivery).
    #[getter]
    fn _buffer_address(&self) -> usize {
        self.arr.buffer.as_ptr() as usize
    }

    fn __repr__(&self) -> String {
        let sizes: Vec<String> = self.arr.dims.iter().map(|d| d.size.to_string()).collect();
        let codec = match self.codec() {
            Some(c) => format!(", codec={c} ({} bytes)", self.arr.compressed_size),
            None => String::new(),
        };
        format!(
            "<ndflow.Frame unique_id={} dims=[{}] {} {}{codec}>",
            self.arr.unique_id,
            sizes.join(", "),
            self.arr.data_type.name(),
            self.color_mode()
        )
    }
}
