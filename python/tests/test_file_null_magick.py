"""The `null` (NDFileNull) and `magick` (NDFileMagick) file ports through the real binary.

magick: sim → PNG/BMP/GIF/TIFF (and JPEG) by the FileTemplate's extension, read back with
Pillow pixel-exactly for the lossless formats (UInt8 at BitDepth 8, UInt16 at BitDepth 16, RGB1
checked against the `tiff` port's file of the same frames); a type a format cannot hold is
refused in WriteStatus/WriteMessage. null: the NDFile counters and FullFileName_RBV as for a
real writer with nothing on disk, and DeleteDriverFile removing the file that the driver's
NDAttributes file names in each frame's DriverFileName attribute.

Loopback only: the IOC gets netenv.py's loopback variables with per-test free ports.
"""

import subprocess

import numpy as np
import pytest
import tifffile
from PIL import Image
from pva_util import NdflowIoc, enum_index


def run_until_idle(ndflow_bin, tmp_path, config):
    cfg = tmp_path / "ioc.toml"
    cfg.write_text(config)
    proc = subprocess.run(
        [str(ndflow_bin), "run", str(cfg), "--until-idle", "--quiet"],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


SIM = """
[[port]]
name = "SIM1"
type = "sim"
MaxSizeX = 64
MaxSizeY = 32
DataType = "{dtype}"
ColorMode = "{color}"
ImageMode = "Multiple"
NumImages = 3
AcquireTime = 0.0
AcquirePeriod = 0.005
Acquire = 1
"""

WRITER = """
[[port]]
name = "{name}"
type = "{type}"
NDArrayPort = "SIM1"
QueueSize = 20
FilePath = "{out}"
CreateDirectory = -1
FileName = "{name}"
FileNumber = 1
AutoIncrement = "Yes"
FileTemplate = "%s%s_%3.3d.{ext}"
FileWriteMode = "Stream"
NumCapture = 3
Capture = 1
{extra}
"""


def writer(name, ext, out, typ="magick", extra=""):
    return WRITER.format(name=name, type=typ, out=out, ext=ext, extra=extra)


def ramp(k, dtype):
    """LinearRamp with unit gains: frame k (from 1) holds x + y + (k - 1)."""
    y, x = np.mgrid[0:32, 0:64]
    return (x + y + k - 1).astype(dtype)


def read(path):
    with Image.open(path) as im:
        im.load()
        return im.mode, np.asarray(im)


def test_magick_uint8_mono_every_format(ndflow_bin, tmp_path):
    out = tmp_path / "data"
    cfg = SIM.format(dtype="UInt8", color="Mono")
    cfg += writer("PNG1", "png", out)
    cfg += writer("BMP1", "bmp", out)
    cfg += writer("GIF1", "gif", out)
    cfg += writer("TIF1", "tif", out, extra='CompressType = "LZW"')
    cfg += writer("JPG1", "jpg", out, extra="Quality = 95")
    run_until_idle(ndflow_bin, tmp_path, cfg)
    for name, ext in [("PNG1", "png"), ("BMP1", "bmp"), ("GIF1", "gif"), ("TIF1", "tif")]:
        files = sorted(out.glob(f"{name}_*.{ext}"))
        assert [f.name for f in files] == [f"{name}_{i:03d}.{ext}" for i in (1, 2, 3)]
        for k, f in enumerate(files, start=1):
            mode, img = read(f)
            if mode == "P":  # GIF: palette indices
                with Image.open(f) as im:
                    img = np.asarray(im.convert("L"))
            assert img.shape == (32, 64), f.name
            np.testing.assert_array_equal(img, ramp(k, np.uint8), err_msg=f.name)
    with tifffile.TiffFile(out / "TIF1_001.tif") as t:
        assert t.pages[0].compression == 5  # LZW
    mode, img = read(out / "JPG1_002.jpg")
    assert mode == "L" and img.shape == (32, 64)
    assert np.abs(img.astype(int) - ramp(2, np.uint8)).mean() < 3.0


def test_magick_uint16_bit_depth_16(ndflow_bin, tmp_path):
    out = tmp_path / "data"
    cfg = SIM.format(dtype="UInt16", color="Mono")
    cfg += writer("PNG1", "png", out, extra='BitDepth = "16"')
    cfg += writer("TIF1", "tiff", out, extra='BitDepth = "16"\nCompressType = "Zip"')
    cfg += writer("PNG8", "png", out)  # BitDepth 8: scaled as GraphicsMagick does
    cfg += writer("BMP1", "bmp", out, extra='BitDepth = "16"')  # BMP cannot hold 16 bits
    run_until_idle(ndflow_bin, tmp_path, cfg)
    for k in (1, 2, 3):
        want = ramp(k, np.uint16)
        with Image.open(out / f"PNG1_{k:03d}.png") as im:
            assert im.mode.startswith("I")
            np.testing.assert_array_equal(np.asarray(im).astype(np.uint16), want)
        got = tifffile.imread(out / f"TIF1_{k:03d}.tiff")
        assert got.dtype == np.uint16
        np.testing.assert_array_equal(got, want)
        _, img8 = read(out / f"PNG8_{k:03d}.png")
        np.testing.assert_array_equal(img8, ((want.astype(np.uint32) + 128) // 257).astype(np.uint8))
    assert not list(out.glob("BMP1_*")), "refused frames leave no file"


def test_magick_rgb1_matches_tiff_writer(ndflow_bin, tmp_path):
    out = tmp_path / "data"
    cfg = SIM.format(dtype="UInt8", color="RGB1")
    cfg += writer("REF1", "tif", out, typ="tiff")
    cfg += writer("PNG1", "png", out)
    cfg += writer("BMP1", "bmp", out)
    cfg += writer("TIF1", "tif", out, extra='CompressType = "RLE"')
    run_until_idle(ndflow_bin, tmp_path, cfg)
    for k in (1, 2, 3):
        want = tifffile.imread(out / f"REF1_{k:03d}.tif")
        assert want.shape == (32, 64, 3) and want.dtype == np.uint8
        for name, ext in [("PNG1", "png"), ("BMP1", "bmp"), ("TIF1", "tif")]:
            mode, img = read(out / f"{name}_{k:03d}.{ext}")
            assert mode == "RGB", name
            np.testing.assert_array_equal(img, want, err_msg=f"{name} {k}")


P = "NUL:"

NULL_CONFIG = """
prefix = "{P}"

[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = 16
MaxSizeY = 8
DataType = "{dtype}"
ImageMode = "Multiple"
NumImages = 3
AcquireTime = 0.0
AcquirePeriod = 0.005
NDAttributesFile = '{xml}'

[[port]]
name = "NULL1"
type = "null"
prefix = "Null1:"
NDArrayPort = "SIM1"
QueueSize = 20
FilePath = "{out}"
FileName = "nul"
FileNumber = 10
AutoIncrement = "Yes"
FileTemplate = "%s%s_%4.4d.dat"
FileWriteMode = "Stream"
NumCapture = 3
DeleteDriverFile = "Yes"

[[port]]
name = "MAG1"
type = "magick"
prefix = "Magick1:"
NDArrayPort = "SIM1"
FilePath = "{out}"
FileName = "mag"
FileTemplate = "%s%s_%3.3d.gif"
AutoSave = "Yes"
"""


@pytest.fixture
def null_ioc(ndflow_bin, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    driver_file = tmp_path / "driver_frame.raw"
    xml = ('<Attributes><Attribute name="DriverFileName" type="CONST" '
           f'source="{driver_file}" datatype="STRING"/></Attributes>')
    ioc = NdflowIoc(ndflow_bin, tmp_path, NULL_CONFIG.format(P=P, out=out, xml=xml, dtype="Int32"))
    ioc.wait_for(P + "Null1:FilePath_RBV", lambda v: text(v).rstrip("/") == str(out))
    yield ioc, out, driver_file
    ioc.close()


def pv(ioc, name):
    return ioc.ctx.get(P + name, timeout=5.0)


def text(v):
    """A string PV's value (p4p's ntstr prints its timestamp too)."""
    return str.__str__(v)


def acquire(ioc, n):
    ioc.ctx.put(P + "cam1:NumImages", n)
    ioc.ctx.put(P + "cam1:Acquire", 1, wait=True, timeout=10)


def test_null_modes_counters_and_delete_driver_file(null_ioc):
    ioc, out, driver_file = null_ioc
    assert text(pv(ioc, "Null1:PluginType_RBV")) == "NDFileNull"

    # Stream: 3 frames "written", 3 names used, the driver file of each frame deleted.
    driver_file.write_bytes(b"detector data")
    ioc.ctx.put(P + "Null1:Capture", 1)
    acquire(ioc, 3)
    ioc.wait_for(P + "Null1:Capture_RBV", lambda v: enum_index(v) == 0)
    assert int(pv(ioc, "Null1:NumCaptured_RBV")) == 3
    assert int(pv(ioc, "Null1:FileNumber_RBV")) == 13
    assert text(pv(ioc, "Null1:FullFileName_RBV")) == f"{out}/nul_0012.dat"
    assert enum_index(pv(ioc, "Null1:WriteStatus")) == 0
    assert not driver_file.exists()
    assert list(out.iterdir()) == [], "NDFileNull writes nothing"

    # Capture: 2 frames held, then "written" (AutoSave) with their driver file deleted.
    driver_file.write_bytes(b"detector data")
    ioc.ctx.put(P + "Null1:FileWriteMode", 1)
    ioc.ctx.put(P + "Null1:NumCapture", 2)
    ioc.ctx.put(P + "Null1:AutoSave", 1)
    ioc.ctx.put(P + "Null1:Capture", 1)
    acquire(ioc, 2)
    ioc.wait_for(P + "Null1:Capture_RBV", lambda v: enum_index(v) == 0)
    ioc.wait_for(P + "Null1:FileNumber_RBV", lambda v: int(v) == 15)
    assert text(pv(ioc, "Null1:FullFileName_RBV")) == f"{out}/nul_0014.dat"
    assert not driver_file.exists()

    # Single with AutoSave and DeleteDriverFile = No: one name per frame, the file kept.
    driver_file.write_bytes(b"detector data")
    ioc.ctx.put(P + "Null1:DeleteDriverFile", 0)
    ioc.ctx.put(P + "Null1:FileWriteMode", 0)
    acquire(ioc, 2)
    ioc.wait_for(P + "Null1:FileNumber_RBV", lambda v: int(v) == 17)
    assert driver_file.exists()
    # WriteFile "writes" the latest frame; ReadFile is refused as NDFileNull's.
    ioc.ctx.put(P + "Null1:WriteFile", 1, wait=True)
    assert int(pv(ioc, "Null1:FileNumber_RBV")) == 18
    ioc.ctx.put(P + "Null1:ReadFile", 1, wait=True)
    assert enum_index(pv(ioc, "Null1:WriteStatus")) == 1
    assert "NDFileNull cannot read" in text(pv(ioc, "Null1:WriteMessage"))
    assert list(out.iterdir()) == []

    # magick refuses the Int32 frames with a message, never a file.
    assert enum_index(pv(ioc, "Magick1:WriteStatus")) == 1
    assert "Int32" in text(pv(ioc, "Magick1:WriteMessage"))
    assert int(pv(ioc, "Magick1:FramesNotWritten_RBV")) >= 2
