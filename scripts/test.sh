#!/usr/bin/env bash
# Runs the whole ndflow test suite on a fresh machine: set-up, formatting and lint checks,
# the Rust tests, then the Python interop tests (loopback only: scripts/loopback.env).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
# --release: the build scripts (and the C libraries some compile) and proc-macros are then the
# release build's, built once for both.
cargo clippy --workspace --all-targets --release --quiet -- -D warnings
echo "== cargo test"
cargo test --workspace --release

echo "== python tests"
# EPICS clients and servers stay on 127.0.0.1.
set -a; . scripts/loopback.env; set +a
export NDFLOW_BIN="$PWD/target/release/ndflow"
# The EIGER tests' simulator lives in a venv of its own (tickit-devices needs cbor2<6): built
# here in the background while the first tests run, kept under target/ for the next run.
export NDFLOW_TICKIT_VENV="$PWD/target/tickit-venv"
(cd python/tests && ../../.venv/bin/python eiger_peer.py build-venv "$NDFLOW_TICKIT_VENV") \
    > target/tickit-venv-build.log 2>&1 &
tickit_build=$!
# dectris-compression has no wheel: pip builds it from source (minutes of one core). It goes
# into .venv in the background too, at the lowest priority so that the tests keep their CPU;
# the EIGER tests that decode with it run last (conftest.py) and wait for it if need be.
(cd python/tests && nice -n 19 ../../.venv/bin/python eiger_peer.py install-dectris) \
    > target/dectris-install.log 2>&1 &
dectris_install=$!
# -rs lists every skip with its reason: the only skips left depend on the machine (root).
# --durations: the slowest tests, to keep the suite's time in view.
# Any non-zero exit fails, 5 (no tests collected) included: a suite that ran nothing has
# checked nothing.
set +e
.venv/bin/python -m pytest -q -rs --durations=15 python/tests
rc=$?
wait $tickit_build $dectris_install
cat target/tickit-venv-build.log target/dectris-install.log
set -e
if [ $rc -eq 5 ]; then echo "pytest collected no tests" >&2; fi
if [ $rc -ne 0 ]; then exit $rc; fi
echo "== all tests passed"
