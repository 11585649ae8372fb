#!/usr/bin/env python3
"""crossdc_report.py -- the JSON lines and the table of bench/netlab/run-crossdc.sh --steps.

  crossdc_report.py run LOGDIR METHOD REP A B WAN_AB WAN_BA WAN_BPS
      one JSON line (bench crossdc_steps) from the outputs of one run's processes in LOGDIR
      (trainer.out, rollout1.out ...): what crossed the WAN link a->b over versions x shard,
      and every update call of every rollout (time after the trainer's t0, seconds inside
      THUB_Update, the version it returned, its status).
  crossdc_report.py table --in JSONL [--png FILE]
      per method: WAN bytes per version, the stall of the rollouts of b (the time inside
      THUB_Update, summed per rollout over the run; and per call), versions they reached;
      with --png, the CDF of the per-call stall in b (the paper's Figure 12).
"""
import argparse
import glob
import json
import os
import statistics
import sys


def first_json(path, pred=lambda j: True):
    for line in open(path):
        if line.startswith("{"):
            j = json.loads(line)
            if pred(j):
                return j
    raise SystemExit("crossdc_report: no result in " + path)


def cmd_run(a):
    tr_out = os.path.join(a.logdir, "trainer.out")
    t0 = first_json(tr_out, lambda j: "t0" in j)["t0"]
    summary = first_json(tr_out, lambda j: "versions" in j)
    n = a.a + a.b
    ro = [first_json(os.path.join(a.logdir, "rollout%d.out" % i)) for i in range(1, n + 1)]

    def calls(r):  # [at - t0, took, got, status]
        return [[round(c[0] - t0, 4), round(c[1], 4), c[2], c[3]] for c in r["calls"]]

    out = {"bench": "crossdc_steps", "method": a.method, "rep": a.rep, "dc_a_rollouts": a.a, "dc_b_rollouts": a.b,
           "bytes": summary["bytes"], "versions": summary["versions"], "period_s": summary["period_s"],
           "wan_bps": a.wan_bps, "wan_bytes_ab": a.wan_ab, "wan_bytes_ba": a.wan_ba,
           "wan_per_version": round(a.wan_ab / (summary["bytes"] * summary["versions"]), 3),
           "trainer_stall_s": summary["trainer_stall_s"], "trainer_stall_max_s": summary["trainer_stall_max_s"],
           "bad_words": sum(r["bad_words"] for r in ro),
           # the versions some rollout of b updated to: what b received, whatever it skipped
           "b_versions": sorted({c[2] for r in ro[a.a:] for c in r["calls"] if c[3] == 0}),
           "held_a": [r["held"] for r in ro[:a.a]], "held_b": [r["held"] for r in ro[a.a:]],
           "calls_a": [calls(r) for r in ro[:a.a]], "calls_b": [calls(r) for r in ro[a.a:]],
           # the library's own counts (THUB_Model_stat) per rollout of b
           "lib_wan_bytes_b": [r.get("wan_bytes") for r in ro[a.a:]],
           "offload_seeds_b": [r.get("offload_seeds") for r in ro[a.a:]]}
    out["wan_per_b_version"] = round(a.wan_ab / (summary["bytes"] * max(1, len(out["b_versions"]))), 3)
    print(json.dumps(out))
    stalls = ",".join("%.2f" % sum(c[1] for c in r) for r in out["calls_b"])
    print("  [%s rep %d] WAN a->b %.3f x the shard per version published, %.3f per version b received; stall of b's rollouts %s s; they hold %s; "
          "bad words %d" % (a.method, a.rep, out["wan_per_version"], out["wan_per_b_version"], stalls, out["held_b"], out["bad_words"]),
          file=sys.stderr)


def cmd_table(a):
    rows = [json.loads(l) for l in open(a.inp) if l.strip()]
    methods = list(dict.fromkeys(r["method"] for r in rows))
    print("| method | runs | WAN a->b / shard, per version published (median) | per version b received (median) "
          "| stall per rollout of b, summed (median, s) "
          "| per update call in b: median / p90 / max (s) | updates to a newer version in b (median per rollout) "
          "| trainer stall, max (s) | after its first version: stall per rollout of b, summed (mean / max, s) "
          "| after its first version: longest update call in b (s) "
          "| after its first version: stall per update to a newer version in b (mean, s) "
          "| after its first version: share of the time inside THUB_Update (mean) | bytes |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    bad = False
    cdf = {}
    for m in methods:
        ok = [r for r in rows if r["method"] == m and "error" not in r]
        if not ok:
            print("| %s | 0 | failed | | | | | | | | | | |" % m)
            bad = True
            continue
        wan = statistics.median(r["wan_per_version"] for r in ok)
        wan_b = statistics.median(r["wan_per_b_version"] for r in ok)
        per_rollout = [sum(c[1] for c in cs) for r in ok for cs in r["calls_b"]]
        per_call = sorted(c[1] for r in ok for cs in r["calls_b"] for c in cs)
        moved = [sum(1 for c in cs if c[3] == 0) for r in ok for cs in r["calls_b"]]
        cdf[m] = per_call
        q = lambda p: per_call[min(len(per_call) - 1, int(p * len(per_call)))]
        words = sum(r["bad_words"] for r in ok)
        bad = bad or words > 0
        # Warm: the calls after a rollout's first version (before it, it has nothing to serve
        # with, whatever the method: its first read is paced by the WAN).
        # Share: of the time from the end of its first update to the end of its last call, the
        # part a rollout spent inside THUB_Update (a GPU's lost time; bounded by 1 where the
        # updates cannot keep up with the trainer, as naive's).
        warm, moves, share = [], [], []
        for r in ok:
            for cs in r["calls_b"]:
                first = next((i for i, c in enumerate(cs) if c[3] == 0), None)
                if first is not None:
                    warm.append([c[1] for c in cs[first + 1:]])
                    moves += [c[1] for c in cs[first + 1:] if c[3] == 0]
                    span = (cs[-1][0] + cs[-1][1]) - (cs[first][0] + cs[first][1])
                    if span > 0:
                        share.append(sum(c[1] for c in cs[first + 1:]) / span)
        warm_sums = [sum(w) for w in warm] or [0.0]
        warm_max = max((x for w in warm for x in w), default=0.0)
        print("| %s | %d | %.3f | %.3f | %.2f | %.3f / %.3f / %.2f | %g | %.2f | %.2f / %.2f | %.2f | %.2f | %.3f | %s |" % (
            m, len(ok), wan, wan_b, statistics.median(per_rollout), q(0.5), q(0.9), per_call[-1],
            statistics.median(moved), max(r["trainer_stall_max_s"] for r in ok), statistics.mean(warm_sums),
            max(warm_sums), warm_max, statistics.mean(moves) if moves else 0.0,
            statistics.mean(share) if share else 0.0, "ok" if words == 0 else "BAD"))
    if a.png and cdf:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("crossdc_report: no matplotlib: no plot", file=sys.stderr)
        else:
            fig, ax = plt.subplots(figsize=(6, 4))
            for m, xs in cdf.items():
                ax.step(xs, [(i + 1) / len(xs) for i in range(len(xs))], where="post", label=m)
            ax.set_xscale("symlog", linthresh=1e-3)
            ax.set_xlabel("time inside THUB_Update, rollouts of datacenter b (s)")
            ax.set_ylabel("fraction of update calls")
            ax.set_title("rollout stall in datacenter b (run-crossdc.sh --steps)")
            ax.legend()
            ax.grid(True, alpha=0.3)
            fig.tight_layout()
            fig.savefig(a.png, dpi=110)
    return 1 if bad else 0


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("logdir")
    r.add_argument("method")
    r.add_argument("rep", type=int)
    r.add_argument("a", type=int)
    r.add_argument("b", type=int)
    r.add_argument("wan_ab", type=int)
    r.add_argument("wan_ba", type=int)
    r.add_argument("wan_bps", type=int)
    t = sub.add_parser("table")
    t.add_argument("--in", dest="inp", required=True)
    t.add_argument("--png")
    a = p.parse_args()
    if a.cmd == "run":
        cmd_run(a)
        return 0
    return cmd_table(a)


if __name__ == "__main__":
    sys.exit(main())
