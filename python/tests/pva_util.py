"""Helpers for the pvAccess interop tests: loopback-only environment, the `pva_serve` example
server, and the pixel pattern it publishes.

Everything here talks to 127.0.0.1 only (../shared/loopback.env plus per-test ports).
"""

import os
import pathlib
import socket
import subprocess

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
LOOPBACK_ENV = ROOT.parent / "shared" / "loopback.env"

# pva_serve's frame types (NTNDArray union members) and their numpy dtypes.
FRAME_TYPES = {
    "int8": np.int8,
    "uint8": np.uint8,
    "int16": np.int16,
    "uint16": np.uint16,
    "int32": np.int32,
    "uint32": np.uint32,
    "int64": np.int64,
    "uint64": np.uint64,
    "float32": np.float32,
    "float64": np.float64,
}


def loopback_env():
    """The variables of loopback.env (defaults if the file is missing), as a dict."""
    env = {
        "EPICS_PVA_AUTO_ADDR_LIST": "NO",
        "EPICS_PVA_ADDR_LIST": "127.0.0.1",
        "EPICS_PVA_INTF_ADDR_LIST": "127.0.0.1",
        "EPICS_PVAS_INTF_ADDR_LIST": "127.0.0.1",
        "EPICS_PVAS_AUTO_BEACON_ADDR_LIST": "NO",
        "EPICS_PVAS_BEACON_ADDR_LIST": "127.0.0.1",
        "PVXS_ENABLE_IPV6": "NO",
    }
    if LOOPBACK_ENV.exists():
        for line in LOOPBACK_ENV.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                k, v = line.split("=", 1)
                env[k.strip()] = v.strip()
    return env


def free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_tcp_udp_port():
    """A port number free for both TCP and UDP on 127.0.0.1 (Channel Access uses one for both)."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as t:
            t.bind(("127.0.0.1", 0))
            port = t.getsockname()[1]
            try:
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
                    u.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise RuntimeError("no port free for both TCP and UDP")


def ca_client_env(ca_port, repeater_port):
    """Environment for a Channel Access client (libca, caproto) talking to one server."""
    env = loopback_env()
    env.update(
        EPICS_CA_ADDR_LIST="127.0.0.1",
        EPICS_CA_AUTO_ADDR_LIST="NO",
        EPICS_CA_SERVER_PORT=str(ca_port),
        EPICS_CA_REPEATER_PORT=str(repeater_port),
    )
    return env


def target_dir():
    return pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))


def build_pva_serve():
    """The example server: PVA_SERVE_BIN if set, else built with cargo (release)."""
    if "PVA_SERVE_BIN" in os.environ:
        return pathlib.Path(os.environ["PVA_SERVE_BIN"])
    subprocess.run(
        ["cargo", "build", "--release", "-p", "ndflow-pva", "--example", "pva_serve"],
        cwd=ROOT,
        check=True,
    )
    return target_dir() / "release" / "examples" / "pva_serve"


class PvaServe:
    """A running pva_serve on ephemeral loopback ports; stops on stdin EOF."""

    def __init__(self, binary):
        env = dict(os.environ)
        env.update(loopback_env())
        env["EPICS_PVAS_SERVER_PORT"] = "0"
        env["EPICS_PVAS_BROADCAST_PORT"] = "0"
        self.proc = subprocess.Popen(
            [str(binary)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        first = self.proc.stdout.readline().split()
        if len(first) != 3 or first[0] != "PVA":
            self.stop()
            raise RuntimeError(f"pva_serve did not start: {first!r}")
        self.tcp = first[1].split("=", 1)[1]
        self.udp = first[2].split("=", 1)[1]
        assert self.tcp.startswith("127.0.0.1:") and self.udp.startswith("127.0.0.1:")

    def command(self, line):
        """Send a stdin command and return its one-line answer."""
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def client_conf(self):
        """p4p client configuration: search the server's UDP port; the client's own broadcast
        port is a different free one (both sides bind theirs)."""
        return {
            "EPICS_PVA_ADDR_LIST": self.udp,
            "EPICS_PVA_AUTO_ADDR_LIST": "NO",
            "EPICS_PVA_INTF_ADDR_LIST": "127.0.0.1",
            "EPICS_PVA_BROADCAST_PORT": str(free_udp_port()),
        }

    def client_env(self):
        """Process environment for a pvAccessCPP (pvapy) client of this server."""
        env = dict(os.environ)
        env.update(loopback_env())
        env.update(self.client_conf())
        return env

    def stop(self):
        """Close stdin (the server exits); kill our own process if it does not."""
        try:
            if self.proc.stdin and not self.proc.stdin.closed:
                self.proc.stdin.close()
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(timeout=5)


def pattern(type_name, n, uid):
    """The pixels pva_serve publishes: flat index k (x fastest), frame uniqueId uid."""
    dtype = FRAME_TYPES[type_name]
    k = np.arange(n, dtype=np.uint64)
    if np.issubdtype(dtype, np.floating):
        return (np.arange(n, dtype=np.float64) * 0.5 - uid).astype(dtype)
    # Integers wrap modulo 2^64 then truncate to the width (two's complement), as Rust's `as`.
    return (k * np.uint64(7) + np.uint64(13 * uid)).astype(dtype)


def free_tcp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NdflowIoc:
    """`ndflow run CONFIG` serving its PVs on free loopback ports, with p4p contexts that talk
    to it (`ctx` unwraps normative types, `raw` does not). Stop with `close()` (SIGTERM: the IOC
    stops acquisition, drains and exits)."""

    def __init__(self, ndflow_bin, tmp, config, extra_env=None, args=()):
        import time

        from p4p.client.thread import Context

        cfg = pathlib.Path(tmp) / "ioc.toml"
        cfg.write_text(config)
        tcp, udp = free_tcp_port(), free_udp_port()
        # Channel Access on its own free ports too (TCP and UDP share the number, as RSRV's).
        self.ca_port, self.ca_repeater = free_tcp_udp_port(), free_udp_port()
        env = dict(os.environ)
        env.update(loopback_env())
        env.update(
            EPICS_PVAS_SERVER_PORT=str(tcp),
            EPICS_PVA_SERVER_PORT=str(tcp),
            EPICS_PVAS_BROADCAST_PORT=str(udp),
            EPICS_PVA_BROADCAST_PORT=str(udp),
            EPICS_CA_SERVER_PORT=str(self.ca_port),
            EPICS_CAS_SERVER_PORT=str(self.ca_port),
            EPICS_CA_REPEATER_PORT=str(self.ca_repeater),
        )
        env.update(extra_env or {})
        self.log = open(pathlib.Path(tmp) / "ioc.log", "w+")
        self.proc = subprocess.Popen(
            [str(ndflow_bin), "run", str(cfg), "--quiet", *args], env=env, stdout=self.log, stderr=subprocess.STDOUT
        )
        self.tcp_port = tcp
        self.conf = {
            "EPICS_PVA_ADDR_LIST": "127.0.0.1",
            "EPICS_PVA_AUTO_ADDR_LIST": "NO",
            "EPICS_PVA_BROADCAST_PORT": str(udp),
            "EPICS_PVA_SERVER_PORT": str(tcp),
            "EPICS_PVA_INTF_ADDR_LIST": "127.0.0.1",
        }
        self.ctx = Context("pva", conf=self.conf, useenv=False)
        self.raw = Context("pva", conf=self.conf, useenv=False, nt=False)
        self._time = time

    def log_text(self):
        self.log.seek(0)
        return self.log.read()

    def wait_for(self, pv, pred, timeout=20.0):
        """Polls `pv` until `pred(value)`; fails with the IOC's log otherwise."""
        import pytest

        deadline = self._time.time() + timeout
        last = None
        while self._time.time() < deadline:
            if self.proc.poll() is not None:
                pytest.fail("IOC exited:\n" + self.log_text())
            try:
                last = self.ctx.get(pv, timeout=1.0)
                if pred(last):
                    return last
            except Exception as e:  # not served yet
                last = e
            self._time.sleep(0.05)
        pytest.fail(f"{pv} never satisfied the condition (last {last!r})\n" + self.log_text())

    def close(self):
        self.raw.close()
        self.ctx.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def enum_index(v):
    """Index of an NTEnum value as p4p returns it."""
    return v.raw.value.index
