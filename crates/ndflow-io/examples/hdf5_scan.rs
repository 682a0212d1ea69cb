//! Writes a small scan through the HDF5 file plugin, Stream mode (for the Python tests of XML
//! layouts, extra dims and position mode).
//!
//! ```text
//! hdf5_scan --out DIR --name NAME --frames N --dims X,Y [--set Param=Value]... [--pos X:N,X:N,...]
//! ```
//! Frame k (0-based) is UInt16 with pixel i = 1000 (k + 1) + i, uniqueId k + 1, and the
//! NDAttributes Gain = k + 1 (Float64) and Temp = 20 + k (Int32); `--pos` adds pos_x and pos_n
//! (Int32) to frame k from its k-th pair. Prints `STATUS status=0|1 message=...` and
//! `DONE <path>`.

use std::error::Error;

use ndflow_core::{AttrValue, NDArray, NDAttribute, Pool};
use ndflow_io::Hdf5FilePlugin;
use ndflow_runtime::PluginHarness;

type Res<T> = Result<T, Box<dyn Error>>;

fn main() -> Res<()> {
    let mut it = std::env::args().skip(1);
    let (mut out, mut name, mut frames, mut dims) = (None, None, 1usize, vec![4usize, 3]);
    let (mut sets, mut pos) = (Vec::new(), Vec::new());
    while let Some(flag) = it.next() {
        let v = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--out" => out = Some(v),
            "--name" => name = Some(v),
            "--frames" => frames = v.parse()?,
            "--dims" => {
                dims = v
                    .split(',')
                    .map(|s| s.trim().parse())
                    .collect::<Result<_, _>>()?
            }
            "--set" => {
                let (k, x) = v.split_once('=').ok_or("--set wants NAME=VALUE")?;
                sets.push((k.to_string(), x.to_string()));
            }
            "--pos" => {
                for pair in v.split(',') {
                    let (x, n) = pair.split_once(':').ok_or("--pos wants X:N,...")?;
                    pos.push((x.trim().parse::<i32>()?, n.trim().parse::<i32>()?));
                }
            }
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    let h = PluginHarness::new(Hdf5FilePlugin::new());
    h.put("FilePath", out.ok_or("--out is required")?.as_str())?;
    h.put("FileName", name.ok_or("--name is required")?.as_str())?;
    h.put("FileTemplate", "%s%s.h5")?;
    h.put("FileWriteMode", "Stream")?;
    h.put("LazyOpen", "Yes")?;
    for (k, v) in &sets {
        h.put(k, v.as_str())?;
    }
    h.put("NumCapture", 0)?;
    h.put("Capture", 1)?;
    let pixels: usize = dims.iter().product();
    for k in 0..frames {
        let data: Vec<u16> = (0..pixels).map(|i| (1000 * (k + 1) + i) as u16).collect();
        let mut f = NDArray::from_pixels(&Pool::unlimited(), &dims, &data)?;
        f.unique_id = k as i32 + 1;
        f.set_attribute(NDAttribute::new(
            "Gain",
            "",
            AttrValue::Float64(k as f64 + 1.0),
        ));
        f.set_attribute(NDAttribute::new(
            "Temp",
            "",
            AttrValue::Int32(20 + k as i32),
        ));
        if let Some(&(x, n)) = pos.get(k) {
            f.set_attribute(NDAttribute::new("pos_x", "", AttrValue::Int32(x)));
            f.set_attribute(NDAttribute::new("pos_n", "", AttrValue::Int32(n)));
        }
        // A write error is counted by the plugin (FramesNotWritten); carry on like a pipeline.
        let _ = h.process(f);
    }
    h.put("Capture", 0)?;
    println!(
        "STATUS status={} message={}",
        h.get_f64("WriteStatus"),
        h.get("WriteMessage")
    );
    println!(
        "DONE {}",
        h.get("FullFileName").to_string().trim_matches('"')
    );
    Ok(())
}
