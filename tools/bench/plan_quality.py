"""How far the default policy's plans are from the exhaustive search's
(issue 57, item 2), measured on the GPU: tune a model's layers from an empty
cache under the predict policy, copy the cache, then finish its incomplete
tunings exhaustively, which times every config the prediction left out
beside the trials it kept (so both winners' times come from one process):

    CONVTUNE_LIB=build/libconvtune.so PYTHONPATH=python python3 tools/bench/models.py \\
        --models densenet121 --batches 16 --modes tf32 --tune-only --cache P.db --policy predict
    cp P.db F.db
    build/convtune tune --pending --cache F.db --policy exhaustive
    python3 tools/bench/plan_quality.py P.db F.db [--label NAME] [--out-md FILE]

For each problem whose tuning in PREDICTED is incomplete (pending: predicted
from neighbours, or cut short), the ratio of its predicted winner's time to
the finished tuning's winner's time in FINISHED; the problems searched in
full are counted apart (ratio 1 by construction).  Prints the median,
geomean and worst ratio, how many are within 10%, the sum of every
layer's winner's time against the exhaustive winners' sum (each distinct
layer once: a proxy for the model's steady state), and the layers over
10%.
Exit status: 0 done, 2 usage error (a file missing, or no predicted problem).
"""
import argparse
import math
import os
import sqlite3
import statistics
import sys

WITHIN = 1.10


def winners(path):
    """{(problem, device, versions): (time_ms, 'family config')} of a cache's winners."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT problem, device, versions, time_ms, algorithm, config_text "
                          "FROM trials WHERE winner = 1 AND time_ms > 0").fetchall()
    finally:
        db.close()
    return {(p, d, v): (t, f"{a} {c}") for p, d, v, t, a, c in rows}


def pending(path):
    """The keys pending in a cache (its incomplete tunings)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return set(db.execute("SELECT problem, device, versions FROM pending").fetchall())
    finally:
        db.close()


def compare(predicted_path, finished_path):
    """(rows, full_count, summed): rows = [(ratio, problem, predicted plan,
    exhaustive plan)] for the problems predicted in PREDICTED and tuned in
    FINISHED, worst first; summed = the winners' times in PREDICTED summed
    over every problem both hold, over FINISHED's sum."""
    predicted, finished = winners(predicted_path), winners(finished_path)
    incomplete = pending(predicted_path)
    rows, full, sum_pred, sum_full = [], 0, 0.0, 0.0
    for key, (t_pred, plan) in predicted.items():
        if key in finished:
            sum_pred += t_pred
            sum_full += finished[key][0]
        if key not in incomplete:
            full += 1
            continue
        if key not in finished:
            continue
        t_full, best = finished[key]
        rows.append((t_pred / t_full, key[0], plan, best))
    rows.sort(key=lambda r: -r[0])
    return rows, full, sum_pred / sum_full if sum_full > 0 else float("nan")


def summary(label, rows, full, summed):
    ratios = [r[0] for r in rows]
    geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    within = sum(r <= WITHIN for r in ratios)
    return (f"| {label} | {len(ratios)} | {full} | {statistics.median(ratios):.3f} | "
            f"{geomean:.3f} | {ratios[0]:.2f} | {within}/{len(ratios)} | {summed:.3f} |")


def render(results):
    lines = ["| cache | predicted | searched in full | median | geomean | worst | within 10% | "
             "summed |", "|---|---|---|---|---|---|---|---|"]
    lines += [summary(*result) for result in results]
    over = [(label, r) for label, rows, _, _ in results for r in rows if r[0] > WITHIN]
    if over:
        lines += ["", "| cache | ratio | layer | predicted plan | exhaustive plan |",
                  "|---|---|---|---|---|"]
        lines += [f"| {label} | {r[0]:.2f} | {r[1]} | {r[2]} | {r[3]} |" for label, r in over]
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pairs", nargs="+", metavar="PREDICTED FINISHED",
                    help="pairs of caches: predicted, then finished exhaustively")
    ap.add_argument("--label", action="append", default=[],
                    help="a name per pair (default: the predicted file's)")
    ap.add_argument("--out-md", help="also write the tables to this file")
    args = ap.parse_args(argv)
    if len(args.pairs) % 2:
        print("plan_quality: caches come in pairs, PREDICTED FINISHED", file=sys.stderr)
        return 2
    results = []
    for i in range(0, len(args.pairs), 2):
        predicted, finished = args.pairs[i], args.pairs[i + 1]
        for path in (predicted, finished):
            if not os.path.isfile(path):
                print(f"plan_quality: no such cache: {path}", file=sys.stderr)
                return 2
        label = args.label[i // 2] if i // 2 < len(args.label) else os.path.basename(predicted)
        rows, full, summed = compare(predicted, finished)
        if not rows:
            print(f"plan_quality: {predicted}: no predicted problem tuned in {finished}",
                  file=sys.stderr)
            return 2
        results.append((label, rows, full, summed))
    text = render(results)
    sys.stdout.write(text)
    if args.out_md:
        with open(args.out_md, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
