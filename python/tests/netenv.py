"""Loopback-only networking for the interop tests, in one place: the EPICS environment every
client and server here gets, and free ports on 127.0.0.1 for each test's own servers.

conftest.py applies LOOPBACK to the pytest process itself, so in-process clients stay on
127.0.0.1 too; subprocesses get it through `process_env` or the client helpers below.
"""

import os
import socket
from pathlib import Path


def _read_env_file(path):
    """KEY=VALUE lines of a shell env file (comments and blank lines skipped)."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out

# Everything stays on 127.0.0.1: no broadcast, no automatic address lists, beacons to loopback
# only, IPv4 only. Ports are per test, on top (free_* below), so that tests and any EPICS
# software already on the machine never answer each other.
LOOPBACK = _read_env_file(Path(__file__).resolve().parents[2] / "scripts" / "loopback.env")


def loopback_env():
    """The loopback variables, as a new dict."""
    return dict(LOOPBACK)


def process_env(**extra):
    """Environment for a subprocess: this process's, the loopback variables, then `extra`."""
    env = dict(os.environ)
    env.update(LOOPBACK)
    env.update(extra)
    return env


def free_tcp_port():
    """A TCP port free on 127.0.0.1 now (the kernel's pick, released for the server to take)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_udp_port():
    """A UDP port free on 127.0.0.1 now."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_tcp_udp_port():
    """A port number free for both TCP and UDP on 127.0.0.1 (Channel Access serves both on one
    number)."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as t:
            t.bind(("127.0.0.1", 0))
            port = t.getsockname()[1]
            try:
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
                    u.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no port free for both TCP and UDP on 127.0.0.1")


def ca_client_env(ca_port, repeater_port):
    """The variables a Channel Access client (libca, caproto) needs to reach one server on
    `ca_port`, with its own repeater port."""
    env = loopback_env()
    env.update(
        EPICS_CA_SERVER_PORT=str(ca_port),
        EPICS_CA_REPEATER_PORT=str(repeater_port),
    )
    return env


def pva_client_conf(tcp_port, udp_port):
    """A p4p/pvxs client configuration (`Context(conf=..., useenv=False)`) for one server on
    `tcp_port` that answers searches on `udp_port`."""
    return {
        "EPICS_PVA_ADDR_LIST": "127.0.0.1",
        "EPICS_PVA_AUTO_ADDR_LIST": "NO",
        "EPICS_PVA_INTF_ADDR_LIST": "127.0.0.1",
        "EPICS_PVA_BROADCAST_PORT": str(udp_port),
        "EPICS_PVA_SERVER_PORT": str(tcp_port),
    }


def pva_server_env(tcp_port, udp_port):
    """The variables that put a pvAccess server (ndflow's, pvxs's) on these ports."""
    return {
        "EPICS_PVAS_SERVER_PORT": str(tcp_port),
        "EPICS_PVA_SERVER_PORT": str(tcp_port),
        "EPICS_PVAS_BROADCAST_PORT": str(udp_port),
        "EPICS_PVA_BROADCAST_PORT": str(udp_port),
    }
