"""A full disk while streaming HDF5, without root: the writer runs with RLIMIT_FSIZE set (and
SIGXFSZ ignored, both through preexec_fn) so writes past the limit fail with EFBIG as they
would with ENOSPC. The writer must report WriteStatus = WriteError, count the frames it could
not write, keep running, and leave a file that h5py reads with every frame written before.

Two writers: ndflow-io's `hdf5_write` example (always), and the ndflow binary with a
`type = "hdf5"` port fed by the simulator."""

import json
import resource
import signal
import subprocess

import h5py
import numpy as np

from test_hdf5_common import ATTRS, DATA, build_hdf5_write, ramp_frames

LIMIT = 16 * 1024 * 1024


def limited():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


def check_file(path, written, expect=None):
    with h5py.File(path, "r") as f:
        assert f[DATA].shape[0] == written
        ids = f[ATTRS + "/NDArrayUniqueId"][...]
        assert list(ids) == list(range(1, written + 1))
        if expect is not None:
            assert f[DATA][...].tobytes() == expect[:written].tobytes()
        return f[DATA][...]


def test_example_writer_hits_the_file_size_limit(tmp_path):
    exe = build_hdf5_write()
    n = 40
    arr = ramp_frames(np.uint16, n, (512, 1024))  # 1 MiB per frame
    raw = tmp_path / "frames.bin"
    arr.tofile(raw)
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.run(
        [
            str(exe), "--dtype", "UInt16", "--dims", "1024,512", "--raw", str(raw),
            "--frames", str(n), "--out", str(out), "--name", "full",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limited,
    )
    assert proc.returncode == 0, proc.stderr
    status = next(line for line in proc.stdout.splitlines() if line.startswith("STATUS"))
    fields = dict(w.split("=", 1) for w in status.split(" ")[1:5])
    written = int(float(fields["captured"]))
    assert 3 <= written < n, status
    assert int(float(fields["not_written"])) == n - written, status
    assert fields["status"] == "1", status
    assert "File too large" in status, status
    check_file(out / "full.h5", written, arr)
    assert (out / "full.h5").stat().st_size < LIMIT


def test_ndflow_binary_keeps_running_when_the_disk_is_full(ndflow_bin, tmp_path):
    out = tmp_path / "data"
    cfg = tmp_path / "full.toml"
    summary = tmp_path / "summary.json"
    n = 30
    cfg.write_text(
        f"""
[[port]]
name = "SIM1"
prefix = "cam1:"
type = "sim"
MaxSizeX = 512
MaxSizeY = 512
DataType = "UInt32"
ImageMode = "Multiple"
NumImages = {n}
AcquireTime = 0.0
AcquirePeriod = 0.01
Acquire = 1

[[port]]
name = "HDF1"
prefix = "HDF1:"
type = "hdf5"
NDArrayPort = "SIM1"
QueueSize = {n}
BlockingCallbacks = "Yes"
FilePath = "{out}"
CreateDirectory = -1
FileName = "full"
FileTemplate = "%s%s.h5"
FileWriteMode = "Stream"
LazyOpen = "Yes"
NumCapture = {n}
Capture = 1
"""
    )
    proc = subprocess.run(
        [str(ndflow_bin), "run", str(cfg), "--until-idle", "--quiet", "--summary", str(summary)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limited,
    )
    assert proc.returncode == 0, proc.stderr
    ports = json.loads(summary.read_text())["ports"]
    hdf, sim = ports["HDF1"], ports["SIM1"]
    written = hdf["NumCaptured_RBV"]
    assert 3 <= written < n, hdf
    assert hdf["WriteStatus"] == "Write error", hdf
    assert hdf["FramesNotWritten_RBV"] == n - written, hdf
    assert "File too large" in hdf["WriteMessage"], hdf
    assert sim["ArrayCounter_RBV"] == n, "the pipeline kept running"
    data = check_file(out / "full.h5", written)
    # The simulator's LinearRamp with unit gains: frame k holds x + y + (k - 1).
    y, x = np.mgrid[0:512, 0:512]
    for k in range(written):
        assert np.array_equal(data[k], (x + y + k).astype(np.uint32)), k
