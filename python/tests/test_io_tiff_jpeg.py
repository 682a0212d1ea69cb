"""TIFF/JPEG files written by ndflow-io's file plugins, read back with tifffile and Pillow.

Uses the `io_write` example of ndflow-io (one frame from a raw file through the real
plugin), from rust_examples.py.
"""

import pathlib
import subprocess

import numpy as np
from ndtypes import ND_TYPES
import pytest
import tifffile
from PIL import Image
from rust_examples import example_bin

ROOT = pathlib.Path(__file__).resolve().parents[2]

TYPES = ND_TYPES


@pytest.fixture(scope="session")
def io_write():
    return example_bin("io_write")


def pattern(dtype, shape):
    rng = np.random.default_rng(1234)
    n = int(np.prod(shape))
    if np.issubdtype(dtype, np.floating):
        a = rng.normal(0, 1e3, n).astype(dtype)
        a[:3] = [np.finfo(dtype).max, np.finfo(dtype).tiny, -0.0]
    else:
        info = np.iinfo(dtype)
        a = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
        a[:2] = [info.min, info.max]
    return a.reshape(shape)


def write(exe, tmp_path, fmt, arr, color="Mono", extra=()):
    """`arr` in C order (slowest first); ndflow dims are the reverse."""
    raw = tmp_path / "frame.bin"
    raw.write_bytes(np.ascontiguousarray(arr).tobytes())
    dtype = next(k for k, v in TYPES.items() if np.dtype(v) == arr.dtype)
    dims = ",".join(str(s) for s in reversed(arr.shape))
    out = subprocess.run(
        [str(exe), "--format", fmt, "--dtype", dtype, "--dims", dims, "--raw", str(raw),
         "--out", str(tmp_path / "out"), "--name", "img", "--color", color, *extra],
        check=True, capture_output=True, text=True,
    )
    return pathlib.Path(out.stdout.strip())


@pytest.mark.parametrize("dtype", list(TYPES))
def test_tiff_mono_all_types_bit_exact(io_write, tmp_path, dtype):
    arr = pattern(TYPES[dtype], (5, 7))
    (tmp_path / "out").mkdir()
    path = write(io_write, tmp_path, "tiff", arr, extra=[
        "--uid", "4242", "--ts", "1234.5", "--sec", "1000000001", "--nsec", "999",
        "--attr", "Gain=2.5", "--attr", "Count=-7", "--attr", "Label=hello"])
    assert path.name == "img_000.tif"
    with tifffile.TiffFile(path) as t:
        page = t.pages[0]
        got = page.asarray()
        assert got.dtype == arr.dtype
        np.testing.assert_array_equal(got.view(np.uint8), arr.view(np.uint8))
        tags = page.tags
        assert tags[65000].value == 1234.5
        assert tags[65001].value == 4242
        assert tags[65002].value == 1000000001
        assert tags[65003].value == 999
        attrs = {tags[i].value for i in range(65010, 65014) if i in tags}
        assert {"Gain:2.500000", "Count:-7", "Label:hello", "ColorMode:0"} == attrs
        assert tags["Software"].value == "EPICS areaDetector"


@pytest.mark.parametrize("color", ["RGB1", "RGB2", "RGB3"])
@pytest.mark.parametrize("dtype", ["UInt8", "Int16", "Float32", "UInt64"])
def test_tiff_rgb(io_write, tmp_path, color, dtype):
    h, w = 4, 6
    rgb = pattern(TYPES[dtype], (h, w, 3))  # what the reader should see
    arr = {"RGB1": rgb, "RGB2": rgb.transpose(0, 2, 1), "RGB3": rgb.transpose(2, 0, 1)}[color]
    (tmp_path / "out").mkdir()
    path = write(io_write, tmp_path, "tiff", np.ascontiguousarray(arr), color=color)
    got = tifffile.imread(path)
    assert got.shape == (h, w, 3)
    np.testing.assert_array_equal(got.view(np.uint8), rgb.view(np.uint8))


def test_tiff_stream_numbers_files(io_write, tmp_path):
    arr = pattern(np.uint16, (3, 4))
    (tmp_path / "out").mkdir()
    last = write(io_write, tmp_path, "tiff", arr, extra=["--count", "3"])
    assert last.name == "img_002.tif"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "img_000.tif", "img_001.tif", "img_002.tif"]


def test_jpeg_mono_and_rgb(io_write, tmp_path):
    (tmp_path / "out").mkdir()
    y, x = np.mgrid[0:32, 0:48]
    mono = ((x * 5 + y * 3) % 256).astype(np.uint8)
    path = write(io_write, tmp_path, "jpeg", mono, extra=["--quality", "95"])
    assert path.suffix == ".jpg"
    with Image.open(path) as im:
        assert im.mode == "L" and im.size == (48, 32)
        got = np.asarray(im)
    assert np.abs(got.astype(int) - mono).mean() < 2.0

    rgb = np.stack([mono, 255 - mono, np.full_like(mono, 128)], axis=-1)
    path = write(io_write, tmp_path, "jpeg", rgb, color="RGB1", extra=["--quality", "95"])
    with Image.open(path) as im:
        assert im.mode == "RGB" and im.size == (48, 32)
        got = np.asarray(im)
    assert np.abs(got.astype(int) - rgb).mean() < 4.0


def test_jpeg_refuses_16_bit(io_write, tmp_path):
    (tmp_path / "out").mkdir()
    with pytest.raises(subprocess.CalledProcessError) as e:
        write(io_write, tmp_path, "jpeg", pattern(np.uint16, (4, 4)))
    assert "UInt16" in e.value.stderr
    assert list((tmp_path / "out").iterdir()) == []
