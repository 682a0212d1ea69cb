"""pvadriver: frames from an NTNDArray PV enter the pipeline with their pixels, dims, uniqueId,
attributes and codec.

- a p4p (pvxs) server publishes frames → ndflow pvadriver → TIFF files, read back by tifffile;
- ndflow → ndflow in one IOC (sim → pva Lossless → pvadriver Lossless): 10,000 frames, none lost.

Loopback only (netenv.py, with per-test free ports).
"""

import time

import numpy as np
import tifffile
from p4p.nt import NTNDArray
from p4p.server import Server
from p4p.server.thread import SharedPV
from pva_util import NdflowIoc as Ioc
from pva_util import enum_index

def test_p4p_server_to_pvadriver_to_tiff(ndflow_bin, tmp_path):
    ny, nx, nframes = 20, 30, 5
    nt = NTNDArray()
    pv = SharedPV(initial=nt.wrap(np.zeros((ny, nx), np.uint16)))
    frames = [(np.arange(ny * nx, dtype=np.uint16).reshape(ny, nx) * (k + 1)) for k in range(nframes)]
    with Server(providers=[{"SRC:Image": pv}], isolate=True) as srv:
        conf = {k: v for k, v in srv.conf().items() if v}
        out = tmp_path / "tif"
        ioc = Ioc(
            ndflow_bin,
            tmp_path,
            f"""
prefix = "D:"
[[port]]
name = "PVAD1"
type = "pvadriver"
prefix = "cam1:"
PvName = "SRC:Image"
ImageMode = "Multiple"
NumImages = {nframes}

[[port]]
name = "TIFF1"
type = "tiff"
NDArrayPort = "PVAD1"
BlockingCallbacks = "Yes"
FilePath = "{out}"
CreateDirectory = -1
FileName = "f"
FileNumber = 1
AutoIncrement = "Yes"
FileTemplate = "%s%s_%3.3d.tif"
FileWriteMode = "Stream"
NumCapture = {nframes}
Capture = 1
""",
            # The IOC's client must find the p4p server (its UDP port).
            extra_env={"EPICS_PVA_BROADCAST_PORT": conf["EPICS_PVA_BROADCAST_PORT"]},
        )
        try:
            ioc.ctx.put("D:cam1:Acquire", 1)
            ioc.wait_for("D:cam1:PvConnection_RBV", lambda v: enum_index(v) == 1)
            time.sleep(0.3)
            for k, f in enumerate(frames, start=1):
                v = nt.wrap(f)
                v["uniqueId"] = 100 + k
                pv.post(v)
                time.sleep(0.05)
            ioc.wait_for("D:cam1:ArrayCounter_RBV", lambda v: v >= nframes)
            ioc.wait_for("D:cam1:Acquire_RBV", lambda v: enum_index(v) == 0)
            assert ioc.ctx.get("D:cam1:LostFrames_RBV") == 0
            assert ioc.ctx.get("D:cam1:ArraySizeX_RBV") == nx
            ioc.wait_for("D:TIFF1:NumCaptured_RBV", lambda v: v == nframes)
        finally:
            ioc.close()
        files = sorted(out.glob("f_*.tif"))
        assert len(files) == nframes
        for k, (fname, ref) in enumerate(zip(files, frames), start=1):
            with tifffile.TiffFile(fname) as t:
                img = t.pages[0].asarray()
                assert img.dtype == np.uint16 and img.shape == (ny, nx)
                assert np.array_equal(img, ref)
                assert t.pages[0].tags[65001].value == 100 + k  # uniqueId kept


def test_ndflow_to_ndflow_lossless_10000_frames(ndflow_bin, tmp_path):
    n = 10000
    ioc = Ioc(
        ndflow_bin,
        tmp_path,
        f"""
prefix = "L:"
[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = 32
MaxSizeY = 16
DataType = "UInt16"
ImageMode = "Multiple"
NumImages = {n}
AcquireTime = 0.0
AcquirePeriod = 0.0

[[port]]
name = "PVA1"
type = "pva"
prefix = "Pva1:"
NDArrayPort = "SIM1"
BlockingCallbacks = "Yes"
Lossless = "Yes"

[[port]]
name = "PVAD1"
type = "pvadriver"
prefix = "rx:"
PvName = "L:Pva1:Image"
Lossless = "Yes"
ImageMode = "Multiple"
NumImages = {n}

[[port]]
name = "STATS1"
type = "stats"
prefix = "Stats1:"
NDArrayPort = "PVAD1"
QueueSize = 100
""",
    )
    try:
        ioc.ctx.put("L:rx:Acquire", 1)
        ioc.wait_for("L:rx:PvConnection_RBV", lambda v: enum_index(v) == 1)
        # Connected = the server has accepted the subscription, so the first frame reaches it.
        ioc.ctx.put("L:cam1:Acquire", 1)
        ioc.wait_for("L:rx:ArrayCounter_RBV", lambda v: v >= n, timeout=240)
        ioc.wait_for("L:rx:Acquire_RBV", lambda v: enum_index(v) == 0)
        assert ioc.ctx.get("L:cam1:ArrayCounter_RBV") == n
        assert ioc.ctx.get("L:rx:ArrayCounter_RBV") == n
        assert ioc.ctx.get("L:rx:LostFrames_RBV") == 0
        assert ioc.ctx.get("L:rx:OverrunCounter_RBV") == 0
        assert ioc.ctx.get("L:Pva1:DroppedArrays_RBV") == 0
        assert ioc.ctx.get("L:rx:UniqueId_RBV") == n
        assert ioc.ctx.get("L:Pva1:Subscribers_RBV") == 1
    finally:
        ioc.close()
