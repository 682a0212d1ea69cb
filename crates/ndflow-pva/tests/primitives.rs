use crate::common::{hex, ORDERS};
use ndflow_pva::wire::primitives::MAX_SIZE;
use ndflow_pva::{BitSet, ByteOrder, DecodeError, Reader, Status, StatusKind, Writer};

#[test]
fn scalars_round_trip_both_orders() {
    for order in ORDERS {
        let mut w = Writer::new(order);
        w.bool(true);
        w.i8(-5);
        w.u8(250);
        w.i16(-12345);
        w.u16(54321);
        w.i32(-7);
        w.u32(0xDEAD_BEEF);
        w.i64(i64::MIN);
        w.u64(u64::MAX - 1);
        w.f32(1.5);
        w.f64(-2.25e300);
        let b = w.into_inner();
        assert_eq!(b.len(), 1 + 1 + 1 + 2 + 2 + 4 + 4 + 8 + 8 + 4 + 8);
        let mut r = Reader::new(&b, order);
        assert!(r.bool().unwrap());
        assert_eq!(r.i8().unwrap(), -5);
        assert_eq!(r.u8().unwrap(), 250);
        assert_eq!(r.i16().unwrap(), -12345);
        assert_eq!(r.u16().unwrap(), 54321);
        assert_eq!(r.i32().unwrap(), -7);
        assert_eq!(r.u32().unwrap(), 0xDEAD_BEEF);
        assert_eq!(r.i64().unwrap(), i64::MIN);
        assert_eq!(r.u64().unwrap(), u64::MAX - 1);
        assert_eq!(r.f32().unwrap(), 1.5);
        assert_eq!(r.f64().unwrap(), -2.25e300);
        assert!(r.is_empty());
        assert!(matches!(r.u8(), Err(DecodeError::Truncated { .. })));
    }
    let mut w = Writer::new(ByteOrder::Big);
    w.u32(0x0102_0304);
    assert_eq!(w.as_slice(), &[1, 2, 3, 4]);
    let mut w = Writer::new(ByteOrder::Little);
    w.u32(0x0102_0304);
    assert_eq!(w.as_slice(), &[4, 3, 2, 1]);
}

#[test]
fn size_edge_cases() {
    let cases: [(usize, &str, &str); 6] = [
        (0, "00", "00"),
        (1, "01", "01"),
        (253, "fd", "fd"),
        (254, "fe fe 00 00 00", "fe 00 00 00 fe"),
        (255, "fe ff 00 00 00", "fe 00 00 00 ff"),
        (MAX_SIZE, "fe fe ff ff 7f", "fe 7f ff ff fe"),
    ];
    for (n, le, be) in cases {
        for (order, expect) in [(ByteOrder::Little, le), (ByteOrder::Big, be)] {
            let mut w = Writer::new(order);
            w.size(n).unwrap();
            assert_eq!(w.as_slice(), hex(expect).as_slice(), "size {n} {order:?}");
            let mut r = Reader::new(w.as_slice(), order);
            assert_eq!(r.size().unwrap(), Some(n));
            assert!(r.is_empty());
        }
    }
    // 2^31-1 is pvData's escape to int64: refused on encode, understood on decode.
    let mut w = Writer::new(ByteOrder::Little);
    assert!(w.size(0x7fff_ffff).is_err());
    assert!(w.size(usize::MAX).is_err());
    let esc = hex("fe ff ff ff 7f 05 00 00 00 00 00 00 00");
    assert_eq!(
        Reader::new(&esc, ByteOrder::Little).size().unwrap(),
        Some(5)
    );
    let neg = hex("fe ff ff ff 7f ff ff ff ff ff ff ff ff");
    assert_eq!(
        Reader::new(&neg, ByteOrder::Little).size(),
        Err(DecodeError::BadSize)
    );
    // pvxs writes sizes as uint32: accepted.
    let big = hex("fe 00 00 00 80");
    assert_eq!(
        Reader::new(&big, ByteOrder::Little).size().unwrap(),
        Some(0x8000_0000)
    );
    // 0xFF is null; where a count is required it is an error.
    assert_eq!(
        Reader::new(&[0xff], ByteOrder::Little).size().unwrap(),
        None
    );
    assert_eq!(
        Reader::new(&[0xff], ByteOrder::Little).count(),
        Err(DecodeError::UnexpectedNull)
    );
    let mut w = Writer::new(ByteOrder::Little);
    w.null_size();
    assert_eq!(w.as_slice(), &[0xff]);
    // Truncated long form.
    assert!(Reader::new(&hex("fe 00 01"), ByteOrder::Little)
        .size()
        .is_err());
    assert!(Reader::new(&[], ByteOrder::Little).size().is_err());
}

#[test]
fn strings() {
    for order in ORDERS {
        for s in [
            "",
            "a",
            "anonymous",
            &"x".repeat(253),
            &"y".repeat(254),
            &"é".repeat(300),
        ] {
            let mut w = Writer::new(order);
            w.string(s).unwrap();
            let mut r = Reader::new(w.as_slice(), order);
            assert_eq!(r.string().unwrap(), s);
            assert!(r.is_empty());
        }
    }
    assert_eq!(
        Reader::new(&hex("02\"ca\""), ByteOrder::Little)
            .string()
            .unwrap(),
        "ca"
    );
    assert_eq!(
        Reader::new(&[0xff], ByteOrder::Little).string().unwrap(),
        ""
    );
    assert_eq!(
        Reader::new(&hex("02 ff fe"), ByteOrder::Little).string(),
        Err(DecodeError::BadUtf8)
    );
    assert!(Reader::new(&hex("05 41"), ByteOrder::Little)
        .string()
        .is_err());
    // A huge declared length fails on bounds, without allocating.
    assert!(Reader::new(&hex("fe ff ff ff 7e 41"), ByteOrder::Little)
        .string()
        .is_err());
}

#[test]
fn bitset_examples_from_spec() {
    let cases: [(&[usize], &str); 5] = [
        (&[], "00"),
        (&[0], "01 01"),
        (&[1], "01 02"),
        (&[8], "02 00 01"),
        (&[1, 5, 6, 7, 20, 21], "03 e2 00 30"),
    ];
    for (bits, wire) in cases {
        for order in ORDERS {
            let bs = BitSet::from_bits(bits);
            let mut w = Writer::new(order);
            w.bitset(&bs).unwrap();
            assert_eq!(w.as_slice(), hex(wire).as_slice(), "{bits:?}");
            let back = Reader::new(w.as_slice(), order).bitset().unwrap();
            assert_eq!(back, bs);
            assert_eq!(back.iter().collect::<Vec<_>>(), bits);
        }
    }
}

#[test]
fn bitset_edges_and_word_order() {
    // Exactly one word: full u64 in message order.
    let bs = BitSet::from_bits(&[0, 63]);
    let mut le = Writer::new(ByteOrder::Little);
    le.bitset(&bs).unwrap();
    assert_eq!(le.as_slice(), hex("08 01 00 00 00 00 00 00 80").as_slice());
    let mut be = Writer::new(ByteOrder::Big);
    be.bitset(&bs).unwrap();
    assert_eq!(be.as_slice(), hex("08 80 00 00 00 00 00 00 01").as_slice());
    // One word plus a tail byte: the tail is LSB-first in both orders.
    let bs = BitSet::from_bits(&[0, 64]);
    let mut be = Writer::new(ByteOrder::Big);
    be.bitset(&bs).unwrap();
    assert_eq!(
        be.as_slice(),
        hex("09 00 00 00 00 00 00 00 01 01").as_slice()
    );
    assert_eq!(
        Reader::new(be.as_slice(), ByteOrder::Big).bitset().unwrap(),
        bs
    );
    // Large indices and many words.
    for order in ORDERS {
        for bits in [
            vec![255],
            vec![0, 64, 128, 191, 192, 1000],
            (0..300).collect::<Vec<_>>(),
        ] {
            let bs = BitSet::from_bits(&bits);
            let mut w = Writer::new(order);
            w.bitset(&bs).unwrap();
            let back = Reader::new(w.as_slice(), order).bitset().unwrap();
            assert_eq!(back.iter().collect::<Vec<_>>(), bits);
        }
    }
    // Trailing zero bytes are accepted and normalised; clearing trims.
    let padded = Reader::new(&hex("03 02 00 00"), ByteOrder::Little)
        .bitset()
        .unwrap();
    assert_eq!(padded, BitSet::from_bits(&[1]));
    let mut bs = BitSet::from_bits(&[3, 200]);
    bs.clear(200);
    assert_eq!(bs, BitSet::from_bits(&[3]));
    assert!(bs.any_in(0, 4) && !bs.any_in(4, 500));
    assert_eq!(bs.next_set(4), None);
    assert!(!BitSet::new().get(1_000_000));
    // Truncated.
    assert!(Reader::new(&hex("09 00 00"), ByteOrder::Little)
        .bitset()
        .is_err());
}

#[test]
fn status_forms() {
    for order in ORDERS {
        for st in [
            Status::ok(),
            Status::error("no such channel"),
            Status {
                kind: StatusKind::Warning,
                message: "w".into(),
                call_tree: "tree".into(),
            },
            Status {
                kind: StatusKind::Fatal,
                message: String::new(),
                call_tree: String::new(),
            },
        ] {
            let mut w = Writer::new(order);
            w.status(&st).unwrap();
            assert_eq!(Reader::new(w.as_slice(), order).status().unwrap(), st);
        }
    }
    let mut w = Writer::new(ByteOrder::Little);
    w.status(&Status::ok()).unwrap();
    assert_eq!(w.as_slice(), &[0xff]);
    // OK spelled out is read as OK (not canonical: re-encodes as ff).
    assert_eq!(
        Reader::new(&hex("00 00 00"), ByteOrder::Little)
            .status()
            .unwrap(),
        Status::ok()
    );
    assert_eq!(
        Reader::new(&hex("04 00 00"), ByteOrder::Little).status(),
        Err(DecodeError::BadStatus(4))
    );
    assert!(Status::error("x").kind == StatusKind::Error && !Status::error("x").is_success());
}
