#!/usr/bin/env bash
# Builds the fuzz preset (clang-14: libFuzzer + ASan + UBSan) and runs the fuzz targets one at a
# time: first on the saved crashes of tests/fuzz/regressions/<target> (each must now pass), then
# fuzzing for --seconds from the generated seeds and the corpus kept in build/fuzz/corpus/<target>
# (it grows from run to run). A crash or a failed check fails the run; its input is saved as
# build/fuzz/crashes/<target>-crash-<sha1> (add it to regressions/, see README.md).
#   tests/fuzz/run_fuzzers.sh [--seconds N] [target...]     (default: 3 seconds, every target)
# Exit 77 (skipped) when clang-14 or its fuzzer runtime (libclang-rt-14-dev) is missing.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
seconds=3
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done

if ! command -v clang++-14 >/dev/null; then
  echo "SKIPPED: clang++-14 is not installed (scripts/setup installs it)"; exit 77
fi
if ! ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "SKIPPED: libclang_rt.fuzzer is missing (libclang-rt-14-dev, scripts/setup)"; exit 77
fi

build="$root/build/fuzz"
cd "$root"
start=$(date +%s)
mkdir -p "$build"
cmake --preset fuzz >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
cmake --build "$build" --target fuzz_all -j "${TANDEM_FUZZ_BUILD_JOBS:-2}" >"$build/build.log" 2>&1 ||
  { tail -n 60 "$build/build.log"; exit 1; }
built=$(date +%s)
echo "fuzz build: $((built - start)) s"

if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(sed -n '/^set(TANDEM_FUZZ_TARGETS/,/)/p' tests/fuzz/CMakeLists.txt |
    tr ' ()' '\n\n\n' | grep '^fuzz_')
fi

seeds="$build/seeds"
rm -rf "$seeds"
"$build/tests/fuzz/tandem-fuzz-seeds" "$seeds" >/dev/null
# A SentencePiece model, when the spm_* tools are there: the tokenizer loader's other format.
if command -v spm_train >/dev/null; then
  spm="$build/spm"
  mkdir -p "$spm"
  printf 'the quick brown fox jumps over the lazy dog\nstay a while and listen\n%.0s' {1..40} \
    >"$spm/text.txt"
  if spm_train --input="$spm/text.txt" --model_prefix="$spm/tiny" --vocab_size=40 \
      --model_type=bpe --minloglevel=2 >"$spm/train.log" 2>&1; then
    { printf '\001\013'; cat "$spm/tiny.model"; printf 'hello world'; } \
      >"$seeds/fuzz_tokenizer/seed-spm"
  fi
fi

export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
mkdir -p "$build/crashes" "$build/logs"
failed=()
printf '%-22s %8s %12s %8s\n' target seconds executions corpus
for t in "${targets[@]}"; do
  bin="$build/tests/fuzz/$t"
  log="$build/logs/$t.log"
  regressions="tests/fuzz/regressions/$t"
  if compgen -G "$regressions/*" >/dev/null; then
    mapfile -t files < <(find "$regressions" -type f ! -name README.md | sort)
    if [ ${#files[@]} -gt 0 ] && ! "$bin" "${files[@]}" >"$log.replay" 2>&1; then
      echo "$t: a saved crash fails again:"; tail -n 30 "$log.replay"
      failed+=("$t"); continue
    fi
  fi
  mkdir -p "$build/corpus/$t"
  if "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2560 -print_final_stats=1 \
      -artifact_prefix="$build/crashes/$t-" "$build/corpus/$t" "$seeds/$t" >"$log" 2>&1; then
    status=""
  else
    status=" FAILED"
    failed+=("$t")
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  corpus=$(find "$build/corpus/$t" -type f | wc -l)
  printf '%-22s %8s %12s %8s%s\n' "$t" "$seconds" "${runs:-?}" "$corpus" "$status"
  if [ -n "$status" ]; then
    grep -E 'ERROR|fuzz check failed|runtime error|Test unit written' "$log" | head -n 10
    tail -n 40 "$log"
  fi
done
echo "total: $(( $(date +%s) - start )) s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed: ${failed[*]} (logs under $build/logs)"
  exit 1
fi
