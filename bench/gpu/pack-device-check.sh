#!/usr/bin/env bash
# Packs what bench/gpu/run-device-check.sh runs, so that the device builds nothing (issue 21
# item 7): the GPU test and bench binaries, the peers they start, tensorhub-info, and every
# library they load that a machine with CUDA's driver and a UCX runtime may lack
# (libtensorhub itself, hwloc, rdma-core, xxHash, ...), stripped of debug information.
# Left out: the C and C++ runtimes and UCX (the device's own UCX runtime serves: its
# transports are modules of that install).
#
# Usage: bash bench/gpu/pack-device-check.sh [BUILD_DIR] [PACK_DIR]
#   BUILD_DIR  a tree configured with CUDA (default: build); its GPU targets are built here
#              (THUB_PACK_NO_BUILD=1: taken as built, e.g. from inside ctest)
#   PACK_DIR   where the pack goes (default: BUILD_DIR/gpu-check-pack): bin/, lib/
# Then on the device: bash bench/gpu/run-device-check.sh PACK_DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
PACK=${2:-$BUILD/gpu-check-pack}
targets=(thub_gpu_tests thub_gpu_process_tests thub_peer_cuda thub_peer thub_gpu_replicate_bench tensorhub-info)
files=(tests/gpu/thub_gpu_tests tests/gpu/thub_gpu_process_tests tests/gpu/thub_peer_cuda tests/multiproc/thub_peer
       bench/gpu/thub_gpu_replicate_bench tools/info/tensorhub-info)

[[ -f "$BUILD/CMakeCache.txt" ]] || { echo "pack-device-check: $BUILD is no CMake build tree" >&2; exit 3; }
if [[ ${THUB_PACK_NO_BUILD:-0} != 1 ]] &&
   ! cmake --build "$BUILD" -j"$(nproc)" --target "${targets[@]}" > "$BUILD/gpu-check-pack.log" 2>&1; then
  tail -5 "$BUILD/gpu-check-pack.log" >&2
  echo "pack-device-check: the GPU targets did not build (is $BUILD configured with CUDA? CMake says" \
       "\"TensorHub: CUDA support ON\" when it is)" >&2
  exit 3
fi

rm -rf "$PACK"
mkdir -p "$PACK/bin" "$PACK/lib"
for f in "${files[@]}"; do
  [[ -x "$BUILD/$f" ]] || { echo "pack-device-check: $BUILD/$f is not built" >&2; exit 3; }
  strip --strip-debug -o "$PACK/bin/$(basename "$f")" "$BUILD/$f"
done

# Every library the binaries resolve here, but the runtimes every Linux has and UCX.
keep() {
  case "$(basename "$1")" in
    libc.so.*|libm.so.*|libdl.so.*|librt.so.*|libpthread.so.*|ld-linux*|libstdc++.so.*|libgcc_s.so.*) return 1 ;;
    libucp.so.*|libuct.so.*|libucs.so.*|libucm.so.*) return 1 ;;
  esac
  return 0
}
for b in "$PACK"/bin/*; do
  ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
  if keep "$lib"; then strip --strip-debug -o "$PACK/lib/$(basename "$lib")" "$(readlink -f "$lib")"; fi
done
du -sh "$PACK" | awk '{print "packed " $1 " into '"$PACK"'"}'
ls "$PACK/lib" | tr '\n' ' '
echo
