#!/usr/bin/env python3
"""Where one decode step's GPU time goes, kernel by kernel.

Reads the CSV of `ncu --csv --metrics gpu__time_duration.sum` over a short `flexkern run
--device cuda` (graphs off, so every launch is profiled) and prints the last step's kernels:
the first layer's sequence, then totals per kernel. A step starts at each embedding launch.

usage: decode_kernels.py NCU.csv [layers]
"""
import csv
import sys
from collections import OrderedDict


def rows(path):
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]
    for r in csv.DictReader(lines):
        if r.get("Metric Name") == "gpu__time_duration.sum":
            unit = r.get("Metric Unit", "ns")
            v = float(r["Metric Value"].replace(",", ""))
            us = v / 1e3 if unit == "ns" else v * 1e3 if unit == "ms" else v
            yield r["Kernel Name"].split("(")[0], r.get("Grid Size", ""), r.get("Block Size", ""), us


def main():
    ks = list(rows(sys.argv[1]))
    layers = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    starts = [i for i, k in enumerate(ks) if "embed" in k[0]]
    if not starts:
        print("no embedding launch found;", len(ks), "kernels")
        return
    step = ks[starts[-1]:]
    total = sum(k[3] for k in step)
    print(f"last step: {len(step)} kernels, {total:.1f} us of kernel time")
    per = len(step) // layers if layers else 0
    if per:
        print(f"first layer ({per} kernels):")
        for name, grid, block, us in step[1:1 + per]:
            print(f"  {name:<24} grid {grid:<14} block {block:<12} {us:8.2f} us")
    by = OrderedDict()
    for name, grid, block, us in step:
        key = f"{name} {grid}"
        n, t = by.get(key, (0, 0.0))
        by[key] = (n + 1, t + us)
    print("per kernel (name grid): calls, total us, us/call")
    for key, (n, t) in sorted(by.items(), key=lambda kv: -kv[1][1]):
        print(f"  {key:<40} {n:5d} {t:9.1f} {t / n:8.2f}")


if __name__ == "__main__":
    main()
