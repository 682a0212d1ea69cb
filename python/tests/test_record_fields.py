"""Record fields and dynamic limits, as areaDetector's own screens use them:

- the ROI's MinX/SizeX (and Y), Stats' CursorX/Y and an Overlay's Position/Center/Size take
  their high limit (HOPR, and DBR_CTRL's limits) from the input size, as the templates'
  dfanout records set them, so a display manager's slider spans the image; `ROI1:MaxX` shows
  that size. Over Channel Access (`.HOPR`, DBR_CTRL) and pvAccess (`display`/`control`);
- `.SCAN`: `I/O Intr` for readbacks, `Passive` for setpoints; an input put to `Passive` keeps
  its value until `.PROC` is written; a periodic SCAN updates a monitor at most once a period;
- `.DISA`: a disabled output takes a put and changes nothing; `.DISA` reads 0 by default
  (ophyd's EigerDetectorCam reads `DataType_RBV.DISA`);
- `.PROC` of an output applies its value again;
- the same fields as their own PVs over pvAccess (`NAME.FIELD`, as QSRV serves them).

Loopback only (netenv.py, with per-test free ports).
"""

import time

from interop import require
from pva_util import NdflowIoc, enum_index
from pyepics_client import run_pyepics

require("epics")

P = "RF:"

CONFIG = """
prefix = "RF:"

[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = 320
MaxSizeY = 200
DataType = "UInt8"
ImageMode = "Single"
AcquireTime = 0.0
AcquirePeriod = 0.0

[[port]]
name = "ROI1"
type = "roi"
prefix = "ROI1:"
NDArrayPort = "SIM1"
BlockingCallbacks = "Yes"

[[port]]
name = "STATS1"
type = "stats"
prefix = "Stats1:"
NDArrayPort = "SIM1"
BlockingCallbacks = "Yes"
ComputeProfiles = "Yes"

[[port]]
name = "OVER1"
type = "overlay"
prefix = "Over1:"
NDArrayPort = "SIM1"
BlockingCallbacks = "Yes"
"""


def test_limits_follow_the_input_size(ndflow_bin, tmp_path):
    ioc = NdflowIoc(ndflow_bin, tmp_path, CONFIG)
    try:
        ioc.wait_for(P + "cam1:ArrayCounter_RBV", lambda v: v == 0)
        assert ioc.ctx.get(P + "ROI1:MaxX") == 0
        ioc.ctx.put(P + "cam1:Acquire", 1, wait=True, timeout=10)
        ioc.wait_for(P + "ROI1:MaxX", lambda v: v == 320)
        ioc.wait_for(P + "ROI1:MaxY", lambda v: v == 200)
        ioc.wait_for(P + "Stats1:MaxSizeX", lambda v: v == 320)
        got = run_pyepics(ioc, """
            for n in ("ROI1:MinX", "ROI1:SizeX", "ROI1:MinY", "ROI1:SizeY", "Stats1:CursorX",
                      "Over1:1:PositionX", "Over1:1:CenterY", "ROI1:MinX_RBV"):
                pv = epics.PV(P + n)
                pv.wait_for_connection(5)
                c = pv.get_ctrlvars(timeout=5)
                out[n] = [epics.caget(P + n + ".HOPR", timeout=5), c["upper_disp_limit"],
                          c["upper_ctrl_limit"], c["lower_ctrl_limit"]]
            """, P)
        assert got == {
            "ROI1:MinX": [320.0, 320, 320, 0],
            "ROI1:SizeX": [320.0, 320, 320, 0],
            "ROI1:MinY": [200.0, 200, 200, 0],
            "ROI1:SizeY": [200.0, 200, 200, 0],
            "Stats1:CursorX": [320.0, 320, 320, 0],
            "Over1:1:PositionX": [320.0, 320, 320, 0],
            "Over1:1:CenterY": [200.0, 200, 200, 0],
            "ROI1:MinX_RBV": [320.0, 320, 320, 0],
        }, got
        v = ioc.raw.get(P + "ROI1:SizeX", timeout=5)
        assert (v.display.limitHigh, v.control.limitHigh) == (320.0, 320.0)
        assert ioc.ctx.get(P + "ROI1:MinX.HOPR") == 320.0

        # A smaller frame: the limits follow, and a monitor sees the new limit.
        seen = []
        sub = ioc.raw.monitor(P + "ROI1:MinX", lambda v: seen.append(v.display.limitHigh))
        try:
            ioc.ctx.put(P + "cam1:SizeX", 100, wait=True)
            ioc.ctx.put(P + "cam1:Acquire", 1, wait=True, timeout=10)
            ioc.wait_for(P + "ROI1:MaxX", lambda v: v == 100)
            deadline = time.time() + 5
            while 100.0 not in seen and time.time() < deadline:
                time.sleep(0.05)
        finally:
            sub.close()
        assert 100.0 in seen, seen
        assert run_pyepics(ioc, 'out["h"] = epics.caget(P + "ROI1:MinX.HOPR", timeout=5)', P) \
            == {"h": 100.0}
    finally:
        ioc.close()


def test_scan_proc_and_disa_over_channel_access(ndflow_bin, tmp_path):
    puts = tmp_path / "puts.log"
    ioc = NdflowIoc(ndflow_bin, tmp_path, CONFIG, args=("--put-log", str(puts)))
    try:
        ioc.wait_for(P + "cam1:ArrayCounter_RBV", lambda v: v == 0)
        got = run_pyepics(ioc, """
            g = lambda n, **k: epics.caget(P + n, timeout=5, **k)
            put = lambda n, v: epics.caput(P + n, v, wait=True, timeout=5)
            out["scan"] = [g("ROI1:MinX_RBV.SCAN", as_string=True),
                           g("ROI1:MinX.SCAN", as_string=True)]
            out["disa"] = [g("cam1:DataType_RBV.DISA"), g("ROI1:MinX.DISA"),
                           g("ROI1:MinX.DISV"), g("ROI1:MinX.UDF"), g("ROI1:MinX.TSE")]
            out["rtyp"] = g("ROI1:MinX.RTYP")

            # Passive: the readback keeps its value until processed.
            put("ROI1:MinX_RBV.SCAN", "Passive")
            out["scan_after"] = g("ROI1:MinX_RBV.SCAN", as_string=True)
            put("ROI1:MinX", 7)
            time.sleep(0.5)
            out["held"] = [g("ROI1:MinX"), g("ROI1:MinX_RBV")]
            put("ROI1:MinX_RBV.PROC", 1)
            time.sleep(0.2)
            out["processed"] = g("ROI1:MinX_RBV")
            put("ROI1:MinX_RBV.SCAN", "I/O Intr")

            # Disabled: a put is taken and changes nothing.
            put("ROI1:MinY.DISA", 1)
            out["disabled_put"] = put("ROI1:MinY", 9)
            time.sleep(0.3)
            out["disabled"] = [g("ROI1:MinY"), g("ROI1:MinY_RBV")]
            put("ROI1:MinY.DISA", 0)
            put("ROI1:MinY", 9)
            time.sleep(0.3)
            out["enabled"] = g("ROI1:MinY_RBV")

            # A SCAN that is not a choice is refused: the field keeps its value.
            epics.caput(P + "ROI1:MinX_RBV.SCAN", 42, wait=True, timeout=5)
            out["bad_scan"] = g("ROI1:MinX_RBV.SCAN", as_string=True)
            """, P)
        assert got["scan"] == ["I/O Intr", "Passive"], got
        assert got["disa"] == [0, 0, 1, 0, 0], got
        assert got["rtyp"] == "longout"
        assert got["scan_after"] == "Passive"
        assert got["held"] == [7, 0], got
        assert got["processed"] == 7, got
        assert got["disabled_put"] == 1 and got["disabled"] == [0, 0], got
        assert got["enabled"] == 9, got
        assert got["bad_scan"] == "I/O Intr", got
        # The put log names the field writes (accepted ones).
        assert "ROI1:MinX_RBV.SCAN 2 -> 0" in puts.read_text()
    finally:
        ioc.close()


def test_fields_over_pvaccess(ndflow_bin, tmp_path):
    puts = tmp_path / "puts.log"
    ioc = NdflowIoc(ndflow_bin, tmp_path, CONFIG, args=("--put-log", str(puts)))
    try:
        ioc.wait_for(P + "cam1:ArrayCounter_RBV", lambda v: v == 0)
        ctx = ioc.ctx
        assert ctx.get(P + "ROI1:MinX.RTYP") == "longout"
        assert ctx.get(P + "ROI1:MinX_RBV.RTYP") == "longin"
        assert ctx.get(P + "ROI1:MinX.NAME") == P + "ROI1:MinX"
        assert ctx.get(P + "ROI1:MinX.DESC").startswith("First input pixel")
        assert enum_index(ctx.get(P + "cam1:ArrayCounter_RBV.SCAN")) == 2
        assert ctx.get(P + "cam1:DataType_RBV.DISA") == 0
        assert ctx.get(P + "cam1:DataType.SEVR").raw.value.choices[0] == "NO_ALARM"

        # A periodic SCAN: a monitor of a fast counter updates about once a second.
        ctx.put(P + "cam1:ArrayCounter_RBV.SCAN", "1 second", wait=True)
        ctx.put(P + "cam1:ImageMode", "Continuous", wait=True)
        seen = []
        sub = ctx.monitor(P + "cam1:ArrayCounter_RBV", lambda v: seen.append(int(v)))
        try:
            ctx.put(P + "cam1:Acquire", 1, wait=False)
            time.sleep(3.2)
        finally:
            sub.close()
            ctx.put(P + "cam1:Acquire", 0, wait=True, timeout=10)
        counter = ctx.get(P + "cam1:ArrayCounter")
        # The first update is the subscription's; then one a second (at most 4 in 3.2 s).
        assert 2 <= len(seen) <= 5, seen
        assert seen == sorted(seen) and seen[-1] > 100, (seen, counter)

        # PROC of an output applies its value again: AcquirePeriod.PROC keeps the value.
        ctx.put(P + "cam1:AcquirePeriod", 0.25, wait=True)
        ctx.put(P + "cam1:AcquirePeriod.PROC", 1, wait=True)
        assert ctx.get(P + "cam1:AcquirePeriod_RBV") == 0.25
        assert "cam1:AcquirePeriod.PROC 0 -> 1" in puts.read_text()
    finally:
        ioc.close()


def test_asyn_record_fields(ndflow_bin, tmp_path):
    """`AsynIO` (each port's asyn record) answers the fields the screens show (`.CNCT`:
    connected) and the asyn record's own screen writes (enable, trace bits), over both
    protocols; other records have no asyn fields."""
    ioc = NdflowIoc(ndflow_bin, tmp_path, CONFIG)
    try:
        ioc.wait_for(P + "cam1:ArrayCounter_RBV", lambda v: v == 0)
        got = run_pyepics(ioc, """
            g = lambda n, **k: epics.caget(P + n, timeout=5, **k)
            put = lambda n, v: epics.caput(P + n, v, wait=True, timeout=5)
            out["cnct"] = [g("cam1:AsynIO.CNCT", as_string=True), g("ROI1:AsynIO.CNCT")]
            out["enbl"] = g("Stats1:AsynIO.ENBL", as_string=True)
            out["rtyp"] = g("ROI1:AsynIO.RTYP")
            put("ROI1:AsynIO.TB1", 1)
            out["tmsk"] = g("ROI1:AsynIO.TMSK")
            put("ROI1:AsynIO.TMSK", 0x11)
            out["bits"] = [g("ROI1:AsynIO.TB0"), g("ROI1:AsynIO.TB1"), g("ROI1:AsynIO.TB4")]
            put("ROI1:AsynIO.ENBL", "Disable")
            out["enbl2"] = g("ROI1:AsynIO.ENBL", as_string=True)
            out["other"] = g("cam1:AsynIO.ENBL", as_string=True)
            # Not an asyn record: no CNCT field.
            out["none"] = epics.PV(P + "ROI1:MinX.CNCT").wait_for_connection(timeout=1.5)
            """, P)
        assert got["cnct"] == ["Connect", 1], got
        assert got["enbl"] == "Enable" and got["rtyp"] == "asyn", got
        assert got["tmsk"] == 3, got  # asynTRACE_ERROR by default, plus bit 1
        assert got["bits"] == [1, 0, 1], got
        assert got["enbl2"] == "Disable" and got["other"] == "Enable", got
        assert got["none"] is False, got

        ctx = ioc.ctx
        assert enum_index(ctx.get(P + "ROI1:AsynIO.ENBL")) == 0, "CA's write shows over pva"
        assert ctx.get(P + "cam1:AsynIO.CNCT").raw.value.choices == [
            "Disconnect", "Connect"]
        ctx.put(P + "cam1:AsynIO.TSIZ", 200, wait=True)
        assert ctx.get(P + "cam1:AsynIO.TSIZ") == 200
    finally:
        ioc.close()
