"""C reference codecs for `ndflow bench codec`: reads the raw data sets the Rust side wrote
and times the C libraries on them in the same run (one thread each).

usage: codec_ref.py DIR  -> prints one JSON object {"dataset/codec": {...}} on stdout
"""

import json
import os
import sys
import time
import zlib

os.environ.setdefault("OMP_NUM_THREADS", "1")

import bitshuffle  # noqa: E402
import blosc  # noqa: E402
import lz4.block  # noqa: E402
import numpy as np  # noqa: E402


def best_rate(fn, nbytes, reps):
    best = float("inf")
    out = None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return nbytes / best / 1e6, out


def main():
    d = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    blosc.set_nthreads(1)
    meta = json.load(open(os.path.join(d, "datasets.json")))
    results = {}
    for ds in meta:
        a = np.fromfile(os.path.join(d, ds["file"]), dtype=ds["dtype"])
        raw = a.tobytes()
        n = len(raw)
        cases = {
            "bslz4": (
                lambda: bitshuffle.compress_lz4(a, 0),
                lambda c: bitshuffle.decompress_lz4(c, a.shape, a.dtype, 0),
            ),
            "blosc-lz4-byte5": (
                lambda: blosc.compress(raw, typesize=a.itemsize, clevel=5, shuffle=blosc.SHUFFLE, cname="lz4"),
                blosc.decompress,
            ),
            "blosc-lz4-bit5": (
                lambda: blosc.compress(raw, typesize=a.itemsize, clevel=5, shuffle=blosc.BITSHUFFLE, cname="lz4"),
                blosc.decompress,
            ),
            "lz4": (
                lambda: lz4.block.compress(raw, store_size=False),
                lambda c: lz4.block.decompress(c, uncompressed_size=n),
            ),
            "zlib6": (lambda: zlib.compress(raw, 6), zlib.decompress),
        }
        for name, (comp, decomp) in cases.items():
            c_rate, packed = best_rate(comp, n, reps)
            size = len(packed) if isinstance(packed, (bytes, bytearray)) else packed.nbytes
            d_rate, _ = best_rate(lambda: decomp(packed), n, reps)
            results[f"{ds['name']}/{name}"] = {
                "ratio": n / size,
                "compress_mb_s": c_rate,
                "decompress_mb_s": d_rate,
            }
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
