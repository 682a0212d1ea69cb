"""Pool records of plugin ports over pvAccess: a plugin allocates its outputs from its source's
pool (as areaDetector's do), so its PoolMaxMem / PoolUsedMem / PoolAllocBuffers /
PoolFreeBuffers / PoolUsedBuffers show that pool — nonzero while frames flow, equal to the
driver's once the pipeline is idle — and EmptyFreeList / PreAllocBuffers written on the plugin
act on it.

Loopback only (netenv.py, with per-test free ports).
"""

import time

from pva_util import NdflowIoc

P = "POOL:"

CONFIG = """
prefix = "{P}"
ca = false

[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = 64
MaxSizeY = 32
DataType = "UInt16"
ImageMode = "Continuous"
AcquireTime = 0.001
AcquirePeriod = 0.005
PoolMaxMem = 50

[[port]]
name = "ROI1"
type = "roi"
prefix = "ROI1:"
NDArrayPort = "SIM1"
EnableX = "Enable"
SizeX = 16
SizeY = 8
"""

POOL = ["PoolMaxMem", "PoolUsedMem", "PoolAllocBuffers", "PoolFreeBuffers", "PoolUsedBuffers"]


def read(ioc, port):
    return {k: ioc.ctx.get(f"{P}{port}:{k}", timeout=5) for k in POOL}


def settled(ioc):
    """The pool records of cam1 and ROI1 once two reads a publish period apart agree."""
    for _ in range(50):
        a = (read(ioc, "cam1"), read(ioc, "ROI1"))
        time.sleep(0.1)
        b = (read(ioc, "cam1"), read(ioc, "ROI1"))
        if a == b:
            return b
    raise AssertionError(f"pool records never settled: {a} {b}")


def test_plugin_pool_records_show_the_source_pool(ndflow_bin, tmp_path):
    ioc = NdflowIoc(ndflow_bin, tmp_path, CONFIG.replace("{P}", P))
    try:
        ioc.wait_for(P + "ROI1:PoolAllocBuffers", lambda v: v is not None)
        # Before any array the plugin knows no pool.
        assert read(ioc, "ROI1")["PoolAllocBuffers"] == 0
        ioc.ctx.put(P + "cam1:Acquire", 1)
        ioc.wait_for(P + "ROI1:ArrayCounter_RBV", lambda v: int(v) > 20)
        # While frames flow: the plugin's records are live and consistent.
        r = read(ioc, "ROI1")
        assert r["PoolAllocBuffers"] > 0 and r["PoolUsedMem"] > 0, r
        assert r["PoolMaxMem"] == 50
        assert 0 <= r["PoolFreeBuffers"] <= r["PoolAllocBuffers"], r
        ioc.ctx.put(P + "cam1:Acquire", 0)
        ioc.wait_for(P + "cam1:DetectorState_RBV", lambda v: int(v.raw.value.index) == 0)
        cam, roi = settled(ioc)
        assert cam == roi, (cam, roi)
        # Idle: the buffers are driver frames (64x32 u16) and ROI outputs (16x8 u16), all from
        # this one pool; the ROI keeps its last input (for ProcessPlugin), so one may be in use.
        assert roi["PoolUsedBuffers"] == roi["PoolAllocBuffers"] - roi["PoolFreeBuffers"], roi
        assert roi["PoolUsedBuffers"] <= 1, roi
        n, used = roi["PoolAllocBuffers"], round(roi["PoolUsedMem"] * 1e6)
        assert any(64 * 32 * 2 * k + 16 * 8 * 2 * (n - k) == used for k in range(1, n)), roi
        in_use = roi["PoolUsedBuffers"]

        # EmptyFreeList written on the plugin frees the source pool's free buffers.
        ioc.ctx.put(P + "ROI1:EmptyFreeList", 1)
        cam, roi = settled(ioc)
        assert roi["PoolFreeBuffers"] == 0 and roi["PoolAllocBuffers"] == in_use, roi
        assert cam == roi, (cam, roi)
        base = round(roi["PoolUsedMem"] * 1e6)

        # PreAllocBuffers on the plugin: NumPreAllocBuffers of its last array's size (16x8 u16).
        ioc.ctx.put(P + "ROI1:NumPreAllocBuffers", 3)
        ioc.ctx.put(P + "ROI1:PreAllocBuffers", 1, wait=True, timeout=10)
        cam, roi = settled(ioc)
        assert roi["PoolAllocBuffers"] == in_use + 3 and roi["PoolFreeBuffers"] == 3, roi
        assert round(roi["PoolUsedMem"] * 1e6) - base == 3 * 16 * 8 * 2, roi
        assert cam == roi, (cam, roi)

        # The cap written on the driver shows on the plugin.
        ioc.ctx.put(P + "cam1:PoolMaxMem", 20)
        cam, roi = settled(ioc)
        assert roi["PoolMaxMem"] == 20 and cam["PoolMaxMem"] == 20, (cam, roi)
    finally:
        ioc.close()
