#!/usr/bin/env bash
# run-elastic.sh -- the elastic benchmark (the TensorHub paper's Figures 10/11 at small scale)
# in the cluster in a box: a trainer publishes a new version every step while rollouts join
# and leave between steps (default 2 -> 8 -> 4 -> 12) and spot rollouts are SIGKILLed
# mid-transfer; per step and rollout the weight-update latency, per step the trainer's stall.
# One command; needs root (exit 77 otherwise).
#
#   bench/netlab/run-elastic.sh [--rate 500mbit] [--bytes 128M] [--tensors 4]
#       [--schedule "2x3,8x3,4x3,12x3"] [--standalone 2] [--modes "pipeline relay p2p"]
#       [--train-s X] [--seed 1] [--kill-range 0.2:0.8] [--verify true|false] [--reps 1]
#       [--mpi-tuned "pipeline:256K chain:1M" | --no-mpi] [--build build]
#       [--out docs/figures/elastic.jsonl] [--tag T] [--doc docs/elastic.md] [--no-report] [--smoke]
#
# One lab (tools/netlab/netlab.sh run) of 1 + the most rollouts a step has: host 0 the trainer
# (embedded registry), every rollout a process of its own in a host of its own, each host's
# link shaped to --rate both ways. Per mode, bench/netlab/thub_elastic runs the whole
# schedule (see the top of elastic.c): the trainer starts and preempts the rollouts itself.
# Modes (the registry's info keys; every process with verify=--verify):
#   pipeline  TensorHub as shipped: pipeline=true, max_readers=1 (partial holders serve)
#   relay     pipeline=false: only complete holders serve (new rollouts wait for a finished
#             one: the paper's baseline where elastic rollouts pull from standalone ones)
#   p2p       pipeline=false, max_readers=64: every rollout reads the trainer (point-to-point);
#             stall_timeout_ms=120000: N readers share the trainer's link, and a late joiner can
#             wait more than the default 10 s for its first bytes, which the library would take
#             for a failed source (a SIGKILLed peer is seen at once through its closed sockets)
# Then, unless --no-mpi, Open MPI's tuned broadcasts (thub_bcast_baseline, --mpi-tuned
# variants ALG:SEGMENT with ALG chain = coll_tuned algorithm 2 with chain_fanout 1, pipeline
# = 3) with one fresh mpirun per phase of the schedule (a collective's membership is fixed:
# a join or a leave means a new communicator), as many broadcasts as the phase has steps;
# setup_s (mpirun start -> MPI_Init done everywhere) and the whole mpirun's wall time are
# its re-creation cost. A rank that dies kills an MPI job, so MPI has no preemptions.
# Writes JSON lines to --out (a machine line first), then bench/netlab/elastic_report.py
# puts the tables into --doc (between BEGIN/END elastic-results markers) and draws the PNG
# beside --out (same name, .png). --tag T: docs/figures/elastic-T.jsonl and .png, section
# elastic-results-T (another configuration beside the main one). --smoke: a tiny model, 2 steps (one join, one kill), modes
# pipeline and p2p, no MPI, no report (what CTest NetlabElastic runs).
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
HERE=$(dirname "$SELF")
ROOT=$(readlink -f "$HERE/../..")
NETLAB=$ROOT/tools/netlab/netlab.sh
MPIRUN_NETLAB=$ROOT/tools/netlab/mpirun-in-netlab.sh

RATE=500mbit BYTES=128M TENSORS=4 SCHEDULE="2x3,8x3,4x3,12x3" STANDALONE=2 MODES="pipeline relay p2p"
TRAIN_S= SEED=1 KILL_RANGE=0.2:0.8 VERIFY=true REPS=1 MPI_TUNED="pipeline:256K chain:1M" MPI=1
BUILD=$ROOT/build OUT= DOC=$ROOT/docs/elastic.md REPORT=1 SMOKE=0 SECTION=elastic-results
COMMAND="bench/netlab/run-elastic.sh $*" TAG=

die() { echo "run-elastic: $*" >&2; exit 2; }
log() { echo "run-elastic: $*" >&2; }

bytes_of() { # 1M -> 1048576
  local v=${1%[KkMmGg]} u=${1: -1}
  case $u in K|k) echo $((v << 10)) ;; M|m) echo $((v << 20)) ;; G|g) echo $((v << 30)) ;; *) echo "$1" ;; esac
}

# ---- inner part: inside the live lab, root namespace ----------------------------------------
if [[ ${1:-} == --inner ]]; then
  shift
  BUILD=$1 OUT=$2 BYTES=$3 TENSORS=$4 SCHEDULE=$5 STANDALONE=$6 MODES=$7 TRAIN_S=$8 SEED=$9
  KILL_RANGE=${10} VERIFY=${11} REPS=${12} MPI=${13} MPI_TUNED=${14}
  ELASTIC=$BUILD/bench/netlab/thub_elastic
  port=29800 failures=0
  # One mode over the whole schedule; the trainer's JSON lines go straight to $OUT.
  thub_run() { # MODE REP "REGISTRY KEYS" ["KEYS OF EVERY PROCESS"]
    local mode=$1 rep=$2 rc=0 logdir info=() rinfo=() kv
    for kv in $3 ${4:-} "verify=$VERIFY"; do info+=(--info "$kv"); done
    for kv in ${4:-} "verify=$VERIFY"; do rinfo+=(--rollout-info "$kv"); done
    logdir=$(mktemp -d /tmp/run-elastic.XXXXXX)
    port=$((port + 2))
    log "$mode (rep $rep): schedule $SCHEDULE, $BYTES at $NETLAB_RATE"
    "$NETLAB" exec 0 --timeout 3600 -- "$ELASTIC" --role trainer --listen "$NETLAB_IP_0" \
      --schedule "$SCHEDULE" --bytes "$BYTES" --tensors "$TENSORS" --standalone "$STANDALONE" \
      ${TRAIN_S:+--train-s "$TRAIN_S"} --seed "$SEED" --kill-range "$KILL_RANGE" --mode "$mode" \
      --registry-port "$port" --control-port $((port + 1)) --launcher "$NETLAB" --log-dir "$logdir" \
      --rep "$rep" --out "$OUT" "${info[@]}" "${rinfo[@]}" 2>"$logdir/trainer.err" |
      sed -u -e '/UCX  WARN .* was not returned to mpool/d' -e 's/^/  /' >&2 || rc=$?
    if ((rc != 0)); then
      failures=$((failures + 1))
      log "$mode (rep $rep) failed (exit $rc); logs kept in $logdir:"
      tail -n 5 "$logdir"/*.err "$logdir"/*.log 2>/dev/null | grep -v '^$' | tail -n 30 >&2 || true
      printf '{"bench":"thub_elastic_error","mode":"%s","rep":%d,"error":"exit %d","logs":"%s"}\n' \
        "$mode" "$rep" "$rc" "$logdir" >>"$OUT"
    else
      rm -rf "$logdir"
    fi
  }
  # Open MPI: one mpirun per phase, one broadcast per step of the phase.
  mpi_phase() { # PHASE_INDEX N STEPS LABEL MCA...
    local phase=$1 n=$2 steps=$3 label=$4 args=() out t0 t1 rc=0
    shift 4
    while [[ $# -gt 0 ]]; do args+=(--mpirun-arg --mca --mpirun-arg "$1" --mpirun-arg "$2"); shift 2; done
    t0=$(date +%s.%N)
    out=$(THUB_BENCH_LAUNCH_REALTIME=$t0 "$MPIRUN_NETLAB" --np $((n + 1)) --timeout $((60 + 20 * steps * (n + 1))) \
            --mpirun-arg -x --mpirun-arg THUB_BENCH_LAUNCH_REALTIME "${args[@]}" -- \
            "$BUILD/bench/netlab/thub_bcast_baseline" --bytes "$BYTES" --iters "$steps" --warmup 0 --per-rank \
            --label "$label" 2>&1) || rc=$?
    t1=$(date +%s.%N)
    local json
    json=$(grep '^{"bench":"mpi_bcast"' <<<"$out" | tail -1 || true)
    if [[ $rc -ne 0 || -z $json ]]; then
      failures=$((failures + 1))
      log "$label phase $phase (N=$n) failed (exit $rc): $(tail -n 3 <<<"$out")"
      printf '{"bench":"thub_elastic_error","mode":"mpi","method":"%s","phase":%d,"rollouts":%d,"error":"exit %d"}\n' \
        "$label" "$phase" "$n" "$rc" >>"$OUT"
      return
    fi
    grep -v '^{' <<<"$out" | tail -1 | sed "s/^/  [$label phase $phase N=$n] /" >&2 || true
    echo "${json/#\{/\{\"rep\":$rep,\"elastic_phase\":$phase,\"rollouts\":$n,\"wall_s\":$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }'),}" >>"$OUT"
  }
  mpi_run() { # the whole schedule, one job per phase
    if [[ ! -x $BUILD/bench/netlab/thub_bcast_baseline ]]; then
      log "thub_bcast_baseline not built (no MPI?): no Open MPI baseline"
      return
    fi
    local phase=0 ph n steps variant alg seg phases
    log "Open MPI (rep $rep): one job per phase of $SCHEDULE, $BYTES at $NETLAB_RATE"
    IFS=, read -ra phases <<<"$SCHEDULE"
    for ph in "${phases[@]}"; do
      phase=$((phase + 1))
      n=${ph%%[xk]*} steps=1
      [[ $ph =~ x([0-9]+) ]] && steps=${BASH_REMATCH[1]}
      for variant in $MPI_TUNED; do
        alg=${variant%%:*} seg=${variant#*:}
        case $alg in
          chain)    mpi_phase "$phase" "$n" "$steps" "mpi_tuned_chain_$seg" coll_tuned_use_dynamic_rules 1 \
                      coll_tuned_bcast_algorithm 2 coll_tuned_bcast_algorithm_segmentsize "$(bytes_of "$seg")" \
                      coll_tuned_bcast_algorithm_chain_fanout 1 ;;
          pipeline) mpi_phase "$phase" "$n" "$steps" "mpi_tuned_pipeline_$seg" coll_tuned_use_dynamic_rules 1 \
                      coll_tuned_bcast_algorithm 3 coll_tuned_bcast_algorithm_segmentsize "$(bytes_of "$seg")" ;;
          default)  mpi_phase "$phase" "$n" "$steps" "mpi_bcast" ;;
          *)        die "unknown --mpi-tuned algorithm '$alg' (chain, pipeline, default)" ;;
        esac
      done
    done
  }
  # Each repetition runs every method once, the order rotated from one repetition to the next
  # so that slow drifts of the machine's load do not always hit the same method.
  all=($MODES)
  ((MPI)) && all+=(mpi)
  for ((rep = 1; rep <= REPS; rep++)); do
    for ((i = 0; i < ${#all[@]}; i++)); do
      mode=${all[$(((i + rep - 1) % ${#all[@]}))]}
      case $mode in
        pipeline) thub_run pipeline "$rep" "pipeline=true max_readers=1" ;;
        relay)    thub_run relay "$rep" "pipeline=false max_readers=1" ;;
        p2p)      thub_run p2p "$rep" "pipeline=false max_readers=64" stall_timeout_ms=120000 ;;
        mpi)      mpi_run ;;
        *)        die "unknown mode '$mode' (pipeline, relay, p2p)" ;;
      esac
    done
  done
  exit $((failures ? 1 : 0))
fi

# ---- outer part -----------------------------------------------------------------------------
while [[ $# -gt 0 ]]; do
  case $1 in
    --rate)       RATE=${2:?}; shift 2 ;;
    --bytes)      BYTES=${2:?}; shift 2 ;;
    --tensors)    TENSORS=${2:?}; shift 2 ;;
    --schedule)   SCHEDULE=${2:?}; shift 2 ;;
    --standalone) STANDALONE=${2:?}; shift 2 ;;
    --modes)      MODES=${2:?}; shift 2 ;;
    --train-s)    TRAIN_S=${2:?}; shift 2 ;;
    --seed)       SEED=${2:?}; shift 2 ;;
    --kill-range) KILL_RANGE=${2:?}; shift 2 ;;
    --verify)     VERIFY=${2:?}; shift 2 ;;
    --reps)       REPS=${2:?}; shift 2 ;;
    --mpi-tuned)  MPI_TUNED=${2:?}; shift 2 ;;
    --no-mpi)     MPI=0; shift ;;
    --build)      BUILD=$(readlink -f "${2:?}"); shift 2 ;;
    --out)        OUT=$(readlink -m "${2:?}"); shift 2 ;;
    --doc)        DOC=$(readlink -m "${2:?}"); shift 2 ;;
    --section)    SECTION=${2:?}; shift 2 ;;
    --tag)        TAG=${2:?}; shift 2 ;;
    --no-report)  REPORT=0; shift ;;
    --smoke)      SMOKE=1; shift ;;
    -h|--help)    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$SELF" >&2; exit 2 ;;
    *)            die "unknown option '$1'" ;;
  esac
done
if ((SMOKE)); then
  # step 1: 3 rollouts (2 standalone + 1 spot) join; step 2: one spot rollout is preempted
  # mid-transfer while a fresh one joins (churn).
  BYTES=8M SCHEDULE="3x1,3x1k1" MODES="pipeline p2p" MPI=0 REPORT=0 KILL_RANGE=0.3:0.6
fi

if [[ $(id -u) -ne 0 ]] || ! command -v ip >/dev/null 2>&1 || ! command -v tc >/dev/null 2>&1 ||
   ! ip netns list >/dev/null 2>&1; then
  echo "run-elastic: SKIP: needs root and ip/tc with network namespaces (ip netns)" >&2
  exit 77
fi
[[ -x $BUILD/bench/netlab/thub_elastic ]] ||
  die "$BUILD/bench/netlab/thub_elastic not built (cmake --build $BUILD -j2 --target thub_elastic thub_bcast_baseline)"
((MPI == 0)) || command -v mpirun >/dev/null 2>&1 || { log "mpirun not found: no Open MPI baseline"; MPI=0; }
HOSTS=$("$BUILD/bench/netlab/thub_elastic" --role trainer --schedule "$SCHEDULE" --standalone "$STANDALONE" --print-hosts) ||
  die "bad --schedule '$SCHEDULE'"

[[ $TAG =~ ^[A-Za-z0-9._-]*$ ]] || die "--tag: letters, digits, '.', '_' and '-' only"
[[ -n $TAG ]] && SECTION=$SECTION-$TAG
[[ -n $OUT ]] || OUT=$ROOT/docs/figures/elastic${TAG:+-$TAG}.jsonl
mkdir -p "$(dirname "$OUT")"
: >"$OUT"
PY=python3 # Debian's python3-matplotlib is for /usr/bin/python3 (another python3 may come first)
python3 -c 'import matplotlib' 2>/dev/null || { [[ -x /usr/bin/python3 ]] && PY=/usr/bin/python3; }
commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$ROOT" diff --quiet HEAD -- 2>/dev/null || commit="$commit+dirty"
python3 - "$(awk -F: '/^model name/ { sub(/^[ \t]+/, "", $2); print $2; exit }' /proc/cpuinfo)" "$(nproc)" \
  "$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)" \
  "$(ucx_info -v 2>/dev/null | awk '/Version/ { print $3; exit }')" "$(uname -sr)" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  "$commit" "$(cut -d' ' -f1-3 /proc/loadavg)" "$COMMAND" "$RATE" "$HOSTS" >>"$OUT" <<'PY'
import json, sys
k = ["cpu", "cores", "memory", "ucx", "kernel", "date", "commit", "loadavg_start", "command", "rate", "hosts"]
d = dict(zip(k, sys.argv[1:]))
d["cores"] = int(d["cores"]); d["hosts"] = int(d["hosts"])
print(json.dumps({"bench": "machine", **d}))
PY

export NETLAB_QUIET=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
start=$(date +%s) rc=0
log "$HOSTS hosts at $RATE, schedule $SCHEDULE, $BYTES, modes '$MODES'$( ((MPI)) && echo " + Open MPI ($MPI_TUNED)") -> $OUT (load $(cut -d' ' -f1-3 /proc/loadavg))"
# netlab.sh run removes the lab (namespaces, veths, bridge, the processes in it) on every exit.
"$NETLAB" run --hosts "$HOSTS" --rate "$RATE" --timeout 7200 -- \
  "$SELF" --inner "$BUILD" "$OUT" "$BYTES" "$TENSORS" "$SCHEDULE" "$STANDALONE" "$MODES" "$TRAIN_S" "$SEED" \
  "$KILL_RANGE" "$VERIFY" "$REPS" "$MPI" "$MPI_TUNED" || rc=$?
printf '{"bench":"end","seconds":%d,"loadavg_end":"%s","status":%d}\n' $(($(date +%s) - start)) \
  "$(cut -d' ' -f1-3 /proc/loadavg)" "$rc" >>"$OUT"
log "done in $(($(date +%s) - start)) s (exit $rc); results in $OUT"
if ((REPORT)); then
  "$PY" "$HERE/elastic_report.py" --in "$OUT" --doc "$DOC" --section "$SECTION" --png "${OUT%.jsonl}.png" || rc=$((rc ? rc : 1))
fi
exit "$rc"
