"""The EIGER driver (port type `eiger`) against golden Stream v2 series: a tickit EIGER answers
SIMPLON REST, but Stream2Port points at a pyzmq PUSH replayer (python/tools/eiger_replay.py)
sending series made by eiger_peer.make_v2_series (three channels, uint8/uint16/uint32, bslz4 and
lz4). Every NDArray, seen by a p4p monitor on a `pva` plugin port, equals the generator's array
for its channel (decompressed) or carries the detector's bytes with ADEiger's codec name
(pass-through), with ThresholdNumber / ThresholdEnergy; a second `pva` port on the driver's
address 2 sees the second channel only. Bad messages in the middle of a series
are counted and named while the good frames still arrive. Loopback only.

ManualTrigger = Enable keeps tickit from taking images (its own stream has no reader here).
"""

import queue
import sys
import time
from pathlib import Path

import cbor2
import numpy as np
import pytest

from eiger_peer import TickitEiger, decode_v2, dectris_decompress, make_v2_series
from pva_util import NdflowIoc, enum_index

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from eiger_replay import Replayer  # noqa: E402

P = "G:"
CAM = P + "cam1:"
CHANNELS = ("threshold_1", "threshold_2", "difference")
ENERGY = {"threshold_1": 6000.0, "threshold_2": 9500.0}
DT = {"uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32}
H, W = 40, 56


def text(v):
    if isinstance(v, str):
        return str.__str__(v)
    r = v.raw.value
    return r.choices[r.index]


@pytest.fixture(scope="module")
def rig(tickit_python, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("eiger-golden")
    eiger = TickitEiger(tickit_python, tmp / "tickit", fix_self_connect=True).start()
    rep = Replayer("tcp://127.0.0.1:0")
    port = int(rep.endpoint.rsplit(":", 1)[1])
    config = f"""
prefix = "{P}"

[[port]]
name = "EIG1"
type = "eiger"
prefix = "cam1:"
Host = "{eiger.host_arg()}"
Stream2Port = {port}
StreamPort = {port}
StreamVersion = "Stream2"
TriggerMode = "Internal Series"
ManualTrigger = "Enable"
ImageMode = "Multiple"
NumImages = 3
AcquireTime = 0.01
AcquirePeriod = 0.02

[[port]]
name = "PVA1"
type = "pva"
prefix = "Pva1:"
NDArrayPort = "EIG1"
BlockingCallbacks = "Yes"

[[port]]
name = "PVA2"
type = "pva"
prefix = "Pva2:"
NDArrayPort = "EIG1"
NDArrayAddress = 2
BlockingCallbacks = "Yes"
"""
    ioc = NdflowIoc(ndflow_bin_path(), tmp, config)
    try:
        ioc.wait_for(CAM + "State_RBV", lambda v: text(v) in ("na", "idle", "ready"))
        yield ioc, rep, eiger
    finally:
        ioc.close()
        rep.close(0)
        eiger.stop()


def ndflow_bin_path():
    import os

    root = Path(__file__).resolve().parents[2]
    return Path(os.environ.get("NDFLOW_BIN", root / "target" / "release" / "ndflow"))


def run_series(rig, messages, nimages, decompress_on, n_arrays, timeout=15.0):
    """Arm through the IOC, replay `messages` once Armed, return the NDArrays (raw p4p values)
    published on Pva1:Image, in order."""
    ioc, rep, _ = rig
    ioc.ctx.put(CAM + "NumImages", nimages)
    ioc.ctx.put(CAM + "StreamDecompress", 1 if decompress_on else 0)
    ioc.wait_for(CAM + "NumImages_RBV", lambda v: v == nimages)
    ioc.wait_for(CAM + "StreamDecompress_RBV", lambda v: enum_index(v) == int(decompress_on))
    got = queue.Queue()
    first = []

    def cb(v):
        # The first update is the last array published before this series (if any).
        if not first:
            first.append(v)
            return
        got.put(v)

    sub = ioc.raw.monitor(P + "Pva1:Image", cb, request="record[pipeline=true,queueSize=16]")
    try:
        deadline = time.monotonic() + 5
        while not first and time.monotonic() < deadline:
            time.sleep(0.02)
        if not first:
            first.append(None)  # no array yet: every update counts
        ioc.ctx.put(CAM + "Acquire", 1)
        ioc.wait_for(CAM + "Armed", lambda v: enum_index(v) == 1, timeout=10)
        rep.start(messages, rate=200.0)
        rep.join(10)
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < n_arrays and time.monotonic() < deadline:
            try:
                out.append(got.get(timeout=0.2))
            except queue.Empty:
                pass
        ioc.wait_for(CAM + "AcquireBusy", lambda v: enum_index(v) == 0, timeout=10)
        time.sleep(0.2)
        while not got.empty():
            out.append(got.get())
    finally:
        sub.close()
    return out


def attrs(v):
    return {a["name"]: a["value"] for a in v["attribute"]}


def counters(ioc):
    return {k: int(ioc.ctx.get(CAM + k + "_RBV")) for k in
            ("StreamExpected", "StreamReceived", "StreamLost", "StreamInvalid", "StreamForeign")}


@pytest.mark.parametrize("decompress_on", [True, False], ids=["decompress", "passthrough"])
@pytest.mark.parametrize("codec", ["bslz4", "lz4"])
@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32"])
def test_golden_v2_three_channels(rig, dtype, codec, decompress_on):
    n = 2
    msgs, expected = make_v2_series(channels=CHANNELS, dtype=dtype, codec=codec, nimages=n,
                                    height=H, width=W, series_id=5, noisy_rows=4,
                                    seed=hash((dtype, codec)) % 1000)
    payloads = [decode_v2(m).payloads for m in msgs[1:-1]]
    arrays = run_series(rig, msgs, n, decompress_on, n * len(CHANNELS))
    ioc = rig[0]
    assert len(arrays) == n * len(CHANNELS), counters(ioc)
    c = counters(ioc)
    assert (c["StreamExpected"], c["StreamReceived"], c["StreamLost"], c["StreamInvalid"]) == \
        (n, n, 0, 0), c
    want_name = {"bslz4": "bslz4", "lz4": "lz4hdf5"}[codec]
    for k, v in enumerate(arrays):
        image, ch_no = divmod(k, len(CHANNELS))
        ch = CHANNELS[ch_no]
        want = expected[image][ch]
        dims = [d["size"] for d in v["dimension"]]
        assert dims == [W, H], dims
        a = attrs(v)
        assert a["ThresholdNumber"] == ch_no + 1, (ch, a)
        if ch in ENERGY:
            assert a["ThresholdEnergy"] == ENERGY[ch]
        else:
            assert "ThresholdEnergy" not in a
        data = np.asarray(v["value"])
        if decompress_on:
            assert v["codec"]["name"] == ""
            assert data.dtype == np.dtype(dtype)
            np.testing.assert_array_equal(data.reshape(H, W), want)
        else:
            assert v["codec"]["name"] == want_name
            sent = payloads[image][ch][2]
            body = data.view(np.uint8).tobytes()
            if codec == "bslz4":
                assert body == sent[12:], "pass-through bytes differ from the stream's blocks"
                raw = dectris_decompress()(sent[:12] + body, "bslz4", elem_size=np.dtype(dtype).itemsize)
            else:
                assert body == sent, "pass-through bytes differ from the stream's payload"
                raw = dectris_decompress()(body, "lz4", elem_size=np.dtype(dtype).itemsize)
            np.testing.assert_array_equal(np.frombuffer(raw, dtype).reshape(H, W), want)
            assert v["uncompressedSize"] == want.nbytes


def test_channel_n_also_on_address_n_plus_1(rig):
    """As ADEiger: every frame on address 0, channel n (0-based) also on address n + 1, so the
    port with NDArrayAddress = 2 sees threshold_2 only, every image of it."""
    ioc = rig[0]
    n = 3
    msgs, expected = make_v2_series(channels=CHANNELS, dtype="uint16", codec="lz4", nimages=n,
                                    height=H, width=W, series_id=11, seed=7)
    got, first = queue.Queue(), []

    def cb(v):
        if not first:  # the last array published before this series, if any
            first.append(v)
            return
        got.put(v)

    before = int(ioc.ctx.get(P + "Pva2:ArrayCounter_RBV"))
    sub = ioc.raw.monitor(P + "Pva2:Image", cb, request="record[pipeline=true,queueSize=16]")
    try:
        deadline = time.monotonic() + 5
        while not first and time.monotonic() < deadline:
            time.sleep(0.02)
        if not first:
            first.append(None)
        arrays = run_series(rig, msgs, n, True, n * len(CHANNELS))
        assert len(arrays) == n * len(CHANNELS), counters(ioc)
        ioc.wait_for(P + "Pva2:ArrayCounter_RBV", lambda v: v == before + n)
        time.sleep(0.2)
    finally:
        sub.close()
    second = []
    while not got.empty():
        second.append(got.get())
    assert len(second) == n, [attrs(v) for v in second]
    for image, v in enumerate(second):
        assert attrs(v)["ThresholdNumber"] == 2
        assert attrs(v)["ThresholdEnergy"] == ENERGY["threshold_2"]
        np.testing.assert_array_equal(np.asarray(v["value"]).reshape(H, W),
                                      expected[image]["threshold_2"])
    # The driver publishes addresses 0..9: 10 is refused, naming the port.
    with pytest.raises(Exception) as e:
        ioc.ctx.put(P + "Pva2:NDArrayAddress", 10)
    assert "EIG1" in str(e.value) and "address 10" in str(e.value), str(e.value)


def _bad(kind, good_image):
    """A bad message made from a good v2 image message."""
    if kind == "malformed_cbor":
        return b"\xd9\xd9\xf7\xa4\x64type\x65image\x64da"  # a map cut short
    msg = cbor2.loads(good_image)
    msg = msg.value if isinstance(msg, cbor2.CBORTag) and msg.tag == 55799 else msg
    msg = dict(msg)
    data = dict(msg["data"])
    (ch,) = list(data)
    dims_typed = data[ch].value
    typed = dims_typed[1]
    algo, mod, blob = typed.value.value
    if kind == "truncated_blob":
        blob = blob[: len(blob) // 2]
    elif kind == "unknown_encoding":
        algo = "zstd"
    inner = cbor2.CBORTag(56500, [algo, mod, blob])
    data[ch] = cbor2.CBORTag(40, [dims_typed[0], cbor2.CBORTag(typed.tag, inner)])
    msg["data"] = data
    return cbor2.dumps(cbor2.CBORTag(55799, msg))


@pytest.mark.parametrize("kind", ["truncated_blob", "unknown_encoding", "malformed_cbor"])
def test_bad_message_mid_series(rig, kind):
    """start, image 0, BAD, image 2, image 3, end (NumImages 4, one channel): the IOC keeps
    running, StreamInvalid counts the bad message, Error_RBV names it, images 0, 2, 3 arrive."""
    ioc = rig[0]
    msgs, expected = make_v2_series(channels=("threshold_1",), dtype="uint16", codec="bslz4",
                                    nimages=4, height=H, width=W, series_id=9, noisy_rows=0)
    bad = _bad(kind, msgs[2])
    series = [msgs[0], msgs[1], bad, msgs[3], msgs[4], msgs[5]]
    arrays = run_series(rig, series, 4, True, 3)
    assert ioc.proc.poll() is None
    c = counters(ioc)
    err = text(ioc.ctx.get(CAM + "Error_RBV"))
    print(f"[eiger-golden] {kind}: {c} Error_RBV={err!r}")
    assert c["StreamInvalid"] == 1, c
    assert len(arrays) == 3, (len(arrays), c)
    for v, image in zip(arrays, (0, 2, 3)):
        np.testing.assert_array_equal(np.asarray(v["value"]).reshape(H, W),
                                      expected[image]["threshold_1"])
        assert v["uniqueId"] >= 1
    if kind == "truncated_blob":  # the image's header was good: received, then dropped
        assert (c["StreamReceived"], c["StreamLost"]) == (4, 0), c
    else:  # the message never became an image: a gap
        assert (c["StreamReceived"], c["StreamLost"]) == (3, 1), c
    assert text(ioc.ctx.get(CAM + "State_RBV")) != "disconnected"


@pytest.mark.parametrize("kind", ["unknown_encoding"])
def test_bad_message_named_in_error_rbv(rig, kind):
    ioc = rig[0]
    msgs, _ = make_v2_series(channels=("threshold_1",), dtype="uint16", codec="bslz4",
                             nimages=3, height=H, width=W, series_id=11, noisy_rows=0)
    series = [msgs[0], msgs[1], _bad(kind, msgs[2]), msgs[3], msgs[4]]
    arrays = run_series(rig, series, 3, True, 2)
    assert len(arrays) == 2
    assert int(ioc.ctx.get(CAM + "StreamInvalid_RBV")) == 1
    time.sleep(1.5)  # one status poll later
    err = text(ioc.ctx.get(CAM + "Error_RBV"))
    assert "zstd" in err.lower(), f"Error_RBV = {err!r}"


def test_detector_clock_as_time_stamp(rig):
    """StreamAsTSSource = Yes: each NDArray's time stamp is the detector's, series_date +
    start_time (50 MHz ticks), not the time it arrived."""
    ioc = rig[0]
    n = 3
    msgs, _ = make_v2_series(channels=("threshold_1",), dtype="uint16", codec="bslz4",
                             nimages=n, height=H, width=W, series_id=21, noisy_rows=0)
    starts = [decode_v2(m).fields["start_time"] for m in msgs[1:-1]]
    ioc.ctx.put(CAM + "StreamAsTSSource", 1)
    try:
        ioc.wait_for(CAM + "StreamAsTSSource_RBV", lambda v: enum_index(v) == 1)
        arrays = run_series(rig, msgs, n, True, n)
    finally:
        ioc.ctx.put(CAM + "StreamAsTSSource", 0)
    assert len(arrays) == n, counters(ioc)
    # 2026-11-27T10:00:00Z, the generator's series_date, in POSIX seconds.
    date = 1795773600
    for v, (num, den) in zip(arrays, starts):
        ns = num * 1_000_000_000 // den
        ts = v["timeStamp"]
        assert (ts["secondsPastEpoch"], ts["nanoseconds"]) == \
            (date + ns // 1_000_000_000, ns % 1_000_000_000), (ts, num, den)
