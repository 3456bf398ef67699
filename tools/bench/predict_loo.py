"""Leave-one-out measure of choosing candidates for an unseen shape from its
tuned neighbours (issue 21, item 4), on a cache's own exhaustive trials, with
no GPU: for each tuned shape S, the k nearest other shapes (same op,
direction, math, layout, device, versions) give their winners' configs; the
"prediction" times only those of them that S's own tuning also timed, and
picks the fastest (--by config); or, --by family, times every config of the
neighbours' winning families; or, --by ranked, times the --top configs of
those families that ran fastest on the neighbours (each config scored by
its mean log slowdown against each neighbour's winner, a neighbour that did
not time it counting as --missing-slowdown), plus cuDNN's heuristic pick;
or, --by per-family, the --top fastest configs of each of those families.
With --fallback disagree, a shape whose neighbours' winners are not all of
one family runs the full search (counted as exact, at its full cost);
with --fallback widen, each of their families' ranked configs, widened
(the tuner's split prediction since 2026-11-29, tuner/widen.c);
with --fallback own (its split before), those, cuDNN's ranked configs and
every config of every other family.  --cudnn-guesses replays
im2col_gemm's marked guesses too (its whole batch's first 8 cuBLASLt
algorithms on 1x1 layers, timed by every prediction since 2026-11-29),
read from the configs' text (tools/bench/plan_quality.py measures the
tuner itself on a GPU).  With
--few widen (--sequential), a shape with 1 to k-1 tuned shapes of its kind
before it is predicted from them as a disagreeing one is, where by default
(--few full) it runs the full search.
With --widen (as tuner/widen.c, CONV_POLICY_PREDICT today): where the
neighbours are far (the farthest over 16 in the squared log2 distance), the
shape is outside their range by over 4x (filter taps, channels in and out,
output pixels, channels per group, depthwise or not) or their FFT winners
differ in shape (whole image against tiles, or tile sizes), every family's
first 3 configs are timed too; a family's first configs are read as its
first 3 trials in the cache's row order (an exhaustive tuning times each
family's configs in the family's own order, its first three first).  Since
the finalists (c6d8e4c, 2026-11-29: the two fastest screens, timed in full
last) are stored after every other config of their tuning, a finalist that
was among its family's first configs is not read as one: --widen then
under-counts (fft_few_ch_31: FFT's 560x560 kernel-product config, 2nd in
its list and the winner, read as last; 2.03x here, within 10% on the GPU).
--cudnn-guesses also adds every family's marked best guesses (marked_guesses).  That order is
only in a cache the tuner wrote: `convtune merge` and `export` copy a
tuning's rows winner first, then fastest first, so in their files each
family's "first" trials are its fastest and --widen and --cudnn-guesses
would pick the winner by construction.  Such a cache is detected (the
winner is the first row of nearly every tuning) and refused for those two
options.
Compared with S's exhaustive winner: within 10%?  A shape none of whose
neighbours' picks applies to it would fall back to the full search.
With --sequential, not leave-one-out but the tuner's own course: the shapes
in the order they were tuned (their first trial's tuned_at, which merges
keep; then row order), from an empty cache, each
predicted only from the shapes before it and only from what their own
tunings timed (a predicted shape's trials are its picks alone; one with
fewer than k neighbours of its kind, or a full search, times everything),
so that predictions made from predictions are measured too.

    CONVTUNE_LIB=build/libconvtune.so PYTHONPATH=python \
        python3 tools/bench/predict_loo.py CACHE [--k 3] [--by config|family|ranked|per-family]
        [--top N] [--own-top N] [--cudnn-guesses N] [--fallback none|disagree|widen|own]
        [--few full|widen] [--widen] [--sequential] [--out-md FILE]
"""
import argparse
import math
import re
import sqlite3
import sys

_FIELDS = re.compile(r"n(\d+) c(\d+) h(\d+) w(\d+) k(\d+) r(\d+) s(\d+) pad(\d+),(\d+) str(\d+),(\d+) "
                     r"dil(\d+),(\d+) g(\d+)")


def parse_key(key):
    """(class, features) of a problem key: what must match, and log2 sizes."""
    words = key.split()
    dynamic = words[0] == "dyn"
    if dynamic:
        words = words[1:]
    direction, dtype, layout, math_mode, epilogue = words[:5]
    m = _FIELDS.search(key)
    n, c, h, w, k, r, s, ph, pw, sh, sw, dh, dw, g = (int(v) for v in m.groups())
    # As tuner/predict.c's same_kind: the element type and the filters'
    # order (a K R S C twin, "krsc") are part of the kind.
    cls = (dynamic, direction, dtype, layout, "krsc" in words, math_mode, epilogue != "none",
           "det" in words)
    depthwise = float(g == c and g > 1)
    # As tuner/predict.c: stride counts double, a depthwise flag triple.
    features = ([math.log2(v) for v in (n, c, h, w, k, r, s)] + [2 * math.log2(sh), math.log2(dh)]
                + [math.log2(c // g), 3 * depthwise])
    return cls, features


def key_fields(key):
    """The sizes the widening rules read: (direction, dict of fields)."""
    words = key.split()
    if words[0] == "dyn":
        words = words[1:]
    m = _FIELDS.search(key)
    n, c, h, w, k, r, s, ph, pw, sh, sw, dh, dw, g = (int(v) for v in m.groups())
    p = (h + 2 * ph - dh * (r - 1) - 1) // sh + 1
    q = (w + 2 * pw - dw * (s - 1) - 1) // sw + 1
    return words[0], {"n": n, "c": c, "h": h, "w": w, "k": k, "r": r, "s": s, "p": p, "q": q, "g": g}


FAR, RANGE_FACTOR, FFT_FAMILIES = 16.0, 4.0, (3, 14)


def fft_class(key, values):
    if len(values) < 2:  # as widen.c: not an FFT config (disagreeing neighbours)
        return -1
    direction, f = key_fields(key)
    out_h, out_w = (f["h"], f["w"]) if direction == "bwd_data" else (f["p"], f["q"])
    if values[0] >= out_h + f["r"] - 1 and values[1] >= out_w + f["s"] - 1:
        return 0
    return (values[0], values[1])


def widen_reason(target, neighbours):
    """tuner/widen.c's rules, once the neighbours agree on a family: why the
    prediction is widened, or None."""
    tf = target["features"]
    farthest = max(sum((a - b) ** 2 for a, b in zip(tf, o["features"])) for o in neighbours)
    if farthest > FAR:
        return "far (%.1f)" % farthest

    def axes(key):
        _, f = key_fields(key)
        return {"taps": f["r"] * f["s"], "c": f["c"], "k": f["k"], "pixels": f["p"] * f["q"],
                "c_per_group": f["c"] // f["g"]}

    def depthwise(key):
        _, f = key_fields(key)
        return f["g"] == f["c"] and f["g"] > 1

    mine, theirs = axes(target["key"]), [axes(o["key"]) for o in neighbours]
    for axis, v in mine.items():
        lo, hi = min(t[axis] for t in theirs), max(t[axis] for t in theirs)
        if v > hi * RANGE_FACTOR or v * RANGE_FACTOR < lo:
            return "range (%s)" % axis
    if all(depthwise(o["key"]) != depthwise(target["key"]) for o in neighbours):
        return "range (depthwise)"
    if neighbours[0]["winner"][0] in FFT_FAMILIES:
        if len({fft_class(o["key"], o["winner"][1]) for o in neighbours}) > 1:
            return "classes"
    return None


def first_configs(db, shape, per_family=3):
    """Each family's first `per_family` trials of the shape in the cache's
    row order, as config ids (matched by their text)."""
    by_text = shape["by_text"]
    rows = db.execute("SELECT algorithm_id, config_text FROM trials WHERE problem = ? AND device = ? "
                      "AND versions = ? ORDER BY id", (shape["key"], shape["group"][1], shape["group"][2]))
    seen, picks = {}, set()
    for algorithm_id, text in rows:
        if seen.get(algorithm_id, 0) >= per_family:
            continue
        seen[algorithm_id] = seen.get(algorithm_id, 0) + 1
        if (algorithm_id, text) in by_text:
            picks.add(by_text[(algorithm_id, text)])
    return picks


_WINOGRAD_LAYER = re.compile(r"^fwd f32 \S+ strict \S+ n\d+ c\d+ h\d+ w\d+ k\d+ r3 s3 pad\d+,\d+ "
                             r"str1,1 dil1,1 g1$")


_ONE_BY_ONE_LAYER = re.compile(r"^fwd \S+ nchw \S+ \S+ n(\d+) c\d+ h\d+ w\d+ k\d+ r1 s1 pad0,0 "
                               r"str\d+,\d+ dil\d+,\d+ g1$")
IM2COL_ALGOS_GUESSED = 8  # im2col_gemm.c's IM2COL_GEMM_ALGOS_GUESSED


_FORWARD_NCHW = re.compile(r"^fwd f32 nchw \S+ \S+ n(\d+) c(\d+) h(\d+) w(\d+) k(\d+) r(\d+) "
                           r"s(\d+) pad(\d+),(\d+) str(\d+),(\d+) dil(\d+),(\d+) g(\d+)$")
_SM_COUNT = re.compile(r"\|(\d+)sm\|")
# channel_split.c's channel_split_guessed (the first CHANNEL_SPLIT_MARKED
# marked), CHANNEL_SPLIT_WAVES and CHANNEL_SPLIT_LEAST_CHANNELS, and the
# limits of channel_split.h / .cu that decide whether a config plans.
CHANNEL_SPLIT_MARKED = ((64, 2), (32, 1))
CHANNEL_SPLIT_WAVES, CHANNEL_SPLIT_LEAST_CHANNELS = 4, 4
_SPLIT_COUNTS = (1, 2, 4, 8, 16, 32, 64)
_SPLIT_MAX_THREADS, _SPLIT_STAGE_FLOATS, _SPLIT_MAX_PIXELS = 256, 8192, 8192


def channel_split_blocks(key, k_tile, pixels, splits):
    """The blocks channel_split's config launches for forward NCHW problem
    `key`, or None where conv_split_plan refuses it (channel_split.cu)."""
    m = _FORWARD_NCHW.match(key)
    if not m:
        return None
    n, c, h, w, k, r, s, ph, pw, sh, sw, dh, dw, g = map(int, m.groups())
    p = (h + 2 * ph - dh * (r - 1) - 1) // sh + 1
    q = (w + 2 * pw - dw * (s - 1) - 1) // sw + 1
    if g != 1 or k < 8 or p < 1 or q < 1 or n * p * q > _SPLIT_MAX_PIXELS or not 1 <= splits <= c:
        return None
    per_split = -(-c // splits)
    if (splits - 1) * per_split >= c:
        return None
    pixel_threads = _SPLIT_MAX_THREADS // (k_tile // 8)
    tx = min(-(-q // pixels), pixel_threads)
    ty = min(p, pixel_threads // tx)
    if pixels > 1 and tx * (pixels - 1) >= q:
        return None
    window = ((ty - 1) * sh + (r - 1) * dh + 1) * ((tx * pixels - 1) * sw + (s - 1) * dw + 1)
    if _SPLIT_STAGE_FLOATS // (r * s * (k_tile + 4) + window) < 1:
        return None
    grid_k, grid_z = -(-k // k_tile), n * splits
    if grid_k > 65535 or grid_z > 65535:
        return None
    return -(-q // (tx * pixels)) * -(-p // ty) * grid_k * grid_z


def channel_split_guesses(key, sm_count):
    """channel_split's marked configs' texts for `key` (channel_split.c's
    channel_split_filling): per guessed tiling, the splits whose blocks come
    nearest CHANNEL_SPLIT_WAVES per SM by ratio, fewer on a tie, each split
    summing CHANNEL_SPLIT_LEAST_CHANNELS input channels or more."""
    m = _FORWARD_NCHW.match(key)
    if not m:
        return []
    c = int(m.group(2))
    target = CHANNEL_SPLIT_WAVES * max(sm_count, 1)
    texts = []
    for k_tile, pixels in CHANNEL_SPLIT_MARKED:
        best = None
        for splits in _SPLIT_COUNTS:
            blocks = channel_split_blocks(key, k_tile, pixels, splits)
            if blocks is None or (splits > 1 and -(-c // splits) < CHANNEL_SPLIT_LEAST_CHANNELS):
                continue
            off = max(blocks / target, target / blocks)
            if best is None or off < best[0]:
                best = (off, splits)
        if best:
            texts.append(f"k_tile={k_tile} pixels={pixels} splits={best[1]}")
    return texts


def marked_guesses(shape):
    """The configs the families mark as best guesses (CONV_CONFIG_BEST_GUESS;
    a cache does not store the flag), which every prediction times: cuDNN's
    Winograd engines 4 and 6, default configs, on strict fp32 forward 3x3
    stride-1 dense layers (cudnn_configs.c's config_low_ranked_winner),
    im2col_gemm's whole batch's first 8 cuBLASLt algos on 1x1 dense NCHW
    forward layers (im2col_gemm.c's im2col_gemm_guessed_algos), and
    channel_split's two GPU-filling configs (channel_split_guesses; the
    SM count read from the device key, 132 where it has none)."""
    by_text, key = shape["by_text"], shape["key"]
    texts = []
    if _WINOGRAD_LAYER.match(key):
        texts += [(CUDNN, "engine=4"), (CUDNN, "engine=6")]
    one_by_one = _ONE_BY_ONE_LAYER.match(key)
    if one_by_one:
        n = one_by_one.group(1)
        texts += [(IM2COL_GEMM, f"batch={n} gemm_algo={a}") for a in range(IM2COL_ALGOS_GUESSED)]
    sm = _SM_COUNT.search(shape.get("group", (None, ""))[1] or "")
    texts += [(CHANNEL_SPLIT, t) for t in channel_split_guesses(key, int(sm.group(1)) if sm else 132)]
    return {by_text[t] for t in texts if t in by_text}


def rows_in_merge_order(db):
    """Whether the winner is the first row of nearly every tuning: the order
    `convtune merge` and `export` write (winner first, then fastest first),
    where a tuner's own cache lists configs as it timed them."""
    first_is_winner, tunings = db.execute(
        "WITH firsts AS (SELECT min(id) AS id FROM trials GROUP BY problem, device, versions) "
        "SELECT coalesce(sum(t.winner <> 0), 0), count(*) FROM firsts f JOIN trials t ON t.id = f.id"
    ).fetchone()
    return tunings >= 10 and first_is_winner >= 0.9 * tunings


def nearest(target, others, k):
    tf = target["features"]
    scored = sorted(others, key=lambda o: sum((a - b) ** 2 for a, b in zip(tf, o["features"])))
    return scored[:k]


def config_id(trial):
    return trial["algorithm_id"], tuple(trial["config_values"])


CUDNN = 1  # CONV_ALGO_CUDNN
IM2COL_GEMM = 2  # CONV_ALGO_IM2COL_GEMM
CHANNEL_SPLIT = 7  # CONV_ALGO_CHANNEL_SPLIT


def ranked_picks(shape, neighbours, top, missing_slowdown, per_family=False, own_top=None,
                 families=None):
    """The `top` configs of the neighbours' winning families that ran fastest
    on the neighbours (mean log slowdown against each one's winner), among
    those this shape's enumeration offers (its own trials stand for that),
    or the `top` of each family (per_family; `own_top` of each family but
    cuDNN's where given, as tuner.h's conv_predict_configs_for); plus
    cuDNN's heuristic pick, which costs nothing to know."""
    families = families or {o["winner"][0] for o in neighbours}
    def score(c):
        return sum(math.log(o["timed"][c] / o["winner_ms"]) if c in o["timed"] else math.log(missing_slowdown)
                   for o in neighbours) / max(1, len(neighbours))
    picks = set(shape["heuristic"])
    for group in ([{f} for f in families] if per_family else [families]):
        offered = [c for c in shape["timed"] if c[0] in group]
        n = top if own_top is None or not per_family or CUDNN in group else own_top
        picks.update(sorted(offered, key=score)[:n])
    return picks


def full_search_row(shape, peers):
    """A shape the tuner searches in full: every config timed, its winner exact."""
    return {"key": shape["key"], "peers": len(peers), "candidates": len(shape["timed"]),
            "usable": len(shape["timed"]), "winner_ms": shape["winner_ms"],
            "predicted_ms": shape["winner_ms"], "ratio": 1.0, "configs": len(shape["timed"]),
            "full": True}


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("cache")
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--by", choices=("config", "family", "ranked", "per-family"), default="config")
    p.add_argument("--top", type=int, default=8,
                   help="--by ranked: configs timed besides cuDNN's pick; --by per-family: a family")
    p.add_argument("--cudnn-guesses", type=int, default=0,
                   help="--by ranked / per-family: cuDNN's first N configs too (its heuristics' "
                        "ranking; the tuner's 3), read as --widen reads a family's first configs")
    p.add_argument("--own-top", type=int, default=None,
                   help="--by per-family: configs of each family but cuDNN (default: --top); the "
                        "tuner's CONV_PREDICT_OWN_CONFIGS")
    p.add_argument("--fallback", choices=("none", "disagree", "widen", "own"), default="none",
                   help="disagree: the full search where the neighbours' winners differ in family; "
                        "widen: each of their families' ranked configs, widened (--widen); own: "
                        "those, cuDNN's ranked configs and every config of every other family")
    p.add_argument("--few", choices=("full", "widen"), default="full",
                   help="--sequential: a shape with 1 to k-1 tuned shapes of its kind before it is "
                        "searched in full (full), or predicted from them, widened (widen)")
    p.add_argument("--missing-slowdown", type=float, default=2.0,
                   help="--by ranked: the slowdown a neighbour that did not time a config counts as")
    p.add_argument("--drop-abandoned", action="store_true",
                   help="leave out trials the exhaustive tuning abandoned after 1-2 runs (by default "
                        "they count at those runs' time, as the tuner's ranking counts them)")
    p.add_argument("--widen", action="store_true",
                   help="as the tuner: every family's first 3 configs too where the neighbours are far, "
                        "out of range or of different FFT shapes (--by ranked / per-family)")
    p.add_argument("--sequential", action="store_true",
                   help="the shapes in the cache's order from an empty cache, each predicted from "
                        "what the tunings before it timed (--by ranked / per-family)")
    p.add_argument("--out-md", default=None)
    args = p.parse_args(argv)
    import convtune  # here: known_slow.py reads parse_key without the library

    shapes = []
    order = {}
    if args.sequential:
        with sqlite3.connect("file:%s?mode=ro" % args.cache, uri=True) as first:
            for problem, device, versions, tuned_at, row in first.execute(
                    "SELECT problem, device, versions, min(tuned_at), min(id) FROM trials "
                    "GROUP BY 1, 2, 3"):
                order[(problem, device, versions)] = (tuned_at, row)
    for w in convtune.cache_winners(args.cache):
        cls, features = parse_key(w["problem"])
        mine = [t for t in convtune.cache_trials(w["problem"], args.cache)
                if t["device"] == w["device"] and t["versions"] == w["versions"]]
        timed = {config_id(t): t["time_ms"] for t in mine
                 if t["time_ms"] is not None and t["status"] == "OK"
                 and not (args.drop_abandoned and t["reason"].startswith("abandoned"))}
        heuristic = [config_id(t) for t in mine if t["heuristic_pick"]]
        by_text = {(t["algorithm_id"], t["config"]): config_id(t) for t in mine}
        shapes.append({"key": w["problem"], "group": (cls, w["device"], w["versions"]), "features": features,
                       "winner": config_id(w), "winner_ms": w["time_ms"], "timed": timed,
                       "heuristic": heuristic, "by_text": by_text,
                       "order": order.get((w["problem"], w["device"], w["versions"]), ("", 0))})
    if args.sequential:
        shapes.sort(key=lambda x: x["order"])
    db = (sqlite3.connect("file:%s?mode=ro" % args.cache, uri=True)
          if args.widen or args.cudnn_guesses else None)
    if db is not None and rows_in_merge_order(db):
        print("predict_loo: %s lists each tuning's winner first (a merged or exported cache): "
              "its row order is not the tuner's, so --widen and --cudnn-guesses cannot read a "
              "family's first configs from it; use a cache the tuner wrote" % args.cache,
              file=sys.stderr)
        return 2
    widened = 0
    rows = []
    done = []  # --sequential: the shapes tuned so far, as the cache then holds them
    for s in shapes:
        if args.sequential:
            peers = [o for o in done if o["group"] == s["group"]]
        else:
            peers = [o for o in shapes if o is not s and o["group"] == s["group"]]
        winners = [o["winner"] for o in nearest(s, peers, args.k)]
        few = len(peers) < args.k and not (args.few == "widen" and peers)
        if args.sequential and (few or (
                args.fallback == "disagree" and len({family for family, _ in winners}) > 1)):
            done.append(s)  # a full search: every config timed, its winner exact
            rows.append(full_search_row(s, peers))
            continue
        if args.fallback == "disagree" and len({family for family, _ in winners}) > 1:
            rows.append(full_search_row(s, peers))
            continue
        if args.by == "config":
            picks = set(winners)
            usable = {c: s["timed"][c] for c in picks if c in s["timed"]}
        elif args.by == "family":
            picks = {family for family, _ in winners}
            usable = {c: ms for c, ms in s["timed"].items() if c[0] in picks}
        else:
            near = nearest(s, peers, args.k)
            picks = ranked_picks(s, near, args.top, args.missing_slowdown,
                                 per_family=args.by == "per-family", own_top=args.own_top)
            if args.cudnn_guesses:
                picks |= {c for c in first_configs(db, s, per_family=args.cudnn_guesses)
                          if c[0] == CUDNN} | marked_guesses(s)
            disagree = len({family for family, _ in winners}) > 1
            if args.widen and (len(near) < args.k or (args.fallback in ("widen", "own") and disagree)
                               or widen_reason(s, near) is not None):
                picks |= first_configs(db, s)
                widened += 1
            if args.fallback == "own" and (disagree or len(near) < args.k):
                picks |= {c for c in s["timed"] if c[0] != CUDNN}
                picks |= ranked_picks(s, near, args.top, args.missing_slowdown, per_family=True,
                                      own_top=args.own_top, families={CUDNN})
            usable = {c: s["timed"][c] for c in picks if c in s["timed"]}
        best = min(usable.values()) if usable else None
        if args.sequential:
            # What the cache now holds of s: its picks' trials, its winner the best of them.
            seen = dict(usable)
            best_pick = min(seen, key=seen.get) if seen else s["winner"]
            done.append(dict(s, timed=seen or dict(s["timed"]), winner=best_pick,
                             winner_ms=best if best else s["winner_ms"]))
        rows.append({"key": s["key"], "peers": len(peers), "candidates": len(picks), "usable": len(usable),
                     "winner_ms": s["winner_ms"], "predicted_ms": best,
                     "ratio": best / s["winner_ms"] if best else None, "configs": len(s["timed"]),
                     "full": False})
    predicted = [r for r in rows if r["ratio"] is not None]
    within = [r for r in predicted if r["ratio"] <= 1.10]
    lines = ["| shape | configs timed by the full search | neighbours' configs that apply | predicted ms | "
             "exhaustive ms | predicted / exhaustive |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %s | %d | %d of %d | %s | %.4f | %s |" % (
            r["key"], r["configs"], r["usable"], r["candidates"],
            "%.4f" % r["predicted_ms"] if r["predicted_ms"] else "- (full search)", r["winner_ms"],
            "%.2fx" % r["ratio"] if r["ratio"] else "-"))
    summary = ("%d shapes; %d predicted (the rest fall back to the full search), %d of them (%.0f%%) "
               "within 10%% of the exhaustive winner, timing %.1f configs on average instead of %.1f"
               % (len(rows), len(predicted), len(within), 100.0 * len(within) / max(1, len(predicted)),
                  sum(r["usable"] for r in predicted) / max(1, len(predicted)),
                  sum(r["configs"] for r in rows) / max(1, len(rows))))
    if args.fallback != "none":
        summary += "; %d of them full searches" % sum(r["full"] for r in rows)
    if args.widen:
        summary += "; %d widened" % widened
    if predicted:
        ratios = sorted(r["ratio"] for r in predicted)
        summary += "; predicted / exhaustive: median %.3fx, worst %.3fx" % (
            ratios[len(ratios) // 2], ratios[-1])
    text = "\n".join(lines + ["", summary]) + "\n"
    if args.out_md:
        with open(args.out_md, "w") as f:
            f.write(text)
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
