"""p4p (pvxs) server the ndflow pvAccess client tests talk to.

Started by crates/ndflow-pva/tests/client_p4p.rs with the loopback environment of
scripts/loopback.env and per-test ports in EPICS_PVA_SERVER_PORT / EPICS_PVA_BROADCAST_PORT.
Serves, under the prefix given as argv[1]:

  dbl (NTScalar double, writable)   int (NTScalar int32, writable)   str (NTScalar string, writable)
  enum (NTEnum Off/On/Auto, writable)   ro (NTScalar double, every put refused)
  counter (NTScalar int32)   image (NTNDArray)

Reads commands on stdin, one per line, and answers each with a line starting "OK" (or "ERR ..."):

  frames DTYPE NX NY COUNT FIRST_ID   post COUNT NTNDArray frames, pixel[y, x] =
                                      (x + 3*y + 5*uniqueId) % 100 (+ 0.25 for floats)
  bench NX NY COUNT                   post COUNT uint16 frames as fast as possible; answers
                                      "OK seconds"
  counter START COUNT                 post START..START+COUNT-1 to counter as fast as possible
  get NAME                            answers "OK <current value>"
  quit                                stop
"""

import os
import sys
import time

import numpy as np

from p4p.nt import NTEnum, NTNDArray, NTScalar
from p4p.server import Server
from p4p.server.thread import SharedPV


def refuse_non_loopback():
    # The tests must never serve beyond 127.0.0.0/8.
    intf = os.environ.get("EPICS_PVAS_INTF_ADDR_LIST", "")
    if not intf.startswith("127."):
        sys.stdout.write("ERR EPICS_PVAS_INTF_ADDR_LIST must be loopback (source loopback.env)\n")
        sys.stdout.flush()
        sys.exit(2)


class Writable:
    def put(self, pv, op):
        pv.post(op.value())
        op.done()


class ReadOnly:
    def put(self, pv, op):
        op.done(error="read-only PV: put refused by test server")


def frame(dtype, nx, ny, uid):
    y, x = np.mgrid[0:ny, 0:nx]
    v = (x + 3 * y + 5 * uid) % 100
    dt = np.dtype(dtype)
    arr = v.astype(dt)
    if dt.kind == "f":
        arr = arr + dt.type(0.25)
    return arr


def main():
    refuse_non_loopback()
    prefix = sys.argv[1] if len(sys.argv) > 1 else "TST:"
    nt_img = NTNDArray()
    pvs = {
        "dbl": SharedPV(nt=NTScalar("d"), initial=1.5, handler=Writable()),
        "int": SharedPV(nt=NTScalar("i"), initial=42, handler=Writable()),
        "str": SharedPV(nt=NTScalar("s"), initial="hello", handler=Writable()),
        "enum": SharedPV(nt=NTEnum(), initial={"index": 0, "choices": ["Off", "On", "Auto"]},
                         handler=Writable()),
        "ro": SharedPV(nt=NTScalar("d"), initial=3.0, handler=ReadOnly()),
        "counter": SharedPV(nt=NTScalar("i"), initial=0),
        # No nt= here: frames are posted as ready Values carrying their uniqueId.
        "image": SharedPV(initial=nt_img.wrap(np.zeros((2, 3), np.uint16))),
    }
    with Server(providers=[{prefix + k: v for k, v in pvs.items()}], useenv=True):
        print("READY", flush=True)
        for line in sys.stdin:
            parts = line.split()
            if not parts:
                continue
            cmd, args = parts[0], parts[1:]
            try:
                if cmd == "quit":
                    print("OK", flush=True)
                    break
                elif cmd == "frames":
                    dtype, nx, ny, count, first = args[0], *map(int, args[1:5])
                    for uid in range(first, first + count):
                        v = nt_img.wrap(frame(dtype, nx, ny, uid))
                        v["uniqueId"] = uid
                        pvs["image"].post(v)
                    print("OK", flush=True)
                elif cmd == "bench":
                    nx, ny, count = map(int, args)
                    base = frame("uint16", nx, ny, 0)
                    t0 = time.perf_counter()
                    for uid in range(1, count + 1):
                        v = nt_img.wrap(base)
                        v["uniqueId"] = uid
                        pvs["image"].post(v)
                    print("OK %.6f" % (time.perf_counter() - t0), flush=True)
                elif cmd == "counter":
                    start, count = map(int, args)
                    for i in range(start, start + count):
                        pvs["counter"].post(i)
                    print("OK", flush=True)
                elif cmd == "get":
                    print("OK %s" % (pvs[args[0]].current(),), flush=True)
                else:
                    print("ERR unknown command %s" % cmd, flush=True)
            except Exception as e:  # report, keep serving
                print("ERR %r" % (e,), flush=True)


if __name__ == "__main__":
    main()
