"""The `aravis` port against Aravis' fake GigE Vision camera (`arv-fake-gv-camera-0.8`).

Everything runs inside a network namespace this test creates with only `lo` up: the fake
camera, the IOC and the p4p client (a small script whose JSON output is collected), so
nothing Aravis sends can leave the machine (the fake also listens on 255.255.255.255:3956,
and Aravis' discovery broadcasts; the port itself only ever opens a camera by IPv4 address).
Needs root and `ip`; otherwise skipped with the reason.
"""

import json
import os
import pathlib
import shutil
import subprocess
import textwrap
import time

import pytest
from netns import Netns

ROOT = pathlib.Path(__file__).resolve().parents[2]
RECORDS = json.loads((pathlib.Path(__file__).parent / "data" / "ad_records.json").read_text())
FAKE = "arv-fake-gv-camera-0.8"
P = "ARV:"


def cannot_run():
    if os.geteuid() != 0:
        return "needs root to create a network namespace"
    for tool in ("ip", FAKE):
        if shutil.which(tool) is None:
            return f"`{tool}` not found (apt: iproute2, aravis-tools)"
    return None


def client_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EPICS_", "PVXS_"))}
    env.update(EPICS_PVA_ADDR_LIST="127.0.0.1", EPICS_PVA_AUTO_ADDR_LIST="NO")
    return env


CONFIG = f"""
prefix = "{P}"
pva = true
ca = false

[[port]]
name = "CAM"
type = "aravis"
prefix = "cam1:"
CameraId = "127.0.0.1"

[[port]]
name = "PVA1"
type = "pva"
prefix = "Pva1:"
NDArrayPort = "CAM"

[[port]]
name = "HDF1"
type = "hdf5"
prefix = "HDF1:"
NDArrayPort = "CAM"
QueueSize = 20
FilePath = "{{out}}"
CreateDirectory = -1
FileName = "arv"
FileTemplate = "%s%s_%3.3d.h5"
FileNumber = 1
FileWriteMode = "Stream"
LazyOpen = "Yes"
NumCapture = 5
Capture = 1
"""

# Every ADGenICam/aravisCamera record answers; then Multiple acquisitions in Mono8 and Mono16.
ACQUIRE = textwrap.dedent(r"""
    import json, sys, time
    import numpy as np
    from p4p.client.thread import Context
    P = sys.argv[1]; names = json.loads(sys.argv[2])
    c = Context("pva")
    out = {}
    def wait(pv, pred, t=20):
        end = time.time() + t
        while time.time() < end:
            try:
                v = c.get(pv, timeout=2)
                if pred(v):
                    return v
            except Exception:
                pass
            time.sleep(0.1)
        return c.get(pv, timeout=5)
    out["connect"] = int(wait(P + "cam1:ARConnectCamera", lambda v: int(v) == 1))
    missing = []
    for n in names:
        try:
            c.get(P + "cam1:" + n, timeout=5)
        except Exception as e:
            missing.append(f"{n}: {e}")
    out["missing"] = missing
    pf = list(c.get(P + "cam1:PixelFormat", timeout=5).raw.value.choices)
    out["pixel_formats"] = pf
    frames = []
    sub = c.monitor(P + "Pva1:Image", lambda v: frames.append(v))
    def acquire(fmt, n):
        c.put(P + "cam1:PixelFormat", pf.index(fmt), timeout=5)
        for k, v in (("SizeX", 640), ("SizeY", 480), ("MinX", 0), ("MinY", 0), ("Gain", 0),
                     ("AcquirePeriod", 0.02), ("ImageMode", 1), ("NumImages", n)):
            c.put(P + "cam1:" + k, v, timeout=5)
        time.sleep(0.5)
        frames.clear()
        t0 = time.time()
        c.put(P + "cam1:Acquire", 1, timeout=5)
        end = time.time() + 20
        while time.time() < end and (len(frames) < n or int(c.get(P + "cam1:Acquire_RBV")) != 0):
            time.sleep(0.05)
        time.sleep(0.3)
        return list(frames), time.time() - t0
    got, dt = acquire("Mono8", 5)
    bad = []
    for img in got:
        fid = int(img.attrib["FrameId"])
        a = np.asarray(img)
        y, x = np.indices(a.shape)
        if not np.array_equal(a.astype(np.int64), (x + y + fid) % 255):
            bad.append(fid)
    out["mono8"] = dict(n=len(got), shape=[list(np.asarray(i).shape) for i in got][:1],
                        dtype=str(np.asarray(got[0]).dtype) if got else None,
                        ids=[int(i.attrib["FrameId"]) for i in got], bad=bad, seconds=dt,
                        acquire=int(c.get(P + "cam1:Acquire_RBV")))
    got, dt = acquire("Mono16", 3)
    out["mono16"] = dict(n=len(got), dtype=str(np.asarray(got[0]).dtype) if got else None,
                         shape=list(np.asarray(got[0]).shape) if got else None)
    time.sleep(1.2)
    out["completed"] = float(c.get(P + "cam1:ARFramesCompleted", timeout=5))
    out["failures"] = float(c.get(P + "cam1:ARFrameFailures", timeout=5))
    out["model"] = str(c.get(P + "cam1:Model_RBV", timeout=5))
    out["max"] = [int(c.get(P + "cam1:MaxSizeX_RBV")), int(c.get(P + "cam1:MaxSizeY_RBV"))]
    sub.close(); c.close()
    print(json.dumps(out))
""")

CONNECT = textwrap.dedent(r"""
    import json, sys, time
    from p4p.client.thread import Context
    P, want, t, text = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    c = Context("pva")
    end = time.time() + t
    v = None
    while time.time() < end:
        try:
            v = int(c.get(P + "cam1:ARConnectCamera", timeout=2))
            msg = str(c.get(P + "cam1:StatusMessage_RBV", timeout=2))
            if v == want and text in msg:
                break
        except Exception:
            pass
        time.sleep(0.2)
    msg = str(c.get(P + "cam1:StatusMessage_RBV", timeout=5))
    waited = t - (end - time.time())
    # DetectorState_RBV follows within a status tick: Disconnected (INVALID) while away.
    raw = Context("pva", nt=False)
    end = time.time() + 3
    while True:
        s = raw.get(P + "cam1:DetectorState_RBV", timeout=5)
        if (s.value.index == 9) == (want == 0) or time.time() > end:
            break
        time.sleep(0.1)
    print(json.dumps(dict(connect=v, status=msg, waited=waited, state=s.value.index,
                          severity=s.alarm.severity)))
""")


def record_names():
    return [r["name"] for t in ("ADGenICam", "aravisCamera") for r in RECORDS[t]]


def start_ioc(ns, ndflow_bin, tmp_path):
    cfg = tmp_path / "aravis.toml"
    (tmp_path / "h5").mkdir(exist_ok=True)
    cfg.write_text(CONFIG.replace("{out}", str(tmp_path / "h5") + "/"))
    return ns.start([ndflow_bin, "run", cfg], tmp_path / "ioc.log")


def test_fake_camera_end_to_end(ndflow_bin, tmp_path):
    why = cannot_run()
    if why:
        pytest.skip(why)
    with Netns(env=client_env()) as ns:
        ns.start([FAKE, "-i", "127.0.0.1"], tmp_path / "fake.log")
        time.sleep(0.5)
        start_ioc(ns, ndflow_bin, tmp_path)
        out = ns.python(ACQUIRE, P, json.dumps(record_names()))
        log = (tmp_path / "ioc.log").read_text()
        print(json.dumps(out, indent=1))
        assert out["connect"] == 1, log
        assert out["missing"] == [], out["missing"]
        assert "Mono16" in out["pixel_formats"] and "Mono8" in out["pixel_formats"]
        m8 = out["mono8"]
        assert m8["n"] == 5 and m8["shape"] == [[480, 640]] and m8["dtype"] == "uint8", m8
        assert m8["bad"] == [], m8
        assert m8["acquire"] == 0, "Multiple ends by itself"
        m16 = out["mono16"]
        assert m16["n"] == 3 and m16["dtype"] == "uint16" and m16["shape"] == [480, 640], m16
        # Aravis' statistics are per stream, and the stream is reopened when PayloadSize
        # changes (Mono8 → Mono16): the count is the Mono16 run's.
        assert out["completed"] >= 3 and out["failures"] == 0, out
        assert out["model"] and out["max"] == [2048, 2048], out
        # The HDF5 writer got the five Mono8 frames (lent from the camera's ring, not copied)
        # and they read back as the pattern.
        import h5py
        import numpy as np
        with h5py.File(tmp_path / "h5" / "arv_001.h5", "r") as f:
            data = f["/entry/data/data"][()]
        assert data.shape == (5, 480, 640) and data.dtype == np.uint8, data.shape
        y, x = np.indices((480, 640))
        for frame, fid in zip(data, m8["ids"]):
            assert np.array_equal(frame.astype(np.int64), (x + y + fid) % 255), fid


def test_camera_absent_at_start_then_started(ndflow_bin, tmp_path):
    why = cannot_run()
    if why:
        pytest.skip(why)
    with Netns(env=client_env()) as ns:
        start_ioc(ns, ndflow_bin, tmp_path)
        before = ns.python(CONNECT, P, "0", "10", "not connected")
        assert before["connect"] == 0, before
        assert "not connected" in before["status"], before
        ns.start([FAKE, "-i", "127.0.0.1"], tmp_path / "fake.log")
        after = ns.python(CONNECT, P, "1", "15", "connected")
        assert after["connect"] == 1, (after, (tmp_path / "ioc.log").read_text())
        print(json.dumps(dict(before=before, after=after)))


# The camera's own features (GC_ records), a feature put that changes the pixels, one the
# camera refuses, and a restart on a size put while acquiring.
GC_CLIENT = textwrap.dedent(r"""
    import json, sys, time
    import numpy as np
    from p4p.client.thread import Context
    P = sys.argv[1]; features = json.loads(sys.argv[2])
    c = Context("pva")
    C = P + "cam1:"
    out = {}
    def get(n, t=5):
        return c.get(C + n, timeout=t)
    def wait(n, pred, t=15):
        end = time.time() + t
        while time.time() < end:
            try:
                v = get(n, 2)
                if pred(v):
                    return v
            except Exception:
                pass
            time.sleep(0.1)
        return get(n)
    wait("ARConnectCamera", lambda v: int(v) == 1)
    served, missing = [], []
    for name, kind in features:
        names = [name] if kind == "Command" else [name + "_RBV"]
        for n in names:
            try:
                get(n)
                served.append(n)
            except Exception as e:
                missing.append(f"{n}: {e}")
    out["missing"] = missing
    out["served"] = len(served)
    def absent(n):
        try:
            c.get(C + n, timeout=1)
            return False
        except Exception:
            return True
    out["absent"] = {n: absent(n) for n in ("GC_SensorWidth", "GC_AcquisitionStart_RBV")}
    pf = list(get("GC_PixelFormat").raw.value.choices)
    out["gc_pixel_formats"] = pf
    # GC_Width moves SizeX; a width the camera refuses names the record and changes nothing.
    c.put(C + "GC_Width", 320, timeout=5)
    out["size_x"] = int(wait("SizeX_RBV", lambda v: int(v) == 320))
    c.put(C + "GC_Width", 4096, timeout=5)
    out["refused"] = str(wait("StatusMessage_RBV", lambda v: "GC_Width" in str(v)))
    out["width_after"] = int(get("GC_Width_RBV"))
    # Gain through the camera's own feature: the fake scales its ramp by 1 + GainRaw.
    frames = []
    sub = c.monitor(P + "Pva1:Image", lambda v: frames.append(v))
    for k, v in (("SizeX", 64), ("SizeY", 48), ("AcquirePeriod", 0.02), ("ImageMode", 1),
                 ("NumImages", 2), ("AcquireTime", 0.01)):
        c.put(C + k, v, timeout=5)
    c.put(C + "GC_PixelFormat", pf.index("Mono8"), timeout=5)
    c.put(C + "GC_GainRaw", 1, timeout=5)
    out["gain_rbv"] = float(wait("Gain_RBV", lambda v: float(v) == 1.0))
    time.sleep(0.3)
    frames.clear()
    c.put(C + "Acquire", 1, timeout=5)
    end = time.time() + 15
    while time.time() < end and len(frames) < 2:
        time.sleep(0.05)
    bad = []
    for img in frames[:2]:
        a = np.asarray(img).astype(np.int64)
        y, x = np.indices(a.shape)
        want = np.minimum(255, 2 * ((x + y + int(img.attrib["FrameId"])) % 255))
        if not np.array_equal(a, want):
            bad.append(int(img.attrib["FrameId"]))
    out["gain_frames"] = len(frames)
    out["gain_bad"] = bad
    c.put(C + "GC_GainRaw", 0, timeout=5)
    # Continuous, then a SizeX put: acquisition restarts with the new size and goes on.
    wait("Acquire_RBV", lambda v: int(v) == 0)
    c.put(C + "ImageMode", 2, timeout=5)
    frames.clear()
    c.put(C + "Acquire", 1, timeout=5)
    end = time.time() + 10
    while time.time() < end and len(frames) < 5:
        time.sleep(0.05)
    c.put(C + "SizeX", 32, timeout=5)
    end = time.time() + 10
    while time.time() < end and not any(np.asarray(f).shape[1] == 32 for f in frames):
        time.sleep(0.05)
    n_before = len(frames)
    time.sleep(0.5)
    out["restart"] = dict(widths=sorted({int(np.asarray(f).shape[1]) for f in frames}),
                          still_acquiring=int(get("Acquire_RBV")),
                          more=len(frames) > n_before,
                          status=str(get("StatusMessage_RBV")))
    c.put(C + "Acquire", 0, timeout=5)
    wait("Acquire_RBV", lambda v: int(v) == 0)
    # Software trigger: TriggerMode External, TriggerSource Software; each TriggerSoftware
    # put is one frame (the count starts once the acquisition has settled).
    sources = list(get("TriggerSource").raw.value.choices)
    c.put(C + "GC_TriggerSelector", "FrameStart", timeout=5)
    c.put(C + "TriggerSource", sources.index("Software"), timeout=5)
    c.put(C + "TriggerMode", 1, timeout=5)
    c.put(C + "Acquire", 1, timeout=5)
    time.sleep(0.5)
    n0 = int(get("ArrayCounter_RBV"))
    time.sleep(0.5)
    idle = int(get("ArrayCounter_RBV")) - n0
    for k in range(3):
        c.put(C + "TriggerSoftware", 1, timeout=5)
        wait("ArrayCounter_RBV", lambda v: int(v) >= n0 + idle + k + 1, t=5)
    time.sleep(0.3)
    out["trigger"] = dict(idle=idle, triggered=int(get("ArrayCounter_RBV")) - n0 - idle)
    out["trigger_debug"] = {k: str(get(k)) for k in ("StatusMessage_RBV", "GC_TriggerSelector_RBV", "GC_TriggerMode_RBV", "GC_TriggerSource_RBV", "TriggerSource_RBV", "Acquire_RBV", "ARFramesCompleted")}
    c.put(C + "Acquire", 0, timeout=5)
    c.put(C + "TriggerMode", 0, timeout=5)
    sub.close(); c.close()
    print(json.dumps(out))
""")

# Continuous acquisition at 64×48; prints what it saw once `seconds` have passed.
RUN_CLIENT = textwrap.dedent(r"""
    import json, sys, time
    from p4p.client.thread import Context
    P, seconds, stop = sys.argv[1], float(sys.argv[2]), sys.argv[3] == "stop"
    c = Context("pva")
    C = P + "cam1:"
    end = time.time() + 15
    while time.time() < end:
        try:
            if int(c.get(C + "ARConnectCamera", timeout=2)) == 1:
                break
        except Exception:
            pass
        time.sleep(0.2)
    for k, v in (("SizeX", 64), ("SizeY", 48), ("AcquirePeriod", 0.005), ("ImageMode", 2)):
        c.put(C + k, v, timeout=5)
    n0 = int(c.get(C + "ArrayCounter_RBV", timeout=5))
    c.put(C + "Acquire", 1, timeout=5)
    time.sleep(seconds)
    if stop:
        c.put(C + "Acquire", 0, timeout=5)
        time.sleep(1.5)
    names = ["ArrayCounter_RBV", "DroppedArrays_RBV", "ARFramesCompleted", "ARFrameFailures",
             "ARFrameUnderruns", "ARMissingPackets", "ARFrameIdGaps", "ARFramesDiscarded",
             "Acquire_RBV"]
    out = {n: float(c.get(C + n, timeout=5)) for n in names}
    out["arrays"] = out["ArrayCounter_RBV"] - n0
    out["status"] = str(c.get(C + "StatusMessage_RBV", timeout=5))
    c.close()
    print(json.dumps(out))
""")


def fake_features(ns, tmp_path):
    """The fake's features as makeDb.py lists them: every Category's pFeature of a type that
    gets records, from the XML `arv-tool` reads off the camera."""
    import xml.etree.ElementTree as ET
    r = subprocess.run(["ip", "netns", "exec", ns.name, "arv-tool-0.8", "-a", "127.0.0.1",
                        "genicam"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    xml = r.stdout[r.stdout.index("<"):]
    root = ET.fromstring(xml.encode())
    tag = lambda e: e.tag.split("}")[-1]
    nodes = {e.get("Name"): tag(e) for e in root if e.get("Name")}
    typed = {"Integer", "IntReg", "IntSwissKnife", "IntConverter", "Float", "Converter",
             "SwissKnife", "Boolean", "String", "StringReg", "Enumeration", "Command"}
    out = []
    for cat in (e for e in root if tag(e) == "Category"):
        for f in (p.text.strip() for p in cat if tag(p) == "pFeature"):
            if nodes.get(f) in typed and f not in [n for n, _ in out]:
                out.append((f, nodes[f]))
    # makeDb.py shortens names over 20 characters; the fake has one.
    short = {"DeviceManufacturerInfo": "GC_DevManInfo"}
    return [(short.get(f, "GC_" + f), kind) for f, kind in out]


def test_gc_features_restart_loss_and_a_camera_that_dies(ndflow_bin, tmp_path):
    why = cannot_run()
    if why:
        pytest.skip(why)
    with Netns(env=client_env()) as ns:
        fake = ns.start([FAKE, "-i", "127.0.0.1"], tmp_path / "fake.log")
        time.sleep(0.5)
        features = fake_features(ns, tmp_path)
        assert len(features) > 20, features
        # `ndflow params aravis --camera` lists the same records, before any IOC runs.
        r = subprocess.run(["ip", "netns", "exec", ns.name, ndflow_bin, "params", "aravis",
                            "--camera", "127.0.0.1"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        listed = {cell.strip() for line in r.stdout.splitlines() if "| GC_" in line
                  for cell in line.split("|")[2].split(",")}
        for name, kind in features:
            assert (name if kind == "Command" else name + "_RBV") in listed, (name, r.stdout)
        start_ioc(ns, ndflow_bin, tmp_path)
        log = lambda: (tmp_path / "ioc.log").read_text()
        gc = ns.python(GC_CLIENT, P, json.dumps(features))
        print(json.dumps(gc, indent=1))
        assert gc["missing"] == [], gc["missing"]
        assert gc["absent"] == {"GC_SensorWidth": True, "GC_AcquisitionStart_RBV": True}, gc
        assert "Mono8" in gc["gc_pixel_formats"], gc
        assert gc["size_x"] == 320, gc
        assert "GC_Width" in gc["refused"] and gc["width_after"] == 320, gc
        assert gc["gain_rbv"] == 1.0, gc
        assert gc["gain_frames"] >= 2 and gc["gain_bad"] == [], gc
        r = gc["restart"]
        assert r["widths"] == [32, 64] and r["still_acquiring"] == 1 and r["more"], r
        assert gc["trigger"] == {"idle": 0, "triggered": 3}, gc["trigger"]

        # The camera dies during a Continuous acquisition: the acquisition ends, the IOC
        # says so and keeps serving; a new camera at the address is connected and used.
        # Its stream statistics are a new stream's: the lossy run below starts from zero.
        running = ns.python(RUN_CLIENT, P, "1", "keep")
        assert running["Acquire_RBV"] == 1 and running["arrays"] > 10, running
        ns.stop(fake)
        # Aravis notices a vanished camera through GVCP read timeouts: on a loaded machine
        # that has taken more than 15 s.
        lost = ns.python(CONNECT, P, "0", "30", "lost")
        assert lost["connect"] == 0 and "lost" in lost["status"], (lost, log())
        assert (lost["state"], lost["severity"]) == (9, 3), lost  # Disconnected, INVALID
        fake = ns.start([FAKE, "-i", "127.0.0.1", "-r", "10"], tmp_path / "fake2.log")
        back = ns.python(CONNECT, P, "1", "20", "connected")
        assert back["connect"] == 1, (back, log())
        assert back["state"] != 9 and back["severity"] < 3, back

        # 1 % of packets lost, no resend: every frame that did not arrive whole is counted.
        lossy = ns.python(RUN_CLIENT, P, "3", "stop")
        print(json.dumps(lossy, indent=1))
        assert lossy["Acquire_RBV"] == 0, lossy
        assert lossy["ARFrameFailures"] > 0 and lossy["ARMissingPackets"] > 0, lossy
        # Every completed frame became an NDArray or a counted drop.
        handed_on = lossy["arrays"] + lossy["DroppedArrays_RBV"] + lossy["ARFramesDiscarded"]
        assert lossy["ARFramesCompleted"] == handed_on, lossy
        # The ids the driver saw skipped are frames the stream failed or had no buffer for
        # (failures before the first or after the last delivered frame are not gaps).
        lost_frames = lossy["ARFrameFailures"] + lossy["ARFrameUnderruns"]
        assert 0 < lossy["ARFrameIdGaps"] <= lost_frames, lossy
