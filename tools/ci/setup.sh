#!/usr/bin/env bash
# Installs the Debian 12 packages TensorHub needs (as root), then configures and builds.
# Usage: tools/ci/setup.sh [BUILD_DIR] [extra cmake args...]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
shift || true

pkgs=(build-essential cmake pkg-config libucx-dev ucx-utils libhwloc-dev hwloc libopenmpi-dev openmpi-bin
      libgtest-dev libgmock-dev libbenchmark-dev libxxhash-dev libibverbs-dev iproute2 gfortran python3 python3-numpy python3-torch
      doxygen nlohmann-json3-dev etcd-server)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing packages and not root; install them with: apt-get install ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# THUB_SETUP_PACKAGES_ONLY=1: install, then stop (tools/ci/test.sh builds two trees at once).
[[ ${THUB_SETUP_PACKAGES_ONLY:-0} == 1 ]] && exit 0
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
cmake --build "$build" -j "$(nproc)"
