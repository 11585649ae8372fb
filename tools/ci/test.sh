#!/usr/bin/env bash
# The README's test command: install what is missing, build from scratch with warnings as
# errors, run every test (unit, simulation, multi-process, mpirun, netns when root); then
# build again with AddressSanitizer + UndefinedBehaviorSanitizer and run the unit, sched,
# simulation (fewer seeds) and multi-process tests there, every process of them included;
# then the transport, registry, client and C API unit tests under ThreadSanitizer
# (tools/ci/tsan.sh). Arguments go to the first ctest run (e.g. -L unit).
# THUB_SANITIZER_RUN=0 skips both sanitizer runs, THUB_TSAN_RUN=0 the ThreadSanitizer one.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
build=${THUB_BUILD_DIR:-build-ci}
rm -rf "$build"
bash tools/ci/setup.sh "$build" -DTHUB_WERROR=ON
# Open MPI refuses root unless told; CI runs as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
(cd "$build" && ctest --output-on-failure --timeout 600 -j 1 "$@")

[[ ${THUB_SANITIZER_RUN:-1} == 0 ]] && exit 0
san=${build}-asan
rm -rf "$san"
echo "== sanitizer run (address,undefined): $san"
cmake -S . -B "$san" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTHUB_WERROR=ON -DTHUB_SANITIZE=address,undefined
cmake --build "$san" -j "$(nproc)"
# Every process of the tests (the peers and registry daemons the multi-process tests start
# too) writes its reports to $logs; any report fails the run. Leaks of UCX and the libraries
# it loads, and of hwloc's netlink plugin, are suppressed (tools/ci/lsan.supp); none of ours.
logs=$(mktemp -d /tmp/thub-sanitizer.XXXXXX)
export ASAN_OPTIONS="log_path=$logs/asan:detect_leaks=1:abort_on_error=0"
export LSAN_OPTIONS="suppressions=$root/tools/ci/lsan.supp:fast_unwind_on_malloc=0:print_suppressions=0"
export UBSAN_OPTIONS="log_path=$logs/ubsan:print_stacktrace=1:halt_on_error=1"
export THUB_SIM_SEEDS=${THUB_SIM_SEEDS:-1000}
rc=0
(cd "$san" && ctest --output-on-failure --timeout 600 -j 1 -L "unit|sched|sim|multiproc" -E "InstalledOutsideProgram") || rc=$?
if compgen -G "$logs/*" > /dev/null; then
  echo "== sanitizer reports:"
  for f in "$logs"/*; do echo "--- $f"; head -60 "$f"; done
  rc=1
fi
rm -rf "$logs"

if [[ ${THUB_TSAN_RUN:-1} != 0 ]]; then
  tsan=${build}-tsan
  rm -rf "$tsan"
  echo "== sanitizer run (thread): $tsan"
  bash tools/ci/tsan.sh "$tsan" || rc=1
fi
exit $rc
