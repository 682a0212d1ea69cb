"""Shared helpers of the HDF5 interop tests (no tests here): build and run ndflow-io's
`hdf5_write` example (frames from a raw file through the real NDFileHDF5 plugin, optionally
pre-compressed by the Codec plugin), and test data for the ten types. The example comes from
rust_examples.py."""

import pathlib
import subprocess

import numpy as np
from ndtypes import ND_TYPES
from rust_examples import example_bin

ROOT = pathlib.Path(__file__).resolve().parents[2]

TYPES = ND_TYPES

DATA = "/entry/instrument/detector/data"
LINK = "/entry/data/data"
ATTRS = "/entry/instrument/NDAttributes"


def build_hdf5_write():
    return example_bin("hdf5_write")


def frames(dtype, n, shape, seed=1234):
    """`n` frames of `shape` (C order, slowest first) with the type's extremes."""
    rng = np.random.default_rng(seed)
    size = n * int(np.prod(shape))
    if np.issubdtype(dtype, np.floating):
        a = rng.normal(0, 1e3, size).astype(dtype)
        a[:4] = [np.finfo(dtype).max, np.finfo(dtype).tiny, -0.0, np.inf]
    else:
        info = np.iinfo(dtype)
        a = rng.integers(info.min, info.max, size, dtype=dtype, endpoint=True)
        a[:2] = [info.min, info.max]
    return a.reshape((n,) + tuple(shape))


def ramp_frames(dtype, n, shape):
    """Compressible detector-like frames (what compression tests want)."""
    y, x = np.mgrid[0 : shape[0], 0 : shape[1]]
    out = np.stack([(x + y * 3 + k * 7) % 251 for k in range(n)]).astype(dtype)
    out.reshape(-1)[::17] = 200
    return out


def write(exe, tmp_path, name, arr, sets=(), codec=(), color="Mono", delay_ms=0, popen=False):
    """Writes `arr` ([n, ...] in C order) as one stream; returns the path (or the Popen)."""
    raw = tmp_path / f"{name}.bin"
    arr.tofile(raw)
    dims = ",".join(str(d) for d in reversed(arr.shape[1:]))
    dtype = next(k for k, v in TYPES.items() if np.dtype(v) == arr.dtype)
    cmd = [
        str(exe),
        "--dtype", dtype,
        "--dims", dims,
        "--raw", str(raw),
        "--frames", str(arr.shape[0]),
        "--out", str(tmp_path),
        "--name", name,
        "--color", color,
        "--delay-ms", str(delay_ms),
    ]
    for s in sets:
        cmd += ["--set", s]
    for s in codec:
        cmd += ["--codec-set", s]
    if popen:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "status=0" in proc.stdout, proc.stdout
    return tmp_path / f"{name}.h5"
