"""The ndflow pvAccess client CLIs (crates/ndflow-pva/examples/pva_get.rs, pva_monitor.rs) against a
p4p (pvxs) server, all on 127.0.0.1 with ports chosen by the server (isolate=True)."""

import os
import pathlib
import subprocess
import time

import numpy as np
import pytest
from interop import require
from netenv import loopback_env
from rust_examples import example_bin

p4p = require("p4p")
from p4p.nt import NTEnum, NTNDArray, NTScalar  # noqa: E402
from p4p.server import Server  # noqa: E402
from p4p.server.thread import SharedPV  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]


def example(name):
    return example_bin(name)


@pytest.fixture
def server():
    nt = NTNDArray()
    pvs = {
        "T:img": SharedPV(initial=nt.wrap(np.zeros((3, 4), np.uint16))),
        "T:dbl": SharedPV(nt=NTScalar("d"), initial=2.5),
        "T:enum": SharedPV(nt=NTEnum(), initial={"index": 1, "choices": ["Off", "On"]}),
    }
    with Server(providers=[pvs], isolate=True) as S:
        conf = S.conf()
        # Only the EPICS_* chosen here, so ports the caller may have set cannot steer the CLIs
        # away from the isolated server.
        env = {k: v for k, v in os.environ.items() if not k.startswith("EPICS_")}
        env.update(loopback_env())
        port = conf["EPICS_PVAS_BROADCAST_PORT"]
        env.update({
            "EPICS_PVA_ADDR_LIST": "127.0.0.1:%s" % port,
            "EPICS_PVA_BROADCAST_PORT": port,
            "NDFLOW_PVA_LOOPBACK_ONLY": "YES",
        })
        yield pvs, nt, env


def test_pva_get_scalar_and_enum(server):
    pvs, _, env = server
    out = subprocess.run([example("pva_get"), "T:dbl"], env=env, capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    assert "T:dbl (epics:nt/NTScalar:1.0)" in out.stdout
    assert "value = 2.5" in out.stdout.splitlines()
    out = subprocess.run([example("pva_get"), "T:enum", "--request", "field(value)"], env=env,
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "value.index = 1" in out.stdout.splitlines()
    assert 'value.choices = ["Off", "On"]' in out.stdout.splitlines()


def test_pva_monitor_prints_one_line_per_frame(server):
    pvs, nt, env = server
    proc = subprocess.Popen(
        [example("pva_monitor"), "T:img", "--count", "6", "--pipeline", "--queue", "4"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # The CLI reports the subscription on stderr before the first update.
        first = proc.stderr.readline()
        assert first.startswith("T:img connected (epics:nt/NTNDArray:1.0)"), first
        for uid in range(1, 6):
            v = nt.wrap(np.full((2 + uid, 5), uid, np.int32))
            v["uniqueId"] = uid
            pvs["T:img"].post(v)
            time.sleep(0.05)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    lines = stdout.splitlines()
    assert lines[0] == "T:img uniqueId=0 dims=[4,3] type=U16 size=24"
    for uid in range(1, 6):
        assert lines[uid] == "T:img uniqueId=%d dims=[5,%d] type=I32 size=%d" % (
            uid, 2 + uid, 4 * 5 * (2 + uid))
    assert "6 updates" in stderr


def test_pva_monitor_times_out_with_a_clear_message(server):
    _, _, env = server
    t0 = time.time()
    out = subprocess.run([example("pva_monitor"), "T:missing", "--timeout", "0.5"], env=env,
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 1
    assert "T:missing" in out.stderr and "timed out" in out.stderr
    assert time.time() - t0 < 10
