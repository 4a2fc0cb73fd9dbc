#!/usr/bin/env bash
# Installs everything Herd needs to build and test, from Debian 12's packages
# only. Idempotent: does nothing (and needs no network) when all is present.
# Runs as root, or through sudo.
#
#   scripts/setup.sh           what building and running a cell needs
#   scripts/setup.sh --tests   and what the tests need beyond it: Debian's
#                              chromium and Node.js with npm (the web UI's
#                              browser test), then playwright-core from npm
#                              into tests/ui/node_modules (pinned by its
#                              package-lock.json)
set -euo pipefail
cd "$(dirname "$0")/.."
tests=0
if [ "${1:-}" = "--tests" ]; then tests=1; fi

PACKAGES=(
  g++ cmake ninja-build ccache pkg-config git procps psmisc
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libyaml-cpp-dev libjsonnet-dev libspdlog-dev libfmt-dev libcli11-dev
  etcd-server etcd-client
  libseccomp-dev libsqlite3-dev sqlite3 zlib1g-dev libssl-dev openssl libcurl4-openssl-dev tar nlohmann-json3-dev
  prometheus-cpp-dev libcpp-httplib-dev libboost-dev prometheus
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev
  bind9-dnsutils
  wrk stress-ng jq   # herd bench colocation, bench/reservation_trace.sh
)
if [ $tests -eq 1 ]; then
  PACKAGES+=(chromium)
  # The Debian package and its test (scripts/package.sh --check, tests/package).
  PACKAGES+=(dpkg-dev lintian xz-utils adduser systemd)
  # Node.js from Debian (nodejs, npm) unless a node and npm are there already.
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then PACKAGES+=(nodejs npm); fi
fi

# playwright-core for tests/ui, once node and npm are there.
ui_modules() {
  [ $tests -eq 1 ] || return 0
  if [ -f tests/ui/node_modules/playwright-core/package.json ] &&
     grep -q "\"version\": \"$(sed -n 's/.*"playwright-core": "\(.*\)".*/\1/p' tests/ui/package.json)\"" \
       tests/ui/node_modules/playwright-core/package.json; then
    return 0
  fi
  echo "setup: npm ci in tests/ui (playwright-core)"
  npm ci --prefix tests/ui --no-audit --no-fund --loglevel=error
}

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  ui_modules
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then SUDO="sudo"; else
    echo "setup: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
ui_modules
