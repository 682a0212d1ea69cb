"""Test peers for the EIGER driver (port type `eiger`): a tickit-devices EIGER simulator, decode
oracles for both stream versions, and golden-series generators. Everything is on 127.0.0.1.

The simulator
-------------
tickit-devices 0.4.1 serves SIMPLON REST, stream v1 ("legacy") and stream v2 ("cbor"). Its v2
needs `cbor2<6`, which this venv cannot have (the DECTRIS decoders want cbor2 >= 6), so it runs in
a virtualenv of its own, built once per pytest session under the session's temporary directory
(`tickit_python` fixture; pip's cache makes a rebuild cheap). Set NDFLOW_TICKIT_VENV to a venv
path to keep it between runs: an existing venv there is used as it is (after checking that it
imports tickit_devices), a missing one is built there once.

    TickitEiger(python, workdir)          one simulator on free loopback ports (context manager)
    healthy_start(python, workdir, ...)   a simulator that passed a short-series self-check
    tickit_python / tickit_eiger          the pytest fixtures

tickit quirks the helpers absorb:
  * in about a third of its starts its PUSH sockets also connect to themselves and lose every
    other message for the life of the process: `healthy_start` drives one 4-image series, counts
    the images on a PULL and restarts on new ports if any is missing;
  * the v1 header and the first image (v2: start and first image) can arrive as ONE ZeroMQ
    message: `split_v1` / `split_v2` walk the parts instead of taking a message as an event;
  * it sends the end-of-series message twice (acquisition end and disarm);
  * its default trigger mode `exts` ignores software triggers: `acquire` sets `ints`;
  * the trigger call returns only once every image is out.

PUSH sockets round-robin over connected PULL peers, so only ONE PULL client may be connected
while a test runs. The self-check's PULL is closed (after the second end message has arrived)
before `healthy_start` returns; tests must close their own pullers before the driver connects.

Oracles
-------
`decode_v1_image(parts)` (bitshuffle / lz4.block) and `decode_v2(message)` (cbor2 +
dectris-compression), returning numpy arrays and the raw compressed payload bytes.

Golden series
-------------
`make_v2_series(...)` and `make_v1_series(...)` build messages with the real structure from pixel
data chosen here (the DECTRIS test data cannot be shipped), plus the arrays they must decode to.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import importlib
import json
import os
import re
import signal
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np

from netenv import free_tcp_port, process_env

HOST = "127.0.0.1"
API = "1.8.0"
# DECTRIS' reference decoder of the v2 payloads (see dectris_decompress).
DECTRIS_REQUIREMENT = "dectris-compression==0.4.0"
TICKIT_REQUIREMENTS = ["tickit-devices==0.4.1", "cbor2<6"]
TICKIT_VENV_ENV = "NDFLOW_TICKIT_VENV"

# The frame tickit replays (an EIGER2 Si 16M capture): numpy shape (height, width).
TICKIT_FRAME_SHAPE = (4362, 4148)
TICKIT_FRAME_DTYPE = np.uint16

DTYPES = {"uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32}
# RFC 8746 little-endian typed-array tags (uint8 has one tag for both orders).
TYPED_ARRAY_TAG = {"uint8": 64, "uint16": 69, "uint32": 70}
TYPED_ARRAY_DTYPE = {
    64: "u1", 65: ">u2", 66: ">u4", 67: ">u8", 68: "u1", 69: "<u2", 70: "<u4", 71: "<u8",
    72: "i1", 73: ">i2", 74: ">i4", 75: ">i8", 77: "<i2", 78: "<i4", 79: "<i8",
    80: ">f2", 81: ">f4", 82: ">f8", 84: "<f2", 85: "<f4", 86: "<f8",
}
# The detector's compression block size, in bytes (bitshuffle: divided by the element size).
BLOCK_BYTES = 8192
TIME_BASE = 50_000_000  # v2 Rational denominators: a 50 MHz clock


class TickitUnavailable(RuntimeError):
    """The tickit virtualenv could not be built (e.g. no package index). str() is pip's last
    error line."""


# ---------------------------------------------------------------------------------------------
# The tickit virtualenv
# ---------------------------------------------------------------------------------------------


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _tickit_importable(python: Path) -> bool:
    r = subprocess.run(
        [str(python), "-c", "import tickit_devices.eiger, zmq; from importlib.metadata import "
         "version; assert int(version('cbor2').split('.')[0]) < 6"],
        capture_output=True,
    )
    return r.returncode == 0


def build_tickit_venv(venv: Path, log=None) -> tuple[Path, float]:
    """Create `venv` (python -m venv, this interpreter) and pip install tickit-devices 0.4.1 with
    cbor2<6 into it, using pip's cache. Returns (its python, seconds taken). An existing venv
    that already imports tickit_devices is used as it is (0 s). Raises TickitUnavailable with
    the last line pip printed when the install fails."""
    venv = Path(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    # One builder at a time: scripts/test.sh starts one in the background while the tests run,
    # and the fixture then waits here for it instead of building a second.
    with open(venv.with_name(venv.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build_tickit_venv_locked(venv, log)


def _build_tickit_venv_locked(venv: Path, log) -> tuple[Path, float]:
    python = _venv_python(venv)
    if python.exists() and _tickit_importable(python):
        return python, 0.0
    t0 = time.monotonic()
    if not python.exists():
        r = subprocess.run([sys.executable, "-m", "venv", str(venv)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise TickitUnavailable(_last_line(r.stderr or r.stdout) or "python -m venv failed")
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    r = subprocess.run(
        # --no-compile: no .pyc ahead of time (a third of pip's CPU time here).
        [str(python), "-m", "pip", "install", "--quiet", "--no-compile", *TICKIT_REQUIREMENTS],
        capture_output=True, text=True, env=env,
    )
    if log is not None:
        Path(log).write_text(r.stdout + r.stderr)
    if r.returncode != 0:
        raise TickitUnavailable(_last_line(r.stderr or r.stdout) or f"pip exited {r.returncode}")
    if not _tickit_importable(python):
        raise TickitUnavailable(f"{venv}: tickit_devices still not importable after pip install")
    return python, time.monotonic() - t0


def _last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def tickit_venv_python(tmp_root: Path) -> tuple[Path, float]:
    """The tickit venv's python: NDFLOW_TICKIT_VENV if set (built there if missing), else a venv
    built under `tmp_root`. Returns (python, install seconds; 0 when reused)."""
    named = os.environ.get(TICKIT_VENV_ENV)
    venv = Path(named) if named else Path(tmp_root) / "tickit-venv"
    return build_tickit_venv(venv, log=Path(tmp_root) / "tickit-venv-pip.log")


# ---------------------------------------------------------------------------------------------
# SIMPLON REST (urllib, loopback)
# ---------------------------------------------------------------------------------------------


def rest_request(host_arg: str, method: str, path: str, value=None, has_body=False,
                 timeout=10.0):
    """One SIMPLON request to http://HOST_ARG/PATH; returns the decoded JSON (None if empty).
    `value` is sent as {"value": value} when `has_body` (or value is not None)."""
    _check_loopback_host(host_arg)
    data = None
    headers = {}
    if has_body or value is not None:
        data = json.dumps({"value": value}).encode()
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(f"http://{host_arg}/{path}", data=data, method=method,
                                 headers=headers)
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        body = resp.read()
    if not body.strip():
        return None
    return json.loads(body)


def put_config(host_arg, sub, key, value, timeout=10.0):
    """PUT {sub}/api/1.8.0/config/{key} {"value": value}; `sub` is detector|stream|monitor|
    filewriter. Returns the JSON answer (the list of changed parameters)."""
    return rest_request(host_arg, "PUT", f"{sub}/api/{API}/config/{key}", value, True, timeout)


def command(host_arg, sub, cmd, timeout=30.0):
    """PUT {sub}/api/1.8.0/command/{cmd} with no body; returns the JSON answer
    (e.g. {"sequence id": 2})."""
    return rest_request(host_arg, "PUT", f"{sub}/api/{API}/command/{cmd}", timeout=timeout)


def get(host_arg, sub, section, key, timeout=10.0):
    """GET {sub}/api/1.8.0/{section}/{key} (section: config|status); returns the JSON answer,
    typically {"value": ..., "value_type": ..., ...}."""
    return rest_request(host_arg, "GET", f"{sub}/api/{API}/{section}/{key}", timeout=timeout)


def _check_loopback_host(host_arg):
    if not host_arg.startswith(HOST + ":"):
        raise ValueError(f"{host_arg!r}: the EIGER test peers talk to {HOST} only")


# ---------------------------------------------------------------------------------------------
# The simulator process
# ---------------------------------------------------------------------------------------------

TICKIT_YAML = """\
- type: tickit_devices.eiger.Eiger
  name: eiger
  inputs: {{}}
  host: {host}
  port: {rest}
  stream_host: {host}
  stream_legacy_port: {v1}
  stream_cbor_port: {v2}
"""


# Launches tickit with its PUSH sockets bound only: tickit's ZeroMqPushIo binds AND connects the
# same address; when the failed PUSH->PUSH self-connection leaves its pipe behind, round-robin
# feeds every other message into it. Dropping the connect removes exactly that defect.
TICKIT_NO_SELF_CONNECT = """\
import runpy, sys
import aiozmq
_create = aiozmq.create_zmq_stream
async def _bind_only(zmq_type, *, bind=None, connect=None, **kw):
    if connect is not None and connect == bind:
        connect = None
    return await _create(zmq_type, bind=bind, connect=connect, **kw)
aiozmq.create_zmq_stream = _bind_only
sys.argv[0] = "tickit"
runpy.run_module("tickit", run_name="__main__", alter_sys=True)
"""


class TickitEiger:
    """One tickit-devices EIGER on 127.0.0.1: REST on .rest_port, stream v1 on .v1_port, v2 on
    .v2_port (free ports unless given). Use as a context manager, or .start() / .stop().

    fix_self_connect=False runs stock `python -m tickit` (whose streams lose every other message
    in some starts); True starts it through a launcher that drops the PUSH socket's connect to its
    own address, leaving every protocol behaviour as it is. Nothing is self-checked here: see
    `healthy_start`."""

    def __init__(self, python, workdir, rest_port=None, v1_port=None, v2_port=None,
                 start_timeout=30.0, fix_self_connect=False):
        self.python = Path(python)
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.rest_port = rest_port or free_tcp_port()
        self.v1_port = v1_port or free_tcp_port()
        self.v2_port = v2_port or free_tcp_port()
        self.start_timeout = start_timeout
        self.fix_self_connect = fix_self_connect
        self.proc = None
        self.yaml_path = self.workdir / f"eiger-{self.rest_port}.yaml"
        self.log_path = self.workdir / f"tickit-{self.rest_port}.log"
        self._log = None

    # -- addresses
    def host_arg(self):
        """"127.0.0.1:REST_PORT", the driver's host argument."""
        return f"{HOST}:{self.rest_port}"

    @property
    def v1_endpoint(self):
        return f"tcp://{HOST}:{self.v1_port}"

    @property
    def v2_endpoint(self):
        return f"tcp://{HOST}:{self.v2_port}"

    def endpoint(self, stream):
        """The ZeroMQ endpoint of stream "v1" or "v2"."""
        return {"v1": self.v1_endpoint, "v2": self.v2_endpoint}[stream]

    # -- process
    def start(self):
        self.yaml_path.write_text(TICKIT_YAML.format(host=HOST, rest=self.rest_port,
                                                     v1=self.v1_port, v2=self.v2_port))
        self._log = open(self.log_path, "wb")
        if self.fix_self_connect:
            launcher = self.workdir / "tickit_no_self_connect.py"
            launcher.write_text(TICKIT_NO_SELF_CONNECT)
            head = [str(self.python), str(launcher)]
        else:
            head = [str(self.python), "-m", "tickit"]
        self.proc = subprocess.Popen(
            [*head, "--log-level", "WARNING", "all", str(self.yaml_path)],
            cwd=self.workdir, stdin=subprocess.DEVNULL, stdout=self._log,
            stderr=subprocess.STDOUT, env=process_env(PYTHONUNBUFFERED="1"),
        )
        deadline = time.monotonic() + self.start_timeout
        while True:
            if self.proc.poll() is not None:
                self.stop()
                raise RuntimeError(f"tickit exited with {self.proc.returncode} at start:\n"
                                   + self.log_tail())
            try:
                self.get("detector", "status", "state", timeout=1.0)
                return self
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"tickit REST not up on {self.host_arg()} after "
                                   f"{self.start_timeout} s:\n" + self.log_tail())
            time.sleep(0.1)

    def stop(self, timeout=5.0):
        """SIGTERM by PID, then SIGKILL after `timeout` s. Idempotent."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        if self._log is not None:
            self._log.close()
            self._log = None

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, n=40):
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    def __enter__(self):
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    # -- REST
    def put_config(self, sub, key, value, timeout=10.0):
        return put_config(self.host_arg(), sub, key, value, timeout)

    def command(self, sub, cmd, timeout=30.0):
        return command(self.host_arg(), sub, cmd, timeout)

    def get(self, sub, section, key, timeout=10.0):
        return get(self.host_arg(), sub, section, key, timeout)

    def configure(self, stream, nimages, frame_time=0.02, count_time=None, header_detail=None):
        """Stream enabled in format legacy (v1) or cbor (v2), nimages, ntrigger 1, trigger mode
        ints (software trigger), frame/count time."""
        self.put_config("stream", "mode", "enabled")
        self.put_config("stream", "format", {"v1": "legacy", "v2": "cbor"}[stream])
        if header_detail is not None:
            self.put_config("stream", "header_detail", header_detail)
        self.put_config("detector", "trigger_mode", "ints")
        self.put_config("detector", "ntrigger", 1)
        self.put_config("detector", "nimages", nimages)
        self.put_config("detector", "count_time",
                        frame_time if count_time is None else count_time)
        self.put_config("detector", "frame_time", frame_time)

    def acquire(self, stream, nimages, frame_time=0.02, timeout=60.0):
        """configure(), then arm, trigger (returns when all images are out), disarm."""
        self.configure(stream, nimages, frame_time)
        self.command("detector", "arm")
        self.command("detector", "trigger", timeout=timeout)
        self.command("detector", "disarm")


# ---------------------------------------------------------------------------------------------
# Receiving: one PULL client, logical messages out of ZeroMQ messages
# ---------------------------------------------------------------------------------------------

V1_HEADER_PARTS = {"none": 1, "basic": 2, "all": 8}
V1_START_HTYPES = ("dheader-1.0", "dimage-1.0", "dseries_end-1.0")


def _json_part(part):
    try:
        obj = json.loads(bytes(part))
    except (ValueError, UnicodeDecodeError):
        return None
    return obj if isinstance(obj, dict) else None


def split_v1(parts):
    """The logical v1 messages (lists of parts) in one received multipart message: tickit can
    put a header and the first image into one ZeroMQ message. Handles header_detail none/basic/
    all and optional appendix parts. Raises ValueError on a part that starts no message."""
    parts = [bytes(p) for p in parts]
    out = []
    i = 0
    while i < len(parts):
        head = _json_part(parts[i])
        htype = head.get("htype") if head else None
        if htype == "dheader-1.0":
            n = V1_HEADER_PARTS.get(head.get("header_detail", "basic"), 2)
        elif htype == "dimage-1.0":
            n = 4
        elif htype == "dseries_end-1.0":
            n = 1
        else:
            raise ValueError(f"v1 part {i} starts no message: {parts[i][:80]!r}")
        msg = parts[i:i + n]
        i += n
        # An appendix part follows a header or image when configured: anything that does not
        # start a message.
        if htype != "dseries_end-1.0" and i < len(parts):
            nxt = _json_part(parts[i])
            if not (nxt and nxt.get("htype") in V1_START_HTYPES):
                msg.append(parts[i])
                i += 1
        out.append(msg)
    return out


def v1_htype(msg):
    return json.loads(msg[0])["htype"]


def split_v2(parts):
    """The logical v2 messages in one received ZeroMQ message (one per part)."""
    return [bytes(p) for p in parts]


def v2_type(message):
    """A v2 message's "type" without decoding its image data."""
    import cbor2

    return cbor2.loads(message, tag_hook=lambda dec, tag: None)["type"]


class Puller:
    """One pyzmq PULL client connected to a stream endpoint (loopback only). Close it (or leave
    the with block) before anything else connects: PUSH round-robins over its peers."""

    def __init__(self, endpoint, rcvhwm=0):
        import zmq

        if not endpoint.startswith(f"tcp://{HOST}:"):
            raise ValueError(f"{endpoint}: loopback only")
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.PULL)
        self.sock.setsockopt(zmq.RCVHWM, rcvhwm)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(endpoint)

    def recv(self, timeout=5.0):
        """One ZeroMQ multipart message (list of bytes), or None after `timeout` s."""
        if self.sock.poll(int(timeout * 1000)):
            return self.sock.recv_multipart()
        return None

    def collect(self, stream, until_ends=1, timeout=10.0, quiet=None):
        """Logical messages (v1: lists of parts; v2: bytes) until `until_ends` end-of-series
        messages have arrived, or `timeout` s have passed, or (if given) `quiet` s pass with
        nothing new. Returns the list (possibly short)."""
        out = []
        ends = 0
        deadline = time.monotonic() + timeout
        while ends < until_ends:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            zmsg = self.recv(min(left, quiet) if quiet else left)
            if zmsg is None:
                break
            logical = split_v1(zmsg) if stream == "v1" else split_v2(zmsg)
            for m in logical:
                out.append(m)
                kind = v1_htype(m) if stream == "v1" else v2_type(m)
                if kind in ("dseries_end-1.0", "end"):
                    ends += 1
        return out

    def close(self):
        self.sock.close(0)
        self.ctx.term()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def count_images(stream, messages):
    """How many image messages are in a list of logical messages."""
    kind = v1_htype if stream == "v1" else v2_type
    want = "dimage-1.0" if stream == "v1" else "image"
    return sum(1 for m in messages if kind(m) == want)


def self_check(eiger, stream, nimages=4, frame_time=0.02, timeout=15.0):
    """Drive one series of `nimages` with a PULL on `stream` and return how many images arrived.
    Waits for both end messages (tickit sends two) so none is left queued for the next client;
    the PULL is closed before this returns."""
    with Puller(eiger.endpoint(stream)) as pull:
        time.sleep(0.1)  # let the connection settle before arm
        eiger.acquire(stream, nimages, frame_time)
        # acquire() returns once everything is sent: a short quiet time ends a lossy series.
        msgs = pull.collect(stream, until_ends=2, timeout=timeout, quiet=1.0)
    return count_images(stream, msgs)


def healthy_start(python, workdir, streams=("v2",), tries=8, nimages=4, log=None,
                  fix_self_connect=True):
    """A started TickitEiger whose PUSH sockets passed the self-check on every stream version in
    `streams` ("v1", "v2"): a 4-image series must arrive whole, else the simulator is stopped and
    started again on new ports (tickit's self-connection bug), up to `tries` times. No PULL
    client is connected when it returns; the series left the simulator armed-then-disarmed
    with nimages 4 (reconfigure what you need). .attempts says how many starts it took.
    fix_self_connect: see TickitEiger (with False, stock tickit loses on v1 in 20-80 % of
    starts here, depending on load). Raises RuntimeError if no start was healthy."""
    if isinstance(streams, str):
        streams = (streams,)
    failures = []
    for attempt in range(tries):
        eiger = TickitEiger(python, Path(workdir) / f"try{attempt}",
                            fix_self_connect=fix_self_connect)
        try:
            eiger.start()
            got = {s: self_check(eiger, s, nimages) for s in streams}
        except Exception as e:  # a start that failed counts as a try
            eiger.stop()
            failures.append(f"try {attempt}: {type(e).__name__}: {e}")
            continue
        if all(n == nimages for n in got.values()):
            eiger.attempts = attempt + 1
            return eiger
        eiger.stop()
        failures.append(f"try {attempt}: images received {got} of {nimages} each")
        if log:
            log(failures[-1])
    raise RuntimeError("no healthy tickit start:\n" + "\n".join(failures))


# ---------------------------------------------------------------------------------------------
# Oracles
# ---------------------------------------------------------------------------------------------

V1_ENCODING = re.compile(r"^(?:bs(?P<bits>8|16|32|64))?(?P<lz4>-?lz4)?(?P<order>[<>])$")


@dataclasses.dataclass
class V1Image:
    series: int
    frame: int
    shape: tuple          # numpy order (height, width)
    dtype: np.dtype
    encoding: str
    array: np.ndarray     # decoded frame, native byte order
    payload: bytes        # the data part exactly as sent
    config: dict          # the dconfig part (start_time, stop_time, real_time)
    appendix: bytes | None


def decode_v1_data(blob, shape_xy, type_name, encoding):
    """Decode a v1 data blob (`shape_xy` as in the header: [width, height(, ...)]) with the
    reference libraries; returns an array of numpy shape reversed(shape_xy)."""
    import bitshuffle
    import lz4.block

    m = V1_ENCODING.match(encoding)
    if not m:
        raise ValueError(f"unknown v1 encoding {encoding!r}")
    dtype = np.dtype(type_name).newbyteorder(m["order"])
    shape = tuple(reversed(shape_xy))
    nbytes = int(np.prod(shape)) * dtype.itemsize
    blob = bytes(blob)
    if m["bits"]:
        if not m["lz4"]:
            raise ValueError(f"bitshuffle without lz4 ({encoding!r}) is not supported")
        if int(m["bits"]) != dtype.itemsize * 8:
            raise ValueError(f"{encoding!r} does not match type {type_name}")
        total, block_bytes = struct.unpack(">QI", blob[:12])
        if total != nbytes:
            raise ValueError(f"bslz4 header says {total} bytes, shape/type give {nbytes}")
        arr = bitshuffle.decompress_lz4(np.frombuffer(blob[12:], np.uint8), shape, dtype,
                                        block_bytes // dtype.itemsize)
    elif m["lz4"]:
        raw = lz4.block.decompress(blob, uncompressed_size=nbytes)
        arr = np.frombuffer(raw, dtype).reshape(shape)
    else:
        if len(blob) != nbytes:
            raise ValueError(f"raw blob of {len(blob)} bytes, shape/type give {nbytes}")
        arr = np.frombuffer(blob, dtype).reshape(shape)
    return np.ascontiguousarray(arr.astype(dtype.newbyteorder("="), copy=False))


def decode_v1_image(parts):
    """Decode one logical v1 image message (4 or 5 parts) to a V1Image."""
    parts = [bytes(p) for p in parts]
    head, dhead = json.loads(parts[0]), json.loads(parts[1])
    if head.get("htype") != "dimage-1.0" or dhead.get("htype") != "dimage_d-1.0":
        raise ValueError(f"not a v1 image message: {parts[0][:80]!r}")
    if "size" in dhead and dhead["size"] != len(parts[2]):
        raise ValueError(f"size {dhead['size']} but the blob has {len(parts[2])} bytes")
    arr = decode_v1_data(parts[2], dhead["shape"], dhead["type"], dhead["encoding"])
    return V1Image(
        series=head.get("series"), frame=head.get("frame"), shape=arr.shape, dtype=arr.dtype,
        encoding=dhead["encoding"], array=arr, payload=parts[2],
        config=json.loads(parts[3]) if len(parts) > 3 else {},
        appendix=parts[4] if len(parts) > 4 else None,
    )


@dataclasses.dataclass
class V2Message:
    type: str
    fields: dict          # every field; image data as the decoded CBOR (cbor2.CBORTag) items
    arrays: dict          # image: channel -> decoded ndarray (numpy order [height, width])
    payloads: dict        # image: channel -> (algorithm, modifier, compressed bytes) or
                          # (None, None, raw bytes) when sent uncompressed


def dectris_decompress():
    """`dectris.compression.decompress`, DECTRIS' own decoder of the v2 stream's payloads (the
    reference our decoding is checked against). No wheel of it exists: pip builds it from
    source, about four minutes of one core, so it is not in requirements-test.txt.
    scripts/test.sh installs it into this venv in the background while the first tests run
    (`python eiger_peer.py install-dectris`); here we wait for that install, or make it when
    nobody has (a test run by hand). One installer at a time: a lock file in the venv."""
    try:
        from dectris.compression import decompress
        return decompress
    except ImportError:
        pass
    with open(Path(sys.prefix) / "dectris-install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        importlib.invalidate_caches()
        try:
            from dectris.compression import decompress
            return decompress
        except ImportError:
            pass
        env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
        r = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile",
             DECTRIS_REQUIREMENT],
            capture_output=True, text=True, env=env,
        )
        if r.returncode != 0:
            raise RuntimeError(f"pip install {DECTRIS_REQUIREMENT} failed: "
                               f"{_last_line(r.stderr or r.stdout)}")
    importlib.invalidate_caches()
    from dectris.compression import decompress
    return decompress


def _decode_mda(item):
    """tag 40 [dims, typed array] -> (ndarray, payload triple)."""
    import cbor2

    decompress = dectris_decompress()

    if not (isinstance(item, cbor2.CBORTag) and item.tag in (40, 1040)):
        raise ValueError(f"image data is not a MultiDimArray: {item!r:.80}")
    dims, typed = item.value
    if not (isinstance(typed, cbor2.CBORTag) and typed.tag in TYPED_ARRAY_DTYPE):
        raise ValueError(f"MultiDimArray content is not a typed array: {typed!r:.80}")
    dtype = np.dtype(TYPED_ARRAY_DTYPE[typed.tag])
    inner = typed.value
    if isinstance(inner, cbor2.CBORTag) and inner.tag == 56500:
        algo, modifier, blob = inner.value
        raw = decompress(bytes(blob), algo, elem_size=modifier or dtype.itemsize)
        payload = (algo, modifier, bytes(blob))
    else:
        raw = bytes(inner)
        payload = (None, None, raw)
    arr = np.frombuffer(raw, dtype)
    shape = tuple(dims) if item.tag == 40 else tuple(reversed(dims))
    arr = arr.reshape(shape) if item.tag == 40 else arr.reshape(shape).T
    return np.ascontiguousarray(arr.astype(dtype.newbyteorder("="), copy=False)), payload


def decode_v2(message):
    """Decode one v2 CBOR message with cbor2 + dectris-compression to a V2Message."""
    import cbor2

    fields = dict(cbor2.loads(bytes(message)))
    arrays, payloads = {}, {}
    if fields.get("type") == "image":
        for channel, item in dict(fields["data"]).items():
            arrays[channel], payloads[channel] = _decode_mda(item)
    return V2Message(type=fields.get("type"), fields=fields, arrays=arrays, payloads=payloads)


# ---------------------------------------------------------------------------------------------
# Compression as the detector does it
# ---------------------------------------------------------------------------------------------


def bslz4_compress(arr, block_bytes=BLOCK_BYTES):
    """The bitshuffle HDF5-filter chunk: u64 BE total bytes, u32 BE block size in bytes, then
    bitshuffle.compress_lz4's blocks (block size block_bytes / element size elements)."""
    import bitshuffle

    arr = np.ascontiguousarray(arr)
    body = bitshuffle.compress_lz4(arr, block_bytes // arr.dtype.itemsize)
    return struct.pack(">QI", arr.nbytes, block_bytes) + body.tobytes()


def lz4_hdf5_compress(raw, block_bytes=BLOCK_BYTES):
    """The HDF5 LZ4 filter framing: u64 BE size, u32 BE block size, then per block u32 BE
    compressed size + an LZ4 block; a block that does not shrink is stored raw (size = its raw
    size), as the HDF5 filter does."""
    import lz4.block

    raw = bytes(raw)
    out = [struct.pack(">QI", len(raw), block_bytes)]
    for off in range(0, len(raw), block_bytes):
        chunk = raw[off:off + block_bytes]
        comp = lz4.block.compress(chunk, store_size=False)
        if len(comp) >= len(chunk):
            comp = chunk
        out.append(struct.pack(">I", len(comp)))
        out.append(comp)
    return b"".join(out)


# ---------------------------------------------------------------------------------------------
# Golden series
# ---------------------------------------------------------------------------------------------


def make_pixels(rng, shape, dtype, noisy_rows=0):
    """Sparse diffraction-like counts: mostly 0, some 1..50, a few bright spots, a handful of
    saturated pixels (the dtype's maximum), and `noisy_rows` rows of full-range noise at the
    bottom (incompressible: exercises LZ4 blocks stored raw)."""
    dtype = np.dtype(dtype)
    top = np.iinfo(dtype).max
    a = np.zeros(shape, dtype=np.uint64)
    n = a.size
    hits = rng.choice(n, size=max(1, n // 20), replace=False)
    a.flat[hits] = rng.integers(1, 51, size=hits.size)
    spots = rng.choice(n, size=max(1, n // 2000), replace=False)
    a.flat[spots] = rng.integers(100, max(101, min(top, 60000)), size=spots.size)
    sat = rng.choice(n, size=max(1, n // 5000), replace=False)
    a.flat[sat] = top
    if noisy_rows:
        a[-noisy_rows:] = rng.integers(0, int(top) + 1, size=(noisy_rows, shape[1]),
                                       dtype=np.uint64)
    return a.astype(dtype)


def make_channel_images(rng, channels, shape, dtype, noisy_rows=0):
    """Per-channel frames: threshold_1 counts, threshold_2 a thinned copy, difference
    = threshold_1 - threshold_2 with the saturated/defective pixels at the dtype maximum (65535
    for uint16) as the detector marks them."""
    dtype = np.dtype(dtype)
    top = np.iinfo(dtype).max
    t1 = make_pixels(rng, shape, dtype, noisy_rows)
    sat = t1 == top
    t2 = rng.binomial(t1.astype(np.int64), 0.3).astype(dtype)
    t2[sat] = top
    diff = (t1.astype(np.int64) - t2.astype(np.int64)).clip(0, top).astype(dtype)
    diff[sat] = top
    by_name = {"threshold_1": t1, "threshold_2": t2, "difference": diff}
    out = {}
    for i, ch in enumerate(channels):
        out[ch] = by_name[ch] if ch in by_name else make_pixels(rng, shape, dtype, noisy_rows)
    return out


def _ulid_like(rng):
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    return "".join(alphabet[i] for i in rng.integers(0, 32, size=26))


def make_v2_series(channels=("threshold_1", "threshold_2", "difference"), dtype="uint16",
                   codec="bslz4", nimages=3, height=128, width=96, series_id=1, seed=0,
                   series_unique_id=None, noisy_rows=8, frame_time=0.01, count_time=0.0099,
                   self_describe=True, user_data=None):
    """A v2 series: [start, image 0 .. image N-1, end] CBOR messages (bytes) with the real
    structure, and the expected arrays: a list (per image) of {channel: ndarray (height,
    width)}.

    codec: "bslz4" (tag 56500 ["bslz4", elem_size, 12-byte header + bitshuffle/LZ4 blocks of
    8192 bytes]), "lz4" (tag 56500 ["lz4", 0, HDF5-LZ4 framing, 8192-byte blocks]) or "none"
    (plain typed array)."""
    import cbor2
    from cbor2 import CBORTag

    dtype = np.dtype(dtype)
    if dtype.name not in TYPED_ARRAY_TAG:
        raise ValueError(f"image dtype {dtype} (want uint8|uint16|uint32)")
    rng = np.random.default_rng(seed)
    uid = series_unique_id or _ulid_like(rng)
    channels = tuple(channels)
    thresholds = {"threshold_1": 6000.0, "threshold_2": 9500.0}
    wrap = (lambda m: CBORTag(55799, m)) if self_describe else (lambda m: m)
    shape = (height, width)

    start = {
        "type": "start",
        "arm_date": CBORTag(0, "2026-11-27T10:00:00.000000+00:00"),
        "beam_center_x": width / 2 + 0.25,
        "beam_center_y": height / 2 - 0.75,
        "channels": list(channels),
        "count_time": count_time,
        "countrate_correction_enabled": False,
        "detector_description": "ndflow golden EIGER2 (generated)",
        "detector_serial_number": "E-00-0000",
        "detector_translation": [0.0, 0.0, 0.12],
        "flatfield_enabled": False,
        "frame_time": frame_time,
        "goniometer": {ax: {"increment": 0.1 if ax == "omega" else 0.0, "start": 0.0}
                       for ax in ("chi", "kappa", "omega", "phi", "two_theta")},
        "image_dtype": dtype.name,
        "image_size_x": width,
        "image_size_y": height,
        "incident_energy": 12000.0,
        "incident_wavelength": 1.0332,
        "number_of_images": nimages,
        "pixel_mask_enabled": False,
        "pixel_size_x": 7.5e-05,
        "pixel_size_y": 7.5e-05,
        "saturation_value": int(np.iinfo(dtype).max) - 1,
        "sensor_material": "Si",
        "sensor_thickness": 0.00045,
        "series_id": series_id,
        "series_unique_id": uid,
        "threshold_energy": {ch: thresholds.get(ch, 6000.0) for ch in channels
                             if ch != "difference"},
        "user_data": user_data,
        "virtual_pixel_interpolation_enabled": False,
    }
    messages = [cbor2.dumps(wrap(start))]
    expected = []
    tick = int(round(frame_time * TIME_BASE))
    for image_id in range(nimages):
        frames = make_channel_images(rng, channels, shape, dtype, noisy_rows)
        data = {}
        for ch in channels:
            arr = np.ascontiguousarray(frames[ch].astype(dtype.newbyteorder("<")))
            if codec == "bslz4":
                blob = CBORTag(56500, ["bslz4", dtype.itemsize, bslz4_compress(arr)])
            elif codec == "lz4":
                blob = CBORTag(56500, ["lz4", 0, lz4_hdf5_compress(arr.tobytes())])
            elif codec == "none":
                blob = arr.tobytes()
            else:
                raise ValueError(f"codec {codec!r} (want bslz4|lz4|none)")
            data[ch] = CBORTag(40, [[height, width], CBORTag(TYPED_ARRAY_TAG[dtype.name],
                                                             blob)])
        image = {
            "type": "image",
            "data": data,
            "image_id": image_id,
            "real_time": [int(round(count_time * TIME_BASE)), TIME_BASE],
            "series_date": CBORTag(0, "2026-11-27T10:00:00.000000+00:00"),
            "series_id": series_id,
            "series_unique_id": uid,
            "start_time": [image_id * tick, TIME_BASE],
            "stop_time": [image_id * tick + int(round(count_time * TIME_BASE)), TIME_BASE],
            "user_data": user_data,
        }
        messages.append(cbor2.dumps(wrap(image)))
        expected.append({ch: frames[ch] for ch in channels})
    end = {"type": "end", "series_id": series_id, "series_unique_id": uid}
    messages.append(cbor2.dumps(wrap(end)))
    return messages, expected


def make_v1_series(dtype="uint16", encoding="bs16-lz4<", nimages=3, height=128, width=96,
                   series=1, seed=0, header_detail="basic", header_appendix=None,
                   image_appendix=None, noisy_rows=8, frame_time=0.01):
    """A v1 series: [header, image 0 .. image N-1, end], each a list of parts (bytes), and the
    expected arrays: a list of ndarrays (height, width).

    encoding: "<" (raw little-endian), "lz4<" (one LZ4 block, no header), "bs8-lz4<" /
    "bs16-lz4<" / "bs32-lz4<" (12-byte header + bitshuffle/LZ4, 8192-byte blocks; BITS must be
    the element size), or "bslz4" for the bsNN that fits `dtype`. header_detail none|basic|all
    gives 1/2/8 header parts (+1 with header_appendix)."""
    import lz4.block

    dtype = np.dtype(dtype).newbyteorder("<")
    if encoding == "bslz4":
        encoding = f"bs{dtype.itemsize * 8}-lz4<"
    m = V1_ENCODING.match(encoding)
    if not m or m["order"] != "<":
        raise ValueError(f"v1 encoding {encoding!r}")
    if m["bits"] and int(m["bits"]) != dtype.itemsize * 8:
        raise ValueError(f"{encoding!r} does not fit {dtype.name}")
    rng = np.random.default_rng(seed)
    shape_xy = [width, height]
    tname = np.dtype(dtype).name

    header = [json.dumps({"htype": "dheader-1.0", "series": series,
                          "header_detail": header_detail}).encode()]
    if header_detail in ("basic", "all"):
        header.append(json.dumps({
            "auto_summation": True, "beam_center_x": width / 2 + 0.25,
            "beam_center_y": height / 2 - 0.75, "bit_depth_image": dtype.itemsize * 8,
            "bit_depth_readout": 12, "count_time": frame_time - 1e-4,
            "countrate_correction_applied": False, "description": "ndflow golden EIGER (v1)",
            "detector_distance": 0.12, "detector_number": "E-00-0000",
            "frame_time": frame_time, "nimages": nimages, "ntrigger": 1,
            "omega_increment": 0.1, "omega_start": 0.0, "pixel_mask_applied": False,
            "sensor_material": "Si", "sensor_thickness": 0.00045,
            "software_version": "ndflow-golden", "threshold_energy": 6000.0,
            "trigger_mode": "ints", "wavelength": 1.0332, "x_pixel_size": 7.5e-05,
            "x_pixels_in_detector": width, "y_pixel_size": 7.5e-05,
            "y_pixels_in_detector": height,
        }).encode())
    if header_detail == "all":
        flat = np.ones((height, width), "<f4")
        mask = np.zeros((height, width), "<u4")
        mask[0, :3] = 1
        table = np.stack([np.arange(1000, dtype="<f4"), np.arange(1000, dtype="<f4") * 1.01])
        for htype, arr, t, shp in (("dflatfield-1.0", flat, "float32", shape_xy),
                                   ("dpixelmask-1.0", mask, "uint32", shape_xy),
                                   ("dcountrate_table-1.0", table, "float32", [2, 1000])):
            header.append(json.dumps({"htype": htype, "shape": shp, "type": t}).encode())
            header.append(arr.tobytes())
    elif header_detail != "basic" and header_detail != "none":
        raise ValueError(f"header_detail {header_detail!r}")
    if header_appendix is not None:
        header.append(_as_bytes(header_appendix))

    messages = [header]
    expected = []
    ns = int(frame_time * 1e9)
    for frame in range(nimages):
        arr = make_pixels(rng, (height, width), dtype, noisy_rows).astype(dtype)
        raw = arr.tobytes()
        if m["bits"]:
            blob = bslz4_compress(arr)
        elif m["lz4"]:
            blob = lz4.block.compress(raw, store_size=False)
        else:
            blob = raw
        parts = [
            json.dumps({"htype": "dimage-1.0", "series": series, "frame": frame,
                        "hash": hashlib.md5(blob).hexdigest()}).encode(),
            json.dumps({"htype": "dimage_d-1.0", "shape": shape_xy, "type": tname,
                        "encoding": encoding, "size": len(blob)}).encode(),
            blob,
            json.dumps({"htype": "dconfig-1.0", "start_time": frame * ns,
                        "stop_time": frame * ns + ns - 100_000, "real_time": ns - 100_000
                        }).encode(),
        ]
        if image_appendix is not None:
            parts.append(_as_bytes(image_appendix))
        messages.append(parts)
        expected.append(arr.astype(arr.dtype.newbyteorder("=")))
    messages.append([json.dumps({"htype": "dseries_end-1.0", "series": series}).encode()])
    return messages, expected


def _as_bytes(x):
    return x if isinstance(x, bytes) else str(x).encode()


# ---------------------------------------------------------------------------------------------
# pytest fixtures (import them into a test module: `from eiger_peer import tickit_python,
# tickit_eiger  # noqa: F401`)
# ---------------------------------------------------------------------------------------------

try:
    import pytest
except ImportError:  # the replayer imports this module outside pytest
    pytest = None

if pytest is not None:

    @pytest.fixture(scope="session")
    def tickit_python(tmp_path_factory):
        """The python of the tickit venv (built once per session, or NDFLOW_TICKIT_VENV). Skips
        the test, with pip's last line, when it cannot be built (e.g. no package index)."""
        root = tmp_path_factory.mktemp("tickit")
        try:
            python, seconds = tickit_venv_python(root)
        except TickitUnavailable as e:
            pytest.skip(f"tickit-devices venv could not be built: {e}")
        if seconds:
            print(f"\n[eiger_peer] tickit venv built in {seconds:.1f} s")
        return python

    @pytest.fixture
    def tickit_eiger(tickit_python, tmp_path):
        """A factory: tickit_eiger(streams=("v2",), tries=8, fix_self_connect=True) -> a
        self-checked, started TickitEiger (healthy_start); each one made is stopped at
        teardown."""
        made = []

        def factory(streams=("v2",), tries=8, fix_self_connect=True):
            t0 = time.monotonic()
            eiger = healthy_start(tickit_python, tmp_path / f"tickit{len(made)}", streams, tries,
                                  fix_self_connect=fix_self_connect, log=print)
            print(f"[eiger_peer] healthy tickit after {eiger.attempts} start(s), "
                  f"{time.monotonic() - t0:.1f} s")
            made.append(eiger)
            return eiger

        yield factory
        for eiger in made:
            eiger.stop()


if __name__ == "__main__":
    # `python eiger_peer.py build-venv PATH`: builds the tickit venv at PATH ahead of the tests
    # (scripts/test.sh runs it in the background, with NDFLOW_TICKIT_VENV=PATH for the tests).
    # `python eiger_peer.py install-dectris`: installs dectris-compression into this venv
    # (scripts/test.sh runs it in the background too).
    if sys.argv[1:] == ["install-dectris"]:
        t0 = time.monotonic()
        try:
            dectris_decompress()
        except RuntimeError as e:
            sys.exit(f"dectris-compression not installed: {e}")
        print(f"dectris-compression: ready after {time.monotonic() - t0:.0f} s")
        sys.exit(0)
    if len(sys.argv) != 3 or sys.argv[1] != "build-venv":
        sys.exit("usage: eiger_peer.py build-venv PATH | install-dectris")
    try:
        _, secs = build_tickit_venv(Path(sys.argv[2]), log=Path(sys.argv[2] + "-pip.log"))
    except TickitUnavailable as e:
        sys.exit(f"tickit venv not built: {e}")
    print(f"tickit venv at {sys.argv[2]}: {'built in %.1f s' % secs if secs else 'reused'}")
