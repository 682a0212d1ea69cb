"""The bluesky ecosystem drives ndflow unmodified: ophyd-async's stock `SimDetector` with its
HDF writer (over Channel Access through aioca, and over pvAccess through p4p) and ophyd v1's
stock `SimDetector` (Channel Access, pyepics) connect to an ndflow IOC and run `count` plans;
the HDF5 file ophyd-async asked for holds exactly the frames of the scan.

Each client runs in its own process: libca and p4p read their environment once, and every
IOC here has its own free ports. Loopback only (netenv.py).
"""

import json
import os
import subprocess
import sys
import textwrap

import h5py
import numpy as np
import pytest
from interop import require_installed
from netenv import ca_client_env
from pva_util import NdflowIoc

# The plans run in subprocesses; checked here so that a missing package fails, named.
require_installed("bluesky")

P = "BS:"

CONFIG = """
prefix = "{P}"

[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = 64
MaxSizeY = 48
DataType = "UInt16"
ImageMode = "Single"
AcquireTime = 0.01
AcquirePeriod = 0.02

[[port]]
name = "HDF1"
type = "hdf5"
prefix = "HDF1:"
NDArrayPort = "SIM1"

[[port]]
name = "STATS1"
type = "stats"
prefix = "Stats1:"
NDArrayPort = "SIM1"
"""


@pytest.fixture(scope="module")
def ioc(ndflow_bin, tmp_path_factory):
    ioc = NdflowIoc(ndflow_bin, tmp_path_factory.mktemp("bluesky"), CONFIG.replace("{P}", P))
    ioc.wait_for(P + "cam1:ArrayCounter_RBV", lambda v: v == 0)
    yield ioc
    ioc.close()


def run(ioc, code, timeout=180):
    env = dict(os.environ)
    env.update(ca_client_env(ioc.ca_port, ioc.ca_repeater))
    env.update(ioc.conf)  # the pvAccess client side (p4p reads EPICS_PVA_* too)
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                       capture_output=True, text=True, timeout=timeout)
    lines = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
    if p.returncode != 0 or not lines:
        pytest.fail(p.stdout[-4000:] + p.stderr[-6000:] + ioc.log_text()[-3000:] + server_state(ioc))
    return json.loads(lines[-1][7:])


def server_state(ioc):
    """What the IOC says now over pvAccess, for a failure message: whether a frame was not
    made, not written, or written but not posted."""
    names = ["cam1:ArrayCounter_RBV", "cam1:DetectorState_RBV", "cam1:Acquire_RBV",
             "HDF1:ArraysOffered_RBV", "HDF1:ArrayCounter_RBV", "HDF1:NumCaptured_RBV",
             "HDF1:Capture_RBV", "HDF1:DroppedArrays_RBV", "HDF1:QueueUse", "HDF1:WriteMessage"]
    out = []
    for n in names:
        try:
            out.append(f"{n}={ioc.ctx.get(P + n, timeout=2)!r}")
        except Exception as e:  # report, do not mask the failure
            out.append(f"{n}: {e!r}")
    return "\nIOC state after the failure: " + ", ".join(out)


OPHYD_ASYNC = """
import asyncio, json, sys
import bluesky.plans as bp
from bluesky import RunEngine
from ophyd_async.core import StaticPathProvider, StaticFilenameProvider, init_devices
from ophyd_async.epics import adcore
from ophyd_async.epics.adsimdetector import SimDetector

RE = RunEngine(call_returns_result=True)
docs = []
RE.subscribe(lambda name, doc: docs.append((name, doc)))
path = StaticPathProvider(StaticFilenameProvider("{name}"), "{dir}")
with init_devices():
    det = SimDetector("{proto}{P}", adcore.ADWriterFactory.hdf(path))
RE(bp.count([det], num={n}))
res = [d for n, d in docs if n == "stream_resource"]
events = [d for n, d in docs if n == "stream_datum"]
print("RESULT " + json.dumps({{"resources": [r["uri"] for r in res],
    "datums": [[d["indices"]["start"], d["indices"]["stop"]] for d in events],
    "stops": [d["exit_status"] for n, d in docs if n == "stop"]}}))
"""


@pytest.mark.parametrize("proto", ["ca://", "pva://"])
def test_ophyd_async_sim_detector_counts_into_hdf5(ioc, tmp_path, proto):
    require_installed("ophyd_async")
    require_installed("aioca" if proto == "ca://" else "p4p")
    name = "scan_" + proto[:-3]
    out = run(ioc, OPHYD_ASYNC.format(proto=proto, P=P, dir=str(tmp_path), name=name, n=4))
    assert out["stops"] == ["success"], out
    assert out["datums"] and out["datums"][-1][1] == 4, out
    files = list(tmp_path.glob(name + "*.h5"))
    assert len(files) == 1, files
    with h5py.File(files[0], "r") as f:
        data = f["/entry/data/data"][...]
    assert data.shape == (4, 48, 64) and data.dtype == np.uint16


OPHYD_V1 = """
import json
import bluesky.plans as bp
from bluesky import RunEngine
from ophyd.areadetector import SimDetector, SingleTrigger
from ophyd.areadetector.plugins import StatsPlugin
from ophyd import Component as Cpt

class Det(SingleTrigger, SimDetector):
    stats1 = Cpt(StatsPlugin, "Stats1:")

det = Det("{P}", name="det")
det.wait_for_connection(timeout=30)
det.stats1.kind = "hinted"
det.stats1.total.kind = "hinted"
RE = RunEngine()
events = []
RE.subscribe(lambda name, doc: events.append(doc) if name == "event" else None)
RE(bp.count([det], num=3))
print("RESULT " + json.dumps({{"n": len(events), "totals": [e["data"].get("det_stats1_total") for e in events],
    "counter": det.cam.array_counter.get()}}))
"""


def test_ophyd_v1_sim_detector_counts(ioc):
    require_installed("ophyd")
    out = run(ioc, OPHYD_V1.format(P=P))
    assert out["n"] == 3, out
    assert all(t is not None and t > 0 for t in out["totals"]), out
