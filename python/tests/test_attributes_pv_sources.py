"""EPICS_PV sources of NDAttributes files, end to end through the binary, checked in the HDF5
file the IOC writes:

- this IOC's own PVs (a double readback, an enum as index and as menu string, a string, a long
  string of a port built after the driver, an integer) are read in process: the IOC runs with
  Channel Access and pvAccess serving both off, so no network path exists;
- a PV of another server (a p4p SharedPV: an NTScalar double and an NTEnum) is read over
  pvAccess with a `pva://` source, and follows the server's changes;
- a `ca://` source goes over Channel Access even for a PV this IOC serves (its CA server, on
  loopback).

Loopback only (netenv.py, with per-test free ports).
"""

import subprocess
import time

import h5py
import numpy as np
import pytest
from interop import require
from netenv import free_tcp_port, free_udp_port, process_env
from pva_util import NdflowIoc

P = "SELF:"


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def attrs_of(path):
    with h5py.File(path, "r") as f:
        a = f["/entry/instrument/NDAttributes"]
        return {k: a[k][...] for k in a.keys()}, f["/entry/data/data"].shape


SELF_XML = """<Attributes>
  <Attribute name="AcqTime" type="EPICS_PV" source="{P}cam1:AcquireTime_RBV" dbrtype="DBR_DOUBLE"/>
  <Attribute name="AcqTimeNative" type="EPICS_PV" source="{P}cam1:AcquireTime" dbrtype="DBR_NATIVE"/>
  <Attribute name="ModeIndex" type="EPICS_PV" source="{P}cam1:ImageMode" dbrtype="DBR_ENUM"/>
  <Attribute name="ModeText" type="EPICS_PV" source="{P}cam1:ImageMode_RBV" dbrtype="DBR_STRING"/>
  <Attribute name="TypeText" type="EPICS_PV" source="{P}cam1:DataType_RBV" dbrtype="DBR_STRING"/>
  <Attribute name="Manufacturer" type="EPICS_PV" source="{P}cam1:Manufacturer_RBV" dbrtype="DBR_NATIVE"/>
  <Attribute name="WriterFile" type="EPICS_PV" source="{P}HDF1:FileName_RBV" dbrtype="DBR_STRING"/>
  <Attribute name="SizeX" type="EPICS_PV" source="{P}cam1:SizeX_RBV" dbrtype="DBR_NATIVE"/>
</Attributes>"""

SELF_CONFIG = """
prefix = "{P}"

[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = 16
MaxSizeY = 8
DataType = "UInt16"
ImageMode = "Multiple"
NumImages = 3
AcquireTime = 0.0025
AcquirePeriod = 0.01
NDAttributesFile = "{xml}"
Acquire = 1

[[port]]
name = "HDF1"
type = "hdf5"
prefix = "HDF1:"
NDArrayPort = "SIM1"
QueueSize = 10
FilePath = "{out}"
FileName = "selfpvs_long_file_name_over_forty_characters_for_a_waveform"
FileTemplate = "%s%s_%3.3d.h5"
FileNumber = 1
FileWriteMode = "Stream"
LazyOpen = "Yes"
NumCapture = 3
Capture = 1
"""


def test_own_pvs_are_read_in_process_with_ca_and_pva_off(ndflow_bin, tmp_path):
    xml = tmp_path / "self.xml"
    xml.write_text(SELF_XML.replace("{P}", P))
    out = tmp_path / "data"
    out.mkdir()
    cfg = tmp_path / "self.toml"
    cfg.write_text(SELF_CONFIG.replace("{P}", P).replace("{xml}", str(xml)).replace("{out}", str(out) + "/"))
    env = process_env()
    proc = subprocess.run(
        [str(ndflow_bin), "run", str(cfg), "--until-idle", "--quiet", "--no-ca", "--no-pva"],
        env=env, capture_output=True, text=True, timeout=60,
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log
    # No network read was tried: nothing to connect to, nothing retried.
    assert "EPICS_PV attribute" not in log, log
    name = "selfpvs_long_file_name_over_forty_characters_for_a_waveform"
    a, shape = attrs_of(out / f"{name}_001.h5")
    assert shape == (3, 8, 16)
    assert np.allclose(a["AcqTime"], 0.0025)
    assert a["AcqTimeNative"].dtype == np.float64 and np.allclose(a["AcqTimeNative"], 0.0025)
    # ADBase's ImageMode menu: Single, Multiple, Continuous.
    assert a["ModeIndex"].dtype.kind == "i" and list(a["ModeIndex"]) == [1, 1, 1]
    assert [text(s) for s in a["ModeText"]] == ["Multiple"] * 3
    assert [text(s) for s in a["TypeText"]] == ["UInt16"] * 3
    assert [text(s) for s in a["Manufacturer"]] == ["Simulated detector"] * 3
    # A long string (waveform) of a port configured after the driver: resolved once it exists.
    assert [text(s) for s in a["WriterFile"]] == [name] * 3
    assert a["SizeX"].dtype == np.int32 and list(a["SizeX"]) == [16, 16, 16]


def test_the_python_package_reads_its_own_pvs_in_process_too(tmp_path):
    """The same config run by the ndflow package, serving nothing: the package installs the
    same EPICS_PV reader as `ndflow run`."""
    ndflow = require("ndflow")
    xml = tmp_path / "self.xml"
    xml.write_text(SELF_XML.replace("{P}", P))
    out = tmp_path / "data"
    out.mkdir()
    toml = SELF_CONFIG.replace("{P}", P).replace("{xml}", str(xml)).replace("{out}", str(out) + "/")
    with ndflow.Pipeline(toml=toml) as p:
        assert p.wait_idle(timeout=60)
    name = "selfpvs_long_file_name_over_forty_characters_for_a_waveform"
    a, shape = attrs_of(out / f"{name}_001.h5")
    assert shape == (3, 8, 16)
    assert np.allclose(a["AcqTime"], 0.0025)
    assert [text(s) for s in a["ModeText"]] == ["Multiple"] * 3
    assert [text(s) for s in a["Manufacturer"]] == ["Simulated detector"] * 3
    assert [text(s) for s in a["WriterFile"]] == [name] * 3
    assert list(a["SizeX"]) == [16, 16, 16]


PVA_XML = """<Attributes>
  <Attribute name="Temp" type="EPICS_PV" source="pva://EXT:Temp" dbrtype="DBR_NATIVE"/>
  <Attribute name="TempInt" type="EPICS_PV" source="pva://EXT:Temp" dbrtype="DBR_LONG"/>
  <Attribute name="ModeText" type="EPICS_PV" source="pva://EXT:Mode" dbrtype="DBR_STRING"/>
  <Attribute name="ModeIndex" type="EPICS_PV" source="pva://EXT:Mode" dbrtype="DBR_NATIVE"/>
  <Attribute name="GainCA" type="EPICS_PV" source="ca://PVAT:cam1:Gain_RBV" dbrtype="DBR_DOUBLE"/>
</Attributes>"""

PVA_CONFIG = """
prefix = "PVAT:"

[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = 8
MaxSizeY = 4
DataType = "UInt8"
ImageMode = "Single"
AcquireTime = 0.001
AcquirePeriod = 0.005
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
FileName = "extpvs"
FileTemplate = "%s%s_%3.3d.h5"
FileNumber = 1
FileWriteMode = "Stream"
NumCapture = 3
"""


def test_pva_sources_read_another_servers_pvs(ndflow_bin, tmp_path):
    from p4p.nt import NTEnum, NTScalar
    from p4p.server import Server
    from p4p.server.thread import SharedPV

    temp = SharedPV(nt=NTScalar("d"), initial=12.75)
    mode = SharedPV(nt=NTEnum(), initial={"index": 1, "choices": ["Off", "On", "Auto"]})
    udp = free_udp_port()
    server = Server(
        providers=[{"EXT:Temp": temp, "EXT:Mode": mode}],
        conf={
            "EPICS_PVAS_INTF_ADDR_LIST": "127.0.0.1",
            "EPICS_PVAS_BEACON_ADDR_LIST": "127.0.0.1",
            "EPICS_PVAS_AUTO_BEACON_ADDR_LIST": "NO",
            "EPICS_PVAS_SERVER_PORT": str(free_tcp_port()),
            "EPICS_PVAS_BROADCAST_PORT": str(udp),
        },
        useenv=False,
    )
    xml = tmp_path / "ext.xml"
    xml.write_text(PVA_XML)
    out = tmp_path / "data"
    out.mkdir()
    cfg = PVA_CONFIG.replace("{xml}", str(xml)).replace("{out}", str(out) + "/")
    # The IOC's pvAccess client searches the p4p server (its own server keeps its ports).
    ioc = NdflowIoc(ndflow_bin, tmp_path, cfg, extra_env={"EPICS_PVA_ADDR_LIST": f"127.0.0.1:{udp}"})
    try:
        ioc.wait_for("PVAT:cam1:NDAttributesStatus", lambda v: int(v) == 0)
        ioc.ctx.put("PVAT:cam1:Gain", 2.5)

        def frame_attrs():
            ioc.ctx.put("PVAT:cam1:Acquire", 1, wait=True, timeout=10)
            img = ioc.raw.get("PVAT:Pva1:Image", timeout=5)
            return {a["name"]: a["value"] for a in img["attribute"]}

        deadline, seen = time.time() + 30, {}
        while time.time() < deadline:
            seen = frame_attrs()
            if seen.get("Temp") == 12.75 and seen.get("ModeText") == "On" and seen.get("GainCA") == 2.5:
                break
            time.sleep(0.2)
        assert seen.get("Temp") == 12.75 and seen.get("ModeText") == "On", (seen, ioc.log_text()[-2000:])
        assert seen.get("GainCA") == 2.5, (seen, ioc.log_text()[-2000:])

        # The monitor follows the server: new values reach the next frames.
        temp.post(-3.5)
        mode.post({"index": 2, "choices": ["Off", "On", "Auto"]})
        deadline = time.time() + 10
        while time.time() < deadline:
            seen = frame_attrs()
            if seen.get("Temp") == -3.5 and seen.get("ModeText") == "Auto":
                break
            time.sleep(0.1)
        assert seen.get("Temp") == -3.5 and seen.get("ModeText") == "Auto", seen

        ioc.ctx.put("PVAT:HDF1:Capture", 1)
        for _ in range(3):
            ioc.ctx.put("PVAT:cam1:Acquire", 1, wait=True, timeout=10)
        ioc.wait_for("PVAT:HDF1:Capture_RBV", lambda v: int(v) == 0)
    finally:
        ioc.close()
        server.stop()
    a, shape = attrs_of(out / "extpvs_001.h5")
    assert shape == (3, 4, 8)
    assert a["Temp"].dtype == np.float64 and np.allclose(a["Temp"], -3.5)
    assert a["TempInt"].dtype == np.int32 and list(a["TempInt"]) == [-3] * 3
    assert [text(s) for s in a["ModeText"]] == ["Auto"] * 3
    assert list(a["ModeIndex"]) == [2, 2, 2]
    assert np.allclose(a["GainCA"], 2.5)


def test_a_bad_scheme_is_refused_naming_the_source(ndflow_bin, tmp_path):
    cfg = """
prefix = "BAD:"
ca = false
[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = 8
MaxSizeY = 8
"""
    ioc = NdflowIoc(ndflow_bin, tmp_path, cfg)
    try:
        ioc.wait_for("BAD:cam1:NDAttributesStatus", lambda v: int(v) == 0)
        ioc.ctx.put("BAD:cam1:NDAttributesFile",
                    '<Attributes><Attribute name="A" type="EPICS_PV" source="http://X:Y"/></Attributes>')
        ioc.wait_for("BAD:cam1:NDAttributesStatus", lambda v: int(v) == 2)
    finally:
        log = ioc.log_text()
        ioc.close()
    assert "http://X:Y" in log and "unknown scheme" in log, log


if __name__ == "__main__":
    pytest.main([__file__, "-v"])
