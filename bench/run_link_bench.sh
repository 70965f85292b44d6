#!/bin/bash
# A worker behind a shaped uplink: the coordinator in this network namespace, one tandem-worker in
# a namespace of its own behind a veth pair whose worker-side egress (the worker's uplink) is
# limited by tc tbf. Reports, from the worker's ledger: units trained, accepted and dropped
# (abandoned or refused), wall time per accepted unit and compute utilisation (compute seconds /
# wall seconds). Needs root (ip netns, tc). Results: docs/benchmarks.md ("A shaped uplink").
#
#   bench/run_link_bench.sh --bin DIR [--up-mbit R] [--units N] [--model M] [--inner-steps H]
#                           [--heartbeat-timeout S] [--json FILE]
#
# --bin: the folder with tandem-coordinator and tandem-worker (e.g. build/ci/app).
set -euo pipefail

bin="" up=2 units=6 model=tiny steps=40 hbto=180 json=""
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2 ;;
    --up-mbit) up=$2 ;;
    --units) units=$2 ;;
    --model) model=$2 ;;
    --inner-steps) steps=$2 ;;
    --heartbeat-timeout) hbto=$2 ;;
    --json) json=$2 ;;
    -h|--help) sed -n 2,10p "$0"; exit 0 ;;
    *) echo "run_link_bench.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift 2
done
[ -x "$bin/tandem-coordinator" ] && [ -x "$bin/tandem-worker" ] ||
  { echo "run_link_bench.sh: --bin must name a folder with tandem-coordinator and tandem-worker, got '$bin'" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root for ip netns and tc" >&2; exit 77; }

ns=tandem_link_$$ vc=tlc$$ vw=tlw$$
tmp=$(mktemp -d)
coord_pid="" worker_pid=""
cleanup() {
  [ -n "$worker_pid" ] && kill "$worker_pid" 2>/dev/null || true
  [ -n "$coord_pid" ] && kill "$coord_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  ip link del "$vc" 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

ip netns add "$ns"
ip link add "$vc" type veth peer name "$vw"
ip link set "$vw" netns "$ns"
ip addr add 10.77.0.1/24 dev "$vc"
ip link set "$vc" up
ip netns exec "$ns" ip addr add 10.77.0.2/24 dev "$vw"
ip netns exec "$ns" ip link set "$vw" up
ip netns exec "$ns" ip link set lo up
# The uplink: what the worker sends (uploads, requests), shaped; downloads are not.
ip netns exec "$ns" tc qdisc add dev "$vw" root tbf rate "${up}mbit" burst 32kbit latency 400ms

corpus=/usr/share/games/fortunes
[ -d "$corpus" ] || { echo "SKIP: the fortunes corpus is missing (scripts/setup installs it)" >&2; exit 77; }
"$bin/tandem-coordinator" --listen 10.77.0.1:0 --state-dir "$tmp/coordinator" --model "$model" \
  --inner-steps "$steps" --batch 4 --quorum 1 --heartbeat-timeout "$hbto" --threads 1 \
  --corpus "$corpus" >"$tmp/coordinator.out" 2>"$tmp/coordinator.log" &
coord_pid=$!
for _ in $(seq 600); do
  grep -q "pin " "$tmp/coordinator.out" 2>/dev/null && break
  sleep 0.1
done
port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$tmp/coordinator.out" | head -1)
pin=$(sed -n "s/^pin //p" "$tmp/coordinator.out" | head -1)
[ -n "$port" ] && [ -n "$pin" ] || { echo "run_link_bench.sh: the coordinator did not start:" >&2; tail "$tmp/coordinator.log" >&2; exit 1; }

start=$(date +%s.%N)
ip netns exec "$ns" "$bin/tandem-worker" --coordinator "https://10.77.0.1:$port" --pin "$pin" \
  --data-dir "$tmp/worker" --device cpu --threads 1 --name link --max-work-units "$units" \
  >/dev/null 2>"$tmp/worker.log" &
worker_pid=$!
wait "$worker_pid" || { echo "run_link_bench.sh: the worker failed:" >&2; tail "$tmp/worker.log" >&2; exit 1; }
worker_pid=""
end=$(date +%s.%N)

q() { sqlite3 "$tmp/worker/ledger.db" "$1"; }
trained=$(q "SELECT COUNT(*) FROM work_units WHERE trained_at_ms IS NOT NULL")
accepted=$(q "SELECT COUNT(*) FROM work_units WHERE state = 'accepted'")
dropped=$(q "SELECT COUNT(*) FROM work_units WHERE trained_at_ms IS NOT NULL AND state IN ('abandoned', 'rejected')")
compute=$(q "SELECT COALESCE(SUM(compute_seconds), 0) FROM work_units")
wall=$(echo "$end - $start" | bc -l)
# Why each dropped unit was dropped (the detail of its last transition).
q "SELECT t.detail FROM work_unit_transitions t JOIN work_units w ON w.id = t.work_unit_id WHERE
   w.trained_at_ms IS NOT NULL AND w.state IN ('abandoned', 'rejected') AND t.id = (SELECT MAX(id)
   FROM work_unit_transitions WHERE work_unit_id = w.id)" | sed 's/^/dropped: /' >&2
python3 - "$up" "$model" "$steps" "$trained" "$accepted" "$dropped" "$compute" "$wall" "$json" <<'PY'
import json, sys
up, model, steps, trained, accepted, dropped, compute, wall, out = sys.argv[1:]
r = {"up_mbit": float(up), "model": model, "inner_steps": int(steps), "trained": int(trained),
     "accepted": int(accepted), "dropped": int(dropped), "compute_s": float(compute),
     "wall_s": float(wall)}
r["wall_s_per_accepted_unit"] = r["wall_s"] / max(1, r["accepted"])
r["utilisation"] = r["compute_s"] / r["wall_s"]
print("uplink %(up_mbit)g Mbit/s, %(model)s H=%(inner_steps)d: trained %(trained)d, accepted "
      "%(accepted)d, dropped %(dropped)d, wall %(wall_s).1f s (%(wall_s_per_accepted_unit).1f s "
      "per accepted unit), compute %(compute_s).1f s, utilisation %(utilisation).2f" % r)
if out:
    open(out, "w").write(json.dumps(r) + "\n")
PY
