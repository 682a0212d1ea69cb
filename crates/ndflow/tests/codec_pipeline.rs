//! Compression in the pipeline: a multi-threaded Codec plugin with sorted output, a plugin
//! that cannot take compressed frames counting them as dropped, and a round trip that gives
//! downstream statistics identical to the uncompressed path.

use std::time::Duration;

use ndflow::config::Config;
use ndflow_runtime::{DropReason, Graph};

const PIPE: &str = r#"
[[port]]
name = "SIM1"
type = "sim"
MaxSizeX = 256
MaxSizeY = 128
DataType = "UInt16"
SimMode = "Peaks"
PeakNumX = 3
PeakNumY = 2
PeakStepX = 80
PeakStepY = 60
PeakWidthX = 8
PeakWidthY = 8
Gain = 500.0
Noise = 20.0
ImageMode = "Multiple"
NumImages = 300
AcquireTime = 0.0
AcquirePeriod = 0.0

[[port]]
name = "CODEC1"
type = "codec"
NDArrayPort = "SIM1"
Compressor = "BSLZ4"
NumThreads = 2
SortMode = "Sorted"
SortSize = 1000
QueueSize = 1000

[[port]]
name = "ROI1"
type = "roi"
NDArrayPort = "CODEC1"
QueueSize = 1000

[[port]]
name = "CODEC2"
type = "codec"
NDArrayPort = "CODEC1"
Mode = "Decompress"
QueueSize = 1000

[[port]]
name = "STATS_RT"
type = "stats"
NDArrayPort = "CODEC2"
QueueSize = 1000

[[port]]
name = "STATS_RAW"
type = "stats"
NDArrayPort = "SIM1"
QueueSize = 1000
"#;

#[test]
fn compressed_frames_flow_sorted_and_round_trip() {
    let cfg = Config::parse(PIPE, "pipe.toml").unwrap();
    let g = Graph::new(2);
    cfg.build(&g, &ndflow::pva::ImagePvs::default()).unwrap();
    g.put("SIM1", "Acquire", 1).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    assert!(g.wait_idle(Duration::from_secs(60)));
    let s = g.summary();
    let p = &s["ports"];
    assert_eq!(p["SIM1"]["ArrayCounter_RBV"], 300);
    for name in ["CODEC1", "CODEC2", "STATS_RT", "STATS_RAW"] {
        let a = g.plugin(name).unwrap().accounting();
        assert_eq!((a.processed, a.dropped_total()), (300, 0), "{name}");
    }
    assert_eq!(g.plugin("CODEC1").unwrap().disordered(), 0, "sorted output");
    assert!(p["CODEC1"]["CompFactor_RBV"].as_f64().unwrap() > 1.5);
    assert_eq!(p["CODEC1"]["Codec_RBV"], "bslz4");
    // ROI cannot take compressed frames: each one is counted, with its reason.
    let roi = g.plugin("ROI1").unwrap().accounting();
    assert_eq!(roi.dropped(DropReason::Unsupported), 300);
    assert_eq!(p["ROI1"]["DroppedArrays_RBV"], 300);
    // The round trip is bit-exact: the statistics of the last frame agree to the last bit.
    for key in [
        "MeanValue_RBV",
        "Total_RBV",
        "MinValue_RBV",
        "MaxValue_RBV",
        "Sigma_RBV",
    ] {
        assert_eq!(p["STATS_RT"][key], p["STATS_RAW"][key], "{key}");
    }
    assert_eq!(p["STATS_RT"]["UniqueId_RBV"], 300);
}
