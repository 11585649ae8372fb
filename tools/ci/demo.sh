#!/usr/bin/env bash
# The README's demo command: install what is missing, build, run tensorhub-demo (embedded
# registry in the trainer process, rollouts as separate processes). Arguments go to the demo.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/ci/setup.sh build
exec build/tools/demo/tensorhub-demo "$@"
