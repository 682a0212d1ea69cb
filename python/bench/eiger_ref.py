"""Python side of `ndflow bench eiger`: the stream replayer (pyzmq PUSH, copy=False, the same
for the driver and the reference), the reference receiver (pyzmq PULL, copy=False) and the C
decoders (dectris-compression, bitshuffle) timed on one core. Long-running workers
(ndflow-bench's host::PyWorker): one JSON request per line on stdin, one JSON answer per line
on stdout; errors come back as {"error": "..."}.

usage: eiger_ref.py replayer | eiger_ref.py pull

replayer requests:
  {"op": "prepare", "capture": DIR|null, "frames": N, "dir": WORK}
      Builds the series: the start, N image messages and the end. With DIR (tickit-devices'
      eiger/data: stream2/{start,image,end}.cbor, a real EIGER2 16M capture, and frame_sample,
      a v1 bs16-lz4< blob) every image message is the captured one with its own image_id
      (0..N-1, patched in the bytes); without, eiger_peer.make_v2_series makes a 4148x4362
      uint16 bslz4 series of the same structure. Writes WORK/image.cbor (the template image
      message), WORK/start.cbor (the start sent: tickit's recording without the 4-byte stubs
      it holds for flatfield, pixel_mask and the countrate table, i.e. header_detail "basic",
      plus image_dtype), WORK/start_recorded.cbor (as recorded) and WORK/frame_sample (v1
      blob, when there is one) for the Rust side.
      -> {"source", "image_bytes", "payload_bytes", "width", "height", "v1": bool}
  {"op": "bind"}   -> {"port": P}: a fresh python/tools/eiger_replay.py Replayer (PUSH on
      tcp://127.0.0.1:P, SNDHWM 1000, copy=False sends)
  {"op": "send", "frames": n}   start + n images + end through it (the first send waits for a
      PULL peer), then close, flushing -> {"messages", "images", "bytes", "seconds"}
  {"op": "decode", "lib": "dectris"|"bitshuffle", "payload": "v2"|"v1", "calls": K}
      K back-to-back decodes of the payload (a fresh output each, as the libraries return)
      -> {"seconds" (wall), "cpu" (process CPU), "checksum": sum of the pixels}
pull requests:
  {"op": "pull", "port": P, "messages": M, "timeout": S}
      Connects a PULL (copy=False) and receives M messages
      -> {"received", "bytes", "first_to_last" (s), "cpu" (process CPU s while receiving)}
"""

import json
import os
import struct
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import zmq  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tools"))
sys.path.insert(0, str(HERE.parent / "tests"))

IMAGE_ID_KEY = b"\x68image_id"


def cbor_uint_len(b, i):
    """Length of the CBOR unsigned integer head at b[i]."""
    ai = b[i] & 0x1F
    if b[i] >> 5 != 0:
        raise ValueError(f"not an unsigned integer at {i}: {b[i]:#x}")
    return 1 + {24: 1, 25: 2, 26: 4, 27: 8}.get(ai, 0)


def with_image_id(template, image_id):
    """The image message `template` with its image_id replaced (fixed 4-byte encoding)."""
    k = template.find(IMAGE_ID_KEY)
    if k < 0:
        raise ValueError("no image_id key in the image message")
    v = k + len(IMAGE_ID_KEY)
    n = cbor_uint_len(template, v)
    return template[:v] + b"\x1a" + struct.pack(">I", image_id) + template[v + n:]


def payload_of(image_msg):
    """The bslz4 payload (12-byte header included) of a v2 image message, and (h, w)."""
    import cbor2

    m = cbor2.loads(image_msg)
    if isinstance(m, cbor2.CBORTag):
        m = m.value
    (ch,) = list(m["data"].values())[:1]
    dims, arr = ch.value
    inner = arr.value
    if isinstance(inner, cbor2.CBORTag) and inner.tag == 56500:
        algo, elem, blob = inner.value
        if algo != "bslz4":
            raise ValueError(f"payload is {algo}, the bench wants bslz4")
        return bytes(blob), tuple(dims)
    raise ValueError("the image is not compressed")


# Header arrays that tickit's recording holds as 4-byte stubs instead of tag-40 arrays; a
# detector with header_detail "basic" leaves them out, as done here.
STUB_ARRAYS = ("flatfield", "pixel_mask", "countrate_correction_lookup_table")


def basic_start(raw):
    """tickit's recorded start message as header_detail "basic" sends it: without the stubbed
    arrays, with image_dtype (added to the stream in 2023), 55799-prefixed."""
    import cbor2

    m = cbor2.loads(raw)
    if isinstance(m, cbor2.CBORTag):
        m = m.value
    m = {k: v for k, v in m.items() if k not in STUB_ARRAYS}
    m.setdefault("image_dtype", "uint16")
    return b"\xd9\xd9\xf7" + cbor2.dumps(m)


class Replayer:
    def __init__(self):
        self.sock = None
        self.start = self.end = None
        self.images = []
        self.payloads = {}
        self.shape = None

    def prepare(self, r):
        frames = int(r["frames"])
        work = Path(r["dir"])
        work.mkdir(parents=True, exist_ok=True)
        cap = r.get("capture")
        v1 = None
        if cap:
            cap = Path(cap)
            s2 = cap / "stream2"
            self.start = basic_start((s2 / "start.cbor").read_bytes())
            template = (s2 / "image.cbor").read_bytes()
            self.end = (s2 / "end.cbor").read_bytes()
            if (cap / "frame_sample").exists():
                v1 = (cap / "frame_sample").read_bytes()
            source = f"real EIGER2 16M capture ({cap})"
        else:
            import eiger_peer

            msgs, _ = eiger_peer.make_v2_series(
                channels=("threshold_1",), dtype="uint16", nimages=1, height=4362,
                width=4148, codec="bslz4", series_id=1)
            self.start, template, self.end = msgs[0], msgs[1], msgs[-1]
            source = "generated (eiger_peer.make_v2_series, 4148x4362 uint16 bslz4)"
        payload, dims = payload_of(template)
        self.shape = dims
        self.payloads = {"v2": payload}
        if v1 is not None:
            self.payloads["v1"] = v1
            (work / "frame_sample").write_bytes(v1)
        (work / "image.cbor").write_bytes(template)
        (work / "start.cbor").write_bytes(self.start)
        if cap:
            (work / "start_recorded.cbor").write_bytes((cap / "stream2" / "start.cbor").read_bytes())
        self.images = [with_image_id(template, i) for i in range(frames)]
        return {"source": source, "image_bytes": len(self.images[0]),
                "payload_bytes": len(payload), "height": dims[0], "width": dims[1],
                "v1": v1 is not None}

    def bind(self, _r):
        from eiger_replay import Replayer as PushReplayer

        self.close()
        self.sock = PushReplayer("tcp://127.0.0.1:0", sndhwm=1000, linger_s=60.0)
        return {"port": int(self.sock.endpoint.rsplit(":", 1)[1])}

    def send(self, r):
        n = int(r["frames"])
        if n > len(self.images):
            raise ValueError(f"only {len(self.images)} images prepared")
        if self.sock is None:
            raise ValueError("send before bind")
        stats = self.sock.run([self.start, *self.images[:n], self.end])
        self.close()  # lingers until everything is out
        return {"messages": stats.messages, "images": n, "bytes": stats.bytes,
                "seconds": stats.seconds}

    def decode(self, r):
        payload = self.payloads[r.get("payload", "v2")]
        calls = int(r.get("calls", 1))
        h, w = self.shape
        if r["lib"] == "dectris":
            try:
                from dectris.compression import decompress
            except ImportError:
                # Not in requirements-test.txt (no wheel: pip builds it from source).
                raise RuntimeError(
                    "dectris-compression is not installed in this Python: "
                    "python/tests/eiger_peer.py install-dectris installs it (about four minutes)"
                ) from None

            def one():
                return np.frombuffer(decompress(payload, "bslz4", elem_size=2), dtype="<u2")
        elif r["lib"] == "bitshuffle":
            import bitshuffle

            block = struct.unpack(">I", payload[8:12])[0] // 2
            body = np.frombuffer(payload, dtype=np.uint8, offset=12)

            def one():
                return bitshuffle.decompress_lz4(body, (h, w), np.dtype("<u2"), block)
        else:
            raise ValueError(f"unknown lib {r['lib']}")
        out = one()  # checked outside the timing
        checksum = int(out.astype(np.uint64).sum())
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(calls):
            one()
        return {"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0,
                "checksum": checksum}

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def pull(ctx, r):
    s = ctx.socket(zmq.PULL)
    s.setsockopt(zmq.RCVTIMEO, int(float(r.get("timeout", 60)) * 1000))
    s.setsockopt(zmq.LINGER, 0)
    s.connect(f"tcp://127.0.0.1:{int(r['port'])}")
    want = int(r["messages"])
    got = nbytes = 0
    t_first = t_last = None
    c0 = None
    try:
        while got < want:
            f = s.recv(copy=False)
            t_last = time.perf_counter()
            if t_first is None:
                t_first = t_last
                c0 = time.process_time()
            got += 1
            nbytes += len(f.buffer)
    except zmq.Again:
        pass
    finally:
        s.close()
    cpu = time.process_time() - c0 if c0 is not None else 0.0
    return {"received": got, "bytes": nbytes,
            "first_to_last": (t_last - t_first) if t_first is not None else 0.0, "cpu": cpu}


def main():
    role = sys.argv[1] if len(sys.argv) > 1 else ""
    if role not in ("replayer", "pull"):
        print(__doc__, file=sys.stderr)
        return 2
    rep = Replayer() if role == "replayer" else None
    ctx = zmq.Context() if role == "pull" else None
    for line in sys.stdin:
        try:
            r = json.loads(line)
            op = r["op"]
            if rep is not None and op in ("prepare", "bind", "send", "decode"):
                out = getattr(rep, op)(r)
            elif ctx is not None and op == "pull":
                out = pull(ctx, r)
            else:
                raise ValueError(f"{role}: unknown op {op}")
        except Exception as e:  # reported to the Rust side, which stops the bench
            out = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
