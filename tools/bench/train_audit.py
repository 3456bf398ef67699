"""Per-call gradient check of a converted model while it trains.

Losses after a few training steps say little about a backward kernel: from
random weights, with BatchNorm on batch statistics, training amplifies
rounding chaotically (mobilenet_v2's fp32 runs, PyTorch's too, were 1e-4
off float64's loss within a step or two and up to 1e-2 off after 20). So each
convtune layer's calls are checked where they happen: at every step, the
layer's dx and dw (and its output y) against float64's
`aten.convolution_backward` (and conv2d) on the same x, dy and w, with
PyTorch's fp32 result on the same tensors, in the same math mode, as the
yardstick.
"""

from __future__ import annotations

import functools
import statistics

import bench_timing

PASSES = ("y", "dx", "dw")


class CallAudit:
    """Hooks on every convtune.nn.Conv2d of `model` (zero padding given as
    numbers) that keep each call's tensors until check_step() compares them.
    A layer is taken to run once a step, as in torchvision's models (a layer
    called twice is compared on its last call); one whose weight records no
    gradient is not compared."""

    def __init__(self, model, tf32: bool):
        import convtune.nn
        self.tf32 = tf32
        self.step = 0
        self.calls: list = []  # one dict per layer call: layer, step, then (convtune, PyTorch) per pass
        self._kept: dict = {}
        self._hooks = []
        for name, layer in model.named_modules():
            if (isinstance(layer, convtune.nn.Conv2d) and layer.padding_mode == "zeros"
                    and not isinstance(layer.padding, str)):
                self._hooks += [layer.register_forward_hook(functools.partial(self._forward, name)),
                                layer.register_full_backward_hook(functools.partial(self._backward, name)),
                                layer.weight.register_hook(functools.partial(self._weight_grad, name))]

    # Copies, not references: the optimizer step and later layers change what
    # the hooks see before check_step runs.
    def _forward(self, name, layer, inputs, output):
        bias = None if layer.bias is None else layer.bias.detach().clone()
        self._kept[name] = {"layer": layer, "x": inputs[0].detach().clone(), "w": layer.weight.detach().clone(),
                            "bias": bias, "y": output.detach().clone()}

    def _backward(self, name, layer, grad_input, grad_output):
        kept = self._kept[name]
        kept["dy"] = grad_output[0].detach().clone()
        kept["dx"] = None if grad_input[0] is None else grad_input[0].detach().clone()

    def _weight_grad(self, name, grad):
        self._kept[name]["dw"] = grad.detach().clone()

    def check_step(self) -> None:
        """Compares the calls of the step just run, then lets their tensors go."""
        for name, kept in self._kept.items():
            if "dy" in kept and "dw" in kept:
                self.calls.append({"layer": name, "step": self.step, **self._errors(kept)})
        self._kept.clear()
        self.step += 1

    def _errors(self, kept: dict) -> dict:
        import torch
        import torch.nn.functional as F
        layer, x, w, dy = kept["layer"], kept["x"], kept["w"], kept["dy"]
        geometry = (layer.stride, layer.padding, layer.dilation, layer.groups)
        args = (list(layer.stride), list(layer.padding), list(layer.dilation), False, [0, 0], layer.groups)
        mask = [kept["dx"] is not None, True, False]
        bias = kept["bias"]
        ref_dx, ref_dw, _ = torch.ops.aten.convolution_backward(dy.double(), x.double(), w.double(), None,
                                                                *args, mask)
        ref_y = F.conv2d(x.double(), w.double(), None if bias is None else bias.double(), *geometry)
        with torch.backends.cudnn.flags(enabled=True, benchmark=True, deterministic=False, allow_tf32=self.tf32):
            their_dx, their_dw, _ = torch.ops.aten.convolution_backward(dy, x, w, None, *args, mask)
            their_y = F.conv2d(x, w, bias, *geometry)
        errors = {"y": (bench_timing.rel_l2(kept["y"], ref_y), bench_timing.rel_l2(their_y, ref_y)),
                  "dw": (bench_timing.rel_l2(kept["dw"], ref_dw), bench_timing.rel_l2(their_dw, ref_dw))}
        if kept["dx"] is not None:
            errors["dx"] = (bench_timing.rel_l2(kept["dx"], ref_dx), bench_timing.rel_l2(their_dx, ref_dx))
        return errors

    def close(self) -> None:
        for hook in self._hooks:
            hook.remove()
        self._hooks.clear()
        self._kept.clear()

    def summary(self) -> dict:
        """The worst call (convtune's error, PyTorch's on that call), the
        layer pass whose median error ratio (convtune / PyTorch) is highest,
        and each layer pass's median errors."""
        if not self.calls:
            return {"calls": 0}
        worst = max(((c[p][0], c[p][1], c["layer"], p) for c in self.calls for p in PASSES if p in c))
        by_pass = {}
        for c in self.calls:
            for p in PASSES:
                if p in c:
                    by_pass.setdefault((c["layer"], p), []).append(c[p])
        layers = [{"layer": layer, "pass": p, "convtune": statistics.median(e[0] for e in errors),
                   "pytorch": statistics.median(e[1] for e in errors),
                   "ratio": statistics.median(e[0] / max(e[1], 1e-12) for e in errors)}
                  for (layer, p), errors in by_pass.items()]
        highest = max(layers, key=lambda entry: entry["ratio"])
        return {"calls": len(self.calls), "steps": self.step,
                "max_convtune": worst[0], "max_pytorch": max(c[p][1] for c in self.calls for p in PASSES if p in c),
                "worst": {"layer": worst[2], "pass": worst[3], "convtune": worst[0], "pytorch": worst[1]},
                "worst_ratio": {"layer": highest["layer"], "pass": highest["pass"], "median": highest["ratio"]},
                "layers": layers}
