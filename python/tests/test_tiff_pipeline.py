"""sim → TIFF writer through the real binary: Stream mode writes one file per frame, named by
the template, and tifffile reads back the simulator's ramp bit-exactly with its uniqueId."""

import subprocess

import numpy as np
import tifffile


def test_stream_of_tiff_files(ndflow_bin, tmp_path):
    out = tmp_path / "data"
    cfg = tmp_path / "tiff.toml"
    cfg.write_text(
        f"""
[[port]]
name = "SIM1"
type = "sim"
MaxSizeX = 64
MaxSizeY = 32
DataType = "UInt16"
ImageMode = "Multiple"
NumImages = 5
AcquireTime = 0.0
AcquirePeriod = 0.002
Acquire = 1

[[port]]
name = "TIFF1"
type = "tiff"
NDArrayPort = "SIM1"
QueueSize = 20
FilePath = "{out}"
CreateDirectory = -1
FileName = "ramp"
FileNumber = 1
AutoIncrement = "Yes"
FileTemplate = "%s%s_%3.3d.tif"
FileWriteMode = "Stream"
NumCapture = 5
Capture = 1
"""
    )
    proc = subprocess.run(
        [str(ndflow_bin), "run", str(cfg), "--until-idle", "--quiet"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    files = sorted(out.glob("ramp_*.tif"))
    assert [f.name for f in files] == [f"ramp_{i:03d}.tif" for i in range(1, 6)]
    y, x = np.mgrid[0:32, 0:64]
    for k, f in enumerate(files, start=1):
        with tifffile.TiffFile(f) as t:
            page = t.pages[0]
            img = page.asarray()
            assert img.dtype == np.uint16 and img.shape == (32, 64)
            # LinearRamp with unit gains: frame k holds x + y + (k - 1).
            assert np.array_equal(img, (x + y + k - 1).astype(np.uint16)), f.name
            assert page.tags[65001].value == k  # uniqueId
            assert page.tags[65000].value > 1e8  # timeStamp, EPICS epoch
