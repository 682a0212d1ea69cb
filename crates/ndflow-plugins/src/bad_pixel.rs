//! NDPluginBadPixel: fixes the pixels listed in a JSON file, in raw detector coordinates.
//!
//! The file (ADCore's format):
//! `{"Bad pixels": [{"Pixel": [x, y], "Set": v} | {"Pixel": [x, y], "Replace": [dx, dy]} |
//! {"Pixel": [x, y], "Median": [nx, ny]}, ...]}`.
//! - Set: the pixel becomes `v`.
//! - Replace: the pixel takes the value of the pixel `[dx, dy]` raw pixels (× binning) away,
//!   unless that one is bad too or outside the frame.
//! - Median: the median of the (2nx+1)×(2ny+1) box around it, leaving out bad pixels and
//!   pixels outside the frame (nothing left: unchanged).
//!
//! Raw coordinates map to the frame through the dims metadata: x = (raw − offset) / binning
//! (ROI offsets and binning therefore follow), reversal is ignored, as in ADCore. Fixes run
//! in (y, x) order on a copy of the frame. Mono 1-D or 2-D frames only.
//!
//! The file is read when FileName is written (again on every write, as ADCore) and when a
//! frame arrives with a FileName that was not read yet. A file that cannot be read or parsed
//! makes every frame an error naming the file and the problem, until FileName is written.
//!
//! Deviation: a raw coordinate left of / above the frame maps with floor division (ADCore's C
//! division truncates, so a pixel up to `binning − 1` outside maps onto column/row 0).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ndflow_core::{with_pixel_type, NDArray, ParamDef, ParamStore, ParamValue, Pixel};
use ndflow_runtime::port_params::{bind, plugin_layout};
use ndflow_runtime::{Built, PortType};
use ndflow_runtime::{Plugin, PluginError, ProcessContext};
use parking_lot::Mutex;

ndflow_core::params! {
    pub const BAD_PIXEL_PARAMS, pub struct BadPixelParams {
        file_name: string("FileName", "")
            .long_string()
            .doc("JSON bad pixel file (read when written)"),
    }
}

/// What to do with one bad pixel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fix {
    Set(f64),
    Replace(i64, i64),
    Median(i64, i64),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BadPixel {
    pub x: i64,
    pub y: i64,
    pub fix: Fix,
}

/// A parsed file: sorted by (y, x), one entry per coordinate (the first one listed).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BadPixelList(Vec<BadPixel>);

impl BadPixelList {
    pub fn pixels(&self) -> &[BadPixel] {
        &self.0
    }

    fn is_bad(&self, x: i64, y: i64) -> bool {
        self.0.binary_search_by(|p| (p.y, p.x).cmp(&(y, x))).is_ok()
    }

    /// Parses the JSON text of a bad pixel file.
    pub fn parse(text: &str) -> Result<BadPixelList, String> {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let list = v
            .get("Bad pixels")
            .and_then(|l| l.as_array())
            .ok_or("no \"Bad pixels\" array")?;
        let mut out = Vec::with_capacity(list.len());
        for (i, p) in list.iter().enumerate() {
            let pair = |key: &str| -> Result<Option<(i64, i64)>, String> {
                let Some(v) = p.get(key) else { return Ok(None) };
                match v.as_array().map(|a| a.as_slice()) {
                    Some([a, b]) => match (a.as_i64(), b.as_i64()) {
                        (Some(a), Some(b)) => Ok(Some((a, b))),
                        _ => Err(format!("bad pixel {i}: \"{key}\" needs two integers")),
                    },
                    _ => Err(format!("bad pixel {i}: \"{key}\" needs [x, y]")),
                }
            };
            let (x, y) = pair("Pixel")?.ok_or(format!("bad pixel {i}: no \"Pixel\""))?;
            // ADCore reads Median, then Set, then Replace: the last one present wins.
            let mut fix = pair("Median")?.map(|(a, b)| Fix::Median(a, b));
            if let Some(s) = p.get("Set") {
                let s = s
                    .as_f64()
                    .ok_or(format!("bad pixel {i}: \"Set\" needs a number"))?;
                fix = Some(Fix::Set(s));
            }
            if let Some((a, b)) = pair("Replace")? {
                fix = Some(Fix::Replace(a, b));
            }
            let fix = fix.ok_or(format!(
                "bad pixel {i}: needs one of \"Set\", \"Replace\", \"Median\""
            ))?;
            out.push(BadPixel { x, y, fix });
        }
        // Stable sort + dedup keeps the first entry of a coordinate, as std::set::insert.
        out.sort_by_key(|p| (p.y, p.x));
        out.dedup_by_key(|p| (p.y, p.x));
        Ok(BadPixelList(out))
    }

    pub fn load(path: &str) -> Result<BadPixelList, String> {
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("bad pixel file {path}: {e}"))?;
        Self::parse(&text).map_err(|e| format!("bad pixel file {path}: {e}"))
    }
}

/// Raw → frame coordinates along one axis.
#[derive(Debug, Clone, Copy)]
struct Axis {
    size: i64,
    offset: i64,
    bin: i64,
}

impl Axis {
    fn map(&self, raw: i64) -> Option<usize> {
        let v = (raw - self.offset).div_euclid(self.bin);
        (0..self.size).contains(&v).then_some(v as usize)
    }
}

/// Applies `list` in place to a frame of `ax`×`ay` pixels.
fn fix_pixels<T: Pixel>(data: &mut [T], list: &BadPixelList, ax: Axis, ay: Axis) {
    let at = |x: i64, y: i64| -> Option<usize> { Some(ay.map(y)? * ax.size as usize + ax.map(x)?) };
    let mut values: Vec<f64> = Vec::new();
    for p in list.pixels() {
        let Some(i) = at(p.x, p.y) else { continue };
        match p.fix {
            Fix::Set(v) => data[i] = T::from_f64(v),
            Fix::Replace(dx, dy) => {
                let (rx, ry) = (p.x + dx * ax.bin, p.y + dy * ay.bin);
                if list.is_bad(rx, ry) {
                    continue;
                }
                if let Some(j) = at(rx, ry) {
                    data[i] = data[j];
                }
            }
            Fix::Median(nx, ny) => {
                values.clear();
                for j in -ny..=ny {
                    for k in -nx..=nx {
                        let (rx, ry) = (p.x + k * ax.bin, p.y + j * ay.bin);
                        if (j, k) == (0, 0) || list.is_bad(rx, ry) {
                            continue;
                        }
                        if let Some(m) = at(rx, ry) {
                            values.push(data[m].to_f64());
                        }
                    }
                }
                if values.is_empty() {
                    continue;
                }
                values.sort_by(f64::total_cmp);
                let mid = values.len() / 2;
                let median = if values.len().is_multiple_of(2) {
                    (values[mid - 1] + values[mid]) / 2.0
                } else {
                    values[mid]
                };
                data[i] = T::from_f64(median);
            }
        }
    }
}

type Loaded = (String, Result<Arc<BadPixelList>, String>);

/// NDPluginBadPixel. The list is shared; frames are independent: up to 8 threads.
#[derive(Debug)]
pub struct BadPixelPlugin {
    p: BadPixelParams,
    loaded: Mutex<Option<Loaded>>,
    reload: AtomicBool,
}

impl Default for BadPixelPlugin {
    fn default() -> Self {
        Self::new()
    }
}

impl BadPixelPlugin {
    pub fn new() -> BadPixelPlugin {
        BadPixelPlugin {
            p: bind(&plugin_layout(BAD_PIXEL_PARAMS), BadPixelParams::bind),
            loaded: Mutex::new(None),
            reload: AtomicBool::new(false),
        }
    }

    /// The list for `name`, reading the file when it changed or a reload was asked for.
    fn list(&self, name: &str) -> Result<Option<Arc<BadPixelList>>, PluginError> {
        if name.is_empty() {
            return Ok(None);
        }
        let mut loaded = self.loaded.lock();
        let stale = !matches!(&*loaded, Some((n, _)) if n == name);
        if stale || self.reload.swap(false, Ordering::AcqRel) {
            let list = BadPixelList::load(name).map(Arc::new);
            if let Err(e) = &list {
                tracing::warn!("NDPluginBadPixel: {e}");
            }
            *loaded = Some((name.to_string(), list));
        }
        match loaded.as_ref().map(|(_, l)| l) {
            Some(Ok(l)) => Ok(Some(Arc::clone(l))),
            Some(Err(e)) => Err(PluginError::Other(e.clone())),
            None => Ok(None),
        }
    }
}

impl Plugin for BadPixelPlugin {
    fn plugin_type(&self) -> &'static str {
        "NDPluginBadPixel"
    }

    fn params(&self) -> &'static [ParamDef] {
        BAD_PIXEL_PARAMS
    }

    fn max_threads(&self) -> usize {
        8
    }

    fn param_changed(&self, _params: &ParamStore, idx: usize, _value: &ParamValue) {
        if self.p.file_name.is(idx) {
            self.reload.store(true, Ordering::Release);
        }
    }

    fn process(
        &self,
        input: &Arc<NDArray>,
        ctx: &mut ProcessContext<'_>,
    ) -> Result<(), PluginError> {
        if input.is_compressed() || input.ndims() > 2 {
            return Err(PluginError::Unsupported(format!(
                "NDPluginBadPixel takes uncompressed 1-D or 2-D frames, got dims {:?} codec '{}'",
                input.sizes(),
                input.codec.name
            )));
        }
        let name = self.p.file_name.get(ctx.params);
        let Some(list) = self.list(name.trim())? else {
            ctx.emit(Arc::clone(input));
            return Ok(());
        };
        let axis = |d: usize| match input.dims.get(d) {
            Some(d) => Axis {
                size: d.size as i64,
                offset: d.offset as i64,
                bin: d.binning.max(1) as i64,
            },
            None => Axis {
                size: 1,
                offset: 0,
                bin: 1,
            },
        };
        let dt = input.data_type;
        let mut buf = ctx.alloc(input.n_elements() * dt.size())?;
        with_pixel_type!(dt, T => {
            let out = buf.as_mut_slice::<T>();
            out.copy_from_slice(input.pixels::<T>()?);
            fix_pixels(out, &list, axis(0), axis(1));
        });
        ctx.emit(input.with_buffer(dt, buf.freeze()));
        Ok(())
    }
}

/// The port type `type = "badpixel"`.
pub const PORT: PortType = PortType::plugin(
    "badpixel",
    "NDPluginBadPixel",
    "Bad pixels from a JSON file: Set, Replace or Median, following ROI/binning",
    |_| Ok(Built::Plugin(std::sync::Arc::new(BadPixelPlugin::new()))),
);
