#!/usr/bin/python3
"""Where an arm loses against a reference arm along the run: the mean validation loss of each arm
at every curve point (over the seeds it shares with the reference) and its gap to the reference
there, from tandem-bench-diloco JSON files (merged as bench/table_diloco.py does).

usage: python3 bench/gap_diloco.py --ref ARM RESULTS.json [RESULTS.json ...]

One line per curve step: the reference's mean loss, then each other arm's gap in percent. A gap
that is large early and shrinks says the arm loses while the loss moves fast; one that grows
steadily says it loses a share of every round. A pipelined arm's points between the first and
the last lag one round by construction (round r's uploads land at round r + 1), so compare the
shape and the final point, which counts every unit in every arm.
"""
import json
import sys
from collections import OrderedDict


def main():
    args = sys.argv[1:]
    if len(args) < 3 or args[0] != "--ref":
        sys.exit(__doc__)
    ref_arm, paths = args[1], args[2:]
    runs = OrderedDict()
    for path in paths:
        with open(path) as f:
            for r in json.load(f)["runs"]:
                runs[(r["config"], r["arm"], r["seed"])] = r
    arms = OrderedDict()
    for (config, arm, seed), r in runs.items():
        arms.setdefault(arm, {})[seed] = r
    if ref_arm not in arms:
        sys.exit(f"no runs of the reference arm '{ref_arm}' in {paths}")
    ref = arms[ref_arm]
    others = [a for a in arms if a != ref_arm]

    def mean_curve(by_seed, seeds):
        curves = [{p["step"]: p["valLoss"] for p in by_seed[s]["curve"]} for s in seeds]
        steps = sorted(set.intersection(*(set(c) for c in curves)))
        return {step: sum(c[step] for c in curves) / len(curves) for step in steps}

    header = ["step", f"`{ref_arm}`"]
    columns = []
    for arm in others:
        seeds = sorted(set(ref) & set(arms[arm]))
        if not seeds:
            continue
        header.append(f"`{arm}` (seeds {','.join(map(str, seeds))})")
        columns.append((mean_curve(ref, seeds), mean_curve(arms[arm], seeds)))
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    ref_all = mean_curve(ref, sorted(ref))
    for step in sorted(ref_all):
        cells = [str(step), f"{ref_all[step]:.3f}"]
        for ref_curve, curve in columns:
            if step in curve and step in ref_curve:
                cells.append(f"{100 * (curve[step] / ref_curve[step] - 1):+.1f}%")
            else:
                cells.append("")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
