//! Writes frames from a raw file through the HDF5 file plugin, in Stream mode (for the
//! Python interop tests: h5py + hdf5plugin, h5dump, SWMR readers).
//!
//! ```text
//! hdf5_write --dtype UInt16 --dims 64,48 --raw frames.bin --frames N --out DIR --name NAME
//!            [--color Mono|RGB1|RGB2|RGB3] [--set Param=Value]... [--codec-set Param=Value]...
//!            [--delay-ms M] [--attr NAME=VALUE]...
//! ```
//! `--raw` holds N frames back to back (native byte order, dims[0] fastest); frame k gets
//! uniqueId k+1. `--set` writes a parameter of the HDF5 plugin (Compression=BSLZ4,
//! SWMRMode=On, NumFramesFlush=1, ...). `--codec-set` compresses every frame with the Codec
//! plugin first (Compressor=BSLZ4, BloscCLevel=6, ...), so the HDF5 plugin receives
//! pre-compressed frames. `--delay-ms` sleeps after each frame; after the first frame the line
//! `OPEN <path>` is printed (and flushed) so a reader can start. The last lines are
//! `STATUS captured=N not_written=N status=0|1 message=...` and `DONE <path>`; a frame that
//! cannot be written is counted, not fatal (exit status 0).

use std::error::Error;
use std::io::Write;
use std::time::Duration;

use ndflow_core::{AttrValue, Buffer, ColorMode, DataType, NDArray, NDAttribute};
use ndflow_io::Hdf5FilePlugin;
use ndflow_plugins::codec::CodecPlugin;
use ndflow_runtime::PluginHarness;

type Res<T> = Result<T, Box<dyn Error>>;

fn main() -> Res<()> {
    let mut it = std::env::args().skip(1);
    let (mut dtype, mut dims, mut raw, mut frames) = (None, None, None, 1usize);
    let (mut out, mut name, mut color, mut delay) = (None, None, "Mono".to_string(), 0u64);
    let (mut sets, mut codec_sets, mut attrs) = (Vec::new(), Vec::new(), Vec::new());
    while let Some(flag) = it.next() {
        let v = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let pair = |v: &str| -> Res<(String, String)> {
            let (k, x) = v.split_once('=').ok_or("wants NAME=VALUE")?;
            Ok((k.to_string(), x.to_string()))
        };
        match flag.as_str() {
            "--dtype" => dtype = Some(DataType::from_name(&v)?),
            "--dims" => {
                dims = Some(
                    v.split(',')
                        .map(|s| s.trim().parse::<usize>())
                        .collect::<Result<Vec<_>, _>>()?,
                )
            }
            "--raw" => raw = Some(std::fs::read(&v)?),
            "--frames" => frames = v.parse()?,
            "--out" => out = Some(v),
            "--name" => name = Some(v),
            "--color" => color = v,
            "--delay-ms" => delay = v.parse()?,
            "--set" => sets.push(pair(&v)?),
            "--codec-set" => codec_sets.push(pair(&v)?),
            "--attr" => attrs.push(pair(&v)?),
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    let dt = dtype.ok_or("--dtype missing")?;
    let dims = dims.ok_or("--dims missing")?;
    let raw = raw.ok_or("--raw missing")?;
    let frame_bytes = dims.iter().product::<usize>() * dt.size();
    if raw.len() < frame_bytes * frames {
        return Err(format!(
            "--raw holds {} bytes, {frames} frames need {}",
            raw.len(),
            frame_bytes * frames
        )
        .into());
    }
    let mode = ColorMode::NAMES
        .iter()
        .position(|n| *n == color)
        .and_then(|i| ColorMode::from_index(i as i64))
        .ok_or_else(|| format!("unknown colour mode {color}"))?;

    let h = PluginHarness::new(Hdf5FilePlugin::new());
    h.put("FilePath", out.ok_or("--out missing")?.as_str())?;
    h.put("FileName", name.ok_or("--name missing")?.as_str())?;
    h.put("FileTemplate", "%s%s.h5")?;
    h.put("FileWriteMode", "Stream")?;
    h.put("LazyOpen", "Yes")?;
    h.put("NumCapture", frames as i64)?;
    for (k, v) in &sets {
        h.put(k, v.as_str())?;
    }
    let codec = (!codec_sets.is_empty()).then(|| PluginHarness::new(CodecPlugin::new()));
    if let Some(c) = &codec {
        for (k, v) in &codec_sets {
            c.put(k, v.as_str())?;
        }
    }
    h.put("Capture", 1)?;
    let stdout = std::io::stdout();
    for k in 0..frames {
        let bytes = &raw[k * frame_bytes..(k + 1) * frame_bytes];
        let mut f = NDArray::new(&dims, dt, Buffer::from_bytes(bytes))?;
        f.unique_id = k as i32 + 1;
        f.time_stamp = 1000.0 + k as f64;
        f.epics_ts.sec = 1_000_000 + k as u32;
        f.epics_ts.nsec = 1000 * k as u32;
        f.set_color_mode(mode);
        for (a, v) in &attrs {
            let value = if let Ok(i) = v.parse::<i64>() {
                AttrValue::Int64(i)
            } else if let Ok(x) = v.parse::<f64>() {
                AttrValue::Float64(x)
            } else {
                AttrValue::String(v.clone())
            };
            f.set_attribute(NDAttribute::new(a.as_str(), "", value));
        }
        let f = match &codec {
            Some(c) => c.process(f)?.remove(0),
            None => std::sync::Arc::new(f),
        };
        // A write error is counted by the plugin (FramesNotWritten); carry on like a pipeline.
        let _ = h.process_arc(&f);
        if k == 0 {
            writeln!(
                stdout.lock(),
                "OPEN {}",
                h.get("FullFileName").to_string().trim_matches('"')
            )?;
            stdout.lock().flush()?;
        }
        if delay > 0 {
            std::thread::sleep(Duration::from_millis(delay));
        }
    }
    if h.get_f64("Capture") != 0.0 {
        h.put("Capture", 0)?;
    }
    println!(
        "STATUS captured={} not_written={} status={} message={}",
        h.get_f64("NumCaptured"),
        h.get_f64("FramesNotWritten"),
        h.get_f64("WriteStatus"),
        h.get("WriteMessage")
    );
    println!(
        "DONE {}",
        h.get("FullFileName").to_string().trim_matches('"')
    );
    Ok(())
}
