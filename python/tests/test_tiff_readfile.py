"""NDFileTIFF ReadFile through the IOC: the file FileNumber names is read back with a put
(completing when read) and reaches the port's downstream plugin, which a pvAccess client reads
as image1:ArrayData: first a file the port wrote, then one written by tifffile (another
writer). Loopback only, per-test ports."""

import numpy as np
import tifffile
from pva_util import NdflowIoc

P = "RF:"

CONFIG = """
prefix = "{P}"

[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = 24
MaxSizeY = 10
DataType = "UInt16"
ImageMode = "Single"
AcquireTime = 0.001
AcquirePeriod = 0.0

[[port]]
name = "TIFF1"
type = "tiff"
prefix = "TIFF1:"
NDArrayPort = "SIM1"
FilePath = "{out}"
FileName = "rf"
FileNumber = 1
AutoIncrement = "No"
FileWriteMode = "Single"
AutoSave = "Yes"

[[port]]
name = "IMAGE1"
type = "stdarrays"
prefix = "image1:"
NDArrayPort = "TIFF1"
ArrayDataType = "UInt16"
"""


def test_readfile_sends_the_written_frame_downstream(ndflow_bin, tmp_path):
    out = tmp_path / "tiff"
    out.mkdir()
    ioc = NdflowIoc(ndflow_bin, tmp_path, CONFIG.replace("{P}", P).replace("{out}", str(out) + "/"))
    try:
        ioc.wait_for(P + "cam1:ArrayCounter_RBV", lambda v: v == 0)
        ioc.ctx.put(P + "cam1:Acquire", 1, wait=True, timeout=10)
        ioc.wait_for(P + "TIFF1:ArrayCounter_RBV", lambda v: v == 1)
        written = tifffile.imread(out / "rf_001.tif")
        assert written.shape == (10, 24) and written.dtype == np.uint16
        # File plugins pass each frame on (ADCore 3): the acquired frame is image1's first.
        ioc.wait_for(P + "image1:ArrayCounter_RBV", lambda v: v == 1)
        ioc.ctx.put(P + "TIFF1:ReadFile", 1, wait=True, timeout=10)
        assert ioc.ctx.get(P + "TIFF1:ReadFile_RBV") == 0
        ioc.wait_for(P + "image1:ArrayCounter_RBV", lambda v: v == 2)
        data = np.asarray(ioc.ctx.get(P + "image1:ArrayData"))
        assert np.array_equal(data[: 24 * 10].astype(np.uint16), written.ravel())
        assert ioc.ctx.get(P + "image1:UniqueId_RBV") == ioc.ctx.get(P + "cam1:UniqueId_RBV")
        assert ioc.ctx.get(P + "TIFF1:WriteStatus") == 0
        # Another writer's file under the same name: its pixels, not the sim's, come out.
        other = (np.arange(10 * 24, dtype=np.uint16).reshape(10, 24) * 251) ^ 0x5A5A
        tifffile.imwrite(out / "rf_001.tif", other)
        ioc.ctx.put(P + "TIFF1:ReadFile", 1, wait=True, timeout=10)
        ioc.wait_for(P + "image1:ArrayCounter_RBV", lambda v: v == 3)
        data = np.asarray(ioc.ctx.get(P + "image1:ArrayData"))
        assert np.array_equal(data[: 24 * 10].astype(np.uint16), other.ravel())
        # A file that is not there: WriteStatus/WriteMessage say so, nothing is sent.
        ioc.ctx.put(P + "TIFF1:FileNumber", 7)
        ioc.ctx.put(P + "TIFF1:ReadFile", 1, wait=True, timeout=10)
        ioc.wait_for(P + "TIFF1:WriteStatus", lambda v: int(v) == 1)
        assert "rf_007.tif" in str(ioc.ctx.get(P + "TIFF1:WriteMessage"))
        assert ioc.ctx.get(P + "image1:ArrayCounter_RBV") == 3
    finally:
        ioc.close()
