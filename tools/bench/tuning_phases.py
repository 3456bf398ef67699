"""Sums the tunings' phases in a convtune log (issue 57, item 1): every line
ending "phases (s): setup 0.012, predict 0.000, ..." (the library's INFO line
at the end of each tuning, docs/tuning.md), read from files or stdin, summed
per file, with the number of tunings and each phase's share.  For a model's
first forward, run it with CONVTUNE_LOG=info and its stderr to a file:

    CONVTUNE_LOG=info CONVTUNE_LIB=build/libconvtune.so PYTHONPATH=python \\
        python3 tools/bench/models.py --models resnet50 --batches 16 --modes strict \\
        --tune-only --cache /tmp/fresh-resnet50.db --policy predict 2> resnet50.log
    python3 tools/bench/tuning_phases.py resnet50.log [more.log ...] [--by-rule] [--out-md FILE]

With --by-rule, a second table: each log's tunings and their seconds by how
the default policy chose what to time (the INFO lines around each tuning):
"full" (no prediction: fewer than 3 tuned neighbours, every candidate),
"split" (the neighbours' winners differ in family), "widened", "narrow"
(the neighbours' family's ranked configs), and "unpredicted" (a policy that
does not predict, such as exhaustive).
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


RULES = ("full", "split", "widened", "narrow", "unpredicted")
_TUNED_IN = re.compile(r"tuned in ([0-9.]+) s")


def read_rules(lines):
    """{rule: [tunings, seconds]} of the lines, each tuning counted by the
    INFO lines between its "tuning KEY" and the next one's."""
    totals = {rule: [0, 0.0] for rule in RULES}
    rule, seconds = None, None

    def close():
        if seconds is not None:
            kept = totals[rule or "unpredicted"]
            kept[0] += 1
            kept[1] += seconds

    for line in lines:
        if ": INFO: tuning " in line:
            close()
            rule, seconds = None, None
        elif ": no prediction (" in line:
            rule = "full"
        elif ": prediction split (" in line:
            rule = "split"
        elif ": prediction widened (" in line:
            rule = "widened"
        elif ": predicted from its tuned neighbours" in line and rule is None:
            rule = "narrow"
        else:
            m = _TUNED_IN.search(line)
            if m and "phases (s)" in line:
                seconds = float(m.group(1))
    close()
    return totals


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("logs", nargs="*", help="log files (none: stdin)")
    p.add_argument("--by-rule", action="store_true",
                   help="also each log's tunings and seconds by the policy's rule")
    p.add_argument("--out-md", default=None)
    args = p.parse_args(argv)
    sources = [(path, open(path, encoding="utf-8", errors="replace")) for path in args.logs] or [("stdin", sys.stdin)]
    rows, rules = [], []
    for name, f in sources:
        lines = f.readlines()
        tunings, totals = read_phases(lines)
        rows.append((name, tunings, totals))
        rules.append((name, read_rules(lines)))
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
    if args.by_rule:
        lines += ["", "| log | " + " | ".join("%s: tunings, s" % rule for rule in RULES) + " |",
                  "|---|" + "---|" * len(RULES)]
        for name, totals in rules:
            lines.append("| %s | %s |" % (name, " | ".join("%d, %.2f" % tuple(totals[rule])
                                                          for rule in RULES)))
    text = "\n".join(lines) + "\n"
    if args.out_md:
        with open(args.out_md, "w") as out:
            out.write(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
