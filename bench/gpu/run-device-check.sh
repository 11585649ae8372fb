#!/usr/bin/env bash
# Device check for a machine with one NVIDIA GPU (fits in 5 minutes):
#  1. configure + build only what it needs (CUDA is found at /usr/local/cuda),
#  2. run the GPU gtests (staged GPU<->GPU/host replicate, byte-exact with checksums),
#  3. measure staged GPU->GPU replicate between two processes on the same GPU for 1-8 GiB
#     against pinned host<->device copy bandwidth measured in the same run.
# Results go to $OUT (default ./gpu-check-out): gpu_tests.log, gpu_bench.jsonl, gpu_bench.txt.
# Usage: bash bench/gpu/run-device-check.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build-gpu}
OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT"
SIZES=${SIZES:-1G,2G,4G,8G}
ITERS=${ITERS:-3}

nvidia-smi -L | tee "$OUT/gpu.txt" || { echo "no NVIDIA GPU visible (nvidia-smi failed)"; exit 2; }

if [[ ! -x "$BUILD/tests/gpu/thub_gpu_tests" || ! -x "$BUILD/bench/gpu/thub_gpu_replicate_bench" ]]; then
  timeout 60 cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTHUB_BUILD_BENCH=ON > "$OUT/cmake.log" 2>&1 \
    || { tail -30 "$OUT/cmake.log"; exit 3; }
  grep -q "CUDA support ON" "$OUT/cmake.log" || { echo "CMake found no CUDA: nothing to check"; exit 3; }
  timeout 150 cmake --build "$BUILD" -j"$(nproc)" --target thub_gpu_tests thub_gpu_replicate_bench \
    > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 3; }
fi

"$BUILD/tools/info/tensorhub-info" --ucx > "$OUT/ucx.txt" 2>&1 || true
echo "== GPU tests"
rc=0
timeout 60 "$BUILD/tests/gpu/thub_gpu_tests" > "$OUT/gpu_tests.log" 2>&1 || rc=$?
grep -E "^\[ +(OK|SKIPPED|FAILED|PASSED) +\]|no GPU" "$OUT/gpu_tests.log" || true
[[ $rc -eq 0 ]] || { echo "GPU tests failed (exit $rc)"; exit 1; }
if grep -q "SKIPPED \] CudaStagingTest.GpuToGpu" "$OUT/gpu_tests.log"; then
  echo "GPU tests skipped: no usable CUDA device"; exit 1
fi

echo "== staged GPU->GPU replicate vs pinned copies ($SIZES, $ITERS iterations each)"
rc=0
timeout 150 "$BUILD/bench/gpu/thub_gpu_replicate_bench" --sizes "$SIZES" --iters "$ITERS" > "$OUT/gpu_bench.txt" 2>&1 || rc=$?
grep -v '^{' "$OUT/gpu_bench.txt" || true
[[ $rc -eq 0 ]] || { echo "benchmark failed (exit $rc)"; exit 1; }
grep '^{' "$OUT/gpu_bench.txt" > "$OUT/gpu_bench.jsonl" || { echo "the benchmark printed no result"; exit 1; }
[[ $(wc -l < "$OUT/gpu_bench.jsonl") -eq $(tr ',' '\n' <<< "$SIZES" | wc -l) ]] || { echo "benchmark incomplete"; exit 1; }
echo "results in $OUT"
