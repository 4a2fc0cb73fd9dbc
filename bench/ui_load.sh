#!/usr/bin/env bash
# The web UI on a 10,000-task cell: a real master (herd up, one real agent)
# and --machines hollow agents (herd bench hollow: the real agent protocol,
# no processes) running --tasks tasks in one big job plus 99 jobs of 10 and
# one job that cannot fit; each page timed in chromium (bench/ui_load.mjs:
# median of --runs loads, navigation start to the load event).
# Baseline in the same run: the same pages on the same master before the
# jobs are submitted (one job of 3 tasks), and `herd status BIG --json`
# (the CLI's view of the big job) timed beside its page.
#
#   bench/ui_load.sh [--herd PATH] [--tasks 10000] [--machines 100] [--runs 5]
# Prints RESULT ui_small_*_ms, ui_10k_*_ms, cli_status_10k_ms,
# ui_10k_tasks_running.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
herd=$root/build/bin/herd
tasks=10000
machines=100
runs=5
while [ $# -gt 0 ]; do
  case "$1" in
    --herd) herd=$2; shift 2 ;;
    --tasks) tasks=$2; shift 2 ;;
    --machines) machines=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
dir=$(mktemp -d /tmp/herd-ui-load-XXXXXX)
hollow=
cleanup() {
  [ -n "$hollow" ] && kill "$hollow" 2>/dev/null && wait "$hollow" 2>/dev/null || true
  "$herd" down --data "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
HERD_HOME=$dir "$herd" up --detach --data "$dir" --listen 127.0.0.1:0 --agents 1 >/dev/null
master=$(cat "$dir/master/master.addr")
h=("$herd" --master "$master" --credentials "$dir/credentials.pem")
"$herd" bench hollow --master "$master" --ca "$dir/pki" --count "$machines" --capacity cpu=64,memory=256Gi \
  >"$dir/hollow.log" 2>&1 &
hollow=$!
for _ in $(seq 600); do
  up=$("${h[@]}" cell --json | sed -n 's/.*"machinesUp": \([0-9]*\).*/\1/p')
  [ "${up:-0}" -ge $((machines + 1)) ] && break
  sleep 0.2
done
echo "cell: $up machines up"

spec() {  # NAME TASKS CPU
  printf 'name: %s\nuser: alice\npriority: batch\ntasks: %d\ncommand: ["sleep", "3600"]\nresources: {cpu: %s, memory: 16Mi}\n' "$1" "$2" "$3"
}
# Only the hollow machines take tasks: the real agent (m0) is drained.
"${h[@]}" drain m0 --reason "bench: hollow machines only" >/dev/null
spec small 3 10m >"$dir/small.yaml"
"${h[@]}" submit "$dir/small.yaml" >/dev/null
link=$("${h[@]}" ui 2>/dev/null)
node "$root/bench/ui_load.mjs" --link "$link" --label small --runs "$runs" / /machines /pending /job/alice/small /job/alice/small/0

big=$((tasks - 99 * 10 - 3))
spec big "$big" 10m >"$dir/big.yaml"
"${h[@]}" submit "$dir/big.yaml" >/dev/null
for i in $(seq 99); do spec "j$i" 10 10m; echo "---"; done >"$dir/many.yaml"
"${h[@]}" submit "$dir/many.yaml" >/dev/null
spec huge 1 1000 >"$dir/huge.yaml"
"${h[@]}" submit "$dir/huge.yaml" >/dev/null
for _ in $(seq 1200); do
  running=$("${h[@]}" cell --json | sed -n 's/.*"tasksRunning": \([0-9]*\).*/\1/p')
  [ "${running:-0}" -ge $((tasks - 1)) ] && break
  sleep 0.5
done
echo "cell: $running tasks running"
echo "RESULT ui_10k_tasks_running=$running"
link=$("${h[@]}" ui 2>/dev/null)
node "$root/bench/ui_load.mjs" --link "$link" --label 10k --runs "$runs" / /machines /pending /job/alice/big /job/alice/big/0
t0=$(date +%s%N)
for _ in $(seq "$runs"); do "${h[@]}" status big --json >/dev/null; done
t1=$(date +%s%N)
echo "RESULT cli_status_10k_ms=$(( (t1 - t0) / runs / 1000000 ))"
