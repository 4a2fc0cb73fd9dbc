#!/usr/bin/env bash
# A burst of real tasks on a local cell (herd up --agents A, 1 s polls):
# submit one job of N `sleep 3600` tasks (cpu 1m, memory 1Mi; N must fit:
# herd up splits the machine between its agents, 2 cores / 3 agents = 1,998
# such tasks) and time it until every task is RUNNING with a process; then
# count machines the master marked down and tasks placed more than once, and
# time `herd down`.
# Baseline in the same run: N fork+exec of /bin/true from the shell (what
# the machine allows one process at a time). --old PATH measures another herd
# binary the same way, alternating, for an A/B (e.g. one built before #11).
#
#   bench/cell_burst.sh [--herd PATH] [--old PATH] [--tasks 1800] [--agents 3] [--rounds 1]
# Prints a line per cell and RESULT lines (the new binary's; old_* for --old).
set -euo pipefail
herd=$(cd "$(dirname "$0")/.." && pwd)/build/bin/herd
old=""
tasks=1800
agents=3
rounds=1
while [ $# -gt 0 ]; do
  case "$1" in
    --herd) herd=$2; shift 2 ;;
    --old) old=$2; shift 2 ;;
    --tasks) tasks=$2; shift 2 ;;
    --agents) agents=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
now() { date +%s.%N; }

# One cell: prints "seconds_to_all_active marked_down placed_again down_seconds active".
measure() {
  local bin=$1 dir
  dir=$(mktemp -d /tmp/herd-burst-XXXXXX)
  HERD_HOME=$dir "$bin" up --detach --data "$dir" --listen 127.0.0.1:0 --agents "$agents" --poll-interval 1s >/dev/null
  local master
  master=$(cat "$dir/master/master.addr")
  local h=("$bin" --master "$master" --credentials "$dir/credentials.pem")
  printf 'name: burst\nuser: %s\npriority: batch\ntasks: %d\ncommand: ["sleep", "3600"]\nresources: {cpu: 1m, memory: 1Mi}\ngrace_period: 1s\n' \
    "$(id -un)" "$tasks" > "$dir/burst.yaml"
  local t0 t1 active=0 json
  t0=$(now)
  "${h[@]}" submit "$dir/burst.yaml" >/dev/null
  # Bounded: at most 3 minutes (a cell that never gets there says how far it got).
  for _ in $(seq 1 360); do
    json=$("${h[@]}" tasks burst --json 2>/dev/null || true)
    active=$(grep -c '"phase": "ACTIVE"' <<<"$json" || true)
    [ "$active" -ge "$tasks" ] && break
    sleep 0.5
  done
  t1=$(now)
  local again down
  again=$(grep -c '"incarnation": "[2-9]\|"incarnation": "[1-9][0-9]' <<<"$json" || true)
  down=$(grep -c "marked down" "$dir/logs/master.log" || true)
  local d0 d1
  d0=$(now)
  "$bin" down --data "$dir" >/dev/null 2>&1 || true
  d1=$(now)
  echo "$(echo "$t1 - $t0" | bc) $down $again $(echo "$d1 - $d0" | bc) $active"
  rm -rf "$dir"
}

# Baseline: fork+exec of /bin/true, one after another.
b0=$(now)
for _ in $(seq 1 "$tasks"); do /bin/true; done
b1=$(now)
base=$(echo "$tasks / ($b1 - $b0)" | bc)
echo "baseline: $tasks fork+exec of /bin/true in $(echo "$b1 - $b0" | bc) s ($base/s)"
echo "RESULT fork_exec_per_s=$base"

for r in $(seq 1 "$rounds"); do
  for which in new old; do
    bin=$herd
    [ "$which" = old ] && bin=$old
    [ -z "$bin" ] && continue
    read -r secs down again dsecs active < <(measure "$bin")
    rate=$(echo "$active / $secs" | bc)
    echo "$which (round $r): $active of $tasks tasks active in $secs s ($rate/s) on $agents agents; machines marked down $down; tasks placed again $again; herd down took $dsecs s"
    p=""
    [ "$which" = old ] && p=old_
    echo "RESULT ${p}burst_tasks_per_s=$rate"
    echo "RESULT ${p}burst_seconds=$secs"
    echo "RESULT ${p}machines_marked_down=$down"
    echo "RESULT ${p}tasks_placed_again=$again"
    echo "RESULT ${p}down_seconds=$dsecs"
  done
done
