"""Interop of ndflow-ca's Channel Access server with pyepics (EPICS base libca) and caproto.

Runs the Rust example `ca_serve` on free loopback ports (TCP and UDP on one port number, a
separate free EPICS_CA_REPEATER_PORT, the loopback variables of netenv.py); the binary comes
from rust_examples.py.

Each client check runs in a subprocess with its own environment, so libca's context (which
reads EPICS_CA_* once per process) sees this server's ports only. Needs the pip packages
`pyepics` (bundles libca) and `caproto` (scripts/setup.sh installs both); a test whose client
is missing fails.
"""

import subprocess
import sys
import textwrap

import pytest

from interop import require
from netenv import ca_client_env, free_tcp_udp_port, free_udp_port, process_env
from rust_examples import ROOT, example_bin

PREFIX = "CATEST:"


def build_ca_serve():
    return str(example_bin("ca_serve"))


class CaServe:
    """A running ca_serve; stops on stdin EOF."""

    def __init__(self, binary):
        self.port = free_tcp_udp_port()
        self.repeater = free_udp_port()
        env = process_env(**ca_client_env(self.port, self.repeater))
        env.pop("EPICS_CAS_SERVER_PORT", None)
        self.proc = subprocess.Popen(
            [binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True
        )
        first = self.proc.stdout.readline().split()
        if len(first) != 3 or first[0] != "CA":
            self.stop()
            raise RuntimeError(f"ca_serve did not start: {first!r}")
        assert first[1] == f"tcp=127.0.0.1:{self.port}", first
        assert first[2] == f"udp=127.0.0.1:{self.port}", first

    def command(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def client_env(self):
        return process_env(
            **ca_client_env(self.port, self.repeater),
            CA_PREFIX=PREFIX,
            PYTHONPATH=str(ROOT / "python" / "tests"),
        )

    def run_client(self, script, timeout=120):
        """Run `script` in a fresh interpreter with the client environment; fail on error."""
        r = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(script)],
            env=self.client_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if r.returncode != 0:
            pytest.fail(f"client script failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
        return r.stdout

    def stop(self):
        try:
            if self.proc.stdin and not self.proc.stdin.closed:
                self.proc.stdin.close()
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(timeout=5)


@pytest.fixture
def server():
    """A fresh server per test (it starts in milliseconds), so puts do not leak between tests."""
    srv = CaServe(build_ca_serve())
    yield srv
    assert srv.stop() == 0


# What every PV reads as in each base DBR type: (string form, number).
EXPECT = {
    "double": ("1.500", 1.5),
    "float": ("2.50", 2.5),
    "long": ("42", 42),
    "short": ("7", 7),
    "enum": ("On", 1),
    "string": ("hello", None),
}


def test_pyepics_every_type_and_family(server):
    require("epics")
    server.run_client(
        f"""
        import os, math
        import epics.ca as ca, epics.dbr as dbr
        P = os.environ["CA_PREFIX"]
        EXPECT = {EXPECT!r}
        for name, (text, num) in EXPECT.items():
            chid = ca.create_channel(P + name, connect=True, auto_cb=False)
            assert ca.connect_channel(chid, timeout=5), name
            # pyepics unpacks plain, TIME and CTRL only (STS and GR: see the caproto test).
            for fam in (0, 2, 4):
                for base in range(7):
                    ftype = fam * 7 + base
                    if num is None and base != 0:
                        continue  # "hello" is no number
                    v = ca.get(chid, ftype=ftype, timeout=5)
                    assert v is not None, (name, ftype)
                    if base == 0:
                        assert v == text, (name, ftype, v)
                    elif base in (2, 6):
                        assert math.isclose(float(v), num, rel_tol=1e-6), (name, ftype, v)
                    else:
                        assert int(v) == int(num), (name, ftype, v)
        # Metadata through CTRL / TIME.
        chid = ca.create_channel(P + "double", connect=True, auto_cb=False)
        ctrl = ca.get_ctrlvars(chid, timeout=5)
        assert ctrl["units"] == "mm", ctrl
        assert ctrl["precision"] == 3, ctrl
        assert (ctrl["lower_disp_limit"], ctrl["upper_disp_limit"]) == (-10.0, 10.0), ctrl
        assert (ctrl["lower_ctrl_limit"], ctrl["upper_ctrl_limit"]) == (-5.0, 5.0), ctrl
        tv = ca.get_timevars(chid, timeout=5)
        assert tv["status"] == 0 and tv["severity"] == 0 and tv["timestamp"] > 1e9, tv
        chid = ca.create_channel(P + "enum", connect=True, auto_cb=False)
        assert ca.get_ctrlvars(chid, timeout=5)["enum_strs"] == ("Off", "On", "Auto")
        assert ca.field_type(chid) == dbr.ENUM
        print("ok")
        """
    )


def test_pyepics_fields(server):
    require("epics")
    server.run_client(
        """
        import os, epics
        P = os.environ["CA_PREFIX"]
        assert epics.caget(P + "double.EGU") == "mm"
        assert epics.caget(P + "double.DESC") == "A double"
        assert epics.caget(P + "double.RTYP") == "ao"
        assert epics.caget(P + "double.PREC") == 3
        assert epics.caget(P + "double.HOPR") == 10.0
        assert epics.caget(P + "double.DRVL") == -5.0
        assert epics.caget(P + "double.SEVR", as_string=True) == "NO_ALARM"
        assert epics.caget(P + "char.NELM") == 256
        assert epics.caget(P + "double.BOGUS", timeout=1) is None
        assert epics.caget(P + "nothing", timeout=1) is None
        """
    )


def test_pyepics_enum_char_puts(server):
    require("epics")
    server.run_client(
        """
        import os, time, epics
        P = os.environ["CA_PREFIX"]
        e = epics.PV(P + "enum")
        assert e.wait_for_connection(5)
        assert e.get() == 1 and e.get(as_string=True) == "On"
        assert e.enum_strs == ("Off", "On", "Auto")
        e.put(2, wait=True)
        assert e.get(use_monitor=False) == 2
        e.put("Off", wait=True)
        assert e.get(use_monitor=False) == 0
        assert e.get(as_string=True, use_monitor=False) == "Off"

        c = epics.PV(P + "char")
        assert c.wait_for_connection(5)
        assert c.nelm == 256
        assert c.get(as_string=True) == "/data/images/run1"
        c.put("/tmp/other", wait=True)
        assert c.get(as_string=True, use_monitor=False) == "/tmp/other"

        d = epics.PV(P + "double")
        d.put(4.25, wait=True)
        assert d.get(use_monitor=False) == 4.25
        d.put("5.5", wait=True)
        assert d.get(use_monitor=False) == 5.5
        assert d.get(as_string=True, use_monitor=False) == "5.500"

        s = epics.PV(P + "string")
        s.put("world", wait=True)
        assert s.get(use_monitor=False) == "world"

        slow = epics.PV(P + "slow")
        assert slow.wait_for_connection(5)
        t0 = time.monotonic()
        slow.put(7.0, wait=True, timeout=10)
        dt = time.monotonic() - t0
        assert dt >= 0.5, dt
        assert slow.get(use_monitor=False) == 7.0

        ro = epics.PV(P + "ro")
        assert ro.wait_for_connection(5)
        assert ro.read_access and not ro.write_access
        try:
            ro.put(1.0, wait=True, timeout=2)
        except Exception:
            pass
        assert ro.get(use_monitor=False) == 3.25
        print("ok")
        """
    )


def test_pyepics_monitors(server):
    require("epics")
    out = server.run_client(
        """
        import os, time, epics
        P = os.environ["CA_PREFIX"]
        seen = []
        pv = epics.PV(P + "long", auto_monitor=True, callback=lambda value=None, **kw: seen.append(value))
        assert pv.wait_for_connection(5)
        t0 = time.monotonic()
        while not seen and time.monotonic() - t0 < 5:
            time.sleep(0.01)
        assert seen, "no initial monitor update"
        w = epics.PV(P + "long", auto_monitor=False)
        for v in (100, 101, 102):
            epics.caput(P + "long", v, wait=True)
        t0 = time.monotonic()
        while (not seen or seen[-1] != 102) and time.monotonic() - t0 < 5:
            time.sleep(0.01)
        assert seen[-1] == 102, seen
        assert 100 in seen and 101 in seen, seen
        print("ready", flush=True)
        """
    )
    assert "ready" in out
    # Posts from the server side reach a callback too, and alarms.
    _monitor_server_posts(server)


def _monitor_server_posts(server):
    """A pyepics monitor sees values and alarms posted by the server process."""
    script = textwrap.dedent(
        """
        import os, sys, time, epics
        P = os.environ["CA_PREFIX"]
        seen = []
        pv = epics.PV(P + "float", form="time",
                      callback=lambda **kw: seen.append((kw["value"], kw["severity"])))
        assert pv.wait_for_connection(5)
        t0 = time.monotonic()
        while not seen and time.monotonic() - t0 < 5:
            time.sleep(0.01)
        assert seen
        print("subscribed", flush=True)
        sys.stdin.readline()
        t0 = time.monotonic()
        while not (any(abs(v - 9.5) < 1e-6 for v, _ in seen) and any(s == 2 for _, s in seen)):
            assert time.monotonic() - t0 < 5, seen
            time.sleep(0.01)
        print("ok", flush=True)
        """
    )
    p = subprocess.Popen(
        [sys.executable, "-c", script],
        env=server.client_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert p.stdout.readline().strip() == "subscribed", p.stderr.read()
        assert server.command(f"post {PREFIX}float 9.5") == "ok"
        assert server.command(f"alarm {PREFIX}float 3 2") == "ok"
        p.stdin.write("go\n")
        p.stdin.flush()
        out, err = p.communicate(timeout=30)
        assert p.returncode == 0, err
        assert "ok" in out
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        server.command(f"alarm {PREFIX}float 0 0")


def test_pyepics_image_1mib(server):
    require("epics")
    server.run_client(
        """
        import os, time, numpy as np, epics
        P = os.environ["CA_PREFIX"]
        pv = epics.PV(P + "image", auto_monitor=False)
        assert pv.wait_for_connection(5)
        assert pv.nelm == 1024 * 1024
        t0 = time.monotonic()
        v = pv.get(timeout=20)
        assert v is not None
        want = (np.arange(1024 * 1024) % 30000).astype(np.int16)
        assert v.dtype == np.int16 and v.shape == want.shape, (v.dtype, v.shape)
        assert (v == want).all()
        print("image get %.3f s" % (time.monotonic() - t0))
        """
    )


def test_pyepics_1000_channels_monitored(server):
    require("epics")
    server.run_client(
        """
        import os, time, epics
        P = os.environ["CA_PREFIX"]
        got = {}
        def cb(pvname=None, value=None, **kw):
            got[pvname] = value
        pvs = [epics.PV(P + "many:%d" % i, callback=cb) for i in range(1000)]
        t0 = time.monotonic()
        while len(got) < 1000 and time.monotonic() - t0 < 60:
            time.sleep(0.05)
        assert len(got) == 1000, len(got)
        assert all(got[P + "many:%d" % i] == i for i in range(1000))
        epics.caput(P + "many:500", -5, wait=True)
        t0 = time.monotonic()
        while got[P + "many:500"] != -5 and time.monotonic() - t0 < 5:
            time.sleep(0.01)
        assert got[P + "many:500"] == -5
        print("ok")
        """
    )


def test_caproto_every_type_and_family(server):
    """All 35 DBR types (plain, STS, TIME, GR, CTRL of the 7 base types) decoded by caproto."""
    require("caproto")
    server.run_client(
        f"""
        import os, math
        from caproto.threading.client import Context
        from caproto import ChannelType
        P = os.environ["CA_PREFIX"]
        EXPECT = {EXPECT!r}
        ctx = Context()
        names = list(EXPECT)
        pvs = ctx.get_pvs(*(P + n for n in names), timeout=5)
        for name, pv in zip(names, pvs):
            text, num = EXPECT[name]
            pv.wait_for_connection(timeout=5)
            for code in range(35):
                if code == 28:
                    # caproto decodes CTRL_STRING as TIME_STRING (its own quirk, like
                    # pyepics which never requests it); RSRV sends the STS layout.
                    continue
                base = code % 7
                if num is None and base != 0:
                    continue
                r = pv.read(data_type=ChannelType(code), timeout=5)
                v = r.data[0]
                if base == 0:
                    assert v == text.encode(), (name, code, v)
                elif base in (2, 6):
                    assert math.isclose(float(v), num, rel_tol=1e-6), (name, code, v)
                else:
                    assert int(v) == int(num), (name, code, v)
                if code >= 7:
                    assert r.metadata.status == 0 and r.metadata.severity == 0, (name, code)
                if name == "double" and code in (27, 34):
                    assert r.metadata.units == b"mm" and r.metadata.precision == 3
                    assert r.metadata.upper_disp_limit == 10.0
                if name == "double" and code == 34:
                    assert r.metadata.lower_ctrl_limit == -5.0
                if name == "long" and code in (26, 33):
                    assert r.metadata.units == b"counts" and r.metadata.upper_disp_limit == 1000
                if name == "enum" and code in (24, 31):
                    assert list(r.metadata.enum_strings) == [b"Off", b"On", b"Auto"]
        ctx.disconnect()
        print("ok")
        """
    )


def test_caproto_get_put_monitor(server):
    require("caproto")
    server.run_client(
        """
        import os, time, queue
        from caproto.threading.client import Context
        from caproto import ChannelType
        P = os.environ["CA_PREFIX"]
        ctx = Context()
        d, e, c, s, ro, slow, img, lng = ctx.get_pvs(
            *(P + n for n in ["double", "enum", "char", "string", "ro", "slow", "image", "long"]),
            timeout=5)
        r = d.read(data_type="control")
        assert r.metadata.units == b"mm" and r.metadata.precision == 3, r.metadata
        d.write([1.25], wait=True)
        assert d.read().data[0] == 1.25
        r = d.read(data_type=ChannelType.STRING)
        assert r.data[0] == b"1.250", r.data
        r = e.read(data_type="control")
        assert [x for x in r.metadata.enum_strings] == [b"Off", b"On", b"Auto"], r.metadata
        e.write(["Auto"], data_type=ChannelType.STRING, wait=True)
        assert e.read().data[0] == 2
        e.write([1], wait=True)
        assert e.read(data_type=ChannelType.STRING).data[0] == b"On"
        assert bytes(c.read().data).split(b"\\0")[0].startswith(b"/")
        s.write(["caproto"], wait=True)
        assert s.read().data[0] == b"caproto"
        t0 = time.monotonic()
        slow.write([2.0], wait=True, timeout=10)
        assert time.monotonic() - t0 >= 0.5
        # caproto does not check access rights itself: the server refuses the write.
        resp = ro.write([1.0], wait=True, timeout=2)
        assert resp.status.name == "ECA_NOWTACCESS", resp
        assert ro.read().data[0] == 3.25
        resp = ctx.get_pvs(P + "fail", timeout=5)[0].write([1], wait=True, timeout=2)
        assert resp.status.name == "ECA_PUTFAIL", resp
        v = img.read(timeout=20).data
        assert len(v) == 1024 * 1024 and v[12345] == 12345 and v[40000] == 10000
        q = queue.Queue()
        sub = lng.subscribe(data_type="time")
        def on_update(sub, resp):  # caproto keeps only a weak reference: no lambda
            q.put(resp.data[0])
        sub.add_callback(on_update)
        first = q.get(timeout=5)
        lng.write([777], wait=True)
        t0 = time.monotonic()
        while q.get(timeout=5) != 777:
            assert time.monotonic() - t0 < 5
        sub.clear()
        ctx.disconnect()
        print("ok")
        """
    )
