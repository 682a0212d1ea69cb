//! Framing: segmented messages joined (controls interleaved), clean and unclean EOF, size
//! limits; vectored writes; and the zero-copy writer (frame pixels go out by reference).

use ndflow_pva::nt::ntndarray::{ntndarray_desc, NtNdArray};
use ndflow_pva::transport::{write_message, MessageReader, OutMessage, TransportError};
use ndflow_pva::{BitSet, ByteOrder, Header, NumArray, SharedBytes, Value, Writer};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

fn app(cmd: u8, seg: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = Header::application(cmd, true, ByteOrder::Little, payload.len() as u32);
    h.flags |= seg;
    let mut v = h.encode().to_vec();
    v.extend_from_slice(payload);
    v
}

#[test]
fn segments_are_joined_and_controls_pass_through() {
    let mut s = app(0x0D, 0x10, b"abc");
    s.extend(Header::control(0x02, true, ByteOrder::Little, 7).encode());
    s.extend(app(0x0D, 0x30, b"de"));
    s.extend(app(0x0D, 0x20, b"f"));
    s.extend(app(0x0A, 0x00, b"xyz"));
    rt().block_on(async {
        let mut r = MessageReader::new(&s[..], 1024);
        let m = r.next().await.unwrap().unwrap();
        assert!(m.header.is_control());
        assert_eq!(m.header.payload_size, 7);
        let m = r.next().await.unwrap().unwrap();
        assert_eq!((m.command(), &m.payload[..]), (0x0D, &b"abcdef"[..]));
        assert_eq!(m.header.payload_size, 6);
        assert_eq!(m.header.flags & 0x30, 0);
        let m = r.next().await.unwrap().unwrap();
        assert_eq!(&m.payload[..], b"xyz");
        assert!(r.next().await.unwrap().is_none(), "clean EOF");
        assert_eq!(r.bytes_read(), s.len() as u64);
    });
}

#[test]
fn bad_streams_are_errors_not_panics() {
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (app(1, 0, b"abcdef")[..10].to_vec(), "io"),
        (app(1, 0, b"abc")[..5].to_vec(), "io"),
        (app(1, 0x20, b"abc"), "decode"),
        ([app(1, 0x10, b"a"), app(2, 0x20, b"b")].concat(), "decode"),
        (app(1, 0x10, b"a"), "io"),
        (app(1, 0, &[0u8; 2000]), "large"),
        (
            [app(1, 0x10, &[0u8; 600]), app(1, 0x20, &[0u8; 600])].concat(),
            "large",
        ),
        (vec![0xCB, 2, 0, 0, 0, 0, 0, 0], "decode"),
    ];
    for (bytes, want) in cases {
        rt().block_on(async {
            let mut r = MessageReader::new(&bytes[..], 1024);
            let e = loop {
                match r.next().await {
                    Ok(Some(_)) => continue,
                    Ok(None) => panic!("expected an error ({want})"),
                    Err(e) => break e,
                }
            };
            let got = match e {
                TransportError::Io(_) => "io",
                TransportError::Decode(_) => "decode",
                TransportError::TooLarge(_) => "large",
                TransportError::OverBudget(_) => "budget",
            };
            assert_eq!(got, want, "{e}");
        });
    }
}

#[test]
fn write_message_sets_size_and_writes_all_parts() {
    let a = vec![1u8; 70_000];
    let b = b"tail".to_vec();
    let mut out: Vec<u8> = Vec::new();
    rt().block_on(async {
        let h = Header::application(0x0D, true, ByteOrder::Big, 0);
        write_message(&mut out, h, &[&a, &[], &b]).await.unwrap();
    });
    let h = Header::decode(&out).unwrap();
    assert_eq!(h.payload_size as usize, a.len() + b.len());
    assert_eq!(&out[8..8 + a.len()], &a[..]);
    assert_eq!(&out[8 + a.len()..], b"tail");
    rt().block_on(async {
        let mut r = MessageReader::new(&out[..], 1 << 20);
        assert_eq!(r.next().await.unwrap().unwrap().payload.len(), 70_004);
    });
}

#[test]
fn zero_copy_writer_keeps_pixels_by_reference() {
    let pixels = NumArray::from_slice(&vec![0x1234u16; 1 << 16]);
    let nd = NtNdArray {
        value: Some(pixels.clone()),
        codec_name: String::new(),
        codec_parameters: Some(6),
        compressed_size: 1 << 17,
        uncompressed_size: 1 << 17,
        dimension: vec![],
        unique_id: 3,
        data_time_stamp: Default::default(),
        attribute: vec![],
        alarm: (0, 0, String::new()),
        time_stamp: Default::default(),
    }
    .to_value();
    let desc = ntndarray_desc();
    let bits = BitSet::from_bits(&[0]);
    let mut plain = Writer::new(ByteOrder::NATIVE);
    nd.encode_partial(desc, &bits, &mut plain).unwrap();
    let mut zc = Writer::zero_copy(ByteOrder::NATIVE);
    nd.encode_partial(desc, &bits, &mut zc).unwrap();
    assert_eq!(zc.len(), plain.len());
    let parts = zc.clone().into_parts();
    let joined: Vec<u8> = parts.iter().flat_map(|p| p.iter().copied()).collect();
    assert_eq!(joined, plain.as_slice());
    assert_eq!(zc.into_inner(), plain.into_inner());
    // The pixel part is the frame's own buffer.
    let px = pixels.bytes().as_ptr();
    assert!(parts.iter().any(|p| p.as_ptr() == px && p.len() == 1 << 17));
    // Other byte order or small payloads are copied.
    let mut be = Writer::zero_copy(ByteOrder::Big);
    Value::Array(pixels.clone())
        .encode(
            &ndflow_pva::FieldDesc::ScalarArray(ndflow_pva::ScalarType::U16),
            &mut be,
        )
        .unwrap();
    assert!(be.into_parts().iter().all(|p| p.as_ptr() != px));
    let mut small = Writer::zero_copy(ByteOrder::NATIVE);
    small.shared(&SharedBytes::copy_from_slice(&[1, 2, 3]));
    assert_eq!(small.as_slice(), &[1, 2, 3]);
    let m = OutMessage::build(0x0D, true, ByteOrder::NATIVE, |w| {
        w.u8(9);
        w.shared(pixels.bytes());
        w.u8(8);
        Ok(())
    })
    .unwrap();
    assert_eq!(m.parts.len(), 3);
    assert_eq!(m.wire_len(), 8 + 2 + (1 << 17));
    assert_eq!(m.header.payload_size as usize, 2 + (1 << 17));
}
