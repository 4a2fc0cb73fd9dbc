#!/usr/bin/env bash
# check_skips.sh CTEST_LOG: run in the build directory after ctest. Lists the
# tests CTest reported as skipped (a test executable exits 77 when any of its
# cases called GTEST_SKIP, see src/testing/gtest_main.cc) and fails if one of
# them had no expected reason to skip:
#   label "root"    expected only when not running as root;
#   label "traces"  expected only when HERD_TRACES_DIR (CMake cache) is absent;
#   label "prometheus" expected only when the prometheus binary is absent
#                   (scripts/setup.sh installs it).
set -euo pipefail
log=$1
skipped=$(sed -n '/The following tests did not run:/,/^$/p' "$log" | grep '(Skipped)' | awk '{print $3}' || true)
[ -n "$skipped" ] || exit 0

labelled() {  # the tests that carry label $1
  ctest -N -L "^$1\$" | sed -n 's/^ *Test *#[0-9]*: //p'
}
root_tests=$(labelled root)
trace_tests=$(labelled traces)
prometheus_tests=$(labelled prometheus)
traces_dir=$(sed -n 's/^HERD_TRACES_DIR:PATH=//p' CMakeCache.txt)

unexpected=0
echo
echo "Skipped tests:"
for t in $skipped; do
  why=""
  if grep -qx "$t" <<<"$root_tests" && [ "$(id -u)" -ne 0 ]; then
    why="needs root (run as root to include it)"
  elif grep -qx "$t" <<<"$trace_tests" && [ ! -d "$traces_dir" ]; then
    why="needs the real traces, not found at ${traces_dir:-?} (set HERD_TRACES and reconfigure)"
  elif grep -qx "$t" <<<"$prometheus_tests" && ! command -v prometheus >/dev/null; then
    why="needs prometheus (Debian package prometheus; scripts/setup.sh installs it)"
  fi
  if [ -n "$why" ]; then
    echo "  $t: SKIPPED, $why"
  else
    echo "  $t: SKIPPED UNEXPECTEDLY (run ./bin/${t%%.*} alone to see which case skipped and why)"
    unexpected=1
  fi
done
if [ "$unexpected" -ne 0 ]; then
  echo "check_skips: a test skipped without an expected reason; that counts as a failure" >&2
  exit 1
fi
