"""Seed corpora for the pvAccess and Channel Access fuzz targets, from real traffic.

Starts `ndflow run` (a small simulated detector with image PVs, statistics and a BSLZ4 codec)
on free loopback ports and puts a recording proxy in front of both protocols: TCP streams and
UDP searches pass through it unchanged in content (only the search replies' server port is
rewritten to the proxy's, and pvAccess searches' reply port to the proxy's, so that clients
connect through it). Then p4p, pyepics and ndflow's own `pv`/`ca` clients do what operators
do: get, put, monitor, control/time/string/enum/array reads, an NTNDArray image monitor. What
each side sent is written as corpus files:

    pva_server/      each client connection's bytes (as the server received them)
    pva_client/      each server connection's bytes (as the client received them)
    pva_datagram/    pvAccess search datagrams
    pva_server_cmd/  client messages as records (tag = command, flags byte, body)
    ca_server/ ca_client/ ca_datagram/ ca_server_cmd/ ca_dbr/   the same for Channel Access
    eiger_stream/    EIGER Stream v1 and v2 messages of small series, as the stand-in DCU
                     (eiger_replay.py, built on the DECTRIS-format golden generator) sends them

Streams longer than --max-bytes are cut at a message boundary (the corpora stay small).

    .venv/bin/python python/tools/fuzz_capture.py --out fuzz/corpus
"""

import argparse
import hashlib
import os
import pathlib
import select
import socket
import struct
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python" / "tests"))
from netenv import free_tcp_port, free_tcp_udp_port, free_udp_port, process_env  # noqa: E402

P = "FZ:"
CONFIG = f"""
prefix = "{P}"

[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = 12
MaxSizeY = 8
DataType = "UInt16"
ImageMode = "Continuous"
AcquireTime = 0.01
AcquirePeriod = 0.1

[[port]]
name = "PVA1"
type = "pva"
prefix = "Pva1:"
NDArrayPort = "SIM1"

[[port]]
name = "STATS1"
type = "stats"
prefix = "Stats1:"
NDArrayPort = "SIM1"

[[port]]
name = "CODEC1"
type = "codec"
prefix = "Codec1:"
NDArrayPort = "SIM1"
Compressor = "BSLZ4"

[[port]]
name = "PVA2"
type = "pva"
prefix = "Pva2:"
NDArrayPort = "CODEC1"
"""


class Recorder:
    def __init__(self):
        self.lock = threading.Lock()
        self.streams = []  # (protocol, direction, bytearray)
        self.datagrams = []  # (protocol, direction, bytes)

    def stream(self, proto, direction):
        b = bytearray()
        with self.lock:
            self.streams.append((proto, direction, b))
        return b

    def datagram(self, proto, direction, data):
        with self.lock:
            self.datagrams.append((proto, direction, bytes(data)))


def pipe(a, b, rec_a2b, rec_b2a):
    """Copies both ways until either side closes, recording each direction."""
    socks = [a, b]
    try:
        while True:
            r, _, _ = select.select(socks, [], [], 30)
            if not r:
                return
            for s in r:
                data = s.recv(65536)
                if not data:
                    return
                if s is a:
                    rec_a2b.extend(data)
                    b.sendall(data)
                else:
                    rec_b2a.extend(data)
                    a.sendall(data)
    except OSError:
        pass
    finally:
        a.close()
        b.close()


def tcp_proxy(proto, listen_port, server_port, rec, stop):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", listen_port))
    ls.listen(16)
    ls.settimeout(0.2)
    while not stop.is_set():
        try:
            c, _ = ls.accept()
        except socket.timeout:
            continue
        s = socket.create_connection(("127.0.0.1", server_port))
        t = threading.Thread(
            target=pipe,
            args=(c, s, rec.stream(proto, "c2s"), rec.stream(proto, "s2c")),
            daemon=True,
        )
        t.start()
    ls.close()


def pva_messages(data):
    """(offset, header flags, command, payload) of each message in a pvAccess buffer."""
    out, i = [], 0
    while i + 8 <= len(data) and data[i] == 0xCA:
        flags, command = data[i + 2], data[i + 3]
        size = struct.unpack(">I" if flags & 0x80 else "<I", data[i + 4:i + 8])[0]
        control = flags & 0x01
        n = 0 if control else size
        if i + 8 + n > len(data):
            break
        out.append((i, flags, command, data[i + 8:i + 8 + n]))
        i += 8 + n
    return out


def ca_messages(data):
    """(offset, header length, command, data type, count, p1, p2, payload) of each CA message."""
    out, i = [], 0
    while i + 16 <= len(data):
        cmd, size, dt, cnt, p1, p2 = struct.unpack(">HHHHII", data[i:i + 16])
        hlen = 16
        if size == 0xFFFF and cnt == 0:
            if i + 24 > len(data):
                break
            size, cnt = struct.unpack(">II", data[i + 16:i + 24])
            hlen = 24
        if i + hlen + size > len(data):
            break
        out.append((i, hlen, cmd, dt, cnt, p1, p2, data[i + hlen:i + hlen + size]))
        i += hlen + size
    return out


def udp_proxy(proto, listen_port, server_port, server_tcp, proxy_tcp, rec, stop):
    """Forwards datagrams to the server and its replies back, rewriting the server's TCP port
    in search replies (and, for pvAccess, the reply address in searches) to the proxy's."""
    us = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    us.bind(("127.0.0.1", listen_port))
    fwd = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    fwd.bind(("127.0.0.1", 0))
    client = [None]
    while not stop.is_set():
        r, _, _ = select.select([us, fwd], [], [], 0.2)
        for s in r:
            data, src = s.recvfrom(65536)
            if s is us:
                client[0] = src
                rec.datagram(proto, "c2s", data)
                data = bytearray(data)
                if proto == "pva":
                    for off, flags, command, payload in pva_messages(data):
                        if command == 0x03 and len(payload) >= 26:
                            # reply address (16 bytes at 8) and port (u16 at 24): the proxy
                            fmt = ">H" if flags & 0x80 else "<H"
                            data[off + 8 + 8:off + 8 + 24] = bytes(16)
                            data[off + 8 + 24:off + 8 + 26] = struct.pack(fmt, fwd.getsockname()[1])
                fwd.sendto(bytes(data), ("127.0.0.1", server_port))
            else:
                rec.datagram(proto, "s2c", data)
                data = bytearray(data)
                if proto == "pva":
                    for off, flags, command, payload in pva_messages(data):
                        if command == 0x04 and len(payload) >= 34:
                            fmt = ">H" if flags & 0x80 else "<H"
                            port = struct.unpack(fmt, payload[32:34])[0]
                            if port == server_tcp:
                                data[off + 8 + 32:off + 8 + 34] = struct.pack(fmt, proxy_tcp)
                else:
                    for off, hlen, cmd, dt, *_ in ca_messages(data):
                        if cmd == 6 and dt == server_tcp:
                            data[off + 4:off + 6] = struct.pack(">H", proxy_tcp)
                if client[0]:
                    us.sendto(bytes(data), client[0])
    us.close()
    fwd.close()


P4P_CLIENT = r"""
import sys, time
from p4p.client.thread import Context
P = sys.argv[1]
c = Context("pva")
c.get(P + "cam1:ArrayCounter_RBV")
c.get([P + "cam1:DataType", P + "cam1:Manufacturer_RBV", P + "cam1:AcquireTime"])
c.get(P + "cam1:ImageMode", request="field(value,alarm,timeStamp)")
c.put(P + "cam1:AcquireTime", 0.02)
c.put(P + "cam1:ImageMode", "Multiple")
c.put(P + "cam1:ImageMode", 2)
c.put(P + "cam1:NumImages", 3, wait=True)
c.put(P + "cam1:Acquire", 1)
got = []
s = c.monitor(P + "Pva1:Image", got.append, request="record[queueSize=4]")
s2 = c.monitor(P + "Stats1:MeanValue_RBV", got.append)
s3 = c.monitor(P + "Pva2:Image", got.append)
time.sleep(1.5)
s.close(); s2.close(); s3.close()
try:
    c.get(P + "NoSuchPV", timeout=1)
except Exception:
    pass
c.get(P + "Pva1:Image")
c.close()
"""

PYEPICS_CLIENT = r"""
import sys, time
import epics
from epics import ca
P = sys.argv[1]
epics.caget(P + "cam1:ArrayCounter_RBV")
epics.PV(P + "cam1:AcquireTime", form="ctrl").get_ctrlvars()
epics.PV(P + "cam1:ImageMode", form="ctrl").get(as_string=True)
epics.PV(P + "cam1:AcquireTime", form="time").get_timevars()
epics.caget(P + "cam1:DataType", as_string=True)
epics.caget(P + "cam1:Manufacturer_RBV")
epics.caget(P + "cam1:AcquireTime.EGU")
epics.caget(P + "cam1:AcquireTime.PREC")
epics.caput(P + "cam1:AcquireTime", 0.02, wait=True)
epics.caput(P + "cam1:ImageMode", "Multiple", wait=True)
epics.caput(P + "cam1:NumImages", 3, wait=True)
pv = epics.PV(P + "cam1:ArrayCounter_RBV", form="time")
arr = epics.PV(P + "Stats1:MeanValue_RBV", auto_monitor=True)
epics.caput(P + "cam1:Acquire", 1)
time.sleep(1.5)
pv.get()
epics.caget(P + "Pva1:Image")
epics.caget(P + "NoSuchPV", timeout=0.5)
"""


def run(cmd, env, stdin=None):
    p = subprocess.run(cmd, env=env, input=stdin, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        print(f"  ({pathlib.Path(cmd[0]).name} {cmd[1] if len(cmd) > 1 and len(cmd[1]) < 20 else ''} exit {p.returncode}: {p.stderr.strip()[-200:]})")


def cut(data, messages, limit):
    """The stream up to the last whole message that ends within `limit` bytes."""
    end = 0
    for m in messages:
        stop = m[0] + (8 + len(m[3]) if len(m) == 4 else m[1] + len(m[7]))
        if stop > limit:
            break
        end = stop
    return bytes(data[:end]) if end else bytes(data[:limit])


def write(out, target, data):
    d = out / target
    d.mkdir(parents=True, exist_ok=True)
    (d / ("capture-" + hashlib.sha1(data).hexdigest()[:16])).write_bytes(data)


def record(tag, body):
    body = body[:0xFFFF]
    return bytes([tag]) + struct.pack(">H", len(body)) + body


EIGER_SERIES = [
    "v2 --codec bslz4 --dtype uint16",
    "v2 --codec lz4 --dtype uint32 --channels threshold_1,threshold_2",
    "v2 --codec none --dtype uint8",
    "v1 --encoding bs16-lz4< --dtype uint16 --header-detail all",
    "v1 --encoding lz4< --dtype uint32 --header-detail basic",
    "v1 --encoding < --dtype uint8 --header-detail none",
    "v1 --encoding bslz4 --dtype uint16",
]


def eiger_seeds(out, max_bytes):
    """One file per message: version byte (0 v1, 1 v2), then its parts as records."""
    n = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, spec in enumerate(EIGER_SERIES):
            d = pathlib.Path(tmp) / str(i)
            subprocess.run([sys.executable, str(ROOT / "python" / "tools" / "eiger_replay.py"),
                            "--generate", *spec.split(), "--nimages", "2", "--height", "8",
                            "--width", "12", "--save", str(d)],
                           check=True, capture_output=True, timeout=120)
            for m in sorted(d.iterdir()):
                if m.is_dir():
                    parts = [f.read_bytes() for f in sorted(m.iterdir())]
                    seed = b"\x00" + b"".join(record(0, p) for p in parts)
                else:
                    seed = b"\x01" + record(0, m.read_bytes())
                if len(seed) <= max_bytes:
                    write(out, "eiger_stream", seed)
                    n += 1
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ndflow", default=str(ROOT / "target" / "release" / "ndflow"))
    ap.add_argument("--out", default=str(ROOT / "fuzz" / "corpus"))
    ap.add_argument("--max-bytes", type=int, default=16384)
    a = ap.parse_args()
    out = pathlib.Path(a.out)

    ca_s, ca_p, rep = free_tcp_udp_port(), free_tcp_udp_port(), free_udp_port()
    pva_s, pva_p = free_tcp_port(), free_tcp_port()
    bc_s, bc_p = free_udp_port(), free_udp_port()
    ioc_env = process_env(
        EPICS_CA_SERVER_PORT=str(ca_s), EPICS_CA_REPEATER_PORT=str(rep),
        EPICS_PVA_SERVER_PORT=str(pva_s), EPICS_PVA_BROADCAST_PORT=str(bc_s),
    )
    client_env = process_env(
        EPICS_CA_SERVER_PORT=str(ca_p), EPICS_CA_REPEATER_PORT=str(rep),
        EPICS_PVA_SERVER_PORT=str(pva_p), EPICS_PVA_BROADCAST_PORT=str(free_udp_port()),
        EPICS_PVA_ADDR_LIST=f"127.0.0.1:{bc_p}",
    )
    rec, stop = Recorder(), threading.Event()
    threads = [
        threading.Thread(target=tcp_proxy, args=("pva", pva_p, pva_s, rec, stop)),
        threading.Thread(target=tcp_proxy, args=("ca", ca_p, ca_s, rec, stop)),
        threading.Thread(target=udp_proxy, args=("pva", bc_p, bc_s, pva_s, pva_p, rec, stop)),
        threading.Thread(target=udp_proxy, args=("ca", ca_p, ca_s, ca_s, ca_p, rec, stop)),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        cfg = pathlib.Path(tmp) / "ioc.toml"
        cfg.write_text(CONFIG)
        log = open(pathlib.Path(tmp) / "ioc.log", "w+")
        ioc = subprocess.Popen([a.ndflow, "run", str(cfg), "--quiet", "--no-state"],
                               env=ioc_env, stdout=log, stderr=subprocess.STDOUT)
        try:
            for t in threads:
                t.start()
            time.sleep(2)
            if ioc.poll() is not None:
                log.seek(0)
                sys.exit("the IOC did not start:\n" + log.read())
            print("p4p")
            run([sys.executable, "-c", P4P_CLIENT, P], client_env)
            print("pyepics")
            run([sys.executable, "-c", PYEPICS_CLIENT, P], client_env)
            print("ndflow pv / ca")
            nd = a.ndflow
            run([nd, "pv", "get", P + "cam1:ArrayCounter_RBV", P + "cam1:DataType"], client_env)
            run([nd, "pv", "put", P + "cam1:AcquireTime", "0.03"], client_env)
            run([nd, "ca", "get", P + "cam1:ArrayCounter_RBV", P + "cam1:Manufacturer_RBV"],
                client_env)
            run([nd, "ca", "put", P + "cam1:AcquireTime", "0.04"], client_env)
            time.sleep(0.5)
        finally:
            stop.set()
            ioc.terminate()
            ioc.wait(timeout=20)
    for t in threads:
        t.join(timeout=5)

    counts = {}

    def put(target, data):
        if data:
            write(out, target, data)
            counts[target] = counts.get(target, 0) + 1

    for proto, direction, data in rec.streams:
        data = bytes(data)
        if proto == "pva":
            msgs = pva_messages(data)
            if direction == "c2s":
                put("pva_server", cut(data, msgs, a.max_bytes))
                recs = b"".join(record(c, bytes([f & 0x80]) + p) for _, f, c, p in msgs
                                if not f & 0x01 and c not in (0x01,))
                put("pva_server_cmd", recs[:a.max_bytes])
            else:
                put("pva_client", cut(data, msgs, a.max_bytes))
        else:
            msgs = ca_messages(data)
            if direction == "c2s":
                put("ca_server", cut(data, msgs, a.max_bytes))
                recs = b"".join(
                    record(c & 0xFF, struct.pack(">HIII", dt, cnt, p1, p2) + p)
                    for _, _, c, dt, cnt, p1, p2, p in msgs if c not in (0, 20, 21))
                put("ca_server_cmd", recs[:a.max_bytes])
            else:
                put("ca_client", cut(data, msgs, a.max_bytes))
                seen = set()
                for _, _, c, dt, cnt, _, _, p in msgs:
                    if c in (1, 15) and p and (dt, min(cnt, 2)) not in seen:
                        seen.add((dt, min(cnt, 2)))
                        put("ca_dbr", struct.pack(">HI", dt, cnt) + p[:a.max_bytes])
    seen = set()
    for proto, direction, data in rec.datagrams:
        key = (proto, direction, data[:40])
        if key in seen:
            continue
        seen.add(key)
        if direction == "c2s":
            put(f"{proto}_datagram", data)
        else:
            # search replies are what a client reads
            put(f"{proto}_client", data)
    counts["eiger_stream"] = eiger_seeds(out, a.max_bytes)
    for t, n in sorted(counts.items()):
        print(f"{t}: {n} files")


if __name__ == "__main__":
    main()
