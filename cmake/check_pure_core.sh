#!/usr/bin/env bash
# DESIGN §3: the scheduler and the cell state machine build and test with no
# gRPC. Configures a second build with HERD_WITH_GRPC=OFF, builds their tests,
# checks no gRPC library is linked in, and runs them.
set -euo pipefail
src=$1
dir=$2
cmake -S "$src" -B "$dir" -G Ninja -DHERD_WITH_GRPC=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$dir" cell_test sched_test sched_loop_test
for t in cell_test sched_test sched_loop_test; do
  if ldd "$dir/bin/$t" | grep -i grpc; then
    echo "$t links gRPC" >&2
    exit 1
  fi
  "$dir/bin/$t" --gtest_brief=1
done
echo "pure core: builds and passes without gRPC"
