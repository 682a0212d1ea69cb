"""The soak (scripts/soak.sh → python/tools/soak.py) in its short form: a few thousand frames
through the overload pipeline with churning, staying and hostile clients and a writer on a
filling disk. The run must pass its own checks, and its report's figures must add up."""

import json
import os
import subprocess
import sys
import time

from conftest import ROOT

REASONS = ("DroppedQueueFull_RBV", "DroppedMinTime_RBV", "DroppedUnsupported_RBV",
           "DroppedDisabled_RBV", "DroppedErrors_RBV")
CHECKS = {"frames produced", "books balance", "hops pass every frame on", "RSS bounded",
          "no thread growth", "no fd growth", "connections released", "lossless pva client",
          "latest-wins pva client", "CA client", "churning clients served",
          "disk full counted", "clean shutdown"}


def test_short_soak_passes_and_its_figures_add_up(ndflow_bin, tmp_path):
    n = 12000
    out = tmp_path / "report.json"
    t0 = time.time()
    proc = subprocess.run(
        [sys.executable, str(ROOT / "python" / "tools" / "soak.py"), "--ndflow", str(ndflow_bin),
         "--frames", str(n), "--warmup-frames", "2000", "--fsize-mib", "4", "--cycle", "3",
         "--hostile-every", "3", "--hostile-burst", "1", "--drips", "2", "--progress", "5",
         "--settle", "10", "--json", str(out)],
        capture_output=True, text=True, timeout=120, env=dict(os.environ))
    wall = time.time() - t0
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "RESULT: PASS" in proc.stdout
    r = json.loads(out.read_text())
    print(f"\nshort soak: {wall:.1f} s, {r['frames']} frames at {r['rate']:.0f}/s")

    # Every check ran and passed (the dripping connections outlive a short run: not checked).
    assert {c["name"] for c in r["checks"]} == CHECKS
    assert all(c["ok"] for c in r["checks"]), r["checks"]
    assert r["frames"] == r["requested"] == n

    # The books, recomputed from the PVs' figures.
    ports = r["ports"]
    for name, p in ports.items():
        assert p["ArraysOffered_RBV"] == p["ArraysProcessed_RBV"] + sum(p[k] for k in REASONS), name
        assert p["QueueUse"] == 0 and p["InFlight_RBV"] == 0, name
    for name in ("ROI1", "STATS2", "CODEC1", "JPEG1", "PVA1", "OFF1"):
        assert ports[name]["ArraysOffered_RBV"] == n, name
    codec = ports["CODEC1"]["ArraysProcessed_RBV"] - ports["CODEC1"]["DroppedOutputArrays_RBV"]
    assert ports["HDF1"]["ArraysOffered_RBV"] == ports["PVA2"]["ArraysOffered_RBV"] == codec
    # Each drop reason the pipeline is built to produce was produced.
    assert ports["JPEG1"]["DroppedUnsupported_RBV"] > 0  # UInt16 frames to JPEG
    assert ports["STATS2"]["DroppedMinTime_RBV"] > 0  # MinCallbackTime
    assert ports["OFF1"]["DroppedDisabled_RBV"] == n  # EnableCallbacks = Disable
    assert ports["HDF1"]["DroppedErrors_RBV"] > 0  # EFBIG

    # The lossless client got every frame PVA1 published; what it missed PVA1 counted.
    ll = r["clients"]["staying"]["pva-lossless"]
    pva1 = ports["PVA1"]
    assert ll["received"] == pva1["ArraysProcessed_RBV"]
    assert ll["received"] + sum(pva1[k] for k in REASONS) == n
    assert ll["disorder"] == 0 and ll["disconnects"] == 0
    assert r["clients"]["staying"]["ca"]["last"] == n

    # The writer hit the file size limit and counted every frame it could not write.
    w = r["writer"]
    assert w["not_written"] == ports["HDF1"]["DroppedErrors_RBV"] > 0
    assert any("File too large" in m for m in w["write_errors"])

    # The load happened.
    assert r["clients"]["churn"]["up"] > 0
    h = r["hostile"]
    assert h["ca_garbage"] > 0 and h["pva_garbage"] > 0 and h["drips"] == 4
    assert h["server"]["PvaMalformed"] > 0

    # Memory, threads and files from the IOC's PVs: end within the bound, nothing grew.
    hw, he = r["health"]["warmup"], r["health"]["end"]
    held = r["health"]["half_closed_end"]  # sockets of clients gone, named in the report
    assert he["Threads"] <= hw["Threads"] and he["OpenFiles"] - held <= hw["OpenFiles"]
    assert he["ResidentMB"] - hw["ResidentMB"] <= 64  # MiB
