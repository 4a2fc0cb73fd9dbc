#!/usr/bin/env bash
# test_times.sh CTEST_LOG [N]: the N (default 10) slowest tests of a ctest
# run, read from its log lines ("... Test #12: name ....   Passed   3.41 sec"),
# slowest first, and a RESULT line for each so scripts can read them.
set -euo pipefail
log=$1
n=${2:-10}
echo
echo "Slowest tests:"
sed -n 's/^ *[0-9]*\/[0-9]* Test *#[0-9]*: \([^ ]*\) .* \([0-9.]*\) sec$/\2 \1/p' "$log" |
  sort -rn | head -n "$n" | while read -r secs name; do
    printf '  %8.1f s  %s\n' "$secs" "$name"
    echo "RESULT test_seconds.$name=$secs"
  done
