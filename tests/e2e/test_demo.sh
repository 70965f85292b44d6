#!/usr/bin/env bash
# scripts/demo as a newcomer runs it, on this build (no display: two headless workers): it starts
# a coordinator and the workers, they train, and Ctrl-C (SIGINT to the script alone, as a
# terminal's Ctrl-C reaches it; the programs run in their own sessions) ends it with exit 0, no
# "process ended" complaint, and no process left behind.
#   test_demo.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src="$1"
build="$2"
work="$(mktemp -d)"
script_pid=""
cleanup() {
  [ -n "$script_pid" ] && kill -KILL "$script_pid" 2>/dev/null || true
  pkill -KILL -f "$work/demo" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
# As from a terminal: the demo leads its own process group, with SIGINT not ignored (this shell
# starts background commands with SIGINT ignored, and bash cannot trap what it inherits ignored).
env -u DISPLAY -u WAYLAND_DISPLAY TANDEM_DEMO_BUILD_DIR="$build" TANDEM_DEMO_DIR="$work/demo" \
  TANDEM_DEMO_PORT="$port" python3 -c '
import os, signal, sys
os.setsid()
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])' "$src/scripts/demo" --fresh > "$work/out" 2>&1 &
script_pid=$!

# Running once the banner is out and a worker has a work unit in its ledger.
for _ in $(seq 1 600); do
  if grep -q "Tandem demo running" "$work/out" && [ -f "$work/demo/worker1/ledger.db" ] &&
    [ "$(sqlite3 "$work/demo/worker1/ledger.db" 'SELECT COUNT(*) FROM work_units' 2>/dev/null || echo 0)" -gt 0 ]; then
    break
  fi
  if ! kill -0 "$script_pid" 2>/dev/null; then
    cat "$work/out"
    echo "FAIL: the demo ended before it ran" >&2
    exit 1
  fi
  sleep 0.2
done
grep -q "Tandem demo running" "$work/out" || { cat "$work/out"; echo "FAIL: no banner" >&2; exit 1; }
pgrep -f "$work/demo/coordinator" > /dev/null || { echo "FAIL: no coordinator" >&2; exit 1; }
[ "$(pgrep -fc "$work/demo/worker")" -eq 2 ] || { echo "FAIL: not two workers" >&2; exit 1; }

# Ctrl-C: SIGINT to the terminal's foreground process group, the demo's.
kill -INT -- "-$script_pid"
rc=0
wait "$script_pid" || rc=$?
script_pid=""
cat "$work/out"
[ "$rc" -eq 0 ] || { echo "FAIL: the demo exited $rc after Ctrl-C, expected 0" >&2; exit 1; }
grep -q "demo: stopped" "$work/out" || { echo "FAIL: no 'stopped' line" >&2; exit 1; }
if grep -q "ended; see the logs" "$work/out"; then
  echo "FAIL: Ctrl-C was reported as a process ending" >&2
  exit 1
fi
if pgrep -f "$work/demo" > /dev/null; then
  pgrep -af "$work/demo" >&2
  echo "FAIL: processes left behind" >&2
  exit 1
fi
grep -q "received SIGTERM, stopping" "$work/demo/coordinator.log" ||
  { echo "FAIL: the coordinator was not stopped by the script" >&2; exit 1; }
echo "PASS: the demo ran and stopped cleanly on Ctrl-C"
