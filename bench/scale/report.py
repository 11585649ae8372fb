#!/usr/bin/env python3
"""Tables and plot of the at-scale sweep (bench/scale/run.sh) for docs/scale.md.

  report.py service REGISTRY_JSON N
      "--registry-replicate-us X --registry-request-us Y --registry-heartbeat-us Z": the
      registry's measured time per source choice, other request and heartbeat (median of the
      repetitions) at the benchmarked N nearest to N,
      with the rollouts' start spread of thub_scale's default.
  report.py report SCALE_JSONL REGISTRY_JSON DOC_MD SVG
      writes the tables between the BEGIN/END scale-* markers of DOC_MD and draws SVG; the
      registry table also shows REGISTRY-before.json and REGISTRY-before-300.json (the same
      benchmark built without the wake() fix) when they are there.

Standard library only (Debian's python3 here has no matplotlib): the SVG is written by hand.
"""
import json
import math
import os
import re
import sys

SCENARIOS = [
    ("base", "pipeline, 1 DC", "#1f77b4"),
    ("measured", "pipeline, registry at its measured speed", "#d62728"),
    ("measured_hb60", "same, heartbeat_timeout 60 s", "#e377c2"),
    ("faults", "N/10 join, N/10 killed", "#2ca02c"),
    ("silent", "N/10 vanish (silent)", "#9467bd"),
    ("twodc", "2 DCs, 3.2 Tbit/s uplink", "#ff7f0e"),
    ("readers2", "max_readers_per_source 2", "#8c564b"),
]


def load_registry(path):
    """{(n, spread): row} of the median aggregates of BM_FanoutVersion."""
    if not path or not os.path.exists(path):
        return {}
    rows = {}
    for b in json.load(open(path))["benchmarks"]:
        if b.get("aggregate_name", "median") != "median" and b.get("run_type") == "aggregate":
            continue
        m = re.match(r"BM_FanoutVersion/N:(\d+)/spread_us:(\d+)", b.get("run_name", b["name"]))
        if not m:
            continue
        key = (int(m.group(1)), int(m.group(2)))
        if b.get("run_type") == "aggregate" or key not in rows:
            rows[key] = b
    return rows


def ms(b, field="cpu_time"):
    unit = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b.get("time_unit", "ns")]
    return b[field] * unit


def service(path, n):
    rows = {k: v for k, v in load_registry(path).items() if k[1] == 1000}
    if not rows:
        return ""
    nearest = min(rows, key=lambda k: (abs(math.log(max(n, 1)) - math.log(k[0])), k[0]))
    b = rows[nearest]
    return "--registry-replicate-us %.4g --registry-request-us %.4g --registry-heartbeat-us %.4g" % (
        b["us_per_replicate"], b["us_per_request"], b["us_per_heartbeat"])


def shape(fanout):
    """'chains' when no member served more than one reader, else the histogram."""
    f = {int(k): v for k, v in fanout.items()}
    if max(f) <= 1:
        return "chains (every member serves <= 1 reader)"
    return ", ".join("%d readers: %d" % (k, f[k]) for k in sorted(f))


def requests_line(r):
    parts = ["%s %d" % (k, v) for k, v in sorted(r["requests"].items())]
    return ", ".join(parts)


def tables(runs, reg):
    out = []
    base = sorted((r for r in runs if r["scenario"] == "base"), key=lambda r: r["replicas"])
    out.append("Scenario *base*: %s, %d shards, %d GPUs and %d NICs of %s Gbit/s per host, "
               "max_readers %d, pipeline; rollouts call THUB_Replicate(latest) at t0 + U[0, 1 ms). "
               "Registry CPU per version: `thub_fanout_replay_bench`, median CPU time of the "
               "replay of the same fan-out (spread 1 ms), on the benchmark's machine (below)."
               % (fmt_bytes(base[0]["model_bytes"]) if base else "?", base[0]["shards"] if base else 0,
                  base[0]["gpus_per_host"] if base else 0, base[0]["nics_per_host"] if base else 0,
                  g(base[0]["nic_gbit"]) if base else "?", base[0]["max_readers"] if base else 0))
    out.append("")
    out.append("| N | ideal (s) | completion (s) | completion / ideal | p50 / ideal | tree depth max (mean) | shape | grants (partial) | deferred | requests / version | replies | registry CPU / version | per replica |")
    out.append("|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|")
    for r in base:
        b = reg.get((r["replicas"], 1000))
        cpu = "%.3g ms" % ms(b) if b else "–"
        per = "%.3g us" % (ms(b) * 1e3 / r["replicas"]) if b else "–"
        out.append("| %d | %.3f | %.3f | **%.4f** | %.4f | %d (%.1f) | %s | %d (%d) | %d | %d | %d | %s | %s |" % (
            r["replicas"], r["ideal_s"], r["completion_s"], r["ratio"], r["p50_s"] / r["ideal_s"],
            r["depth_max"], r["depth_mean"], shape(r["fanout"]), r["grants"], r["partial_grants"],
            r["deferred"], r["requests_total"], r["replies"], cpu, per))
    out.append("")
    out.append("Requests per version by kind (base): " + "; ".join(
        "N = %d: %s" % (r["replicas"], requests_line(r)) for r in base) + ". Heartbeats are apart: "
        "one per client (one per shard process) per second.")
    out.append("")
    out.append("All scenarios (the same fleet; faults at uniform times in [0.1, 0.9] x ideal after t0, "
               "joins in [0, 0.8] x ideal; *measured*: the registry's service time per request and per "
               "heartbeat set to the replay benchmark's at that N):")
    out.append("")
    out.append("| scenario | N | completion / ideal | p50 / ideal | joiners: worst (done - join) / ideal | killed | source failures (by stall timeout) | replicates retried | depth max | grants (partial) | requests / version | registry busy (s, modelled) | ok |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    order = {s[0]: i for i, s in enumerate(SCENARIOS)}
    for r in sorted(runs, key=lambda r: (order.get(r["scenario"], 99), r["replicas"])):
        if not r["ok"]:
            out.append("| %s | %d | – | – | – | – | – | – | – | %d (%d) | %d | %.3g | **no**: %s |" % (
                r["scenario"], r["replicas"], r["grants"], r["partial_grants"], r["requests_total"],
                r["registry_busy_s"], r["error"]))
            continue
        out.append("| %s | %d | **%.4f** | %.4f | %s | %d | %d (%d) | %d | %d | %d (%d) | %d | %.3g | yes |" % (
            r["scenario"], r["replicas"], r["ratio"], r["p50_s"] / r["ideal_s"] if r["ideal_s"] else 0,
            "%.4f" % r["joiner_worst_ratio"] if r["replicas_joined"] else "–", r["replicas_killed"],
            r["source_failures"], r.get("stall_timeouts", 0), r.get("retries", 0), r["depth_max"], r["grants"],
            r["partial_grants"], r["requests_total"], r["registry_busy_s"]))
    return "\n".join(out)


def registry_table(reg, before):
    out = ["| N | start spread | registry CPU / version | before the wake() fix | events / version | per replica | per Replicate / SourceFailed | per other request | per heartbeat or tick |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (n, spread) in sorted(reg, key=lambda k: (k[1], k[0])):
        b = reg[(n, spread)]
        old = before.get((n, spread))
        out.append("| %d | %s | **%.3g ms** | %s | %d | %.3g us | %.3g us | %.3g us | %.3g us |" % (
            n, "%d us" % spread if spread else "0", ms(b), "%.3g ms" % ms(old) if old else "–", b["events"],
            ms(b) * 1e3 / n, b["us_per_replicate"], b["us_per_request"], b["us_per_heartbeat"]))
    return "\n".join(out)


def fmt_bytes(x):
    return "%g TB" % (x / 1e12) if x >= 1e12 else "%g GB" % (x / 1e9)


def g(x):
    return "%g" % x


def replace(doc, name, text):
    pat = re.compile(r"(<!-- BEGIN %s -->\n).*?(<!-- END %s -->)" % (name, name), re.S)
    if not pat.search(doc):
        raise SystemExit("docs: no BEGIN/END %s markers" % name)
    return pat.sub(lambda m: m.group(1) + text + "\n" + m.group(2), doc)


def svg(runs, path):
    W, H, L, R, T, B = 720, 430, 70, 250, 30, 55
    pw, ph = W - L - R, H - T - B
    ns = sorted({r["replicas"] for r in runs})
    xmin, xmax = math.log10(min(ns)), math.log10(max(ns))
    if xmax == xmin:
        xmax = xmin + 1
    ymax = max([1.4] + [r["ratio"] for r in runs if r["ok"]])
    ymax = math.ceil(ymax * 5) / 5
    ymin = 0.8

    def X(n):
        return L + (math.log10(n) - xmin) / (xmax - xmin) * pw

    def Y(v):
        return T + (1 - (v - ymin) / (ymax - ymin)) * ph

    s = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">' % (W, H),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="18" font-size="14">Fan-out of one version: completion / ideal vs rollout replicas (simulated)</text>' % L]
    step = 0.1 if ymax - ymin <= 1.2 else 0.5 if ymax - ymin <= 5 else 1.0
    v = 1.0
    while v <= ymax + 1e-9:
        y = Y(v)
        s.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>' % (L, y, L + pw, y))
        s.append('<text x="%d" y="%.1f" text-anchor="end">%.1f</text>' % (L - 6, y + 4, v))
        v += step
    for n in ns:
        x = X(n)
        s.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>' % (x, T, x, T + ph))
        s.append('<text x="%.1f" y="%d" text-anchor="middle">%d</text>' % (x, T + ph + 18, n))
    s.append('<text x="%d" y="%d" text-anchor="middle">rollout replicas N (8 shards each; log scale)</text>' % (L + pw / 2, H - 12))
    s.append('<text transform="translate(18,%d) rotate(-90)" text-anchor="middle">completion / ideal</text>' % (T + ph / 2))
    y = Y(1.3)
    s.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="black" stroke-dasharray="6,4"/>' % (L, y, L + pw, y))
    s.append('<text x="%d" y="%.1f" text-anchor="end">target 1.3</text>' % (L + pw - 4, y - 5))
    s.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="black"/>' % (L, T, pw, ph))
    ly = T + 10
    for name, label, color in SCENARIOS:
        pts = sorted((r["replicas"], r["ratio"]) for r in runs if r["scenario"] == name and r["ok"])
        if not pts and not any(r["scenario"] == name for r in runs):
            continue
        s.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>' % (
            color, " ".join("%.1f,%.1f" % (X(n), Y(v)) for n, v in pts)))
        for n, v in pts:
            s.append('<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>' % (X(n), Y(v), color))
        for r in runs:  # a run that did not finish (e.g. the registry dropped live clients): x on top
            if r["scenario"] == name and not r["ok"]:
                x, y = X(r["replicas"]), T + 8
                s.append('<path d="M%.1f,%.1f l8,8 m0,-8 l-8,8" stroke="%s" stroke-width="2"/>' % (x - 4, y - 4, color))
        s.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>' % (L + pw + 12, ly, L + pw + 32, ly, color))
        s.append('<text x="%d" y="%d">%s</text>' % (L + pw + 38, ly + 4, label))
        ly += 20
    s.append("</svg>")
    open(path, "w").write("\n".join(s) + "\n")


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "service":
        print(service(sys.argv[2], int(sys.argv[3])))
        return
    if len(sys.argv) == 6 and sys.argv[1] == "report":
        runs = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
        reg = load_registry(sys.argv[3])
        doc = open(sys.argv[4]).read()
        doc = replace(doc, "scale-results", tables(runs, reg))
        if reg:
            before = {}
            base = os.path.splitext(sys.argv[3])[0]
            for suffix in ("-before.json", "-before-300.json"):
                before.update(load_registry(base + suffix))
            doc = replace(doc, "scale-registry", registry_table(reg, before))
        open(sys.argv[4], "w").write(doc)
        svg(runs, sys.argv[5])
        return
    print(__doc__, file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    main()
