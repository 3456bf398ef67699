"""convtune.fuse(model): an inference copy of a model, its convolutions fused.

    fused, report = convtune.fuse(model.eval())
    print(report)        # what was folded and fused, which layers were left

Traces `model` with torch.fx, then in the graph:

- each BatchNorm2d whose input is a plain nn.Conv2d's output (used by it
  alone) is folded into that convolution's weight and bias, with
  BatchNorm's running statistics (torch.nn.utils.fusion.fuse_conv_bn_eval,
  PyTorch's own fold: the same arithmetic torch.fx's and torch.ao's
  fusers use);
- each ReLU (nn.ReLU, F.relu, torch.relu) whose input is such a
  convolution's output (used by it alone), the convolution having a bias
  (folded or its own), becomes the convolution's epilogue: the layer's
  `activation` is "relu" and the library applies it after the bias,
  before the one final rounding (epilogue BIAS_RELU), so the ReLU costs no
  kernel and no pass over the activations;
- every nn.Conv2d is then converted (convtune.convert).

For inference: BatchNorm's statistics are frozen into the weights, so the
model must be in eval mode (ValueError otherwise), and training the fused
copy would not train a BatchNorm.  The model itself is left as it was.
Models torch.fx cannot trace (data-dependent control flow) raise fx's error.
"""
import collections
import copy

import torch
import torch.nn.functional as F
from torch.nn.utils.fusion import fuse_conv_bn_eval

from .nn import Conv2d, convert

__all__ = ["fuse", "FuseReport"]

FuseReport = collections.namedtuple("FuseReport", "folded relu converted left")
FuseReport.__doc__ = """What fuse() did: folded, the convolutions a BatchNorm2d was folded into;
relu, the convolutions whose ReLU is now their epilogue; converted and left, as convert()'s
ConvertReport (names of the fused model's layers)."""


def _report_text(self):
    lines = ["convtune.fuse: %d BatchNorm folded, %d ReLU fused, %d layers converted, %d left"
             % (len(self.folded), len(self.relu), len(self.converted), len(self.left))]
    lines += ["  left %s: %s" % (name or "(the model)", why) for name, why in self.left]
    return "\n".join(lines)


FuseReport.__str__ = _report_text

_RELU_FUNCTIONS = (F.relu, torch.relu, torch.relu_)


class _Tracer(torch.fx.Tracer):
    """torch.fx's tracer, with convtune's Conv2d a leaf as nn.Conv2d is (a
    model converted before it is fused)."""

    def is_leaf_module(self, m, module_qualified_name):
        return isinstance(m, Conv2d) or super().is_leaf_module(m, module_qualified_name)


def _trace(model):
    return torch.fx.GraphModule(model, _Tracer().trace(model), type(model).__name__)


def _set_module(root, target, module):
    parent, _, name = target.rpartition(".")
    setattr(root.get_submodule(parent) if parent else root, name, module)


class _Graph:
    """The traced module, its submodules by name, and how many call sites each has."""

    def __init__(self, traced):
        self.traced = traced
        self.modules = dict(traced.named_modules())
        self.calls = collections.Counter(n.target for n in traced.graph.nodes
                                         if n.op == "call_module")

    def module(self, node, kind):
        """The module a call_module node calls when it is exactly `kind`, else None."""
        if node.op != "call_module":
            return None
        m = self.modules.get(node.target)
        return m if type(m) is kind else None

    def sole_conv(self, node):
        """The nn.Conv2d (or convtune Conv2d) whose output is node's input and
        goes nowhere else, called at this one place; else None."""
        if not node.args or not isinstance(node.args[0], torch.fx.Node):
            return None
        src = node.args[0]
        conv = self.module(src, torch.nn.Conv2d) or self.module(src, Conv2d)
        if conv is None or len(src.users) != 1 or self.calls[src.target] != 1:
            return None
        return src

    def replace(self, node, src):
        node.replace_all_uses_with(src)
        self.traced.graph.erase_node(node)


def _fold_batchnorms(g):
    folded = []
    for node in list(g.traced.graph.nodes):
        bn = g.module(node, torch.nn.BatchNorm2d)
        src = g.sole_conv(node) if bn is not None else None
        if src is None or not bn.track_running_stats or bn.running_mean is None:
            continue
        conv = g.modules[src.target]
        if getattr(conv, "activation", None) is not None:
            continue  # BatchNorm after a fused ReLU: not a fold
        fused = fuse_conv_bn_eval(conv, bn)
        # The folded weight may come back contiguous: a channels-last one stays so.
        w = conv.weight
        if not w.is_contiguous() and w.is_contiguous(memory_format=torch.channels_last):
            fused.weight.data = fused.weight.data.contiguous(memory_format=torch.channels_last)
        _set_module(g.traced, src.target, fused)
        g.modules[src.target] = fused
        g.replace(node, src)
        folded.append(src.target)
    return folded


def _is_relu(g, node):
    if g.module(node, torch.nn.ReLU) is not None:
        return True
    return node.op == "call_function" and node.target in _RELU_FUNCTIONS and len(node.args) == 1


def _relu_sources(g):
    """The converted convolutions with a bias whose sole user is a ReLU,
    that ReLU's node removed.  A layer convert left (float64 parameters)
    keeps its ReLU: its forward is PyTorch's, which has no epilogue."""
    fused = []
    for node in list(g.traced.graph.nodes):
        src = g.sole_conv(node) if _is_relu(g, node) else None
        conv = g.modules[src.target] if src is not None else None
        if not isinstance(conv, Conv2d) or conv.bias is None:
            continue
        g.replace(node, src)
        fused.append(src.target)
    return fused


def _recompile(g):
    """The graph checked and recompiled, the modules it no longer calls removed."""
    g.traced.graph.lint()
    g.traced.delete_all_unused_submodules()
    g.traced.recompile()


def fuse(model, *, math=None, context=None):
    """Returns (an inference copy of `model` as a torch.fx.GraphModule, its
    FuseReport): BatchNorm2d folded into the Conv2d before it, a ReLU after
    such a convolution fused into its plan, every Conv2d converted (math,
    context: as convert's).  `model` must be in eval mode; it is not changed."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError("fuse takes a torch.nn.Module, got %s" % type(model).__name__)
    training = [name or "(the model)" for name, m in model.named_modules() if m.training]
    if training:
        raise ValueError("fuse folds BatchNorm's running statistics into the weights, for "
                         "inference: call model.eval() first (in training mode: %s)"
                         % ", ".join(training[:3]))
    g = _Graph(_trace(copy.deepcopy(model)))
    folded = _fold_batchnorms(g)
    _recompile(g)
    # Converted first: a ReLU is fused into the layers convert made convtune's.
    report = convert(g.traced, math=math, context=context)
    g.modules = dict(g.traced.named_modules())  # the converted layers
    relu = _relu_sources(g)
    _recompile(g)
    for target in relu:
        g.traced.get_submodule(target).activation = "relu"
    return g.traced, FuseReport(folded, relu, report.converted, report.left)
