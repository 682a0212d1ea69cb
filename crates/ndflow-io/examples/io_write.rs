//! Writes one frame from a raw file through the TIFF or JPEG file plugin (for interop tests).
//!
//! ```text
//! io_write --format tiff|jpeg --dtype UInt16 --dims 7,5 --raw frame.bin --out DIR --name img
//!          [--color Mono|RGB1|RGB2|RGB3] [--uid N] [--ts SECONDS] [--sec N] [--nsec N]
//!          [--attr NAME=VALUE]... [--quality Q] [--count N]
//! ```
//! `--raw` holds the pixels in native byte order, dims[0] fastest. `--attr` values that parse
//! as integers become Int64 attributes, as floats Float64, else strings. `--count N` writes
//! the frame N times in Stream mode (N files). Prints the last FullFileName.

use std::error::Error;

use ndflow_core::{AttrValue, Buffer, ColorMode, DataType, NDArray, NDAttribute};
use ndflow_io::{FileWriterPlugin, Format, JpegFilePlugin, TiffFilePlugin};
use ndflow_runtime::PluginHarness;

type Res<T> = Result<T, Box<dyn Error>>;

struct Args {
    format: String,
    frame: NDArray,
    out: String,
    name: String,
    quality: i64,
    count: i64,
}

fn parse() -> Res<Args> {
    let mut it = std::env::args().skip(1);
    let (mut format, mut dtype, mut dims, mut raw) = (None, None, None, None);
    let (mut out, mut name, mut color) = (None, None, "Mono".to_string());
    let (mut uid, mut ts, mut sec, mut nsec, mut quality, mut count) = (0, 0.0, 0, 0, 50, 1);
    let mut attrs = Vec::new();
    while let Some(flag) = it.next() {
        let v = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--format" => format = Some(v),
            "--dtype" => dtype = Some(DataType::from_name(&v)?),
            "--dims" => {
                dims = Some(
                    v.split(',')
                        .map(|s| s.trim().parse::<usize>())
                        .collect::<Result<Vec<_>, _>>()?,
                )
            }
            "--raw" => raw = Some(std::fs::read(&v)?),
            "--out" => out = Some(v),
            "--name" => name = Some(v),
            "--color" => color = v,
            "--uid" => uid = v.parse()?,
            "--ts" => ts = v.parse()?,
            "--sec" => sec = v.parse()?,
            "--nsec" => nsec = v.parse()?,
            "--quality" => quality = v.parse()?,
            "--count" => count = v.parse()?,
            "--attr" => {
                let (k, val) = v.split_once('=').ok_or("--attr wants NAME=VALUE")?;
                let value = if let Ok(i) = val.parse::<i64>() {
                    AttrValue::Int64(i)
                } else if let Ok(f) = val.parse::<f64>() {
                    AttrValue::Float64(f)
                } else {
                    AttrValue::String(val.to_string())
                };
                attrs.push(NDAttribute::new(k, "", value));
            }
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    let dt = dtype.ok_or("--dtype missing")?;
    let raw = raw.ok_or("--raw missing")?;
    let mut frame = NDArray::new(&dims.ok_or("--dims missing")?, dt, Buffer::from_bytes(&raw))?;
    frame.unique_id = uid;
    frame.time_stamp = ts;
    frame.epics_ts.sec = sec;
    frame.epics_ts.nsec = nsec;
    let mode = ColorMode::NAMES
        .iter()
        .position(|n| *n == color)
        .and_then(|i| ColorMode::from_index(i as i64))
        .ok_or_else(|| format!("unknown colour mode {color}"))?;
    frame.set_color_mode(mode);
    for a in attrs {
        frame.set_attribute(a);
    }
    Ok(Args {
        format: format.ok_or("--format missing")?,
        frame,
        out: out.ok_or("--out missing")?,
        name: name.ok_or("--name missing")?,
        quality,
        count,
    })
}

/// `has_quality`: the format has JPEGQuality (JPEG).
fn run<F: Format>(h: PluginHarness<FileWriterPlugin<F>>, a: Args, has_quality: bool) -> Res<()> {
    h.put("FilePath", a.out.as_str())?;
    h.put("FileName", a.name.as_str())?;
    h.put("AutoIncrement", "Yes")?;
    if has_quality {
        h.put("JPEGQuality", a.quality)?;
    }
    if a.count > 1 {
        h.put("FileWriteMode", "Stream")?;
        h.put("NumCapture", a.count)?;
        h.put("Capture", 1)?;
        for _ in 0..a.count {
            h.process(a.frame.clone())?;
        }
    } else {
        h.put("AutoSave", "Yes")?;
        h.process(a.frame)?;
    }
    println!("{}", h.get("FullFileName").to_string().trim_matches('"'));
    Ok(())
}

fn main() -> Res<()> {
    let a = parse()?;
    match a.format.as_str() {
        "tiff" => run(PluginHarness::new(TiffFilePlugin::new()), a, false),
        "jpeg" => run(PluginHarness::new(JpegFilePlugin::new()), a, true),
        other => Err(format!("unknown format {other} (tiff, jpeg)").into()),
    }
}
