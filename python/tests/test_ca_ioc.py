"""The IOC over Channel Access with the real clients: pyepics (libca, EPICS base's C client)
and caproto (an independent Python implementation). Every parameter is a CA channel with the
native type of its areaDetector record, every DBR family answers, enums and char-waveform
strings go both ways, refused puts change nothing, a put with completion on Acquire returns
after the last frame, monitors post changes, and the image waveform equals the frame.

Loopback only: the IOC and the clients get netenv.py's loopback variables with per-test free
ports (EPICS_CA_SERVER_PORT, EPICS_CA_REPEATER_PORT), set before libca is loaded.
"""

import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from interop import require
from netenv import ca_client_env
from pva_util import NdflowIoc
from pyepics_client import run_pyepics

epics = require("epics")
require("caproto")

P = "CA13:"

CONFIG = """
prefix = "{P}"

[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = 1024
MaxSizeY = 1024
DataType = "UInt16"
ImageMode = "Single"
AcquireTime = 0.0
AcquirePeriod = 0.0

[[port]]
name = "IMAGE1"
type = "stdarrays"
prefix = "image1:"
NDArrayPort = "SIM1"
BlockingCallbacks = "Yes"
ArrayDataType = "UInt16"

[[port]]
name = "STATS1"
type = "stats"
prefix = "Stats1:"
NDArrayPort = "SIM1"

[[port]]
name = "STATS2"
type = "stats"
prefix = "Stats2:"
NDArrayPort = "SIM1"

[[port]]
name = "STATS3"
type = "stats"
prefix = "Stats3:"
NDArrayPort = "SIM1"

[[port]]
name = "STATS4"
type = "stats"
prefix = "Stats4:"
NDArrayPort = "SIM1"

[[port]]
name = "ROI1"
type = "roi"
prefix = "ROI1:"
NDArrayPort = "SIM1"

[[port]]
name = "ROI2"
type = "roi"
prefix = "ROI2:"
NDArrayPort = "SIM1"

[[port]]
name = "TIFF1"
type = "tiff"
prefix = "TIFF1:"
NDArrayPort = "SIM1"
FilePath = "{DIR}"
"""

@pytest.fixture(scope="module")
def ioc(ndflow_bin, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ca_ioc")
    cfg = CONFIG.replace("{P}", P).replace("{DIR}", str(tmp) + "/")
    ioc = NdflowIoc(ndflow_bin, tmp, cfg)
    ioc.wait_for(P + "cam1:ArrayCounter_RBV", lambda v: v == 0)
    yield ioc
    ioc.close()


def run_client(ioc, code, timeout=120):
    """Runs pyepics `code` (which fills the dict `out`) against the IOC; returns `out`."""
    return run_pyepics(ioc, code, P, timeout)


def test_native_types_follow_the_record_types(ioc):
    out = run_client(
        ioc,
        """
        for name in ["cam1:SizeX", "cam1:SizeX_RBV", "cam1:AcquireTime", "cam1:ImageMode",
                     "cam1:ImageMode_RBV", "cam1:Acquire", "cam1:Manufacturer_RBV",
                     "TIFF1:FilePath", "TIFF1:FullFileName_RBV", "TIFF1:NDArrayPort",
                     "image1:ArrayData", "cam1:ArraySize_RBV", "TIFF1:Capture"]:
            pv = epics.PV(P + name)
            assert pv.wait_for_connection(5), name
            # The channel's element count (NELM), not pv.count, which pyepics may set to the
            # length of the data it has received so far (a path shorter than NELM).
            out[name] = [pv.type.replace("time_", ""), epics.ca.element_count(pv.chid)]
            out[name + ".RTYP"] = epics.caget(P + name + ".RTYP")
        """,
    )
    assert out["cam1:SizeX"][0] == "long" and out["cam1:SizeX.RTYP"] == "longout"
    assert out["cam1:SizeX_RBV.RTYP"] == "longin"
    assert out["cam1:AcquireTime"][0] == "double" and out["cam1:AcquireTime.RTYP"] == "ao"
    assert out["cam1:ImageMode"][0] == "enum" and out["cam1:ImageMode.RTYP"] == "mbbo"
    assert out["cam1:ImageMode_RBV.RTYP"] == "mbbi"
    assert out["cam1:Acquire"][0] == "enum" and out["cam1:Acquire.RTYP"] == "bo"
    assert out["cam1:Manufacturer_RBV"][0] == "string"
    assert out["cam1:Manufacturer_RBV.RTYP"] == "stringin"
    assert out["TIFF1:FilePath"][0] == "char" and out["TIFF1:FilePath"][1] >= 256
    assert out["TIFF1:FilePath.RTYP"] == "waveform"
    assert out["TIFF1:FullFileName_RBV"][0] == "char"
    assert out["TIFF1:NDArrayPort"][0] == "string"
    assert out["TIFF1:Capture.RTYP"] == "busy"
    # UInt16 frames as a SHORT waveform (ADCore's NDStdArrays choice), NELM a full frame.
    assert out["image1:ArrayData"] == ["short", 1024 * 1024]
    assert out["cam1:ArraySize_RBV"][0] == "long"  # longin, as NDArrayBase.template


DBR_NAMES = ["cam1:AcquirePeriod", "cam1:SizeX", "cam1:ImageMode", "cam1:Manufacturer_RBV",
             "TIFF1:FilePath", "image1:ArrayData"]


def test_every_dbr_family_answers(ioc):
    out = run_client(
        ioc,
        """
        from epics import dbr
        for name in %r:
            chid = ca.create_channel(P + name)
            assert ca.connect_channel(chid, timeout=5)
            ftype = ca.field_type(chid)
            n = 4 if name.endswith("ArrayData") else None
            for fam, t in [("plain", ftype), ("time", ca.promote_type(chid, use_time=True)),
                           ("ctrl", ca.promote_type(chid, use_ctrl=True))]:
                v = ca.get(chid, ftype=t, count=n)
                out[name + ":fam_" + fam] = repr(v.tolist() if hasattr(v, "tolist") else v)
            ctrl = ca.get_ctrlvars(chid)
            out[name + ":ctrl"] = {k: (v if isinstance(v, (int, float, str)) else list(v) if isinstance(v, (list, tuple)) else repr(v)) for k, v in ctrl.items()}
            out[name + ":ts"] = ca.get_timevars(chid).get("timestamp", 0)
            for t in [dbr.STRING, dbr.DOUBLE, dbr.LONG]:
                try:
                    v = ca.get(chid, ftype=t, count=n)
                    out[name + ":as%%d" %% t] = repr(v.tolist() if hasattr(v, "tolist") else v)
                except Exception as e:
                    out[name + ":as%%d" %% t] = "error " + str(e)
        """ % DBR_NAMES,
    )
    now = time.time()
    assert abs(out["cam1:AcquirePeriod:ts"] - now) < 600
    assert out["cam1:ImageMode:ctrl"]["enum_strs"][:3] == ["Single", "Multiple", "Continuous"]
    assert out["cam1:AcquirePeriod:ctrl"]["precision"] == 3
    # Conversions as RSRV does them: enum → its string, double → string with PREC.
    assert out["cam1:ImageMode:as0"] == repr("Single")
    assert out["cam1:AcquirePeriod:as0"] == repr("0.000")
    assert out["cam1:SizeX:as6"] == repr(1024.0)
    assert out["cam1:ImageMode:as5"] == repr(0)
    for name in DBR_NAMES:
        for fam in ["plain", "time", "ctrl"]:
            assert not out[f"{name}:fam_{fam}"].startswith("None"), (name, fam)
    # STS (and the others again) through caproto, which asks for every family explicitly.
    code = textwrap.dedent(
        """
        import json, sys
        from caproto.threading.client import Context
        from caproto import ChannelType as T
        P = sys.argv[1]
        out = {}
        pvs = Context().get_pvs(*[P + n for n in %r], timeout=10)
        for pv in pvs:
            pv.wait_for_connection(timeout=10)
            native = pv.channel.native_data_type
            for fam in ["", "STS_", "TIME_", "GR_", "CTRL_"]:
                base = native.name
                t = getattr(T, fam + base)
                r = pv.read(data_type=t, data_count=4 if pv.name.endswith("ArrayData") else None)
                out[pv.name + ":" + (fam or "PLAIN")] = [str(r.data[:4].tolist() if hasattr(r.data, "tolist") else r.data[:4]), getattr(r.metadata, "status", None) is not None]
        print("RESULT " + json.dumps(out))
        """ % DBR_NAMES
    )
    env = dict(os.environ)
    env.update(ca_client_env(ioc.ca_port, ioc.ca_repeater))
    p = subprocess.run([sys.executable, "-c", code, P], env=env, capture_output=True, text=True, timeout=60)
    lines = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
    assert p.returncode == 0 and lines, p.stdout + p.stderr
    import json

    got = json.loads(lines[-1][7:])
    assert len(got) == 5 * len(DBR_NAMES)
    for key, (data, has_status) in got.items():
        fam = key.rsplit(":", 1)[1]
        assert has_status == (fam != "PLAIN"), key


def test_puts_enums_strings_and_refusals(ioc):
    out = run_client(
        ioc,
        """
        epics.caput(P + "cam1:ImageMode", 1, wait=True)
        out["mode_by_index"] = epics.caget(P + "cam1:ImageMode_RBV", as_string=True)
        epics.caput(P + "cam1:ImageMode", "Continuous", wait=True)
        out["mode_by_string"] = epics.caget(P + "cam1:ImageMode_RBV", as_string=True)
        epics.caput(P + "cam1:ImageMode", "Single", wait=True)
        path = "/tmp/some/long/directory/name/that/is/longer/than/forty/characters/"
        epics.caput(P + "TIFF1:FilePath", path, wait=True)
        out["path"] = epics.caget(P + "TIFF1:FilePath_RBV", as_string=True)
        epics.caput(P + "cam1:AcquirePeriod", 0.25, wait=True)
        out["period"] = epics.caget(P + "cam1:AcquirePeriod_RBV")
        # Refused: out of range; nothing changes and the put reports failure.
        pv = epics.PV(P + "cam1:SizeX"); pv.wait_for_connection(5)
        before = epics.caget(P + "cam1:SizeX_RBV")
        try:
            r = pv.put(-4, wait=True, timeout=5)
            out["refused"] = repr(r)
        except Exception as e:
            out["refused"] = "raised " + str(e)
        time.sleep(0.2)
        out["size_unchanged"] = epics.caget(P + "cam1:SizeX_RBV") == before
        # Readbacks are read-only.
        rb = epics.PV(P + "cam1:SizeX_RBV"); rb.wait_for_connection(5)
        out["rb_write_access"] = rb.write_access
        out["desc"] = epics.caget(P + "cam1:AcquireTime.DESC")
        epics.caput(P + "cam1:AcquirePeriod", 0.0, wait=True)
        """,
    )
    assert out["mode_by_index"] == "Multiple"
    assert out["mode_by_string"] == "Continuous"
    assert out["path"] == "/tmp/some/long/directory/name/that/is/longer/than/forty/characters/"
    assert out["period"] == pytest.approx(0.25)
    assert out["size_unchanged"]
    assert out["rb_write_access"] is False
    assert out["desc"]


def test_put_with_completion_on_acquire_returns_after_the_last_frame(ioc):
    out = run_client(
        ioc,
        """
        epics.caput(P + "cam1:ImageMode", "Multiple", wait=True)
        epics.caput(P + "cam1:NumImages", 6, wait=True)
        epics.caput(P + "cam1:AcquirePeriod", 0.05, wait=True)
        epics.caput(P + "cam1:ArrayCounter", 0, wait=True)
        t0 = time.time()
        epics.caput(P + "cam1:Acquire", 1, wait=True, timeout=30)
        out["took"] = time.time() - t0
        out["count"] = epics.caget(P + "cam1:ArrayCounter_RBV")
        out["acquire_rbv"] = epics.caget(P + "cam1:Acquire_RBV")
        epics.caput(P + "cam1:ImageMode", "Single", wait=True)
        epics.caput(P + "cam1:AcquirePeriod", 0.0, wait=True)
        """,
    )
    assert out["took"] >= 0.25, out
    assert out["count"] == 6 and out["acquire_rbv"] == 0


def test_monitors_and_the_image_waveform(ioc):
    out = run_client(
        ioc,
        """
        seen = []
        pv = epics.PV(P + "cam1:ArrayCounter_RBV", auto_monitor=True,
                      callback=lambda value=None, **kw: seen.append(value))
        pv.wait_for_connection(5)
        time.sleep(0.3)
        epics.caput(P + "cam1:ArrayCounter", 0, wait=True)
        epics.caput(P + "cam1:Acquire", 1, wait=True, timeout=30)
        time.sleep(0.5)
        out["seen"] = seen
        img = epics.caget(P + "image1:ArrayData", timeout=30)
        a = np.asarray(img).astype(np.int16).view(np.uint16)
        out["n"] = int(a.size)
        out["sum"] = int(a.astype(np.uint64).sum())
        out["head"] = a[:8].tolist()
        """,
    )
    assert 0 in out["seen"] and out["seen"][-1] == 1
    assert out["n"] == 1024 * 1024
    # The same frame over pvAccess (typed ArrayData) as the reference.
    ref = np.asarray(ioc.ctx.get(P + "image1:ArrayData")).astype(np.uint16)
    assert ref.size == out["n"]
    assert out["head"] == ref[:8].tolist()
    assert out["sum"] == int(ref.astype(np.uint64).sum())


def test_one_client_monitors_a_thousand_channels(ioc, ndflow_bin):
    names = [n for n in served_names(ndflow_bin) if not n.endswith("ArrayData")][:1000]
    assert len(names) == 1000
    code = "names = %r\n" % names + textwrap.dedent(
        """
        got = {}
        def cb(pvname=None, value=None, **kw):
            got[pvname] = 1
        pvs = [epics.PV(n, auto_monitor=True, callback=cb) for n in names]
        deadline = time.time() + 60
        while len(got) < len(names) and time.time() < deadline:
            time.sleep(0.1)
        out["connected"] = sum(p.connected for p in pvs)
        out["updates"] = len(got)
        """
    )
    out = run_client(ioc, code)
    assert out["connected"] == 1000 and out["updates"] == 1000


def served_names(ndflow_bin):
    """Every PV of this module's IOC, from `ndflow params TYPE` (the declarations' table)."""
    names = []
    ports = [("sim", "cam1:"), ("stdarrays", "image1:"), ("tiff", "TIFF1:"), ("stats", "Stats1:"),
             ("stats", "Stats2:"), ("stats", "Stats3:"), ("stats", "Stats4:"), ("roi", "ROI1:"), ("roi", "ROI2:")]
    for typ, prefix in ports:
        text = subprocess.run(
            [str(ndflow_bin), "params", typ], capture_output=True, text=True, check=True
        ).stdout
        for line in text.splitlines():
            cols = [c.strip() for c in line.split("|")]
            if len(cols) > 3 and cols[2] and not cols[2].startswith(("PV suffixes", "---")):
                names += [P + prefix + n.strip() for n in cols[2].split(",") if n.strip()]
    return sorted(set(names))


def test_caproto_client_gets_puts_and_monitors(ioc):
    code = textwrap.dedent(
        """
        import json, sys, time
        from caproto.threading.client import Context
        from caproto import ChannelType
        P = sys.argv[1]
        ctx = Context()
        mode, rb, period, path, counter = ctx.get_pvs(
            P + "cam1:ImageMode", P + "cam1:ImageMode_RBV", P + "cam1:AcquirePeriod",
            P + "TIFF1:FilePath", P + "cam1:ArrayCounter_RBV", timeout=10)
        out = {}
        out["period"] = float(period.read().data[0])
        r = mode.read(data_type=ChannelType.CTRL_ENUM)
        out["enum_strings"] = [s.decode() if isinstance(s, bytes) else s for s in r.metadata.enum_strings]
        mode.write(["Multiple"], wait=True, data_type=ChannelType.STRING)
        time.sleep(0.1)
        out["mode"] = rb.read(data_type=ChannelType.STRING).data[0].decode()
        mode.write([0], wait=True)
        path.write(b"/tmp/caproto/path/", wait=True)
        out["path"] = bytes(path.read().data).split(b"\\0")[0].decode()
        (size,) = ctx.get_pvs(P + "cam1:SizeX", timeout=10)
        try:
            r = size.write([-4], wait=True, timeout=5)
            out["refused"] = "accepted" if r.status.success else r.status.name
        except Exception as e:
            out["refused"] = type(e).__name__ + ": " + str(e)
        out["size_after"] = int(size.read().data[0])
        seen = []
        sub = counter.subscribe()
        def on_update(sub, r):
            seen.append(int(r.data[0]))
        sub.add_callback(on_update)  # caproto keeps callbacks weakly: hold a reference
        time.sleep(0.5)
        out["monitor"] = seen
        print("RESULT " + json.dumps(out))
        """
    )
    env = dict(os.environ)
    env.update(ca_client_env(ioc.ca_port, ioc.ca_repeater))
    p = subprocess.run([sys.executable, "-c", code, P], env=env, capture_output=True, text=True, timeout=60)
    lines = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
    assert p.returncode == 0 and lines, p.stdout + p.stderr
    import json

    out = json.loads(lines[-1][7:])
    assert out["enum_strings"][:3] == ["Single", "Multiple", "Continuous"]
    assert out["mode"] == "Multiple"
    assert out["path"] == "/tmp/caproto/path/"
    assert len(out["monitor"]) >= 1
    # A refused put fails with the server's error status and changes nothing.
    assert out["refused"] == "ECA_PUTFAIL", out
    assert out["size_after"] == 1024


def test_sim_color_mode_menu_is_simdetectors(ioc):
    """ADSimDetector's ColorMode menu: Mono/RGB1/RGB2/RGB3 at positions 0-3 (standing for
    NDColorMode 0, 2, 3, 4). A client putting position 1 gets RGB1 frames, as with the C IOC."""
    out = run_client(
        ioc,
        """
        pv = epics.PV(P + "cam1:ColorMode", form="ctrl")
        pv.wait_for_connection(10)
        out["menu"] = list(pv.get_ctrlvars()["enum_strs"])
        epics.caput(P + "cam1:ColorMode", 1, wait=True)
        out["rbv"] = epics.caget(P + "cam1:ColorMode_RBV", as_string=True, use_monitor=False)
        out["rbv_index"] = epics.caget(P + "cam1:ColorMode_RBV", use_monitor=False)
        epics.caput(P + "cam1:Acquire", 1, wait=True, timeout=30)
        out["size0"] = epics.caget(P + "cam1:ArraySize0_RBV", use_monitor=False)
        epics.caput(P + "cam1:ColorMode", "RGB3", wait=True)
        out["rgb3"] = epics.caget(P + "cam1:ColorMode", use_monitor=False)
        epics.caput(P + "cam1:ColorMode", "Mono", wait=True)
        epics.caput(P + "cam1:Acquire", 1, wait=True, timeout=30)
        out["mono_size0"] = epics.caget(P + "cam1:ArraySize0_RBV", use_monitor=False)
        """,
    )
    assert out["menu"] == ["Mono", "RGB1", "RGB2", "RGB3"], out
    assert (out["rbv"], out["rbv_index"]) == ("RGB1", 1), out
    assert out["size0"] == 3, "RGB1 frames are [3, X, Y]"
    assert out["rgb3"] == 3
    assert out["mono_size0"] == 1024


def test_reads_after_a_completed_acquire_see_its_frame(ioc):
    """A read after `caput(Acquire, 1, wait=True)` returns sees that acquisition's frame size,
    every time: the PV publisher could take a batch of changes and be preempted before
    posting it, and the completion then overtook it (1 run in ~20 of the suite; 1 round in
    ~30 here with both cores busy, before the fix)."""
    out = run_client(
        ioc,
        """
        bad = []
        for i in range(30):
            epics.caput(P + "cam1:ColorMode", "RGB1", wait=True)
            epics.caput(P + "cam1:Acquire", 1, wait=True, timeout=30)
            rgb = epics.caget(P + "cam1:ArraySize0_RBV", use_monitor=False)
            epics.caput(P + "cam1:ColorMode", "Mono", wait=True)
            epics.caput(P + "cam1:Acquire", 1, wait=True, timeout=30)
            mono = epics.caget(P + "cam1:ArraySize0_RBV", use_monitor=False)
            if (rgb, mono) != (3, 1024):
                bad.append((i, rgb, mono))
        out["bad"] = bad
        """,
        timeout=300,
    )
    assert out["bad"] == [], "rounds (index, RGB1 size0, Mono size0) read stale sizes"
