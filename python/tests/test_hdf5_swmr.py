"""SWMR: an h5py reader (swmr=True, libhdf5 2.x) polls a file while ndflow's NDFileHDF5
plugin (libhdf5 1.10) writes it, and sees frames arrive, bit-exactly, before the writer ends;
NDArrayUniqueId grows with the data."""

import time

import h5py
import hdf5plugin  # noqa: F401  (registers the filters for the reader)
import numpy as np
import pytest

from test_hdf5_common import ATTRS, DATA, build_hdf5_write, ramp_frames, write


@pytest.fixture(scope="module")
def exe():
    return build_hdf5_write()


@pytest.mark.parametrize(
    "name,sets,codec",
    [
        ("raw", ["SWMRMode=On", "NumFramesFlush=1"], []),
        ("bslz4", ["SWMRMode=On", "NumFramesFlush=2"], ["Compressor=BSLZ4"]),
    ],
)
def test_reader_sees_frames_while_written(exe, tmp_path, name, sets, codec):
    n = 30
    arr = ramp_frames(np.uint16, n, (48, 64))
    proc = write(exe, tmp_path, name, arr, sets=sets, codec=codec, delay_ms=40, popen=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("OPEN "), line + proc.stderr.read()
        path = line.split(" ", 1)[1].strip()
        seen = []
        with h5py.File(path, "r", libver="latest", swmr=True) as f:
            d = f[DATA]
            uid = f[ATTRS + "/NDArrayUniqueId"]
            deadline = time.monotonic() + 60
            while proc.poll() is None and time.monotonic() < deadline:
                d.refresh()
                uid.refresh()
                k = d.shape[0]
                if k and (not seen or seen[-1] != k):
                    assert d[:k].tobytes() == arr[:k].tobytes(), k
                    ids = uid[...]
                    assert list(ids) == list(range(1, len(ids) + 1))
                    seen.append(k)
                time.sleep(0.01)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
    # Frames were seen in several steps before the writer finished.
    assert len(seen) >= 3 and seen[0] < n, seen
    with h5py.File(path, "r") as f:
        assert f[DATA][...].tobytes() == arr.tobytes()
        assert f[ATTRS + "/NDArrayUniqueId"].shape == (n,)
