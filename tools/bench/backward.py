#!/usr/bin/env python3
"""Backward passes of the suite's convolutions: convtune's tuned plans against PyTorch.

For every conv row of a suite file (default bench/suite.json), each
backward pass (backward-data: dx from dy and w; backward-filter: dw from x
and dy) and math mode, side by side in one process with bench.py's timing
helpers:

- PyTorch: torch.ops.aten.convolution_backward with that pass's output
  mask, cudnn.benchmark = True, the TF32 flags per mode;
- convtune: Context(cache, policy).plan(..., direction="bwd_data" |
  "bwd_filter"), then plan.backward_data(dy, w) / plan.backward_filter(x, dy);
- check: relative L2 error of convtune's result against PyTorch's (strict
  1e-4, TF32 1e-2); a row above it FAILs and gets no ratio;
- timing: eager (CUDA events around batches of calls, alternating rounds)
  and graph replays of back-to-back calls, medians.

    python3 tools/bench/backward.py --cache build-gpu/backward-cache.db --out-md BENCHMARKS-backward.md

Ratios are PyTorch time / convtune time.  Exit status: 0 done, 1 a row
failed its check, 2 usage error, 3 no GPU.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_common  # noqa: E402
import bench_env  # noqa: E402
import bench_render  # noqa: E402
import bench_suite  # noqa: E402
import bench_timing  # noqa: E402

DIRECTIONS = ("bwd_data", "bwd_filter")
LIMIT = {"strict": 1e-4, "tf32": 1e-2}


def parse_args(argv: list) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--suite", default="bench/suite.json")
    p.add_argument("--shapes", default=None, help="comma-separated shape names (default: every conv row)")
    p.add_argument("--modes", default="strict,tf32")
    p.add_argument("--directions", default=",".join(DIRECTIONS))
    p.add_argument("--cache", default=None, help="convtune cache (default: the library's)")
    p.add_argument("--policy", default="exhaustive", choices=("exhaustive", "fast", "cache_only"))
    p.add_argument("--tuning-budget-ms", type=float, default=0.0,
                   help="per problem: keep the fastest config found within this much tuning (0: none)")
    p.add_argument("--out-md", default=None)
    p.add_argument("--out-json", default=None)
    p.add_argument("--render", metavar="JSON", default=None,
                   help="only render --out-md from an earlier run's --out-json (no torch, no GPU)")
    return p.parse_args(argv)


def split(text: str) -> list:
    return [t for t in text.split(",") if t.strip()]


def pytorch_pass(shape, direction: str, x, w, dy):
    """The PyTorch call of one pass: aten.convolution_backward with one output."""
    import torch
    mask = [direction == "bwd_data", direction == "bwd_filter", False]
    index = 0 if direction == "bwd_data" else 1
    args = (list(shape.stride), list(shape.pad), list(shape.dil), False, [0, 0], shape.groups, mask)

    def call():
        return torch.ops.aten.convolution_backward(dy, x, w, None, *args)[index]
    return call


def run_row(shape, direction: str, mode: str, context) -> dict:
    import torch
    bench_suite.set_math_mode(mode)
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(shape.N, shape.C, shape.H, shape.W, device="cuda", generator=gen)
    w = torch.randn(shape.K, shape.C // shape.groups, shape.R, shape.S, device="cuda", generator=gen)
    w /= math.sqrt(shape.C // shape.groups * shape.R * shape.S)
    y_shape = torch.nn.functional.conv2d(x[:1], w, None, shape.stride, shape.pad, shape.dil, shape.groups).shape
    dy = torch.randn(shape.N, *y_shape[1:], device="cuda", generator=gen)
    row = {"shape": shape.name, "direction": direction, "mode": mode}
    started = time.perf_counter()
    plan = context.plan(tuple(x.shape), tuple(w.shape), shape.stride, shape.pad, shape.dil, shape.groups,
                        math=mode, direction=direction)
    row["plan_s"] = time.perf_counter() - started
    row["algorithm"] = f"{plan.info['algorithm']} {plan.info['config']}"
    row["source"] = plan.info["source"]
    ours = (lambda: plan.backward_data(dy, w)) if direction == "bwd_data" else (lambda: plan.backward_filter(x, dy))
    theirs = pytorch_pass(shape, direction, x, w, dy)
    row["rel_l2"] = bench_timing.rel_l2(ours(), theirs())
    row["ok"] = row["rel_l2"] <= LIMIT[mode]
    if not row["ok"]:
        return row
    a, b = bench_timing.time_pair(theirs, ours)
    row.update({"pytorch_ms": a.median_ms, "convtune_ms": b.median_ms, "ratio": a.median_ms / b.median_ms})
    ga, gb = bench_timing.time_graph_pair(theirs, ours, a.median_ms, b.median_ms)
    if ga.timing is not None and gb.timing is not None:
        row.update({"pytorch_graph_ms": ga.timing.median_ms, "convtune_graph_ms": gb.timing.median_ms,
                    "graph_ratio": ga.timing.median_ms / gb.timing.median_ms})
    else:
        row["graph_note"] = ga.note or gb.note
    return row


def render(results: dict) -> str:
    env, run = results["environment"], results["run"]
    lines = ["# Backward passes: convtune against PyTorch", "",
             f"Measured {run['date_utc']} on {env.get('gpu')} (driver {env.get('driver')}), "
             f"PyTorch {env.get('torch_version')}, convtune {env.get('convtune_versions')}.", "",
             f"Command: `{run['command']}`", "",
             "Per suite row and pass: PyTorch's `aten.convolution_backward` (benchmark mode) against "
             "convtune's tuned backward plan, on the same `randn` inputs (w scaled by 1/sqrt(fan-in)). "
             "Eager: CUDA events around batches of calls, alternating rounds, median. Graph: replays "
             "of back-to-back calls. Ratios are PyTorch / convtune. rel L2: convtune's result "
             f"against PyTorch's (limits {LIMIT['strict']:g} strict, {LIMIT['tf32']:g} TF32).", ""]
    for direction in DIRECTIONS:
        for mode in ("strict", "tf32"):
            rows = [r for r in results["rows"] if r["direction"] == direction and r["mode"] == mode]
            if not rows:
                continue
            lines += [f"## {direction}, {mode}", ""]
            lines += bench_render.md_table(
                ["shape", "PyTorch ms", "convtune ms", "ratio", "PyTorch graph ms", "convtune graph ms",
                 "graph ratio", "convtune plan", "rel L2"],
                [[r["shape"], bench_render.fmt_ms(r.get("pytorch_ms")), bench_render.fmt_ms(r.get("convtune_ms")),
                  bench_render.fmt_ratio(r.get("ratio")) if r["ok"] else "FAIL",
                  bench_render.fmt_ms(r.get("pytorch_graph_ms")), bench_render.fmt_ms(r.get("convtune_graph_ms")),
                  bench_render.fmt_ratio(r.get("graph_ratio")), r["algorithm"], f"{r['rel_l2']:.1e}"]
                 for r in rows])
            eager = bench_suite.geomean([r["ratio"] for r in rows if "ratio" in r])
            graph = bench_suite.geomean([r["graph_ratio"] for r in rows if "graph_ratio" in r])
            worst = min((r for r in rows if "ratio" in r), key=lambda r: r["ratio"], default=None)
            lines += ["", f"Geomean ratio: eager **{eager:.2f}x**, graph **{graph:.2f}x**"
                      if eager and graph else "Geomean ratio: none", ""]
            if worst:
                lines += [f"Worst row (eager): {worst['shape']} ({worst['ratio']:.2f}x).", ""]
    return "\n".join(lines) + "\n"


def save(results: dict, args: argparse.Namespace) -> None:
    bench_render.save_results(results, args.out_json, args.out_md, render)


def main(argv: list | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    args = parse_args(argv[1:])
    if args.render:
        return bench_render.render_saved(args.render, args.out_md, render)
    try:
        shapes, _ = bench_suite.load_suite(args.suite)
        if args.shapes:
            wanted = set(split(args.shapes))
            shapes = [s for s in shapes if s.name in wanted]
    except bench_common.UsageError as e:
        print(f"backward.py: {e}", file=sys.stderr)
        return 2
    torch, convtune = bench_env.import_or_exit("backward.py")
    torch.backends.cudnn.benchmark = True
    started = time.perf_counter()
    device = torch.cuda.current_device()
    context = convtune.Context(device=device, cache=args.cache, policy=args.policy,
                               tuning_budget_ms=args.tuning_budget_ms)
    rows = []
    results = {"run": {"command": bench_env.command_line(argv, os.environ), "cache": args.cache,
                       "policy": args.policy, "tuning_budget_ms": args.tuning_budget_ms,
                       "elapsed_s": 0.0,
                       "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")},
               "environment": bench_env.gather_environment(convtune, device), "rows": rows}
    for shape in shapes:
        for direction in split(args.directions):
            for mode in split(args.modes):
                if shape.math_mode is not None and shape.math_mode != mode:
                    continue
                row = run_row(shape, direction, mode, context)
                bench_common.log(f"{shape.name} {direction} {mode}: "
                                 + (f"{row.get('ratio', 0):.2f}x eager, {row.get('graph_ratio', 0):.2f}x graph"
                                    if row["ok"] else f"FAIL rel L2 {row['rel_l2']:.2e}")
                                 + f" ({row['algorithm']}, plan {row['plan_s']:.1f} s)")
                rows.append(row)
                results["run"]["elapsed_s"] = time.perf_counter() - started
                save(results, args)
                torch.cuda.empty_cache()
    context.close()
    print(render(results))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
