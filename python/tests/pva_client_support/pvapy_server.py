"""pvapy (pvAccessCPP) server for the ndflow client tests: unlike pvxs it segments large messages
and sends types through the introspection cache (0xFD/0xFE), as NDPluginPva and pvaDriver peers do.

Started by crates/ndflow-pva/tests/client_pvapy.rs with scripts/loopback.env and per-test ports in
EPICS_PVA_SERVER_PORT / EPICS_PVA_BROADCAST_PORT. Serves, under the prefix argv[1]:
  image (NTNDArray)   dbl (structure {double value}, writable)
Commands on stdin (each answered by a line starting "OK"):
  frames DTYPE NX NY COUNT FIRST_ID   pixel[y, x] = (x + 3*y + 5*uniqueId) % 100 (+0.25 floats)
  bench NX NY COUNT                   uint16 frames as fast as possible; answers "OK seconds"
  quit
"""

import os
import sys
import time

import numpy as np
import pvaccess as pva

MEMBERS = {
    "int8": "byteValue", "uint8": "ubyteValue", "int16": "shortValue", "uint16": "ushortValue",
    "int32": "intValue", "uint32": "uintValue", "int64": "longValue", "uint64": "ulongValue",
    "float32": "floatValue", "float64": "doubleValue",
}


def frame(dtype, nx, ny, uid):
    y, x = np.mgrid[0:ny, 0:nx]
    dt = np.dtype(dtype)
    arr = ((x + 3 * y + 5 * uid) % 100).astype(dt)
    if dt.kind == "f":
        arr = arr + dt.type(0.25)
    return arr


def ntnd(arr, uid):
    nt = pva.NtNdArray()
    nt["value"] = {MEMBERS[arr.dtype.name]: arr.flatten()}
    ny, nx = arr.shape
    nt["dimension"] = [pva.PvDimension(nx, 0, nx, 1, False), pva.PvDimension(ny, 0, ny, 1, False)]
    nt["uniqueId"] = uid
    nt["compressedSize"] = arr.nbytes
    nt["uncompressedSize"] = arr.nbytes
    return nt


def main():
    if not os.environ.get("EPICS_PVAS_INTF_ADDR_LIST", "").startswith("127."):
        print("ERR EPICS_PVAS_INTF_ADDR_LIST must be loopback (source loopback.env)", flush=True)
        sys.exit(2)
    prefix = sys.argv[1] if len(sys.argv) > 1 else "PY:"
    srv = pva.PvaServer()
    srv.addRecord(prefix + "image", ntnd(frame("uint16", 3, 2, 0), 0))
    srv.addRecord(prefix + "dbl", pva.PvObject({"value": pva.DOUBLE}, {"value": 1.5}))
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
                    srv.update(prefix + "image", ntnd(frame(dtype, nx, ny, uid), uid))
                print("OK", flush=True)
            elif cmd == "bench":
                nx, ny, count = map(int, args)
                base = frame("uint16", nx, ny, 0)
                t0 = time.perf_counter()
                for uid in range(1, count + 1):
                    srv.update(prefix + "image", ntnd(base, uid))
                print("OK %.6f" % (time.perf_counter() - t0), flush=True)
            else:
                print("ERR unknown command %s" % cmd, flush=True)
        except Exception as e:
            print("ERR %r" % (e,), flush=True)
    srv.stop()


if __name__ == "__main__":
    main()
