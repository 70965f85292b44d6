#!/usr/bin/python3
"""A markdown table of tandem-bench-diloco results for docs/benchmarks.md, merged over several
JSON files (the bench is deterministic in its seed, so a run of the same config, arm and seed in
two files is the same run; the later file wins).

usage: python3 bench/table_diloco.py [--ref ARM ...] RESULTS.json [RESULTS.json ...]

One line per config and arm: seeds, final validation loss mean ± sample std (min..max), and the
difference to the best synchronous arm (lowest mean over its seeds) that trained the same tokens
in all, compared on the seeds both have. With --ref ARM (repeatable) the table instead lists the
loss per seed and, for each reference arm, the difference per seed and of the means over the
seeds both have (the overlap tables of docs/benchmarks.md).
"""
import json
import math
import sys
from collections import OrderedDict


def main():
    args = sys.argv[1:]
    refs = []
    while len(args) >= 2 and args[0] == "--ref":
        refs.append(args[1])
        args = args[2:]
    if not args:
        sys.exit(__doc__)
    runs = OrderedDict()
    for path in args:
        with open(path) as f:
            data = json.load(f)
        for r in data["runs"]:
            # Files written before per-arm workers: every arm had the file's K.
            r.setdefault("tokensTotal", r["tokensPerWorker"] * data.get("workers", 4))
            runs[(r["config"], r["arm"], r["seed"])] = r
    arms = OrderedDict()
    for (config, arm, seed), r in runs.items():
        arms.setdefault((config, arm), {})[seed] = r

    def mean(xs):
        return sum(xs) / len(xs)

    def best_sync(config, tokens, seeds):
        best = None
        for (c, arm), by_seed in arms.items():
            first = next(iter(by_seed.values()))
            if c != config or not first["sync"] or first["tokensTotal"] != tokens:
                continue
            common = [s for s in seeds if s in by_seed]
            if not common:
                continue
            m = mean([by_seed[s]["finalLoss"] for s in common])
            if best is None or m < best[1]:
                best = (arm, m, common)
        return best

    if refs:
        print_against(arms, refs)
        return
    print("| config | arm | seeds | final val loss, mean ± std (min..max) | vs best sync | sync arm |")
    print("|---|---|---|---|---|---|")
    for (config, arm), by_seed in arms.items():
        losses = [r["finalLoss"] for r in by_seed.values()]
        m = mean(losses)
        sd = math.sqrt(sum((x - m) ** 2 for x in losses) / (len(losses) - 1)) if len(losses) > 1 else 0
        first = next(iter(by_seed.values()))
        ref = best_sync(config, first["tokensTotal"], list(by_seed))
        vs = "-"
        name = "-"
        if ref:
            mine = mean([by_seed[s]["finalLoss"] for s in ref[2]])
            vs = f"{100 * (mine / ref[1] - 1):+.1f}%"
            name = f"`{ref[0]}`" + ("" if len(ref[2]) == len(by_seed) else f" (seeds {ref[2]})")
        print(f"| {config} | `{arm}` | {len(losses)} | {m:.3f} ± {sd:.3f} ({min(losses):.3f}..{max(losses):.3f}) | {vs} | {name} |")


def print_against(arms, refs):
    """Per-seed losses and the difference to each reference arm of the same config."""
    header = ["arm", "seeds", "final val loss per seed", "mean ± std"]
    header += [f"vs `{ref}`, per seed; of the means" for ref in refs]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for (config, arm), by_seed in arms.items():
        seeds = sorted(by_seed)
        losses = [by_seed[s]["finalLoss"] for s in seeds]
        m = sum(losses) / len(losses)
        sd = math.sqrt(sum((x - m) ** 2 for x in losses) / (len(losses) - 1)) if len(losses) > 1 else 0
        cells = [f"`{arm}`", ",".join(map(str, seeds)), ", ".join(f"{x:.3f}" for x in losses),
                 f"{m:.3f} ± {sd:.3f}" if len(losses) > 1 else f"{m:.3f}"]
        for ref in refs:
            ref_runs = arms.get((config, ref), {})
            common = [s for s in seeds if s in ref_runs]
            if not common or ref == arm:
                cells.append("")
                continue
            per = [100 * (by_seed[s]["finalLoss"] / ref_runs[s]["finalLoss"] - 1) for s in common]
            mine = sum(by_seed[s]["finalLoss"] for s in common) / len(common)
            theirs = sum(ref_runs[s]["finalLoss"] for s in common) / len(common)
            cells.append(", ".join(f"{x:+.1f}" for x in per) + f"; **{100 * (mine / theirs - 1):+.1f}%**")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
