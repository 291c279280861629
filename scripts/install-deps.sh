#!/usr/bin/env bash
# Installs the Debian packages chorus builds and tests with, when any is missing.
set -euo pipefail

packages=(
  cmake g++ make binutils pkg-config ninja-build
  clang lld
  libboost-dev libspdlog-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev zlib1g-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libgloo-dev
  libopenmpi-dev openmpi-bin
  libucx-dev ucx-utils
  libfabric-dev libfabric-bin
  libdnnl-dev
  dataset-fashion-mnist
  python3-torch libtorch-dev
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if (( ${#missing[@]} == 0 )); then
  echo "install-deps: every package is present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: not root; run: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# apt's and dpkg's lines go to a log; on failure its end is shown.
log=${TMPDIR:-/tmp}/chorus-install-deps.log
if ! { apt-get update -qq && apt-get install -y -qq "${missing[@]}"; } > "$log" 2>&1; then
  tail -30 "$log"
  echo "install-deps: apt-get failed (log: $log)" >&2
  exit 1
fi
echo "install-deps: done (log: $log)"
