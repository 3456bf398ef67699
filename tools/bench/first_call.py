#!/usr/bin/env python3
"""First-call latency of one convolution in a fresh process (run by bench.py).

    first_call.py torch|convtune --shape ROW_JSON [--mode strict|tf32]
                  [--cache PATH] [--device N]

ROW_JSON is one row of a suite file.  The CUDA context and the input tensors
are made and synchronised before the clock starts, so what is timed is what
an application's first convolution of that shape costs beyond them:

  torch:    cudnn.benchmark = True, then the first F.conv2d + synchronize
            (cuDNN handle creation and PyTorch's autotuning of the shape);
  convtune: Context(cache=PATH, policy="cache_only") (its cuDNN and cuBLASLt
            handles), ctx.plan(...) from the warm cache, then the first call
            + synchronize.

A second call is timed too, to show the steady state beside it.  Prints one
JSON line on stdout: the milliseconds, or {"error": ...} with exit status 1.
"""

import argparse
import importlib
import json
import sys
import time

# The harness's modules import torch only inside the functions that need it.
import bench_common
import bench_env
import bench_suite


def parse_args(argv: list) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("impl", choices=("torch", "convtune"))
    p.add_argument("--shape", required=True, help="one suite row, as JSON")
    p.add_argument("--mode", default="strict", choices=bench_common.MODES)
    p.add_argument("--cache", default=None, help="convtune cache (default: convtune's)")
    p.add_argument("--device", type=int, default=0)
    return p.parse_args(argv)


def ms_since(t0: float) -> float:
    return (time.perf_counter() - t0) * 1e3


def timed_call(fn) -> float:
    """Wall milliseconds of one call and the synchronisation after it."""
    import torch
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return ms_since(t0)


def prepare(shape: bench_suite.Shape, mode: str, device: int) -> tuple:
    """CUDA context, math flags and inputs, all settled before any clock."""
    import torch
    torch.backends.cudnn.benchmark = True
    torch.cuda.set_device(device)
    bench_suite.set_math_mode(mode)
    inputs = bench_suite.make_inputs(shape, seed=7)
    torch.cuda.synchronize()
    return inputs


def first_torch(shape: bench_suite.Shape, mode: str, device: int) -> dict:
    t0 = time.perf_counter()
    importlib.import_module("torch")    # timed: what an application pays once
    import_ms = ms_since(t0)
    x, w, b = prepare(shape, mode, device)
    fn = bench_suite.torch_conv_fn(shape, x, w, b)
    return {"import_ms": import_ms, "first_call_ms": timed_call(fn),
            "second_call_ms": timed_call(fn)}


def first_convtune(shape: bench_suite.Shape, mode: str, device: int, cache) -> dict:
    t0 = time.perf_counter()
    _torch, convtune = bench_env.import_libraries()   # torch first, as in bench.py
    import_ms = ms_since(t0)
    x, w, b = prepare(shape, mode, device)
    t0 = time.perf_counter()
    ctx = convtune.Context(device=device, cache=cache, policy="cache_only")
    context_ms = ms_since(t0)
    t0 = time.perf_counter()
    plan = ctx.plan(tuple(x.shape), tuple(w.shape), **bench_suite.convtune_plan_kwargs(shape, mode))
    plan_ms = ms_since(t0)
    first_ms = timed_call(lambda: plan(x, w, bias=b))
    second_ms = timed_call(lambda: plan(x, w, bias=b))
    info = dict(plan.info)
    return {"import_ms": import_ms, "context_ms": context_ms, "plan_ms": plan_ms,
            "first_call_ms": first_ms, "second_call_ms": second_ms,
            "source": info.get("source"), "algorithm": info.get("algorithm"),
            "config": info.get("config")}


def first_call(args: argparse.Namespace) -> dict:
    shape = bench_suite.parse_row(json.loads(args.shape), 0)
    if args.impl == "torch":
        return first_torch(shape, args.mode, args.device)
    return first_convtune(shape, args.mode, args.device, args.cache)


def main(argv: list) -> int:
    args = parse_args(argv)
    return bench_common.print_json_result(lambda: first_call(args))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
