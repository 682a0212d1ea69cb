"""Frames into Python: the ndflow package (in process) next to a p4p monitor (over pvAccess).

    .venv/bin/python python/bench/python_bench.py [--frames 100] [--seconds 5] [--json out.json]

1024x1024 UInt16 LinearRamp frames from the simulated detector.

- iterator drain: N frames queued in a stream (queue = N, nothing dropped), then the time to
  iterate them, reading each `frame.array` (a zero-copy view): µs per frame into Python.
- no-op Python plugin drain: N frames queued at a Python plugin whose first call waits until
  acquisition is over, then the time it takes to run the rest: µs per call (GIL, Frame,
  call, return).
- same run, live: the detector acquires (--period, default free running) for --seconds while a stream iterator (queue 10, each
  frame's array read) and a p4p monitor of the same frames (an NDPluginPva port, served
  on loopback) consume them; frames/s delivered to each, and drops.
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np

import ndflow

W = H = 1024


def sim(p, n, mode="Multiple", period=0.0):
    p.add("sim", "SIM1", MaxSizeX=W, MaxSizeY=H, DataType="UInt16", ImageMode=mode,
          NumImages=n, AcquireTime=0.0, AcquirePeriod=period, PoolMaxMem=0)


def iterator_drain(n):
    with ndflow.Pipeline() as p:
        sim(p, n)
        with p.frames("SIM1", queue=n) as frames:
            p.run(timeout=120, progress=False)
            assert frames.stats()["pending"] == n, frames.stats()
            t0 = time.perf_counter()
            k = 0
            for _ in range(n):
                a = frames.get(timeout=5).array
                k += a.shape[0] == H
            dt = time.perf_counter() - t0
    assert k == n
    return dt / n * 1e6


def plugin_drain(n):
    gate = threading.Event()
    calls = []

    def noop(frame):
        if not calls:
            gate.wait()
        calls.append(time.perf_counter())
        return None

    with ndflow.Pipeline(threads=2) as p:
        sim(p, n)
        port = p.add_python("NOP", noop, NDArrayPort="SIM1", QueueSize=n)
        p.start()
        while p["SIM1"].ArrayCounter_RBV < n:
            time.sleep(0.01)
        gate.set()
        p.wait_idle(timeout=120, progress=False)
        assert port.accounting()["processed"] == n
    return (calls[-1] - calls[0]) / (n - 1) * 1e6


P4P_CLIENT = r"""
import sys, time, threading
from p4p.client.thread import Context
pv, seconds = sys.argv[1], float(sys.argv[2])
ctx = Context("pva")
count = [0]; first = [None]; last = [None]; done = threading.Event()
def cb(v):
    a = v.value if hasattr(v, "value") else v
    _ = a.shape
    now = time.perf_counter()
    if first[0] is None:
        first[0] = now
    count[0] += 1; last[0] = now
sub = ctx.monitor(pv, cb, request="field()record[queueSize=4]")
print("READY", flush=True)
time.sleep(seconds)
sub.close()
n = count[0]
rate = (n - 1) / (last[0] - first[0]) if n > 1 else 0.0
print(f"RESULT {n} {rate:.2f}", flush=True)
ctx.close()
"""


def live(seconds, period, use_iter=True, use_p4p=True):
    """Frames/s delivered to a stream iterator and/or a p4p monitor of the same frames."""
    with ndflow.Pipeline(prefix="PYBENCH:", serve_pva=use_p4p) as p:
        sim(p, 1, mode="Continuous", period=period)
        if use_p4p:
            p.add("pva", "PVA1", NDArrayPort="SIM1", QueueSize=10)
        frames = p.frames("SIM1", queue=10) if use_iter else None
        p.start()  # one warm-up frame: starts the servers, fills the pool
        p.stop()
        p.wait_idle(timeout=10, progress=False)
        client = None
        if use_p4p:
            pv = p["PVA1"].PvName
            client = subprocess.Popen(
                [sys.executable, "-c", P4P_CLIENT, pv, str(seconds + 1.0)],
                stdout=subprocess.PIPE, text=True, env=dict(os.environ))
            assert client.stdout.readline().strip() == "READY"
        if frames is not None:
            while frames.get(timeout=0.05) is not None:  # the warm-up frame
                pass
        acquired0 = p["SIM1"].ArrayCounter_RBV
        p.start()
        t0 = time.perf_counter()
        n = 0
        while time.perf_counter() - t0 < seconds:
            if frames is None:
                time.sleep(0.05)
                continue
            f = frames.get(timeout=1.0)
            if f is None:
                continue
            _ = f.array[0, 0]
            n += 1
        dt = time.perf_counter() - t0
        p.stop()
        acquired = p["SIM1"].ArrayCounter_RBV - acquired0
        out = client.communicate(timeout=60)[0] if client else ""
        dropped = frames.stats()["dropped_queue_full"] if frames else 0
        if frames is not None:
            frames.close()
        pva_dropped = p["PVA1"].accounting()["dropped"] if use_p4p else 0
    res = [line for line in out.splitlines() if line.startswith("RESULT")]
    p4p_n, p4p_rate = (int(res[0].split()[1]), float(res[0].split()[2])) if res else (0, 0.0)
    return {
        "seconds": dt,
        "acquired": acquired,
        "source_fps": acquired / dt,
        "iterator_frames": n,
        "iterator_fps": n / dt,
        "iterator_dropped": dropped,
        "p4p_frames": p4p_n,
        "p4p_fps": p4p_rate,
        "pva_port_dropped": pva_dropped,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--period", type=float, default=0.0,
                    help="AcquirePeriod of the live row (0 = free running)")
    ap.add_argument("--json")
    a = ap.parse_args()
    it = min(iterator_drain(a.frames) for _ in range(a.reps))
    pl = min(plugin_drain(a.frames) for _ in range(a.reps))
    rows = {
        "iterator alone": live(a.seconds, a.period, use_p4p=False),
        "p4p alone": live(a.seconds, a.period, use_iter=False),
        "both, same run": live(a.seconds, a.period),
    }
    result = {"iterator_us_per_frame": it, "noop_plugin_us_per_frame": pl, "live": rows,
              "period": a.period, "load_average": os.getloadavg()}
    print(f"iterator (queued frames, .array read):   {it:8.2f} us/frame  ({1e6 / it:,.0f} frames/s)")
    print(f"no-op Python plugin (queued frames):     {pl:8.2f} us/frame  ({1e6 / pl:,.0f} frames/s)")
    print(f"live, AcquirePeriod {a.period}, {a.seconds:.0f} s per row   source f/s   iterator f/s (dropped)   p4p f/s (pva port dropped)")
    for name, lv in rows.items():
        it_txt = f"{lv['iterator_fps']:8.0f} ({lv['iterator_dropped']})" if name != "p4p alone" else "-"
        p4p_txt = f"{lv['p4p_fps']:8.0f} ({lv['pva_port_dropped']})" if name != "iterator alone" else "-"
        print(f"  {name:36} {lv['source_fps']:10.0f}   {it_txt:>22}   {p4p_txt:>22}")
    print(f"load average {os.getloadavg()}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
