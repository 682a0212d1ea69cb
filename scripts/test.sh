#!/usr/bin/env bash
# Runs the whole ndflow test suite on a fresh machine: set-up, formatting and lint checks,
# the Rust tests, then the Python interop tests (loopback only, see ../shared/loopback.env).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "== cargo test"
cargo test --workspace --release

echo "== python tests"
# EPICS clients and servers stay on 127.0.0.1.
if [ -f ../shared/loopback.env ]; then set -a; . ../shared/loopback.env; set +a; fi
export NDFLOW_BIN="$PWD/target/release/ndflow"
set +e
.venv/bin/python -m pytest -q python/tests
rc=$?
set -e
# pytest exits 5 when it collected no tests; that is not a failure of the suite.
if [ $rc -ne 0 ] && [ $rc -ne 5 ]; then exit $rc; fi
echo "== all tests passed"
