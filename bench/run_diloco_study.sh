#!/bin/sh
# The DiLoCo study of docs/benchmarks.md, about 30 minutes on 2 cores: tiny (3 seeds, every
# default arm) and small (3 seeds, six arms; a small run costs about 7x a tiny one).
# usage: bench/run_diloco_study.sh BUILD_DIR OUT_DIR
# The JSON files are rewritten after every run, so an interrupted study keeps what it measured.
set -eu
build=${1:-build/dev}
out=${2:-diloco-study}
mkdir -p "$out"
bin="$build/bench/tandem-bench-diloco"
start=$(date +%s)
"$bin" --config tiny --seeds 3 --jobs 2 --threads 1 \
  --json "$out/diloco_tiny.json" --csv "$out/diloco_tiny.csv" | tee "$out/diloco_tiny.txt"
"$bin" --config small --steps 200 --seeds 3 --jobs 2 --threads 1 \
  --arms sync,h25,h50,h50-int8,h50-fp16-drop30,h50-fp16-pipe \
  --json "$out/diloco_small.json" --csv "$out/diloco_small.csv" | tee "$out/diloco_small.txt"
echo "study: $(($(date +%s) - start)) s in all"
