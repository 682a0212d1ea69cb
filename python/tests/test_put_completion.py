"""Put-completion over pvAccess: a PUT to a busy record returns when the operation has ended,
as ophyd-async's `set(wait=True)` expects. Acquire returns after the last frame (and, with
WaitForPlugins, after the plugins drained); an HDF5 Capture returns when the file is closed.

Loopback only: the IOC and the clients get netenv.py's loopback variables with per-test free
ports.
"""

import time

import h5py
import pytest
from pva_util import NdflowIoc, enum_index

P = "PC:"

CONFIG = """
prefix = "{P}"

[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = 64
MaxSizeY = 32
DataType = "UInt16"
ImageMode = "Multiple"
NumImages = 8
AcquireTime = 0.0
AcquirePeriod = 0.05

[[port]]
name = "HDF1"
type = "hdf5"
prefix = "HDF1:"
NDArrayPort = "SIM1"
FilePath = "{DIR}"
FileName = "pc"
FileTemplate = "%s%s_%3.3d.h5"
FileWriteMode = "Stream"
NumCapture = 8
"""


@pytest.fixture(scope="module")
def ioc(ndflow_bin, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("put_completion")
    cfg = CONFIG.replace("{P}", P).replace("{DIR}", str(tmp) + "/")
    ioc = NdflowIoc(ndflow_bin, tmp, cfg)
    ioc.wait_for(P + "cam1:ArrayCounter_RBV", lambda v: v == 0)
    yield ioc
    ioc.close()


def test_acquire_put_returns_after_the_last_frame(ioc):
    ioc.ctx.put(P + "cam1:ArrayCounter", 0)
    t0 = time.monotonic()
    ioc.ctx.put(P + "cam1:Acquire", 1, wait=True, timeout=20)
    took = time.monotonic() - t0
    # Eight frames 50 ms apart: at least seven periods, and every frame is out.
    assert took >= 0.3, took
    assert ioc.ctx.get(P + "cam1:ArrayCounter_RBV") == 8
    assert enum_index(ioc.ctx.get(P + "cam1:Acquire_RBV")) == 0
    assert enum_index(ioc.ctx.get(P + "cam1:DetectorState_RBV")) == 0  # Idle


def test_capture_put_returns_when_the_file_is_closed(ioc):
    ioc.ctx.put(P + "cam1:ArrayCounter", 0)
    # Capture starts at once but completes only when NumCapture frames are written.
    done = []
    import threading

    t = threading.Thread(
        target=lambda: done.append(ioc.ctx.put(P + "HDF1:Capture", 1, wait=True, timeout=30))
    )
    t.start()
    ioc.wait_for(P + "HDF1:Capture_RBV", lambda v: enum_index(v) == 1)
    assert t.is_alive(), "Capture returned before any frame was written"
    ioc.ctx.put(P + "cam1:Acquire", 1, wait=True, timeout=20)
    t.join(timeout=20)
    assert not t.is_alive(), "Capture put never completed"
    name = ioc.raw.get(P + "HDF1:FullFileName_RBV")["value"]
    assert ioc.ctx.get(P + "HDF1:NumCaptured_RBV") == 8
    # The file is closed when the put returns: it opens without SWMR and holds every frame.
    with h5py.File(name, "r") as f:
        assert f["/entry/data/data"].shape == (8, 32, 64)


def test_refused_busy_put_fails_at_once(ioc):
    with pytest.raises(Exception) as e:
        ioc.ctx.put(P + "cam1:ImageMode", 7, wait=True, timeout=5)
    assert "ImageMode" in str(e.value)
