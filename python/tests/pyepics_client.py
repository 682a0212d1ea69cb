"""pyepics against one IOC, in a subprocess of its own: libca reads its environment (here the
IOC's free loopback ports, netenv.py) once, when first loaded, so each IOC a test starts gets
a fresh client process. The code sees `P` (the prefix given), `epics`, `ca`, `np`, `time`
and fills the dict `out`, which comes back."""

import json
import os
import subprocess
import sys
import textwrap

from netenv import ca_client_env

CLIENT = r"""
import json, sys, time
import numpy as np
import epics
from epics import ca
P = sys.argv[1]
out = {}
exec(sys.stdin.read())
print("RESULT " + json.dumps(out))
"""


def run_pyepics(ioc, code, prefix="", timeout=60):
    """Runs `code` against `ioc` (anything with `ca_port`, `ca_repeater` and a `log_text()` or
    `text()` for the failure message); returns `out`."""
    env = dict(os.environ)
    env.update(ca_client_env(ioc.ca_port, ioc.ca_repeater))
    p = subprocess.run(
        [sys.executable, "-c", CLIENT, prefix],
        input=textwrap.dedent(code),
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    lines = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
    if p.returncode != 0 or not lines:
        log = getattr(ioc, "log_text", None) or getattr(ioc, "text")
        raise AssertionError(f"pyepics client failed:\n{p.stdout}\n{p.stderr}\n{log()}")
    return json.loads(lines[-1][len("RESULT "):])
