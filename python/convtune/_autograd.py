"""Gradients of convtune's convolution and dynamic convolution: autograd
Functions whose backward runs the tuned backward-data and backward-filter
plans of the forward plan's problem (Plan.backward_data /
Plan.backward_filter), made from the forward plan's context on first use,
as the forward plan was."""
import torch
from torch.autograd.function import once_differentiable

from . import _lib

_DIRECTION = _lib.PROBLEM_FIELDS.index("direction")
_EPILOGUE = _lib.PROBLEM_FIELDS.index("epilogue")
_FILTER_LAYOUT = _lib.PROBLEM_FIELDS.index("filter_layout")


def backward_plan(plan, direction):
    """The plan of a backward pass (_lib.BACKWARD_DATA or _lib.BACKWARD_FILTER)
    of a forward plan's convolution, from the same context; kept on the
    forward plan for its next backward while it is open."""
    kept = plan._backward_plans
    found = kept.get(direction)
    if found is not None and not found.closed:
        return found
    key = list(plan._problem_fields)
    key[_DIRECTION] = direction
    key[_EPILOGUE] = _lib.EPILOGUE_NONE  # a backward pass has none: bias and ReLU are handled here
    key[_FILTER_LAYOUT] = _lib.FILTER_DEFAULT  # backward passes read and write w K C R S
    found = kept[direction] = plan.context._plan_for_key(tuple(key))
    return found


def _aligned(t, memory_format):
    """t dense in the plan's layout with its data 16-byte aligned, copied if need be."""
    t = t.contiguous(**memory_format)
    return t if t.data_ptr() % _lib.POINTER_ALIGNMENT == 0 else t.clone(**memory_format)


class _Misfit(Exception):
    """The launcher refused the tensors (conv2d then returns None)."""


class _Conv2d(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, bias, plan, launch):
        # Grad mode is off in here, so the plan takes tensors that record.
        y = plan(x, w, bias) if launch is None else launch(x, w, bias, None)
        if y is None:
            raise _Misfit()
        relu = plan._problem_fields[_EPILOGUE] == _lib.EPILOGUE_BIAS_RELU
        ctx.plan = plan
        ctx.has_bias = bias is not None
        ctx.save_for_backward(x, w, y if relu else None)
        return y

    @staticmethod
    @once_differentiable  # the backward plans' outputs carry no graph of their own
    def backward(ctx, dy):
        x, w, y = ctx.saved_tensors
        plan = ctx.plan
        if y is not None:
            dy = dy * (y > 0)  # through the fused ReLU: y = relu(conv + b)
        dy = _aligned(dy, plan._memory_format)
        dx = dw = db = None
        if ctx.needs_input_grad[0]:
            # A K R S C weight (layout "nchw_krsc") is read K C R S here.
            dx = backward_plan(plan, _lib.BACKWARD_DATA).backward_data(
                dy, _aligned(w, plan._memory_format))
        if ctx.needs_input_grad[1]:
            dw = backward_plan(plan, _lib.BACKWARD_FILTER).backward_filter(x, dy)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            db = dy.sum((0, 2, 3), dtype=torch.float32)  # the bias is float32 (convtune.h)
        return dx, dw, db, None, None


def conv2d(plan, x, w, bias, launch=None):
    """plan(x, w, bias), differentiable in x, w and bias (a forward plan).
    With the plan's launcher (ops.plan_launch), it runs the forward and, where
    the tensors do not fit, returns None having done nothing."""
    if launch is None:
        return _Conv2d.apply(x, w, bias, plan, None)
    try:
        return _Conv2d.apply(x, w, bias, plan, launch)
    except _Misfit:
        return None


class _EmptyConv2d(torch.autograd.Function):
    """conv2d of a batch of 0: an empty output, recorded so that a backward
    through it works as PyTorch's does (x's gradient empty, w's and the bias's
    zeros: sums over no image)."""

    @staticmethod
    def forward(ctx, x, w, bias, shape, memory_format):
        ctx.save_for_backward(x, w, bias)
        return torch.empty(shape, dtype=x.dtype, device=x.device, memory_format=memory_format)

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        x, w, bias = ctx.saved_tensors
        need = ctx.needs_input_grad
        return (torch.zeros_like(x) if need[0] else None, torch.zeros_like(w) if need[1] else None,
                torch.zeros_like(bias) if bias is not None and need[2] else None, None, None)


def empty_conv2d(x, w, bias, shape, memory_format):
    """The empty output of conv2d for a batch of 0, differentiable in x, w and bias."""
    return _EmptyConv2d.apply(x, w, bias, shape, memory_format)


class _DynamicConv2d(torch.autograd.Function):
    """y = plan(x, weights) for a dynamic convolution's forward plan.  y is
    bilinear in x and weights, so each gradient needs the other input only."""

    @staticmethod
    def forward(ctx, x, weights, plan):
        y = plan(x, weights)  # grad mode is off in here
        ctx.plan = plan
        ctx.save_for_backward(x, weights)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        x, weights = ctx.saved_tensors
        plan = ctx.plan
        dy = _aligned(dy, plan._memory_format)  # e.g. the expanded ones of y.sum()'s gradient
        dx = dweights = None
        if ctx.needs_input_grad[0]:
            dx = backward_plan(plan, _lib.BACKWARD_DATA).backward_data(dy, weights)
        if ctx.needs_input_grad[1]:
            dweights = backward_plan(plan, _lib.BACKWARD_FILTER).backward_filter(x, dy)
        return dx, dweights, None


def dynamic_conv2d(plan, x, weights):
    """plan(x, weights), differentiable in x and weights (a dynamic forward plan)."""
    return _DynamicConv2d.apply(x, weights, plan)


def records_gradients(*tensors):
    """Whether autograd would record an operation on these tensors (None skipped)."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)
