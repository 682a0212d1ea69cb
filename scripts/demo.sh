#!/usr/bin/env bash
# Sets up a fresh machine and runs the embedded default pipeline (simulated detector →
# ROI/Stats, Process, StdArrays). Extra arguments go to `ndflow demo` (e.g. --frames 5000).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
exec ./target/release/ndflow demo "$@"
