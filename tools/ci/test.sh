#!/usr/bin/env bash
# The README's test command: install what is missing, build from scratch with warnings as
# errors, run every test (unit, simulation, multi-process, mpirun, netns when root); then
# the unit, sched, simulation (fewer seeds) and multi-process tests again under
# AddressSanitizer + UndefinedBehaviorSanitizer, every process of them included; then the
# transport, registry, client and C API unit tests under ThreadSanitizer (tools/ci/tsan.sh).
# Arguments go to the first ctest run (e.g. -L unit).
# THUB_SANITIZER_RUN=0 skips both sanitizer runs, THUB_TSAN_RUN=0 the ThreadSanitizer one.
#
# The phases share the machine: the AddressSanitizer build compiles while the normal tree
# builds and its ctest runs, the ThreadSanitizer build beside the AddressSanitizer tests. The
# sanitizer trees build only what runs there (tests/CMakeLists.txt: no topology tests, no
# mpi_tests, the developers' soak, scale and fuzz tools only when named). The tests run THUB_CTEST_JOBS at a time
# (default: two per core): multi-process tests mostly wait on each other (the normal ctest
# uses ~40 % of 2 cores at -j 1), every test holds under busy cores (issue 17: repeated 20
# times at -j 4 beside a CPU hog), each takes its own ports and folders, and the tests that
# shape links (netlab, bench) are RUN_SERIAL; the simulation's outcome is a function of its
# seed, not of the schedule. The phases' times are printed at the end. The builds carry line tables (-g1), not
# full debug information: sanitizer reports still name file and line, and a build compiles
# about a third less; the tests compile in batches (THUB_UNITY_BUILD, tests/CMakeLists.txt) in
# every tree; the AddressSanitizer tree at -O1 (below).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
build=${THUB_BUILD_DIR:-build-ci}
san=${build}-asan
tsan=${build}-tsan
jobs=$(nproc)
ctest_jobs=${THUB_CTEST_JOBS:-$((2 * jobs))}
flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DTHUB_WERROR=ON -DTHUB_UNITY_BUILD=ON
       "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG")
# The AddressSanitizer tree compiles at -O1 (AddressSanitizer's own advice) and without UBSan's
# vptr check (CMakeLists.txt): 374 s alone on 2 cores against 577 s at -O2 with it, and its
# sched and sim tests take as long (77 against 73 s), measured 2026-12-07.
san_flags=("${flags[@]/-O2/-O1}")
sanitizers=1
[[ ${THUB_SANITIZER_RUN:-1} == 0 ]] && sanitizers=0
tsan_run=$sanitizers
[[ ${THUB_TSAN_RUN:-1} == 0 ]] && tsan_run=0

# ---- phase times ---------------------------------------------------------------------------
times_file=$(mktemp /tmp/thub-ci-times.XXXXXX)
phase() {  # phase NAME COMMAND...: runs the command, records its wall time, keeps its status
  local name=$1 t0=$SECONDS rc=0
  shift
  echo "== $name"
  "$@" || rc=$?
  printf '%-52s %5d s%s\n' "$name" $((SECONDS - t0)) "$([[ $rc == 0 ]] || echo "  (exit $rc)")" >> "$times_file"
  return $rc
}
report() {
  echo "== phase times (wall; phases marked | ran beside the one above them)"
  cat "$times_file"
  printf '%-52s %5d s\n' "the whole test command" "$SECONDS"
  rm -f "$times_file"
}
trap report EXIT

# ---- the normal build and every test ---------------------------------------------------------
rm -rf "$build" "$san" "$tsan"
phase "install packages" env THUB_SETUP_PACKAGES_ONLY=1 bash tools/ci/setup.sh
# Open MPI refuses root unless told; CI runs as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

asan_build() {
  phase "| configure, build (address,undefined: $san)" \
    bash -c 'cmake -S . -B "$1" "${@:3}" -DTHUB_SANITIZE=address,undefined > /dev/null &&
             cmake --build "$1" -j "$2"' _ "$san" "$jobs" "${san_flags[@]}"
}
tsan_build() {
  phase "| configure, build (thread: $tsan)" env THUB_TSAN_BUILD_ONLY=1 bash tools/ci/tsan.sh "$tsan"
}
background() {  # background NAME FUNCTION: runs it beside the next phase, output to a log
  "$2" > "$build.$1.log" 2>&1 &
  bg_pid=$!
  bg_log=$build.$1.log
}
join_background() {  # waits for it; shows its log's end if it failed
  local brc=0
  wait "$bg_pid" || brc=$?
  echo "== beside the phase above: $bg_log"
  if [[ $brc != 0 ]]; then
    tail -60 "$bg_log"
    exit 1
  fi
}
# The AddressSanitizer tree compiles beside the normal one, and then beside its ctest.
[[ $sanitizers == 1 ]] && background asan-build asan_build
phase "configure, build ($build)" bash tools/ci/setup.sh "$build" "${flags[@]}"
rc=0
phase "ctest ($build)" bash -c 'cd "$1" && shift && ctest --output-on-failure --timeout 600 "$@"' _ "$build" -j "$ctest_jobs" "$@" || rc=$?
if [[ $sanitizers == 0 ]]; then
  exit $rc
fi
asan_pid=$bg_pid asan_log=$bg_log

# ---- AddressSanitizer + UndefinedBehaviorSanitizer -----------------------------------------
# Every process of the tests (the peers and registry daemons the multi-process tests start
# too) writes its reports to $logs; any report fails the run. Leaks of UCX and the libraries
# it loads, and of hwloc's netlink plugin, are suppressed (tools/ci/lsan.supp); none of ours.
# The leak checker records each allocation's stack with the slow (DWARF) unwinder where UCX's
# frames, built without frame pointers, may be on it, so that the suppressions can match them;
# the pure machines (labels sched, sim: no UCX, and most of the allocations) keep the fast one
# (frame pointers: ours are built with them), which made their run ~15 x shorter.
logs=$(mktemp -d /tmp/thub-sanitizer.XXXXXX)
asan_tests() {  # asan_tests FAST_UNWIND CTEST_ARGS...
  local fast=$1
  shift
  ASAN_OPTIONS="log_path=$logs/asan:detect_leaks=1:abort_on_error=0" \
  LSAN_OPTIONS="suppressions=$root/tools/ci/lsan.supp:fast_unwind_on_malloc=$fast:print_suppressions=0" \
  UBSAN_OPTIONS="log_path=$logs/ubsan:print_stacktrace=1:halt_on_error=1" \
  THUB_SIM_SEEDS=${THUB_SIM_SEEDS:-400} \
    bash -c 'cd "$1" && shift && ctest --output-on-failure --timeout 600 "$@"' _ "$san" -j "$ctest_jobs" "$@"
}
# The ThreadSanitizer tree compiles beside the AddressSanitizer tests (which mostly wait on
# their processes), not beside the rest of the AddressSanitizer build: two compiles on two
# cores only lengthened the critical path (2026-12-06: the wait for the AddressSanitizer
# build was 415 s with the ThreadSanitizer build beside it).
bg_pid=$asan_pid bg_log=$asan_log
phase "wait for the AddressSanitizer build" join_background
[[ $tsan_run == 1 ]] && background tsan-build tsan_build
phase "ctest sched, sim (address,undefined: $san)" asan_tests 1 -L "sched|sim" || rc=1
phase "ctest unit, multiproc (address,undefined: $san)" asan_tests 0 -L "unit|multiproc" -LE "sched|sim" -E "^Installed" || rc=1
[[ $tsan_run == 1 ]] && join_background
if compgen -G "$logs/*" > /dev/null; then
  echo "== sanitizer reports:"
  for f in "$logs"/*; do echo "--- $f"; head -60 "$f"; done
  rc=1
fi
rm -rf "$logs"

# ---- ThreadSanitizer -------------------------------------------------------------------------
if [[ $tsan_run == 1 ]]; then
  phase "tests (thread: $tsan)" bash tools/ci/tsan.sh "$tsan" || rc=1
fi
exit $rc
