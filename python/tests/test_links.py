"""Input links of link records (`.DOL`/`.OMSL`), as areaDetector's NDOverlayN screen sets
them: an overlay's `PositionXLink.DOL` names a PV and the overlay follows it.

- a PV of the same IOC (`Stats1:CentroidX_RBV`): PositionX follows the centroid frame by
  frame, set over Channel Access, read back over pvAccess;
- `.OMSL` supervisory stops following; a constant DOL applies once;
- a PV of another IOC, over Channel Access: followed; when that IOC goes away the link
  record alarms (LINK/INVALID), and it recovers when the IOC is back.

Loopback only (netenv.py, with per-test free ports).
"""

import time

from interop import require
from pva_util import NdflowIoc, enum_index
from pyepics_client import run_pyepics

require("epics")

P = "LK:"

CONFIG = """
prefix = "LK:"

[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = 256
MaxSizeY = 128
DataType = "UInt16"
SimMode = "Peaks"
PeakWidthX = 4
PeakWidthY = 4
PeakStartX = 40
PeakStartY = 60
ImageMode = "Single"
AcquireTime = 0.0
AcquirePeriod = 0.0

[[port]]
name = "STATS1"
type = "stats"
prefix = "Stats1:"
NDArrayPort = "SIM1"
BlockingCallbacks = "Yes"
ComputeCentroid = "Yes"

[[port]]
name = "OVER1"
type = "overlay"
prefix = "Over1:"
NDArrayPort = "SIM1"
BlockingCallbacks = "Yes"
"""

OTHER = """
prefix = "EXT:"

[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = 16
MaxSizeY = 16
"""


def acquire_at(ioc, x):
    """One frame with the peak at x; returns the centroid Stats computed."""
    ctx = ioc.ctx
    ctx.put(P + "cam1:PeakStartX", x, wait=True)
    ctx.put(P + "cam1:Reset", 1, wait=True)
    n = ctx.get(P + "Stats1:ArrayCounter_RBV")
    ctx.put(P + "cam1:Acquire", 1, wait=True, timeout=10)
    ioc.wait_for(P + "Stats1:ArrayCounter_RBV", lambda v: v > n)
    return ctx.get(P + "Stats1:CentroidX_RBV")


def test_overlay_follows_a_centroid_of_this_ioc(ndflow_bin, tmp_path):
    puts = tmp_path / "puts.log"
    ioc = NdflowIoc(ndflow_bin, tmp_path, CONFIG, args=("--put-log", str(puts)))
    try:
        ioc.wait_for(P + "cam1:ArrayCounter_RBV", lambda v: v == 0)
        link = P + "Over1:1:PositionXLink"
        got = run_pyepics(ioc, """
            out["dol"] = epics.caget(P + "Over1:1:PositionXLink.DOL", timeout=5)
            out["omsl"] = epics.caget(P + "Over1:1:PositionXLink.OMSL", as_string=True, timeout=5)
            out["put"] = epics.caput(P + "Over1:1:PositionXLink.DOL",
                                     P + "Stats1:CentroidX_RBV CP MS", wait=True, timeout=5)
            out["dol2"] = epics.caget(P + "Over1:1:PositionXLink.DOL", timeout=5)
            # Only link records have the link fields.
            out["none"] = epics.PV(P + "Over1:1:PositionX.DOL").wait_for_connection(timeout=1.5)
            """, P)
        assert got["dol"] == "" and got["omsl"] == "closed_loop", got
        assert got["put"] == 1, got
        assert got["dol2"] == P + "Stats1:CentroidX_RBV CP MS", got
        assert got["none"] is False, got
        assert ioc.ctx.get(link + ".DOL") == P + "Stats1:CentroidX_RBV CP MS"
        assert f"Over1:1:PositionXLink.DOL" in puts.read_text()

        # Frame by frame: each new centroid reaches PositionX (truncated, as EPICS converts).
        for x in (50, 120, 200):
            c = acquire_at(ioc, x)
            assert abs(c - x) < 1.5, (c, x)
            ioc.wait_for(P + "Over1:1:PositionX_RBV", lambda v, c=c: v == int(c))
            assert ioc.ctx.get(link) == int(c)

        # Supervisory: the link stops following; a client's write stands.
        ioc.ctx.put(link + ".OMSL", "supervisory", wait=True)
        assert enum_index(ioc.ctx.get(link + ".OMSL")) == 0
        ioc.ctx.put(link, 7, wait=True)
        acquire_at(ioc, 90)
        time.sleep(0.3)
        assert ioc.ctx.get(P + "Over1:1:PositionX_RBV") == 7

        # A constant is applied once; a pvAccess link is refused with the reason.
        ioc.ctx.put(link + ".OMSL", "closed_loop", wait=True)
        ioc.ctx.put(link + ".DOL", "33", wait=True)
        ioc.wait_for(P + "Over1:1:PositionX_RBV", lambda v: v == 33)
        try:
            ioc.ctx.put(link + ".DOL", "pva://X:Y", wait=True)
            refused = ""
        except Exception as e:  # the server's error reaches the client
            refused = str(e)
        assert "not supported" in refused, refused
        assert ioc.ctx.get(link + ".DOL") == "33"
    finally:
        ioc.close()


def test_link_to_another_ioc_alarms_and_recovers(ndflow_bin, tmp_path):
    (tmp_path / "other").mkdir()
    other = NdflowIoc(ndflow_bin, tmp_path / "other", OTHER)
    ioc = None
    try:
        other.wait_for("EXT:cam1:AcquireTime_RBV", lambda v: True)
        other.ctx.put("EXT:cam1:AcquireTime", 12.0, wait=True)
        env = {"EPICS_CA_ADDR_LIST": f"127.0.0.1:{other.ca_port}",
               "EPICS_CA_AUTO_ADDR_LIST": "NO"}
        ioc = NdflowIoc(ndflow_bin, tmp_path, CONFIG, extra_env=env)
        ioc.wait_for(P + "cam1:ArrayCounter_RBV", lambda v: v == 0)
        link = P + "Over1:2:SizeXLink"
        ioc.ctx.put(link + ".DOL", "EXT:cam1:AcquireTime_RBV CP", wait=True)
        ioc.wait_for(P + "Over1:2:SizeX_RBV", lambda v: v == 12)
        other.ctx.put("EXT:cam1:AcquireTime", 21.7, wait=True)
        ioc.wait_for(P + "Over1:2:SizeX_RBV", lambda v: v == 21)
        assert ioc.raw.get(link).alarm.severity == 0

        # The other IOC goes away: the link record alarms (INVALID, LINK), over both protocols.
        other.close()
        ioc.wait_for(link, lambda v: v.severity == 3)
        alarm = ioc.raw.get(link).alarm
        assert (alarm.severity, alarm.message) == (3, "LINK"), alarm
        got = run_pyepics(ioc, """
            pv = epics.PV(P + "Over1:2:SizeXLink", form="ctrl")
            pv.wait_for_connection(timeout=5)
            pv.get(timeout=5)
            out["sevr"] = pv.severity
            out["stat"] = pv.status
            """, P)
        assert got == {"sevr": 3, "stat": 14}, got

        # Back on the same port: the link reconnects (it retries every second).
        (tmp_path / "again").mkdir()
        port = str(other.ca_port)
        other = NdflowIoc(ndflow_bin, tmp_path / "again", OTHER, extra_env={
            "EPICS_CA_SERVER_PORT": port, "EPICS_CAS_SERVER_PORT": port})
        other.wait_for("EXT:cam1:AcquireTime_RBV", lambda v: True)
        other.ctx.put("EXT:cam1:AcquireTime", 5.0, wait=True)
        ioc.wait_for(P + "Over1:2:SizeX_RBV", lambda v: v == 5, timeout=30)
        ioc.wait_for(link, lambda v: v.severity == 0)
    finally:
        if ioc is not None:
            ioc.close()
        other.close()


SHUTTER = """
prefix = "SH:"

[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = 16
MaxSizeY = 16
ShutterMode = "Detector output"
"""


def test_epics_pv_shutter_writes_and_reads_another_ioc(ndflow_bin, tmp_path):
    """ShutterMode "EPICS PV": ShutterOpenEPICS/ShutterCloseEPICS write their OCAL to the PV
    their .OUT names when the driver opens/closes the shutter, and ShutterStatusEPICS_RBV
    shows the state its .INP reads (ZRVL closed, ONVL open), as ADBase's records do. The
    "shutter" is another IOC's ShutterControl/ShutterStatus_RBV."""
    (tmp_path / "shutter").mkdir()
    shutter = NdflowIoc(ndflow_bin, tmp_path / "shutter", SHUTTER)
    ioc = None
    try:
        shutter.wait_for("SH:cam1:ShutterStatus_RBV", lambda v: True)
        env = {"EPICS_CA_ADDR_LIST": f"127.0.0.1:{shutter.ca_port}",
               "EPICS_CA_AUTO_ADDR_LIST": "NO"}
        ioc = NdflowIoc(ndflow_bin, tmp_path, CONFIG.replace(
            'ImageMode = "Single"', 'ImageMode = "Single"\nShutterMode = "EPICS PV"'),
            extra_env=env)
        ioc.wait_for(P + "cam1:ArrayCounter_RBV", lambda v: v == 0)
        got = run_pyepics(ioc, """
            g = lambda n, **k: epics.caget(P + n, timeout=5, **k)
            put = lambda n, v: epics.caput(P + n, v, wait=True, timeout=5)
            out["defaults"] = [g("cam1:ShutterOpenEPICS.OCAL"), g("cam1:ShutterCloseEPICS.OCAL"),
                               g("cam1:ShutterStatusEPICS_RBV.ZRVL"),
                               g("cam1:ShutterStatusEPICS_RBV.ONVL"), g("cam1:ShutterOpenEPICS.OUT")]
            out["puts"] = [put("cam1:ShutterOpenEPICS.OUT", "SH:cam1:ShutterControl PP"),
                           put("cam1:ShutterCloseEPICS.OUT", "SH:cam1:ShutterControl PP"),
                           put("cam1:ShutterStatusEPICS_RBV.INP", "SH:cam1:ShutterStatus_RBV CP MS")]
            out["out"] = g("cam1:ShutterOpenEPICS.OUT")
            """, P)
        assert got["defaults"] == ["1", "0", 0, 1, ""], got
        assert got["puts"] == [1, 1, 1], got
        assert got["out"] == "SH:cam1:ShutterControl PP", got

        ctx = ioc.ctx
        ctx.put(P + "cam1:ShutterControl", "Open", wait=True)
        shutter.wait_for("SH:cam1:ShutterControl", lambda v: enum_index(v) == 1)
        shutter.wait_for("SH:cam1:ShutterStatus_RBV", lambda v: enum_index(v) == 1)
        ioc.wait_for(P + "cam1:ShutterStatusEPICS_RBV", lambda v: enum_index(v) == 1)

        # Someone closes the real shutter: the status shows it, whatever the driver thinks.
        shutter.ctx.put("SH:cam1:ShutterControl", 0, wait=True)
        ioc.wait_for(P + "cam1:ShutterStatusEPICS_RBV", lambda v: enum_index(v) == 0)
        time.sleep(0.3)
        assert enum_index(ctx.get(P + "cam1:ShutterStatusEPICS_RBV")) == 0

        # Open again, then close through the driver: ShutterCloseEPICS writes its 0.
        ctx.put(P + "cam1:ShutterControl", "Close", wait=True)
        ctx.put(P + "cam1:ShutterControl", "Open", wait=True)
        shutter.wait_for("SH:cam1:ShutterStatus_RBV", lambda v: enum_index(v) == 1)
        ioc.wait_for(P + "cam1:ShutterStatusEPICS_RBV", lambda v: enum_index(v) == 1)
        ctx.put(P + "cam1:ShutterControl", "Close", wait=True)
        shutter.wait_for("SH:cam1:ShutterControl", lambda v: enum_index(v) == 0)
        ioc.wait_for(P + "cam1:ShutterStatusEPICS_RBV", lambda v: enum_index(v) == 0)

        # An unreachable shutter: the write fails and ShutterOpenEPICS alarms (LINK).
        ctx.put(P + "cam1:ShutterOpenEPICS.OUT", "NOSUCH:SHUTTER", wait=True)
        ctx.put(P + "cam1:ShutterControl", "Open", wait=True)
        ioc.wait_for(P + "cam1:ShutterOpenEPICS", lambda v: v.severity == 3, timeout=30)
    finally:
        if ioc is not None:
            ioc.close()
        shutter.close()


def test_a_link_longer_than_a_ca_string_goes_through_the_long_form(ndflow_bin, tmp_path):
    """A DBR_STRING holds 39 characters; PV names with their prefix are often longer. As an
    IOC does, `NAME.DOL$` serves the link as a char array: written whole and read back whole
    over Channel Access, it is the same link `.DOL` shows over pvAccess."""
    ioc = NdflowIoc(ndflow_bin, tmp_path, CONFIG)
    try:
        ioc.wait_for(P + "cam1:ArrayCounter_RBV", lambda v: v == 0)
        long_text = P + "Stats1:CentroidX_RBV CP MS NMS " + "x" * 40
        assert len(long_text) > 60
        got = run_pyepics(ioc, f"""
            name = P + "Over1:1:PositionXLink.DOL"
            pv = epics.PV(name + "$")
            pv.wait_for_connection(timeout=5)
            out["type"] = epics.dbr.Name(epics.ca.field_type(pv.chid)).lower()
            out["count"] = pv.nelm
            out["put"] = pv.put({long_text!r}, wait=True, timeout=5)
            out["long"] = epics.caget(name + "$", as_string=True, timeout=5)
            out["short"] = epics.caget(name, timeout=5)
            out["none"] = epics.PV(P + "Over1:1:PositionXLink.OMSL$").wait_for_connection(1.5)
            """, P)
        assert got["type"] == "char" and got["count"] == 1024, got
        assert got["put"] == 1, got
        assert got["long"] == long_text, got
        assert got["short"] == long_text[:39], "DBR_STRING keeps 39 characters"
        assert got["none"] is False, "only text fields have the long form"
        assert ioc.ctx.get(P + "Over1:1:PositionXLink.DOL") == long_text
    finally:
        ioc.close()
