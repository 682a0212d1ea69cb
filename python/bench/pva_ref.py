"""p4p (pvxs) ends of `ndflow bench pva`, run in the same session as the Rust measurements.

usage:
  pva_ref.py client PV FRAMES TIMEOUT_S [WARM]
      Monitors PV (record[pipeline=true,queueSize=4]) until FRAMES updates arrived or the
      stream went quiet; prints one JSON line {"frames", "timed_frames", "timed_bytes",
      "seconds", "lost"}. The clock starts when update WARM (default 1) has arrived: seconds =
      from it to the last update, timed_* = the updates after it; lost = gaps in uniqueId.
  pva_ref.py server PV NY NX FRAMES
      Serves PV (NTNDArray, uint16 NY x NX) with p4p on loopback, prints its client
      configuration as one JSON line, waits for a line on stdin, then posts FRAMES frames as
      fast as it can (p4p does not wait for clients: what a slow client misses is squashed)
      and waits for stdin EOF.

The environment must hold scripts/loopback.env's variables (the Rust side passes them).
"""

import json
import queue
import sys
import time

import numpy as np
from p4p.client.thread import Context
from p4p.nt import NTNDArray
from p4p.server import Server
from p4p.server.thread import SharedPV


def client(pv, frames, timeout, warm=1):
    q = queue.Queue()
    got = 0
    nbytes = 0
    lost = 0
    last_id = None
    t_first = t_last = None
    with Context("pva", nt=False) as ctx:
        sub = ctx.monitor(pv, q.put, request="record[pipeline=true,queueSize=4]")
        deadline = time.monotonic() + timeout
        while got < frames and time.monotonic() < deadline:
            try:
                v = q.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if isinstance(v, Exception):
                continue
            arr = v["value"]
            if arr is None:  # the PV's initial value before the first frame
                continue
            now = time.perf_counter()
            uid = v["uniqueId"]
            if last_id is not None and uid > last_id + 1:
                lost += uid - last_id - 1
            last_id = uid
            got += 1
            if got > warm:
                nbytes += arr.nbytes
            if got == warm:
                t_first = now
            if got == 1:
                # The stream is running: allow a quiet gap, not the whole start-up timeout.
                deadline = time.monotonic() + timeout
            t_last = now
            deadline = max(deadline, time.monotonic() + 2.0)
        sub.close()
    timed = max(got - warm, 0)
    secs = (t_last - t_first) if timed > 0 else 0.0
    print(
        json.dumps(
            {"frames": got, "timed_frames": timed, "timed_bytes": nbytes, "seconds": secs, "lost": lost}
        ),
        flush=True,
    )


def server(pv_name, ny, nx, frames):
    frame = (np.arange(ny * nx, dtype=np.uint64) % 65521).astype(np.uint16).reshape(ny, nx)
    nt = NTNDArray()
    # No nt= on the PV: we post ready-made Values (with uniqueId set), not numpy arrays.
    pv = SharedPV(initial=nt.wrap(np.zeros((ny, nx), np.uint16)))
    with Server(providers=[{pv_name: pv}], isolate=True) as srv:
        print(json.dumps(srv.conf()), flush=True)
        sys.stdin.readline()
        t0 = time.perf_counter()
        for i in range(1, frames + 1):
            v = nt.wrap(frame)
            v["uniqueId"] = i
            pv.post(v)
        secs = time.perf_counter() - t0
        print(json.dumps({"posted": frames, "seconds": secs}), flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    if sys.argv[1] == "client":
        warm = int(sys.argv[5]) if len(sys.argv) > 5 else 1
        client(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), max(warm, 1))
    elif sys.argv[1] == "server":
        server(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    else:
        sys.exit("usage: pva_ref.py client PV FRAMES TIMEOUT | server PV NY NX FRAMES")
