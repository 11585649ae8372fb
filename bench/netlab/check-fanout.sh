#!/usr/bin/env bash
# check-fanout.sh BUILD -- the fan-out benchmark, small, as a test (CTest NetlabPipelineFanout):
# a trainer and 4 rollouts, each in its own host of the cluster in a box (TCP between hosts,
# UCX peer error handling, 1 Gbit/s links), 64 MiB, two versions in the same processes (the
# second THUB_Update'd into the same tensors), once with pipeline replication and once
# without. Passes when every rollout finished both versions with the right bytes, at least
# one of them read a partial source with pipeline on, and none did with it off. Exit 77 (skip) without root.
set -euo pipefail
HERE=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
BUILD=${1:?usage: check-fanout.sh BUILD}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
rc=0
"$HERE/run-fanout.sh" --ns 4 --bytes 64M --reps 1 --versions 2 --no-mpi --methods "pipeline nopipe" \
  --build "$BUILD" --out "$out" --no-report || rc=$?
((rc == 77)) && exit 77
((rc == 0)) || { echo "check-fanout: run-fanout.sh failed (exit $rc)"; exit 1; }
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
bad = []
seen = {r.get("method") for r in rows}
if seen != {"pipeline", "nopipe"}:
    bad.append(f"expected one pipeline and one nopipe run, got {sorted(map(str, seen))}")
for r in rows:
    m = r.get("method")
    if "error" in r:
        bad.append(f"{m}: {r['error']}")
        continue
    if r.get("check") != "ok" or r.get("done") != 4 or r.get("killed") != 0:
        bad.append(f"{m}: check={r.get('check')} done={r.get('done')} killed={r.get('killed')}")
    if r.get("versions") != 2 or len(r.get("completions_s", [])) != 2:
        bad.append(f"{m}: expected 2 versions (the second by THUB_Update), got {r.get('completions_s')}")
    partial = r.get("partial_rollouts", -1)
    if m == "pipeline" and partial < 1:
        bad.append("pipeline: no rollout read a partial source")
    if m == "nopipe" and partial != 0:
        bad.append(f"nopipe: {partial} rollouts read a partial source")
    print(f"check-fanout: {m}: {r.get('completion_s', 0):.3f} s, {partial} partial, data {r.get('check')}")
for b in bad:
    print("check-fanout: FAIL: " + b)
sys.exit(1 if bad else 0)
PY
