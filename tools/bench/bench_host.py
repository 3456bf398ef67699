"""Host cost of one call (Python), first-call latency in a fresh process, and the
C API's host cost (tools/bench/host_cost.c)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from bench_common import PYTHON_DIR, REPO_ROOT, log
from bench_suite import (Shape, convtune_plan_kwargs, make_inputs, modes_for, parse_row,
    set_math_mode, shape_to_row, spec_text)
from bench_env import torch_library_dirs


FIRST_CALL_SCRIPT = Path(__file__).resolve().parent / "first_call.py"

# Host cost: a problem so small that the GPU work is negligible.
HOST_COST_SPEC = {"name": "host_cost_tiny", "N": 1, "C": 1, "H": 8, "W": 8, "K": 1,
                  "R": 3, "S": 3, "pad": 1}
HOST_COST_CALLS = 20000
HOST_COST_WARMUP = 200
HOST_COST_REPEATS = 3

DEFAULT_FIRST_CALL = ("rn50_conv2_3x3", "large_k_dense", "seed3_msd_1to1_d1")
FIRST_CALL_TIMEOUT_S = 300

# The C API's host cost (tools/bench/host_cost.c, one fresh process): the
# launch-bound rows of issue 6 and one row per other family.
DEFAULT_C_HOST_COST = ("seed3_msd_small", "latency_n1_c64", "lc0_b1_8x8", "rn50_conv2_3x3",
                       "large_k_dense", "seed1_patch4")
C_HOST_COST_TIMEOUT_S = 600

# ---------------------------------------------------------------- host cost


def time_host_loop(fn: Callable, calls: int) -> float:
    """Wall time per call (us) of `calls` back-to-back calls plus one sync."""
    import torch
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def host_plan(ctx, convtune, device, x, w) -> tuple:
    """The tiny problem's plan: from the harness's context when it is tuned
    there, else from a throwaway in-memory context with the fast policy, so
    that a cache-only run still measures host cost."""
    s = parse_row(HOST_COST_SPEC, 0)
    kwargs = convtune_plan_kwargs(s, "strict")
    try:
        return ctx.plan(tuple(x.shape), tuple(w.shape), **kwargs), None
    except convtune.ConvtuneError as e:
        if getattr(e, "status_name", None) != "CACHE_MISS":
            raise
    scratch = convtune.Context(device=device, cache=":memory:", policy="fast")
    try:
        return scratch.plan(tuple(x.shape), tuple(w.shape), **kwargs), scratch
    except BaseException:
        scratch.close()
        raise


def host_samples(plan, x, w) -> dict:
    """us per call of each library, HOST_COST_REPEATS loops each, alternating."""
    import torch
    import torch.nn.functional as F
    y = torch.empty(tuple(plan.output_shape), device="cuda")
    fns = {"convtune": lambda: plan(x, w, out=y),
           "convtune_alloc": lambda: plan(x, w),
           "torch": lambda: F.conv2d(x, w, padding=1)}
    if plan._launcher is not None:
        # The same plan called through ctypes, as the binding does where the
        # compiled call path is not built (a private switch of the harness).
        def through_ctypes():
            return plan._call_through_ctypes(x, w, None, y)
        fns["convtune_ctypes"] = through_ctypes
    for fn in fns.values():
        for _ in range(HOST_COST_WARMUP):
            fn()
    samples = {name: [] for name in fns}
    for _ in range(HOST_COST_REPEATS):
        for name, fn in fns.items():
            samples[name].append(time_host_loop(fn, HOST_COST_CALLS))
    return samples


def measure_host_cost(ctx, convtune, device) -> dict:
    """Host cost of one call on a tiny problem: wall time of many back-to-back
    calls, so launch and binding overhead, not GPU time, sets the pace."""
    set_math_mode("strict")
    s = parse_row(HOST_COST_SPEC, 0)
    x, w, _ = make_inputs(s, seed=12345)
    plan, scratch = host_plan(ctx, convtune, device, x, w)
    try:
        samples = host_samples(plan, x, w)
        info = dict(plan.info)
    finally:
        plan.close()
        if scratch is not None:
            scratch.close()
    return {"spec": spec_text(s), "calls": HOST_COST_CALLS, "repeats": HOST_COST_REPEATS,
            "torch_us": statistics.median(samples["torch"]),
            "convtune_us": statistics.median(samples["convtune"]),
            "convtune_alloc_us": statistics.median(samples["convtune_alloc"]),
            "convtune_ctypes_us": (statistics.median(samples["convtune_ctypes"])
                                   if "convtune_ctypes" in samples else None),
            "samples_us": samples, "convtune_algorithm": info.get("algorithm"),
            "convtune_config": info.get("config"), "convtune_source": info.get("source"),
            "convtune_call": info.get("call")}


# ---------------------------------------------------------------- first call


def child_env() -> dict:
    """The child finds convtune the way this process did: PYTHONPATH plus the
    repository's python/ folder; CONVTUNE_LIB and the rest pass through."""
    env = dict(os.environ)
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(PYTHON_DIR) not in parts:
        parts.append(str(PYTHON_DIR))
    env["PYTHONPATH"] = os.pathsep.join(parts)
    return env


def run_first_call_child(impl: str, s: Shape, cache: str | None, device: int) -> dict:
    # Strict fp32 as in ANCHORS.md, unless the row pins TF32.
    command = [sys.executable, str(FIRST_CALL_SCRIPT), impl, "--shape",
               json.dumps(shape_to_row(s)), "--mode", s.math_mode or "strict",
               "--device", str(device)]
    if cache is not None:
        command += ["--cache", cache]
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=child_env(),
                              timeout=FIRST_CALL_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {FIRST_CALL_TIMEOUT_S} s"}
    # The child's last stdout line is its JSON result, {"error": ...} included.
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {done.returncode}: {tail}"}
    return json.loads(lines[-1])


def brief(result: dict) -> str:
    """A progress-line view of a measurement: its numbers, or its error."""
    if "error" in result:
        return "error: " + str(result["error"])
    return ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                     for k, v in result.items() if not isinstance(v, (dict, list)))


def measure_first_calls(shapes: list, cache: str | None, device: int) -> list:
    """Fresh-process first-call latency, one process per shape and library,
    so each pays what an application's first convolution pays."""
    results = []
    if shapes:
        log("first call in a fresh process")
    for s in shapes:
        torch_result = run_first_call_child("torch", s, cache, device)
        if cache == ":memory:":
            ct_result = {"error": "an in-memory cache is never warm in a new process"}
        else:
            ct_result = run_first_call_child("convtune", s, cache, device)
        log(f"  {s.name}: torch {brief(torch_result)}; convtune {brief(ct_result)}")
        results.append({"name": s.name, "spec": spec_text(s), "mode": s.math_mode or "strict",
                        "torch": torch_result, "convtune": ct_result})
    return results


# ---------------------------------------------------------------- C host cost


def host_cost_binary(explicit: str | None) -> Path | None:
    """--host-cost-bin, else convtune_host_cost beside CONVTUNE_LIB's library,
    else in build/; None when there is none (the table then says so)."""
    if explicit:
        return Path(explicit)
    candidates = []
    if os.environ.get("CONVTUNE_LIB"):
        candidates.append(Path(os.environ["CONVTUNE_LIB"]).parent / "convtune_host_cost")
    candidates.append(REPO_ROOT / "build" / "convtune_host_cost")
    return next((c for c in candidates if c.is_file()), None)


def measure_c_host_cost(binary: Path | None, shapes: list, modes: list, cache: str | None,
                        device: int) -> dict:
    """Runs host_cost.c's program once, in a fresh process, on every mode of
    `shapes`; its JSON lines become {"process": ..., "rows": [...]}."""
    if binary is None:
        return {"error": "no convtune_host_cost binary (build it, or pass --host-cost-bin)"}
    if cache == ":memory:":
        return {"error": "an in-memory cache is never warm in a new process"}
    jobs = [(s, mode) for s in shapes for mode in modes_for(s, modes)]
    command = [str(binary), "--device", str(device)] + (["--cache", cache] if cache else [])
    command += [f"{spec_text(s)} math={mode}" for s, mode in jobs]
    log(f"C API host cost ({binary.name}, one fresh process, {len(jobs)} rows)")
    # The C program loads the cuDNN and cuBLASLt this process runs (PyTorch's),
    # as the cache keys of this run name their versions.
    env = child_env()
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        [*torch_library_dirs(), *[p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]])
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env,
                              timeout=C_HOST_COST_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"error": f"{type(e).__name__}: {e}".splitlines()[0]}
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines or "error" in lines[0]:
        tail = lines[0]["error"] if lines else (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {done.returncode}: {tail}"}
    rows = []
    for (s, mode), result in zip(jobs, lines[1:]):
        rows.append({"name": s.name, "mode": mode, **result})
        log(f"  {s.name} [{mode}]: {brief(result)}")
    if len(rows) < len(jobs):
        return {"error": f"exit {done.returncode} after {len(rows)} of {len(jobs)} rows",
                "process": lines[0], "rows": rows}
    return {"binary": str(binary), "process": lines[0], "rows": rows}
