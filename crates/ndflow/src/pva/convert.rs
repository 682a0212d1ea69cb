//! NDArray ⇄ NTNDArray, as ADCore's ntndArrayConverter does it.
//!
//! Outgoing frames are not copied: the `value` union member is a [`SharedBytes`] over the
//! frame's pool buffer, so the transport writes the pixels straight from it. Incoming frames
//! are copied once, into a buffer from the receiving port's pool (the pool's alignment and
//! memory accounting apply to every frame in the graph).

use ndflow_core::{
    AttrValue, Buffer, Codec, CoreError, DataType, Dim, EpicsTimeStamp, NDArray, NDAttribute, Pool,
    SourceType, POSIX_TO_EPICS_EPOCH,
};
use ndflow_pva::nt::ntndarray::{Attribute, Dimension, NtNdArray, TimeStamp};
use ndflow_pva::{ByteOrder, FieldDesc, NumArray, ScalarType, SharedBytes, Value};

/// pvData element type of an NDArray data type.
pub fn scalar_type(dt: DataType) -> ScalarType {
    match dt {
        DataType::Int8 => ScalarType::I8,
        DataType::UInt8 => ScalarType::U8,
        DataType::Int16 => ScalarType::I16,
        DataType::UInt16 => ScalarType::U16,
        DataType::Int32 => ScalarType::I32,
        DataType::UInt32 => ScalarType::U32,
        DataType::Int64 => ScalarType::I64,
        DataType::UInt64 => ScalarType::U64,
        DataType::Float32 => ScalarType::F32,
        DataType::Float64 => ScalarType::F64,
    }
}

/// NDArray data type of a pvData element type (booleans and strings have none).
pub fn data_type(t: ScalarType) -> Option<DataType> {
    Some(match t {
        ScalarType::I8 => DataType::Int8,
        ScalarType::U8 => DataType::UInt8,
        ScalarType::I16 => DataType::Int16,
        ScalarType::U16 => DataType::UInt16,
        ScalarType::I32 => DataType::Int32,
        ScalarType::U32 => DataType::UInt32,
        ScalarType::I64 => DataType::Int64,
        ScalarType::U64 => DataType::UInt64,
        ScalarType::F32 => DataType::Float32,
        ScalarType::F64 => DataType::Float64,
        ScalarType::Bool | ScalarType::String => return None,
    })
}

/// The pvData ScalarType ordinal that `codec.parameters` carries (0 boolean … 10 double).
fn scalar_ordinal(t: ScalarType) -> i32 {
    ndflow_pva::nt::ntndarray::value_selector(t).map_or(0, |i| i as i32)
}

fn scalar_from_ordinal(i: i32) -> Option<ScalarType> {
    let i = usize::try_from(i).ok()?;
    ndflow_pva::nt::ntndarray::VALUE_MEMBERS
        .get(i)
        .map(|&(_, t)| t)
}

/// The bytes of a frame, shared with the frame (an `Arc` increment, no copy).
struct FrameBytes(Buffer);

impl AsRef<[u8]> for FrameBytes {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

fn split_time(t: f64) -> TimeStamp {
    let sec = t.floor();
    TimeStamp {
        seconds_past_epoch: sec as i64,
        nanoseconds: ((t - sec) * 1e9).round().clamp(0.0, 999_999_999.0) as i32,
        user_tag: 0,
    }
}

fn attr_to_nt(a: &NDAttribute) -> Attribute {
    let (t, v) = match &a.value {
        AttrValue::Int8(x) => (ScalarType::I8, Value::I8(*x)),
        AttrValue::UInt8(x) => (ScalarType::U8, Value::U8(*x)),
        AttrValue::Int16(x) => (ScalarType::I16, Value::I16(*x)),
        AttrValue::UInt16(x) => (ScalarType::U16, Value::U16(*x)),
        AttrValue::Int32(x) => (ScalarType::I32, Value::I32(*x)),
        AttrValue::UInt32(x) => (ScalarType::U32, Value::U32(*x)),
        AttrValue::Int64(x) => (ScalarType::I64, Value::I64(*x)),
        AttrValue::UInt64(x) => (ScalarType::U64, Value::U64(*x)),
        AttrValue::Float32(x) => (ScalarType::F32, Value::F32(*x)),
        AttrValue::Float64(x) => (ScalarType::F64, Value::F64(*x)),
        AttrValue::String(s) => (ScalarType::String, Value::String(s.clone())),
        AttrValue::Undefined => (ScalarType::Bool, Value::Bool(false)),
    };
    let value = (!matches!(a.value, AttrValue::Undefined)).then_some((FieldDesc::Scalar(t), v));
    Attribute {
        name: a.name.clone(),
        value,
        descriptor: a.description.clone(),
        source_type: match a.source_type {
            SourceType::Driver => 0,
            SourceType::Param => 1,
            SourceType::EpicsPv => 2,
            SourceType::Function => 3,
            SourceType::Const => 4,
        },
        source: a.source.clone(),
    }
}

fn attr_from_nt(a: &Attribute) -> NDAttribute {
    let value = match &a.value {
        Some((_, v)) => match v {
            Value::I8(x) => AttrValue::Int8(*x),
            Value::U8(x) => AttrValue::UInt8(*x),
            Value::I16(x) => AttrValue::Int16(*x),
            Value::U16(x) => AttrValue::UInt16(*x),
            Value::I32(x) => AttrValue::Int32(*x),
            Value::U32(x) => AttrValue::UInt32(*x),
            Value::I64(x) => AttrValue::Int64(*x),
            Value::U64(x) => AttrValue::UInt64(*x),
            Value::F32(x) => AttrValue::Float32(*x),
            Value::F64(x) => AttrValue::Float64(*x),
            Value::Bool(x) => AttrValue::UInt8(*x as u8),
            Value::String(s) => AttrValue::String(s.clone()),
            _ => AttrValue::Undefined,
        },
        None => AttrValue::Undefined,
    };
    NDAttribute {
        name: a.name.clone(),
        description: a.descriptor.clone(),
        source_type: match a.source_type {
            1 => SourceType::Param,
            2 => SourceType::EpicsPv,
            3 => SourceType::Function,
            4 => SourceType::Const,
            _ => SourceType::Driver,
        },
        source: a.source.clone(),
        value,
    }
}

/// The NTNDArray of a frame; the pixel (or compressed) bytes are shared, not copied.
pub fn to_nt(frame: &NDArray) -> NtNdArray {
    let bytes = SharedBytes::from_owner(FrameBytes(frame.buffer.clone()));
    let elem = scalar_type(frame.data_type);
    let compressed = frame.is_compressed();
    let (ty, len) = if compressed {
        (ScalarType::U8, frame.compressed_size.min(bytes.len()))
    } else {
        (elem, frame.total_bytes().min(bytes.len()))
    };
    let value = bytes
        .slice(0, len)
        .and_then(|b| NumArray::from_shared(ty, ByteOrder::NATIVE, b));
    // pvData time is POSIX; NDArray times are EPICS-epoch seconds.
    let epics = POSIX_TO_EPICS_EPOCH as i64;
    let mut data_ts = split_time(frame.time_stamp);
    // Saturating: a frame's time may come from a peer (a far-off one is its own problem, a
    // wrapped one would be ours).
    data_ts.seconds_past_epoch = data_ts.seconds_past_epoch.saturating_add(epics);
    NtNdArray {
        value,
        codec_name: if compressed {
            frame.codec.name.clone()
        } else {
            String::new()
        },
        codec_parameters: Some(scalar_ordinal(elem)),
        compressed_size: len as i64,
        uncompressed_size: frame.total_bytes() as i64,
        dimension: frame
            .dims
            .iter()
            .map(|d| Dimension {
                size: d.size as i32,
                offset: d.offset as i32,
                full_size: d.size as i32,
                binning: d.binning.max(1) as i32,
                reverse: d.reverse,
            })
            .collect(),
        unique_id: frame.unique_id,
        data_time_stamp: data_ts,
        attribute: frame.attributes.iter().map(attr_to_nt).collect(),
        alarm: (0, 0, String::new()),
        time_stamp: TimeStamp {
            seconds_past_epoch: frame.epics_ts.sec as i64 + epics,
            nanoseconds: frame.epics_ts.nsec as i32,
            user_tag: 0,
        },
    }
}

/// Why a received NTNDArray could not become a frame.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// The pool is at its cap: the frame is dropped at the source (counted by the runtime).
    #[error(transparent)]
    Pool(#[from] CoreError),
    #[error("invalid NTNDArray: {0}")]
    Invalid(String),
}

impl From<&str> for ConvertError {
    fn from(s: &str) -> Self {
        ConvertError::Invalid(s.to_string())
    }
}

impl From<String> for ConvertError {
    fn from(s: String) -> Self {
        ConvertError::Invalid(s)
    }
}

/// A received NTNDArray as a frame (one copy into `pool`). Compressed frames stay compressed,
/// with their codec name and original type, for a Codec plugin downstream.
pub fn from_nt(nt: &NtNdArray, pool: &Pool) -> Result<NDArray, ConvertError> {
    let value = nt.value.as_ref().ok_or("NTNDArray has no value selected")?;
    let compressed = !nt.codec_name.is_empty();
    let elem = if compressed {
        nt.codec_parameters
            .and_then(scalar_from_ordinal)
            .and_then(data_type)
            .ok_or_else(|| {
                ConvertError::Invalid(format!(
                    "compressed frame ({}) without a valid codec.parameters element type",
                    nt.codec_name
                ))
            })?
    } else {
        data_type(value.scalar_type()).ok_or_else(|| {
            ConvertError::Invalid(format!(
                "unsupported element type {:?}",
                value.scalar_type()
            ))
        })?
    };
    if nt.dimension.is_empty() || nt.dimension.len() > ndflow_core::MAX_DIMS {
        return Err(format!("bad number of dimensions {}", nt.dimension.len()).into());
    }
    let mut dims = Vec::with_capacity(nt.dimension.len());
    for d in &nt.dimension {
        let size = usize::try_from(d.size)
            .map_err(|_| ConvertError::Invalid(format!("bad dimension size {}", d.size)))?;
        dims.push(Dim {
            size,
            offset: usize::try_from(d.offset).unwrap_or(0),
            binning: usize::try_from(d.binning).unwrap_or(1).max(1),
            reverse: d.reverse,
        });
    }
    let n: usize = dims
        .iter()
        .try_fold(1usize, |acc, d| acc.checked_mul(d.size))
        .ok_or("dimensions overflow")?;
    let raw = value.bytes_in(ByteOrder::NATIVE);
    let need = if compressed {
        raw.len()
    } else {
        n.checked_mul(elem.size()).ok_or("dimensions overflow")?
    };
    if raw.len() < need {
        return Err(format!("value holds {} bytes, dimensions need {need}", raw.len()).into());
    }
    let mut buf = pool.alloc(need)?;
    buf.as_mut_slice::<u8>().copy_from_slice(&raw[..need]);
    let buffer = buf.freeze();
    let epics = POSIX_TO_EPICS_EPOCH as i64;
    let ts = &nt.data_time_stamp;
    Ok(NDArray {
        dims,
        data_type: elem,
        unique_id: nt.unique_id,
        // Saturating: the seconds are the sender's, any i64 (a wrapped difference would turn
        // the far past into the far future).
        time_stamp: ts.seconds_past_epoch.saturating_sub(epics) as f64
            + ts.nanoseconds as f64 * 1e-9,
        epics_ts: EpicsTimeStamp {
            sec: u32::try_from(nt.time_stamp.seconds_past_epoch.saturating_sub(epics)).unwrap_or(0),
            nsec: u32::try_from(nt.time_stamp.nanoseconds).unwrap_or(0),
        },
        attributes: nt.attribute.iter().map(attr_from_nt).collect(),
        codec: if compressed {
            Codec {
                name: nt.codec_name.clone(),
                ..Codec::default()
            }
        } else {
            Codec::default()
        },
        compressed_size: need,
        buffer,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndflow_core::ColorMode;

    #[test]
    fn round_trip_all_types_shares_buffer() {
        let pool = Pool::unlimited();
        for dt in DataType::ALL {
            let bytes: Vec<u8> = (0..(6 * 4 * dt.size()))
                .map(|i| (i * 7 % 251) as u8)
                .collect();
            let mut b = pool.alloc(bytes.len()).unwrap();
            b.as_mut_slice::<u8>().copy_from_slice(&bytes);
            let mut f = NDArray::new(&[6, 4], dt, b.freeze()).unwrap();
            f.unique_id = 42;
            f.time_stamp = 1234.5;
            f.epics_ts = EpicsTimeStamp { sec: 99, nsec: 7 };
            f.set_color_mode(ColorMode::Mono);
            f.set_attribute(NDAttribute::new(
                "Gain",
                "det gain",
                AttrValue::Float64(2.5),
            ));
            let nt = to_nt(&f);
            let v = nt.value.as_ref().unwrap();
            // Zero copy: the NTNDArray's bytes are the frame buffer's memory.
            assert_eq!(v.bytes().as_ptr(), f.buffer.as_ptr());
            assert_eq!(v.scalar_type(), scalar_type(dt));
            assert_eq!(nt.dimension[0].size, 6);
            let back = from_nt(&nt, &pool).unwrap();
            assert_eq!(back.data_type, dt);
            assert_eq!(back.sizes(), vec![6, 4]);
            assert_eq!(back.data_bytes(), &bytes[..]);
            assert_eq!(back.unique_id, 42);
            assert!((back.time_stamp - 1234.5).abs() < 1e-6);
            assert_eq!(back.epics_ts, f.epics_ts);
            assert_eq!(
                back.attribute("Gain").unwrap().value,
                AttrValue::Float64(2.5)
            );
            assert_eq!(back.color_mode(), ColorMode::Mono);
        }
    }

    /// Found by fuzzing (pva_client): times at the ends of i64 from a peer subtracted the
    /// epoch offset with overflow (a panic with overflow checks, a wrap to the far future
    /// without).
    #[test]
    fn extreme_times_from_a_peer_saturate() {
        let pool = Pool::unlimited();
        let mut b = pool.alloc(4).unwrap();
        b.as_mut_slice::<u8>().copy_from_slice(&[1, 2, 3, 4]);
        let f = NDArray::new(&[2, 2], DataType::UInt8, b.freeze()).unwrap();
        let mut nt = to_nt(&f);
        for (sec, past) in [(i64::MIN, true), (i64::MIN + 1, true), (i64::MAX, false)] {
            nt.data_time_stamp.seconds_past_epoch = sec;
            nt.time_stamp.seconds_past_epoch = sec;
            let back = from_nt(&nt, &pool).unwrap();
            assert_eq!(back.time_stamp < 0.0, past, "{sec}: {}", back.time_stamp);
            assert_eq!(back.epics_ts.sec, 0, "{sec}: not a u32 of seconds");
        }
        // And back out: a frame time beyond i64 seconds does not wrap either.
        let mut far = f.clone();
        far.time_stamp = f64::MAX;
        assert_eq!(to_nt(&far).data_time_stamp.seconds_past_epoch, i64::MAX);
        far.time_stamp = f64::MIN;
        assert!(to_nt(&far).data_time_stamp.seconds_past_epoch < 0);
    }

    #[test]
    fn compressed_keeps_codec_and_type() {
        let pool = Pool::unlimited();
        let mut b = pool.alloc(10).unwrap();
        b.as_mut_slice::<u8>()
            .copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        let mut f = NDArray::new(&[1], DataType::UInt8, b.freeze()).unwrap();
        f.dims = vec![Dim::new(100), Dim::new(50)];
        f.data_type = DataType::UInt16;
        f.codec.name = "lz4".into();
        f.compressed_size = 7;
        let nt = to_nt(&f);
        assert_eq!(nt.codec_name, "lz4");
        assert_eq!(nt.codec_parameters, Some(6)); // ushort
        assert_eq!(nt.compressed_size, 7);
        assert_eq!(nt.uncompressed_size, 100 * 50 * 2);
        assert_eq!(nt.value.as_ref().unwrap().len(), 7);
        let back = from_nt(&nt, &pool).unwrap();
        assert_eq!(back.codec.name, "lz4");
        assert_eq!(back.data_type, DataType::UInt16);
        assert_eq!(back.data_bytes(), &[1, 2, 3, 4, 5, 6, 7]);
    }

    #[test]
    fn bad_input_is_an_error() {
        let pool = Pool::unlimited();
        let mut nt = NtNdArray {
            value: Some(NumArray::from_slice(&[1u16, 2, 3])),
            codec_name: String::new(),
            codec_parameters: None,
            compressed_size: 0,
            uncompressed_size: 0,
            dimension: vec![Dimension {
                size: 4,
                binning: 1,
                ..Dimension::default()
            }],
            unique_id: 1,
            data_time_stamp: TimeStamp::default(),
            attribute: Vec::new(),
            alarm: (0, 0, String::new()),
            time_stamp: TimeStamp::default(),
        };
        assert!(from_nt(&nt, &pool)
            .unwrap_err()
            .to_string()
            .contains("need 8"));
        nt.dimension[0].size = -1;
        assert!(from_nt(&nt, &pool).is_err());
        nt.dimension.clear();
        assert!(from_nt(&nt, &pool).is_err());
        nt.value = None;
        assert!(from_nt(&nt, &pool).is_err());
    }
}
