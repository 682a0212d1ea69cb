//! NDPluginFFT: 1-D or 2-D FFT (rustfft) of a frame, zero-padded to powers of 2.
//!
//! As ADCore: the input (any type, 1-D or 2-D) becomes f64, padded to nx × ny = next powers
//! of 2; the output frame is Float64 `[nx/2]` or `[nx/2, max(ny/2, 1)]` holding
//! |FFT| / (nx·ny) of the first quadrant, averaged recursively: with N = FFTNumAveraged,
//! avg = avg·(1 − 1/N) + |FFT|/N, then N grows by one up to FFTNumAverage. FFTResetAverage
//! (or a change of FFTNumAverage) restarts at N = 1. FFTSuppressDC zeroes element 0. The
//! waveforms hold the first row: FFTTimeSeries (padded input), FFTReal, FFTImaginary,
//! FFTAbsValue (averaged), FFTTimeAxis (i·FFTTimePerPoint) and FFTFreqAxis
//! (i·0.5/FFTTimePerPoint/(nx/2 − 1)).
//!
//! Sign convention: ADCore's "Time to freq." transform (Numerical Recipes' `four1`, isign 1)
//! uses e^{+2πi·jk/n}, so FFTImaginary has the opposite sign of numpy's `fft`; this is kept.
//! "Freq. to time", ignored by ADCore, here applies e^{−2πi·jk/n} (same scaling).
//!
//! Deviations: the output frame keeps the input's uniqueId and timestamps (ADCore numbers
//! them from its own counter); a change of frame size restarts the average at N = 1.

use std::sync::Arc;

use ndflow_core::{
    with_pixel_type, ArrayValue, DataType, NDArray, ParamDef, ParamStore, ParamValue, Pixel,
};
use ndflow_runtime::port_params::{bind, plugin_layout};
use ndflow_runtime::{Built, PortType};
use ndflow_runtime::{Plugin, PluginError, ProcessContext};
use parking_lot::Mutex;
use rustfft::num_complex::Complex;
use rustfft::{FftDirection, FftPlanner};

ndflow_core::params! {
    pub const FFT_PARAMS, pub struct FftParams {
        fft_time_per_point_link: float64("FFTTimePerPointLink", 0.1)
            .input_link()
            .doc("Input link for FFTTimePerPoint: a write is copied to FFTTimePerPoint"),
        fft_time_per_point: float64("FFTTimePerPoint", 0.1).doc("Time between input points (s)"),
        fft_time_axis: array("FFTTimeAxis", DataType::Float64).doc("Time of each input point"),
        fft_freq_axis: array("FFTFreqAxis", DataType::Float64).doc("Frequency of each output point"),
        fft_direction: enumeration("FFTDirection", &["Time to freq.", "Freq. to time"], 0)
            .doc("Sign of the transform (ADCore computes only Time to freq.)"),
        fft_suppress_dc: enable("FFTSuppressDC", 0).doc("Zero the DC element of the outputs"),
        fft_num_average: int32("FFTNumAverage", 1)
            .min(1.0)
            .doc("Frames in the recursive average of |FFT|"),
        fft_num_averaged: int32("FFTNumAveraged", 1)
            .read_only_plain()
            .doc("N of the recursive average for the next frame"),
        fft_reset_average: enumeration("FFTResetAverage", &["Done", "Reset"], 0)
            .doc("Restart the average at the next frame"),
        name: string("Name", "").doc("Label of this FFT"),
        fft_time_series: array("FFTTimeSeries", DataType::Float64)
            .doc("First row of the input as f64, zero-padded"),
        fft_real: array("FFTReal", DataType::Float64).doc("Real part of the first row"),
        fft_imaginary: array("FFTImaginary", DataType::Float64).doc("Imaginary part of the first row"),
        fft_abs_value: array("FFTAbsValue", DataType::Float64)
            .doc("Averaged |FFT| / (nx*ny) of the first row"),
    }
}

/// Kept between frames: the average, the last settings it depends on, scratch space.
#[derive(Default)]
struct State {
    size: (usize, usize),
    avg: Vec<f64>,
    num_average: i64,
    planner: Option<FftPlanner<f64>>,
    data: Vec<Complex<f64>>,
    column: Vec<Complex<f64>>,
}

/// NDPluginFFT. The average makes it serial: one thread.
pub struct FftPlugin {
    p: FftParams,
    state: Mutex<State>,
}

impl Default for FftPlugin {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for FftPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FftPlugin").finish_non_exhaustive()
    }
}

impl FftPlugin {
    pub fn new() -> FftPlugin {
        FftPlugin {
            p: bind(&plugin_layout(FFT_PARAMS), FftParams::bind),
            state: Mutex::default(),
        }
    }
}

/// A Float64 array parameter value from `values`, in a pool buffer.
fn array(
    ctx: &ProcessContext<'_>,
    values: impl ExactSizeIterator<Item = f64>,
) -> Result<ArrayValue, PluginError> {
    let n = values.len();
    let mut buf = ctx.alloc(n * 8)?;
    for (d, v) in buf.as_mut_slice::<f64>().iter_mut().zip(values) {
        *d = v;
    }
    Ok(ArrayValue {
        data_type: DataType::Float64,
        buffer: buf.freeze(),
        len: n,
    })
}

/// Copies rows of `src` (`xin` wide) into the padded `nx`-wide complex buffer.
fn load<T: Pixel>(src: &[T], xin: usize, nx: usize, data: &mut [Complex<f64>]) {
    data.fill(Complex::new(0.0, 0.0));
    for (row, out) in src.chunks_exact(xin).zip(data.chunks_exact_mut(nx)) {
        for (d, s) in out.iter_mut().zip(row) {
            d.re = s.to_f64();
        }
    }
}

impl Plugin for FftPlugin {
    fn plugin_type(&self) -> &'static str {
        "NDPluginFFT"
    }

    fn params(&self) -> &'static [ParamDef] {
        FFT_PARAMS
    }

    fn param_changed(&self, params: &ParamStore, idx: usize, value: &ParamValue) {
        // The Link record forwards its value, as the template's OUT link does.
        if self.p.fft_time_per_point_link.is(idx) {
            if let Some(v) = value.as_f64() {
                self.p.fft_time_per_point.set(params, v);
            }
        }
    }

    fn process(
        &self,
        input: &Arc<NDArray>,
        ctx: &mut ProcessContext<'_>,
    ) -> Result<(), PluginError> {
        if input.is_compressed() || !(1..=2).contains(&input.ndims()) {
            return Err(PluginError::Unsupported(format!(
                "NDPluginFFT takes uncompressed 1-D or 2-D frames, got dims {:?} codec '{}'",
                input.sizes(),
                input.codec.name
            )));
        }
        let (p, params) = (&self.p, ctx.params);
        let (xin, yin) = (input.dims[0].size, input.dims.get(1).map_or(1, |d| d.size));
        let (nx, ny) = (xin.next_power_of_two(), yin.next_power_of_two());
        let (nfx, nfy) = ((nx / 2).max(1), (ny / 2).max(1));
        let direction = if p.fft_direction.get(params) == 0 {
            FftDirection::Inverse // e^{+i}: ADCore's forward transform
        } else {
            FftDirection::Forward
        };
        let mut guard = self.state.lock();
        let st = &mut *guard;
        st.data.resize(nx * ny, Complex::new(0.0, 0.0));
        with_pixel_type!(input.data_type, T => load(input.pixels::<T>()?, xin, nx, &mut st.data));
        let time_series = array(ctx, st.data[..nx].iter().map(|c| c.re))?;
        let planner = st.planner.get_or_insert_with(FftPlanner::new);
        planner.plan_fft(nx, direction).process(&mut st.data);
        if ny > 1 {
            // Columns: gather each into scratch, transform, scatter back.
            let plan = planner.plan_fft(ny, direction);
            st.column.resize(ny, Complex::new(0.0, 0.0));
            for x in 0..nx {
                for (y, c) in st.column.iter_mut().enumerate() {
                    *c = st.data[x + y * nx];
                }
                plan.process(&mut st.column);
                for (y, c) in st.column.iter().enumerate() {
                    st.data[x + y * nx] = *c;
                }
            }
        }
        let norm = (nx * ny) as f64;
        let suppress = p.fft_suppress_dc.get(params);
        let quad = |k: usize| st.data[(k % nfx) + (k / nfx) * nx];
        let dc = |k: usize, v: f64| if suppress && k == 0 { 0.0 } else { v };

        // The recursive average.
        let num_average = p.fft_num_average.get(params).max(1);
        let mut n = p.fft_num_averaged.get(params).max(1);
        if p.fft_reset_average.get(params) != 0 {
            p.fft_reset_average.set(params, 0);
            n = 1;
        }
        let size_changed = st.size != (xin, yin);
        if num_average != st.num_average || size_changed {
            st.num_average = num_average;
            n = 1;
        }
        st.avg.resize(nfx * nfy, 0.0);
        let (old, new) = (1.0 - 1.0 / n as f64, 1.0 / n as f64);
        for (k, a) in st.avg.iter_mut().enumerate() {
            let abs = dc(k, quad(k).norm() / norm);
            *a = *a * old + abs * new;
        }
        let next = if n < num_average { n + 1 } else { n };

        let mut buf = ctx.alloc(nfx * nfy * 8)?;
        buf.as_mut_slice::<f64>().copy_from_slice(&st.avg);
        let mut out = NDArray::clone(input);
        out.dims = if input.ndims() == 1 {
            vec![ndflow_core::Dim::new(nfx)]
        } else {
            vec![ndflow_core::Dim::new(nfx), ndflow_core::Dim::new(nfy)]
        };
        let out = out.with_buffer(DataType::Float64, buf.freeze());

        let real = array(ctx, (0..nfx).map(|k| dc(k, quad(k).re)))?;
        let imag = array(ctx, (0..nfx).map(|k| dc(k, quad(k).im)))?;
        let abs = array(ctx, st.avg[..nfx].iter().copied())?;
        let mut writes = vec![
            p.fft_num_averaged.value(next),
            p.fft_time_series.value(time_series),
            p.fft_real.value(real),
            p.fft_imaginary.value(imag),
            p.fft_abs_value.value(abs),
        ];
        let tpp = p.fft_time_per_point.get(params);
        // Axes: cheap, so always written with this frame's size and FFTTimePerPoint.
        let step = if nfx > 1 {
            0.5 / tpp / (nfx - 1) as f64
        } else {
            0.0
        };
        let time_axis = array(ctx, (0..nx).map(|i| i as f64 * tpp))?;
        let freq_axis = array(ctx, (0..nfx).map(|i| i as f64 * step))?;
        writes.push(p.fft_time_axis.value(time_axis));
        writes.push(p.fft_freq_axis.value(freq_axis));
        st.size = (xin, yin);
        drop(guard);
        params.set_many(&writes);
        ctx.emit(out);
        Ok(())
    }
}

/// The port type `type = "fft"`.
pub const PORT: PortType = PortType::plugin(
    "fft",
    "NDPluginFFT",
    "1-D/2-D FFT: averaged |FFT| frame, real/imaginary/abs waveforms",
    |_| Ok(Built::Plugin(std::sync::Arc::new(FftPlugin::new()))),
);
