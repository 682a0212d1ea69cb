"""The put log (`ndflow run --put-log FILE`): every accepted client write, over pvAccess (p4p)
and Channel Access (pyepics), is one line with the time, protocol, user@host, PV and old ->
new value; a refused write is not in it. Loopback only (netenv.py, free ports per test)."""

import getpass
import re

from interop import require
from pva_util import NdflowIoc
from pyepics_client import run_pyepics

require("epics")

CONFIG = """
prefix = "PL:"

[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = 64
MaxSizeY = 64
AcquireTime = 0.001

[[port]]
name = "ROI1"
type = "roi"
prefix = "ROI1:"
NDArrayPort = "SIM1"
"""


def test_accepted_writes_are_logged_with_who_and_what(ndflow_bin, tmp_path):
    log = tmp_path / "puts.log"
    ioc = NdflowIoc(ndflow_bin, tmp_path, CONFIG, args=("--put-log", str(log), "--no-state"))
    try:
        ioc.wait_for("PL:cam1:ArrayCounter_RBV", lambda v: v == 0)
        ioc.ctx.put("PL:cam1:AcquireTime", 0.25, wait=True)
        ioc.ctx.put("PL:cam1:ImageMode", "Multiple", wait=True)
        try:
            ioc.ctx.put("PL:ROI1:MinX", -5, wait=True)  # refused: below 0
        except Exception:
            pass
        run_pyepics(
            ioc,
            """
            assert epics.caput("PL:ROI1:MinX", 7, wait=True, timeout=5) == 1
            assert epics.caput("PL:cam1:AcquireTime", 0.5, wait=True, timeout=5) == 1
            """,
        )
    finally:
        ioc.close()
    lines = log.read_text().splitlines()
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
    user = re.escape(getpass.getuser())
    want = [
        rf"{stamp} pva {user}@127\.0\.0\.1 PL:cam1:AcquireTime 0\.001 -> 0\.25",
        rf'{stamp} pva {user}@127\.0\.0\.1 PL:cam1:ImageMode "Continuous" -> "Multiple"',
        rf"{stamp} ca {user}@\S+ PL:ROI1:MinX 0 -> 7",
        rf"{stamp} ca {user}@\S+ PL:cam1:AcquireTime 0\.25 -> 0\.5",
    ]
    assert len(lines) == len(want), lines
    for line, pattern in zip(lines, want):
        assert re.fullmatch(pattern, line), (line, pattern)
