#!/usr/bin/env python3
"""Dynamic (per-pixel) convolution rows of the suite: convtune.dynamic_conv2d against PyTorch's unfold + einsum.

For every row of a suite file whose "op" is "dynamic" (default
bench/suite.json: seed4_highorder, involution_7x7), in each math mode, side
by side in one process with bench.py's timing helpers:

- PyTorch: F.unfold, then torch.einsum of the unfolded input with the
  per-pixel weights (fp32 tensors, the TF32 flags per mode), what a user
  writes; its autograd gives the gradients;
- convtune: convtune.dynamic_conv2d(x, weights, stride, dilation,
  math=mode, context=Context(cache, policy)), differentiable through its
  tuned backward-data and backward-filter plans;
- forward: eager (CUDA events around batches of calls, alternating rounds,
  median) and graph replays of back-to-back calls;
- backward: both gradients together as autograd runs them,
  torch.autograd.grad(y, (x, weights), dy, retain_graph=True) on a y made
  once, so that only the backward is timed (eager);
- memory: the peak bytes one forward call holds beyond its inputs and
  output (torch.cuda.max_memory_allocated), and convtune's plan workspace,
  which the library allocates outside PyTorch's allocator;
- floor: the bytes a pass must move at least (forward x + weights + y;
  backward x + weights + dy read, dx + dweights written) at the measured
  device-to-device copy rate, and the fraction of it each library reaches;
- check: relative L2 of convtune's y, dx and dweights against PyTorch's
  (1e-4 strict, 1e-2 TF32); a row above it FAILs and gets no ratio.

    python3 tools/bench/dynamic.py --cache build-gpu/dynamic-cache.db --out-md BENCHMARKS-dynamic.md

The JSON goes beside --out-md unless --out-json names it.  Ratios are
PyTorch time / convtune time.  Exit status: 0 done, 1 a row failed its
check, 2 usage error, 3 no GPU.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_common  # noqa: E402
import bench_env  # noqa: E402
import bench_render  # noqa: E402
import bench_suite  # noqa: E402
import bench_timing  # noqa: E402

MIB = 1 << 20


@dataclass(frozen=True)
class DynamicShape:
    """One "op": "dynamic" row: x (N, C, H, W), a k x k window, G groups."""

    name: str
    N: int
    C: int
    H: int
    W: int
    k: int
    stride: int = 1
    dil: int = 1
    groups: int = 1

    @property
    def out_hw(self) -> tuple:
        return -(-self.H // self.stride), -(-self.W // self.stride)

    def elements(self) -> dict:
        p, q = self.out_hw
        return {"x": self.N * self.C * self.H * self.W, "weights": self.N * self.groups * self.k ** 2 * p * q,
                "y": self.N * self.C * p * q}


def _equal_pair(row: dict, key: str, where: str) -> int:
    a, b = bench_suite._pair_field(row, key, where, 1)
    if a != b:
        raise bench_common.UsageError(f"{where}: a dynamic row's {key} must be equal in h and w")
    return a


def parse_dynamic_rows(doc, names: str | None) -> list:
    """The suite's dynamic rows (all, or those named in a comma-separated list)."""
    rows = doc.get("shapes") if isinstance(doc, dict) else doc
    if not isinstance(rows, list):
        raise bench_common.UsageError('a suite is {"shapes": [ROW, ...]} or [ROW, ...]')
    shapes = []
    for index, row in enumerate(rows):
        if not isinstance(row, dict) or row.get("op") != "dynamic":
            continue
        where = f"row {index} ({row.get('name')})"
        dims = {key: bench_suite._int_field(row, key, where) for key in ("N", "C", "H", "W", "R")}
        if row.get("S", dims["R"]) != dims["R"]:
            raise bench_common.UsageError(f"{where}: a dynamic row's window is square (R = S)")
        shapes.append(DynamicShape(name=str(row.get("name")), N=dims["N"], C=dims["C"], H=dims["H"],
                                   W=dims["W"], k=dims["R"], stride=_equal_pair(row, "stride", where),
                                   dil=_equal_pair(row, "dil", where),
                                   groups=bench_suite._int_field(row, "groups", where, 1)))
    wanted = [n for n in (names or "").split(",") if n.strip()]
    unknown = sorted(set(wanted) - {s.name for s in shapes})
    if unknown:
        raise bench_common.UsageError(f"no dynamic row named {', '.join(unknown)} in the suite")
    return [s for s in shapes if not wanted or s.name in wanted]


def pytorch_dynamic(s: DynamicShape) -> dict:
    """The PyTorch versions a user writes, by name: unfold, then a product
    with the weights summed over the k*k taps (the anchors' form, and the
    involution authors'), or an einsum over them.  Each row is timed
    against the faster, per pass."""
    import torch
    import torch.nn.functional as F
    p, q = s.out_hw
    kk = s.k * s.k

    def unfolded(x):
        u = F.unfold(x, s.k, dilation=s.dil, padding=(s.k - 1) // 2 * s.dil, stride=s.stride)
        return u.view(s.N, s.groups, s.C // s.groups, kk, p * q)

    def mul_sum(x, weights):
        y = (unfolded(x) * weights.view(s.N, s.groups, 1, kk, p * q)).sum(dim=3)
        return y.view(s.N, s.C, p, q)

    def einsum(x, weights):
        y = torch.einsum("bgckl,bgkl->bgcl", unfolded(x), weights.view(s.N, s.groups, kk, p * q))
        return y.reshape(s.N, s.C, p, q)
    return {"unfold+mul": mul_sum, "unfold+einsum": einsum}


def faster(forms: dict) -> tuple:
    """(name, call, {name: ms}) of the fastest of forms {name: call}, by a
    short timing of each (the full one follows, against convtune's)."""
    times = {name: bench_timing.time_gpu(fn, cap_ms=200.0).median_ms for name, fn in forms.items()}
    name = min(times, key=times.get)
    return name, forms[name], times


def convtune_dynamic(s: DynamicShape, convtune, mode: str, context):
    def call(x, weights):
        return convtune.dynamic_conv2d(x, weights, s.stride, s.dil, s.groups, math=mode, context=context)
    return call


def make_inputs(s: DynamicShape) -> tuple:
    """x, weights (scaled by 1/k so that y stays O(1)) and dy, randn, fp32 CUDA."""
    import torch
    gen = torch.Generator(device="cuda").manual_seed(0)
    p, q = s.out_hw
    x = torch.randn(s.N, s.C, s.H, s.W, device="cuda", generator=gen)
    weights = torch.randn(s.N, s.groups, s.k * s.k, p, q, device="cuda", generator=gen).div_(s.k)
    dy = torch.randn(s.N, s.C, p, q, device="cuda", generator=gen)
    return x, weights, dy


def forward_extra_bytes(fn) -> int:
    """Peak bytes one call holds in PyTorch's allocator beyond what was
    allocated before it (its inputs, among others) and its output."""
    import torch
    torch.cuda.synchronize()
    bench_timing.empty_cache_if_safe()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    y = fn()
    torch.cuda.synchronize()
    extra = torch.cuda.max_memory_allocated() - base - y.numel() * y.element_size()
    del y
    return extra


def gradients(fn, x, weights, dy):
    """(y, a call giving (dx, dweights) from y's retained graph): the backward alone."""
    import torch
    xg, wg = x.detach().requires_grad_(), weights.detach().requires_grad_()
    y = fn(xg, wg)
    return y, lambda: torch.autograd.grad(y, (xg, wg), dy, retain_graph=True)


def check(row: dict, mode: str, theirs: tuple, ours: tuple) -> None:
    """rel L2 of convtune's y, dx, dweights against PyTorch's; row["ok"]."""
    errors = [bench_timing.rel_l2(a, b) for a, b in zip(ours, theirs)]
    for name, err in zip(("y", "dx", "dweights"), errors):
        row[f"rel_l2_{name}"] = err
    row["rel_l2"] = worst(errors)
    row["ok"] = all(bench_timing.within_limit(err, mode) for err in errors)


def worst(errors: list) -> float:
    """The largest error; NaN where any is NaN or missing (a JSON null)."""
    if any(e is None or math.isnan(e) for e in errors):
        return math.nan
    return max(errors)


def time_pass(row: dict, prefix: str, theirs, ours, graph: bool, floor_ms: float) -> None:
    a, b = bench_timing.time_pair(theirs, ours)
    row.update({f"{prefix}_pytorch_ms": a.median_ms, f"{prefix}_convtune_ms": b.median_ms,
                f"{prefix}_ratio": a.median_ms / b.median_ms, f"{prefix}_floor_ms": floor_ms,
                f"{prefix}_pytorch_floor": floor_ms / a.median_ms,
                f"{prefix}_convtune_floor": floor_ms / b.median_ms})
    if not graph:
        return
    ga, gb = bench_timing.time_graph_pair(theirs, ours, a.median_ms, b.median_ms)
    if ga.timing is not None and gb.timing is not None:
        row.update({f"{prefix}_pytorch_graph_ms": ga.timing.median_ms,
                    f"{prefix}_convtune_graph_ms": gb.timing.median_ms,
                    f"{prefix}_graph_ratio": ga.timing.median_ms / gb.timing.median_ms})
    else:
        row[f"{prefix}_graph_note"] = ga.note or gb.note


def run_row(s: DynamicShape, mode: str, convtune, context, copy_rate: float, graph: bool) -> dict:
    import torch
    bench_suite.set_math_mode(mode)
    x, weights, dy = make_inputs(s)
    forms, ours = pytorch_dynamic(s), convtune_dynamic(s, convtune, mode, context)
    row = {"shape": s.name, "mode": mode, "N": s.N, "C": s.C, "H": s.H, "W": s.W, "k": s.k,
           "stride": s.stride, "dil": s.dil, "groups": s.groups}
    with torch.no_grad():
        row["pytorch_fwd_form"], theirs, row["pytorch_fwd_forms_ms"] = faster(
            {name: (lambda fn=fn: fn(x, weights)) for name, fn in forms.items()})
        theirs = forms[row["pytorch_fwd_form"]]
    backward_forms = {name: gradients(fn, x, weights, dy)[1] for name, fn in forms.items()}
    row["pytorch_bwd_form"], _, row["pytorch_bwd_forms_ms"] = faster(backward_forms)
    del backward_forms
    y_theirs, grad_theirs = gradients(forms[row["pytorch_bwd_form"]], x, weights, dy)
    started = time.perf_counter()
    y_ours, grad_ours = gradients(ours, x, weights, dy)   # tunes the forward plan
    dx_ours, dw_ours = grad_ours()                       # and the backward plans
    row["plan_s"] = time.perf_counter() - started
    check(row, mode, (y_theirs, *grad_theirs()), (y_ours, dx_ours, dw_ours))
    del dx_ours, dw_ours
    plans = {d: context.dynamic_plan(tuple(x.shape), s.k, s.stride, s.dil, s.groups, mode, direction=d)
             for d in ("fwd", "bwd_data", "bwd_filter")}
    row["plans"] = {d: f"{p.info['algorithm']} {p.info['config']}" for d, p in plans.items()}
    row["source"] = plans["fwd"].info["source"]
    row["convtune_workspace_bytes"] = {d: p.info["workspace_bytes"] for d, p in plans.items()}
    if not row["ok"]:
        return row
    with torch.no_grad():
        row["pytorch_fwd_extra_bytes"] = forward_extra_bytes(lambda: theirs(x, weights))
        row["convtune_fwd_extra_bytes"] = forward_extra_bytes(lambda: ours(x, weights))
    n = s.elements()
    fwd_bytes = 4 * (n["x"] + n["weights"] + n["y"])
    bwd_bytes = 4 * (2 * n["x"] + 2 * n["weights"] + n["y"])
    time_pass(row, "fwd", lambda: theirs(x, weights), lambda: ours(x, weights), graph,
              fwd_bytes / copy_rate * 1e3)
    # Backward graphs would capture autograd's engine, whose ops run on the
    # forward's stream, outside the capture: eager only.
    time_pass(row, "bwd", grad_theirs, grad_ours, False, bwd_bytes / copy_rate * 1e3)
    # convtune's two backward plans alone (the autograd call above runs both).
    with torch.no_grad():
        for d, call in (("bwd_data", lambda: plans["bwd_data"].backward_data(dy, weights)),
                        ("bwd_filter", lambda: plans["bwd_filter"].backward_filter(x, dy))):
            row[f"{d}_convtune_ms"] = bench_timing.time_gpu(call).median_ms
    return row


# ---------------------------------------------------------------- report


def _mib(v) -> str:
    return "-" if v is None else f"{v / MIB:.1f}"


def _pct(v) -> str:
    return "-" if v is None else bench_render.fmt_pct(100.0 * v)


def _backward_plans(r: dict) -> str:
    """The two backward plans, each with its own time where measured."""
    def one(d):
        ms = r.get(f"{d}_convtune_ms")
        return r["plans"][d] + ("" if ms is None else f" ({d} {bench_render.fmt_ms(ms)} ms)")
    return f"{one('bwd_data')}; {one('bwd_filter')}"


def render(results: dict) -> str:
    env, run = results["environment"], results["run"]
    rate = results["ceilings"]["copy_bytes_per_s"]
    lines = ["# Dynamic convolution: convtune against PyTorch's unfold implementations", "",
             f"Measured {run['date_utc']} on {env.get('gpu')} (driver {env.get('driver')}), "
             f"PyTorch {env.get('torch_version')}, convtune {env.get('convtune_versions')}.", "",
             f"Command: `{run['command']}`", "",
             "Per suite row with `\"op\": \"dynamic\"` (y[b,c,p,q] = sum over the k x k window of "
             "weights[b, c / (C/G), tap, p, q] * x[b, c, ...], 'same' padding): PyTorch's `F.unfold`, "
             "then either a product with the weights summed over the taps (`unfold+mul`, the anchors' "
             "form) or `torch.einsum` (`unfold+einsum`), whichever is faster for the pass (a short "
             "timing of both first; column 'PyTorch form'), with autograd for the gradients, against "
             "`convtune.dynamic_conv2d`, on the same `randn` inputs (weights / k), fp32 tensors, TF32 "
             "flags per mode. Forward: eager (CUDA events around batches of calls, alternating rounds, "
             "median) and graph replays. Backward: both gradients, "
             "`torch.autograd.grad(y, (x, weights), dy, retain_graph=True)` on a y made once, eager. "
             "Ratios are PyTorch / convtune. Floor: the bytes a pass moves at least (forward x + weights "
             "+ y; backward x + weights + dy + dx + dweights) at the measured copy rate, "
             f"{rate / 1e9:.0f} GB/s; % floor = floor / measured. rel L2: the largest of convtune's y, dx "
             "and dweights against PyTorch's (limits "
             f"{bench_timing.REL_L2_LIMIT['strict']:g} strict, {bench_timing.REL_L2_LIMIT['tf32']:g} TF32).",
             ""]
    for mode in ("strict", "tf32"):
        rows = [r for r in results["rows"] if r["mode"] == mode]
        if not rows:
            continue
        lines += [f"## {bench_render.MODE_TITLES[mode]}", ""]
        lines += bench_render.md_table(
            ["shape", "pass", "PyTorch form", "PyTorch ms", "convtune ms", "ratio", "PyTorch graph ms", "convtune graph ms",
             "graph ratio", "floor ms", "PyTorch % floor", "convtune % floor", "convtune plan", "rel L2"],
            [[r["shape"], p, r.get(f"pytorch_{p}_form", "-"), bench_render.fmt_ms(r.get(f"{p}_pytorch_ms")),
              bench_render.fmt_ms(r.get(f"{p}_convtune_ms")),
              bench_render.fmt_ratio(r.get(f"{p}_ratio")) if r["ok"] else "FAIL",
              bench_render.fmt_ms(r.get(f"{p}_pytorch_graph_ms")),
              bench_render.fmt_ms(r.get(f"{p}_convtune_graph_ms")),
              bench_render.fmt_ratio(r.get(f"{p}_graph_ratio")), bench_render.fmt_ms(r.get(f"{p}_floor_ms")),
              _pct(r.get(f"{p}_pytorch_floor")), _pct(r.get(f"{p}_convtune_floor")),
              r["plans"]["fwd"] if p == "fwd" else _backward_plans(r),
              bench_render.fmt_err(worst([r["rel_l2_y"]] if p == "fwd" else [r["rel_l2_dx"], r["rel_l2_dweights"]]))]
             for r in rows for p in ("fwd", "bwd")])
        notes = [f"- {r['shape']}: graph timing not measured: {r['fwd_graph_note']}"
                 for r in rows if r.get("fwd_graph_note")]
        lines += [""] + (notes + [""] if notes else [])
    lines += ["## Forward memory", "",
              "Peak bytes one forward call holds in PyTorch's allocator beyond its inputs and output "
              "(`torch.cuda.max_memory_allocated`), and convtune's plan workspaces (allocated by the "
              "library, outside that allocator; MiB).", ""]
    lines += bench_render.md_table(
        ["shape", "mode", "PyTorch extra MiB", "convtune extra MiB", "convtune workspace fwd / bwd_data / "
         "bwd_filter MiB"],
        [[r["shape"], r["mode"], _mib(r.get("pytorch_fwd_extra_bytes")), _mib(r.get("convtune_fwd_extra_bytes")),
          " / ".join(_mib(r["convtune_workspace_bytes"][d]) for d in ("fwd", "bwd_data", "bwd_filter"))]
         for r in results["rows"]])
    return "\n".join(lines) + "\n"


def save(results: dict, args: argparse.Namespace) -> None:
    bench_render.save_results(results, args.out_json, args.out_md, render)


# ---------------------------------------------------------------- main


def parse_args(argv: list) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--suite", default="bench/suite.json")
    p.add_argument("--shapes", default=None, help="comma-separated row names (default: every dynamic row)")
    p.add_argument("--modes", default="strict,tf32")
    p.add_argument("--cache", default=None, help="convtune cache (default: the library's)")
    p.add_argument("--policy", default="exhaustive", choices=("exhaustive", "fast", "cache_only"))
    p.add_argument("--no-graph", action="store_true", help="skip the forward's graph timing")
    p.add_argument("--out-md", default=None)
    p.add_argument("--out-json", default=None, help="default: --out-md with .json")
    p.add_argument("--render", metavar="JSON", default=None,
                   help="only render --out-md from an earlier run's JSON (no torch, no GPU)")
    args = p.parse_args(argv)
    if args.out_json is None and args.out_md and not args.render:
        args.out_json = str(Path(args.out_md).with_suffix(".json"))
    return args


def load_rows(args: argparse.Namespace) -> tuple:
    try:
        doc = json.loads(Path(args.suite).read_text(encoding="utf-8"))
    except OSError as e:
        raise bench_common.UsageError(f"{args.suite}: {e.strerror}") from e
    except json.JSONDecodeError as e:
        raise bench_common.UsageError(f"{args.suite}:{e.lineno}:{e.colno}: {e.msg}") from e
    shapes = parse_dynamic_rows(doc, args.shapes)
    if not shapes:
        raise bench_common.UsageError(f"{args.suite} has no row with \"op\": \"dynamic\"")
    return shapes, bench_suite.parse_modes(args.modes)


def main(argv: list | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    args = parse_args(argv[1:])
    if args.render:
        return bench_render.render_saved(args.render, args.out_md, render)
    try:
        shapes, modes = load_rows(args)
    except bench_common.UsageError as e:
        print(f"dynamic.py: {e}", file=sys.stderr)
        return 2
    torch, convtune = bench_env.import_or_exit("dynamic.py")
    started = time.perf_counter()
    device = torch.cuda.current_device()
    environment = bench_env.gather_environment(convtune, device)
    bench_env.warn_versions(environment)
    copy_rate = bench_timing.copy_rate()
    torch.cuda.empty_cache()
    context = convtune.Context(device=device, cache=args.cache, policy=args.policy)
    rows = []
    results = {"run": {"command": bench_env.command_line(argv, os.environ), "cache": args.cache,
                       "policy": args.policy, "elapsed_s": 0.0,
                       "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")},
               "environment": environment,
               "ceilings": {"copy_bytes_per_s": copy_rate, "copy_buffer_bytes": bench_timing.COPY_BYTES},
               "rows": rows}
    for shape in shapes:
        for mode in modes:
            row = run_row(shape, mode, convtune, context, copy_rate, not args.no_graph)
            bench_common.log(f"{shape.name} {mode}: "
                             + (f"fwd {row['fwd_ratio']:.2f}x, bwd {row['bwd_ratio']:.2f}x" if row["ok"]
                                else f"FAIL rel L2 {row['rel_l2']:.2e}")
                             + f" (plan {row['plan_s']:.1f} s)")
            rows.append(row)
            results["run"]["elapsed_s"] = time.perf_counter() - started
            save(results, args)
            bench_timing.empty_cache_if_safe()
    context.close()
    print(render(results))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
