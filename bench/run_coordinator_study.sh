#!/bin/sh
# The runs of docs/benchmarks.md, "Coordinator under load": tandem-bench-coordinator against this
# build's coordinator and, as "before", another build's (OLD, e.g. main's before a change).
# Usage: run_coordinator_study.sh BUILD_DIR OUT_DIR [OLD_COORDINATOR] [REPEATS]
set -eu
build=$1
out=$2
old=${3:-}
repeats=${4:-3}
bench="$build/bench/tandem-bench-coordinator"
mkdir -p "$out"
run() {  # name, then the options
    name=$1
    shift
    echo "== $name: $*"
    nice -n 10 "$bench" "$@" --json "$out/$name.json" | tail -n 7
}
# RSS_ONLY=1: only the second part.
if [ -z "${RSS_ONLY:-}" ]; then
for r in $(seq "$repeats"); do
    # Heartbeats, 100 workers: this build against the old one, interleaved.
    run "hb100-new-$r" --workers 100 --seconds 10
    [ -n "$old" ] && run "hb100-old-$r" --workers 100 --seconds 10 --coordinator "$old"
    # 1,000 workers, a whole round.
    run "w1000-new-$r" --workers 1000 --seconds 10 --uploaders 16
    [ -n "$old" ] && run "w1000-old-$r" --workers 1000 --seconds 10 --uploaders 16 \
        --coordinator "$old"
done
fi
# Peak RSS against uploads at once: slow uplinks (1 MB/s each) on the `small` model, this build
# and the old one interleaved (K = 256 only for this build unless RSS_OLD_256=1: the old one
# holds 13.4 MiB per upload).
for r in $(seq 2); do
    for k in 1 4 16 64 256; do
        # K + 16 threads; 512 (the default) at K = 256, where K + 16 left uploads waiting for one.
        threads=$((k + 16))
        [ "$k" -ge 256 ] && threads=512
        set -- --model small --workers "$k" --uploaders "$k" --max-uploads "$k" \
            --http-threads "$threads" --seconds 1 --upload-rate 1000000 --replicate-fraction 0
        run "rss-small-$k-new-$r" "$@"
        if [ -n "$old" ] && { [ "$k" -lt 256 ] || [ -n "${RSS_OLD_256:-}" ]; }; then
            run "rss-small-$k-old-$r" "$@" --coordinator "$old"
        fi
    done
done
