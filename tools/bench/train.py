#!/usr/bin/env python3
"""Training steps of torchvision models through convtune against the same models on PyTorch.

For each model (random weights, train mode, no download) and math mode it
makes the model as PyTorch runs it (cuDNN benchmark mode) and a deep copy
converted with convtune.convert (same weights), each with its own SGD
optimizer (momentum 0.9), and on one random batch and random labels:

- losses: 20 steps (forward, cross-entropy, backward, SGD step) of each,
  of the model in float64 and of PyTorch with its default algorithms, from
  the same start, so that convtune's distance from float64 is judged by
  PyTorch's own; the
  first convtune step tunes the backward passes' plans (and any forward plan
  missing from --cache) and its time is reported apart;
- timing: training steps of both, side by side with bench.py's helper
  (CUDA events around batches of steps, alternating rounds, median);
- gradients: one forward and backward of each from the starting weights
  (fresh copies, eval mode), every conv weight's gradient against the same
  model's in float64: PyTorch's error and convtune's, so that losses that
  drift apart can be told from gradients that are wrong.

    python3 tools/bench/train.py --cache build-gpu/train-cache.db --out-md BENCHMARKS-train.md

Ratios are PyTorch's step time / convtune's.  Exit status: 0 done (whatever
the ratios), 1 losses that disagree beyond the mode's bound, 2 usage error,
3 no GPU.
"""

from __future__ import annotations

import argparse
import copy
import datetime
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
from models import fallbacks  # noqa: E402  (a converted model's fallback counts)

MODELS = ("resnet50", "mobilenet_v2", "convnext_tiny")
IMAGE = 224
CLASSES = 1000
STEPS = 20
LR = 0.01
# Relative difference allowed between the two libraries' loss after STEPS
# steps: strict fp32 differs only by summation order; TF32 rounds inputs.
LOSS_BOUND = {"strict": 1e-3, "tf32": 2e-2}


def parse_args(argv: list) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated torchvision names")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--modes", default="strict,tf32")
    p.add_argument("--cache", default=None, help="convtune cache (default: the library's)")
    p.add_argument("--policy", default="predict", choices=("predict", "exhaustive", "fast", "cache_only"),
                   help="how missing plans are tuned (default predict, the library's default)")
    p.add_argument("--out-md", default=None, help="write the markdown report here")
    p.add_argument("--out-json", default=None)
    p.add_argument("--notes", metavar="FILE", default=None,
                   help="remarks written by hand about the run, put into --out-md")
    p.add_argument("--render", metavar="JSON", default=None,
                   help="only render --out-md from an earlier run's --out-json (no torch, no GPU)")
    return p.parse_args(argv)


def split(text: str) -> list:
    return [t for t in text.split(",") if t.strip()]


def make_step(model, x, target, benchmark=True):
    """One training step of `model` with its own SGD optimizer; returns the
    loss tensor.  benchmark=False: cuDNN's default algorithms, deterministic
    (PyTorch's other fp32 answer, for the spread of fp32 rounding)."""
    import torch
    import torch.nn.functional as F
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    flags = torch.backends.cudnn.flags

    def step():
        with flags(enabled=True, benchmark=benchmark, deterministic=not benchmark,
                   allow_tf32=torch.backends.cudnn.allow_tf32):
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), target)
            loss.backward()
            opt.step()
        return loss
    return step


def gradient_errors(base, ours, x, target) -> dict:
    """Each library's relative L2 error, per conv weight, of the gradients of
    one forward and backward against the float64 model's, all three in eval
    mode: BatchNorm with batch statistics amplifies rounding so much at
    random weights (PyTorch's own first gradients were 2% to 70% off
    float64's in train mode) that a wrong gradient would not stand out."""
    import torch.nn.functional as F
    ref = copy.deepcopy(base).double()
    for model, inp in ((base, x), (ours, x), (ref, x.double())):
        model.eval()
        model.zero_grad(set_to_none=True)
        F.cross_entropy(model(inp), target).backward()
    layers = [{"weight": name, "pytorch": bench_timing.rel_l2(pb.grad, pr.grad),
               "convtune": bench_timing.rel_l2(po.grad, pr.grad)}
              for (name, pb), po, pr in zip(base.named_parameters(), ours.parameters(), ref.parameters())
              if pr.dim() == 4 and pr.grad is not None]
    del ref
    worst = max(layers, key=lambda l: l["convtune"])
    return {"max_pytorch": max(l["pytorch"] for l in layers), "max_convtune": worst["convtune"],
            "worst_weight": worst["weight"], "layers": layers}


def loss_verdict(losses: dict, mode: str) -> dict:
    """How far each run's last loss is from the float64 model's, and whether
    convtune's is within max(the mode's bound, twice PyTorch's larger one):
    training amplifies rounding, so PyTorch's own distance from float64, with
    its tuned and with its default algorithms, is the scale against which
    convtune's is judged."""
    ref = losses["float64"][-1]
    drift = {lib: abs(losses[lib][-1] - ref) / abs(ref)
             for lib in ("pytorch", "pytorch_default", "convtune")}
    limit = max(LOSS_BOUND[mode], 2 * max(drift["pytorch"], drift["pytorch_default"]))
    return {"loss_drift": drift, "loss_limit": limit, "ok": drift["convtune"] <= limit}


def run_config(name: str, batch: int, mode: str, context) -> dict:
    import torch
    import torchvision
    import convtune
    bench_suite.set_math_mode(mode)
    torch.manual_seed(0)
    base = torchvision.models.get_model(name, weights=None, num_classes=CLASSES).cuda().train()
    ours = copy.deepcopy(base)
    report = convtune.convert(ours, context=context)
    x = torch.randn(batch, 3, IMAGE, IMAGE, device="cuda")
    target = torch.randint(0, CLASSES, (batch,), device="cuda")
    starts = copy.deepcopy(base), copy.deepcopy(ours)  # the starting weights, for the gradient check
    steps = {"pytorch": make_step(base, x, target), "convtune": make_step(ours, x, target),
             "float64": make_step(copy.deepcopy(base).double(), x.double(), target),
             "pytorch_default": make_step(copy.deepcopy(base), x, target, benchmark=False)}
    row = {"model": name, "mode": mode, "batch": batch, "converted": len(report.converted),
           "left": [list(item) for item in report.left]}
    started = time.perf_counter()
    first = steps["convtune"]().item()
    torch.cuda.synchronize()
    row["first_step_s"] = time.perf_counter() - started
    losses = {"pytorch": [steps["pytorch"]().item()], "convtune": [first]}
    losses.update({lib: [steps[lib]().item()] for lib in ("float64", "pytorch_default")})
    for _ in range(STEPS - 1):
        for lib in losses:
            losses[lib].append(steps[lib]().item())
    del steps["float64"], steps["pytorch_default"]
    row["losses"] = losses
    row.update(loss_verdict(losses, mode))
    a, b = bench_timing.time_pair(steps["pytorch"], steps["convtune"])
    row.update({"pytorch_ms": a.median_ms, "convtune_ms": b.median_ms, "ratio": a.median_ms / b.median_ms,
                "spread": max(a.spread, b.spread), "fallbacks": fallbacks(ours)})
    del steps, base, ours
    row["gradients"] = gradient_errors(*starts, x, target)
    return row


def brief(row: dict) -> str:
    return (f"{row['model']} b{row['batch']} {row['mode']}: step {row['pytorch_ms']:.2f} vs "
            f"{row['convtune_ms']:.2f} ms ({row['ratio']:.2f}x); loss after {STEPS} steps "
            f"{row['losses']['pytorch'][-1]:.5f} vs {row['losses']['convtune'][-1]:.5f}, float64 "
            f"{row['losses']['float64'][-1]:.5f} (drift {drift_cell(row)}: "
            f"{'ok' if row['ok'] else 'DIFFERS'}); "
            f"first convtune step {row['first_step_s']:.1f} s; "
            f"fallbacks {row['fallbacks']}; worst conv-weight gradient error against float64: "
            f"PyTorch {row['gradients']['max_pytorch']:.1e}, convtune {row['gradients']['max_convtune']:.1e} "
            f"({row['gradients']['worst_weight']})")


def loss_cell(row: dict, lib: str) -> str:
    """The last loss of `lib`, or "not measured" in rows of runs from before it was."""
    return f"{row['losses'][lib][-1]:.5f}" if lib in row["losses"] else "not measured"


def drift_cell(row: dict) -> str:
    d = row.get("loss_drift")
    return ("not measured" if d is None else
            f"{d['pytorch']:.1e} / {d['pytorch_default']:.1e} / {d['convtune']:.1e}")


def gradient_cell(row: dict) -> str:
    g = row.get("gradients")
    return "not measured" if g is None else f"{g['max_pytorch']:.1e} / {g['max_convtune']:.1e}"


def render(results: dict) -> str:
    env, run = results["environment"], results["run"]
    lines = ["# Training steps: convtune against PyTorch", "",
             f"Measured {run['date_utc']} on {env.get('gpu')} (driver {env.get('driver')}), "
             f"PyTorch {env.get('torch_version')}, torchvision {run['torchvision']}, convtune "
             f"{env.get('convtune_versions')}.", "", f"Command: `{run['command']}`", "",
             "torchvision models with random weights in train mode, batch "
             f"{run['batch']}, input `randn(batch, 3, {IMAGE}, {IMAGE})` and random labels. One step: "
             "zero the gradients, forward, cross-entropy, backward, SGD (lr "
             f"{LR}, momentum 0.9). PyTorch: the model as built, `cudnn.benchmark = True`. convtune: a "
             "deep copy after `convtune.convert(model)`, whose convolutions run convtune's tuned "
             "forward, backward-data and backward-filter plans. Step times: CUDA events around "
             "batches of steps, alternating rounds, median. Losses: "
             f"{STEPS} steps of each, of the model in float64 and of PyTorch with its default "
             "(deterministic, not benchmarked) algorithms, from the same weights on the same batch; "
             "drift: the last loss's relative distance from float64's; ok when convtune's drift is "
             f"at most max({LOSS_BOUND['strict']:g} strict / {LOSS_BOUND['tf32']:g} TF32, twice "
             "the larger of PyTorch's two). The first convtune step tunes what the cache lacks (its time is not in the "
             "step times). Gradient error: the largest relative L2 error, over the conv weights, of "
             "one backward's gradients against the model's in float64, from the starting weights, "
             "all in eval mode (PyTorch / convtune).", ""]
    rows = [[r["model"], r["mode"], f"{r['pytorch_ms']:.2f}", f"{r['convtune_ms']:.2f}",
             f"{r['ratio']:.2f}x", f"{r['losses']['pytorch'][-1]:.5f}", f"{r['losses']['convtune'][-1]:.5f}",
             loss_cell(r, "float64"), drift_cell(r), "ok" if r["ok"] else "DIFFERS", gradient_cell(r),
             f"{r['first_step_s']:.1f}", ", ".join(f"{k}: {v}" for k, v in r["fallbacks"].items()) or "none"]
            for r in results["rows"]]
    lines += bench_render.md_table(["model", "mode", "PyTorch ms/step", "convtune ms/step",
                                    "ratio", f"PyTorch loss @{STEPS}", f"convtune loss @{STEPS}",
                                    f"float64 loss @{STEPS}", "drift PyTorch / PyTorch default / convtune", "losses",
                                    "gradient error", "first convtune step s", "fallbacks"], rows)
    if results.get("notes_md"):
        lines += ["", "## Notes", "", results["notes_md"].strip()]
    return "\n".join(lines) + "\n"


def save(results: dict, args: argparse.Namespace) -> None:
    bench_render.save_results(results, args.out_json, args.out_md, render)


def main(argv: list | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    args = parse_args(argv[1:])
    notes = {"notes_md": Path(args.notes).read_text(encoding="utf-8")} if args.notes else {}
    if args.render:
        return bench_render.render_saved(args.render, args.out_md, render, notes)
    started = time.perf_counter()
    torch, convtune = bench_env.import_or_exit("train.py")
    import torchvision
    import convtune.nn  # noqa: F401
    torch.backends.cudnn.benchmark = True
    device = torch.cuda.current_device()
    context = convtune.Context(device=device, cache=args.cache, policy=args.policy)
    rows = []
    results = {"run": {"command": bench_env.command_line(argv, os.environ), "cache": args.cache,
                       "policy": args.policy, "batch": args.batch, "torchvision": torchvision.__version__,
                       "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                       "elapsed_s": 0.0},
               "environment": bench_env.gather_environment(convtune, device), "rows": rows, **notes}
    for name in split(args.models):
        for mode in split(args.modes):
            row = run_config(name, args.batch, mode, context)
            torch.cuda.empty_cache()
            bench_common.log(brief(row))
            rows.append(row)
            results["run"]["elapsed_s"] = time.perf_counter() - started
            save(results, args)  # after every row: a run cut short keeps what it measured
    context.close()
    print(render(results))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
