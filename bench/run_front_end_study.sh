#!/usr/bin/env bash
# Front-end throughput (docs/benchmarks.md, "Front ends: work requests and heartbeats"): work
# requests and heartbeats per second of tandem-bench-coordinator --target through
#   agg    the aggregating process alone,
#   front  one --role front process (beside the aggregating one),
#   nginx  installer/nginx/tandem-front-ends.conf over two front ends,
# all on one PostgreSQL cluster (tests/tools/with_postgres: this script runs itself inside one),
# a fresh database and processes for every measurement, the three in turn in each repeat. The CPU
# per request is that of the coordinator processes and nginx (not PostgreSQL's).
#
# usage: run_front_end_study.sh BUILD OUT [REPEATS=3] [WORKERS=600] [SECONDS=10]
# OUT gets one JSON per measurement, each deployment's logs and summary.md. MODES="nginx" (or
# any of the three) measures only those; NGINX_CONF=FILE renders another server block (a variant
# of the shipped one) in their place.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
if [ -z "${TANDEM_TEST_POSTGRES:-}" ]; then
  exec "$root/tests/tools/with_postgres" "$0" "$@"
fi
build=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
repeats=${3:-3}
workers=${4:-600}
seconds=${5:-10}
coordinator=$build/app/tandem-coordinator
bench=$build/bench/tandem-bench-coordinator
nginx=$(command -v nginx || echo /usr/sbin/nginx)
db=postgresql://$PGUSER:$PGPASSWORD@$PGHOST:$PGPORT/tandem_front_end_study

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
trap cleanup EXIT

# start_coordinator DIR ARGS...: starts one process, waits for its port; sets $port and $pid.
start_coordinator() {
  local dir=$1
  shift
  "$coordinator" --listen 127.0.0.1:0 --state-dir "$dir/state" "$@" >"$dir/stdout" 2>"$dir/log" &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 600); do
    port=$(sed -n 's/^listening on port \([0-9]*\).*/\1/p' "$dir/stdout" 2>/dev/null || true)
    [ -n "$port" ] && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "the coordinator in $dir did not start:" >&2
  tail -20 "$dir/log" >&2
  exit 1
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# measure MODE REPEAT
measure() {
  local mode=$1 r=$2 dir=$out/$1-$2
  rm -rf "$dir"
  mkdir -p "$dir/agg"
  psql -q -d "$PGDATABASE" -c "DROP DATABASE IF EXISTS tandem_front_end_study WITH (FORCE)" \
    -c "CREATE DATABASE tandem_front_end_study"
  # The load generator's run: tiny units, one round that never closes while it runs.
  start_coordinator "$dir/agg" --db "$db" --corpus "$out/corpus.txt" --model tiny \
    --inner-steps 2 --batch 1 --quorum 1000000 --round-timeout 86400 --heartbeat-timeout 86400 \
    --stall-timeout 0 --replicate-fraction 0
  local agg=$port measured=("$pid") target=$port
  local public
  public=$(free_port)
  local fronts=()
  local n=0
  case $mode in front) n=1 ;; nginx) n=2 ;; esac
  for i in $(seq 1 $n); do
    mkdir -p "$dir/front$i/state"
    cp -a "$dir/agg/state/coordinator_key.pem" "$dir/agg/state/tls" "$dir/agg/state/data" \
      "$dir/front$i/state/"
    local base=https://127.0.0.1:$agg
    [ "$mode" = nginx ] && base=https://127.0.0.1:$public
    start_coordinator "$dir/front$i" --role front --db "$db" --upload-base "$base"
    fronts+=("$port")
    measured+=("$pid")
    target=$port
  done
  if [ "$mode" = nginx ]; then
    # As tests/tools/nginx_process does: a prefix of its own, the shipped server block inside.
    local p=$dir/nginx tls=$dir/agg/state/tls
    mkdir -p "$p/logs" "$p/tmp"
    {
      [ "$(id -u)" = 0 ] && echo "user root;"
      echo "worker_processes 1; pid $p/nginx.pid; error_log $p/logs/error.log;"
      echo "events { worker_connections 1024; }"
      echo "http { access_log off; client_body_temp_path $p/tmp; proxy_temp_path $p/tmp;"
      echo "fastcgi_temp_path $p/tmp; uwsgi_temp_path $p/tmp; scgi_temp_path $p/tmp;"
      sed -e "s|@LISTEN@|127.0.0.1:$public|; s|@TLS_CERT@|$tls/cert.pem|; s|@TLS_KEY@|$tls/key.pem|" \
        -e "s|@FRONT_END_1@|127.0.0.1:${fronts[0]}|; s|@FRONT_END_2@|127.0.0.1:${fronts[1]}|" \
        -e "s|@AGGREGATOR@|127.0.0.1:$agg|; s|@UPSTREAM_NAME@|localhost|" \
        -e "s|@UPSTREAM_CA@|$tls/cert.pem|; s|@REGISTER_RATE@|100000r/s|" \
        -e "s|@REGISTER_BURST@|100000|" \
        "${NGINX_CONF:-$root/installer/nginx/tandem-front-ends.conf}"
      echo "}"
    } >"$p/nginx.conf"
    "$nginx" -p "$p" -c "$p/nginx.conf" -e "$p/logs/error.log" -g "daemon off;" &
    local master=$!
    pids+=("$master")
    for _ in $(seq 100); do
      python3 -c "import socket; socket.create_connection(('127.0.0.1',$public),1)" 2>/dev/null && break
      sleep 0.1
    done
    measured+=("$master" $(pgrep -P "$master"))
    target=$public
  fi
  local list
  list=$(
    IFS=,
    echo "${measured[*]}"
  )
  "$bench" --target "https://127.0.0.1:$target" --ca-file "$dir/agg/state/tls/cert.pem" \
    --pids "$list" --workers "$workers" --seconds "$seconds" --json "$out/$mode-$r.json" |
    tee "$dir/bench.txt"
  cleanup
}

python3 -c 'import random; random.seed(1); print("".join(random.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(4 << 20)))' >"$out/corpus.txt"
for r in $(seq 1 "$repeats"); do
  for mode in ${MODES:-agg front nginx}; do
    measure "$mode" "$r"
  done
done

python3 - "$out" "$repeats" >"$out/summary.md" <<'EOF'
import json, statistics, sys
out, repeats = sys.argv[1], int(sys.argv[2])
names = {"agg": "aggregating process alone", "front": "one front end",
         "nginx": "nginx over two front ends"}
print("| target | work requests/s min / median | heartbeats/s min / median | heartbeat p50 ms | "
      "CPU ms per heartbeat (processes) | load before (1 min) |")
print("| --- | --- | --- | --- | --- | --- |")
import os
for mode in os.environ.get("MODES", "agg front nginx").split():
    runs = [json.load(open(f"{out}/{mode}-{r}.json")) for r in range(1, repeats + 1)]
    w = [j["work_requests_per_s"] for j in runs]
    h = [j["heartbeats_per_s"] for j in runs]
    p50 = [j["phases"]["heartbeat"]["latency_p50_ms"] for j in runs]
    cpu = [j["phases"]["heartbeat"]["coordinator_cpu_ms_per_request"] for j in runs]
    load = [j["load_average_before"].split()[0] for j in runs]
    print(f"| {names[mode]} | {min(w):.0f} / {statistics.median(w):.0f} | "
          f"{min(h):.0f} / {statistics.median(h):.0f} | {statistics.median(p50):.1f} | "
          f"{statistics.median(cpu):.2f} | {', '.join(load)} |")
EOF
cat "$out/summary.md"
