"""Writes tensorhub/_vocabulary.py from the public header (include/tensorhub/tensorhub.h).

The header's lists of status codes and stat keys are themselves generated from the library's
tables (src/common/status.h, stat_keys.h; test GeneratedListsAreCurrent), so the package's
constants cannot drift from the library: they are read, at build time, from the same header a
C program compiles against. A header whose shape this script does not recognise fails the
build rather than giving an empty or partial list.

Usage: gen_vocabulary.py HEADER OUTPUT
"""
import re
import sys


def block(text, marker):
    """The lines between 'BEGIN GENERATED <marker>' and the next 'END GENERATED'."""
    start = text.find("BEGIN GENERATED " + marker)
    if start < 0:
        sys.exit("gen_vocabulary: no 'BEGIN GENERATED %s' in the header" % marker)
    end = text.find("END GENERATED", start)
    return text[start:end].splitlines()[1:]


def comment_list(lines):
    """[(name, text)] from ' *  - `name`: text' items with ' *    more' continuation lines."""
    items = []
    for line in lines:
        m = re.match(r"\s*\*\s+- `(\w+)`:? ?(.*)$", line)
        if m:
            items.append([m.group(1), m.group(2).strip()])
            continue
        m = re.match(r"\s*\*\s{3,}(\S.*)$", line)
        if m and items:
            items[-1][1] += " " + m.group(1).strip()
    return [tuple(i) for i in items]


def main():
    header, output = sys.argv[1], sys.argv[2]
    with open(header, encoding="utf-8") as f:
        text = f.read()

    status = []
    for line in block(text, "status-codes"):
        m = re.match(r"#define (THUB_\w+)\s+\(?(-?\d+)\)?\s+/\*\*<\s*(.*?)\s*\*/", line)
        if m:
            status.append((m.group(1)[len("THUB_"):], int(m.group(2)), m.group(3)))
    mem = [(m.group(1), int(m.group(2)))
           for m in re.finditer(r"#define THUB_(MEM_\w+) (\d+)", text)]
    latest = re.search(r"#define THUB_LATEST \(\(int64_t\)(-?\d+)\)", text)
    minus = re.search(r"#define THUB_LATEST_MINUS\(k\) \(\(int64_t\)\(-1 - \(int64_t\)\(k\)\)\)", text)
    stat_keys = comment_list(block(text, "stat-keys"))
    info_init = comment_list(block(text, "info-keys:init"))
    info_open = comment_list(block(text, "info-keys:open"))
    if not (status and mem and latest and minus and stat_keys and info_init and info_open):
        sys.exit("gen_vocabulary: the header's lists are not where expected (status %d, mem %d, "
                 "latest %s, latest_minus %s, stat keys %d, info keys %d + %d)"
                 % (len(status), len(mem), bool(latest), bool(minus), len(stat_keys),
                    len(info_init), len(info_open)))
    if int(latest.group(1)) != -1:
        sys.exit("gen_vocabulary: THUB_LATEST is not -1; update latest_minus() in tensorhub")

    out = ['"""Generated from include/tensorhub/tensorhub.h by python/gen_vocabulary.py: do not edit."""',
           "", "# (name without THUB_, number, meaning)", "STATUS_CODES = ["]
    out += ["    (%r, %d, %r)," % s for s in status]
    out += ["]", "", "MEM_TYPES = ["]
    out += ["    (%r, %d)," % s for s in mem]
    out += ["]", "", "LATEST = %d" % int(latest.group(1)), "", "# (key, meaning)", "STAT_KEYS = ["]
    out += ["    (%r, %r)," % s for s in stat_keys]
    out += ["]", "", "# (key, type, default and meaning): THUB_Init's keys (tensorhub.Context)", "INIT_INFO_KEYS = ["]
    out += ["    (%r, %r)," % s for s in info_init]
    out += ["]", "", "# THUB_Open's keys (Context.open)", "OPEN_INFO_KEYS = ["]
    out += ["    (%r, %r)," % s for s in info_open]
    out += ["]", ""]
    with open(output, "w", encoding="utf-8") as f:
        f.write("\n".join(out))


if __name__ == "__main__":
    main()
