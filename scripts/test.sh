#!/usr/bin/env bash
# The README's second command: install, build and run every test.
# Arguments go to ctest (e.g. -L unit, -R cell_test, -LE slow).
#
# A skipped test fails the run unless its skip is expected here: tests
# labelled "root" when not run as root, tests labelled "traces" when the real
# traces are absent (HERD_TRACES_DIR in the CMake cache). CI runs as root, so
# there a root test that skips is a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
./scripts/setup.sh --tests
./scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
cd "$BUILD_DIR"
log=Testing/herd-ctest.log
mkdir -p Testing
rc=0
ctest --output-on-failure -j "$(nproc)" --timeout 600 "$@" 2>&1 | tee "$log" || rc=$?
../scripts/check_skips.sh "$log" || rc=1
../scripts/test_times.sh "$log" 10 || true
wall=$((SECONDS - start))
echo "Wall time (setup, build and tests): $((wall / 60)) min $((wall % 60)) s"
echo "RESULT test_wall_seconds=$wall"
exit "$rc"
