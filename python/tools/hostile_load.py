"""Hostile load on an ndflow IOC's Channel Access and pvAccess ports, with its memory watched.

Starts `ndflow run` (a small simulated detector, CA and pva on free loopback ports), then:

1. **flood** for --seconds: threads open connection after connection; at the CA port each sends
   a VERSION message, one extended header with a random command and a random declared size
   (up to 16 MB) and up to 2 kB of random bytes; at the pva port, random bytes.
2. **drip**: --drip connections at the CA port and as many at the pva port each declare a
   --drip-mb payload, then send one byte per second; the server must close each after its
   partial-message timeout (CA 30 s, pva 40 s: EPICS_PVA_CONN_TMO x 4/3) and count it.

Prints the IOC's RSS before, after the flood and at the drip's peak, and the server counters
(`$(P)NDFLOW:CaPartialTimeouts`, `PvaMalformed`, …). Exits 1 when RSS grew by more than --max-mib
or a drip connection was left open. Loopback only.

    .venv/bin/python python/tools/hostile_load.py --seconds 60 --drip 100
"""

import argparse
import os
import pathlib
import random
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python" / "tests"))
from netenv import free_tcp_udp_port, free_udp_port, process_env  # noqa: E402

P = "HOSTILE:"
CONFIG = f"""
prefix = "{P}"

[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = 64
MaxSizeY = 64
"""
VERSION = bytes([0, 0, 0, 0, 0, 0, 0, 13]) + bytes(8)


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return float("nan")


def ca_garbage(port, until, seed, count):
    r = random.Random(seed)
    while time.time() < until:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                header = struct.pack(">HHHHII", r.randrange(64), 0xFFFF, 6, 0, 0, 0)
                sizes = struct.pack(">II", r.randrange(16 << 20), r.randrange(1, 1 << 20))
                s.sendall(VERSION + header + sizes + os.urandom(r.randrange(2048)))
            count[0] += 1
        except OSError:
            pass


def pva_garbage(port, until, count):
    while time.time() < until:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                s.sendall(os.urandom(random.randrange(8, 4096)))
            count[1] += 1
        except OSError:
            pass


def counters(env):
    code = (
        "import json,sys\nfrom p4p.client.thread import Context\nc=Context('pva')\n"
        "print(json.dumps({k: int(c.get(sys.argv[1]+'NDFLOW:'+k, timeout=5)) for k in "
        "('CaConnections','CaPartialTimeouts','CaPartialOverCap','PvaConnections',"
        "'PvaMalformed','PvaPartialTimeouts','PvaPartialOverCap')}))"
    )
    out = subprocess.run([sys.executable, "-c", code, P], env=env, capture_output=True,
                         text=True, timeout=60)
    return out.stdout.strip() or out.stderr.strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ndflow", default=str(ROOT / "target" / "release" / "ndflow"))
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--threads", type=int, default=4, help="CA flood threads (pva: half)")
    ap.add_argument("--drip", type=int, default=100, help="dripping connections per protocol")
    ap.add_argument("--drip-mb", type=int, default=100, help="payload each declares")
    ap.add_argument("--max-mib", type=float, default=32, help="allowed RSS growth")
    a = ap.parse_args()

    ca, rep = free_tcp_udp_port(), free_udp_port()
    pva, bcast = free_tcp_udp_port(), free_udp_port()
    env = process_env(
        EPICS_CA_SERVER_PORT=str(ca), EPICS_CA_REPEATER_PORT=str(rep),
        EPICS_PVA_SERVER_PORT=str(pva), EPICS_PVA_BROADCAST_PORT=str(bcast),
        EPICS_CA_MAX_ARRAY_BYTES=str((a.drip_mb + 1) << 20),
    )
    with tempfile.TemporaryDirectory() as tmp:
        cfg = pathlib.Path(tmp) / "ioc.toml"
        cfg.write_text(CONFIG)
        log = open(pathlib.Path(tmp) / "ioc.log", "w+")
        ioc = subprocess.Popen([a.ndflow, "run", str(cfg), "--quiet"], env=env, stdout=log,
                               stderr=subprocess.STDOUT)
        try:
            time.sleep(2)
            if ioc.poll() is not None:
                log.seek(0)
                sys.exit("the IOC did not start:\n" + log.read())
            start = rss_mib(ioc.pid)
            print(f"IOC pid {ioc.pid}: CA {ca}, pva {pva}; RSS {start:.1f} MiB", flush=True)

            until = time.time() + a.seconds
            count = [0, 0]
            threads = [threading.Thread(target=ca_garbage, args=(ca, until, i, count))
                       for i in range(a.threads)]
            threads += [threading.Thread(target=pva_garbage, args=(pva, until, count))
                        for _ in range(max(1, a.threads // 2))]
            for t in threads:
                t.start()
            while time.time() < until:
                time.sleep(10)
                print(f"  flood: {count[0]} CA, {count[1]} pva connections; "
                      f"RSS {rss_mib(ioc.pid):.1f} MiB", flush=True)
            for t in threads:
                t.join()
            time.sleep(2)
            flooded = rss_mib(ioc.pid)
            print(f"flood: {count[0]} CA and {count[1]} pva garbage connections in "
                  f"{a.seconds:.0f} s; RSS {start:.1f} -> {flooded:.1f} MiB", flush=True)

            socks = []
            declared = a.drip_mb * 1_000_000
            for _ in range(a.drip):
                s = socket.create_connection(("127.0.0.1", ca), timeout=5)
                header = struct.pack(">HHHHII", 4, 0xFFFF, 6, 0, 1, 1)
                s.sendall(VERSION + header + struct.pack(">II", declared, declared // 8))
                socks.append(s)
            for _ in range(a.drip):
                s = socket.create_connection(("127.0.0.1", pva), timeout=5)
                # A client's GET (command 10) header, little endian, declaring the payload.
                s.sendall(struct.pack("<BBBBI", 0xCA, 2, 0, 10, declared))
                socks.append(s)
            t0, closed, peak = time.time(), {}, flooded
            while time.time() - t0 < 75 and len(closed) < len(socks):
                for i, s in enumerate(socks):
                    if i not in closed:
                        try:
                            s.sendall(b"\x5a")
                        except OSError:
                            closed[i] = time.time() - t0
                peak = max(peak, rss_mib(ioc.pid))
                time.sleep(1)
            for s in socks:
                s.close()
            when = (f"after {min(closed.values()):.0f}-{max(closed.values()):.0f} s"
                    if closed else "")
            print(f"drip: {len(closed)} of {len(socks)} connections (CA and pva) declaring "
                  f"{a.drip_mb} MB closed by the server {when}; RSS peak {peak:.1f} MiB",
                  flush=True)
            print("counters:", counters(env), flush=True)
            grew = max(flooded, peak) - start
            ok = grew <= a.max_mib and len(closed) == len(socks)
            print(f"{'PASS' if ok else 'FAIL'}: RSS grew {grew:.1f} MiB (limit {a.max_mib}), "
                  f"{len(closed)}/{len(socks)} drips closed")
            return 0 if ok else 1
        finally:
            ioc.kill()
            ioc.wait(timeout=10)
            log.close()


if __name__ == "__main__":
    sys.exit(main())
