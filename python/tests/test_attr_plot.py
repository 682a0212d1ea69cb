"""NDPluginAttrPlot through the binary: a sim whose attribute file gives each frame numeric
attributes (a FUNCT uniqueId, a FUNCT expression over it, a PARAM, a CONST) feeds an
`attrplot` port and a `pva` port; the attribute names (`AttrN`) and the selected waveforms
(`X:Data`, `Y1:DataN`, `Y2:DataN`), read over pvAccess (p4p) and Channel Access (pyepics), hold
the attributes of the frames the pva port published, oldest first, padded with the last point.
Reset and a restarted uniqueId clear the cache.

Loopback only: the IOC and the clients get netenv.py's loopback variables with per-test free
ports.
"""

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from interop import require
from netenv import ca_client_env
from pva_util import NdflowIoc

P = "AP13:"
CACHE = 16
N_FRAMES = 5

ATTRS_XML = (
    '<Attributes>'
    '<Attribute name="Frame" type="FUNCT" source="uniqueId"/>'
    '<Attribute name="Twice" type="FUNCT" source="expression" param="Frame * 2 + 0.5"/>'
    '<Attribute name="Exposure" type="PARAM" source="ACQ_TIME" datatype="DOUBLE"/>'
    '<Attribute name="Energy" type="CONST" source="12.4" datatype="DOUBLE"/>'
    '<Attribute name="Sample" type="CONST" source="lysozyme" datatype="STRING"/>'
    '<Attribute name="Site" type="FUNCT" source="mySiteFunction"/>'
    '</Attributes>'
)

CONFIG = """
prefix = "{P}"

[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = 8
MaxSizeY = 4
DataType = "UInt8"
ImageMode = "Single"
AcquireTime = 0.002
AcquirePeriod = 0.0
NDAttributesFile = '{xml}'

[[port]]
name = "AP1"
type = "attrplot"
prefix = "AP1:"
NDArrayPort = "SIM1"
BlockingCallbacks = "Yes"
MaxAttributes = 8
CacheSize = {cache}

[[port]]
name = "PVA1"
type = "pva"
prefix = "Pva1:"
NDArrayPort = "SIM1"
BlockingCallbacks = "Yes"
"""


def attributes(img):
    """name → value of an NTNDArray's attribute list (p4p raw Value)."""
    return {a["name"]: a["value"] for a in img["attribute"]}


def numeric(v):
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


@pytest.fixture(scope="module")
def ioc(ndflow_bin, tmp_path_factory):
    cfg = CONFIG.replace("{P}", P).replace("{xml}", ATTRS_XML).replace("{cache}", str(CACHE))
    ioc = NdflowIoc(ndflow_bin, tmp_path_factory.mktemp("attr_plot"), cfg)
    try:
        ioc.wait_for(P + "cam1:NDAttributesStatus", lambda v: int(v) == 0)
        ioc.wait_for(P + "AP1:NPts", lambda v: v == 0)
        yield ioc
    finally:
        ioc.close()


def acquire(ioc, n):
    """n single frames; the attributes of each as the pva port published it."""
    frames = []
    for _ in range(n):
        ioc.ctx.put(P + "cam1:Acquire", 1, wait=True, timeout=10)
        img = ioc.raw.get(P + "Pva1:Image", timeout=5)
        frames.append((int(img["uniqueId"]), attributes(img)))
    return frames


def padded(values):
    values = list(values)
    return values + [values[-1]] * (CACHE - len(values))


CA_READ = r"""
import json, sys
from epics import caget
names = json.loads(sys.stdin.read())
out = {}
for n in names:
    v = caget(n, timeout=5.0, use_monitor=False)
    out[n] = v.tolist() if hasattr(v, "tolist") else v
print("RESULT " + json.dumps(out))
"""


def ca_read(ioc, names):
    env = dict(os.environ)
    env.update(ca_client_env(ioc.ca_port, ioc.ca_repeater))
    p = subprocess.run([sys.executable, "-c", CA_READ], input=json.dumps(names), env=env,
                       capture_output=True, text=True, timeout=120)
    lines = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
    assert p.returncode == 0 and lines, p.stdout[-2000:] + p.stderr[-2000:]
    return json.loads(lines[-1][7:])


def test_names_and_selected_waveforms_hold_the_frames_attributes(ioc):
    frames = acquire(ioc, N_FRAMES)
    ioc.wait_for(P + "AP1:NPts", lambda v: v == N_FRAMES)
    first = frames[0][1]
    want_names = sorted(n for n, v in first.items() if numeric(v))
    assert {"Frame", "Twice", "Exposure", "Energy"} <= set(want_names), first
    assert "Sample" not in want_names and "Site" not in first
    assert len(want_names) <= 8, want_names

    names = [ioc.raw.get(P + f"AP1:Attr{i}", timeout=5)["value"] for i in range(8)]
    assert names == want_names + [""] * (8 - len(want_names))

    # X: the uniqueId; Y1 0/1: Twice, Exposure; Y2 3: Frame.
    sel = {"X:DataSelect": -1, "Y1:DataSelect0": names.index("Twice"),
           "Y1:DataSelect1": names.index("Exposure"), "Y2:DataSelect3": names.index("Frame")}
    for pv, v in sel.items():
        ioc.ctx.put(P + "AP1:" + pv, v, wait=True, timeout=5)
    labels = {"X:DataLabel": "UID", "Y1:DataLabel0": "Twice", "Y1:DataLabel1": "Exposure",
              "Y2:DataLabel3": "Frame", "Y1:DataLabel2": "None"}
    for pv, label in labels.items():
        ioc.wait_for(P + "AP1:" + pv, lambda v, label=label: v == label)
    assert ioc.ctx.get(P + "AP1:Y1:DataSelect0_RBV", timeout=5) == names.index("Twice")

    uids = [u for u, _ in frames]
    want = {
        "X:Data": padded(uids),
        "Y1:Data0": padded(a["Twice"] for _, a in frames),
        "Y1:Data1": padded(a["Exposure"] for _, a in frames),
        "Y2:Data3": padded(a["Frame"] for _, a in frames),
    }
    assert want["Y2:Data3"] == want["X:Data"], "Frame is the uniqueId"
    assert want["Y1:Data0"] == [2 * u + 0.5 for u in want["X:Data"]]
    for pv, values in want.items():
        got = ioc.wait_for(P + "AP1:" + pv, lambda v: len(v) == CACHE)
        assert np.allclose(got, values), (pv, got, values)
    nothing = ioc.ctx.get(P + "AP1:Y1:Data2", timeout=5)
    assert len(nothing) == CACHE and np.isnan(nothing).all(), "None: NaN"

    # The same over Channel Access (pyepics).
    require("epics")
    pvs = [P + f"AP1:Attr{i}" for i in range(8)] + [P + "AP1:" + k for k in want] + [
        P + "AP1:NPts", P + "AP1:Y1:DataLabel0", P + "AP1:Y1:DataSelect0_RBV"]
    ca = ca_read(ioc, pvs)
    assert [ca[P + f"AP1:Attr{i}"] for i in range(8)] == names
    for pv, values in want.items():
        assert np.allclose(ca[P + "AP1:" + pv], values), (pv, ca[P + "AP1:" + pv])
    assert ca[P + "AP1:NPts"] == N_FRAMES
    assert ca[P + "AP1:Y1:DataLabel0"] == "Twice"
    assert ca[P + "AP1:Y1:DataSelect0_RBV"] == names.index("Twice")

    # New points reach the waveforms within the 1 s exposure period.
    more = acquire(ioc, 2)
    uids += [u for u, _ in more]
    ioc.wait_for(P + "AP1:X:Data", lambda v: np.allclose(v, padded(uids)), timeout=5)
    ioc.wait_for(P + "AP1:Y1:Data0", lambda v: np.allclose(v, padded(2 * u + 0.5 for u in uids)),
                 timeout=5)


def test_reset_and_a_restarted_unique_id_clear_the_cache(ioc):
    acquire(ioc, 2)
    ioc.ctx.put(P + "AP1:X:DataSelect", -1, wait=True, timeout=5)
    ioc.wait_for(P + "AP1:NPts", lambda v: v > 0)
    ioc.ctx.put(P + "AP1:Reset", 1, wait=True, timeout=5)
    ioc.wait_for(P + "AP1:NPts", lambda v: v == 0)
    ioc.wait_for(P + "AP1:X:Data", lambda v: len(v) == 0)
    (uid, _), = acquire(ioc, 1)
    ioc.wait_for(P + "AP1:NPts", lambda v: v == 1)
    ioc.wait_for(P + "AP1:X:Data", lambda v: np.allclose(v, [uid] * CACHE), timeout=5)
    assert ioc.ctx.get(P + "AP1:X:DataLabel", timeout=5) == "UID", "selection kept"
    # A new acquisition whose uniqueIds start again clears the cache too.
    acquire(ioc, 2)
    ioc.wait_for(P + "AP1:NPts", lambda v: v == 3)
    ioc.ctx.put(P + "cam1:ArrayCounter", 0, wait=True, timeout=5)
    frames = acquire(ioc, 1)
    assert frames[0][0] <= uid, frames
    ioc.wait_for(P + "AP1:NPts", lambda v: v == 1)
    ioc.wait_for(P + "AP1:X:Data", lambda v: np.allclose(v, [frames[0][0]] * CACHE), timeout=5)
