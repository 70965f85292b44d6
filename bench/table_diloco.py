#!/usr/bin/python3
"""A markdown table of tandem-bench-diloco results for docs/benchmarks.md, merged over several
JSON files (the bench is deterministic in its seed, so a run of the same config, arm and seed in
two files is the same run; the later file wins).

usage: python3 bench/table_diloco.py RESULTS.json [RESULTS.json ...]

One line per config and arm: seeds, final validation loss mean ± sample std (min..max), and the
difference to the best synchronous arm (lowest mean over its seeds) that trained the same tokens
in all, compared on the seeds both have.
"""
import json
import math
import sys
from collections import OrderedDict


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    runs = OrderedDict()
    for path in sys.argv[1:]:
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


if __name__ == "__main__":
    main()
