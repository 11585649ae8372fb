#!/usr/bin/env python3
"""Tables and plot of bench/netlab/run-elastic.sh's JSON lines.

  elastic_report.py --in docs/figures/elastic.jsonl [--doc docs/elastic.md]
                    [--section elastic-results] [--png docs/figures/elastic.png]

Without --doc the tables go to stdout. The plot needs matplotlib (Debian: python3-matplotlib);
without it the tables are still written and the plot is skipped with a message.
"""
import argparse
import json
import math
import re
import sys
from collections import defaultdict

MODE_NAMES = {
    "pipeline": "TensorHub (pipeline)",
    "relay": "relay: complete holders only (pipeline=false)",
    "p2p": "point-to-point from the trainer",
    "mpi": "Open MPI best tuned (re-launched per phase)",
}
MODE_ORDER = ["pipeline", "relay", "p2p", "mpi"]
COLORS = {"pipeline": "tab:red", "relay": "tab:green", "p2p": "tab:blue", "mpi": "tab:purple"}


def quantile(xs, q):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    pos = q * (len(xs) - 1)
    i = int(pos)
    return xs[i] + (pos - i) * (xs[i + 1] - xs[i]) if i + 1 < len(xs) else xs[-1]


def median(xs):
    return quantile(xs, 0.5)


def fmt(x, nd=2):
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    print(f"elastic_report: skipping a bad line: {line[:80]}", file=sys.stderr)
    return rows


def parse_schedule(spec):
    """[(target, steps, churn)] of 'N[xS][kC],...'."""
    out = []
    for ph in spec.split(","):
        m = re.fullmatch(r"(\d+)((?:[xk]\d+)*)", ph)
        if not m:
            continue
        steps = churn = None
        for what, v in re.findall(r"([xk])(\d+)", m.group(2)):
            if what == "x":
                steps = int(v)
            else:
                churn = int(v)
        out.append((int(m.group(1)), steps or 1, churn or 0))
    return out


def plan_of(spec):
    """step -> rollouts that hold the version at its end (N), from 'N[xS][kC],...'."""
    out, k = {}, 1
    for target, steps, _ in parse_schedule(spec):
        for _ in range(steps):
            out[k] = target
            k += 1
    return out


class Data:
    """The run's lines, keyed by (mode, repetition, step); mode "mpi" is Open MPI's best
    tuned variant of each job (phase)."""

    def __init__(self, rows):
        self.machine = next((r for r in rows if r.get("bench") == "machine"), {})
        self.end = next((r for r in rows if r.get("bench") == "end"), {})
        self.errors = [r for r in rows if r.get("bench") == "thub_elastic_error"]
        self.step_lines = defaultdict(list)  # mode -> step lines, every repetition
        self.roll = defaultdict(list)  # mode -> rollout lines, every repetition
        for r in rows:
            b = r.get("bench")
            if b == "thub_elastic_step":
                self.step_lines[r["mode"]].append(r)
            elif b == "thub_elastic":
                self.roll[r["mode"]].append(r)
        run = next((r for r in rows if r.get("bench") == "thub_elastic_run"), {})
        self.schedule = run.get("schedule", "")
        self.ideal = run.get("ideal_s", 0.0)
        self.bytes = run.get("bytes", 0)
        self.train_s = run.get("train_s", 0.0)
        self.nsteps = run.get("steps", 0)
        self.plan = plan_of(self.schedule)
        self.members = {}  # step -> rollouts at publish (the same in every mode and repetition)
        for ls in self.step_lines.values():
            for s in ls:
                self.members.setdefault(s["step"], s["members"])
        self.lat = defaultdict(list)  # (mode, rep, step) -> update latencies
        self.tstall = {}  # (mode, rep, step) -> trainer stall
        for mode, rs in self.roll.items():
            for r in rs:
                if r["event"] == "done":
                    self.lat[(mode, r.get("rep", 1), r["step"])].append(r["latency_s"])
        for mode, ls in self.step_lines.items():
            for s in ls:
                self.tstall[(mode, s.get("rep", 1), s["step"])] = s["trainer_stall_s"]
        self.mpi_phases = self._mpi(rows)

    def _mpi(self, rows):
        jobs = defaultdict(list)
        for r in rows:
            if r.get("bench") == "mpi_bcast" and "elastic_phase" in r and r.get("check") == "ok":
                jobs[(r.get("rep", 1), r["elastic_phase"])].append(r)
        first_step, k = {}, 1
        for i, (_, steps, _) in enumerate(parse_schedule(self.schedule), 1):
            first_step[i] = k
            k += steps
        phases = {}
        self.mpi_setup = {}  # (rep, step) -> setup_s of the job that starts at that step
        for (rep, ph), variants in sorted(jobs.items()):
            best = min(variants, key=lambda r: r["median_s"])
            phases[(rep, ph)] = {"best": best, "variants": variants}
            for i, ranks in enumerate(best.get("rank_times_s", [])):
                step = first_step.get(ph, 0) + i
                self.lat[("mpi", rep, step)] = ranks[1:]
                self.tstall[("mpi", rep, step)] = ranks[0]
                if i == 0 and best.get("setup_s") is not None:
                    self.mpi_setup[(rep, step)] = best["setup_s"]
        return phases

    def modes(self):
        present = {m for (m, _, _) in self.lat} | set(self.step_lines)
        return [m for m in MODE_ORDER if m in present]

    def reps(self, mode):
        return sorted({r for (m, r, _) in self.lat if m == mode})

    def latencies(self, mode, steps=None):
        """Every update latency of `mode` (in `steps`), all repetitions."""
        return [x for (m, _, k), v in self.lat.items() if m == mode and (steps is None or k in steps) for x in v]

    def step_stalls(self, mode, step):
        """The step's largest update latency, one per repetition."""
        return [max(v) for (m, _, k), v in self.lat.items() if m == mode and k == step and v]

    def trainer_stalls(self, mode, step):
        return [t for (m, _, k), t in self.tstall.items() if m == mode and k == step]


def summary(d, modes):
    """Median step stall per phase and mode, and the baselines' ratios to TensorHub's."""
    out = ["#### Summary: median step stall per phase (s), and the baselines over TensorHub (pipeline)", ""]
    base = [m for m in ("p2p", "mpi", "relay") if m in modes and m != "pipeline"]
    head = "| phase | N | steps |" + "".join(f" {MODE_NAMES[m]} |" for m in modes)
    sep = "|---:|---:|---:|" + "---:|" * len(modes)
    if "pipeline" in modes:
        head += "".join(f" {m} / pipeline |" for m in base)
        sep += "---:|" * len(base)
    out += [head, sep]
    first, k = [], 1
    per = {}
    for i, (n, steps, churn) in enumerate(parse_schedule(d.schedule), 1):
        ks = list(range(k, k + steps))
        k += steps
        med = {m: median([x for s in ks for x in d.step_stalls(m, s)]) for m in modes}
        per[i] = (n, med)
        row = f"| {i} | {n}{f' (k{churn})' if churn else ''} | {ks[0]}-{ks[-1]} |"
        row += "".join(f" {fmt(med[m])} |" for m in modes)
        if "pipeline" in modes:
            row += "".join(f" {fmt(med[m] / med['pipeline'] if med['pipeline'] else None)}x |" for m in base)
        out.append(row)
    out.append("")
    if "pipeline" in modes and per:
        ns = {n for n, _ in per.values()}
        lo = min(per.values(), key=lambda p: p[0])
        hi = max(per.values(), key=lambda p: p[0])
        if len(ns) > 1:
            grow = "; ".join(f"{MODE_NAMES[m]} {fmt(hi[1][m] / lo[1][m] if lo[1][m] else None)}x"
                             for m in modes if not math.isnan(hi[1][m]) and not math.isnan(lo[1][m]))
            out.append(f"From N = {lo[0]} to N = {hi[0]} rollouts ({hi[0] / lo[0]:.0f}x), the median step stall grows: "
                       f"{grow}. Open MPI's column is the broadcast alone; each phase's new job adds its start-up "
                       "(setup_s in the Open MPI table) to the phase's first step.")
            out.append("")
    return out


def tables(d):
    out = []
    m = d.machine
    modes = d.modes()
    out.append(
        f"Machine: {m.get('cpu', '?')}, {m.get('cores', '?')} cores, {m.get('memory', '?')}, {m.get('kernel', '?')}, "
        f"UCX {m.get('ucx', '?')}; {m.get('date', '?')}, commit {m.get('commit', '?')}, load average "
        f"{m.get('loadavg_start', '?')} at the start, {d.end.get('loadavg_end', '?')} at the end, "
        f"{d.end.get('seconds', '?')} s in all.")
    busy = [s["machine_busy"] for ls in d.step_lines.values() for s in ls]
    loads = [s["loadavg_1m"] for ls in d.step_lines.values() for s in ls]
    if busy:
        out[-1] += (f" The machine's CPUs were {100 * median(busy):.0f} % busy (median over the steps, everyone's work; "
                    f"1-minute load average {min(loads):.1f}-{max(loads):.1f} during the steps).")
    out.append("")
    out.append(f"Command: `{m.get('command', 'bench/netlab/run-elastic.sh')}`")
    out.append("")
    out.append(
        f"Schedule `{d.schedule}` ({d.nsteps} steps, {max((len(d.reps(x)) for x in modes), default=0)} "
        f"repetition(s) of each mode), S = {d.bytes / 2**20:.0f} MiB, links {m.get('rate', '?')}, "
        f"ideal S/R = {d.ideal:.3f} s, trainer compute per step {d.train_s:.3f} s. Update latency = from the trainer's "
        "THUB_Publish to the rollout holding the version (Open MPI: each rank's time in MPI_Bcast). Step stall = "
        "the step's largest update latency (every rollout waits for the last, as in a synchronous RL step). "
        "Trainer stall = time in THUB_Publish + THUB_Unpublish (Open MPI: the root's time in MPI_Bcast).")
    out.append("")
    out.extend(summary(d, modes))
    # Per membership size.
    out.append("#### Per membership size (rollouts holding each version), all steps of that size")
    out.append("")
    out.append("| N | mode | steps (x reps) | updates | median (s) | p90 (s) | max (s) | median / ideal | step stall, median (s) "
               "| trainer stall, median (ms) | killed | rollout CPU s/GB |")
    out.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    sizes = sorted(set(d.plan.values()))
    for n in sizes:
        steps = [k for k, t in d.plan.items() if t == n]
        for mode in modes:
            lat = d.latencies(mode, steps)
            if not lat:
                continue
            stall = [x for k in steps for x in d.step_stalls(mode, k)]
            tst = [x for k in steps for x in d.trainer_stalls(mode, k)]
            killed = sum(s["killed"] for s in d.step_lines.get(mode, []) if s["step"] in steps)
            cpu = [r["cpu_s"] / (d.bytes / 1e9) for r in d.roll.get(mode, [])
                   if r["event"] == "done" and r["step"] in steps and "cpu_s" in r]
            out.append(f"| {n} | {MODE_NAMES[mode]} | {len(stall)} | {len(lat)} | {fmt(median(lat))} | "
                       f"{fmt(quantile(lat, 0.9))} | {fmt(max(lat))} | "
                       f"{fmt(median(lat) / d.ideal if d.ideal else None)} | {fmt(median(stall))} | "
                       f"{fmt(1e3 * median(tst), 1) if tst else '–'} | {killed if mode != 'mpi' else '–'} | "
                       f"{fmt(median(cpu)) if cpu else '–'} |")
    out.append("")
    # Per step.
    out.append("#### Per step: update latency median / p90 / max (s), trainer stall (ms, median over repetitions)")
    out.append("")
    head = "| step | rollouts holding it (joined, killed) |"
    sep = "|---:|---|"
    for mode in modes:
        head += f" {MODE_NAMES[mode]} | stall |"
        sep += "---|---:|"
    out.append(head)
    out.append(sep)
    ref = {}
    for ls in d.step_lines.values():
        for st in ls:
            ref.setdefault(st["step"], st)
    for k in range(1, d.nsteps + 1):
        st = ref.get(k)
        who = f"{st['done']} (+{st['joined']}, -{st['killed']})" if st else str(d.plan.get(k, "–"))
        row = f"| {k} | {who} |"
        for mode in modes:
            lat = d.latencies(mode, [k])
            t = d.trainer_stalls(mode, k)
            cell = f"{fmt(median(lat))} / {fmt(quantile(lat, 0.9))} / {fmt(max(lat))}" if lat else "–"
            setups = [v for (r, kk), v in d.mpi_setup.items() if kk == k]
            if mode == "mpi" and lat and setups:
                cell += f" (new job: + {fmt(median(setups))} setup)"
            row += f" {cell} | {fmt(1e3 * median(t), 1) if t else '–'} |"
        out.append(row)
    out.append("")
    # Open MPI's re-creation.
    if d.mpi_phases:
        out.append("#### Open MPI: a new job per membership (its tuned variants, median broadcast in s)")
        out.append("")
        names = sorted({v["method"] for p in d.mpi_phases.values() for v in p["variants"]})
        out.append("| rep | phase | N | " + " | ".join(n.replace("mpi_tuned_", "") for n in names) +
                   " | best | setup_s: mpirun -> MPI_Init done (s) | mpirun wall - broadcasts (s) |")
        out.append("|---:|---:|---:|" + "---:|" * len(names) + "---|---:|---:|")
        for (rep, ph), p in sorted(d.mpi_phases.items()):
            b = p["best"]
            by = {v["method"]: v for v in p["variants"]}
            cells = " | ".join(fmt(by[n]["median_s"]) if n in by else "–" for n in names)
            over = b.get("wall_s", 0) - sum(b.get("times_s", []))
            out.append(f"| {rep} | {ph} | {b['rollouts']} | {cells} | {b['method'].replace('mpi_tuned_', '')} | "
                       f"{fmt(b.get('setup_s'))} | {fmt(over)} |")
        out.append("")
    # Checks.
    out.append("#### Checks")
    out.append("")
    out.append("| mode | updates done | right version and bytes | killed mid-transfer (held at death) | kills that "
               "came too late | failed | lost | rollouts that lost a source | retention offloads | joins: start -> "
               "READY, median (s) |")
    out.append("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for mode in [m for m in MODE_ORDER if m in d.roll]:
        rs = d.roll[mode]
        done = [r for r in rs if r["event"] == "done"]
        ok = sum(r.get("check") == "ok" and r.get("got") == r["version"] for r in done)
        killed = [r for r in rs if r["event"] == "killed"]
        held = [r["held_fraction"] for r in killed if "held_fraction" in r]
        hs = f"{len(killed)} ({min(held):.2f}-{max(held):.2f})" if held else str(len(killed))
        late = sum(bool(r.get("kill_missed")) for r in done)
        failed = sum(r["event"] == "failed" for r in rs)
        lost = sum(r["event"] == "lost" for r in rs)
        sf = sum(r.get("source_failures", 0) > 0 for r in done)
        offl = sum(s.get("offloads", 0) for s in d.step_lines.get(mode, []))
        joins = [r["join_s"] for r in rs if r.get("new")]
        out.append(f"| {MODE_NAMES[mode]} | {len(done)} | {ok} | {hs} | {late} | {failed} | {lost} | {sf} | {offl} | "
                   f"{fmt(median(joins))} |")
    for e in d.errors:
        out.append("")
        out.append(f"Run failed: {json.dumps(e)}")
    out.append("")
    return "\n".join(out)


def plot(d, png):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("elastic_report: matplotlib not installed (python3-matplotlib): no plot", file=sys.stderr)
        return
    modes = d.modes()
    fig, ax = plt.subplots(2, 2, figsize=(13, 9))
    ks = list(range(1, d.nsteps + 1))
    # (a) CDF over every (step, rollout) update.
    a = ax[0][0]
    for mode in modes:
        xs = sorted(d.latencies(mode))
        if xs:
            a.step(xs, [(i + 1) / len(xs) for i in range(len(xs))], where="post", color=COLORS[mode],
                   label=f"{MODE_NAMES[mode]} (n={len(xs)})")
    if d.ideal:
        a.axvline(d.ideal, color="gray", ls=":", label="ideal S/R")
    a.set_xlabel("update latency per rollout and step (s)")
    a.set_ylabel("CDF")
    a.set_title("(a) weight-update latency, all steps")
    a.legend(fontsize=8, loc="lower right")
    a.grid(alpha=0.3)
    # (b) per-step stall over the run, membership shaded (the paper's Figure 11a).
    b = ax[0][1]
    b2 = b.twinx()
    b2.bar(ks, [d.members.get(k, 0) for k in ks], color="0.85", width=0.9)
    b2.bar(ks, [d.plan.get(k, 0) for k in ks], color="0.7", width=0.9)
    b2.set_ylabel("rollouts: holding the version (dark gray), at publish (light)")
    b.set_zorder(b2.get_zorder() + 1)
    b.patch.set_visible(False)
    for mode in modes:
        st = [d.step_stalls(mode, k) for k in ks]
        ys = [median(v) if v else float("nan") for v in st]
        lo = [y - min(v) if v else 0 for y, v in zip(ys, st)]
        hi = [max(v) - y if v else 0 for y, v in zip(ys, st)]
        b.errorbar(ks, ys, yerr=[lo, hi], fmt="o-", color=COLORS[mode], label=MODE_NAMES[mode], capsize=2)
        if mode == "mpi":  # a new job per phase: its first broadcast waits for mpirun + MPI_Init too
            firsts = sorted({k for (_, k) in d.mpi_setup})
            b.plot(firsts, [ys[k - 1] + median([v for (_, kk), v in d.mpi_setup.items() if kk == k]) for k in firsts],
                   "o", mfc="none", color=COLORS[mode], label="Open MPI + its job start (mpirun -> MPI_Init)")
    if d.ideal:
        b.axhline(d.ideal, color="gray", ls=":")
    b.set_xlabel("training step")
    b.set_ylabel("step stall: slowest update (s)")
    b.set_title("(b) per-step stall as rollouts join and leave")
    b.legend(fontsize=8, loc="upper left")
    b.grid(alpha=0.3)
    # (c) step stall against the number of rollouts; (d) the trainer's stall.
    c, e = ax[1][0], ax[1][1]
    for mode in modes:
        pts = [(d.plan[k], x) for k in ks for x in d.step_stalls(mode, k)]
        tpts = [(d.plan[k], max(x, 1e-4)) for k in ks for x in d.trainer_stalls(mode, k)]
        if pts:
            c.scatter([p[0] for p in pts], [p[1] for p in pts], color=COLORS[mode], label=MODE_NAMES[mode], alpha=0.7)
            ns = sorted({p[0] for p in pts})
            c.plot(ns, [median([p[1] for p in pts if p[0] == n]) for n in ns], color=COLORS[mode], alpha=0.6)
        if tpts:
            e.scatter([p[0] for p in tpts], [p[1] for p in tpts], color=COLORS[mode], label=MODE_NAMES[mode],
                      alpha=0.7)
    if d.ideal:
        c.axhline(d.ideal, color="gray", ls=":", label="ideal S/R")
    c.set_xlabel("rollouts holding the version (N)")
    c.set_ylabel("step stall: slowest update (s)")
    c.set_title("(c) per-step stall vs rollouts (line: median)")
    c.legend(fontsize=8)
    c.grid(alpha=0.3)
    e.set_yscale("log")
    e.set_xlabel("rollouts holding the version (N)")
    e.set_ylabel("trainer stall per step (s, log)")
    e.set_title("(d) trainer stall: time in TensorHub calls (MPI: root in MPI_Bcast)")
    e.legend(fontsize=8)
    e.grid(alpha=0.3, which="both")
    m = d.machine
    fig.suptitle(f"Elastic rollouts, schedule {d.schedule}, S = {d.bytes / 2**20:.0f} MiB, links {m.get('rate', '?')}, "
                 f"{m.get('date', '')} ({m.get('cores', '?')} shared cores, load {m.get('loadavg_start', '?')} at the start, "
                 f"{d.end.get('loadavg_end', '?')} at the end)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    print(f"elastic_report: wrote {png}", file=sys.stderr)


def write_doc(path, section, text):
    begin, end = f"<!-- BEGIN {section} -->", f"<!-- END {section} -->"
    try:
        doc = open(path).read()
    except FileNotFoundError:
        doc = ""
    if begin in doc and end in doc:
        doc = doc[:doc.index(begin)] + begin + "\n" + text + end + doc[doc.index(end) + len(end):]
    else:
        doc += f"\n{begin}\n{text}{end}\n"
    open(path, "w").write(doc)
    print(f"elastic_report: wrote section {section} of {path}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--in", dest="inp", required=True)
    ap.add_argument("--doc")
    ap.add_argument("--section", default="elastic-results")
    ap.add_argument("--png")
    a = ap.parse_args()
    d = Data(load(a.inp))
    if not d.lat:
        print("elastic_report: no results in " + a.inp, file=sys.stderr)
        return 1
    text = tables(d)
    if a.doc:
        write_doc(a.doc, a.section, text)
    else:
        print(text)
    if a.png:
        plot(d, a.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
