//! Decoders fed truncated and corrupted versions of valid input must return an error or a value
//! that re-encodes consistently; never panic.
use crate::common::{hex, Rng, ORDERS};
use ndflow_pva::nt::ntndarray::{ntndarray_desc, Attribute, Dimension, NtNdArray, TimeStamp};
use ndflow_pva::{
    BitSet, ByteOrder, DecodeError, FieldDesc, Header, NumArray, Reader, ScalarType,
    SegmentAssembler, TypeCache, Value, Writer,
};

#[derive(Clone)]
enum Target {
    Desc,
    Full(FieldDesc),
    Partial(FieldDesc),
    Header,
    BitSetStatus,
    Validation,
}

fn nt_value() -> Value {
    NtNdArray {
        value: Some(NumArray::from_slice(&[1u16, 2, 3, 4, 5, 6])),
        codec_name: "lz4".into(),
        codec_parameters: Some(6),
        compressed_size: 12,
        uncompressed_size: 12,
        dimension: vec![
            Dimension {
                size: 3,
                offset: 0,
                full_size: 3,
                binning: 1,
                reverse: true
            };
            2
        ],
        unique_id: 1,
        data_time_stamp: TimeStamp::default(),
        attribute: vec![
            Attribute {
                name: "ColorMode".into(),
                value: Some((FieldDesc::Scalar(ScalarType::I32), Value::I32(2))),
                descriptor: "d".into(),
                source_type: 1,
                source: "s".into(),
            },
            Attribute {
                name: "Names".into(),
                value: Some((
                    FieldDesc::ScalarArray(ScalarType::String),
                    Value::StringArray(vec!["a".into(), "b".into()]),
                )),
                descriptor: String::new(),
                source_type: 4,
                source: String::new(),
            },
        ],
        alarm: (1, 2, "m".into()),
        time_stamp: TimeStamp::default(),
    }
    .to_value()
}

/// Decode; on success re-encode and check that decoding the re-encoding gives the same bytes.
fn run(t: &Target, b: &[u8], order: ByteOrder) -> Result<(), DecodeError> {
    let mut r = Reader::new(b, order);
    let mut c = TypeCache::new();
    let reencode = |f: &dyn Fn(&mut Reader<'_>, &mut Writer) -> Result<(), DecodeError>,
                    bytes: &[u8]| {
        let mut w = Writer::new(order);
        f(&mut Reader::new(bytes, order), &mut w)?;
        Ok::<Vec<u8>, DecodeError>(w.into_inner())
    };
    match t {
        Target::Desc => {
            if let Some(d) = FieldDesc::decode(&mut r, &mut c)? {
                let mut w = Writer::new(order);
                d.encode(&mut w).expect("decoded type re-encodes");
                let again =
                    FieldDesc::decode(&mut Reader::new(w.as_slice(), order), &mut TypeCache::new())
                        .expect("re-encoded type decodes");
                assert_eq!(again, Some(d));
            }
        }
        Target::Full(d) => {
            let v = Value::decode(d, &mut r, &mut c)?;
            let mut w = Writer::new(order);
            v.encode(d, &mut w).expect("decoded value re-encodes");
            let f = |r: &mut Reader<'_>, w: &mut Writer| -> Result<(), DecodeError> {
                let v = Value::decode(d, r, &mut TypeCache::new())?;
                v.encode(d, w).expect("re-encodes");
                Ok(())
            };
            assert_eq!(
                reencode(&f, w.as_slice()).expect("round trip"),
                w.as_slice()
            );
            let _ = NtNdArray::from_value(d, &v);
        }
        Target::Partial(d) => {
            let bits = r.bitset()?;
            let mut v = Value::default_for(d);
            v.decode_partial(d, &bits, &mut r, &mut c)?;
            let mut w = Writer::new(order);
            v.encode_partial(d, &bits, &mut w)
                .expect("partial re-encodes");
            let _ = NtNdArray::from_value(d, &v);
        }
        Target::Header => {
            let h = Header::decode(b)?;
            assert_eq!(Header::decode(&h.encode()), Ok(h));
            let mut a = SegmentAssembler::new(1 << 20);
            let _ = a.push(&h, b.get(8..).unwrap_or(&[]));
        }
        Target::BitSetStatus => {
            let bs = r.bitset()?;
            let st = r.status()?;
            let mut w = Writer::new(order);
            w.bitset(&bs).expect("bitset");
            w.status(&st).expect("status");
            let mut r2 = Reader::new(w.as_slice(), order);
            assert_eq!(r2.bitset(), Ok(bs));
            assert_eq!(r2.status(), Ok(st));
        }
        Target::Validation => {
            r.i32()?;
            r.i16()?;
            r.i16()?;
            r.string()?;
            if let Some(d) = FieldDesc::decode(&mut r, &mut c)? {
                Value::decode(&d, &mut r, &mut c)?;
            }
        }
    }
    Ok(())
}

fn seeds() -> Vec<(Target, ByteOrder, Vec<u8>)> {
    let nt = ntndarray_desc().clone();
    let v = nt_value();
    let mut out = Vec::new();
    for order in ORDERS {
        let mut w = Writer::new(order);
        nt.encode(&mut w).unwrap();
        out.push((Target::Desc, order, w.into_inner()));
        // cached-type form: FD key <type>, then a struct reusing it through FE.
        let mut w = Writer::new(order);
        w.u8(0x80);
        w.string("").unwrap();
        w.size(2).unwrap();
        w.string("a").unwrap();
        w.u8(0xFD);
        w.u16(1);
        FieldDesc::structure(
            "t",
            vec![
                ("x", FieldDesc::ScalarArray(ScalarType::F64)),
                ("y", FieldDesc::AnyArray),
            ],
        )
        .encode(&mut w)
        .unwrap();
        w.string("b").unwrap();
        w.u8(0xFE);
        w.u16(1);
        out.push((Target::Desc, order, w.into_inner()));

        let mut w = Writer::new(order);
        v.encode(&nt, &mut w).unwrap();
        out.push((Target::Full(nt.clone()), order, w.into_inner()));

        let bits = BitSet::from_bits(&[1, 4, 7, 8, 13, 15]);
        let mut w = Writer::new(order);
        w.bitset(&bits).unwrap();
        v.encode_partial(&nt, &bits, &mut w).unwrap();
        out.push((Target::Partial(nt.clone()), order, w.into_inner()));

        let mut w = Writer::new(order);
        w.bitset(&BitSet::from_bits(&[0, 3, 64, 70])).unwrap();
        w.status(&ndflow_pva::Status::error("bad")).unwrap();
        out.push((Target::BitSetStatus, order, w.into_inner()));
    }
    out.push((
        Target::Header,
        ByteOrder::Little,
        hex("ca 02 41 02 00000000"),
    ));
    out.push((
        Target::Header,
        ByteOrder::Little,
        hex("ca 02 d0 0a 04000000 01020304"),
    ));
    out.push((
        Target::Validation,
        ByteOrder::Little,
        hex("00 00 01 00 ff 7f 00 00 02\"ca\" 80 00 02 04\"user\" 60 04\"host\" 60 04\"root\" 02\"vm\""),
    ));
    out
}

#[test]
fn truncations_and_byte_flips_never_panic() {
    let start = std::time::Instant::now();
    let seeds = seeds();
    let mut execs = 0usize;
    let mut ok = 0usize;
    // Every seed decodes as is.
    for (t, order, b) in &seeds {
        run(t, b, *order).expect("seed decodes");
    }
    // Every truncation of every seed.
    for (t, order, b) in &seeds {
        for len in 0..b.len() {
            execs += 1;
            if run(t, &b[..len], *order).is_ok() {
                ok += 1;
            }
        }
    }
    // Random corruption: 1-4 bytes replaced by random or boundary values.
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    const SPECIAL: [u8; 8] = [0x00, 0x01, 0x7f, 0x80, 0xfc, 0xfd, 0xfe, 0xff];
    let mut buf = Vec::new();
    while execs < 120_000 {
        for (t, order, b) in &seeds {
            buf.clear();
            buf.extend_from_slice(b);
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(buf.len());
                buf[i] = if rng.below(2) == 0 {
                    SPECIAL[rng.below(8)]
                } else {
                    rng.next() as u8
                };
            }
            if rng.below(8) == 0 {
                let cut = rng.below(buf.len());
                buf.truncate(cut);
            }
            execs += 1;
            if run(t, &buf, *order).is_ok() {
                ok += 1;
            }
        }
    }
    println!(
        "{execs} decoder executions ({ok} valid) in {:?}",
        start.elapsed()
    );
    assert!(execs >= 100_000);
}
