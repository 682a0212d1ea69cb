#!/usr/bin/env bash
# Scale-out on this machine (docs/scale-out.md): 1 head + N writer processes, every frame
# written once, then one master file over the writers' files.
#
#   examples/scaleout/run.sh [WRITERS=2] [FRAMES=1000] [DIR=/tmp/ndflow-scaleout]
#
# Everything talks over 127.0.0.1 (scripts/loopback.env) on the standard ports, or on those the
# EPICS variables in the environment name: every process asks for the same ones, as IOCs on
# one host do. The first takes the TCP ports, the others free ones; all share the UDP search
# ports, and a search sent to 127.0.0.1 reaches every one of them. pvAccess and Channel Access
# are both served. NDFLOW (default target/release/ndflow) is the binary. Frames: 1024x1024
# UInt16 from the simulator; the files are DIR/w<k>.h5 and DIR/master.h5.
set -euo pipefail
N=${1:-2}
FRAMES=${2:-1000}
DIR=${3:-/tmp/ndflow-scaleout}
NDFLOW=${NDFLOW:-target/release/ndflow}
HERE=$(cd "$(dirname "$0")" && pwd)
if (( N < 1 || N > 4 )); then echo "WRITERS must be 1..4 (head.toml declares four pva ports)" >&2; exit 2; fi
mkdir -p "$DIR"
rm -f "$DIR"/w*.h5 "$DIR"/master.h5

# Loopback only, no broadcasts.
set -a
# shellcheck source=../../scripts/loopback.env
. "$HERE/../../scripts/loopback.env"
set +a
pids=()
stop_all() {
    # SIGINT: each process stops acquiring, drains its queues and closes its files.
    for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap stop_all EXIT

head_pv() { "$NDFLOW" pv "$@"; }

for k in $(seq 1 "$N"); do
    # --no-state: each run starts from the config and the --set values above, nothing saved.
    "$NDFLOW" run "$HERE/writer.toml" --quiet --no-state --prefix "W$k:" \
        --set PVAD1.PvName=HEAD:Pva$k:Image --set HDF1.FilePath="$DIR" --set HDF1.FileName="w$k" \
        > "$DIR/w$k.log" 2>&1 &
    pids+=($!)
done
disable=()
for k in $(seq $((N + 1)) 4); do disable+=(--set "PVA$k.EnableCallbacks=Disable"); done
"$NDFLOW" run "$HERE/head.toml" --quiet --no-state \
    --set SIM1.NumImages="$FRAMES" "${disable[@]}" > "$DIR/head.log" 2>&1 &
pids+=($!)

echo "waiting for $N writers to subscribe to the head ..."
for k in $(seq 1 "$N"); do head_pv wait "HEAD:Pva$k:Subscribers_RBV" 1 --timeout 30; done
start=$(date +%s%N)
head_pv put HEAD:cam1:Acquire 1
head_pv wait HEAD:cam1:ArrayCounter_RBV "$FRAMES" --timeout 600
head_pv wait HEAD:cam1:Acquire_RBV Done --timeout 60
# Every frame the head sent must reach a file before the writers close them.
for k in $(seq 1 "$N"); do
    sent=$(head_pv get "HEAD:Pva$k:ArrayCounter_RBV" | cut -d' ' -f2)
    "$NDFLOW" pv wait "W$k:HDF1:NumCaptured_RBV" "$sent" --timeout 120
    "$NDFLOW" pv put "W$k:HDF1:Capture" 0
    echo "writer $k: $sent frames"
done
end=$(date +%s%N)
echo "$FRAMES frames in $(( (end - start) / 1000000 )) ms"
stop_all
trap - EXIT
"$NDFLOW" vds --output "$DIR/master.h5" "$DIR"/w*.h5
