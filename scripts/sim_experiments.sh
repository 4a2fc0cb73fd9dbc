#!/usr/bin/env bash
# Runs every `herd sim` experiment on the synthetic workload and the two real
# traces, writing tables and charts under docs/sim/<workload>/ and the
# printed output (with RESULT lines and run times) to docs/sim/<workload>.log.
# Usage: scripts/sim_experiments.sh [TRACES_DIR] [SYNTHETIC_SPEC]
set -euo pipefail
cd "$(dirname "$0")/.."
HERD=${HERD:-build/bin/herd}
TRACES=${1:-../shared/data/traces}
SYNTH=${2:-machines=2500,tasks=200000,fill=0.9,seed=1}
SEEDS=${SEEDS:-11}
# The openb pod lists ask for ~98% of the cell's GPUs together, and a handful
# of pods fit nowhere: the first 30% to arrive fit the whole cell with the
# paper's 0.2% pending allowance, so compaction has room to work.
OPENB_PODS=${OPENB_PODS:-0.3}
run() {  # run NAME ARGS...
  local name=$1
  shift
  mkdir -p "docs/sim/$name"
  for exp in compaction policies segregate-prod segregate-users subdivide bucketing reclamation; do
    echo "== herd sim $exp $* --seeds $SEEDS" | tee -a "docs/sim/$name.log"
    local t0=$SECONDS
    "$HERD" sim "$exp" "$@" --seeds "$SEEDS" --out "docs/sim/$name" >> "docs/sim/$name.log" 2>&1 \
      || echo "(exit $?)" >> "docs/sim/$name.log"
    echo "took $((SECONDS - t0)) s" | tee -a "docs/sim/$name.log"
  done
}
ONLY=${ONLY:-synthetic google-2011 openb}  # which workloads to (re)run
mkdir -p docs/sim
want() { [[ " $ONLY " == *" $1 "* ]]; }
if want synthetic; then rm -rf docs/sim/synthetic*; run synthetic --synthetic "$SYNTH"; fi
if want google-2011; then rm -rf docs/sim/google-2011*; run google-2011 --google2011 "$TRACES/google-2011"; fi
want openb || exit 0
rm -rf docs/sim/openb-*
run openb-gpuspec20 --openb "$TRACES/alibaba-openb-2023/openb_node_list_all_node.csv" \
  "$TRACES/alibaba-openb-2023/openb_pod_list_gpuspec20.csv" --pods "$OPENB_PODS"
run openb-multigpu30 --openb "$TRACES/alibaba-openb-2023/openb_node_list_all_node.csv" \
  "$TRACES/alibaba-openb-2023/openb_pod_list_multigpu30.csv" --pods "$OPENB_PODS"
