#!/usr/bin/env bash
# check-crossdc.sh BUILD -- the cross-datacenter benchmark, small, as a test (CTest
# NetlabCrossDcSeeding): a trainer and a rollout in datacenter a, four rollouts in b behind a
# WAN link of 1/5 the rate, 32 MiB, naive (every rollout reads the trainer), with seeding, and
# with b's seeder killed at half the shard. Passes when every rollout has the right bytes
# (verify mode and every byte compared), the WAN link's kernel counters show the shard
# crossing at most 1.1 times with seeding, at most 2 times with the seeder killed (replaced:
# a reader of b reports its source failed and goes on across), and at least 3.5 times naive
# (four readers in b: a test that the counters see what crossed). Exit 77 (skip) without root.
set -euo pipefail
HERE=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
BUILD=${1:?usage: check-crossdc.sh BUILD}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
rc=0
"$HERE/run-crossdc.sh" --bytes 32M --reps 1 --methods "naive seeding seeding_kill" --build "$BUILD" --out "$out" || rc=$?
((rc == 77)) && exit 77
((rc == 0)) || { echo "check-crossdc: run-crossdc.sh failed (exit $rc)"; exit 1; }
python3 - "$out" <<'PY'
import json, sys
rows = {r["method"]: r for r in (json.loads(l) for l in open(sys.argv[1]) if l.strip())}
bad = []
for m, lo, hi in (("naive", 3.5, 99), ("seeding", 0, 1.1), ("seeding_kill", 0, 2.0)):
    r = rows.get(m)
    if r is None or "error" in r:
        bad.append(f"{m}: no result ({r and r.get('error')})")
        continue
    w = r["wan_per_version"]
    print(f"check-crossdc: {m}: WAN a->b {w:.3f} x the shard, data {r['check']}")
    if r["check"] != "ok":
        bad.append(f"{m}: data {r['check']}")
    if m == "seeding_kill" and (r.get("killed") != 1 or r.get("source_failures_b", 0) < 1):
        bad.append(f"{m}: killed {r.get('killed')}, source failures in b {r.get('source_failures_b')}: the seeder was not replaced")
    if not lo <= w <= hi:
        bad.append(f"{m}: WAN a->b {w:.3f} x the shard, expected {lo}..{hi}")
for b in bad:
    print("check-crossdc: FAIL: " + b)
sys.exit(1 if bad else 0)
PY
