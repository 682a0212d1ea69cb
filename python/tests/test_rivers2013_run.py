"""The rivers2013 scenario through the real binary: every plugin's books balance, the ROI
geometry and the statistics of the simulated ramp match numpy on the same pixels."""

import json
import subprocess

import numpy as np

from conftest import ROOT


def run_scenario(ndflow_bin, tmp_path, frames, period):
    text = (ROOT / "examples" / "rivers2013.toml").read_text()
    text = text.replace("NumImages = 1000", f"NumImages = {frames}")
    text = text.replace("AcquirePeriod = 0.01", f"AcquirePeriod = {period}")
    cfg = tmp_path / "rivers.toml"
    cfg.write_text(text)
    summary = tmp_path / "summary.json"
    proc = subprocess.run(
        [str(ndflow_bin), "run", str(cfg), "--until-idle", "--quiet", "--summary", str(summary)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(summary.read_text())["ports"]


def test_every_frame_is_accounted_for(ndflow_bin, tmp_path):
    ports = run_scenario(ndflow_bin, tmp_path, frames=200, period=0.002)
    sim = ports["SIM1"]
    assert sim["ArrayCounter_RBV"] == 200
    assert sim["DetectorState_RBV"] == "Idle"
    plugins = [n for n in ports if n != "SIM1"]
    assert len(plugins) == 11
    for name in plugins:
        p = ports[name]
        dropped = sum(
            p[k]
            for k in (
                "DroppedQueueFull_RBV",
                "DroppedMinTime_RBV",
                "DroppedUnsupported_RBV",
                "DroppedDisabled_RBV",
                "DroppedErrors_RBV",
            )
        )
        assert p["ArraysOffered_RBV"] == p["ArraysProcessed_RBV"] + dropped + p["QueueUse"] + p["InFlight_RBV"], name
        assert p["QueueUse"] == 0 and p["InFlight_RBV"] == 0, name
    for name in ["Image1", "PROC1", "ROI1", "ROI2", "ROI3", "ROI4", "STATS5"]:
        assert ports[name]["ArraysOffered_RBV"] == 200, name
    for i in range(1, 5):
        roi, stats = ports[f"ROI{i}"], ports[f"STATS{i}"]
        assert stats["ArraysOffered_RBV"] == roi["ArraysProcessed_RBV"]
        assert stats["ArraySizeX_RBV"] == 512 and stats["ArraySizeY_RBV"] == 512


def test_full_frame_statistics_match_numpy(ndflow_bin, tmp_path):
    # One frame of the default LinearRamp (Gain 1, GainX 1, GainY 1): UInt8 (x + y + 1) mod 256,
    # the "+1" being the per-frame increment of the first frame.
    ports = run_scenario(ndflow_bin, tmp_path, frames=1, period=0.0)
    y, x = np.mgrid[0:1024, 0:1024]
    stats = ports["STATS5"]
    for offset in (0, 1):
        img = ((x + y + offset) % 256).astype(np.uint8)
        if stats["MaxValue_RBV"] == img.max() and abs(stats["MeanValue_RBV"] - img.mean()) < 1e-9:
            break
    else:
        raise AssertionError(f"STATS5 does not match the ramp: {stats}")
    assert stats["MinValue_RBV"] == img.min()
    assert stats["Total_RBV"] == img.sum(dtype=np.float64)
    assert abs(stats["Sigma_RBV"] - img.std()) < 1e-6 * img.std()
    w = img.astype(np.float64)
    assert abs(stats["CentroidX_RBV"] - (w * x).sum() / w.sum()) < 1e-6
    assert abs(stats["CentroidY_RBV"] - (w * y).sum() / w.sum()) < 1e-6
