#!/usr/bin/env bash
# Run thub_bench_replicate over shared memory (UCX's default transports) and over TCP, with
# sizes that fit in about 5 minutes on a 2-core machine. Builds nothing: build first with
#   cmake -S . -B build && make -C build -j2 thub_bench_replicate
# usage: bench/transfer/run.sh OUT.jsonl [BUILD_DIR]
# Environment: SHM_SIZES, TCP_SIZES, ITERS, TENSORS override the defaults below;
# EXTRA adds options to both runs (e.g. EXTRA="--breakdown").
set -euo pipefail

out=${1:?usage: run.sh OUT.jsonl [BUILD_DIR]}
here=$(cd "$(dirname "$0")" && pwd)
build=${2:-$here/../../build}
bin=$build/bench/transfer/thub_bench_replicate
[[ -x $bin ]] || { echo "run.sh: $bin not found; build it first" >&2; exit 1; }

shm_sizes=${SHM_SIZES:-64M,128M,256M,512M,1G}
tcp_sizes=${TCP_SIZES:-64M,128M,256M,512M,1G}
iters=${ITERS:-5}
tensors=${TENSORS:-100}

: > "$out"
echo "== shared memory (UCX default transports)"
timeout 300 "$bin" --sizes "$shm_sizes" --iters "$iters" --tensors "$tensors" --json "$out" ${EXTRA:-}
echo "== UCX_TLS=tcp"
timeout 300 "$bin" --tls tcp --sizes "$tcp_sizes" --iters "$iters" --tensors "$tensors" --json "$out" ${EXTRA:-}
echo "results: $out"
