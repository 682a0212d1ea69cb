//! NDPluginStdArrays: zero-copy in Automatic mode, `as` conversion otherwise, compressed
//! frames as their bytes, and the input passed downstream unchanged.

use std::sync::Arc;

use ndflow_core::{
    with_pixel_type, ArrayValue, Buffer, DataType, NDArray, ParamStore, ParamValue, Pixel,
};
use ndflow_plugins::std_arrays::{StdArraysPlugin, STD_ARRAYS_PARAMS};
use ndflow_runtime::port_params::{ARRAY_BASE_PARAMS, PLUGIN_BASE_PARAMS};
use ndflow_runtime::{Plugin, PluginHarness};
use num_traits::AsPrimitive;

fn array_data(h: &PluginHarness<StdArraysPlugin>) -> ArrayValue {
    match h.get("ArrayData") {
        ParamValue::Array(a) => a,
        other => panic!("ArrayData is not an array: {other:?}"),
    }
}

/// Values spanning negatives, bytes and beyond, so conversions wrap and saturate.
fn ramp<T: Pixel>(n: usize) -> Vec<T> {
    (0..n)
        .map(|i| T::from_f64((i as f64 * 37.0 - 300.0).clamp(T::MIN_F64, T::MAX_F64)))
        .collect()
}

#[test]
fn declares_itself() {
    let p = StdArraysPlugin::new();
    assert_eq!(p.plugin_type(), "NDPluginStdArrays");
    assert!(p.accepts_compressed());
    assert_eq!(p.max_threads(), 1, "ArrayData must hold the newest frame");
    let tables = [ARRAY_BASE_PARAMS, PLUGIN_BASE_PARAMS, STD_ARRAYS_PARAMS];
    assert!(ParamStore::duplicate_names(&tables).is_empty());
    let h = PluginHarness::new(StdArraysPlugin::new());
    assert_eq!(array_data(&h).len(), 0);
    let pvs = h.params.to_json();
    assert!(pvs.contains_key("ArrayData") && !pvs.contains_key("ArrayData_RBV"));
    assert_eq!(pvs["ArrayDataType_RBV"], "Automatic");
    assert_eq!(h.get("ArrayDataType"), ParamValue::Int(10));
}

#[test]
fn automatic_shares_the_frame_buffer() {
    let h = PluginHarness::new(StdArraysPlugin::new());
    for dt in DataType::ALL {
        with_pixel_type!(dt, T => {
            let data = ramp::<T>(12);
            let frame = Arc::new(NDArray::from_pixels(&h.pool, &[4, 3], &data).unwrap());
            let out = h.process_arc(&frame).unwrap();
            assert_eq!(out.len(), 1);
            assert!(Arc::ptr_eq(&out[0], &frame), "input passed downstream unchanged");
            let a = array_data(&h);
            assert!(a.buffer.ptr_eq(&frame.buffer), "{dt}: no copy in Automatic mode");
            assert_eq!((a.data_type, a.len()), (dt, 12));
            assert_eq!(&a.buffer.as_slice::<T>()[..12], &data[..]);
        });
    }
    // Choosing the frame's own type explicitly also shares.
    h.put("ArrayDataType", "Int32").unwrap();
    let frame = NDArray::from_pixels(&h.pool, &[3], &[1i32, -2, 3]).unwrap();
    let buffer = frame.buffer.clone();
    h.process(frame).unwrap();
    assert!(array_data(&h).buffer.ptr_eq(&buffer));
}

fn check_conversion<S, D>(h: &PluginHarness<StdArraysPlugin>)
where
    S: Pixel + AsPrimitive<D>,
    D: Pixel,
{
    let data = ramp::<S>(30);
    let frame = NDArray::from_pixels(&h.pool, &[5, 2, 3], &data).unwrap();
    let input = frame.buffer.clone();
    h.process(frame).unwrap();
    let a = array_data(h);
    assert_eq!((a.data_type, a.len()), (D::DATA_TYPE, 30));
    if S::DATA_TYPE != D::DATA_TYPE {
        assert!(!a.buffer.ptr_eq(&input));
    }
    let want: Vec<D> = data.iter().map(|v| v.as_()).collect();
    assert_eq!(
        &a.buffer.as_slice::<D>()[..30],
        &want[..],
        "{} -> {}",
        S::DATA_TYPE,
        D::DATA_TYPE
    );
}

#[test]
fn converts_every_type_pair() {
    let h = PluginHarness::new(StdArraysPlugin::new());
    for (i, dout) in DataType::ALL.into_iter().enumerate() {
        h.put("ArrayDataType", DataType::NAMES[i]).unwrap();
        for din in DataType::ALL {
            with_pixel_type!(din, S => with_pixel_type!(dout, D => check_conversion::<S, D>(&h)));
        }
    }
    assert!(h.put("ArrayDataType", "Complex").is_err());
}

#[test]
fn compressed_frames_pass_as_bytes() {
    let h = PluginHarness::new(StdArraysPlugin::new());
    let bytes: Vec<u8> = (0..16).map(|i| i * 3).collect();
    let mut frame = NDArray::new(&[2, 2], DataType::UInt32, Buffer::from_bytes(&bytes)).unwrap();
    frame.codec.name = "lz4".into();
    frame.compressed_size = 11;
    let frame = Arc::new(frame);
    let out = h.process_arc(&frame).unwrap();
    assert!(Arc::ptr_eq(&out[0], &frame));
    let a = array_data(&h);
    assert_eq!((a.data_type, a.len()), (DataType::UInt8, 11));
    assert!(a.buffer.ptr_eq(&frame.buffer));
    assert_eq!(a.bytes(), &bytes[..11]);
    // Int8 waveform clients get the same bytes as Int8; other types still get bytes.
    h.put("ArrayDataType", "Int8").unwrap();
    h.process_arc(&frame).unwrap();
    assert_eq!(array_data(&h).data_type, DataType::Int8);
    h.put("ArrayDataType", "Float64").unwrap();
    h.process_arc(&frame).unwrap();
    assert_eq!(
        (array_data(&h).data_type, array_data(&h).len()),
        (DataType::UInt8, 11)
    );
}

#[test]
fn short_buffer_is_an_error_not_a_panic() {
    let h = PluginHarness::new(StdArraysPlugin::new());
    let mut frame = NDArray::from_pixels(&h.pool, &[4], &[1u16, 2, 3, 4]).unwrap();
    frame.dims[0].size = 100;
    assert!(h.process(frame.clone()).is_err());
    h.put("ArrayDataType", "Float32").unwrap();
    assert!(h.process(frame).is_err());
}
