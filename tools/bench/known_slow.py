"""Offline measure of the known-slow rule (issue 57, tuner.h: conv_predict_known_slow) on
caches the tuner wrote, with no GPU: for each search of everything recorded in a cache (a
tuning with 60 or more valid trials; a predicted one has far fewer), in the order the tunings
were made, the configs a rule would have left out, judged only from the tunings before it:
those that ran --floor ms or more and over --factor times the winner on one of the --k
nearest earlier problems of the same kind (tuner/predict.c's kind and distance; with
--same-depthwise, only problems depthwise as the target is, or dense as it is).  It prints,
per cache and rule, how many of the search's trials the rule would have left out, roughly what
their runs cost (each left-out trial's recorded time, twice where it was timed and not
abandoned on its validation run, and 3 ms of set-up), and every left-out config whose time was
within 10% of its search's winner (a plan the rule would have made slower).

    python3 tools/bench/known_slow.py tools/bench/predict-data/first-forwards/*.db.gz [--out-md FILE]

The caches in predict-data/first-forwards are the first forwards of BENCHMARKS-tuning.md's
2026-11-29 table (H200, default policy, fresh caches, each model in its own process), made
with the rule at its first form (3 nearest, 20 ms), so the configs it left out are not in them.
"""
import argparse
import gzip
import os
import shutil
import sqlite3
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from predict_loo import parse_key  # noqa: E402

SEARCH_MIN_TRIALS = 60
# (label, k, floor ms, factor, same depthwise-ness)
RULES = [("3 nearest, 20 ms (the rule's first form)", 3, 20.0, 10.0, False),
         ("3 nearest, 1 ms", 3, 1.0, 10.0, False),
         ("8 nearest of the same depthwise-ness, 20 ms", 8, 20.0, 10.0, True),
         ("8 nearest of the same depthwise-ness, 1 ms (the tuner)", 8, 1.0, 10.0, True),
         ("8 nearest of the same depthwise-ness, 0.2 ms", 8, 0.2, 10.0, True)]


def open_cache(path, tmp):
    """A sqlite connection to path, a .gz file unpacked into tmp first."""
    if path.endswith(".gz"):
        plain = os.path.join(tmp, os.path.basename(path)[:-3])
        with gzip.open(path) as src, open(plain, "wb") as dst:
            shutil.copyfileobj(src, dst)
        path = plain
    return sqlite3.connect(path)


def tunings_in_order(db):
    """[(problem key, [trial dicts])], in the order the tunings were made (first row id)."""
    order, trials = [], {}
    for problem, algo, config, status, reason, ms, winner in db.execute(
            "SELECT problem, algorithm_id, config, status, reason, time_ms, winner FROM trials ORDER BY id"):
        if problem not in trials:
            order.append(problem)
            trials[problem] = []
        trials[problem].append({"config": (algo, config), "ok": status == 0, "reason": reason,
                                "ms": ms, "winner": bool(winner)})
    return [(p, trials[p]) for p in order]


def known_slow(target, earlier, k, floor, factor, same_depthwise):
    """The configs the rule leaves out of target's search, from the tunings before it."""
    kind, features = parse_key(target)
    near = []
    for problem, trials in earlier:
        other_kind, other = parse_key(problem)
        if other_kind != kind or (same_depthwise and (other[-1] > 0) != (features[-1] > 0)):
            continue
        near.append((sum((a - b) ** 2 for a, b in zip(features, other)), problem, trials))
    near.sort(key=lambda n: n[0])
    slow = set()
    for _, _, trials in near[:k]:
        winner = [t["ms"] for t in trials if t["winner"]]
        if not winner:
            continue
        slow.update(t["config"] for t in trials
                    if t["ok"] and t["ms"] and t["ms"] >= floor and t["ms"] > factor * winner[0])
    return slow


def measure(tunings, k, floor, factor, same_depthwise):
    """(trials left out, seconds they cost, [left-out configs within 10% of their winner])."""
    left_out, cost_ms, harmful = 0, 0.0, []
    for i, (problem, trials) in enumerate(tunings):
        if sum(t["ok"] for t in trials) < SEARCH_MIN_TRIALS:
            continue
        slow = known_slow(problem, tunings[:i], k, floor, factor, same_depthwise)
        timed = [t["ms"] for t in trials if t["ok"] and t["ms"] and not t["reason"].startswith("abandoned")]
        best = min(timed) if timed else None
        for t in trials:
            if t["config"] not in slow or not t["ok"] or not t["ms"]:
                continue
            left_out += 1
            cost_ms += t["ms"] * (1 if "validation run" in t["reason"] else 2) + 3.0
            if best and t["ms"] <= 1.1 * best and not t["reason"].startswith("abandoned"):
                harmful.append("%s: %s at %.4f ms, winner %.4f ms" % (problem, t["config"], t["ms"], best))
    return left_out, cost_ms / 1e3, harmful


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("caches", nargs="+", help="tuner-written cache files (.db or .db.gz)")
    p.add_argument("--out-md", default=None)
    args = p.parse_args(argv)
    lines = ["| cache | rule | trials left out | their runs, about | left out within 10% of the winner |",
             "|---|---|---|---|---|"]
    harmful_all = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in args.caches:
            tunings = tunings_in_order(open_cache(path, tmp))
            for label, k, floor, factor, same in RULES:
                n, seconds, harmful = measure(tunings, k, floor, factor, same)
                lines.append("| %s | %s | %d | %.1f s | %d |" % (os.path.basename(path), label, n, seconds,
                                                                  len(harmful)))
                harmful_all += ["%s, %s: %s" % (os.path.basename(path), label, h) for h in harmful]
    text = "\n".join(lines + [""] + harmful_all) + "\n"
    if args.out_md:
        with open(args.out_md, "w") as f:
            f.write(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
