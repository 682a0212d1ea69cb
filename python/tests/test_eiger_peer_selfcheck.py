"""Self-checks of the EIGER test peers (eiger_peer.py, python/tools/eiger_replay.py): the golden
series generators against the reference decoders, the replayer against a pyzmq PULL, and the
tickit-devices simulator's streams against the oracles. All on 127.0.0.1.

The tickit test needs the simulator's own virtualenv (built once per session under the
temporary directory, ~30 s with a warm pip cache, or NDFLOW_TICKIT_VENV); it is skipped with
pip's last error line when that venv cannot be built.
"""

import json
import struct
import subprocess
import sys
from pathlib import Path

import cbor2
import numpy as np
import pytest
import zmq

from eiger_peer import (
    TICKIT_FRAME_DTYPE,
    TICKIT_FRAME_SHAPE,
    Puller,
    decode_v1_data,
    decode_v1_image,
    decode_v2,
    dectris_decompress,
    make_v1_series,
    make_v2_series,
    split_v1,
    split_v2,
    v1_htype,
)

TOOLS = Path(__file__).resolve().parents[1] / "tools"
sys.path.insert(0, str(TOOLS))
import eiger_replay  # noqa: E402



def _lz4_hdf5_blocks(blob):
    """(block sizes, raw-stored count) of an HDF5-LZ4 framed buffer."""
    total, block = struct.unpack(">QI", blob[:12])
    off, sizes, raw = 12, [], 0
    left = total
    while left > 0:
        n = struct.unpack(">I", blob[off:off + 4])[0]
        this = min(block, left)
        raw += n == this
        sizes.append(n)
        off += 4 + n
        left -= this
    assert off == len(blob)
    return sizes, raw


# ---------------------------------------------------------------------------------------------
# Generators against the oracles
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", ["bslz4", "lz4", "none"])
@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32"])
def test_v2_series_round_trips_through_dectris_compression(dtype, codec):
    # 131 x 97: not a multiple of 8 elements (bitshuffle's verbatim tail), several 8 KiB blocks,
    # the last one full of noise (an LZ4 block that does not shrink is stored raw).
    h, w = 131, 97
    msgs, expected = make_v2_series(dtype=dtype, codec=codec, nimages=2, height=h, width=w,
                                    series_id=7, noisy_rows=50)
    assert len(msgs) == 4 and len(expected) == 2
    assert all(m[:3] == b"\xd9\xd9\xf7" for m in msgs)  # self-describe tag 55799
    start, end = decode_v2(msgs[0]), decode_v2(msgs[-1])
    assert start.type == "start" and end.type == "end"
    assert list(start.fields)[0] == "type"
    assert list(start.fields["channels"]) == ["threshold_1", "threshold_2", "difference"]
    assert (start.fields["image_dtype"], start.fields["image_size_x"],
            start.fields["image_size_y"]) == (dtype, w, h)
    assert end.fields["series_id"] == 7
    assert end.fields["series_unique_id"] == start.fields["series_unique_id"]
    top = np.iinfo(dtype).max
    for i, (msg, want) in enumerate(zip(msgs[1:-1], expected)):
        got = decode_v2(msg)
        assert got.type == "image" and got.fields["image_id"] == i
        assert got.fields["start_time"][1] == 50_000_000
        assert list(got.arrays) == list(start.fields["channels"])
        for ch, arr in got.arrays.items():
            assert arr.dtype == np.dtype(dtype) and arr.shape == (h, w)
            np.testing.assert_array_equal(arr, want[ch])
            algo, mod, blob = got.payloads[ch]
            if codec == "none":
                assert algo is None
                continue
            # The DECTRIS example's way: decompress the tag-56500 triple directly.
            raw = dectris_decompress()(blob, algo, elem_size=mod)
            assert raw == want[ch].astype(np.dtype(dtype).newbyteorder("<")).tobytes()
            total, block = struct.unpack(">QI", blob[:12])
            assert (total, block) == (h * w * np.dtype(dtype).itemsize, 8192)
            if codec == "bslz4":
                assert (algo, mod) == ("bslz4", np.dtype(dtype).itemsize)
                # bitshuffle (the v1 path) decodes the same chunk identically.
                again = decode_v1_data(blob, [w, h], dtype, f"bs{mod * 8}-lz4<")
                np.testing.assert_array_equal(again, want[ch])
            else:
                assert (algo, mod) == ("lz4", 0)
                sizes, stored_raw = _lz4_hdf5_blocks(blob)
                assert len(sizes) > 1
                assert stored_raw >= 1
        assert got.arrays["difference"].max() == top  # difference hits the dtype maximum
        assert got.arrays["threshold_1"].min() == 0


def test_v2_series_difference_channel_hits_65535_and_frames_differ():
    msgs, expected = make_v2_series(nimages=2, height=64, width=64, noisy_rows=0)
    assert (expected[0]["difference"] == 65535).any()
    assert not np.array_equal(expected[0]["threshold_1"], expected[1]["threshold_1"])
    # channel order in the image map follows the start message's channel list
    assert list(cbor2.loads(msgs[1])["data"]) == ["threshold_1", "threshold_2", "difference"]


@pytest.mark.parametrize(
    "dtype,encoding",
    [("uint8", "<"), ("uint16", "<"), ("uint32", "<"), ("uint16", "lz4<"), ("uint32", "lz4<"),
     ("uint8", "bs8-lz4<"), ("uint16", "bs16-lz4<"), ("uint32", "bs32-lz4<")],
)
@pytest.mark.parametrize("detail", ["none", "basic", "all"])
def test_v1_series_round_trips_through_bitshuffle_and_lz4(dtype, encoding, detail):
    h, w = 75, 93
    appendix = '{"user": "appendix"}' if detail == "all" else None
    msgs, expected = make_v1_series(dtype=dtype, encoding=encoding, nimages=2, height=h,
                                    width=w, series=3, header_detail=detail,
                                    header_appendix=appendix, image_appendix=appendix)
    header, images, end = msgs[0], msgs[1:-1], msgs[-1]
    want_parts = {"none": 1, "basic": 2, "all": 8}[detail] + (appendix is not None)
    assert len(header) == want_parts
    assert json.loads(header[0]) == {"htype": "dheader-1.0", "series": 3,
                                     "header_detail": detail}
    assert json.loads(end[0]) == {"htype": "dseries_end-1.0", "series": 3}
    for i, (parts, want) in enumerate(zip(images, expected)):
        assert len(parts) == 4 + (appendix is not None)
        img = decode_v1_image(parts)
        assert (img.series, img.frame, img.encoding) == (3, i, encoding)
        assert json.loads(parts[1])["shape"] == [w, h]  # v1 shape is [width, height]
        assert img.array.shape == (h, w) and img.array.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(img.array, want)
        assert img.payload == parts[2]
        if encoding.startswith("bs"):
            assert struct.unpack(">QI", parts[2][:12]) == (want.nbytes, 8192)
        assert img.appendix == (appendix.encode() if appendix else None)
    # Everything concatenated into one ZeroMQ message still splits into the logical messages
    # (tickit sends a header and the first image as one message).
    flat = [p for m in msgs for p in m]
    assert split_v1(flat) == msgs


# ---------------------------------------------------------------------------------------------
# The replayer
# ---------------------------------------------------------------------------------------------


def _pull_all(endpoint, n, timeout=10.0):
    ctx = zmq.Context()
    s = ctx.socket(zmq.PULL)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(endpoint)
    got = []
    try:
        while len(got) < n:
            assert s.poll(int(timeout * 1000)), f"only {len(got)} of {n} messages arrived"
            got.append(s.recv_multipart())
    finally:
        s.close(0)
        ctx.term()
    return got


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_replayer_delivers_what_it_was_given(version, tmp_path):
    if version == "v2":
        msgs, _ = make_v2_series(nimages=3, height=40, width=56)
    else:
        msgs, _ = make_v1_series(nimages=3, height=40, width=56, header_detail="all")
    # the directory layout round-trips
    eiger_replay.save_dir(tmp_path / "series", msgs)
    v, loaded = eiger_replay.load_dir(tmp_path / "series")
    assert v == version and loaded == msgs
    with eiger_replay.Replayer("tcp://127.0.0.1:0") as r:
        assert r.endpoint.startswith("tcp://127.0.0.1:")
        r.start(loaded, repeat=2, rate=0)
        got = _pull_all(r.endpoint, 2 * len(msgs))
        stats = r.join(10)
    sent = [m if isinstance(m, list) else [m] for m in msgs] * 2
    assert got == sent
    assert stats.messages == 2 * len(msgs)
    assert stats.bytes == sum(len(p) for m in sent for p in m)


def test_replayer_paces_at_the_set_rate():
    msgs = [b"x" * 1000] * 20
    with eiger_replay.Replayer(0) as r:
        r.start(msgs, repeat=1, rate=200.0)
        _pull_all(r.endpoint, 20)
        stats = r.join(10)
    # 20 messages at 200/s: 19 intervals of 5 ms after the first send
    assert 0.08 <= stats.seconds < 0.5


def test_replayer_refuses_non_loopback():
    with pytest.raises(ValueError):
        eiger_replay.Replayer("tcp://0.0.0.0:0")


def test_replayer_script_generates_and_sends(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, str(TOOLS / "eiger_replay.py"), "--port", "0", "--generate", "v2",
         "--nimages", "2", "--height", "32", "--width", "48", "--repeat", "3"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        first = proc.stderr.readline()
        assert first.startswith("bound tcp://127.0.0.1:"), first
        endpoint = first.split()[1].rstrip(":")
        got = _pull_all(endpoint, 3 * 4)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert [decode_v2(m[0]).type for m in got[:4]] == ["start", "image", "image", "end"]
    assert out.strip().startswith("sent 12 messages, ")


# ---------------------------------------------------------------------------------------------
# tickit-devices' EIGER
# ---------------------------------------------------------------------------------------------


def test_tickit_streams_decode_to_the_16m_frame(tickit_eiger):
    eiger = tickit_eiger(streams=("v1", "v2"))
    assert eiger.host_arg() == f"127.0.0.1:{eiger.rest_port}"
    assert eiger.get("detector", "status", "state")["value"] in ("na", "idle", "ready")
    frames = {}
    for stream in ("v1", "v2"):
        with Puller(eiger.endpoint(stream)) as pull:
            eiger.acquire(stream, nimages=3, frame_time=0.02)
            msgs = pull.collect(stream, until_ends=2, timeout=20, quiet=3.0)
        if stream == "v1":
            kinds = [v1_htype(m) for m in msgs]
            assert kinds == ["dheader-1.0"] + ["dimage-1.0"] * 3 + ["dseries_end-1.0"] * 2
            images = [decode_v1_image(m) for m in msgs[1:4]]
            assert [i.frame for i in images] == [0, 1, 2]
            assert {i.encoding for i in images} == {"bs16-lz4<"}
            arrays = [i.array for i in images]
            payloads = [i.payload for i in images]
        else:
            decoded = [decode_v2(m) for m in msgs]
            assert [d.type for d in decoded] == ["start", "image", "image", "image", "end",
                                                  "end"]
            images = decoded[1:4]
            assert [d.fields["image_id"] for d in images] == [0, 1, 2]
            assert all(list(d.arrays) == ["threshold_1"] for d in images)
            arrays = [d.arrays["threshold_1"] for d in images]
            payloads = [d.payloads["threshold_1"][2] for d in images]
            assert {d.payloads["threshold_1"][:2] for d in images} == {("bslz4", 2)}
            # bitshuffle decodes the v2 chunk like dectris-compression does
            np.testing.assert_array_equal(
                decode_v1_data(payloads[0], TICKIT_FRAME_SHAPE[::-1], "uint16", "bs16-lz4<"),
                arrays[0])
        for a in arrays:
            assert a.shape == TICKIT_FRAME_SHAPE and a.dtype == TICKIT_FRAME_DTYPE
            np.testing.assert_array_equal(a, arrays[0])  # tickit replays one capture
        assert all(p[:12].hex() == "0000000002282c1000002000" for p in payloads)
        frames[stream] = arrays[0]
    # v1 and v2 replay different captures of the same detector
    assert 0 < int((frames["v1"] != frames["v2"]).sum()) < 10_000


def test_split_v2_walks_parts():
    msgs, _ = make_v2_series(nimages=1, height=16, width=16)
    assert split_v2(msgs[:2]) == msgs[:2]
