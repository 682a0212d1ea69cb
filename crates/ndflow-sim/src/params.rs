//! simDetector's own parameters (simDetector.template / simDetectorParameters.template)
//! and the settings snapshot the generator works from.
//!
//! Defaults are the ones simDetector's constructor and template set. The snapshot is read
//! under one lock, only when the store's version moved; invalid values are clamped the way
//! simDetector's `computeImage` clamps them, and written back so the readbacks show what
//! was used.

use ndflow_core::handle::{Float, Int};
use ndflow_core::{ColorMode, DataType, Param, ParamStore, ParamValue};
use ndflow_runtime::port_params::DriverBase;

pub const SIM_MODE_CHOICES: &[&str] = &["LinearRamp", "Peaks", "Sine", "Offset&Noise"];
pub const SINE_OPERATION_CHOICES: &[&str] = &["Add", "Multiply"];

ndflow_core::params! {
    /// The simulated detector's parameters (areaDetector's record names and enum strings).
    pub const SIM_PARAMS, pub struct SimParams {
        // simDetector.template narrows NDArrayBase's ColorMode menu to the modes it generates;
        // the entries stand for NDColorMode_t values 0, 2, 3, 4 (the store keeps those).
        color_mode: enumeration("ColorMode", &["Mono", "RGB1", "RGB2", "RGB3"], 0)
            .menu_values(&[0, 2, 3, 4])
            .overrides()
            .doc("Colour mode generated: Mono, RGB1, RGB2 or RGB3"),
        sim_mode: enumeration("SimMode", SIM_MODE_CHOICES, 0)
            .doc("Image pattern: LinearRamp, Peaks, Sine or Offset&Noise"),
        gain_x: float64("GainX", 1.0).doc("Ramp slope in X; Sine: time scale in X"),
        gain_y: float64("GainY", 1.0).doc("Ramp slope in Y; Sine: time scale in Y"),
        gain_red: float64("GainRed", 1.0).doc("Gain of the red channel (RGB modes)"),
        gain_green: float64("GainGreen", 1.0).doc("Gain of the green channel (RGB modes)"),
        gain_blue: float64("GainBlue", 1.0).doc("Gain of the blue channel (RGB modes)"),
        offset: float64("Offset", 0.0).doc("Background offset added to every pixel"),
        noise: float64("Noise", 0.0).doc("Amplitude of the uniform background noise"),
        reset: int32("Reset", 0).doc("Write 1 to recompute the base image and restart the pattern"),
        peak_start_x: int32("PeakStartX", 1).doc("X of the first peak's centre"),
        peak_start_y: int32("PeakStartY", 1).doc("Y of the first peak's centre"),
        peak_width_x: int32("PeakWidthX", 10)
            .min(1.0)
            .doc("Peak sigma in X (pixels)"),
        peak_width_y: int32("PeakWidthY", 20)
            .min(1.0)
            .doc("Peak sigma in Y (pixels)"),
        peak_num_x: int32("PeakNumX", 1)
            .min(0.0)
            .doc("Number of peaks in X"),
        peak_num_y: int32("PeakNumY", 1)
            .min(0.0)
            .doc("Number of peaks in Y"),
        peak_step_x: int32("PeakStepX", 1).doc("Distance between peaks in X (pixels)"),
        peak_step_y: int32("PeakStepY", 1).doc("Distance between peaks in Y (pixels)"),
        peak_variation: float64("PeakVariation", 0.0).doc("Random per-peak height variation per frame (%)"),
        x_sine_operation: enumeration("XSineOperation", SINE_OPERATION_CHOICES, 0).mbb()
            .doc("How XSine1 and XSine2 combine"),
        y_sine_operation: enumeration("YSineOperation", SINE_OPERATION_CHOICES, 0).mbb()
            .doc("How YSine1 and YSine2 combine"),
        x_sine1_amplitude: float64("XSine1Amplitude", 1.0).doc("Amplitude of X sine 1"),
        x_sine1_frequency: float64("XSine1Frequency", 1.0)
            .doc("Frequency of X sine 1 (periods across the image)"),
        x_sine1_phase: float64("XSine1Phase", 0.0).doc("Phase of X sine 1 (degrees)"),
        x_sine2_amplitude: float64("XSine2Amplitude", 1.0).doc("Amplitude of X sine 2"),
        x_sine2_frequency: float64("XSine2Frequency", 2.0)
            .doc("Frequency of X sine 2 (periods across the image)"),
        x_sine2_phase: float64("XSine2Phase", 90.0).doc("Phase of X sine 2 (degrees)"),
        y_sine1_amplitude: float64("YSine1Amplitude", 1.0).doc("Amplitude of Y sine 1"),
        y_sine1_frequency: float64("YSine1Frequency", 1.0)
            .doc("Frequency of Y sine 1 (periods across the image)"),
        y_sine1_phase: float64("YSine1Phase", 0.0).doc("Phase of Y sine 1 (degrees)"),
        y_sine2_amplitude: float64("YSine2Amplitude", 1.0).doc("Amplitude of Y sine 2"),
        y_sine2_frequency: float64("YSine2Frequency", 2.0)
            .doc("Frequency of Y sine 2 (periods across the image)"),
        y_sine2_phase: float64("YSine2Phase", 90.0).doc("Phase of Y sine 2 (degrees)"),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SimMode {
    LinearRamp,
    Peaks,
    Sine,
    OffsetNoise,
}

/// Everything that shapes the base image: a change to any of it recomputes the image
/// (simDetector sets Reset on writes to these).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ImageSettings {
    pub max_x: usize,
    pub max_y: usize,
    pub data_type: DataType,
    pub color_mode: ColorMode,
    pub mode: SimMode,
    pub gain: f64,
    pub gain_x: f64,
    pub gain_y: f64,
    pub gain_rgb: [f64; 3],
    pub offset: f64,
    pub noise: f64,
    pub peak_start: [i64; 2],
    pub peak_width: [i64; 2],
    pub peak_num: [i64; 2],
    pub peak_step: [i64; 2],
    pub peak_variation: f64,
    /// true = Multiply, for X and Y.
    pub sine_multiply: [bool; 2],
    /// (amplitude, frequency, phase) of XSine1, XSine2, YSine1, YSine2.
    pub sine: [[f64; 3]; 4],
}

/// The readout region, in unbinned raw pixels; valid for the raw image it was clamped to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Region {
    pub min: [usize; 2],
    pub size: [usize; 2],
    pub bin: [usize; 2],
    pub reverse: [bool; 2],
}

impl Region {
    /// Output size per axis (a partial last bin is dropped, as NDArrayPool::convert does).
    pub fn out_size(&self, axis: usize) -> usize {
        self.size[axis] / self.bin[axis]
    }

    /// True when the output is the raw image itself (the common, fast case).
    pub fn is_identity(&self, max: [usize; 2]) -> bool {
        self.min == [0, 0] && self.size == max && self.bin == [1, 1] && self.reverse == [false; 2]
    }
}

impl SimParams {
    /// (amplitude, frequency, phase) of XSine1, XSine2, YSine1, YSine2.
    fn sines(&self) -> [[Param<Float>; 3]; 4] {
        [
            [
                self.x_sine1_amplitude,
                self.x_sine1_frequency,
                self.x_sine1_phase,
            ],
            [
                self.x_sine2_amplitude,
                self.x_sine2_frequency,
                self.x_sine2_phase,
            ],
            [
                self.y_sine1_amplitude,
                self.y_sine1_frequency,
                self.y_sine1_phase,
            ],
            [
                self.y_sine2_amplitude,
                self.y_sine2_frequency,
                self.y_sine2_phase,
            ],
        ]
    }
}

/// One consistent reading of the parameters, plus the clamped values to write back.
pub(crate) struct Snapshot {
    pub image: ImageSettings,
    pub region: Region,
    pub reset: bool,
    pub fixes: Vec<(usize, ParamValue)>,
}

/// Reads and validates all settings under one lock.
pub(crate) fn read(p: &ParamStore, sim: &SimParams, base: &DriverBase) -> Snapshot {
    let (ad, nd) = (&base.driver, &base.array);
    let mut fixes = Vec::new();
    p.with_values(|v| {
        // A non-finite number would poison every pixel (and never compare equal, so the
        // image would be recomputed every frame): treat it as 0 and show that.
        let mut float = |h: Param<Float>| {
            let x = h.read(v);
            if x.is_finite() {
                x
            } else {
                fixes.push(h.value(0.0));
                0.0
            }
        };
        let gain = float(ad.gain);
        let gain_x = float(sim.gain_x);
        let gain_y = float(sim.gain_y);
        let gain_rgb = [sim.gain_red, sim.gain_green, sim.gain_blue].map(&mut float);
        let offset = float(sim.offset);
        let noise = float(sim.noise);
        let peak_variation = float(sim.peak_variation);
        let sine = sim.sines().map(|hs| hs.map(&mut float));

        let data_type = DataType::from_index(nd.data_type.read(v)).unwrap_or_else(|| {
            fixes.push(nd.data_type.value(DataType::UInt8 as i64));
            DataType::UInt8
        });
        // The handle binds to simDetector's own ColorMode (it overrides NDArrayBase's).
        let color_mode = match ColorMode::from_index(sim.color_mode.read(v)) {
            Some(m @ (ColorMode::Mono | ColorMode::RGB1 | ColorMode::RGB2 | ColorMode::RGB3)) => m,
            // simDetector's menu offers only these four.
            _ => {
                fixes.push(sim.color_mode.value(ColorMode::Mono as i64));
                ColorMode::Mono
            }
        };
        let mode = match sim.sim_mode.read(v) {
            1 => SimMode::Peaks,
            2 => SimMode::Sine,
            3 => SimMode::OffsetNoise,
            _ => SimMode::LinearRamp,
        };
        let mut clamp = |h: Param<Int>, lo: i64, hi: i64| -> i64 {
            let x = h.read(v);
            let c = x.clamp(lo, hi.max(lo));
            if c != x {
                fixes.push(h.value(c));
            }
            c
        };
        let max = [
            clamp(ad.max_size_x, 1, i32::MAX as i64) as usize,
            clamp(ad.max_size_y, 1, i32::MAX as i64) as usize,
        ];
        let mut region = Region {
            min: [0; 2],
            size: [1; 2],
            bin: [1; 2],
            reverse: [false; 2],
        };
        let axes = [
            (ad.min_x, ad.size_x, ad.bin_x, ad.reverse_x),
            (ad.min_y, ad.size_y, ad.bin_y, ad.reverse_y),
        ];
        for (a, (&m, (min_h, size_h, bin_h, reverse_h))) in max.iter().zip(axes).enumerate() {
            let m = m as i64;
            let min = clamp(min_h, 0, m - 1);
            let size = clamp(size_h, 1, m - min);
            // areaDetector leaves BinX > SizeX to fail in convert(); an empty frame helps
            // nobody, so the binning is limited to the region size instead.
            let bin = clamp(bin_h, 1, size);
            region.min[a] = min as usize;
            region.size[a] = size as usize;
            region.bin[a] = bin as usize;
            region.reverse[a] = reverse_h.read(v);
        }

        let peak_width = [
            clamp(sim.peak_width_x, 1, i32::MAX as i64),
            clamp(sim.peak_width_y, 1, i32::MAX as i64),
        ];
        // More peaks than pixels only burns time.
        let peak_num = [
            clamp(sim.peak_num_x, 0, max[0] as i64),
            clamp(sim.peak_num_y, 0, max[1] as i64),
        ];
        let image = ImageSettings {
            max_x: max[0],
            max_y: max[1],
            data_type,
            color_mode,
            mode,
            gain,
            gain_x,
            gain_y,
            gain_rgb,
            offset,
            noise,
            peak_start: [sim.peak_start_x.read(v), sim.peak_start_y.read(v)],
            peak_width,
            peak_num,
            peak_step: [sim.peak_step_x.read(v), sim.peak_step_y.read(v)],
            peak_variation,
            sine_multiply: [
                sim.x_sine_operation.read(v) == 1,
                sim.y_sine_operation.read(v) == 1,
            ],
            sine,
        };
        Snapshot {
            image,
            region,
            reset: sim.reset.read(v) != 0,
            fixes: Vec::new(),
        }
    })
    .with_fixes(fixes)
}

impl Snapshot {
    fn with_fixes(mut self, fixes: Vec<(usize, ParamValue)>) -> Snapshot {
        self.fixes = fixes;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_has_no_duplicates_with_driver_tables() {
        use ndflow_runtime::port_params::{ARRAY_BASE_PARAMS, DRIVER_PARAMS};
        assert!(
            ParamStore::duplicate_names(&[ARRAY_BASE_PARAMS, DRIVER_PARAMS, SIM_PARAMS]).is_empty()
        );
    }
}
