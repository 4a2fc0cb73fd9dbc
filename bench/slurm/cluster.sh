#!/usr/bin/env bash
# A throwaway Slurm cluster on this machine for bench/real_tasks.sh: a private
# munged, one slurmctld and NODES slurmd (`slurmd -N nK`, each with its own
# port on 127.0.0.1), all as root, every file under DIR. Nothing in /etc is
# read or written (SLURM_CONF and the munge socket point into DIR).
#
#   bench/slurm/cluster.sh start DIR [NODES=8] [SCHED_PARAMS]   # waits (<= 60 s) until every node is idle
#       SLURM_NODE_CPUS=N: CPUs each node declares (default: this machine's;
#       SlurmdParameters=config_overrides lets it exceed them)
#   bench/slurm/cluster.sh stop DIR                             # kills what start started (by pid), waits (<= 20 s)
#   bench/slurm/cluster.sh env DIR                              # prints `export SLURM_CONF=...` for the clients
#
# Needs Debian's slurm-wlm (apt-get install -y slurm-wlm; munge comes with it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cmd=${1:?start|stop|env}
dir=${2:?DIR}
nodes=${3:-8}
sched=${4:-sched_min_interval=0,batch_sched_delay=0,default_queue_depth=1000}
ctld_port=16817
node_port0=16900

case "$cmd" in
env)
  echo "export SLURM_CONF=$dir/slurm.conf"
  ;;
start)
  mkdir -p "$dir"/{munge,ctld,slurmd,run,log}
  chmod 700 "$dir/munge"
  # A private munge key and daemon (munged wants the key and its directory
  # owned by the user it runs as, and not readable by others).
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
  munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
    --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed" --num-threads=10
  cpus=${SLURM_NODE_CPUS:-$(nproc)}
  mem_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / nodes / 2 ))
  node_lines=""
  for i in $(seq 1 "$nodes"); do
    node_lines+="NodeName=n$i NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((node_port0 + i)) CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN"$'\n'
  done
  sed -e "s|@DIR@|$dir|g" -e "s|@NODES@|$nodes|g" -e "s|@HOST@|$(hostname -s)|g" \
      -e "s|@CTLD_PORT@|$ctld_port|g" -e "s|@SCHED_PARAMS@|$sched|g" \
      "$here/slurm.conf.in" > "$dir/slurm.conf.tmp"
  awk -v lines="$node_lines" '{ if ($0 == "@NODE_LINES@") printf "%s", lines; else print }' \
    "$dir/slurm.conf.tmp" > "$dir/slurm.conf"
  rm -f "$dir/slurm.conf.tmp"
  export SLURM_CONF=$dir/slurm.conf
  # slurmctld -i: ignore any state (there is none: a fresh StateSaveLocation).
  slurmctld -c -i -f "$dir/slurm.conf"
  for i in $(seq 1 "$nodes"); do
    mkdir -p "$dir/slurmd/n$i"
    slurmd -N "n$i" -f "$dir/slurm.conf"
  done
  # Bounded wait: every node idle.
  for _ in $(seq 1 120); do
    idle=$(sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l || true)
    [ "$idle" -ge "$nodes" ] && exit 0
    sleep 0.5
  done
  echo "slurm: only $idle of $nodes nodes idle after 60 s" >&2
  sinfo -N >&2 || true
  exit 1
  ;;
stop)
  pids=()
  for f in "$dir"/run/slurmd.*.pid "$dir/run/slurmctld.pid" "$dir/run/munged.pid"; do
    [ -f "$f" ] || continue
    p=$(cat "$f")
    [ -n "$p" ] && kill "$p" 2>/dev/null && pids+=("$p")
  done
  # slurmstepd processes of jobs still running (none on a clean run).
  for p in $(pgrep -x slurmstepd 2>/dev/null || true); do
    if { tr "\0" " " < /proc/"$p"/environ; } 2>/dev/null | grep -q "SLURM_CONF=$dir/"; then kill "$p" 2>/dev/null || true; pids+=("$p"); fi
  done
  for _ in $(seq 1 40); do
    alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && exit 0
    sleep 0.5
  done
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  ;;
*) echo "unknown command $cmd" >&2; exit 2 ;;
esac
