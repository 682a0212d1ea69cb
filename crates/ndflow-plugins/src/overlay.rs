//! NDPluginOverlay: up to 8 crosses, rectangles, ellipses or text lines drawn on a copy of a
//! 2-D Mono or 3-D RGB1/2/3 image, any data type.
//!
//! Parameters: the port's MaxSizeX_RBV/MaxSizeY_RBV (the last frame's X/Y size) and, per
//! overlay N = 1..8, NDOverlayN's records under `N:` (`{port prefix}N:PositionX`, ...).
//! As ADCore: Set writes Red/Green/Blue (Mono: Green) cast to the data type, XOR XORs them
//! through an integer; writing PositionX updates CenterX = PositionX + SizeX/2 and pins the
//! position, writing CenterX updates PositionX and pins the centre, and a SizeX write moves
//! whichever is not pinned (same in Y). `*Link` records forward a write to their target as
//! the template's OUT link does. Text is DisplayText followed by the frame's time stamp in
//! TimeStampFormat (empty: none), in the Font's X11 misc-fixed bitmap font.
//!
//! Deviations: the Shape menu is stored as its index (Cross 0, Rectangle 1, Ellipse 2,
//! Text 3; ADCore's asyn values swap Ellipse/Text, the PV strings are the same); every
//! shape's pixels are drawn once each (ADCore draws a thick rectangle's doubled pixels twice,
//! which cancels them in XOR); the time stamp is formatted in UTC; the per-overlay MaxSizeX/Y
//! do not set the other records' HOPR; WidthX/WidthY default to 1 (template: 0, nothing
//! drawn); with no overlay in use the frame passes unchanged, pixels shared.
//!
//! Unsupported (counted, not passed on): compressed frames, Bayer/YUV, and anything other
//! than 2-D Mono or 3-D RGB with a colour dim of 3.

mod shapes;
pub mod timefmt;

use std::sync::Arc;

use ndflow_core::{with_pixel_type, ColorMode, NDArray, ParamDef, ParamStore, ParamValue};
use ndflow_runtime::{param_index, Plugin, PluginError, ProcessContext, Resolved};
use parking_lot::Mutex;

pub use shapes::{rasterise, Overlay, Plane, FONTS};

pub const OVERLAY_SHAPES: &[&str] = &["Cross", "Rectangle", "Ellipse", "Text"];
pub const OVERLAY_DRAW_MODES: &[&str] = &["Set", "XOR"];
pub const OVERLAY_FONTS: &[&str] = &["6x13", "6x13 Bold", "9x15", "9x15 Bold"];
/// Overlays per port.
pub const MAX_OVERLAYS: usize = 8;

/// The port's two records, then NDOverlayN's records once per overlay, prefixed `N:`.
macro_rules! overlay_params {
    ($($n:literal),+) => {
        &[
            ParamDef::int32("MaxSizeX", 0).read_only().doc("X size of the last frame"),
            ParamDef::int32("MaxSizeY", 0).read_only().doc("Y size of the last frame"),
            $(
                ParamDef::string(concat!($n, ":Name"), "").doc("Label of this overlay"),
                ParamDef::yes_no(concat!($n, ":Use"), 0).doc("Draw this overlay"),
                ParamDef::int32(concat!($n, ":PositionXLink"), 0).doc("Copied to PositionX"),
                ParamDef::int32(concat!($n, ":PositionX"), 0).doc("Left edge (pixels)"),
                ParamDef::int32(concat!($n, ":PositionYLink"), 0).doc("Copied to PositionY"),
                ParamDef::int32(concat!($n, ":PositionY"), 0).doc("Top edge (pixels)"),
                ParamDef::int32(concat!($n, ":CenterXLink"), 0).doc("Copied to CenterX"),
                ParamDef::int32(concat!($n, ":CenterX"), 0).doc("PositionX + SizeX/2"),
                ParamDef::int32(concat!($n, ":CenterYLink"), 0).doc("Copied to CenterY"),
                ParamDef::int32(concat!($n, ":CenterY"), 0).doc("PositionY + SizeY/2"),
                ParamDef::int32(concat!($n, ":SizeXLink"), 0).doc("Copied to SizeX"),
                ParamDef::int32(concat!($n, ":SizeX"), 1).doc("Width of the box"),
                ParamDef::int32(concat!($n, ":SizeYLink"), 0).doc("Copied to SizeY"),
                ParamDef::int32(concat!($n, ":SizeY"), 0).doc("Height of the box"),
                ParamDef::int32(concat!($n, ":WidthXLink"), 0).doc("Copied to WidthX"),
                ParamDef::int32(concat!($n, ":WidthX"), 1).doc("Line width in X"),
                ParamDef::int32(concat!($n, ":WidthYLink"), 0).doc("Copied to WidthY"),
                ParamDef::int32(concat!($n, ":WidthY"), 1).doc("Line width in Y"),
                ParamDef::enumeration(concat!($n, ":Shape"), OVERLAY_SHAPES, 1)
                    .doc("Cross, Rectangle, Ellipse or Text"),
                ParamDef::enumeration(concat!($n, ":DrawMode"), OVERLAY_DRAW_MODES, 0)
                    .doc("Set the pixels or XOR them"),
                ParamDef::int32(concat!($n, ":Red"), 1).doc("Red value (RGB)"),
                ParamDef::int32(concat!($n, ":Green"), 1).doc("Green value (RGB; Mono value)"),
                ParamDef::int32(concat!($n, ":Blue"), 1).doc("Blue value (RGB)"),
                ParamDef::int32(concat!($n, ":MaxSizeX"), 0)
                    .read_only_plain()
                    .doc("The port's MaxSizeX_RBV"),
                ParamDef::int32(concat!($n, ":MaxSizeY"), 0)
                    .read_only_plain()
                    .doc("The port's MaxSizeY_RBV"),
                ParamDef::string(concat!($n, ":DisplayText"), "")
                    .long_string()
                    .doc("Text drawn by a Text overlay"),
                ParamDef::string(concat!($n, ":TimeStampFormat"), "%Y-%m-%d %H:%M:%S.%03f")
                    .doc("strftime format of the frame time stamp after the text; empty: none"),
                ParamDef::enumeration(concat!($n, ":Font"), OVERLAY_FONTS, 0)
                    .doc("6x13, 6x13 Bold, 9x15, 9x15 Bold"),
            )+
        ]
    };
}

pub const OVERLAY_PARAMS: &[ParamDef] = overlay_params!("1", "2", "3", "4", "5", "6", "7", "8");

/// One overlay's parameter indices.
#[derive(Debug)]
struct Slot {
    use_: usize,
    pos: (usize, usize),
    center: (usize, usize),
    size: (usize, usize),
    width: (usize, usize),
    shape: usize,
    mode: usize,
    rgb: (usize, usize, usize),
    max: (usize, usize),
    text: usize,
    ts_format: usize,
    font: usize,
    /// (link, target) pairs.
    links: [(usize, usize); 6],
}

impl Slot {
    fn resolve(p: &ParamStore, n: usize) -> Result<Slot, PluginError> {
        let one = |name: &str| param_index(p, "NDPluginOverlay", &format!("{n}:{name}"));
        let pair = |a: &str, b: &str| Ok::<_, PluginError>((one(a)?, one(b)?));
        let (pos, center) = (pair("PositionX", "PositionY")?, pair("CenterX", "CenterY")?);
        let (size, width) = (pair("SizeX", "SizeY")?, pair("WidthX", "WidthY")?);
        let link = |name: &str, target: usize| Ok::<_, PluginError>((one(name)?, target));
        Ok(Slot {
            use_: one("Use")?,
            links: [
                link("PositionXLink", pos.0)?,
                link("PositionYLink", pos.1)?,
                link("CenterXLink", center.0)?,
                link("CenterYLink", center.1)?,
                link("SizeXLink", size.0)?,
                link("SizeYLink", size.1)?,
            ],
            pos,
            center,
            size,
            width,
            shape: one("Shape")?,
            mode: one("DrawMode")?,
            rgb: (one("Red")?, one("Green")?, one("Blue")?),
            max: pair("MaxSizeX", "MaxSizeY")?,
            text: one("DisplayText")?,
            ts_format: one("TimeStampFormat")?,
            font: one("Font")?,
        })
    }
}

#[derive(Debug)]
struct Indices {
    max: (usize, usize),
    slots: Vec<Slot>,
}

/// NDPluginOverlay. Each frame is drawn from the current settings alone: up to 8 threads.
#[derive(Debug, Default)]
pub struct OverlayPlugin {
    indices: Resolved<Indices>,
    /// Per overlay and axis: was the position (not the centre) written last?
    pinned: Mutex<[[bool; 2]; MAX_OVERLAYS]>,
}

impl OverlayPlugin {
    pub fn new() -> OverlayPlugin {
        OverlayPlugin::default()
    }

    fn indices(&self, p: &ParamStore) -> Result<&Indices, PluginError> {
        self.indices.get_or_resolve(|| {
            Ok(Indices {
                max: (
                    param_index(p, "NDPluginOverlay", "MaxSizeX")?,
                    param_index(p, "NDPluginOverlay", "MaxSizeY")?,
                ),
                slots: (1..=MAX_OVERLAYS)
                    .map(|n| Slot::resolve(p, n))
                    .collect::<Result<_, _>>()?,
            })
        })
    }

    /// Position/centre/size of one axis after a write of `v` to parameter `idx`.
    fn link_axis(&self, p: &ParamStore, k: usize, axis: usize, s: &Slot, idx: usize, v: i64) {
        let pick = |t: (usize, usize)| if axis == 0 { t.0 } else { t.1 };
        let (pos, center, size) = (pick(s.pos), pick(s.center), pick(s.size));
        let mut pinned = self.pinned.lock();
        let pin = &mut pinned[k][axis];
        let write = if idx == center {
            *pin = false;
            (pos, v - p.get_i64(size) / 2)
        } else if idx == pos {
            *pin = true;
            (center, v + p.get_i64(size) / 2)
        } else if idx == size && *pin {
            (center, p.get_i64(pos) + v / 2)
        } else if idx == size {
            (pos, p.get_i64(center) - v / 2)
        } else {
            return;
        };
        let _ = p.set(write.0, write.1);
    }

    fn settings(&self, p: &ParamStore, s: &Slot, frame: &NDArray) -> Overlay {
        let get = |i: usize| p.get_i64(i);
        let shape = get(s.shape);
        let text = if shape == 3 {
            let fmt = p.get_str(s.ts_format);
            let mut t = p.get_str(s.text);
            if !fmt.is_empty() {
                t.push_str(&timefmt::format(&fmt, frame.epics_ts));
            }
            t
        } else {
            String::new()
        };
        Overlay {
            shape,
            xor: get(s.mode) == 1,
            position: (get(s.pos.0), get(s.pos.1)),
            size: (get(s.size.0), get(s.size.1)),
            width: (get(s.width.0), get(s.width.1)),
            rgb: (get(s.rgb.0), get(s.rgb.1), get(s.rgb.2)),
            font: get(s.font),
            text,
        }
    }
}

impl Plugin for OverlayPlugin {
    fn plugin_type(&self) -> &'static str {
        "NDPluginOverlay"
    }

    fn params(&self) -> &'static [ParamDef] {
        OVERLAY_PARAMS
    }

    fn max_threads(&self) -> usize {
        8
    }

    fn param_changed(&self, params: &ParamStore, idx: usize, value: &ParamValue) {
        let Ok(ix) = self.indices(params) else {
            return;
        };
        let v = value.as_i64().unwrap_or(0);
        for (k, s) in ix.slots.iter().enumerate() {
            // A Link write is a write of its target.
            let mut target = idx;
            if let Some(&(_, t)) = s.links.iter().find(|(l, _)| *l == idx) {
                let _ = params.set(t, v);
                target = t;
            }
            self.link_axis(params, k, 0, s, target, v);
            self.link_axis(params, k, 1, s, target, v);
        }
    }

    fn process(
        &self,
        input: &Arc<NDArray>,
        ctx: &mut ProcessContext<'_>,
    ) -> Result<(), PluginError> {
        if input.is_compressed() {
            return Err(PluginError::Unsupported(format!(
                "NDPluginOverlay needs uncompressed frames, got codec '{}'",
                input.codec.name
            )));
        }
        let info = input.info();
        let colour_stride = match (input.ndims(), input.color_mode(), info.color_mode) {
            (2, ColorMode::Mono, _) => None,
            (3, ColorMode::RGB1 | ColorMode::RGB2 | ColorMode::RGB3, m) if m != ColorMode::Mono => {
                Some(info.color_stride)
            }
            _ => {
                return Err(PluginError::Unsupported(format!(
                "NDPluginOverlay takes 2-D Mono or 3-D RGB1/2/3 images, got dims {:?} colour {}",
                input.sizes(),
                input.color_mode().name()
            )))
            }
        };
        let ix = self.indices(ctx.params)?;
        let p = ctx.params;
        let (w, h) = (info.x_size, info.y_size);
        let mut writes = vec![(ix.max.0, ParamValue::from(w as i64))];
        writes.push((ix.max.1, ParamValue::from(h as i64)));
        for s in &ix.slots {
            writes.push((s.max.0, ParamValue::from(w as i64)));
            writes.push((s.max.1, ParamValue::from(h as i64)));
        }
        p.set_many(&writes);
        let active: Vec<Overlay> = ix
            .slots
            .iter()
            .filter(|s| p.get_i64(s.use_) != 0)
            .map(|s| self.settings(p, s, input))
            .collect();
        if active.is_empty() {
            ctx.emit(Arc::clone(input));
            return Ok(());
        }
        let dt = input.data_type;
        let mut buf = ctx.alloc(input.n_elements() * dt.size())?;
        let mut plane = Plane {
            w,
            h,
            xs: info.x_stride,
            ys: info.y_stride,
            offsets: Vec::new(),
        };
        with_pixel_type!(dt, T => {
            let (src, dst) = (input.pixels::<T>()?, buf.as_mut_slice::<T>());
            if src.len() != dst.len() {
                return Err(PluginError::Other(format!(
                    "NDPluginOverlay: frame holds {} elements, dims say {}",
                    src.len(),
                    dst.len()
                )));
            }
            dst.copy_from_slice(src);
            for o in &active {
                rasterise(o, &mut plane);
                shapes::paint(dst, &plane.offsets, o, colour_stride);
            }
        });
        ctx.emit(NDArray::clone(input).with_buffer(dt, buf.freeze()));
        Ok(())
    }
}
