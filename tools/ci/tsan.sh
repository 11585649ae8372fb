#!/usr/bin/env bash
# ThreadSanitizer run (issue 13 item 8): builds the unit tests of the transport (its
# progress thread), the client (engine and copy executors, the in-process transfers), the
# registry (the server's service thread) and the C API with -fsanitize=thread, runs them,
# and fails on any report but UCX serving a peer's get (tools/ci/tsan_reports.py says why
# that one is not ours). tools/ci/test.sh runs it last (THUB_TSAN_RUN=0 skips it there).
# Usage: tools/ci/tsan.sh [BUILD_DIR] (default build-tsan; reused when it exists).
# THUB_TSAN_BUILD_ONLY=1 builds and stops.
# THUB_TSAN_JOBS sets the build's parallelism (default: nproc). THUB_TSAN_MULTIPROC=1 adds the
# multi-process tests (every peer process and registry daemon they start is built and run
# under ThreadSanitizer too, and their reports count): a documented command, not a CI step,
# as it doubles the run's time.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
build=${1:-build-tsan}
tests=(transport/thub_transport_tests registry/thub_registry_tests client/thub_client_tests
       client/thub_member_machine_tests client/thub_hostile_source_tests capi/thub_capi_tests)

if [[ ${THUB_TSAN_MULTIPROC:-0} == 1 ]]; then
  tests+=(multiproc/thub_multiproc_tests multiproc/thub_registry_info_tests)
  # The first report a process prints (the accepted kind, a peer's get served) is symbolized
  # on the thread that raced: a source's progress thread stops for seconds while
  # ThreadSanitizer reads the libraries' debug information, and its readers' stall watchdog
  # (10 s) took it for a dead source. Tests that set their own stall timeout keep it.
  export TENSORHUB_STALL_TIMEOUT_MS=${TENSORHUB_STALL_TIMEOUT_MS:-120000}
fi

# Line tables (-g1) are all the reports need (function, file and line per frame).
# The tests compile in batches (THUB_UNITY_BUILD, as in the other CI trees).
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTHUB_WERROR=ON -DTHUB_SANITIZE=thread -DTHUB_UNITY_BUILD=ON \
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" > /dev/null
cmake --build "$build" -j "${THUB_TSAN_JOBS:-$(nproc)}" --target "${tests[@]##*/}"
# THUB_TSAN_BUILD_ONLY=1: build, run nothing (tools/ci/test.sh builds beside another phase).
[[ ${THUB_TSAN_BUILD_ONLY:-0} == 1 ]] && exit 0

logs=$(mktemp -d /tmp/thub-tsan.XXXXXX)
trap 'rm -rf "$logs"' EXIT
# UCX's memory hooks (its registration cache's) intercept madvise, which glibc calls as a
# thread exits, after ThreadSanitizer has let go of the thread: a segfault in the runtime.
export UCX_MEM_EVENTS=no
tsan="halt_on_error=0 second_deadlock_stack=1 exitcode=0"
rc=0
run() {  # run NAME TSAN_EXTRA BINARY ARGS...
  local name=$1 extra=$2 bin=$3
  shift 3
  echo "== $name"
  TSAN_OPTIONS="$tsan log_path=$logs/$name $extra" "$build/tests/$bin" "$@" > "$logs/$name.out" 2>&1 || {
    echo "$name failed:"
    tail -40 "$logs/$name.out"
    rc=1
  }
  grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$logs/$name.out" || true
}
for t in "${tests[@]}"; do
  if [[ $t == capi/* ]]; then
    # THUB_Finalize holds the busy lock of every model of the context at once; this test
    # opens 128, more than the 64 locks a thread may hold for the deadlock detector.
    run "${t##*/}" "" "$t" --gtest_filter=-RequestTest.SixtyFourReplicatesOnDifferentModelsAreOutstandingAtOnce
    run "${t##*/}.64" "detect_deadlocks=0" "$t" --gtest_filter=RequestTest.SixtyFourReplicatesOnDifferentModelsAreOutstandingAtOnce
  elif [[ $t == multiproc/thub_multiproc_tests ]]; then
    # This one times a stopped source against a 300 ms stall timeout and 1.5 s sleeps, which
    # a process pausing seconds to symbolize its first report (above) overruns.
    run "${t##*/}" "" "$t" --gtest_filter=-IntegrityTest.LateRepliesOfAStoppedSourceOnThisHostNeverLandInANewerVersion
  else
    run "${t##*/}" "" "$t"
  fi
done
shopt -s nullglob
reports=("$logs"/*.[0-9]*)
python3 "$root/tools/ci/tsan_reports.py" /dev/null "${reports[@]}" || rc=1
exit $rc
