use crate::common::{hex, ORDERS};
use ndflow_pva::wire::value::Element;
use ndflow_pva::{
    BitSet, ByteOrder, DecodeError, FieldDesc, NumArray, Reader, ScalarType, SharedBytes,
    TypeCache, Value, Writer,
};

fn desc_round_trip(d: &FieldDesc, order: ByteOrder) -> Vec<u8> {
    let mut w = Writer::new(order);
    d.encode(&mut w).unwrap();
    let mut r = Reader::new(w.as_slice(), order);
    let back = FieldDesc::decode(&mut r, &mut TypeCache::new()).unwrap();
    assert_eq!(back.as_ref(), Some(d));
    assert!(r.is_empty());
    w.into_inner()
}

fn value_round_trip(d: &FieldDesc, v: &Value, order: ByteOrder) -> Vec<u8> {
    let mut w = Writer::new(order);
    v.encode(d, &mut w).unwrap();
    let mut r = Reader::new(w.as_slice(), order);
    let back = Value::decode(d, &mut r, &mut TypeCache::new()).unwrap();
    assert_eq!(&back, v, "{d:?}");
    assert!(r.is_empty());
    w.into_inner()
}

fn sample(t: ScalarType) -> Value {
    match t {
        ScalarType::Bool => Value::Bool(true),
        ScalarType::I8 => Value::I8(-100),
        ScalarType::I16 => Value::I16(-30000),
        ScalarType::I32 => Value::I32(-2_000_000_000),
        ScalarType::I64 => Value::I64(-9_000_000_000_000),
        ScalarType::U8 => Value::U8(200),
        ScalarType::U16 => Value::U16(60000),
        ScalarType::U32 => Value::U32(4_000_000_000),
        ScalarType::U64 => Value::U64(18_000_000_000_000_000_000),
        ScalarType::F32 => Value::F32(-1.25),
        ScalarType::F64 => Value::F64(6.02e23),
        ScalarType::String => Value::String("héllo".into()),
    }
}

fn sample_array(t: ScalarType) -> Value {
    fn a<T: Element>(v: &[T]) -> Value {
        Value::Array(NumArray::from_slice(v))
    }
    match t {
        ScalarType::Bool => Value::Array(NumArray::from_bools(&[true, false, true])),
        ScalarType::I8 => a(&[-1i8, 2, -3]),
        ScalarType::I16 => a(&[-1i16, 300, i16::MIN]),
        ScalarType::I32 => a(&[i32::MAX, -5]),
        ScalarType::I64 => a(&[i64::MIN, 7]),
        ScalarType::U8 => a(&(0..=255u8).collect::<Vec<_>>()),
        ScalarType::U16 => a(&[1u16, 0xfffe]),
        ScalarType::U32 => a(&[0xdead_beefu32]),
        ScalarType::U64 => a::<u64>(&[]),
        ScalarType::F32 => a(&[0.5f32, -0.0]),
        ScalarType::F64 => a(&[1e-300f64, 2.0, f64::INFINITY]),
        ScalarType::String => Value::StringArray(vec!["a".into(), String::new(), "ccc".into()]),
    }
}

#[test]
fn every_scalar_and_array_type_code() {
    for order in ORDERS {
        for t in ScalarType::ALL {
            let d = FieldDesc::Scalar(t);
            assert_eq!(desc_round_trip(&d, order), vec![t.code()]);
            value_round_trip(&d, &sample(t), order);
            let d = FieldDesc::ScalarArray(t);
            assert_eq!(desc_round_trip(&d, order), vec![t.code() | 0x08]);
            value_round_trip(&d, &sample_array(t), order);
            value_round_trip(&d, &Value::default_for(&d), order);
        }
    }
    let codes: Vec<u8> = ScalarType::ALL.iter().map(|t| t.code()).collect();
    assert_eq!(
        codes,
        [0x00, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x42, 0x43, 0x60]
    );
}

fn compound() -> FieldDesc {
    let inner = FieldDesc::structure("inner_t", vec![("x", FieldDesc::Scalar(ScalarType::I32))]);
    let u = FieldDesc::union(
        "",
        vec![
            ("s", FieldDesc::Scalar(ScalarType::String)),
            ("d", FieldDesc::ScalarArray(ScalarType::F64)),
        ],
    );
    let (FieldDesc::Structure(im), FieldDesc::Union(um)) = (inner.clone(), u.clone()) else {
        unreachable!()
    };
    FieldDesc::structure(
        "",
        vec![
            ("inner", inner),
            ("u", u),
            ("sa", FieldDesc::StructureArray(im)),
            ("ua", FieldDesc::UnionArray(um)),
            ("any", FieldDesc::Any),
            ("anys", FieldDesc::AnyArray),
        ],
    )
}

fn compound_value() -> Value {
    Value::Structure(vec![
        Value::Structure(vec![Value::I32(42)]),
        Value::Union(Some(Box::new((0, Value::String("sel".into()))))),
        Value::StructureArray(vec![
            Some(vec![Value::I32(1)]),
            None,
            Some(vec![Value::I32(3)]),
        ]),
        Value::UnionArray(vec![
            None,
            Some((1, Value::Array(NumArray::from_slice(&[1.0f64, 2.0])))),
        ]),
        Value::Any(Some(Box::new((
            FieldDesc::Scalar(ScalarType::I32),
            Value::I32(-9),
        )))),
        Value::AnyArray(vec![
            Some((
                FieldDesc::Scalar(ScalarType::String),
                Value::String("x".into()),
            )),
            None,
        ]),
    ])
}

#[test]
fn compound_type_codes_and_values() {
    let d = compound();
    for order in ORDERS {
        let b = desc_round_trip(&d, order);
        assert_eq!(&b[..4], &[0x80, 0x00, 0x06, 0x05]);
        assert!(b.contains(&0x88) && b.contains(&0x89) && b.contains(&0x82) && b.contains(&0x8A));
        value_round_trip(&d, &compound_value(), order);
        value_round_trip(&d, &Value::default_for(&d), order);
    }
    // Empty union and empty any are the null byte.
    let mut w = Writer::new(ByteOrder::Little);
    Value::Union(None)
        .encode(&FieldDesc::union("", vec![]), &mut w)
        .unwrap();
    Value::Any(None).encode(&FieldDesc::Any, &mut w).unwrap();
    assert_eq!(w.as_slice(), &[0xff, 0xff]);
    assert_eq!(d.type_id(), "structure");
    assert_eq!(d.bit_count(), 1 + 2 + 1 + 1 + 1 + 1 + 1);
    assert_eq!(d.find("inner.x").map(|(b, _)| b), Some(2));
    assert_eq!(d.find("anys").map(|(b, _)| b), Some(7));
}

#[test]
fn mismatched_values_are_encode_errors() {
    let mut w = Writer::new(ByteOrder::Little);
    assert!(Value::I32(1)
        .encode(&FieldDesc::Scalar(ScalarType::I64), &mut w)
        .is_err());
    assert!(Value::Structure(vec![])
        .encode(&compound(), &mut w)
        .is_err());
    let u = FieldDesc::union("", vec![("a", FieldDesc::Scalar(ScalarType::I8))]);
    assert!(Value::Union(Some(Box::new((3, Value::I8(1)))))
        .encode(&u, &mut w)
        .is_err());
    let arr = Value::Array(NumArray::from_slice(&[1u16]));
    assert!(arr
        .encode(&FieldDesc::ScalarArray(ScalarType::I16), &mut w)
        .is_err());
}

#[test]
fn type_cache_define_and_reuse() {
    for order in ORDERS {
        let d = compound();
        let mut w = Writer::new(order);
        // Struct with two fields: first defines key 7, second reuses it.
        w.u8(0x80);
        w.string("pair").unwrap();
        w.size(2).unwrap();
        w.string("a").unwrap();
        w.u8(0xFD);
        w.u16(7);
        d.encode(&mut w).unwrap();
        w.string("b").unwrap();
        w.u8(0xFE);
        w.u16(7);
        let mut cache = TypeCache::new();
        let got = FieldDesc::decode(&mut Reader::new(w.as_slice(), order), &mut cache)
            .unwrap()
            .unwrap();
        let want = FieldDesc::structure("pair", vec![("a", d.clone()), ("b", d.clone())]);
        assert_eq!(got, want);
        assert_eq!(cache.len(), 1);
        // A later message reuses the same key via the per-connection cache.
        let mut w2 = Writer::new(order);
        w2.u8(0xFE);
        w2.u16(7);
        let again = FieldDesc::decode(&mut Reader::new(w2.as_slice(), order), &mut cache).unwrap();
        assert_eq!(again, Some(d));
        assert_eq!(
            FieldDesc::decode(
                &mut Reader::new(w2.as_slice(), order),
                &mut TypeCache::new()
            ),
            Err(DecodeError::UnknownCacheKey(7))
        );
    }
    // Null type.
    assert_eq!(
        FieldDesc::decode(
            &mut Reader::new(&[0xff], ByteOrder::Little),
            &mut TypeCache::new()
        ),
        Ok(None)
    );
}

#[test]
fn bad_type_descriptions() {
    let mut c = TypeCache::new();
    for bad in [
        "18",
        "10",
        "40",
        "44",
        "61 ",
        "83",
        "88 22",
        "89 80 00 00",
        "fc",
        "80 00 01 01\"a\" ff",
    ] {
        let b = hex(bad);
        assert!(
            FieldDesc::decode(&mut Reader::new(&b, ByteOrder::Little), &mut c).is_err(),
            "{bad}"
        );
    }
    // Depth limit: 30 nested structures.
    let mut d = FieldDesc::Scalar(ScalarType::I8);
    for _ in 0..30 {
        d = FieldDesc::structure("", vec![("f", d)]);
    }
    let mut w = Writer::new(ByteOrder::Little);
    d.encode(&mut w).unwrap();
    assert!(matches!(
        FieldDesc::decode(&mut Reader::new(w.as_slice(), ByteOrder::Little), &mut c),
        Err(DecodeError::TooDeep(_))
    ));
    // A huge member count with no bytes behind it fails without allocating.
    let b = hex("80 00 fe ff ff ff 7e");
    assert!(FieldDesc::decode(&mut Reader::new(&b, ByteOrder::Little), &mut c).is_err());
}

#[test]
fn deeply_nested_any_is_refused() {
    // any holding an any holding an any ... 200 deep.
    let mut b = vec![0x82u8; 200];
    b.push(0xff);
    let r = Value::decode(
        &FieldDesc::Any,
        &mut Reader::new(&b, ByteOrder::Little),
        &mut TypeCache::new(),
    );
    assert!(matches!(r, Err(DecodeError::TooDeep(_))));
}

#[test]
fn partial_encoding_by_bitset() {
    let d = compound();
    let v = compound_value();
    for order in ORDERS {
        // bits: 0 root, 1 inner, 2 inner.x, 3 u, 4 sa, 5 ua, 6 any, 7 anys
        let bits = BitSet::from_bits(&[2, 6]);
        let mut w = Writer::new(order);
        v.encode_partial(&d, &bits, &mut w).unwrap();
        let mut expect = Writer::new(order);
        expect.i32(42);
        expect.u8(0x22);
        expect.i32(-9);
        assert_eq!(w.as_slice(), expect.as_slice());
        let mut got = Value::default_for(&d);
        got.decode_partial(
            &d,
            &bits,
            &mut Reader::new(w.as_slice(), order),
            &mut TypeCache::new(),
        )
        .unwrap();
        assert_eq!(got.field(&d, "inner.x"), Some(&Value::I32(42)));
        assert_eq!(got.field(&d, "u"), Some(&Value::Union(None)));
        // Struct bit set: descendants' bits are redundant and not serialised twice.
        let mut w1 = Writer::new(order);
        v.encode_partial(&d, &BitSet::from_bits(&[1, 2]), &mut w1)
            .unwrap();
        assert_eq!(w1.len(), 4);
        // Root bit = full encoding.
        let mut full = Writer::new(order);
        v.encode(&d, &mut full).unwrap();
        let mut root = Writer::new(order);
        v.encode_partial(&d, &BitSet::from_bits(&[0]), &mut root)
            .unwrap();
        assert_eq!(full.as_slice(), root.as_slice());
        let mut all = Value::I8(0);
        all.decode_partial(
            &d,
            &BitSet::from_bits(&[0]),
            &mut Reader::new(root.as_slice(), order),
            &mut TypeCache::new(),
        )
        .unwrap();
        assert_eq!(all, v);
        // Every field selected individually equals the full encoding.
        let every = BitSet::from_bits(&[2, 3, 4, 5, 6, 7]);
        let mut each = Writer::new(order);
        v.encode_partial(&d, &every, &mut each).unwrap();
        assert_eq!(each.as_slice(), full.as_slice());
    }
}

#[test]
fn arrays_are_zero_copy() {
    let pixels: Vec<u16> = (0..1000).collect();
    let shared = SharedBytes::from_owner(bytemuck::cast_slice::<u16, u8>(&pixels).to_vec());
    let base = shared.as_ptr();
    let arr = NumArray::from_shared(ScalarType::U16, ByteOrder::NATIVE, shared).unwrap();
    assert_eq!(arr.len(), 1000);
    let d = FieldDesc::ScalarArray(ScalarType::U16);
    // Encoding in native order writes the bytes as they are; decoding from a shared message
    // borrows it.
    let mut w = Writer::new(ByteOrder::NATIVE);
    Value::Array(arr.clone()).encode(&d, &mut w).unwrap();
    let msg = SharedBytes::from(w.into_inner());
    let v = Value::decode(
        &d,
        &mut Reader::over_shared(&msg, ByteOrder::NATIVE),
        &mut TypeCache::new(),
    )
    .unwrap();
    let Value::Array(got) = v else {
        panic!("not an array")
    };
    // Size 1000 takes 5 bytes (fe + u32).
    assert_eq!(got.bytes().as_ptr(), msg[5..].as_ptr());
    assert_eq!(got.to_vec::<u16>().unwrap(), pixels);
    assert_eq!(arr.bytes().as_ptr(), base);
    assert!(arr.to_vec::<i16>().is_none());
    // Opposite order: swapped on encode, compares equal after decode.
    let other = if ByteOrder::NATIVE == ByteOrder::Little {
        ByteOrder::Big
    } else {
        ByteOrder::Little
    };
    let mut w = Writer::new(other);
    Value::Array(arr.clone()).encode(&d, &mut w).unwrap();
    let one = match other {
        ByteOrder::Big => 1u16.to_be_bytes(),
        ByteOrder::Little => 1u16.to_le_bytes(),
    };
    assert_eq!(&w.as_slice()[7..9], &one);
    let back = Value::decode(
        &d,
        &mut Reader::new(w.as_slice(), other),
        &mut TypeCache::new(),
    )
    .unwrap();
    assert_eq!(back, Value::Array(arr));
    assert!(
        NumArray::from_shared(ScalarType::U16, ByteOrder::Little, vec![1u8, 2, 3].into()).is_none()
    );
}
