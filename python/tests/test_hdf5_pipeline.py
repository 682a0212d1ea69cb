"""sim -> Codec (BSLZ4) -> HDF5 through the real binary: the writer follows the codec of the
first frame, stores each compressed frame as it came (direct chunk write: the 12-byte header
and the bitshuffle stream the C library decodes), and h5py + hdf5plugin read back the
simulator's ramp bit-exactly with its uniqueIds. Skipped while the binary has no
`type = "hdf5"` port."""

import json
import subprocess

import bitshuffle
import h5py
import hdf5plugin  # noqa: F401  (registers the filters)
import numpy as np

from test_hdf5_common import ATTRS, DATA, LINK


def test_sim_codec_hdf5(ndflow_bin, tmp_path):
    out = tmp_path / "data"
    cfg = tmp_path / "h5.toml"
    summary = tmp_path / "summary.json"
    n = 20
    cfg.write_text(
        f"""
[[port]]
name = "SIM1"
prefix = "cam1:"
type = "sim"
MaxSizeX = 256
MaxSizeY = 128
DataType = "UInt32"
ImageMode = "Multiple"
NumImages = {n}
AcquireTime = 0.0
AcquirePeriod = 0.005
Acquire = 1

[[port]]
name = "CODEC1"
prefix = "Codec1:"
type = "codec"
NDArrayPort = "SIM1"
QueueSize = {n}
Compressor = "BSLZ4"

[[port]]
name = "HDF1"
prefix = "HDF1:"
type = "hdf5"
NDArrayPort = "CODEC1"
QueueSize = {n}
FilePath = "{out}"
CreateDirectory = -1
FileName = "sim"
FileTemplate = "%s%s_%3.3d.h5"
FileNumber = 1
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
    )
    assert proc.returncode == 0, proc.stderr
    hdf = json.loads(summary.read_text())["ports"]["HDF1"]
    assert hdf["WriteStatus"] == "Write OK", hdf
    assert hdf["NumCaptured_RBV"] == n
    assert hdf["Compression_RBV"] == "BSLZ4", "follows the first frame's codec"
    y, x = np.mgrid[0:128, 0:256]
    with h5py.File(out / "sim_001.h5", "r") as f:
        d = f[DATA]
        assert d.shape == (n, 128, 256) and d.dtype == np.uint32
        assert "32008" in d._filters
        assert list(f[ATTRS + "/NDArrayUniqueId"][...]) == list(range(1, n + 1))
        data = f[LINK][...]
        for k in range(n):
            # LinearRamp with unit gains: frame k holds x + y + k.
            assert np.array_equal(data[k], (x + y + k).astype(np.uint32)), k
            mask, chunk = d.id.read_direct_chunk((k, 0, 0))
            assert mask == 0 and int.from_bytes(chunk[:8], "big") == 128 * 256 * 4
            back = bitshuffle.decompress_lz4(np.frombuffer(chunk[12:], np.uint8), (128, 256), np.dtype(np.uint32))
            assert np.array_equal(back, data[k])
