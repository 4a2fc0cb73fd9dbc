#!/usr/bin/env bash
# The README's second command: install, build and run every test.
# Arguments go to ctest (e.g. -L unit, -R cell_test, -LE slow).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)" --timeout 600 "$@"
