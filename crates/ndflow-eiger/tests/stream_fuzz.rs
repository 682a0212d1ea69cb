//! A deterministic mutation fuzzer for the stream decoders: valid v1 (multipart JSON) and v2
//! (CBOR) messages, mutated by bit flips, byte inserts/deletes, truncation, length-field
//! blow-ups, dictionary swaps and part drops/duplicates/swaps, must never panic; every frame
//! the decoders return must either decode or give an error, and a frame that decodes must
//! also pass `check_header`.
//!
//! `NDFLOW_FUZZ_ITERS` sets the mutated messages per decoder (default 1 000 000, so 2 M in
//! all); `NDFLOW_FUZZ_SEED` the seed (default fixed). Run it in release mode:
//! `cargo test --release -p ndflow-eiger --test stream_fuzz`.
//! A panic prints the seed, the iteration and the message, so it can be replayed.

use bytes::Bytes;
use minicbor::data::Tag;
use minicbor::Encoder;
use ndflow_codec::{bslz4, lz4};
use ndflow_eiger::stream::encoding::{check_header, decode_into};
use ndflow_eiger::stream::{v1, v2, Event};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::time::Instant;

const DEFAULT_ITERS: u64 = 1_000_000;
const DEFAULT_SEED: u64 = 0x5EED_E16E_2026;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

// ---- codecs ------------------------------------------------------------------------------

fn pixels(n: usize, salt: usize) -> Vec<u8> {
    (0..n)
        .map(|i| ((i * 7 + salt) % 13 + (i / 29) % 5) as u8)
        .collect()
}

fn bs_lz4(raw: &[u8], elem: usize) -> Vec<u8> {
    let f = bslz4::BsFraming::Hdf5;
    let mut out = vec![0u8; bslz4::max_compressed_len(raw.len(), elem, 0, f).unwrap()];
    let n = bslz4::compress(raw, elem, 0, f, &mut out).unwrap();
    out.truncate(n);
    out
}

fn lz4_block(raw: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; lz4::max_compressed_len(raw.len())];
    let n = lz4::compress_block(raw, &mut out).unwrap();
    out.truncate(n);
    out
}

fn lz4_hdf5(raw: &[u8], block: usize) -> Vec<u8> {
    let mut out = vec![0u8; lz4::max_hdf5_len(raw.len(), block)];
    let n = lz4::compress_hdf5(raw, block, &mut out).unwrap();
    out.truncate(n);
    out
}

// ---- v1 corpus ---------------------------------------------------------------------------

fn j(v: serde_json::Value) -> Bytes {
    Bytes::from(v.to_string())
}

fn v1_header(detail: &str, appendix: bool) -> Vec<Bytes> {
    let mut p = vec![j(
        json!({"htype": "dheader-1.0", "series": 2, "header_detail": detail}),
    )];
    if detail != "none" {
        p.push(j(
            json!({"count_time": 0.5, "nimages": 3, "description": "EIGER2",
                        "flatfield_correction_applied": true, "x": [1, 2.5], "n": null}),
        ));
    }
    if detail == "all" {
        let ff: Vec<u8> = (0..6u32).flat_map(|i| (i as f32).to_le_bytes()).collect();
        p.push(j(
            json!({"htype": "dflatfield-1.0", "shape": [3, 2], "type": "float32"}),
        ));
        p.push(Bytes::from(ff));
        p.push(j(
            json!({"htype": "dpixelmask-1.0", "shape": [3, 2], "type": "uint32"}),
        ));
        p.push(Bytes::from(vec![1u8; 24]));
        p.push(j(
            json!({"htype": "dcountrate_table-1.0", "shape": [2, 2], "type": "float32"}),
        ));
        p.push(Bytes::from(vec![0u8; 16]));
    }
    if appendix {
        p.push(Bytes::from_static(b"header appendix"));
    }
    p
}

fn v1_image(
    frame: u64,
    ty: &str,
    size: usize,
    enc: &str,
    w: usize,
    h: usize,
    app: bool,
) -> Vec<Bytes> {
    let raw = pixels(w * h * size, frame as usize);
    let blob = match enc {
        "<" => raw,
        "lz4<" => lz4_block(&raw),
        _ => bs_lz4(&raw, size),
    };
    let mut p = vec![
        j(json!({"htype": "dimage-1.0", "series": 2, "frame": frame, "hash": ""})),
        j(json!({"htype": "dimage_d-1.0", "shape": [w, h], "type": ty,
                 "encoding": enc, "size": blob.len()})),
        Bytes::from(blob),
        j(json!({"htype": "dconfig-1.0", "start_time": 0, "stop_time": 1000, "real_time": 1000})),
    ];
    if app {
        p.push(Bytes::from_static(b"{\"image\": \"appendix\"}"));
    }
    p
}

fn v1_end() -> Vec<Bytes> {
    vec![j(json!({"htype": "dseries_end-1.0", "series": 2}))]
}

fn v1_corpus() -> Vec<Vec<Bytes>> {
    let mut c = Vec::new();
    let types = [("uint8", 1), ("uint16", 2), ("uint32", 4)];
    for (k, (ty, size)) in types.into_iter().enumerate() {
        let bs = format!("bs{}-lz4<", size * 8);
        for enc in ["<", "lz4<", bs.as_str()] {
            c.push(v1_image(k as u64, ty, size, enc, 12 + k, 5, k == 1));
        }
    }
    let mut first = v1_header("basic", false);
    first.extend(v1_image(0, "uint16", 2, "bs16-lz4<", 16, 8, false));
    c.push(first);
    c.push(v1_header("all", true));
    c.push(v1_header("none", false));
    let mut all = v1_header("all", false);
    all.extend(v1_image(0, "uint32", 4, "lz4<", 9, 7, true));
    all.extend(v1_end());
    c.push(all);
    c.push(v1_end());
    c
}

// ---- v2 corpus ---------------------------------------------------------------------------

type Enc = Encoder<Vec<u8>>;

fn cbor(self_describe: bool, f: impl FnOnce(&mut Enc)) -> Bytes {
    let mut e = Encoder::new(Vec::new());
    if self_describe {
        e.tag(Tag::new(55799)).unwrap();
    }
    f(&mut e);
    Bytes::from(e.into_writer())
}

fn md(e: &mut Enc, dims: &[u64], typed: u64, comp: Option<(&str, u64)>, bytes: &[u8]) {
    e.tag(Tag::new(40)).unwrap();
    e.array(2).unwrap().array(dims.len() as u64).unwrap();
    for &x in dims {
        e.u64(x).unwrap();
    }
    e.tag(Tag::new(typed)).unwrap();
    if let Some((alg, m)) = comp {
        e.tag(Tag::new(56500)).unwrap();
        e.array(3).unwrap().str(alg).unwrap().u64(m).unwrap();
    }
    e.bytes(bytes).unwrap();
}

fn v2_start(sd: bool) -> Bytes {
    let ff: Vec<u8> = (0..6u32).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let pm: Vec<u8> = (0..6u32).flat_map(|i| (i % 2).to_le_bytes()).collect();
    cbor(sd, |e| {
        e.map(14).unwrap();
        e.str("type").unwrap().str("start").unwrap();
        e.str("series_id").unwrap().u64(2).unwrap();
        e.str("series_unique_id")
            .unwrap()
            .str("01GRXWT80J")
            .unwrap();
        e.str("channels").unwrap().array(2).unwrap();
        e.str("threshold_1").unwrap().str("difference").unwrap();
        e.str("threshold_energy").unwrap().map(1).unwrap();
        e.str("threshold_1").unwrap().f64(4000.0).unwrap();
        e.str("image_dtype").unwrap().str("uint16").unwrap();
        e.str("image_size_x").unwrap().u64(10).unwrap();
        e.str("image_size_y").unwrap().u64(6).unwrap();
        e.str("goniometer").unwrap().map(1).unwrap();
        e.str("omega").unwrap().map(2).unwrap();
        e.str("start").unwrap().f64(0.0).unwrap();
        e.str("increment").unwrap().f32(0.5).unwrap();
        e.str("detector_translation").unwrap().array(3).unwrap();
        e.f64(0.0).unwrap().i8(-1).unwrap().u64(u64::MAX).unwrap();
        e.str("flatfield").unwrap().map(1).unwrap();
        e.str("threshold_1").unwrap();
        md(e, &[2, 3], 85, None, &ff);
        e.str("pixel_mask").unwrap().map(1).unwrap();
        e.str("threshold_1").unwrap();
        md(e, &[2, 3], 70, Some(("bslz4", 4)), &bs_lz4(&pm, 4));
        e.str("countrate_correction_lookup_table").unwrap();
        e.tag(Tag::new(70)).unwrap();
        e.tag(Tag::new(56500)).unwrap();
        e.array(3).unwrap().str("lz4").unwrap().u8(0).unwrap();
        e.bytes(&lz4_hdf5(&pm, 8)).unwrap();
        e.str("user_data").unwrap().array(2).unwrap();
        e.str("u").unwrap().bytes(b"\x00\x01").unwrap();
    })
}

fn v2_image(id: u64, sd: bool) -> Bytes {
    let (w, h) = (10usize, 6usize);
    let t1 = pixels(w * h * 2, id as usize);
    let t2 = pixels(w * h * 4, 1);
    let d = pixels(w * h, 2);
    let dims = [h as u64, w as u64];
    cbor(sd, |e| {
        e.begin_map().unwrap();
        e.str("series_id").unwrap().u64(2).unwrap();
        e.str("type").unwrap().str("image").unwrap();
        e.str("image_id").unwrap().u64(id).unwrap();
        e.str("real_time")
            .unwrap()
            .array(2)
            .unwrap()
            .u64(1)
            .unwrap()
            .u64(50_000_000)
            .unwrap();
        e.str("series_date").unwrap().tag(Tag::new(0)).unwrap();
        e.str("2023-02-10T00:00:00Z").unwrap();
        e.str("data").unwrap().map(4).unwrap();
        e.str("threshold_1").unwrap();
        md(e, &dims, 69, Some(("bslz4", 2)), &bs_lz4(&t1, 2));
        e.str("threshold_2").unwrap();
        md(e, &dims, 70, Some(("lz4", 0)), &lz4_hdf5(&t2, 64));
        e.str("raw16").unwrap();
        md(e, &dims, 77, None, &t1);
        e.str("difference").unwrap();
        md(e, &dims, 64, Some(("bslz4", 1)), &bs_lz4(&d, 1));
        e.str("user_data").unwrap().str("image appendix").unwrap();
        e.end().unwrap();
    })
}

fn v2_end() -> Bytes {
    cbor(true, |e| {
        e.map(3).unwrap();
        e.str("type").unwrap().str("end").unwrap();
        e.str("series_id").unwrap().u64(2).unwrap();
        e.str("series_unique_id")
            .unwrap()
            .str("01GRXWT80J")
            .unwrap();
    })
}

fn v2_corpus() -> Vec<Vec<Bytes>> {
    vec![
        vec![v2_start(true)],
        vec![v2_start(false), v2_image(0, true)],
        vec![v2_image(1, true)],
        vec![v2_image(2, false), v2_end()],
        vec![v2_end()],
    ]
}

// ---- mutations ---------------------------------------------------------------------------

const BIG: [u64; 8] = [
    1 << 60,
    u64::MAX,
    1 << 32,
    (1 << 32) - 1,
    1 << 31,
    1 << 30,
    0,
    1,
];

const JSON_NUMBERS: [&str; 10] = [
    "18446744073709551615",
    "18446744073709551616",
    "4294967296",
    "1073741824",
    "0",
    "-1",
    "1e300",
    "99999999999",
    "0.5",
    "65536",
];

const DICT: [&str; 24] = [
    "dheader-1.0",
    "dimage-1.0",
    "dimage_d-1.0",
    "dconfig-1.0",
    "dseries_end-1.0",
    "dflatfield-1.0",
    "dpixelmask-1.0",
    "dcountrate_table-1.0",
    "uint8",
    "uint16",
    "uint32",
    "int32",
    "float32",
    "<",
    "lz4<",
    "bs16-lz4<",
    "bs32-lz4<",
    "bs8-lz4<",
    ">",
    "all",
    "basic",
    "none",
    "htype",
    "shape",
];

/// A length-bearing CBOR head (bytes, text, array, map) at `p` rewritten to carry a huge
/// 8-byte length.
fn cbor_blowup(rng: &mut SmallRng, v: &mut Vec<u8>) {
    let heads: Vec<usize> = (0..v.len())
        .filter(|&i| matches!(v[i] >> 5, 2..=5) && v[i] & 0x1f < 28)
        .collect();
    if heads.is_empty() {
        return;
    }
    let p = heads[rng.random_range(0..heads.len())];
    let extra = match v[p] & 0x1f {
        24 => 1,
        25 => 2,
        26 => 4,
        27 => 8,
        _ => 0,
    };
    let end = (p + 1 + extra).min(v.len());
    let big = BIG[rng.random_range(0..BIG.len())];
    let mut head = vec![(v[p] & 0xe0) | 27];
    head.extend_from_slice(&big.to_be_bytes());
    v.splice(p..end, head);
}

/// A JSON number replaced by an extreme one.
fn json_blowup(rng: &mut SmallRng, v: &mut Vec<u8>) {
    let starts: Vec<usize> = (0..v.len())
        .filter(|&i| v[i].is_ascii_digit() && (i == 0 || !v[i - 1].is_ascii_digit()))
        .collect();
    if starts.is_empty() {
        return;
    }
    let p = starts[rng.random_range(0..starts.len())];
    let end = p + v[p..].iter().take_while(|b| b.is_ascii_digit()).count();
    let n = JSON_NUMBERS[rng.random_range(0..JSON_NUMBERS.len())];
    v.splice(p..end, n.bytes());
}

/// A binary size field (a compressed blob's header or a block length) overwritten.
fn blob_blowup(rng: &mut SmallRng, v: &mut [u8]) {
    let big = BIG[rng.random_range(0..BIG.len())];
    match rng.random_range(0..3) {
        0 if v.len() >= 8 => v[..8].copy_from_slice(&big.to_be_bytes()),
        1 if v.len() >= 12 => v[8..12].copy_from_slice(&(big as u32).to_be_bytes()),
        _ if v.len() >= 16 => v[12..16].copy_from_slice(&(big as u32).to_be_bytes()),
        _ => {}
    }
}

/// One text token swapped for another (htypes, types, encodings, header details).
fn dict_swap(rng: &mut SmallRng, v: &mut Vec<u8>) {
    let from = DICT[rng.random_range(0..DICT.len())].as_bytes();
    let to = DICT[rng.random_range(0..DICT.len())].as_bytes();
    if let Some(p) = v.windows(from.len()).position(|w| w == from) {
        v.splice(p..p + from.len(), to.iter().copied());
    }
}

fn mutate_bytes(rng: &mut SmallRng, v: &mut Vec<u8>, v2: bool) {
    let len = v.len();
    match rng.random_range(0..10) {
        0 | 1 if len > 0 => {
            let i = rng.random_range(0..len);
            v[i] ^= 1 << rng.random_range(0..8);
        }
        2 if len > 0 => {
            let i = rng.random_range(0..len);
            v[i] = [0, 0xff, 0x7f, 0x80, 0x1b, 0x9f, 0xbf, 0xc0][rng.random_range(0..8)];
        }
        3 => {
            let i = rng.random_range(0..=len);
            let n = rng.random_range(1..=4);
            for _ in 0..n {
                v.insert(i, rng.random());
            }
        }
        4 if len > 0 => {
            let i = rng.random_range(0..len);
            let n = rng.random_range(1..=(len - i).min(16));
            v.drain(i..i + n);
        }
        5 => v.truncate(rng.random_range(0..=len)),
        6 | 7 => {
            if v2 {
                cbor_blowup(rng, v)
            } else {
                json_blowup(rng, v)
            }
        }
        8 => blob_blowup(rng, v),
        _ => dict_swap(rng, v),
    }
}

fn mutate(rng: &mut SmallRng, msg: &[Bytes], corpus: &[Vec<Bytes>], v2: bool) -> Vec<Bytes> {
    let mut parts = msg.to_vec();
    for _ in 0..rng.random_range(1..=3) {
        let n = parts.len();
        match rng.random_range(0..12) {
            0 if n > 0 => {
                parts.remove(rng.random_range(0..n));
            }
            1 if n > 0 => {
                let i = rng.random_range(0..n);
                let p = parts[i].clone();
                parts.insert(rng.random_range(0..=n), p);
            }
            2 if n > 1 => {
                let (a, b) = (rng.random_range(0..n), rng.random_range(0..n));
                parts.swap(a, b);
            }
            3 => {
                let other = &corpus[rng.random_range(0..corpus.len())];
                if !other.is_empty() {
                    let p = other[rng.random_range(0..other.len())].clone();
                    parts.insert(rng.random_range(0..=n), p);
                }
            }
            _ if n > 0 => {
                let i = rng.random_range(0..n);
                let mut v = parts[i].to_vec();
                mutate_bytes(rng, &mut v, v2);
                parts[i] = Bytes::from(v);
            }
            _ => {}
        }
    }
    parts
}

// ---- the run -----------------------------------------------------------------------------

#[derive(Default, Debug)]
struct Stats {
    messages: u64,
    ok: u64,
    events: u64,
    frames: u64,
    decoded: u64,
    frame_errors: u64,
}

/// Every frame of every event must decode or fail cleanly; a frame that decodes passes
/// `check_header`.
fn exercise(events: &[Event], buf: &mut Vec<u8>, st: &mut Stats) {
    for ev in events {
        st.events += 1;
        let Event::Image(img) = ev else { continue };
        for f in &img.frames {
            st.frames += 1;
            let checked = check_header(f);
            if checked.is_err() {
                // decode_into runs the same checks first: it must refuse too.
                let mut tiny = vec![0u8; f.decoded_len().min(1 << 16)];
                if tiny.len() == f.decoded_len() {
                    assert!(decode_into(f, &mut tiny).is_err());
                }
                st.frame_errors += 1;
                continue;
            }
            // Passing the checks bounds the size by the message's (LZ4 expands ≤ 256×).
            buf.resize(f.decoded_len(), 0);
            match decode_into(f, buf) {
                Ok(()) => st.decoded += 1,
                Err(_) => st.frame_errors += 1,
            }
        }
    }
}

type Decode = fn(&[Bytes], &mut Vec<Event>) -> Result<(), ndflow_eiger::stream::StreamError>;

fn run(name: &str, decode: Decode, other: Decode, corpus: Vec<Vec<Bytes>>, v2: bool, salt: u64) {
    let iters = env_u64("NDFLOW_FUZZ_ITERS", DEFAULT_ITERS);
    let seed = env_u64("NDFLOW_FUZZ_SEED", DEFAULT_SEED) ^ salt;
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut st = Stats::default();
    let mut buf = Vec::new();
    let mut events = Vec::new();
    // The unmutated corpus decodes.
    for msg in &corpus {
        events.clear();
        decode(msg, &mut events).unwrap();
        exercise(&events, &mut buf, &mut st);
    }
    assert_eq!(st.frames, st.decoded, "{name}: the valid corpus decodes");
    let t0 = Instant::now();
    for i in 0..iters {
        let msg = &corpus[rng.random_range(0..corpus.len())];
        let m = mutate(&mut rng, msg, &corpus, v2);
        // Now and then, the other version's decoder gets it.
        let dec = if i % 64 == 63 { other } else { decode };
        events.clear();
        let r = catch_unwind(AssertUnwindSafe(|| {
            let res = dec(&m, &mut events);
            exercise(&events, &mut buf, &mut st);
            res
        }));
        match r {
            Ok(res) => st.ok += u64::from(res.is_ok()),
            Err(p) => {
                eprintln!("{name}: panic at iteration {i}, seed {seed:#x}; message:");
                for (k, part) in m.iter().enumerate() {
                    eprintln!("  part {k}: {:02x?}", &part[..part.len().min(512)]);
                }
                resume_unwind(p);
            }
        }
        st.messages += 1;
    }
    let dt = t0.elapsed();
    eprintln!(
        "{name}: {} mutated messages in {:.1} s ({:.2} µs each): {st:?}",
        st.messages,
        dt.as_secs_f64(),
        dt.as_secs_f64() * 1e6 / st.messages.max(1) as f64
    );
    assert!(
        st.ok > 0 && st.decoded > 0,
        "{name}: the mutations still reach the decoders"
    );
}

#[test]
fn fuzz_v1() {
    run(
        "v1",
        v1::decode_message,
        v2::decode_message,
        v1_corpus(),
        false,
        1,
    );
}

#[test]
fn fuzz_v2() {
    run(
        "v2",
        v2::decode_message,
        v1::decode_message,
        v2_corpus(),
        true,
        2,
    );
}
