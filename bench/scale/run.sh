#!/bin/sh
# The at-scale sweep of docs/scale.md. (1) The registry's CPU per version: the replay
# benchmark (bench/sched/fanout_replay_bench.cc) for N = 10, 100, 1000, written as Google
# Benchmark JSON to docs/figures/scale-registry.json. (2) thub_scale (tests/scale/) for each
# scenario and N, one JSON line per run, into docs/figures/scale.jsonl; the "measured"
# scenario takes the registry's service times per request and per heartbeat from (1).
# (3) bench/scale/report.py puts the tables into docs/scale.md and draws
# docs/figures/scale.svg. Everything but (1) is deterministic (virtual time).
#
#   bench/scale/run.sh [--build build] [--ns "1 10 100 1000"] [--jobs 2] [--reps 3]
#                      [--no-bench] [--no-report] [--out docs/figures]
set -eu
build=build
ns="1 10 100 1000"
max_slow=1000  # the largest N for the silent and measured scenarios (the slowest to simulate)
jobs=2
reps=3
bench=1
report=1
out=docs/figures
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --ns) ns=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --no-bench) bench=0; shift ;;
    --no-report) report=0; shift ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--ns LIST] [--jobs J] [--reps R] [--no-bench] [--no-report] [--out DIR]" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
sim=$build/tests/scale/thub_scale
replay=$build/bench/sched/thub_fanout_replay_bench
[ -x "$sim" ] || { echo "build $sim first (cmake --build $build --target thub_scale)" >&2; exit 77; }
mkdir -p "$out"
t_start=$(date +%s)

if [ "$bench" = 1 ]; then
  [ -x "$replay" ] || { echo "build $replay first" >&2; exit 77; }
  "$replay" --benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true \
    --benchmark_out="$out/scale-registry.json" --benchmark_out_format=json
fi

# The registry's measured service times (median of the repetitions) for a given N: the
# nearest N benchmarked with the rollouts' start spread (thub_scale's default).
service() {
  python3 "$here/report.py" service "$out/scale-registry.json" "$1"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
i=0
for n in $ns; do
  tenth=$((n / 10))
  [ "$tenth" -ge 1 ] || tenth=1
  kills=$((n / 10))
  for scenario in base measured measured_hb60 faults silent twodc readers2; do
    case "$scenario" in
      base) args="" ;;
      measured)
        [ -f "$out/scale-registry.json" ] && [ "$n" -le "$max_slow" ] || continue
        args=$(service "$n") ;;
      measured_hb60)  # the same, but the registry waits 60 s before it drops a silent client
        [ -f "$out/scale-registry.json" ] && [ "$n" -ge 300 ] && [ "$n" -le "$max_slow" ] || continue
        args="$(service "$n") --heartbeat-timeout-ms 60000" ;;
      faults) args="--joins $tenth --deaths $kills" ;;
      silent) [ "$kills" -ge 1 ] && [ "$n" -le "$max_slow" ] || continue; args="--deaths $kills --silent" ;;
      twodc) [ "$n" -ge 2 ] || continue; args="--dcs 2 --wan-gbit 3200" ;;
      readers2) [ "$n" -ge 2 ] || continue; args="--max-readers 2" ;;
    esac
    i=$((i + 1))
    # no trailing blank: xargs -L would join the next line to this one
    printf '%04d %s --replicas %d%s\n' "$i" "$scenario" "$n" "${args:+ $args}" >> "$tmp/list"
  done
done
# One run per line: "<order> <scenario> <thub_scale args>"; each writes its own file.
xargs -P "$jobs" -L 1 sh -c '
  order=$1; scenario=$2; shift 2
  line=$("'"$sim"'" --json "$@" 2>"'"$tmp"'/$order.err") || true
  printf "%s\n" "$line" | sed "s/^{/{\"scenario\":\"$scenario\",\"args\":\"$*\",/" > "'"$tmp"'/$order.json"
  cat "'"$tmp"'/$order.err" >&2
' sh < "$tmp/list"
cat "$tmp"/*.json > "$out/scale.jsonl"
echo "run.sh: $(wc -l < "$out/scale.jsonl") runs in $(( $(date +%s) - t_start )) s -> $out/scale.jsonl" >&2

if [ "$report" = 1 ]; then
  python3 "$here/report.py" report "$out/scale.jsonl" "$out/scale-registry.json" docs/scale.md "$out/scale.svg"
fi
