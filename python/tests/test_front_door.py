"""The front door, as a new user meets it: clients with their default settings find an IOC,
several IOCs share one host, and other hosts are served only when asked.

Default client settings search by broadcast, so every test here runs inside network namespaces
it creates and deletes: `lo`, plus a veth pair whose two ends are both inside the test's own
namespaces (one namespace: a "LAN" interface with a broadcast address and a default route; two
namespaces: a second host). Nothing is sent in the host's namespace.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from netns import Netns

import netenv

ROOT = Path(__file__).resolve().parents[2]
IOC_CONFIG = ROOT / "examples" / "pva_ioc.toml"
RBV = "cam1:AcquireTime_RBV"
SETPOINT = "cam1:AcquireTime"


def bare_env(**extra):
    """This process's environment without any EPICS or pvxs variable: default settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EPICS_", "PVXS_"))}
    env.update(extra)
    return env


def connect_hosts(a, b, addr_a="10.251.0.1/24", addr_b="10.251.0.2/24"):
    """A veth pair between two namespaces of this test: two hosts on one LAN."""
    a.ip("link", "add", "v0", "type", "veth", "peer", "name", "v1")
    a.ip("link", "set", "v1", "netns", b.name)
    for ns, dev, cidr in ((a, "v0", addr_a), (b, "v1", addr_b)):
        ns.ip("addr", "add", cidr, "brd", "+", "dev", dev)
        ns.ip("link", "set", dev, "up")
        ns.ip("route", "add", "default", "dev", dev)


class Ioc:
    """`ndflow run` in a namespace; `banner` is its "serving ..." line."""

    def __init__(self, ns, ndflow_bin, log, env, *args):
        self.log = log
        with open(log, "w") as f:
            self.proc = subprocess.Popen(
                ns.cmd([ndflow_bin, "run", IOC_CONFIG, "--no-state", *args]), env=env, stdout=f, stderr=subprocess.STDOUT
            )
        ns.procs.append(self.proc)
        deadline = time.time() + 20
        while time.time() < deadline:
            text = log.read_text()
            for line in text.splitlines():
                if line.startswith("serving "):
                    self.banner = line
                    return
            if self.proc.poll() is not None:
                pytest.fail(f"IOC exited with {self.proc.returncode}:\n{text}")
            time.sleep(0.05)
        pytest.fail(f"no start-up banner within 20 s:\n{log.read_text()}")

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        assert self.proc.wait(timeout=20) == 0, self.log.read_text()


# One client session per run: read the readback, put the setpoint, see the readback's monitor
# deliver the new value. Prints {"read": ..., "seen": [...]} as JSON.
CLIENT = textwrap.dedent(
    r"""
    import json, sys, time
    client, rbv, sp, value = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    seen = []
    def wait_seen():
        t = time.time() + 10
        while time.time() < t and not any(abs(v - value) < 1e-9 for v in seen):
            time.sleep(0.02)
    if client == "p4p":
        from p4p.client.thread import Context
        c = Context("pva")
        read = float(c.get(rbv, timeout=10))
        sub = c.monitor(rbv, lambda v: seen.append(float(v)))
        c.put(sp, value, timeout=10)
        wait_seen(); sub.close(); c.close()
    elif client == "pvapy":
        import pvaccess
        ch = pvaccess.Channel(rbv)
        read = float(ch.get()["value"])
        ch.subscribe("t", lambda pv: seen.append(float(pv["value"])))
        ch.startMonitor()
        pvaccess.Channel(sp).putDouble(value)
        wait_seen(); ch.stopMonitor()
    elif client == "pyepics":
        import epics
        read = epics.caget(rbv, timeout=10)
        if read is None:
            sys.exit("pyepics: no answer for " + rbv)
        pv = epics.PV(rbv, callback=lambda value=None, **kw: seen.append(float(value)))
        pv.wait_for_connection(timeout=10)
        if not epics.caput(sp, value, wait=True, timeout=10):
            sys.exit("pyepics: put failed")
        wait_seen(); pv.disconnect()
    elif client == "caproto":
        from caproto.threading.client import Context
        ctx = Context()
        r, s = ctx.get_pvs(rbv, sp, timeout=10)
        read = float(r.read(timeout=10).data[0])
        sub = r.subscribe()
        def on_update(sub, resp):
            seen.append(float(resp.data[0]))
        sub.add_callback(on_update)  # caproto holds callbacks weakly
        s.write([value], wait=True, timeout=10)
        wait_seen(); ctx.disconnect()
    print(json.dumps({"read": read, "seen": seen}))
    """
)


def run_client(ns, env, client, prefix, value, tmp_path):
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    r = ns.run([sys.executable, script, client, prefix + RBV, prefix + SETPOINT, value], env, timeout=60)
    assert r.returncode == 0, f"{client}: {r.stdout}\n{r.stderr}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def run_cli(ns, env, ndflow_bin, protocol, prefix, value):
    """`ndflow pv|ca get`, `put`, and `monitor --count 2` (the current value, then the put)."""
    rbv, sp = prefix + RBV, prefix + SETPOINT
    got = ns.run([ndflow_bin, protocol, "get", rbv], env)
    assert got.returncode == 0, got.stderr
    mon = subprocess.Popen(
        ns.cmd([ndflow_bin, protocol, "monitor", rbv, "--count", "2"]),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    ns.procs.append(mon)
    # The monitor prints the current value first: put only once it is connected.
    first = mon.stdout.readline()
    assert rbv in first, first + mon.stderr.read()
    put = ns.run([ndflow_bin, protocol, "put", sp, str(value)], env)
    assert put.returncode == 0, put.stderr
    out, err = mon.communicate(timeout=20)
    assert mon.returncode == 0, err
    return got.stdout, first + out


@pytest.fixture(scope="module")
def lan_ioc(ndflow_bin, tmp_path_factory):
    """One IOC with default settings on a host with a LAN interface."""
    with Netns() as ns:
        ns.lan()
        ioc = Ioc(ns, ndflow_bin, tmp_path_factory.mktemp("ioc") / "ioc.log", bare_env())
        yield ns, ioc
        ioc.stop()


def test_banner_says_whom_and_how_to_open(lan_ioc):
    _, ioc = lan_ioc
    b = ioc.banner
    assert b.startswith("serving this host only: "), b
    assert "pvAccess" in b and "tcp 127.0.0.1:5075 udp 5076" in b, b
    assert "Channel Access" in b and "tcp 127.0.0.1:5064 udp 5064" in b, b
    assert '--listen 0.0.0.0 or listen = "all"' in b, b


@pytest.mark.parametrize("client,value", [("p4p", 0.011), ("pvapy", 0.012), ("pyepics", 0.013), ("caproto", 0.014)])
def test_default_settings_client_reads_puts_monitors(lan_ioc, tmp_path, client, value):
    """No EPICS variable on either side: the client's automatic search list (the LAN's
    broadcast address) finds the IOC."""
    ns, _ = lan_ioc
    r = run_client(ns, bare_env(), client, "13SIM1:", value, tmp_path)
    assert isinstance(r["read"], float)
    assert any(abs(v - value) < 1e-9 for v in r["seen"]), r


@pytest.mark.parametrize("protocol,value", [("pv", 0.021), ("ca", 0.022)])
def test_default_settings_ndflow_clients(lan_ioc, ndflow_bin, protocol, value):
    ns, _ = lan_ioc
    got, mon = run_cli(ns, bare_env(), ndflow_bin, protocol, "13SIM1:", value)
    assert got.startswith("13SIM1:" + RBV + " "), got
    lines = mon.strip().splitlines()
    assert len(lines) == 2 and lines[1].split()[-1] == str(value), mon


def test_three_iocs_on_one_host(ndflow_bin, tmp_path):
    """Three IOCs asking for the standard ports (as IOCs do), clients with the loopback
    variables (a unicast search to 127.0.0.1, which the kernel gives to one socket only):
    every IOC starts and answers, and the others stay reachable when one stops."""
    env = netenv.process_env()
    env = {k: v for k, v in env.items() if not k.endswith(("_PORT",))}
    with Netns() as ns:
        iocs = {
            p: Ioc(ns, ndflow_bin, tmp_path / f"{p[0]}.log", env, "--prefix", p) for p in ("A:", "B:", "C:")
        }
        tcp = {p: i.banner.split("Channel Access")[1].split("tcp ")[1].split()[0] for p, i in iocs.items()}
        assert tcp["A:"] == "127.0.0.1:5064" and len(set(tcp.values())) == 3, tcp
        for p in ("B:", "C:"):
            # The banner says why the port differs.
            assert "(5075 taken) udp 5076" in iocs[p].banner and "(5064 taken) udp 5064" in iocs[p].banner, iocs[p].banner

        def reads(prefixes):
            for p in prefixes:
                r = run_client(ns, env, "p4p", p, 0.05 + len(p), tmp_path)
                assert r["read"] >= 0, (p, r)
                got = ns.run([ndflow_bin, "pv", "get", p + RBV], env)
                assert got.returncode == 0 and got.stdout.startswith(p + RBV), got.stderr
            # Channel Access (libca): a put reaches the IOC that serves the name, and only it.
            script = tmp_path / "ca.py"
            script.write_text(
                textwrap.dedent(
                    """
                    import sys, epics
                    ps = sys.argv[1:]
                    for i, p in enumerate(ps):
                        assert epics.caput(p + "cam1:AcquireTime", 0.2 + i, wait=True, timeout=10), p
                    print(" ".join(str(epics.caget(p + "cam1:AcquireTime_RBV", timeout=10)) for p in ps))
                    """
                )
            )
            r = ns.run([sys.executable, script, *prefixes], env)
            assert r.returncode == 0, r.stderr
            assert r.stdout.split() == [str(0.2 + i) for i in range(len(prefixes))], r.stdout

        reads(["A:", "B:", "C:"])
        iocs["B:"].stop()
        reads(["A:", "C:"])
        for p in ("A:", "C:"):
            iocs[p].stop()


def test_other_hosts_only_when_asked(ndflow_bin, tmp_path):
    """A client on another host (a second namespace on the same veth LAN, default settings)
    gets no answer from an IOC serving this host only, and reads — but may not write — once
    the IOC is started with --listen 0.0.0.0."""
    with Netns() as server, Netns() as far:
        connect_hosts(server, far)
        ioc = Ioc(server, ndflow_bin, tmp_path / "local.log", bare_env())
        r = far.run([ndflow_bin, "pv", "get", "13SIM1:" + RBV, "--timeout", "2"], bare_env())
        assert r.returncode != 0, r.stdout
        r = far.run([ndflow_bin, "ca", "get", "13SIM1:" + RBV, "--timeout", "2"], bare_env())
        assert r.returncode != 0, r.stdout
        ioc.stop()

        ioc = Ioc(server, ndflow_bin, tmp_path / "all.log", bare_env(), "--listen", "0.0.0.0")
        assert ioc.banner.startswith("serving all interfaces: "), ioc.banner
        script = tmp_path / "far.py"
        script.write_text(
            textwrap.dedent(
                """
                import json, epics
                from p4p.client.thread import Context
                rbv, sp = "13SIM1:cam1:AcquireTime_RBV", "13SIM1:cam1:AcquireTime"
                c = Context("pva")
                out = {"pva": float(c.get(rbv, timeout=10))}
                try:
                    c.put(sp, 0.5, timeout=10)
                    out["pva_put"] = "accepted"
                except Exception as e:
                    out["pva_put"] = str(e)
                out["ca"] = epics.caget(rbv, timeout=10)
                pv = epics.PV(sp)
                pv.wait_for_connection(timeout=10)
                out["ca_write_access"] = pv.write_access
                print(json.dumps(out))
                """
            )
        )
        r = far.run([sys.executable, script], bare_env(), timeout=60)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout.strip().splitlines()[-1])
        assert out["pva"] == out["ca"] == 0.01, out
        assert out["pva_put"] != "accepted", out
        assert out["ca_write_access"] is False, out
        ioc.stop()
