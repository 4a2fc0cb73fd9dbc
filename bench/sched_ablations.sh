#!/usr/bin/env bash
# Issue #13: what costs machines when Herd packs real cells? Runs
# `herd sim compaction` on the real traces we have, one scheduler factor at a
# time, and prints one line per run:
#   RESULT <workload>.<config>.machines_p90=N   (and _min, _max, _s = wall seconds)
#   RESULT <workload>.<config>.lower_bound=N    (capacity bound: no packing needs fewer)
# The reference is a plain full-scan best fit: score = mean of CPU and memory
# utilisation after the placement (the same order as free CPU + free memory,
# normalised), every feasible machine scored, no other score, no cached score.
#
# Usage: bench/sched_ablations.sh [GROUP...]
#   groups: policies sample spread priomix equiv cache shape picky combined fix order reserve hybridpack
#   (order: every policy with --task-order largest, hardest tasks first;
#    reserve: every policy with --reserve 4 and with --reserve 0;
#    hybridpack: when hybrid packs production, and its sample then)
#   (default: all but combined and fix)
# Environment:
#   HERD=build/bin/herd  TRACES=../shared/data/traces  SEEDS=5  PARALLEL=2
#   WORKLOADS="g-all gpuspec20 multigpu30 synth"   which workloads (also g-prod)
#   SYNTH=machines=1250,tasks=100000,fill=0.9,seed=1   the synthetic one (Borg 2015 shapes)
#   SYNTH11=machines=1250,tasks=12500,fill=0.9,seed=1,shapes=2011   synth11, synth11-prod
#   OPENB_PODS=0.3       share of each openb pod list (the first to arrive)
#   GOOGLE_AT=           --at for the Google 2011 sample (default: its middle)
#   EXTRA=               extra flags for every run (e.g. "--policy hybrid"
#                        is not needed: configs set their own policy)
set -euo pipefail
cd "$(dirname "$0")/.."
HERD=${HERD:-build/bin/herd}
TRACES=${TRACES:-../shared/data/traces}
SEEDS=${SEEDS:-5}
PARALLEL=${PARALLEL:-2}
OPENB_PODS=${OPENB_PODS:-0.3}
# g-prod is tiny in our sample (396 tasks, ~50 machines): not in the default.
WORKLOADS=${WORKLOADS:-g-all gpuspec20 multigpu30 synth}
SYNTH=${SYNTH:-machines=1250,tasks=100000,fill=0.9,seed=1}
# Tasks shaped as in the Google 2011 trace, ten per machine (docs/sim/calibration.md).
SYNTH11=${SYNTH11:-machines=1250,tasks=12500,fill=0.9,seed=1,shapes=2011}
GROUPS_WANTED=${*:-policies sample spread priomix equiv cache shape picky}
EXTRA=${EXTRA:-}

source_flags() {  # the `herd sim` source flags of a workload name
  local at=()
  [ -n "${GOOGLE_AT:-}" ] && at=(--at "$GOOGLE_AT")
  case $1 in
    g-prod) echo --google2011 "$TRACES/google-2011" "${at[@]}" --only prod ;;
    g-all) echo --google2011 "$TRACES/google-2011" "${at[@]}" --only all ;;
    gpuspec20 | multigpu30)
      echo --openb "$TRACES/alibaba-openb-2023/openb_node_list_all_node.csv" \
        "$TRACES/alibaba-openb-2023/openb_pod_list_$1.csv" --pods "$OPENB_PODS" ;;
    synth) echo --synthetic "$SYNTH" ;;
    synth11) echo --synthetic "$SYNTH11" ;;
    synth11-prod) echo --synthetic "$SYNTH11" --only prod ;;
    *) echo "unknown workload $1" >&2; exit 2 ;;
  esac
}

run() {  # run WORKLOAD CONFIG FLAGS...
  local wl=$1 cfg=$2
  shift 2
  local t0 out
  t0=$(date +%s.%N)
  # shellcheck disable=SC2046,SC2086
  out=$("$HERD" sim compaction $(source_flags "$wl") --seeds "$SEEDS" --parallel "$PARALLEL" $EXTRA "$@" 2>&1) || {
    echo "# $wl $cfg failed: $(echo "$out" | tail -1)"
    return 0
  }
  local t1
  t1=$(date +%s.%N)
  for k in p90 min max; do
    local v
    v=$(echo "$out" | sed -n "s/^RESULT machines_$k=//p")
    echo "RESULT $wl.$cfg.machines_$k=${v:-nan}"
  done
  echo "RESULT $wl.$cfg.lower_bound=$(echo "$out" | sed -n 's/^RESULT lower_bound_max=//p')"
  echo "RESULT $wl.$cfg.machines_s=$(echo "$t1 - $t0" | bc | xargs printf '%.1f')"
  echo "# $wl $cfg: herd sim compaction $(source_flags "$wl") --seeds $SEEDS $EXTRA $*"
}

# The plain full-scan best fit every policy is measured against.
FULLSCAN=(--policy best --sample 0 --spread 0 --priority-mix 0 --small-change 0 --reserve 0)

want() { [[ " $GROUPS_WANTED " == *" $1 "* ]]; }

for wl in $WORKLOADS; do
  if want policies; then
    run "$wl" fullscan-best "${FULLSCAN[@]}"
    for p in best hybrid worst k8s pack; do run "$wl" "$p" --policy "$p"; done
  fi
  for p in best hybrid; do
    if want sample; then
      for n in 0 12 192 768; do run "$wl" "$p.sample-$n" --policy "$p" --sample "$n"; done
    fi
    want spread && run "$wl" "$p.spread-0" --policy "$p" --spread 0
    want priomix && run "$wl" "$p.priomix-0" --policy "$p" --priority-mix 0
    want equiv && run "$wl" "$p.no-equiv" --policy "$p" --no-equiv
    want cache && run "$wl" "$p.small-change-0" --policy "$p" --small-change 0
    if want picky; then
      for k in 0 0.01; do run "$wl" "$p.picky-$k" --policy "$p" --picky "$k"; done
    fi
  done
  if want shape; then
    # CPU per memory of the stranding term's typical task (shares of capacity).
    for s in 0.25 0.5 1 2 4; do run "$wl" "hybrid.shape-$s" --policy hybrid --shape "$s"; done
  fi
  # The fix (issue #13, deliverable 2): the pack policy, and the fullest
  # machines examined beside the random sample.
  if want fix; then
    run "$wl" pack --policy pack --fullest 0
    for p in best hybrid pack; do run "$wl" "$p.fullest-48" --policy "$p" --fullest 48; done
    run "$wl" pack.fullest-48.spread-0 --policy pack --fullest 48 --spread 0
  fi
  # The queue's order within a user and priority: hardest first
  # (first-fit-decreasing), for every policy and the full-scan reference.
  if want order; then
    run "$wl" fullscan-best.largest "${FULLSCAN[@]}" --task-order largest
    for p in best hybrid worst k8s pack; do run "$wl" "$p.largest" --policy "$p" --task-order largest; done
  fi
  # Slots kept for the scarce pending work (src/sched/framework/reserve.h).
  if want reserve; then
    for p in best hybrid worst k8s pack; do
      for w in 0 4; do run "$wl" "$p.reserve-$w" --policy "$p" --reserve "$w"; done
    done
  fi
  # Hybrid packs production only where non-production work is under 10% of
  # the CPU asked for, with a sample of 192 (issue #13): never / always
  # packing it, and the sample of those classes (48 = the others', 0 = all).
  if want hybridpack; then
    for b in 0 2; do run "$wl" "hybrid.pack-below-$b" --policy hybrid --hybrid-pack-below "$b"; done
    run "$wl" hybrid.pack-below-2.pack-sample-48 --policy hybrid --hybrid-pack-below 2 --hybrid-pack-sample 48
    for n in 48 0; do run "$wl" "hybrid.pack-sample-$n" --policy hybrid --hybrid-pack-sample "$n"; done
  fi
  # Every factor that the single ablations showed to cost machines, off at once.
  if want combined; then
    for p in best hybrid; do
      run "$wl" "$p.all-off" --policy "$p" --sample 0 --spread 0 --priority-mix 0 --small-change 0
    done
  fi
done
