#!/usr/bin/env bash
# The README's first command: install, build, start a local cell (master with
# its embedded store + agents, in the background) and run the example job.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh herd herd-shim
HERD=build/bin/herd
DATA=${HERD_HOME:-$HOME/.herd/up}
if $HERD cell >/dev/null 2>&1; then
  echo "quickstart: a cell is already up at ${HERD_MASTER:-127.0.0.1:7070}"
else
  $HERD up --detach --agents "${AGENTS:-3}" --data "$DATA"
fi
$HERD submit examples/hello.yaml
# The tasks start within a second or so; show them once they run.
for _ in $(seq 1 50); do
  if $HERD tasks hello --json | grep -q '"phase": "ACTIVE"'; then break; fi
  sleep 0.1
done
echo
$HERD status hello
echo
echo "Its output:  herd logs hello/0        Stop the cell:  herd down"
