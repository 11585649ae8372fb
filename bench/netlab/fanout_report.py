#!/usr/bin/env python3
"""Tables and plots for bench/netlab/run-fanout.sh and run-failure.sh.

  fanout_report.py fanout  --in fanout.jsonl  --rate 1gbit --doc docs/pipeline.md --png fanout.png
  fanout_report.py failure --in failure.jsonl --doc docs/pipeline.md --png failure.png
  fanout_report.py sweep   --in fanout-sweep.jsonl --doc docs/pipeline.md --section rate-sweep --png sweep.png

Medians over the repetitions of each configuration; the markdown goes into the document between
<!-- BEGIN <name> --> and <!-- END <name> --> (appended when the markers are missing).
"""
import argparse
import json
import re
import statistics
import sys

METHODS = [  # (key, label in tables and plots)
    ("pipeline", "(a) TensorHub, pipeline"),
    ("nopipe", "(b) TensorHub, pipeline=false"),
    ("p2p", "(c) point-to-point (max_readers=N)"),
    ("mpi_bcast", "(d) Open MPI MPI_Bcast"),
    ("mpi_tuned", "(f) Open MPI best tuned"),
    ("ucx_chain", "(g) static chain of raw ucp_get"),
]
THUB = ("pipeline", "nopipe", "p2p", "tuned")


def rate_bps(text):
    m = re.fullmatch(r"([0-9.]+)(bit|kbit|mbit|gbit|tbit)?", text.lower())
    if not m:
        sys.exit(f"bad rate {text!r}")
    mult = {"bit": 1, None: 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12}[m.group(2)]
    return float(m.group(1)) * mult


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip().startswith("{")]


def put_section(doc, name, text):
    begin, end = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
    try:
        with open(doc) as f:
            body = f.read()
    except FileNotFoundError:
        body = ""
    block = f"{begin}\n{text.rstrip()}\n{end}"
    if begin in body and end in body:
        body = body[: body.index(begin)] + block + body[body.index(end) + len(end):]
    else:
        body = body.rstrip() + ("\n\n" if body else "") + block + "\n"
    with open(doc, "w") as f:
        f.write(body)


def med(v):
    return statistics.median(v) if v else None


def fmt(x, spec=".2f", none="–"):
    return none if x is None else format(x, spec)


def fanout(args):
    rows = load(args.infile)
    bps = rate_bps(args.rate)
    samples, stalls, tstalls, pubs, partial, nbytes, errors = {}, {}, {}, {}, {}, {}, {}
    firsts, laters = {}, {}  # per run: its first version (iteration) and the ones after it
    for r in rows:
        if r.get("bench") == "mpi_bcast":
            key = (r.get("method", "mpi_bcast"), r["ranks"] - 1)
            vals = r.get("times_s", [])
            if "trainer_stall_s" in r:
                tstalls.setdefault(key, []).append(r["trainer_stall_s"])
        else:
            key = (r["method"], r["rollouts"])
            # Every version of the run (the first included), as MPI's every timed iteration.
            vals = r.get("completions_s", [r["completion_s"]]) if "completion_s" in r else []
            if vals:
                tstalls.setdefault(key, []).append(r["trainer_stall_s"])
                if "rollout_stall_s" in r:
                    stalls.setdefault(key, []).append(r["rollout_stall_s"])
                if "publish_s" in r:
                    pubs.setdefault(key, []).append(r["publish_s"])
                if "partial_rollouts" in r:
                    partial.setdefault(key, []).append(r["partial_rollouts"])
        if "error" in r or r.get("check", "ok") not in ("ok",):
            errors[key] = errors.get(key, 0) + 1
        if "bytes" in r:
            nbytes[key[1]] = r["bytes"]
        samples.setdefault(key, []).extend(vals)
        if len(vals) > 1:
            firsts.setdefault(key, []).append(vals[0])
            laters.setdefault(key, []).extend(vals[1:])
    ns = sorted({k[1] for k in samples})
    size = max(nbytes.values()) if nbytes else 0
    ideal = size * 8 / bps
    # Open MPI's best tuned variant per N (chain/pipeline x segment sizes): the lowest median.
    tuned = {}
    for (m, n), v in samples.items():
        if m.startswith("mpi_tuned_") and v and (n not in tuned or med(v) < med(samples[tuned[n]])):
            tuned[n] = (m, n)
    for n, key in tuned.items():
        samples[("mpi_tuned", n)] = samples[key]
        for d in (firsts, laters):
            if key in d:
                d[("mpi_tuned", n)] = d[key]
        if key in tstalls:
            tstalls[("mpi_tuned", n)] = tstalls[key]

    out = []
    out.append(f"Completion time of the fan-out (last rollout done), median seconds; "
               f"S = {size / 2**20:.0f} MiB, links {args.rate}, ideal S/R = {ideal:.3f} s. "
               f"n = samples (TensorHub: the versions of every run, each run's first included; "
               f"(g): runs; MPI: timed iterations, the first included). (f) = the fastest of Open MPI's tuned "
               f"variants at that N (all of them in the next table); (g) = thub_chain_get.\n")
    out.append("| N | ideal | " + " | ".join(lbl for _, lbl in METHODS) +
               " | (a)/ideal | (a)/(d) | **(a)/(f)** | (a)/(g) |")
    out.append("|---:|---:|" + "---:|" * len(METHODS) + "---:|---:|---:|---:|")
    for n in ns:
        cells = []
        for key, _ in METHODS:
            v = samples.get((key, n), [])
            e = errors.get((key, n), 0)
            cell = f"{fmt(med(v))} (n={len(v)})" if v else "–"
            if e:
                cell += f" [{e} failed]"
            cells.append(cell)
        a = med(samples.get(("pipeline", n), []))
        d, t, g = (med(samples.get((k, n), [])) for k in ("mpi_bcast", "mpi_tuned", "ucx_chain"))
        out.append(f"| {n} | {ideal:.2f} | " + " | ".join(cells) +
                   f" | {fmt(a / ideal if a else None)} | {fmt(a / d if a and d else None)} | "
                   f"**{fmt(a / t if a and t else None)}** | {fmt(a / g if a and g else None)} |")
    out.append("")
    variants = sorted({m for (m, _) in samples if m.startswith("mpi_tuned_")})
    if variants:
        out.append("Open MPI's tuned broadcast variants (`coll_tuned_use_dynamic_rules 1`, algorithm 2 = chain with "
                   "`chain_fanout 1`, 3 = pipeline; segment size), median seconds; **bold** = the best at that N.\n")
        out.append("| N | " + " | ".join(v.replace("mpi_tuned_", "") for v in variants) + " |")
        out.append("|---:|" + "---:|" * len(variants))
        for n in ns:
            cells = []
            for v in variants:
                x = med(samples.get((v, n), []))
                c = fmt(x)
                if tuned.get(n) == (v, n):
                    c = f"**{c}**"
                if errors.get((v, n)):
                    c += f" [{errors[(v, n)]} failed]"
                cells.append(c)
            out.append(f"| {n} | " + " | ".join(cells) + " |")
        out.append("")
    if any(("pipeline", n) in firsts and ("mpi_tuned", n) in firsts for n in ns):
        out.append("The first version of a run (fresh processes; their connections are made during it) and the "
                   "versions after it (THUB_Update into the same tensors, an RL job's steady state), against Open "
                   "MPI's best tuned variant's first timed iteration and the iterations after it (the same "
                   "processes), medians; n = samples.\n")
        out.append("| N | (a) first | (f) first | first: (a)/(f) | (a) later | (f) later | **later: (a)/(f)** |")
        out.append("|---:|---:|---:|---:|---:|---:|---:|")
        for n in ns:
            af, tf = firsts.get(("pipeline", n), []), firsts.get(("mpi_tuned", n), [])
            al, tl = laters.get(("pipeline", n), []), laters.get(("mpi_tuned", n), [])
            r1 = med(af) / med(tf) if af and tf else None
            r2 = med(al) / med(tl) if al and tl else None
            out.append(f"| {n} | {fmt(med(af), '.3f')} (n={len(af)}) | {fmt(med(tf), '.3f')} (n={len(tf)}) | "
                       f"{fmt(r1)} | {fmt(med(al), '.3f')} (n={len(al)}) | {fmt(med(tl), '.3f')} (n={len(tl)}) | "
                       f"**{fmt(r2)}** |")
        out.append("")
    out.append("Stalls, medians. Trainer stall = how long the trainer is blocked by the method: TensorHub: "
               "THUB_Publish + THUB_Unpublish of the run's median version (the unpublish is called once every "
               "rollout is done, so it has nothing to drain; THUB_Publish alone beside it: a run's first "
               "publish also registers the shard); MPI: the root's time in MPI_Bcast; raw chain: until "
               "host 1 has read the last byte (the source must not change its buffer before). TensorHub's "
               "trainer may compute meanwhile but, by the mutability contract, not write the published "
               "buffers until its reader is done: an unpublish before that waits. Total rollout stall = sum "
               "over rollouts of their THUB_Replicate (later versions: THUB_Update) time; partial = rollouts whose source was a partial "
               "replica.\n")
    out.append("| N | method | trainer stall (ms) | THUB_Publish (ms) | total rollout stall (s) | partial |")
    out.append("|---:|---|---:|---:|---:|---:|")
    for n in ns:
        for key, lbl in METHODS:
            if (key, n) in tstalls:
                out.append(f"| {n} | {lbl} | {fmt(med(tstalls[(key, n)]) * 1e3, '.1f')} | "
                           f"{fmt(med(pubs[(key, n)]) * 1e3 if (key, n) in pubs else None, '.2f')} | "
                           f"{fmt(med(stalls.get((key, n), [])))} | {fmt(med(partial.get((key, n), [])), 'g')} |")
    text = "\n".join(out)
    print(text)
    if args.doc:
        put_section(args.doc, args.section or "fanout-results", text)
    plt = pyplot() if args.png else None
    if plt:
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for (key, lbl), mk in zip(METHODS, "osd^vP"):
            pts = [(n, med(samples[(key, n)])) for n in ns if samples.get((key, n))]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=mk, label=lbl)
        ax.axhline(ideal, color="k", ls="--", label=f"(e) ideal S/R = {ideal:.2f} s")
        ax.set_xscale("log", base=2)
        ax.set_xticks(ns)
        ax.set_xticklabels([str(n) for n in ns])
        ax.set_xlabel("rollouts N (one host each)")
        ax.set_ylabel("completion time of the fan-out (s, median)")
        ax.set_title(f"Fan-out of {size / 2**20:.0f} MiB over {args.rate} links (netlab)")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(args.png, dpi=120)


def fault_order(f):
    if f == "none":
        return (0, 0.0)
    if f.startswith("freeze"):
        return (2, float(f[6:]))
    return (1, float(f))


def fault_label(f, short=False):
    if f == "none":
        return "no fault"
    if f.startswith("freeze"):
        return f"{'stop' if short else 'SIGSTOP at'} {float(f[6:]) * 100:.0f}%"
    return f"{'kill' if short else 'SIGKILL at'} {float(f) * 100:.0f}%"


def failure(args):
    rows = [r for r in load(args.infile) if r.get("bench") in ("thub_fanout", "thub_fanout_failure")]
    by = {}
    for r in rows:
        by.setdefault(r.get("fault", "none"), []).append(r)
    base = [r["rollouts_detail"][1]["replicate_s"] for r in by.get("none", []) if "rollouts_detail" in r]
    base_med = med(base)
    detect = None
    out = []
    for r in rows:
        detect = r.get("stall_timeout_ms", detect)
    size = max((r.get("bytes", 0) for r in rows), default=0)
    out.append(f"R2's THUB_Replicate time (s, median) when R1, its partial source, is SIGKILLed (or "
               f"SIGSTOPped: a silent failure) holding a fraction of the {size / 2**20:.0f} MiB shard; stall_timeout_ms = {detect}; "
               f"bound = 1.2 x (no-fault + detection timeout).\n")
    out.append("| fault of R1 | runs | R2 replicate (s) | vs no-fault | bound (s) | R2 / bound | "
               "R1 gone at (s) | R2 source_failures | R2 partial_sources | R2 content |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for fault in sorted(by, key=fault_order):
        rs = [r for r in by[fault] if "rollouts_detail" in r and r["rollouts_detail"][1].get("alive")]
        r2 = [r["rollouts_detail"][1]["replicate_s"] for r in rs]
        gone = [r["rollouts_detail"][0]["gone_s"] for r in rs if not r["rollouts_detail"][0]["alive"]]
        fails = [r["rollouts_detail"][1]["source_failures"] for r in rs]
        parts = [r["rollouts_detail"][1]["partial_sources"] for r in rs]
        checks = sorted({"every byte ok" if r["rollouts_detail"][1]["check"] == "all" else
                         "sample ok" if r["rollouts_detail"][1]["check"] == "sample" else "BAD"
                         for r in rs}) or ["–"]
        errs = len(by[fault]) - len(rs)
        m = med(r2)
        bound = 1.2 * (base_med + (detect or 0) / 1e3) if base_med else None
        label = fault_label(fault)
        hung = sum(1 for r in by[fault] if r.get("error") == "exit 124")
        why = f" ({errs} failed{f', {hung} of them timed out' if hung else ''})" if errs else ""
        out.append(f"| {label} | {len(r2)}{why} | {fmt(m, '.3f')} | "
                   f"{fmt(m / base_med if m and base_med else None)} | {fmt(bound, '.3f')} | "
                   f"{fmt(m / bound if m and bound else None)} | {fmt(med(gone), '.3f')} | "
                   f"{fmt(med(fails), 'g')} | {fmt(med(parts), 'g')} | {', '.join(checks)} |")
    text = "\n".join(out)
    print(text)
    if args.doc:
        put_section(args.doc, "failure-results", text)
    plt = pyplot() if args.png and base_med else None
    if plt:
        faults = sorted(by, key=fault_order)
        vals = [med([r["rollouts_detail"][1]["replicate_s"] for r in by[f]
                     if "rollouts_detail" in r and r["rollouts_detail"][1].get("alive")]) or 0 for f in faults]
        labels = [fault_label(f, short=True) for f in faults]
        fig, ax = plt.subplots(figsize=(6.4, 4.0))
        bars = ax.bar(labels, vals, color=["tab:green"] + ["tab:red"] * (len(vals) - 1))
        for b, f in zip(bars, faults):  # how many runs finished, of how many
            ok = sum(1 for r in by[f] if "rollouts_detail" in r and r["rollouts_detail"][1].get("alive"))
            ax.text(b.get_x() + b.get_width() / 2, b.get_height(), f"{ok}/{len(by[f])} runs",
                    ha="center", va="bottom", fontsize=8)
        ax.axhline(base_med + (detect or 0) / 1e3, color="k", ls=":", label="no-fault + detection timeout")
        ax.axhline(1.2 * (base_med + (detect or 0) / 1e3), color="k", ls="--", label="target: 1.2 x that")
        ax.set_ylabel("R2 replicate time (s, median)")
        ax.set_title("R2 reading a partial source R1 that fails")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(args.png, dpi=120)


def sweep(args):
    """(a) at each link rate: completion / ideal, the head of the chain, the lag along it, and
    how busy the machine was (every host of the box shares its CPUs)."""
    rows = [r for r in load(args.infile) if r.get("bench") == "thub_fanout" and "completion_s" in r
            and r.get("method") == "pipeline"]
    by = {}
    for r in rows:
        by.setdefault((r["link_gbps"], r["rollouts"]), []).append(r)
    size = max((r["bytes"] for r in rows), default=0)
    out = [f"(a) TensorHub with pipeline at several link rates R, S = {size / 2**20:.0f} MiB, medians over the runs. "
           f"head = the first rollout done (it reads the trainer) / ideal; lag = last done - first done; "
           f"busy = share of the machine's CPUs in use during the run.\n",
           "| R | N | runs | ideal (s) | completion (s) | (a)/ideal | range | head / ideal | lag along the chain (ms) | busy |",
           "|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
    pts = {}
    for (gbps, n) in sorted(by):
        rs = by[(gbps, n)]
        ideal = size * 8 / (gbps * 1e9)
        ratios = [r["completion_s"] / ideal for r in rs]
        heads = [min(d["done_s"] for d in r["rollouts_detail"]) / ideal for r in rs]
        lags = [1e3 * (r["completion_s"] - min(d["done_s"] for d in r["rollouts_detail"])) for r in rs]
        busy = med([r["machine_busy"] for r in rs])
        rate = f"{gbps * 1e3:g} Mbit/s" if gbps < 1 else f"{gbps:g} Gbit/s"
        out.append(f"| {rate} | {n} | {len(rs)} | {ideal:.3f} | {fmt(med([r['completion_s'] for r in rs]), '.3f')} | "
                   f"**{fmt(med(ratios))}** | {min(ratios):.2f}-{max(ratios):.2f} | {fmt(med(heads))} | "
                   f"{fmt(med(lags), '.0f')} | {fmt(busy)} |")
        pts.setdefault(n, []).append((gbps, med(ratios), busy))
    text = "\n".join(out)
    print(text)
    if args.doc:
        put_section(args.doc, args.section or "rate-sweep", text)
    plt = pyplot() if args.png and pts else None
    if plt:
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        ax2 = ax.twinx()
        for n, p in sorted(pts.items()):
            line, = ax.plot([x[0] for x in p], [x[1] for x in p], marker="o", label=f"(a)/ideal, N = {n}")
            ax2.plot([x[0] for x in p], [x[2] for x in p], marker="x", ls=":", color=line.get_color(),
                     alpha=0.6, label=f"machine busy, N = {n} (right axis)")
        ax.axhline(1.2, color="k", ls="--", label="target 1.2 x ideal")
        ax.set_xlabel("link rate R (Gbit/s)")
        ax.set_ylabel("completion / ideal S/R (median)")
        ax2.set_ylabel("share of the machine's CPUs busy")
        ax2.set_ylim(0, 1.05)
        ax.set_ylim(1.0, max(1.4, max(x[1] for p in pts.values() for x in p) + 0.05))
        ax.set_title("Pipeline fan-out vs link rate (all hosts share 2 vCPUs)")
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = ax2.get_legend_handles_labels()
        ax.legend(h1 + h2, l1 + l2, fontsize=8, loc="upper left")
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        fig.savefig(args.png, dpi=120)


def pyplot():
    try:
        import matplotlib
    except ImportError:
        print("fanout_report: matplotlib not found (apt-get install python3-matplotlib): no plot", file=sys.stderr)
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kind", choices=["fanout", "failure", "sweep"])
    p.add_argument("--in", dest="infile", required=True)
    p.add_argument("--rate", default="1gbit")
    p.add_argument("--doc")
    p.add_argument("--png")
    p.add_argument("--section", help="doc section name (default: fanout-results / rate-sweep)")
    args = p.parse_args()
    {"fanout": fanout, "failure": failure, "sweep": sweep}[args.kind](args)


if __name__ == "__main__":
    main()
