//! Writes the seed corpora of the file, codec and wire-level fuzz targets from what ndflow's
//! own encoders and writers produce and from the repository's example and test files:
//!
//! * codec_*: simulated detector frames (a peak on a noisy background; 8, 16 and 32 bit,
//!   mono and RGB) compressed by each codec with the parameters the Codec plugin uses, in the
//!   target's input format (see `src/codec.rs`);
//! * tiff_read: NDFileTIFF's writer's files (mono and RGB, several types, with attributes);
//! * pva_wire: type descriptions and values of NTNDArray, NTScalar and NTEnum, both orders;
//! * hdf5_layout, config_toml: the XML layouts and configs under `examples/`;
//! * ndattr_xml, genicam_xml: the NDAttribute files and GenICam XML found in the tests.
//!
//! The network targets' corpora come from captures (`python/tools/fuzz_capture.py`).
//!
//! ```sh
//! cargo run --release -p ndflow-fuzz --example seed_corpus -- fuzz/corpus
//! ```

use std::io::Cursor;
use std::path::{Path, PathBuf};

use ndflow_codec::blosc::{BloscCompressor, BloscParams, BloscShuffle};
use ndflow_codec::bslz4::BsFraming;
use ndflow_codec::{blosc, bslz4, jpeg, lz4, zlib};
use ndflow_core::{AttrValue, ColorMode, DataType, NDArray, NDAttribute, Pool};
use ndflow_pva::nt::ntndarray::{ntndarray_desc, NtNdArray};
use ndflow_pva::nt::{enumeration, scalar};
use ndflow_pva::{BitSet, ByteOrder, ScalarType, Value, Writer};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

struct Out {
    dir: PathBuf,
    n: usize,
}

impl Out {
    fn put(&mut self, target: &str, name: &str, data: &[u8]) {
        let d = self.dir.join(target);
        std::fs::create_dir_all(&d).expect("corpus folder");
        std::fs::write(d.join(name), data).expect("corpus file");
        self.n += 1;
    }
}

/// A small simulated frame: a Gaussian peak on a noisy background, `bytes` per pixel.
fn frame(w: usize, h: usize, bytes: usize, seed: u64) -> Vec<u8> {
    let mut s = seed;
    let mut out = Vec::with_capacity(w * h * bytes);
    let max = if bytes == 1 { 250.0 } else { 4000.0 };
    for y in 0..h {
        for x in 0..w {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let noise = ((s >> 33) % 16) as f64;
            let (dx, dy) = (x as f64 - w as f64 / 3.0, y as f64 - h as f64 / 2.0);
            let v = (max * (-(dx * dx + dy * dy) / 20.0).exp() + noise) as u64;
            out.extend_from_slice(&v.to_le_bytes()[..bytes]);
        }
    }
    out
}

fn codecs(o: &mut Out) {
    for (bytes, w, h) in [(1usize, 32usize, 16usize), (2, 24, 16), (4, 16, 8)] {
        let raw = frame(w, h, bytes, bytes as u64);
        let n = raw.len();
        let size3 = |v: usize| (v as u32).to_be_bytes()[1..].to_vec();
        // lz4: raw block, then lz4hdf5
        let mut c = vec![0u8; lz4::max_hdf5_len(n, 0) + 64];
        let k = lz4::compress_block(&raw, &mut c).expect("lz4");
        o.put(
            "codec_lz4",
            &format!("block-{bytes}"),
            &[&[0][..], &size3(n), &c[..k]].concat(),
        );
        let k = lz4::compress_hdf5(&raw, 0, &mut c).expect("lz4hdf5");
        o.put(
            "codec_lz4",
            &format!("hdf5-{bytes}"),
            &[&[1][..], &c[..k]].concat(),
        );
        // bslz4: areaDetector framing (default and 64-element blocks), HDF5 framing
        for (block, framing) in [
            (0usize, BsFraming::AreaDetector),
            (64, BsFraming::AreaDetector),
            (0, BsFraming::Hdf5),
        ] {
            let cap = bslz4::max_compressed_len(n, bytes, block, framing).expect("bound");
            let mut c = vec![0u8; cap];
            let k = bslz4::compress(&raw, bytes, block, framing, &mut c).expect("bslz4");
            let hdf5 = framing == BsFraming::Hdf5;
            let mut seed = vec![u8::from(hdf5), bytes as u8, (block / 8) as u8];
            if !hdf5 {
                seed.extend(size3(n));
            }
            seed.extend_from_slice(&c[..k]);
            o.put(
                "codec_bslz4",
                &format!("{framing:?}-{bytes}-{block}"),
                &seed,
            );
        }
        // blosc: the Codec plugin's compressors and shuffles
        for (comp, shuffle) in [
            (BloscCompressor::BloscLZ, BloscShuffle::None),
            (BloscCompressor::LZ4, BloscShuffle::Byte),
            (BloscCompressor::Zstd, BloscShuffle::Bit),
            (BloscCompressor::Zlib, BloscShuffle::Byte),
        ] {
            let p = BloscParams {
                compressor: comp,
                shuffle,
                ..BloscParams::default()
            };
            let mut c = vec![0u8; blosc::max_compressed_len(n)];
            let k = blosc::compress(&raw, bytes, &p, &mut c).expect("blosc");
            o.put(
                "codec_blosc",
                &format!("{comp:?}-{shuffle:?}-{bytes}"),
                &c[..k],
            );
        }
        // zlib
        let mut c = vec![0u8; zlib::max_compressed_len(n)];
        let k = zlib::compress(&raw, 6, &mut c).expect("zlib");
        o.put(
            "codec_zlib",
            &format!("level6-{bytes}"),
            &[size3(n), c[..k].to_vec()].concat(),
        );
        // bitshuffle: the transposed frame
        let mut c = vec![0u8; n];
        ndflow_codec::bitshuffle::bitshuffle(&raw, bytes, &mut c).expect("bitshuffle");
        o.put(
            "codec_bitshuffle",
            &format!("elem{bytes}"),
            &[&[bytes as u8, 0][..], &c].concat(),
        );
    }
    // jpeg: mono and RGB, 8-bit
    for comps in [1usize, 3] {
        let (w, h) = (24, 16);
        let raw = frame(w * comps, h, 1, 7);
        let mut c = vec![0u8; jpeg::max_compressed_len(w, h, comps)];
        let k = jpeg::compress(&raw, w, h, comps, 85, &mut c).expect("jpeg");
        o.put("codec_jpeg", &format!("q85-{comps}"), &c[..k]);
    }
}

fn tiffs(o: &mut Out) {
    let pool = Pool::new(1 << 24);
    for (dt, bytes, rgb) in [
        (DataType::UInt8, 1usize, false),
        (DataType::UInt16, 2, false),
        (DataType::Int32, 4, false),
        (DataType::Float64, 8, false),
        (DataType::UInt8, 1, true),
    ] {
        let (w, h) = (12, 8);
        let dims: Vec<usize> = if rgb { vec![3, w, h] } else { vec![w, h] };
        let raw = frame(dims.iter().product(), 1, bytes, 3);
        let mut buf = pool.alloc(raw.len()).expect("pool");
        buf.as_mut_slice::<u8>().copy_from_slice(&raw);
        let mut f = NDArray::new(&dims, dt, buf.freeze()).expect("frame");
        if rgb {
            f.set_color_mode(ColorMode::RGB1);
        }
        f.unique_id = 42;
        f.time_stamp = 1.5;
        f.set_attribute(NDAttribute::new("Temp", "", AttrValue::Float64(21.5)));
        f.set_attribute(NDAttribute::new(
            "Name",
            "",
            AttrValue::String("sample".into()),
        ));
        let mut c = Cursor::new(Vec::new());
        ndflow_io::tiff::write_tiff(&mut c, &f).expect("tiff");
        o.put(
            "tiff_read",
            &format!("{dt:?}{}.tif", if rgb { "-rgb" } else { "" }),
            &c.into_inner(),
        );
    }
}

fn wire(o: &mut Out) {
    let pool = Pool::new(1 << 20);
    let mut buf = pool.alloc(12 * 8 * 2).expect("pool");
    buf.as_mut_slice::<u8>()
        .copy_from_slice(&frame(12, 8, 2, 5));
    let mut f = NDArray::new(&[12, 8], DataType::UInt16, buf.freeze()).expect("frame");
    f.set_attribute(NDAttribute::new("Gain", "", AttrValue::Float64(2.0)));
    let img = ndflow::pva::convert::to_nt(&f).to_value();
    let cases = [
        ("ntndarray", ntndarray_desc().clone(), img, vec![1usize]),
        (
            "ntscalar",
            scalar::desc(ScalarType::F64),
            scalar::value(ScalarType::F64, Value::F64(2.5)),
            vec![1],
        ),
        (
            "ntenum",
            enumeration::desc(),
            enumeration::value(1, &["Off", "On"]),
            vec![0],
        ),
    ];
    for (name, desc, value, bits) in cases {
        let _ = NtNdArray::from_value(&desc, &value);
        for (order, flag) in [(ByteOrder::Little, 0u8), (ByteOrder::Big, 1)] {
            let mut w = Writer::new(order);
            desc.encode(&mut w).expect("desc");
            value.encode(&desc, &mut w).expect("value");
            let bits = BitSet::from_bits(&bits);
            w.bitset(&bits).expect("bitset");
            value.encode_partial(&desc, &bits, &mut w).expect("partial");
            let body = w.into_inner();
            o.put(
                "pva_wire",
                &format!("{name}-{order:?}"),
                &[&[flag][..], &body].concat(),
            );
        }
    }
}

/// The `<tag …>…</tag>` blocks of a text (raw strings of tests, Python literals).
fn blocks(text: &str, open: &str, close: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(open) {
        let Some(j) = rest[i..].find(close) else {
            break;
        };
        out.push(rest[i..i + j + close.len()].to_string());
        rest = &rest[i + j + close.len()..];
    }
    out
}

fn files(o: &mut Out) {
    let r = root();
    let read = |p: &str| std::fs::read_to_string(r.join(p)).unwrap_or_default();
    let layout = "examples/hdf5/layout_demo.xml";
    o.put("hdf5_layout", &name_of(layout), read(layout).as_bytes());
    for (i, b) in blocks(
        &read("crates/ndflow-io/src/hdf5/xml_layout.rs"),
        "<hdf5_layout",
        "</hdf5_layout>",
    )
    .iter()
    .enumerate()
    {
        o.put(
            "hdf5_layout",
            &format!("xml_layout-tests-{i}.xml"),
            b.as_bytes(),
        );
    }
    for p in [
        "examples/demo.toml",
        "examples/pva_ioc.toml",
        "examples/rivers2013.toml",
        "examples/scatter_gather.toml",
        "examples/eiger.toml",
        "examples/aravis.toml",
        "examples/nexus/nexus.toml",
        "examples/scaleout/head.toml",
        "examples/scaleout/writer.toml",
    ] {
        o.put("config_toml", &name_of(p), read(p).as_bytes());
    }
    let mut k = 0;
    for p in [
        "crates/ndflow-runtime/tests/attr_file.rs",
        "crates/ndflow-runtime/tests/attr_funct.rs",
        "python/tests/test_attributes_file.py",
        "python/tests/test_attributes_pv_sources.py",
    ] {
        for b in blocks(&read(p), "<Attributes", "</Attributes>") {
            // Test sources hold them as string literals: undo the usual escapes.
            let b = b.replace("\\\"", "\"").replace("\\n", "\n");
            o.put("ndattr_xml", &format!("attributes-{k}.xml"), b.as_bytes());
            k += 1;
        }
    }
    for (i, b) in blocks(
        &read("crates/ndflow-aravis/src/features/tests.rs"),
        "<RegisterDescription",
        "</RegisterDescription>",
    )
    .iter()
    .enumerate()
    {
        o.put(
            "genicam_xml",
            &format!("features-tests-{i}.xml"),
            b.as_bytes(),
        );
    }
}

fn name_of(p: &str) -> String {
    p.replace('/', "-")
}

fn main() {
    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("fuzz/corpus"));
    let mut o = Out { dir, n: 0 };
    codecs(&mut o);
    tiffs(&mut o);
    wire(&mut o);
    files(&mut o);
    println!("{} seed files under {}", o.n, Path::new(&o.dir).display());
}
