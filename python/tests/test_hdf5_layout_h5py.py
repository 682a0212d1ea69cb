"""NDFileHDF5 XML layouts, extra dimensions and position mode, read back with h5py. Files are
written by ndflow-io's `hdf5_scan` example (rust_examples.py) through the real plugin: frame k has pixel i = 1000 (k + 1) + i and the
NDAttributes Gain = k + 1, Temp = 20 + k (and pos_x / pos_n with --pos)."""

import subprocess

import h5py
import numpy as np

from rust_examples import ROOT, example_bin

DEMO = ROOT / "examples" / "hdf5" / "layout_demo.xml"


def scan_exe():
    return str(example_bin("hdf5_scan"))


def scan(tmp_path, name, frames, sets=(), pos=None, dims=(4, 3)):
    cmd = [scan_exe(), "--out", str(tmp_path), "--name", name, "--frames", str(frames)]
    cmd += ["--dims", ",".join(map(str, dims))]
    for s in sets:
        cmd += ["--set", s]
    if pos:
        cmd += ["--pos", ",".join(f"{x}:{n}" for x, n in pos)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "status=0" in proc.stdout, proc.stdout
    return tmp_path / f"{name}.h5"


def frame(k, dims=(4, 3)):
    x, y = dims
    return (1000 * (k + 1) + np.arange(x * y)).reshape(y, x).astype(np.uint16)


def test_xml_layout_groups_datasets_attributes_links(tmp_path):
    path = scan(tmp_path, "xml", 3, sets=[f"XMLFileName={DEMO}"])
    with h5py.File(path, "r") as f:
        det = f["/entry/instrument/detector/image"]
        assert det.shape == (3, 3, 4)
        assert np.array_equal(det[...], np.stack([frame(k) for k in range(3)]))
        assert det.attrs["units"] == b"counts"
        # Hardlinks: the same objects.
        assert f["/entry/data/image"].id == det.id
        assert f["/entry/data/gain"].id == f["/entry/instrument/detector/gain"].id
        # ndattribute dataset where the layout puts it; constant dataset with its attribute.
        assert list(f["/entry/instrument/detector/gain"][...]) == [1.0, 2.0, 3.0]
        assert f["/entry/instrument/detector/gain"].attrs["NDAttrName"] == b"Gain"
        assert f["/entry/instrument/detector/distance"][()] == 1.5
        assert f["/entry/instrument/detector/distance"].attrs["units"] == b"m"
        # Group attributes: constants, OnFileOpen / OnFileClose from NDAttributes.
        assert f["/entry"].attrs["NX_class"] == b"NXentry"
        assert f["/entry"].attrs["run"] == 42
        g = f["/entry/instrument/detector"]
        assert g.attrs["first_gain"] == 1.0 and g.attrs["last_gain"] == 3.0
        # Unplaced NDAttributes in the ndattr_default group.
        nda = f["/entry/instrument/NDAttributes"]
        assert list(nda["Temp"][...]) == [20, 21, 22]
        assert list(nda["NDArrayUniqueId"][...]) == [1, 2, 3]
        assert f["/entry/instrument/performance/timestamp"].shape == (3, 5)
        assert "/entry/instrument/detector/data" not in f


def test_inline_xml_text(tmp_path):
    xml = DEMO.read_text().replace("\n", " ")
    path = scan(tmp_path, "inline", 2, sets=[f"XMLFileName={xml}"])
    with h5py.File(path, "r") as f:
        assert f["/entry/instrument/detector/image"].shape == (2, 3, 4)


def test_extra_dims_shape_and_order(tmp_path):
    sets = ["NumExtraDims=1", "ExtraDimSizeN=2", "ExtraDimSizeX=3", "DimAttDatasets=Yes"]
    path = scan(tmp_path, "extra", 6, sets=sets)
    with h5py.File(path, "r") as f:
        d = f["/entry/instrument/detector/data"]
        # ADCore order: (X, N, y, x), N fastest.
        assert d.shape == (3, 2, 3, 4)
        for k in range(6):
            assert np.array_equal(d[k // 2, k % 2], frame(k)), k
        gain = f["/entry/instrument/NDAttributes/Gain"]
        assert gain.shape == (3, 2)
        assert np.array_equal(gain[...], np.arange(1.0, 7.0).reshape(3, 2))


def test_position_mode_placement(tmp_path):
    sets = [
        "NumExtraDims=1",
        "ExtraDimSizeN=2",
        "ExtraDimSizeX=3",
        "PositionMode=On",
        "PosNameDimN=pos_n",
        "PosNameDimX=pos_x",
    ]
    pos = [(2, 1), (0, 0), (1, 1)]
    path = scan(tmp_path, "pos", 3, sets=sets, pos=pos)
    with h5py.File(path, "r") as f:
        d = f["/entry/instrument/detector/data"]
        assert d.shape == (3, 2, 3, 4)
        for k, (x, n) in enumerate(pos):
            assert np.array_equal(d[x, n], frame(k)), k
        assert not d[0, 1].any(), "never written: fill value"
