"""The Codec plugin's LZ4-family and zlib compressors (ndflow-codec's lz4, bslz4, zlib) and
their HDF5 filter framings (lz4hdf5, bslz4 as filter 32008 stores it, plain bitshuffle) against
the C libraries: byte-identical output where the algorithm is the same, decoding in both
directions, corrupt input refused. Blosc and JPEG are in test_codec_blosc_jpeg.py.

Drives the Rust example `codec_cli` (built once per session) and compares with python
`bitshuffle` (C bitshuffle + liblz4), `lz4.block` (liblz4), `zlib`, and the HDF5 filters 32008
(bitshuffle) and 32004 (LZ4) of h5py + hdf5plugin reading our chunks through direct chunk
writes.
"""

import os
import pathlib
import struct
import subprocess
import zlib

import numpy as np
import pytest
from rust_examples import example_bin

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before bitshuffle loads OpenMP

import bitshuffle  # noqa: E402
import h5py  # noqa: E402
import hdf5plugin  # noqa: E402
import lz4.block  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def cli():
    return example_bin("codec_cli")


@pytest.fixture
def run(cli, tmp_path):
    counter = [0]

    def _run(mode, codec, elem_size, data, extra=None):
        counter[0] += 1
        src = tmp_path / f"in{counter[0]}"
        dst = tmp_path / f"out{counter[0]}"
        src.write_bytes(bytes(data))
        args = [str(cli), mode, codec, str(elem_size), str(src), str(dst)]
        if extra is not None:
            args.append(str(extra))
        subprocess.run(args, check=True)
        return dst.read_bytes()

    return _run


def _poisson_low():
    rng = np.random.default_rng(12345)
    return rng.poisson(0.5, size=(1024, 1024)).astype(np.uint16)


def _poisson_ramp():
    rng = np.random.default_rng(23456)
    lam = np.linspace(1.0, 200.0, 1024)[None, :].repeat(1024, axis=0)
    return rng.poisson(lam).astype(np.uint16)


def _dtype_case(dtype, n, seed):
    rng = np.random.default_rng(seed)
    a = rng.poisson(3.0, size=n)
    a[::97] = rng.integers(0, np.iinfo(dtype).max, size=a[::97].shape, dtype=np.uint64)
    return a.astype(dtype)


DATASETS = {
    "poisson_low_u16": _poisson_low,
    "poisson_ramp_u16": _poisson_ramp,
    "u8_odd": lambda: _dtype_case(np.uint8, 1000003, 1),
    "u16_odd": lambda: _dtype_case(np.uint16, 1000003, 2),
    "u32": lambda: _dtype_case(np.uint32, 262147, 3),
    "u64": lambda: _dtype_case(np.uint64, 131075, 4),
    "u16_tiny": lambda: _dtype_case(np.uint16, 13, 5),
    "f32_noise": lambda: np.random.default_rng(6).normal(size=100001).astype(np.float32),
}


@pytest.fixture(params=sorted(DATASETS), scope="module")
def arr(request):
    return DATASETS[request.param]()


def _hdf5_header(a):
    block = bitshuffle_default_block(a.itemsize)
    return struct.pack(">QI", a.nbytes, block * a.itemsize)


def bitshuffle_default_block(elem_size):
    return max(128, (8192 // elem_size) // 8 * 8)


def test_bitshuffle_identical(run, arr):
    ours = run("compress", "bitshuffle", arr.itemsize, arr.tobytes())
    theirs = bitshuffle.bitshuffle(arr).tobytes()
    assert ours == theirs
    back = run("decompress", "bitshuffle", arr.itemsize, theirs)
    assert back == arr.tobytes()


def test_bslz4_identical_and_cross_decodes(run, arr):
    theirs = bitshuffle.compress_lz4(arr, 0).tobytes()
    ours = run("compress", "bslz4", arr.itemsize, arr.tobytes())
    assert ours == theirs, "bslz4 output differs from bitshuffle.compress_lz4"
    # Ours decodes theirs, theirs decodes ours.
    back = run("decompress", "bslz4", arr.itemsize, theirs, arr.nbytes)
    assert back == arr.tobytes()
    dec = bitshuffle.decompress_lz4(np.frombuffer(ours, np.uint8), arr.shape, arr.dtype, 0)
    np.testing.assert_array_equal(dec, arr)


def test_bslz4_hdf5_chunk(run, arr):
    ours = run("compress", "bslz4-hdf5", arr.itemsize, arr.tobytes())
    theirs_body = bitshuffle.compress_lz4(arr, 0).tobytes()
    assert ours == _hdf5_header(arr) + theirs_body
    back = run("decompress", "bslz4-hdf5", arr.itemsize, _hdf5_header(arr) + theirs_body)
    assert back == arr.tobytes()


def test_bslz4_non_default_block(run):
    a = _poisson_ramp().ravel()[:300001]
    theirs = bitshuffle.compress_lz4(a, 256).tobytes()
    ours = run("compress", "bslz4", 2, a.tobytes(), 256)
    assert ours == theirs
    dec = bitshuffle.decompress_lz4(np.frombuffer(ours, np.uint8), a.shape, a.dtype, 256)
    np.testing.assert_array_equal(dec, a)


def test_lz4_block(run, arr):
    data = arr.tobytes()
    ours = run("compress", "lz4", arr.itemsize, data)
    assert lz4.block.decompress(ours, uncompressed_size=len(data)) == data
    # Same algorithm and settings as python-lz4's LZ4_compress_default: same bytes.
    assert ours == lz4.block.compress(data, store_size=False)
    theirs = lz4.block.compress(data, store_size=False)
    assert run("decompress", "lz4", arr.itemsize, theirs, len(data)) == data


def _py_lz4hdf5_decode(buf):
    total, bs = struct.unpack(">QI", buf[:12])
    bs = min(bs, total)
    pos, out = 12, bytearray()
    while len(out) < total:
        blk = min(bs, total - len(out))
        (stored,) = struct.unpack(">I", buf[pos : pos + 4])
        pos += 4
        data = buf[pos : pos + stored]
        out += data if stored == blk else lz4.block.decompress(data, uncompressed_size=blk)
        pos += stored
    assert pos == len(buf)
    return bytes(out)


def _py_lz4hdf5_encode(data, bs):
    bs = min(bs, len(data))
    out = bytearray(struct.pack(">QI", len(data), bs))
    for i in range(0, len(data), bs):
        blk = data[i : i + bs]
        c = lz4.block.compress(blk, store_size=False)
        if len(c) >= len(blk):
            c = blk
        out += struct.pack(">I", len(c)) + c
    return bytes(out)


@pytest.mark.parametrize("block", [0, 65536, 1000])
def test_lz4hdf5(run, arr, block):
    data = arr.tobytes()
    ours = run("compress", "lz4hdf5", arr.itemsize, data, block)
    assert _py_lz4hdf5_decode(ours) == data
    theirs = _py_lz4hdf5_encode(data, block or (1 << 30))
    assert run("decompress", "lz4hdf5", arr.itemsize, theirs) == data


def test_lz4hdf5_raw_blocks(run):
    noise = np.random.default_rng(7).integers(0, 256, 100000, dtype=np.uint8).tobytes()
    ours = run("compress", "lz4hdf5", 1, noise, 4096)
    # Incompressible blocks are stored raw: 25 blocks, 4 bytes each, no growth otherwise.
    assert len(ours) == 12 + 25 * 4 + len(noise)
    assert _py_lz4hdf5_decode(ours) == noise


@pytest.mark.parametrize("level", [0, 1, 6, 9])
def test_zlib(run, arr, level):
    data = arr.tobytes()
    if level == 9:
        data = data[:300001]  # level 9 is slow on low-entropy data, in C and in Rust
    ours = run("compress", "zlib", arr.itemsize, data, level)
    assert zlib.decompress(ours) == data
    theirs = zlib.compress(data, level)
    assert run("decompress", "zlib", arr.itemsize, theirs, len(data)) == data


def test_corrupt_input_is_rejected(cli, tmp_path):
    a = _poisson_low()
    good = bitshuffle.compress_lz4(a, 0).tobytes()
    src = tmp_path / "bad"
    for bad in (good[:-1], good + b"\0", good[:100], b"\xff" * 64):
        src.write_bytes(bad)
        r = subprocess.run(
            [str(cli), "decompress", "bslz4", "2", str(src), str(tmp_path / "o"), str(a.nbytes)],
            capture_output=True,
        )
        assert r.returncode != 0
        assert b"panicked" not in r.stderr


@pytest.mark.parametrize("name", ["poisson_low_u16", "poisson_ramp_u16"])
def test_hdf5_filters_read_our_chunks(run, tmp_path, name):
    a = DATASETS[name]()
    bs_chunk = run("compress", "bslz4-hdf5", 2, a.tobytes())
    lz_chunk = run("compress", "lz4hdf5", 2, a.tobytes(), 0)
    path = tmp_path / "chunks.h5"
    with h5py.File(path, "w") as f:
        d1 = f.create_dataset(
            "bslz4", shape=a.shape, dtype=a.dtype, chunks=a.shape,
            **hdf5plugin.Bitshuffle(cname="lz4"),
        )
        d1.id.write_direct_chunk((0, 0), bs_chunk)
        d2 = f.create_dataset(
            "lz4", shape=a.shape, dtype=a.dtype, chunks=a.shape, **hdf5plugin.LZ4(nbytes=0)
        )
        d2.id.write_direct_chunk((0, 0), lz_chunk)
    with h5py.File(path, "r") as f:
        np.testing.assert_array_equal(f["bslz4"][...], a)
        np.testing.assert_array_equal(f["lz4"][...], a)
