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
import sys
import textwrap
import time

import pytest

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


class Netns:
    """A namespace with only lo up; what was started in it is killed (by PID) on exit."""

    def __init__(self):
        self.name = f"ndflarv{os.getpid() % 100000}"
        self.procs = []

    def __enter__(self):
        r = subprocess.run(["ip", "netns", "add", self.name], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"network namespaces are not permitted here: {r.stderr.strip()}")
        subprocess.run(["ip", "-n", self.name, "link", "set", "lo", "up"], check=True)
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)

    def start(self, args, log):
        f = open(log, "w")
        p = subprocess.Popen(["ip", "netns", "exec", self.name, *map(str, args)],
                             stdout=f, stderr=subprocess.STDOUT, env=client_env())
        self.procs.append(p)
        return p

    def stop(self, p):
        p.kill()
        p.wait(timeout=10)

    def python(self, script, *args, timeout=120):
        r = subprocess.run(["ip", "netns", "exec", self.name, sys.executable, "-c", script, *args],
                           capture_output=True, text=True, timeout=timeout, env=client_env())
        assert r.returncode == 0, f"client failed:\n{r.stdout}\n{r.stderr}"
        return json.loads(r.stdout.strip().splitlines()[-1])


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
    print(json.dumps(dict(connect=v, status=msg, waited=t - (end - time.time()))))
""")


def record_names():
    return [r["name"] for t in ("ADGenICam", "aravisCamera") for r in RECORDS[t]]


def start_ioc(ns, ndflow_bin, tmp_path):
    cfg = tmp_path / "aravis.toml"
    cfg.write_text(CONFIG)
    return ns.start([ndflow_bin, "run", cfg], tmp_path / "ioc.log")


def test_fake_camera_end_to_end(ndflow_bin, tmp_path):
    why = cannot_run()
    if why:
        pytest.skip(why)
    with Netns() as ns:
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


def test_camera_absent_at_start_then_started(ndflow_bin, tmp_path):
    why = cannot_run()
    if why:
        pytest.skip(why)
    with Netns() as ns:
        start_ioc(ns, ndflow_bin, tmp_path)
        before = ns.python(CONNECT, P, "0", "10", "not connected")
        assert before["connect"] == 0, before
        assert "not connected" in before["status"], before
        ns.start([FAKE, "-i", "127.0.0.1"], tmp_path / "fake.log")
        after = ns.python(CONNECT, P, "1", "15", "connected")
        assert after["connect"] == 1, (after, (tmp_path / "ioc.log").read_text())
        print(json.dumps(dict(before=before, after=after)))
