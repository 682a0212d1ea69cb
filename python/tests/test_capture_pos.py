"""CircularBuff and Pos through the real binary, read back with h5py.

- sim -> Pos -> HDF5 in position mode: each frame lands at the index its position gives.
- sim -> CircularBuff -> HDF5: exactly PreCount + PostCount frames around a trigger, with
  consecutive uniqueIds ending PostCount - 1 after the triggering frame; once with a trigger
  expression over the uniqueId (`--until-idle`), once with a soft trigger put over pvAccess
  on a running IOC (the busy Trigger put completes when the post frames are out).

The sim's LinearRamp with unit gains gives frame uniqueId u the pixels x + y + u - 1.
"""

import json
import subprocess

import h5py
import numpy as np

from pva_util import NdflowIoc, enum_index

DATA = "/entry/instrument/detector/data"
ATTRS = "/entry/instrument/NDAttributes"
W, H = 16, 8


def ramp(uid):
    y, x = np.mgrid[0:H, 0:W]
    return (x + y + uid - 1).astype(np.uint16)


def sim(n, mode="Multiple", period=0.005):
    return f"""
[[port]]
name = "SIM1"
prefix = "cam1:"
type = "sim"
MaxSizeX = {W}
MaxSizeY = {H}
DataType = "UInt16"
ImageMode = "{mode}"
NumImages = {n}
AcquireTime = 0.0
AcquirePeriod = {period}
Acquire = 1
"""


def hdf(out, source, n, extra=""):
    return f"""
[[port]]
name = "HDF1"
prefix = "HDF1:"
type = "hdf5"
NDArrayPort = "{source}"
QueueSize = 100
FilePath = "{out}"
CreateDirectory = -1
FileName = "scan"
FileTemplate = "%s%s_%3.3d.h5"
FileNumber = 1
FileWriteMode = "Stream"
LazyOpen = "Yes"
NumCapture = {n}
{extra}
Capture = 1
"""


def run(ndflow_bin, tmp_path, text):
    cfg = tmp_path / "ioc.toml"
    cfg.write_text(text)
    summary = tmp_path / "summary.json"
    proc = subprocess.run(
        [str(ndflow_bin), "run", str(cfg), "--until-idle", "--quiet", "--no-pva", "--no-ca",
         "--summary", str(summary)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(summary.read_text())["ports"]


def test_sim_pos_hdf5_position_mode(ndflow_bin, tmp_path):
    # Positions (x, n) in acquisition order: a shuffled 3 x 2 scan.
    pos = [(2, 1), (0, 0), (1, 1), (0, 1), (2, 0), (1, 0)]
    points = "".join(f'<position pos_x="{x}" pos_n="{n}"/>' for x, n in pos)
    xml = ('<pos_layout><dimensions><dimension name="pos_x"/><dimension name="pos_n"/>'
           f"</dimensions><positions>{points}</positions></pos_layout>")
    out = tmp_path / "data"
    text = sim(len(pos)) + f"""
[[port]]
name = "POS1"
prefix = "Pos1:"
type = "pos"
NDArrayPort = "SIM1"
QueueSize = 100
Filename = '{xml}'
Running = 1
""" + hdf(out, "POS1", len(pos), extra="""NumExtraDims = 1
ExtraDimSizeN = 2
ExtraDimSizeX = 3
PositionMode = "On"
PosNameDimN = "pos_n"
PosNameDimX = "pos_x"
""")
    ports = run(ndflow_bin, tmp_path, text)
    p = ports["POS1"]
    assert p["FileValid_RBV"] == "Yes" and p["Qty_RBV"] == 0 and p["Running_RBV"] == "Idle", p
    assert p["Missing_RBV"] == 0 and p["Duplicate_RBV"] == 0 and p["ExpectedID_RBV"] == 7
    assert p["Position_RBV"] == "[pos_n=0,pos_x=1]"
    assert ports["HDF1"]["NumCaptured_RBV"] == len(pos), ports["HDF1"]
    with h5py.File(out / "scan_001.h5", "r") as f:
        d = f[DATA]
        assert d.shape == (3, 2, H, W)
        for k, (x, n) in enumerate(pos):
            assert np.array_equal(d[x, n], ramp(k + 1)), (k, x, n)
        assert list(f[ATTRS + "/pos_x"][...]) == [x for x, _ in pos]
        assert list(f[ATTRS + "/pos_n"][...]) == [n for _, n in pos]


def test_sim_circularbuff_hdf5_attribute_trigger(ndflow_bin, tmp_path):
    pre, post, trig = 4, 3, 12
    out = tmp_path / "data"
    text = sim(30) + f"""
[[port]]
name = "CB1"
prefix = "CB1:"
type = "circularbuff"
NDArrayPort = "SIM1"
QueueSize = 100
PreCount = {pre}
PostCount = {post}
TriggerA = "NDArrayUniqueId"
TriggerCalc = "A={trig}"
Capture = 1
""" + hdf(out, "CB1", pre + post)
    ports = run(ndflow_bin, tmp_path, text)
    cb = ports["CB1"]
    assert cb["ActualTriggerCount_RBV"] == 1 and cb["Capture_RBV"] == "Done", cb
    assert cb["StatusMessage"] == "Acquisition Completed"
    assert cb["TriggerCalcVal"] == 1.0 and cb["TriggerAVal"] == trig
    assert cb["ArraysProcessed_RBV"] == 30, "every frame is counted"
    assert ports["HDF1"]["NumCaptured_RBV"] == pre + post
    with h5py.File(out / "scan_001.h5", "r") as f:
        uids = list(f[ATTRS + "/NDArrayUniqueId"][...])
        assert uids == list(range(trig - pre, trig + post))
        data = f[DATA][...]
        assert data.shape == (pre + post, H, W)
        for k, u in enumerate(uids):
            assert np.array_equal(data[k], ramp(u)), u


def test_soft_trigger_over_pvaccess(ndflow_bin, tmp_path):
    pre, post = 5, 3
    out = tmp_path / "data"
    text = 'prefix = "CAP:"\npva = true\nca = false\n' + sim(1, mode="Continuous", period=0.02) + f"""
[[port]]
name = "CB1"
prefix = "CB1:"
type = "circularbuff"
NDArrayPort = "SIM1"
QueueSize = 100
PreCount = {pre}
PostCount = {post}
Capture = 1
""" + hdf(out, "CB1", pre + post)
    ioc = NdflowIoc(ndflow_bin, tmp_path, text)
    try:
        ioc.wait_for("CAP:CB1:CurrentQty_RBV", lambda v: v == pre)
        assert ioc.ctx.get("CAP:HDF1:NumCaptured_RBV") == 0
        # Busy record: the put returns once the post frames have gone.
        ioc.ctx.put("CAP:CB1:Trigger", 1, wait=True, timeout=10)
        assert ioc.ctx.get("CAP:CB1:ActualTriggerCount_RBV") == 1
        ioc.wait_for("CAP:HDF1:Capture_RBV", lambda v: enum_index(v) == 0)
        assert ioc.ctx.get("CAP:HDF1:NumCaptured_RBV") == pre + post
        full = ioc.raw.get("CAP:HDF1:FullFileName_RBV")["value"]
    finally:
        ioc.close()
    with h5py.File(str(full), "r") as f:
        uids = list(f[ATTRS + "/NDArrayUniqueId"][...])
        assert len(uids) == pre + post
        assert uids == list(range(uids[0], uids[0] + pre + post)), "consecutive, in order"
        data = f[DATA][...]
        for k, u in enumerate(uids):
            assert np.array_equal(data[k], ramp(u)), u
