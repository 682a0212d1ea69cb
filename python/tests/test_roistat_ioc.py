"""ROIStat, TimeSeries and Stats time series through the binary: a sim feeds a `roistat` port, whose
output (the same pixels, with the ROI results as attributes) feeds a `pva` port; the ROI
results, their time series and the Stats port's TS waveforms read over pvAccess (p4p) equal
numpy on the frames the pva port published.

Loopback only: the IOC and the clients get netenv.py's loopback variables with per-test free
ports.
"""

import time

import numpy as np
import pytest
from pva_util import NdflowIoc

P = "RS13:"

CONFIG = """
prefix = "{P}"

[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = 64
MaxSizeY = 48
DataType = "UInt16"
ImageMode = "Single"
AcquireTime = 0.0
AcquirePeriod = 0.0
Noise = 500

[[port]]
name = "ROISTAT1"
type = "roistat"
prefix = "ROIStat1:"
NDArrayPort = "SIM1"
BlockingCallbacks = "Yes"

[[port]]
name = "STATS1"
type = "stats"
prefix = "Stats1:"
NDArrayPort = "SIM1"
BlockingCallbacks = "Yes"

[[port]]
name = "TS1"
type = "timeseries"
prefix = "TS1:"
NDArrayPort = "SIM1"
BlockingCallbacks = "Yes"

[[port]]
name = "PVA1"
type = "pva"
prefix = "Pva1:"
NDArrayPort = "ROISTAT1"
BlockingCallbacks = "Yes"
"""

# (MinX, MinY, SizeX, SizeY, BgdWidth): inside, across the right/bottom edges, a 1-row strip.
ROIS = [(5, 4, 20, 10, 2), (50, 40, 30, 30, 1), (0, 17, 64, 1, 0)]
N_POINTS = 3


@pytest.fixture(scope="module")
def ioc(ndflow_bin, tmp_path_factory):
    ioc = NdflowIoc(ndflow_bin, tmp_path_factory.mktemp("roistat_ioc"), CONFIG.replace("{P}", P))
    try:
        ioc.wait_for(P + "ROIStat1:TSNumPoints_RBV", lambda v: v == 2048)
        yield ioc
    finally:
        ioc.close()


def expected(img, roi):
    """min, max, mean, total, net of one ROI as NDPluginROIStat defines them (numpy)."""
    ny, nx = img.shape
    x0, y0, sx, sy, bgd = roi
    x0, y0 = min(max(x0, 0), nx - 1), min(max(y0, 0), ny - 1)
    sx, sy = min(max(sx, 1), nx - x0), min(max(sy, 1), ny - y0)
    r = img[y0:y0 + sy, x0:x0 + sx].astype(np.float64)
    total = r.sum()
    net = total
    if bgd > 0:
        bx, by = min(bgd, sx), min(bgd, sy)
        parts = [r[:by, :], r[sy - by:, :], r[by:sy - by, :bx], r[by:sy - by, sx - bx:]]
        n = sum(p.size for p in parts)
        net = total - sum(p.sum() for p in parts) / n * r.size
    return {"MinValue": r.min(), "MaxValue": r.max(), "MeanValue": total / r.size, "Total": total, "Net": net}, (x0, y0, sx, sy)


def acquire(ioc):
    ctx = ioc.ctx
    before = ctx.get(P + "ROIStat1:ArrayCounter_RBV")
    ctx.put(P + "cam1:Acquire", 1)
    ioc.wait_for(P + "ROIStat1:ArrayCounter_RBV", lambda v: v > before)
    ioc.wait_for(P + "Pva1:ArrayCounter_RBV", lambda v: v > before)
    ioc.wait_for(P + "cam1:Acquire_RBV", lambda v: v.raw.value.index == 0)


def test_roi_results_and_time_series_equal_numpy(ioc):
    ctx = ioc.ctx
    for n, (x0, y0, sx, sy, bgd) in enumerate(ROIS, start=1):
        r = f"{P}ROIStat1:{n}:"
        ctx.put(r + "Use", 1)
        ctx.put(r + "Name", f"roi{n}")
        for k, v in zip(["MinX", "MinY", "SizeX", "SizeY", "BgdWidth"], [x0, y0, sx, sy, bgd]):
            ctx.put(r + k, v)
    ctx.put(P + "ROIStat1:TSNumPoints", N_POINTS)
    ctx.put(P + "ROIStat1:TSControl", "Erase/Start")
    ctx.put(P + "Stats1:TSNumPoints", N_POINTS)
    ctx.put(P + "Stats1:TSControl", "Erase/Start")
    ioc.wait_for(P + "ROIStat1:TSAcquiring", lambda v: v.raw.value.index == 1)

    totals = {n: [] for n in range(1, len(ROIS) + 1)}
    frame_totals, frame_mins = [], []
    for _ in range(N_POINTS):
        acquire(ioc)
        img = ctx.get(P + "Pva1:Image")
        assert img.shape == (48, 64) and img.dtype == np.uint16
        assert img.std() > 0, "the sim's noise makes every frame different"
        frame_totals.append(float(img.astype(np.float64).sum()))
        frame_mins.append(float(img.min()))
        for n, roi in enumerate(ROIS, start=1):
            want, geometry = expected(img, roi)
            for name, w in want.items():
                pv = f"{P}ROIStat1:{n}:{name}_RBV"
                ioc.wait_for(pv, lambda v, w=w: abs(v - w) <= 1e-9 * max(abs(w), 1.0))
                # The pva port's frame carries the same numbers as attributes.
                assert img.attrib[f"ROI{n}{name}"] == pytest.approx(w, rel=1e-12, abs=1e-9)
            got = [ctx.get(f"{P}ROIStat1:{n}:{k}_RBV") for k in ["MinX", "MinY", "SizeX", "SizeY"]]
            assert tuple(got) == geometry
            totals[n].append(want["Total"])

    # A Fixed length series of N_POINTS stops and publishes itself.
    ioc.wait_for(P + "ROIStat1:TSAcquiring", lambda v: v.raw.value.index == 0)
    assert ctx.get(P + "ROIStat1:TSCurrentPoint") == N_POINTS
    for n in totals:
        ts = np.asarray(ctx.get(f"{P}ROIStat1:{n}:TSTotal"))
        np.testing.assert_allclose(ts, totals[n], rtol=1e-12)
    stamps = np.asarray(ctx.get(f"{P}ROIStat1:1:TSTimestamp"))
    assert len(stamps) == N_POINTS and np.all(np.diff(stamps) >= 0) and stamps[0] > 0

    # The Stats port's own TS waveforms saw the same frames (it is fed by the sim directly).
    ioc.wait_for(P + "Stats1:TSAcquiring", lambda v: v.raw.value.index == 0)
    np.testing.assert_allclose(np.asarray(ctx.get(P + "Stats1:TSTotal")), frame_totals, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(ctx.get(P + "Stats1:TSMinValue")), frame_mins)
    assert ioc.ctx.get(P + "ROIStat1:1:Name_RBV") == "roi1"


def test_timeseries_of_image_columns(ioc):
    """A [64, 48] UInt16 frame is 64 signals x 48 time points to the TimeSeries port: signal s
    over two frames is column s of each image, one after the other."""
    ctx = ioc.ctx
    ctx.put(P + "TS1:TSNumPoints", 96)
    ctx.put(P + "TS1:TSAcquire", 1, wait=False)  # a busy record: completes when the series is full
    ioc.wait_for(P + "TS1:TSAcquiring", lambda v: v.raw.value.index == 1)
    images = []
    for _ in range(2):
        acquire(ioc)
        images.append(ctx.get(P + "Pva1:Image").astype(np.float64))
    ioc.wait_for(P + "TS1:TSAcquire_RBV", lambda v: v.raw.value.index == 0)
    assert ctx.get(P + "TS1:TSCurrentPoint") == 96
    for s in (0, 3, 7):
        want = np.concatenate([img[:, s] for img in images])
        np.testing.assert_array_equal(np.asarray(ctx.get(f"{P}TS1:{s + 1}:TimeSeries")), want)
    assert len(ctx.get(P + "TS1:TSTimestamp")) == 96
