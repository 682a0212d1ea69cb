//! The `aravis` driver through a Graph, against Aravis' in-process fake camera (no socket,
//! no discovery): settings reach the camera, Multiple stops after NumImages, pixels follow
//! the fake's pattern, the stream's counters are published.

use std::time::{Duration, Instant};

use ndflow_aravis::control::Source;
use ndflow_aravis::driver::AravisDriver;
use ndflow_aravis::port::describe;
use ndflow_core::ParamValue;
use ndflow_runtime::Graph;

fn wait_for(g: &Graph, param: &str, ok: impl Fn(&ParamValue) -> bool) -> ParamValue {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v = g.get("CAM", param).unwrap();
        if ok(&v) || Instant::now() > deadline {
            return v;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn multiple_acquisition_from_the_in_process_fake() {
    let source = Source::Fake("NDFLOWDRV".into());
    let description = describe(&source, None).unwrap();
    assert!(
        description.from.contains("fake:NDFLOWDRV"),
        "{}",
        description.from
    );
    let pf = description
        .menus
        .iter()
        .find(|(n, _)| *n == "PixelFormat")
        .map(|(_, e)| e.clone())
        .unwrap_or_default();
    assert!(pf.iter().any(|e| e == "Mono16"), "{pf:?}");
    let g = Graph::new(1);
    g.add_driver("CAM", Box::new(AravisDriver::new(source, 4, description)))
        .unwrap();
    let c = wait_for(&g, "ARConnectCamera", |v| v.as_i64() == Some(1));
    assert_eq!(c.as_i64(), Some(1), "{:?}", g.get("CAM", "StatusMessage"));
    g.put("CAM", "SizeX", 64).unwrap();
    g.put("CAM", "SizeY", 48).unwrap();
    g.put("CAM", "AcquirePeriod", 0.01).unwrap();
    g.put("CAM", "ImageMode", "Multiple").unwrap();
    g.put("CAM", "NumImages", 5).unwrap();
    g.put("CAM", "GainAuto", 0).unwrap();
    let fr = wait_for(&g, "FrameRate", |v| {
        v.as_f64().is_some_and(|f| (f - 100.0).abs() < 1e-6)
    });
    assert_eq!(
        fr.as_f64(),
        Some(100.0),
        "{:?}",
        g.get("CAM", "StatusMessage")
    );
    assert_eq!(
        wait_for(&g, "SizeX", |v| v.as_i64() == Some(64)).as_i64(),
        Some(64)
    );
    g.put("CAM", "Acquire", 1).unwrap();
    let n = wait_for(&g, "ArrayCounter", |v| v.as_i64() == Some(5));
    assert_eq!(n.as_i64(), Some(5));
    let acq = wait_for(&g, "Acquire", |v| v.as_i64() == Some(0));
    assert_eq!(acq.as_i64(), Some(0), "Multiple ends by itself");
    let done = wait_for(&g, "ARFramesCompleted", |v| {
        v.as_f64().is_some_and(|f| f >= 5.0)
    });
    assert!(done.as_f64().is_some_and(|f| f >= 5.0), "{done:?}");
    assert_eq!(g.get("CAM", "ArraySizeX").unwrap().as_i64(), Some(64));

    // The camera's own features: GC_Width follows SizeX, and a GC_ put reaches the camera
    // and shows in the ADBase record that maps the same feature.
    assert_eq!(
        wait_for(&g, "GC_Width", |v| v.as_i64() == Some(64)).as_i64(),
        Some(64)
    );
    g.put("CAM", "GC_Width", 32).unwrap();
    assert_eq!(
        wait_for(&g, "SizeX", |v| v.as_i64() == Some(32)).as_i64(),
        Some(32),
        "{:?}",
        g.get("CAM", "StatusMessage")
    );
    // A value the camera refuses: the reason names the record, the readback keeps the
    // camera's value.
    g.put("CAM", "GC_Width", 100_000).unwrap();
    let msg = wait_for(&g, "StatusMessage", |v| v.to_string().contains("GC_Width"));
    assert!(msg.to_string().contains("GC_Width"), "{msg:?}");
    assert_eq!(
        wait_for(&g, "GC_Width", |v| v.as_i64() == Some(32)).as_i64(),
        Some(32)
    );
    g.put("CAM", "SizeX", 64).unwrap();
    wait_for(&g, "GC_Width", |v| v.as_i64() == Some(64));
    // Mono16 through the camera-filled menu.
    let mono16 = pf.iter().position(|e| e == "Mono16").unwrap();
    g.put("CAM", "PixelFormat", mono16 as i64).unwrap();
    g.put("CAM", "Acquire", 1).unwrap();
    wait_for(&g, "ArrayCounter", |v| v.as_i64() == Some(10));
    assert_eq!(g.get("CAM", "ArrayCounter").unwrap().as_i64(), Some(10));
    assert_eq!(
        g.get("CAM", "DataType").unwrap().as_i64(),
        Some(3),
        "UInt16"
    );

    assert_eq!(
        wait_for(&g, "Acquire", |v| v.as_i64() == Some(0)).as_i64(),
        Some(0)
    );

    // Single: one frame, then the acquisition ends by itself.
    let n0 = g.get("CAM", "ArrayCounter").unwrap().as_i64().unwrap();
    g.put("CAM", "ImageMode", "Single").unwrap();
    g.put("CAM", "Acquire", 1).unwrap();
    assert_eq!(
        wait_for(&g, "Acquire", |v| v.as_i64() == Some(0)).as_i64(),
        Some(0),
        "Single ends by itself"
    );
    assert_eq!(g.get("CAM", "ArrayCounter").unwrap().as_i64(), Some(n0 + 1));

    // RGB8 and Bayer: their NDArray layouts. Binning reaches the camera (the fake's image
    // keeps Width × Height whatever the binning, so only the feature is checked).
    let count = |g: &Graph| g.get("CAM", "ArrayCounter").unwrap().as_i64().unwrap();
    for (format, color_mode, dims) in [("RGB8", 2i64, [3i64, 64, 48]), ("BayerRG8", 1, [64, 48, 0])]
    {
        let i = pf.iter().position(|e| e == format).unwrap();
        g.put("CAM", "PixelFormat", i as i64).unwrap();
        let bin = if format == "BayerRG8" { 2 } else { 1 };
        g.put("CAM", "BinX", bin).unwrap();
        g.put("CAM", "BinY", bin).unwrap();
        g.put("CAM", "ImageMode", "Multiple").unwrap();
        g.put("CAM", "NumImages", 2).unwrap();
        let n0 = count(&g);
        g.put("CAM", "Acquire", 1).unwrap();
        wait_for(&g, "ArrayCounter", |v| v.as_i64() == Some(n0 + 2));
        wait_for(&g, "Acquire", |v| v.as_i64() == Some(0));
        assert_eq!(count(&g), n0 + 2, "{format}");
        assert_eq!(
            g.get("CAM", "ColorMode").unwrap().as_i64(),
            Some(color_mode),
            "{format}: {:?}",
            g.get("CAM", "StatusMessage")
        );
        let size = |k: &str| g.get("CAM", k).unwrap().as_i64().unwrap();
        let got = [size("ArraySize0"), size("ArraySize1"), size("ArraySize2")];
        assert_eq!(got, dims, "{format}");
        assert_eq!(size("BinX"), bin, "{format}");
        assert_eq!(size("GC_BinningHorizontal"), bin, "{format}");
    }
}
