#!/usr/bin/env bash
# The README's test command: install what is missing, build from scratch with warnings as
# errors, run every test (unit, simulation, multi-process, mpirun, netns when root).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${THUB_BUILD_DIR:-build-ci}
rm -rf "$build"
bash tools/ci/setup.sh "$build" -DTHUB_WERROR=ON
# Open MPI refuses root unless told; CI runs as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$build"
ctest --output-on-failure --timeout 600 -j 1 "$@"
