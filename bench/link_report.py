#!/usr/bin/env python3
"""The report of run_link_bench.sh: per worker, from its ledger (DIR/workerI/ledger.db), its log
(DIR/workerI.log, one "<UTC stamp> state: <State>" line per engine state change) and the veth
counters the script saved (DIR/wire0.I and DIR/wire1.I: received-by-coordinator and
sent-by-coordinator bytes before and after).

The measured window starts when the worker's warm-up units finished training (default 2: the
first download, and a new client's wait for its first accepted result before it may hold a
second unit) and ends when its last unit finished training, so in a steady run the window holds
whole units and the last upload, which nothing overlaps, stays outside. Utilisation is the time
in inner steps inside the window over its length."""
import argparse
import datetime
import json
import sqlite3

STATES = ["Downloading", "Uploading", "Fetching", "Idle", "Training", "Waiting", "Backoff"]


def stamp_ms(text):
    t = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ")
    return t.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000.0


def state_changes(log_path):
    changes = []
    for line in open(log_path, encoding="utf-8", errors="replace"):
        parts = line.split(" ", 3)
        if len(parts) >= 3 and parts[1] == "state:":
            changes.append((stamp_ms(parts[0]), parts[2].strip()))
    return changes


def time_in_states(changes, start_ms, end_ms):
    """Seconds in each state within [start_ms, end_ms]."""
    out = {}
    for (t, state), nxt in zip(changes, changes[1:] + [(end_ms, None)]):
        a, b = max(t, start_ms), min(nxt[0], end_ms)
        if b > a:
            out[state] = out.get(state, 0.0) + (b - a) / 1000.0
    return out


def worker_report(d, i, warmup):
    db = sqlite3.connect(f"{d}/worker{i}/ledger.db")
    units = db.execute(
        "SELECT trained_at_ms, compute_seconds, tokens, inner_steps, state FROM work_units "
        "WHERE trained_at_ms IS NOT NULL ORDER BY trained_at_ms").fetchall()
    if len(units) <= warmup:
        raise SystemExit(f"link_report.py: worker {i} trained {len(units)} units; need more than "
                         f"the {warmup} warm-up units")
    start, end = units[warmup - 1][0], units[-1][0]
    window_s = (end - start) / 1000.0
    measured = units[warmup:]  # trained inside the window
    compute = sum(u[1] for u in measured)
    states = time_in_states(state_changes(f"{d}/worker{i}.log"), start, end)
    n = len(measured)
    per_unit = {s.lower(): states.get(s, 0.0) / n for s in STATES}
    # Time in the training state that is not inner steps: loading weights and data, writing
    # checkpoints, encoding and writing the result.
    per_unit["in_unit_overhead"] = max(0.0, states.get("Training", 0.0) - compute) / n
    per_unit["inner_steps"] = compute / n
    del per_unit["training"]
    tokens = sum(u[2] for u in units)
    app = dict(db.execute("SELECT direction, SUM(bytes) FROM transfers GROUP BY direction"))
    w0 = [int(x) for x in open(f"{d}/wire0.{i}").read().split()]
    w1 = [int(x) for x in open(f"{d}/wire1.{i}").read().split()]
    accepted = db.execute("SELECT COUNT(*) FROM work_units WHERE state = 'accepted'").fetchone()[0]
    dropped = db.execute("SELECT COUNT(*) FROM work_units WHERE trained_at_ms IS NOT NULL AND "
                         "state IN ('abandoned', 'rejected')").fetchone()[0]
    return {
        "trained": len(units), "accepted": accepted, "dropped": dropped,
        "inner_steps_per_unit": units[-1][3], "tokens": tokens,
        "window_s": window_s, "compute_s": compute,
        "utilisation": compute / window_s if window_s > 0 else 0.0,
        "seconds_per_unit": per_unit,
        "app_bytes_per_token": {"up": app.get("up", 0) / tokens, "down": app.get("down", 0) / tokens},
        "wire_bytes_per_token": {"up": (w1[0] - w0[0]) / tokens, "down": (w1[1] - w0[1]) / tokens},
    }


def main():
    p = argparse.ArgumentParser()
    for a in ["dir", "up", "down", "model", "overlap", "prefetch", "load", "json"]:
        p.add_argument("--" + a, default="")
    for a in ["workers", "inner-steps", "batch", "threads"]:
        p.add_argument("--" + a, type=int)
    p.add_argument("--warmup-units", type=int, default=2)
    a = p.parse_args()
    r = {"up_mbit": float(a.up), "down_mbit": float(a.down), "model": a.model,
         "inner_steps": a.inner_steps, "batch": a.batch, "threads": a.threads,
         "overlap": a.overlap, "prefetch": a.prefetch, "load": a.load,
         "warmup_units": a.warmup_units,
         "workers": [worker_report(a.dir, i, a.warmup_units) for i in range(1, a.workers + 1)]}
    r["utilisation"] = sum(w["utilisation"] for w in r["workers"]) / len(r["workers"])
    link = lambda m: "unshaped" if m == 0 else "%g" % m
    print("%s H=%s B=%s, %s threads, overlap %s, prefetch %s, up %s / down %s Mbit/s, load %s" % (
        a.model, a.inner_steps, a.batch, a.threads, a.overlap, a.prefetch, link(r["up_mbit"]),
        link(r["down_mbit"]), a.load))
    for i, w in enumerate(r["workers"], 1):
        s = w["seconds_per_unit"]
        print("  worker %d: trained %d (H=%d), accepted %d, dropped %d; utilisation %.3f; per unit "
              "s: steps %.1f, in-unit %.1f, downloading %.1f, uploading %.1f, fetching %.1f, "
              "idle %.1f; bytes/token up %.0f (wire %.0f), down %.0f (wire %.0f)" % (
                  i, w["trained"], w["inner_steps_per_unit"], w["accepted"], w["dropped"],
                  w["utilisation"], s["inner_steps"], s["in_unit_overhead"], s["downloading"],
                  s["uploading"], s["fetching"], s["idle"], w["app_bytes_per_token"]["up"],
                  w["wire_bytes_per_token"]["up"], w["app_bytes_per_token"]["down"],
                  w["wire_bytes_per_token"]["down"]))
    if a.json:
        with open(a.json, "w") as f:
            f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
