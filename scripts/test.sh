#!/usr/bin/env bash
# Runs the whole ndflow test suite on a fresh machine: set-up, the formatting check, the Python
# interop tests (loopback only: scripts/loopback.env) while clippy and the Rust tests build,
# then the Rust tests.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh

echo "== cargo fmt --check"
cargo fmt --all -- --check
target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$PWD/$target" ;; esac
echo "== cargo build --examples"
# Some Python tests drive Rust examples (python/tests/rust_examples.py): built now and taken
# from here, so that those tests never call cargo while the build below holds its lock.
cargo build --workspace --release --examples --quiet
export NDFLOW_EXAMPLES_DIR="$target/release/examples"

# Clippy and the Rust tests' build (half of the CPU time of a cold run) go on in the
# background at the lowest priority while the Python tests, which wait on sockets and child
# processes much of the time, run in front: on a 2-core machine they fill the idle core.
# --release: the build scripts (and the C libraries some compile) and proc-macros are then the
# release build's, built once for all. The Rust tests themselves run after the Python tests.
echo "== cargo clippy and the Rust tests' build (in the background, log: $target/rust-build.log)"
(nice -n 19 cargo clippy --workspace --all-targets --release --quiet -- -D warnings \
    && nice -n 19 cargo test --workspace --release --no-run --quiet) > "$target/rust-build.log" 2>&1 &
rust_build=$!
# Interrupted or failed early: the build does not outlive the script. `|| true`: under
# `set -e` a failing command in the trap (the build already gone) would make the exit 1.
trap 'pkill -P $rust_build 2>/dev/null || true; kill $rust_build 2>/dev/null || true' EXIT

echo "== python tests"
# EPICS clients and servers stay on 127.0.0.1.
set -a; . scripts/loopback.env; set +a
export NDFLOW_BIN="$target/release/ndflow"
# The EIGER tests' simulator lives in a venv of its own (tickit-devices needs cbor2<6): built
# here in the background while the first tests run, kept under target/ for the next run.
export NDFLOW_TICKIT_VENV="$PWD/target/tickit-venv"
(cd python/tests && ../../.venv/bin/python eiger_peer.py build-venv "$NDFLOW_TICKIT_VENV") \
    > target/tickit-venv-build.log 2>&1 &
tickit_build=$!
# dectris-compression has no wheel: pip builds it from source (minutes of one core). It goes
# into .venv in the background too, at a low priority so that the tests keep their CPU (and
# above the Rust build, which is needed only later); the EIGER tests that decode with it run
# last (conftest.py) and wait for it if need be.
(cd python/tests && nice -n 10 ../../.venv/bin/python eiger_peer.py install-dectris) \
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
if [ $rc -eq 5 ]; then echo "pytest collected no tests" >&2; fi

echo "== cargo clippy and the Rust tests' build: waiting for it"
wait $rust_build
build_rc=$?
cat "$target/rust-build.log"
if [ $build_rc -ne 0 ]; then
    echo "cargo clippy or the Rust tests' build failed (exit $build_rc)" >&2
    exit $build_rc
fi
echo "== cargo test"
cargo test --workspace --release
test_rc=$?
set -e
if [ $rc -ne 0 ]; then echo "the Python tests failed (exit $rc)" >&2; exit $rc; fi
if [ $test_rc -ne 0 ]; then exit $test_rc; fi
echo "== all tests passed"
