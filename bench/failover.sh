#!/usr/bin/env bash
# Master failover on etcd (issue #12): three `herd master --store etcd://`
# replicas on a 3-member etcd (Debian's etcd-server, loopback, ports picked
# here), one agent running --running tasks. Then --kills times: SIGKILL the
# leader at a random moment (0-0.5 s after the previous round settled), and
# time from the kill until a `herd submit` through the master list is
# acknowledged by the new leader (a one-task job; the CLI is retried as
# fast as it returns); restart the killed replica as a follower.
# Baseline in the same run: the same submit with no kill (--kills samples).
# At the end: every acknowledged job must exist (lost_acknowledged_writes),
# and the first job's tasks must still run with the pids they had before
# the first kill (tasks_restarted).
#
# --cell-tasks N also puts N more tasks in the cell before the kills (jobs
# of 1,000 that cannot fit anywhere, so they stay pending: state the
# replicas must hold, without N processes); each new leader logs how long
# taking over from its hot state took (takeover_*).
#
#   bench/failover.sh [--herd PATH] [--kills 20] [--running 20] [--lease-ttl 2] [--cell-tasks 0] [--etcd-election-ms 1000] [--keep]
# Prints RESULT lines: failover_p50_ms, failover_p99_ms, failover_max_ms,
# submit_p50_ms (baseline), takeover_p50_ms, takeover_max_ms, cell_tasks,
# kills, lost_acknowledged_writes, tasks_restarted.
set -euo pipefail
herd=$(cd "$(dirname "$0")/.." && pwd)/build/bin/herd
kills=20
running=20
ttl=2
cell_tasks=0
keep=0
election_ms=1000
while [ $# -gt 0 ]; do
  case "$1" in
    --herd) herd=$2; shift 2 ;;
    --kills) kills=$2; shift 2 ;;
    --running) running=$2; shift 2 ;;
    --lease-ttl) ttl=$2; shift 2 ;;
    --cell-tasks) cell_tasks=$2; shift 2 ;;
    --keep) keep=1; shift ;;  # keep the directory (logs) for a look afterwards
    # etcd's election timeout (heartbeat a tenth of it). etcd's shortest
    # lease is 1.5 election timeouts, rounded up to whole seconds: 2 s at
    # etcd's default 1000 ms; --etcd-election-ms 500 allows --lease-ttl 1.
    --etcd-election-ms) election_ms=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
command -v etcd >/dev/null || { echo "failover.sh: etcd is not installed (apt-get install etcd-server)" >&2; exit 1; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

dir=$(mktemp -d /tmp/herd-failover-XXXXXX)
pids=()
agent_pid=""
cleanup() {
  disown -a 2>/dev/null || true
  # The agent stops its tasks (--stop-tasks-on-exit), then everything goes.
  if [ -n "$agent_pid" ]; then
    kill -TERM "$agent_pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$agent_pid" 2>/dev/null || break; sleep 0.1; done
  fi
  for p in "${pids[@]}" "${mpid[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done
  pkill -9 -f "$dir/" 2>/dev/null || true
  if [ "$keep" = 1 ]; then echo "kept $dir"; else rm -rf "$dir"; fi
}
trap cleanup EXIT

"$herd" ca init --ca "$dir/pki" >/dev/null
"$herd" ca issue --ca "$dir/pki" --master --out "$dir/master.pem" >/dev/null
"$herd" ca issue --ca "$dir/pki" --user alice --admin --out "$dir/alice.pem" >/dev/null
"$herd" ca issue --ca "$dir/pki" --machine m1 --out "$dir/m1.pem" >/dev/null

# etcd: 3 members.
cluster=""; endpoints=""
declare -a cport pport
for i in 0 1 2; do
  cport[$i]=$(free_port); pport[$i]=$(free_port)
  cluster+="${cluster:+,}e$i=http://127.0.0.1:${pport[$i]}"
  endpoints+="${endpoints:+,}127.0.0.1:${cport[$i]}"
done
for i in 0 1 2; do
  etcd --name "e$i" --data-dir "$dir/etcd$i" --listen-client-urls "http://127.0.0.1:${cport[$i]}" \
    --advertise-client-urls "http://127.0.0.1:${cport[$i]}" --listen-peer-urls "http://127.0.0.1:${pport[$i]}" \
    --initial-advertise-peer-urls "http://127.0.0.1:${pport[$i]}" --initial-cluster "$cluster" \
    --initial-cluster-state new --election-timeout "$election_ms" --heartbeat-interval $((election_ms / 10)) --logger zap --log-level error --log-outputs "$dir/etcd$i.log" >/dev/null 2>&1 &
  pids+=($!)
  disown
done

# Masters.
declare -a mport mpid
masters=""
for i in 0 1 2; do mport[$i]=$(free_port); masters+="${masters:+,}127.0.0.1:${mport[$i]}"; done
start_master() {
  local i=$1
  "$herd" master --data "$dir/m$i" --credentials "$dir/master.pem" --ca "$dir/pki" --listen "127.0.0.1:${mport[$i]}" \
    --store "etcd://$endpoints/herd/failover/" --lease-ttl "$ttl" --poll-interval 1s --log-file "$dir/m$i.log" \
    >/dev/null 2>&1 &
  mpid[$i]=$!
  disown  # no "Killed" notes from the shell when we kill it
}
for i in 0 1 2; do start_master "$i"; done
export HERD_MASTER=$masters HERD_CREDENTIALS=$dir/alice.pem
for _ in $(seq 300); do "$herd" cell >/dev/null 2>&1 && break; sleep 0.1; done
"$herd" agent --master "$masters" --listen "127.0.0.1:$(free_port)" --credentials "$dir/m1.pem" --root "$dir/agent" \
  --capacity cpu=8,memory=8Gi --cgroup-root none --stop-tasks-on-exit --log-file "$dir/agent.log" >/dev/null 2>&1 &
agent_pid=$!
disown

job() { printf 'name: %s\nuser: alice\ntasks: %d\ncommand: ["/bin/sleep", "3600"]\nresources: {cpu: 10m, memory: 8Mi}\n' "$1" "$2" > "$dir/$1.yaml"; }
job base "$running"
"$herd" submit "$dir/base.yaml" >/dev/null
for _ in $(seq 600); do
  n=$("$herd" tasks alice/base --json 2>/dev/null | grep -c '"phase": "ACTIVE"' || true)
  [ "$n" -ge "$running" ] && break; sleep 0.1
done
pids_before=$("$herd" tasks alice/base --json | grep '"pid"' | sort | tr -d ' \n')
if [ "$(echo "$pids_before" | grep -o '"pid"' | wc -l)" -ne "$running" ]; then
  echo "failover.sh: the first job's $running tasks did not all start" >&2; exit 1
fi

if [ "$cell_tasks" -gt 0 ]; then
  : > "$dir/pending.yaml"
  for j in $(seq $(( (cell_tasks + 999) / 1000 ))); do
    printf -- '---\nname: pending%d\nuser: alice\npriority: batch\ntasks: 1000\ncommand: ["/bin/true"]\nresources: {cpu: 1m, memory: 1Ti}\n' "$j" >> "$dir/pending.yaml"
  done
  "$herd" submit "$dir/pending.yaml" >/dev/null
  for _ in $(seq 600); do
    p=$("$herd" cell --json | sed -n 's/.*"tasksPending": \([0-9]*\).*/\1/p')
    [ "${p:-0}" -ge "$cell_tasks" ] && break; sleep 0.2
  done
  echo "cell: $("$herd" cell | sed -n 's/^tasks: //p')"
fi

# Baseline: submits with no kill.
base=()
for k in $(seq "$kills"); do
  job "plain$k" 1
  t0=$(now_ms); "$herd" submit "$dir/plain$k.yaml" >/dev/null; t1=$(now_ms)
  base+=($((t1 - t0)))
done

# The replica that says it leads (each is asked: every replica answers,
# and a follower's idea of the leader may be a moment old).
leader_index() {
  for i in 0 1 2; do
    "$herd" --master "127.0.0.1:${mport[$i]}" cell --json 2>/dev/null | grep -q '"role": "leader"' && { echo "$i"; return; }
  done
  echo -1
}
fail=()
acked=()
for k in $(seq "$kills"); do
  li=$(leader_index)
  [ "$li" -ge 0 ] || { echo "round $k: no leader answers" >&2; exit 1; }
  sleep "0.$((RANDOM % 5))$((RANDOM % 10))"
  job "after$k" 1
  t0=$(now_ms)
  kill -9 "${mpid[$li]}"
  echo "$k $t0" >> "$dir/kills"
  tries=0
  until "$herd" submit "$dir/after$k.yaml" >/dev/null 2>&1; do tries=$((tries + 1)); done
  t1=$(now_ms)
  fail+=($((t1 - t0)))
  acked+=("after$k")
  while kill -0 "${mpid[$li]}" 2>/dev/null; do sleep 0.01; done
  start_master "$li"
  # Settle: the restarted replica follows before the next kill.
  for _ in $(seq 100); do grep -q "following cell" "$dir/m$li.log" 2>/dev/null && break; sleep 0.1; done
  mv "$dir/m$li.log" "$dir/m$li.log.$k"
  printf 'kill %2d: replica %d was leader, new leader acknowledged after %d ms (%d failed tries)\n' "$k" "$li" "${fail[-1]}" "$tries"
done

lost=0
for j in "${acked[@]}"; do
  "$herd" tasks "alice/$j" --json >/dev/null 2>&1 || lost=$((lost + 1))
done
pids_after=$("$herd" tasks alice/base --json | grep '"pid"' | sort | tr -d ' \n')
restarted=0
[ "$pids_before" = "$pids_after" ] || restarted=$(diff <(echo "$pids_before" | tr ',' '\n') <(echo "$pids_after" | tr ',' '\n') | grep -c '^<' || true)

pct() { printf '%s\n' "$@" | sort -n | awk -v p="$PCT" '{a[NR]=$1} END {i=int(p*NR+0.999999); if(i<1)i=1; if(i>NR)i=NR; print a[i]}'; }
PCT=0.5 f50=$(PCT=0.5 pct "${fail[@]}"); f99=$(PCT=0.99 pct "${fail[@]}"); fmax=$(PCT=1 pct "${fail[@]}")
b50=$(PCT=0.5 pct "${base[@]}")
takeovers=$(cat "$dir"/m*.log* 2>/dev/null | sed -n 's/.*took over in \([0-9.]*\) ms.*/\1/p' | tail -n "$kills")
t50=$(PCT=0.5 pct $takeovers); tmax=$(PCT=1 pct $takeovers)
echo
echo "failover (leader killed -> a submit acknowledged by the new leader), $kills kills, lease TTL ${ttl}s:"
echo "  p50 ${f50} ms, p99 ${f99} ms, max ${fmax} ms; a submit with no kill: p50 ${b50} ms"
echo "  a new leader's takeover from its hot state (${cell_tasks} more tasks in the cell): p50 ${t50} ms, max ${tmax} ms"
echo "  acknowledged jobs lost: $lost; tasks of the first job restarted or moved: $restarted (of $running)"
echo "RESULT failover_p50_ms=$f50"
echo "RESULT failover_p99_ms=$f99"
echo "RESULT failover_max_ms=$fmax"
echo "RESULT submit_p50_ms=$b50"
echo "RESULT takeover_p50_ms=$t50"
echo "RESULT takeover_max_ms=$tmax"
echo "RESULT cell_tasks=$cell_tasks"
echo "RESULT kills=$kills"
echo "RESULT lease_ttl_s=$ttl"
echo "RESULT etcd_election_ms=$election_ms"
echo "RESULT lost_acknowledged_writes=$lost"
echo "RESULT tasks_restarted=$restarted"
