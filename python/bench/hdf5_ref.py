"""Reference for `ndflow bench hdf5`: the same frames written by h5py + hdf5plugin (libhdf5
and the C filters, one thread), interleaved with the Rust rows (one file per request).

usage: hdf5_ref.py DIR
  then one JSON request per line on stdin:  {"row": ROW, "frames": N}
  answered by one JSON line on stdout:      {"frames": N, "seconds": s, "bytes": b}
  (an exception is answered as {"error": "..."}); the loop ends when stdin closes.

DIR holds `frames.raw` (K distinct uint32 frames, C order) and `frames.json`
({"k": K, "height": H, "width": W}); frame i of a file is base frame i % K. Rows:
  none             dset[i] = frame (chunks of one frame, no filter)
  bslz4_filter     hdf5plugin.Bitshuffle(cname="lz4") in the HDF5 pipeline
  blosc_filter     hdf5plugin.Blosc(cname="lz4", clevel=6, shuffle=SHUFFLE) in the pipeline
  bslz4_dcw        bitshuffle.compress_lz4 + write_direct_chunk (12-byte header), per frame
  blosc_dcw        blosc.compress(lz4, 6, byte shuffle) + write_direct_chunk, per frame
  *_dcw_write      write_direct_chunk alone on chunks compressed beforehand (once per base frame)

Each file holds only the frame dataset, grown by one frame per write (resize, then write),
as the areaDetector-style writer does; it is timed from creation to close and then deleted.
"""

import json
import os
import struct
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import bitshuffle  # noqa: E402
import blosc  # noqa: E402
import h5py  # noqa: E402
import hdf5plugin  # noqa: E402
import numpy as np  # noqa: E402


def write_once(path, n, shape, put, create):
    t0 = time.perf_counter()
    with h5py.File(path, "w") as f:
        d = f.create_dataset(
            "/entry/data/data",
            shape=(0,) + shape,
            maxshape=(None,) + shape,
            chunks=(1,) + shape,
            dtype=np.uint32,
            **create,
        )
        for i in range(n):
            d.resize(i + 1, axis=0)
            put(d, i)
    dt = time.perf_counter() - t0
    size = os.path.getsize(path)
    os.remove(path)
    return {"frames": n, "seconds": dt, "bytes": size}


def rows(base):
    """ROW -> (put(dset, i), dataset creation keywords)."""
    k = len(base)
    header = struct.pack(">QI", base[0].nbytes, 8192)

    def bslz4_chunk(i):
        return header + bitshuffle.compress_lz4(base[i % k], 0).tobytes()

    def blosc_chunk(i):
        return blosc.compress(base[i % k].tobytes(), typesize=4, clevel=6, shuffle=blosc.SHUFFLE, cname="lz4")

    def plain(dset, i):
        dset[i] = base[i % k]

    def direct(chunk):
        return lambda dset, i: dset.id.write_direct_chunk((i, 0, 0), chunk(i))

    bs = dict(hdf5plugin.Bitshuffle(cname="lz4"))
    bl = dict(hdf5plugin.Blosc(cname="lz4", clevel=6, shuffle=hdf5plugin.Blosc.SHUFFLE))
    # Compressed once per base frame, as the Rust rows do.
    bs_chunks = [bslz4_chunk(i) for i in range(k)]
    bl_chunks = [blosc_chunk(i) for i in range(k)]
    return {
        "none": (plain, {}),
        "bslz4_filter": (plain, bs),
        "blosc_filter": (plain, bl),
        "bslz4_dcw": (direct(bslz4_chunk), bs),
        "blosc_dcw": (direct(blosc_chunk), bl),
        "bslz4_dcw_write": (direct(lambda i: bs_chunks[i % k]), bs),
        "blosc_dcw_write": (direct(lambda i: bl_chunks[i % k]), bl),
    }


def main():
    d = sys.argv[1]
    blosc.set_nthreads(1)
    with open(os.path.join(d, "frames.json")) as f:
        meta = json.load(f)
    shape = (meta["height"], meta["width"])
    base = np.fromfile(os.path.join(d, "frames.raw"), dtype="<u4").reshape((meta["k"],) + shape)
    table = rows(base)
    path = os.path.join(d, "ref.h5")
    for line in sys.stdin:
        try:
            req = json.loads(line)
            put, create = table[req["row"]]
            out = write_once(path, int(req["frames"]), shape, put, create)
        except Exception as e:  # answered, so the Rust side reports it
            out = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
