#!/usr/bin/env bash
# Device check for a machine with one NVIDIA GPU (issue 21 item 7; under 5 minutes; builds
# nothing: run bench/gpu/pack-device-check.sh where the project builds, carry its pack):
#  1. the pack's binaries find every library they need (the device's own where it has one,
#     the pack's where it lacks it; libtensorhub always the pack's),
#  2. the GPU tests: CUDA tensors between two contexts (staged GPU<->GPU/host, byte-exact
#     with checksums) and across real processes (two processes with checksums, a pipeline of
#     three readers, a partial source killed mid-transfer): none of the CUDA cases may skip,
#  3. staged GPU->GPU replicate between two processes on the same GPU for 1-8 GiB against the
#     pinned host<->device copy bandwidth measured in the same run (JSON lines).
# Results go to $OUT (default ./gpu-check-out): ldd.txt, ucx.txt, gpu_tests.log,
# gpu_process_tests.log, gpu_bench.jsonl, gpu_bench.txt.
#
# Usage: bash bench/gpu/run-device-check.sh [PACK_DIR]   (default: build/gpu-check-pack)
# THUB_DEVICE_CHECK_DRY=1: where no GPU is visible, check the pack and run the tests anyway
# (their CUDA cases skip, their host cases run) instead of stopping; no benchmark. Exit 0 then
# means "the pack runs here", not "the GPU paths work".
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
PACK=$(cd "${1:-$here/build/gpu-check-pack}" 2>/dev/null && pwd) \
  || { echo "no pack at ${1:-$here/build/gpu-check-pack}: run bench/gpu/pack-device-check.sh first"; exit 3; }
OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT"
SIZES=${SIZES:-1G,2G,4G,8G}
ITERS=${ITERS:-3}
DRY=${THUB_DEVICE_CHECK_DRY:-0}

gpu=1
nvidia-smi -L > "$OUT/gpu.txt" 2>&1 || gpu=0
if [[ $gpu == 1 ]]; then
  cat "$OUT/gpu.txt"
elif [[ $DRY == 1 ]]; then
  echo "dry run: no NVIDIA GPU visible (nvidia-smi failed); the CUDA cases will skip"
else
  echo "no NVIDIA GPU visible (nvidia-smi failed)"; exit 2
fi

for b in thub_gpu_tests thub_gpu_process_tests thub_peer_cuda thub_peer thub_gpu_replicate_bench tensorhub-info; do
  [[ -x "$PACK/bin/$b" ]] || { echo "the pack $PACK lacks bin/$b: pack it again"; exit 3; }
done
# The device's libraries where it has them; the pack's where it lacks them.
LIBS=$(mktemp -d)
trap 'rm -rf "$LIBS"' EXIT
ldconfig -p > "$LIBS.cache" 2>/dev/null || true
for l in "$PACK"/lib/*; do
  n=$(basename "$l")
  if [[ $n == libtensorhub.so* ]] || ! grep -q "^[[:space:]]*$n " "$LIBS.cache"; then ln -s "$l" "$LIBS/$n"; fi
done
rm -f "$LIBS.cache"
export LD_LIBRARY_PATH="$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export THUB_TEST_PEER="$PACK/bin/thub_peer_cuda" THUB_TEST_HOST_PEER="$PACK/bin/thub_peer"
for b in "$PACK"/bin/*; do echo "== $(basename "$b")"; ldd "$b"; done > "$OUT/ldd.txt" 2>&1
if grep -q "not found" "$OUT/ldd.txt"; then
  echo "libraries missing on this machine:"; grep "not found" "$OUT/ldd.txt" | sort -u; exit 3
fi
grep "libtensorhub" "$OUT/ldd.txt" | grep -qv "$LIBS/" && { echo "libtensorhub did not resolve to the pack's"; exit 3; }
echo "libraries: every one found (from the pack: $(ls "$LIBS" | tr '\n' ' '))"

"$PACK/bin/tensorhub-info" --ucx > "$OUT/ucx.txt" 2>&1 || true
rc=0
for t in thub_gpu_tests thub_gpu_process_tests; do
  echo "== $t"
  r=0
  timeout 120 "$PACK/bin/$t" > "$OUT/${t#thub_}.log" 2>&1 || r=$?
  grep -E "^\[ +(OK|SKIPPED|FAILED) +\] .* \([0-9]+ ms\)$" "$OUT/${t#thub_}.log" || true
  [[ $r -eq 0 ]] || { echo "$t failed (exit $r)"; rc=1; }
  if [[ $gpu == 1 ]] && grep -E "SKIPPED \] (CudaStagingTest\.GpuTo|Memory/.*/cuda)" "$OUT/${t#thub_}.log"; then
    echo "$t skipped CUDA cases on a machine with a GPU"; rc=1
  fi
done
[[ $rc -eq 0 ]] || exit 1
if [[ $gpu == 0 ]]; then echo "dry run done: the pack runs here; no GPU, so no benchmark"; exit 0; fi

echo "== staged GPU->GPU replicate vs pinned copies ($SIZES, $ITERS iterations each)"
r=0
timeout 150 "$PACK/bin/thub_gpu_replicate_bench" --sizes "$SIZES" --iters "$ITERS" > "$OUT/gpu_bench.txt" 2>&1 || r=$?
grep -v '^{' "$OUT/gpu_bench.txt" || true
[[ $r -eq 0 ]] || { echo "benchmark failed (exit $r)"; exit 1; }
grep '^{' "$OUT/gpu_bench.txt" > "$OUT/gpu_bench.jsonl" || { echo "the benchmark printed no result"; exit 1; }
[[ $(wc -l < "$OUT/gpu_bench.jsonl") -eq $(tr ',' '\n' <<< "$SIZES" | wc -l) ]] || { echo "benchmark incomplete"; exit 1; }
echo "results in $OUT"
