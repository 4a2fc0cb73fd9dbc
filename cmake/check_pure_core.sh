#!/usr/bin/env bash
# docs/design.md §3: the cell state machine, the scheduler, the master core and
# the simulator carry no gRPC. Checked on the main build, not a second one:
#  - the link rules (cmake/HerdDependencies.cmake) already refuse, at
#    configure time, any path from these libraries to a gRPC target;
#  - here, no object in their archives refers to a gRPC symbol, and the tests
#    that sit on all of them (the master core's, the simulator's) load no gRPC
#    library. Those tests themselves run in the main suite.
# (Until #34 this script configured and built a tree without gRPC inside the
# suite: 13 minutes of a cold run for the same proof.)
#
#   cmake/check_pure_core.sh BUILD_DIR
set -euo pipefail
dir=$1
libs=(herd_cell herd_sched herd_sched_loop herd_master_core herd_sim)
tests=(master_core_test sim_test)
failed=0
for l in "${libs[@]}"; do
  a=$(find "$dir/src" -name "lib$l.a" -print -quit)
  if [ -z "$a" ]; then
    echo "pure core: lib$l.a not found under $dir/src (build it first)" >&2
    exit 1
  fi
  if syms=$(nm -C --undefined-only "$a" 2>/dev/null | grep -E ' (grpc|grpc_impl)::| grpc_' | sort -u | head -5) && [ -n "$syms" ]; then
    echo "pure core: $a refers to gRPC:" >&2
    echo "$syms" >&2
    failed=1
  fi
done
for t in "${tests[@]}"; do
  if [ ! -x "$dir/bin/$t" ]; then
    echo "pure core: $dir/bin/$t not found (build it first)" >&2
    exit 1
  fi
  if ldd "$dir/bin/$t" | grep -i grpc >&2; then
    echo "pure core: $t loads gRPC" >&2
    failed=1
  fi
done
[ $failed -eq 0 ] || exit 1
echo "pure core: ${libs[*]} and ${tests[*]} carry no gRPC"
