#!/usr/bin/python3
"""Plots of tandem-bench-diloco results for docs/benchmarks.md (docs only; not part of the build
or the tests). Needs Debian's python3-matplotlib: run it with /usr/bin/python3.

usage: /usr/bin/python3 bench/plot_diloco.py RESULTS.json [RESULTS.json ...] [--out OUT_DIR]
       [--name NAME]

Writes OUT_DIR/diloco_<config>.png (default docs/plots; diloco_<NAME>.png with --name), one per
config found in the files: validation loss against tokens trained
(left) and against bytes uploaded per worker (right, log scale); one line per arm, the mean over
seeds, with the seeds' min..max shaded.
"""
import json
import os
import sys
from collections import OrderedDict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def mean_curves(runs, workers):
    """Per arm: tokens trained by all workers, bytes, mean/min/max validation loss over seeds
    (same eval steps). workers: the file's K, for runs written before the per-arm one."""
    arms = OrderedDict()
    for run in runs:
        arms.setdefault(run["arm"], []).append(run)
    out = OrderedDict()
    for arm, seeds in arms.items():
        length = min(len(r["curve"]) for r in seeds)
        points = [[r["curve"][i] for r in seeds] for i in range(length)]
        out[arm] = {
            "tokens": [p[0]["tokensPerWorker"] * seeds[0].get("workers", workers) for p in points],
            "bytes": [sum(q["bytesPerWorker"] for q in p) / len(p) for p in points],
            "mean": [sum(q["valLoss"] for q in p) / len(p) for p in points],
            "lo": [min(q["valLoss"] for q in p) for p in points],
            "hi": [max(q["valLoss"] for q in p) for p in points],
            "seeds": len(seeds),
        }
    return out


def style(arm):
    if arm.startswith("sync"):
        return {"color": "black" if arm == "sync" else None, "linewidth": 2.2, "linestyle": "-"}
    linestyle = "-"
    if "raw" in arm:  # late results not re-based: diverges, leaves the plot
        linestyle = "-."
    elif "drop" in arm or "stale" in arm or "pipe" in arm:
        linestyle = "--"
    elif "int8" in arm or "fp16" in arm:
        linestyle = ":"
    return {"linewidth": 1.4, "linestyle": linestyle}


def main():
    args = sys.argv[1:]
    out_dir = "docs/plots"
    if "--out" in args:
        i = args.index("--out")
        out_dir = args[i + 1]
        del args[i : i + 2]
    if not args:
        sys.exit(__doc__)
    os.makedirs(out_dir, exist_ok=True)
    workers = 4
    configs = OrderedDict()
    name = None
    if "--name" in args:
        i = args.index("--name")
        name = args[i + 1]
        del args[i : i + 2]
    for path in args:
        with open(path) as f:
            data = json.load(f)
        workers = data.get("workers", workers)
        for run in data["runs"]:
            run.setdefault("workers", workers)
            configs.setdefault(run["config"], []).append(run)
    for config, runs in configs.items():
        curves = mean_curves(runs, workers)
        model = runs[0]["model"]
        fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
        for arm, c in curves.items():
            kw = style(arm)
            total = c["tokens"]
            (line,) = left.plot(total, c["mean"], label=arm, **kw)
            left.fill_between(total, c["lo"], c["hi"], color=line.get_color(), alpha=0.12)
            # Skip the first point (0 bytes) on the log axis.
            right.plot(c["bytes"][1:], c["mean"][1:], label=arm, color=line.get_color(),
                       linewidth=kw["linewidth"], linestyle=kw["linestyle"])
        seeds = max(c["seeds"] for c in curves.values())
        left.set_xlabel("tokens trained (all workers)")
        left.set_ylabel("validation loss (nats/byte)")
        left.set_title(f"{config} ({model}): loss vs tokens, mean of {seeds} seed(s)")
        right.set_xscale("log")
        right.set_xlabel("bytes uploaded per worker (log)")
        right.set_title("loss vs bytes sent")
        finals = [c["mean"][-1] for c in curves.values()]
        lo = min(finals)
        for ax in (left, right):
            ax.set_ylim(lo - 0.15, lo + 1.2)
            ax.grid(True, alpha=0.3)
        left.legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(out_dir, f"diloco_{name or config}.png")
        fig.savefig(path, dpi=110)
        print(path)


if __name__ == "__main__":
    main()
