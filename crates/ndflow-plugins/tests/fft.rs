//! NDPluginFFT against a plain DFT (ADCore's sign, e^{+2πi·jk/n}), averaging, axes.

use crate::common;
use std::f64::consts::PI;
use std::sync::Arc;

use ndflow_core::{with_pixel_type, DataType, NDArray, ParamValue, Pixel};
use ndflow_plugins::fft::{FftPlugin, FFT_PARAMS};
use ndflow_runtime::{PluginError, PluginHarness};

fn waveform(h: &PluginHarness<FftPlugin>, name: &str) -> Vec<f64> {
    match h.get(name) {
        ParamValue::Array(a) => bytemuck::cast_slice::<u8, f64>(a.bytes()).to_vec(),
        v => panic!("{name} = {v}"),
    }
}

/// Plain 2-D DFT of a real `nx`×`ny` image (row-major, x fastest), sign `s`.
fn dft(data: &[f64], nx: usize, ny: usize, s: f64) -> Vec<(f64, f64)> {
    let mut out = vec![(0.0, 0.0); nx * ny];
    for v in 0..ny {
        for u in 0..nx {
            let (mut re, mut im) = (0.0, 0.0);
            for y in 0..ny {
                for x in 0..nx {
                    let a =
                        s * 2.0 * PI * ((u * x) as f64 / nx as f64 + (v * y) as f64 / ny as f64);
                    re += data[x + y * nx] * a.cos();
                    im += data[x + y * nx] * a.sin();
                }
            }
            out[u + v * nx] = (re, im);
        }
    }
    out
}

fn close(a: f64, b: f64, scale: f64) -> bool {
    (a - b).abs() <= 1e-9 * scale.max(1.0)
}

fn check_sine<T: Pixel>() {
    let n = 100; // padded to 128
    let (lo, hi) = (T::MIN_F64.max(-100.0), T::MAX_F64.min(100.0));
    let mid = (lo + hi) / 2.0;
    let amp = (hi - lo) / 2.0 * 0.9;
    let data: Vec<T> = (0..n)
        .map(|i| T::from_f64((mid + amp * (2.0 * PI * 7.0 * i as f64 / n as f64).sin()).round()))
        .collect();
    let h = PluginHarness::new(FftPlugin::new());
    let out = h
        .process(NDArray::from_pixels(&h.pool, &[n], &data).unwrap())
        .unwrap();
    let mut padded: Vec<f64> = data.iter().map(|v| v.to_f64()).collect();
    padded.resize(128, 0.0);
    let want = dft(&padded, 128, 1, 1.0);
    let scale = padded.iter().map(|v| v.abs()).sum::<f64>();
    let (re, im, abs) = (
        waveform(&h, "FFTReal"),
        waveform(&h, "FFTImaginary"),
        waveform(&h, "FFTAbsValue"),
    );
    assert_eq!(out[0].sizes(), vec![64]);
    assert_eq!(out[0].data_type, DataType::Float64);
    let frame = out[0].pixels::<f64>().unwrap();
    assert_eq!(waveform(&h, "FFTTimeSeries"), padded);
    for k in 0..64 {
        let (r, i) = want[k];
        let ctx = format!("{} k={k}", T::DATA_TYPE);
        assert!(close(re[k], r, scale), "{ctx}: {} vs {r}", re[k]);
        assert!(close(im[k], i, scale), "{ctx}: {} vs {i}", im[k]);
        let a = (r * r + i * i).sqrt() / 128.0;
        assert!(
            close(abs[k], a, scale) && close(frame[k], a, scale),
            "{ctx}"
        );
    }
}

#[test]
fn one_d_sines_match_a_plain_dft_for_every_type() {
    for dt in DataType::ALL {
        with_pixel_type!(dt, T => check_sine::<T>());
    }
}

#[test]
fn two_d_matches_a_plain_dft() {
    let (w, hgt) = (12, 6); // padded to 16 x 8
    let data: Vec<f64> = (0..w * hgt)
        .map(|i| ((i % w) as f64 * 0.7).sin() + ((i / w) as f64 * 1.3).cos() + 0.1 * i as f64)
        .collect();
    let h = PluginHarness::new(FftPlugin::new());
    let out = h
        .process(NDArray::from_pixels(&h.pool, &[w, hgt], &data).unwrap())
        .unwrap();
    let mut padded = vec![0.0; 16 * 8];
    for y in 0..hgt {
        padded[y * 16..y * 16 + w].copy_from_slice(&data[y * w..(y + 1) * w]);
    }
    let want = dft(&padded, 16, 8, 1.0);
    assert_eq!(out[0].sizes(), vec![8, 4]);
    let frame = out[0].pixels::<f64>().unwrap();
    for v in 0..4 {
        for u in 0..8 {
            let (r, i) = want[u + v * 16];
            let a = (r * r + i * i).sqrt() / 128.0;
            assert!(close(frame[u + v * 8], a, 100.0), "({u},{v})");
        }
    }
    let re = waveform(&h, "FFTReal");
    assert!((0..8).all(|u| close(re[u], want[u].0, 100.0)));
}

#[test]
fn suppress_dc_direction_and_axes() {
    let data: Vec<u16> = (0..16).map(|i| 10 + (i % 4) * 3).collect();
    let h = PluginHarness::new(FftPlugin::new());
    h.put("FFTSuppressDC", 1).unwrap();
    h.put("FFTTimePerPointLink", 0.5).unwrap();
    assert_eq!(h.get_f64("FFTTimePerPoint"), 0.5);
    let f = Arc::new(NDArray::from_pixels(&h.pool, &[16], &data).unwrap());
    let out = h.process_arc(&f).unwrap();
    assert_eq!(out[0].pixels::<f64>().unwrap()[0], 0.0);
    assert_eq!(waveform(&h, "FFTReal")[0], 0.0);
    assert_eq!(waveform(&h, "FFTAbsValue")[0], 0.0);
    let t: Vec<f64> = (0..16).map(|i| i as f64 * 0.5).collect();
    assert_eq!(waveform(&h, "FFTTimeAxis"), t);
    let fa = waveform(&h, "FFTFreqAxis");
    assert_eq!(fa.len(), 8);
    assert!((fa[7] - 1.0).abs() < 1e-12, "Nyquist = 0.5 / 0.5 s");
    // Freq. to time: the other sign, so the imaginary parts flip for a real input.
    let im = waveform(&h, "FFTImaginary");
    h.put("FFTDirection", 1).unwrap();
    h.process_arc(&f).unwrap();
    let im2 = waveform(&h, "FFTImaginary");
    assert!(im.iter().zip(&im2).all(|(a, b)| (a + b).abs() < 1e-12));
    assert!(im.iter().any(|v| v.abs() > 1e-6));
}

#[test]
fn recursive_average_and_reset() {
    let h = PluginHarness::new(FftPlugin::new());
    h.put("FFTNumAverage", 2).unwrap();
    let frame = |v: f64| Arc::new(NDArray::from_pixels(&h.pool, &[8], &[v; 8]).unwrap());
    // A constant frame of value v has |FFT|[0]/8 = v.
    let dc = |h: &PluginHarness<FftPlugin>, f: &Arc<NDArray>| {
        h.process_arc(f).unwrap()[0].pixels::<f64>().unwrap()[0]
    };
    assert_eq!(dc(&h, &frame(4.0)), 4.0);
    assert_eq!(h.get_f64("FFTNumAveraged"), 2.0);
    assert_eq!(dc(&h, &frame(8.0)), 6.0);
    assert_eq!(dc(&h, &frame(2.0)), 4.0);
    assert_eq!(h.get_f64("FFTNumAveraged"), 2.0);
    h.put("FFTResetAverage", 1).unwrap();
    assert_eq!(dc(&h, &frame(10.0)), 10.0);
    assert_eq!(h.get_f64("FFTResetAverage"), 0.0);
}

#[test]
fn unsupported_inputs() {
    let h = PluginHarness::new(FftPlugin::new());
    let three = NDArray::from_pixels(&h.pool, &[2, 2, 2], &[0u8; 8]).unwrap();
    let mut comp = NDArray::from_pixels(&h.pool, &[8], &[0u8; 8]).unwrap();
    comp.codec.name = "zlib".into();
    for f in [three, comp] {
        assert!(matches!(h.process(f), Err(PluginError::Unsupported(_))));
    }
}

#[test]
fn every_template_record_is_served() {
    use ndflow_runtime::port_params::{ARRAY_BASE_PARAMS, PLUGIN_BASE_PARAMS};
    let tables = [ARRAY_BASE_PARAMS, PLUGIN_BASE_PARAMS, FFT_PARAMS];
    common::check_records("NDFFT", &tables, &[""], true);
}
