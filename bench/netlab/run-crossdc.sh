#!/usr/bin/env bash
# run-crossdc.sh -- one version from a trainer in datacenter a to rollouts in two datacenters,
# in the two-datacenter cluster in a box (tools/netlab/netlab.sh --dc-b): what crossed the WAN
# link, read from the kernel's byte counters of the link (not computed), and when each
# rollout had the version. One command; needs root (exit 77 otherwise).
#
#   bench/netlab/run-crossdc.sh [--rate 1gbit] [--wan-rate R/5] [--a 1] [--b 4] [--bytes 64M]
#                               [--reps 3] [--methods "naive nearest seeding seeding_roomy seeding_noslot
#                               seeding_kill"]
#                               [--build build] [--out docs/figures/crossdc.jsonl]
#                               [--steps V [--period 2] [--poll-ms 250] [--tail 10]]
#
# --steps V: versions overtaking each other (thub_crossdc): the trainer publishes V versions,
# one every --period s (two trainer replicas, so that v is published while v-1 is read), and
# rollout i calls THUB_Update(THUB_LATEST) every i x --poll-ms (inference steps of different
# lengths: the rollouts of a datacenter ask at different moments) for V x period + --tail s.
# Methods then: naive, nearest, seeding (smart_skipping=false), skipping (the defaults) and
# offload (the defaults, and every rollout sets offload_seeding to the shard's size: a seed
# buffer fetches each version across in the background while the rollouts keep serving), and
# offload_noslot (the same with seed_takes_slot=false: a seed across holds no reader slot of
# the trainer, so the trainer's own datacenter does not wait behind it).
# Per run one JSON line (bench crossdc_steps, bench/netlab/crossdc_report.py): WAN bytes a->b
# over V x the shard, and every update call's time (the rollout's stall) and outcome; default
# --out docs/figures/crossdc-steps.jsonl, the CDF plot beside it (.png).
#
# Hosts: 0 the trainer (and the embedded registry), 1..A rollouts of datacenter a, then B
# rollouts of datacenter b, on a switch of their own behind the WAN link. Every process sets
# its `datacenter` info key. Methods (registry keys, set on the trainer):
#   naive          seeding=false pipeline=false max_readers=A+B: every rollout reads the trainer
#   nearest        seeding=false: the nearest free holder (same datacenter first), pipelined
#   seeding        the defaults (seeding=true, max_readers=1)
#   seeding_roomy  seeding=true max_readers=A+B: the trainer has a free slot for everybody,
#                  seeding alone keeps b's rollouts inside b
#   seeding_noslot seed_takes_slot=false: the read across takes no reader slot of the trainer
#   seeding_kill   the defaults; b's seeder (the first rollout of b: the rollouts start one
#                  after another) SIGKILLs itself at half the shard, a reader of b takes over
# Every process runs in verify mode (TENSORHUB_VERIFY=1: each 1 MiB block's hash is checked on
# receipt); the rollouts of one version also compare every byte of the shard.
# Per run one JSON line: the trainer's (bench thub_fanout) with wan_bytes_ab / wan_bytes_ba
# (bytes through the WAN link, a to b and back) and wan_per_version (a to b over the shard's
# bytes), then a table of medians on stderr.
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
HERE=$(dirname "$SELF")
ROOT=$(readlink -f "$HERE/../..")
NETLAB=$ROOT/tools/netlab/netlab.sh

RATE=1gbit WAN_RATE= A=1 B=4 BYTES=64M REPS=3 METHODS="naive nearest seeding seeding_roomy seeding_noslot seeding_kill"
BUILD=$ROOT/build OUT= STEPS=0 PERIOD=2 POLL_MS=250 TAIL=10
RUN_TIMEOUT=180

die() { echo "run-crossdc: $*" >&2; exit 2; }
log() { echo "run-crossdc: $*" >&2; }

# ---- inner part: inside a live lab, root namespace ------------------------------------------
if [[ ${1:-} == --inner ]]; then
  A=$2 B=$3 BYTES=$4 REPS=$5 BUILD=$6 OUT=$7 METHODS=$8 STEPS=$9 PERIOD=${10} POLL_MS=${11} TAIL=${12}
  RUN_TIMEOUT=${13}
  N=$((A + B))
  FANOUT=$BUILD/bench/netlab/thub_fanout
  export TENSORHUB_VERIFY=1  # every process, both modes: each 1 MiB block's hash checked on receipt
  port=29700
  wan() { cat "/sys/class/net/$NETLAB_WAN_DEV/statistics/$1_bytes"; }
  # run METHOD REP KEY=VALUE...: one fan-out, one JSON line. Every rollout checks every byte
  # (--check-all), beside verify mode.
  # seeding_kill: the rollouts start one after another (--stagger: each once the one before
  # holds bytes), so that the first of b is b's seeder; it SIGKILLs itself at half the shard.
  run() {
    local method=$1 rep=$2; shift 2
    local info=() kv i rc=0 pids=() logdir json ab0 ba0 ab1 ba1 tx=() rx
    for kv in "$@"; do info+=(--info "$kv"); done
    [[ $method == seeding_kill ]] && tx=(--stagger)
    logdir=$(mktemp -d)
    port=$((port + 2))
    ab0=$(wan tx) ba0=$(wan rx)
    "$NETLAB" exec 0 --timeout "$RUN_TIMEOUT" -- "$FANOUT" --role trainer --listen "$NETLAB_IP_0" \
      --rollouts "$N" --bytes "$BYTES" --label "$method" --registry-port "$port" \
      --control-port $((port + 1)) --info datacenter=a "${tx[@]}" "${info[@]}" >"$logdir/trainer.out" 2>"$logdir/trainer.err" &
    local trainer=$!
    for ((i = 1; i <= N; i++)); do
      local dcv=NETLAB_DC_$i
      rx=(--check-all)
      [[ $method == seeding_kill ]] && ((i == A + 1)) && rx+=(--die-at 0.5)
      "$NETLAB" exec "$i" --timeout "$RUN_TIMEOUT" -- "$FANOUT" --role rollout \
        --trainer "$NETLAB_IP_0:$((port + 1))" --index $((i - 1)) --info "datacenter=${!dcv}" "${rx[@]}" \
        >"$logdir/rollout$i.out" 2>"$logdir/rollout$i.err" &
      pids+=($!)
    done
    wait "$trainer" || rc=$?
    for i in "${!pids[@]}"; do
      # The rollout that killed itself on purpose exits with SIGKILL's status.
      if [[ $method == seeding_kill ]] && ((i == A)); then wait "${pids[$i]}" || true; continue; fi
      wait "${pids[$i]}" || rc=$((rc ? rc : $?))
    done
    ab1=$(wan tx) ba1=$(wan rx)
    json=$(grep '^{"bench":"thub_fanout"' "$logdir/trainer.out" | tail -1 || true)
    if [[ $rc -ne 0 || -z $json ]]; then
      log "$method rep $rep failed (exit $rc):"
      tail -n 3 "$logdir"/*.err >&2 || true
      printf '{"bench":"crossdc","method":"%s","rep":%d,"error":"exit %d"}\n' "$method" "$rep" "$rc" >>"$OUT"
    else
      python3 - "$json" "$method" "$rep" "$A" "$B" "$((ab1 - ab0))" "$((ba1 - ba0))" "$NETLAB_WAN_RATE_BPS" >>"$OUT" <<'EOF'
import json, sys
j = json.loads(sys.argv[1])
method, rep, a, b, ab, ba, wan = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8])
d = j.get("rollouts_detail", [])
out = {"bench": "crossdc", "method": method, "rep": rep, "dc_a_rollouts": a, "dc_b_rollouts": b,
       "bytes": j["bytes"], "wan_bps": wan, "link_gbps": j.get("link_gbps"),
       "wan_bytes_ab": ab, "wan_bytes_ba": ba, "wan_per_version": round(ab / j["bytes"], 3),
       "check": j.get("check"), "completion_s": j.get("completion_s"), "verify": True, "killed": j.get("killed", 0),
       "source_failures_b": sum(r.get("source_failures", 0) for r in d[a:] if r.get("alive")),
       "stall_a_s": [r.get("replicate_s") for r in d[:a] if r.get("alive")],
       "stall_b_s": [r.get("replicate_s") for r in d[a:] if r.get("alive")]}
print(json.dumps(out))
EOF
      tail -1 "$OUT" | python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); print("  [%s rep %d] WAN a->b %.3f x the shard, b stalls %s s, check %s" % (j["method"], j["rep"], j["wan_per_version"], ",".join("%.2f" % s for s in j["stall_b_s"]), j["check"]))' >&2
    fi
    rm -rf "$logdir"
  }
  # steps_run METHOD REP KEY=VALUE...: V versions overtaking each other, one JSON line
  steps_run() {
    local method=$1 rep=$2; shift 2
    local info=() kv i rc=0 pids=() logdir ab0 ba0 ab1 ba1 dur linger rinfo=()
    # offload: every rollout may keep a seed buffer of the shard's size (offload_seeding)
    [[ $method == offload* ]] && rinfo=(--info "offload_seeding=$BYTES")
    for kv in "$@"; do info+=(--info "$kv"); done
    logdir=$(mktemp -d)
    port=$((port + 2))
    dur=$(awk -v v="$STEPS" -v p="$PERIOD" -v t="$TAIL" 'BEGIN { print v * p + t }')
    linger=$((RUN_TIMEOUT / 2))
    ab0=$(wan tx) ba0=$(wan rx)
    "$NETLAB" exec 0 --timeout "$RUN_TIMEOUT" -- "$BUILD/bench/netlab/thub_crossdc" --role trainer \
      --listen "$NETLAB_IP_0:$port" --versions "$STEPS" --period "$PERIOD" --bytes "$BYTES" --linger "$linger" \
      --stop-file "$logdir/stop" \
      --info datacenter=a "${info[@]}" >"$logdir/trainer.out" 2>"$logdir/trainer.err" &
    local trainer=$!
    sleep 1
    for ((i = 1; i <= N; i++)); do
      local dcv=NETLAB_DC_$i
      "$NETLAB" exec "$i" --timeout "$RUN_TIMEOUT" -- "$BUILD/bench/netlab/thub_crossdc" --role rollout \
        --registry "$NETLAB_IP_0:$port" --index "$i" --duration "$dur" --poll-ms $((POLL_MS * i)) --bytes "$BYTES" \
        --info "datacenter=${!dcv}" "${rinfo[@]}" >"$logdir/rollout$i.out" 2>"$logdir/rollout$i.err" &
      pids+=($!)
    done
    for i in "${pids[@]}"; do wait "$i" || rc=$((rc ? rc : $?)); done
    touch "$logdir/stop"  # every rollout is done: the trainer (and its registry) may go
    wait "$trainer" || rc=$((rc ? rc : $?))
    ab1=$(wan tx) ba1=$(wan rx)
    if ((rc != 0)) || ! python3 "$HERE/crossdc_report.py" run "$logdir" "$method" "$rep" "$A" "$B" \
                            "$((ab1 - ab0))" "$((ba1 - ba0))" "$NETLAB_WAN_RATE_BPS" >>"$OUT"; then
      log "$method rep $rep failed (exit $rc):"
      tail -n 3 "$logdir"/*.err >&2 || true
      printf '{"bench":"crossdc_steps","method":"%s","rep":%d,"error":"exit %d"}\n' "$method" "$rep" "$rc" >>"$OUT"
    fi
    if [[ -n ${CROSSDC_KEEP:-} ]]; then log "logs kept in $logdir"; else rm -rf "$logdir"; fi
  }
  for ((rep = 1; rep <= REPS; rep++)); do
    for method in $METHODS; do
      if ((STEPS > 0)); then
        case $method in
          naive)    steps_run naive "$rep" seeding=false pipeline=false "max_readers=$((N + 2))" ;;
          nearest)  steps_run nearest "$rep" seeding=false ;;
          seeding)  steps_run seeding "$rep" smart_skipping=false ;;
          skipping) steps_run skipping "$rep" ;;
          offload)  steps_run offload "$rep" ;;
          offload_noslot) steps_run offload_noslot "$rep" seed_takes_slot=false ;;
          *)        die "unknown method '$method' (with --steps: naive nearest seeding skipping offload offload_noslot)" ;;
        esac
        continue
      fi
      case $method in
        naive)         run naive "$rep" seeding=false pipeline=false "max_readers=$N" ;;
        nearest)       run nearest "$rep" seeding=false ;;
        seeding)       run seeding "$rep" ;;
        seeding_roomy) run seeding_roomy "$rep" "max_readers=$N" ;;
        seeding_noslot) run seeding_noslot "$rep" seed_takes_slot=false ;;
        seeding_kill)  run seeding_kill "$rep" ;;
        *)             die "unknown method '$method'" ;;
      esac
    done
  done
  exit 0
fi

# ---- outer part -----------------------------------------------------------------------------
while [[ $# -gt 0 ]]; do
  case $1 in
    --rate)     RATE=${2:?}; shift 2 ;;
    --wan-rate) WAN_RATE=${2:?}; shift 2 ;;
    --a)        A=${2:?}; shift 2 ;;
    --b)        B=${2:?}; shift 2 ;;
    --bytes)    BYTES=${2:?}; shift 2 ;;
    --reps)     REPS=${2:?}; shift 2 ;;
    --methods)  METHODS=${2:?}; shift 2 ;;
    --build)    BUILD=$(readlink -f "${2:?}"); shift 2 ;;
    --out)      OUT=$(readlink -m "${2:?}"); shift 2 ;;
    --steps)    STEPS=${2:?}; shift 2 ;;
    --period)   PERIOD=${2:?}; shift 2 ;;
    --poll-ms)  POLL_MS=${2:?}; shift 2 ;;
    --tail)     TAIL=${2:?}; shift 2 ;;
    -h|--help)  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$SELF" >&2; exit 2 ;;
    *)          die "unknown option '$1'" ;;
  esac
done
if [[ $(id -u) -ne 0 ]] || ! command -v ip >/dev/null 2>&1 || ! command -v tc >/dev/null 2>&1; then
  echo "run-crossdc: SKIP: needs root and ip/tc (network namespaces, tc tbf)" >&2
  exit 77
fi
[[ -x $BUILD/bench/netlab/thub_fanout ]] || die "$BUILD/bench/netlab/thub_fanout not built (cmake --build $BUILD --target thub_fanout)"
[[ $A =~ ^[0-9]+$ && $B =~ ^[1-9][0-9]*$ ]] || die "--a takes 0 or more, --b 1 or more"
[[ $STEPS =~ ^[0-9]+$ ]] || die "--steps takes a count"
if ((STEPS > 0)); then
  [[ -x $BUILD/bench/netlab/thub_crossdc ]] || die "$BUILD/bench/netlab/thub_crossdc not built (cmake --build $BUILD --target thub_crossdc)"
  [[ $METHODS == "naive nearest seeding seeding_roomy seeding_noslot seeding_kill" ]] && METHODS="naive nearest seeding skipping offload"
  RUN_TIMEOUT=$(awk -v v="$STEPS" -v p="$PERIOD" -v t="$TAIL" 'BEGIN { printf "%d", 2 * (v * p + t) + 60 }')
fi
if [[ -z $OUT ]]; then
  OUT=$ROOT/docs/figures/crossdc.jsonl
  ((STEPS == 0)) || OUT=$ROOT/docs/figures/crossdc-steps.jsonl
fi
mkdir -p "$(dirname "$OUT")"
: >"$OUT"
export NETLAB_QUIET=1
lab=(--hosts $((1 + A + B)) --rate "$RATE" --dc-b "$B")
[[ -n $WAN_RATE ]] && lab+=(--wan-rate "$WAN_RATE")
log "trainer + $A rollouts in a, $B in b; $BYTES; $REPS repetitions of '$METHODS'"
"$NETLAB" run "${lab[@]}" --timeout 1500 -- "$SELF" --inner "$A" "$B" "$BYTES" "$REPS" "$BUILD" "$OUT" "$METHODS" "$STEPS" "$PERIOD" "$POLL_MS" "$TAIL" \
  "$RUN_TIMEOUT"
if ((STEPS > 0)); then
  PY=python3
  python3 -c 'import matplotlib' 2>/dev/null || { [[ -x /usr/bin/python3 ]] && PY=/usr/bin/python3; }
  exec "$PY" "$HERE/crossdc_report.py" table --in "$OUT" --png "${OUT%.jsonl}.png"
fi
python3 - "$OUT" <<'EOF' >&2
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
bad = [r for r in rows if "error" in r or r.get("check") != "ok"]
print("| %s | %s | %s | %s | %s | %s |" % ("method", "runs", "WAN a->b / shard (median)", "rollout stall in b (median, s)", "rollout stall in a (median, s)", "bytes"))
print("|---|---|---|---|---|---|")
for m in dict.fromkeys(r["method"] for r in rows):
    ok = [r for r in rows if r["method"] == m and "error" not in r]
    if not ok:
        print("| %s | 0 | failed | | | |" % m); continue
    wan = statistics.median(r["wan_per_version"] for r in ok)
    stall = statistics.median(s for r in ok for s in r["stall_b_s"])
    sa = [s for r in ok for s in r["stall_a_s"]]
    print("| %s | %d | %.3f | %.2f | %s | %s |" % (m, len(ok), wan, stall, "%.2f" % statistics.median(sa) if sa else "-",
                                              "ok" if all(r["check"] == "ok" for r in ok) else "BAD"))
sys.exit(1 if bad else 0)
EOF
