"""What `ndflow run` writes when nobody watches a terminal, and the log level as a PV.

With stdout and stderr going to a file (a systemd journal, a log file) the IOC prints no live
status line: an idle IOC writes nothing, an acquisition writes one line when it starts and one
when it ends (frames and rate), a plugin's first dropped frame is reported with its reason,
and a clean stop (SIGINT) writes the summary. `$(P)NDFLOW:LogLevel` changes the log filter
while the IOC runs, over pvAccess and Channel Access.

Loopback only: the IOC and its clients get netenv.py's loopback variables and free ports.
"""

import re
import signal
import subprocess
import time

import pytest
from interop import require
from pva_util import NdflowIoc
from pyepics_client import run_pyepics
from netenv import free_tcp_port, free_udp_port, process_env

P = "OUT13:"

# UInt16 frames into a JPEG codec: every frame is dropped as "unsupported input" (JPEG takes
# UInt8 only), a drop of a known reason and count.
CONFIG = """
prefix = "{P}"

[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = 64
MaxSizeY = 64
DataType = "UInt16"
ImageMode = "Multiple"
NumImages = 5
AcquireTime = 0.0
AcquirePeriod = 0.02

[[port]]
name = "STATS1"
type = "stats"
prefix = "Stats1:"
NDArrayPort = "SIM1"

[[port]]
name = "JPG1"
type = "codec"
prefix = "JPG1:"
NDArrayPort = "SIM1"
Compressor = "JPEG"
""".replace("{P}", P)


class Ioc:
    """`ndflow run` with stdout and stderr to a file (not a terminal), no --quiet, on free
    loopback ports; `ctx` is a p4p context that talks to it."""

    def __init__(self, ndflow_bin, tmp, log_filter="warn"):
        ioc = NdflowIoc(ndflow_bin, tmp, CONFIG, extra_env={"NDFLOW_LOG": log_filter}, quiet=False)
        ioc.raw.close()
        self.ioc, self.proc, self.ctx, self.path, self.log = ioc, ioc.proc, ioc.ctx, ioc.log_path, ioc.log
        self.ca_port, self.ca_repeater = ioc.ca_port, ioc.ca_repeater

    def text(self):
        return self.path.read_text()

    def lines(self):
        return self.text().splitlines()

    def wait_served(self, timeout=20.0):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                pytest.fail("IOC exited:\n" + self.text())
            try:
                self.ctx.get(P + "cam1:Acquire_RBV", timeout=1.0)
                return
            except Exception:
                time.sleep(0.1)
        pytest.fail("IOC never served its PVs:\n" + self.text())

    def wait_line(self, pattern, timeout=5.0):
        """The first log line matching `pattern`, waiting for it up to `timeout`."""
        deadline = time.time() + timeout
        while True:
            for line in self.lines():
                if re.search(pattern, line):
                    return line
            if time.time() > deadline:
                pytest.fail(f"no line matching {pattern!r} in:\n{self.text()}")
            time.sleep(0.1)

    def interrupt(self, timeout=20.0):
        """SIGINT (Ctrl-C, a clean stop); returns the exit status."""
        self.ctx.close()
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
            pytest.fail("IOC did not stop on SIGINT:\n" + self.text())

    def close(self):
        if self.proc.poll() is None:
            self.ctx.close()
            self.proc.kill()
            self.proc.wait(timeout=5)
        self.log.close()


@pytest.fixture
def ioc(ndflow_bin, tmp_path):
    ioc = Ioc(ndflow_bin, tmp_path)
    yield ioc
    ioc.close()


def test_idle_is_silent_acquisitions_and_stop_say_one_line_each(ioc):
    ioc.wait_served()
    time.sleep(1.0)  # start-up messages are written by now
    before = ioc.lines()
    # Idle, with a client connected and reading: nothing at all (the bound is 3 lines a minute;
    # nothing the IOC writes is periodic below a minute, so a few seconds show it).
    for _ in range(6):
        time.sleep(1.0)
        ioc.ctx.get(P + "cam1:ArrayCounter_RBV")
    idle = ioc.lines()[len(before):]
    assert idle == [], f"an idle IOC wrote {idle}"

    # A short acquisition: a started line and an ended line, with its frames and rate.
    ioc.ctx.put(P + "cam1:Acquire", 1, wait=True, timeout=10)
    assert ioc.ctx.get(P + "cam1:ArrayCounter_RBV") == 5
    ioc.wait_line(r"^SIM1: acquisition started$")
    ended = ioc.wait_line(r"^SIM1: acquisition ended")
    m = re.fullmatch(r"SIM1: acquisition ended: 5 frames in ([\d.]+) s \(([\d.]+) frames/s\)", ended)
    assert m, ended
    secs, rate = float(m.group(1)), float(m.group(2))
    assert 0.05 < secs < 5.0 and rate == pytest.approx(5 / secs, rel=0.05)

    # JPG1's first drop, with its reason, once; the rest (if any came later) in one summary.
    ioc.wait_line(r"^JPG1: dropping frames: unsupported input")
    time.sleep(1.5)  # one tick of the run loop: later drops are summarised once idle
    during = ioc.lines()[len(before):]
    first = [l for l in during if l.startswith("JPG1: dropping frames")]
    assert len(first) == 1, during
    counted = int(re.search(r"unsupported input \((\d+)\)", first[0]).group(1))
    summaries = []
    for l in during:
        m = re.fullmatch(r"JPG1: (\d+) more frames dropped \(unsupported input (\d+)\)", l)
        if m:
            assert int(m.group(1)) > 0, l
            counted += int(m.group(1))
            summaries.append(l)
    assert counted == 5, during
    # Nothing else: no status line, no per-frame lines, STATS1 dropped nothing: started, ended,
    # the first drop's warning and line. Later drops come in summaries, one per tick of the run
    # loop that saw some; on a loaded machine the drops of these 5 frames can straddle ticks.
    others = [l for l in during if l not in summaries]
    assert len(others) <= 4, during
    assert len(summaries) <= 4, during
    assert not any("frames/s |" in l or "STATS1" in l for l in during), during

    # A clean stop writes the summary: uptime, frames per driver, drops per plugin.
    assert ioc.interrupt() == 0
    out = ioc.lines()
    tail = out[out.index(next(l for l in out if l.startswith("summary: up "))):]
    assert tail[0].startswith("summary: up ") and len(tail[0]) > len("summary: up "), tail
    assert "summary: SIM1: 5 frames, 1 acquisition" in tail
    assert "summary: JPG1: 5 frames dropped (unsupported input 5)" in tail
    assert not any("STATS1" in l for l in tail), tail


def test_log_level_pv_changes_the_filter_while_running(ioc):
    ioc.wait_served()
    ctx = ioc.ctx
    level = ctx.get(P + "NDFLOW:LogLevel_RBV")
    assert list(level.raw.value.choices) == ["error", "warn", "info", "debug", "trace"]
    assert level.raw.value.index == 1  # NDFLOW_LOG=warn

    # At warn, puts are not logged (the put log is at info).
    ctx.put(P + "cam1:AcquireTime", 0.002, wait=True)
    time.sleep(0.3)
    assert "cam1:AcquireTime" not in ioc.text()

    ctx.put(P + "NDFLOW:LogLevel", "debug", wait=True)
    assert ctx.get(P + "NDFLOW:LogLevel_RBV").raw.value.index == 3
    ioc.wait_line(r"INFO.*log level is now debug")
    ctx.put(P + "cam1:AcquireTime", 0.003, wait=True)
    # The put log (info level, target ndflow::put): protocol, user@host, PV, old -> new.
    ioc.wait_line(r"INFO ndflow::put: .* pva \S+@\S+ " + re.escape(P) + r"cam1:AcquireTime 0\.002 -> 0\.003$")

    # Not a level: refused, the filter and the readback unchanged.
    with pytest.raises(Exception):
        ctx.put(P + "NDFLOW:LogLevel", "loud", wait=True)
    assert ctx.get(P + "NDFLOW:LogLevel_RBV").raw.value.index == 3

    # Back to warn, over Channel Access this time: puts are no longer logged.
    out = ca_client(
        ioc,
        """
        assert epics.caput(P + "NDFLOW:LogLevel", "warn", wait=True, timeout=5) == 1
        out["rbv"] = epics.caget(P + "NDFLOW:LogLevel_RBV", as_string=True)
        out["rtyp"] = epics.caget(P + "NDFLOW:LogLevel.RTYP")
        """,
    )
    assert out == {"rbv": "warn", "rtyp": "mbbo"}
    assert ctx.get(P + "NDFLOW:LogLevel_RBV").raw.value.index == 1
    ctx.put(P + "cam1:AcquireTime", 0.004, wait=True)
    time.sleep(0.3)
    assert "-> 0.004" not in ioc.text()


def test_server_counters_are_pvs(ioc):
    """$(P)NDFLOW:Pva*/Ca* count connections, channels and bad input, refreshed each second."""
    ioc.wait_served()
    ctx = ioc.ctx
    # Garbage at the pvAccess port: a header with a bad magic byte closes that connection.
    import socket
    with socket.create_connection(("127.0.0.1", ioc.ioc.tcp_port), timeout=5) as s:
        s.sendall(bytes([0x00, 0x02, 0x00, 0x01, 0, 0, 0, 4, 1, 2, 3, 4]))
        s.settimeout(5)
        try:
            while s.recv(4096):
                pass
        except OSError:
            pass
    deadline = time.time() + 10
    while time.time() < deadline and ctx.get(P + "NDFLOW:PvaMalformed") < 1:
        time.sleep(0.2)
    assert ctx.get(P + "NDFLOW:PvaMalformed") >= 1
    assert ctx.get(P + "NDFLOW:PvaConnections") >= 1
    assert ctx.get(P + "NDFLOW:PvaChannels") >= 1
    # A Channel Access client sees itself counted.
    out = ca_client(
        ioc,
        """
        import time
        pv = epics.PV(P + "NDFLOW:CaConnections")
        pv.wait_for_connection(timeout=5)
        time.sleep(1.5)
        out["ca_connections"] = pv.get(use_monitor=False)
        out["ca_channels"] = epics.caget(P + "NDFLOW:CaChannels", use_monitor=False)
        out["partial"] = epics.caget(P + "NDFLOW:CaPartialTimeouts")
        out["over_cap"] = epics.caget(P + "NDFLOW:CaPartialOverCap")
        out["limit"] = epics.caget(P + "NDFLOW:CaLimitRefused")
        """,
    )
    assert out["ca_connections"] >= 1 and out["ca_channels"] >= 1, out
    assert out["partial"] == 0 and out["over_cap"] == 0 and out["limit"] == 0, out
    assert ctx.get(P + "NDFLOW:PvaLimitRefused") == 0


def test_health_pvs(ioc):
    """$(P)NDFLOW: Version, StartTime, Uptime, CpuPercent, ResidentMB, Threads, OpenFiles, the
    pools and the workers: what devIocStats gives an EPICS IOC, plausible under load, over
    pvAccess and Channel Access; and the driver's StatusMessage names ndflow before any run."""
    ioc.wait_served()
    ctx = ioc.ctx
    h = P + "NDFLOW:"
    text = lambda pv: str.__str__(ctx.get(pv))  # p4p's str of a string PV adds its time
    assert text(h + "Version") == text(P + "cam1:DriverVersion_RBV")
    assert text(P + "cam1:StatusMessage_RBV").startswith("ndflow ")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", text(h + "StartTime"))
    assert text(h + "ConfigFile").endswith("/ioc.toml")
    assert ctx.get(h + "ProcessId") == ioc.proc.pid
    assert ctx.get(h + "CpuCount") >= 1
    assert ctx.get(h + "WorkerThreads") >= 1
    # Load: frames as fast as the simulator makes them, for three seconds.
    ctx.put(P + "cam1:AcquirePeriod", 0.0, wait=True)
    ctx.put(P + "cam1:ImageMode", "Continuous", wait=True)
    ctx.put(P + "cam1:Acquire", 1)
    try:
        time.sleep(2.5)
        out = ca_client(
            ioc,
            """
            import time
            h = P + "NDFLOW:"
            out["cpu"] = epics.caget(h + "CpuPercent", use_monitor=False, timeout=5)
            out["rss"] = epics.caget(h + "ResidentMB", timeout=5)
            out["threads"] = epics.caget(h + "Threads", timeout=5)
            out["files"] = epics.caget(h + "OpenFiles", timeout=5)
            out["pool"] = epics.caget(h + "PoolUsedMB", timeout=5)
            out["up1"] = epics.caget(h + "Uptime", use_monitor=False, timeout=5)
            time.sleep(1.2)
            out["up2"] = epics.caget(h + "Uptime", use_monitor=False, timeout=5)
            """,
        )
    finally:
        ctx.put(P + "cam1:Acquire", 0, wait=True)
    assert out["cpu"] > 0 and out["rss"] > 1 and out["threads"] >= 3, out
    assert out["files"] >= 3 and out["pool"] > 0, out
    assert out["up2"] > out["up1"] >= 2, out


@pytest.mark.parametrize("status", [False, True])
def test_status_line_only_on_a_terminal_or_with_status(ndflow_bin, tmp_path, status):
    cfg = tmp_path / "ioc.toml"
    cfg.write_text(CONFIG)
    args = [str(ndflow_bin), "run", str(cfg), "--until-idle", "--no-pva", "--no-ca",
            "--set", "SIM1.Acquire=1"]
    p = subprocess.run(args + (["--status"] if status else []), env=process_env(NDFLOW_LOG="warn"),
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    lines = p.stderr.splitlines()
    status_lines = [l for l in lines if re.match(r"\[ *[\d.]+s\] SIM1 5 frames \|", l)]
    assert len(status_lines) == (1 if status else 0), lines
    # State changes and the summary either way.
    assert "SIM1: acquisition started" in lines
    assert any(l.startswith("SIM1: acquisition ended: 5 frames in ") for l in lines), lines
    assert "summary: SIM1: 5 frames, 1 acquisition" in lines
    assert "\x1b" not in p.stderr  # no terminal control codes in a file


def test_quiet_and_status_conflict(ndflow_bin, tmp_path):
    cfg = tmp_path / "ioc.toml"
    cfg.write_text(CONFIG)
    p = subprocess.run([str(ndflow_bin), "run", str(cfg), "--quiet", "--status"],
                       env=process_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 2 and "--status" in p.stderr


# pyepics runs in a subprocess: libca reads its environment once, when first loaded.
def ca_client(ioc, code):
    require("epics")
    return run_pyepics(ioc, code, P)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_systemd_stop_signals_stop_cleanly(ndflow_bin, tmp_path, sig):
    """SIGTERM (systemd's stop) and SIGHUP stop the IOC as Ctrl-C does: exit 0, summary."""
    cfg = tmp_path / "ioc.toml"
    cfg.write_text(CONFIG)
    log = tmp_path / "out.log"
    env = process_env(EPICS_PVA_SERVER_PORT=str(free_tcp_port()), EPICS_PVA_BROADCAST_PORT=str(free_udp_port()))
    with open(log, "w") as f:
        p = subprocess.Popen([str(ndflow_bin), "run", str(cfg), "--no-ca"], env=env,
                             stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 20
        # The banner comes after the signal handlers are installed.
        while "serving " not in log.read_text():
            assert time.time() < deadline and p.poll() is None, log.read_text()
            time.sleep(0.05)
        p.send_signal(sig)
        assert p.wait(timeout=20) == 0, log.read_text()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=5)
    text = log.read_text()
    assert "summary: up " in text, text
