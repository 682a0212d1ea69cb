"""A long soak of one ndflow IOC: the overload pipeline for N frames under client churn,
hostile connections and a file writer on a filling disk; the IOC's own PVs decide at the end.

Run by `scripts/soak.sh` (defaults: `--frames 1000000`, about 10 minutes on 2 cores):

- **IOC**: `ndflow run` on free loopback ports under RLIMIT_FSIZE (SIGXFSZ ignored), so the
  HDF5 writer's files stop growing at `--fsize-mib` with EFBIG, as on a full disk. Pipeline:
  a 128x128 UInt16 simulated detector at `--period` feeding ROI → Stats, a Stats with
  MinCallbackTime (drops by rate), LZ4 Codec → HDF5 writer (stream) and a latest-wins pva
  port, a JPEG Codec given frames it cannot take (drops "unsupported"), a disabled Stats
  (drops "disabled") and a lossless pva port (`Lossless = Yes`, not blocking: its queue drops
  what its pipelined subscriber cannot take, and counts it).
- **Staying clients** for the whole run: a pipelined (lossless) p4p monitor of the lossless
  port's image, a latest-wins p4p monitor of the compressed image, a pyepics monitor of the
  detector's ArrayCounter_RBV.
- **Churn**: p4p and caproto client processes that connect to a handful of PVs, monitor them
  for a moment and go, cleanly (context closed) or killed with SIGKILL, again and again.
- **Hostile** (hostile_load.py's flood functions): bursts of garbage connections at both
  ports, and connections that declare a large payload and drip a byte a second (the servers
  must close them after their partial-message timeouts, 30 s CA, 40 s pva, and count them).
- **Disk**: the writer's capture is restarted every `--cycle` seconds into a new file (the
  previous file deleted, as an operator frees space), so it fills the disk again and again.

The load starts after a warm-up (`--warmup-frames`), when the baseline is read. At the end,
from the IOC's PVs: every port's books balance (offered = processed + dropped by reason,
nothing queued or in flight) and every hop passes on what it processed; RSS within
`--rss-bound-mib` of the baseline; threads, open files (sockets of clients that have gone
but that the pva server still holds are named and counted apart) and connections back to the
baseline; the staying clients got what they were promised (the lossless one every frame the
lossless port published, in order, and exactly its counted drops missing); the churning
clients were all served; the dripping connections were closed and counted (runs of 90 s or
more); the write errors were counted; SIGTERM stops the IOC cleanly. It prints a one-screen
report and exits 1 naming each failed check (130 on Ctrl-C). Every process it starts is
stopped by its PID on the way out. Loopback only.

    .venv/bin/python python/tools/soak.py --frames 20000 --json report.json
"""

import argparse
import json
import os
import pathlib
import random
import resource
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python" / "tests"))
sys.path.insert(0, str(ROOT / "python" / "tools"))

P = "SOAK:"
SIZE = 128
CYCLE_PREFIX = "soak"
REASONS = ("DroppedQueueFull", "DroppedMinTime", "DroppedUnsupported", "DroppedDisabled",
           "DroppedErrors")
PLUGINS = ("ROI1", "STATS1", "STATS2", "CODEC1", "JPEG1", "PVA1", "PVA2", "HDF1", "OFF1")
# Where each plugin's frames come from: offered(plugin) = delivered(source).
SOURCES = {"ROI1": "SIM1", "STATS1": "ROI1", "STATS2": "SIM1", "CODEC1": "SIM1",
           "JPEG1": "SIM1", "PVA1": "SIM1", "PVA2": "CODEC1", "HDF1": "CODEC1", "OFF1": "SIM1"}
PREFIXES = {"SIM1": "cam1:", "PVA1": "Pva1:", "PVA2": "Pva2:"}


def pv_prefix(port):
    return P + PREFIXES.get(port, port + ":")


def config(frames, period, data_dir):
    return f"""
# ndflow soak: the overload pipeline (python/tools/soak.py)
prefix = "{P}"
threads = 4

[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = {SIZE}
MaxSizeY = {SIZE}
DataType = "UInt16"
ColorMode = "Mono"
SimMode = "LinearRamp"
AcquireTime = 0.0
AcquirePeriod = {period}
ImageMode = "Multiple"
NumImages = {frames}

[[port]]
name = "ROI1"
type = "roi"
NDArrayPort = "SIM1"
QueueSize = 20
MinX = 16
MinY = 16
SizeX = 64
SizeY = 64

[[port]]
name = "STATS1"
type = "stats"
NDArrayPort = "ROI1"
QueueSize = 20
ComputeStatistics = "Yes"
ComputeCentroid = "Yes"

[[port]]
name = "STATS2"
type = "stats"
NDArrayPort = "SIM1"
QueueSize = 5
ComputeStatistics = "Yes"
ComputeCentroid = "Yes"
ComputeProfiles = "Yes"
ComputeHistogram = "Yes"
MinCallbackTime = 0.002

[[port]]
name = "CODEC1"
type = "codec"
NDArrayPort = "SIM1"
QueueSize = 20
Compressor = "LZ4"

[[port]]
name = "JPEG1"
type = "codec"
NDArrayPort = "SIM1"
QueueSize = 20
Compressor = "JPEG"

[[port]]
name = "PVA1"
type = "pva"
prefix = "Pva1:"
NDArrayPort = "SIM1"
QueueSize = 100
Lossless = "Yes"
LosslessTimeout = 10.0

[[port]]
name = "PVA2"
type = "pva"
prefix = "Pva2:"
NDArrayPort = "CODEC1"
QueueSize = 20

[[port]]
name = "HDF1"
type = "hdf5"
NDArrayPort = "CODEC1"
QueueSize = 50
FilePath = "{data_dir}"
CreateDirectory = -1
FileName = "{CYCLE_PREFIX}"
FileTemplate = "%s%s_%d.h5"
FileWriteMode = "Stream"
NumCapture = 0
LazyOpen = "Yes"
AutoIncrement = "Yes"
Capture = 1

[[port]]
name = "OFF1"
type = "stats"
NDArrayPort = "SIM1"
EnableCallbacks = "Disable"
"""


# ---------------------------------------------------------------------------------------------
# Client processes (this file run with --client KIND): each prints "ready" once its monitors
# have their first value, then lines the driver reads, and a final "RESULT {json}" on "stop".


def _stdin_stop():
    """Blocks until the driver writes "stop" (or closes our stdin)."""
    for line in sys.stdin:
        if line.strip() == "stop":
            return
    return


def client_stay_pva(pv, conf, pipeline):
    from p4p.client.thread import Context

    ctx = Context("pva", conf=conf, useenv=False, nt=False)
    st = {"received": 0, "first": None, "last": 0, "disorder": 0, "errors": 0,
          "disconnects": 0}
    ready = threading.Event()
    lock = threading.Lock()

    def cb(v):
        with lock:
            if isinstance(v, Exception):
                # p4p reports "not connected" before the first value too: count only later.
                if ready.is_set():
                    st["disconnects" if "Disconnect" in type(v).__name__ else "errors"] += 1
                return
            uid = int(v["uniqueId"])
            ready.set()
            if uid == 0:  # the PV's value before its first frame
                return
            if uid <= st["last"]:
                st["disorder"] += 1
            else:
                st["last"] = uid
            if st["first"] is None:
                st["first"] = uid
            st["received"] += 1

    request = "record[pipeline=true,queueSize=16]" if pipeline else "record[queueSize=4]"
    sub = ctx.monitor(pv, cb, request=request, notify_disconnect=True)
    if not ready.wait(20):
        print("fail no first update", flush=True)
    print("ready", flush=True)
    _stdin_stop()
    with lock:
        out = dict(st)
    sub.close()
    ctx.close()
    print("RESULT " + json.dumps(out), flush=True)


def client_stay_ca(pv):
    import epics

    st = {"updates": 0, "last": None, "backwards": 0, "disconnects": 0}
    lock = threading.Lock()

    def cb(value=None, **_):
        with lock:
            v = int(value)
            if st["last"] is not None and v < st["last"]:
                st["backwards"] += 1
            st["last"] = v
            st["updates"] += 1

    def conn(conn=True, **_):
        if not conn:
            with lock:
                st["disconnects"] += 1

    p = epics.PV(pv, callback=cb, connection_callback=conn, auto_monitor=True)
    if not p.wait_for_connection(timeout=20):
        print("fail not connected", flush=True)
    t0 = time.time()
    while st["updates"] == 0 and time.time() - t0 < 20:
        time.sleep(0.05)
    print("ready", flush=True)
    _stdin_stop()
    time.sleep(0.5)  # the last monitor (posted at most every 10 ms) is in
    with lock:
        out = dict(st)
    p.disconnect()
    print("RESULT " + json.dumps(out), flush=True)


CHURN_PVS = ("cam1:ArrayCounter_RBV", "STATS1:MeanValue_RBV", "HDF1:WriteStatus",
             "NDFLOW:ResidentMB", "Pva1:QueueFree", "cam1:DetectorState_RBV")
CHURN_IMAGES = ("Pva1:Image", "Pva2:Image")


def client_churn(kind, conf, seed):
    """Connects, monitors, goes; again until killed. Prints "up" when every monitor of a round
    has had a value, "down" when it closed the round's context, "fail WHY" otherwise."""
    r = random.Random(seed)
    if kind == "pva":
        from p4p.client.thread import Context
    else:
        from caproto.threading.client import Context, SharedBroadcaster
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":  # started ahead, imports done; go when told
        return
    while True:
        names = [P + n for n in r.sample(CHURN_PVS, 3)]
        if kind == "pva":
            names.append(P + r.choice(CHURN_IMAGES))  # plain monitors: latest-wins
        got = {n: threading.Event() for n in names}
        try:
            if kind == "pva":
                ctx = Context("pva", conf=conf, useenv=False, nt=False)
                subs = [ctx.monitor(n, lambda v, n=n: got[n].set()) for n in names]
            else:
                # A new search socket each round too (a shared one found nothing after the
                # first context's disconnect).
                broadcaster = SharedBroadcaster()
                ctx = Context(broadcaster, timeout=10)
                pvs = ctx.get_pvs(*names, timeout=10)
                subs, callbacks = [], []  # caproto holds callbacks weakly: keep them
                for n, pv in zip(names, pvs):
                    pv.wait_for_connection(timeout=15)
                    s = pv.subscribe(data_type="time")
                    callbacks.append(lambda sub, resp, n=n: got[n].set())
                    s.add_callback(callbacks[-1])
                    subs.append(s)
            deadline = time.time() + 15
            for n, e in got.items():
                if not e.wait(max(0.0, deadline - time.time())):
                    raise TimeoutError(f"no update of {n} within 15 s")
            print("up", flush=True)
            time.sleep(r.uniform(0.2, 1.5))
            if kind == "pva":
                for s in subs:
                    s.close()
                ctx.close()
            else:
                for s in subs:
                    s.clear()
                ctx.disconnect()
                broadcaster.disconnect()
            print("down", flush=True)
        except Exception as e:  # noqa: BLE001 - reported to the driver, which fails the run
            print(f"fail {kind}: {type(e).__name__}: {e}".replace("\n", " "), flush=True)
            try:
                if kind == "pva":
                    ctx.close()
                else:
                    ctx.disconnect()
                    broadcaster.disconnect()
            except Exception:  # noqa: BLE001
                pass
            time.sleep(0.5)


def client_main(a):
    conf = json.loads(a.conf) if a.conf else {}
    if a.client == "stay-pva-lossless":
        client_stay_pva(P + "Pva1:Image", conf, pipeline=True)
    elif a.client == "stay-pva-latest":
        client_stay_pva(P + "Pva2:Image", conf, pipeline=False)
    elif a.client == "stay-ca":
        client_stay_ca(P + "cam1:ArrayCounter_RBV")
    elif a.client in ("churn-pva", "churn-ca"):
        client_churn(a.client.split("-")[1], conf, a.seed)


# ---------------------------------------------------------------------------------------------
# The driver.


class Child:
    """A client process of ours: its stdout lines read by a thread."""

    def __init__(self, name, args, env):
        self.name = name
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--client", *args], env=env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
            start_new_session=True)
        self.lines = []
        self.result = None
        self.up = False  # churn: a round is connected now
        self.counts = {"up": 0, "down": 0, "fail": 0}
        self.failures = []
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            if line == "ready":
                self.ready.set()
            elif line in ("up", "down"):
                self.counts[line] += 1
                self.up = line == "up"
            elif line.startswith("fail"):
                self.counts["fail"] += 1
                self.failures.append(line)
            elif line.startswith("RESULT "):
                self.result = json.loads(line[7:])
            else:
                self.lines.append(line)
        self.ready.set()

    def stop(self, timeout=20):
        """Asks for the result, returns it (None if the client died)."""
        try:
            self.proc.stdin.write("stop\n")
            self.proc.stdin.flush()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        self.thread.join(5)
        return self.result

    def go(self):
        try:
            self.proc.stdin.write("go\n")
            self.proc.stdin.flush()
        except OSError:
            pass

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


class Soak:
    def __init__(self, a):
        self.a = a
        self.ioc = None
        self.children = []
        self.stopping = threading.Event()
        self.hostile = [0, 0]  # hostile_load's counters: CA, pva garbage connections
        self.drips = []  # [socket, protocol, closed_after_s or None]
        self.drip_t0 = None
        self.churn_kills = 0
        self.churn_dead = []  # churn children already replaced (their counts still count)
        self.samples = []  # (t, frames, ResidentMB, Threads, OpenFiles)
        self.capture_cycles = 0
        self.deleted_files = []
        self.threads = []
        self.interrupted = False
        self.phases = []
        self.frames_done = threading.Event()
        self.write_errors = []

    # -- plumbing ------------------------------------------------------------------------
    def interrupt(self, *_):
        """SIGINT/SIGTERM: stop the load at once; the main loop raises at its next step."""
        self.interrupted = True
        self.stopping.set()

    def tick(self, seconds):
        time.sleep(seconds)
        if self.interrupted:
            raise KeyboardInterrupt

    def get(self, names, timeout=5.0):
        """Values of PVs by name (numbers; enums as their index; strings as strings)."""
        from p4p import Value

        vals = self.ctx.get(list(names), timeout=timeout)
        out = {}
        for n, v in zip(names, vals):
            x = v["value"]
            if isinstance(x, Value):  # an NTEnum's {index, choices}
                x = x["index"]
            out[n] = x
        return out

    def put(self, name, value):
        self.ctx.put(name, value, timeout=10)

    def health(self):
        h = self.get([P + "NDFLOW:" + k for k in ("ResidentMB", "Threads", "OpenFiles",
                                                  "CaConnections", "PvaConnections",
                                                  "PvaMonitors")])
        return {k.split(":")[-1]: v for k, v in h.items()}

    def start_ioc(self, tmp):
        a = self.a
        from netenv import free_tcp_udp_port, free_udp_port, process_env, pva_client_conf

        ca, rep = free_tcp_udp_port(), free_udp_port()
        pva, bcast = free_tcp_udp_port(), free_udp_port()
        self.env = process_env(
            EPICS_CA_SERVER_PORT=str(ca), EPICS_CA_REPEATER_PORT=str(rep),
            EPICS_PVA_SERVER_PORT=str(pva), EPICS_PVA_BROADCAST_PORT=str(bcast),
            EPICS_PVAS_SERVER_PORT=str(pva), EPICS_PVAS_BROADCAST_PORT=str(bcast))
        self.conf = pva_client_conf(pva, bcast)
        self.ca_port, self.pva_port = ca, pva
        self.data = tmp / "data"
        cfg = tmp / "soak.toml"
        cfg.write_text(config(a.frames, a.period, self.data))
        self.log_path = tmp / "ioc.log"
        log = open(self.log_path, "w")
        limit = a.fsize_mib << 20

        def limited():
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

        self.ioc = subprocess.Popen(
            [a.ndflow, "run", str(cfg), "--quiet", "--no-state"], env=self.env,
            stdout=log, stderr=subprocess.STDOUT, preexec_fn=limited, start_new_session=True)
        log.close()
        from p4p.client.thread import Context

        self.ctx = Context("pva", conf=self.conf, useenv=False, nt=False)
        deadline = time.time() + 30
        while True:
            if self.ioc.poll() is not None:
                raise SystemExit("the IOC did not start:\n" + self.log_path.read_text())
            try:
                self.get([P + "cam1:ArrayCounter_RBV"], timeout=1)
                break
            except Exception:  # noqa: BLE001 - not served yet
                if time.time() > deadline:
                    raise SystemExit("the IOC serves no PV after 30 s:\n"
                                     + self.log_path.read_text())

    def child(self, name, *args):
        c = Child(name, [*args, "--conf", json.dumps(self.conf)], self.env)
        self.children.append(c)
        return c

    def cleanup(self):
        self.stopping.set()
        for s in self.drips:
            s[0].close()
        for c in self.children:
            try:
                c.kill()
            except Exception:  # noqa: BLE001
                pass
        if self.ioc is not None and self.ioc.poll() is None:
            self.ioc.send_signal(signal.SIGTERM)
            try:
                self.ioc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.ioc.kill()
                self.ioc.wait(timeout=10)

    # -- background load ------------------------------------------------------------------
    def churn_client(self, kind, r):
        return self.child(f"churn-{kind}", f"churn-{kind}", "--seed", str(r.randrange(1 << 30)))

    def churn(self, kind, seed, first):
        """Keeps one churn client of `kind` running, killing it (SIGKILL) every so often; each
        is started ahead (its imports done) and told to go when its predecessor is killed."""
        r = random.Random(seed)
        c = first
        while not self.stopping.is_set():
            c.ready.wait(30)
            c.go()
            following = self.churn_client(kind, r)
            life = r.uniform(*self.a.churn_life)
            if self.stopping.wait(life):
                break
            if c.proc.poll() is None:
                was_up = c.up
                c.kill()
                self.churn_kills += 1
                if was_up:
                    c.counts["killed_up"] = c.counts.get("killed_up", 0) + 1
            c.thread.join(5)
            c = following

    def hostile_bursts(self):
        import hostile_load

        every, burst = self.a.hostile_every, self.a.hostile_burst
        while not self.stopping.wait(every - burst):
            until = time.time() + burst
            ts = [threading.Thread(target=hostile_load.ca_garbage,
                                   args=(self.ca_port, until, random.randrange(1 << 30),
                                         self.hostile)),
                  threading.Thread(target=hostile_load.pva_garbage,
                                   args=(self.pva_port, until, self.hostile))]
            for t in ts:
                t.start()
            for t in ts:
                t.join()

    def open_drips(self, n, declared):
        """`n` connections per protocol that each declare `declared` bytes (hostile_load's
        messages) and then send a byte a second."""
        import hostile_load

        self.drip_t0 = time.time()
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", self.ca_port), timeout=5)
            header = struct.pack(">HHHHII", 4, 0xFFFF, 6, 0, 1, 1)
            s.sendall(hostile_load.VERSION + header + struct.pack(">II", declared,
                                                                  declared // 8))
            self.drips.append([s, "ca", None, s.getsockname()[1]])
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", self.pva_port), timeout=5)
            s.sendall(struct.pack("<BBBBI", 0xCA, 2, 0, 10, declared))
            self.drips.append([s, "pva", None, s.getsockname()[1]])

    def drip(self):
        while not self.stopping.wait(1.0):
            for d in self.drips:
                if d[2] is None:
                    try:
                        d[0].sendall(b"\x5a")
                        # A closed peer shows as readable with nothing to read (EOF/RST).
                        r, _, _ = select.select([d[0]], [], [], 0)
                        if r and not d[0].recv(1, socket.MSG_PEEK):
                            d[2] = time.time() - self.drip_t0
                    except OSError:
                        d[2] = time.time() - self.drip_t0

    def capture_cycles_loop(self):
        """Restarts the writer's capture into a new file every --cycle s; deletes the full one."""
        while not self.stopping.wait(self.a.cycle) and not self.frames_done.is_set():
            try:
                self.note_write_status()
                self.put(P + "HDF1:Capture", 0)
                time.sleep(0.2)
                files = sorted(self.data.glob(CYCLE_PREFIX + "_*.h5"))
                self.put(P + "HDF1:Capture", 1)
                self.capture_cycles += 1
                for f in files[:-1] if len(files) > 1 else []:
                    self.deleted_files.append((f.name, f.stat().st_size))
                    f.unlink()
            except Exception as e:  # noqa: BLE001
                print(f"  capture cycle failed: {e}", flush=True)

    def note_write_status(self):
        """Keeps each distinct write error the writer reported (before it is overwritten)."""
        v = self.get([P + "HDF1:WriteStatus", P + "HDF1:WriteMessage"])
        if v[P + "HDF1:WriteStatus"] != 0:
            msg = str(v[P + "HDF1:WriteMessage"])
            if msg not in self.write_errors:
                self.write_errors.append(msg)

    def spawn(self, target, *args):
        t = threading.Thread(target=target, args=args, daemon=True)
        t.start()
        self.threads.append(t)

    # -- the run --------------------------------------------------------------------------
    def run(self):
        a = self.a
        t_start = time.time()
        with tempfile.TemporaryDirectory(prefix="ndflow-soak-") as tmp:
            tmp = pathlib.Path(tmp)
            try:
                return self._run(tmp, t_start)
            finally:
                self.cleanup()
                self.ioc_rc = self.ioc.returncode if self.ioc else None
                if a.keep_log and self.ioc is not None:
                    try:
                        pathlib.Path(a.keep_log).write_text(self.log_path.read_text())
                    except OSError:
                        pass

    def _run(self, tmp, t_start):
        a = self.a
        self.mark("start")
        self.start_ioc(tmp)
        print(f"soak: IOC pid {self.ioc.pid} on 127.0.0.1 (CA {self.ca_port}, pva "
              f"{self.pva_port}); {a.frames} frames of {SIZE}x{SIZE} UInt16 every "
              f"{a.period * 1e3:g} ms; file size limit {a.fsize_mib} MiB", flush=True)
        stay = {
            "pva-lossless": self.child("stay-pva-lossless", "stay-pva-lossless"),
            "pva-latest": self.child("stay-pva-latest", "stay-pva-latest"),
            "ca": self.child("stay-ca", "stay-ca"),
        }
        for name, c in stay.items():
            if not c.ready.wait(30) or c.proc.poll() is not None:
                raise SystemExit(f"staying client {name} did not start: {c.lines} {c.failures}")
            if c.failures:
                raise SystemExit(f"staying client {name}: {c.failures}")
        deadline = time.time() + 10
        while self.get([P + "Pva1:Subscribers_RBV"])[P + "Pva1:Subscribers_RBV"] < 1:
            if time.time() > deadline:
                raise SystemExit("the lossless subscriber is not counted by Pva1:Subscribers_RBV")
            self.tick(0.1)

        # The first churning clients start now (imports take a while) and wait for "go".
        r = random.Random(1)
        firsts = [(kind, self.churn_client(kind, r)) for _ in range(a.churn)
                  for kind in ("pva", "ca")]

        # Warm-up: frames flow, no churn or hostile load yet; then the baseline.
        self.mark("clients ready")
        self.put(P + "cam1:Acquire", 1)
        t_acq = time.time()
        warm = min(a.warmup_frames, a.frames // 5)
        while self.get([P + "cam1:ArrayCounter_RBV"])[P + "cam1:ArrayCounter_RBV"] < warm:
            if time.time() - t_acq > 120:
                raise SystemExit("warm-up: frames are not flowing")
            self.tick(0.2)
        # The baseline is taken with the writer between files (Capture 0: its file closed),
        # as the end's is, so that its open file counts on neither side.
        self.writer_idle()
        self.mark("warm-up")
        base = self.health()
        self.fds_base = self.fd_targets()
        self.put(P + "HDF1:Capture", 1)
        print(f"warm-up: {warm} frames; RSS {base['ResidentMB']:.1f} MiB, "
              f"{base['Threads']} threads, {base['OpenFiles']} open files, connections "
              f"CA {base['CaConnections']} pva {base['PvaConnections']}", flush=True)

        # The load.
        self.open_drips(a.drips, a.drip_mb * 1_000_000)
        self.spawn(self.drip)
        for i, (kind, first) in enumerate(firsts):
            self.spawn(self.churn, kind, i, first)
        self.spawn(self.hostile_bursts)
        self.spawn(self.capture_cycles_loop)

        frames, last_print, peak = 0, time.time(), dict(base)
        t_prev, f_prev = t_acq, 0
        while True:
            v = self.get([P + "cam1:ArrayCounter_RBV", P + "cam1:Acquire_RBV"])
            frames, acquiring = v[P + "cam1:ArrayCounter_RBV"], v[P + "cam1:Acquire_RBV"]
            h = self.health()
            for k in ("ResidentMB", "Threads", "OpenFiles"):
                peak[k] = max(peak[k], h[k])
            self.samples.append((time.time() - t_acq, frames, h["ResidentMB"], h["Threads"],
                                 h["OpenFiles"]))
            if self.ioc.poll() is not None:
                raise SystemExit(f"the IOC exited ({self.ioc.returncode}) during the run")
            if time.time() - last_print >= a.progress:
                now = time.time()
                rate = (frames - f_prev) / (now - t_prev)
                t_prev, f_prev, last_print = now, frames, now
                cc = self.churn_counts()
                print(f"  {now - t_acq:6.0f} s  {frames:>9} frames ({rate:6.0f}/s)  RSS "
                      f"{h['ResidentMB']:.1f} MiB  threads {h['Threads']}  files "
                      f"{h['OpenFiles']}  churn up {cc['up']} down {cc['down']} killed "
                      f"{self.churn_kills}  hostile CA {self.hostile[0]} pva {self.hostile[1]}"
                      f"  drips closed {sum(d[2] is not None for d in self.drips)}/"
                      f"{len(self.drips)}", flush=True)
            if frames >= a.frames and not acquiring:
                break
            if time.time() - t_acq > a.max_seconds:
                raise SystemExit(f"only {frames} of {a.frames} frames after {a.max_seconds} s")
            self.tick(0.5)
        t_end = time.time()
        acq_s = t_end - t_acq
        self.mark("frames done")
        self.frames_done.set()
        # A short run may end before the churning clients got going: they go on (frames
        # done) until each kind has connected --min-churn times, for at most 30 s.
        while (min(self.churn_counts(kind)["up"] for kind in ("pva", "ca")) < a.min_churn
               and time.time() - t_end < 30 and a.churn):
            self.tick(0.2)

        # Stop the load; let the drips run out their servers' timeouts if the run was long
        # enough for that (they are counted then), else close them ourselves.
        self.mark("churn wait")
        self.stopping.set()
        for t in self.threads:
            t.join(30)
        if a.frames_drip_check:
            while (any(d[2] is None for d in self.drips)
                   and time.time() - self.drip_t0 < a.drip_deadline):
                self.tick(0.5)
        for d in self.drips:
            d[0].close()
        for c in self.children:
            if c.name.startswith("churn"):
                c.kill()
        return self.finish(stay, base, peak, acq_s, t_start)

    def writer_idle(self):
        """Stops the writer's capture (its file closed) and waits for the health PVs' next
        refresh (once a second)."""
        self.put(P + "HDF1:Capture", 0)
        deadline = time.time() + 10
        while self.get([P + "HDF1:Capture_RBV"])[P + "HDF1:Capture_RBV"] != 0:
            if time.time() > deadline:
                raise SystemExit("HDF1's capture does not stop")
            self.tick(0.1)
        self.tick(1.1)

    def mark(self, phase):
        self.phases.append((phase, time.time()))

    def fd_targets(self):
        """What the IOC's descriptors point at (/proc/PID/fd), to name any that leaked."""
        out = []
        d = pathlib.Path(f"/proc/{self.ioc.pid}/fd")
        try:
            for f in d.iterdir():
                try:
                    out.append(os.readlink(f))
                except OSError:
                    pass
        except OSError:
            pass
        # Sockets as "tcp 127.0.0.1:PORT>PORT STATE" (from /proc/PID/net/tcp, udp).
        names = {}
        states = {"01": "ESTABLISHED", "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT",
                  "0A": "LISTEN", "04": "FIN_WAIT1", "05": "FIN_WAIT2", "09": "LAST_ACK"}
        for proto in ("tcp", "udp"):
            try:
                rows = pathlib.Path(f"/proc/{self.ioc.pid}/net/{proto}").read_text()
            except OSError:
                continue
            for row in rows.splitlines()[1:]:
                f = row.split()
                lport, rport = int(f[1].split(":")[1], 16), int(f[2].split(":")[1], 16)
                names[f"socket:[{f[9]}]"] = (f"{proto} :{lport}>{rport} "
                                             f"{states.get(f[3], f[3])}")
        for row in pathlib.Path(f"/proc/{self.ioc.pid}/net/unix").read_text().splitlines()[1:]:
            f = row.split()
            names[f"socket:[{f[6]}]"] = "unix"
        # A socket in no table: a TCP connection the kernel has closed (reset by its peer).
        return sorted(names.get(t, "tcp closed" if t.startswith("socket:") else t)
                      for t in out)

    def new_fds(self, now):
        extra = list(now)
        for f in self.fds_base:
            if f in extra:
                extra.remove(f)
        return extra

    def held(self, now):
        """Descriptors new since the warm-up that are sockets of connections their peer has
        closed (CLOSE_WAIT) or reset: a pvAccess connection closed by its client keeps its
        socket until the PVs it monitored post again. Counted apart and named in the report."""
        return sum("CLOSE_WAIT" in f or f == "tcp closed" for f in self.new_fds(now))

    def churn_counts(self, kind=""):
        out = {"up": 0, "down": 0, "fail": 0, "killed_up": 0, "clients": 0}
        for c in self.children:
            if c.name.startswith("churn-" + kind):
                out["clients"] += 1
                for k in ("up", "down", "fail", "killed_up"):
                    out[k] += c.counts.get(k, 0)
        return out

    def drained(self):
        names = [pv_prefix(p) + k for p in PLUGINS for k in ("QueueUse", "InFlight_RBV")]
        return all(v == 0 for v in self.get(names).values())

    def finish(self, stay, base, peak, acq_s, t_start):
        a = self.a
        checks = []

        def check(name, ok, detail):
            checks.append({"name": name, "ok": bool(ok), "detail": detail})

        self.mark("load stopped")
        deadline = time.time() + 20
        while not self.drained() and time.time() < deadline:
            self.tick(0.2)

        # Settle: the churning and hostile connections gone, threads and files back to the
        # warm-up's, when the same clients (the staying ones and this reader) were connected.
        # The writer as the run left it (a file still capturing, its last error).
        hdf = self.get([P + "HDF1:" + k for k in ("NumCaptured_RBV", "FramesNotWritten_RBV",
                                                  "WriteStatus", "WriteMessage",
                                                  "FileNumber_RBV")])
        hdf = {k.split(":")[-1]: v for k, v in hdf.items()}
        self.note_write_status()
        self.writer_idle()
        deadline = time.time() + a.settle
        while True:
            self.tick(1.1)
            end = self.health()
            self.fds_end = self.fd_targets()
            back = (end["Threads"] <= base["Threads"]
                    and end["OpenFiles"] - self.held(self.fds_end) <= base["OpenFiles"]
                    and end["CaConnections"] == base["CaConnections"]
                    and end["PvaConnections"] == base["PvaConnections"])
            if back or time.time() > deadline:
                break
        for k in ("ResidentMB", "Threads", "OpenFiles"):
            peak[k] = max(peak[k], end[k])

        # Staying clients' results; then their connections must go too.
        self.mark("settled")
        results = {k: c.stop() for k, c in stay.items()}
        deadline = time.time() + 10
        while True:
            self.tick(0.5)
            gone = self.health()
            if (gone["CaConnections"] == 0 and gone["PvaConnections"] == 1) or \
                    time.time() > deadline:
                break

        # The books.
        ports = {}
        keys = ("ArraysOffered_RBV", "ArraysProcessed_RBV", "DroppedOutputArrays_RBV",
                "QueueUse", "InFlight_RBV", "DroppedArrays_RBV", "UniqueId_RBV") + tuple(
                    r + "_RBV" for r in REASONS)
        for p in PLUGINS:
            vals = self.get([pv_prefix(p) + k for k in keys])
            ports[p] = {k: vals[pv_prefix(p) + k] for k in keys}
        sim = self.get([P + "cam1:" + k for k in ("ArrayCounter_RBV", "UniqueId_RBV",
                                                  "DetectorState_RBV")])
        produced = sim[P + "cam1:ArrayCounter_RBV"]
        srv = self.get([P + "NDFLOW:" + k for k in ("CaPartialTimeouts", "PvaPartialTimeouts",
                                                    "PvaMalformed", "CaPartialOverCap",
                                                    "PvaPartialOverCap")])
        srv = {k.split(":")[-1]: v for k, v in srv.items()}

        check("frames produced", produced == a.frames,
              f"SIM1 ArrayCounter_RBV {produced} of {a.frames}")
        bad = []
        for p, v in ports.items():
            v["dropped"] = sum(v[r + "_RBV"] for r in REASONS)
            v["delivered"] = v["ArraysProcessed_RBV"] - v["DroppedOutputArrays_RBV"]
            if (v["ArraysOffered_RBV"] != v["ArraysProcessed_RBV"] + v["dropped"]
                    or v["QueueUse"] or v["InFlight_RBV"]):
                bad.append(p)
        check("books balance", not bad,
              "offered = processed + dropped by reason, nothing queued or in flight, on "
              + (f"{len(ports)} ports" if not bad else "NOT " + ", ".join(bad)))
        hops = []
        for p, src in SOURCES.items():
            given = produced if src == "SIM1" else ports[src]["delivered"]
            if ports[p]["ArraysOffered_RBV"] != given:
                hops.append(f"{src}->{p} {given}->{ports[p]['ArraysOffered_RBV']}")
        check("hops pass every frame on", not hops,
              "offered = upstream's processed - its DroppedOutputArrays on every link"
              if not hops else "; ".join(hops))

        # Memory, threads, files (from the IOC's own PVs).
        grew_end = end["ResidentMB"] - base["ResidentMB"]
        grew_peak = peak["ResidentMB"] - base["ResidentMB"]
        # ResidentMB is VmRSS in MiB (kB / 1024).
        bound = a.rss_bound_mib
        check("RSS bounded", grew_peak <= bound and grew_end <= bound,
              f"warm-up {base['ResidentMB']:.1f} MiB, peak +{grew_peak:.1f}, end "
              f"+{grew_end:.1f} (bound +{bound:g} MiB)")
        check("no thread growth", end["Threads"] <= base["Threads"],
              f"warm-up {base['Threads']}, peak {peak['Threads']}, end {end['Threads']}")
        extra = self.new_fds(self.fds_end)
        half = self.held(self.fds_end)
        # None: the server closes a gone client's socket with its connection (it once kept it
        # while a quiet PV it had monitored held the subscription).
        most = 0
        check("no fd growth", end["OpenFiles"] - half <= base["OpenFiles"] and half <= most,
              f"warm-up {base['OpenFiles']}, peak {peak['OpenFiles']}, end {end['OpenFiles']}"
              + (f" ({half} of clients gone, still held, at most {most}: see the note)"
                 if half else "")
              + (f"; new: {', '.join(extra[:6])}" if end["OpenFiles"] > base["OpenFiles"]
                 else ""))
        check("connections released",
              end["CaConnections"] == base["CaConnections"]
              and end["PvaConnections"] == base["PvaConnections"]
              and gone["CaConnections"] == 0 and gone["PvaConnections"] == 1,
              f"CA/pva connections: warm-up {base['CaConnections']}/{base['PvaConnections']}, "
              f"after churn {end['CaConnections']}/{end['PvaConnections']}, after the staying "
              f"clients left {gone['CaConnections']}/{gone['PvaConnections']} (this reader)")

        # Staying clients.
        ll, lw, ca = results["pva-lossless"], results["pva-latest"], results["ca"]
        pva1 = ports["PVA1"]
        if ll:
            missing = produced - ll["received"]
            ok = (ll["received"] == pva1["ArraysProcessed_RBV"] and ll["disorder"] == 0
                  and ll["disconnects"] == 0 and ll["errors"] == 0
                  and missing == pva1["dropped"] and pva1["DroppedErrors_RBV"] == 0
                  and ll["last"] == pva1["UniqueId_RBV"])
            detail = (f"got {ll['received']} of the {pva1['ArraysProcessed_RBV']} frames PVA1 "
                      f"published, in order ({ll['disorder']} out of order, "
                      f"{ll['disconnects']} disconnects); the {missing} it did not get are "
                      f"PVA1's counted drops ({pva1['dropped']}, none by LosslessTimeout)")
        else:
            ok, detail = False, "the client died"
        check("lossless pva client", ok, detail)
        pva2 = ports["PVA2"]
        if lw:
            ok = (lw["disorder"] == 0 and lw["disconnects"] == 0 and lw["received"] > 0
                  and lw["last"] == pva2["UniqueId_RBV"])
            detail = (f"got {lw['received']} of {pva2['ArraysProcessed_RBV']} (latest-wins), "
                      f"in order, ending with PVA2's last frame {lw['last']}")
        else:
            ok, detail = False, "the client died"
        check("latest-wins pva client", ok, detail)
        if ca:
            ok = (ca["backwards"] == 0 and ca["last"] == produced and ca["disconnects"] == 0)
            detail = (f"{ca['updates']} updates of cam1:ArrayCounter_RBV, never backwards, "
                      f"last {ca['last']}")
        else:
            ok, detail = False, "the client died"
        check("CA client", ok, detail)

        cc = self.churn_counts()
        failures = [f for c in self.children for f in c.failures]
        kinds = {k: self.churn_counts(k)["up"] for k in ("pva", "ca")}
        if a.churn:  # (--churn 0: none ran, nothing to check)
            check("churning clients served",
                  cc["fail"] == 0 and min(kinds.values()) >= a.min_churn,
                  f"{cc['up']} connected (pva {kinds['pva']}, CA {kinds['ca']}), {cc['down']} "
                  f"closed, {cc['killed_up']} killed while connected, {cc['fail']} failed"
                  + (f": {failures[:3]}" if failures else ""))

        closed = [d for d in self.drips if d[2] is not None]
        by = {pr: [d[2] for d in closed if d[1] == pr] for pr in ("ca", "pva")}
        if a.frames_drip_check and a.drips:
            ok = (len(closed) == len(self.drips) and srv["CaPartialTimeouts"] >= a.drips
                  and srv["PvaPartialTimeouts"] >= a.drips)
            detail = (f"{len(closed)}/{len(self.drips)} closed by the server (CA after "
                      f"{min(by['ca'], default=0):.0f}-{max(by['ca'], default=0):.0f} s, pva "
                      f"{min(by['pva'], default=0):.0f}-{max(by['pva'], default=0):.0f} s); "
                      f"CaPartialTimeouts {srv['CaPartialTimeouts']}, PvaPartialTimeouts "
                      f"{srv['PvaPartialTimeouts']}")
            check("dripping connections closed", ok, detail)
        written, lost = hdf["NumCaptured_RBV"], hdf["FramesNotWritten_RBV"]
        efbig = [m for m in self.write_errors if "too large" in m.lower()]
        ok = lost > 0 and lost == ports["HDF1"]["DroppedErrors_RBV"] and efbig
        check("disk full counted", ok,
              f"FramesNotWritten {lost} = HDF1 DroppedErrors {ports['HDF1']['DroppedErrors_RBV']}"
              f", WriteStatus \"Write error\" {len(efbig)} times with EFBIG"
              + (f" ({efbig[-1].split(': ', 1)[-1]})" if efbig else ""))

        # RSS when a quarter, half, three quarters and all of the frames were out.
        quarters = []
        for q in (0.25, 0.5, 0.75, 1.0):
            at = [smp[2] for smp in self.samples if smp[1] >= q * produced]
            quarters.append(at[0] if at else end["ResidentMB"])
        report = {
            "rss_quarters": quarters,
            "samples": self.samples[::max(1, len(self.samples) // 200)],
            "frames": produced, "requested": a.frames, "acquire_s": acq_s,
            "rate": produced / acq_s if acq_s else 0.0, "period": a.period,
            "ports": ports, "health": {"warmup": base, "peak": peak, "end": end,
                                 "half_closed_end": half, "new_fds_end": extra},
            "clients": {"churn": cc, "churn_by_kind": kinds, "churn_processes": cc["clients"],
                        "churn_kills": self.churn_kills, "staying": results},
            "hostile": {"ca_garbage": self.hostile[0], "pva_garbage": self.hostile[1],
                        "drips": len(self.drips), "drips_closed_by_server": len(closed),
                        "server": srv},
            "writer": {"written_last_file": written, "not_written": lost,
                       "capture_cycles": self.capture_cycles,
                       "files_deleted": len(self.deleted_files),
                       "write_message": hdf["WriteMessage"],
                       "write_errors": self.write_errors},
            "checks": checks,
        }
        # The IOC stops cleanly on SIGTERM (drains, exits 0).
        self.ioc.send_signal(signal.SIGTERM)
        try:
            rc = self.ioc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            rc = None
        check("clean shutdown", rc == 0, f"SIGTERM: exit status {rc}")
        self.mark("stopped")
        t = t_start
        report["phases"] = []
        for name, when in self.phases:
            report["phases"].append((name, round(when - t, 1)))
            t = when
        report["ok"] = all(c["ok"] for c in checks)
        report["wall_s"] = time.time() - t_start
        return report


def print_report(r, a):
    ok = lambda b: "PASS" if b else "FAIL"  # noqa: E731
    h = r["health"]
    print()
    print(f"ndflow soak: {r['frames']} frames in {r['acquire_s']:.1f} s ({r['rate']:.0f} "
          f"frames/s, {SIZE}x{SIZE} UInt16, AcquirePeriod {r['period'] * 1e3:g} ms); wall "
          f"{r['wall_s']:.0f} s")
    print(f"{'port':<7}{'offered':>9}{'processed':>10}{'qfull':>8}{'mintime':>9}"
          f"{'unsupp':>8}{'disabled':>9}{'errors':>8}  balance")
    for p, v in r["ports"].items():
        bal = v["ArraysOffered_RBV"] == v["ArraysProcessed_RBV"] + v["dropped"]
        print(f"{p:<7}{v['ArraysOffered_RBV']:>9}{v['ArraysProcessed_RBV']:>10}"
              f"{v['DroppedQueueFull_RBV']:>8}{v['DroppedMinTime_RBV']:>9}"
              f"{v['DroppedUnsupported_RBV']:>8}{v['DroppedDisabled_RBV']:>9}"
              f"{v['DroppedErrors_RBV']:>8}  {'=' if bal else '≠'}")
    w, pk, e = h["warmup"], h["peak"], h["end"]
    q = r["rss_quarters"]
    print(f"RSS (MiB): warm-up {w['ResidentMB']:.1f}, peak {pk['ResidentMB']:.1f}, end "
          f"{e['ResidentMB']:.1f}; at 25/50/75/100 % of the frames {q[0]:.1f}/{q[1]:.1f}/"
          f"{q[2]:.1f}/{q[3]:.1f}")
    print(f"threads {w['Threads']}/{pk['Threads']}/{e['Threads']}, open files "
          f"{w['OpenFiles']}/{pk['OpenFiles']}/{e['OpenFiles']} (warm-up/peak/end)")
    c = r["clients"]
    ch = c["churn"]
    print(f"clients: {ch['up']} churning connections (pva and CA) made, {ch['down']} closed "
          f"cleanly, {ch['killed_up']} killed while connected ({c['churn_processes']} client "
          f"processes, {c['churn_kills']} SIGKILLed); 3 stayed")
    ho = r["hostile"]
    closer = (f"{ho['drips_closed_by_server']} closed by the server" if a.frames_drip_check
              else "closed by the soak: the run is shorter than the servers' 30/40 s timeouts")
    print(f"hostile: {ho['ca_garbage']} CA and {ho['pva_garbage']} pva garbage connections; "
          f"{ho['drips']} dripping ({closer}); PvaMalformed {ho['server']['PvaMalformed']}")
    wr = r["writer"]
    last = wr["write_errors"][-1] if wr["write_errors"] else "no write error"
    print(f"writer: capture restarted {wr['capture_cycles']} times (a new file each, the full "
          f"one deleted); {wr['not_written']} frames not written; last error: {last}")
    if h["half_closed_end"]:
        print(f"note: {h['half_closed_end']} sockets of pva clients that had gone were still open "
              f"at the end (CLOSE_WAIT or reset): the pva server keeps a connection's socket "
              f"until each quiet PV it monitored posts again")
    print("time (s): " + ", ".join(f"{n} {t:g}" for n, t in r["phases"][1:]))
    for ch in r["checks"]:
        print(f"  {ok(ch['ok'])}  {ch['name']}: {ch['detail']}")
    failed = [ch["name"] for ch in r["checks"] if not ch["ok"]]
    print("RESULT: " + ("PASS" if not failed else "FAIL: " + ", ".join(failed)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=1_000_000, help="frames the detector produces")
    ap.add_argument("--period", type=float, default=0.0005, help="AcquirePeriod (s)")
    ap.add_argument("--ndflow", default=str(ROOT / "target" / "release" / "ndflow"),
                    help="the ndflow binary")
    ap.add_argument("--fsize-mib", type=int, default=64, help="RLIMIT_FSIZE of the IOC (MiB)")
    ap.add_argument("--rss-bound-mib", type=float, default=64,
                    help="allowed RSS growth over the warm-up value")
    ap.add_argument("--warmup-frames", type=int, default=20000,
                    help="frames before the baseline is read and the load starts")
    ap.add_argument("--churn", type=int, default=2, help="churn clients per protocol")
    ap.add_argument("--min-churn", type=int, default=3,
                    help="connections each churn kind makes at least (the run waits for them)")
    ap.add_argument("--drips", type=int, default=10, help="dripping connections per protocol")
    ap.add_argument("--drip-mb", type=int, default=50, help="payload each declares (MB)")
    ap.add_argument("--hostile-every", type=float, default=30.0,
                    help="a burst of garbage connections every S s")
    ap.add_argument("--hostile-burst", type=float, default=5.0, help="each lasting S s")
    ap.add_argument("--cycle", type=float, default=60.0, help="restart the capture every S s")
    ap.add_argument("--progress", type=float, default=10.0, help="a progress line every S s")
    ap.add_argument("--settle", type=float, default=20.0,
                    help="at most S s for threads, files and connections to come back")
    ap.add_argument("--max-seconds", type=float, default=1800.0,
                    help="fail if the frames take longer")
    ap.add_argument("--json", help="write the report's figures here")
    ap.add_argument("--keep-log", help="copy the IOC's log here")
    ap.add_argument("--client", help=argparse.SUPPRESS)
    ap.add_argument("--conf", help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.client:
        return client_main(a)
    a.churn_life = (4.0, 12.0) if a.frames >= 100_000 else (1.0, 3.0)
    # The servers close a stalled partial message after 30 s (CA) and 40 s (pva): a run long
    # enough sees the drips out and checks that; a short one closes them itself.
    a.drip_deadline = 60.0
    a.frames_drip_check = a.frames * a.period >= 90
    soak = Soak(a)

    signal.signal(signal.SIGINT, soak.interrupt)
    signal.signal(signal.SIGTERM, soak.interrupt)
    try:
        report = soak.run()
    except KeyboardInterrupt:
        print("\nsoak: interrupted; everything it started is stopped", flush=True)
        return 130
    except SystemExit as e:
        print(f"soak: FAIL: {e}", flush=True)
        return 1
    print_report(report, a)
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(report, indent=1, default=str))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
