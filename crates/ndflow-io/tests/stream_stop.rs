//! Stopping a Stream (Capture = 0) writes the frames already queued at the port, then closes
//! a valid file (areaDetector drops them, issue #469). Run through a real graph port with a
//! writer held back by a gate so frames pile up in the queue.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::common::{mono8, TempDir};
use ndflow_core::{NDArray, ParamDef, ParamStore};
use ndflow_io::{FileWriterPlugin, Format};
use ndflow_runtime::Graph;

type Gate = Arc<(Mutex<bool>, Condvar)>;

/// One line per frame; `write` waits until the gate is open.
struct Gated {
    file: Option<File>,
    gate: Gate,
}

impl Format for Gated {
    const PLUGIN_TYPE: &'static str = "NDFileGated";
    const PARAMS: &'static [ParamDef] = ndflow_io::ndfile_params!("%s%s_%d.txt");
    const MULTI_FRAME: bool = true;
    fn open(&mut self, path: &Path, _f: &NDArray, _p: &ParamStore) -> io::Result<()> {
        self.file = Some(File::create(path)?);
        Ok(())
    }
    fn write(&mut self, f: &NDArray, _p: &ParamStore) -> io::Result<()> {
        let (lock, cv) = &*self.gate;
        let mut open = lock.lock().unwrap();
        while !*open {
            open = cv.wait(open).unwrap();
        }
        let file = self
            .file
            .as_mut()
            .ok_or_else(|| io::Error::other("not open"))?;
        writeln!(file, "{}", f.unique_id)
    }
    fn close(&mut self, _p: &ParamStore) -> io::Result<()> {
        self.file.take();
        Ok(())
    }
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn capture_off_writes_queued_frames_then_closes() {
    let dir = TempDir::new("stream-stop");
    let gate: Gate = Arc::new((Mutex::new(false), Condvar::new()));
    let g = Arc::new(Graph::new(2));
    let plugin = FileWriterPlugin::with_format(Gated {
        file: None,
        gate: gate.clone(),
    });
    let port = g.add_plugin("FILE1", Arc::new(plugin)).unwrap();
    let put = |k: &str, v: ndflow_core::ParamValue| {
        g.put("FILE1", k, v).unwrap();
    };
    put("FilePath", dir.path().to_string_lossy().as_ref().into());
    put("FileName", "s".into());
    put("FileWriteMode", "Stream".into());
    put("LazyOpen", "Yes".into());
    put("NumCapture", 0.into());
    put("QueueSize", 20.into());
    put("TempSuffix", ".part".into());
    put("Capture", 1.into());
    for u in 1..=5 {
        port.offer(&Arc::new(mono8(u)));
    }
    // Frame 1 is in the writer (held by the gate), 2..5 wait in the queue.
    wait_for("frame 1 in flight", || {
        let a = port.accounting();
        a.in_flight == 1 && a.queued == 4
    });
    // Capture = 0 now; the write returns once the plugin lets go of the frame in hand.
    let stopper = {
        let g = g.clone();
        std::thread::spawn(move || g.put("FILE1", "Capture", 0).map(|_| ()))
    };
    wait_for("Capture = 0", || {
        g.get("FILE1", "Capture").unwrap().as_i64() == Some(0)
    });
    {
        let (lock, cv) = &*gate;
        *lock.lock().unwrap() = true;
        cv.notify_all();
    }
    stopper.join().unwrap().unwrap();
    assert!(g.wait_idle(Duration::from_secs(10)));
    // All five frames queued before the stop are in the file, which is closed (renamed).
    assert_eq!(dir.files(), ["s_0.txt"]);
    let text = std::fs::read_to_string(dir.path().join("s_0.txt")).unwrap();
    assert_eq!(text, "1\n2\n3\n4\n5\n");
    assert_eq!(g.get("FILE1", "NumCaptured").unwrap().as_i64(), Some(5));
    assert_eq!(g.get("FILE1", "WriteStatus").unwrap().as_i64(), Some(0));
    // A frame arriving after the stop belongs to no stream.
    port.offer(&Arc::new(mono8(6)));
    assert!(g.wait_idle(Duration::from_secs(10)));
    assert_eq!(dir.files(), ["s_0.txt"]);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("s_0.txt")).unwrap(),
        text
    );
    g.shutdown();
}

#[test]
fn capture_off_with_an_empty_queue_closes_at_once() {
    let dir = TempDir::new("stream-stop-now");
    let gate: Gate = Arc::new((Mutex::new(true), Condvar::new()));
    let g = Graph::new(1);
    let plugin = FileWriterPlugin::with_format(Gated { file: None, gate });
    let port = g.add_plugin("FILE1", Arc::new(plugin)).unwrap();
    g.put("FILE1", "FilePath", dir.path().to_string_lossy().as_ref())
        .unwrap();
    g.put("FILE1", "FileName", "n").unwrap();
    g.put("FILE1", "FileWriteMode", "Stream").unwrap();
    g.put("FILE1", "LazyOpen", "Yes").unwrap();
    g.put("FILE1", "NumCapture", 0).unwrap();
    g.put("FILE1", "TempSuffix", ".part").unwrap();
    g.put("FILE1", "Capture", 1).unwrap();
    port.offer(&Arc::new(mono8(1)));
    assert!(g.wait_idle(Duration::from_secs(10)));
    assert_eq!(dir.files(), ["n_0.txt.part"], "open while streaming");
    g.put("FILE1", "Capture", 0).unwrap();
    assert_eq!(dir.files(), ["n_0.txt"], "closed by the put itself");
    g.shutdown();
}
