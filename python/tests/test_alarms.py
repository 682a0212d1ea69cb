"""Alarms as areaDetector's templates raise them, seen by the clients operators use:

- a file write that fails for lack of space (the TIFF writer aimed at /dev/full, which answers
  every write with ENOSPC) makes `WriteStatus` MAJOR/STATE over Channel Access (`.SEVR`,
  `.STAT`, and the severity of a DBR_TIME read) and pvAccess (`alarm.severity`, with the
  menu entry as `alarm.message`); a good write clears it on both;
- a plugin that drops frames (queue full) shows `DroppedArrays_RBV` MINOR until it is reset;
- a pvadriver whose head IOC is killed shows `PvConnection_RBV` MAJOR ("Down").

Loopback only (netenv.py, with per-test free ports).
"""

import signal

from interop import require
from pva_util import NdflowIoc, enum_index
from pyepics_client import run_pyepics

require("epics")

P = "AL:"

CONFIG = """
prefix = "AL:"

[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = 256
MaxSizeY = 256
DataType = "UInt16"
ImageMode = "Single"
AcquireTime = 0.0
AcquirePeriod = 0.0

[[port]]
name = "TIFF1"
type = "tiff"
prefix = "TIFF1:"
NDArrayPort = "SIM1"
BlockingCallbacks = "Yes"
FilePath = "/dev/"
FileName = "full"
FileTemplate = "%s%s"
AutoSave = "Yes"

[[port]]
name = "SLOW1"
type = "tiff"
prefix = "SLOW1:"
NDArrayPort = "SIM1"
QueueSize = 1
FilePath = "{DIR}"
FileName = "burst"
FileTemplate = "%s%s_%6.6d.tif"
AutoIncrement = "Yes"
AutoSave = "Yes"
EnableCallbacks = "Disable"
"""

def ca_read(ioc, code):
    return run_pyepics(ioc, code, P)


READ_WRITE_STATUS = """
pv = epics.PV(P + "TIFF1:WriteStatus", form="time")
pv.wait_for_connection(5)
v = pv.get_with_metadata(form="time", timeout=5)
out["severity"] = v["severity"]
out["status"] = v["status"]
out["sevr"] = epics.caget(P + "TIFF1:WriteStatus.SEVR", as_string=True, timeout=5)
out["stat"] = epics.caget(P + "TIFF1:WriteStatus.STAT", as_string=True, timeout=5)
"""


def pva_alarm(ioc, pv):
    v = ioc.raw.get(pv, timeout=5)
    return v.alarm.severity, v.alarm.message


def test_write_error_is_major_until_a_good_write(ndflow_bin, tmp_path):
    ioc = NdflowIoc(ndflow_bin, tmp_path, CONFIG.replace("{DIR}", str(tmp_path) + "/"))
    try:
        ioc.wait_for(P + "cam1:ArrayCounter_RBV", lambda v: v == 0)
        assert pva_alarm(ioc, P + "TIFF1:WriteStatus") == (0, "")
        ioc.ctx.put(P + "cam1:Acquire", 1, wait=True, timeout=10)
        ioc.wait_for(P + "TIFF1:WriteStatus", lambda v: enum_index(v) == 1)
        assert "No space left on device" in ioc.ctx.get(P + "TIFF1:WriteMessage")
        assert pva_alarm(ioc, P + "TIFF1:WriteStatus") == (2, "Write error")
        got = ca_read(ioc, READ_WRITE_STATUS)
        assert got == {"severity": 2, "status": 7, "sevr": "MAJOR", "stat": "STATE"}, got

        # A good write clears it.
        ioc.ctx.put(P + "TIFF1:FilePath", str(tmp_path) + "/", wait=True)
        ioc.ctx.put(P + "TIFF1:FileName", "ok", wait=True)
        ioc.ctx.put(P + "cam1:Acquire", 1, wait=True, timeout=10)
        ioc.wait_for(P + "TIFF1:WriteStatus", lambda v: enum_index(v) == 0)
        assert (tmp_path / "ok").stat().st_size > 256 * 256 * 2
        assert pva_alarm(ioc, P + "TIFF1:WriteStatus") == (0, "")
        got = ca_read(ioc, READ_WRITE_STATUS)
        assert got == {"severity": 0, "status": 0, "sevr": "NO_ALARM", "stat": "NO_ALARM"}, got
    finally:
        ioc.close()


def test_dropped_frames_alarm_until_reset(ndflow_bin, tmp_path):
    ioc = NdflowIoc(ndflow_bin, tmp_path, CONFIG.replace("{DIR}", str(tmp_path) + "/"))
    try:
        ioc.wait_for(P + "cam1:ArrayCounter_RBV", lambda v: v == 0)
        slow = P + "SLOW1:"
        assert pva_alarm(ioc, slow + "DroppedArrays_RBV") == (0, "")
        # A burst of frames into a one-deep queue of a writer: most are dropped.
        ioc.ctx.put(slow + "EnableCallbacks", 1, wait=True)
        ioc.ctx.put(P + "TIFF1:EnableCallbacks", 0, wait=True)
        ioc.ctx.put(P + "cam1:ImageMode", "Multiple", wait=True)
        ioc.ctx.put(P + "cam1:NumImages", 300, wait=True)
        ioc.ctx.put(P + "cam1:Acquire", 1, wait=True, timeout=30)
        dropped = ioc.wait_for(slow + "DroppedArrays_RBV", lambda v: v > 0)
        sev, msg = pva_alarm(ioc, slow + "DroppedArrays_RBV")
        assert (sev, msg) == (1, "HIGH"), (dropped, sev, msg)
        # The setpoint record carries no alarm; only the readback does.
        assert pva_alarm(ioc, slow + "DroppedArrays") == (0, "")
        # EnableCallbacks_RBV: MINOR when enabled, as NDPluginBase.template declares it.
        assert pva_alarm(ioc, slow + "EnableCallbacks_RBV") == (1, "Enable")
        ioc.ctx.put(slow + "DroppedArrays", 0, wait=True)
        ioc.wait_for(slow + "DroppedArrays_RBV", lambda v: v == 0)
        assert pva_alarm(ioc, slow + "DroppedArrays_RBV") == (0, "")
        got = ca_read(
            ioc,
            """
            out["sevr"] = epics.caget(P + "SLOW1:DroppedArrays_RBV.SEVR", as_string=True, timeout=5)
            out["cb"] = epics.caget(P + "SLOW1:EnableCallbacks_RBV.SEVR", as_string=True, timeout=5)
            """,
        )
        assert got == {"sevr": "NO_ALARM", "cb": "MINOR"}, got

        # QueueFree's LOW limit follows QueueSize (a quarter of it, truncated: a longin's
        # limits are integers), LOLO is 0: as fields and as DBR_CTRL's warning and alarm limits.
        limits = """
            q = P + "SLOW1:QueueFree"
            out["low"] = epics.caget(q + ".LOW", timeout=5)
            out["lolo"] = epics.caget(q + ".LOLO", timeout=5)
            pv = epics.PV(q)
            pv.wait_for_connection(5)
            c = pv.get_ctrlvars(timeout=5)
            out["ctrl"] = [c["lower_warning_limit"], c["lower_alarm_limit"]]
            """
        assert ca_read(ioc, limits) == {"low": 0.0, "lolo": 0.0, "ctrl": [0, 0]}
        ioc.ctx.put(slow + "QueueSize", 22, wait=True)
        ioc.wait_for(slow + "QueueFree", lambda v: v == 22)
        assert ca_read(ioc, limits) == {"low": 5.0, "lolo": 0.0, "ctrl": [5, 0]}
        # And over pvAccess, as QSRV serves a longin's limits: valueAlarm.
        va = ioc.raw.get(slow + "QueueFree", timeout=5).valueAlarm
        got = (va.active, va.lowWarningLimit, va.lowAlarmLimit, va.lowWarningSeverity,
               va.lowAlarmSeverity, va.highAlarmSeverity)
        assert got == (True, 5.0, 0.0, 1, 2, 0), got
    finally:
        ioc.close()


HEAD = """
prefix = "HD:"
[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = 32
MaxSizeY = 32
ImageMode = "Continuous"
AcquirePeriod = 0.02
Acquire = 1

[[port]]
name = "PVA1"
type = "pva"
prefix = "Pva1:"
NDArrayPort = "SIM1"
"""

TAIL = """
prefix = "TL:"
[[port]]
name = "PVAD1"
type = "pvadriver"
prefix = "cam1:"
PvName = "HD:Pva1:Image"
ImageMode = "Continuous"
Acquire = 1
"""


def test_killed_head_ioc_makes_the_pvadriver_connection_alarm(ndflow_bin, tmp_path):
    head_dir, tail_dir = tmp_path / "head", tmp_path / "tail"
    head_dir.mkdir()
    tail_dir.mkdir()
    head = NdflowIoc(ndflow_bin, head_dir, HEAD)
    tail = None
    try:
        head.wait_for("HD:cam1:ArrayCounter_RBV", lambda v: v > 0)
        # The tail's client asks the head's server directly (no UDP search needed).
        tail = NdflowIoc(
            ndflow_bin,
            tail_dir,
            TAIL,
            extra_env={"EPICS_PVA_NAME_SERVERS": f"127.0.0.1:{head.tcp_port}"},
        )
        tail.wait_for("TL:cam1:PvConnection_RBV", lambda v: enum_index(v) == 1)
        tail.wait_for("TL:cam1:ArrayCounter_RBV", lambda v: v > 0)
        assert pva_alarm(tail, "TL:cam1:PvConnection_RBV") == (0, "")
        head.proc.send_signal(signal.SIGKILL)
        head.proc.wait(timeout=10)
        tail.wait_for("TL:cam1:PvConnection_RBV", lambda v: enum_index(v) == 0)
        assert pva_alarm(tail, "TL:cam1:PvConnection_RBV") == (2, "Down")
        got = ca_read(
            tail,
            'out["sevr"] = epics.caget("TL:cam1:PvConnection_RBV.SEVR", as_string=True, timeout=5)',
        )
        assert got == {"sevr": "MAJOR"}, got
    finally:
        if tail is not None:
            tail.close()
        head.close()
