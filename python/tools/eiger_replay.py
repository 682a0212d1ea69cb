#!/usr/bin/env python3
"""Replay EIGER stream messages from a ZeroMQ PUSH socket on 127.0.0.1 (a stand-in DCU stream
for the `eiger` driver's receiver and for throughput runs).

    eiger_replay.py --port 31001 --dir SERIES_DIR [--repeat N] [--rate FPS]
    eiger_replay.py --port 31001 --generate v2 --codec bslz4 --dtype uint16 \\
        --nimages 10 --height 514 --width 1030 [--channels threshold_1,threshold_2,difference]
    eiger_replay.py --generate v1 --encoding bs16-lz4< --save SERIES_DIR   (write, do not send)

The socket binds tcp://127.0.0.1:PORT (PORT 0: a free port, printed as "bound tcp://..."), waits
for a PULL peer (PUSH blocks until one connects), sends the message list `--repeat` times at
`--rate` messages/s (0 = as fast as it goes), prints progress each second on stderr and a final
line on stdout:

    sent MESSAGES messages, BYTES bytes in SECONDS s (RATE msg/s, MB/s)

Only loopback addresses are accepted. Sends use copy=False (zero-copy for large frames).

Message directories
-------------------
v2: one file per message, `*.cbor`, sent in sorted name order (the DECTRIS test-data layout:
    000000.cbor = start, 000001.cbor ... = images, the last = end).
v1: one sub-directory per message, sent in sorted name order; its files are the message's parts,
    in sorted name order (e.g. 000003/0.json 1.json 2.bin 3.json). Names are free; only the order
    counts. Empty files are sent as empty parts.
A directory with sub-directories is v1, one with *.cbor files v2. `--save DIR` writes generated
messages in this layout (v1: part files named NN.json / NN.bin).

Importable: `replay(addr, messages, repeat, rate)` sends and returns a ReplayStats;
`Replayer(addr)` binds first (`.endpoint` is the bound address, useful with port 0) and
`.run(...)` or `.start(...)` (a background thread; `.join()` returns the stats) sends.
A message is `bytes` (v2, one part) or a list of bytes (v1, multipart).
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import threading
import time
from pathlib import Path

LOOPBACK = re.compile(r"^tcp://127\.0\.0\.1:(\d+|\*)$")


@dataclasses.dataclass
class ReplayStats:
    messages: int
    bytes: int
    seconds: float

    def line(self):
        rate = self.messages / self.seconds if self.seconds > 0 else float("inf")
        mbps = self.bytes / self.seconds / 1e6 if self.seconds > 0 else float("inf")
        return (f"sent {self.messages} messages, {self.bytes} bytes in {self.seconds:.3f} s "
                f"({rate:.1f} msg/s, {mbps:.1f} MB/s)")


def _addr(addr):
    if isinstance(addr, int):
        addr = f"tcp://127.0.0.1:{addr}"
    if addr.endswith(":0"):
        addr = addr[:-2] + ":*"
    if not LOOPBACK.match(addr):
        raise ValueError(f"{addr}: the replayer binds tcp://127.0.0.1:PORT only")
    return addr


def _size(msg):
    return len(msg) if isinstance(msg, (bytes, bytearray, memoryview)) else sum(map(len, msg))


class Replayer:
    """A bound PUSH socket. `addr`: "tcp://127.0.0.1:PORT" (PORT 0 or * for a free one) or a
    port number. sndhwm: messages queued per peer before send blocks (0 = unlimited)."""

    def __init__(self, addr, sndhwm=1000, linger_s=30.0):
        import zmq

        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.PUSH)
        self.sock.setsockopt(zmq.SNDHWM, sndhwm)
        self.sock.setsockopt(zmq.LINGER, int(linger_s * 1000))
        self.sock.bind(_addr(addr))
        self.endpoint = self.sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self._thread = None
        self._result = None

    def run(self, messages, repeat=1, rate=0.0, progress=None, stop=None):
        """Send `messages` `repeat` times at `rate` messages/s (0 = flat out). The first send
        blocks until a peer connects (the clock starts after it). progress(stats) is called about
        once a second; `stop` (a threading.Event) ends it early. Returns ReplayStats."""
        import zmq

        messages = [m if isinstance(m, (bytes, bytearray, memoryview)) else list(m)
                    for m in messages]
        sizes = [_size(m) for m in messages]
        sent = nbytes = 0
        t0 = None
        next_report = None
        for _ in range(repeat):
            for msg, size in zip(messages, sizes):
                if stop is not None and stop.is_set():
                    break
                if t0 is not None and rate > 0:
                    due = t0 + sent / rate
                    delay = due - time.perf_counter()
                    if delay > 0:
                        time.sleep(delay)
                if isinstance(msg, list):
                    for part in msg[:-1]:
                        self.sock.send(part, zmq.SNDMORE, copy=False)
                    self.sock.send(msg[-1], copy=False)
                else:
                    self.sock.send(msg, copy=False)
                if t0 is None:  # the first send returned: a peer is connected
                    t0 = time.perf_counter()
                    next_report = t0 + 1.0
                sent += 1
                nbytes += size
                if progress is not None and time.perf_counter() >= next_report:
                    progress(ReplayStats(sent, nbytes, time.perf_counter() - t0))
                    next_report += 1.0
        seconds = time.perf_counter() - t0 if t0 is not None else 0.0
        return ReplayStats(sent, nbytes, seconds)

    def start(self, messages, repeat=1, rate=0.0, progress=None):
        """run() in a background thread; join() waits and returns its ReplayStats."""
        self._stop = threading.Event()

        def body():
            self._result = self.run(messages, repeat, rate, progress, self._stop)

        self._thread = threading.Thread(target=body, daemon=True)
        self._thread.start()
        return self

    def join(self, timeout=None):
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError("replay still running")
        return self._result

    def close(self, linger_s=None):
        """Close (flushing queued messages for up to the linger time)."""
        if linger_s is not None:
            self.sock.close(int(linger_s * 1000))
        else:
            self.sock.close()
        self.ctx.term()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._thread is not None and self._thread.is_alive():
            self._stop.set()
            self.close(0)
        else:
            self.close()


def replay(sock_addr, messages, repeat=1, rate=0.0, progress=None):
    """Bind a PUSH on `sock_addr` (loopback), send `messages` `repeat` times at `rate` msg/s,
    flush, close; returns ReplayStats (messages, bytes, seconds)."""
    with Replayer(sock_addr) as r:
        return r.run(messages, repeat, rate, progress)


# ---------------------------------------------------------------------------------------------
# Message directories
# ---------------------------------------------------------------------------------------------


def load_dir(path):
    """Messages from a directory (layout in the module docstring): (version, messages)."""
    path = Path(path)
    subdirs = sorted(p for p in path.iterdir() if p.is_dir())
    if subdirs:
        return "v1", [[f.read_bytes() for f in sorted(d.iterdir()) if f.is_file()]
                      for d in subdirs]
    files = sorted(path.glob("*.cbor"))
    if not files:
        raise ValueError(f"{path}: neither message sub-directories (v1) nor *.cbor files (v2)")
    return "v2", [f.read_bytes() for f in files]


def save_dir(path, messages):
    """Write messages in the directory layout (v2 bytes -> NNNNNN.cbor; v1 lists -> NNNNNN/
    NN.json|NN.bin)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    for i, msg in enumerate(messages):
        if isinstance(msg, (bytes, bytearray)):
            (path / f"{i:06d}.cbor").write_bytes(msg)
        else:
            d = path / f"{i:06d}"
            d.mkdir(exist_ok=True)
            for j, part in enumerate(msg):
                ext = "json" if bytes(part[:1]) == b"{" else "bin"
                (d / f"{j:02d}.{ext}").write_bytes(part)


def _eiger_peer():
    tests = Path(__file__).resolve().parents[1] / "tests"
    if str(tests) not in sys.path:
        sys.path.insert(0, str(tests))
    import eiger_peer

    return eiger_peer


def generate(args):
    ep = _eiger_peer()
    common = dict(dtype=args.dtype, nimages=args.nimages, height=args.height, width=args.width,
                  seed=args.seed, noisy_rows=args.noisy_rows)
    if args.generate == "v2":
        msgs, _ = ep.make_v2_series(channels=tuple(args.channels.split(",")), codec=args.codec,
                                    series_id=args.series, **common)
    else:
        msgs, _ = ep.make_v1_series(encoding=args.encoding, series=args.series,
                                    header_detail=args.header_detail, **common)
    return msgs


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, default=31001, help="bind tcp://127.0.0.1:PORT (0: free)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--dir", help="message directory (see the layout above)")
    src.add_argument("--generate", choices=("v1", "v2"), help="a golden series from eiger_peer")
    p.add_argument("--repeat", type=int, default=1, help="send the list N times")
    p.add_argument("--rate", type=float, default=0.0, help="messages/s (0: flat out)")
    p.add_argument("--save", help="with --generate: write the messages to DIR and exit")
    g = p.add_argument_group("--generate options")
    g.add_argument("--dtype", default="uint16", choices=("uint8", "uint16", "uint32"))
    g.add_argument("--codec", default="bslz4", choices=("bslz4", "lz4", "none"), help="v2")
    g.add_argument("--encoding", default="bslz4",
                   help="v1: <, lz4<, bs8-lz4<, bs16-lz4<, bs32-lz4< or bslz4 (fits --dtype)")
    g.add_argument("--channels", default="threshold_1,threshold_2,difference", help="v2")
    g.add_argument("--header-detail", default="basic", choices=("none", "basic", "all"),
                   help="v1")
    g.add_argument("--nimages", type=int, default=10)
    g.add_argument("--height", type=int, default=514)
    g.add_argument("--width", type=int, default=1030)
    g.add_argument("--noisy-rows", type=int, default=0)
    g.add_argument("--series", type=int, default=1)
    g.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    if args.generate:
        messages = generate(args)
        version = args.generate
        if args.save:
            save_dir(args.save, messages)
            print(f"wrote {len(messages)} {version} messages to {args.save}")
            return 0
    else:
        version, messages = load_dir(args.dir)
    with Replayer(args.port) as r:
        print(f"bound {r.endpoint}: {len(messages)} {version} messages x {args.repeat}, "
              f"rate {args.rate or 'flat out'}; waiting for a PULL peer", file=sys.stderr,
              flush=True)
        stats = r.run(messages, args.repeat, args.rate,
                      progress=lambda s: print(s.line(), file=sys.stderr, flush=True))
        print(stats.line(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
