#!/usr/bin/env python3
"""The race on against off, in one process (docs/python.md, "Never slower in
eager mode").

    race_ab.py MODEL strict|tf32|bf16|f16 [--batch N] [--rounds N] [--calls N]

A torchvision MODEL (random weights, eval mode) as PyTorch runs it
(cudnn.benchmark on), a converted copy whose layers race PyTorch's forward
and a converted copy whose layers do not, all three in this process on the
same input: bf16 and f16 under torch.autocast with the models and the input
channels_last; tf32 with PyTorch's TF32 flags on.  Each model's first three
forwards run first, PyTorch's model's first (so its benchmark search is done
before the races), then eager forwards are timed in alternating rounds
(wall time of back-to-back forwards and one synchronise, median).  Where
models.py times each library in its own process, the eager times of
host-bound models move from process to process by more than a race can
change them; here the three share one.  The converted models tune into the
default cache (CONVTUNE_CACHE) under the default policy.
"""

import argparse
import copy
import statistics
import time

import torch
import torchvision

import convtune
import convtune.nn

HALF = {"bf16": torch.bfloat16, "f16": torch.float16}


def converted(model, race):
    ours = copy.deepcopy(model)
    convtune.convert(ours)
    for layer in ours.modules():
        if isinstance(layer, convtune.nn.Conv2d):
            layer.race_pytorch = race
    return ours


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("mode", choices=("strict", "tf32", "bf16", "f16"))
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = args.mode == "tf32"
    half = HALF.get(args.mode)
    model = getattr(torchvision.models, args.model)().cuda().eval()
    x = torch.randn(args.batch, 3, 224, 224, device="cuda")
    if half is not None:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    models = {"PyTorch": model, "race on": converted(model, True), "race off": converted(model, False)}

    def forward(net):
        with torch.no_grad(), torch.autocast("cuda", dtype=half or torch.bfloat16,
                                             enabled=half is not None):
            return net(x)
    first_s = {}
    for name, net in models.items():
        started = time.perf_counter()
        for _ in range(3):
            forward(net)
        torch.cuda.synchronize()
        first_s[name] = time.perf_counter() - started
    samples = {name: [] for name in models}
    for _ in range(args.rounds):
        for name, net in models.items():
            torch.cuda.synchronize()
            started = time.perf_counter()
            for _ in range(args.calls):
                forward(net)
            torch.cuda.synchronize()
            samples[name].append((time.perf_counter() - started) * 1e3 / args.calls)
    ms = {name: statistics.median(times) for name, times in samples.items()}
    reference = forward(model).double()
    print("%s b%d %s: eager ms a forward (first three forwards, s)" % (args.model, args.batch, args.mode))
    for name, net in models.items():
        error = ((forward(net).double() - reference).norm() / reference.norm()).item()
        print("  %-8s %7.3f ms  %.3fx  (%.1f s)  error against PyTorch's output %.1e"
              % (name, ms[name], ms["PyTorch"] / ms[name], first_s[name], error))
    lost = [(name, dict(layer.fallbacks)) for name, layer in models["race on"].named_modules()
            if isinstance(layer, convtune.nn.Conv2d) and layer.fallbacks]
    print("  layers whose race PyTorch's forward won: %d" % len(lost))
    for name, fallbacks in lost:
        print("    %s: %s" % (name, fallbacks))


if __name__ == "__main__":
    main()
