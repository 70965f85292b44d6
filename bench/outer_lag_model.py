#!/usr/bin/python3
"""The noise-free model of docs/benchmarks.md ("Overlap over 1,000 steps"): how fast the outer
loop closes the error of one quadratic direction, with results on time or one round late.

One worker (K = 1), the optimum at 0; a unit closes a fraction a of its start's error
(end = (1 - a) start): a small a is a slowly learnt direction. The coordinator's outer step is
v = mu v + d; theta -= lr (d + mu v). Methods:
  sync     results on time: d = theta - end
  blend B  one round late, re-based (d = theta_now - end), the unit starting from
           theta + B (own last end - theta): B = 0 is plain re-basing, B > 0 the eager start
  nest C   with blend B: the start moves on by C x -lr mu^2 v, the part of the next outer step
           that is known when the unit starts (the coordinator's velocity then)
  rebX     one round late, re-based by the fraction X (d = base - end + X (theta_now - base)):
           the coordinator's rebaseOnto with weight X
  raw      one round late, added as it is (d = the previous unit's progress, start - end)
  look     one round late, eager updates (arXiv 2502.12996): the unit starts a tentative outer
           step ahead (d~ = last mean + own fresh delta - own last delta), uploads its progress
           (start - end), committed as it is
  look0    look without the worker's own part (d~ = last mean): what the coordinator alone can do
With K identical workers look's own part has the weight 1/K (the row "look, K = 4"): at K = 1 it
is exactly the step without lag.
Each method is a linear map of its state per round; the table gives its spectral radius (the
error's factor per round; above 1 diverges) at a few a, the worst over a in [1e-4, 1], and the
rounds a slow direction (a = 0.01) needs to shrink tenfold.

usage: /usr/bin/python3 bench/outer_lag_model.py  (needs numpy)
"""
import math

import numpy as np


def one_round(method, blend, a, lr, mu, s, rebase=1.0, nest=0.0):
    """The state after one round; s is a dict of floats (the map is linear in them)."""
    s = dict(s)
    if method == "sync":
        end = (1 - a) * s["theta"]
        d = s["theta"] - end
    elif method == "raw":
        d = s["flight"]
        s["flight"] = a * s["theta"]
    elif method == "blend":
        start = s["theta"] + blend * (s["end"] - s["theta"]) - nest * lr * mu * mu * s["v"]
        # The previous unit's delta (from its base), re-based onto theta by the fraction rebase.
        d = s["base"] - s["end"] + rebase * (s["theta"] - s["base"])
        s["end"], s["base"] = (1 - a) * start, s["theta"]
    else:  # look
        guess = s["mean"] + blend * (s["fresh"] - s["prev"])
        start = s["theta"] - lr * ((1 + mu) * guess + mu * mu * s["v"])
        d = s["flight"]  # the previous unit's progress, as it is
        s["prev"], s["fresh"] = s["fresh"], a * start
        s["flight"] = a * start
        s["mean"] = d
    s["v"] = mu * s["v"] + d
    s["theta"] = s["theta"] - lr * (d + mu * s["v"])
    return s


def radius(method, blend, a, lr, mu, rebase=1.0, nest=0.0):
    keys = {"sync": ["theta", "v"], "blend": ["theta", "v", "end", "base"],
            "raw": ["theta", "v", "flight"], "look": ["theta", "v", "flight", "fresh", "prev", "mean"]}[method]
    columns = []
    for k in keys:
        state = {key: 1.0 if key == k else 0.0 for key in keys}
        after = one_round(method, blend, a, lr, mu, state, rebase, nest)
        columns.append([after[key] for key in keys])
    return max(abs(np.linalg.eigvals(np.array(columns).T)))


def main():
    methods = [("sync", "sync", 0, 1, 0), ("pipe-raw", "raw", 0, 1, 0),
               ("pipe (re-based)", "blend", 0, 1, 0), ("pipe-reb0.5", "blend", 0, 0.5, 0),
               ("pipe-reb0.25", "blend", 0, 0.25, 0), ("eager0.25", "blend", 0.25, 1, 0),
               ("eager0.5", "blend", 0.5, 1, 0), ("eager0.75", "blend", 0.75, 1, 0),
               ("eager0.5-reb0.5", "blend", 0.5, 0.5, 0), ("pipe-nest1", "blend", 0, 1, 1),
               ("eager0.5-nest1", "blend", 0.5, 1, 1), ("look", "look", 1, 1, 0),
               ("look, K = 4", "look", 0.25, 1, 0), ("look0", "look", 0, 1, 0)]
    grid = [10 ** (-4 + 4 * i / 80) for i in range(81)]
    print("| outer lr / momentum | method | radius at a = 0.01 / 0.1 / 0.5 | worst over a "
          "| rounds to shrink a = 0.01 tenfold |")
    print("|---|---|---|---:|---:|")
    for lr, mu in ((0.35, 0.9), (0.7, 0.9)):
        for name, method, blend, rebase, nest in methods:
            r = [radius(method, blend, a, lr, mu, rebase, nest) for a in (0.01, 0.1, 0.5)]
            worst = max(radius(method, blend, a, lr, mu, rebase, nest) for a in grid)
            tenfold = math.log(10) / -math.log(r[0]) if r[0] < 1 else float("inf")
            print(f"| {lr} / {mu} | {name} | {r[0]:.4f} / {r[1]:.4f} / {r[2]:.4f} | "
                  f"{worst:.4f} | {tenfold:.0f} |")


if __name__ == "__main__":
    main()
