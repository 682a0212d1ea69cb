#!/usr/bin/env bash
# Runs the benchmarks recorded in docs/benchmarks.md (after scripts/setup.sh).
# Results go to out/bench/; each benchmark measures its own reference in the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p out/bench
echo "== machine"; (lscpu | grep -E "Model name|^CPU\(s\)|L2|L3"; uptime) | tee out/bench/machine.txt
echo "== rivers2013 (Rivers 2013, Table 1: 11 plugins on a 1024x1024 UInt8 detector)"
./target/release/ndflow bench rivers2013 --json out/bench/rivers2013.json | tee out/bench/rivers2013.txt
echo "== runtime overhead per hop"
./target/release/ndflow bench hop --json out/bench/hop.json | tee out/bench/hop.txt
echo "== kernels (criterion, each next to a memcpy of the same bytes)"
for b in roi stats process; do
    cargo bench -p ndflow-plugins --bench "$b" -- --quick 2>&1 | grep -E "^[a-z_0-9/]+|time:" | tee "out/bench/$b.txt"
done
cargo bench -p ndflow-sim --bench sim -- --quick 2>&1 | grep -E "^[a-z_0-9/]+|time:" | tee out/bench/sim.txt
echo "== pvAccess NTNDArray over loopback ndflow and p4p servers/clients vs raw TCP"
(set -a; . scripts/loopback.env; set +a
 ./target/release/ndflow bench pva --json out/bench/pva.json | tee out/bench/pva.txt)
echo "== codecs next to the C libraries, interleaved pairs, median ratio ±spread"
./target/release/ndflow bench codec --json out/bench/codec.json | tee out/bench/codec.txt
echo "== HDF5 writing: each file interleaved with the same frames written by h5py + hdf5plugin"
./target/release/ndflow bench hdf5 --json out/bench/hdf5.json | tee out/bench/hdf5.txt
(set -a; . scripts/loopback.env; set +a; ./target/release/ndflow bench ca --json out/bench/ca.json | tee out/bench/ca.txt)  # Channel Access: ndflow_ca vs softioc (RSRV), frames to pyepics vs raw TCP, pipeline rate with 10 clients
echo "== frames into Python: the ndflow package's iterator and Python plugins vs a p4p monitor"
(set -a; . scripts/loopback.env; set +a
 .venv/bin/python python/bench/python_bench.py --json out/bench/python.json | tee out/bench/python.txt)
echo "== scale-out: 1 head + N writer processes; loopback and, as root, network namespaces with 1gbit links"
./target/release/ndflow bench scaleout --json out/bench/scaleout.json | tee out/bench/scaleout.txt
echo "== live web viewer: pipeline rate with 0/1/5 viewers (same run), IOC CPU per viewer, headless Chromium"
./target/release/ndflow bench web --reps 5 --json out/bench/web.json | tee out/bench/web.txt
