//! The captured bytes of a captured exchange (p4p 4.3.0 client <-> pvxs 1.5.3 server).
use crate::common::hex;
use ndflow_pva::nt::ntndarray::{alarm_desc, time_desc};
use ndflow_pva::wire::header::{CTRL_SET_BYTE_ORDER, HEADER_LEN};
use ndflow_pva::{
    BitSet, ByteOrder, FieldDesc, Header, Reader, ScalarType, Status, TypeCache, Value, Writer,
};

const LE: ByteOrder = ByteOrder::Little;

#[test]
fn set_byte_order_header() {
    let b = hex("ca 02 41 02 00000000");
    let h = Header::decode(&b).unwrap();
    assert!(h.is_control() && h.is_from_server());
    assert_eq!(h.command, CTRL_SET_BYTE_ORDER);
    assert_eq!(h.byte_order(), ByteOrder::Little);
    assert_eq!(h.payload_len(), 0);
    assert_eq!(h, Header::control(CTRL_SET_BYTE_ORDER, true, LE, 0));
    assert_eq!(h.encode().as_slice(), b.as_slice());
    let be = Header::control(CTRL_SET_BYTE_ORDER, true, ByteOrder::Big, 0).encode();
    assert_eq!(be, [0xca, 2, 0xc1, 2, 0, 0, 0, 0]);
    assert!(Header::decode(&b[..HEADER_LEN - 1]).is_err());
    assert!(Header::decode(&hex("cb 02 41 02 00000000")).is_err());
    assert!(Header::decode(&hex("ca 00 41 02 00000000")).is_err());
}

#[test]
fn connection_validation_request_from_server() {
    let b = hex("00 00 01 00 | ff 7f | 02 09\"anonymous\" 02\"ca\"");
    let mut r = Reader::new(&b, LE);
    assert_eq!(r.i32().unwrap(), 0x10000);
    assert_eq!(r.i16().unwrap(), 0x7fff);
    let methods = Value::decode(
        &FieldDesc::ScalarArray(ScalarType::String),
        &mut r,
        &mut TypeCache::new(),
    )
    .unwrap();
    assert_eq!(
        methods,
        Value::StringArray(vec!["anonymous".into(), "ca".into()])
    );
    assert!(r.is_empty());
    let mut w = Writer::new(LE);
    w.i32(0x10000);
    w.i16(0x7fff);
    methods
        .encode(&FieldDesc::ScalarArray(ScalarType::String), &mut w)
        .unwrap();
    assert_eq!(w.as_slice(), b.as_slice());
}

#[test]
fn connection_validation_reply_from_client() {
    let b = hex("00 00 01 00 | ff 7f | 00 00 | 02\"ca\" | 80 00 02 04\"user\" 60 04\"host\" 60 | 04\"root\" 02\"vm\"");
    let mut r = Reader::new(&b, LE);
    assert_eq!(r.i32().unwrap(), 0x10000);
    assert_eq!(r.i16().unwrap(), 0x7fff);
    assert_eq!(r.i16().unwrap(), 0);
    assert_eq!(r.string().unwrap(), "ca");
    let mut cache = TypeCache::new();
    let d = FieldDesc::decode(&mut r, &mut cache).unwrap().unwrap();
    let want = FieldDesc::structure(
        "",
        vec![
            ("user", FieldDesc::Scalar(ScalarType::String)),
            ("host", FieldDesc::Scalar(ScalarType::String)),
        ],
    );
    assert_eq!(d, want);
    let v = Value::decode(&d, &mut r, &mut cache).unwrap();
    assert_eq!(v.field(&d, "user").and_then(Value::as_str), Some("root"));
    assert_eq!(v.field(&d, "host").and_then(Value::as_str), Some("vm"));
    assert!(r.is_empty());
    let mut w = Writer::new(LE);
    w.i32(0x10000);
    w.i16(0x7fff);
    w.i16(0);
    w.string("ca").unwrap();
    d.encode(&mut w).unwrap();
    v.encode(&d, &mut w).unwrap();
    assert_eq!(w.as_slice(), b.as_slice());
}

#[test]
fn validated_and_channel_create() {
    assert_eq!(Reader::new(&[0xff], LE).status().unwrap(), Status::ok());
    let req = hex("01 00 | 78 56 34 12 | 03\"T:x\"");
    let mut r = Reader::new(&req, LE);
    assert_eq!(r.u16().unwrap(), 1);
    assert_eq!(r.i32().unwrap(), 0x1234_5678);
    assert_eq!(r.string().unwrap(), "T:x");
    assert!(r.is_empty());
    let mut w = Writer::new(LE);
    w.u16(1);
    w.i32(0x1234_5678);
    w.string("T:x").unwrap();
    assert_eq!(w.as_slice(), req.as_slice());

    let rep = hex("78 56 34 12 | 01 03 05 07 | ff");
    let mut r = Reader::new(&rep, LE);
    assert_eq!(r.i32().unwrap(), 0x1234_5678);
    assert_eq!(r.u32().unwrap(), 0x0705_0301);
    assert!(r.status().unwrap().is_success());
    let mut w = Writer::new(LE);
    w.i32(0x1234_5678);
    w.u32(0x0705_0301);
    w.status(&Status::ok()).unwrap();
    assert_eq!(w.as_slice(), rep.as_slice());
}

#[test]
fn default_pv_request() {
    let b = hex("08 | 80 00 01 05\"field\" 80 00 00");
    let mut r = Reader::new(&b, LE);
    assert_eq!(r.u8().unwrap(), 0x08);
    let mut cache = TypeCache::new();
    let d = FieldDesc::decode(&mut r, &mut cache).unwrap().unwrap();
    let want = FieldDesc::structure("", vec![("field", FieldDesc::structure("", vec![]))]);
    assert_eq!(d, want);
    // An empty structure value has no bytes.
    let v = Value::decode(&d, &mut r, &mut cache).unwrap();
    assert!(r.is_empty());
    let mut w = Writer::new(LE);
    w.u8(0x08);
    d.encode(&mut w).unwrap();
    v.encode(&d, &mut w).unwrap();
    assert_eq!(w.as_slice(), b.as_slice());
}

fn nt_scalar_double() -> FieldDesc {
    FieldDesc::structure(
        "epics:nt/NTScalar:1.0",
        vec![
            ("value", FieldDesc::Scalar(ScalarType::F64)),
            ("alarm", alarm_desc()),
            ("timeStamp", time_desc()),
        ],
    )
}

#[test]
fn nt_scalar_type_prefix_and_get_data() {
    let d = nt_scalar_double();
    let mut w = Writer::new(LE);
    d.encode(&mut w).unwrap();
    let prefix =
        hex("80 15\"epics:nt/NTScalar:1.0\" 03 05\"value\" 43 05\"alarm\" 80 07\"alarm_t\"");
    assert_eq!(&w.as_slice()[..prefix.len()], prefix.as_slice());
    assert_eq!(
        FieldDesc::decode(&mut Reader::new(w.as_slice(), LE), &mut TypeCache::new()).unwrap(),
        Some(d.clone())
    );

    // GET reply: ioid, subcmd 00, status ff, bitset {1}, value = 1.5.
    let b = hex("01 00 00 00 | 00 ff | 01 02 | 00 00 00 00 00 00 f8 3f");
    let mut r = Reader::new(&b, LE);
    assert_eq!(r.i32().unwrap(), 1);
    assert_eq!(r.u8().unwrap(), 0);
    assert_eq!(r.status().unwrap(), Status::ok());
    let bits = r.bitset().unwrap();
    assert_eq!(bits, BitSet::from_bits(&[1]));
    let mut v = Value::default_for(&d);
    v.decode_partial(&d, &bits, &mut r, &mut TypeCache::new())
        .unwrap();
    assert!(r.is_empty());
    assert_eq!(v.field(&d, "value"), Some(&Value::F64(1.5)));
    let mut w = Writer::new(LE);
    w.i32(1);
    w.u8(0);
    w.status(&Status::ok()).unwrap();
    w.bitset(&bits).unwrap();
    v.encode_partial(&d, &bits, &mut w).unwrap();
    assert_eq!(w.as_slice(), b.as_slice());

    // MONITOR update: ioid, 00, changed {1}, double, empty overrun set.
    let m = hex("01 00 00 00 | 00 | 01 02 | 00 00 00 00 00 00 f8 3f | 00");
    let mut r = Reader::new(&m, LE);
    r.i32().unwrap();
    assert_eq!(r.u8().unwrap(), 0);
    let changed = r.bitset().unwrap();
    let mut v2 = Value::default_for(&d);
    v2.decode_partial(&d, &changed, &mut r, &mut TypeCache::new())
        .unwrap();
    assert!(r.bitset().unwrap().is_empty());
    assert!(r.is_empty());
    assert_eq!(v2, v);
}

#[test]
fn monitor_init_with_pipeline_request() {
    // pvRequest field{} record{_options{pipeline="true" queueSize="4"}}, then nfree = 4.
    let opts = FieldDesc::structure(
        "",
        vec![
            ("pipeline", FieldDesc::Scalar(ScalarType::String)),
            ("queueSize", FieldDesc::Scalar(ScalarType::String)),
        ],
    );
    let d = FieldDesc::structure(
        "",
        vec![
            ("field", FieldDesc::structure("", vec![])),
            ("record", FieldDesc::structure("", vec![("_options", opts)])),
        ],
    );
    let mut w = Writer::new(LE);
    w.u8(0x88);
    d.encode(&mut w).unwrap();
    let v = Value::Structure(vec![
        Value::Structure(vec![]),
        Value::Structure(vec![Value::Structure(vec![
            Value::String("true".into()),
            Value::String("4".into()),
        ])]),
    ]);
    v.encode(&d, &mut w).unwrap();
    w.i32(4);
    let b = w.into_inner();
    assert_eq!(&b[b.len() - 4..], &hex("04 00 00 00")[..]);
    let mut r = Reader::new(&b, LE);
    assert_eq!(r.u8().unwrap(), 0x88);
    let mut cache = TypeCache::new();
    let d2 = FieldDesc::decode(&mut r, &mut cache).unwrap().unwrap();
    let v2 = Value::decode(&d2, &mut r, &mut cache).unwrap();
    assert_eq!(
        v2.field(&d2, "record._options.queueSize")
            .and_then(Value::as_str),
        Some("4")
    );
    assert_eq!(r.i32().unwrap(), 4);
    // start and ack
    assert_eq!(hex("44"), [0x44]);
    let mut w = Writer::new(LE);
    w.u8(0x80);
    w.i32(2);
    assert_eq!(w.as_slice(), hex("80 02 00 00 00").as_slice());
}

#[test]
fn udp_search_big_endian() {
    // The channel name is elided in the capture ("SIM:cam1:..."); its length 0x16 is kept.
    let name = "SIM:cam1:ArrayData_RBV";
    assert_eq!(name.len(), 0x16);
    let mut b = hex("ca 02 80 03 0000003c | 66696e64 80 000000 | 00000000000000000000000000000000 | bdbf | 01 03\"tcp\" | 00 01 | 12345678 16");
    b.extend_from_slice(name.as_bytes());
    let h = Header::decode(&b).unwrap();
    assert_eq!(h.byte_order(), ByteOrder::Big);
    assert!(!h.is_from_server() && !h.is_control());
    assert_eq!(h.command, 0x03);
    assert_eq!(h.payload_len(), b.len() - HEADER_LEN);
    let mut r = Reader::new(&b[HEADER_LEN..], h.byte_order());
    assert_eq!(r.u32().unwrap(), 0x6669_6e64);
    assert_eq!(r.u8().unwrap(), 0x80);
    r.take(3).unwrap();
    assert_eq!(r.take(16).unwrap(), &[0u8; 16]);
    assert_eq!(r.u16().unwrap(), 0xbdbf);
    let protos = Value::decode(
        &FieldDesc::ScalarArray(ScalarType::String),
        &mut r,
        &mut TypeCache::new(),
    )
    .unwrap();
    assert_eq!(protos, Value::StringArray(vec!["tcp".into()]));
    assert_eq!(r.u16().unwrap(), 1);
    assert_eq!(r.u32().unwrap(), 0x1234_5678);
    assert_eq!(r.string().unwrap(), name);
    assert!(r.is_empty());
    assert_eq!(
        Header::application(0x03, false, ByteOrder::Big, 0x3c)
            .encode()
            .as_slice(),
        &b[..8]
    );
}

#[test]
fn segmented_message_reassembly() {
    let seg = |flags: u8, cmd: u8, n: u32| Header {
        version: 2,
        flags: 0x40 | flags,
        command: cmd,
        payload_size: n,
    };
    let mut a = ndflow_pva::SegmentAssembler::new(100);
    assert_eq!(a.push(&seg(0x10, 0x0D, 2), &[1, 2]), Ok(None));
    assert_eq!(a.push(&seg(0x30, 0x0D, 1), &[3]), Ok(None));
    assert_eq!(
        a.push(&seg(0x20, 0x0D, 2), &[4, 5]),
        Ok(Some((0x0D, vec![1, 2, 3, 4, 5])))
    );
    assert_eq!(a.push(&seg(0x00, 0x0A, 1), &[9]), Ok(Some((0x0A, vec![9]))));
    // Out of sequence, command change, and size limit.
    assert!(a.push(&seg(0x20, 0x0D, 1), &[1]).is_err());
    assert_eq!(a.push(&seg(0x10, 0x0D, 1), &[1]), Ok(None));
    assert!(a.push(&seg(0x30, 0x0A, 1), &[1]).is_err());
    assert_eq!(a.push(&seg(0x10, 0x0D, 60), &[0; 60]), Ok(None));
    assert!(a.push(&seg(0x20, 0x0D, 60), &[0; 60]).is_err());
    assert_eq!(seg(0x30, 0, 0).segment(), ndflow_pva::Segment::Middle);
}
