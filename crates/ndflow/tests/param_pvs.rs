//! Parameters as PVs without a network: names, types, PUT through the graph's validation,
//! and monitors fed at a bounded rate however fast a value changes.

use std::sync::Arc;
use std::time::Instant;

use ndflow::config::Config;
use ndflow::pva::{ImagePvs, PvaProvider};
use ndflow::pvdir::{PvDirectory, POST_INTERVAL};
use ndflow_pva::server::ChannelProvider;
use ndflow_pva::Value;
use ndflow_runtime::Graph;

const CFG: &str = r#"prefix = "R:"
[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = 16
MaxSizeY = 8
"#;

fn setup() -> (Arc<Graph>, Arc<PvaProvider>, ndflow::pvdir::Publisher) {
    let cfg = Config::parse(CFG, "t.toml").unwrap();
    let g = Arc::new(Graph::new(1));
    let images = Arc::new(ImagePvs::default());
    cfg.build(&g, &images).unwrap();
    let dir =
        PvDirectory::build(&g, &cfg.prefix, &cfg.port_prefixes(), Default::default()).unwrap();
    let pvs = PvaProvider::new(&dir, images).unwrap();
    let publisher = dir.start_publisher().unwrap();
    (g, pvs, publisher)
}

fn value_of(pv: &ndflow_pva::server::SharedPv) -> Value {
    let desc = pv.desc();
    pv.current().field(&desc, "value").unwrap().clone()
}

#[test]
fn fast_changes_are_posted_at_a_bounded_rate_and_the_last_value_wins() {
    let (g, pvs, _publisher) = setup();
    let pv = pvs.lookup("R:cam1:NumImages_RBV").unwrap();
    let store = g.port("SIM1").unwrap().params().clone();
    let idx = store.index("NumImages").unwrap();
    let posts0 = pv.posts();
    let t0 = Instant::now();
    for i in 1..=20_000i64 {
        store.set(idx, i).unwrap();
    }
    let elapsed = t0.elapsed();
    std::thread::sleep(POST_INTERVAL * 5);
    let posts = pv.posts() - posts0;
    let bound = (elapsed.as_secs_f64() / POST_INTERVAL.as_secs_f64()).ceil() as u64 + 3;
    assert!(
        posts >= 1 && posts <= bound,
        "{posts} posts for 20,000 changes in {elapsed:?}"
    );
    assert_eq!(value_of(&pv), Value::I32(20_000));
    g.shutdown();
}

#[test]
fn put_is_validated_by_the_graph_and_refusals_change_nothing() {
    let (g, pvs, _publisher) = setup();
    let pv = pvs.lookup("R:cam1:SizeX").unwrap();
    let desc = pv.desc();
    let mut v = pv.current();
    *v.field_mut(&desc, "value").unwrap() = Value::I32(-4);
    let store = g.port("SIM1").unwrap().params().clone();
    let def = store.def(store.index("SizeX").unwrap()).unwrap();
    // What the PV's PUT handler does: the PV value as a parameter value, then Graph::put.
    let put = ndflow::pva::param_pvs::from_value(def, &v).unwrap();
    let err = g.put("SIM1", "SizeX", put).unwrap_err().to_string();
    assert!(err.contains("SizeX") && err.contains("-4"), "{err}");
    assert_eq!(
        g.get("SIM1", "SizeX").unwrap(),
        ndflow_core::ParamValue::Int(16)
    );
    // Read-only readbacks have no PUT handler; writable PVs and enums are NT types.
    assert!(pvs.lookup("R:cam1:ArrayCounter_RBV").is_some());
    assert!(pvs
        .lookup("R:cam1:ImageMode")
        .unwrap()
        .desc()
        .type_id()
        .contains("NTEnum"));
    assert!(pvs
        .lookup("R:cam1:AcquireTime")
        .unwrap()
        .desc()
        .type_id()
        .contains("NTScalar"));
    g.shutdown();
}
