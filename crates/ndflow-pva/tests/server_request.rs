//! pvRequest: string parsing, building, decoding what was built, options, and field masks.

use ndflow_pva::nt::{enumeration, scalar};
use ndflow_pva::request::{apply_mask, build, build_str, parse_str, PvRequest};
use ndflow_pva::{BitSet, ByteOrder, FieldDesc, Reader, ScalarType, TypeCache, Value, Writer};

fn roundtrip(d: &FieldDesc, v: &Value) -> PvRequest {
    // Through the wire, as a server receives it.
    let mut w = Writer::new(ByteOrder::Big);
    d.encode(&mut w).unwrap();
    v.encode(d, &mut w).unwrap();
    let b = w.into_inner();
    let mut r = Reader::new(&b, ByteOrder::Big);
    let mut c = TypeCache::new();
    let d = FieldDesc::decode(&mut r, &mut c).unwrap().unwrap();
    let v = Value::decode(&d, &mut r, &mut c).unwrap();
    PvRequest::decode(Some(&d), Some(&v))
}

#[test]
fn parse_and_build() {
    let (f, o) =
        parse_str("field(value,alarm.severity)record[queueSize=8, pipeline=true]").unwrap();
    assert_eq!(f, ["value", "alarm.severity"]);
    assert_eq!(
        o,
        [
            ("queueSize".to_owned(), "8".to_owned()),
            ("pipeline".to_owned(), "true".to_owned())
        ]
    );
    assert_eq!(
        parse_str("record[a=1] field()").unwrap(),
        (vec![], vec![("a".into(), "1".into())])
    );
    assert_eq!(
        parse_str("value, timeStamp").unwrap().0,
        ["value", "timeStamp"]
    );
    assert!(parse_str("field(value").is_err());
    assert!(parse_str("record[x]").is_err());

    let (d, v) = build_str(
        "field(value,alarm.severity,alarm.status)record[queueSize=8,pipeline=true,ackAny=25%]",
    )
    .unwrap();
    let req = roundtrip(&d, &v);
    assert_eq!(req.fields, ["value", "alarm.severity", "alarm.status"]);
    assert!(req.pipeline());
    assert_eq!(req.queue_size(), 8);
    assert_eq!(req.ack_any(8), 2);

    // The pvxs default request: empty field, no options.
    let (d, v) = build("", &[]);
    let mut w = Writer::new(ByteOrder::Little);
    d.encode(&mut w).unwrap();
    v.encode(&d, &mut w).unwrap();
    assert_eq!(w.as_slice(), b"\x80\x00\x01\x05field\x80\x00\x00");
    let req = roundtrip(&d, &v);
    assert_eq!(req, PvRequest::default());
    assert!(!req.pipeline());
    assert_eq!(req.queue_size(), 4);
    assert_eq!(req.ack_any(4), 2);
}

#[test]
fn options_of_other_types_and_limits() {
    let d = FieldDesc::structure(
        "",
        vec![(
            "record",
            FieldDesc::structure(
                "",
                vec![(
                    "_options",
                    FieldDesc::structure(
                        "",
                        vec![
                            ("queueSize", FieldDesc::Scalar(ScalarType::I32)),
                            ("pipeline", FieldDesc::Scalar(ScalarType::Bool)),
                        ],
                    ),
                )],
            ),
        )],
    );
    let v = Value::Structure(vec![Value::Structure(vec![Value::Structure(vec![
        Value::I32(1),
        Value::Bool(true),
    ])])]);
    let req = roundtrip(&d, &v);
    assert!(req.pipeline());
    assert_eq!(req.queue_size(), 2, "pipelining needs at least 2");
    let (d, v) = build("", &[("queueSize", "-5"), ("ackAny", "99")]);
    let req = roundtrip(&d, &v);
    assert_eq!(req.queue_size(), 1);
    assert_eq!(req.ack_any(4), 4);
    assert_eq!(PvRequest::decode(None, None), PvRequest::default());
}

#[test]
fn masks() {
    let desc = scalar::desc(ScalarType::F64);
    let req = |s: &str| {
        let (d, v) = build(s, &[]);
        roundtrip(&d, &v)
    };
    assert_eq!(req("").mask(&desc).unwrap(), None);
    let (vb, _) = desc.find("value").unwrap();
    let (ab, ad) = desc.find("alarm").unwrap();
    let m = req("value,alarm").mask(&desc).unwrap().unwrap();
    assert!(m.get(vb) && m.get(ab) && m.get(ab + 1) && m.get(ab + ad.bit_count() - 1));
    assert!(!m.get(0));
    assert!(req("nosuch").mask(&desc).is_err());
    assert_eq!(
        req("value,nosuch").mask(&desc).unwrap(),
        Some(BitSet::from_bits(&[vb]))
    );

    // Root change through a mask: the selected fields, structures folded to one bit.
    let all = BitSet::from_bits(&[0]);
    let got = apply_mask(&desc, &all, Some(&m));
    assert_eq!(got, BitSet::from_bits(&[vb, ab]));
    // A change outside the mask disappears; inside a selected struct it stays as is.
    let (sb, _) = desc.find("alarm.severity").unwrap();
    assert_eq!(
        apply_mask(&desc, &BitSet::from_bits(&[sb]), Some(&m)),
        BitSet::from_bits(&[sb])
    );
    let (tb, _) = desc.find("timeStamp").unwrap();
    assert!(apply_mask(&desc, &BitSet::from_bits(&[tb]), Some(&m)).is_empty());
    // Nested selection inside an enum.
    let ed = enumeration::desc();
    let m = req("value.index").mask(&ed).unwrap().unwrap();
    let (ib, _) = ed.find("value.index").unwrap();
    assert_eq!(apply_mask(&ed, &all, Some(&m)), BitSet::from_bits(&[ib]));
    assert_eq!(apply_mask(&ed, &all, None), all);
}
