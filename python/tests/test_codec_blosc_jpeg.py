"""Interop of ndflow-codec's `blosc` and `jpeg` modules with the C libraries.

Drives the Rust example `blosc_jpeg_cli` (rust_examples.py) and compares with python-blosc (c-blosc 1.21) and Pillow (libjpeg-turbo):

* our Blosc frames for every compressor x shuffle x level x type size 1/2/4/8 decode with
  `blosc.decompress` bit-exactly, python-blosc's frames decode with ours, and the frames are
  byte-identical to python-blosc's for the same settings;
* our JPEGs (mono and RGB) decode with Pillow with the right size and mode and a small error,
  and Pillow's JPEGs (baseline, progressive, 4:4:4) decode with ours.

`python test_codec_blosc_jpeg.py bench` prints python-blosc's speed (nthreads=1) next to ours
on the same data (the frames of benches/blosc_jpeg.rs) in one session.
"""

import io
import pathlib
import subprocess
import sys
import timeit

import blosc
import numpy as np
import pytest
from PIL import Image
from rust_examples import example_bin

ROOT = pathlib.Path(__file__).resolve().parents[2]

# python-blosc starts with one thread per core; c-blosc then places blocks in the order its
# threads finish, so frames are valid but not reproducible. One thread, as ours by default.
blosc.set_nthreads(1)

COMPRESSORS = ["blosclz", "lz4", "lz4hc", "zlib", "zstd"]  # python-blosc has no snappy
SHUFFLES = {"none": blosc.NOSHUFFLE, "byte": blosc.SHUFFLE, "bit": blosc.BITSHUFFLE}
LEVELS = [1, 5, 9]
TYPE_SIZES = [1, 2, 4, 8]


def _build_cli():
    return example_bin("blosc_jpeg_cli")


@pytest.fixture(scope="session")
def cli():
    path = _build_cli()
    assert path.exists(), path
    return path


@pytest.fixture(scope="session")
def info(cli):
    out = subprocess.run([str(cli), "info"], check=True, capture_output=True, text=True).stdout
    return dict(line.split("=", 1) for line in out.split())


@pytest.fixture
def run(cli, tmp_path):
    counter = [0]

    def _run(*args, data):
        counter[0] += 1
        src = tmp_path / f"in{counter[0]}"
        dst = tmp_path / f"out{counter[0]}"
        src.write_bytes(bytes(data))
        res = subprocess.run(
            [str(cli), *map(str, args), str(src), str(dst)], capture_output=True, text=True
        )
        if res.returncode != 0:
            raise RuntimeError(res.stderr.strip())
        return dst.read_bytes(), res.stdout

    return _run


def _require(info, cname):
    # ndflow-codec builds c-blosc with every compressor python-blosc has; one missing is a
    # build regression, not something to test around.
    have = info["blosc_compressors"].split(",")
    if cname not in have:
        pytest.fail(
            f"{cname} not compiled into this c-blosc ({have}): ndflow-codec needs libz-sys / "
            "zstd-sys in its [dependencies] (see crates/ndflow-codec/build.rs)"
        )


def _blosc_data(ts, seed):
    """Smooth values with noise, an odd element count (leftover block and bytes)."""
    rng = np.random.default_rng(seed)
    n = 30_011
    dtype = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[ts]
    base = (np.arange(n) // 3 * 7) % 50_000
    a = (base + rng.poisson(2.0, n)).astype(dtype)
    a[::101] = rng.integers(0, np.iinfo(dtype).max, size=a[::101].shape, dtype=dtype)
    return a.tobytes()


# ---- Blosc -----------------------------------------------------------------------------


def test_build_info(info):
    assert info["blosc_version"].startswith("1.21.")
    assert info["blosc_own_build"] == "true"
    for c in ("blosclz", "lz4", "lz4hc"):
        assert c in info["blosc_compressors"].split(",")
    flags = pathlib.Path("/proc/cpuinfo").read_text() if pathlib.Path("/proc/cpuinfo").exists() else ""
    if " avx2" in flags:
        assert info["blosc_shuffle_impl"] == "avx2"


@pytest.mark.parametrize("shuffle", list(SHUFFLES))
@pytest.mark.parametrize("cname", COMPRESSORS)
def test_blosc_both_directions(run, info, cname, shuffle):
    _require(info, cname)
    identical = 0
    for ts in TYPE_SIZES:
        raw = _blosc_data(ts, seed=ts * 10 + len(cname))
        for clevel in LEVELS:
            ours, _ = run(
                "compress", "blosc", "--compressor", cname, "--clevel", clevel,
                "--shuffle", shuffle, "--typesize", ts, data=raw,
            )
            assert blosc.decompress(ours) == raw, (cname, shuffle, ts, clevel)
            theirs = blosc.compress(
                raw, typesize=ts, clevel=clevel, shuffle=SHUFFLES[shuffle], cname=cname
            )
            back, _ = run("decompress", "blosc", data=theirs)
            assert back == raw, (cname, shuffle, ts, clevel)
            identical += ours == theirs
    # Same c-blosc 1.21 algorithms and, for BloscLZ and LZ4 (1.10.0 on both sides), the same
    # codec: the frames are byte-identical. Zlib/Zstd output may differ between library
    # versions, so there only decoding both ways is required.
    if cname in ("blosclz", "lz4", "lz4hc"):
        assert identical == len(TYPE_SIZES) * len(LEVELS), f"{identical} identical frames"


def test_blosc_block_sizes_and_threads(run, info):
    raw = _blosc_data(4, seed=99) * 8
    for bs in [0, 256, 4096, 100_000]:
        ours, _ = run(
            "compress", "blosc", "--compressor", "lz4", "--clevel", 5, "--shuffle", "bit",
            "--typesize", 4, "--blocksize", bs, "--threads", 3, data=raw,
        )
        assert blosc.decompress(ours) == raw
    blosc.set_nthreads(4)
    try:
        for bs in [0, 512, 65_536]:
            blosc.set_blocksize(bs)
            theirs = blosc.compress(raw, typesize=4, clevel=7, shuffle=blosc.SHUFFLE, cname="lz4")
            for threads in (1, 2):
                back, _ = run("decompress", "blosc", "--threads", threads, data=theirs)
                assert back == raw
    finally:
        blosc.set_blocksize(0)
        blosc.set_nthreads(1)


def test_blosc_level0_and_incompressible(run):
    rng = np.random.default_rng(5)
    noise = rng.integers(0, 256, 50_000, dtype=np.uint8).tobytes()
    for clevel in (0, 9):
        ours, _ = run(
            "compress", "blosc", "--compressor", "lz4", "--clevel", clevel, "--typesize", 1,
            data=noise,
        )
        assert len(ours) == len(noise) + 16  # stored
        assert ours == blosc.compress(noise, typesize=1, clevel=clevel, cname="lz4")
        assert blosc.decompress(ours) == noise


def test_blosc_rejects_corrupt_frames(run):
    raw = _blosc_data(2, seed=1)
    frame = blosc.compress(raw, typesize=2, clevel=5, shuffle=blosc.SHUFFLE, cname="lz4")
    for bad in (frame[: len(frame) // 2], frame[:15], b"\x03" + frame[1:]):
        with pytest.raises(RuntimeError, match="corrupt"):
            run("decompress", "blosc", data=bad)


# ---- JPEG ------------------------------------------------------------------------------


def _image(w, h, c, seed=0):
    """Smooth gradients plus a blob and mild noise, uint8, shape (h, w) or (h, w, 3)."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    blob = 80 * np.exp(-((x - w / 2) ** 2 + (y - h / 3) ** 2) / 800)
    chans = [20 + 1.5 * x, 20 + 1.5 * y, 128 + 60 * np.sin((x + y) / 40)][:c]
    rng = np.random.default_rng(seed)
    img = np.stack([0.6 * ch + blob + rng.normal(0, 1, ch.shape) for ch in chans], axis=-1)
    img = np.clip(img, 0, 255).astype(np.uint8)
    return img[..., 0] if c == 1 else img


def _diff(a, b):
    d = np.abs(a.astype(np.int16) - b.astype(np.int16))
    return int(d.max()), float(d.mean())


@pytest.mark.parametrize("c", [1, 3])
@pytest.mark.parametrize("w,h", [(320, 240), (97, 61)])
def test_jpeg_ours_decodes_with_pillow(run, w, h, c):
    px = _image(w, h, c)
    for q, max_err, mean_err in [(90, 24, 2.0), (50, 48, 4.0), (100, 8, 1.0)]:
        jpg, _ = run(
            "compress", "jpeg", "--width", w, "--height", h, "--components", c,
            "--quality", q, data=px.tobytes(),
        )
        im = Image.open(io.BytesIO(jpg))
        assert im.format == "JPEG"
        assert im.size == (w, h)
        assert im.mode == ("L" if c == 1 else "RGB")
        pil = np.asarray(im)
        mx, mean = _diff(pil, px)
        assert mx <= max_err and mean <= mean_err, (q, mx, mean)
        # Both sides are libjpeg-turbo: our own decoder agrees with Pillow's.
        back, dims = run("decompress", "jpeg", data=jpg)
        assert dims.split() == [str(w), str(h), str(c)]
        ours = np.frombuffer(back, np.uint8).reshape(pil.shape)
        assert _diff(ours, pil)[0] <= 1, q
    if c == 3:
        # Chroma subsampling as libjpeg's default (NDPluginCodec): 4:2:0.
        jpg, _ = run(
            "compress", "jpeg", "--width", w, "--height", h, "--components", 3,
            "--quality", 90, data=px.tobytes(),
        )
        from PIL import JpegImagePlugin

        assert JpegImagePlugin.get_sampling(Image.open(io.BytesIO(jpg))) == 2


@pytest.mark.parametrize("mode", ["L", "RGB"])
@pytest.mark.parametrize(
    "opts",
    [
        {"quality": 90},
        {"quality": 75, "progressive": True},
        {"quality": 95, "subsampling": 0, "optimize": True},
        {"quality": 20, "subsampling": 1},
    ],
)
def test_jpeg_pillow_decodes_with_ours(run, mode, opts):
    w, h = 203, 150
    px = _image(w, h, 1 if mode == "L" else 3, seed=3)
    buf = io.BytesIO()
    Image.fromarray(px, mode).save(buf, "JPEG", **opts)
    back, dims = run("decompress", "jpeg", data=buf.getvalue())
    c = 1 if mode == "L" else 3
    assert dims.split() == [str(w), str(h), str(c)]
    pil = np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert(mode))
    ours = np.frombuffer(back, np.uint8).reshape(pil.shape)
    assert _diff(ours, pil)[0] <= 1, opts
    if opts["quality"] >= 90:
        mx, mean = _diff(ours, px)
        assert mx <= 24 and mean <= 2.0, (mx, mean)


def test_jpeg_rejects_garbage(run):
    with pytest.raises(RuntimeError, match="jpeg"):
        run("decompress", "jpeg", data=b"\xff\xd8\xff\xe0 not really a jpeg")


# ---- same data as the Rust bench ---------------------------------------------------------

POISSON_HALF_CDF = np.array(
    [
        0x9B4597E37CB04FF3, 0xE8E863D53B0877ED, 0xFC5116D1AA9E81EC, 0xFF8D34A667E22E41,
        0xFFF4B860FF8AA3CB, 0xFFFF125A0EB515F3, 0xFFFFEF2ECFF89F76, 0xFFFFFEF4DDC69700,
        0xFFFFFFF13EA37678, 0xFFFFFFFF4405111B, 0xFFFFFFFFF77D25A3, 0xFFFFFFFFFFA583AA,
    ],
    dtype=np.uint64,
)


def poisson_frame(n=1024 * 1024, seed=2026):
    """Poisson(0.5) from splitmix64 and integer CDF thresholds, as benches/blosc_jpeg.rs."""
    i = np.arange(1, n + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + i * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return np.searchsorted(POISSON_HALF_CDF, z, side="right").astype("<u2")


def ramp_frame(w=1024, h=1024):
    y, x = np.mgrid[0:h, 0:w]
    return ((x + y) * 16).astype("<u2")


def test_bench_data_matches_rust(cli, tmp_path):
    for kind, ref in (("poisson", poisson_frame()), ("ramp", ramp_frame().ravel())):
        out = tmp_path / kind
        subprocess.run([str(cli), "gen", kind, str(out)], check=True)
        assert out.read_bytes() == ref.tobytes(), kind
    p = poisson_frame()
    assert abs(p.mean() - 0.5) < 0.005 and abs(p.var() - 0.5) < 0.01


def _bench(cli, tmp, iters=50):
    """python-blosc (nthreads=1, timeit best of `iters`) and ours on the same frames."""
    blosc.set_nthreads(1)
    rows = []
    for kind, frame in (("poisson", poisson_frame()), ("ramp", ramp_frame())):
        raw = frame.tobytes()
        path = tmp / f"{kind}.u16"
        path.write_bytes(raw)
        for shuffle in ("byte", "bit"):
            kw = dict(typesize=2, clevel=5, shuffle=SHUFFLES[shuffle], cname="lz4")
            c = blosc.compress(raw, **kw)
            tc = min(timeit.repeat(lambda: blosc.compress(raw, **kw), number=1, repeat=iters))
            td = min(timeit.repeat(lambda: blosc.decompress(c), number=1, repeat=iters))
            mb = len(raw) / 1e6
            ours = subprocess.run(
                [str(cli), "bench", "blosc", "--compressor", "lz4", "--clevel", "5",
                 "--shuffle", shuffle, "--typesize", "2", "--iters", str(iters), str(path)],
                check=True, capture_output=True, text=True,
            ).stdout.strip()
            rows.append(
                f"{kind:8s} lz4/5 {shuffle:4s}  python-blosc: ratio={len(raw) / len(c):.3f} "
                f"compress_MBps={mb / tc:.0f} decompress_MBps={mb / td:.0f}\n"
                f"{'':19s}ndflow:       {ours}"
            )
    return rows


if __name__ == "__main__" and sys.argv[1:] == ["bench"]:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        print("\n".join(_bench(_build_cli(), pathlib.Path(d))))
