"""Scatter → N workers → Gather through the real binary: the classic scale-out of a slow
plugin. sim → SCAT → STATS1..3 → GATH (SortMode) → HDF1: every frame goes to exactly one
Stats port, the counters add up (in = delivered + dropped at each hop), and the HDF5 file
holds the frames in uniqueId order with the simulator's ramp bit-exact. Gather's records
(NDGatherN.template, not in ad_records.json) are checked over pvAccess and Channel Access,
and its inputs re-wire by a PV put while the IOC runs."""

import json
import os
import subprocess
import sys

import h5py
import numpy as np
import pytest

from interop import require
from netenv import ca_client_env
from pva_util import NdflowIoc
from test_ad_records import CA_CHECK, CA_NATIVE, pva_problem
from test_hdf5_common import ATTRS, LINK

W, H = 64, 32


def pipeline(out, n, queue, sorted_=True):
    stats = "".join(
        f"""
[[port]]
name = "STATS{k}"
prefix = "Stats{k}:"
type = "stats"
NDArrayPort = "SCAT"
QueueSize = {queue}
ComputeCentroid = "Yes"
ComputeHistogram = "Yes"
"""
        for k in (1, 2, 3)
    )
    return f"""
[[port]]
name = "SIM1"
prefix = "cam1:"
type = "sim"
MaxSizeX = {W}
MaxSizeY = {H}
DataType = "UInt32"
ImageMode = "Multiple"
NumImages = {n}
AcquireTime = 0.0
AcquirePeriod = 0.0
Acquire = 1

[[port]]
name = "SCAT"
prefix = "Scatter1:"
type = "scatter"
NDArrayPort = "SIM1"
QueueSize = {queue}
{stats}
[[port]]
name = "GATH"
prefix = "Gather1:"
type = "gather"
NDArrayPort_1 = "STATS1"
NDArrayPort_2 = "STATS2"
NDArrayPort_3 = "STATS3"
QueueSize = {max(queue, 1)}
SortMode = "{'Sorted' if sorted_ else 'Unsorted'}"
SortSize = {n}
SortTime = 1.0

[[port]]
name = "HDF1"
prefix = "HDF1:"
type = "hdf5"
NDArrayPort = "GATH"
QueueSize = {n}
FilePath = "{out}"
CreateDirectory = -1
FileName = "gathered"
FileTemplate = "%s%s_%3.3d.h5"
FileNumber = 1
FileWriteMode = "Stream"
LazyOpen = "Yes"
NumCapture = 0
Capture = 1
"""


def run(ndflow_bin, tmp_path, config):
    cfg = tmp_path / "scale_out.toml"
    summary = tmp_path / "summary.json"
    cfg.write_text(config)
    proc = subprocess.run(
        [str(ndflow_bin), "run", str(cfg), "--until-idle", "--quiet", "--summary", str(summary)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(summary.read_text())["ports"]


def dropped(p):
    return sum(p[k] for k in ("DroppedQueueFull_RBV", "DroppedMinTime_RBV", "DroppedUnsupported_RBV",
                              "DroppedDisabled_RBV", "DroppedErrors_RBV"))


def check_counts(ports, n):
    """in = delivered + dropped at every hop, as the counters show them."""
    scat, gath, hdf = ports["SCAT"], ports["GATH"], ports["HDF1"]
    stats = [ports[f"STATS{k}"] for k in (1, 2, 3)]
    assert ports["SIM1"]["ArrayCounter_RBV"] == n
    assert scat["ArraysOffered_RBV"] == n
    assert scat["ArraysOffered_RBV"] == scat["ArraysProcessed_RBV"] + dropped(scat)
    # Each delivered frame went to exactly one Stats port, which was never handed one it had
    # no room for (the scatter skips full queues).
    assert sum(s["ArraysOffered_RBV"] for s in stats) == scat["ArraysProcessed_RBV"]
    for s in stats:
        assert s["DroppedQueueFull_RBV"] == 0
        assert s["ArraysOffered_RBV"] == s["ArraysProcessed_RBV"] + dropped(s)
    assert gath["ArraysOffered_RBV"] == sum(s["ArraysProcessed_RBV"] for s in stats)
    assert gath["ArraysOffered_RBV"] == gath["ArraysProcessed_RBV"] + dropped(gath)
    assert hdf["ArraysOffered_RBV"] == gath["ArraysProcessed_RBV"] - gath["DroppedOutputArrays_RBV"]
    return scat, gath, hdf, stats


def read_file(path):
    with h5py.File(path, "r") as f:
        return f[ATTRS + "/NDArrayUniqueId"][...], f[LINK][...]


def check_pixels(ids, data):
    y, x = np.mgrid[0:H, 0:W]
    assert data.shape == (len(ids), H, W) and data.dtype == np.uint32
    for uid, frame in zip(ids, data):
        # LinearRamp with unit gains: the frame with uniqueId u holds x + y + u - 1.
        assert np.array_equal(frame, (x + y + int(uid) - 1).astype(np.uint32)), uid


def test_scale_out_keeps_every_frame_in_order(ndflow_bin, tmp_path):
    n = 300
    ports = run(ndflow_bin, tmp_path, pipeline(tmp_path / "data", n, queue=n))
    scat, gath, hdf, stats = check_counts(ports, n)
    # Queues never fill: no drop anywhere and strict round-robin turns.
    assert (scat["ArraysProcessed_RBV"], dropped(scat)) == (n, 0)
    assert [s["ArraysProcessed_RBV"] for s in stats] == [n // 3] * 3
    assert gath["DisorderedArrays_RBV"] == 0
    assert hdf["WriteStatus"] == "Write OK", hdf
    assert hdf["NumCaptured_RBV"] == n
    ids, data = read_file(tmp_path / "data" / "gathered_001.h5")
    assert list(ids) == list(range(1, n + 1))
    check_pixels(ids, data)
    assert ports["SCAT"]["PluginType_RBV"] == "NDPluginScatter"
    assert ports["GATH"]["PluginType_RBV"] == "NDPluginGather"
    assert ports["GATH"]["NDArrayPort_RBV"] == "STATS1", "NDArrayPort is input 1"


def test_scale_out_under_overload_counts_every_frame(ndflow_bin, tmp_path):
    """Tiny queues and a fast source: frames are dropped, but each is counted once, and what
    reaches the file is still in order and bit-exact."""
    n = 600
    ports = run(ndflow_bin, tmp_path, pipeline(tmp_path / "data", n, queue=1))
    scat, gath, hdf, _ = check_counts(ports, n)
    ids, data = read_file(tmp_path / "data" / "gathered_001.h5")
    assert len(ids) == hdf["NumCaptured_RBV"] == gath["ArraysProcessed_RBV"] - gath["DroppedOutputArrays_RBV"]
    assert np.all(np.diff(ids) > 0), "sorted: strictly increasing uniqueIds"
    check_pixels(ids, data)
    print(f"\noverload: scatter delivered {scat['ArraysProcessed_RBV']}/{n}, dropped {dropped(scat)}; "
          f"file {len(ids)} frames")


# NDGatherN.template loaded for N = 1..8 (ADCore), plus NDGather.template = NDPluginBase.
GATHER_RECORDS = [
    r
    for k in range(1, 9)
    for r in (
        {"name": f"NDArrayPort_{k}", "type": "stringout"},
        {"name": f"NDArrayPort_{k}_RBV", "type": "stringin"},
        {"name": f"NDArrayAddress_{k}", "type": "longout"},
        {"name": f"NDArrayAddress_{k}_RBV", "type": "longin"},
    )
]

IOC_CONFIG = """
prefix = "SG:"

[[port]]
name = "SIM1"
prefix = "cam1:"
type = "sim"
MaxSizeX = 32
MaxSizeY = 16
ImageMode = "Multiple"
NumImages = 40
AcquirePeriod = 0.001

[[port]]
name = "SCAT"
prefix = "Scatter1:"
type = "scatter"
NDArrayPort = "SIM1"
QueueSize = 100

[[port]]
name = "STATS1"
prefix = "Stats1:"
type = "stats"
NDArrayPort = "SCAT"
QueueSize = 100

[[port]]
name = "STATS2"
prefix = "Stats2:"
type = "stats"
NDArrayPort = "SCAT"
QueueSize = 100

[[port]]
name = "GATH"
prefix = "Gather1:"
type = "gather"
NDArrayPort_1 = "STATS1"
QueueSize = 100
"""


@pytest.fixture(scope="module")
def ioc(ndflow_bin, tmp_path_factory):
    ioc = NdflowIoc(ndflow_bin, tmp_path_factory.mktemp("scatter_gather"), IOC_CONFIG)
    ioc.wait_for("SG:cam1:ArrayCounter_RBV", lambda v: v == 0)
    yield ioc
    ioc.close()


def test_gather_records_over_pvaccess(ioc):
    names = ["SG:Gather1:" + r["name"] for r in GATHER_RECORDS]
    values = ioc.raw.get(names, throw=False, timeout=20)
    problems = {n: pva_problem(r, v) for n, r, v in zip(names, GATHER_RECORDS, values) if pva_problem(r, v)}
    assert not problems, problems
    assert ioc.ctx.get("SG:Gather1:NDArrayPort_1_RBV") == "STATS1"
    assert ioc.ctx.get("SG:Scatter1:ScatterMethod_RBV").raw.value.choices == ["Round robin"]


def test_gather_records_over_channel_access(ioc):
    require("epics")
    names = ["SG:Gather1:" + r["name"] for r in GATHER_RECORDS]
    env = dict(os.environ)
    env.update(ca_client_env(ioc.ca_port, ioc.ca_repeater))
    p = subprocess.run([sys.executable, "-c", CA_CHECK], input=json.dumps(names), env=env,
                       capture_output=True, text=True, timeout=120)
    lines = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
    assert p.returncode == 0 and lines, p.stdout[-2000:] + p.stderr[-2000:]
    got = json.loads(lines[-1][7:])
    for name, rec in zip(names, GATHER_RECORDS):
        assert got[name] is not None, f"{name} missing"
        assert got[name][0] in CA_NATIVE[rec["type"]], (name, got[name])


def test_gather_input_rewires_by_pv_put(ioc):
    # Only STATS1 feeds the gather: half the frames reach it.
    ioc.ctx.put("SG:cam1:Acquire", 1, wait=True, timeout=30)
    ioc.wait_for("SG:Gather1:ArraysOffered_RBV", lambda v: v == 20)
    ioc.wait_for("SG:Stats2:ArraysProcessed_RBV", lambda v: v == 20)
    # Input 2 added at run time: every frame of the next acquisition arrives.
    ioc.ctx.put("SG:Gather1:NDArrayPort_2", "STATS2", wait=True)
    ioc.wait_for("SG:Gather1:NDArrayPort_2_RBV", lambda v: v == "STATS2")
    ioc.ctx.put("SG:cam1:Acquire", 1, wait=True, timeout=30)
    ioc.wait_for("SG:Gather1:ArraysOffered_RBV", lambda v: v == 60)
    # A loop is refused and changes nothing.
    with pytest.raises(Exception):
        ioc.ctx.put("SG:Scatter1:NDArrayPort", "GATH", wait=True)
    assert ioc.ctx.get("SG:Scatter1:NDArrayPort_RBV") == "SIM1"
    # NDArrayPort is input 1: clearing it unsubscribes STATS1.
    ioc.ctx.put("SG:Gather1:NDArrayPort", "", wait=True)
    ioc.wait_for("SG:Gather1:NDArrayPort_1_RBV", lambda v: v == "")
    ioc.ctx.put("SG:cam1:Acquire", 1, wait=True, timeout=30)
    ioc.wait_for("SG:Stats2:ArraysProcessed_RBV", lambda v: v == 60)
    ioc.wait_for("SG:Gather1:ArraysOffered_RBV", lambda v: v == 80)
