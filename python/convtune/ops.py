"""convtune.ops: torch.ops.convtune.conv2d, the operator torch.compile and torch.export trace.

    torch.ops.convtune.conv2d(x, weight, bias, stride, padding, dilation, groups, math,
                              layout="nchw", activation="none") -> Tensor

stride, padding, dilation: [h, w]; math: "strict" or "tf32"; layout: "nchw"
(the output is contiguous), "nhwc" (the output is channels-last) or
"nchw_krsc" (as "nchw", the weight read channels-last: K R S C filters;
the backward passes read and write it K C R S); activation: "none" or
"relu" (needs a bias: ReLU after it, in the plan's epilogue, as
convtune.conv2d's activation="relu").  It is
F.conv2d's forward (then ReLU) for CUDA tensors (float32, float16 or bfloat16: x and
weight of one type, the bias of theirs or float32), computed by convtune plans
from the module's default Context per device, on torch's current stream.
Inputs need not be in the layout's memory format (they are copied into
it).  Its fake (meta) kernel gives the output's shape and memory format,
so graphs trace without running it.  convtune.nn.Conv2d calls
it when traced and runs plans directly in eager mode, which costs less
host time than a dispatcher call.

    torch.ops.convtune.conv2d_inference(...same arguments...) -> Tensor

is the same forward without an autograd formula (no Python on the
dispatcher's path): what a converted layer calls when traced where no
gradient is recorded (torch.no_grad(), inference_mode, or no input that
requires grad), torch.export's graphs made under no_grad included.

It is differentiable: its autograd formula calls two more operators, the
tuned backward passes (with fake kernels too, so that torch.compile traces
training, forward and backward, through convtune),

    torch.ops.convtune.conv2d_backward_data(grad, weight, input_size, stride, padding,
                                            dilation, groups, math, layout="nchw") -> Tensor
    torch.ops.convtune.conv2d_backward_filter(x, grad, weight_size, stride, padding,
                                              dilation, groups, math, layout="nchw") -> Tensor

and sums grad for the bias (in float32).  Every plan follows
torch.use_deterministic_algorithms.

Under CUDA autocast, conv2d and conv2d_inference run in autocast's type:
their autocast kernel casts x and the weight as autocast casts
F.conv2d's (the C++ kernel through autocast's cache of cast weights,
one cast per weight per autocast region; the Python one on every call)
and leaves the bias float32.  `autocast` says which kernel serves.

The CUDA kernels and the autograd formula are C++
(python/convtune/_torch_op.cpp, the library _convtune_torch_op.so built
beside libconvtune.so where CMake finds a CUDA torch) or, where that is not
built or does not load, or with CONVTUNE_TORCH_OP=0 in the environment, the
Python functions here; a library built from an older tree serves the
operators it has, and Python the rest.  `kernel` says which, and why;
`formula`, whose autograd formula runs.  The C++ kernel keeps its own
context per device (library defaults, as convtune.Context(device)) and its
plans until close(), called at exit.
"""
import atexit
import ctypes
import os

import torch

from . import _default_context, _lib
from ._base import _deterministic_reader, _reader

__all__ = ["plan_launch", "memory_format", "kernel", "formula", "autocast", "close",
           "torch_access_address"]

TORCH_OP_FILE = "_convtune_torch_op.so"

_SCHEMA = ("conv2d(Tensor x, Tensor weight, Tensor? bias, int[2] stride, int[2] padding, "
           "int[2] dilation, int groups, str math, str layout=\"nchw\", "
           "str activation=\"none\") -> Tensor")
ACTIVATIONS = ("none", "relu")
# The same forward without an autograd formula, for calls that record no
# gradient: the dispatcher enters the formula on every call, gradient or
# not, and where it is Python (register_autograd: no C++ kernels) that cost
# a compiled model's forward about 13 us a layer (compiled mobilenet_v2 at
# batch 16, strict, on one H200: 0.95x PyTorch's speed through it, 1.25x
# through the twin).  An operator without one takes PyTorch's C++
# fallback instead.
_INFERENCE_SCHEMA = _SCHEMA.replace("conv2d(", "conv2d_inference(", 1)
_PASS_ARGS = ("int[2] stride, int[2] padding, int[2] dilation, int groups, str math, "
              "str layout=\"nchw\") -> Tensor")
_BACKWARD_SCHEMAS = (
    "conv2d_backward_data(Tensor grad, Tensor weight, SymInt[4] input_size, " + _PASS_ARGS,
    "conv2d_backward_filter(Tensor x, Tensor grad, SymInt[4] weight_size, " + _PASS_ARGS,
)


def plan_launch(plan):
    """A plan's call as launch(x, w, bias, out) -> y, or None (having done
    nothing) when the tensors do not fit the plan: its compiled launcher
    where built, else the same through the binding's checks."""
    launcher = plan._launcher
    if launcher is not None:
        return launcher

    def launch(x, w, bias, out):
        return plan(x, w, bias, out) if plan._arguments_fit(x, w, bias, out) else None
    return launch


def _output_size(size, kernel, stride, padding, dilation):
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def memory_format(layout):
    """The torch memory format of a plan layout's activations (x and y):
    channels-last for "nhwc", contiguous for "nchw" and "nchw_krsc"."""
    if layout not in _lib.LAYOUT_NAMES:
        raise ValueError("convtune.conv2d: layout must be 'nchw', 'nhwc' or 'nchw_krsc', got %r"
                         % (layout,))
    return torch.channels_last if layout == "nhwc" else torch.contiguous_format


def filter_memory_format(layout):
    """The torch memory format of a forward plan's weight: channels-last for
    "nhwc" and "nchw_krsc" (K R S C filters), contiguous for "nchw"."""
    return torch.channels_last if layout == "nchw_krsc" else memory_format(layout)


def _backward_layout(layout):
    # The backward passes read and write the weight K C R S (convtune.h:
    # K R S C filters are for forward problems in this version).
    return "nchw" if layout == "nchw_krsc" else layout


def _check_activation(activation, bias):
    if activation not in ACTIVATIONS:
        raise ValueError("convtune.conv2d: activation must be 'none' or 'relu', got %r" % (activation,))
    if activation == "relu" and bias is None:
        raise ValueError("convtune.conv2d: activation 'relu' needs a bias (epilogue BIAS_RELU)")


def _fake(x, weight, bias, stride, padding, dilation, groups, math, layout="nchw",
          activation="none"):
    _check_activation(activation, bias)
    n, _, h, w = x.shape
    k, _, r, s = weight.shape
    return torch.empty((n, k, _output_size(h, r, stride[0], padding[0], dilation[0]),
                        _output_size(w, s, stride[1], padding[1], dilation[1])),
                       dtype=x.dtype, device=x.device, memory_format=memory_format(layout))


def _dense(t, memory_format=torch.contiguous_format):
    """t as the library reads it: contiguous in memory_format, its data 16-byte aligned."""
    if t is None:
        return None
    if not t.is_contiguous(memory_format=memory_format):
        t = t.contiguous(memory_format=memory_format)
    if t.data_ptr() % _lib.POINTER_ALIGNMENT:
        t = t.clone()
    return t


def _float32(bias):
    """The bias as the library adds it: float32 (convtune.h), whatever x's type."""
    return bias if bias is None or bias.dtype == torch.float32 else bias.float()


def _plain(t):
    """t without its autograd history: a kernel runs below autograd, where
    inputs may still require grad, and plans refuse such tensors."""
    return t.detach() if t is not None and t.requires_grad else t


_plans = {}  # (pass, the problem's arguments, deterministic) -> plan
_deterministic_now = _reader(torch, _deterministic_reader)


def _operator_plan(direction, x_size, w_size, bias, stride, padding, dilation, groups, math, layout,
                   device, dtype, activation="none"):
    """The default context's plan of one pass, kept here by the operator's
    arguments so that a call skips Context.plan's argument checks, and
    made again for torch's deterministic setting or a closed context."""
    deterministic = _deterministic_now()
    key = (direction, x_size, w_size, bias, tuple(stride), tuple(padding), tuple(dilation), groups,
           math, layout, device, deterministic, dtype, activation)
    plan = _plans.get(key)
    if plan is None or plan.closed:  # closed: the default context was closed
        plan = _plans[key] = _default_context(device).plan(
            x_size, w_size, tuple(stride), tuple(padding), tuple(dilation), groups, bias,
            None if activation == "none" else activation, math, layout, direction, deterministic,
            dtype)
    return plan


def _cuda(x, weight, bias, stride, padding, dilation, groups, math, layout="nchw",
          activation="none"):
    _check_activation(activation, bias)
    fmt = memory_format(layout)
    x, weight, bias = (_dense(_plain(x), fmt), _dense(_plain(weight), filter_memory_format(layout)),
                       _dense(_float32(_plain(bias))))
    plan = _operator_plan("fwd", tuple(x.shape), tuple(weight.shape), bias is not None, stride,
                          padding, dilation, groups, math, layout, x.device.index, x.dtype,
                          activation)
    y = plan_launch(plan)(x, weight, bias, None)
    if y is None:
        return plan(x, weight, bias)  # raises the reason (dtype, device, autograd...)
    return y


# ---------------------------------------------------------------- backward


def _backward_data_cuda(grad, weight, input_size, stride, padding, dilation, groups, math,
                        layout="nchw"):
    layout = _backward_layout(layout)
    fmt = memory_format(layout)
    grad, weight = _dense(_plain(grad), fmt), _dense(_plain(weight), fmt)
    plan = _operator_plan("bwd_data", tuple(input_size), tuple(weight.shape), False, stride,
                          padding, dilation, groups, math, layout, grad.device.index, grad.dtype)
    return plan.backward_data(grad, weight)


def _backward_filter_cuda(x, grad, weight_size, stride, padding, dilation, groups, math,
                          layout="nchw"):
    layout = _backward_layout(layout)
    fmt = memory_format(layout)
    x, grad = _dense(_plain(x), fmt), _dense(_plain(grad), fmt)
    plan = _operator_plan("bwd_filter", tuple(x.shape), tuple(weight_size), False, stride,
                          padding, dilation, groups, math, layout, grad.device.index, grad.dtype)
    return plan.backward_filter(x, grad)


def _backward_data_fake(grad, weight, input_size, stride, padding, dilation, groups, math,
                        layout="nchw"):
    return torch.empty(input_size, dtype=grad.dtype, device=grad.device,
                       memory_format=memory_format(layout))


def _backward_filter_fake(x, grad, weight_size, stride, padding, dilation, groups, math,
                          layout="nchw"):
    return torch.empty(weight_size, dtype=grad.dtype, device=grad.device,
                       memory_format=memory_format(layout))


def _setup_context(ctx, inputs, output):
    x, weight, bias, stride, padding, dilation, groups, math = inputs[:8]
    layout = inputs[8] if len(inputs) > 8 else "nchw"
    relu = len(inputs) > 9 and inputs[9] == "relu"
    ctx.save_for_backward(x, weight, output if relu else None)
    ctx.has_bias = bias is not None
    ctx.pass_args = (stride, padding, dilation, groups, math, layout)


def _backward(ctx, grad):
    x, weight, y = ctx.saved_tensors
    if y is not None:  # through the fused ReLU: y = relu(conv + b)
        grad = grad * (y > 0)
    dx = dw = db = None
    if ctx.needs_input_grad[0]:
        dx = torch.ops.convtune.conv2d_backward_data(grad, weight, list(x.shape), *ctx.pass_args)
    if ctx.needs_input_grad[1]:
        dw = torch.ops.convtune.conv2d_backward_filter(x, grad, list(weight.shape), *ctx.pass_args)
    if ctx.has_bias and ctx.needs_input_grad[2]:
        db = grad.sum((0, 2, 3), dtype=torch.float32)  # autograd casts it to the bias's type
    return dx, dw, db, None, None, None, None, None, None, None


def _autocast_kernel(op):
    """An AutocastCUDA kernel of a forward operator: x and the weight cast to
    autocast's type, as autocast casts F.conv2d's inputs (not through its
    weight cache, which Python cannot reach: the C++ kernel's does); the
    bias stays as it is (the library adds it in float32)."""
    def kernel(x, weight, bias, *args):
        dtype = torch.get_autocast_dtype("cuda")
        with torch.autocast("cuda", enabled=False):
            cast = [t.to(dtype) if t.is_floating_point() and t.dtype != torch.float64 else t
                    for t in (x, weight)]
            return op(cast[0], cast[1], bias, *args)
    return kernel


def _register_python_kernels(library):
    """The Python CUDA kernels and autograd formula of the operators the C++
    library did not register: all of them where it is not loaded, and where
    it was built from an older tree, the ones added since (rebuild it to get
    them in C++).  Returns (the operators given Python kernels here, whether
    conv2d's formula is Python)."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    kernels = (("conv2d", _cuda), ("conv2d_inference", _cuda),
               ("conv2d_backward_data", _backward_data_cuda),
               ("conv2d_backward_filter", _backward_filter_cuda))
    python = []
    for name, function in kernels:
        if not has("convtune::" + name, "CUDA"):
            library.impl(name, function, "CUDA")
            python.append(name)
    for name in ("conv2d", "conv2d_inference"):
        if not has("convtune::" + name, "AutocastCUDA"):
            library.impl(name, _autocast_kernel(getattr(torch.ops.convtune, name)), "AutocastCUDA")
            python.append(name + "'s autocast")
    python_formula = not has("convtune::conv2d", "Autograd")
    if python_formula:
        torch.library.register_autograd("convtune::conv2d", _backward,
                                        setup_context=_setup_context, lib=library)
    return python, python_formula


# ---------------------------------------------------------------- registration


def _load_cpp_kernel():
    """(ctypes handle, "C++ (path)") after registering the C++ kernel, or
    (None, "Python (why not C++)")."""
    if os.environ.get("CONVTUNE_TORCH_OP", "1") == "0":
        return None, "Python (CONVTUNE_TORCH_OP=0)"
    try:
        _lib.load()
    except OSError as e:
        return None, "Python (%s)" % e
    path = os.path.join(os.path.dirname(_lib._lib_path), TORCH_OP_FILE)
    if not os.path.isfile(path):
        return None, "Python (%s is not built)" % path
    try:
        torch.ops.load_library(path)  # registers the CUDA kernel
        handle = ctypes.CDLL(path)    # the same loaded copy, for close()
    except (OSError, RuntimeError) as e:  # e.g. built against another torch
        return None, "Python (%s does not load: %s)" % (path, e)
    handle.convtune_torch_op_close.restype = ctypes.c_int
    handle.convtune_torch_op_plans.restype = ctypes.c_int
    return handle, "C++ (%s)" % path


def _torch_access_table(cpp):
    """The address of the operator library's torch access table
    (python/convtune/_torch_access.h), or 0 where it has none (no C++
    kernel, or one built from an older tree or without Python's headers)."""
    table = getattr(cpp, "convtune_torch_access_table", None) if cpp is not None else None
    if table is None:
        return 0
    table.restype = ctypes.c_void_p
    return table() or 0


def torch_access_address():
    """The torch access table for plans' compiled launchers, or 0 where
    there is none or CONVTUNE_TORCH_ACCESS=0 is in the environment (plans
    made then read tensor attributes)."""
    if os.environ.get("CONVTUNE_TORCH_ACCESS", "1") == "0":
        return 0
    return _torch_access


def close():
    """Frees the C++ kernel's plans and contexts (later calls make new ones);
    returns how many plans it freed (0 with the Python kernel)."""
    return _cpp.convtune_torch_op_close() if _cpp is not None else 0


def _register():
    if hasattr(torch.ops, "convtune") and hasattr(torch.ops.convtune, "conv2d"):
        return None, None, "unchanged (registered by an earlier import)", None, None  # e.g. a reload
    library = torch.library.Library("convtune", "DEF")
    for schema in (_SCHEMA, _INFERENCE_SCHEMA) + _BACKWARD_SCHEMAS:  # before the C++ kernels
        library.define(schema)
    cpp, kernel = _load_cpp_kernel()
    python, python_formula = _register_python_kernels(library)
    if cpp is not None:
        atexit.register(cpp.convtune_torch_op_close)  # while CUDA is still up
        if python or python_formula:
            kernel += "; Python for %s (the library predates them: rebuild it)" % ", ".join(
                python + ["conv2d's formula"] * python_formula)
    formula = "Python" if python_formula else "C++"
    autocast = "Python" if "conv2d's autocast" in python else "C++"
    torch.library.register_fake("convtune::conv2d", _fake, lib=library)
    torch.library.register_fake("convtune::conv2d_inference", _fake, lib=library)
    torch.library.register_fake("convtune::conv2d_backward_data", _backward_data_fake, lib=library)
    torch.library.register_fake("convtune::conv2d_backward_filter", _backward_filter_fake,
                                lib=library)
    return library, cpp, kernel, formula, autocast


# Kept for the process's life: dropping the Library unregisters the operator.
# kernel: which CUDA kernels serve ("C++ (path)" or "Python (why)");
# formula: "C++" or "Python", the autograd formula's; autocast: the
# autocast kernel's (None after a reload).
_library, _cpp, kernel, formula, autocast = _register()
_torch_access = _torch_access_table(_cpp)
