"""File control by frame attributes, end to end: the sim driver's NDAttributes file gives its
frames FilePluginFileName / FilePluginFileNumber / FilePluginDestination / FilePluginClose;
putting a new attribute file over pvAccess changes the files an HDF5 stream and a TIFF writer
make, which h5py and tifffile read back.

Loopback only: the IOC serves its PVs on per-test free ports (pva_util.NdflowIoc).
"""

import h5py
import tifffile
from pva_util import NdflowIoc

P = "FAC:"


def attrs_xml(name, number=None, dest=None, close=None):
    """An NDAttributes file of CONST attributes (numbers as INT)."""
    rows = [f'<Attribute name="FilePluginFileName" type="CONST" source="{name}" datatype="STRING"/>']
    if number is not None:
        rows.append(f'<Attribute name="FilePluginFileNumber" type="CONST" source="{number}" datatype="INT"/>')
    if dest is not None:
        rows.append(f'<Attribute name="FilePluginDestination" type="CONST" source="{dest}" datatype="STRING"/>')
    if close is not None:
        rows.append(f'<Attribute name="FilePluginClose" type="CONST" source="{close}" datatype="INT"/>')
    return "<Attributes>" + "".join(rows) + "</Attributes>"


CONFIG = """
prefix = "{P}"

[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = 16
MaxSizeY = 8
DataType = "UInt8"
ImageMode = "Single"
AcquireTime = 0.001
AcquirePeriod = 0.002
NDAttributesFile = '{xml}'

[[port]]
name = "HDF1"
type = "hdf5"
prefix = "HDF1:"
NDArrayPort = "SIM1"
QueueSize = 20
FilePath = "{out}"
FileName = "unset"
FileTemplate = "%s%s_%3.3d.h5"
FileNumber = 1
AutoIncrement = "Yes"
FileWriteMode = "Stream"
NumCapture = 0
LazyOpen = "Yes"

[[port]]
name = "TIF1"
type = "tiff"
prefix = "TIF1:"
NDArrayPort = "SIM1"
QueueSize = 20
FilePath = "{out}"
FileName = "unset"
FileTemplate = "%s%s_%3.3d.tif"
FileNumber = 1
AutoIncrement = "Yes"
FileWriteMode = "Single"
AutoSave = "Yes"
"""


def test_attributes_name_route_and_close_files(ndflow_bin, tmp_path):
    out = tmp_path / "data"
    out.mkdir()
    cfg = CONFIG.replace("{P}", P).replace("{out}", str(out) + "/").replace("{xml}", attrs_xml("alpha"))
    ioc = NdflowIoc(ndflow_bin, tmp_path, cfg)

    def acquire(n):
        for _ in range(n):
            ioc.ctx.put(P + "cam1:Acquire", 1, wait=True, timeout=10)

    def attributes(xml):
        ioc.ctx.put(P + "cam1:NDAttributesFile", xml, wait=True, timeout=10)
        ioc.wait_for(P + "cam1:NDAttributesStatus", lambda v: int(v) == 0)

    try:
        ioc.wait_for(P + "cam1:NDAttributesStatus", lambda v: int(v) == 0)
        ioc.ctx.put(P + "HDF1:Capture", 1)
        ioc.wait_for(P + "HDF1:Capture_RBV", lambda v: int(v) == 1)
        acquire(2)  # alpha: both writers
        attributes(attrs_xml("beta"))
        acquire(3)  # beta: the stream opens a new file, TIFF names follow
        attributes(attrs_xml("beta", dest="HDF1", close=1))
        acquire(1)  # HDF1 only: written into beta's file, which it then closes
        # As NDPluginFile: the close ends the capture.
        ioc.wait_for(P + "HDF1:Capture_RBV", lambda v: int(v) == 0)
        attributes(attrs_xml("gamma", number=50, dest="TIF1"))
        acquire(1)  # TIF1 only, numbered by the frame
        ioc.wait_for(P + "HDF1:NumCaptured_RBV", lambda v: int(v) == 6)
        ioc.wait_for(P + "HDF1:DroppedArrays_RBV", lambda v: int(v) == 1)
        ioc.wait_for(P + "TIF1:DroppedArrays_RBV", lambda v: int(v) == 1)
        ioc.wait_for(P + "TIF1:FullFileName_RBV", lambda v: v.endswith("gamma_050.tif"))
        assert ioc.ctx.get(P + "TIF1:FileName_RBV") == "gamma"  # ntstr compares as its text
        assert int(ioc.ctx.get(P + "TIF1:FileNumber_RBV")) == 51
        assert ioc.ctx.get(P + "HDF1:FileName_RBV") == "beta"
        assert int(ioc.ctx.get(P + "HDF1:FramesNotWritten_RBV")) == 0
        assert int(ioc.ctx.get(P + "TIF1:FramesNotWritten_RBV")) == 0
        ioc.ctx.put(P + "HDF1:Capture", 0)
        ioc.wait_for(P + "HDF1:Capture_RBV", lambda v: int(v) == 0)
        assert int(ioc.ctx.get(P + "HDF1:WriteStatus")) == 0, ioc.ctx.get(P + "HDF1:WriteMessage")
    finally:
        log = ioc.log_text()
        ioc.close()

    h5 = sorted(p.name for p in out.glob("*.h5"))
    assert h5 == ["alpha_001.h5", "beta_002.h5"], (h5, log[-2000:])
    ids = {}
    for name in h5:
        with h5py.File(out / name, "r") as f:
            assert f["/entry/data/data"].shape[1:] == (8, 16)
            ids[name] = [int(u) for u in f["/entry/instrument/NDAttributes/NDArrayUniqueId"][...]]
    assert [len(ids[n]) for n in h5] == [2, 4], ids
    assert ids["alpha_001.h5"] + ids["beta_002.h5"] == sorted(ids["alpha_001.h5"] + ids["beta_002.h5"])

    tifs = sorted(p.name for p in out.glob("*.tif"))
    assert tifs == ["alpha_001.tif", "alpha_002.tif", "beta_003.tif", "beta_004.tif",
                    "beta_005.tif", "gamma_050.tif"], tifs
    tif_ids = []
    for name in tifs:
        with tifffile.TiffFile(out / name) as t:
            assert t.pages[0].asarray().shape == (8, 16)
            tif_ids.append(t.pages[0].tags[65001].value)  # uniqueId
    # The frame for HDF1 only (the 6th) is in no TIFF; the 7th is gamma_050.
    assert tif_ids[:5] == ids["alpha_001.h5"] + ids["beta_002.h5"][:3]
    assert tif_ids[5] == ids["beta_002.h5"][3] + 1
