#!/usr/bin/env python3
"""Training steps of torchvision models through convtune against the same models on PyTorch.

For each model (random weights, train mode, no download) and math mode it
makes the model as PyTorch runs it (cuDNN benchmark mode) and a deep copy
converted with convtune.convert(model), as a user would (the default
context: layers train through the registered operator), each with its own
SGD optimizer (momentum 0.9), on a random batch and random labels:

- losses: 20 steps (forward, cross-entropy, backward, SGD step) of each,
  of the model in float64 and of PyTorch with its default algorithms, from
  the same start, for --seeds seeds (weights, batch, labels); convtune's
  median distance from float64's last loss is judged by PyTorch's own;
- calls: during seed 0's steps, every convtune layer call's output, dx and
  dw against float64 on the same tensors, with PyTorch's fp32 result on
  them as the yardstick (train_audit.py): losses that drift apart can be
  told from a gradient that is wrong;
- timing: seed 0's training steps of both, side by side with bench.py's
  helper (CUDA events around batches of steps, alternating rounds,
  median); the first convtune step tunes what the cache lacks and its
  time is reported apart.

    python3 tools/bench/train.py --cache build-gpu/train-cache.db --out-md BENCHMARKS-train.md

--cache sets $CONVTUNE_CACHE, the cache of the default context (the
library's default policy, predict, tunes what it lacks).  Ratios are
PyTorch's step time / convtune's.  Exit status: 0 done (whatever the
ratios), 1 losses or calls beyond the mode's bound, 2 usage error, 3 no GPU.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import math
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_common  # noqa: E402
import bench_env  # noqa: E402
import bench_render  # noqa: E402
import bench_suite  # noqa: E402
import bench_timing  # noqa: E402
import train_audit  # noqa: E402
from models import fallbacks  # noqa: E402  (a converted model's fallback counts)

MODELS = ("resnet50", "mobilenet_v2", "convnext_tiny")
IMAGE = 224
CLASSES = 1000
STEPS = 20
LR = 0.01
# Relative difference allowed between the two libraries' loss after STEPS
# steps: strict fp32 differs only by summation order; TF32 rounds inputs.
LOSS_BOUND = {"strict": 1e-3, "tf32": 2e-2, "bf16": 5e-2, "f16": 2e-2}
# Relative L2 error allowed for one convtune call against float64: the
# library's validation bounds.
CALL_BOUND = {"strict": 1e-4, "tf32": 1e-2}
RUNS = ("pytorch", "pytorch_default", "convtune")
# Mixed precision: models and input channels_last, the forward and the loss
# under torch.autocast("cuda", dtype=...), float16 with a GradScaler; the
# float64 run stays float64 (autocast leaves it alone) and unscaled.
AMP_MODES = {"bf16": "bfloat16", "f16": "float16"}
MODE_LABELS = {"bf16": "bf16 amp, channels_last", "f16": "f16 amp + GradScaler, channels_last"}
MODES_ALL = ("strict", "tf32", *AMP_MODES)


def parse_args(argv: list) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated torchvision names")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--modes", default="strict,tf32",
                   help="strict, tf32 (fp32), bf16 (autocast), f16 (autocast + GradScaler)")
    p.add_argument("--seeds", type=int, default=3, help="seeds whose losses are compared (default 3)")
    p.add_argument("--cache", default=None, help="convtune cache: sets $CONVTUNE_CACHE (default: the library's)")
    p.add_argument("--out-md", default=None, help="write the markdown report here")
    p.add_argument("--out-json", default=None)
    p.add_argument("--notes", metavar="FILE", default=None,
                   help="remarks written by hand about the run, put into --out-md")
    p.add_argument("--render", metavar="JSON", default=None,
                   help="only render --out-md from an earlier run's --out-json (no torch, no GPU)")
    return p.parse_args(argv)


def split(text: str) -> list:
    return [t.strip() for t in text.split(",") if t.strip()]


def mode_label(mode: str) -> str:
    """How a mode shows in the table: strict and tf32 as they are."""
    return MODE_LABELS.get(mode, mode)


def make_step(model, x, target, benchmark=True, amp=None):
    """One training step of `model` with its own SGD optimizer; returns the
    loss tensor.  benchmark=False: cuDNN's default algorithms, deterministic
    (PyTorch's other fp32 answer, for the spread of fp32 rounding).  amp:
    None, or an AMP mode: the forward and loss under autocast in its type,
    and for f16 a GradScaler (torch.amp.GradScaler("cuda"), its defaults)
    scaling the loss and unscaling the step, as PyTorch's AMP recipe."""
    import contextlib
    import torch
    import torch.nn.functional as F
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    flags = torch.backends.cudnn.flags
    dtype = None if amp is None else getattr(torch, AMP_MODES[amp])
    scaler = torch.amp.GradScaler("cuda") if amp == "f16" else None

    def step():
        with flags(enabled=True, benchmark=benchmark, deterministic=not benchmark,
                   allow_tf32=torch.backends.cudnn.allow_tf32):
            opt.zero_grad(set_to_none=True)
            with (torch.autocast("cuda", dtype=dtype) if dtype is not None
                  else contextlib.nullcontext()):
                loss = F.cross_entropy(model(x), target)
            if scaler is None:
                loss.backward()
                opt.step()
            else:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
        return loss
    step.scaler = scaler
    return step


def drift(losses: dict) -> dict:
    """Each run's last loss, relative to the float64 model's."""
    ref = losses["float64"][-1]
    return {lib: abs(losses[lib][-1] - ref) / abs(ref) for lib in RUNS}


def loss_verdict(drifts: dict, mode: str) -> dict:
    """convtune's median drift over the seeds against max(the mode's bound,
    twice the largest of PyTorch's drifts, both runs, every seed).  Training
    from random weights amplifies rounding chaotically: one run's drift is a
    random draw, and PyTorch's own draws for one seed differed more than
    tenfold from one run to the next (2026-11-26), so their range, not a
    multiple of a median, is the scale.  A wrong gradient lands far outside
    it; the per-call check (train_audit.py) is the fine one."""
    median = {lib: statistics.median(values) for lib, values in drifts.items()}
    limit = max(LOSS_BOUND[mode], 2 * max(drifts["pytorch"] + drifts["pytorch_default"]))
    return {"seed_drifts": drifts, "loss_drift": median, "loss_limit": limit,
            "losses_ok": median["convtune"] <= limit}


def build(name: str, batch: int, seed: int, channels_last: bool = False):
    """The model from `seed` (weights, batch, labels) and a converted copy;
    channels_last: both models and the input in that memory format."""
    import torch
    import torchvision
    import convtune
    torch.manual_seed(seed)
    base = torchvision.models.get_model(name, weights=None, num_classes=CLASSES).cuda().train()
    if channels_last:
        base = base.to(memory_format=torch.channels_last)
    ours = copy.deepcopy(base)
    report = convtune.convert(ours)  # the default context, as a user's: the operator trains it
    x = torch.randn(batch, 3, IMAGE, IMAGE, device="cuda")
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    target = torch.randint(0, CLASSES, (batch,), device="cuda")
    return base, ours, report, x, target


def train_losses(base, ours, x, target, audit=None, amp=None) -> tuple:
    """STEPS steps of each run from the same start: ({run: losses}, the
    first convtune step's seconds (it tunes what the cache lacks), the
    PyTorch and convtune steps).  `audit` checks each convtune step's calls.
    amp: an AMP mode for every run but float64's (plain float64 SGD, NCHW)."""
    import torch
    f64 = copy.deepcopy(base).double().to(memory_format=torch.contiguous_format)
    steps = {"pytorch": make_step(base, x, target, amp=amp), "convtune": make_step(ours, x, target, amp=amp),
             "float64": make_step(f64, x.double().contiguous(), target),
             "pytorch_default": make_step(copy.deepcopy(base), x, target, benchmark=False, amp=amp)}
    losses = {lib: [] for lib in steps}
    started = time.perf_counter()
    losses["convtune"].append(steps["convtune"]().item())
    torch.cuda.synchronize()
    first_step_s = time.perf_counter() - started
    for i in range(STEPS):
        if audit is not None and i > 0:
            audit.check_step()
        for lib, step in steps.items():
            if not (i == 0 and lib == "convtune"):
                losses[lib].append(step().item())
    if audit is not None:
        audit.check_step()
    return losses, first_step_s, steps["pytorch"], steps["convtune"]



def run_config(name: str, batch: int, mode: str, seeds: int) -> dict:
    """Seed 0: losses with every convtune call checked, then step times;
    every seed: the runs' drifts from float64, for the loss verdict."""
    import torch
    amp = mode if mode in AMP_MODES else None
    # AMP modes: the fp32 flags strict (autocast runs every conv and matmul in half).
    bench_suite.set_math_mode("strict" if amp else mode)
    row = {"model": name, "mode": mode, "batch": batch, "seeds": seeds}
    drifts = {lib: [] for lib in RUNS}
    for seed in range(seeds):
        base, ours, report, x, target = build(name, batch, seed, channels_last=amp is not None)
        # The per-call audit compares fp32 calls with float64 on the same
        # tensors; AMP modes are not audited (the losses are the check).
        audit = (train_audit.CallAudit(ours, tf32=mode == "tf32")
                 if seed == 0 and amp is None else None)
        losses, first_step_s, theirs, our_step = train_losses(base, ours, x, target, audit, amp)
        for lib, value in drift(losses).items():
            drifts[lib].append(value)
        if seed == 0:
            if audit is not None:
                audit.close()
            row.update({"converted": len(report.converted), "left": [list(item) for item in report.left],
                        "losses": losses, "first_step_s": first_step_s,
                        "calls": audit.summary() if audit is not None else {"skipped": "AMP"}})
            if amp == "f16":
                row["loss_scales"] = {"pytorch": theirs.scaler.get_scale(),
                                      "convtune": our_step.scaler.get_scale()}
            a, b = bench_timing.time_pair(theirs, our_step)
            row.update({"pytorch_ms": a.median_ms, "convtune_ms": b.median_ms,
                        "ratio": a.median_ms / b.median_ms, "spread": max(a.spread, b.spread),
                        "fallbacks": fallbacks(ours)})
        del base, ours, theirs, our_step, audit
        torch.cuda.empty_cache()
    row.update(loss_verdict(drifts, mode))
    row["calls_ok"] = (amp is not None
                       or row["calls"].get("max_convtune", math.inf) <= CALL_BOUND[mode])
    row["ok"] = row["losses_ok"] and row["calls_ok"]
    return row


def brief(row: dict) -> str:
    return (f"{row['model']} b{row['batch']} {mode_label(row['mode'])}: step {row['pytorch_ms']:.2f} vs "
            f"{row['convtune_ms']:.2f} ms ({row['ratio']:.2f}x); median drift from float64 after {STEPS} "
            f"steps over {row['seeds']} seeds {drift_cell(row)} (limit {row['loss_limit']:.1e}); "
            f"worst call {calls_cell(row)}, highest median error ratio {ratio_cell(row)}: "
            f"{'ok' if row['ok'] else 'DIFFERS'}; first convtune step {row['first_step_s']:.1f} s; "
            f"fallbacks {row['fallbacks']}"
            + (f"; GradScaler scale after the steps {row['loss_scales']}" if "loss_scales" in row else ""))


def loss_cell(row: dict, lib: str) -> str:
    """The last loss of `lib`, or "not measured" in rows of runs from before it was."""
    return f"{row['losses'][lib][-1]:.5f}" if lib in row["losses"] else "not measured"


def drift_cell(row: dict) -> str:
    d = row.get("loss_drift")
    return ("not measured" if d is None else
            f"{d['pytorch']:.1e} / {d['pytorch_default']:.1e} / {d['convtune']:.1e}")


def calls_cell(row: dict) -> str:
    """The worst convtune call's error and PyTorch's on the same tensors."""
    if "skipped" in row.get("calls", {}):
        return f"not audited ({row['calls']['skipped']})"
    worst = row.get("calls", {}).get("worst")
    return ("not measured" if worst is None else
            f"{worst['pytorch']:.1e} / {worst['convtune']:.1e} ({worst['layer']} {worst['pass']})")


def ratio_cell(row: dict) -> str:
    if "skipped" in row.get("calls", {}):
        return f"not audited ({row['calls']['skipped']})"
    ratio = row.get("calls", {}).get("worst_ratio")
    return ("not measured" if ratio is None else
            f"{ratio['median']:.2f}x ({ratio['layer']} {ratio['pass']})")


def render(results: dict) -> str:
    env, run = results["environment"], results["run"]
    seeds = run.get("seeds", 1)
    formula = {"C++": ": layers train through the operator and its C++ autograd formula",
               "Python": ": layers train through convtune.conv2d's Python autograd function, the "
                         "operator's C++ formula not being built"}.get(run.get("formula"), "")
    lines = ["# Training steps: convtune against PyTorch", "",
             f"Measured {run['date_utc']} on {env.get('gpu')} (driver {env.get('driver')}), "
             f"PyTorch {env.get('torch_version')}, torchvision {run['torchvision']}, convtune "
             f"{env.get('convtune_versions')}.", "", f"Command: `{run['command']}`", ""]
    rerun = run.get("rerun")
    if rerun:  # rows measured again, on the same machine and code, by a second command
        lines += [f"The {', '.join(rerun['models'])} rows: measured again {rerun['date_utc']} with "
                  f"`{rerun['command']}`.", ""]
    lines += ["torchvision models with random weights in train mode, batch "
             f"{run['batch']}, input `randn(batch, 3, {IMAGE}, {IMAGE})` and random labels. One step: "
             "zero the gradients, forward, cross-entropy, backward, SGD (lr "
             f"{LR}, momentum 0.9). PyTorch: the model as built, `cudnn.benchmark = True`. convtune: a "
             f"deep copy after `convtune.convert(model)` (the default context{formula}), whose convolutions run "
             "convtune's tuned forward, backward-data and backward-filter plans. Step times: CUDA "
             "events around batches of steps, alternating rounds, median. Losses: "
             f"{STEPS} steps of each, of the model in float64 and of PyTorch with its default "
             "(deterministic, not benchmarked) algorithms, from the same weights on the same batch, "
             f"for {seeds} seeds (weights, batch, labels); drift: the last loss's relative distance "
             "from float64's, the median over the seeds; losses ok when convtune's is at most "
             f"max({LOSS_BOUND['strict']:g} strict / {LOSS_BOUND['tf32']:g} TF32, twice the largest "
             "of PyTorch's, both runs, every seed). Calls: during the first seed's steps, every convtune layer call's "
             "output, dx and dw against float64's on the same tensors (relative L2), with PyTorch's "
             "fp32 result on those tensors; the worst call (PyTorch / convtune), ok at most "
             f"{CALL_BOUND['strict']:g} strict / {CALL_BOUND['tf32']:g} TF32, and the layer pass whose "
             "median error ratio (convtune / PyTorch) is highest. The first convtune step tunes what "
             "the cache lacks (its time is not in the step times).", ""]
    if any(r["mode"] in AMP_MODES for r in results["rows"]):
        lines += [amp_method_text(), ""]
    rows = [[r["model"], mode_label(r["mode"]), f"{r['pytorch_ms']:.2f}", f"{r['convtune_ms']:.2f}",
             f"{r['ratio']:.2f}x", loss_cell(r, "float64"), drift_cell(r), calls_cell(r), ratio_cell(r),
             "ok" if r["ok"] else "DIFFERS", f"{r['first_step_s']:.1f}",
             ", ".join(f"{k}: {v}" for k, v in r["fallbacks"].items()) or "none"]
            for r in results["rows"]]
    lines += bench_render.md_table(["model", "mode", "PyTorch ms/step", "convtune ms/step", "ratio",
                                    f"float64 loss @{STEPS}", "drift PyTorch / PyTorch default / convtune",
                                    "worst call PyTorch / convtune", "highest error ratio", "verdict",
                                    "first convtune step s", "fallbacks"], rows)
    if results.get("notes_md"):
        lines += ["", "## Notes", "", results["notes_md"].strip()]
    return "\n".join(lines) + "\n"


def amp_method_text() -> str:
    return ("Mixed-precision rows (`bf16 amp, channels_last`; `f16 amp + GradScaler, channels_last`): "
            "both models and the input `channels_last`, the forward and the loss under "
            "`torch.autocast(\"cuda\", dtype=torch.bfloat16 / torch.float16)`, for f16 with "
            "`torch.amp.GradScaler(\"cuda\")` (its defaults: `scaler.scale(loss).backward()`, "
            "`scaler.step(opt)`, `scaler.update()`), the same for PyTorch's runs and convtune's; TF32 "
            "flags off. The float64 run is the fp32 model in float64 (autocast leaves float64 alone), "
            "NCHW, unscaled: the drifts measure each library's mixed-precision training against "
            "exact arithmetic, PyTorch's own being the scale; losses ok when convtune's median drift "
            f"is at most max({LOSS_BOUND['bf16']:g} bf16 / {LOSS_BOUND['f16']:g} f16, twice the "
            "largest of PyTorch's). The per-call audit is not run in these modes (it compares fp32 "
            "calls with float64 on the same tensors).")


def save(results: dict, args: argparse.Namespace) -> None:
    bench_render.save_results(results, args.out_json, args.out_md, render)


def main(argv: list | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    args = parse_args(argv[1:])
    notes = {"notes_md": Path(args.notes).read_text(encoding="utf-8")} if args.notes else {}
    if args.render:
        return bench_render.render_saved(args.render, args.out_md, render, notes)
    if args.seeds < 1:
        print("train.py: --seeds must be at least 1", file=sys.stderr)
        return 2
    modes = split(args.modes)
    bad = [m for m in modes if m not in MODES_ALL]
    if bad or not modes:
        print(f"train.py: --modes takes a comma-separated subset of {', '.join(MODES_ALL)}",
              file=sys.stderr)
        return 2
    if args.cache:  # before the library opens the default context
        os.environ["CONVTUNE_CACHE"] = os.path.abspath(args.cache)
    started = time.perf_counter()
    torch, convtune = bench_env.import_or_exit("train.py")
    import torchvision
    import convtune.nn  # noqa: F401
    import convtune.ops
    torch.backends.cudnn.benchmark = True
    device = torch.cuda.current_device()
    rows = []
    results = {"run": {"command": bench_env.command_line(argv, os.environ), "cache": args.cache,
                       "seeds": args.seeds, "batch": args.batch, "torchvision": torchvision.__version__,
                       "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                       "elapsed_s": 0.0, "formula": convtune.ops.formula},
               "environment": bench_env.gather_environment(convtune, device), "rows": rows, **notes}
    for name in split(args.models):
        for mode in modes:
            row = run_config(name, args.batch, mode, args.seeds)
            torch.cuda.empty_cache()
            bench_common.log(brief(row))
            rows.append(row)
            results["run"]["elapsed_s"] = time.perf_counter() - started
            save(results, args)  # after every row: a run cut short keeps what it measured
    print(render(results))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
