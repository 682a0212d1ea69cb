"""HDF5 files written by ndflow's NDFileHDF5 plugin, read by h5py + hdf5plugin and by the
system `h5dump` (HDF5_PLUGIN_PATH = hdf5plugin.PLUGIN_PATH): all ten types, the colour modes,
each compression through the HDF5 filter pipeline, and frames pre-compressed by the Codec
plugin stored with a direct chunk write (their chunks checked against the C libraries)."""

import os
import shutil
import subprocess

import bitshuffle
import blosc
import h5py
import hdf5plugin
import lz4.block
import numpy as np
import pytest

from test_hdf5_common import ATTRS, DATA, LINK, TYPES, build_hdf5_write, frames, ramp_frames, write

COMPRESSIONS = {
    "None": None,
    "zlib": "gzip",
    "Blosc": "32001",
    "BSLZ4": "32008",
    "LZ4": "32004",
}


@pytest.fixture(scope="module")
def exe():
    return build_hdf5_write()


@pytest.mark.parametrize("dtype", TYPES)
def test_all_types_bit_exact_with_layout(exe, tmp_path, dtype):
    arr = frames(TYPES[dtype], 3, (12, 16))
    path = write(exe, tmp_path, dtype, arr)
    with h5py.File(path, "r") as f:
        d = f[DATA]
        assert d.dtype == arr.dtype and d.shape == arr.shape
        assert d.chunks == (1, 12, 16)
        assert d[...].tobytes() == arr.tobytes()
        assert f[LINK][...].tobytes() == arr.tobytes()
        assert f["/entry"].attrs["NX_class"] == b"NXentry"
        assert f["/entry/instrument"].attrs["NX_class"] == b"NXinstrument"
        assert f["/entry/instrument/detector"].attrs["NX_class"] == b"NXdetector"
        assert f["/entry/data"].attrs["NX_class"] == b"NXdata"
        assert f[ATTRS].attrs["NX_class"] == b"NXcollection"
        assert d.attrs["signal"] == 1
        assert list(f[ATTRS + "/NDArrayUniqueId"][...]) == [1, 2, 3]
        assert list(f[ATTRS + "/NDArrayTimeStamp"][...]) == [1000.0, 1001.0, 1002.0]
        assert f[ATTRS + "/NDArrayUniqueId"].attrs["NDAttrName"] == b"NDArrayUniqueId"
        assert list(f["/entry/instrument/detector/NDAttributes/ColorMode"][...]) == [0, 0, 0]
        assert f["/entry/instrument/performance/timestamp"].shape == (3, 5)


@pytest.mark.parametrize(
    "mode,shape",
    [("RGB1", (8, 6, 3)), ("RGB2", (8, 3, 6)), ("RGB3", (3, 8, 6))],
)
def test_colour_modes(exe, tmp_path, mode, shape):
    arr = frames(np.uint16, 2, shape)
    path = write(exe, tmp_path, mode, arr, color=mode)
    with h5py.File(path, "r") as f:
        assert f[DATA].shape == (2,) + shape
        assert np.array_equal(f[DATA][...], arr)
        assert list(f["/entry/instrument/detector/NDAttributes/ColorMode"][...]) == [
            {"RGB1": 2, "RGB2": 3, "RGB3": 4}[mode]
        ] * 2


@pytest.mark.parametrize("comp", COMPRESSIONS)
@pytest.mark.parametrize("dtype", TYPES)
def test_compression_bit_exact(exe, tmp_path, comp, dtype):
    arr = frames(TYPES[dtype], 3, (24, 40))
    path = write(exe, tmp_path, f"{comp}_{dtype}", arr, sets=[f"Compression={comp}"])
    with h5py.File(path, "r") as f:
        d = f[DATA]
        filters = d._filters
        if COMPRESSIONS[comp] is None:
            assert filters == {}
        else:
            assert COMPRESSIONS[comp] in filters, filters
        if comp == "BSLZ4":
            assert tuple(filters["32008"]) == (0, 4, arr.itemsize, 0, 2)
        if comp == "Blosc":
            assert tuple(filters["32001"]) == (2, 2, arr.itemsize, 24 * 40 * arr.itemsize, 5, 1, 0)
        assert d[...].tobytes() == arr.tobytes()


CODECS = {
    "BSLZ4": ["Compressor=BSLZ4"],
    "LZ4": ["Compressor=LZ4"],
    "LZ4HDF5": ["Compressor=LZ4HDF5"],
    "Blosc": ["Compressor=Blosc", "BloscCompressor=LZ4", "BloscCLevel=6", "BloscShuffle=Byte"],
    "Zlib": ["Compressor=Zlib"],
}


def check_chunk(codec, chunk, frame):
    """A stored chunk decoded with the C libraries gives the frame back."""
    n = frame.nbytes
    if codec == "BSLZ4":
        assert int.from_bytes(chunk[:8], "big") == n
        assert int.from_bytes(chunk[8:12], "big") == 8192
        back = bitshuffle.decompress_lz4(np.frombuffer(chunk[12:], np.uint8), frame.shape, frame.dtype)
    elif codec == "LZ4":
        assert int.from_bytes(chunk[:8], "big") == n
        size = int.from_bytes(chunk[12:16], "big")
        back = np.frombuffer(lz4.block.decompress(chunk[16 : 16 + size], uncompressed_size=n), frame.dtype)
    elif codec == "Blosc":
        back = np.frombuffer(blosc.decompress(chunk), frame.dtype)
    elif codec == "Zlib":
        import zlib

        back = np.frombuffer(zlib.decompress(chunk), frame.dtype)
    else:
        return
    assert back.tobytes() == frame.tobytes()


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("dtype", ["UInt8", "Int16", "UInt32", "Float32", "Float64"])
def test_precompressed_direct_chunk_write(exe, tmp_path, codec, dtype):
    arr = ramp_frames(TYPES[dtype], 4, (48, 64))
    path = write(exe, tmp_path, f"{codec}_{dtype}", arr, codec=CODECS[codec])
    with h5py.File(path, "r") as f:
        d = f[DATA]
        assert d[...].tobytes() == arr.tobytes()
        for k in range(4):
            mask, chunk = d.id.read_direct_chunk((k, 0, 0))
            assert mask == 0
            check_chunk(codec, chunk, arr[k])


@pytest.fixture(scope="module")
def h5dump():
    """HDF5's own reader, the C library's view of our files."""
    path = shutil.which("h5dump")
    if path is None:
        pytest.fail("h5dump not found: ./scripts/setup.sh installs it (apt package hdf5-tools)",
                    pytrace=False)
    return path


@pytest.mark.parametrize("comp", COMPRESSIONS)
def test_h5dump_reads_bit_exact(exe, tmp_path, comp, h5dump):
    arr = ramp_frames(np.uint32, 3, (32, 48))
    path = write(exe, tmp_path, comp, arr, sets=[f"Compression={comp}"])
    out = tmp_path / "dump.bin"
    env = dict(os.environ, HDF5_PLUGIN_PATH=hdf5plugin.PLUGIN_PATH)
    proc = subprocess.run(
        [h5dump, "-d", DATA, "-b", "LE", "-o", str(out), str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == arr.astype("<u4").tobytes()
    # h5dump reports the registered filter with our cd_values.
    head = subprocess.run(
        [h5dump, "-p", "-H", "-d", DATA, str(path)], capture_output=True, text=True, env=env
    ).stdout
    if COMPRESSIONS[comp] and COMPRESSIONS[comp] != "gzip":
        assert f"FILTER_ID {COMPRESSIONS[comp]}" in head.replace("FILTER ID", "FILTER_ID"), head


def test_h5dump_reads_precompressed_bslz4(exe, tmp_path, h5dump):
    arr = ramp_frames(np.uint16, 3, (32, 48))
    path = write(exe, tmp_path, "pre", arr, codec=CODECS["BSLZ4"])
    out = tmp_path / "dump.bin"
    env = dict(os.environ, HDF5_PLUGIN_PATH=hdf5plugin.PLUGIN_PATH)
    proc = subprocess.run(
        [h5dump, "-d", LINK, "-b", "LE", "-o", str(out), str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == arr.astype("<u2").tobytes()
