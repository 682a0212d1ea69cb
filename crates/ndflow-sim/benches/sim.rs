//! Frame generation time of the simulator: 1024×1024, UInt8 and UInt16, each mode, full
//! readout (the one-pass path) plus one binned region (the scratch + convert path).

use criterion::{criterion_group, criterion_main, Criterion};
use ndflow_core::{ParamStore, ParamValue, Pool};
use ndflow_runtime::port_params::{ARRAY_BASE_PARAMS, DRIVER_PARAMS};
use ndflow_runtime::Driver;
use ndflow_sim::{SimDetector, SIM_PARAMS};

fn setup(settings: &[(&str, ParamValue)]) -> (SimDetector, ParamStore, Pool) {
    let store = ParamStore::new(&[ARRAY_BASE_PARAMS, DRIVER_PARAMS, SIM_PARAMS]);
    let mut det = SimDetector::new(1024, 1024);
    det.init(&store).expect("init");
    for (name, v) in settings {
        store.put(name, v.clone()).expect("put");
    }
    (det, store, Pool::unlimited())
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("sim_1024x1024");
    for dt in ["UInt8", "UInt16"] {
        for mode in ["LinearRamp", "Peaks", "Sine", "Offset&Noise"] {
            let mut settings = vec![("DataType", dt.into()), ("SimMode", mode.into())];
            if mode == "Offset&Noise" {
                settings.push(("Offset", 10.0.into()));
                settings.push(("Noise", 20.0.into()));
            }
            let (mut det, store, pool) = setup(&settings);
            g.bench_function(format!("{dt}/{mode}"), |b| {
                b.iter(|| det.acquire(&store, &pool).expect("frame"))
            });
        }
        let settings = [
            ("DataType", dt.into()),
            ("MinX", 100.into()),
            ("SizeX", 800.into()),
            ("BinX", 2.into()),
            ("BinY", 2.into()),
        ];
        let (mut det, store, pool) = setup(&settings);
        g.bench_function(format!("{dt}/LinearRamp_roi800_bin2"), |b| {
            b.iter(|| det.acquire(&store, &pool).expect("frame"))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
