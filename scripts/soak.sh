#!/usr/bin/env bash
# The soak: one IOC runs the overload pipeline for --frames N (default 1,000,000) under client
# churn, hostile connections and a file writer on a filling disk, then checks its books, memory,
# threads, files and clients from its own PVs and prints a one-screen report (exit 1 names the
# failed checks). Loopback only. Options: .venv/bin/python python/tools/soak.py --help
#   ./scripts/soak.sh                  # 10^6 frames, about 10 minutes on 2 cores
#   ./scripts/soak.sh --frames 20000   # a short one
set -euo pipefail
cd "$(dirname "$0")/.."
set -a
. scripts/loopback.env
set +a
bin=${NDFLOW_BIN:-target/release/ndflow}
if [ ! -x "$bin" ]; then
    cargo build --release -p ndflow-cli
fi
exec .venv/bin/python python/tools/soak.py --ndflow "$bin" "$@"
