"""The `ndflow` Python package (crates/ndflow-python): pipelines from TOML and from code,
parameters, zero-copy frames, Python plugins, accounting. Real pipelines, real numbers:
pixels are checked against the simulator's ramp formula computed here with numpy."""

import asyncio
import gc
import json
import subprocess
import sys
import threading
import time
import _thread

import numpy as np
import pytest
from interop import require
from netenv import (
    LOOPBACK,
    ca_client_env,
    free_tcp_port,
    free_tcp_udp_port,
    free_udp_port,
    process_env,
    pva_client_conf,
)

ndflow = require("ndflow")

W, H = 64, 48

# Every pixel type, by the DataType name the sim takes and the numpy dtype it should give.
TYPES = {
    "Int8": np.int8,
    "UInt8": np.uint8,
    "Int16": np.int16,
    "UInt16": np.uint16,
    "Int32": np.int32,
    "UInt32": np.uint32,
    "Int64": np.int64,
    "UInt64": np.uint64,
    "Float32": np.float32,
    "Float64": np.float64,
}


def ramp(uid, dtype, w=W, h=H, gains=None):
    """simDetector's LinearRamp with unit gains: frame uid holds gain*(x + y + uid - 1),
    computed in the pixel type (integers wrap). RGB1: one gain per colour, last axis."""
    y, x = np.mgrid[0:h, 0:w]
    base = (x + y + (uid - 1)).astype(np.int64)
    if gains is None:
        return base.astype(dtype)
    return np.stack([(g * base) for g in gains], axis=-1).astype(dtype)


def sim(p, name="SIM1", n=5, dtype="UInt16", **kw):
    """A fast simulated detector acquiring n frames (LinearRamp, no noise)."""
    settings = dict(
        MaxSizeX=W, MaxSizeY=H, SizeX=W, SizeY=H, DataType=dtype, ImageMode="Multiple",
        NumImages=n, AcquireTime=0.0, AcquirePeriod=0.0,
    )
    settings.update(kw)
    return p.add("sim", name, **settings)


TOML = """
prefix = "PYT:"
threads = 2
[[port]]
name = "SIM1"
type = "sim"
MaxSizeX = 64
MaxSizeY = 48
DataType = "UInt16"
ImageMode = "Multiple"
NumImages = 7
AcquireTime = 0.0
AcquirePeriod = 0.0
[[port]]
name = "STATS1"
type = "stats"
NDArrayPort = "SIM1"
"""


# ---------------------------------------------------------------- building and running


def test_from_toml_text_and_path_match_ndflow_run_summary(tmp_path, ndflow_bin):
    path = tmp_path / "p.toml"
    path.write_text(TOML)
    with ndflow.Pipeline.from_toml(TOML) as p:
        assert p.ports == ["SIM1", "STATS1"]
        assert p.run(timeout=20)
        s_text = p.summary()
    with ndflow.Pipeline.from_toml(path) as p:
        assert p.run(timeout=20)
        s_path = p.summary()
    # The same dict `ndflow run --summary` writes, for the same file (acquiring at start).
    out = tmp_path / "summary.json"
    bin_path = tmp_path / "bin.toml"
    bin_path.write_text(TOML.replace("NumImages = 7", "NumImages = 7\nAcquire = 1"))
    subprocess.run(
        [str(ndflow_bin), "run", str(bin_path), "--until-idle", "--quiet", "--no-pva", "--no-ca",
         "--summary", str(out)],
        check=True, timeout=60,
    )
    s_bin = json.loads(out.read_text())
    for s in (s_text, s_path):
        assert set(s["ports"]) == set(s_bin["ports"])
        for port in s_bin["ports"]:
            assert set(s["ports"][port]) == set(s_bin["ports"][port])
        assert s["ports"]["SIM1"]["ArrayCounter_RBV"] == 7 == s_bin["ports"]["SIM1"]["ArrayCounter_RBV"]
        assert s["ports"]["STATS1"]["ArraysProcessed_RBV"] == 7 == s_bin["ports"]["STATS1"]["ArraysProcessed_RBV"]
        assert s["ports"]["STATS1"]["MaxValue_RBV"] == s_bin["ports"]["STATS1"]["MaxValue_RBV"]


def test_stream_of_a_config_that_acquires_at_build_ends_when_idle():
    text = TOML.replace("NumImages = 7", "NumImages = 7\nAcquire = 1")
    with ndflow.Pipeline.from_toml(text) as p:
        with p.frames("STATS1", queue=16, timeout=30) as frames:
            t0 = time.monotonic()
            got = [f.unique_id for f in frames]
        assert time.monotonic() - t0 < 10  # ended at idle, not on the time-out
        assert got == sorted(got) and all(1 <= u <= 7 for u in got)
        assert p["SIM1"].ArrayCounter_RBV == 7


def test_toml_errors_name_file_line_port_key(tmp_path):
    bad = TOML.replace("NumImages = 7", "NumImages = 7\nSizeX = 0")
    with pytest.raises(ValueError) as e:
        ndflow.Pipeline.from_toml(bad)
    assert str(e.value).startswith("<string>:")
    assert "port 'SIM1': key 'SizeX':" in str(e.value)
    path = tmp_path / "bad.toml"
    path.write_text(TOML.replace('type = "stats"', 'type = "nope"'))
    with pytest.raises(ValueError, match=r"bad\.toml:\d+: port 'STATS1': key 'type': unknown port type 'nope'"):
        ndflow.Pipeline.from_toml(str(path))


def test_build_in_code_repr_and_counters():
    with ndflow.Pipeline() as p:
        sim(p, n=12)
        # Queues that hold every frame: the counts below are exact.
        p.add("roi", "ROI1", NDArrayPort="SIM1", MinX=8, SizeX=16, QueueSize=20)
        p.add("stats", "STATS1", NDArrayPort="ROI1", QueueSize=20)
        assert "SIM1" in p and "NOPE" not in p
        with pytest.raises(KeyError):
            p["NOPE"]
        with pytest.raises(ValueError, match="duplicate port name"):
            p.add("roi", "ROI1")
        with pytest.raises(ValueError, match="unknown port type 'bogus'"):
            p.add("bogus", "X1")
        assert p.run(timeout=20, progress=False)
        r = repr(p)
        assert "SIM1" in r and "frames 12" in r
        assert "ROI1" in r and "<- SIM1" in r and "processed 12" in r
        assert "STATS1" in r and "<- ROI1" in r
        a = p["STATS1"].accounting()
        assert a["offered"] == 12 == a["processed"] and a["dropped"] == 0
        assert p["ROI1"].ArraySize0_RBV == 16
        assert p["STATS1"].ArrayCounter_RBV == 12


# ---------------------------------------------------------------- parameters


def test_parameters_get_set_enums_readbacks_refusals():
    with ndflow.Pipeline() as p:
        s = sim(p)
        assert s.SizeX == W and s["SizeX_RBV"] == W
        s.SizeX = 32
        assert s.SizeX == 32 and s["SizeX"] == 32
        s["AcquirePeriod"] = 0.25
        assert s.AcquirePeriod == 0.25
        # Enums by string or by index; read back as the menu string.
        s.DataType = "Float32"
        assert s.DataType == "Float32" and s.DataType_RBV == "Float32"
        s.DataType = 1
        assert s.DataType == "UInt8"
        s.ImageMode = "Continuous"
        assert s["ImageMode"] == "Continuous"
        # Readbacks are read-only; the message has the config file's form.
        with pytest.raises(ValueError, match=r"port 'SIM1': key 'SizeX_RBV': parameter 'SizeX_RBV' is read-only"):
            s.SizeX_RBV = 3
        with pytest.raises(ValueError, match="read-only"):
            s["MaxSizeX"] = 3
        with pytest.raises(AttributeError):
            s.NoSuchParameter
        with pytest.raises(ValueError, match="unknown parameter 'NoSuchParameter'"):
            s.NoSuchParameter = 1
        assert "SizeX" in dir(s) and "SizeX_RBV" in s.names()


@pytest.mark.parametrize(
    "key,value",
    [("SizeX", 0), ("DataType", "Bogus"), ("ImageMode", 7), ("NDArrayPort", "NOPE")],
)
def test_refused_write_message_equals_config_files(key, value):
    port, ptype = ("SIM1", "sim") if key != "NDArrayPort" else ("ROI1", "roi")
    text = (
        '[[port]]\nname = "SIM1"\ntype = "sim"\nMaxSizeX = 64\nMaxSizeY = 48\n'
        '[[port]]\nname = "ROI1"\ntype = "roi"\n'
    )
    toml_value = json.dumps(value)
    bad = text + f"{key} = {toml_value}\n" if port == "ROI1" else text.replace(
        "MaxSizeY = 48\n", f"MaxSizeY = 48\n{key} = {toml_value}\n")
    with pytest.raises(ValueError) as from_file:
        ndflow.Pipeline.from_toml(bad)
    with ndflow.Pipeline.from_toml(text) as p:
        with pytest.raises(ValueError) as from_python:
            setattr(p[port], key, value)
        # Also through add(**params).
        with pytest.raises(ValueError) as from_add:
            p.add(ptype, port + "b", **({key: value} if port == "ROI1" else {"MaxSizeX": 64, "MaxSizeY": 48, key: value}))
    tail = lambda e: str(e.value).split(f"key '{key}': ", 1)[1]  # noqa: E731
    assert tail(from_python) == tail(from_file)
    assert tail(from_add) == tail(from_file)
    assert str(from_python.value).startswith(f"<python>: port '{port}': key '{key}': ")


def test_param_declarations_match_ports():
    types = [t[0] for t in ndflow.port_types()]
    assert "sim" in types and "stats" in types
    decl = {d["name"]: d for d in ndflow.param_declarations("sim")}
    assert decl["DataType"]["choices"][3] == "UInt16"
    assert decl["SizeX"]["writable"] and not decl["MaxSizeX"]["writable"]
    with ndflow.Pipeline() as p:
        s = sim(p)
        for name in decl:
            getattr(s, name)  # every declared name reads


# ---------------------------------------------------------------- frames into Python


@pytest.mark.parametrize("dtype", list(TYPES))
def test_frames_pixels_equal_sim_formula(dtype):
    with ndflow.Pipeline() as p:
        sim(p, n=6, dtype=dtype)
        with p.frames("SIM1", queue=16) as frames:
            p.start()
            got = list(frames)
        assert [f.unique_id for f in got] == [1, 2, 3, 4, 5, 6]
        for f in got:
            a = f.array
            assert a.dtype == TYPES[dtype] and a.shape == (H, W)
            assert not a.flags.writeable
            np.testing.assert_array_equal(a, ramp(f.unique_id, TYPES[dtype]))
            assert f.data_type == dtype and f.color_mode == "Mono"
            assert [d["size"] for d in f.dims] == [W, H]
            sec, nsec = f.epics_ts
            assert abs(sec + nsec * 1e-9 - f.timestamp) < 1e-6


@pytest.mark.parametrize(
    "mode,dtype",
    [("RGB1", "UInt8"), ("RGB1", "UInt16"), ("RGB1", "Float32"), ("RGB2", "UInt16"),
     ("RGB3", "UInt16"), ("RGB3", "Float64")],
)
def test_frames_rgb_pixels_equal_sim_formula(mode, dtype):
    # numpy axes = areaDetector dims reversed: RGB1 [3,X,Y] -> (Y,X,3), RGB2 [X,3,Y] ->
    # (Y,3,X), RGB3 [X,Y,3] -> (3,Y,X).
    axes = {"RGB1": (0, 1, 2), "RGB2": (0, 2, 1), "RGB3": (2, 0, 1)}[mode]
    with ndflow.Pipeline() as p:
        sim(p, n=3, dtype=dtype, ColorMode=mode, GainRed=1, GainGreen=2, GainBlue=3)
        with p.frames("SIM1", queue=8) as frames:
            p.start()
            got = list(frames)
        assert len(got) == 3
        for f in got:
            want = ramp(f.unique_id, TYPES[dtype], gains=(1, 2, 3)).transpose(axes)
            assert f.color_mode == mode and f.array.shape == want.shape
            np.testing.assert_array_equal(f.array, want)


def test_roi_frame_dims_and_attributes():
    with ndflow.Pipeline() as p:
        sim(p, n=2)
        p.add("roi", "ROI1", NDArrayPort="SIM1", MinX=8, SizeX=20, MinY=4, SizeY=10, BinX=2)
        with p.frames("ROI1") as frames:
            p.start()
            f = frames.get(timeout=10)
        assert f.dims[0] == {"size": 10, "offset": 8, "binning": 2, "reverse": False}
        assert f.dims[1]["size"] == 10 and f.dims[1]["offset"] == 4
        full = ramp(f.unique_id, np.int64)
        want = full[4:14, 8:28].reshape(10, 10, 2).sum(axis=2)
        np.testing.assert_array_equal(f.array, want.astype(np.uint16))
        assert f.attributes["ColorMode"] == 0


def test_zero_copy_view_of_pool_buffer():
    with ndflow.Pipeline() as p:
        sim(p, n=3)
        with p.frames("SIM1") as frames:
            p.start()
            f = next(iter(frames))
        a = f.array
        # The numpy data pointer is the pooled buffer itself, kept alive by the Frame.
        assert a.ctypes.data == f._buffer_address
        assert a.base is f
        assert f.array.ctypes.data == a.ctypes.data
        assert np.asarray(f).ctypes.data == f._buffer_address
        with pytest.raises(ValueError):
            a[0, 0] = 1
        with pytest.raises(ValueError):
            a.flags.writeable = True  # the pooled pixels stay read-only


def test_no_allocation_per_frame_over_10000_frames():
    n = 10_000
    with ndflow.Pipeline() as p:
        s = sim(p, n=n, SizeX=32, SizeY=32)
        delivered = 0
        with p.frames("SIM1", queue=8) as frames:
            p.start()
            for f in frames:
                assert f.array.ctypes.data == f._buffer_address
                delivered += 1
            stats = frames.stats()
        p.summary()  # publishes the pool counters
        allocated = s.PoolAllocBuffers
        assert s.ArrayCounter_RBV == n
        assert delivered + stats["dropped_queue_full"] == n
        # Buffers are reused: the pool never held more than the frames in flight at once
        # (stream queue + port queue + a few in hand), whatever the frame count.
        assert allocated <= 32, allocated


def test_frame_outlives_pipeline():
    p = ndflow.Pipeline()
    sim(p, n=4, dtype="UInt32")
    with p.frames("SIM1", queue=8) as frames:
        p.start()
        got = list(frames)
    arrays = [f.array for f in got]
    p.close()
    del p, frames
    gc.collect()
    # Churn memory so that a freed buffer would be overwritten.
    junk = [np.full((H, W), 7, np.uint32) for _ in range(200)]
    for a, f in zip(arrays, got):
        np.testing.assert_array_equal(a, ramp(f.unique_id, np.uint32))
    del got
    gc.collect()
    for k, a in enumerate(arrays):  # views alone keep their frame alive
        np.testing.assert_array_equal(a, ramp(k + 1, np.uint32))
    del junk


def test_compressed_frames_decompress():
    with ndflow.Pipeline() as p:
        sim(p, n=3)
        p.add("codec", "CODEC1", NDArrayPort="SIM1", Mode="Compress", Compressor="LZ4")
        with p.frames("CODEC1", queue=8) as frames:
            p.start()
            got = list(frames)
        assert len(got) == 3
        for f in got:
            assert f.codec == "lz4" and f.nbytes < W * H * 2
            with pytest.raises(ValueError, match="compressed"):
                f.array
            d = f.decompressed()
            assert d.codec is None and d.unique_id == f.unique_id
            np.testing.assert_array_equal(d.array, ramp(f.unique_id, np.uint16))


def test_slow_consumer_never_stalls_and_counters_add_up():
    n = 300
    with ndflow.Pipeline() as p:
        s = sim(p, n=n)
        p.add("stats", "STATS1", NDArrayPort="SIM1", BlockingCallbacks="Yes")
        frames = p.frames("SIM1", queue=4)
        p.start()
        delivered = []
        for f in frames:
            delivered.append(f.unique_id)
            time.sleep(0.01)  # far slower than the source
        st = frames.stats()
        # The pipeline ran at its own pace: every frame acquired and processed by STATS1.
        assert s.ArrayCounter_RBV == n
        assert p["STATS1"].accounting()["processed"] == n
        assert st["offered"] == n
        assert st["delivered"] == len(delivered)
        assert st["dropped_queue_full"] > 0
        assert st["offered"] == st["delivered"] + st["pending"] + st["dropped"] + st["queued"] + st["in_flight"]
        assert st["dropped"] == st["dropped_queue_full"]
        assert delivered == sorted(delivered) and len(set(delivered)) == len(delivered)
        p.summary()
        assert p[frames.port].DroppedQueueFull == st["dropped_queue_full"]
        frames.close()


def test_async_iteration():
    async def collect(stream):
        return [f.unique_id async for f in stream]

    with ndflow.Pipeline() as p:
        sim(p, n=5)
        with p.frames("SIM1", queue=8) as frames:
            p.start()
            ids = asyncio.run(collect(frames))
    assert ids == [1, 2, 3, 4, 5]


def test_stream_timeout_and_keyboard_interrupt_stops_cleanly():
    with ndflow.Pipeline() as p:
        s = sim(p, ImageMode="Continuous", AcquirePeriod=0.002)
        frames = p.frames("SIM1", queue=2, timeout=0.2)
        assert list(frames) == []  # nothing started: ends on the time-out
        p.start()
        timer = threading.Timer(0.3, _thread.interrupt_main)
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            p.wait_idle(timeout=30, progress=False)
        timer.cancel()
        assert p.is_idle()
        assert s.Acquire == "Done"
        frames.close()


def test_keyboard_interrupt_in_a_frame_loop_stops_acquisition():
    with ndflow.Pipeline() as p:
        # A slow source: the loop spends its time waiting in the iterator, where Ctrl-C lands.
        s = sim(p, ImageMode="Continuous", AcquirePeriod=0.2)
        frames = p.frames("SIM1", queue=2)
        p.start()
        timer = threading.Timer(0.5, _thread.interrupt_main)
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            for f in frames:
                pass
        timer.cancel()
        assert s.Acquire == "Done"
        assert p.wait_idle(timeout=10, progress=False)
        frames.close()


@pytest.mark.parametrize("tqdm", [True, False])
def test_long_wait_shows_progress(capsys, monkeypatch, tqdm):
    if tqdm:
        require("tqdm")
    else:  # the rate line when tqdm is not installed
        monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    with ndflow.Pipeline() as p:
        sim(p, n=20, AcquirePeriod=0.05)
        p.start()
        assert p.wait_idle(timeout=30, progress=True)
    err = capsys.readouterr().err
    # tqdm's bar or the rate line, both named "ndflow" and counting frames.
    assert "ndflow" in err and ("frame/s" in err if tqdm else "frames/s" in err)


# ---------------------------------------------------------------- Python plugins


def test_python_plugin_background_subtraction_then_stats():
    n = 5
    background = ramp(1, np.float64) * 0.5 + 3.0

    def subtract(frame):
        return frame.array.astype(np.float64) - background

    with ndflow.Pipeline() as p:
        sim(p, n=n, dtype="UInt16")
        py = p.add_python("BG1", subtract, NDArrayPort="SIM1", threads=1)
        p.add("stats", "STATS1", NDArrayPort="BG1", QueueSize=n)
        with p.frames("BG1", queue=n) as frames:
            assert p.run(timeout=30, progress=False)
            out = list(frames)
        assert [f.unique_id for f in out] == list(range(1, n + 1))
        for f in out:
            want = ramp(f.unique_id, np.uint16).astype(np.float64) - background
            assert f.data_type == "Float64" and [d["size"] for d in f.dims] == [W, H]
            np.testing.assert_array_equal(f.array, want)
        last = ramp(n, np.uint16).astype(np.float64) - background
        st = p["STATS1"]
        p.summary()
        assert st.ArraysProcessed == n
        assert st.MinValue == pytest.approx(last.min())
        assert st.MaxValue == pytest.approx(last.max())
        assert st.MeanValue == pytest.approx(last.mean(), rel=1e-12)
        assert st.Total == pytest.approx(last.sum(), rel=1e-12)
        assert st.Sigma == pytest.approx(last.std(), rel=1e-9)
        assert py.accounting()["processed"] == n and py.type == "python"


def test_python_plugin_returns_frame_none_and_same_pixels():
    seen = []

    def every_other(frame):
        seen.append(frame.unique_id)
        if frame.unique_id % 2:
            return frame  # passed on as is
        return None  # nothing emitted

    def identity(frame):
        return frame.array  # the input's own pixels: passed on without a copy

    with ndflow.Pipeline() as p:
        sim(p, n=6)
        p.add_python("PY1", every_other, NDArrayPort="SIM1")
        p.add_python("PY2", identity, NDArrayPort="PY1")
        with p.frames("PY1", queue=8) as f1, p.frames("PY2", queue=8) as f2:
            p.run(timeout=30, progress=False)
            a, b = list(f1), list(f2)
    assert sorted(seen) == [1, 2, 3, 4, 5, 6]
    assert [f.unique_id for f in a] == [1, 3, 5] == [f.unique_id for f in b]
    for x, y in zip(a, b):
        assert x._buffer_address == y._buffer_address


def test_python_plugin_keeps_its_thread_state_between_frames():
    """A worker calls the plugin with one Python thread state for its whole life, so
    `threading.local` data (a per-thread scratch buffer or cache) set for one frame is there
    for the next; a thread state created and deleted around every call lost it each frame."""
    local = threading.local()
    seen = []

    def count(frame):
        n = getattr(local, "n", 0)
        seen.append(n)
        local.n = n + 1
        return None

    with ndflow.Pipeline(threads=1) as p:
        sim(p, n=20)
        port = p.add_python("PY1", count, NDArrayPort="SIM1", QueueSize=20)
        p.run(timeout=30, progress=False)
        assert port.accounting()["processed"] == 20
    assert seen == list(range(20))


def test_python_plugin_exceptions_counted_and_logged(capsys):
    def fragile(frame):
        if frame.unique_id % 3 == 0:
            raise ZeroDivisionError(f"bad frame {frame.unique_id}")
        return frame.array * 2

    with ndflow.Pipeline() as p:
        sim(p, n=9, dtype="Int32")
        port = p.add_python("PY1", fragile, NDArrayPort="SIM1", threads=2)
        with p.frames("PY1", queue=16) as frames:
            assert p.run(timeout=30, progress=False)
            out = {f.unique_id: f for f in frames}
        p.summary()
        assert port.DroppedErrors == 3
        assert port.ArraysProcessed == 6
        a = port.accounting()
        assert a["offered"] == 9 == a["processed"] + a["dropped_errors"]
        assert sorted(out) == [1, 2, 4, 5, 7, 8]
        for uid, f in out.items():
            np.testing.assert_array_equal(f.array, ramp(uid, np.int32) * 2)
    err = capsys.readouterr().err
    assert "Traceback" in err and "ZeroDivisionError: bad frame 3" in err
    assert "port 'PY1'" in err


def test_python_plugin_threads_and_params():
    active = {"now": 0, "max": 0}
    lock = threading.Lock()

    def slow(frame):
        with lock:
            active["now"] += 1
            active["max"] = max(active["max"], active["now"])
        time.sleep(0.05)  # releases the GIL: other workers may run
        with lock:
            active["now"] -= 1

    with ndflow.Pipeline(threads=4) as p:
        sim(p, n=12)
        port = p.add_python("PY1", slow, NDArrayPort="SIM1", threads=2, QueueSize=20)
        assert port.NumThreads == 2 and port.QueueSize == 20
        assert p.run(timeout=30, progress=False)
        assert port.accounting()["processed"] == 12
    assert active["max"] == 2


# ---------------------------------------------------------------- docs and stubs


def test_docs_python_examples_run(monkeypatch, capsys):
    """Every ```python block of docs/python.md runs (matplotlib faked when not installed)."""
    import pathlib
    import re
    import types

    root = pathlib.Path(__file__).resolve().parents[2]
    text = (root / "docs" / "python.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 4
    try:
        import matplotlib

        matplotlib.use("Agg")
    except ImportError:
        plt = types.ModuleType("matplotlib.pyplot")
        plt.plot = plt.xlabel = plt.ylabel = plt.show = lambda *a, **k: None
        mpl = types.ModuleType("matplotlib")
        mpl.pyplot = plt
        monkeypatch.setitem(sys.modules, "matplotlib", mpl)
        monkeypatch.setitem(sys.modules, "matplotlib.pyplot", plt)
    monkeypatch.chdir(root)
    for code in blocks:
        ns = {"__name__": "__docs__"}
        exec(compile(code, "docs/python.md", "exec"), ns)
        for v in ns.values():
            if isinstance(v, ndflow.Pipeline):
                v.close()


def test_stubs_are_generated_from_current_declarations():
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[2]
    tool = root / "crates" / "ndflow-python" / "tools" / "gen_stubs.py"
    r = subprocess.run([sys.executable, str(tool), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_serve_pva_makes_the_pipeline_an_ioc(monkeypatch):
    """serve_pva=True: parameters and a `pva` port's image are PVs, reads and writes go both ways."""
    p4p_thread = require("p4p.client.thread")

    tcp, udp = free_tcp_port(), free_udp_port()
    # The pipeline's server reads the process environment.
    for k, v in LOOPBACK.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("EPICS_PVAS_SERVER_PORT", str(tcp))
    monkeypatch.setenv("EPICS_PVAS_BROADCAST_PORT", str(udp))
    conf = pva_client_conf(tcp, udp)
    with ndflow.Pipeline(prefix="PYT:", serve_pva=True) as p:
        sim(p, n=3)
        p.add("pva", "PVA1", NDArrayPort="SIM1")
        assert p.serving is None
        p.run(timeout=20, progress=False)
        assert "pvAccess" in p.serving and str(tcp) in p.serving
        ctx = p4p_thread.Context("pva", conf=conf, useenv=False)
        try:
            assert ctx.get("PYT:SIM1:ArrayCounter_RBV", timeout=5) == 3
            img = ctx.get("PYT:PVA1:Image", timeout=5)
            np.testing.assert_array_equal(np.asarray(img).reshape(H, W), ramp(3, np.uint16))
            ctx.put("PYT:SIM1:AcquirePeriod", 0.125, timeout=5)
            assert p["SIM1"].AcquirePeriod == 0.125
        finally:
            ctx.close()


def test_serve_ca_makes_the_pipeline_a_channel_access_server(monkeypatch):
    """serve_ca=True: pyepics (in a subprocess) reads a counter and writes a setting."""
    require("epics")

    port, repeater = free_tcp_udp_port(), free_udp_port()
    for k, v in LOOPBACK.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("EPICS_CAS_SERVER_PORT", str(port))
    monkeypatch.setenv("EPICS_CA_SERVER_PORT", str(port))
    monkeypatch.setenv("EPICS_CA_REPEATER_PORT", str(repeater))
    code = (
        "import epics\n"
        "print('COUNT', epics.caget('PYC:SIM1:ArrayCounter_RBV', timeout=10))\n"
        "print('PUT', epics.caput('PYC:SIM1:AcquirePeriod', 0.375, wait=True, timeout=10))\n"
    )
    with ndflow.Pipeline(prefix="PYC:", serve_ca=True) as p:
        sim(p, n=4)
        p.run(timeout=20, progress=False)
        assert "Channel Access" in p.serving
        env = process_env(**ca_client_env(port, repeater))
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=120)
        assert "COUNT 4" in r.stdout, r.stdout + r.stderr
        assert p["SIM1"].AcquirePeriod == 0.375


def test_pipeline_in_a_cycle_through_its_plugin_is_collected():
    """A plugin closure over its own pipeline: the garbage collector closes and frees it."""
    import weakref

    p = ndflow.Pipeline()
    sim(p, n=3)
    seen = []

    def uses_pipeline(frame):
        seen.append(p["SIM1"].ArrayCounter_RBV)  # the closure refers to p

    p.add_python("PY1", uses_pipeline, NDArrayPort="SIM1", QueueSize=10)
    assert p.run(timeout=20, progress=False)
    assert len(seen) == 3
    ref = weakref.ref(p)
    del p
    gc.collect()
    assert ref() is None
