//! Client message bodies against the captured bytes of a captured exchange, and zero-copy decoding
//! of monitor updates.

use std::sync::Arc;

use crate::common::hex;
use ndflow_pva::client::proto::{self, OpDecoder, OpEvent, OpKind};
use ndflow_pva::client::AuthMethod;
use ndflow_pva::nt::ntndarray::{ntndarray_desc, Dimension, NtNdArray};
use ndflow_pva::{
    BitSet, ByteOrder, FieldDesc, NumArray, ScalarType, SharedBytes, TypeCache, Value, Writer,
};

const LE: ByteOrder = ByteOrder::Little;

fn body(f: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut w = Writer::new(LE);
    f(&mut w);
    w.into_inner()
}

#[test]
fn validation_golden() {
    let req = proto::decode_validation_request(
        &hex("00 00 01 00 | ff 7f | 02 09\"anonymous\" 02\"ca\""),
        LE,
    )
    .unwrap();
    assert_eq!(req.methods, vec!["anonymous", "ca"]);
    let ca = AuthMethod::Ca {
        user: "root".into(),
        host: "vm".into(),
    };
    assert_eq!(proto::choose_auth(&req.methods, &ca), ca);
    assert_eq!(
        proto::choose_auth(&["anonymous".into()], &ca),
        AuthMethod::Anonymous
    );
    let b = body(|w| proto::encode_validation_reply(w, &ca).unwrap());
    assert_eq!(
        b,
        hex("00 00 01 00 | ff 7f | 00 00 | 02\"ca\" | 80 00 02 04\"user\" 60 04\"host\" 60 | 04\"root\" 02\"vm\"")
    );
    let b = body(|w| proto::encode_validation_reply(w, &AuthMethod::Anonymous).unwrap());
    assert_eq!(b, hex("00 00 01 00 | ff 7f | 00 00 | 09\"anonymous\" ff"));
    assert!(proto::decode_status(&hex("ff"), LE).unwrap().is_success());
}

#[test]
fn search_golden_and_response() {
    let name = "SIM:cam1:ArrayCounter_";
    assert_eq!(name.len(), 0x16);
    let dgram = {
        let mut w = Writer::new(ByteOrder::Big);
        proto::encode_search(&mut w, 0x6669_6E64, 0x80, 0xbdbf, &[(0x1234_5678, name)]).unwrap();
        w.into_inner()
    };
    let mut want = hex("66696e64 80 000000 | 00000000 00000000 00000000 00000000 | bdbf | 01 03\"tcp\" | 00 01 | 12345678 16");
    want.extend_from_slice(name.as_bytes());
    assert_eq!(dgram, want);
    assert_eq!(dgram.len(), 0x3c);

    // pvxs answers with ::ffff:0.0.0.0: "use the source address".
    let mut w = Writer::new(ByteOrder::Big);
    w.bytes(&[7; 12]);
    w.u32(0x6669_6E64);
    w.bytes(&hex("00000000 00000000 0000ffff 00000000"));
    w.u16(15075);
    w.string("tcp").unwrap();
    w.bool(true);
    w.u16(2);
    w.u32(1);
    w.u32(2);
    let r = proto::decode_search_response(w.as_slice(), ByteOrder::Big).unwrap();
    assert_eq!(r.addr, None);
    assert_eq!((r.port, r.found, r.ids.clone()), (15075, true, vec![1, 2]));
    assert_eq!(
        proto::ip_from_wire(
            hex("00000000 00000000 0000ffff 7f000001")
                .try_into()
                .unwrap()
        ),
        Some("127.0.0.1".parse().unwrap())
    );
    assert_eq!(proto::ip_from_wire([0; 16]), None);
    // Several messages in one datagram; control/segmented ones are skipped.
    let one = ndflow_pva::Header::application(4, true, ByteOrder::Big, w.len() as u32);
    let mut d = one.encode().to_vec();
    d.extend_from_slice(w.as_slice());
    d.extend_from_slice(&hex("ca 02 c1 02 00000000"));
    d.extend_from_slice(&one.encode());
    d.extend_from_slice(w.as_slice());
    assert_eq!(proto::split_datagram(&d).len(), 2);
    assert_eq!(proto::split_datagram(&d[..d.len() - 1]).len(), 1);
}

#[test]
fn channel_and_op_golden() {
    let b = body(|w| proto::encode_create_channel(w, 0x1234_5678, "T:x").unwrap());
    assert_eq!(b, hex("01 00 | 78 56 34 12 | 03\"T:x\""));
    let r = proto::decode_create_channel(&hex("78 56 34 12 | 01 03 05 07 | ff"), LE).unwrap();
    assert_eq!((r.cid, r.sid), (0x1234_5678, 0x0705_0301));
    assert!(r.status.is_success());

    let req = ndflow_pva::request::build("", &[]);
    let b = body(|w| proto::encode_op_init(w, 1, 2, 0x08, (&req.0, &req.1), None).unwrap());
    assert_eq!(
        b,
        hex("01000000 02000000 08 | 80 00 01 05\"field\" 80 00 00")
    );
    let b = body(|w| proto::encode_monitor_ack(w, 1, 2, 2));
    assert_eq!(b, hex("01000000 02000000 80 02 00 00 00"));

    // GET INIT reply then data of the captured NTScalar double.
    let desc = FieldDesc::structure(
        "epics:nt/NTScalar:1.0",
        vec![("value", FieldDesc::Scalar(ScalarType::F64))],
    );
    let mut cache = TypeCache::new();
    let mut dec = OpDecoder::new(OpKind::Get);
    let init = SharedBytes::from(body(|w| {
        w.u32(9);
        w.u8(8);
        w.u8(0xff);
        desc.encode(w).unwrap();
    }));
    assert!(matches!(dec.handle(&init, LE, &mut cache).unwrap(),
        OpEvent::Init { status, desc: Some(d) } if status.is_success() && *d == desc));
    let data = SharedBytes::from(hex("09000000 00 ff | 01 02 | 00 00 00 00 00 00 f8 3f"));
    match dec.handle(&data, LE, &mut cache).unwrap() {
        OpEvent::Data { value, changed, .. } => {
            assert_eq!(value.field(&desc, "value"), Some(&Value::F64(1.5)));
            assert_eq!(changed, BitSet::from_bits(&[1]));
        }
        other => panic!("{other:?}"),
    }
}

/// A monitor update's array is a view of the message buffer, not a copy; partial updates keep
/// the fields they do not carry; 0xFD/0xFE cached types are honoured.
#[test]
fn monitor_update_zero_copy_partial_and_cached_type() {
    let desc = ntndarray_desc();
    let pixels: Vec<u16> = (0..1 << 20).map(|i| i as u16).collect();
    let frame = NtNdArray {
        value: Some(NumArray::from_slice(&pixels)),
        codec_name: String::new(),
        codec_parameters: None,
        compressed_size: 2 << 20,
        uncompressed_size: 2 << 20,
        dimension: vec![
            Dimension {
                size: 1024,
                full_size: 1024,
                binning: 1,
                ..Default::default()
            };
            2
        ],
        unique_id: 7,
        data_time_stamp: Default::default(),
        attribute: Vec::new(),
        alarm: (0, 0, String::new()),
        time_stamp: Default::default(),
    };
    let mut cache = TypeCache::new();
    let mut dec = OpDecoder::new(OpKind::Monitor);
    // INIT with the type defined in the cache (as pvAccessCPP sends it).
    let init = SharedBytes::from(body(|w| {
        w.u32(3);
        w.u8(8);
        w.u8(0xff);
        w.u8(0xfd);
        w.u16(5);
        desc.encode(w).unwrap();
    }));
    assert!(
        matches!(dec.handle(&init, LE, &mut cache).unwrap(), OpEvent::Init { desc: Some(d), .. } if *d == *desc)
    );
    assert_eq!(cache.get(5), Some(desc));

    let msg = SharedBytes::from(body(|w| {
        w.u32(3);
        w.u8(0);
        w.bitset(&BitSet::from_bits(&[0])).unwrap();
        frame.to_value().encode(desc, w).unwrap();
        w.bitset(&BitSet::new()).unwrap();
    }));
    let (value, changed) = match dec.handle(&msg, LE, &mut cache).unwrap() {
        OpEvent::Update { value, changed, .. } => (value, changed),
        other => panic!("{other:?}"),
    };
    assert!(changed.get(0));
    let got = NtNdArray::from_value(desc, &value).unwrap();
    let arr = got.value.clone().unwrap();
    let (lo, hi) = (msg.as_ptr() as usize, msg.as_ptr() as usize + msg.len());
    let p = arr.bytes().as_ptr() as usize;
    assert!(
        p >= lo && p + arr.bytes().len() <= hi,
        "array must borrow the message"
    );
    assert_eq!(arr.to_vec::<u16>().unwrap(), pixels);

    // Partial update: only uniqueId (bit of field "uniqueId").
    let (bit, _) = desc.find("uniqueId").unwrap();
    let msg2 = SharedBytes::from(body(|w| {
        w.u32(3);
        w.u8(0);
        w.bitset(&BitSet::from_bits(&[bit])).unwrap();
        w.i32(8);
        w.bitset(&BitSet::new()).unwrap();
    }));
    let OpEvent::Update { value, .. } = dec.handle(&msg2, LE, &mut cache).unwrap() else {
        panic!("update");
    };
    let got2 = NtNdArray::from_value(desc, &value).unwrap();
    assert_eq!(got2.unique_id, 8);
    assert_eq!(
        got2.value, got.value,
        "pixels kept from the previous update"
    );

    // A second subscription reuses the cached type (0xFE).
    let mut dec2 = OpDecoder::new(OpKind::Monitor);
    let init2 = SharedBytes::from(hex("04000000 08 ff fe 0500"));
    assert!(
        matches!(dec2.handle(&init2, LE, &mut cache).unwrap(), OpEvent::Init { desc: Some(d), .. } if Arc::ptr_eq(&d, &d) && *d == *desc)
    );
    let bad = SharedBytes::from(hex("04000000 08 ff fe 0600"));
    assert!(dec2.handle(&bad, LE, &mut cache).is_err());
}
