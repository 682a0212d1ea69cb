"""Ports with several addresses (areaDetector's NDArrayAddress) through the binary: a sim feeds
a `stats` port, whose address 1 carries each frame's 23 statistics (ADCore's time-series array)
to a `timeseries` port (ADCore's `$(R)TS:` port, NDArrayAddress = 1); that port publishes, as
ADCore's NDPluginTimeSeries, signal s's series on address s and the [NumPoints, NSignals] frame
on address NSignals. `pva` ports on its addresses show, over p4p, exactly the values the Stats
port recorded in its own TS waveforms (TSMeanValue, TSTotal) and the TimeSeries port in its
`N:TimeSeries` waveforms. NDArrayAddress re-wires at run time; an address the source does not
publish is refused and changes nothing.

Loopback only: the IOC and the clients get netenv.py's loopback variables with per-test free
ports.
"""

import numpy as np
import pytest
from p4p.client.thread import RemoteError
from pva_util import NdflowIoc

P = "MA13:"
N = 6  # frames, and points per time series
SIGNALS = 23  # the stats port's time-series array: 22 statistics and the time stamp
MEAN, TOTAL = 6, 8  # MeanValue and Total in ADCore's order (TS_STATS)

CONFIG = f"""
prefix = "{P}"

[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = 32
MaxSizeY = 24
DataType = "UInt16"
ImageMode = "Multiple"
NumImages = {N}
AcquireTime = 0.0
AcquirePeriod = 0.0
Noise = 500

[[port]]
name = "STATS1"
type = "stats"
prefix = "Stats1:"
NDArrayPort = "SIM1"
BlockingCallbacks = "Yes"
TSNumPoints = {N}

[[port]]
name = "STATS1_TS"
type = "timeseries"
prefix = "Stats1:TS:"
MaxSignals = {SIGNALS}
NDArrayPort = "STATS1"
NDArrayAddress = 1
BlockingCallbacks = "Yes"
TSNumPoints = {N}

[[port]]
name = "PVA1"
type = "pva"
prefix = "Pva1:"
NDArrayPort = "STATS1_TS"
NDArrayAddress = {MEAN}
BlockingCallbacks = "Yes"

[[port]]
name = "PVA2"
type = "pva"
prefix = "Pva2:"
NDArrayPort = "STATS1_TS"
NDArrayAddress = {SIGNALS}
BlockingCallbacks = "Yes"
"""


@pytest.fixture(scope="module")
def ioc(ndflow_bin, tmp_path_factory):
    ioc = NdflowIoc(ndflow_bin, tmp_path_factory.mktemp("multi_address"), CONFIG)
    try:
        ioc.wait_for(P + "Stats1:TS:TSNumPoints_RBV", lambda v: v == N)
        yield ioc
    finally:
        ioc.close()


def counter(ioc, port):
    return ioc.ctx.get(P + port + ":ArrayCounter_RBV")


def acquire(ioc, images):
    ctx = ioc.ctx
    ctx.put(P + "cam1:NumImages", images)
    before = counter(ioc, "Stats1")
    ctx.put(P + "cam1:Acquire", 1)
    ioc.wait_for(P + "Stats1:ArrayCounter_RBV", lambda v: v >= before + images)
    ioc.wait_for(P + "cam1:Acquire_RBV", lambda v: v.raw.value.index == 0)


def test_pva_port_on_a_time_series_address_shows_that_signal(ioc):
    ctx = ioc.ctx
    assert ctx.get(P + "Pva1:NDArrayAddress_RBV") == MEAN
    ctx.put(P + "Stats1:TSControl", "Erase/Start")
    ctx.put(P + "Stats1:TS:TSAcquire", 1, wait=False)  # busy: completes when the series is full
    ioc.wait_for(P + "Stats1:TS:TSAcquiring", lambda v: v.raw.value.index == 1)
    pva1, pva2 = counter(ioc, "Pva1"), counter(ioc, "Pva2")

    # N frames fill both Fixed length series; the full TimeSeries series goes out at once.
    acquire(ioc, N)
    ioc.wait_for(P + "Stats1:TS:TSAcquire_RBV", lambda v: v.raw.value.index == 0)
    ioc.wait_for(P + "Pva1:ArrayCounter_RBV", lambda v: v == pva1 + 1)
    ioc.wait_for(P + "Pva2:ArrayCounter_RBV", lambda v: v == pva2 + 1)

    means = np.asarray(ctx.get(P + "Stats1:TSMeanValue"))
    assert means.shape == (N,) and len(set(means.tolist())) == N  # noise: every frame differs
    image = ctx.get(P + "Pva1:Image")
    got = np.asarray(image)
    assert got.dtype == np.float64 and got.shape == (N,)
    np.testing.assert_array_equal(got, means)
    np.testing.assert_array_equal(got, np.asarray(ctx.get(f"{P}Stats1:TS:{MEAN + 1}:TimeSeries")))

    # Address NSignals: the whole [NumPoints, NSignals] frame, signal s in row s (numpy order).
    everything = np.asarray(ctx.get(P + "Pva2:Image"))
    assert everything.shape == (SIGNALS, N)
    np.testing.assert_array_equal(everything[MEAN], means)
    np.testing.assert_array_equal(everything[TOTAL], np.asarray(ctx.get(P + "Stats1:TSTotal")))
    # The last signal is each frame's time stamp, as ADCore's stats array has it.
    np.testing.assert_array_equal(everything[SIGNALS - 1], np.asarray(ctx.get(P + "Stats1:TSTimestamp")))

    # Re-wired at run time to Total's address: the next output is Total's series.
    ctx.put(P + "Pva1:NDArrayAddress", TOTAL)
    ioc.wait_for(P + "Pva1:NDArrayAddress_RBV", lambda v: v == TOTAL)
    ctx.put(P + "Stats1:TS:TSRead", 1)  # goes out with the next input frame
    acquire(ioc, 1)
    ioc.wait_for(P + "Pva1:ArrayCounter_RBV", lambda v: v == pva1 + 2)
    np.testing.assert_array_equal(np.asarray(ctx.get(P + "Pva1:Image")), np.asarray(ctx.get(P + "Stats1:TSTotal")))


def test_an_address_the_source_does_not_publish_is_refused(ioc):
    ctx = ioc.ctx
    before = ctx.get(P + "Pva1:NDArrayAddress_RBV")
    with pytest.raises(RemoteError) as e:
        ctx.put(P + "Pva1:NDArrayAddress", SIGNALS + 1)
    msg = str(e.value)
    assert "STATS1_TS" in msg and f"address {SIGNALS + 1}" in msg, msg
    assert ctx.get(P + "Pva1:NDArrayAddress_RBV") == before
    # The sim publishes address 0 only: moving a stats-address consumer there is refused too.
    with pytest.raises(RemoteError) as e:
        ctx.put(P + "Stats1:TS:NDArrayPort", "SIM1")
    assert "SIM1" in str(e.value) and "address 1" in str(e.value), str(e.value)
    assert ctx.get(P + "Stats1:TS:NDArrayPort_RBV") == "STATS1"
