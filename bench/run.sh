#!/usr/bin/env bash
# bench/run.sh -- the transfer suite of issue 11 in one command: TensorHub's 1:1 replicate
# against UCX's own ucx_perftest (-t ucp_get, same transports, same sizes, interleaved in the
# same run) and memcpy, with CPU seconds per GB on both sides; layouts (one tensor, 100,
# 1,000 x 1 MiB, 8,192 x 8 KiB, a 7B-shaped list) over shared memory and TCP; THUB_Publish
# alone by tensor count (verify off/on); the CPU of a published source with no reader.
#
#   bench/run.sh [--quick | --smoke] [--build DIR] [--out DIR] [--transports "shm tcp"]
#                [--iters N] [--doc FILE] [--no-plots]
#
#   (default)  the full suite, 1 MiB .. 2 GiB, 5 iterations (about 30-40 minutes here)
#   --quick    fewer sizes, 3 iterations (a few minutes)
#   --smoke    tiny sizes, 1 iteration: checks the instrument works (CTest BenchSuiteSmoke)
#   --build    the CMake build folder (default: build); the two bench targets are built
#              there if they are missing, nothing else
#   --out      where the results go (default: docs/figures): transfer[-MODE].jsonl (JSON
#              lines: a machine line, then one line per row), transfer[-MODE].md (tables
#              with the machine and this command), transfer[-MODE]-shm.png, -tcp.png
#              (bandwidth and CPU/GB vs size against ucx_perftest and memcpy) and
#              transfer[-MODE]-publish.png (publish time vs tensor count)
#   --doc FILE also put the tables into FILE between <!-- BEGIN transfer-results[-MODE] -->
#              and <!-- END ... --> (e.g. --doc docs/benchmarks.md)
#   --tls-tcp  the UCX_TLS of the TCP rows (default tcp,self)
#
# Exit status: 0, 1 on a failed run, 2 on bad usage, 77 when ucx_perftest is missing in
# --smoke mode (the test skips).
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
HERE=$(dirname "$SELF")
ROOT=$(readlink -f "$HERE/..")
MODE=full BUILD=$ROOT/build OUT=$ROOT/docs/figures TRANSPORTS="shm tcp" ITERS= DOC= PLOTS=1
TLS_TCP=tcp,self
COMMAND="bench/run.sh${*:+ $*}"

die() { echo "run.sh: $*" >&2; exit 2; }
log() { echo "run.sh: $*" >&2; }

while [[ $# -gt 0 ]]; do
  case $1 in
    --quick)      MODE=quick; shift ;;
    --smoke)      MODE=smoke; shift ;;
    --full)       MODE=full; shift ;;
    --build)      BUILD=$(readlink -m "${2:?}"); shift 2 ;;
    --out)        OUT=$(readlink -m "${2:?}"); shift 2 ;;
    --transports) TRANSPORTS=${2:?}; shift 2 ;;
    --iters)      ITERS=${2:?}; shift 2 ;;
    --doc)        DOC=$(readlink -m "${2:?}"); shift 2 ;;
    --tls-tcp)    TLS_TCP=${2:?}; shift 2 ;;
    --no-plots)   PLOTS=0; shift ;;
    -h|--help)    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$SELF"; exit 0 ;;
    *)            die "unknown option '$1' (see --help)" ;;
  esac
done

# ---- what each mode runs: "LAYOUT SIZES" per line, per transport ---------------------------
# One tensor at every size (and at 1000M and 64M, the bytes of the 1000x1M and 8192x8K
# layouts, so that those compare with one tensor of the same bytes); 100 tensors; the
# fixed-size layouts; the 7B-shaped list.
case $MODE in
  full)
    ITERS=${ITERS:-5} WARMUP=1 PT_BYTES=4G PT_BYTES_TCP=1G PUB_ITERS=5 IDLE_S=5 PUB_BYTES=1G
    SHM_ROWS=("1 1M,4M,16M,64M,256M,1000M,2G" "100 64M,256M,1G,2G" "1000x1M -" "8192x8K -" "7b 256M,1G"
              "1 64M,1000M --thub-alloc" "100 1G,2G --thub-alloc" "1000x1M - --thub-alloc" "8192x8K - --thub-alloc")
    TCP_ROWS=("1 1M,16M,64M,256M,1000M" "100 64M,256M,1G" "1000x1M -" "8192x8K -" "7b 1G")
    PUB_LAYOUTS=1,10,100,1000,8192,7b ;;
  quick)
    ITERS=${ITERS:-3} WARMUP=1 PT_BYTES=2G PT_BYTES_TCP=512M PUB_ITERS=3 IDLE_S=2 PUB_BYTES=1G
    SHM_ROWS=("1 1M,64M,1000M" "100 64M,1G" "1000x1M -" "8192x8K -" "7b 1G"
              "1 64M,1000M --thub-alloc" "100 1G --thub-alloc" "1000x1M - --thub-alloc" "8192x8K - --thub-alloc")
    TCP_ROWS=("1 64M,1000M" "100 1G" "1000x1M -" "8192x8K -")
    PUB_LAYOUTS=1,100,1000,8192 ;;
  smoke)
    ITERS=${ITERS:-1} WARMUP=1 PT_BYTES=16M PT_BYTES_TCP=8M PUB_ITERS=2 IDLE_S=0.5 PUB_BYTES=8M
    SHM_ROWS=("1 1M,8M" "100 8M" "64x8K -" "7b 8M" "100 8M --thub-alloc")
    TCP_ROWS=("1 8M" "16x64K -")
    PUB_LAYOUTS=1,100 ;;
esac
SUFFIX=${MODE/full/}
NAME=transfer${SUFFIX:+-$SUFFIX}

# ---- tools -------------------------------------------------------------------------------
if ! command -v ucx_perftest >/dev/null 2>&1; then
  [[ $MODE == smoke ]] && { echo "run.sh: SKIP: ucx_perftest not found (apt-get install ucx-utils)"; exit 77; }
  die "ucx_perftest not found: it is the roofline (apt-get install ucx-utils)"
fi
REPLICATE=$BUILD/bench/transfer/thub_bench_replicate
PUBLISH=$BUILD/bench/transfer/thub_bench_publish
if [[ ! -x $REPLICATE || ! -x $PUBLISH ]]; then
  log "building the bench targets in $BUILD"
  [[ -f $BUILD/CMakeCache.txt ]] || cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$BUILD" -j"$(nproc)" --target thub_bench_replicate thub_bench_publish >/dev/null
fi
# Debian's python3-matplotlib is for /usr/bin/python3 (another python3 may come first).
PY=python3
python3 -c 'import matplotlib' 2>/dev/null || { [[ -x /usr/bin/python3 ]] && PY=/usr/bin/python3; }

# ---- background processes: none may outlive us --------------------------------------------
CHILD=
cleanup() {
  local rc=$?
  if [[ -n $CHILD ]] && kill -0 "$CHILD" 2>/dev/null; then
    kill -TERM -- "-$CHILD" 2>/dev/null || kill -TERM "$CHILD" 2>/dev/null || true
    sleep 1
    kill -KILL -- "-$CHILD" 2>/dev/null || true
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP
# run_bench TIMEOUT CMD...: in its own process group (ucx_perftest pairs included), so that
# an interrupt or a timeout ends all of it.
run_bench() {
  local limit=$1; shift
  setsid timeout --kill-after=10 "$limit" "$@" &
  CHILD=$!
  local rc=0
  wait "$CHILD" || rc=$?
  CHILD=
  return "$rc"
}

mkdir -p "$OUT"
JSON=$OUT/$NAME.jsonl
: >"$JSON"

# ---- the machine, first line of the results ------------------------------------------------
machine_json() {
  local cpu cores mem ucx kernel date commit load
  cpu=$(awk -F: '/^model name/ { sub(/^[ \t]+/, "", $2); print $2; exit }' /proc/cpuinfo)
  cores=$(nproc)
  mem=$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
  ucx=$(ucx_info -v 2>/dev/null | awk '/Version/ { print $3; exit }')
  kernel="$(uname -sr)"
  date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
  git -C "$ROOT" diff --quiet HEAD -- 2>/dev/null || commit="$commit+dirty"
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  "$PY" - "$cpu" "$cores" "$mem" "$ucx" "$kernel" "$date" "$commit" "$load" "$COMMAND" "$MODE" "$ITERS" <<'PY'
import json, sys
k = ["cpu", "cores", "memory", "ucx", "kernel", "date", "commit", "loadavg_start", "command", "mode", "iters"]
d = dict(zip(k, sys.argv[1:]))
d["cores"] = int(d["cores"]); d["iters"] = int(d["iters"])
print(json.dumps({"bench": "machine", **d}))
PY
}
machine_json >>"$JSON"
start=$(date +%s)
log "$MODE suite -> $JSON (load $(cut -d' ' -f1-3 /proc/loadavg))"

# ---- replicate rows --------------------------------------------------------------------------
failed=0
for transport in $TRANSPORTS; do
  case $transport in
    shm) rows=("${SHM_ROWS[@]}") tls=() ptb=$PT_BYTES ;;
    tcp) rows=("${TCP_ROWS[@]}") tls=(--tls "$TLS_TCP") ptb=$PT_BYTES_TCP ;;
    *)   die "unknown transport '$transport' (shm, tcp)" ;;
  esac
  for row in "${rows[@]}"; do
    read -r layout sizes extra <<<"$row"
    args=(--layout "$layout" --iters "$ITERS" --warmup "$WARMUP" --perftest-bytes "$ptb" --json "$JSON" "${tls[@]}")
    [[ $sizes != - ]] && args+=(--sizes "$sizes")
    [[ -n ${extra:-} ]] && args+=($extra)
    log "[$transport] layout $layout ${sizes/-/} ${extra:-} ($(($(date +%s) - start)) s so far)"
    if ! run_bench 1800 "$REPLICATE" "${args[@]}" >&2; then
      log "[$transport] layout $layout failed"
      printf '{"bench":"replicate","transport":"%s","layout":"%s","error":"failed"}\n' "$transport" "$layout" >>"$JSON"
      failed=1
    fi
  done
done

# ---- publish alone, and the idle source ---------------------------------------------------
log "publish: $PUB_BYTES in $PUB_LAYOUTS tensors, verify off and on"
run_bench 900 "$PUBLISH" --bytes "$PUB_BYTES" --layouts "$PUB_LAYOUTS" --verify both --iters "$PUB_ITERS" \
  --json "$JSON" >&2 || { log "publish bench failed"; failed=1; }
log "idle CPU of a published source ($IDLE_S s)"
run_bench 300 "$PUBLISH" --bytes "$PUB_BYTES" --layouts 100 --verify off --iters 1 --idle-s "$IDLE_S" \
  --json "$JSON" >&2 || { log "idle bench failed"; failed=1; }

printf '{"bench":"end","loadavg_end":"%s","seconds":%d}\n' "$(cut -d' ' -f1-3 /proc/loadavg)" \
  $(($(date +%s) - start)) >>"$JSON"

# ---- tables and plots --------------------------------------------------------------------------
report=("$PY" "$HERE/report.py" --in "$JSON" --md "$OUT/$NAME.md" --section "transfer-results${SUFFIX:+-$SUFFIX}")
((PLOTS)) && report+=(--png-prefix "$OUT/$NAME")
[[ -n $DOC ]] && report+=(--doc "$DOC")
"${report[@]}" || { log "report failed"; failed=1; }
log "done in $(($(date +%s) - start)) s: $JSON, $OUT/$NAME.md$( ((PLOTS)) && echo ", $OUT/$NAME-*.png")"
exit "$failed"
