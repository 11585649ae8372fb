#!/usr/bin/env bash
# run-fanout.sh -- fan-out of one shard from a trainer to N rollouts in the cluster in a box:
# TensorHub with pipeline replication, without it, naive point-to-point, against the
# baselines of the same run: Open MPI MPI_Bcast (default and tuned: chain/pipeline with
# segments), a static chain of raw ucp_gets, and the ideal S/R. One command; needs root
# (exit 77 otherwise).
#
#   bench/netlab/run-fanout.sh [--rate 1gbit] [--bytes 256M] [--ns "1 2 4 8"] [--reps 3]
#                              [--reps-large 3] [--large-from 8] [--mpi-iters 3]
#                              [--build build] [--out docs/figures/fanout.jsonl] [--no-report]
#                              [--methods "pipeline nopipe p2p ucx_chain tuned"] [--tuned "KEY=VALUE ..."]
#                              [--no-mpi] [--watch] [--latency 50ms] [--tag T] [--versions V]
#                              [--rates "250mbit 500mbit 1gbit"]
#                              [--mpi-tuned "chain:1M pipeline:1M ..." | --mpi-tuned none]
#                              [--chain-chunk 1M] [--chain-window 4]
#
# --tag T names the outputs fanout-T.jsonl / fanout-T.png and the doc section
# fanout-results-T (another rate beside the main table). --rates runs every N at each rate
# (a sweep; outputs fanout-sweep.*, doc section rate-sweep): how (a)/ideal follows the
# machine's CPU load, since all hosts of the box share this machine's cores.
#
# For each N a lab of N+1 hosts (tools/netlab/netlab.sh run) is brought up once and every
# method runs in it, repetitions interleaved (a b c a b c ...), then MPI_Bcast.
# A TensorHub run is V versions (--versions, default --mpi-iters) in the same processes, as
# the training steps of an RL job: version 1 replicated, every later one THUB_Update'd into
# the same tensors; its samples are every version's completion, the first included, as
# MPI_Bcast's are its timed iterations, the first included (connections of both are made
# during the first). Methods:
#   pipeline  TensorHub, embedded registry defaults (pipeline=true, max_readers=1)
#   nopipe    pipeline=false: only complete replicas are handed out as sources
#   p2p       pipeline=false, max_readers=N: every rollout reads the trainer
#   tuned     TensorHub with the info keys of --tuned (e.g. chunk_size=1M); not in the default set
#   ucx_chain thub_chain_get: host i reads host i-1 with raw ucp_gets of --chain-chunk, at most
#             --chain-window in flight, following host i-1's progress counter (veRL's NIXL ring
#             schedule); its trainer stall = until host 1 has read the last byte
#   mpi_bcast thub_bcast_baseline under tools/netlab/mpirun-in-netlab.sh (--mpi-iters timed
#             iterations, no warm-up, each one a sample), Open MPI's default algorithm; then
#             once per --mpi-tuned variant ALG:SEGMENT (ALG chain = coll_tuned algorithm 2
#             with chain_fanout 1, pipeline = 3; SEGMENT the segment size): the report keeps
#             the best variant per N as "Open MPI best tuned". Trainer stall = the root's
#             time in MPI_Bcast.
# Results: JSON lines in --out (one per run), then bench/netlab/fanout_report.py writes the
# table into docs/pipeline.md and the plot docs/figures/fanout.png.
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
HERE=$(dirname "$SELF")
ROOT=$(readlink -f "$HERE/../..")
NETLAB=$ROOT/tools/netlab/netlab.sh
MPIRUN_NETLAB=$ROOT/tools/netlab/mpirun-in-netlab.sh

RATE=1gbit BYTES=256M NS="1 2 4 8" REPS=3 REPS_LARGE=3 LARGE_FROM=8 MPI_ITERS=3
BUILD=$ROOT/build OUT= REPORT=1 METHODS="pipeline nopipe p2p ucx_chain" TAG= RATES=
MPI_TUNED="chain:1M pipeline:1M chain:256K pipeline:256K chain:4M" CHAIN_CHUNK=1M CHAIN_WINDOW=4
TUNED="max_inflight=2" MPI=1 LAB_OPTS=() WATCH=0 VERSIONS=
RUN_TIMEOUT=150   # seconds, one TensorHub run (all processes)

die() { echo "run-fanout: $*" >&2; exit 2; }
log() { echo "run-fanout: $*" >&2; }

# ---- inner part: inside a live lab of N+1 hosts, root namespace ---------------------------
if [[ ${1:-} == --inner ]]; then
  N=$2 BYTES=$3 REPS=$4 MPI_ITERS=$5 BUILD=$6 OUT=$7 METHODS=$8 TUNED=$9 MPI=${10} WATCH=${11}
  MPI_TUNED=${12} CHAIN_CHUNK=${13} CHAIN_WINDOW=${14} VERSIONS=${15}
  FANOUT=$BUILD/bench/netlab/thub_fanout CHAIN=$BUILD/bench/netlab/thub_chain_get
  port=$((29500 + 10 * N))
  cpu_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8 }' /proc/stat; }
  # thub_run METHOD REP INFO...: one fan-out; appends the trainer's JSON line (or an error).
  thub_run() {
    local method=$1 rep=$2; shift 2
    local info=() kv i rc=0 pids=() logdir json
    for kv in "$@"; do info+=(--info "$kv"); done
    logdir=$(mktemp -d)
    port=$((port + 2))
    local ticks0 ticks1 load
    ticks0=$(cpu_ticks) load=$(cut -d' ' -f1 /proc/loadavg)
    "$NETLAB" exec 0 --timeout "$RUN_TIMEOUT" -- "$FANOUT" --role trainer --listen "$NETLAB_IP_0" \
      --rollouts "$N" --bytes "$BYTES" --label "$method" --registry-port "$port" \
      --control-port $((port + 1)) "${info[@]}" --versions "$VERSIONS" $( ((WATCH)) && echo --watch) >"$logdir/trainer.out" 2>"$logdir/trainer.err" &
    local trainer=$!
    for ((i = 1; i <= N; i++)); do
      "$NETLAB" exec "$i" --timeout "$RUN_TIMEOUT" -- "$FANOUT" --role rollout \
        --trainer "$NETLAB_IP_0:$((port + 1))" --index $((i - 1)) "${info[@]}" \
        >"$logdir/rollout$i.out" 2>"$logdir/rollout$i.err" &
      pids+=($!)
    done
    wait "$trainer" || rc=$?
    for i in "${pids[@]}"; do wait "$i" || rc=$((rc ? rc : $?)); done
    ticks1=$(cpu_ticks)
    # Busy share of all the machine's CPUs during the run (everyone's processes, softirq too).
    local busy
    busy=$(awk -v a="$ticks0" -v b="$ticks1" 'BEGIN { split(a, x, " "); split(b, y, " ");
             d = y[2] - x[2]; if (d > 0) printf "%.3f", (y[1] - x[1]) / d; else printf "0" }')
    json=$(grep '^{"bench":"thub_fanout"' "$logdir/trainer.out" | tail -1 || true)
    grep -v '^{' "$logdir/trainer.out" | tail -1 | sed "s/^/  [$method N=$N rep $rep] /" >&2 || true
    if [[ $rc -ne 0 || -z $json ]]; then
      log "$method N=$N rep $rep failed (exit $rc):"
      tail -n 3 "$logdir"/*.err >&2 || true
      printf '{"bench":"thub_fanout","method":"%s","rollouts":%d,"rep":%d,"error":"exit %d"}\n' \
        "$method" "$N" "$rep" "$rc" >>"$OUT"
    else
      echo "${json/#\{/\{\"rep\":$rep,\"machine_busy\":$busy,\"loadavg_1m\":$load,}" >>"$OUT"
    fi
    rm -rf "$logdir"
  }
  # chain_run REP: the static chain of raw ucp_gets, rank i in host i; rank 0 prints the JSON.
  chain_run() {
    local rep=$1 i rc=0 pids=() logdir json
    logdir=$(mktemp -d)
    port=$((port + 2))
    for ((i = N; i >= 0; i--)); do
      local ipv=NETLAB_IP_$i prevv=NETLAB_IP_$((i > 0 ? i - 1 : 0))
      "$NETLAB" exec "$i" --timeout "$RUN_TIMEOUT" -- "$CHAIN" --rank "$i" --hosts $((N + 1)) \
        --listen "${!ipv}" --root "$NETLAB_IP_0" --prev "${!prevv}" --bytes "$BYTES" \
        --chunk "$CHAIN_CHUNK" --window "$CHAIN_WINDOW" --port "$port" \
        >"$logdir/rank$i.out" 2>"$logdir/rank$i.err" &
      pids+=($!)
    done
    for i in "${pids[@]}"; do wait "$i" || rc=$((rc ? rc : $?)); done
    json=$(grep '^{"bench":"ucx_chain"' "$logdir/rank0.out" | tail -1 || true)
    grep -v '^{' "$logdir/rank0.out" | tail -1 | sed "s/^/  [ucx_chain N=$N rep $rep] /" >&2 || true
    if [[ $rc -ne 0 || -z $json ]]; then
      log "ucx_chain N=$N rep $rep failed (exit $rc):"
      tail -n 3 "$logdir"/*.err >&2 || true
      printf '{"bench":"ucx_chain","method":"ucx_chain","rollouts":%d,"rep":%d,"error":"exit %d"}\n' \
        "$N" "$rep" "$rc" >>"$OUT"
    else
      echo "${json/#\{/\{\"rep\":$rep,}" >>"$OUT"
    fi
    rm -rf "$logdir"
  }
  for ((rep = 1; rep <= REPS; rep++)); do
    for method in $METHODS; do
      case $method in
        pipeline)  thub_run pipeline "$rep" ;;
        nopipe)    thub_run nopipe "$rep" pipeline=false ;;
        p2p)       thub_run p2p "$rep" pipeline=false "max_readers=$N" ;;
        tuned)     read -ra kv <<<"$TUNED"; thub_run tuned "$rep" "${kv[@]}" ;;
        ucx_chain) chain_run "$rep" ;;
        *)         die "unknown method '$method'" ;;
      esac
    done
  done
  # mpi_run LABEL [MCA KEY VALUE]...: thub_bcast_baseline over the lab, one JSON line.
  mpi_run() {
    local label=$1 args=() mpiout; shift
    while [[ $# -gt 0 ]]; do args+=(--mpirun-arg --mca --mpirun-arg "$1" --mpirun-arg "$2"); shift 2; done
    mpiout=$("$MPIRUN_NETLAB" --np $((N + 1)) --timeout $((60 + 40 * MPI_ITERS * (N + 1))) "${args[@]}" -- \
               "$BUILD/bench/netlab/thub_bcast_baseline" --bytes "$BYTES" --iters "$MPI_ITERS" --warmup 0 \
               --label "$label" 2>&1) || log "$label N=$N failed: $(tail -n 3 <<<"$mpiout")"
    grep -v '^{' <<<"$mpiout" | tail -1 | sed "s/^/  [$label N=$N] /" >&2 || true
    grep '^{"bench":"mpi_bcast"' <<<"$mpiout" >>"$OUT" ||
      printf '{"bench":"mpi_bcast","method":"%s","ranks":%d,"error":"no result"}\n' "$label" $((N + 1)) >>"$OUT"
  }
  bytes_of() {  # 1M -> 1048576
    local v=${1%[KkMmGg]} u=${1: -1}
    case $u in K|k) echo $((v << 10)) ;; M|m) echo $((v << 20)) ;; G|g) echo $((v << 30)) ;; *) echo "$1" ;; esac
  }
  if ((MPI == 0)); then
    :
  elif [[ -x $BUILD/bench/netlab/thub_bcast_baseline ]]; then
    mpi_run mpi_bcast
    for variant in $MPI_TUNED; do
      [[ $variant == none ]] && continue
      alg=${variant%%:*} seg=${variant#*:}
      case $alg in
        chain)    mpi_run "mpi_tuned_chain_$seg" coll_tuned_use_dynamic_rules 1 coll_tuned_bcast_algorithm 2 \
                    coll_tuned_bcast_algorithm_segmentsize "$(bytes_of "$seg")" coll_tuned_bcast_algorithm_chain_fanout 1 ;;
        pipeline) mpi_run "mpi_tuned_pipeline_$seg" coll_tuned_use_dynamic_rules 1 coll_tuned_bcast_algorithm 3 \
                    coll_tuned_bcast_algorithm_segmentsize "$(bytes_of "$seg")" ;;
        *)        log "unknown --mpi-tuned algorithm '$alg' (chain, pipeline)" ;;
      esac
    done
  else
    log "thub_bcast_baseline not built (no MPI): the mpi_bcast baselines are missing"
  fi
  exit 0
fi

# ---- outer part -----------------------------------------------------------------------------
while [[ $# -gt 0 ]]; do
  case $1 in
    --rate)       RATE=${2:?}; shift 2 ;;
    --rates)      RATES=${2:?}; shift 2 ;;
    --tag)        TAG=${2:?}; shift 2 ;;
    --bytes)      BYTES=${2:?}; shift 2 ;;
    --ns)         NS=${2:?}; shift 2 ;;
    --reps)       REPS=${2:?}; shift 2 ;;
    --reps-large) REPS_LARGE=${2:?}; shift 2 ;;
    --large-from) LARGE_FROM=${2:?}; shift 2 ;;
    --mpi-iters)  MPI_ITERS=${2:?}; shift 2 ;;
    --methods)    METHODS=${2:?}; shift 2 ;;
    --tuned)      TUNED=${2:?}; shift 2 ;;
    --mpi-tuned)  MPI_TUNED=${2:?}; shift 2 ;;
    --chain-chunk) CHAIN_CHUNK=${2:?}; shift 2 ;;
    --chain-window) CHAIN_WINDOW=${2:?}; shift 2 ;;
    --watch)      WATCH=1; shift ;;
    --versions)   VERSIONS=${2:?}; shift 2 ;;
    --latency)    LAB_OPTS+=(--latency "${2:?}"); shift 2 ;;
    --no-mpi)     MPI=0; shift ;;
    --build)      BUILD=$(readlink -f "${2:?}"); shift 2 ;;
    --out)        OUT=$(readlink -m "${2:?}"); shift 2 ;;
    --no-report)  REPORT=0; shift ;;
    -h|--help)    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$SELF" >&2; exit 2 ;;
    *)            die "unknown option '$1'" ;;
  esac
done

if [[ $(id -u) -ne 0 ]] || ! command -v ip >/dev/null 2>&1 || ! command -v tc >/dev/null 2>&1; then
  echo "run-fanout: SKIP: needs root and ip/tc (network namespaces, tc tbf)" >&2
  exit 77
fi
[[ -x $BUILD/bench/netlab/thub_fanout ]] ||
  die "$BUILD/bench/netlab/thub_fanout not built (cmake --build $BUILD -j2 --target thub_fanout thub_chain_get thub_bcast_baseline)"
[[ " $METHODS " != *" ucx_chain "* || -x $BUILD/bench/netlab/thub_chain_get ]] ||
  die "$BUILD/bench/netlab/thub_chain_get not built (cmake --build $BUILD -j2 --target thub_chain_get)"

[[ -z $RATES ]] && RATES=$RATE
[[ -n $VERSIONS ]] || VERSIONS=$MPI_ITERS
[[ $VERSIONS =~ ^[1-9][0-9]*$ ]] || die "--versions: a count of 1 or more"
[[ $TAG =~ ^[A-Za-z0-9._-]*$ ]] || die "--tag: letters, digits, '.', '_' and '-' only"
NAME=fanout${TAG:+-$TAG}
[[ $RATES == *" "* ]] && NAME=fanout-sweep
[[ -n $OUT ]] || OUT=$ROOT/docs/figures/$NAME.jsonl
mkdir -p "$(dirname "$OUT")"
: >"$OUT"
export NETLAB_QUIET=1
start=$(date +%s)
for rate in $RATES; do
  for n in $NS; do
    reps=$REPS
    ((n >= LARGE_FROM)) && reps=$REPS_LARGE
    log "N=$n: $reps repetitions of '$METHODS'$( ((MPI)) && echo " + MPI_Bcast x $MPI_ITERS (default, $MPI_TUNED)"), $BYTES at $rate ($(($(date +%s) - start)) s so far)"
    "$NETLAB" run --hosts $((n + 1)) --rate "$rate" "${LAB_OPTS[@]}" --timeout 1500 -- \
      "$SELF" --inner "$n" "$BYTES" "$reps" "$MPI_ITERS" "$BUILD" "$OUT" "$METHODS" "$TUNED" "$MPI" "$WATCH" \
      "$MPI_TUNED" "$CHAIN_CHUNK" "$CHAIN_WINDOW" "$VERSIONS"
  done
done
log "all runs done in $(($(date +%s) - start)) s; results in $OUT"
if ((REPORT)); then
  # matplotlib: Debian's python3-matplotlib is for /usr/bin/python3 (another python3 may come first)
  PY=python3
  python3 -c 'import matplotlib' 2>/dev/null || { [[ -x /usr/bin/python3 ]] && PY=/usr/bin/python3; }
  if [[ $NAME == fanout-sweep ]]; then
    "$PY" "$HERE/fanout_report.py" sweep --in "$OUT" --doc "$ROOT/docs/pipeline.md" \
      --section rate-sweep --png "$ROOT/docs/figures/$NAME.png"
  else
    "$PY" "$HERE/fanout_report.py" fanout --in "$OUT" --rate "$RATE" --doc "$ROOT/docs/pipeline.md" \
      --section "${NAME/fanout/fanout-results}" --png "$ROOT/docs/figures/$NAME.png"
  fi
fi
