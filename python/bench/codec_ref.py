"""Python reference for `ndflow bench codec`: the codecs whose C library ndflow does not link
(python `bitshuffle`), as a long-running worker so that one repetition of theirs can be
interleaved with one of ours (ndflow-bench's host::PyWorker).

usage: codec_ref.py DIR   (DIR/datasets.json lists the raw data files the Rust side wrote)

Then one JSON request per line on stdin, one JSON answer per line on stdout:
  {"data": NAME, "codec": "bslz4", "op": "compress"|"decompress", "calls": K, "clock": C}
  -> {"seconds": time of K back-to-back calls, "size": compressed bytes}
with C "cpu" (process CPU time, time.process_time) or "wall" (time.perf_counter).
Errors come back as {"error": "..."}.
"""

import json
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import bitshuffle  # noqa: E402
import numpy as np  # noqa: E402


def codecs(a):
    """(compress, decompress) per codec name for the array `a`."""
    return {
        "bslz4": (
            lambda: bitshuffle.compress_lz4(a, 0),
            lambda c: bitshuffle.decompress_lz4(c, a.shape, a.dtype, 0),
        ),
    }


def main():
    d = sys.argv[1]
    meta = json.load(open(os.path.join(d, "datasets.json")))
    arrays = {m["name"]: np.fromfile(os.path.join(d, m["file"]), dtype=m["dtype"]) for m in meta}
    packed = {}
    for line in sys.stdin:
        try:
            r = json.loads(line)
            a = arrays[r["data"]]
            comp, decomp = codecs(a)[r["codec"]]
            key = (r["data"], r["codec"])
            if key not in packed:
                c = comp()
                if not np.array_equal(decomp(c), a):
                    raise ValueError(f"{key}: round trip differs")
                packed[key] = c
            c = packed[key]
            calls = int(r.get("calls", 1))
            clock = time.process_time if r.get("clock") == "cpu" else time.perf_counter
            t0 = clock()
            if r["op"] == "compress":
                for _ in range(calls):
                    comp()
            else:
                for _ in range(calls):
                    decomp(c)
            dt = clock() - t0
            out = {"seconds": dt, "size": int(c.nbytes)}
        except Exception as e:  # reported to the Rust side, which stops the bench
            out = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
