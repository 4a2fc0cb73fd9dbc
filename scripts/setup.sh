#!/usr/bin/env bash
# Installs everything Herd needs to build and test, from Debian 12's packages
# only. Idempotent: does nothing (and needs no network) when all is present.
# Runs as root, or through sudo.
set -euo pipefail

PACKAGES=(
  g++ cmake ninja-build ccache pkg-config git procps psmisc
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libyaml-cpp-dev libjsonnet-dev libspdlog-dev libfmt-dev libcli11-dev
  etcd-server etcd-client
  libsqlite3-dev sqlite3 zlib1g-dev libssl-dev openssl libcurl4-openssl-dev tar nlohmann-json3-dev
  prometheus-cpp-dev libcpp-httplib-dev prometheus
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev
  bind9-dnsutils
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
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
