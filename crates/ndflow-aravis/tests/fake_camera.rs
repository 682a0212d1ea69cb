//! Against `arv-fake-gv-camera-0.8` over real GigE Vision sockets, inside a network namespace
//! this test creates (only `lo` up), so nothing Aravis sends can leave the machine.
//!
//! The test re-runs its own binary inside the namespace with [`CHILD`] set to the scenario;
//! needs root and `ip`, and otherwise prints SKIPPED and returns.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ndflow_aravis::features::{self, FeatureType};
use ndflow_aravis::{Camera, Frame, Stream, StreamOptions};

const CHILD: &str = "NDFLOW_ARAVIS_NETNS_SCENARIO";
const FAKE: &str = "arv-fake-gv-camera-0.8";
const MONO8: u32 = 0x0108_0001;

#[test]
fn fake_gige_camera() {
    match std::env::var(CHILD).as_deref() {
        Ok("clean") => return clean_link(),
        Ok("lossy") => return lossy_link(),
        Ok(other) => panic!("unknown scenario {other:?}"),
        Err(_) => {}
    }
    if let Some(why) = cannot_run() {
        eprintln!("SKIPPED: fake_gige_camera: {why}");
        return;
    }
    let ns = Netns::create(&format!("ndflow-arv-{}", std::process::id()));
    // Each scenario gets a fresh camera: the fake keeps its settings between clients.
    for (scenario, fake_args) in [("clean", &[][..]), ("lossy", &["-r", "10"][..])] {
        let fake = Killed(ns.spawn(FAKE, &[&["-i", "127.0.0.1"], fake_args].concat()));
        let exe = std::env::current_exe().expect("test binary path");
        let status = Command::new("ip")
            .args(["netns", "exec", &ns.name])
            .arg(exe)
            .args([
                "--exact",
                "fake_gige_camera",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, scenario)
            .status()
            .expect("run the test binary in the namespace");
        drop(fake);
        assert!(
            status.success(),
            "scenario {scenario} failed in the namespace: {status}"
        );
    }
}

fn cannot_run() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let root = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2))
        == Some("0");
    if !root {
        return Some("needs root to create a network namespace".into());
    }
    for tool in ["ip", FAKE] {
        let found = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
            .unwrap_or(false);
        if !found {
            return Some(format!("`{tool}` not found (apt: iproute2, aravis-tools)"));
        }
    }
    match Command::new("ip").args(["netns", "list"]).output() {
        Ok(o) if o.status.success() => None,
        _ => Some("`ip netns list` fails here".into()),
    }
}

/// A network namespace with only `lo` up, deleted on drop.
struct Netns {
    name: String,
}

impl Netns {
    fn create(name: &str) -> Netns {
        let ok = |args: &[&str]| {
            let s = Command::new("ip").args(args).status().expect("run ip");
            assert!(s.success(), "ip {args:?}: {s}");
        };
        ok(&["netns", "add", name]);
        let ns = Netns {
            name: name.to_string(),
        };
        ok(&["netns", "exec", name, "ip", "link", "set", "lo", "up"]);
        ns
    }

    fn spawn(&self, program: &str, args: &[&str]) -> Child {
        Command::new("ip")
            .args(["netns", "exec", &self.name, program])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the fake camera")
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// A process we started, killed by its PID when dropped (`ip netns exec` execs the program,
/// so the child is the camera itself).
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Opens 127.0.0.1, waiting for the camera to come up.
fn open() -> Camera {
    let t0 = Instant::now();
    loop {
        match Camera::open("127.0.0.1") {
            Ok(c) => return c,
            Err(e) if t0.elapsed() < Duration::from_secs(10) => {
                eprintln!("waiting for the fake camera: {e}");
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => panic!("{e}"),
        }
    }
}

/// Configures 640×480 Mono8 at a known gain and exposure.
fn setup(cam: &Camera, gain: i64) {
    cam.set_int("Width", 640).unwrap();
    cam.set_int("Height", 480).unwrap();
    cam.set_enum("PixelFormat", "Mono8").unwrap();
    cam.set_int("GainRaw", gain).unwrap();
    cam.set_float("ExposureTimeAbs", 10_000.0).unwrap();
}

/// The fake's ramp: ((x + y + frame_id) mod 255) × (1 + gain + log10(exposure_us / 10⁴)),
/// clamped to 255 and truncated. Checks every pixel; returns how many were saturated.
fn check_pattern(f: &Frame, scale: f64) -> usize {
    let w = f.width as usize;
    let px = f.as_bytes();
    assert_eq!(px.len(), w * f.height as usize, "{f:?}");
    let mut saturated = 0;
    for (y, row) in px.chunks(w).enumerate() {
        for (x, &v) in row.iter().enumerate() {
            let ramp = ((x + y) as u64 + f.frame_id) % 255;
            let want = (ramp as f64 * scale).clamp(0.0, 255.0) as u8;
            assert_eq!(v, want, "pixel ({x},{y}) of {f:?}");
            saturated += usize::from(want == 255);
        }
    }
    saturated
}

fn clean_link() {
    let cam = open();
    assert!(cam.is_gige());
    let (w, h) = (
        cam.get_int("Width").unwrap(),
        cam.get_int("Height").unwrap(),
    );
    let pf = cam.pixel_format_name().unwrap();
    eprintln!(
        "fake camera at start: {w}x{h} {pf} ({:#010x})",
        cam.pixel_format().unwrap()
    );
    assert_eq!((w, h, pf.as_str()), (512, 512, "Mono8"));
    assert_eq!(cam.bounds_int("Width").unwrap(), (1, 2048));
    assert_eq!(
        cam.bounds_float("ExposureTimeAbs").unwrap(),
        (10.0, 10_000_000.0)
    );
    let mut modes = cam.enum_entries("TriggerMode").unwrap();
    modes.sort();
    assert_eq!(modes, ["Off", "On"]);
    assert!(cam.is_available("GainRaw") && cam.is_writable("GainRaw"));
    assert!(!cam.is_writable("SensorWidth"), "read-only");
    assert!(!cam.is_available("Gain"), "the fake has no Gain");
    assert_eq!(cam.get_string("DeviceVendorName").unwrap(), "Aravis");
    let err = cam.get_int("NoSuchFeature").unwrap_err().to_string();
    eprintln!("missing feature error: {err}");
    assert!(err.contains("NoSuchFeature"), "{err}");

    // The feature list from the camera's own XML.
    let list = features::parse(&cam.genicam_xml()).unwrap();
    let kind = |n: &str| list.get(n).unwrap_or_else(|| panic!("{n} not listed")).kind;
    for n in ["Width", "Height", "OffsetX", "GainRaw"] {
        assert_eq!(kind(n), FeatureType::Integer, "{n}");
    }
    assert_eq!(kind("ExposureTimeAbs"), FeatureType::Float);
    assert_eq!(kind("PayloadSize"), FeatureType::Integer);
    let entries = |n: &str| {
        let mut e: Vec<String> = list
            .get(n)
            .unwrap()
            .entries
            .iter()
            .map(|e| e.name.clone())
            .collect();
        e.sort();
        e
    };
    assert_eq!(
        entries("PixelFormat"),
        ["BayerBG8", "BayerGB8", "BayerGR8", "BayerRG8", "Mono16", "Mono8", "RGB8"]
    );
    assert_eq!(entries("TriggerMode"), ["Off", "On"]);
    assert_eq!(entries("TriggerSource"), ["Line0", "Software"]);
    assert_eq!(
        entries("AcquisitionMode"),
        ["Continuous", "MultiFrame", "SingleFrame"]
    );
    assert!(
        list.get("AcquisitionFrameRate").is_none(),
        "outside every category"
    );
    assert_eq!(
        list.get("DeviceManufacturerInfo").unwrap().pv,
        "GC_DevManInfo"
    );
    eprintln!(
        "{} features listed from the fake's XML",
        list.features.len()
    );

    // 10 software-triggered frames: exactly 10 complete.
    setup(&cam, 0);
    cam.set_enum("TriggerSelector", "FrameStart").unwrap();
    cam.set_enum("TriggerMode", "On").unwrap();
    cam.set_enum("TriggerSource", "Software").unwrap();
    let mut s = Stream::open(&cam, StreamOptions { n_buffers: 4 }).unwrap();
    assert_eq!(s.payload(), 640 * 480);
    s.start().unwrap();
    let mut ids = Vec::new();
    for i in 0..10 {
        cam.execute("TriggerSoftware").unwrap();
        let f = s
            .recv(Duration::from_secs(5))
            .unwrap_or_else(|| panic!("no frame for trigger {i}: {:?}", s.statistics()));
        assert_eq!((f.width, f.height, f.pixel_format), (640, 480, MONO8));
        check_pattern(&f, 1.0);
        ids.push(f.frame_id);
    }
    s.stop().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert!(s.try_recv().is_none(), "a frame without a trigger");
    let st = s.statistics();
    eprintln!("triggered: frame ids {ids:?}, {st:?}");
    // Consecutive ids (16-bit, wrapping from 65535 to 1).
    for w in ids.windows(2) {
        assert_eq!(w[1], if w[0] == 65535 { 1 } else { w[0] + 1 }, "{ids:?}");
    }
    assert_eq!(
        (st.completed, st.failures, st.underruns),
        (10, 0, 0),
        "{st:?}"
    );
    assert_eq!((st.missing_packets, st.rejected), (0, 0), "{st:?}");
    drop(s);

    // Free-running with GainRaw 1: the ramp doubles and saturates.
    setup(&cam, 1);
    cam.set_enum("TriggerMode", "Off").unwrap();
    let mut s = Stream::open(&cam, StreamOptions::default()).unwrap();
    s.start().unwrap();
    let f = s
        .recv(Duration::from_secs(5))
        .expect("a free-running frame");
    let saturated = check_pattern(&f, 2.0);
    eprintln!("gain 1: {saturated} of {} pixels saturated", 640 * 480);
    assert!(saturated > 0);
    // Held frames keep their pixels while the camera goes on (zero-copy, no reuse).
    let first = f.as_bytes().to_vec();
    let later: Vec<Frame> = (0..3)
        .filter_map(|_| s.recv(Duration::from_secs(5)))
        .collect();
    assert_eq!(later.len(), 3);
    assert_eq!(f.as_bytes(), &first[..]);
    s.stop().unwrap();
}

fn lossy_link() {
    let cam = open();
    setup(&cam, 0);
    cam.set_enum("TriggerMode", "Off").unwrap();
    let mut s = Stream::open(&cam, StreamOptions { n_buffers: 8 }).unwrap();
    // The fake does not answer resend requests; a short retention fails frames quickly.
    s.set_packet_resend(false).unwrap();
    s.set_packet_timeout(Duration::from_millis(20)).unwrap();
    s.set_frame_retention(Duration::from_millis(100)).unwrap();
    assert_eq!(s.packet_resend(), Some(false));
    assert_eq!(s.packet_timeout(), Some(Duration::from_millis(20)));
    assert_eq!(s.frame_retention(), Some(Duration::from_millis(100)));
    s.start().unwrap();
    let t0 = Instant::now();
    let mut good = 0u64;
    while t0.elapsed() < Duration::from_secs(3) {
        if let Some(f) = s.recv(Duration::from_millis(100)) {
            // Only complete frames are handed out, and they are intact.
            check_pattern(&f, 1.0);
            good += 1;
        }
    }
    s.stop().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    while let Some(f) = s.try_recv() {
        check_pattern(&f, 1.0);
        good += 1;
    }
    let st = s.statistics();
    eprintln!("lossy (-r 10), 3 s: {good} good frames handed out, {st:?}");
    assert!(st.failures > 0, "{st:?}");
    assert!(st.missing_packets > 0, "{st:?}");
    assert_eq!(
        st.completed, good,
        "every completed frame was handed out: {st:?}"
    );
    assert_eq!(
        st.rejected, st.failures,
        "every failed buffer went back: {st:?}"
    );
    assert_eq!(st.resent_packets, 0, "{st:?}");
}
