//! The pixels each overlay shape covers, as element offsets into one colour plane, with
//! ADCore's geometry (NDPluginOverlay.cpp `doOverlayT`), and how they are drawn.

use embedded_graphics::mono_font::{ascii, MonoFont, MonoTextStyle};
use embedded_graphics::pixelcolor::BinaryColor;
use embedded_graphics::prelude::{DrawTarget, OriginDimensions, Point, Size};
use embedded_graphics::text::{Baseline, Text};
use embedded_graphics::Drawable;

/// The Font menu's bitmap fonts: X11 misc-fixed, as ADCore's tables.
pub const FONTS: [&MonoFont<'static>; 4] = [
    &ascii::FONT_6X13,
    &ascii::FONT_6X13_BOLD,
    &ascii::FONT_9X15,
    &ascii::FONT_9X15_BOLD,
];

/// One overlay's settings, as read for one frame.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overlay {
    pub shape: i64,
    pub xor: bool,
    pub position: (i64, i64),
    pub size: (i64, i64),
    pub width: (i64, i64),
    pub rgb: (i64, i64, i64),
    pub font: i64,
    /// DisplayText followed by the formatted time stamp.
    pub text: String,
}

/// Collects in-image pixels as offsets `x·xs + y·ys`.
pub struct Plane {
    pub w: usize,
    pub h: usize,
    pub xs: usize,
    pub ys: usize,
    pub offsets: Vec<usize>,
}

impl Plane {
    fn add(&mut self, x: i64, y: i64) {
        if (0..self.w as i64).contains(&x) && (0..self.h as i64).contains(&y) {
            self.offsets
                .push(x as usize * self.xs + y as usize * self.ys);
        }
    }
}

/// Fills `plane.offsets` with the pixels of `o` (sorted, each once, so XOR is reversible).
pub fn rasterise(o: &Overlay, plane: &mut Plane) {
    plane.offsets.clear();
    let ((px, py), (sx, sy), (wx, wy)) = (o.position, o.size, o.width);
    match o.shape {
        0 => {
            // Cross: a bar WidthY thick across and WidthX thick down, centred in the box.
            let (xc, yc) = (px + sx / 2, py + sy / 2);
            let (hx, hy) = (wx / 2, wy / 2);
            for y in yc - sy / 2..=yc + sy / 2 {
                let (a, b) = if (y - yc).abs() <= hy {
                    (xc - sx / 2, xc + sx / 2)
                } else {
                    (xc - hx, xc + hx)
                };
                for x in a..=b {
                    plane.add(x, y);
                }
            }
        }
        1 => {
            // Rectangle: PositionX..=PositionX+SizeX, edges grown inwards by Width.
            let (x1, y1) = (px + sx, py + sy);
            let (bx, by) = (wx.min(sx - 1), wy.min(sy - 1));
            for y in py..=y1 {
                if y < py + by || y > y1 - by {
                    (px..=x1).for_each(|x| plane.add(x, y));
                } else {
                    (px..px + bx).for_each(|x| plane.add(x, y));
                    (x1 - bx + 1..=x1).for_each(|x| plane.add(x, y));
                }
            }
        }
        2 => ellipse(o, plane),
        3 => text(o, plane),
        _ => {}
    }
    plane.offsets.sort_unstable();
    plane.offsets.dedup();
}

/// Parametric ellipse, one quadrant mirrored, WidthX rings inwards; angles stepped as ADCore
/// does (repeated addition) so the rounding matches.
fn ellipse(o: &Overlay, plane: &mut Plane) {
    let ((px, py), (sx, sy)) = (o.position, o.size);
    let rings = o.width.0.min(sx - 1);
    let (xc, yc, rx, ry) = (px + sx / 2, py + sy / 2, sx / 2, sy / 2);
    let steps = 2 * (rx + ry);
    let step = std::f64::consts::FRAC_PI_2 / steps as f64;
    let mut theta = 0.0f64;
    for _ in 0..=steps.max(0) {
        for j in 0..rings {
            let dx = ((rx - j) as f64 * theta.cos() + 0.5) as i64;
            let dy = ((ry - j) as f64 * theta.sin() + 0.5) as i64;
            for (x, y) in [(xc + dx, yc + dy), (xc + dx, yc - dy)] {
                plane.add(x, y);
            }
            for (x, y) in [(xc - dx, yc + dy), (xc - dx, yc - dy)] {
                plane.add(x, y);
            }
        }
        theta += step;
    }
}

/// Collects the "on" pixels embedded-graphics draws, clipped to the text box.
struct Glyphs<'a> {
    plane: &'a mut Plane,
    x_end: i64,
    y_range: std::ops::Range<i64>,
}

impl OriginDimensions for Glyphs<'_> {
    fn size(&self) -> Size {
        Size::new(self.plane.w as u32, self.plane.h as u32)
    }
}

impl DrawTarget for Glyphs<'_> {
    type Color = BinaryColor;
    type Error = std::convert::Infallible;

    fn draw_iter<I>(&mut self, pixels: I) -> Result<(), Self::Error>
    where
        I: IntoIterator<Item = embedded_graphics::Pixel<BinaryColor>>,
    {
        for embedded_graphics::Pixel(p, c) in pixels {
            let (x, y) = (p.x as i64, p.y as i64);
            if c.is_on() && x < self.x_end && self.y_range.contains(&y) {
                self.plane.add(x, y);
            }
        }
        Ok(())
    }
}

/// Text: one font cell per byte from PositionX, clipped to SizeX and to one line of the font;
/// bytes outside printable ASCII leave a blank cell (ADCore skips them).
fn text(o: &Overlay, plane: &mut Plane) {
    let Some(font) = usize::try_from(o.font).ok().and_then(|f| FONTS.get(f)) else {
        return;
    };
    let line: String = o
        .text
        .bytes()
        .map(|b| {
            if (32..127).contains(&b) {
                b as char
            } else {
                ' '
            }
        })
        .collect();
    let (px, py) = o.position;
    let y_end = (py + o.size.1).min(py + font.character_size.height as i64);
    let (Ok(x), Ok(y)) = (i32::try_from(px), i32::try_from(py)) else {
        return;
    };
    let mut target = Glyphs {
        plane,
        x_end: px + o.size.0,
        y_range: py..y_end,
    };
    let style = MonoTextStyle::new(font, BinaryColor::On);
    let _ = Text::with_baseline(&line, Point::new(x, y), style, Baseline::Top).draw(&mut target);
}

/// Pixel values an overlay can write: C's int-to-type cast (wrapping) and XOR through int.
pub trait Paint: Copy {
    fn from_i64(v: i64) -> Self;
    fn xor(self, v: i64) -> Self;
}

macro_rules! paint_int {
    ($($t:ty),*) => {$(
        impl Paint for $t {
            fn from_i64(v: i64) -> Self { v as $t }
            fn xor(self, v: i64) -> Self { self ^ (v as $t) }
        }
    )*};
}
paint_int!(i8, u8, i16, u16, i32, u32, i64, u64);

macro_rules! paint_float {
    ($($t:ty),*) => {$(
        impl Paint for $t {
            fn from_i64(v: i64) -> Self { v as $t }
            fn xor(self, v: i64) -> Self { ((self as i64) ^ v) as $t }
        }
    )*};
}
paint_float!(f32, f64);

/// Draws `offsets` into `data`: Mono writes Green; RGB writes R, G, B `colour_stride` apart.
pub fn paint<T: Paint>(
    data: &mut [T],
    offsets: &[usize],
    o: &Overlay,
    colour_stride: Option<usize>,
) {
    // Offsets come from in-image pixels, so `get_mut` never misses; it keeps a bad frame
    // from panicking all the same.
    let mut one = |i: usize, c: i64| {
        if let Some(v) = data.get_mut(i) {
            *v = if o.xor { v.xor(c) } else { T::from_i64(c) };
        }
    };
    match colour_stride {
        None => offsets.iter().for_each(|&i| one(i, o.rgb.1)),
        Some(cs) => {
            for &i in offsets {
                one(i, o.rgb.0);
                one(i + cs, o.rgb.1);
                one(i + 2 * cs, o.rgb.2);
            }
        }
    }
}
