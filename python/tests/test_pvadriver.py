"""pvadriver: frames from an NTNDArray PV enter the pipeline with their pixels, dims, uniqueId,
attributes and codec.

- a p4p (pvxs) server publishes frames → ndflow pvadriver → TIFF files, read back by tifffile;
- ndflow → ndflow in one IOC (sim → pva Lossless → pvadriver Lossless): 10,000 frames, none lost.

Loopback only (../shared/loopback.env with per-test free ports).
"""

import os
import pathlib
import socket
import subprocess
import time

import numpy as np
import pytest
import tifffile

from p4p.client.thread import Context
from p4p.nt import NTNDArray
from p4p.server import Server
from p4p.server.thread import SharedPV

ROOT = pathlib.Path(__file__).resolve().parents[2]


def loopback_env():
    env = dict(os.environ)
    for line in (ROOT.parent / "shared" / "loopback.env").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            k, v = line.split("=", 1)
            env[k] = v
    return env


def free_port(kind=socket.SOCK_STREAM):
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Ioc:
    """`ndflow run CONFIG` on free pvAccess ports, with a p4p context that talks to it."""

    def __init__(self, ndflow_bin, tmp, config, extra_env=None):
        cfg = tmp / "ioc.toml"
        cfg.write_text(config)
        tcp, udp = free_port(), free_port(socket.SOCK_DGRAM)
        env = loopback_env()
        env.update(
            EPICS_PVAS_SERVER_PORT=str(tcp),
            EPICS_PVA_SERVER_PORT=str(tcp),
            EPICS_PVAS_BROADCAST_PORT=str(udp),
            EPICS_PVA_BROADCAST_PORT=str(udp),
        )
        env.update(extra_env or {})
        self.log = open(tmp / "ioc.log", "w+")
        self.proc = subprocess.Popen([str(ndflow_bin), "run", str(cfg), "--quiet"], env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.ctx = Context(
            "pva",
            conf={
                "EPICS_PVA_ADDR_LIST": "127.0.0.1",
                "EPICS_PVA_AUTO_ADDR_LIST": "NO",
                "EPICS_PVA_BROADCAST_PORT": str(udp),
                "EPICS_PVA_SERVER_PORT": str(tcp),
            },
            useenv=False,
        )

    def wait_for(self, pv, pred, timeout=20.0):
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            if self.proc.poll() is not None:
                self.log.seek(0)
                pytest.fail("IOC exited:\n" + self.log.read())
            try:
                last = self.ctx.get(pv, timeout=1.0)
                if pred(last):
                    return last
            except Exception as e:  # not served yet
                last = e
            time.sleep(0.05)
        self.log.seek(0)
        pytest.fail(f"{pv} never satisfied the condition (last {last!r})\n" + self.log.read())

    def close(self):
        self.ctx.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def enum_index(v):
    return v.raw.value.index


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
