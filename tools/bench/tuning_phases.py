"""Sums the tunings' phases in a convtune log (issue 57, item 1): every line
ending "phases (s): setup 0.012, predict 0.000, ..." (the library's INFO line
at the end of each tuning, docs/tuning.md), read from files or stdin, summed
per file, with the number of tunings and each phase's share.  For a model's
first forward, run it with CONVTUNE_LOG=info and its stderr to a file:

    CONVTUNE_LOG=info CONVTUNE_LIB=build/libconvtune.so PYTHONPATH=python \\
        python3 tools/bench/models.py --models resnet50 --batches 16 --modes strict \\
        --tune-only --cache /tmp/fresh-resnet50.db --policy predict 2> resnet50.log
    python3 tools/bench/tuning_phases.py resnet50.log [more.log ...] [--out-md FILE]
"""
import argparse
import re
import sys

_PHASES = re.compile(r"phases \(s\): (.*)$")


def read_phases(lines):
    """(tunings, {phase: seconds summed}) of the lines, phases in their order."""
    totals, tunings = {}, 0
    for line in lines:
        m = _PHASES.search(line.rstrip("\n"))
        if not m:
            continue
        tunings += 1
        for pair in m.group(1).split(", "):
            name, value = pair.rsplit(" ", 1)
            totals[name] = totals.get(name, 0.0) + float(value)
    return tunings, totals


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("logs", nargs="*", help="log files (none: stdin)")
    p.add_argument("--out-md", default=None)
    args = p.parse_args(argv)
    sources = [(path, open(path, encoding="utf-8", errors="replace")) for path in args.logs] or [("stdin", sys.stdin)]
    rows = []
    for name, f in sources:
        tunings, totals = read_phases(f)
        rows.append((name, tunings, totals))
    phases = []
    for _, _, totals in rows:
        phases += [k for k in totals if k not in phases]
    lines = ["| log | tunings | total s | " + " | ".join(phases) + " |",
             "|---|---|---|" + "---|" * len(phases)]
    for name, tunings, totals in rows:
        total = sum(totals.values())
        cells = ["%.2f (%.0f%%)" % (totals.get(k, 0.0), 100.0 * totals.get(k, 0.0) / total if total else 0)
                 for k in phases]
        lines.append("| %s | %d | %.2f | %s |" % (name, tunings, total, " | ".join(cells)))
    text = "\n".join(lines) + "\n"
    if args.out_md:
        with open(args.out_md, "w") as out:
            out.write(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
