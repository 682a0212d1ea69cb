//! A test pvAccess server with a few PVs, for interop tests (python/tests/test_pva_server.py).
//!
//! Configuration comes from the EPICS_PVAS_* / EPICS_PVA_* variables (source
//! scripts/loopback.env first; ports 0 = ephemeral). The first line on stdout is
//! `PVA tcp=127.0.0.1:NNNN udp=127.0.0.1:MMMM`. The server exits on stdin EOF (or SIGTERM).
//!
//! PVs (prefix `--prefix`, default `TEST:`):
//! - `scalar:<t>` for t in bool i8 i16 i32 i64 u8 u16 u32 u64 f32 f64 string: writable NTScalar
//! - `i32`, `f64`, `str`: writable NTScalar int32 / float64 / string
//! - `limited`: NTScalar int32, PUT refused outside [-100, 100]
//! - `ro`: read-only NTScalar float64 (PUT refused: "read-only")
//! - `enum`: NTEnum with choices Zero One Two Three (PUT by index; out of range refused)
//! - `array`: writable NTScalarArray float64, initially 1..=10
//! - `image`: NTNDArray; `image:post` (NTScalar string) takes "TYPE [NX NY [COUNT]]" and posts
//!   COUNT frames of that type (int8 uint8 int16 uint16 int32 uint32 int64 uint64 float32
//!   float64). Pixel k (flat, x fastest) of the frame with uniqueId u is
//!   `(7k + 13u) mod 2^bits` for integers (two's complement for signed) and `0.5k - u` for floats.
//!
//! stdin commands: `post TYPE NX NY COUNT` (as image:post, answers `ok N`), `stats`.

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use ndflow_pva::nt::ntndarray::{ntndarray_desc, Attribute, Dimension, NtNdArray};
use ndflow_pva::nt::{enumeration, scalar, scalar_array, set_time_stamp, TimeStamp};
use ndflow_pva::server::{Server, ServerConfig, SharedPv, StaticProvider};
use ndflow_pva::{BitSet, FieldDesc, NumArray, ScalarType, Value};

const TYPES: [(&str, ScalarType); 12] = [
    ("bool", ScalarType::Bool),
    ("i8", ScalarType::I8),
    ("i16", ScalarType::I16),
    ("i32", ScalarType::I32),
    ("i64", ScalarType::I64),
    ("u8", ScalarType::U8),
    ("u16", ScalarType::U16),
    ("u32", ScalarType::U32),
    ("u64", ScalarType::U64),
    ("f32", ScalarType::F32),
    ("f64", ScalarType::F64),
    ("string", ScalarType::String),
];

/// Post what the client wrote, with a fresh timestamp.
fn accept_put(pv: &SharedPv, v: &Value, bits: &BitSet) -> Result<(), String> {
    let desc = pv.desc();
    let mut v = v.clone();
    let mut changed = bits.clone();
    if let Some(b) = set_time_stamp(&desc, &mut v, TimeStamp::now()) {
        changed.union_with(&b);
    }
    pv.post(v, &changed).map_err(|e| e.to_string())
}

fn writable(desc: FieldDesc, initial: Value) -> SharedPv {
    SharedPv::new(desc, initial).with_put_handler(accept_put)
}

fn frame_type(name: &str) -> Option<ScalarType> {
    Some(match name {
        "int8" => ScalarType::I8,
        "uint8" => ScalarType::U8,
        "int16" => ScalarType::I16,
        "uint16" => ScalarType::U16,
        "int32" => ScalarType::I32,
        "uint32" => ScalarType::U32,
        "int64" => ScalarType::I64,
        "uint64" => ScalarType::U64,
        "float32" => ScalarType::F32,
        "float64" => ScalarType::F64,
        _ => return None,
    })
}

fn pixels(t: ScalarType, n: usize, uid: i32) -> NumArray {
    let int = |k: usize| (k as u64).wrapping_mul(7).wrapping_add(13 * uid as u64);
    let flt = |k: usize| k as f64 * 0.5 - f64::from(uid);
    match t {
        ScalarType::I8 => NumArray::from_slice(&(0..n).map(|k| int(k) as i8).collect::<Vec<_>>()),
        ScalarType::U8 => NumArray::from_slice(&(0..n).map(|k| int(k) as u8).collect::<Vec<_>>()),
        ScalarType::I16 => NumArray::from_slice(&(0..n).map(|k| int(k) as i16).collect::<Vec<_>>()),
        ScalarType::U16 => NumArray::from_slice(&(0..n).map(|k| int(k) as u16).collect::<Vec<_>>()),
        ScalarType::I32 => NumArray::from_slice(&(0..n).map(|k| int(k) as i32).collect::<Vec<_>>()),
        ScalarType::U32 => NumArray::from_slice(&(0..n).map(|k| int(k) as u32).collect::<Vec<_>>()),
        ScalarType::I64 => NumArray::from_slice(&(0..n).map(|k| int(k) as i64).collect::<Vec<_>>()),
        ScalarType::U64 => NumArray::from_slice(&(0..n).map(int).collect::<Vec<_>>()),
        ScalarType::F32 => NumArray::from_slice(&(0..n).map(|k| flt(k) as f32).collect::<Vec<_>>()),
        _ => NumArray::from_slice(&(0..n).map(flt).collect::<Vec<_>>()),
    }
}

fn frame(t: ScalarType, nx: i32, ny: i32, uid: i32) -> Value {
    let n = (nx.max(0) as usize) * (ny.max(0) as usize);
    let value = pixels(t, n, uid);
    let bytes = value.bytes().len() as i64;
    let dim = |size| Dimension {
        size,
        offset: 0,
        full_size: size,
        binning: 1,
        reverse: false,
    };
    NtNdArray {
        value: Some(value),
        codec_name: String::new(),
        codec_parameters: None,
        compressed_size: bytes,
        uncompressed_size: bytes,
        dimension: vec![dim(nx), dim(ny)],
        unique_id: uid,
        data_time_stamp: TimeStamp::now(),
        attribute: vec![Attribute {
            name: "ColorMode".into(),
            value: Some((FieldDesc::Scalar(ScalarType::I32), Value::I32(0))),
            descriptor: "Color mode".into(),
            source_type: 0,
            source: String::new(),
        }],
        alarm: (0, 0, String::new()),
        time_stamp: TimeStamp::now(),
    }
    .to_value()
}

/// Handles "TYPE [NX NY [COUNT]]": posts COUNT frames; returns how many.
struct Imager {
    pv: SharedPv,
    uid: AtomicI32,
}

impl Imager {
    fn post(&self, cmd: &str) -> Result<usize, String> {
        let mut it = cmd.split_whitespace();
        let t = it
            .next()
            .and_then(frame_type)
            .ok_or_else(|| format!("unknown frame type in {cmd:?}"))?;
        let mut num = |d: i64| -> Result<i64, String> {
            it.next().map_or(Ok(d), |s| {
                s.parse().map_err(|_| format!("bad number {s:?}"))
            })
        };
        let (nx, ny, count) = (num(64)?, num(48)?, num(1)?);
        if !(1..=16384).contains(&nx)
            || !(1..=16384).contains(&ny)
            || !(0..=100_000).contains(&count)
        {
            return Err("size or count out of range".into());
        }
        for _ in 0..count {
            let uid = self.uid.fetch_add(1, Ordering::Relaxed) + 1;
            let v = frame(t, nx as i32, ny as i32, uid);
            self.pv.post(v, &BitSet::new()).map_err(|e| e.to_string())?;
        }
        Ok(count as usize)
    }
}

fn main() {
    let mut prefix = "TEST:".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--prefix" => prefix = args.next().unwrap_or_default(),
            _ => {
                eprintln!("usage: pva_serve [--prefix P]");
                std::process::exit(2);
            }
        }
    }
    let cfg = match ServerConfig::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("pva_serve: {e}");
            std::process::exit(2);
        }
    };
    let provider = Arc::new(StaticProvider::new());
    let add = |name: &str, pv: SharedPv| provider.add(format!("{prefix}{name}"), pv);

    for (name, t) in TYPES {
        let initial = match t {
            ScalarType::String => Value::String("hello".into()),
            ScalarType::Bool => Value::Bool(true),
            _ => ndflow_pva::nt::ntscalar::from_f64(t, 42.0),
        };
        add(
            &format!("scalar:{name}"),
            writable(scalar::desc(t), scalar::value(t, initial)),
        );
    }
    add(
        "i32",
        writable(
            scalar::desc(ScalarType::I32),
            scalar::value(ScalarType::I32, Value::I32(7)),
        ),
    );
    add(
        "f64",
        writable(
            scalar::desc(ScalarType::F64),
            scalar::value(ScalarType::F64, Value::F64(1.5)),
        ),
    );
    add(
        "str",
        writable(
            scalar::desc(ScalarType::String),
            scalar::value(ScalarType::String, Value::String("abc".into())),
        ),
    );
    add(
        "limited",
        SharedPv::new(
            scalar::desc(ScalarType::I32),
            scalar::value(ScalarType::I32, Value::I32(0)),
        )
        .with_put_handler(|pv, v, bits| {
            let x = v
                .field(&pv.desc(), "value")
                .and_then(Value::as_f64)
                .unwrap_or(0.0);
            if !(-100.0..=100.0).contains(&x) {
                return Err(format!("value {x} out of range [-100, 100]"));
            }
            accept_put(pv, v, bits)
        }),
    );
    add(
        "ro",
        SharedPv::new(
            scalar::desc(ScalarType::F64),
            scalar::value(ScalarType::F64, Value::F64(3.25)),
        ),
    );
    add(
        "enum",
        SharedPv::new(
            enumeration::desc(),
            enumeration::value(1, &["Zero", "One", "Two", "Three"]),
        )
        .with_put_handler(|pv, v, bits| {
            let d = pv.desc();
            let cur = pv.current();
            let n = enumeration::choices(&d, &cur).map_or(0, <[String]>::len);
            let i = enumeration::index(&d, v).unwrap_or(-1);
            if i < 0 || i as usize >= n {
                return Err(format!("index {i} out of range (0..{n})"));
            }
            // Choices are fixed: keep ours whatever the client sent.
            let mut new = cur;
            enumeration::set_index(&d, &mut new, i);
            accept_put(pv, &new, bits)
        }),
    );
    let arr: Vec<f64> = (1..=10).map(f64::from).collect();
    add(
        "array",
        writable(
            scalar_array::desc(ScalarType::F64),
            scalar_array::value(NumArray::from_slice(&arr)),
        ),
    );

    let image = SharedPv::new(ntndarray_desc().clone(), frame(ScalarType::U16, 64, 48, 0));
    add("image", image.clone());
    let imager = Arc::new(Imager {
        pv: image,
        uid: AtomicI32::new(0),
    });
    let im = Arc::clone(&imager);
    add(
        "image:post",
        SharedPv::new(
            scalar::desc(ScalarType::String),
            scalar::value(ScalarType::String, Value::String(String::new())),
        )
        .with_put_handler(move |pv, v, bits| {
            let cmd = v
                .field(&pv.desc(), "value")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            im.post(&cmd)?;
            accept_put(pv, v, bits)
        }),
    );

    let server = match Server::start(cfg, provider) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("pva_serve: cannot start: {e}");
            std::process::exit(1);
        }
    };
    println!("PVA tcp={} udp={}", server.tcp_addr(), server.udp_addr());
    let _ = std::io::stdout().flush();

    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let line = line.trim();
        let reply = if let Some(rest) = line.strip_prefix("post ") {
            match imager.post(rest) {
                Ok(n) => format!("ok {n}"),
                Err(e) => format!("error {e}"),
            }
        } else if line == "stats" {
            format!("{:?}", server.stats())
        } else {
            continue;
        };
        println!("{reply}");
        let _ = std::io::stdout().flush();
    }
    server.stop();
}
