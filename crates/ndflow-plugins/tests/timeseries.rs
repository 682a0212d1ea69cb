//! NDPluginTimeSeries (Fixed length, Circ. buffer, averaging, 1-D and 2-D inputs, output
//! frame) and the Stats port's 23 TS waveforms, against values computed here by hand.

use std::sync::Arc;

use ndflow_core::{DataType, NDArray, ParamValue, Pixel, Pool};
use ndflow_plugins::stats::{StatsPlugin, TS_STATS};
use ndflow_plugins::timeseries::TimeSeriesPlugin;
use ndflow_runtime::{Plugin, PluginHarness};
use rand::{Rng, SeedableRng};

fn put<P: Plugin>(h: &PluginHarness<P>, name: &str, v: impl Into<ParamValue>) {
    let v = v.into();
    h.put(name, v.clone())
        .unwrap_or_else(|e| panic!("put {name}={v}: {e}"));
}

fn array<P: Plugin>(h: &PluginHarness<P>, name: &str) -> Vec<f64> {
    match h.get(name) {
        ParamValue::Array(a) if a.data_type == DataType::Float64 => a
            .bytes()
            .chunks_exact(8)
            .map(|b| f64::from_ne_bytes(b.try_into().expect("8 bytes")))
            .collect(),
        other => panic!("{name} is not a Float64 array: {other:?}"),
    }
}

fn frame<T: Pixel>(sizes: &[usize], data: &[T], stamp: f64) -> NDArray {
    let mut f = NDArray::from_pixels(&Pool::unlimited(), sizes, data).expect("frame");
    f.time_stamp = stamp;
    f
}

fn pixels<T: Pixel>(f: &Arc<NDArray>) -> Vec<f64> {
    f.pixels::<T>()
        .expect("pixels")
        .iter()
        .map(|v| v.to_f64())
        .collect()
}

#[test]
fn fixed_length_fills_stops_and_emits_the_series() {
    let h = PluginHarness::new(TimeSeriesPlugin::new());
    put(&h, "TSNumPoints", 4);
    put(&h, "TSAcquire", 1);
    assert_eq!(h.get_f64("TSAcquiring"), 1.0);
    // Three signals per input frame, one time point each.
    let mut emitted = Vec::new();
    for k in 0..6 {
        let v = [k as f64, 10.0 * k as f64, -(k as f64)];
        let input = Arc::new(frame(&[3], &v, 1.0 + k as f64));
        emitted.extend(h.process_addressed(&input).expect("process"));
        let want = (k + 1).min(4) as f64;
        assert_eq!(h.get_f64("TSCurrentPoint"), want, "after frame {k}");
    }
    assert_eq!(
        h.get_f64("TSAcquire"),
        0.0,
        "a full Fixed length series stops"
    );
    assert_eq!(h.get_f64("TSAcquiring"), 0.0);
    assert_eq!(array(&h, "1:TimeSeries"), vec![0.0, 1.0, 2.0, 3.0]);
    assert_eq!(array(&h, "2:TimeSeries"), vec![0.0, 10.0, 20.0, 30.0]);
    assert_eq!(array(&h, "3:TimeSeries"), vec![0.0, -1.0, -2.0, -3.0]);
    assert_eq!(array(&h, "TSTimestamp"), vec![1.0, 2.0, 3.0, 4.0]);
    assert_eq!(array(&h, "TSTimeAxis").len(), 4);
    // As ADCore: [NTime, NSignals] (each signal's series contiguous) on address NSignals,
    // then signal s's [NTime] series on address s; one uniqueId for all.
    let mut addresses: Vec<usize> = emitted.iter().map(|(a, _)| *a).collect();
    addresses.sort();
    assert_eq!(addresses, vec![0, 1, 2, 3]);
    let at = |a: usize| &emitted.iter().find(|(x, _)| *x == a).expect("address").1;
    let all = at(3);
    assert_eq!(all.sizes(), vec![4, 3]);
    assert_eq!(all.data_type, DataType::Float64);
    assert_eq!(
        pixels::<f64>(all),
        vec![0.0, 1.0, 2.0, 3.0, 0.0, 10.0, 20.0, 30.0, 0.0, -1.0, -2.0, -3.0]
    );
    let want = [
        vec![0.0, 1.0, 2.0, 3.0],
        vec![0.0, 10.0, 20.0, 30.0],
        vec![0.0, -1.0, -2.0, -3.0],
    ];
    for (s, w) in want.iter().enumerate() {
        let one = at(s);
        assert_eq!(one.sizes(), vec![4], "signal {s}");
        assert_eq!(one.data_type, DataType::Float64);
        assert_eq!(&pixels::<f64>(one), w, "signal {s}");
        assert_eq!(one.unique_id, all.unique_id);
        assert_eq!(one.time_stamp, all.time_stamp);
    }
    assert_eq!(h.plugin.addresses(), 9, "MaxSignals 8: addresses 0..=8");
}

#[test]
fn two_d_inputs_carry_many_time_points() {
    let h = PluginHarness::new(TimeSeriesPlugin::new());
    put(&h, "TSNumPoints", 10);
    put(&h, "TSAcquire", 1);
    // [NSignals = 2, NTime = 4]: dims[0] fastest, so a time point is 2 adjacent values.
    let data: Vec<i32> = vec![1, -1, 2, -2, 3, -3, 4, -4];
    let out = h.process(frame(&[2, 4], &data, 5.0)).expect("process");
    assert!(out.is_empty(), "not full, not read: nothing emitted");
    assert_eq!(h.get_f64("TSCurrentPoint"), 4.0);
    put(&h, "TSRead", "Read");
    assert_eq!(h.get_f64("TSRead"), 0.0);
    assert_eq!(array(&h, "1:TimeSeries"), vec![1.0, 2.0, 3.0, 4.0]);
    assert_eq!(array(&h, "2:TimeSeries"), vec![-1.0, -2.0, -3.0, -4.0]);
    // The frames asked for by Read go out with the next input, in the input's type: two
    // signals, so [10, 2] on address 2, each signal's [10] on its own address.
    let input = Arc::new(frame(&[2, 1], &[5i32, -5], 6.0));
    let mut out = h.process_addressed(&input).expect("process");
    out.sort_by_key(|(a, _)| *a);
    assert_eq!(out.len(), 3);
    let (a, all) = &out[2];
    assert_eq!(*a, 2);
    assert_eq!(all.data_type, DataType::Int32);
    assert_eq!(all.sizes(), vec![10, 2]);
    let px = pixels::<i32>(all);
    assert_eq!(&px[..6], &[1.0, 2.0, 3.0, 4.0, 5.0, 0.0]);
    assert_eq!(&px[10..15], &[-1.0, -2.0, -3.0, -4.0, -5.0]);
    for (s, (a, one)) in out[..2].iter().enumerate() {
        assert_eq!(
            (*a, one.sizes(), one.data_type),
            (s, vec![10], DataType::Int32)
        );
        assert_eq!(pixels::<i32>(one), px[s * 10..(s + 1) * 10].to_vec());
    }
}

#[test]
fn circular_buffer_keeps_the_latest_oldest_first() {
    let h = PluginHarness::new(TimeSeriesPlugin::new());
    put(&h, "TSNumPoints", 4);
    put(&h, "TSAcquireMode", "Circ. buffer");
    put(&h, "TSTimePerPoint", 0.5);
    assert_eq!(array(&h, "TSTimeAxis"), vec![-1.5, -1.0, -0.5, 0.0]);
    put(&h, "TSAcquire", 1);
    for k in 1..=10u8 {
        assert!(h
            .process(frame(&[1], &[k], k as f64))
            .expect("process")
            .is_empty());
    }
    assert_eq!(h.get_f64("TSAcquiring"), 1.0, "Circ. buffer never fills");
    assert_eq!(h.get_f64("TSCurrentPoint"), 2.0);
    put(&h, "TSAcquire", 0);
    assert_eq!(array(&h, "1:TimeSeries"), vec![7.0, 8.0, 9.0, 10.0]);
    assert_eq!(array(&h, "TSTimestamp"), vec![7.0, 8.0, 9.0, 10.0]);
    let out = h.process(frame(&[1], &[99u8], 11.0)).expect("process");
    assert_eq!(pixels::<u8>(&out[0]), vec![7.0, 8.0, 9.0, 10.0]);
}

#[test]
fn averaging_time_sets_num_average() {
    let h = PluginHarness::new(TimeSeriesPlugin::new());
    put(&h, "TSNumPoints", 3);
    put(&h, "TSTimePerPointLink", 0.001);
    assert_eq!(h.get_f64("TSTimePerPoint"), 0.001);
    put(&h, "TSAveragingTime", 0.0041);
    assert_eq!(h.get_f64("TSNumAverage"), 4.0);
    assert!(
        (h.get_f64("TSAveragingTime") - 0.004).abs() < 1e-15,
        "readback is the actual time"
    );
    let axis = array(&h, "TSTimeAxis");
    for (i, t) in axis.iter().enumerate() {
        assert!((t - 0.004 * i as f64).abs() < 1e-15);
    }
    put(&h, "TSAcquire", 1);
    // UInt16: each point is the mean of 4 inputs, stored as UInt16 (truncated).
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let inputs: Vec<u16> = (0..12).map(|_| rng.random_range(0..1000)).collect();
    for v in &inputs {
        h.process(frame(&[1], &[*v], 0.0)).expect("process");
    }
    let want: Vec<f64> = inputs
        .chunks(4)
        .map(|c| (c.iter().map(|&v| v as f64).sum::<f64>() / 4.0).trunc())
        .collect();
    assert_eq!(array(&h, "1:TimeSeries"), want);
    // Float64 keeps the exact mean.
    put(&h, "TSAcquire", 1);
    for v in [1.0, 2.0, 2.0, 2.0, 0.5, 0.5, 0.5, 0.5, 0.0, 0.0, 0.0, 1.0] {
        h.process(frame(&[1], &[v], 0.0)).expect("process");
    }
    assert_eq!(array(&h, "1:TimeSeries"), vec![1.75, 0.5, 0.25]);
}

#[test]
fn signals_are_capped_and_names_kept() {
    let h = PluginHarness::new(TimeSeriesPlugin::with_signals(2));
    assert!(!h.params.to_json().contains_key("3:TimeSeries"));
    put(&h, "1:Name", "I0");
    put(&h, "TSNumPoints", 2);
    put(&h, "TSAcquire", 1);
    for k in 0..2 {
        h.process(frame(&[3], &[k as f32, 1.0, 2.0], 0.0))
            .expect("process");
    }
    assert_eq!(array(&h, "1:TimeSeries"), vec![0.0, 1.0]);
    assert_eq!(array(&h, "2:TimeSeries"), vec![1.0, 1.0]);
    assert_eq!(h.get("1:Name"), ParamValue::Str("I0".into()));
}

#[test]
fn stats_ts_waveforms_collect_n_points() {
    let h = PluginHarness::new(StatsPlugin::new());
    put(&h, "ComputeCentroid", "Yes");
    put(&h, "CentroidThreshold", 0.0);
    put(&h, "TSNumPoints", 4);
    put(&h, "TSControl", "Erase/Start");
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    let mut want: Vec<Vec<f64>> = vec![Vec::new(); TS_STATS.len()];
    for k in 0..6 {
        let data: Vec<u16> = (0..12 * 9).map(|_| rng.random_range(0..4000)).collect();
        h.process(frame(&[12, 9], &data, 50.0 + k as f64))
            .expect("process");
        if k < 4 {
            for (w, name) in want.iter_mut().zip(TS_STATS) {
                // The Sigma readback is Sigma_RBV; the others are Name_RBV.
                w.push(h.get_f64(name));
            }
        }
    }
    assert_eq!(h.get_f64("TSAcquiring"), 0.0);
    assert_eq!(h.get_f64("TSCurrentPoint"), 4.0);
    for (w, name) in want.iter().zip(TS_STATS) {
        assert_eq!(&array(&h, &format!("TS{name}")), w, "TS{name}");
    }
    assert_eq!(array(&h, "TSTimestamp"), vec![50.0, 51.0, 52.0, 53.0]);
    assert!(want[0].iter().all(|v| *v < 100.0), "real minima");
    assert!(
        want[11].iter().all(|v| *v > 3.0 && *v < 8.0),
        "real centroids"
    );
}
