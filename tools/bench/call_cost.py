#!/usr/bin/env python3
"""Host cost of one call, by call path, and the floor of a graph node.

    python3 tools/bench/call_cost.py [--shapes a,b] [--modes strict,tf32] [--cache PATH]

Per suite row (default: the launch-sized seed3_msd_small and
seed3_msd_1to1_d1) it prints microseconds a call for three passes (forward,
backward-data, backward-filter) through:

  table:      the plan's compiled launcher reading tensors through torch's
              C++ API (the operator library's torch access table, where built);
  attributes: the same launcher reading the tensors' Python attributes
              (plans made with CONVTUNE_TORCH_ACCESS=0);
  pytorch:    F.conv2d and aten.convolution_backward (cudnn.benchmark on).

Host cost: the best of 5 loops of 3000 calls (bench_host's loop, one
synchronisation at its end); the GPU work of these rows is shorter than the
calls, so the loop measures the host.  Then, per mode, each backward pass replayed from one
CUDA graph of 500 back-to-back calls (bench_timing's capture; microseconds a
node, the best replay of a round), beside two
kernels that do next to nothing (a one-element add_, a 64x64 copy): the time
under which no single-kernel pass can go.
"""
import argparse
import os
import sys
import time

import bench_host
import bench_suite
import bench_timing

CALLS, LOOPS, GRAPH_CALLS = 3000, 5, 500
GRAPH_CAP_MS = 50.0  # replays of one graph, in all


def parse_args(argv: list) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", default="seed3_msd_small,seed3_msd_1to1_d1")
    p.add_argument("--modes", default="strict,tf32")
    p.add_argument("--suite", default="bench/suite.json")
    p.add_argument("--cache", default=None, help="convtune cache (default: the library's)")
    return p.parse_args(argv)


def host_us(fn) -> float:
    """Microseconds a call on the host, the best of LOOPS loops."""
    for _ in range(bench_host.HOST_COST_WARMUP):
        fn()
    return min(bench_host.time_host_loop(fn, CALLS) for _ in range(LOOPS))


def graph_node_us(fn) -> float:
    """Microseconds a call replayed from one graph of GRAPH_CALLS calls,
    the best of the replays of one round."""
    captured = bench_timing.capture_graph(fn, GRAPH_CALLS)
    captured.graph.replay()  # the first replay also uploads the graph
    timing = bench_timing.Timing(calls_per_batch=GRAPH_CALLS)
    bench_timing.graph_round(captured, timing, GRAPH_CAP_MS)
    return min(timing.per_call) * 1000


def plans(convtune, shape, mode, cache, torch_access: bool) -> dict:
    """The row's three plans, made with or without the torch access table."""
    before = os.environ.get("CONVTUNE_TORCH_ACCESS")
    os.environ["CONVTUNE_TORCH_ACCESS"] = "1" if torch_access else "0"
    try:
        ctx = convtune.Context(cache=cache)
        args = dict(stride=shape.stride, padding=shape.pad, dilation=shape.dil, groups=shape.groups, math=mode)
        x_shape = (shape.N, shape.C, shape.H, shape.W)
        w_shape = (shape.K, shape.C // shape.groups, shape.R, shape.S)
        return {d: ctx.plan(x_shape, w_shape, direction=d, **args) for d in ("fwd", "bwd_data", "bwd_filter")}
    finally:
        if before is None:
            del os.environ["CONVTUNE_TORCH_ACCESS"]
        else:
            os.environ["CONVTUNE_TORCH_ACCESS"] = before


def passes(made: dict, x, w, dy) -> dict:
    return {"fwd": lambda: made["fwd"](x, w), "bwd_data": lambda: made["bwd_data"].backward_data(dy, w),
            "bwd_filter": lambda: made["bwd_filter"].backward_filter(x, dy)}


def pytorch_passes(torch, shape, x, w, dy) -> dict:
    args = (list(shape.stride), list(shape.pad), list(shape.dil), False, [0, 0], shape.groups)
    conv = torch.ops.aten.convolution_backward
    return {"fwd": lambda: torch.nn.functional.conv2d(x, w, None, shape.stride, shape.pad, shape.dil, shape.groups),
            "bwd_data": lambda: conv(dy, x, w, None, *args, [True, False, False]),
            "bwd_filter": lambda: conv(dy, x, w, None, *args, [False, True, False])}


def main(argv: list) -> int:
    args = parse_args(argv)
    import torch
    import convtune
    from convtune import ops
    torch.backends.cudnn.benchmark = True
    shapes, _ = bench_suite.load_suite(args.suite)
    wanted = args.shapes.split(",")
    rows = [s for s in shapes if s.name in wanted]
    print(f"{torch.cuda.get_device_name()}, PyTorch {torch.__version__}; operator kernel: {ops.kernel}")
    print("\nhost us a call | shape | mode | path | fwd | bwd_data | bwd_filter")
    graph_rows = []
    for mode in args.modes.split(","):
        bench_suite.set_math_mode(mode)
        for shape in rows:
            gen = torch.Generator(device="cuda").manual_seed(0)
            x = torch.randn(shape.N, shape.C, shape.H, shape.W, device="cuda", generator=gen)
            w = torch.randn(shape.K, shape.C // shape.groups, shape.R, shape.S, device="cuda", generator=gen)
            dy = torch.randn_like(torch.nn.functional.conv2d(x, w, None, shape.stride, shape.pad, shape.dil,
                                                             shape.groups))
            table = plans(convtune, shape, mode, args.cache, True)
            attributes = plans(convtune, shape, mode, args.cache, False)
            ways = {f"table [{table['fwd'].info['call']}]": passes(table, x, w, dy),
                    f"attributes [{attributes['fwd'].info['call']}]": passes(attributes, x, w, dy),
                    "pytorch": pytorch_passes(torch, shape, x, w, dy)}
            for way, fns in ways.items():
                times = " | ".join(f"{host_us(fns[p]):.2f}" for p in ("fwd", "bwd_data", "bwd_filter"))
                print(f"| {shape.name} | {mode} | {way} | {times}")
            ours, theirs = ways[next(iter(ways))], ways["pytorch"]
            for p in ("bwd_data", "bwd_filter"):
                graph_rows.append(f"| {shape.name} | {mode} | {p} | {graph_node_us(ours[p]):.2f} | "
                                  f"{graph_node_us(theirs[p]):.2f} | {table[p].info['algorithm']} "
                                  f"{table[p].info['config']}")
    one, small = torch.zeros(1, device="cuda"), torch.zeros(64, 64, device="cuda")
    source = torch.ones(64, 64, device="cuda")
    print(f"\ngraph floor: one-element add_ {graph_node_us(lambda: one.add_(1)):.2f} us a node, "
          f"64x64 copy_ {graph_node_us(lambda: small.copy_(source)):.2f} us a node")
    print("\ngraph us a node | shape | mode | pass | convtune | pytorch | plan")
    print("\n".join(graph_rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
