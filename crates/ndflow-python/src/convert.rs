//! Values between Rust and Python: parameter values, JSON (summary), numpy dtypes.

use ndflow_core::{DataType, ParamDef, ParamKind, ParamValue};
use numpy::{PyArrayDescr, PyArrayDescrMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString};

/// A Python value as a parameter value: int/bool → Int, float → Float, str → Str (enums
/// take their string or index, as in the config file).
pub fn to_param(v: &Bound<'_, PyAny>) -> PyResult<ParamValue> {
    if v.is_instance_of::<PyBool>() {
        return Ok(ParamValue::Int(v.extract::<bool>()? as i64));
    }
    if v.is_instance_of::<PyInt>() {
        return Ok(ParamValue::Int(v.extract::<i64>()?));
    }
    if v.is_instance_of::<PyFloat>() {
        return Ok(ParamValue::Float(v.extract::<f64>()?));
    }
    if v.is_instance_of::<PyString>() {
        return Ok(ParamValue::Str(v.extract::<String>()?));
    }
    // numpy scalars and other numbers.
    if let Ok(i) = v.call_method0("__index__").and_then(|i| i.extract::<i64>()) {
        return Ok(ParamValue::Int(i));
    }
    if let Ok(f) = v.call_method0("__float__").and_then(|f| f.extract::<f64>()) {
        return Ok(ParamValue::Float(f));
    }
    Err(PyValueError::new_err(format!(
        "value must be a number, string or boolean, not {}",
        v.get_type().name()?
    )))
}

/// A parameter value for Python: enums as their menu string (`readback` picks the readback
/// menu where it differs), arrays as numpy arrays (copies), numbers and strings as such.
pub fn from_param<'py>(
    py: Python<'py>,
    def: &ParamDef,
    v: &ParamValue,
    readback: bool,
) -> PyResult<Bound<'py, PyAny>> {
    if let (Some(choices), ParamValue::Int(i)) = (def.choices(readback), v) {
        let position = def.menu_index(*i).and_then(|m| usize::try_from(m).ok());
        if let Some(s) = position.and_then(|m| choices.get(m)) {
            return Ok(PyString::new(py, s).into_any());
        }
    }
    Ok(match v {
        ParamValue::Int(i) => i.into_pyobject(py)?.into_any(),
        ParamValue::Float(f) => f.into_pyobject(py)?.into_any(),
        ParamValue::Str(s) => PyString::new(py, s).into_any(),
        ParamValue::Array(a) => {
            let bytes = a.bytes();
            let n = a.len.min(bytes.len() / a.data_type.size().max(1));
            let raw = pyo3::types::PyBytes::new(py, &bytes[..n * a.data_type.size()]);
            let np = py.import("numpy")?;
            np.call_method1("frombuffer", (raw, dtype_of(py, a.data_type)))?
                .call_method0("copy")?
        }
    })
}

/// The numpy dtype of a pixel type.
pub fn dtype_of(py: Python<'_>, dt: DataType) -> Bound<'_, PyArrayDescr> {
    use numpy::dtype;
    match dt {
        DataType::Int8 => dtype::<i8>(py),
        DataType::UInt8 => dtype::<u8>(py),
        DataType::Int16 => dtype::<i16>(py),
        DataType::UInt16 => dtype::<u16>(py),
        DataType::Int32 => dtype::<i32>(py),
        DataType::UInt32 => dtype::<u32>(py),
        DataType::Int64 => dtype::<i64>(py),
        DataType::UInt64 => dtype::<u64>(py),
        DataType::Float32 => dtype::<f32>(py),
        DataType::Float64 => dtype::<f64>(py),
    }
}

/// The pixel type of a numpy dtype (native byte order), or None for other dtypes.
pub fn data_type_of(py: Python<'_>, d: &Bound<'_, PyArrayDescr>) -> Option<DataType> {
    DataType::ALL
        .into_iter()
        .find(|&dt| d.is_equiv_to(&dtype_of(py, dt)))
}

/// A JSON value as plain Python objects (dicts, lists, numbers, strings).
pub fn from_json<'py>(py: Python<'py>, v: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    use serde_json::Value;
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into_pyobject(py)?.into_any(),
            (None, Some(u)) => u.into_pyobject(py)?.into_any(),
            _ => n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any(),
        },
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(a) => {
            let items = a
                .iter()
                .map(|x| from_json(py, x))
                .collect::<PyResult<Vec<_>>>()?;
            PyList::new(py, items)?.into_any()
        }
        Value::Object(m) => {
            let d = PyDict::new(py);
            for (k, x) in m {
                d.set_item(k, from_json(py, x)?)?;
            }
            d.into_any()
        }
    })
}

/// "int32", "enum [Single, Multiple, Continuous]", ... for docs and `describe()`.
pub fn kind_text(def: &ParamDef) -> String {
    match def.kind {
        ParamKind::Enum(c) => format!("enum {}", c.join("|")),
        ParamKind::Array(dt) => format!("array of {}", dt.name()),
        k => k.name().to_string(),
    }
}
