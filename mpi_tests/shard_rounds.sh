#!/usr/bin/env bash
# shard_rounds.sh: run shard_rounds under mpirun against standalone tensorhub-registry daemons,
# as a user would (no embedded registry).
#
#   shard_rounds.sh REGISTRY_BIN NREGISTRIES KILL_FIRST -- MPIRUN [MPIRUN ARGS...] PROGRAM [ARGS...]
#
# Starts NREGISTRIES (1 or 2) daemons on 127.0.0.1 (port 0: each prints the port it got; the
# second with --takeover-grace-ms 10000, as a backup),
# appends `--registry ADDR1[,ADDR2]` to the command and runs it. With KILL_FIRST=1 (two
# registries) it also appends `--notify FIFO --ack FIFO`: when rollout round R/2 begins the
# program writes a line into the first FIFO; the script then SIGKILLs the first registry,
# waits until it is gone, and answers on the second FIFO, after which the round goes on (the
# clients fail over to the second registry). The trigger is that event, never a sleep.
# Every process it started is killed on exit (trap). Exit status: the command's; 77 (skip)
# when MPIRUN is missing.
set -u
if [ $# -lt 5 ] || [ "$4" != "--" ]; then
  echo "usage: $0 REGISTRY_BIN NREGISTRIES KILL_FIRST -- MPIRUN [ARGS...] PROGRAM [ARGS...]" >&2
  exit 2
fi
reg_bin=$1 nreg=$2 kill_first=$3
shift 4
if ! command -v "$1" > /dev/null 2>&1; then
  echo "SKIP: no MPI launcher ($1 not found)"
  exit 77
fi
[ -x "$reg_bin" ] || { echo "FAIL: no registry daemon at $reg_bin" >&2; exit 1; }
[ "$kill_first" = 0 ] || [ "$nreg" -ge 2 ] || { echo "FAIL: KILL_FIRST needs two registries" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/shard_rounds.XXXXXX") || exit 1
reg_pids=()
run_pid=""
cleanup() {
  local p
  if [ -n "$run_pid" ]; then
    [ -s "$work/launcher.pid" ] && kill -TERM "$(cat "$work/launcher.pid")" 2> /dev/null
    kill -TERM "$run_pid" 2> /dev/null
  fi
  for p in "${reg_pids[@]}"; do kill -TERM "$p" 2> /dev/null; done
  wait 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'echo "shard_rounds.sh: interrupted" >&2; exit 130' INT TERM

show_logs() {
  local i
  for ((i = 0; i < nreg; i++)); do
    if [ -s "$work/reg$i.err" ]; then
      echo "--- registry $i stderr (last lines) ---" >&2
      tail -n 20 "$work/reg$i.err" >&2
    fi
  done
}

# Start the daemons; each prints "listening HOST:PORT" on stdout once ready (read through a FIFO).
addrs=""
for ((i = 0; i < nreg; i++)); do
  mkfifo "$work/reg$i.out" || exit 1
  # The registries after the first are started as a backup should be (docs/guide.md,
  # "Running the registry"): with a takeover grace, so that a round asked there before its
  # trainer published again waits for it instead of being refused.
  grace=()
  ((i > 0)) && grace=(--takeover-grace-ms 10000)
  "$reg_bin" --listen 127.0.0.1:0 "${grace[@]}" > "$work/reg$i.out" 2> "$work/reg$i.err" &
  reg_pids+=($!)
  exec {fd}< "$work/reg$i.out"
  line=""
  if ! read -r -t 60 -u "$fd" line || [ "${line%% *}" != listening ]; then
    echo "FAIL: registry $i did not start (got '$line')" >&2
    show_logs
    exit 1
  fi
  # fd stays open: the daemon's stdout keeps a reader
  addrs="${addrs:+$addrs,}${line#listening }"
done
echo "shard_rounds.sh: registries $addrs (pids ${reg_pids[*]})"

args=(--registry "$addrs")
if [ "$kill_first" = 1 ]; then
  mkfifo "$work/notify" "$work/ack" || exit 1
  exec 4<> "$work/notify" 5<> "$work/ack" # read-write: the program's opens never block
  args+=(--notify "$work/notify" --ack "$work/ack")
fi

# The command runs in a subshell that reports its end on the notify FIFO too, so the wait for
# the trigger also ends when the program ends before it.
(
  "$@" "${args[@]}" &
  echo $! > "$work/launcher.pid"
  wait $!
  rc=$?
  [ "$kill_first" = 1 ] && echo "exited $rc" >&4
  exit $rc
) &
run_pid=$!

if [ "$kill_first" = 1 ]; then
  event=""
  read -r -t 600 -u 4 event
  case "$event" in
    round*)
      kill -KILL "${reg_pids[0]}"
      wait "${reg_pids[0]}" 2> /dev/null
      echo "shard_rounds.sh: $event began: registry 0 (${addrs%%,*}) killed"
      echo "registry 0 killed" >&5
      ;;
    *)
      echo "FAIL: the program ended before the trigger (${event:-no event})" >&2
      ;;
  esac
fi
wait "$run_pid"
rc=$?
run_pid=""
[ "$rc" = 0 ] || show_logs
exit "$rc"
