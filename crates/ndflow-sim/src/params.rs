//! simDetector's own parameters (simDetector.template / simDetectorParameters.template)
//! and the settings snapshot the generator works from.
//!
//! Defaults are the ones simDetector's constructor and template set. The snapshot is read
//! under one lock, only when the store's version moved; invalid values are clamped the way
//! simDetector's `computeImage` clamps them, and written back so the readbacks show what
//! was used.

use ndflow_core::{ColorMode, DataType, ParamDef, ParamError, ParamStore, ParamValue};

pub const SIM_MODE_CHOICES: &[&str] = &["LinearRamp", "Peaks", "Sine", "Offset&Noise"];
pub const SINE_OPERATION_CHOICES: &[&str] = &["Add", "Multiply"];

/// Names of the four sine waves' (amplitude, frequency, phase) parameters.
const SINE_NAMES: [[&str; 3]; 4] = [
    ["XSine1Amplitude", "XSine1Frequency", "XSine1Phase"],
    ["XSine2Amplitude", "XSine2Frequency", "XSine2Phase"],
    ["YSine1Amplitude", "YSine1Frequency", "YSine1Phase"],
    ["YSine2Amplitude", "YSine2Frequency", "YSine2Phase"],
];

/// The simulated detector's parameters (areaDetector's record names and enum strings).
pub const SIM_PARAMS: &[ParamDef] = &[
    // simDetector.template narrows NDArrayBase's ColorMode menu to the modes it generates;
    // the entries stand for NDColorMode_t values 0, 2, 3, 4 (the store keeps those).
    ParamDef::enumeration("ColorMode", &["Mono", "RGB1", "RGB2", "RGB3"], 0)
        .menu_values(&[0, 2, 3, 4])
        .overrides()
        .doc("Colour mode generated: Mono, RGB1, RGB2 or RGB3"),
    ParamDef::enumeration("SimMode", SIM_MODE_CHOICES, 0)
        .doc("Image pattern: LinearRamp, Peaks, Sine or Offset&Noise"),
    ParamDef::float64("GainX", 1.0).doc("Ramp slope in X; Sine: time scale in X"),
    ParamDef::float64("GainY", 1.0).doc("Ramp slope in Y; Sine: time scale in Y"),
    ParamDef::float64("GainRed", 1.0).doc("Gain of the red channel (RGB modes)"),
    ParamDef::float64("GainGreen", 1.0).doc("Gain of the green channel (RGB modes)"),
    ParamDef::float64("GainBlue", 1.0).doc("Gain of the blue channel (RGB modes)"),
    ParamDef::float64("Offset", 0.0).doc("Background offset added to every pixel"),
    ParamDef::float64("Noise", 0.0).doc("Amplitude of the uniform background noise"),
    ParamDef::int32("Reset", 0).doc("Write 1 to recompute the base image and restart the pattern"),
    ParamDef::int32("PeakStartX", 1).doc("X of the first peak's centre"),
    ParamDef::int32("PeakStartY", 1).doc("Y of the first peak's centre"),
    ParamDef::int32("PeakWidthX", 10)
        .min(1.0)
        .doc("Peak sigma in X (pixels)"),
    ParamDef::int32("PeakWidthY", 20)
        .min(1.0)
        .doc("Peak sigma in Y (pixels)"),
    ParamDef::int32("PeakNumX", 1)
        .min(0.0)
        .doc("Number of peaks in X"),
    ParamDef::int32("PeakNumY", 1)
        .min(0.0)
        .doc("Number of peaks in Y"),
    ParamDef::int32("PeakStepX", 1).doc("Distance between peaks in X (pixels)"),
    ParamDef::int32("PeakStepY", 1).doc("Distance between peaks in Y (pixels)"),
    ParamDef::float64("PeakVariation", 0.0).doc("Random per-peak height variation per frame (%)"),
    ParamDef::enumeration("XSineOperation", SINE_OPERATION_CHOICES, 0)
        .doc("How XSine1 and XSine2 combine"),
    ParamDef::enumeration("YSineOperation", SINE_OPERATION_CHOICES, 0)
        .doc("How YSine1 and YSine2 combine"),
    ParamDef::float64("XSine1Amplitude", 1.0).doc("Amplitude of X sine 1"),
    ParamDef::float64("XSine1Frequency", 1.0)
        .doc("Frequency of X sine 1 (periods across the image)"),
    ParamDef::float64("XSine1Phase", 0.0).doc("Phase of X sine 1 (degrees)"),
    ParamDef::float64("XSine2Amplitude", 1.0).doc("Amplitude of X sine 2"),
    ParamDef::float64("XSine2Frequency", 2.0)
        .doc("Frequency of X sine 2 (periods across the image)"),
    ParamDef::float64("XSine2Phase", 90.0).doc("Phase of X sine 2 (degrees)"),
    ParamDef::float64("YSine1Amplitude", 1.0).doc("Amplitude of Y sine 1"),
    ParamDef::float64("YSine1Frequency", 1.0)
        .doc("Frequency of Y sine 1 (periods across the image)"),
    ParamDef::float64("YSine1Phase", 0.0).doc("Phase of Y sine 1 (degrees)"),
    ParamDef::float64("YSine2Amplitude", 1.0).doc("Amplitude of Y sine 2"),
    ParamDef::float64("YSine2Frequency", 2.0)
        .doc("Frequency of Y sine 2 (periods across the image)"),
    ParamDef::float64("YSine2Phase", 90.0).doc("Phase of Y sine 2 (degrees)"),
];

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

/// Cached parameter indices (stable for the store's life).
#[derive(Debug, Clone)]
pub(crate) struct Indices {
    max: [usize; 2],
    min: [usize; 2],
    size: [usize; 2],
    bin: [usize; 2],
    reverse: [usize; 2],
    data_type: usize,
    color_mode: usize,
    gain: usize,
    mode: usize,
    gain_xy: [usize; 2],
    gain_rgb: [usize; 3],
    offset: usize,
    noise: usize,
    pub reset: usize,
    peak_start: [usize; 2],
    peak_width: [usize; 2],
    peak_num: [usize; 2],
    peak_step: [usize; 2],
    peak_variation: usize,
    sine_op: [usize; 2],
    sine: [[usize; 3]; 4],
}

impl Indices {
    pub fn resolve(p: &ParamStore) -> Result<Indices, ParamError> {
        let r = |n: &str| p.require(n);
        let pair = |a: &str, b: &str| -> Result<[usize; 2], ParamError> { Ok([r(a)?, r(b)?]) };
        let mut sine = [[0; 3]; 4];
        for (ids, names) in sine.iter_mut().zip(SINE_NAMES) {
            for (id, name) in ids.iter_mut().zip(names) {
                *id = r(name)?;
            }
        }
        Ok(Indices {
            max: pair("MaxSizeX", "MaxSizeY")?,
            min: pair("MinX", "MinY")?,
            size: pair("SizeX", "SizeY")?,
            bin: pair("BinX", "BinY")?,
            reverse: pair("ReverseX", "ReverseY")?,
            data_type: r("DataType")?,
            color_mode: r("ColorMode")?,
            gain: r("Gain")?,
            mode: r("SimMode")?,
            gain_xy: pair("GainX", "GainY")?,
            gain_rgb: [r("GainRed")?, r("GainGreen")?, r("GainBlue")?],
            offset: r("Offset")?,
            noise: r("Noise")?,
            reset: r("Reset")?,
            peak_start: pair("PeakStartX", "PeakStartY")?,
            peak_width: pair("PeakWidthX", "PeakWidthY")?,
            peak_num: pair("PeakNumX", "PeakNumY")?,
            peak_step: pair("PeakStepX", "PeakStepY")?,
            peak_variation: r("PeakVariation")?,
            sine_op: pair("XSineOperation", "YSineOperation")?,
            sine,
        })
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
pub(crate) fn read(p: &ParamStore, ix: &Indices) -> Snapshot {
    let mut fixes = Vec::new();
    p.with_values(|v| {
        let int = |i: usize| v.get(i).and_then(ParamValue::as_i64).unwrap_or(0);
        // A non-finite number would poison every pixel (and never compare equal, so the
        // image would be recomputed every frame): treat it as 0 and show that.
        let mut float = |i: usize| {
            let x = v.get(i).and_then(ParamValue::as_f64).unwrap_or(0.0);
            if x.is_finite() {
                x
            } else {
                fixes.push((i, ParamValue::Float(0.0)));
                0.0
            }
        };
        let gain = float(ix.gain);
        let gain_x = float(ix.gain_xy[0]);
        let gain_y = float(ix.gain_xy[1]);
        let gain_rgb = ix.gain_rgb.map(&mut float);
        let offset = float(ix.offset);
        let noise = float(ix.noise);
        let peak_variation = float(ix.peak_variation);
        let sine = ix.sine.map(|ids| ids.map(&mut float));

        let data_type = DataType::from_index(int(ix.data_type)).unwrap_or_else(|| {
            fixes.push((ix.data_type, ParamValue::Int(DataType::UInt8 as i64)));
            DataType::UInt8
        });
        let color_mode = match ColorMode::from_index(int(ix.color_mode)) {
            Some(m @ (ColorMode::Mono | ColorMode::RGB1 | ColorMode::RGB2 | ColorMode::RGB3)) => m,
            // simDetector's menu offers only these four.
            _ => {
                fixes.push((ix.color_mode, ParamValue::Int(ColorMode::Mono as i64)));
                ColorMode::Mono
            }
        };
        let mode = match int(ix.mode) {
            1 => SimMode::Peaks,
            2 => SimMode::Sine,
            3 => SimMode::OffsetNoise,
            _ => SimMode::LinearRamp,
        };
        let mut clamp = |i: usize, lo: i64, hi: i64| -> i64 {
            let x = int(i);
            let c = x.clamp(lo, hi.max(lo));
            if c != x {
                fixes.push((i, ParamValue::Int(c)));
            }
            c
        };
        let max = [
            clamp(ix.max[0], 1, i32::MAX as i64) as usize,
            clamp(ix.max[1], 1, i32::MAX as i64) as usize,
        ];
        let mut region = Region {
            min: [0; 2],
            size: [1; 2],
            bin: [1; 2],
            reverse: [false; 2],
        };
        for (a, &m) in max.iter().enumerate() {
            let m = m as i64;
            let min = clamp(ix.min[a], 0, m - 1);
            let size = clamp(ix.size[a], 1, m - min);
            // areaDetector leaves BinX > SizeX to fail in convert(); an empty frame helps
            // nobody, so the binning is limited to the region size instead.
            let bin = clamp(ix.bin[a], 1, size);
            region.min[a] = min as usize;
            region.size[a] = size as usize;
            region.bin[a] = bin as usize;
            region.reverse[a] = int(ix.reverse[a]) != 0;
        }

        let peak_width = [
            clamp(ix.peak_width[0], 1, i32::MAX as i64),
            clamp(ix.peak_width[1], 1, i32::MAX as i64),
        ];
        // More peaks than pixels only burns time.
        let peak_num = [
            clamp(ix.peak_num[0], 0, max[0] as i64),
            clamp(ix.peak_num[1], 0, max[1] as i64),
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
            peak_start: [int(ix.peak_start[0]), int(ix.peak_start[1])],
            peak_width,
            peak_num,
            peak_step: [int(ix.peak_step[0]), int(ix.peak_step[1])],
            peak_variation,
            sine_multiply: [int(ix.sine_op[0]) == 1, int(ix.sine_op[1]) == 1],
            sine,
        };
        Snapshot {
            image,
            region,
            reset: int(ix.reset) != 0,
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
        use ndflow_runtime::params::{ARRAY_BASE_PARAMS, DRIVER_PARAMS};
        assert!(
            ParamStore::duplicate_names(&[ARRAY_BASE_PARAMS, DRIVER_PARAMS, SIM_PARAMS]).is_empty()
        );
    }
}
