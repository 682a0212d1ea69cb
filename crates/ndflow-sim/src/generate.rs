//! The four patterns, computed the way simDetector computes them (in the output type, so
//! integer types wrap), but with everything that does not change per frame prepared once
//! at reset: the ramp's base image, the noise background, the peak kernel.
//!
//! [`Generator::render`] writes one full raw frame into any slice: the output buffer itself
//! when the readout is the whole sensor (one pass), otherwise a scratch image that
//! [`crate::layout::convert_region`] then reads.

use std::f64::consts::PI;

use ndflow_core::ColorMode;

use crate::layout::{copy_rotated, Layout};
use crate::params::{ImageSettings, SimMode};
use crate::pixel::{Rng, SimPixel};

/// Pixel storage of a type chosen at run time: `u64` words are aligned for every pixel
/// type, and the byte length is always a multiple of every pixel size.
#[derive(Debug, Default)]
pub(crate) struct Words(Vec<u64>);

impl Words {
    /// Room for `n` pixels of `T`, all zero.
    pub fn zeroed<T>(n: usize) -> Result<Words, String> {
        let mut w = Words::default();
        w.grow::<T>(n)?;
        Ok(w)
    }
    /// Makes room for `n` pixels of `T`; keeps (and does not clear) what is there.
    pub fn grow<T>(&mut self, n: usize) -> Result<(), String> {
        let words = n
            .checked_mul(std::mem::size_of::<T>())
            .map(|b| b.div_ceil(8))
            .ok_or_else(|| format!("image of {n} pixels is too large"))?;
        if words > self.0.len() {
            self.0
                .try_reserve_exact(words - self.0.len())
                .map_err(|e| format!("cannot allocate the {n}-pixel simulation image: {e}"))?;
            self.0.resize(words, 0);
        }
        Ok(())
    }
    pub fn view<T: SimPixel>(&self, n: usize) -> &[T] {
        let all: &[T] = bytemuck::cast_slice(&self.0);
        &all[..n.min(all.len())]
    }
    pub fn view_mut<T: SimPixel>(&mut self, n: usize) -> &mut [T] {
        let all: &mut [T] = bytemuck::cast_slice_mut(&mut self.0);
        let n = n.min(all.len());
        &mut all[..n]
    }
}

/// Everything computed at reset, plus the per-frame counters.
pub(crate) struct Generator {
    pub s: ImageSettings,
    pub layout: Layout,
    /// LinearRamp: the frame-0 image.
    base: Words,
    /// Offset + noise background, when Offset (in the pixel type) or Noise is not 0.
    background: Option<Words>,
    /// Peaks: one Gaussian of full width (kw, kh), values already cast to the pixel type.
    kernel: Vec<f64>,
    kw: usize,
    kh: usize,
    /// Sine: per-frame tables for XSine1, XSine2, YSine1, YSine2.
    sines: [Vec<f64>; 4],
    /// Frames rendered since the last reset.
    pub frame: u64,
    rng: Rng,
}

impl Generator {
    pub fn new(s: ImageSettings, rng: Rng) -> Generator {
        let layout = Layout {
            nx: s.max_x,
            ny: s.max_y,
            mode: s.color_mode,
        };
        Generator {
            s,
            layout,
            base: Words::default(),
            background: None,
            kernel: Vec::new(),
            kw: 0,
            kh: 0,
            sines: Default::default(),
            frame: 0,
            rng,
        }
    }

    /// The random state survives resets (like `rand()`), so a new image is not a replay.
    pub fn into_rng(self) -> Rng {
        self.rng
    }

    /// Computes what stays fixed until the next reset.
    pub fn prepare<T: SimPixel>(&mut self) -> Result<(), String> {
        let s = &self.s;
        let l = self.layout;
        let n = l.len();
        let offset = T::from_f64_wrap(s.offset);
        self.background = if s.noise != 0.0 || offset != T::default() {
            let mut w = Words::zeroed::<T>(n)?;
            let bg = w.view_mut::<T>(n);
            if s.noise == 0.0 {
                bg.fill(offset);
            } else {
                for v in bg.iter_mut() {
                    *v = T::from_f64_wrap(s.noise * self.rng.unit() + s.offset);
                }
            }
            Some(w)
        } else {
            None
        };
        self.base = Words::default();
        self.kernel = Vec::new();
        match s.mode {
            SimMode::LinearRamp => {
                self.base = Words::zeroed::<T>(n)?;
                let incs = ramp_increments::<T>(s);
                let (gx, gy) = (s.gain_x, s.gain_y);
                let base = self.base.view_mut::<T>(n);
                for y in 0..l.ny {
                    for (c, inc) in incs.iter().take(l.colors()).enumerate() {
                        let inc = inc.to_f64();
                        l.for_row(base, y, c, |x, v| {
                            *v = T::from_f64_wrap(inc * (gx * x as f64 + gy * y as f64));
                        });
                    }
                }
            }
            SimMode::Peaks => {
                let [wx, wy] = s.peak_width.map(|w| w.max(1) as usize);
                // Full width 8 sigma + 1, or just under the image (simDetector's limits).
                self.kw = (8 * wx + 1).min(l.nx.saturating_sub(1).max(1));
                self.kh = (8 * wy + 1).min(l.ny.saturating_sub(1).max(1));
                let gauss = |i: usize, full: usize, w: usize| {
                    let d = (i as f64 - (full / 2) as f64) / w as f64;
                    (-d * d / 2.0).exp()
                };
                let gx: Vec<f64> = (0..self.kw).map(|j| gauss(j, self.kw, wx)).collect();
                self.kernel = (0..self.kh)
                    .flat_map(|i| {
                        let gy = gauss(i, self.kh, wy);
                        gx.iter()
                            .map(move |g| T::from_f64_wrap(s.gain * g * gy).to_f64())
                    })
                    .collect();
            }
            SimMode::Sine | SimMode::OffsetNoise => {}
        }
        self.frame = 0;
        Ok(())
    }

    /// Writes the next raw frame (layout `self.layout`) into `out`.
    pub fn render<T: SimPixel>(&mut self, out: &mut [T]) {
        let n = self.layout.len();
        let len = n.min(out.len());
        let out = &mut out[..len];
        let start = self.rng.below(n);
        let bg = self.background.as_ref().map(|w| w.view::<T>(n));
        match self.s.mode {
            SimMode::LinearRamp => {
                let incs = ramp_increments::<T>(&self.s).map(|i| i.wmul_count(self.frame));
                if let Some(bg) = bg {
                    copy_rotated(out, bg, start, false);
                }
                let base = self.base.view::<T>(n);
                self.layout.add_per_colour(out, base, incs, bg.is_some());
            }
            SimMode::Peaks => {
                fill_background(out, bg, start);
                self.add_peaks(out);
            }
            SimMode::Sine => {
                let has_bg = bg.is_some();
                fill_background(out, bg, start);
                self.add_sine(out, has_bg);
            }
            SimMode::OffsetNoise => fill_background(out, bg, start),
        }
        self.frame += 1;
    }

    fn add_peaks<T: SimPixel>(&mut self, out: &mut [T]) {
        let s = &self.s;
        let l = self.layout;
        let (kw, kh) = (self.kw as i64, self.kh as i64);
        let (xs, ys, cs) = l.strides();
        let mono = l.mode == ColorMode::Mono;
        for iy in 0..s.peak_num[1] {
            for ix in 0..s.peak_num[0] {
                let variation = if s.peak_variation != 0.0 {
                    1.0 + s.peak_variation / 100.0 * (self.rng.unit() - 0.5)
                } else {
                    1.0
                };
                let cy = iy * s.peak_step[1] + s.peak_start[1];
                let cx = ix * s.peak_step[0] + s.peak_start[0];
                // Kernel columns/rows that land inside the image.
                let (x0, y0) = (cx - kw / 2, cy - kh / 2);
                let (l_lo, l_hi) = ((-x0).max(0), (l.nx as i64 - x0).min(kw));
                let (k_lo, k_hi) = ((-y0).max(0), (l.ny as i64 - y0).min(kh));
                for k in k_lo..k_hi {
                    let krow = (k * kw) as usize;
                    let row = (y0 + k) as usize * ys;
                    for col in l_lo..l_hi {
                        let g = variation
                            * self.kernel.get(krow + col as usize).copied().unwrap_or(0.0);
                        let p = row + (x0 + col) as usize * xs;
                        if mono {
                            if let Some(v) = out.get_mut(p) {
                                // simDetector adds the double and casts the sum.
                                *v = T::from_f64_wrap(v.to_f64() + g);
                            }
                        } else {
                            for c in 0..3 {
                                if let Some(v) = out.get_mut(p + c * cs) {
                                    *v = v.wadd(T::from_f64_wrap(s.gain_rgb[c] * g));
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    fn add_sine<T: SimPixel>(&mut self, out: &mut [T], accumulate: bool) {
        let s = &self.s;
        let l = self.layout;
        // simDetector's counters run on across frames: pixel i of frame f is at time
        // (f·n + i)·gain/n, so integer frequencies stand still and others drift.
        for (k, table) in self.sines.iter_mut().enumerate() {
            let (n, gain) = if k < 2 {
                (l.nx, s.gain_x)
            } else {
                (l.ny, s.gain_y)
            };
            let [amp, freq, phase] = s.sine[k];
            table.clear();
            table.extend((0..n).map(|i| {
                let counter = self.frame.wrapping_mul(n as u64).wrapping_add(i as u64) as f64;
                let t = counter * gain / n as f64;
                amp * ((t * freq + phase / 360.0) * 2.0 * PI).sin()
            }));
        }
        let gain = s.gain;
        let put = |v: &mut T, value: f64| {
            let t = T::from_f64_wrap(value);
            *v = if accumulate { v.wadd(t) } else { t };
        };
        let [x1, x2, y1, y2] = &mut self.sines;
        if l.mode == ColorMode::Mono {
            // Combined in place, as simDetector does: X = X1 (+|*) X2, Y likewise.
            for (a, b, multiply) in [
                (&mut *x1, &*x2, s.sine_multiply[0]),
                (&mut *y1, &*y2, s.sine_multiply[1]),
            ] {
                for (p, q) in a.iter_mut().zip(b.iter()) {
                    *p = if multiply { *p * q } else { *p + q };
                }
            }
            let peak = |t: &[f64]| t.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            // NaN-free (settings are finite), so this bound decides the cast once per frame.
            let small = gain.abs() * (peak(x1) + peak(y1)) < 2.0e9;
            for (row, &yv) in out.chunks_exact_mut(l.nx.max(1)).zip(y1.iter()) {
                let row = row.iter_mut().zip(x1.iter());
                match (accumulate, small) {
                    (false, true) => {
                        row.for_each(|(v, &xv)| *v = T::from_f64_wrap_i32(gain * (yv + xv)))
                    }
                    (false, false) => {
                        row.for_each(|(v, &xv)| *v = T::from_f64_wrap(gain * (yv + xv)))
                    }
                    (true, _) => {
                        row.for_each(|(v, &xv)| *v = v.wadd(T::from_f64_wrap(gain * (yv + xv))))
                    }
                }
            }
            return;
        }
        let [gr, gg, gb] = s.gain_rgb;
        for y in 0..l.ny {
            let (y1v, y2v) = (
                y1.get(y).copied().unwrap_or(0.0),
                y2.get(y).copied().unwrap_or(0.0),
            );
            l.for_row(out, y, 0, |x, v| {
                put(v, gain * gr * x1.get(x).copied().unwrap_or(0.0))
            });
            l.for_row(out, y, 1, |_, v| put(v, gain * gg * y1v));
            l.for_row(out, y, 2, |x, v| {
                put(
                    v,
                    gain * gb * (x2.get(x).copied().unwrap_or(0.0) + y2v) / 2.0,
                )
            });
        }
    }
}

/// simDetector's ramp increments per colour: the gain and colour gains are cast to the
/// pixel type before multiplying (so an integer image only sees their integer part).
fn ramp_increments<T: SimPixel>(s: &ImageSettings) -> [T; 3] {
    let mono = T::from_f64_wrap(s.gain);
    if s.color_mode == ColorMode::Mono {
        return [mono; 3];
    }
    s.gain_rgb
        .map(|g| T::from_f64_wrap(T::from_f64_wrap(g).to_f64() * mono.to_f64()))
}

fn fill_background<T: SimPixel>(out: &mut [T], bg: Option<&[T]>, start: usize) {
    match bg {
        Some(bg) => copy_rotated(out, bg, start, false),
        None => out.fill(T::default()),
    }
}
