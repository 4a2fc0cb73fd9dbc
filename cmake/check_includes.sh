#!/usr/bin/env bash
# The #include side of docs/design.md §2's dependency table (the link side
# is checked at configure time by cmake/HerdDependencies.cmake). Prints every violation
# as FILE:LINE: what; exits 1 if there is any.
set -uo pipefail
cd "${1:-$(dirname "$0")/..}"
bad=0
# violation PATTERN ALLOWED_PATH_REGEX WHAT
check() {
  local pattern=$1 allowed=$2 what=$3
  while IFS= read -r hit; do
    file=${hit%%:*}
    if [[ ! $file =~ $allowed ]]; then
      echo "$hit: $what"
      bad=1
    fi
  done < <(grep -rnE "^\s*#\s*include\s*[<\"]($pattern)" src --include='*.h' --include='*.cc' 2>/dev/null)
}
# gRPC only in src/rpc, */server/, src/store/etcd, src/cli and src/main --
# and in the example framework (src/frameworks/example), a client program
# like the CLI that speaks the Framework API from its own process.
check 'grpcpp/|grpc/|herd/v1/[a-z_]+\.grpc\.pb\.h' '^src/(rpc|store/etcd|cli|main|frameworks/example)/|/server/' \
  "gRPC outside src/rpc, */server/, src/store/etcd, src/cli, src/main, src/frameworks/example"
# SQLite only in its backend, and in the master's history database, which
# is SQLite by nature: its users query it in SQLite's dialect (herd query).
check 'sqlite3\.h' '^src/store/sqlite/|^src/master/history/' "sqlite3.h outside src/store/sqlite and src/master/history"
# Concrete store backends are picked only by src/main and the servers (the
# history shares the SQLite helpers, not the cell's store).
check 'store/(sqlite|etcd)/' '^src/(main|store)/|/server/|^src/master/history/' \
  "a concrete store backend outside src/main and */server/"
# The pure core: no I/O libraries, no upper layers.
while IFS= read -r hit; do
  file=${hit%%:*}
  [[ $file == *_test.cc ]] && continue
  echo "$hit: the cell state machine includes an outer layer"
  bad=1
done < <(grep -rnE '^\s*#\s*include\s*[<"](store/|master/|agent/|rpc/|cli/|spec/|sim/|sched/|yaml-cpp|libjsonnet|grpcpp|sqlite3)' src/cell 2>/dev/null)
while IFS= read -r hit; do
  file=${hit%%:*}
  [[ $file == *_test.cc || $file == src/sched/server/* ]] && continue
  echo "$hit: the scheduler includes an outer layer"
  bad=1
done < <(grep -rnE '^\s*#\s*include\s*[<"](store/|master/|agent/|rpc/|cli/|spec/|sim/|grpcpp|sqlite3)' src/sched 2>/dev/null)
# `herd scheduler` (src/sched/server) talks to the master only over gRPC.
while IFS= read -r hit; do
  echo "$hit: the scheduler server includes the master, store, agent or CLI"
  bad=1
done < <(grep -rnE '^\s*#\s*include\s*[<"](store/|master/|agent/|cli/)' src/sched/server 2>/dev/null)
while IFS= read -r hit; do
  echo "$hit: the agent includes the cell, scheduler, master or store"
  bad=1
done < <(grep -rnE '^\s*#\s*include\s*[<"](cell/|sched/|master/|store/)' src/agent 2>/dev/null)
# Test-only code stays out of production files.
while IFS= read -r hit; do
  file=${hit%%:*}
  # Tests, and the test helpers beside a module (its testing.h).
  [[ $file == *_test.cc || $file == */testing.h || $file == src/testing/* ]] && continue
  echo "$hit: test-only code (src/testing) in a production file"
  bad=1
done < <(grep -rnE '^\s*#\s*include\s*[<"]testing/' src 2>/dev/null)
# Outside src/: the shipped code never includes the benchmarks, the fuzz
# targets or the test harness; the fuzz targets and the scheduler benchmark
# build in a tree without gRPC; tests and benchmarks keep apart.
while IFS= read -r hit; do
  echo "$hit: src/ includes bench/, fuzz/ or tests/ (herd must not link them)"
  bad=1
done < <(grep -rnE '^\s*#\s*include\s*[<"](bench|fuzz|tests)/' src 2>/dev/null)
while IFS= read -r hit; do
  echo "$hit: gRPC in a fuzz target or the scheduler benchmark (they build without gRPC)"
  bad=1
done < <(grep -rnE '^\s*#\s*include\s*[<"](grpcpp/|grpc/|herd/v1/[a-z_]+\.grpc\.pb\.h|rpc/)' fuzz bench/sched 2>/dev/null)
while IFS= read -r hit; do
  echo "$hit: a benchmark includes the test harness or a test includes a benchmark"
  bad=1
done < <(grep -rnE '^\s*#\s*include\s*[<"]tests/' bench fuzz 2>/dev/null; \
         grep -rnE '^\s*#\s*include\s*[<"]bench/' tests fuzz 2>/dev/null)
if [ $bad -eq 0 ]; then echo "include rules: ok"; fi
exit $bad
