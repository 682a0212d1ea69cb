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
# -rs lists every skip with its reason: the only skips left depend on the machine (root).
# Any non-zero exit fails, 5 (no tests collected) included: a suite that ran nothing has
# checked nothing.
set +e
.venv/bin/python -m pytest -q -rs python/tests
rc=$?
set -e
if [ $rc -eq 5 ]; then echo "pytest collected no tests" >&2; fi
if [ $rc -ne 0 ]; then exit $rc; fi
echo "== all tests passed"
