#!/usr/bin/env bash
# run-failure.sh -- a partial source dies mid-transfer (the TensorHub paper's Figure 7c, in
# the cluster in a box). Needs root (exit 77 otherwise).
#
#   bench/netlab/run-failure.sh [--rate 1gbit] [--bytes 256M] [--reps 3] [--stall-ms 500]
#                               [--faults "0.25 0.5 0.75"] [--freezes "0.5"] [--build build]
#                               [--out docs/figures/failure.jsonl] [--no-report]
#
# One lab of 3 hosts: the trainer (embedded registry, max_readers=1, pipeline on) in host 0,
# R1 in host 1, R2 in host 2. thub_fanout --stagger sends GO to R2 only once R1 holds its
# first bytes (R1 polls its own bytes_held with THUB_Model_stat), so the trainer is busy with
# R1 and the registry hands R2 the partial replica R1. R1 SIGKILLs itself once it holds the
# given fraction of the shard (--die-at); R2 must detect it (UCX peer failure, or no progress
# for stall_timeout_ms), report it, get another source and finish from what it holds.
# verify=true everywhere (XXH3 per 1 MiB block, checked by the library) and R2 compares every
# byte with the expected content (--check-all). Each configuration --reps times, interleaved.
# --freezes: R1 SIGSTOPs itself instead (--freeze-at): a silent failure, no connection closes,
# so R2 can only notice the missing progress (stall_timeout_ms) and the registry R1's missing
# heartbeats (heartbeat_timeout_ms, default 5000); the trainer SIGKILLs R1 after R2 is done.
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
HERE=$(dirname "$SELF")
ROOT=$(readlink -f "$HERE/../..")
NETLAB=$ROOT/tools/netlab/netlab.sh

RATE=1gbit BYTES=256M REPS=3 STALL_MS=500 FAULTS="0.25 0.5 0.75" FREEZES="0.5"
BUILD=$ROOT/build OUT=$ROOT/docs/figures/failure.jsonl REPORT=1
RUN_TIMEOUT=60

die() { echo "run-failure: $*" >&2; exit 2; }
log() { echo "run-failure: $*" >&2; }

if [[ ${1:-} == --inner ]]; then
  BYTES=$2 REPS=$3 STALL_MS=$4 FAULTS=$5 BUILD=$6 OUT=$7 FREEZES=$8
  FANOUT=$BUILD/bench/netlab/thub_fanout
  port=29700
  common=(--info verify=true --info "stall_timeout_ms=$STALL_MS")
  one() {  # one FAULT REP
    local fault=$1 rep=$2 rc=0 logdir json die_at=() keep=0
    case $fault in
      none) ;;
      freeze*) die_at=(--freeze-at "${fault#freeze}") ;;
      *) die_at=(--die-at "$fault") ;;
    esac
    logdir=$(mktemp -d)
    port=$((port + 2))
    "$NETLAB" exec 0 --timeout "$RUN_TIMEOUT" -- "$FANOUT" --role trainer --listen "$NETLAB_IP_0" \
      --rollouts 2 --bytes "$BYTES" --stagger --label "failure" --registry-port "$port" \
      --control-port $((port + 1)) "${common[@]}" >"$logdir/trainer.out" 2>"$logdir/trainer.err" &
    local trainer=$!
    # R1 dies by a signal: braces, so that bash's "Killed" notice goes to its log too.
    { "$NETLAB" exec 1 --timeout "$RUN_TIMEOUT" -- "$FANOUT" --role rollout --index 0 \
        --trainer "$NETLAB_IP_0:$((port + 1))" "${die_at[@]}" "${common[@]}"; } \
      >"$logdir/r1.out" 2>"$logdir/r1.err" &
    local r1=$!
    "$NETLAB" exec 2 --timeout "$RUN_TIMEOUT" -- "$FANOUT" --role rollout --index 1 --check-all \
      --trainer "$NETLAB_IP_0:$((port + 1))" "${common[@]}" >"$logdir/r2.out" 2>"$logdir/r2.err" &
    local r2=$!
    wait "$trainer" || rc=$?
    wait "$r2" || rc=$((rc ? rc : $?))
    wait "$r1" || true   # 137 when it was killed
    json=$(grep '^{"bench":"thub_fanout"' "$logdir/trainer.out" | tail -1 || true)
    grep -E '^rollout 1 ' "$logdir/trainer.out" | sed "s/^/  [fault $fault rep $rep] /" >&2 || true
    if [[ $rc -ne 0 || -z $json ]]; then
      log "fault $fault rep $rep failed (exit $rc); logs kept in $logdir:"
      tail -n 5 "$logdir"/* >&2 || true
      keep=1
      printf '{"bench":"thub_fanout_failure","fault":"%s","rep":%d,"error":"exit %d"}\n' "$fault" "$rep" "$rc" >>"$OUT"
    else
      echo "${json/#\{/\{\"fault\":\"$fault\",\"rep\":$rep,\"stall_timeout_ms\":$STALL_MS,}" >>"$OUT"
    fi
    ((keep)) || rm -rf "$logdir"
  }
  for ((rep = 1; rep <= REPS; rep++)); do
    for fault in none $FAULTS; do one "$fault" "$rep"; done
    for fault in $FREEZES; do one "freeze$fault" "$rep"; done
  done
  exit 0
fi

while [[ $# -gt 0 ]]; do
  case $1 in
    --rate)      RATE=${2:?}; shift 2 ;;
    --bytes)     BYTES=${2:?}; shift 2 ;;
    --reps)      REPS=${2:?}; shift 2 ;;
    --stall-ms)  STALL_MS=${2:?}; shift 2 ;;
    --faults)    FAULTS=${2?}; shift 2 ;;
    --freezes)   FREEZES=${2?}; shift 2 ;;
    --build)     BUILD=$(readlink -f "${2:?}"); shift 2 ;;
    --out)       OUT=$(readlink -m "${2:?}"); shift 2 ;;
    --no-report) REPORT=0; shift ;;
    -h|--help)   sed -n '2,21s/^# \{0,1\}//p' "$SELF" >&2; exit 2 ;;
    *)           die "unknown option '$1'" ;;
  esac
done

if [[ $(id -u) -ne 0 ]] || ! command -v ip >/dev/null 2>&1 || ! command -v tc >/dev/null 2>&1; then
  echo "run-failure: SKIP: needs root and ip/tc (network namespaces, tc tbf)" >&2
  exit 77
fi
[[ -x $BUILD/bench/netlab/thub_fanout ]] ||
  die "$BUILD/bench/netlab/thub_fanout not built (cmake --build $BUILD -j2 --target thub_fanout)"

mkdir -p "$(dirname "$OUT")"
: >"$OUT"
export NETLAB_QUIET=1
start=$(date +%s)
"$NETLAB" run --hosts 3 --rate "$RATE" --timeout 1200 -- \
  "$SELF" --inner "$BYTES" "$REPS" "$STALL_MS" "$FAULTS" "$BUILD" "$OUT" "$FREEZES"
log "done in $(($(date +%s) - start)) s; results in $OUT"
if ((REPORT)); then
  # matplotlib: Debian's python3-matplotlib is for /usr/bin/python3 (another python3 may come first)
  PY=python3
  python3 -c 'import matplotlib' 2>/dev/null || { [[ -x /usr/bin/python3 ]] && PY=/usr/bin/python3; }
  "$PY" "$HERE/fanout_report.py" failure --in "$OUT" --doc "$ROOT/docs/pipeline.md" \
    --png "$ROOT/docs/figures/failure.png"
fi
