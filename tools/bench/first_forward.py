#!/usr/bin/env python3
"""First forward of a whole torchvision model in a fresh process, as a user
converting a model pays it, against PyTorch's own first forward.

    first_forward.py torch|convtune --model NAME [--batch 16] [--mode strict|tf32|bf16|f16]

The CUDA context, the model (random weights) and the input are made and
synchronised before the clock starts, so what is timed is what the first
forward costs beyond them:

  torch:    cudnn.benchmark = True, then the first forward + synchronize
            (cuDNN's handle and its autotuning of every layer);
  convtune: convtune.convert(model), then the first forward + synchronize:
            the default context (cuDNN and cuBLASLt handles) and every
            layer's plan, looked up in $CONVTUNE_CACHE, then in
            $CONVTUNE_SYSTEM_CACHE (a shipped cache), else tuned now under
            the default policy.

Modes bf16 and f16 are mixed precision as users run it: the model and the
input channels_last, each forward under torch.autocast("cuda", dtype), the
fp32 flags strict.  The second and third forwards are timed too (under
autocast the second builds the operators' own plans).

Prints one JSON line on stdout: the milliseconds and, for convtune, how
many distinct plans came from where
(info["source"]: system, cache, tuned, ...), or {"error": ...} with exit
status 1.  Issue 21 asks that with a shipped cache the first forward tune
nothing and take at most 2x PyTorch's.
"""

import argparse
import collections
import sys
import time

import bench_common
import bench_suite

IMAGE = 224
AMP_TYPES = {"bf16": "bfloat16", "f16": "float16"}


def parse_args(argv: list) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("impl", choices=("torch", "convtune"))
    p.add_argument("--model", required=True, help="a torchvision model name")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--mode", default="strict", choices=bench_common.MODES + tuple(AMP_TYPES))
    return p.parse_args(argv)


def timed_forward(model, x, amp_type) -> float:
    import torch
    t0 = time.perf_counter()
    with torch.no_grad(), torch.autocast("cuda", dtype=amp_type, enabled=amp_type is not None):
        model(x)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def plan_sources(model) -> dict:
    """Distinct plans of the converted layers, counted by where they came from."""
    import convtune.nn
    plans = {id(m._last_plan): m._last_plan for m in model.modules()
             if isinstance(m, convtune.nn.Conv2d) and m._last_plan is not None}
    return dict(collections.Counter(p.info["source"] for p in plans.values()))


def first_forward(impl: str, name: str, batch: int, mode: str) -> dict:
    import torch
    import torchvision
    torch.backends.cudnn.benchmark = True
    amp_type = getattr(torch, AMP_TYPES[mode]) if mode in AMP_TYPES else None
    bench_suite.set_math_mode("strict" if amp_type else mode)
    torch.manual_seed(0)
    model = torchvision.models.get_model(name, weights=None).cuda().eval()
    x = torch.randn(batch, 3, IMAGE, IMAGE, device="cuda")
    if amp_type is not None:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    torch.cuda.synchronize()
    result = {"model": name, "batch": batch, "mode": mode, "impl": impl}
    t0 = time.perf_counter()
    if impl == "convtune":
        import convtune
        convtune.convert(model)
    convert_ms = (time.perf_counter() - t0) * 1e3
    result["first_ms"] = convert_ms + timed_forward(model, x, amp_type)
    result["second_ms"] = timed_forward(model, x, amp_type)
    result["third_ms"] = timed_forward(model, x, amp_type)
    if impl == "convtune":
        result["convert_ms"] = convert_ms
        result["plan_sources"] = plan_sources(model)
    return result


def main(argv: list) -> int:
    args = parse_args(argv)
    return bench_common.print_json_result(
        lambda: first_forward(args.impl, args.model, args.batch, args.mode))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
