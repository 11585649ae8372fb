#!/usr/bin/env bash
# check-chain.sh BUILD -- the raw ucp_get chain baseline (thub_chain_get), small, as a test
# (CTest NetlabChainGet): 3 hosts of the cluster in a box at 1 Gbit/s, 16 MiB. Passes when
# rank 0 reports every rollout done with the right bytes. Exit 77 (skip) without root.
set -euo pipefail
HERE=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
BUILD=${1:?usage: check-chain.sh BUILD}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
rc=0
"$HERE/run-fanout.sh" --ns 2 --bytes 16M --reps 1 --no-mpi --methods ucx_chain \
  --build "$BUILD" --out "$out" --no-report || rc=$?
((rc == 77)) && exit 77
((rc == 0)) || { echo "check-chain: run-fanout.sh failed (exit $rc)"; exit 1; }
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
bad = []
if len(rows) != 1 or rows[0].get("bench") != "ucx_chain":
    bad.append(f"expected one ucx_chain line, got {len(rows)}")
for r in rows:
    if "error" in r:
        bad.append(r["error"])
    elif r.get("check") != "ok" or len(r.get("rollouts_detail", [])) != 2:
        bad.append(f"check={r.get('check')} rollouts={len(r.get('rollouts_detail', []))}")
    elif not 0 < r["trainer_stall_s"] <= r["completion_s"]:
        bad.append(f"trainer stall {r['trainer_stall_s']} not within the completion {r['completion_s']}")
    else:
        print(f"check-chain: completion {r['completion_s']:.3f} s, trainer stall {r['trainer_stall_s']:.3f} s, data ok")
for b in bad:
    print("check-chain: FAIL: " + b)
sys.exit(1 if bad else 0)
PY
