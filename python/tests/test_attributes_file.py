"""NDAttributes files end to end: the driver's list (PARAM by areaDetector drvInfo name,
CONST through a macro, EPICS_PV monitored over Channel Access) and the HDF5 writer's own list
reach the NTNDArray image and the HDF5 file, with the values the IOC had for each frame.

Loopback only: the IOC serves its PVs on per-test free ports, and its EPICS_PV attribute
reads one of its own PVs through its Channel Access client (the same ports, loopback only: netenv.py).
"""

import time

import h5py
import numpy as np
import pytest
from pva_util import NdflowIoc

P = "ATTR:"

DRIVER_XML = """<?xml version="1.0" standalone="no" ?>
<Attributes>
  <Attribute name="Exposure" type="PARAM" source="ACQ_TIME" datatype="DOUBLE" description="Exposure time"/>
  <Attribute name="Sample" type="CONST" source="$(SAMPLE)" datatype="STRING" description="Sample name"/>
  <Attribute name="GainPV" type="EPICS_PV" source="{P}cam1:Gain_RBV" dbrtype="DBR_DOUBLE" description="Gain over CA"/>
</Attributes>
"""

WRITER_XML = '<Attributes><Attribute name="Writer" type="PARAM" source="PORT_NAME_SELF" datatype="STRING"/></Attributes>'

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
AcquireTime = 0.002
AcquirePeriod = 0.01
NDAttributesMacros = "SAMPLE=lysozyme"
NDAttributesFile = "{xml}"

[[port]]
name = "PVA1"
type = "pva"
prefix = "Pva1:"
NDArrayPort = "SIM1"

[[port]]
name = "HDF1"
type = "hdf5"
prefix = "HDF1:"
NDArrayPort = "SIM1"
FilePath = "{out}"
FileName = "attrs"
FileTemplate = "%s%s_%3.3d.h5"
FileNumber = 1
FileWriteMode = "Stream"
NumCapture = 3
NDAttributesFile = '{writer}'
"""


def attributes(img):
    """name → value of an NTNDArray's attribute list (p4p raw Value)."""
    return {a["name"]: a["value"] for a in img["attribute"]}


def test_driver_and_writer_attribute_files_reach_image_and_hdf5(ndflow_bin, tmp_path):
    xml = tmp_path / "sim_attributes.xml"
    xml.write_text(DRIVER_XML.replace("{P}", P))
    out = tmp_path / "data"
    out.mkdir()
    cfg = (CONFIG.replace("{P}", P).replace("{xml}", str(xml)).replace("{out}", str(out) + "/")
           .replace("{writer}", WRITER_XML))
    ioc = NdflowIoc(ndflow_bin, tmp_path, cfg)
    try:
        ioc.wait_for(P + "cam1:NDAttributesStatus", lambda v: int(v) == 0)
        ioc.wait_for(P + "HDF1:NDAttributesStatus", lambda v: int(v) == 0)
        ioc.ctx.put(P + "cam1:Gain", 3.5)
        # The EPICS_PV monitor connects once the IOC's CA server is up; acquire single frames
        # until one carries the monitored value.
        deadline, seen = time.time() + 30, None
        while time.time() < deadline:
            ioc.ctx.put(P + "cam1:Acquire", 1, wait=True, timeout=10)
            seen = attributes(ioc.raw.get(P + "Pva1:Image", timeout=5))
            if seen.get("GainPV") == 3.5:
                break
            time.sleep(0.2)
        assert seen.get("GainPV") == 3.5, (seen, ioc.log_text()[-2000:])
        assert seen["Exposure"] == pytest.approx(0.002)
        assert seen["Sample"] == "lysozyme"
        assert "Writer" not in seen, "the writer's list is the writer's own"

        ioc.ctx.put(P + "HDF1:Capture", 1)
        for _ in range(3):
            ioc.ctx.put(P + "cam1:Acquire", 1, wait=True, timeout=10)
        ioc.wait_for(P + "HDF1:Capture_RBV", lambda v: int(v) == 0)
    finally:
        ioc.close()
    with h5py.File(out / "attrs_001.h5", "r") as f:
        a = f["/entry/instrument/NDAttributes"]
        assert f["/entry/data/data"].shape == (3, 8, 16)
        assert np.allclose(a["Exposure"][...], 0.002)
        assert np.allclose(a["GainPV"][...], 3.5)
        assert [s.decode() if isinstance(s, bytes) else s for s in a["Sample"][...]] == ["lysozyme"] * 3
        assert [s.decode() if isinstance(s, bytes) else s for s in a["Writer"][...]] == ["HDF1"] * 3
        assert a["GainPV"].attrs["NDAttrSourceType"] in (b"NDAttrSourceEPICSPV", "NDAttrSourceEPICSPV")
        assert a["Exposure"].attrs["NDAttrDescription"] in (b"Exposure time", "Exposure time")


def test_a_bad_attribute_file_is_reported_not_fatal(ndflow_bin, tmp_path):
    cfg = """
prefix = "{P}"
[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = 8
MaxSizeY = 8
NDAttributesFile = "{missing}"
""".replace("{P}", P).replace("{missing}", str(tmp_path / "missing.xml"))
    ioc = NdflowIoc(ndflow_bin, tmp_path, cfg)
    try:
        status = ioc.wait_for(P + "cam1:NDAttributesStatus", lambda v: v is not None)
        assert int(status) == 1, "File not found"
        # An unknown FUNCT function is skipped with a warning; the rest of the file loads.
        ioc.ctx.put(P + "cam1:NDAttributesFile", '<Attributes><Attribute name="A" type="FUNCT" source="f"/></Attributes>')
        ioc.wait_for(P + "cam1:NDAttributesStatus", lambda v: int(v) == 0)
        ioc.ctx.put(P + "cam1:NDAttributesFile",
                    '<Attributes><Attribute name="E" type="FUNCT" source="expression" param="(1"/></Attributes>')
        ioc.wait_for(P + "cam1:NDAttributesStatus", lambda v: int(v) == 2)
    finally:
        log = ioc.log_text()
        ioc.close()
    assert "missing.xml" in log and "FUNCT 'f'" in log and "Attribute #1 'E': expression" in log, log
