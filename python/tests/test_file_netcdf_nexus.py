"""sim → netCDF (NDFileNetCDF) and NeXus (NDFileNexus) writers through the real binary
(`ndflow run CONFIG --until-idle`): netCDF files read back with netCDF4-python and xarray
(and `ncdump -h` when netcdf-bin is installed), NeXus files with h5py, pixels equal to the
simulator's ramp and NDAttributes where the layout puts them."""

import json
import shutil
import subprocess

import numpy as np
import pytest

X, Y = 24, 16
ATTRS = """<Attributes>
  <Attribute name="Gain" type="CONST" source="2.5" datatype="DOUBLE" description="Detector gain"/>
  <Attribute name="Run" type="CONST" source="7" datatype="INT" description="Run number"/>
  <Attribute name="Sample" type="CONST" source="lysozyme" datatype="STRING" description="Sample name"/>
</Attributes>
"""


def run(ndflow_bin, tmp_path, writer, data_type="UInt16", frames=4, create_dir=-1):
    """Runs sim → `writer` (TOML lines of one port named W1) until idle; returns W1's summary."""
    attrs = tmp_path / "attrs.xml"
    attrs.write_text(ATTRS)
    cfg = tmp_path / "run.toml"
    cfg.write_text(
        f"""
[[port]]
name = "SIM1"
type = "sim"
MaxSizeX = {X}
MaxSizeY = {Y}
DataType = "{data_type}"
ImageMode = "Multiple"
NumImages = {frames}
AcquireTime = 0.0
AcquirePeriod = 0.002
NDAttributesFile = "{attrs}"
Acquire = 1

[[port]]
name = "W1"
NDArrayPort = "SIM1"
QueueSize = 20
FilePath = "{tmp_path / 'data'}"
CreateDirectory = {create_dir}
FileNumber = 1
AutoIncrement = "Yes"
{writer}
"""
    )
    summary = tmp_path / "summary.json"
    proc = subprocess.run(
        [str(ndflow_bin), "run", str(cfg), "--until-idle", "--quiet", "--summary", str(summary)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(summary.read_text())["ports"]["W1"]


def ramp(k, dtype):
    """Frame k (1-based) of the simulator's LinearRamp: x + y + (k - 1)."""
    y, x = np.mgrid[0:Y, 0:X]
    return (x + y + k - 1).astype(dtype)


# ---------------------------------------------------------------------------------------- netCDF


def test_netcdf_stream_reads_back_with_netcdf4_and_xarray(ndflow_bin, tmp_path):
    netCDF4 = pytest.importorskip("netCDF4")
    xr = pytest.importorskip("xarray")
    w = run(
        ndflow_bin,
        tmp_path,
        'type = "netcdf"\nFileName = "ramp"\nFileWriteMode = "Stream"\nLazyOpen = "Yes"\nNumCapture = 4\nCapture = 1',
    )
    assert w["WriteStatus"] in (0, "Write OK"), w["WriteMessage"]
    path = tmp_path / "data" / "ramp_001.nc"
    assert w["FullFileName_RBV"] == str(path)
    with netCDF4.Dataset(path) as nc:
        assert nc.dimensions["numArrays"].isunlimited()
        assert len(nc.dimensions["numArrays"]) == 4
        assert (len(nc.dimensions["dim0"]), len(nc.dimensions["dim1"])) == (Y, X)
        assert len(nc.dimensions["attrStringSize"]) == 256
        # Global attributes as NDFileNetCDF writes them (NDArray order for dim*).
        assert nc.dataType == 3  # NDUInt16
        assert nc.NDNetCDFFileVersion == pytest.approx(3.1)
        assert nc.numArrayDims == 2
        assert list(np.atleast_1d(nc.dimSize)) == [X, Y]
        assert list(np.atleast_1d(nc.dimBinning)) == [1, 1]
        assert nc.Attr_Gain_DataType == "Float64"
        assert nc.Attr_Gain_Description == "Detector gain"
        assert nc.Attr_Sample_DataType == "String"
        assert nc.Attr_Run_SourceType == "NDAttrSourceConst"
        data = nc["array_data"]
        assert data.dimensions == ("numArrays", "dim0", "dim1")
        # NC_SHORT with _Unsigned = "true": netCDF4 hands back uint16.
        frames = data[:]
        assert frames.dtype == np.uint16
        for k in range(1, 5):
            assert np.array_equal(frames[k - 1], ramp(k, np.uint16))
        assert list(nc["uniqueId"][:]) == [1, 2, 3, 4]
        assert np.all(nc["timeStamp"][:] > 1e8)
        assert np.all(nc["epicsTSSec"][:] > 1e8)
        assert list(nc["Attr_Gain"][:]) == [2.5] * 4
        assert list(nc["Attr_Run"][:]) == [7] * 4
        names = netCDF4.chartostring(nc["Attr_Sample"][:])
        assert list(names) == ["lysozyme"] * 4
    ds = xr.open_dataset(path)
    try:
        assert ds["array_data"].dims == ("numArrays", "dim0", "dim1")
        assert ds["array_data"].dtype == np.uint16
        assert np.array_equal(ds["array_data"].values[3], ramp(4, np.uint16))
        assert ds.attrs["dataType"] == 3
        assert list(ds["uniqueId"].values) == [1, 2, 3, 4]
        assert float(ds["Attr_Gain"][0]) == 2.5
    finally:
        ds.close()
    if shutil.which("ncdump"):
        head = subprocess.run(["ncdump", "-h", str(path)], capture_output=True, text=True, check=True)
        assert "numArrays = UNLIMITED ; // (4 currently)" in head.stdout
        assert "short array_data(numArrays, dim0, dim1) ;" in head.stdout
        assert ':dataType = 3 ;' in head.stdout


def test_netcdf_capture_and_single(ndflow_bin, tmp_path):
    netCDF4 = pytest.importorskip("netCDF4")
    (tmp_path / "cap").mkdir()
    w = run(
        ndflow_bin,
        tmp_path / "cap",
        'type = "netcdf"\nFileName = "cap"\nFileWriteMode = "Capture"\nNumCapture = 3\n'
        'AutoSave = "Yes"\nCapture = 1',
        data_type="Float32",
        frames=3,
    )
    assert w["WriteStatus"] in (0, "Write OK"), w["WriteMessage"]
    with netCDF4.Dataset(tmp_path / "cap" / "data" / "cap_001.nc") as nc:
        assert nc.dataType == 8  # NDFloat32
        assert nc["array_data"].dtype == np.float32
        assert nc["array_data"].shape == (3, Y, X)
        assert np.array_equal(nc["array_data"][2], ramp(3, np.float32))

    (tmp_path / "single").mkdir()
    w = run(
        ndflow_bin,
        tmp_path / "single",
        'type = "netcdf"\nFileName = "one"\nFileWriteMode = "Single"\nAutoSave = "Yes"',
        data_type="Int8",
        frames=2,
    )
    assert w["WriteStatus"] in (0, "Write OK"), w["WriteMessage"]
    files = sorted((tmp_path / "single" / "data").glob("one_*.nc"))
    assert [f.name for f in files] == ["one_001.nc", "one_002.nc"]
    with netCDF4.Dataset(files[1]) as nc:
        assert not nc.dimensions["numArrays"].isunlimited()
        assert nc["array_data"].shape == (1, Y, X)
        assert nc["array_data"].dtype == np.int8
        assert np.array_equal(nc["array_data"][0], ramp(2, np.int8))
        assert list(nc["uniqueId"][:]) == [2]


def test_netcdf_write_error_is_reported(ndflow_bin, tmp_path):
    # FilePath names a file, not a directory: the open fails, WriteStatus says so, no crash.
    blocker = tmp_path / "data"
    blocker.write_text("not a directory")
    w = run(
        ndflow_bin,
        tmp_path,
        'type = "netcdf"\nFileName = "x"\nFileWriteMode = "Single"\nAutoSave = "Yes"',
        frames=2,
        create_dir=0,
    )
    assert w["WriteStatus"] in (1, "Write error")
    assert "netCDF" in w["WriteMessage"] or "x_" in w["WriteMessage"], w["WriteMessage"]
    assert w["FramesNotWritten_RBV"] == 2


# ----------------------------------------------------------------------------------------- NeXus

EXAMPLE = __import__("pathlib").Path(__file__).resolve().parents[2] / "examples" / "nexus"


def test_nexus_stream_with_the_example_template(ndflow_bin, tmp_path):
    h5py = pytest.importorskip("h5py")
    w = run(
        ndflow_bin,
        tmp_path,
        f'type = "nexus"\nTemplateFilePath = "{EXAMPLE}"\nTemplateFileName = "detector.xml"\n'
        'FileName = "scan"\nFileWriteMode = "Stream"\nLazyOpen = "Yes"\nNumCapture = 4\nCapture = 1',
    )
    assert w["WriteStatus"] in (0, "Write OK"), w["WriteMessage"]
    assert w["FileTemplateValid"] in (1, "Yes")
    path = tmp_path / "data" / "scan_001.nxs"
    with h5py.File(path, "r") as f:
        assert f.attrs["creator"] == b"ndflow NDFileNexus"
        assert f.attrs["facility"] == b"ndflow test bench"
        assert f["entry"].attrs["NX_class"] == b"NXentry"
        assert f["entry/instrument"].attrs["NX_class"] == b"NXinstrument"
        assert f["entry/instrument/detector"].attrs["NX_class"] == b"NXdetector"
        assert f["entry/sample"].attrs["NX_class"] == b"NXsample"
        assert f["entry/title"].asstr()[()] == "simulated detector ramp"
        assert list(f["entry/run_number"][()]) == [7]
        data = f["entry/instrument/detector/data"]
        assert data.shape == (4, Y, X) and data.dtype == np.uint16
        assert data.attrs["signal"] == 1 and data.attrs["units"] == b"counts"
        for k in range(1, 5):
            assert np.array_equal(data[k - 1], ramp(k, np.uint16))
        # NDAttributes of the first frame, where the template puts them.
        assert list(f["entry/instrument/detector/gain"][()]) == [2.5]
        assert f["entry/instrument/detector/gain"].attrs["units"] == b"e/ADU"
        assert f["entry/sample/name"].asstr()[()] == "lysozyme"
        assert list(f["entry/sample/temperature"][()]) == [295.5]
        assert f["entry/notes"].attrs["run"] == 7
        assert f["entry/notes/operator"].asstr()[()] == "beamline staff"


def test_nexus_single_mode_inline_template(ndflow_bin, tmp_path):
    h5py = pytest.importorskip("h5py")
    xml = '<NXroot><NXentry name="e"><img type="pArray"/></NXentry></NXroot>'
    w = run(
        ndflow_bin,
        tmp_path,
        f"type = \"nexus\"\nTemplateFileName = '{xml}'\nFileName = \"one\"\n"
        'FileWriteMode = "Single"\nAutoSave = "Yes"',
        data_type="Float64",
        frames=2,
    )
    assert w["WriteStatus"] in (0, "Write OK"), w["WriteMessage"]
    files = sorted((tmp_path / "data").glob("one_*.nxs"))
    assert [f.name for f in files] == ["one_001.nxs", "one_002.nxs"]
    with h5py.File(files[1], "r") as f:
        assert f["e/img"].shape == (Y, X) and f["e/img"].dtype == np.float64
        assert np.array_equal(f["e/img"][()], ramp(2, np.float64))


def test_nexus_bad_template_names_the_line(ndflow_bin, tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text('<NXroot>\n  <NXentry name="e">\n    <img type="pArray"/>\n'
                   '    <x type="EPICS_PV"/>\n  </NXentry>\n</NXroot>\n')
    w = run(
        ndflow_bin,
        tmp_path,
        f'type = "nexus"\nTemplateFilePath = "{tmp_path}"\nTemplateFileName = "bad.xml"\n'
        'FileName = "bad"\nFileWriteMode = "Single"\nAutoSave = "Yes"',
        frames=1,
    )
    assert w["FileTemplateValid"] in (0, "No")
    assert w["WriteStatus"] in (1, "Write error")
    assert 'line 4: <x>: unknown type="EPICS_PV"' in w["WriteMessage"], w["WriteMessage"]
    assert not list((tmp_path / "data").glob("bad_*.nxs"))
