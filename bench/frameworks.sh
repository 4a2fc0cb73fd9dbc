#!/usr/bin/env bash
# The Framework API on local cells (issue #17, docs/frameworks.md).
#
# 1. Launch latency and rate, with the built-in scheduler as the baseline in
#    the same cell (herd up --agents 3, 1 s polls; tasks of /bin/true,
#    10m / 16Mi):
#    - framework: herd-example-framework --tasks N --stats: offer arriving
#      at the framework -> first update saying the task ran, p50/p99; tasks
#      per second from the first offer to the last finish;
#    - built-in: herd submit of one job of N such tasks: per task, the job's
#      SUBMIT -> the task's FINISH (master clock), p50/p99; tasks per second
#      from the submit to the job's last FINISH.
#    For both, the cell's own record of the framework's jobs too (accept's
#    SUBMIT -> FINISH), so the two paths are compared on one clock.
# 2. DRF shares over a run with two competing frameworks, beside the shares
#    DRF predicts:
#    - drf: the Mesos paper's cell (one agent offering 9 CPUs and 18 GiB);
#      A runs tasks of <1 CPU, 4 GiB>, B of <3 CPUs, 1 GiB>, each taking one
#      task per offer, `sleep 4` each, 40 of them. DRF predicts 2/3 and 2/3.
#    - weighted: one agent of 10 CPUs and 100 GiB, both frameworks' tasks
#      <1 CPU, 1 GiB>, B's role weighted 3 (herd master --framework-role).
#      DRF predicts A 1/4, B 3/4 of the CPUs; in whole tasks, A 3 and B 7.
#    Each framework has 400 tasks, more than it can run in the window, so
#    both compete throughout: `herd frameworks --json` is sampled every
#    0.5 s for 40 s, and the mean of each framework's dominant share is
#    taken after the first 5 s (the ramp-up). Then the frameworks are
#    stopped and the cell goes down.
#
#   bench/frameworks.sh [--tasks "200 1000"] [--offer-interval 1s] [--skip-latency] [--skip-drf]
# (--offer-interval: the master's --framework-offer-interval in part 1)
# Prints RESULT lines.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
herd=$root/build/bin/herd
fw=$root/build/bin/herd-example-framework
sizes="200 1000"
interval=1s
latency=1
drf=1
while [ $# -gt 0 ]; do
  case "$1" in
    --tasks) sizes=$2; shift 2 ;;
    --offer-interval) interval=$2; shift 2 ;;
    --skip-latency) latency=0; shift ;;
    --skip-drf) drf=0; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
command -v jq >/dev/null || { echo "needs jq (scripts/setup.sh installs it)" >&2; exit 2; }
now() { date +%s.%N; }

dir=""
cleanup() { [ -n "$dir" ] && "$herd" down --data "$dir" >/dev/null 2>&1 || true; }
trap cleanup EXIT

# up ARGS...: a detached cell in a fresh dir; sets dir, master, h (herd with its flags).
up() {
  dir=$(mktemp -d /tmp/herd-fw-XXXXXX)
  HERD_HOME=$dir "$herd" up --detach --data "$dir" --listen 127.0.0.1:0 --dns "" "$@" >/dev/null
  master=$(cat "$dir/master/master.addr")
  h=("$herd" --master "$master" --credentials "$dir/credentials.pem")
}
down() { "$herd" down --data "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"; dir=""; }

# p50/p99 of numbers on stdin (one a line), nearest rank.
pct() { sort -n | awk '{a[NR]=$1} END {if (NR==0) {print "0 0"; exit} i50=int(0.5*(NR-1)+0.5)+1; i99=int(0.99*(NR-1)+0.5)+1; print a[i50], a[i99]}'; }

# SUBMIT -> FINISH per task of the jobs `herd tasks` lists for $1 (a job or a selector), ms.
submit_to_finish() {
  "${h[@]}" tasks "$1" --json | jq -r '.tasks[] | [ (.history[] | select(.transition=="SUBMIT") | .timeMs | tonumber) ,
      (.history[] | select(.transition=="FINISH") | .timeMs | tonumber) ] | select(length==2) | .[1]-.[0]'
}

if [ $latency -eq 1 ]; then
  up --agents 3 --poll-interval 1s --master-arg=--framework-offer-interval=$interval
  user=$(id -un)
  for n in $sizes; do
    # The framework.
    out=$("$fw" --master "$master" --credentials "$dir/credentials.pem" --tasks "$n" --cpu 10m --memory 16Mi \
          --name "lat$n" --stats -- /bin/true 2>/dev/null)
    p50=$(sed -n 's/^RESULT offer_to_running_p50_ms=//p' <<<"$out")
    p99=$(sed -n 's/^RESULT offer_to_running_p99_ms=//p' <<<"$out")
    rate=$(sed -n 's/^RESULT tasks_per_second=//p' <<<"$out")
    # The same jobs on the master's clock: accept (SUBMIT) -> FINISH.
    read -r c50 c99 < <("${h[@]}" jobs --all --json | jq -r '.jobs[] | select(.spec.labels["herd.framework-name"]=="lat'"$n"'") | .id' |
      while read -r job; do submit_to_finish "$job"; done | pct)
    echo "framework (offers every $interval), $n tasks: offer->running p50 $p50 ms, p99 $p99 ms; accept->finish p50 $c50 ms, p99 $c99 ms; $rate tasks/s"
    echo "RESULT framework_${n}_offer_to_running_p50_ms=$p50"
    echo "RESULT framework_${n}_offer_to_running_p99_ms=$p99"
    echo "RESULT framework_${n}_accept_to_finish_p50_ms=$c50"
    echo "RESULT framework_${n}_accept_to_finish_p99_ms=$c99"
    echo "RESULT framework_${n}_tasks_per_second=$rate"
    # The built-in scheduler: one job of n tasks.
    printf 'name: base%d\nuser: %s\npriority: batch\ntasks: %d\ncommand: ["/bin/true"]\nresources: {cpu: 10m, memory: 16Mi}\nrestart: {policy: never}\n' \
      "$n" "$user" "$n" > "$dir/base$n.yaml"
    t0=$(now)
    "${h[@]}" submit "$dir/base$n.yaml" >/dev/null
    for _ in $(seq 1 1200); do  # bounded: 10 minutes
      state=$("${h[@]}" jobs --all --json | jq -r '.jobs[] | select(.id=="'"$user"'/base'"$n"'") | .state')
      [ "$state" = "DEAD" ] && break
      sleep 0.5
    done
    read -r b50 b99 < <(submit_to_finish "base$n" | pct)
    last=$("${h[@]}" tasks "base$n" --json | jq -r '[.tasks[] | .history[] | select(.transition=="FINISH") | .timeMs | tonumber] | max')
    first=$("${h[@]}" tasks "base$n" --json | jq -r '[.tasks[] | .history[] | select(.transition=="SUBMIT") | .timeMs | tonumber] | min')
    brate=$(echo "scale=1; $n * 1000 / ($last - $first)" | bc)
    echo "built-in, $n tasks: submit->finish p50 $b50 ms, p99 $b99 ms; $brate tasks/s (state $state after $(echo "$(now) - $t0" | bc) s)"
    echo "RESULT builtin_${n}_submit_to_finish_p50_ms=$b50"
    echo "RESULT builtin_${n}_submit_to_finish_p99_ms=$b99"
    echo "RESULT builtin_${n}_tasks_per_second=$brate"
  done
  down
fi

# drf_run NAME CAPACITY ROLE_FLAG A_CPU A_MEM B_CPU B_MEM B_ROLE PRED_A PRED_B PRED_TASKS_A PRED_TASKS_B
# (the predicted shares of continuous DRF, and the tasks each holds when
# whole tasks are handed out one at a time by DRF, ties to A)
drf_run() {
  local name=$1 cap=$2 roleflag=$3 acpu=$4 amem=$5 bcpu=$6 bmem=$7 brole=$8 pa=$9 pb=${10} pta=${11} ptb=${12}
  local margs=(--master-arg=--framework-offer-interval=250ms)
  [ -n "$roleflag" ] && margs+=("--master-arg=$roleflag")
  up --agents 1 --agent-capacity "$cap" --poll-interval 1s "${margs[@]}"
  local tasks=400 samples=$dir/samples.txt
  "$fw" --master "$master" --credentials "$dir/credentials.pem" --name a --tasks $tasks --per-offer 1 \
    --cpu "$acpu" --memory "$amem" -- /bin/sleep 4 2>/dev/null >/dev/null &
  local pa_pid=$!
  local rflag=()
  [ -n "$brole" ] && rflag=(--role "$brole")
  "$fw" --master "$master" --credentials "$dir/credentials.pem" --name b --tasks $tasks --per-offer 1 \
    --cpu "$bcpu" --memory "$bmem" "${rflag[@]}" -- /bin/sleep 4 2>/dev/null >/dev/null &
  local pb_pid=$!
  : > "$samples"
  local t0 t
  t0=$(now)
  # Bounded: 40 s of samples.
  while :; do
    t=$(echo "$(now) - $t0" | bc)
    [ "$(echo "$t > 40" | bc)" -eq 1 ] && break
    "${h[@]}" frameworks --json 2>/dev/null |
      jq -r --arg t "$t" '[.frameworks[] | {(.info.name): [.dominantShare // 0, .tasks // 0]}] | add // {} |
        "\($t) \(.a[0] // "-") \(.b[0] // "-") \(.a[1] // "-") \(.b[1] // "-")"' >> "$samples" || true
    sleep 0.5
  done
  kill $pa_pid $pb_pid 2>/dev/null || true
  wait $pa_pid 2>/dev/null || true
  wait $pb_pid 2>/dev/null || true
  # After the ramp-up, while both are listed.
  read -r ma mb ta tb n < <(awk '$1 >= 5 && $2 != "-" && $3 != "-" {sa+=$2; sb+=$3; na+=$4; nb+=$5; n++}
      END {if (n==0) n=1; printf "%.3f %.3f %.2f %.2f %d\n", sa/n, sb/n, na/n, nb/n, n}' "$samples")
  echo "$name: mean tasks running A $ta, B $tb (whole-task DRF: $pta and $ptb)"
  echo "RESULT ${name}_tasks_a=$ta"
  echo "RESULT ${name}_tasks_b=$tb"
  echo "RESULT ${name}_predicted_tasks_a=$pta"
  echo "RESULT ${name}_predicted_tasks_b=$ptb"
  echo "$name: mean dominant share A $ma (DRF predicts $pa), B $mb (predicts $pb), over $n samples"
  echo "RESULT ${name}_share_a=$ma"
  echo "RESULT ${name}_share_b=$mb"
  echo "RESULT ${name}_predicted_a=$pa"
  echo "RESULT ${name}_predicted_b=$pb"
  echo "RESULT ${name}_samples=$n"
  down
}

if [ $drf -eq 1 ]; then
  drf_run drf "cpu=9,memory=18Gi" "" 1 4Gi 3 1Gi "" 0.667 0.667 3 2
  drf_run weighted "cpu=10,memory=100Gi" "--framework-role=heavy=3" 1 1Gi 1 1Gi heavy 0.250 0.750 3 7
fi
