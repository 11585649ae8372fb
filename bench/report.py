#!/usr/bin/env python3
"""Tables and plots for bench/run.sh (the transfer suite of issue 11).

  report.py --in transfer.jsonl --md transfer.md [--png-prefix docs/figures/transfer]
            [--doc docs/benchmarks.md --section transfer-results]

Reads the JSON lines of thub_bench_replicate / thub_bench_publish (plus run.sh's machine and
end lines) and writes markdown tables (machine, command, every row against ucx_perftest,
the issue's targets) and PNG plots: bandwidth and CPU s/GB vs size per transport, against
the ucx_perftest roofline and memcpy; publish time vs tensor count. --doc puts the markdown
between <!-- BEGIN SECTION --> and <!-- END SECTION --> of that file (appended if missing).
"""
import argparse
import json
import math
import sys

MiB, GiB = 2**20, 2**30
TRANSPORTS = [("shm", "Shared memory (UCX's default transports), tensors in malloc'd memory"),
              ("shm-alloc", "Shared memory, tensors in THUB_Alloc_mem memory (both sides)"), ("tcp", "TCP")]


def load(path):
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"report.py: {path}:{n}: not JSON ({e})")
            # Rows of tensors in THUB_Alloc_mem memory are a transport of their own here.
            if r.get("bench") == "replicate" and r.get("alloc") == "thub" and "transport" in r:
                r["transport"] += "-alloc"
            rows.append(r)
    return rows


def size_text(b):
    if b is None:
        return "–"
    if b >= GiB and b % GiB == 0:
        return f"{b // GiB} GiB"
    if b >= MiB and b % MiB == 0:
        return f"{b // MiB} MiB"
    if b >= MiB:
        return f"{b / MiB:.1f} MiB"
    return f"{b // 1024} KiB"


def f(x, spec=".2f"):
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def layout_text(r):
    lay = r.get("layout", "?")
    if lay == "7b":
        return f"7B-shaped ({r.get('tensors')})"
    if "x" in lay:
        n, s = lay.split("x", 1)
        return f"{int(n):,} x {s}iB"
    return f"{lay} tensor{'s' if lay != '1' else ''}"


def put_section(doc, name, text):
    begin, end = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
    try:
        with open(doc) as fh:
            body = fh.read()
    except FileNotFoundError:
        body = ""
    block = f"{begin}\n{text.rstrip()}\n{end}"
    if begin in body and end in body:
        body = body[: body.index(begin)] + block + body[body.index(end) + len(end):]
    else:
        body = body.rstrip() + ("\n\n" if body else "") + block + "\n"
    with open(doc, "w") as fh:
        fh.write(body)


def replicate_rows(rows, transport):
    out = [r for r in rows if r.get("bench") == "replicate" and r.get("transport") == transport and "bytes" in r]
    order = {"1": 0, "100": 1}
    return sorted(out, key=lambda r: (order.get(r["layout"], 2), r["layout"], r["bytes"]))


def find(rows, transport, layout, nbytes):
    for r in rows:
        if (r.get("bench") == "replicate" and r.get("transport") == transport and r.get("layout") == layout
                and r.get("bytes") == nbytes):
            return r
    return None


def tables(rows):
    m = next((r for r in rows if r.get("bench") == "machine"), {})
    end = next((r for r in rows if r.get("bench") == "end"), {})
    out = []
    out.append(f"Machine: {m.get('cpu', '?')}, {m.get('cores', '?')} cores, {m.get('memory', '?')}, "
               f"{m.get('kernel', '?')}, UCX {m.get('ucx', '?')}; {m.get('date', '?')}, commit {m.get('commit', '?')}, "
               f"load average {m.get('loadavg_start', '?')} at the start, {end.get('loadavg_end', '?')} at the end"
               f"{', ' + str(end['seconds']) + ' s in all' if 'seconds' in end else ''}.\n")
    out.append(f"Command: `{m.get('command', 'bench/run.sh')}` ({m.get('mode', '?')} mode, medians of "
               f"{m.get('iters', '?')} iterations after 1 warm-up). GB/s = 1e9 bytes/s. Per iteration, "
               "interleaved: a `ucx_perftest -t ucp_get` pair at the shard's size and one at TensorHub's chunk "
               "size (`pf@chunk`, with TensorHub's window of gets in flight), our raw `ucp_get` loop "
               "(diagnostic only), memcpy, then `THUB_Replicate`. CPU = CPU seconds per GB moved, of the source "
               "(the process read) and of the reader, over the timed interval only.\n")
    for transport, title in TRANSPORTS:
        rs = replicate_rows(rows, transport)
        errs = [r for r in rows if r.get("bench") == "replicate" and r.get("transport") == transport and "error" in r]
        if not rs and not errs:
            continue
        tls = next((r.get("tls") for r in rs), "")
        out.append(f"#### {title}{' (UCX_TLS=' + tls + ')' if tls and tls != 'default' else ''}\n")
        out.append("| layout | size | thub GB/s | ucx_perftest GB/s | pf@chunk GB/s | memcpy GB/s | **thub / perftest** "
                   "| thub / pf@chunk | CPU s/GB thub src / rdr | CPU s/GB perftest src / rdr | publish ms "
                   "| first replicate ms | raw get GB/s (diag.) |")
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in rs:
            out.append(
                f"| {layout_text(r)} | {size_text(r['bytes'])} | {f(r.get('thub_gbps'))} | {f(r.get('perftest_gbps'))} | "
                f"{f(r.get('perftest_chunk_gbps'))} | {f(r.get('memcpy_gbps'))} | **{f(r.get('ratio_thub_perftest'), '.3f')}** | "
                f"{f(r.get('ratio_thub_perftest_chunk'), '.3f')} | "
                f"{f(r.get('thub_source_cpu_s_per_gb'), '.3f')} / {f(r.get('thub_reader_cpu_s_per_gb'), '.3f')} | "
                f"{f(r.get('perftest_source_cpu_s_per_gb'), '.3f')} / {f(r.get('perftest_reader_cpu_s_per_gb'), '.3f')} | "
                f"{f(_ms(r.get('source_publish_s')))} | {f(_ms(r.get('thub_first_replicate_s')), '.1f')} | "
                f"{f(r.get('raw_get_gbps'))} |")
        for r in errs:
            out.append(f"| {layout_text(r)} | – | failed: {r['error']} |" + " |" * 10)
        out.append("")

    # Layouts against one tensor of the same bytes (issue 11: >= 0.8).
    lay_rows = []
    for transport, _ in TRANSPORTS:
        for r in replicate_rows(rows, transport):
            if r["layout"] == "1":
                continue
            one = find(rows, transport, "1", r["bytes"])
            if one:
                lay_rows.append((transport, r, one))
    if lay_rows:
        out.append("#### Layouts against one tensor of the same bytes (target >= 0.8)\n")
        out.append("| transport | layout | size | thub GB/s | one tensor thub GB/s | ratio | thub / perftest |")
        out.append("|---|---|---:|---:|---:|---:|---:|")
        for transport, r, one in lay_rows:
            ratio = _div(r.get("thub_gbps"), one.get("thub_gbps"))
            out.append(f"| {transport} | {layout_text(r)} | {size_text(r['bytes'])} | {f(r.get('thub_gbps'))} | "
                       f"{f(one.get('thub_gbps'))} | **{f(ratio, '.3f')}** | {f(r.get('ratio_thub_perftest'), '.3f')} |")
        out.append("")

    pubs = [r for r in rows if r.get("bench") == "publish" and "idle_cpu_core_fraction" not in r]
    if pubs:
        out.append("#### THUB_Publish alone (target <= 1 ms, with and without verify)\n")
        out.append("| layout | tensors | size | verify | first publish ms | publish ms (median) | min-max ms "
                   "| pack ms | compacted tensors | publish / 1 ms |")
        out.append("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|")
        for r in sorted(pubs, key=lambda r: (r["tensors"], r["verify"])):
            out.append(f"| {layout_text(r)} | {r['tensors']} | {size_text(r['bytes'])} | {'on' if r['verify'] else 'off'} | "
                       f"{f(_ms(r.get('first_publish_s')))} | **{f(_ms(r.get('publish_s')), '.3f')}** | "
                       f"{f(_ms(r.get('publish_min_s')))}-{f(_ms(r.get('publish_max_s')))} | {f(r.get('pack_ms'))} | "
                       f"{r.get('compacted_tensors', '–')} | {f(r.get('ratio_publish_target'), '.0f')} |")
        out.append("")
    idles = [r for r in rows if r.get("bench") == "publish" and "idle_cpu_core_fraction" in r]
    if idles:
        out.append("#### CPU of a published source with no reader (target < 1% of a core)\n")
        out.append("| layout | size | idle seconds | CPU, % of one core | context switches / s |")
        out.append("|---|---:|---:|---:|---:|")
        for r in idles:
            frac = r.get("idle_cpu_core_fraction")
            out.append(f"| {layout_text(r)} | {size_text(r['bytes'])} | {r.get('idle_s')} | "
                       f"**{f(frac * 100 if frac is not None else None, '.3f')}%** | "
                       f"{f(r.get('idle_switches_per_s'), '.1f')} |")
        out.append("The process holds the embedded registry too (as a trainer usually does). Context switches "
                   "= its threads' wake-ups (getrusage).\n")

    out.append("#### Issue 11's targets in this run\n")
    out.append("| metric | target | measured |")
    out.append("|---|---|---|")
    for metric, target, val in targets(rows):
        out.append(f"| {metric} | {target} | {val} |")
    out.append("")
    return "\n".join(out)


def _ms(s):
    return None if s is None else s * 1e3


def _div(a, b):
    return a / b if a is not None and b else None


def targets(rows):
    t = []
    for transport, label in (("shm", "default transports"), ("shm-alloc", "default transports, THUB_Alloc_mem"),
                             ("tcp", "TCP")):
        r = find(rows, transport, "100", GiB)
        t.append((f"1 GiB / 100 tensors, {label}: thub / ucx_perftest", ">= 0.9",
                  f(r.get("ratio_thub_perftest"), ".3f") if r else "not run"))
    r = find(rows, "shm", "1", 64 * MiB)
    t.append(("64 MiB replicate / ucx_perftest get of 64 MiB (one tensor, shm)", ">= 0.8",
              f(r.get("ratio_thub_perftest"), ".3f") if r else "not run"))
    r = find(rows, "shm", "1", MiB)
    t.append(("1 MiB replicate (one tensor, shm)", "<= 0.3 ms",
              f(_ms(r.get("thub_s")), ".3f") + " ms" if r and r.get("thub_s") is not None else "not run"))
    for verify in (False, True):
        r = next((x for x in rows if x.get("bench") == "publish" and x.get("layout") == "1000"
                  and x.get("verify") == verify and "idle_cpu_core_fraction" not in x), None)
        t.append((f"publish, {size_text(r['bytes']) if r else '1 GiB'} in 1,000 tensors, verify "
                  f"{'on' if verify else 'off'}", "<= 1 ms",
                  f(_ms(r.get("publish_s")), ".3f") + " ms" if r else "not run"))
    for lay, nbytes in (("8192x8K", 64 * MiB), ("1000x1M", 1000 * MiB)):
        for transport in ("shm", "shm-alloc", "tcp"):
            r, one = find(rows, transport, lay, nbytes), find(rows, transport, "1", nbytes)
            ratio = _div(r.get("thub_gbps"), one.get("thub_gbps")) if r and one else None
            t.append((f"{lay} vs one tensor of the same bytes, {transport}", ">= 0.8",
                      f(ratio, ".3f") if ratio is not None else "not run"))
    r = next((x for x in rows if x.get("bench") == "publish" and "idle_cpu_core_fraction" in x), None)
    t.append(("CPU of a published source with no readers", "< 1% of a core",
              f(r["idle_cpu_core_fraction"] * 100, ".3f") + "%" if r and r.get("idle_cpu_core_fraction") is not None
              else "not run"))
    return t


def pyplot():
    try:
        import matplotlib
    except ImportError:
        print("report.py: matplotlib not found (apt-get install python3-matplotlib): no plots", file=sys.stderr)
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_transport(plt, rows, transport, title, png):
    rs = replicate_rows(rows, transport)
    if not rs:
        return False
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(7.2, 7.6), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    # The roofline and memcpy against the shard size (medians per size over all layouts' rows).
    by_size = {}
    for r in rs:
        by_size.setdefault(r["bytes"], []).append(r)

    def med_of(key, size):
        v = sorted(x[key] for x in by_size[size] if x.get(key) is not None)
        return v[len(v) // 2] if v else None

    sizes = sorted(by_size)
    for key, lbl, style in (("perftest_gbps", "ucx_perftest ucp_get (roofline)", "k-"),
                            ("memcpy_gbps", "memcpy (one thread)", "k:")):
        pts = [(s / MiB, med_of(key, s)) for s in sizes if med_of(key, s) is not None]
        if pts:
            ax.plot(*zip(*pts), style, marker=".", label=lbl)
    chunk = [r["perftest_chunk_gbps"] for r in rs if r.get("perftest_chunk_gbps") is not None]
    if chunk:
        chunk.sort()
        ax.axhline(chunk[len(chunk) // 2], color="0.5", ls="--", lw=1,
                   label=f"ucx_perftest at TensorHub's chunk ({size_text(rs[0].get('chunk', 4 * MiB))}), median")
    markers = iter("osD^vP*X")
    for lay in sorted({r["layout"] for r in rs}, key=lambda x: ({"1": 0, "100": 1}.get(x, 2), x)):
        pts = [(r["bytes"] / MiB, r["thub_gbps"]) for r in rs if r["layout"] == lay and r.get("thub_gbps")]
        if not pts:
            continue
        mk = next(markers, "o")
        line, = ax.plot(*zip(*pts), marker=mk, ls="-" if len(pts) > 1 else "none",
                        label=f"TensorHub, {layout_text(next(r for r in rs if r['layout'] == lay))}")
        cpts = [(r["bytes"] / MiB, r.get("thub_source_cpu_s_per_gb"), r.get("thub_reader_cpu_s_per_gb"))
                for r in rs if r["layout"] == lay]
        for idx, ls, side in ((1, "-", "src"), (2, ":", "rdr")):
            p = [(c[0], c[idx]) for c in cpts if c[idx] is not None]
            if p:
                ax2.plot(*zip(*p), marker=mk, ls=ls if len(p) > 1 else "none", color=line.get_color(),
                         label=f"thub {lay} {side}")
    for key, ls, side in (("perftest_source_cpu_s_per_gb", "-", "src"), ("perftest_reader_cpu_s_per_gb", ":", "rdr")):
        pts = [(s / MiB, med_of(key, s)) for s in sizes if med_of(key, s) is not None]
        if pts:
            ax2.plot(*zip(*pts), ls, color="k", marker=".", label=f"ucx_perftest {side}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_ylabel("GB/s (median)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    ax2.set_xlabel("shard size")
    ticks = []  # leave out a size too close to the previous one (1000 MiB beside 1 GiB)
    for x in sizes:
        if not ticks or x / ticks[-1] >= 1.5:
            ticks.append(x)
    ax2.set_xticks([x / MiB for x in ticks])
    ax2.set_xticklabels([size_text(x).replace(" ", "") for x in ticks], rotation=45, fontsize=7)
    ax2.minorticks_off()
    ax2.set_ylabel("CPU s per GB moved")
    ax2.set_yscale("log")
    ax2.grid(True, which="both", alpha=0.3)
    ax2.legend(fontsize=6, ncol=3)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return True


def plot_publish(plt, rows, png):
    pubs = [r for r in rows if r.get("bench") == "publish" and "idle_cpu_core_fraction" not in r]
    if not pubs:
        return False
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for verify, color in ((False, "tab:blue"), (True, "tab:red")):
        rs = sorted((r for r in pubs if r["verify"] == verify), key=lambda r: r["tensors"])
        if not rs:
            continue
        v = "verify=true" if verify else "verify=false"
        ax.plot([r["tensors"] for r in rs], [r["publish_s"] * 1e3 for r in rs], marker="o", color=color,
                label=f"THUB_Publish, {v} (median)")
        ax.plot([r["tensors"] for r in rs], [r["first_publish_s"] * 1e3 for r in rs], marker="x", ls=":",
                color=color, label=f"first publish (registers), {v}")
    ax.axhline(1.0, color="k", ls="--", label="target 1 ms")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("tensors in the shard")
    ax.set_ylabel("ms")
    nbytes = max(r["bytes"] for r in pubs)
    ax.set_title(f"THUB_Publish of about {size_text(nbytes)} vs tensor count")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return True


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--in", dest="infile", required=True)
    p.add_argument("--md", help="write the tables here")
    p.add_argument("--png-prefix", help="write PREFIX-shm.png, PREFIX-tcp.png, PREFIX-publish.png")
    p.add_argument("--doc", help="also put the tables into this markdown file")
    p.add_argument("--section", default="transfer-results")
    args = p.parse_args()
    rows = load(args.infile)
    text = tables(rows)
    print(text)
    if args.md:
        with open(args.md, "w") as fh:
            fh.write(text + "\n")
    if args.doc:
        put_section(args.doc, args.section, text)
    if args.png_prefix:
        plt = pyplot()
        if plt:
            for transport, title in TRANSPORTS:
                tls = next((r.get("tls") for r in replicate_rows(rows, transport)), "")
                t = f"1:1 replicate, {title}{' UCX_TLS=' + tls if tls and tls != 'default' else ''}"
                plot_transport(plt, rows, transport, t, f"{args.png_prefix}-{transport}.png")
            plot_publish(plt, rows, f"{args.png_prefix}-publish.png")


if __name__ == "__main__":
    main()
