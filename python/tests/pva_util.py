"""Helpers for the pvAccess interop tests: the `pva_serve` example server, the pixel pattern it
publishes, and `NdflowIoc` (the binary as an IOC with p4p clients).

Everything here talks to 127.0.0.1 only (netenv.py: the loopback variables plus per-test ports).
"""

import pathlib
import subprocess

import numpy as np

from netenv import (
    free_tcp_port,
    free_tcp_udp_port,
    free_udp_port,
    process_env,
    pva_client_conf,
    pva_server_env,
)
from rust_examples import example_bin

ROOT = pathlib.Path(__file__).resolve().parents[2]

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


def build_pva_serve():
    """The example server (see rust_examples)."""
    return example_bin("pva_serve")


class PvaServe:
    """A running pva_serve on ephemeral loopback ports; stops on stdin EOF."""

    def __init__(self, binary):
        env = process_env(EPICS_PVAS_SERVER_PORT="0", EPICS_PVAS_BROADCAST_PORT="0")
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
        return process_env(**self.client_conf())

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


class NdflowIoc:
    """`ndflow run CONFIG` serving its PVs on free loopback ports, with p4p contexts that talk
    to it (`ctx` unwraps normative types, `raw` does not). Stop with `close()` (SIGTERM: the IOC
    stops acquisition, drains and exits). `quiet=False` leaves out `--quiet`; the output goes to
    `ioc.log` in `tmp` either way (not a terminal)."""

    def __init__(self, ndflow_bin, tmp, config, extra_env=None, args=(), quiet=True):
        import time

        from p4p.client.thread import Context

        cfg = pathlib.Path(tmp) / "ioc.toml"
        cfg.write_text(config)
        tcp, udp = free_tcp_port(), free_udp_port()
        # Channel Access on its own free ports too (TCP and UDP share the number, as RSRV's).
        self.ca_port, self.ca_repeater = free_tcp_udp_port(), free_udp_port()
        ports = pva_server_env(tcp, udp)
        ports.update(
            EPICS_CA_SERVER_PORT=str(self.ca_port),
            EPICS_CAS_SERVER_PORT=str(self.ca_port),
            EPICS_CA_REPEATER_PORT=str(self.ca_repeater),
        )
        ports.update(extra_env or {})
        env = process_env(**ports)
        self.log_path = pathlib.Path(tmp) / "ioc.log"
        self.log = open(self.log_path, "w+")
        self.proc = subprocess.Popen(
            [str(ndflow_bin), "run", str(cfg), *(["--quiet"] if quiet else []), *args],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.tcp_port = tcp
        self.conf = pva_client_conf(tcp, udp)
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
