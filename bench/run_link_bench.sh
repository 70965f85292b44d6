#!/bin/bash
# Workers behind home lines: the coordinator in this network namespace, each tandem-worker in a
# namespace of its own behind a veth pair whose two directions are shaped by tc tbf (the
# worker's uplink on its side, its downlink on the coordinator's side). Reports per worker, from
# its ledger and its log: units trained, accepted and dropped (with the reason), utilisation
# (time in inner steps / wall time, after the warm-up units), the time per unit in each state
# (downloading, uploading only, fetching or idle, and the in-unit overhead: time in the training
# state outside the inner steps), and bytes per trained token up and down, from the application
# (the ledger's transfers) and on the wire (the veth's counters, TCP/IP and TLS included).
# Needs root (ip netns, tc). Results: docs/benchmarks.md ("Workers behind home lines").
#
#   bench/run_link_bench.sh --bin DIR [--up-mbit R] [--down-mbit R] [--workers W] [--units N]
#       [--model M] [--inner-steps H] [--batch B] [--threads T] [--overlap on|off] [--prefetch on|off]
#       [--heartbeat-timeout S] [--time-limit S] [--warmup-units N] [--keep-dir DIR] [--json FILE]
#       [--result-encoding fp16|int8] [--weight-deltas off|int8|fp16]
#
# --bin: the folder with tandem-coordinator and tandem-worker (e.g. build/ci/app). A rate of 0
# leaves that direction unshaped. Defaults: 10 Mbit/s up, 50 down, 1 worker, 4 units, tiny,
# H = 50, B = 4, 1 thread, overlap and prefetch on, fp16 results (as measured before int8 became
# the coordinator's default) and no weight deltas, 2 warm-up units (link_report.py); a worker
# still running after --time-limit (7200 s) fails the run. --keep-dir DIR keeps each worker's log
# and ledger there (link_report.py can read them again). Interrupting it (Ctrl-C) removes what
# it made.
set -euo pipefail

bin="" up=10 down=50 workers=1 units=4 model=tiny steps=50 batch=4 threads=1 overlap=on prefetch=on
hbto=180 json="" limit=7200 warmup=2 keep="" encoding=fp16 deltas=off
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2 ;;
    --up-mbit) up=$2 ;;
    --down-mbit) down=$2 ;;
    --workers) workers=$2 ;;
    --units) units=$2 ;;
    --model) model=$2 ;;
    --inner-steps) steps=$2 ;;
    --batch) batch=$2 ;;
    --threads) threads=$2 ;;
    --overlap) overlap=$2 ;;
    --prefetch) prefetch=$2 ;;
    --heartbeat-timeout) hbto=$2 ;;
    --json) json=$2 ;;
    --time-limit) limit=$2 ;;
    --warmup-units) warmup=$2 ;;
    --keep-dir) keep=$2 ;;
    --result-encoding) encoding=$2 ;;
    --weight-deltas) deltas=$2 ;;
    -h|--help) sed -n 2,23p "$0"; exit 0 ;;
    *) echo "run_link_bench.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift 2
done
[ -x "$bin/tandem-coordinator" ] && [ -x "$bin/tandem-worker" ] ||
  { echo "run_link_bench.sh: --bin must name a folder with tandem-coordinator and tandem-worker, got '$bin'" >&2; exit 2; }
for v in "$overlap" "$prefetch"; do
  case "$v" in on|off) ;; *) echo "run_link_bench.sh: --overlap and --prefetch take on or off" >&2; exit 2 ;; esac
done
[[ "$workers" =~ ^[1-9]$ ]] || { echo "run_link_bench.sh: --workers takes 1 to 9" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root for ip netns and tc" >&2; exit 77; }
corpus=/usr/share/games/fortunes
[ -d "$corpus" ] || { echo "SKIP: the fortunes corpus is missing (scripts/setup installs it)" >&2; exit 77; }

tag=$$ tmp=$(mktemp -d)
coord_pid="" worker_pids=()
cleanup() {
  for p in "${worker_pids[@]}" $coord_pid; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for i in $(seq "$workers"); do
    ip link del "tlc$tag$i" 2>/dev/null || true
    ip netns del "tandem_link_${tag}_$i" 2>/dev/null || true
  done
  if [ -n "$keep" ]; then
    mkdir -p "$keep"
    cp -r "$tmp"/worker*.log "$tmp"/wire* "$keep"/ 2>/dev/null || true
    for d in "$tmp"/worker*/; do
      [ -f "$d/ledger.db" ] && mkdir -p "$keep/$(basename "$d")" && sqlite3 "$d/ledger.db" ".backup '$keep/$(basename "$d")/ledger.db'"
    done
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# tbf needs a bucket of at least one timer tick at the rate: 20 ms of it, at least 8 KB.
shape() {  # shape MBIT DEV [COMMAND PREFIX, e.g. ip netns exec NS]
  local mbit=$1 dev=$2; shift 2
  [ "$mbit" = 0 ] && return 0
  local burst=$(python3 -c "print(max(8192, int($mbit * 1e6 / 8 * 0.02)))")
  "$@" tc qdisc add dev "$dev" root tbf rate "${mbit}mbit" burst "$burst" latency 400ms
}
for i in $(seq "$workers"); do
  ns=tandem_link_${tag}_$i vc=tlc$tag$i vw=tlw$tag$i
  ip netns add "$ns"
  ip link add "$vc" type veth peer name "$vw"
  ip link set "$vw" netns "$ns"
  ip addr add "10.77.$i.1/24" dev "$vc"
  ip link set "$vc" up
  ip netns exec "$ns" ip addr add "10.77.$i.2/24" dev "$vw"
  ip netns exec "$ns" ip link set "$vw" up
  ip netns exec "$ns" ip link set lo up
  shape "$up" "$vw" ip netns exec "$ns"  # what the worker sends
  shape "$down" "$vc"                    # what it receives
done

names=()
for i in $(seq "$workers"); do names+=(--tls-name "10.77.$i.1"); done
"$bin/tandem-coordinator" --listen 0.0.0.0:0 "${names[@]}" --state-dir "$tmp/coordinator" --model "$model" \
  --inner-steps "$steps" --batch "$batch" --heartbeat-timeout "$hbto" --threads 1 \
  --result-encoding "$encoding" --weight-deltas "$deltas" \
  --corpus "$corpus" >"$tmp/coordinator.out" 2>"$tmp/coordinator.log" &
coord_pid=$!
for _ in $(seq 600); do
  grep -q "pin " "$tmp/coordinator.out" 2>/dev/null && break
  sleep 0.1
done
port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$tmp/coordinator.out" | head -1)
pin=$(sed -n "s/^pin //p" "$tmp/coordinator.out" | head -1)
[ -n "$port" ] && [ -n "$pin" ] || { echo "run_link_bench.sh: the coordinator did not start:" >&2; tail "$tmp/coordinator.log" >&2; exit 1; }

flags=()
[ "$overlap" = off ] && flags+=(--no-overlap)
[ "$prefetch" = off ] && flags+=(--no-prefetch)
for i in $(seq "$workers"); do
  cat "/sys/class/net/tlc$tag$i/statistics/"{rx,tx}_bytes >"$tmp/wire0.$i"
  timeout "$limit" ip netns exec "tandem_link_${tag}_$i" "$bin/tandem-worker" --coordinator "https://10.77.$i.1:$port" \
    --pin "$pin" --data-dir "$tmp/worker$i" --device cpu --threads "$threads" --name "link$i" \
    --max-work-units "$units" "${flags[@]}" >/dev/null 2>"$tmp/worker$i.log" &
  worker_pids+=($!)
done
for i in $(seq "$workers"); do
  wait "${worker_pids[$((i - 1))]}" || { echo "run_link_bench.sh: worker $i failed:" >&2; tail "$tmp/worker$i.log" >&2; exit 1; }
  # On the coordinator's side of the pair: rx is what the worker sent, tx what it received.
  cat "/sys/class/net/tlc$tag$i/statistics/"{rx,tx}_bytes >"$tmp/wire1.$i"
  sqlite3 "$tmp/worker$i/ledger.db" "SELECT t.detail FROM work_unit_transitions t JOIN work_units w
    ON w.id = t.work_unit_id WHERE w.trained_at_ms IS NOT NULL AND w.state IN ('abandoned',
    'rejected') AND t.id = (SELECT MAX(id) FROM work_unit_transitions WHERE work_unit_id = w.id)" |
    sed "s/^/worker $i dropped: /" >&2
done
worker_pids=()

python3 "$(dirname "$0")/link_report.py" --dir "$tmp" --workers "$workers" --up "$up" \
  --down "$down" --model "$model" --inner-steps "$steps" --batch "$batch" --threads "$threads" \
  --overlap "$overlap" --prefetch "$prefetch" --warmup-units "$warmup" --load "$(cut -d' ' -f1-3 /proc/loadavg)" --json "$json"
