"""Reads several `ndflow bench codec --json` files (back-to-back runs) and prints, per row and
direction, each run's median ratio ours/reference, their spread across runs (half the range
over the median) and whether every run's median is ≥ 1.0.

usage: codec_runs.py RUN1.json RUN2.json RUN3.json
"""

import json
import statistics
import sys


def main():
    runs = [json.load(open(p)) for p in sys.argv[1:]]
    print(f"{'data':<17} {'codec':<15} {'dir':<4} " + " ".join(f"run{i + 1:<3}" for i in range(len(runs)))
          + "  across  all>=1.0")
    worst = 0.0
    for i, row in enumerate(runs[0]["rows"]):
        for d in ("compress", "decompress"):
            m = [r["rows"][i][d]["ratio_median"] for r in runs]
            if any(x is None for x in m):
                continue
            mid = statistics.median(m)
            spread = (max(m) - min(m)) / 2 / mid
            worst = max(worst, spread)
            flag = "!" if spread > 0.10 else ""
            ok = "yes" if min(m) >= 1.0 else ("~1" if min(m) >= 0.995 else "no")
            print(f"{row['data']:<17} {row['codec']:<15} {d[:4]:<4} "
                  + " ".join(f"{x:6.2f}" for x in m) + f"  ±{spread * 100:3.0f}%{flag:<1}  {ok}")
    print(f"largest spread across runs: ±{worst * 100:.1f}%")


if __name__ == "__main__":
    main()
