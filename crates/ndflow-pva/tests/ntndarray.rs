use crate::common::{hex, ORDERS};
use ndflow_pva::nt::ntndarray::{
    ntndarray_desc, value_selector, Attribute, Dimension, NtNdArray, TimeStamp, NTNDARRAY_ID,
    VALUE_MEMBERS,
};
use ndflow_pva::{
    BitSet, ByteOrder, FieldDesc, Members, NumArray, Reader, ScalarType, TypeCache, Value, Writer,
};

/// NTNDArray type description in normativeTypesCPP order, written out by hand
/// from the table, not from the code. Byte-order independent (no multi-byte integers).
const SNAPSHOT: &str = r#"
80 16"epics:nt/NTNDArray:1.0" 0c
  05"value" 81 00 0b
    0c"booleanValue" 08  09"byteValue" 28  0a"shortValue" 29  08"intValue" 2a  09"longValue" 2b
    0a"ubyteValue" 2c  0b"ushortValue" 2d  09"uintValue" 2e  0a"ulongValue" 2f
    0a"floatValue" 4a  0b"doubleValue" 4b
  05"codec" 80 07"codec_t" 02  04"name" 60  0a"parameters" 82
  0e"compressedSize" 23
  10"uncompressedSize" 23
  09"dimension" 88 80 0b"dimension_t" 05
    04"size" 22  06"offset" 22  08"fullSize" 22  07"binning" 22  07"reverse" 00
  08"uniqueId" 22
  0d"dataTimeStamp" 80 06"time_t" 03  10"secondsPastEpoch" 23  0b"nanoseconds" 22  07"userTag" 22
  09"attribute" 88 80 18"epics:nt/NTAttribute:1.0" 05
    04"name" 60  05"value" 82  0a"descriptor" 60  0a"sourceType" 22  06"source" 60
  0a"descriptor" 60
  05"alarm" 80 07"alarm_t" 03  08"severity" 22  06"status" 22  07"message" 60
  09"timeStamp" 80 06"time_t" 03  10"secondsPastEpoch" 23  0b"nanoseconds" 22  07"userTag" 22
  07"display" 80 09"display_t" 05
    08"limitLow" 43  09"limitHigh" 43  0b"description" 60  06"format" 60  05"units" 60
"#;

#[test]
fn type_description_snapshot() {
    let want = hex(SNAPSHOT);
    assert_eq!(want.len(), 639);
    for order in ORDERS {
        let mut w = Writer::new(order);
        ntndarray_desc().encode(&mut w).unwrap();
        assert_eq!(w.as_slice(), want.as_slice());
        let back = FieldDesc::decode(&mut Reader::new(&want, order), &mut TypeCache::new())
            .unwrap()
            .unwrap();
        assert_eq!(&back, ntndarray_desc());
    }
    let d = ntndarray_desc();
    assert_eq!(d.type_id(), NTNDARRAY_ID);
    assert_eq!(
        d.find("value").map(|(_, f)| f.type_id()).as_deref(),
        Some("union")
    );
    assert_eq!(
        d.find("dimension").map(|(_, f)| f.type_id()).as_deref(),
        Some("dimension_t[]")
    );
    assert_eq!(
        d.find("attribute").map(|(_, f)| f.type_id()).as_deref(),
        Some("epics:nt/NTAttribute:1.0[]")
    );
    // Bit numbering: value 1, codec 2 (name 3, parameters 4), compressedSize 5, ...
    let bit = |p: &str| d.find(p).map(|(b, _)| b);
    assert_eq!(bit("value"), Some(1));
    assert_eq!(bit("codec.parameters"), Some(4));
    assert_eq!(bit("dimension"), Some(7));
    assert_eq!(bit("uniqueId"), Some(8));
    assert_eq!(bit("dataTimeStamp.userTag"), Some(12));
    assert_eq!(bit("attribute"), Some(13));
    assert_eq!(bit("display"), Some(23));
    assert_eq!(bit("display.units"), Some(28));
    assert_eq!(d.bit_count(), 29);
    assert_eq!(value_selector(ScalarType::U16), Some(6));
    assert_eq!(value_selector(ScalarType::String), None);
    assert_eq!(VALUE_MEMBERS[10].0, "doubleValue");
}

fn sample() -> NtNdArray {
    let px: Vec<u16> = vec![1, 2, 3, 4, 5, 65535];
    NtNdArray {
        value: Some(NumArray::from_slice(&px)),
        codec_name: String::new(),
        codec_parameters: Some(6),
        compressed_size: 12,
        uncompressed_size: 12,
        dimension: vec![
            Dimension {
                size: 3,
                offset: 0,
                full_size: 3,
                binning: 1,
                reverse: false,
            },
            Dimension {
                size: 2,
                offset: 0,
                full_size: 2,
                binning: 1,
                reverse: false,
            },
        ],
        unique_id: 17,
        data_time_stamp: TimeStamp {
            seconds_past_epoch: 1_700_000_000,
            nanoseconds: 5,
            user_tag: 0,
        },
        attribute: vec![Attribute {
            name: "ColorMode".into(),
            value: Some((FieldDesc::Scalar(ScalarType::I32), Value::I32(0))),
            descriptor: "Color mode".into(),
            source_type: 1,
            source: "COLOR_MODE".into(),
        }],
        alarm: (0, 0, String::new()),
        time_stamp: TimeStamp {
            seconds_past_epoch: 1_700_000_001,
            nanoseconds: 6,
            user_tag: 2,
        },
    }
}

#[test]
fn value_round_trip_full_and_monitor_update() {
    let d = ntndarray_desc();
    let nt = sample();
    for order in ORDERS {
        let v = nt.to_value();
        let mut w = Writer::new(order);
        v.encode(d, &mut w).unwrap();
        let back = Value::decode(
            d,
            &mut Reader::new(w.as_slice(), order),
            &mut TypeCache::new(),
        )
        .unwrap();
        assert_eq!(back, v);
        assert_eq!(NtNdArray::from_value(d, &back).unwrap(), nt);

        // Monitor update: only value + uniqueId change.
        let mut next = nt.clone();
        next.value = Some(NumArray::from_slice(&[9.5f64, 8.5]));
        next.unique_id = 18;
        let bits = BitSet::from_bits(&[1, 8]);
        let mut w = Writer::new(order);
        w.bitset(&bits).unwrap();
        next.to_value().encode_partial(d, &bits, &mut w).unwrap();
        let mut r = Reader::new(w.as_slice(), order);
        let got_bits = r.bitset().unwrap();
        let mut cur = back.clone();
        cur.decode_partial(d, &got_bits, &mut r, &mut TypeCache::new())
            .unwrap();
        assert!(r.is_empty());
        assert_eq!(NtNdArray::from_value(d, &cur).unwrap(), next);
    }
}

/// pvxs/p4p field order (value, codec, compressedSize, uncompressedSize, uniqueId, dataTimeStamp,
/// alarm, timeStamp, dimension, attribute).
fn p4p_desc() -> FieldDesc {
    let FieldDesc::Structure(m) = ntndarray_desc() else {
        unreachable!()
    };
    let order = [
        "value",
        "codec",
        "compressedSize",
        "uncompressedSize",
        "uniqueId",
        "dataTimeStamp",
        "alarm",
        "timeStamp",
        "dimension",
        "attribute",
    ];
    let fields = order
        .iter()
        .filter_map(|n| m.get(n).map(|f| (n.to_string(), f.clone())))
        .collect();
    FieldDesc::Structure(Members {
        id: NTNDARRAY_ID.into(),
        fields,
    })
}

#[test]
fn p4p_get_data_capture() {
    // The captured exchange: p4p server, 2x3 uint16: bitset 03 e2 00 30 = {1,5,6,7,20,21}; value selector 06 +
    // Size 6 + 12 bytes; sizes 12; uniqueId 0; dimension 02, 01+{3,0,3,1,false}, 01+{2,..}.
    // The pixel bytes and the empty attribute array are filled in (not shown in the capture).
    let d = p4p_desc();
    let b = hex(
        "03 e2 00 30 | 06 06 0100 0200 0300 0400 0500 0600 | 0c00000000000000 0c00000000000000 | 00000000 \
         | 02 01 03000000 00000000 03000000 01000000 00 01 02000000 00000000 02000000 01000000 00 | 00",
    );
    let mut r = Reader::new(&b, ByteOrder::Little);
    let bits = r.bitset().unwrap();
    assert_eq!(bits.iter().collect::<Vec<_>>(), [1, 5, 6, 7, 20, 21]);
    let mut v = Value::default_for(&d);
    v.decode_partial(&d, &bits, &mut r, &mut TypeCache::new())
        .unwrap();
    assert!(r.is_empty());
    let nt = NtNdArray::from_value(&d, &v).unwrap();
    assert_eq!(
        nt.value.as_ref().and_then(|a| a.to_vec::<u16>()),
        Some(vec![1, 2, 3, 4, 5, 6])
    );
    assert_eq!(
        (nt.compressed_size, nt.uncompressed_size, nt.unique_id),
        (12, 12, 0)
    );
    assert_eq!(
        nt.dimension.iter().map(|d| d.size).collect::<Vec<_>>(),
        [3, 2]
    );
    let mut w = Writer::new(ByteOrder::Little);
    w.bitset(&bits).unwrap();
    v.encode_partial(&d, &bits, &mut w).unwrap();
    assert_eq!(w.as_slice(), b.as_slice());
}

#[test]
fn from_value_rejects_non_ntndarray() {
    let d = FieldDesc::structure("x", vec![("value", FieldDesc::Scalar(ScalarType::I32))]);
    assert!(NtNdArray::from_value(&d, &Value::Structure(vec![Value::I32(1)])).is_err());
}
