#!/usr/bin/env bash
# Builds the fuzz targets with clang (-fsanitize=fuzzer,address,undefined,
# in a tree of their own: DIR, default build/fuzzers) and runs each for a fixed
# time (FUZZ_SECONDS, default 20) from a copy of its seed corpus.
#
#   fuzz/run_fuzzers.sh [DIR] [TARGET...]
#
# Prints for each target: executions, executions per second, corpus size and
# coverage, also as `RESULT fuzz_<target>_execs_per_s=N` lines. An input that
# crashes or breaks a property is copied to fuzz/regressions/TARGET/ (which
# fuzz_replay_test replays from then on) and the run fails. New interesting
# inputs stay in DIR/corpus/TARGET; `fuzz/run_fuzzers.sh --merge` folds them
# into the seed corpus (minimised) for a commit.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
merge=0
if [ "${1:-}" = "--merge" ]; then
  merge=1
  shift
fi
dir=${1:-$src/build/fuzzers}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(spec_yaml spec_json spec_jsonnet master_api agent_protocol credential dns_query frameworks)
fi
seconds=${FUZZ_SECONDS:-20}

if [ ! -f "$dir/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DHERD_WITH_GRPC=OFF -DHERD_FUZZ=ON >/dev/null
fi
ninja -C "$dir" $(printf '%s_fuzzer ' "${targets[@]}")

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=0
for t in "${targets[@]}"; do
  corpus=$dir/corpus/$t
  artifacts=$dir/artifacts/$t
  mkdir -p "$corpus" "$artifacts"
  cp -n "$src/fuzz/corpus/$t/"* "$corpus/" 2>/dev/null || true
  log=$dir/$t.log
  rc=0
  dict=()
  [ -f "$src/fuzz/dict/$t.dict" ] && dict=(-dict="$src/fuzz/dict/$t.dict")
  "$dir/bin/${t}_fuzzer" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=4096 -max_len=16384 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "${dict[@]}" "$corpus" >"$log" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  secs=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | awk '{print $2}')
  size=$(ls "$corpus" | wc -l)
  echo "$t: ${runs:-0} executions in ${seconds} s (${secs:-0}/s), corpus $size inputs, coverage ${cov:-0} edges"
  echo "RESULT fuzz_${t}_execs_per_s=${secs:-0}"
  echo "RESULT fuzz_${t}_edges=${cov:-0}"
  if [ "$rc" -ne 0 ]; then
    failed=1
    echo "$t FAILED (exit $rc); the last lines of $log:" >&2
    tail -40 "$log" >&2
    mkdir -p "$src/fuzz/regressions/$t"
    for a in "$artifacts"/*; do
      [ -f "$a" ] || continue
      cp "$a" "$src/fuzz/regressions/$t/"
      echo "kept $src/fuzz/regressions/$t/$(basename "$a"): fix the bug and commit the input" >&2
    done
  fi
  if [ "$merge" -eq 1 ]; then
    mkdir -p "$dir/merged/$t"
    "$dir/bin/${t}_fuzzer" -merge=1 "$dir/merged/$t" "$src/fuzz/corpus/$t" "$corpus" >/dev/null 2>&1
    cp -n "$dir/merged/$t/"* "$src/fuzz/corpus/$t/" 2>/dev/null || true
  fi
done
exit "$failed"
