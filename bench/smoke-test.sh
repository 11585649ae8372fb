#!/usr/bin/env bash
# smoke-test.sh BUILD -- CTest BenchSuiteSmoke (label bench): bench/run.sh --smoke at tiny
# sizes into a temporary folder, then checks that its JSON lines are well formed and that
# every replicate row carries the fields the suite exists for: TensorHub's bandwidth, the
# ucx_perftest roofline, their ratio, and CPU s/GB on both sides. It asserts nothing about
# speed (speed is reported in bench/, as medians and ratios), only that the instrument
# measures. Exit 77 (skip) when ucx_perftest is missing.
set -euo pipefail
HERE=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
BUILD=${1:?usage: smoke-test.sh BUILD}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
rc=0
"$HERE/run.sh" --smoke --build "$BUILD" --out "$out" --no-plots >"$out/log" 2>&1 || rc=$?
((rc == 77)) && { tail -1 "$out/log"; exit 77; }
if ((rc != 0)); then
  tail -n 30 "$out/log"
  echo "smoke-test: bench/run.sh --smoke failed (exit $rc)"
  exit 1
fi
python3 - "$out/transfer-smoke.jsonl" "$out/transfer-smoke.md" <<'PY'
import json, math, sys
path, md = sys.argv[1], sys.argv[2]
bad, rows = [], []
for n, line in enumerate(open(path), 1):
    try:
        rows.append(json.loads(line))
    except json.JSONDecodeError as e:
        bad.append(f"line {n} is not JSON: {e}")
kinds = [r.get("bench") for r in rows]
for want in ("machine", "replicate", "publish", "end"):
    if want not in kinds:
        bad.append(f"no '{want}' line")
machine = next((r for r in rows if r.get("bench") == "machine"), {})
for k in ("cpu", "cores", "ucx", "kernel", "date", "command"):
    if not machine.get(k):
        bad.append(f"machine line without '{k}'")
def positive(r, k):
    v = r.get(k)
    return isinstance(v, (int, float)) and math.isfinite(v) and v > 0
need = ["thub_gbps", "perftest_gbps", "memcpy_gbps", "ratio_thub_perftest",
        "thub_source_cpu_s_per_gb", "thub_reader_cpu_s_per_gb", "perftest_reader_cpu_s_per_gb"]
reps = [r for r in rows if r.get("bench") == "replicate"]
for r in reps:
    name = f"{r.get('transport')} {r.get('layout')} {r.get('bytes')}"
    if "error" in r:
        bad.append(f"{name}: {r['error']}")
        continue
    for k in need:
        if not positive(r, k):
            bad.append(f"{name}: {k} = {r.get(k)!r}")
    if "perftest_source_cpu_s_per_gb" not in r:
        bad.append(f"{name}: no perftest_source_cpu_s_per_gb")
    if r.get("verified") != "ok":
        bad.append(f"{name}: bytes not verified ({r.get('verified')})")
    if r["bytes"] > r.get("chunk", 0) and not positive(r, "ratio_thub_perftest_chunk"):
        bad.append(f"{name}: ratio_thub_perftest_chunk = {r.get('ratio_thub_perftest_chunk')!r}")
if {r.get("transport") for r in reps} != {"shm", "tcp"}:
    bad.append(f"replicate rows for {sorted({str(r.get('transport')) for r in reps})}, expected shm and tcp")
pubs = [r for r in rows if r.get("bench") == "publish"]
if not any(r.get("verify") for r in pubs) or not any(not r.get("verify") for r in pubs):
    bad.append("publish rows without both verify settings")
if not any(isinstance(r.get("idle_cpu_core_fraction"), float) for r in pubs):
    bad.append("no idle CPU row")
text = open(md).read()
for want in ("ucx_perftest", "Command: `bench/run.sh", "thub / perftest", "Issue 11's targets"):
    if want not in text:
        bad.append(f"the markdown has no '{want}'")
for b in bad:
    print("smoke-test: FAIL: " + b)
print(f"smoke-test: {len(reps)} replicate rows, {len(pubs)} publish rows, {'FAIL' if bad else 'ok'}")
sys.exit(1 if bad else 0)
PY
