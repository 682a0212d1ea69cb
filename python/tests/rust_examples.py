"""The Rust example binaries some tests drive (`crates/*/examples/`: pva_serve, ca_serve,
hdf5_write, io_write, codec_cli, ...), found in one place.

With NDFLOW_EXAMPLES_DIR set (scripts/test.sh builds every example before the Python tests
and sets it), the binary is taken from there and cargo is not run: the test script compiles
the Rust tests in the background meanwhile, and a cargo call here would wait for that build's
lock. Without it (a test run by hand), the example is built with cargo in release mode, once
per session, into CARGO_TARGET_DIR or the repository's target/.
"""

import functools
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def target_dir():
    return pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))


@functools.lru_cache(maxsize=None)
def example_bin(name):
    """The path of the example `name`, built when need be (see the module's text)."""
    prebuilt = os.environ.get("NDFLOW_EXAMPLES_DIR")
    if prebuilt:
        path = pathlib.Path(prebuilt) / name
        if not path.exists():
            pytest.fail(f"example {name} is not in NDFLOW_EXAMPLES_DIR={prebuilt}: "
                        "build it with cargo build --release --workspace --examples")
        return path
    cmd = ["cargo", "build", "--release", "--workspace", "--example", name]
    r = subprocess.run(cmd, cwd=ROOT)
    path = target_dir() / "release" / "examples" / name
    if r.returncode != 0 or not path.exists():
        pytest.fail(f"example {name} could not be built ({' '.join(cmd)})")
    return path
