"""C reference for `ndflow bench hdf5`: the same frames written by h5py + hdf5plugin (libhdf5
and the C filters, one thread), in the same run and directory as the Rust rows.

usage: hdf5_ref.py DIR FRAMES [WRITE_ONLY_FRAMES [REPS]]
  -> prints one JSON object {"row": {"frames": f, "seconds": s, "bytes": n}}
     (seconds: the fastest of REPS runs)

DIR holds `frames.raw` (K distinct uint32 frames, 1024x1024, C order) and `frames.json`
({"k": K, "height": H, "width": W}); frame i of a file is base frame i % K. Rows:
  none          dset[i] = frame (chunks of one frame, no filter)
  bslz4_filter  hdf5plugin.Bitshuffle(cname="lz4") in the HDF5 pipeline
  blosc_filter  hdf5plugin.Blosc(cname="lz4", clevel=6, shuffle=SHUFFLE) in the pipeline
  bslz4_dcw     bitshuffle.compress_lz4 + write_direct_chunk (12-byte header), per frame
  blosc_dcw     blosc.compress(lz4, 6, byte shuffle) + write_direct_chunk, per frame
  *_dcw_write   write_direct_chunk alone on chunks compressed beforehand (WRITE_ONLY_FRAMES)
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


REPS = 1


def write_file(path, n, shape, put, **create):
    runs = [write_once(path, n, shape, put, **create) for _ in range(REPS)]
    return min(runs, key=lambda r: r["seconds"])


def write_once(path, n, shape, put, **create):
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


def main():
    d = sys.argv[1]
    n = int(sys.argv[2])
    n_write = int(sys.argv[3]) if len(sys.argv) > 3 else n
    global REPS
    REPS = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    blosc.set_nthreads(1)
    meta = json.load(open(os.path.join(d, "frames.json")))
    shape = (meta["height"], meta["width"])
    base = np.fromfile(os.path.join(d, "frames.raw"), dtype="<u4").reshape((meta["k"],) + shape)
    k = len(base)
    path = os.path.join(d, "ref.h5")
    out = {}

    def plain(dset, i):
        dset[i] = base[i % k]

    out["none"] = write_file(path, n, shape, plain)
    out["bslz4_filter"] = write_file(path, n, shape, plain, **hdf5plugin.Bitshuffle(cname="lz4"))
    out["blosc_filter"] = write_file(
        path, n, shape, plain, **hdf5plugin.Blosc(cname="lz4", clevel=6, shuffle=hdf5plugin.Blosc.SHUFFLE)
    )

    nbytes = base[0].nbytes
    header = struct.pack(">QI", nbytes, 8192)

    def bslz4_chunk(i):
        return header + bitshuffle.compress_lz4(base[i % k], 0).tobytes()

    def blosc_chunk(i):
        return blosc.compress(base[i % k].tobytes(), typesize=4, clevel=6, shuffle=blosc.SHUFFLE, cname="lz4")

    bs_create = hdf5plugin.Bitshuffle(cname="lz4")
    bl_create = hdf5plugin.Blosc(cname="lz4", clevel=6, shuffle=hdf5plugin.Blosc.SHUFFLE)
    out["bslz4_dcw"] = write_file(
        path, n, shape, lambda dset, i: dset.id.write_direct_chunk((i, 0, 0), bslz4_chunk(i)), **bs_create
    )
    out["blosc_dcw"] = write_file(
        path, n, shape, lambda dset, i: dset.id.write_direct_chunk((i, 0, 0), blosc_chunk(i)), **bl_create
    )
    # Compressed once per base frame, as the Rust rows do.
    bs_chunks = [bslz4_chunk(i) for i in range(k)]
    bl_chunks = [blosc_chunk(i) for i in range(k)]
    out["bslz4_dcw_write"] = write_file(
        path, n_write, shape, lambda dset, i: dset.id.write_direct_chunk((i, 0, 0), bs_chunks[i % k]), **bs_create
    )
    out["blosc_dcw_write"] = write_file(
        path, n_write, shape, lambda dset, i: dset.id.write_direct_chunk((i, 0, 0), bl_chunks[i % k]), **bl_create
    )
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
