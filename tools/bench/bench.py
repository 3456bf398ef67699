#!/usr/bin/env python3
"""Benchmark convtune against PyTorch's F.conv2d on the rows of a suite file.

For every conv row and every math mode (fp32 strict, TF32) it times PyTorch in
cuDNN benchmark mode and convtune's plan on the same input tensors with one
timing helper (CUDA events around batches of back-to-back calls, median over
batches), checks that both compute the same function (relative L2 error in
float64), and puts each time against a roofline floor made of ceilings
measured in the same run.  It then times the same calls again, replayed
from one CUDA graph per library (no host cost between calls; --no-graph
skips it), and checks convtune's output after the replays.  It also
measures the host cost of one call on a tiny problem and the first-call
latency of a fresh process.  Results go to stdout as Markdown tables, and
optionally to a JSON file and to the complete BENCHMARKS.md (--out-md).
Progress goes to stderr.

    python3 tools/bench/bench.py --out-md BENCHMARKS.md

Exit status: 0 all rows ok, 1 a row failed (mismatch or error), 2 usage
error (bad option or suite file), 3 no CUDA GPU.

torch is imported lazily, inside the functions that need it, so that the
pure parts (suite parsing, floor arithmetic, rendering) load without it and
so that main() controls the order: torch first, then convtune.

This file measures the rows and runs the command line; the rest of the
harness is split by what it does: bench_suite.py (suite files, shapes, how
each library is called), bench_timing.py (eager and graph timing, ceilings,
output checks), bench_host.py (host cost, first calls, the C API's host
cost), bench_env.py (versions, loaded libraries, command line) and
bench_render.py (BENCHMARKS.md).  models.py and first_call.py use them too.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
import time
import zlib
from pathlib import Path
from typing import Callable

from bench_common import (MODES, UsageError, exit_status, log, output_paths, read_notes,
                          plan_text, settle_row, skip_graph, verdict_text)
from bench_suite import (Shape, conv_bytes, conv_flops, convtune_plan_kwargs, floor_ms, geomean,
    load_suite, make_inputs, modes_for, parse_modes, percent_of_floor, select_shapes,
    set_math_mode, spec_text, torch_conv_fn)
from bench_timing import (GraphResult, REL_L2_LIMIT, empty_cache_if_safe, error_text,
    measure_ceilings, peak_for, rel_l2, time_graph_pair, time_pair, within_limit)
from bench_host import (DEFAULT_C_HOST_COST, DEFAULT_FIRST_CALL, brief, host_cost_binary,
    measure_c_host_cost, measure_first_calls, measure_host_cost)
from bench_env import (command_line, gather_environment, import_libraries, print_ld_path,
    warn_versions)
from bench_render import (fmt_ms, json_safe, render_c_host_cost, render_first_calls,
    render_host_cost, render_markdown, render_tables, write_markdown)


DEFAULT_SUITE = "bench/suite.json"
# The budget for the whole public suite with a warm cache.
TIME_BUDGET_S = 600

# ---------------------------------------------------------------- one row


def row_template(s: Shape, mode: str, ceilings: dict) -> dict:
    floor = floor_ms(s, peak_for(mode, ceilings), ceilings["copy_bytes_per_s"])
    return {"name": s.name, "mode": mode, "spec": spec_text(s), "flops": conv_flops(s),
            "bytes": conv_bytes(s), "floor_ms": floor, "torch": None, "convtune": None,
            "ratio": None, "rel_l2": None, "rel_l2_limit": REL_L2_LIMIT[mode],
            "status": "error", "error": None,
            # Graph timing (time_graph_pair): per-call ms, the full Timing
            # summaries, and graph_status ok | FAIL (convtune's output after
            # replays is wrong) | error (a library has no graph time, see
            # graph_note) | skipped (--no-graph).
            "torch_graph_ms": None, "convtune_graph_ms": None, "graph_ratio": None,
            "graph_rel_l2": None, "graph_note": None, "graph_status": None,
            "torch_graph": None, "convtune_graph": None}


def torch_first_call(fn: Callable) -> float:
    """PyTorch's first call of a shape in benchmark mode runs its autotuning."""
    import torch
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def make_plan(ctx, s: Shape, mode: str, x, w) -> tuple:
    """Returns (plan, ms that plan() took)."""
    t0 = time.perf_counter()
    plan = ctx.plan(tuple(x.shape), tuple(w.shape), **convtune_plan_kwargs(s, mode))
    return plan, (time.perf_counter() - t0) * 1e3


def check_outputs(plan, torch_fn: Callable, x, w, b, mode: str) -> float:
    """Runs both once into fresh outputs (convtune's poisoned with NaN, so an
    unwritten element fails) and returns the relative L2 error."""
    import torch
    y_ref = torch_fn()
    y = torch.full(tuple(plan.output_shape), math.nan, device="cuda", dtype=torch.float32)
    plan(x, w, bias=b, out=y)
    torch.cuda.synchronize()
    return rel_l2(y, y_ref)


def graph_output_error(out, torch_fn: Callable) -> float:
    """rel L2 of a graph's convtune output against a fresh eager PyTorch
    output (computed now, after the graphs are freed, to keep memory low)."""
    y_ref = torch_fn()
    return rel_l2(out, y_ref)


def record_graph(row: dict, mode: str, g_torch: GraphResult, g_ct: GraphResult,
                 torch_fn: Callable) -> None:
    """Puts both libraries' graph timings and the graph output check in the row."""
    g_torch.out = None          # only convtune's output is checked: free PyTorch's now
    notes = [f"{lib}: {g.note}" for lib, g in (("PyTorch", g_torch), ("convtune", g_ct)) if g.note]
    if g_ct.out is not None:
        try:
            row["graph_rel_l2"] = graph_output_error(g_ct.out, torch_fn)
        except RuntimeError as e:       # e.g. out of memory for the reference
            notes.append(f"graph output check failed: {error_text(e)}")
        g_ct.out = None
    for key, g in (("torch", g_torch), ("convtune", g_ct)):
        row[f"{key}_graph"] = None if g.timing is None else g.timing.summary()
        row[f"{key}_graph_ms"] = None if g.timing is None else g.timing.median_ms
    err = row["graph_rel_l2"]
    if err is not None and not within_limit(err, mode):
        # A wrong output gets no ratio, as in eager timing.
        notes.append(f"convtune graph output rel L2 {err:.3g} above {REL_L2_LIMIT[mode]:g}")
        row["graph_status"] = "FAIL"
    elif err is not None and row["torch_graph_ms"] is not None and row["convtune_graph_ms"]:
        row["graph_status"] = "ok"
        row["graph_ratio"] = row["torch_graph_ms"] / row["convtune_graph_ms"]
    else:
        row["graph_status"] = "error"
    row["graph_note"] = "; ".join(notes) or None


def bench_row(ctx, s: Shape, mode: str, inputs: tuple, ceilings: dict,
              graph: bool = True) -> dict:
    """Times PyTorch and convtune on one shape in one mode, same tensors:
    eager calls, then (unless graph is False) the same calls from CUDA graphs."""
    x, w, b = inputs
    row = row_template(s, mode, ceilings)
    set_math_mode(mode)
    torch_fn = torch_conv_fn(s, x, w, b)
    first_ms = torch_first_call(torch_fn)
    plan, plan_ms = make_plan(ctx, s, mode, x, w)
    g_torch = g_ct = None
    try:
        info = dict(plan.info)
        row["rel_l2"] = check_outputs(plan, torch_fn, x, w, b, mode)
        # Both calls allocate their output from PyTorch's caching allocator,
        # as F.conv2d does: the comparison is call for call.
        ct_fn = lambda: plan(x, w, bias=b)     # noqa: E731
        t_torch, t_ct = time_pair(torch_fn, ct_fn)
        if graph:
            # Inside the try: the graphs replay the plan, so they are
            # measured and freed before it is closed.
            g_torch, g_ct = time_graph_pair(torch_fn, ct_fn, t_torch.median_ms, t_ct.median_ms)
    finally:
        # The context keeps every plan it made, workspace included, until
        # closed: without this, workspaces of all rows would pile up.
        plan.close()
    row["torch"] = {**t_torch.summary(), "first_call_ms": first_ms,
                    "percent_floor": percent_of_floor(row["floor_ms"], t_torch.median_ms)}
    row["convtune"] = {**t_ct.summary(), "plan_ms": plan_ms, "algorithm": info.get("algorithm"),
                       "config": info.get("config"), "tuned_ms": info.get("time_ms"),
                       "workspace_bytes": info.get("workspace_bytes"),
                       "source": info.get("source"),
                       "percent_floor": percent_of_floor(row["floor_ms"], t_ct.median_ms)}
    settle_row(row, within_limit(row["rel_l2"], mode),
               f"rel L2 {row['rel_l2']:.3g} above {REL_L2_LIMIT[mode]:g}",
               t_torch.median_ms, t_ct.median_ms)
    if graph:
        record_graph(row, mode, g_torch, g_ct, torch_fn)
    else:
        skip_graph(row)
    return row


def describe_row(row: dict) -> str:
    if row["status"] == "error":
        return f"ERROR {row['error']}"
    t, c = row["torch"], row["convtune"]
    text = (f"torch {t['median_ms']:.4f} ms (first call {t['first_call_ms']:.0f} ms), "
            f"convtune {c['median_ms']:.4f} ms ({plan_text(c)}), rel L2 {row['rel_l2']:.2g}")
    return text + verdict_text(row) + "; " + describe_graph(row)


def describe_graph(row: dict) -> str:
    if row["graph_status"] == "skipped":
        return "graph not measured"
    text = (f"graph: torch {fmt_ms(row['torch_graph_ms'])} ms, "
            f"convtune {fmt_ms(row['convtune_graph_ms'])} ms")
    if row["graph_rel_l2"] is not None:
        text += f", rel L2 {row['graph_rel_l2']:.2g}"
    if row["graph_ratio"] is not None:
        text += f", ratio {row['graph_ratio']:.2f}x"
    if row["graph_note"]:
        text += f" ({row['graph_status']}: {row['graph_note']})"
    return text


def bench_shape(ctx, convtune, s: Shape, modes: list, seed: int, ceilings: dict,
                graph: bool = True) -> list:
    """All modes of one shape on one set of input tensors, freed afterwards
    (seed0_b5's output alone is 655 MB)."""
    import torch
    rows = []
    inputs = None
    try:
        inputs = make_inputs(s, seed)
        for mode in modes:
            try:
                row = bench_row(ctx, s, mode, inputs, ceilings, graph=graph)
            except (convtune.ConvtuneError, RuntimeError, ValueError) as e:
                # ValueError: the binding refused an argument; one row's
                # problem, not a reason to lose the others.
                row = row_template(s, mode, ceilings)
                row["error"] = f"{type(e).__name__}: {e}".splitlines()[0]
                torch.cuda.synchronize()
            log(f"  {s.name} [{mode}]: {describe_row(row)}")
            rows.append(row)
    except RuntimeError as e:       # the inputs themselves did not fit
        message = f"{type(e).__name__}: {e}".splitlines()[0]
        for mode in modes[len(rows):]:
            row = row_template(s, mode, ceilings)
            row["error"] = message
            log(f"  {s.name} [{mode}]: ERROR {message}")
            rows.append(row)
    finally:
        del inputs
        empty_cache_if_safe()
    return rows


def ratio_stats(ok: list, ratio: str, torch_timing: str, convtune_timing: str) -> tuple:
    """Over rows `ok`: the geomean of row[ratio], the worst (lowest) row as
    {name, ratio}, and the names of rows whose ratio is within the spread."""
    worst = min(ok, key=lambda r: r[ratio]) if ok else None
    # A ratio within the run-to-run spread of either side is not a difference.
    noisy = [r["name"] for r in ok if abs(math.log(r[ratio]))
             < r[torch_timing]["spread"] + r[convtune_timing]["spread"]]
    return (geomean([r[ratio] for r in ok]),
            None if worst is None else {"name": worst["name"], "ratio": worst[ratio]}, noisy)


def summarize_mode(rows: list) -> dict:
    """Geomean ratio over ok rows, the worst (lowest ratio) row, failures."""
    ok = [r for r in rows if r["status"] == "ok"]
    gm, worst, noisy = ratio_stats(ok, "ratio", "torch", "convtune")
    return {"geomean_ratio": gm, "ok_rows": len(ok), "rows": len(rows), "worst": worst,
            "failed": [r["name"] for r in rows if r["status"] != "ok"],
            "within_noise": noisy, **summarize_graph(rows)}


def summarize_graph(rows: list) -> dict:
    """The graph columns' summary: geomean over rows ok in eager and in graph
    timing, the worst of them, ratios within noise, wrong outputs, and rows
    without a graph time (with why)."""
    ok = [r for r in rows if r["status"] == "ok" and r.get("graph_status") == "ok"]
    gm, worst, noisy = ratio_stats(ok, "graph_ratio", "torch_graph", "convtune_graph")
    return {"graph_geomean_ratio": gm,
            "graph_ok_rows": len(ok),
            "graph_worst": worst,
            "graph_within_noise": noisy,
            "graph_wrong": [{"name": r["name"], "rel_l2": r["graph_rel_l2"]}
                            for r in rows if r.get("graph_status") == "FAIL"],
            "graph_missing": [{"name": r["name"], "note": r.get("graph_note")}
                              for r in rows if r.get("graph_status") == "error"
                              and r["status"] != "error"]}


# ---------------------------------------------------------------- main


def parse_args(argv: list) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Benchmark convtune against PyTorch F.conv2d.")
    p.add_argument("--suite", default=DEFAULT_SUITE, help="suite file (default %(default)s)")
    p.add_argument("--cache", default=None,
                   help="convtune cache file (default: $CONVTUNE_CACHE, else the user cache)")
    p.add_argument("--modes", default=",".join(MODES), help="strict,tf32 or one of them")
    p.add_argument("--shapes", default=None, help="comma-separated shape names (default: all)")
    p.add_argument("--out-json", default=None,
                   help="write every number here (default: beside --out-md, .json)")
    p.add_argument("--out-md", default=None, help="write the complete BENCHMARKS.md here")
    p.add_argument("--policy", default="cache_only", choices=("cache_only", "exhaustive", "fast"),
                   help="convtune policy on a cache miss (default %(default)s: tune beforehand "
                        "with build/convtune tune)")
    p.add_argument("--first-call", default=",".join(DEFAULT_FIRST_CALL),
                   help="shapes for the fresh-process first-call test ('none' to skip; "
                        "default %(default)s)")
    p.add_argument("--no-host-cost", action="store_true", help="skip the host-cost measurements")
    p.add_argument("--host-cost-bin", default=None, metavar="PATH",
                   help="convtune_host_cost program (default: beside CONVTUNE_LIB, else "
                        "build/convtune_host_cost)")
    p.add_argument("--c-host-cost", default=",".join(DEFAULT_C_HOST_COST),
                   help="shapes for the C API host-cost table (default %(default)s)")
    p.add_argument("--no-graph", action="store_true",
                   help="skip the CUDA-graph timing of every row (eager timing only)")
    p.add_argument("--notes", default=None, metavar="FILE",
                   help="a Markdown file of remarks on the run, put into --out-md under "
                        "'Reading these numbers'")
    p.add_argument("--render", default=None, metavar="JSON",
                   help="measure nothing: write --out-md from the JSON file of an earlier run "
                        "(with --notes), e.g. after editing the notes; needs no GPU or torch")
    p.add_argument("--print-ld-path", action="store_true",
                   help="print the folders of PyTorch's cuDNN and cuBLASLt (for LD_LIBRARY_PATH "
                        "of build/convtune tune, so its cache keys match this process) and exit")
    return p.parse_args(argv)


def named_shapes(all_shapes: list, names: str, what: str) -> list:
    if names.strip().lower() in ("", "none"):
        return []
    by_name = {s.name: s for s in all_shapes}
    chosen = []
    for n in (n.strip() for n in names.split(",") if n.strip()):
        if n in by_name:
            chosen.append(by_name[n])
        else:
            log(f"note: {what} shape {n} is not a conv row of the suite; skipped")
    return chosen


def first_call_shapes(all_shapes: list, names: str) -> list:
    return named_shapes(all_shapes, names, "first-call")


def run_suite(ctx, convtune, shapes: list, modes: list, ceilings: dict,
              graph: bool = True) -> dict:
    rows = {mode: [] for mode in modes}
    for index, s in enumerate(shapes):
        log(f"[{index + 1}/{len(shapes)}] {s.name}: {spec_text(s)}")
        shape_modes = modes_for(s, modes)
        # Seeded by name: the same shape gets the same tensors whatever
        # --shapes selects.
        seed = zlib.crc32(s.name.encode())
        for row in bench_shape(ctx, convtune, s, shape_modes, seed=seed, ceilings=ceilings,
                               graph=graph):
            rows[row["mode"]].append(row)
    return {mode: {"rows": r, "summary": summarize_mode(r)} for mode, r in rows.items()}



def write_outputs(results: dict, out_md: str | None, out_json: str | None) -> None:
    if out_json:
        Path(out_json).write_text(json.dumps(json_safe(results), indent=1) + "\n", encoding="utf-8")
        log(f"wrote {out_json}")
    markdown = render_markdown(results)
    if out_md:
        write_markdown(out_md, markdown)
        log(f"wrote {out_md}")
    print("\n".join(render_tables(results) + render_host_cost(results.get("host_cost"))
                    + render_c_host_cost(results.get("c_host_cost"), results.get("host_cost"))
                    + render_first_calls(results.get("first_call") or [])))



def render_saved(args: argparse.Namespace) -> int:
    """--render: BENCHMARKS.md from an earlier run's JSON, with today's notes."""
    if not args.out_md:
        raise UsageError("--render needs --out-md")
    try:
        results = json.loads(Path(args.render).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise UsageError(f"cannot read --render {args.render}: {e}") from e
    results.update(read_notes(args.notes))
    write_markdown(args.out_md, render_markdown(results))
    log(f"wrote {args.out_md} from {args.render}")
    return 0


def benchmark(args: argparse.Namespace, argv: list) -> int:
    started = time.perf_counter()
    all_shapes, notes = load_suite(args.suite)
    shapes = select_shapes(all_shapes, args.shapes)
    modes = parse_modes(args.modes)
    out_md, out_json = output_paths(args)
    remarks = read_notes(args.notes)
    for note in notes:
        log(f"note: {note}")
    torch, convtune = import_libraries()
    torch.backends.cudnn.benchmark = True    # before any convolution of the process
    device = torch.cuda.current_device()
    env = gather_environment(convtune, device)
    warn_versions(env)
    log(f"GPU {env['gpu']}; measuring ceilings")
    ceilings = measure_ceilings()
    log(f"  copy {ceilings['copy_bytes_per_s'] / 1e12:.2f} TB/s, fp32 "
        f"{ceilings['fp32_flops_per_s'] / 1e12:.1f} TFLOP/s, tf32 "
        f"{ceilings['tf32_flops_per_s'] / 1e12:.1f} TFLOP/s")
    ctx = convtune.Context(device=device, cache=args.cache, policy=args.policy)
    mode_results = run_suite(ctx, convtune, shapes, modes, ceilings, graph=not args.no_graph)
    host_cost = None
    if not args.no_host_cost:
        log("host cost of one call")
        try:
            host_cost = measure_host_cost(ctx, convtune, device)
        except (convtune.ConvtuneError, RuntimeError, ValueError) as e:
            host_cost = {"error": f"{type(e).__name__}: {e}".splitlines()[0]}
        log(f"  {brief(host_cost)}")
    ctx.close()                 # its plans' workspaces, before the child processes
    empty_cache_if_safe()
    first = measure_first_calls(first_call_shapes(all_shapes, args.first_call), args.cache, device)
    c_host_cost = None
    if not args.no_host_cost:
        c_host_cost = measure_c_host_cost(host_cost_binary(args.host_cost_bin),
                                          named_shapes(all_shapes, args.c_host_cost, "host-cost"),
                                          modes, args.cache, device)
    results = {
        "run": {"command": command_line(argv, os.environ), "suite": args.suite,
                "cache": args.cache, "policy": args.policy, "graph": not args.no_graph,
                "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "elapsed_s": time.perf_counter() - started},
        "environment": env, "ceilings": ceilings, "modes_run": modes, "modes": mode_results,
        "host_cost": host_cost, "c_host_cost": c_host_cost, "first_call": first, "notes": notes,
        "json_path": out_json,
        **remarks,
    }
    write_outputs(results, out_md, out_json)
    failed = [f"{r['name']} [{m}]" for m, block in mode_results.items()
              for r in block["rows"] if r["status"] != "ok"]
    graph_wrong = [f"{r['name']} [{m}]" for m, block in mode_results.items()
                   for r in block["rows"] if r["graph_status"] == "FAIL"]
    log(f"done in {results['run']['elapsed_s']:.0f} s")
    if graph_wrong:
        # Reported, not failed: the exit status keeps its meaning (eager rows).
        log(f"WARNING: convtune's output after graph replays is wrong: {', '.join(graph_wrong)}")
    if results["run"]["elapsed_s"] > TIME_BUDGET_S:
        log(f"WARNING: the run took longer than its {TIME_BUDGET_S} s budget")
    if failed:
        log(f"FAILED: {', '.join(failed)}")
        misses = [r for block in mode_results.values() for r in block["rows"]
                  if "CACHE_MISS" in (r["error"] or "")]
        if misses:
            log("(a cache miss means the cache was not tuned for this GPU and these library "
                f"versions: run LD_LIBRARY_PATH=$(python3 {os.path.relpath(__file__)} "
                f"--print-ld-path) build/convtune tune {args.suite} [--math tf32] first, "
                "or pass --policy exhaustive)")
        return 1
    return 0


def main(argv: list | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    args = parse_args(argv[1:])
    def run():
        if args.print_ld_path:
            return print_ld_path()
        if args.render:
            return render_saved(args)
        return benchmark(args, argv)
    return exit_status("bench.py", run)


if __name__ == "__main__":
    sys.exit(main())
