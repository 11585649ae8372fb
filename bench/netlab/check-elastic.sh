#!/usr/bin/env bash
# check-elastic.sh BUILD -- the elastic benchmark, small, as a test (CTest NetlabElastic):
# run-elastic.sh --smoke (8 MiB, 2 steps: 3 rollouts join, then one spot rollout is SIGKILLed
# mid-transfer while a fresh one joins; modes pipeline and p2p; verify=true everywhere).
# Passes when both modes ran both steps, every rollout that reported success holds the
# version of its step with the right bytes (the library's XXH3 per block and the rollout's
# own check of the content), none failed or vanished unexpectedly, and the spot rollout left.
# Exit 77 (skip) without root or network namespaces.
set -euo pipefail
HERE=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
BUILD=${1:?usage: check-elastic.sh BUILD}
if [[ $(id -u) -ne 0 ]] || ! command -v ip >/dev/null 2>&1 || ! ip netns list >/dev/null 2>&1; then
  echo "check-elastic: SKIP: needs root and network namespaces (ip netns)"
  exit 77
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
rc=0
"$HERE/run-elastic.sh" --smoke --build "$BUILD" --out "$out" || rc=$?
((rc == 77)) && exit 77
((rc == 0)) || echo "check-elastic: run-elastic.sh --smoke failed (exit $rc)"
python3 - "$out" "$rc" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
bad = [] if sys.argv[2] == "0" else [f"run-elastic.sh exit {sys.argv[2]}"]
for r in rows:
    if r.get("bench") == "thub_elastic_error":
        bad.append(f"{r.get('mode')}: {r.get('error')} (logs {r.get('logs')})")
for mode in ("pipeline", "p2p"):
    steps = {r["step"]: r for r in rows if r.get("bench") == "thub_elastic_step" and r["mode"] == mode}
    roll = [r for r in rows if r.get("bench") == "thub_elastic" and r["mode"] == mode]
    if sorted(steps) != [1, 2]:
        bad.append(f"{mode}: steps {sorted(steps)}, expected [1, 2]")
        continue
    done = [r for r in roll if r["event"] == "done"]
    for r in done:
        if r.get("got") != r["version"] or r.get("check") != "ok":
            bad.append(f"{mode}: rollout {r['rollout']} step {r['step']}: got {r.get('got')} for version "
                       f"{r['version']}, content {r.get('check')}")
    for r in roll:
        if r["event"] in ("failed", "lost"):
            bad.append(f"{mode}: rollout {r['rollout']} step {r['step']}: {r['event']} {r.get('status', '')}")
    if steps[1]["done"] != 3 or steps[2]["done"] != 3 or steps[2]["joined"] != 1:
        bad.append(f"{mode}: done {steps[1]['done']}, {steps[2]['done']} (expected 3, 3), joined {steps[2]['joined']}")
    killed = [r for r in roll if r["event"] == "killed" or r.get("kill_missed")]
    if len(killed) != 1:
        bad.append(f"{mode}: {len(killed)} spot rollouts preempted, expected 1")
    late = [r for r in roll if r.get("kill_missed")]
    print(f"check-elastic: {mode}: {len(done)} updates, all of the right version; max latency "
          f"{max(r['latency_s'] for r in done):.3f} s; preempted {len(killed)}"
          + (" (after its transfer: the kill mark came too late)" if late else " mid-transfer"))
for b in bad:
    print("check-elastic: FAIL: " + b)
sys.exit(1 if bad else 0)
PY
