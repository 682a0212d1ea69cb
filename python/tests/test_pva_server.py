"""Interop of ndflow-pva's pvAccess server with p4p (pvxs) and pvapy (pvAccessCPP).

Runs the Rust example `pva_serve` (rust_examples.py) on ephemeral loopback ports and checks,
with both client stacks:

* GET / PUT / MONITOR of NTScalar PVs of every scalar type, NTEnum by index and by choice,
  refused PUTs (read-only, out of range) reported as errors and changing nothing, NTScalarArray;
* NTNDArray monitors whose decoded pixels equal what was sent, for all 10 element types, with
  p4p's pipelined request `record[pipeline=true,queueSize=4]` and with pvapy;
* discovery over UDP and over TCP (EPICS_PVA_NAME_SERVERS).

Everything stays on 127.0.0.1 (netenv.py).
"""

import json
import os
import queue
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from interop import require
from netenv import LOOPBACK
from pva_util import FRAME_TYPES, PvaServe, build_pva_serve, pattern

p4p_client = require("p4p.client.thread")
from p4p.client.thread import Context, RemoteError  # noqa: E402

SCALARS = {
    # name: (initial, values to put)
    "bool": (True, [False, True]),
    "i8": (42, [-128, 127]),
    "i16": (42, [-32768, 32767]),
    "i32": (42, [-(2**31), 2**31 - 1]),
    "i64": (42, [-(2**63), 2**63 - 1]),
    "u8": (42, [0, 255]),
    "u16": (42, [0, 65535]),
    "u32": (42, [0, 2**32 - 1]),
    "u64": (42, [0, 2**64 - 1]),
    "f32": (42.0, [1.5, -2.25e10]),
    "f64": (42.0, [1e-300, -7.125]),
    "string": ("hello", ["wörld", ""]),
}


@pytest.fixture(scope="module")
def server():
    srv = PvaServe(build_pva_serve())
    yield srv
    assert srv.stop() == 0


@pytest.fixture(scope="module")
def ctx(server):
    with Context("pva", conf=server.client_conf(), useenv=False) as c:
        yield c


def test_first_line_and_loopback(server):
    assert server.tcp.startswith("127.0.0.1:")
    assert server.udp.startswith("127.0.0.1:")


@pytest.mark.parametrize("name", list(SCALARS))
def test_scalar_get_put_monitor(ctx, name):
    pv = f"TEST:scalar:{name}"
    initial, values = SCALARS[name]
    got = ctx.get(pv, timeout=5)
    if name == "f32":
        assert float(got) == pytest.approx(initial)
    else:
        assert got == initial
    assert got.raw.getID() == "epics:nt/NTScalar:1.0"
    q = queue.Queue()
    sub = ctx.monitor(pv, q.put)
    try:
        first = q.get(timeout=5)
        assert first == got or name == "f32"
        for v in values:
            ctx.put(pv, v, timeout=5)
            upd = q.get(timeout=5)
            back = ctx.get(pv, timeout=5)
            if name == "f32":
                assert float(upd) == pytest.approx(v, rel=1e-6)
                assert float(back) == pytest.approx(v, rel=1e-6)
            else:
                assert upd == v
                assert back == v
    finally:
        sub.close()


def test_enum_by_index_and_choice(ctx):
    v = ctx.get("TEST:enum", timeout=5)
    assert v.raw.getID() == "epics:nt/NTEnum:1.0"
    assert list(v.raw["value.choices"]) == ["Zero", "One", "Two", "Three"]
    ctx.put("TEST:enum", 2, timeout=5)
    assert int(ctx.get("TEST:enum", timeout=5)) == 2
    ctx.put("TEST:enum", "Three", timeout=5)
    v = ctx.get("TEST:enum", timeout=5)
    assert int(v) == 3 and str(v.choice) == "Three"
    with pytest.raises(RemoteError, match="out of range"):
        ctx.put("TEST:enum", 9, timeout=5)
    assert int(ctx.get("TEST:enum", timeout=5)) == 3


def test_refused_puts_change_nothing(ctx):
    with pytest.raises(RemoteError, match="read-only"):
        ctx.put("TEST:ro", 1.0, timeout=5)
    assert ctx.get("TEST:ro", timeout=5) == 3.25
    ctx.put("TEST:limited", 100, timeout=5)
    with pytest.raises(RemoteError, match="out of range"):
        ctx.put("TEST:limited", 500, timeout=5)
    assert ctx.get("TEST:limited", timeout=5) == 100


def test_scalar_array(ctx):
    a = ctx.get("TEST:array", timeout=5)
    assert a.raw.getID() == "epics:nt/NTScalarArray:1.0"
    np.testing.assert_array_equal(a, np.arange(1, 11, dtype=np.float64))
    new = np.linspace(-1, 1, 1000)
    ctx.put("TEST:array", new, timeout=5)
    np.testing.assert_array_equal(ctx.get("TEST:array", timeout=5), new)


def _next_frame(q, uid, timeout=10):
    """Monitor updates until the frame with uniqueId `uid` (earlier ones may be squashed)."""
    while True:
        img = q.get(timeout=timeout)
        got = int(img.raw["uniqueId"])
        assert got <= uid, f"overshot: {got} > {uid}"
        if got == uid:
            return img


@pytest.mark.parametrize("type_name", list(FRAME_TYPES))
def test_ntndarray_monitor_pixels_pipelined(server, ctx, type_name):
    q = queue.Queue()
    sub = ctx.monitor("TEST:image", q.put, request="record[pipeline=true,queueSize=4]")
    try:
        q.get(timeout=5)  # current frame
        nx, ny = 33, 17
        ctx.put("TEST:image:post", f"{type_name} {nx} {ny}", timeout=5)
        uid = int(ctx.get("TEST:image", timeout=5).raw["uniqueId"])
        img = _next_frame(q, uid)
        assert img.dtype == FRAME_TYPES[type_name]
        assert img.shape == (ny, nx)
        assert img.attrib["ColorMode"] == 0
        np.testing.assert_array_equal(np.asarray(img).ravel(), pattern(type_name, nx * ny, uid))
        raw = img.raw
        assert raw.getID() == "epics:nt/NTNDArray:1.0"
        assert raw["codec.name"] == ""
        assert raw["uncompressedSize"] == nx * ny * np.dtype(FRAME_TYPES[type_name]).itemsize
    finally:
        sub.close()


def test_pipelined_burst_arrives_in_order_and_intact(server, ctx):
    q = queue.Queue()
    sub = ctx.monitor("TEST:image", q.put, request="record[pipeline=true,queueSize=4]")
    try:
        q.get(timeout=5)
        assert server.command("post uint16 256 256 60") == "ok 60"
        last = int(ctx.get("TEST:image", timeout=5).raw["uniqueId"])
        seen = []
        while not seen or seen[-1] != last:
            img = q.get(timeout=10)
            uid = int(img.raw["uniqueId"])
            np.testing.assert_array_equal(np.asarray(img).ravel(), pattern("uint16", 256 * 256, uid))
            seen.append(uid)
        assert seen == sorted(seen) and len(set(seen)) == len(seen)
    finally:
        sub.close()


def test_tcp_search_name_server(server):
    conf = {"EPICS_PVA_NAME_SERVERS": server.tcp, "EPICS_PVA_ADDR_LIST": "", "EPICS_PVA_AUTO_ADDR_LIST": "NO"}
    with Context("pva", conf=conf, useenv=False) as c:
        assert c.get("TEST:str", timeout=5) == "abc"
        assert c.get("TEST:enum", timeout=5).raw.getID() == "epics:nt/NTEnum:1.0"


def test_missing_pv_times_out(ctx):
    with pytest.raises(TimeoutError):
        ctx.get("TEST:does-not-exist", timeout=0.5)


# --- pvapy (pvAccessCPP): run in a child process so that its environment is ours alone ------

PVAPY_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np
    import pvaccess as pva
    out = {}
    c = pva.Channel('TEST:f64')
    out['f64'] = c.get('field(value)')['value']
    c = pva.Channel('TEST:i32')
    c.put(1234)
    out['i32'] = c.get('field(value)')['value']
    c = pva.Channel('TEST:str')
    c.put('from pvapy')
    out['str'] = c.get('field(value)')['value']
    c = pva.Channel('TEST:enum')
    c.put(1)
    out['enum_index'] = c.get('field(value)')['value']['index']
    try:
        pva.Channel('TEST:ro').put(1.0)
        out['ro'] = 'accepted'
    except Exception as e:
        out['ro'] = str(e)
    out['array'] = list(pva.Channel('TEST:array').get('field(value)')['value'])
    frames = {}
    img = pva.Channel('TEST:image')
    def cb(v):
        sel = list(v['value'][0].keys())[0] if isinstance(v['value'], tuple) else list(v['value'].keys())[0]
        arr = v['value'][0][sel] if isinstance(v['value'], tuple) else v['value'][sel]
        frames[v['uniqueId']] = (sel, [d['size'] for d in v['dimension']], np.asarray(arr).tolist())
    img.subscribe('t', cb)
    img.startMonitor()
    time.sleep(0.5)
    post = pva.Channel('TEST:image:post')
    for t in sys.argv[1:]:
        post.put(t + ' 5 3')
        time.sleep(0.3)
    time.sleep(0.5)
    img.stopMonitor()
    out['frames'] = {str(k): v for k, v in frames.items()}
    # Pipelined monitor (pvAccessCPP acks): a burst ends with the last frame, in order.
    ids = []
    img2 = pva.Channel('TEST:image')
    img2.monitor(lambda v: ids.append(v['uniqueId']), 'record[queueSize=4,pipeline=true]field(uniqueId,value)')
    time.sleep(0.5)
    post.put('uint8 64 64 50')
    last = img2.get('field(uniqueId)')['uniqueId']
    t = time.time()
    while (not ids or ids[-1] != last) and time.time() - t < 10:
        time.sleep(0.05)
    img2.stopMonitor()
    out['pipelined'] = {'ids': ids, 'last': last}
    print(json.dumps(out))
    """
)

PVAPY_MEMBERS = {
    "int8": "byteValue",
    "uint8": "ubyteValue",
    "int16": "shortValue",
    "uint16": "ushortValue",
    "int32": "intValue",
    "uint32": "uintValue",
    "int64": "longValue",
    "uint64": "ulongValue",
    "float32": "floatValue",
    "float64": "doubleValue",
}


def test_pvapy_client(server):
    require("pvaccess")
    types = list(FRAME_TYPES)
    r = subprocess.run(
        [sys.executable, "-c", PVAPY_SCRIPT, *types],
        env=server.client_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["f64"] == 1.5
    assert out["i32"] == 1234
    assert out["str"] == "from pvapy"
    assert out["enum_index"] == 1
    assert "read-only" in out["ro"]
    assert len(out["array"]) in (10, 1000)  # initial, or as test_scalar_array left it
    frames = {int(k): v for k, v in out["frames"].items()}
    assert len(frames) > len(types), sorted(frames)
    # The last len(types) uniqueIds are our frames, in the order posted.
    ours = sorted(frames)[-len(types):]
    piped = out["pipelined"]
    assert piped["ids"][-1] == piped["last"]
    assert piped["ids"] == sorted(set(piped["ids"]))
    for uid, t in zip(ours, types):
        member, dims, values = frames[uid]
        assert member == PVAPY_MEMBERS[t]
        assert dims == [5, 3]
        np.testing.assert_array_equal(np.asarray(values, dtype=FRAME_TYPES[t]), pattern(t, 15, uid))


def test_this_process_is_loopback_only():
    """In-process clients read the process environment; conftest.py puts the loopback
    variables there however pytest was started."""
    assert {k: os.environ.get(k) for k in LOOPBACK} == LOOPBACK
    assert os.environ["EPICS_PVAS_INTF_ADDR_LIST"] == "127.0.0.1"
    assert os.environ["EPICS_PVA_AUTO_ADDR_LIST"] == "NO"
