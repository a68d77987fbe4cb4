#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers

"""Draws the benchmark chart from queuekit-bench's CSV files.

    python3 scripts/chart.py [RESULTS_DIR] [OUTPUT_PNG]     (defaults: bench-results docs/benchmark.png)

Left: every QueueKit / anchor time ratio that a target applies to, on a log
scale, with the target marked (below 1: QueueKit is faster). Right: mixed read/write throughput
against the number of threads, for every implementation. Installs matplotlib with pip when it is
missing.
"""
import csv
import os
import subprocess
import sys


def ensure_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("chart.py: installing matplotlib with pip", file=sys.stderr)
        subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", "matplotlib"])
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def main():
    source = sys.argv[1] if len(sys.argv) > 1 else "bench-results"
    output = sys.argv[2] if len(sys.argv) > 2 else "docs/benchmark.png"
    results = read(os.path.join(source, "results.csv"))
    ratios = read(os.path.join(source, "ratios.csv"))
    plt = ensure_matplotlib()

    fig, (left, right) = plt.subplots(1, 2, figsize=(17, 8.5), gridspec_kw={"width_ratios": [1.35, 1]})

    # Left: targeted ratios.
    targeted = [r for r in ratios if r["target"] and r["kind"] == "ratio"]
    labels = [f'{r["workload"]}\n{r["queuekit"]} vs {r["anchor"]}' for r in targeted]
    values = [float(r["value"]) for r in targeted]
    limits = [float(r["target"]) for r in targeted]
    colors = ["#2e7d32" if v <= t else "#c62828" for v, t in zip(values, limits)]
    positions = list(range(len(targeted)))[::-1]
    left.barh(positions, values, color=colors, height=0.6)
    left.scatter(limits, positions, marker="|", s=500, color="black", zorder=3, label="target (at most)")
    for y, v in zip(positions, values):
        left.text(v * 1.08, y, f"{v:.2f}×", va="center", fontsize=8)
    left.set_xscale("log")
    left.axvline(1, color="grey", linewidth=0.8, linestyle="--")
    left.set_yticks(positions)
    left.set_yticklabels(labels, fontsize=7)
    left.set_xlabel("QueueKit time / anchor time (log; < 1 = QueueKit faster); green met, red missed")
    left.set_title("Targets")
    left.legend(loc="lower right", fontsize=8)

    # Right: mixed throughput (million operations per second) against threads.
    series = {}
    for r in results:
        w = r["workload"]
        if not w.startswith("mixed "):
            continue
        mix = w.split(" ")[1]                    # "90/10"
        threads = int(w.split(", ")[1].split(" ")[0])
        key = (mix, r["implementation"])
        series.setdefault(key, []).append((threads, 1e3 / float(r["median_ns"])))
    styles = {"100/0": "--", "99/1": "-.", "90/10": "-", "50/50": ":"}
    implementations = sorted({impl for _, impl in series})
    palette = plt.get_cmap("tab10")
    color = {impl: palette(i % 10) for i, impl in enumerate(implementations)}
    for (mix, impl), points in sorted(series.items()):
        points.sort()
        right.plot([p[0] for p in points], [p[1] for p in points], styles.get(mix, "-"), marker="o",
                   color=color[impl], label=f"{mix} {impl}")
    right.set_xscale("log", base=2)
    right.set_yscale("log")
    right.set_xticks([1, 2, 4, 8])
    right.set_xticklabels(["1", "2", "4", "8"])
    right.set_xlabel("threads")
    right.set_ylabel("million operations per second (log)")
    right.set_title("Mixed reads/writes: throughput (dashed 100/0, dash-dot 99/1, solid 90/10, dotted 50/50)")
    right.legend(fontsize=7, loc="lower left")
    right.grid(True, which="both", alpha=0.3)

    fig.suptitle("QueueKit benchmark (medians; scripts/chart.py from queuekit-bench's CSV)", fontsize=12)
    fig.tight_layout()
    os.makedirs(os.path.dirname(output) or ".", exist_ok=True)
    fig.savefig(output, dpi=110)
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
