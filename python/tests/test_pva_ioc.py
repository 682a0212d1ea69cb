"""The IOC over pvAccess with the real clients: every parameter is a PV (p4p get/put/monitor,
enums, refused puts), the `pva` port publishes NTNDArray frames whose pixels equal the same
frame read through StdArrays' ArrayData, for all 10 types, RGB1/2/3 and compressed frames
(decoded with the python codec packages); pvapy (pvAccessCPP) sees the same frames.

Loopback only: the IOC and the clients get netenv.py's loopback variables with per-test free
ports.
"""

import io
import os
import queue
import subprocess
import time

import numpy as np
from ndtypes import ND_TYPES
import pytest
from interop import require
from pva_util import NdflowIoc

P = "T13:"

DTYPES = ND_TYPES


CONFIG = """
prefix = "{P}"

[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = 40
MaxSizeY = 24
DataType = "UInt16"
ImageMode = "Single"
AcquireTime = 0.0
AcquirePeriod = 0.0

[[port]]
name = "PVA1"
type = "pva"
prefix = "Pva1:"
NDArrayPort = "SIM1"
BlockingCallbacks = "Yes"

[[port]]
name = "IMAGE1"
type = "stdarrays"
prefix = "image1:"
NDArrayPort = "SIM1"
BlockingCallbacks = "Yes"

[[port]]
name = "IMAGE2"
type = "stdarrays"
prefix = "image2:"
NDArrayPort = "SIM1"
BlockingCallbacks = "Yes"
ArrayDataType = "UInt16"

[[port]]
name = "CODEC1"
type = "codec"
prefix = "Codec1:"
NDArrayPort = "SIM1"
BlockingCallbacks = "Yes"
Compressor = "LZ4"

[[port]]
name = "PVA2"
type = "pva"
prefix = "Pva2:"
NDArrayPort = "CODEC1"
BlockingCallbacks = "Yes"
"""


@pytest.fixture(scope="module")
def ioc(ndflow_bin, tmp_path_factory):
    ioc = NdflowIoc(ndflow_bin, tmp_path_factory.mktemp("pva_ioc"), CONFIG.replace("{P}", P))
    try:
        ioc.wait_for(P + "cam1:Model_RBV", lambda v: True)
        ctx = ioc.ctx
        ctx.raw = ioc.raw
        yield ctx, None, ioc.conf
    finally:
        ioc.close()


def acquire_one(ctx):
    """Acquire one frame (ImageMode Single) and wait until the IOC is idle again."""
    before = ctx.get(P + "image1:ArrayCounter_RBV")
    ctx.put(P + "cam1:Acquire", 1)
    deadline = time.time() + 10
    while time.time() < deadline:
        if ctx.get(P + "cam1:Acquire_RBV").raw.value.index == 0 and ctx.get(P + "image1:ArrayCounter_RBV") > before:
            return
        time.sleep(0.02)
    pytest.fail("acquisition did not complete")


def test_scalar_get_put_and_readback(ioc):
    ctx, _, _ = ioc
    assert ctx.get(P + "cam1:MaxSizeX_RBV") == 40
    ctx.put(P + "cam1:AcquirePeriod", 0.25)
    time.sleep(0.1)
    assert ctx.get(P + "cam1:AcquirePeriod_RBV") == pytest.approx(0.25)
    ctx.put(P + "cam1:AcquirePeriod", 0.0)
    assert ctx.get(P + "Pva1:PluginType_RBV") == "NDPluginPva"
    assert ctx.get(P + "Pva1:PvName_RBV") == P + "Pva1:Image"


def test_enum_by_index_and_by_choice(ioc):
    ctx, _, _ = ioc
    v = ctx.get(P + "cam1:ImageMode")
    assert list(v.raw.value.choices) == ["Single", "Multiple", "Continuous"]
    ctx.put(P + "cam1:ImageMode", 1)
    time.sleep(0.05)
    assert ctx.get(P + "cam1:ImageMode_RBV").raw.value.index == 1
    ctx.put(P + "cam1:ImageMode", {"value.index": 2})
    time.sleep(0.05)
    assert ctx.get(P + "cam1:ImageMode_RBV").raw.value.index == 2
    ctx.put(P + "cam1:ImageMode", 0)


def test_refused_puts_report_the_reason(ioc):
    ctx, _, _ = ioc
    with pytest.raises(Exception, match="(?i)range|SizeX"):
        ctx.put(P + "cam1:SizeX", -5)
    with pytest.raises(Exception):
        ctx.put(P + "cam1:ArrayCounter_RBV", 3)  # readbacks are read-only
    assert ctx.get(P + "cam1:SizeX_RBV") == 40  # nothing changed


def test_monitor_posts_changes(ioc):
    ctx, _, _ = ioc
    q = queue.Queue()
    sub = ctx.monitor(P + "cam1:NumImages_RBV", q.put)
    try:
        first = q.get(timeout=5)
        ctx.put(P + "cam1:NumImages", int(first) + 7)
        deadline = time.time() + 5
        while time.time() < deadline:
            v = q.get(timeout=5)
            if v == int(first) + 7:
                break
        else:
            pytest.fail("no monitor update")
    finally:
        sub.close()


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_ntndarray_pixels_every_type(ioc, dtype):
    ctx, _, _ = ioc
    ctx.put(P + "cam1:DataType", dtype)
    ctx.put(P + "cam1:ColorMode", "Mono")
    updates = queue.Queue()
    sub = ctx.monitor(P + "Pva1:Image", updates.put, request="record[pipeline=true,queueSize=4]")
    try:
        updates.get(timeout=5)  # the current value, on subscribing
        acquire_one(ctx)
        img = updates.get(timeout=5)  # the new frame, pushed by the monitor
    finally:
        sub.close()
    ref = ctx.get(P + "image1:ArrayData")
    assert img.dtype == DTYPES[dtype]
    assert img.shape == (24, 40)
    assert np.array_equal(img.flatten(), np.asarray(ref).view(DTYPES[dtype])[: img.size])
    raw = ctx.raw.get(P + "Pva1:Image")
    assert raw.getID() == "epics:nt/NTNDArray:1.0"
    assert raw["uniqueId"] == ctx.get(P + "cam1:ArrayCounter_RBV")
    assert img.attrib["ColorMode"] == 0


def test_array_pv_typed_by_array_data_type(ioc):
    """With ArrayDataType fixed in the config, ArrayData is an NTScalarArray of that type."""
    ctx, _, _ = ioc
    ctx.put(P + "cam1:DataType", "UInt16")
    ctx.put(P + "cam1:ColorMode", "Mono")
    acquire_one(ctx)
    time.sleep(0.05)
    arr = np.asarray(ctx.get(P + "image2:ArrayData"))
    img = ctx.get(P + "Pva1:Image")
    assert arr.dtype == np.uint16
    assert np.array_equal(arr, img.flatten())


@pytest.mark.parametrize("mode,shape", [("RGB1", (24, 40, 3)), ("RGB2", (24, 3, 40)), ("RGB3", (3, 24, 40))])
def test_ntndarray_rgb(ioc, mode, shape):
    ctx, _, _ = ioc
    ctx.put(P + "cam1:DataType", "UInt8")
    ctx.put(P + "cam1:ColorMode", mode)
    acquire_one(ctx)
    img = ctx.get(P + "Pva1:Image")
    ref = np.asarray(ctx.get(P + "image1:ArrayData")).view(np.uint8)
    assert img.shape == shape
    assert np.array_equal(img.flatten(), ref[: img.size])
    ctx.put(P + "cam1:ColorMode", "Mono")


@pytest.mark.parametrize("compressor", ["LZ4", "BSLZ4", "Blosc", "JPEG"])
def test_compressed_frames_decode(ioc, compressor):
    import bitshuffle
    import blosc
    import lz4.block
    from PIL import Image

    ctx, _, _ = ioc
    dtype = "UInt8" if compressor == "JPEG" else "UInt16"
    ctx.put(P + "cam1:DataType", dtype)
    ctx.put(P + "cam1:ColorMode", "Mono")
    ctx.put(P + "Codec1:Compressor", compressor)
    if compressor == "JPEG":
        ctx.put(P + "Codec1:JPEGQuality", 100)
    acquire_one(ctx)
    time.sleep(0.1)
    raw = ctx.raw.get(P + "Pva2:Image")
    ref = np.asarray(ctx.get(P + "image1:ArrayData")).view(DTYPES[dtype])[: 40 * 24]
    data = np.asarray(raw["value"]).view(np.uint8).tobytes()
    assert raw["compressedSize"] == len(data)
    n = raw["uncompressedSize"]
    assert n == ref.nbytes
    name = raw["codec.name"]
    assert name == {"LZ4": "lz4", "BSLZ4": "bslz4", "Blosc": "blosc", "JPEG": "jpeg"}[compressor]
    elem = np.dtype(DTYPES[dtype])
    if name == "lz4":
        out = np.frombuffer(lz4.block.decompress(data, uncompressed_size=n), elem)
    elif name == "bslz4":
        out = bitshuffle.decompress_lz4(np.frombuffer(data, np.uint8), (n // elem.itemsize,), elem)
    elif name == "blosc":
        out = np.frombuffer(blosc.decompress(data), elem)
    else:
        out = np.asarray(Image.open(io.BytesIO(data))).flatten()
    if name == "jpeg":
        assert np.abs(out.astype(int) - ref.astype(int)).max() <= 8
    else:
        assert np.array_equal(out, ref)


def test_pvapy_monitor_sees_frames(ioc):
    pvaccess = require("pvaccess")
    ctx, env, conf = ioc
    ctx.put(P + "cam1:DataType", "UInt16")
    ctx.put(P + "cam1:ColorMode", "Mono")
    # pvapy reads its configuration from the process environment.
    saved = {k: os.environ.get(k) for k in conf}
    os.environ.update(conf)
    try:
        ch = pvaccess.Channel(P + "Pva1:Image")
        got = queue.Queue()
        ch.subscribe("t", lambda v: got.put(v))
        ch.startMonitor("field()")
        try:
            time.sleep(0.5)
            acquire_one(ctx)
            ref = np.asarray(ctx.get(P + "image1:ArrayData")).view(np.uint16)[: 40 * 24]
            deadline = time.time() + 10
            while time.time() < deadline:
                v = got.get(timeout=10)
                if v["uniqueId"] == ctx.get(P + "cam1:ArrayCounter_RBV"):
                    arr = np.asarray(v["value"][0]["ushortValue"])
                    assert np.array_equal(arr, ref)
                    break
            else:
                pytest.fail("pvapy saw no frame")
        finally:
            ch.stopMonitor()
            ch.unsubscribe("t")
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


SLOW_SUBSCRIBER = """
import sys, time
from p4p.client.thread import Context
conf = dict(a.split("=", 1) for a in sys.argv[2:])
ctx = Context("pva", conf=conf, useenv=False, nt=False)
def slow(v):
    print("update", flush=True)
    time.sleep(0.05)
ctx.monitor(sys.argv[1], slow, request="record[pipeline=true,queueSize=4]")
time.sleep(120)
"""


def test_lossless_subscriber_killed_mid_stream_does_not_stall(ioc, tmp_path):
    """A pipelined subscriber back-pressures a Lossless publisher; killing it mid-stream must
    release the pipeline at once (not after LosslessTimeout) and lose nothing else."""
    import sys

    ctx, env, conf = ioc
    ctx.put(P + "cam1:DataType", "UInt16")
    ctx.put(P + "cam1:ColorMode", "Mono")
    ctx.put(P + "Pva1:Lossless", 1)
    ctx.put(P + "Pva1:LosslessTimeout", 30.0)
    errors0 = ctx.get(P + "Pva1:DroppedErrors_RBV")
    done0 = ctx.get(P + "Pva1:ArraysProcessed_RBV")
    script = tmp_path / "slow.py"
    script.write_text(SLOW_SUBSCRIBER)
    sub = subprocess.Popen(
        [sys.executable, str(script), P + "Pva1:Image"] + [f"{k}={v}" for k, v in conf.items()],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert sub.stdout.readline().startswith("update")  # subscribed (initial value)
        ctx.put(P + "cam1:ImageMode", "Multiple")
        ctx.put(P + "cam1:NumImages", 300)
        ctx.put(P + "cam1:Acquire", 1)
        time.sleep(1.0)
        # Held back by the slow subscriber: far from done after a second.
        assert ctx.get(P + "Pva1:ArraysProcessed_RBV") - done0 < 200
        sub.kill()
        sub.wait(timeout=10)
        t0 = time.time()
        while ctx.get(P + "cam1:Acquire_RBV").raw.value.index != 0:
            assert time.time() - t0 < 20, "pipeline stalled after the subscriber died"
            time.sleep(0.05)
        assert time.time() - t0 < 10  # released at once, not after LosslessTimeout (30 s)
        time.sleep(0.3)
        assert ctx.get(P + "Pva1:ArraysProcessed_RBV") - done0 == 300
        assert ctx.get(P + "Pva1:DroppedErrors_RBV") == errors0
    finally:
        if sub.poll() is None:
            sub.kill()
        ctx.put(P + "Pva1:Lossless", 0)
        ctx.put(P + "cam1:ImageMode", "Single")


def _close_wait_sockets(pid):
    """Sockets of process `pid` whose peer has closed (CLOSE_WAIT)."""
    inodes = set()
    for f in os.listdir(f"/proc/{pid}/fd"):
        t = os.readlink(f"/proc/{pid}/fd/{f}")
        if t.startswith("socket:["):
            inodes.add(t[8:-1])
    n = 0
    for table in ("tcp", "tcp6"):
        for line in open(f"/proc/{pid}/net/{table}").read().splitlines()[1:]:
            parts = line.split()
            n += parts[9] in inodes and parts[3] == "08"
    return n


def test_gone_monitor_clients_leave_no_socket_behind(ndflow_bin, tmp_path):
    """A client that monitored quiet PVs and left: the server closes its socket at once, not
    when those PVs next post (their subscriptions stay listed until then)."""
    import sys

    cfg = 'prefix = "CW:"\n[[port]]\nname = "SIM1"\ntype = "sim"\nprefix = "cam1:"\n'
    ioc = NdflowIoc(ndflow_bin, tmp_path, cfg)
    try:
        ioc.wait_for("CW:cam1:ArrayCounter_RBV", lambda v: v == 0)
        code = (
            "from p4p.client.thread import Context\nimport time\n"
            f"ctx = Context('pva', conf={ioc.conf!r}, useenv=False)\n"
            "subs = [ctx.monitor('CW:cam1:' + n, lambda v: None) "
            "for n in ('Gain', 'Gain_RBV', 'Model_RBV')]\ntime.sleep(0.5)\n"
        )
        for _ in range(3):
            subprocess.run([sys.executable, "-c", code], check=True, timeout=30)
        time.sleep(1.0)
        assert _close_wait_sockets(ioc.proc.pid) == 0
    finally:
        ioc.close()
