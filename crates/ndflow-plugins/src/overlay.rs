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

use ndflow_core::alarm::sev::{MINOR, NO};
use std::sync::Arc;

use ndflow_core::handle::join;
use ndflow_core::{with_pixel_type, ColorMode, Derive, NDArray, ParamDef, ParamStore, ParamValue};
use ndflow_runtime::port_params::{bind, bind_first, plugin_layout};
use ndflow_runtime::{Built, PortType};
use ndflow_runtime::{Plugin, PluginError, ProcessContext};
use parking_lot::Mutex;

pub use shapes::{rasterise, Overlay, Plane, FONTS};

pub const OVERLAY_SHAPES: &[&str] = &["Cross", "Rectangle", "Ellipse", "Text"];
pub const OVERLAY_DRAW_MODES: &[&str] = &["Set", "XOR"];
pub const OVERLAY_FONTS: &[&str] = &["6x13", "6x13 Bold", "9x15", "9x15 Bold"];
/// Overlays per port.
pub const MAX_OVERLAYS: usize = 8;

ndflow_core::params! {
    /// The port's two records.
    pub const OVERLAY_PORT_PARAMS, pub struct OverlayParams {
        max_size_x: int32("MaxSizeX", 0).read_only().doc("X size of the last frame"),
        max_size_y: int32("MaxSizeY", 0).read_only().doc("Y size of the last frame"),
    }
}

ndflow_core::params! {
    /// NDOverlayN's records once per overlay, prefixed `N:`.
    pub const OVERLAY_N_PARAMS: [pub struct OverlayNParams; "1", "2", "3", "4", "5", "6", "7", "8"] {
        name: string("Name", "").doc("Label of this overlay"),
        use_: yes_no("Use", 0)
            .alarm_states(&[NO, MINOR])
            .doc("Draw this overlay"),
        position_x_link: int32("PositionXLink", 0).input_link().doc("Input link (.DOL) for PositionX: a write or the linked PV\'s value is copied to PositionX"),
        position_x: int32("PositionX", 0).high_limit_from("MaxSizeX").doc("Left edge (pixels)"),
        position_y_link: int32("PositionYLink", 0).input_link().doc("Input link (.DOL) for PositionY: a write or the linked PV\'s value is copied to PositionY"),
        position_y: int32("PositionY", 0).high_limit_from("MaxSizeY").doc("Top edge (pixels)"),
        center_x_link: int32("CenterXLink", 0).input_link().doc("Input link (.DOL) for CenterX: a write or the linked PV\'s value is copied to CenterX"),
        center_x: int32("CenterX", 0).high_limit_from("MaxSizeX").doc("PositionX + SizeX/2"),
        center_y_link: int32("CenterYLink", 0).input_link().doc("Input link (.DOL) for CenterY: a write or the linked PV\'s value is copied to CenterY"),
        center_y: int32("CenterY", 0).high_limit_from("MaxSizeY").doc("PositionY + SizeY/2"),
        size_x_link: int32("SizeXLink", 0).input_link().doc("Input link (.DOL) for SizeX: a write or the linked PV\'s value is copied to SizeX"),
        size_x: int32("SizeX", 1).high_limit_from("MaxSizeX").doc("Width of the box"),
        size_y_link: int32("SizeYLink", 0).input_link().doc("Input link (.DOL) for SizeY: a write or the linked PV\'s value is copied to SizeY"),
        size_y: int32("SizeY", 0).high_limit_from("MaxSizeY").doc("Height of the box"),
        width_x_link: int32("WidthXLink", 0).input_link().doc("Input link (.DOL) for WidthX: a write or the linked PV\'s value is copied to WidthX"),
        width_x: int32("WidthX", 1).doc("Line width in X"),
        width_y_link: int32("WidthYLink", 0).input_link().doc("Input link (.DOL) for WidthY: a write or the linked PV\'s value is copied to WidthY"),
        width_y: int32("WidthY", 1).doc("Line width in Y"),
        shape: enumeration("Shape", OVERLAY_SHAPES, 1)
            .doc("Cross, Rectangle, Ellipse or Text"),
        draw_mode: enumeration("DrawMode", OVERLAY_DRAW_MODES, 0)
            .doc("Set the pixels or XOR them"),
        red: int32("Red", 1).doc("Red value (RGB)"),
        green: int32("Green", 1).doc("Green value (RGB; Mono value)"),
        blue: int32("Blue", 1).doc("Blue value (RGB)"),
        max_size_x: int32("MaxSizeX", 0)
            .read_only_plain()
            .doc("The port's MaxSizeX_RBV"),
        max_size_y: int32("MaxSizeY", 0)
            .read_only_plain()
            .doc("The port's MaxSizeY_RBV"),
        set_x_hopr: float64("SetXHOPR", 0.0)
            .read_only_plain()
            .helper("dfanout")
            .derived(Derive::Copy("MaxSizeX"))
            .doc("PositionX's, CenterX's and SizeX's high limit: MaxSizeX (dfanout)"),
        set_y_hopr: float64("SetYHOPR", 0.0)
            .read_only_plain()
            .helper("dfanout")
            .derived(Derive::Copy("MaxSizeY"))
            .doc("PositionY's, CenterY's and SizeY's high limit: MaxSizeY (dfanout)"),
        display_text: string("DisplayText", "")
            .long_string()
            .doc("Text drawn by a Text overlay"),
        time_stamp_format: string("TimeStampFormat", "%Y-%m-%d %H:%M:%S.%03f")
            .doc("strftime format of the frame time stamp after the text; empty: none"),
        font: enumeration("Font", OVERLAY_FONTS, 0)
            .doc("6x13, 6x13 Bold, 9x15, 9x15 Bold"),
    }
}

/// The port's two records, then NDOverlayN's records once per overlay, prefixed `N:`.
pub const OVERLAY_PARAMS: &[ParamDef] = &join::<
    { OVERLAY_PORT_PARAMS.len() + OVERLAY_N_PARAMS.len() },
>(&[OVERLAY_PORT_PARAMS, OVERLAY_N_PARAMS]);

const _: () = assert!(OverlayNParams::COUNT == MAX_OVERLAYS);

/// NDPluginOverlay. Each frame is drawn from the current settings alone: up to 8 threads.
#[derive(Debug)]
pub struct OverlayPlugin {
    p: OverlayParams,
    overlays: Vec<OverlayNParams>,
    /// Per overlay and axis: was the position (not the centre) written last?
    pinned: Mutex<[[bool; 2]; MAX_OVERLAYS]>,
}

impl Default for OverlayPlugin {
    fn default() -> Self {
        Self::new()
    }
}

impl OverlayPlugin {
    pub fn new() -> OverlayPlugin {
        let layout = plugin_layout(OVERLAY_PARAMS);
        let overlays = bind_first(&layout, MAX_OVERLAYS, OverlayNParams::bind_first);
        OverlayPlugin {
            p: bind(&layout, OverlayParams::bind),
            overlays,
            pinned: Mutex::new([[false; 2]; MAX_OVERLAYS]),
        }
    }

    /// Position/centre/size of one axis after a write of `v` to parameter `idx`.
    fn link_axis(
        &self,
        p: &ParamStore,
        k: usize,
        axis: usize,
        o: &OverlayNParams,
        idx: usize,
        v: i64,
    ) {
        let (pos, center, size) = if axis == 0 {
            (o.position_x, o.center_x, o.size_x)
        } else {
            (o.position_y, o.center_y, o.size_y)
        };
        let mut pinned = self.pinned.lock();
        let pin = &mut pinned[k][axis];
        let (target, value) = if center.is(idx) {
            *pin = false;
            (pos, v - size.get(p) / 2)
        } else if pos.is(idx) {
            *pin = true;
            (center, v + size.get(p) / 2)
        } else if size.is(idx) && *pin {
            (center, pos.get(p) + v / 2)
        } else if size.is(idx) {
            (pos, center.get(p) - v / 2)
        } else {
            return;
        };
        target.set(p, value);
    }

    fn settings(&self, p: &ParamStore, o: &OverlayNParams, frame: &NDArray) -> Overlay {
        let (mut overlay, text) = p.with_values(|v| {
            let shape = o.shape.read(v);
            // Text and its time-stamp format, formatted outside the lock.
            let text = (shape == 3).then(|| (o.display_text.read(v), o.time_stamp_format.read(v)));
            let overlay = Overlay {
                shape,
                xor: o.draw_mode.read(v) == 1,
                position: (o.position_x.read(v), o.position_y.read(v)),
                size: (o.size_x.read(v), o.size_y.read(v)),
                width: (o.width_x.read(v), o.width_y.read(v)),
                rgb: (o.red.read(v), o.green.read(v), o.blue.read(v)),
                font: o.font.read(v),
                text: String::new(),
            };
            (overlay, text)
        });
        if let Some((mut t, fmt)) = text {
            if !fmt.is_empty() {
                t.push_str(&timefmt::format(&fmt, frame.epics_ts));
            }
            overlay.text = t;
        }
        overlay
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
        let v = value.as_i64().unwrap_or(0);
        for (k, o) in self.overlays.iter().enumerate() {
            // A Link write is a write of its target.
            let links = [
                (o.position_x_link, o.position_x),
                (o.position_y_link, o.position_y),
                (o.center_x_link, o.center_x),
                (o.center_y_link, o.center_y),
                (o.size_x_link, o.size_x),
                (o.size_y_link, o.size_y),
            ];
            let mut target = idx;
            if let Some(&(_, t)) = links.iter().find(|(l, _)| l.is(idx)) {
                t.set(params, v);
                target = t.index();
            }
            self.link_axis(params, k, 0, o, target, v);
            self.link_axis(params, k, 1, o, target, v);
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
        let p = ctx.params;
        let (w, h) = (info.x_size, info.y_size);
        let mut writes = vec![self.p.max_size_x.value(w as i64)];
        writes.push(self.p.max_size_y.value(h as i64));
        for o in &self.overlays {
            writes.push(o.max_size_x.value(w as i64));
            writes.push(o.max_size_y.value(h as i64));
        }
        p.set_many(&writes);
        let active: Vec<Overlay> = self
            .overlays
            .iter()
            .filter(|o| o.use_.get(p))
            .map(|o| self.settings(p, o, input))
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

/// The port type `type = "overlay"`.
pub const PORT: PortType = PortType::plugin(
    "overlay",
    "NDPluginOverlay",
    "8 crosses/rectangles/ellipses/text lines drawn on Mono or RGB images, Set or XOR",
    |_| Ok(Built::Plugin(std::sync::Arc::new(OverlayPlugin::new()))),
);
