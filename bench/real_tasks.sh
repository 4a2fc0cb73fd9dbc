#!/usr/bin/env bash
# Real processes on this machine, as fast as it allows: Herd on `herd up`
# beside the machine's own limit (fork+exec) and beside Slurm 22.05 (Debian's
# slurm-wlm, slurmctld and 8 slurmd "nodes" on loopback), in one run.
#
#   baseline   2,000 fork+exec+wait of /bin/true from this shell, one after
#              another -> tasks/s; the latency of one fork+exec+wait (p50 of
#              500), and of one `sh -c 'date +%s.%N'` (what the latency jobs
#              run)
#   herd       for each --agents count (default "3 8"), a fresh cell
#              (`herd up --detach --agents A`, 1 s polls):
#                one job of N tasks of /bin/true (restart never, batch,
#                cpu 1m, memory 1Mi) -> submit until every task is DEAD ->
#                tasks/s; the same at production priority;
#                N one-task jobs in one `herd submit` (one file, N documents)
#                -> jobs/s;
#              on the first cell also:
#                --separate S one-task jobs, one `herd submit` process each
#                (what a loop of sbatch does) -> jobs/s;
#                --lat-runs single-task jobs running `date +%s.%N`
#                (production, cpu 100m; then again batch, cpu 1m), one at
#                a time, 0.2-0.7 s apart (random, so a periodic tick on
#                either side is sampled at every phase): the time from just before
#                `herd submit` starts to the timestamp the task's process
#                printed (read back with `herd logs`) -> p50/p99;
#              and submit_latency (bench/submit_latency.cc, its own cell):
#              Submit RPC -> the master records the task ACTIVE.
#   slurm      bench/slurm/cluster.sh: munged, slurmctld, 8 slurmd (-N nK,
#              own ports on 127.0.0.1), config bench/slurm/slurm.conf.in:
#                N `sbatch --wrap=/bin/true`, one process each, -> until
#                squeue has none left -> jobs/s; one array job of N
#                (`sbatch --array`) the same way;
#                --lat-runs `sbatch --wrap='date +%s.%N'` one at a time,
#                0.2-0.7 s apart: just before sbatch starts -> the timestamp
#                the batch script printed -> p50/p99; the same for
#                `srun sh -c 'date +%s.%N'` (an interactive allocation).
# Every wait is bounded; everything started is stopped at the end (herd down,
# slurm processes by pid), the temporary directory removed.
#
#   bench/real_tasks.sh [--tasks 1000] [--agents "3 8"] [--lat-runs 40]
#                       [--separate N (default --tasks; 0 skips)]
#                       [--herd PATH] [--submit-latency PATH (default next to herd; none skips)]
#                       [--skip-slurm] [--slurm-nodes 8] [--slurm-node-cpus 32]
#                       [--slurm-sched SchedulerParameters (default: bench/slurm/cluster.sh's)]
# Needs Debian's slurm-wlm for the Slurm part (apt-get install -y slurm-wlm).
# Prints tables and one `RESULT name=value` line per figure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
herd=$here/../build/bin/herd
submit_latency=""
tasks=1000
agents_list="3 8"
lat_runs=40
separate=""
skip_slurm=0
slurm_nodes=8
slurm_node_cpus=32
slurm_sched=""
while [ $# -gt 0 ]; do
  case "$1" in
    --tasks) tasks=$2; shift 2 ;;
    --agents) agents_list=$2; shift 2 ;;
    --lat-runs) lat_runs=$2; shift 2 ;;
    --separate) separate=$2; shift 2 ;;
    --herd) herd=$2; shift 2 ;;
    --submit-latency) submit_latency=$2; shift 2 ;;
    --skip-slurm) skip_slurm=1; shift ;;
    --slurm-nodes) slurm_nodes=$2; shift 2 ;;
    --slurm-node-cpus) slurm_node_cpus=$2; shift 2 ;;
    --slurm-sched) slurm_sched=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -z "$separate" ] && separate=$tasks
herd=$(cd "$(dirname "$herd")" && pwd)/$(basename "$herd")
[ -x "$herd" ] || { echo "no herd binary at $herd" >&2; exit 2; }
[ -z "$submit_latency" ] && submit_latency=$(dirname "$herd")/submit_latency
if [ "$skip_slurm" = 0 ] && ! command -v slurmctld >/dev/null; then
  echo "Slurm is not installed: apt-get install -y slurm-wlm, or --skip-slurm" >&2
  exit 2
fi

work=$(mktemp -d /tmp/real-tasks-XXXXXX)
cells=()        # herd cells to bring down on exit
slurm_dir=""    # slurm cluster to stop on exit
cleanup() {
  set +e
  for c in "${cells[@]}"; do [ -d "$c" ] && "$herd" down --data "$c" >/dev/null 2>&1; done
  [ -n "$slurm_dir" ] && "$here/slurm/cluster.sh" stop "$slurm_dir" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- helpers --------------------------------------------------------------
calc() { awk "BEGIN { printf \"%.${2:-1}f\", $1 }"; }
# Nearest-rank percentile (as submit_latency does) of numbers on stdin.
pct() { sort -g | awk -v p="$1" '{ a[NR] = $1 } END { if (NR == 0) { print "nan"; exit } i = int(p * (NR - 1) + 0.5) + 1; print a[i] }'; }
rand_gap() { awk -v s="$RANDOM" 'BEGIN { srand(s); printf "%.3f", 0.2 + 0.5 * rand() }'; }
declare -A R      # RESULT name -> value, for the table at the end
result() { R[$1]=$2; echo "RESULT $1=$2"; }
me=$(id -un)
hz=$(getconf CLK_TCK)
# CPU time (ms) used so far by the processes PIDS (utime + stime).
cpu_ms() { local t=0 p v; for p in "$@"; do v=$(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null || echo 0); t=$((t + v)); done; echo $((t * 1000 / hz)); }
# The whole machine's busy CPU time (ms), all cores.
busy_ms() { awk -v hz="$hz" '/^cpu / { print int(($2 + $3 + $4 + $7 + $8) * 1000 / hz) }' /proc/stat; }

echo "real_tasks: $(date -u +%FT%TZ) on $(hostname) ($(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "herd: $herd"

# --- 1. baseline: fork+exec from this shell ---------------------------------
base_runs=2000
t0=$EPOCHREALTIME
for _ in $(seq 1 "$base_runs"); do /bin/true; done
t1=$EPOCHREALTIME
fork_rate=$(calc "$base_runs / ($t1 - $t0)" 0)
: > "$work/fork_lat"; : > "$work/sh_lat"
for _ in $(seq 1 500); do
  a=$EPOCHREALTIME; /bin/true; b=$EPOCHREALTIME
  echo "$a $b" >> "$work/fork_lat"
done
for _ in $(seq 1 500); do
  a=$EPOCHREALTIME; /bin/sh -c 'date +%s.%N' >/dev/null; b=$EPOCHREALTIME
  echo "$a $b" >> "$work/sh_lat"
done
ms() { awk '{ printf "%.3f\n", ($2 - $1) * 1000 }' "$1"; }
fork_p50=$(ms "$work/fork_lat" | pct 0.5)
sh_p50=$(ms "$work/sh_lat" | pct 0.5)
echo
echo "baseline: $base_runs fork+exec of /bin/true in $(calc "$t1 - $t0" 2) s; one fork+exec+wait p50 $fork_p50 ms; sh -c 'date' p50 $sh_p50 ms"
result fork_exec_per_s "$fork_rate"
result fork_exec_p50_ms "$fork_p50"
result sh_date_p50_ms "$sh_p50"

# --- 2. herd -----------------------------------------------------------------
herd_up() {  # herd_up AGENTS -> sets cell, H
  cell=$(mktemp -d "$work/herd-XXXX")
  cells+=("$cell")
  HERD_HOME=$cell "$herd" up --detach --data "$cell" --listen 127.0.0.1:0 --agents "$1" --poll-interval 1s >/dev/null
  H=("$herd" --master "$(cat "$cell/master/master.addr")" --credentials "$cell/credentials.pem")
  for _ in $(seq 1 100); do  # bounded: 100 looks (~15 s) until every agent is UP
    [ "$("${H[@]}" machines 2>/dev/null | grep -c ' UP ' || true)" -ge "$1" ] && return 0
    sleep 0.1
  done
  echo "herd: only some of $1 agents came up" >&2
  "${H[@]}" machines >&2 || true
  return 1
}
herd_down() {
  "$herd" down --data "$cell" >/dev/null 2>&1 || true
}
# A job of TASKS tasks that run COMMAND once (restart never); by default
# batch priority, cpu 1m, memory 1Mi, so that a thousand fit at once.
spec() {  # spec NAME TASKS COMMAND_YAML [PRIORITY CPU MEMORY]
  printf 'name: %s\nuser: %s\npriority: %s\ntasks: %d\ncommand: %s\nresources: {cpu: %s, memory: %s}\nrestart: {policy: never}\ngrace_period: 1s\n' \
    "$1" "$me" "${4:-batch}" "$2" "$3" "${5:-1m}" "${6:-1Mi}"
}
# DEAD tasks in the cell (`herd cell`: one small answer, whatever the count).
cell_dead() {
  "${H[@]}" cell --json 2>/dev/null | awk '/"tasksDead"/ { gsub(/[^0-9]/, "", $2); print $2 + 0; found = 1 } END { if (!found) print 0 }'
}
# Wait (bounded: 300 s) until COUNT more tasks than BEFORE are DEAD; prints
# the seconds since T0 (polls every 0.1 s) and how many more are DEAD.
wait_dead() {  # wait_dead BEFORE COUNT T0
  local d=0 until=$(( ${EPOCHREALTIME%.*} + 300 ))
  while [ "${EPOCHREALTIME%.*}" -lt "$until" ]; do
    d=$(( $(cell_dead) - $1 ))
    [ "$d" -ge "$2" ] && break
    sleep 0.1
  done
  local t=$EPOCHREALTIME
  [ "$d" -ge "$2" ] || echo "herd: only $d of $2 tasks DEAD after 300 s" >&2
  echo "$(calc "$t - $3" 3) $d"
}
# Exit codes of a job's tasks: "ok failed" (ok = exited with code 0).
exits_of() {
  "${H[@]}" tasks "$1" --json 2>/dev/null | awk '/"exitCode": / { gsub(/,/, "", $2); if ($2 == "0") ok++; else bad++ } END { print ok + 0, bad + 0 }'
}
cell_notes() {  # what the cell's logs say went wrong: "down errors containers_off"
  local down errs off
  down=$(cat "$cell"/logs/*.log 2>/dev/null | grep -c "marked down" || true)
  errs=$(cat "$cell"/logs/*.log 2>/dev/null | grep -c -E "^[0-9T:.-]+ E " || true)
  # An agent whose cgroups could not be set up runs its tasks without
  # containers (and starts them faster): say so beside its figures.
  off=$(cat "$cell"/logs/m*.log 2>/dev/null | grep -c -E "containers off|cannot lock" || true)
  echo "$down $errs $off"
}

# herd_lat NAME PRIORITY CPU MEMORY: --lat-runs one-task jobs running
# `date +%s.%N`, one at a time, 0.2-0.7 s apart; sets lp50, lp99, lcli (ms).
herd_lat() {
  local name=$1 i t0 ts out n
  : > "$work/$name.lat"; : > "$work/$name.cli"
  for i in $(seq 1 "$lat_runs"); do
    spec "$name$i" 1 '"date +%s.%N"' "$2" "$3" "$4" > "$work/lat.yaml"
    sleep "$(rand_gap)"
    t0=$EPOCHREALTIME
    "${H[@]}" submit "$work/lat.yaml" >/dev/null
    ts=$EPOCHREALTIME
    sleep 0.3   # the task stamps its own start: no need to race it with polls
    out=""
    for _ in $(seq 1 200); do  # bounded: 200 looks (~20 s)
      out=$("${H[@]}" logs "$name$i/0" 2>/dev/null | head -1 || true)
      [ -n "$out" ] && break
      sleep 0.05
    done
    if [ -z "$out" ]; then echo "  $name$i: no output after 200 looks" >&2; continue; fi
    calc "($out - $t0) * 1000" 1 >> "$work/$name.lat"; echo >> "$work/$name.lat"
    calc "($ts - $t0) * 1000" 1 >> "$work/$name.cli"; echo >> "$work/$name.cli"
  done
  n=$(grep -c . "$work/$name.lat" || true)
  lp50=$(pct 0.5 < "$work/$name.lat"); lp99=$(pct 0.99 < "$work/$name.lat"); lcli=$(pct 0.5 < "$work/$name.cli")
  echo "  submit -> process started, $2 cpu $3 ($n runs, herd submit CLI included): p50 $lp50 ms, p99 $lp99 ms, max $(pct 1 < "$work/$name.lat") ms; the CLI itself returned after p50 $lcli ms"
}

first=1
for agents in $agents_list; do
  herd_up "$agents"
  echo
  echo "herd up --agents $agents ($cell)"
  sfx=""; [ "$first" = 1 ] || sfx="_${agents}agents"

  # One job of N tasks.
  spec burst "$tasks" '["/bin/true"]' > "$work/burst.yaml"
  before=$(cell_dead)
  daemons=$(pgrep -f -- "--data $cell|$cell/master|$cell/agents" | tr '\n' ' ')
  c0=$(cpu_ms $daemons); m0=$(busy_ms)
  t0=$EPOCHREALTIME
  "${H[@]}" submit "$work/burst.yaml" >/dev/null
  read -r secs dead < <(wait_dead "$before" "$tasks" "$t0")
  c1=$(cpu_ms $daemons); m1=$(busy_ms)
  read -r ok bad < <(exits_of burst)
  # The master's own record: the last task's FINISH (ms since the epoch).
  last_ms=$("${H[@]}" tasks burst --json | awk '/"transition": "FINISH"/ { f = 1; next } f && /"timeMs"/ { gsub(/[",]/, "", $2); if ($2 + 0 > m) m = $2 + 0; f = 0 } END { printf "%.0f", m }')
  rec=$(calc "($last_ms / 1000 - $t0)" 3)
  rate=$(calc "$dead / $secs" 0)
  echo "  one job of $tasks tasks: $dead DEAD in $secs s ($rate tasks/s; the master's last FINISH at +$rec s); exit 0: $ok, other: $bad"
  echo "    CPU meanwhile: master and agents $((c1 - c0)) ms ($(calc "($c1 - $c0) / $tasks" 2) ms a task; shims and tasks not counted); the whole machine busy $(calc "100 * ($m1 - $m0) / ($secs * 1000 * $(nproc))" 0)% of its $(nproc) cores"
  result "herd_burst_tasks_per_s$sfx" "$rate"
  result "herd_burst_seconds$sfx" "$secs"
  result "herd_burst_failed_tasks$sfx" "$((tasks - ok))"
  result "herd_burst_daemon_cpu_ms_per_task$sfx" "$(calc "($c1 - $c0) / $tasks" 2)"
  result "herd_burst_machine_busy_pct$sfx" "$(calc "100 * ($m1 - $m0) / ($secs * 1000 * $(nproc))" 0)"

  # The same at production priority (the agent's ls group instead of its
  # batch group; still cpu 1m).
  spec burstls "$tasks" '["/bin/true"]' production > "$work/burstls.yaml"
  before=$(cell_dead)
  t0=$EPOCHREALTIME
  "${H[@]}" submit "$work/burstls.yaml" >/dev/null
  read -r secs dead < <(wait_dead "$before" "$tasks" "$t0")
  read -r ok bad < <(exits_of burstls)
  rate=$(calc "$dead / $secs" 0)
  echo "  the same at production priority: $dead DEAD in $secs s ($rate tasks/s); exit 0: $ok, other: $bad"
  result "herd_burst_production_tasks_per_s$sfx" "$rate"

  # N one-task jobs in one submit.
  for i in $(seq 1 "$tasks"); do echo '---'; spec "one$i" 1 '["/bin/true"]'; done > "$work/many.yaml"
  before=$(cell_dead)
  t0=$EPOCHREALTIME
  "${H[@]}" submit "$work/many.yaml" >/dev/null
  read -r secs dead < <(wait_dead "$before" "$tasks" "$t0")
  bad=0
  for i in $(seq 1 $(( tasks > 20 ? tasks / 20 : 1 )) "$tasks"); do  # 20 of them, evenly spread
    read -r o b < <(exits_of "one$i"); [ "$o" = 1 ] || bad=$((bad + 1))
  done
  rate=$(calc "$dead / $secs" 0)
  echo "  $tasks one-task jobs, one submit: $dead DEAD in $secs s ($rate jobs/s); of 20 checked, not exit 0: $bad"
  result "herd_jobs_one_submit_per_s$sfx" "$rate"

  if [ "$first" = 1 ] && [ "$separate" -gt 0 ]; then
    # One `herd submit` process per job, as a loop of sbatch.
    for i in $(seq 1 "$separate"); do spec "sep$i" 1 '["/bin/true"]' > "$work/sep$i.yaml"; done
    before=$(cell_dead)
    t0=$EPOCHREALTIME
    for i in $(seq 1 "$separate"); do "${H[@]}" submit "$work/sep$i.yaml" >/dev/null; done
    ts=$EPOCHREALTIME
    read -r secs dead < <(wait_dead "$before" "$separate" "$t0")
    rate=$(calc "$dead / $secs" 0)
    echo "  $separate one-task jobs, one herd submit each: submitted in $(calc "$ts - $t0" 2) s ($(calc "($ts - $t0) * 1000 / $separate" 1) ms a submit), $dead DEAD in $secs s ($rate jobs/s)"
    result herd_separate_submits_jobs_per_s "$rate"
    result herd_submit_cli_ms "$(calc "($ts - $t0) * 1000 / $separate" 1)"
  fi

  if [ "$first" = 1 ] && [ "$lat_runs" -gt 0 ]; then
    # Submit -> the task's process has started (its own timestamp), for a
    # task of production priority with cpu 100m (its CFS quota, 10 ms per
    # 100 ms, does not hold `sh -c date` back) and for one shaped as the
    # burst's tasks (batch, cpu 1m: a quota of 1 ms per 100 ms and 2 CPU
    # shares, under the agent's batch group).
    herd_lat lat production 100m 16Mi
    result herd_submit_to_running_p50_ms "$lp50"
    result herd_submit_to_running_p99_ms "$lp99"
    result herd_submit_cli_p50_ms "$lcli"
    herd_lat latb batch 1m 1Mi
    result herd_submit_to_running_batch_1m_p50_ms "$lp50"
    result herd_submit_to_running_batch_1m_p99_ms "$lp99"
  fi
  read -r down errs off < <(cell_notes)
  echo "  cell logs: machines marked down $down, error lines $errs, agents without containers $off"
  grep -h -E "containers off|cannot lock|removed the cgroups of dead agent" "$cell"/logs/m*.log 2>/dev/null | sed 's/^/    /' || true
  result "herd_machines_marked_down$sfx" "$down"
  result "herd_agents_without_containers$sfx" "$off"
  t0=$EPOCHREALTIME
  herd_down
  echo "  herd down: $(calc "$EPOCHREALTIME - $t0" 2) s"
  first=0
done

if [ -x "$submit_latency" ] && [ "$lat_runs" -gt 0 ]; then
  # Its cell listens on 127.0.0.1:17170 and is brought down by it.
  agents1=${agents_list%% *}
  echo
  echo "submit_latency --runs $lat_runs --agents $agents1 (Submit RPC -> master records the task ACTIVE):"
  if "$submit_latency" --runs "$lat_runs" --agents "$agents1" --herd "$herd" > "$work/sl.out" 2>&1; then
    sed 's/^/  /' "$work/sl.out" | grep -v RESULT
    for k in p50 p90 max; do
      v=$(sed -n "s/^RESULT submit_to_running_${k}_ms=//p" "$work/sl.out")
      result "herd_api_submit_to_active_${k}_ms" "$v"
    done
  else
    echo "  submit_latency failed:"; sed 's/^/  /' "$work/sl.out"
  fi
fi

# --- 3. slurm ------------------------------------------------------------------
if [ "$skip_slurm" = 0 ]; then
  slurm_dir=$work/slurm
  echo
  SLURM_NODE_CPUS=$slurm_node_cpus "$here/slurm/cluster.sh" start "$slurm_dir" "$slurm_nodes" $slurm_sched >/dev/null 2>"$work/slurm_start.err" || {
    cat "$work/slurm_start.err" >&2; exit 1; }
  export SLURM_CONF=$slurm_dir/slurm.conf
  echo "slurm $(sinfo -V | awk '{print $2}'): slurmctld + $slurm_nodes slurmd on 127.0.0.1, $slurm_node_cpus CPUs each ($slurm_dir)"
  echo "  SchedulerType=$(scontrol show config | awk -F'= ' '/^SchedulerType /{print $2}') SchedulerParameters=$(scontrol show config | awk -F'= ' '/^SchedulerParameters /{print $2}')"
  mkdir -p "$slurm_dir/out"
  # Bounded (300 s): until squeue shows no job named NAME; prints seconds since T0.
  slurm_wait() {  # slurm_wait NAME T0
    local n=1 until=$(( ${EPOCHREALTIME%.*} + 300 ))
    while [ "${EPOCHREALTIME%.*}" -lt "$until" ]; do
      n=$(squeue -h -n "$1" -o %i 2>/dev/null | wc -l)
      [ "$n" = 0 ] && break
      sleep 0.1
    done
    [ "$n" = 0 ] || echo "slurm: $n jobs $1 still queued after 300 s" >&2
    calc "$EPOCHREALTIME - $2" 3
  }
  completed_ok() { scontrol show jobs -o 2>/dev/null | grep "JobName=$1 " | grep 'JobState=COMPLETED' | grep -c 'ExitCode=0:0' || true; }

  # N sbatch, one process each.
  t0=$EPOCHREALTIME
  for _ in $(seq 1 "$tasks"); do sbatch -Q -J sl_loop -o /dev/null --wrap=/bin/true; done
  ts=$EPOCHREALTIME
  secs=$(slurm_wait sl_loop "$t0")
  ok=$(completed_ok sl_loop)
  loop_rate=$(calc "$ok / $secs" 0)
  echo "  $tasks sbatch --wrap=/bin/true: submitted in $(calc "$ts - $t0" 2) s ($(calc "($ts - $t0) * 1000 / $tasks" 1) ms a sbatch), $ok COMPLETED exit 0 in $secs s ($loop_rate jobs/s)"
  result slurm_sbatch_loop_jobs_per_s "$loop_rate"
  result slurm_sbatch_ms "$(calc "($ts - $t0) * 1000 / $tasks" 1)"

  # One array of N.
  daemons=$(cat "$slurm_dir"/run/*.pid | tr '\n' ' ')
  c0=$(cpu_ms $daemons); m0=$(busy_ms)
  t0=$EPOCHREALTIME
  sbatch -Q -J sl_array -o /dev/null --array="0-$((tasks - 1))" --wrap=/bin/true
  secs=$(slurm_wait sl_array "$t0")
  c1=$(cpu_ms $daemons); m1=$(busy_ms)
  ok=$(completed_ok sl_array)
  array_rate=$(calc "$ok / $secs" 0)
  echo "  sbatch --array=0-$((tasks - 1)) --wrap=/bin/true: $ok COMPLETED exit 0 in $secs s ($array_rate jobs/s)"
  echo "    CPU meanwhile: slurmctld, slurmd and munged $((c1 - c0)) ms ($(calc "($c1 - $c0) / $tasks" 2) ms a job; slurmstepd and jobs not counted); the whole machine busy $(calc "100 * ($m1 - $m0) / ($secs * 1000 * $(nproc))" 0)% of its $(nproc) cores"
  result slurm_array_daemon_cpu_ms_per_job "$(calc "($c1 - $c0) / $tasks" 2)"
  result slurm_array_machine_busy_pct "$(calc "100 * ($m1 - $m0) / ($secs * 1000 * $(nproc))" 0)"
  result slurm_array_jobs_per_s "$array_rate"
  best=$loop_rate; [ "${array_rate%.*}" -gt "${best%.*}" ] && best=$array_rate
  result slurm_jobs_per_s "$best"

  if [ "$lat_runs" -gt 0 ]; then
    : > "$work/slurm_lat"; : > "$work/srun_lat"; : > "$work/sbatch_cli"
    for i in $(seq 1 "$lat_runs"); do
      sleep "$(rand_gap)"
      f=$slurm_dir/out/lat$i
      t0=$EPOCHREALTIME
      sbatch -Q -J sl_lat -o "$f" --wrap='date +%s.%N'
      calc "($EPOCHREALTIME - $t0) * 1000" 1 >> "$work/sbatch_cli"; echo >> "$work/sbatch_cli"
      for _ in $(seq 1 1000); do [ -s "$f" ] && break; sleep 0.01; done  # bounded: 10 s
      if [ -s "$f" ]; then calc "($(head -1 "$f") - $t0) * 1000" 1 >> "$work/slurm_lat"; echo >> "$work/slurm_lat"
      else echo "  sbatch lat$i: no output after 10 s" >&2; fi
    done
    for i in $(seq 1 "$lat_runs"); do
      sleep "$(rand_gap)"
      t0=$EPOCHREALTIME
      out=$(timeout 10 srun -Q -J sl_srun /bin/sh -c 'date +%s.%N' || true)
      if [ -n "$out" ]; then calc "($out - $t0) * 1000" 1 >> "$work/srun_lat"; echo >> "$work/srun_lat"
      else echo "  srun $i: no output in 10 s" >&2; fi
    done
    sp50=$(pct 0.5 < "$work/slurm_lat"); sp99=$(pct 0.99 < "$work/slurm_lat")
    rp50=$(pct 0.5 < "$work/srun_lat"); rp99=$(pct 0.99 < "$work/srun_lat")
    echo "  sbatch -> batch script started ($(grep -c . "$work/slurm_lat") runs): p50 $sp50 ms, p99 $sp99 ms; sbatch itself returned after p50 $(pct 0.5 < "$work/sbatch_cli") ms"
    echo "  srun -> process started ($(grep -c . "$work/srun_lat") runs): p50 $rp50 ms, p99 $rp99 ms"
    result slurm_start_latency_p50_ms "$sp50"
    result slurm_start_latency_p99_ms "$sp99"
    result slurm_srun_start_latency_p50_ms "$rp50"
    result slurm_srun_start_latency_p99_ms "$rp99"
  fi
  t0=$EPOCHREALTIME
  "$here/slurm/cluster.sh" stop "$slurm_dir"
  slurm_dir=""
  echo "  slurm stopped in $(calc "$EPOCHREALTIME - $t0" 2) s"
  unset SLURM_CONF
fi

# --- 4. side by side -------------------------------------------------------------
v() { echo "${R[$1]:-}"; }
echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
printf '%-58s %14s %14s\n' "" "per second" "p50 / p99 ms"
printf '%-58s %14s %14s\n' "fork+exec+wait of /bin/true (this shell)" "$(v fork_exec_per_s)" "$(v fork_exec_p50_ms)"
printf '%-58s %14s %14s\n' "sh -c 'date +%s.%N' (what the latency jobs run)" "" "$(v sh_date_p50_ms)"
first=1
for agents in $agents_list; do
  sfx=""; [ "$first" = 1 ] || sfx="_${agents}agents"
  printf '%-58s %14s\n' "herd, $agents agents: one job of $tasks tasks, until all DEAD" "$(v "herd_burst_tasks_per_s$sfx")"
  printf '%-58s %14s\n' "herd, $agents agents: the same at production priority" "$(v "herd_burst_production_tasks_per_s$sfx")"
  printf '%-58s %14s\n' "herd, $agents agents: $tasks one-task jobs in one submit" "$(v "herd_jobs_one_submit_per_s$sfx")"
  if [ "$first" = 1 ]; then
    [ -n "$(v herd_separate_submits_jobs_per_s)" ] && printf '%-58s %14s\n' "herd, $agents agents: $separate jobs, one herd submit each" "$(v herd_separate_submits_jobs_per_s)"
    [ -n "$(v herd_submit_to_running_p50_ms)" ] && printf '%-58s %14s %14s\n' "herd, $agents agents: submit -> process started (prod, 100m)" "" "$(v herd_submit_to_running_p50_ms) / $(v herd_submit_to_running_p99_ms)"
    [ -n "$(v herd_submit_to_running_batch_1m_p50_ms)" ] && printf '%-58s %14s %14s\n' "herd, $agents agents: submit -> process started (batch, 1m)" "" "$(v herd_submit_to_running_batch_1m_p50_ms) / $(v herd_submit_to_running_batch_1m_p99_ms)"
    [ -n "$(v herd_api_submit_to_active_p50_ms)" ] && printf '%-58s %14s %14s\n' "herd, $agents agents: Submit RPC -> ACTIVE (submit_latency)" "" "$(v herd_api_submit_to_active_p50_ms) / max $(v herd_api_submit_to_active_max_ms)"
  fi
  first=0
done
if [ "$skip_slurm" = 0 ]; then
  printf '%-58s %14s\n' "slurm, $slurm_nodes nodes: $tasks sbatch, until none queued" "$(v slurm_sbatch_loop_jobs_per_s)"
  printf '%-58s %14s\n' "slurm, $slurm_nodes nodes: array of $tasks" "$(v slurm_array_jobs_per_s)"
  [ -n "$(v slurm_start_latency_p50_ms)" ] && printf '%-58s %14s %14s\n' "slurm: sbatch -> batch script started" "" "$(v slurm_start_latency_p50_ms) / $(v slurm_start_latency_p99_ms)"
  [ -n "$(v slurm_srun_start_latency_p50_ms)" ] && printf '%-58s %14s %14s\n' "slurm: srun -> process started" "" "$(v slurm_srun_start_latency_p50_ms) / $(v slurm_srun_start_latency_p99_ms)"
  hb=$(v herd_burst_tasks_per_s)
  result herd_vs_slurm_throughput_ratio "$(calc "$hb / $(v slurm_jobs_per_s)" 1)"
  [ -n "$(v herd_separate_submits_jobs_per_s)" ] && result herd_vs_slurm_separate_submits_ratio "$(calc "$(v herd_separate_submits_jobs_per_s) / $(v slurm_sbatch_loop_jobs_per_s)" 2)"
  if [ -n "$(v herd_submit_to_running_p50_ms)" ] && [ -n "$(v slurm_start_latency_p50_ms)" ]; then
    result slurm_over_herd_start_latency_p50 "$(calc "$(v slurm_start_latency_p50_ms) / $(v herd_submit_to_running_p50_ms)" 1)"
    result slurm_srun_over_herd_start_latency_p50 "$(calc "$(v slurm_srun_start_latency_p50_ms) / $(v herd_submit_to_running_p50_ms)" 2)"
  fi
fi
[ -n "$(v herd_submit_to_running_p50_ms)" ] && result herd_start_latency_over_fork_exec "$(calc "$(v herd_submit_to_running_p50_ms) / $(v fork_exec_p50_ms)" 0)"
exit 0
