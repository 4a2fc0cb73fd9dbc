#!/usr/bin/env bash
# A rolling update of a 1,000-task job on a local cell (herd up --agents A,
# 1 s polls, real `sleep` tasks): the job runs with `update:
# {max_unavailable: 5%, min_healthy_time: 1s}`, then an env change (which
# restarts every task) is submitted and the job's tasks are sampled from the
# master (`herd tasks --json`, as fast as the CLI answers) until every task
# runs the new version and is active. Prints how long that took and the most
# tasks seen down at once (not RUNNING and active).
# Baseline in the same run: the same change to the same job without
# `update:` (every task at once, the behaviour before rolling updates).
#
#   bench/rolling_update.sh [--herd PATH] [--tasks 1000] [--agents 3] [--percent 5]
# Prints RESULT rolling_update_seconds, rolling_update_max_down,
# rolling_update_budget, all_at_once_seconds, all_at_once_max_down.
set -euo pipefail
herd=$(cd "$(dirname "$0")/.." && pwd)/build/bin/herd
tasks=1000
agents=3
percent=5
while [ $# -gt 0 ]; do
  case "$1" in
    --herd) herd=$2; shift 2 ;;
    --tasks) tasks=$2; shift 2 ;;
    --agents) agents=$2; shift 2 ;;
    --percent) percent=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
now() { date +%s.%N; }

dir=$(mktemp -d /tmp/herd-rolling-XXXXXX)
cleanup() { "$herd" down --data "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"; }
trap cleanup EXIT
HERD_HOME=$dir "$herd" up --detach --data "$dir" --listen 127.0.0.1:0 --agents "$agents" --poll-interval 1s >/dev/null
master=$(cat "$dir/master/master.addr")
h=("$herd" --master "$master" --credentials "$dir/credentials.pem")

# spec NAME VERSION UPDATE_LINE
spec() {
  printf 'name: %s\nuser: %s\npriority: batch\ntasks: %d\ncommand: ["sleep", "3600"]\nenv: {VERSION: "%s"}\nresources: {cpu: 1m, memory: 1Mi}\ngrace_period: 1s\n%s\n' \
    "$1" "$(id -un)" "$tasks" "$2" "$3" > "$dir/$1-$2.yaml"
  echo "$dir/$1-$2.yaml"
}

# Samples job $1 until all its tasks are active on version $2 (at most 10
# minutes); prints "seconds max_down samples".
watch() {
  local job=$1 version=$2 t0 json active on down max_down=0 samples=0
  t0=$(now)
  for _ in $(seq 1 6000); do
    json=$("${h[@]}" tasks "$job" --json 2>/dev/null || true)
    [ -z "$json" ] && continue
    samples=$((samples + 1))
    active=$(grep -c '"phase": "ACTIVE"' <<<"$json" || true)
    on=$(grep -c "\"jobVersion\": \"$version\"" <<<"$json" || true)
    down=$((tasks - active))
    [ "$down" -gt "$max_down" ] && max_down=$down
    if [ "$active" -ge "$tasks" ] && [ "$on" -ge "$tasks" ]; then break; fi
  done
  echo "$(echo "$(now) - $t0" | bc) $max_down $samples"
}

# until_active JOB: waits for every task of JOB to be active.
until_active() {
  for _ in $(seq 1 600); do
    [ "$("${h[@]}" tasks "$1" --json 2>/dev/null | grep -c '"phase": "ACTIVE"' || true)" -ge "$tasks" ] && return 0
    sleep 0.5
  done
  echo "job $1 never had all $tasks tasks active" >&2
  exit 1
}

update="update: {max_unavailable: ${percent}%, min_healthy_time: 1s, progress_deadline: 10m}"
budget=$(( tasks * percent / 100 ))
[ "$budget" -lt 1 ] && budget=1

"${h[@]}" submit "$(spec rolling 1 "$update")" >/dev/null
until_active rolling
"${h[@]}" submit "$(spec rolling 2 "$update")" >/dev/null
read -r secs max_down samples < <(watch rolling 2)
echo "rolling ($percent%, at most $budget down): $tasks tasks on the new version in $secs s; at most $max_down down at once ($samples samples)"
"${h[@]}" kill rolling >/dev/null

"${h[@]}" submit "$(spec atonce 1 "")" >/dev/null
until_active atonce
"${h[@]}" submit "$(spec atonce 2 "")" >/dev/null
read -r bsecs bmax_down bsamples < <(watch atonce 2)
echo "baseline, all at once: $tasks tasks on the new version in $bsecs s; at most $bmax_down down at once ($bsamples samples)"

echo "RESULT rolling_update_seconds=$secs"
echo "RESULT rolling_update_max_down=$max_down"
echo "RESULT rolling_update_budget=$budget"
echo "RESULT all_at_once_seconds=$bsecs"
echo "RESULT all_at_once_max_down=$bmax_down"
