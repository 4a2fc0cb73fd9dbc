#!/usr/bin/env bash
# Configures and builds Herd into build/ (Ninja, ccache), then puts `herd`
# on the PATH as /usr/local/bin/herd (a symlink to build/bin/herd) when it
# can. Extra arguments go to ninja (e.g. a target name).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
jobs=$(nproc)
ninja -C "$BUILD_DIR" -j "$jobs" "$@"
if [ -z "${HERD_NO_LINK:-}" ]; then
  target=/usr/local/bin/herd
  if [ -w "$(dirname "$target")" ] || [ "$(id -u)" -eq 0 ]; then
    ln -sf "$PWD/$BUILD_DIR/bin/herd" "$target" 2>/dev/null || true
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    sudo ln -sf "$PWD/$BUILD_DIR/bin/herd" "$target" || true
  fi
fi
