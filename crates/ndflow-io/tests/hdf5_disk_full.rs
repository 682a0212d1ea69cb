//! A file size limit hit mid-stream: a child process (this test binary again) streams 1 MiB
//! frames under `ulimit -f` with SIGXFSZ ignored, so writes past the limit fail with EFBIG as
//! on a full disk. The space reservation refuses the frame before HDF5 sees it: WriteStatus =
//! WriteError, every later frame of the stream counted in FramesNotWritten, and the file holds
//! exactly the frames written, readable. No root needed.
//!
//! Alone in its test binary on purpose: HDF5 opens files without O_CLOEXEC, so a child forked
//! while another test has an HDF5 file open would inherit that file's lock.

mod common;

use std::process::Command;

use common::{frame, read_all, shape, TempDir};
use ndflow_core::NDArray;
use ndflow_io::hdf5::{ATTR_GROUP, DATA_PATH};

fn u16_frame(w: usize, h: usize, uid: i32) -> NDArray {
    let px: Vec<u16> = (0..w * h).map(|i| (i as i32 * 3 + uid) as u16).collect();
    frame(&[w, h], &px, uid)
}

/// Runs in a child process limited by `ulimit -f` (see the test below): streams 40 frames of
/// 1 MiB, printing the counters.
#[test]
fn disk_full_child() {
    let Ok(dir) = std::env::var("NDFLOW_DISK_FULL_DIR") else {
        return;
    };
    let h = ndflow_runtime::PluginHarness::new(ndflow_io::Hdf5FilePlugin::new());
    h.put("FilePath", dir.as_str()).unwrap();
    h.put("FileName", "full").unwrap();
    h.put("FileTemplate", "%s%s_%d.h5").unwrap();
    h.put("FileWriteMode", "Stream").unwrap();
    h.put("LazyOpen", "Yes").unwrap();
    h.put("NumCapture", 0).unwrap();
    h.put("Capture", 1).unwrap();
    let mut failed = 0;
    for u in 1..=40 {
        if let Err(e) = h.process(u16_frame(1024, 512, u)) {
            if failed == 0 {
                println!("FIRST {e}");
            }
            failed += 1;
        }
    }
    h.put("Capture", 0).unwrap();
    println!(
        "RESULT failed={failed} not_written={} status={} captured={} message={}",
        h.get_f64("FramesNotWritten"),
        h.get_f64("WriteStatus"),
        h.get_f64("NumCaptured"),
        h.get("WriteMessage")
    );
}

#[test]
fn file_size_limit_mid_stream_leaves_a_readable_file() {
    let dir = TempDir::new("h5-full");
    let exe = std::env::current_exe().unwrap();
    // SIGXFSZ ignored (inherited through exec): writes past the limit fail with EFBIG.
    let out = Command::new("sh")
        .arg("-c")
        .arg("trap '' XFSZ; ulimit -f 32768 && exec \"$0\" --exact disk_full_child --nocapture --test-threads 1")
        .arg(&exe)
        .env("NDFLOW_DISK_FULL_DIR", dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find(|l| l.starts_with("RESULT"))
        .unwrap_or_else(|| panic!("no result: {stdout}"));
    let field = |k: &str| -> f64 {
        line.split(' ')
            .find_map(|w| w.strip_prefix(&format!("{k}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    };
    let written = field("captured") as usize;
    assert!((3..40).contains(&written), "{line}");
    assert_eq!(field("failed") as usize, 40 - written, "{line}");
    assert_eq!(field("not_written") as usize, 40 - written, "{line}");
    assert_eq!(field("status"), 1.0, "{line}");
    assert!(line.contains("File too large"), "{line}");
    // The file holds exactly the frames written, readable, nothing reserved left over.
    let path = dir.path().join("full_0.h5");
    assert_eq!(shape(&path, DATA_PATH), [written, 512, 1024]);
    let data: Vec<u16> = read_all(&path, DATA_PATH);
    for u in 1..=written {
        let want = u16_frame(1024, 512, u as i32);
        let got = &data[(u - 1) * 1024 * 512..u * 1024 * 512];
        assert_eq!(got, want.pixels::<u16>().unwrap(), "frame {u}");
    }
    let ids: Vec<i32> = read_all(&path, &format!("{ATTR_GROUP}/NDArrayUniqueId"));
    assert_eq!(ids, (1..=written as i32).collect::<Vec<_>>());
    let size = std::fs::metadata(&path).unwrap().len() as usize;
    assert!(
        size < (written + 1) * 1024 * 1024 + (1 << 20),
        "{size} bytes"
    );
}
