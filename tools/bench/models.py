#!/usr/bin/env python3
"""Whole torchvision models through convtune against the same models on PyTorch.

For each model (random weights, eval mode, no download), batch size and math
mode it makes the model as PyTorch runs it (cuDNN benchmark mode) and a deep
copy converted with convtune.convert (same weights), then, side by side in
one process with bench.py's timing helpers:

- eager: the forward in a loop under torch.no_grad(), CUDA events around
  batches of forwards, alternating rounds;
- graph: the whole forward captured into one torch.cuda.CUDAGraph and replayed;
- compile: torch.compile(model, fullgraph=True), then as eager;
- outputs: each library's relative L2 error against the model run in float64;
- layers: every unique conv layer (input shape and parameters) timed alone,
  both libraries, as graph replays of back-to-back calls (GPU time), with
  the plan's algorithm; and the sums over all conv calls of the model;
- host: host microseconds of each conv layer's call inside the model loop
  (--host-batch, between forward hooks, the two models in alternating
  rounds), PyTorch's nn.Conv2d against the converted layer, per layer and
  as the median over layers, and how the plans' calls ran (graph replays,
  captures, direct runs).

    python3 tools/bench/models.py --cache build-gpu/models-cache.db --out-md BENCHMARKS.md

--out-md replaces the models section of that file (from its marker to the
end; bench.py keeps the section when it rewrites the file).  Plans come from
--cache; what is missing is tuned on first use with --policy (default
predict, the library's default; exhaustive times every config), the tuning
time reported and excluded from every timing.  Exit status: 0 done
(whatever the ratios), 1 an output check failed, 2 usage error, 3 no GPU.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# bench.py's parts: timing, environment and rendering helpers.
import bench_common  # noqa: E402
import bench_env  # noqa: E402
import bench_render  # noqa: E402
import bench_suite  # noqa: E402
import bench_timing  # noqa: E402

MODELS = ("resnet50", "mobilenet_v2", "convnext_tiny", "regnet_y_400mf")
# Issue 58's zoo, one model of each torchvision classification family:
# --models zoo.
ZOO = ("alexnet", "vgg11_bn", "resnet18", "resnet50", "resnext50_32x4d", "wide_resnet50_2",
       "densenet121", "googlenet", "inception_v3", "mobilenet_v2", "mobilenet_v3_large",
       "mnasnet1_0", "shufflenet_v2_x1_0", "squeezenet1_1", "efficientnet_b0", "efficientnet_v2_s",
       "regnet_y_400mf", "regnet_x_1_6gf", "convnext_tiny")
IMAGE = 224
# The models built for another input size than IMAGE.
IMAGE_SIZES = {"inception_v3": 299}
# Their auxiliary classifiers never run in eval mode: not built.
NO_AUX = {"googlenet", "inception_v3"}
MARKER = bench_render.MODELS_MARKER
# Relative L2 error of a whole model's output against the float64 model:
# each layer's error compounds through 50-odd layers.
MODEL_LIMIT = {"strict": 1e-3, "tf32": 5e-2, "bf16": 5e-2, "f16": 1e-2}
LAYER_CAP_MS = 400.0     # per library and layer, over both rounds
HOST_WARMUP = 5      # forwards of each model before the host-cost loop times
HOST_ROUNDS = 3      # alternating rounds of the host-cost loop ...
HOST_PER_ROUND = 10  # ... of this many forwards per model
HOST_PROBES = 4      # hooked nn.Identity calls after each forward: the hooks' own cost
HOST_SHOWN = 8       # layers a row's host-cost detail lists, highest ratio first
NOT_BELOW = 0.97          # the bound for a layer alone
MODES_ALL = ("strict", "tf32")
# Mixed precision: both models and the input channels_last, every forward
# (and every layer called alone) under torch.autocast("cuda", dtype=...).
AMP_MODES = {"bf16": "bfloat16", "f16": "float16"}
MODE_LABELS = {"bf16": "bf16 amp, channels_last", "f16": "f16 amp, channels_last"}


def parse_args(argv: list) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(MODELS),
                   help="comma-separated torchvision names; zoo: one model of each family (ZOO)")
    p.add_argument("--batches", default="1,16")
    p.add_argument("--modes", default="strict,tf32",
                   help="strict, tf32 (fp32 models), bf16, f16 (autocast, channels_last)")
    p.add_argument("--ways", default="eager,graph,compile",
                   help="end-to-end timings to run (eager, graph, compile)")
    p.add_argument("--compile-batches", default="16", help="batch sizes that get the compile timing")
    p.add_argument("--compile-modes", default="strict,tf32,bf16,f16",
                   help="modes that get the compile timing (of those in --modes)")
    p.add_argument("--no-layers", action="store_true", help="skip the per-layer timings")
    p.add_argument("--fuse", action="store_true",
                   help="inference-fused models: PyTorch's with torch.fx's Conv-BatchNorm fold, "
                        "convtune's with convtune.fuse (the fold, and ReLU in the plans' epilogue)")
    p.add_argument("--host-batch", type=int, default=1, help="batch of the host-cost loop (0: skip)")
    p.add_argument("--no-race", action="store_true",
                   help="converted layers always run their plans (race_pytorch off)")
    p.add_argument("--cache", default=None, help="convtune cache (default: the library's)")
    p.add_argument("--policy", default="predict", choices=("exhaustive", "fast", "cache_only", "predict"))
    p.add_argument("--tuning-budget-ms", type=float, default=0.0,
                   help="per-problem tuning budget of the layers' context (0: none)")
    p.add_argument("--tune-only", action="store_true", help="only make sure every plan is tuned")
    p.add_argument("--out-md", default=None, help="file whose models section is (re)written")
    p.add_argument("--out-json", default=None)
    p.add_argument("--notes", metavar="FILE", default=None,
                   help="remarks written by hand about the run, put into --out-md")
    p.add_argument("--merge", metavar="JSON", nargs="+", default=[],
                   help="with --render: add the rows of these runs' JSON (same GPU, PyTorch and convtune versions); "
                        "--out-json then writes the merged runs")
    p.add_argument("--render", metavar="JSON", default=None,
                   help="only render --out-md from an earlier run's --out-json (no torch, no GPU)")
    return p.parse_args(argv)


def model_names(text: str) -> list:
    """--models: torchvision names, "zoo" standing for ZOO; each once, in order."""
    names = []
    for name in split(text):
        for one in (ZOO if name == "zoo" else (name,)):
            if one not in names:
                names.append(one)
    return names


def image_size(name: str) -> int:
    return IMAGE_SIZES.get(name, IMAGE)


def split(text: str, cast=str) -> list:
    return [cast(t.strip()) for t in text.split(",") if t.strip()]


def check_modes(modes: list, option: str) -> list:
    """The modes named, or a usage error (exit status 2) for an unknown one."""
    bad = [m for m in modes if m not in MODES_ALL and m not in AMP_MODES]
    if bad or not modes:
        print(f"models.py: {option} takes a comma-separated subset of strict, tf32, "
              f"{', '.join(AMP_MODES)}" + (f" (not {', '.join(bad)})" if bad else ""), file=sys.stderr)
        raise SystemExit(2)
    return modes


def mode_label(mode: str) -> str:
    """How a mode shows in the tables: strict and tf32 as they are."""
    return MODE_LABELS.get(mode, mode)


def row_label(row: dict) -> str:
    """A row's mode as the tables show it, and whether both models were fused (--fuse)."""
    return mode_label(row["mode"]) + (", fused" if row.get("fused") else "")


def amp_dtype(mode: str):
    """autocast's dtype for an AMP mode, None for the fp32 modes."""
    if mode not in AMP_MODES:
        return None
    import torch
    return getattr(torch, AMP_MODES[mode])


def amp_fn(fn, mode: str):
    """fn, called under torch.autocast("cuda", dtype=...) in an AMP mode
    (entered and left at each call, as a model's forward would)."""
    dtype = amp_dtype(mode)
    if dtype is None:
        return fn
    import torch

    def run(*args):
        with torch.autocast("cuda", dtype=dtype):
            return fn(*args)
    return run


_AUTOCAST_CLASS = None


def autocast_model(model, mode: str):
    """`model` wrapped so that its forward runs under autocast in an AMP mode
    (the same wrapper for both libraries); `model` itself otherwise.  The
    wrapped model is the attribute `wrapped_model`: conv_layers() names its
    layers as the unwrapped model's."""
    global _AUTOCAST_CLASS
    if mode not in AMP_MODES:
        return model
    import torch
    if _AUTOCAST_CLASS is None:
        class Autocast(torch.nn.Module):
            def __init__(self, inner, dtype_name):
                super().__init__()
                self.wrapped_model = inner
                self.dtype_name = dtype_name

            def forward(self, x):
                with torch.autocast("cuda", dtype=getattr(torch, self.dtype_name)):
                    return self.wrapped_model(x)
        _AUTOCAST_CLASS = Autocast
    return _AUTOCAST_CLASS(model, AMP_MODES[mode])


def unwrapped(model):
    """The model inside autocast_model's wrapper, or `model`."""
    return getattr(model, "wrapped_model", model)


# ---------------------------------------------------------------- models


def build(name: str, seed: int = 0):
    import torch
    import torchvision
    torch.manual_seed(seed)
    extra = {"aux_logits": False, "init_weights": True} if name in NO_AUX else {}
    return torchvision.models.get_model(name, weights=None, **extra).cuda().eval()


def conv_layers(model) -> dict:
    import torch
    return {name: m for name, m in unwrapped(model).named_modules() if isinstance(m, torch.nn.Conv2d)}


def layer_key(layer, x) -> tuple:
    return (tuple(x.shape), tuple(layer.weight.shape), layer.stride, layer.padding, layer.dilation,
            layer.groups, layer.bias is not None, layer.padding_mode)


def layer_spec_text(key: tuple) -> str:
    (n, c, h, w), (k, _, r, s), stride, pad, dil, groups, bias, _ = key
    text = f"n{n} c{c} {h}x{w} k{k} {r}x{s}"
    text += "" if stride == (1, 1) else f" s{stride[0]}" if stride[0] == stride[1] else f" s{stride}"
    text += "" if pad in ((0, 0), "valid") else f" p{pad[0]}" if pad[0] == pad[1] else f" p{pad}"
    text += "" if dil == (1, 1) else f" d{dil[0]}"
    return text + ("" if groups == 1 else " dw" if groups == c else f" g{groups}") + (" +b" if bias else "")


def record_layer_inputs(model, x) -> dict:
    """{name: its input} of every conv layer in one forward."""
    seen, hooks = {}, []
    for name, layer in conv_layers(model).items():
        hooks.append(layer.register_forward_pre_hook(
            lambda m, args, name=name: seen.__setitem__(name, args[0].clone())))
    try:
        model(x)
    finally:
        for h in hooks:
            h.remove()
    return seen


def plan_counters(model) -> dict:
    """Sum over the converted layers' distinct plans of their call counters."""
    import convtune.nn
    plans = {id(m._last_plan): m._last_plan for m in model.modules()
             if isinstance(m, convtune.nn.Conv2d) and m._last_plan is not None}
    total = {"graph_launches": 0, "graph_captures": 0, "direct_runs": 0}
    for plan in plans.values():
        info = plan.info
        for k in total:
            total[k] += info[k]
    return total


def fallbacks(model) -> dict:
    """{reason: calls} of the calls PyTorch's forward ran, over the converted
    layers; a race PyTorch's forward won is one reason (convtune.nn.LOST_RACE),
    its layers in raced_to_pytorch."""
    import convtune.nn
    counts = {}
    for m in model.modules():
        if isinstance(m, convtune.nn.Conv2d):
            for why, n in m.fallbacks.items():
                why = convtune.nn.LOST_RACE if why.startswith(convtune.nn.LOST_RACE) else why
                counts[why] = counts.get(why, 0) + n
    return counts


def raced_to_pytorch(model) -> list:
    """[layer name, why] of the converted layers whose race PyTorch's forward won."""
    import convtune.nn
    return [[name, why] for name, m in model.named_modules() if isinstance(m, convtune.nn.Conv2d)
            for why in m.fallbacks if why.startswith(convtune.nn.LOST_RACE)]


# ---------------------------------------------------------------- measurements


def output_errors(base, ours, x) -> dict:
    """Each library's output against the model in float64 (NCHW; an AMP
    mode's autocast leaves float64 alone)."""
    import torch
    ref_model = copy.deepcopy(base).double().to(memory_format=torch.contiguous_format)
    with torch.no_grad():
        ref = ref_model(x.double().contiguous())
        err = {"pytorch": bench_timing.rel_l2(base(x), ref), "convtune": bench_timing.rel_l2(ours(x), ref)}
    del ref_model
    return err


def pair(fn_a, fn_b) -> dict:
    a, b = bench_timing.time_pair(fn_a, fn_b)
    return {"pytorch_ms": a.median_ms, "convtune_ms": b.median_ms,
            "ratio": a.median_ms / b.median_ms, "spread": max(a.spread, b.spread)}


def graph_pair(fn_a, fn_b, guess_a=None, guess_b=None, cap_ms=bench_timing.MEASURE_CAP_MS) -> dict:
    ra, rb = bench_timing.time_graph_pair(fn_a, fn_b, guess_a, guess_b, cap_ms)
    if ra.timing is None or rb.timing is None:
        return {"note": ra.note or rb.note}
    out = {"pytorch_ms": ra.timing.median_ms, "convtune_ms": rb.timing.median_ms,
           "ratio": ra.timing.median_ms / rb.timing.median_ms,
           "replayed_ok": ra.out is not None and rb.out is not None
           and bench_timing.rel_l2(rb.out, ra.out) < 1e-2}
    return out


def compiled_pair(base, ours, x, mode: str) -> dict:
    """torch.compile of each model; in an AMP mode the unwrapped models are
    compiled and called under autocast, as a user's compiled model is."""
    import torch
    torch._dynamo.reset()
    started = time.perf_counter()
    cb = amp_fn(torch.compile(unwrapped(base), fullgraph=True), mode)
    co = amp_fn(torch.compile(unwrapped(ours), fullgraph=True), mode)
    with torch.no_grad():
        ya, yb = cb(x), co(x)
        torch.cuda.synchronize()
        compile_s = time.perf_counter() - started
        result = pair(lambda: cb(x), lambda: co(x))
        result["rel_l2_between"] = bench_timing.rel_l2(yb, ya)
    result["compile_s"] = compile_s
    torch._dynamo.reset()
    return result


def layer_table(base, ours, x, mode: str = "strict") -> list:
    """One row per unique conv layer: both libraries alone, as graph replays
    (in an AMP mode each call under autocast, on the input the layer got in
    the model's forward)."""
    import torch
    with torch.no_grad():
        inputs = record_layer_inputs(ours, x)
    ours_layers, base_layers = conv_layers(ours), conv_layers(base)
    groups = {}
    for name, inp in inputs.items():
        key = layer_key(ours_layers[name], inp)
        groups.setdefault(key, []).append(name)
    rows = []
    for key, names in groups.items():
        name = names[0]
        inp = inputs[name]
        mine, theirs = amp_fn(ours_layers[name], mode), amp_fn(base_layers[name], mode)
        with torch.no_grad():
            mine(inp)
            algorithm = plan_text(ours_layers[name])
            timing = graph_pair(lambda: theirs(inp), lambda: mine(inp), cap_ms=LAYER_CAP_MS)
        rows.append({"layer": name, "count": len(names), "spec": layer_spec_text(key), **timing,
                     "algorithm": algorithm})
    return rows


def plan_text(layer) -> str:
    """The algorithm and config of the plan the layer's last call ran."""
    info = (layer.plan_info() if hasattr(layer, "plan_info") else None) or {}  # None: left by convert
    return f"{info.get('algorithm', 'PyTorch (fallback)')} {info.get('config', '')}".strip()


def host_costs(base, ours, x) -> dict:
    """Host microseconds of each conv layer's call inside the model loop,
    between a forward pre-hook and a forward hook (the same hooks on both
    models), synchronising after each forward so that no launch waits for
    a full queue.  The two models run in alternating rounds, so that load
    on the host while it measures falls on both.

    The hooks and nn.Module's call with hooks cost time of their own,
    the same on both sides.  An nn.Identity hooked the same way and called
    HOST_PROBES times after each forward measures that floor; "net" is a
    layer's time less its side's floor: what the layer's forward itself
    costs (for PyTorch, nn.Conv2d.forward and the F.conv2d in it)."""
    import torch

    def hook(layers, samples):
        stamps, hooks = {}, []
        for name, layer in layers.items():
            hooks.append(layer.register_forward_pre_hook(
                lambda m, a, name=name: stamps.__setitem__(name, time.perf_counter_ns())))
            hooks.append(layer.register_forward_hook(
                lambda m, a, y, name=name: samples.setdefault(name, []).append(
                    time.perf_counter_ns() - stamps[name])))
        return hooks

    probes = {"pytorch": torch.nn.Identity(), "convtune": torch.nn.Identity()}

    def forwards(model, probe, count):
        for _ in range(count):
            model(x)
            for _ in range(HOST_PROBES):
                probe(x)
            torch.cuda.synchronize()

    before = plan_counters(ours)
    samples = {"pytorch": {}, "convtune": {}}
    floors = {"pytorch": {}, "convtune": {}}
    with torch.no_grad():
        forwards(base, probes["pytorch"], HOST_WARMUP)  # plans record their graphs here
        forwards(ours, probes["convtune"], HOST_WARMUP)
        hooks = (hook(conv_layers(base), samples["pytorch"]) + hook(conv_layers(ours), samples["convtune"])
                 + hook({"probe": probes["pytorch"]}, floors["pytorch"])
                 + hook({"probe": probes["convtune"]}, floors["convtune"]))
        try:
            for _ in range(HOST_ROUNDS):
                forwards(base, probes["pytorch"], HOST_PER_ROUND)
                forwards(ours, probes["convtune"], HOST_PER_ROUND)
        finally:
            for h in hooks:
                h.remove()
    after = plan_counters(ours)
    pt, ct = ({name: statistics.median(v) / 1e3 for name, v in samples[lib].items()}
              for lib in ("pytorch", "convtune"))
    pt_floor, ct_floor = (statistics.median(floors[lib]["probe"]) / 1e3 for lib in ("pytorch", "convtune"))
    ours_layers = conv_layers(ours)
    layers = sorted(({"layer": name, "pytorch_us": pt[name], "convtune_us": ct[name],
                      "ratio": ct[name] / pt[name],
                      "net_ratio": (ct[name] - ct_floor) / (pt[name] - pt_floor),
                      "algorithm": plan_text(ours_layers[name])}
                     for name in ct if name in pt), key=lambda l: -l["ratio"])
    pt_median, ct_median = statistics.median(pt.values()), statistics.median(ct.values())
    return {"pytorch_us": pt_median, "convtune_us": ct_median, "ratio": ct_median / pt_median,
            "pytorch_floor_us": pt_floor, "convtune_floor_us": ct_floor,
            "net_ratio": (ct_median - ct_floor) / (pt_median - pt_floor),
            "pytorch_sum_us": sum(pt.values()), "convtune_sum_us": sum(ct.values()),
            "calls": {k: after[k] - before[k] for k in after}, "method": "alternating",
            "layers": layers}


# ---------------------------------------------------------------- one configuration


def fused_pair(base, context, channels_last: bool):
    """(PyTorch's model with its Conv-BatchNorm pairs folded by torch.fx's
    fuser, convtune.fuse's copy of `base`, that copy's FuseReport); the
    folded weights channels-last again where `base`'s were."""
    import torch
    import torch.fx.experimental.optimization as fx_optimization
    import convtune
    reference = fx_optimization.fuse(base, inplace=False)
    if channels_last:
        reference = reference.to(memory_format=torch.channels_last)
    ours, report = convtune.fuse(base, context=context)
    return reference, ours, report


def run_config(name: str, batch: int, mode: str, ways: list, compile_batches: list,
               layers: bool, host_batch: int, context, compile_modes: tuple = MODES_ALL,
               fuse: bool = False) -> dict:
    import torch
    import convtune
    amp = mode in AMP_MODES
    # AMP modes: the fp32 flags strict (autocast runs every conv and matmul in half).
    bench_suite.set_math_mode("strict" if amp else mode)
    base = build(name)
    if amp:
        base = base.to(memory_format=torch.channels_last)
    # Under autocast, the converted layers on the default context (as a user's
    # convert(model)) call the operators, whose autocast kernel casts through
    # autocast's weight cache; $CONVTUNE_CACHE and $CONVTUNE_POLICY are
    # --cache and --policy (main).
    if fuse:
        base, ours, report = fused_pair(base, None if amp else context, amp)
    else:
        ours = copy.deepcopy(base)
        report = convtune.convert(ours, context=None if amp else context)
    base, ours = autocast_model(base, mode), autocast_model(ours, mode)
    torch.manual_seed(1)
    x = torch.randn(batch, 3, image_size(name), image_size(name), device="cuda")
    if amp:
        x = x.contiguous(memory_format=torch.channels_last)
    row = {"model": name, "batch": batch, "mode": mode, "converted": len(report.converted),
           "left": report.left}
    if fuse:
        row.update(fused=True, folded=len(report.folded), relu_fused=len(report.relu))
    if amp:
        row["context"] = "default"
    # Each side's first calls alone (convtune's tune what the cache lacks;
    # PyTorch's first forward autotunes in benchmark mode), and their sum as
    # first_calls_s, which rows before the split recorded.
    with torch.no_grad():
        torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(3):       # plans: from the cache, or tuned now
            ours(x)
        torch.cuda.synchronize()
        row["convtune_first_calls_s"] = time.perf_counter() - started
        started = time.perf_counter()
        base(x)
        torch.cuda.synchronize()
        row["pytorch_first_call_s"] = time.perf_counter() - started
    row["first_calls_s"] = row["convtune_first_calls_s"] + row["pytorch_first_call_s"]
    row["errors"] = output_errors(base, ours, x)
    row["ok"] = row["errors"]["convtune"] <= max(MODEL_LIMIT[mode], 2 * row["errors"]["pytorch"])
    with torch.no_grad():
        if "eager" in ways:
            before = plan_counters(ours)
            row["eager"] = pair(lambda: base(x), lambda: ours(x))
            after = plan_counters(ours)
            row["eager"]["calls"] = {k: after[k] - before[k] for k in after}
        if "graph" in ways:
            guess = row.get("eager", {})
            row["graph"] = graph_pair(lambda: base(x), lambda: ours(x),
                                      guess.get("pytorch_ms"), guess.get("convtune_ms"))
    if "compile" in ways and batch in compile_batches and mode in compile_modes:
        try:
            row["compile"] = compiled_pair(base, ours, x, mode)
        except Exception as e:  # noqa: BLE001 - recorded, the run goes on
            row["compile"] = {"note": bench_timing.error_text(e)}
    if layers:
        row["layers"] = layer_table(base, ours, x, mode)
        sums = [sum(r[k] * r["count"] for r in row["layers"] if "ratio" in r)
                for k in ("pytorch_ms", "convtune_ms")]
        ratios = [r["ratio"] for r in row["layers"] if "ratio" in r]
        row["layer_sum"] = {"pytorch_ms": sums[0], "convtune_ms": sums[1],
                            "ratio": sums[0] / sums[1] if sums[1] else None,
                            "min_ratio": min(ratios) if ratios else None,
                            "below": sum(r < NOT_BELOW for r in ratios), "unique": len(row["layers"])}
    if host_batch and batch == host_batch:
        row["host"] = host_costs(base, ours, x)
    row["fallbacks"] = fallbacks(ours)
    row["raced_to_pytorch"] = raced_to_pytorch(ours)
    return row


def brief(row: dict) -> str:
    parts = [f"{row['model']} b{row['batch']} {row_label(row)}: err {row['errors']['convtune']:.1e} "
             f"(PyTorch {row['errors']['pytorch']:.1e}), first calls {row['first_calls_s']:.1f} s "
             f"(convtune {row['convtune_first_calls_s']:.1f} s, "
             f"PyTorch {row['pytorch_first_call_s']:.1f} s)"]
    for way in ("eager", "graph", "compile"):
        r = row.get(way)
        if r:
            parts.append(f"{way} {bench_render.fmt_ratio(r.get('ratio'))}" if "ratio" in r else f"{way} -")
    if "layer_sum" in row:
        s = row["layer_sum"]
        parts.append(f"layers {bench_render.fmt_ratio(s['ratio'])} (min {bench_render.fmt_ratio(s['min_ratio'])}, "
                     f"{s['below']}/{s['unique']} below {NOT_BELOW})")
    if row.get("raced_to_pytorch"):
        parts.append(f"{len(row['raced_to_pytorch'])} layers run PyTorch's forward (races)")
    if "host" in row:
        h = row["host"]
        parts.append(f"host {h['convtune_us']:.1f} vs {h['pytorch_us']:.1f} us ({h['ratio']:.2f}x"
                     + (f", net of hooks {h['net_ratio']:.2f}x" if "net_ratio" in h else "") + f") {h['calls']}")
    return "; ".join(parts)


# ---------------------------------------------------------------- rendering


def way_cells(row: dict, way: str) -> list:
    r = row.get(way)
    if not r:
        return ["-", "-", "-"]
    if "ratio" not in r:
        return ["-", "-", f"- ({r.get('note', '')[:60]})"]
    return [bench_render.fmt_ms(r["pytorch_ms"]), bench_render.fmt_ms(r["convtune_ms"]), bench_render.fmt_ratio(r["ratio"])]


def render(results: dict) -> str:
    env, run = results["environment"], results["run"]
    rows = results["rows"]
    lines = [MARKER, "", "## Whole models (tools/bench/models.py)", "",
             f"- Date (UTC): {run['date_utc']}; GPU: {env['gpu']}; driver {env['driver']}; "
             f"PyTorch {env['torch_version']}, torchvision {run['torchvision']}; cuDNN {env['torch_cudnn']}",
             f"- convtune: `{env['convtune_versions']}`; cache `{run['cache']}`, policy `{run['policy']}`; "
             f"wall time {run['elapsed_s']:.0f} s",
             "", "Command (from the repository root):", "", "```", run["command"], "```", ""]
    for more in results.get("more_runs", []):
        lines += [f"Also in the tables: rows of a run of {more['date_utc']} (wall time "
                  f"{more['elapsed_s']:.0f} s, policy `{more['policy']}`), on the same GPU model with the "
                  "same convtune versions (checked when merged), into the same cache:",
                  "", "```", more["command"], "```", ""]
    sizes = sorted({f"{m}: {image_size(m)}x{image_size(m)}" for m in {r["model"] for r in results["rows"]}
                    if image_size(m) != IMAGE})
    lines += ["torchvision models with random weights in eval mode, input `randn(batch, 3, 224, 224)`"
              + (f" ({', '.join(sizes)})" if sizes else "") + ". "
              "PyTorch: the model as built, `cudnn.benchmark = True`. convtune: a deep copy after "
              "`convtune.convert(model)`. Both under `torch.no_grad()`, the TF32 flags per mode. "
              "Eager: CUDA events around back-to-back forwards (bench.py's helper, alternating "
              "rounds, median). Graph: the forward captured once into a `torch.cuda.CUDAGraph` "
              "per library and replayed. Compile: `torch.compile(model, fullgraph=True)` (inductor, "
              "default mode), then timed as eager. Ratios are PyTorch time / convtune time. "
              f"Error: relative L2 of the output against the model in float64; ok when convtune's "
              f"is at most max({MODEL_LIMIT['strict']:g} strict / {MODEL_LIMIT['tf32']:g} TF32, "
              "2x PyTorch's).", ""]
    if any(r["mode"] in AMP_MODES for r in rows):
        lines += [amp_method_text(), ""]
    if any(r.get("fused") for r in rows):
        lines += [FUSED_METHOD, ""]
    if results.get("notes_md"):
        lines += ["### Reading these numbers", "",
                  f"_Written by hand about this run and added with `--notes {results.get('notes_path')}`; "
                  "not generated._", "", results["notes_md"].strip(), ""]
    header = ["model", "batch", "mode", "eager PyTorch ms", "eager convtune ms", "eager ratio",
              "graph PyTorch ms", "graph convtune ms", "graph ratio", "compile PyTorch ms",
              "compile convtune ms", "compile ratio", "err PyTorch", "err convtune", "ok"]
    table = [[r["model"], r["batch"], row_label(r), *way_cells(r, "eager"), *way_cells(r, "graph"),
              *way_cells(r, "compile"), bench_render.fmt_err(r["errors"]["pytorch"]),
              bench_render.fmt_err(r["errors"]["convtune"]), "yes" if r["ok"] else "NO"] for r in rows]
    lines += bench_render.md_table(header, table) + [""]
    layered = [r for r in rows if "layer_sum" in r]
    if layered:
        lines += ["### Conv layers alone", "",
                  "Each unique conv layer (input shape and parameters) of the model timed alone, "
                  "both libraries on the same input and weights, as replays of a CUDA graph of "
                  "back-to-back calls (GPU time, no host cost). Sum: over every conv call of the "
                  f"forward (a unique layer times its count). Below: unique layers under {NOT_BELOW}x.", ""]
        lines += bench_render.md_table(
            ["model", "batch", "mode", "unique layers", "sum PyTorch ms", "sum convtune ms", "sum ratio",
             "worst layer", "below"],
            [[r["model"], r["batch"], row_label(r), r["layer_sum"]["unique"],
              bench_render.fmt_ms(r["layer_sum"]["pytorch_ms"]), bench_render.fmt_ms(r["layer_sum"]["convtune_ms"]),
              bench_render.fmt_ratio(r["layer_sum"]["ratio"]), bench_render.fmt_ratio(r["layer_sum"]["min_ratio"]),
              r["layer_sum"]["below"]] for r in layered]) + [""]
    hosted = [r for r in rows if "host" in r]
    if hosted:
        methods = {r["host"].get("method", "sequential") for r in hosted}
        how = {"sequential": "30 forwards of PyTorch's model, then 30 of convtune's (the first 5 of "
                             "each dropped)",
               "alternating": f"{HOST_WARMUP} forwards of each model untimed, then {HOST_ROUNDS} "
                              f"alternating rounds of {HOST_PER_ROUND} forwards of each"}
        lines += ["### Host cost of a conv layer's call in the model loop", "",
                  f"Batch {results['run']['host_batch']}; "
                  + (how[methods.pop()] if len(methods) == 1 else
                     f"rows with a host-cost detail below: {how['alternating']}; the others: {how['sequential']}")
                  + "; synchronised after each forward: host microseconds between a forward pre-hook "
                  "and a forward hook of every conv layer, median per layer, then the median over "
                  "layers. PyTorch: `nn.Conv2d` (F.conv2d inside); convtune: the converted layer. "
                  + (f"Hooks: the same interval on an `nn.Identity` hooked the same way and called "
                     f"{HOST_PROBES} times after each forward of each model (the hooks' and nn.Module's "
                     "own cost, median; - where a run did not measure it); net: each side's time less "
                     "its hooks' (the layer's forward itself, for PyTorch nn.Conv2d.forward and its "
                     "F.conv2d), median over layers. "
                     if any("net_ratio" in r["host"] for r in hosted) else "")
                  + "Calls: how the convtune plans' executes ran during those forwards.", ""]

        def us(h, key):
            return f"{h[key]:.1f}" if key in h else "-"

        def net(h):
            return f"{h['net_ratio']:.2f}" if "net_ratio" in h else "-"

        lines += bench_render.md_table(
            ["model", "mode", "PyTorch us", "convtune us", "convtune / PyTorch", "hooks PyTorch us",
             "hooks convtune us", "net convtune / PyTorch", "graph replays", "captures", "direct runs"],
            [[r["model"], row_label(r), us(r["host"], "pytorch_us"), us(r["host"], "convtune_us"),
              f"{r['host']['ratio']:.2f}", us(r["host"], "pytorch_floor_us"), us(r["host"], "convtune_floor_us"),
              net(r["host"]), r["host"]["calls"]["graph_launches"],
              r["host"]["calls"]["graph_captures"], r["host"]["calls"]["direct_runs"]] for r in hosted]) + [""]
        for r in hosted:
            if "layers" not in r["host"]:
                continue
            lines += [f"<details><summary>{r['model']} batch {r['batch']} {row_label(r)}: host cost of the "
                      f"{HOST_SHOWN} layers with the highest ratio</summary>", ""]
            lines += bench_render.md_table(
                ["layer", "PyTorch us", "convtune us", "convtune / PyTorch", "net", "convtune algorithm"],
                [[l["layer"], f"{l['pytorch_us']:.1f}", f"{l['convtune_us']:.1f}", f"{l['ratio']:.2f}",
                  net(l), l["algorithm"]] for l in r["host"]["layers"][:HOST_SHOWN]]) + ["", "</details>", ""]
    for r in layered:
        lines += [f"<details><summary>{r['model']} batch {r['batch']} {row_label(r)}: per-layer table</summary>", ""]
        lines += bench_render.md_table(
            ["layer (first)", "count", "shape", "PyTorch ms", "convtune ms", "ratio", "convtune algorithm"],
            [[l["layer"], l["count"], l["spec"], bench_render.fmt_ms(l.get("pytorch_ms")),
              bench_render.fmt_ms(l.get("convtune_ms")), bench_render.fmt_ratio(l.get("ratio")), l["algorithm"]]
             for l in r["layers"]]) + ["", "</details>", ""]
    left = {(r["model"], n, why) for r in rows for n, why in r["left"]}
    fell = {(r["model"], why) for r in rows for why in r["fallbacks"]}
    if left or fell:
        lines += ["Layers not run by convtune:", ""]
        lines += [f"- {m} `{n}`: left by convert ({why})" for m, n, why in sorted(left)]
        lines += [f"- {m}: PyTorch's forward ran some calls ({why})" for m, why in sorted(fell)]
        lines.append("")
    return "\n".join(lines)


FUSED_METHOD = (
    "Fused rows (`, fused`, `--fuse`): both models fused for inference from the same model. "
    "PyTorch: `torch.fx.experimental.optimization.fuse(model)`, PyTorch's own fold of each "
    "BatchNorm into the convolution before it (its weights made channels_last again in the AMP "
    "modes). convtune: `convtune.fuse(model)`, the same fold (the same `fuse_conv_bn_eval`) and "
    "each ReLU that follows such a convolution applied in its plan's epilogue, then converted. "
    "Each layer alone (below) is timed with its own activation: convtune's fused layers "
    "include their ReLU, PyTorch's do not.")


def amp_method_text() -> str:
    return ("Mixed-precision rows (`bf16 amp, channels_last`, `f16 amp, channels_last`): both models "
            "made `channels_last` (`model.to(memory_format=torch.channels_last)`) and a channels-last "
            "input; every forward of both, eager, graph and compile, and every layer alone, under "
            "`torch.autocast(\"cuda\", dtype=torch.bfloat16 / torch.float16)` (the same wrapper "
            "module for both; compile: the unwrapped model compiled, called under autocast), TF32 "
            "flags off. The converted copy is on convtune's default context, as `convert(model)` "
            "leaves it (its layers then call the operators, whose autocast kernel casts through "
            "autocast's weight cache), with this run's cache and policy. Error: against the fp32 "
            "model in float64 (autocast leaves float64 alone); ok when convtune's is at most "
            f"max({MODEL_LIMIT['bf16']:g} bf16 / {MODEL_LIMIT['f16']:g} f16, 2x PyTorch's).")


def write_markdown(path: str, section: str) -> None:
    """Replaces the models section of `path` (from MARKER to the end)."""
    p = Path(path)
    text = p.read_text(encoding="utf-8") if p.exists() else ""
    head = text.split(MARKER)[0].rstrip("\n")
    p.write_text((head + "\n\n" if head else "") + section + "\n", encoding="utf-8")


# ---------------------------------------------------------------- main


def save(results: dict, args: argparse.Namespace) -> None:
    bench_render.save_results(results, args.out_json, args.out_md, render, write_md=write_markdown)


def merge_mismatch(first: dict, more: dict) -> str | None:
    """What differs between two runs' environments that would make one table
    of their rows misleading, or None."""
    for key, what in (("gpu", "GPU"), ("torch_version", "PyTorch"), ("convtune_versions", "convtune build")):
        if first.get(key) != more.get(key):
            return f"{what} ({more.get(key)} against {first.get(key)})"
    return None


def main(argv: list | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    args = parse_args(argv[1:])
    notes = ({"notes_md": Path(args.notes).read_text(encoding="utf-8"), "notes_path": args.notes}
             if args.notes else {})
    if args.render:
        results = json.loads(Path(args.render).read_text(encoding="utf-8"))
        for path in args.merge:
            more = json.loads(Path(path).read_text(encoding="utf-8"))
            mismatch = merge_mismatch(results["environment"], more["environment"])
            if mismatch:
                print(f"models.py: {path} was measured with another {mismatch}: not merged", file=sys.stderr)
                return 2
            results["rows"] += more["rows"]
            results.setdefault("more_runs", []).append(more["run"])
        if args.out_json:  # the merged runs, without the notes (kept in their own file)
            Path(args.out_json).write_text(json.dumps(results, indent=1) + "\n")
        results.update(notes)
        if args.out_md:
            write_markdown(args.out_md, render(results))
        return 0
    started = time.perf_counter()
    modes = check_modes(split(args.modes), "--modes")
    compile_modes = tuple(check_modes(split(args.compile_modes), "--compile-modes"))
    torch, convtune = bench_env.import_or_exit("models.py")
    import torchvision
    import convtune.nn  # noqa: F401
    torch.backends.cudnn.benchmark = True
    convtune.nn.Conv2d.race_pytorch = not args.no_race
    if args.cache:  # the operator's default context (torch.compile) reads the same cache
        os.environ["CONVTUNE_CACHE"] = os.path.abspath(args.cache)
    if any(m in AMP_MODES for m in modes):
        # AMP rows run on the default context (run_config): it tunes by --policy.
        os.environ["CONVTUNE_POLICY"] = args.policy
    device = torch.cuda.current_device()
    env = bench_env.gather_environment(convtune, device)
    context = convtune.Context(device=device, cache=args.cache, policy=args.policy,
                               tuning_budget_ms=args.tuning_budget_ms)
    ways, batches = split(args.ways), split(args.batches, int)
    rows = []
    results = {"run": {"command": bench_env.command_line(argv, os.environ), "cache": args.cache,
                       "policy": args.policy, "tuning_budget_ms": args.tuning_budget_ms,
                       "host_batch": args.host_batch, "race_pytorch": not args.no_race,
                       "torchvision": torchvision.__version__,
                       "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                       "elapsed_s": 0.0},
               "environment": env, "rows": rows, **notes}
    for name in model_names(args.models):
        for mode in modes:
            for batch in batches:
                if args.tune_only:
                    row = run_config(name, batch, mode, [], [], False, 0, context, fuse=args.fuse)
                else:
                    row = run_config(name, batch, mode, ways, split(args.compile_batches, int),
                                     not args.no_layers, args.host_batch, context,
                                     compile_modes, args.fuse)
                torch.cuda.empty_cache()  # the models of that row are gone
                bench_common.log(brief(row))
                rows.append(row)
                # Written after every row: a run cut short keeps what it measured.
                results["run"]["elapsed_s"] = time.perf_counter() - started
                save(results, args)
    context.close()
    print(render(results))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
