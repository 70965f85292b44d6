#!/bin/bash
# Bytes down per work unit for one real tandem-worker against a real tandem-coordinator on
# 127.0.0.1, with or without exact quantized weight deltas (issue 15; docs/benchmarks.md,
# "Weight deltas: what a worker downloads"). One worker, quorum 1, no upload overlap: every round
# closes on its one result, so each later unit starts from a newer version, which the worker
# rebuilds from the deltas (core/weight_rebuild.hpp) or downloads whole. Prints one line per unit
# from the worker's ledger: its base version, the bytes of its weights transfers (every delta and
# whole file, failed ones included), of its data, and how its weights came (the worker's log).
#
#   bench/run_worker_deltas.sh --bin DIR [--model M] [--weight-deltas off|fp16|int8] [--units N]
#
# --bin: the folder with tandem-coordinator and tandem-worker (e.g. build/ci/app). Defaults:
# tiny, int8, 4 units (H = 4, B = 1: the bytes do not depend on the training).
set -euo pipefail

bin="" model=tiny codec=int8 units=4
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2 ;;
    --model) model=$2 ;;
    --weight-deltas) codec=$2 ;;
    --units) units=$2 ;;
    *) echo "usage: $0 --bin DIR [--model M] [--weight-deltas off|fp16|int8] [--units N]" >&2
       exit 2 ;;
  esac
  shift 2
done
[ -x "$bin/tandem-coordinator" ] && [ -x "$bin/tandem-worker" ] || {
  echo "--bin must name the folder with tandem-coordinator and tandem-worker" >&2; exit 2; }

dir=$(mktemp -d)
coord_pid=""
cleanup() { [ -n "$coord_pid" ] && kill "$coord_pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
[ -n "${KEEP_LOG:-}" ] && trap 'cp "$dir/worker.log" "$KEEP_LOG"; cleanup' EXIT
python3 -c "
import random
random.seed(1)
words = ['the ', 'cat ', 'sat ', 'on ', 'a ', 'mat.\n', 'dogs ', 'run ']
open('$dir/corpus.txt', 'w').write(''.join(random.choice(words) for _ in range(400000)))"

"$bin/tandem-coordinator" --listen 127.0.0.1:0 --state-dir "$dir/coordinator" --model "$model" \
  --inner-steps 4 --batch 1 --quorum 1 --round-timeout 60 --threads 1 \
  --weight-deltas "$codec" --corpus "$dir/corpus.txt" >"$dir/coordinator.out" 2>"$dir/coordinator.log" &
coord_pid=$!
for _ in $(seq 600); do
  grep -q '^pin ' "$dir/coordinator.out" 2>/dev/null && break
  kill -0 "$coord_pid" 2>/dev/null || { cat "$dir/coordinator.log" >&2; exit 1; }
  sleep 0.1
done
port=$(sed -n 's/^listening on port //p' "$dir/coordinator.out")
pin=$(sed -n 's/^pin //p' "$dir/coordinator.out")

"$bin/tandem-worker" --coordinator "https://127.0.0.1:$port" --pin "$pin" --data-dir "$dir/worker" \
  --device cpu --threads 1 --name bench --max-work-units "$units" --no-overlap 2>"$dir/worker.log" \
  || { tail -20 "$dir/worker.log" >&2; exit 1; }

echo "model $model, weight deltas $codec, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%6s %8s %14s %10s  %s\n' unit version "weights B" "data B" "weights came"
sqlite3 -separator ' ' "$dir/worker/ledger.db" "
  SELECT u.id, u.base_version,
         (SELECT COALESCE(SUM(bytes), 0) FROM transfers t
           WHERE t.work_unit_id = u.id AND t.direction = 'down' AND t.purpose = 'weights'),
         (SELECT COALESCE(SUM(bytes), 0) FROM transfers t
           WHERE t.work_unit_id = u.id AND t.direction = 'down' AND t.purpose = 'data')
  FROM work_units u ORDER BY CAST(u.id AS INTEGER);" |
while read -r id version weights data; do
  how=$(grep -o "work unit $id: weights of version [0-9]* \(rebuilt from\|not rebuilt\|downloaded whole\)[^;]*" \
          "$dir/worker.log" | head -1 | sed "s/^work unit $id: //" || true)
  [ -z "$how" ] && how=$([ "$weights" = 0 ] && echo "held already" || echo "whole file")
  printf '%6s %8s %14s %10s  %s\n' "$id" "$version" "$weights" "$data" "$how"
done
