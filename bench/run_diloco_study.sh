#!/bin/sh
# The DiLoCo study of docs/benchmarks.md: tiny (3 seeds, every arm, plus plain averaging as a
# diagnostic) and small (1 seed, three arms; a small run costs ~7x a tiny one).
# usage: bench/run_diloco_study.sh BUILD_DIR OUT_DIR
set -eu
build=${1:-build/dev}
out=${2:-diloco-study}
mkdir -p "$out"
bin="$build/bench/tandem-bench-diloco"
"$bin" --config tiny --seeds 3 --jobs 2 --threads 1 \
  --arms sync,h10,h25,h50,h100,h50-fp16,h50-int8,h50-fp16-drop30,h50-fp16-stale1,h10-olr1-mom0,h50-olr1-mom0 \
  --json "$out/diloco_tiny.json" --csv "$out/diloco_tiny.csv" | tee "$out/diloco_tiny.txt"
"$bin" --config small --steps 200 --seeds 1 --jobs 3 --threads 1 \
  --arms sync,h25,h50-int8 \
  --json "$out/diloco_small.json" --csv "$out/diloco_small.csv" | tee "$out/diloco_small.txt"
