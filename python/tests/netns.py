"""A network namespace of one test: created with only `lo` up, deleted on exit together with
every process the test started in it (killed by PID). Needs root and `ip`; a test that cannot
create one is skipped with the reason."""

import json
import os
import subprocess
import sys

import pytest


class Netns:
    serial = 0

    def __init__(self, env=None):
        Netns.serial += 1
        self.name = f"ndfl{os.getpid() % 100000}x{Netns.serial}"
        self.procs = []
        # The environment of what `start` and `python` run (default: this process's).
        self.env = env

    def __enter__(self):
        r = subprocess.run(["ip", "netns", "add", self.name], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"network namespaces are not permitted here: ip netns add: {r.stderr.strip()}")
        self.ip("link", "set", "lo", "up")
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)

    def ip(self, *args):
        subprocess.run(["ip", "-n", self.name, *args], check=True, capture_output=True)

    def cmd(self, args):
        return ["ip", "netns", "exec", self.name, *[str(a) for a in args]]

    def run(self, args, env, timeout=30):
        return subprocess.run(self.cmd(args), env=env, capture_output=True, text=True, timeout=timeout)

    def start(self, args, log):
        """A process in the namespace, its output to `log`; killed on exit."""
        f = open(log, "w")
        p = subprocess.Popen(self.cmd(args), stdout=f, stderr=subprocess.STDOUT, env=self.env)
        self.procs.append(p)
        return p

    def stop(self, p):
        p.kill()
        p.wait(timeout=10)

    def python(self, script, *args, timeout=120):
        """Runs `script` with this Python in the namespace; returns the JSON of its last line."""
        r = subprocess.run(self.cmd([sys.executable, "-c", script, *args]), capture_output=True,
                           text=True, timeout=timeout, env=self.env)
        assert r.returncode == 0, f"client failed:\n{r.stdout}\n{r.stderr}"
        return json.loads(r.stdout.strip().splitlines()[-1])

    def lan(self, cidr="10.251.0.1/24"):
        """A LAN interface (veth, both ends here) with a broadcast address and the default
        route, as a host on a network has: clients' automatic lists broadcast on it."""
        self.ip("link", "add", "v0", "type", "veth", "peer", "name", "v1")
        self.ip("addr", "add", cidr, "brd", "+", "dev", "v0")
        self.ip("link", "set", "v0", "up")
        self.ip("link", "set", "v1", "up")
        self.ip("route", "add", "default", "dev", "v0")
