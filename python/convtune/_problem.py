"""Argument checks shared by the binding's entry points, and the problem
key: the conv_problem's fields as a tuple, which is also the key of a
Context's plans; for convolutions (_problem_key; conv2d's F.conv2d
arguments: _conv_geometry, _same_padding) and dynamic convolutions
(_dynamic_key, _dynamic_shapes).  Nothing here imports torch."""
import operator
from math import isqrt

from . import _lib
from ._base import ConvtuneError


class ConvArgumentError(ValueError, RuntimeError):
    """An argument conv2d refuses as F.conv2d does, in PyTorch's words.  PyTorch
    raises RuntimeError there and convtune raised ValueError before it took
    F.conv2d's arguments: an except clause for either catches it."""


class ConvTypeError(TypeError, RuntimeError):
    """A dtype conv2d refuses as F.conv2d does (PyTorch: RuntimeError; convtune: TypeError)."""


ConvArgumentError.__module__ = ConvTypeError.__module__ = "convtune"  # the public names


def _int(name, value):
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError("%s must be an int, got %r" % (name, value)) from None


def _pair(name, value):
    """An int or a 1- or 2-sequence of ints, as PyTorch's conv2d takes them."""
    if isinstance(value, str):
        raise TypeError("%s must be an int or a pair of ints, got %r (a plan takes numbers; "
                        "convtune.conv2d also takes padding 'same' and 'valid')" % (name, value))
    if isinstance(value, (tuple, list)):  # torch.Size is a tuple
        if len(value) == 1:
            value = (value[0], value[0])
        if len(value) != 2:
            raise ValueError("%s must be an int or a pair of ints, got %r" % (name, tuple(value)))
        return _int(name, value[0]), _int(name, value[1])
    v = _int(name, value)
    return v, v


def _shape4(name, shape):
    try:
        dims = tuple(shape)
    except TypeError:
        raise TypeError("%s must be a sequence of 4 ints, got %r" % (name, shape)) from None
    if len(dims) != 4:
        raise ValueError("%s must have 4 dimensions, got %r" % (name, dims))
    return tuple(_int(name, d) for d in dims)


def _groups(groups):
    g = _int("groups", groups)
    if g < 1:
        raise ValueError("groups must be a positive integer, got %d" % g)
    return g


def _channels_error(groups, w_shape, x_shape):
    return ConvArgumentError("Given groups=%d, weight of size %s, expected input%s to have %d channels, "
                      "but got %d channels instead"
                      % (groups, list(w_shape), list(x_shape), w_shape[1] * groups, x_shape[1]))


def _dtype_code(dtype):
    """The conv_dtype of a torch dtype or its name ("float32", "float16",
    "bfloat16", with or without "torch.")."""
    name = str(dtype)
    name = name[len("torch."):] if name.startswith("torch.") else name
    code = _lib.DTYPES.get({"half": "float16", "float": "float32"}.get(name, name))
    if code is None:
        raise TypeError("dtype must be torch.float32, torch.float16 or torch.bfloat16, got %r"
                        % (dtype,))
    return code


def _conv_pair(name, value):
    """stride, padding or dilation as F.conv2d takes it: an int, or a sequence of
    1 or 2 ints; another length is PyTorch's error."""
    if isinstance(value, (tuple, list)) and len(value) not in (1, 2):
        raise ConvArgumentError("expected %s to be a single integer value or a list of 2 values to "
                                "match the convolution dimensions, but got %s=%s"
                                % (name, name, [v for v in value]))
    return _pair(name, value)


def _same_padding(kernel_size, dilation):
    """padding="same" as PyTorch computes it: (symmetric padding (h, w), extra
    (h, w)), the extra pixel (odd total d * (k - 1)) going below / right."""
    totals = [d * (k - 1) for d, k in zip(dilation, kernel_size)]
    return tuple(t // 2 for t in totals), tuple(t % 2 for t in totals)


def _conv_geometry(x_hw, kernel_size, stride, padding, dilation):
    """F.conv2d's stride, padding and dilation for an input of x_hw (H, W) and a
    filter of kernel_size (R, S), checked as PyTorch checks them and with its
    messages.  padding: "valid", "same" (stride 1 only), an int or 1 or 2 ints.
    Returns (stride, padding, dilation, extra, output_hw): pairs, where padding is
    symmetric and extra (0 or 1 per axis) is what "same" adds below / right of
    the input (F.pad) for an odd total; output_hw is the output's (P, Q)."""
    stride = _conv_pair("stride", stride)
    dilation = _conv_pair("dilation", dilation)
    if isinstance(padding, str):
        if padding == "valid":
            pad, extra = (0, 0), (0, 0)
        elif padding == "same":
            if stride != (1, 1):
                raise ConvArgumentError("padding='same' is not supported for strided convolutions")
            pad = extra = None  # after the dilation's check
        else:
            raise ConvArgumentError("Invalid padding string: '%s'" % padding)
    else:
        pad, extra = _conv_pair("padding", padding), (0, 0)
        if min(pad) < 0:
            raise ConvtuneError(_lib.STATUS_NAMES.index("BAD_PADDING"), "negative padding is not supported")
    if min(stride) < 1:
        raise ConvtuneError(_lib.STATUS_NAMES.index("BAD_STRIDE"), "non-positive stride is not supported")
    if min(dilation) < 1:
        raise ConvtuneError(_lib.STATUS_NAMES.index("BAD_STRIDE"), "dilation should be greater than zero")
    if pad is None:
        pad, extra = _same_padding(kernel_size, dilation)
    padded = [n + 2 * p + e for n, p, e in zip(x_hw, pad, extra)]
    kernel = [d * (k - 1) + 1 for d, k in zip(dilation, kernel_size)]
    if padded[0] < kernel[0] or padded[1] < kernel[1]:
        raise ConvtuneError(_lib.STATUS_NAMES.index("FILTER_TOO_LARGE"),
                            "Calculated padded input size per channel: (%d x %d). Kernel size: (%d x %d). "
                            "Kernel size can't be greater than actual input size"
                            % (padded[0], padded[1], kernel[0], kernel[1]))
    out = tuple((n - k) // s + 1 for n, k, s in zip(padded, kernel, stride))
    return stride, pad, dilation, extra, out


def _problem_key(x_shape, w_shape, stride, padding, dilation, groups, bias, activation, math,
                 layout="nchw", direction="fwd", deterministic=False, dtype="float32"):
    """The conv_problem's field values, in _lib.PROBLEM_FIELDS order (also the plan dict key).

    direction: "fwd", or a backward pass, "bwd_data" (the gradient for x) or
    "bwd_filter" (for w), which takes no bias or activation.
    deterministic: only candidates with bit-identical results run to run.
    dtype: x's, w's and y's element type (a torch dtype or its name); the
    half types ignore math (convtune.h), so their key holds "strict"."""
    n, c, h, w = _shape4("x_shape", x_shape)
    k, c_per_group, r, s = _shape4("w_shape", w_shape)
    groups = _groups(groups)
    # The library sees only c and groups; the filter's second extent must agree.
    if c_per_group * groups != c:
        raise _channels_error(groups, (k, c_per_group, r, s), (n, c, h, w))
    stride_h, stride_w = _pair("stride", stride)
    pad_h, pad_w = _pair("padding", padding)
    dil_h, dil_w = _pair("dilation", dilation)
    if not isinstance(bias, bool):
        raise TypeError("bias must be True or False here (whether the plan adds a bias); "
                        "the bias tensor is passed when calling the plan")
    if activation not in (None, "relu"):
        raise ValueError("activation must be None or 'relu', got %r" % (activation,))
    if activation == "relu" and not bias:
        raise ValueError("activation='relu' needs bias: convtune fuses ReLU only after a bias add "
                         "(epilogue BIAS_RELU). Pass a bias (zeros give a plain ReLU) or apply "
                         "torch.relu to the output")
    if math not in _lib.MATH:
        raise ValueError("math must be 'strict' or 'tf32', got %r" % (math,))
    if layout not in _lib.LAYOUT_NAMES:
        raise ValueError("layout must be 'nchw', 'nhwc' or 'nchw_krsc', got %r" % (layout,))
    if direction not in _lib.DIRECTIONS:
        raise ValueError("direction must be 'fwd', 'bwd_data' or 'bwd_filter', got %r" % (direction,))
    if direction != "fwd" and (bias or activation is not None):
        raise ValueError("a backward pass takes no bias or activation (the bias gradient is the "
                         "sum of dy over N, H and W)")
    dtype = _dtype_code(dtype)
    if dtype != _lib.DTYPE_F32:
        math = "strict"  # one plan whatever the TF32 setting: half sums in fp32 on tensor cores
    epilogue = (_lib.EPILOGUE_BIAS_RELU if activation == "relu"
                else _lib.EPILOGUE_BIAS if bias else _lib.EPILOGUE_NONE)
    conv_layout, filter_layout = _lib.LAYOUT_NAMES[layout]
    if (r == 1 and s == 1) or c_per_group == 1:
        filter_layout = _lib.FILTER_DEFAULT  # the same bytes either way: one plan (convtune.h)
    return (n, c, h, w, k, r, s, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, groups,
            dtype, conv_layout, _lib.DIRECTIONS[direction], _lib.MATH[math], epilogue,
            int(bool(deterministic)), _lib.OP_CONVOLUTION, filter_layout)


# ---------------------------------------------------------------- dynamic convolution


def _positive_pair(name, value):
    pair = _pair(name, value)
    if min(pair) < 1:
        raise ValueError("%s must be positive, got %r" % (name, value))
    return pair


def _dynamic_output_hw(h, w, stride):
    """P, Q of a dynamic convolution: 'same' padding, so ceil(H / stride), likewise W."""
    return (h - 1) // stride[0] + 1, (w - 1) // stride[1] + 1


# dynamic_conv2d's weights layouts: the dimension order (of B, G, k*k, P, Q)
# and how messages name it.  "bgkhw" is the library's (involution's);
# "kbghw", k*k first, the seed's (k*k, B, 1, H, W) for G = 1.
DYNAMIC_WEIGHTS_LAYOUTS = {
    "bgkhw": ((0, 1, 2, 3, 4), "(B, G, k*k, P, Q)"),
    "kbghw": ((1, 2, 0, 3, 4), "(k*k, B, G, P, Q)"),
}


def _dynamic_layout(weights_layout):
    """(the dimensions of B, G, k*k, P, Q in weights_layout, its form's text)."""
    found = DYNAMIC_WEIGHTS_LAYOUTS.get(weights_layout) if isinstance(weights_layout, str) else None
    if found is None:
        raise ValueError("weights_layout must be %s, got %r"
                         % (" or ".join(map(repr, DYNAMIC_WEIGHTS_LAYOUTS)), weights_layout))
    return found


def _dynamic_kernel_size(kk, weights_layout="bgkhw"):
    """k from the weights' k*k taps: an odd square."""
    order, form = _dynamic_layout(weights_layout)
    where = "weights.shape[%d] = %d" % (order[2], kk)
    k = isqrt(kk) if kk > 0 else -1
    if k * k != kk:
        raise ValueError("%s is not k*k for any k: the weights are %s" % (where, form))
    if k % 2 == 0:
        raise ValueError("%s is k*k for an even k = %d: the k x k window must "
                         "have a centre pixel (odd k)" % (where, k))
    return k


def _dynamic_shapes(x_shape, w_shape, stride=1, dilation=1, groups=None, weights_layout="bgkhw"):
    """(k, groups) of a dynamic convolution of x (B, C, H, W) with weights
    (B, G, k*k, P, Q), or (k*k, B, G, P, Q) with weights_layout "kbghw", after
    checking that the shapes agree; groups None takes G from the weights, a
    number must equal it."""
    order, form = _dynamic_layout(weights_layout)
    n, c, h, w = _shape4("x_shape", x_shape)
    try:
        dims = tuple(w_shape)
    except TypeError:
        raise TypeError("weights' shape must be a sequence of 5 ints, got %r" % (w_shape,)) from None
    if len(dims) != 5:
        raise ValueError("weights must have 5 dimensions %s, got shape %s" % (form, list(dims)))
    dims = tuple(_int("weights' shape", d) for d in dims)
    b, g, kk, p, q = (dims[i] for i in order)
    stride = _positive_pair("stride", stride)
    _positive_pair("dilation", dilation)
    if groups is not None and _groups(groups) != g:
        raise ValueError("groups=%d, but the weights %s have G = %d groups (dimension %d)"
                         % (groups, list(dims), g, order[1]))
    if g < 1 or c % g:
        raise ValueError("the weights' G = %d (dimension %d) must divide x's %d channels" % (g, order[1], c))
    k = _dynamic_kernel_size(kk, weights_layout)
    expected = (n, g, kk) + _dynamic_output_hw(h, w, stride)
    if (b, g, kk, p, q) != expected:
        wanted = [0] * 5
        for value, i in zip(expected, order):
            wanted[i] = value
        raise ValueError("weights have shape %s, but x %s with stride %s needs %s = %s "
                         "(P = ceil(H / stride), Q likewise)"
                         % (list(dims), list((n, c, h, w)), stride, form, wanted))
    return k, g


def _dynamic_key(x_shape, kernel_size, stride=1, dilation=1, groups=1, math="strict", direction="fwd",
                 deterministic=False):
    """The conv_problem's field values (as _problem_key) of a dynamic convolution,
    op OP_DYNAMIC: convtune.h's comment on conv_op says how the fields read (k = C,
    r = s = kernel size, 'same' padding (k-1)/2 * dilation).  The library rules on
    what this version runs (strides 1 and 2, equal dilations); an even kernel size
    is refused here, since the padding needs a centre pixel."""
    n, c, h, w = _shape4("x_shape", x_shape)
    k = _int("kernel_size", kernel_size)
    if k < 1 or k % 2 == 0:
        raise ValueError("kernel_size must be a positive odd int (the window has a centre pixel), got %d" % k)
    groups = _groups(groups)
    if c % groups:
        raise ValueError("groups=%d must divide x's %d channels" % (groups, c))
    stride_h, stride_w = _positive_pair("stride", stride)
    dil_h, dil_w = _positive_pair("dilation", dilation)
    if math not in _lib.MATH:
        raise ValueError("math must be 'strict' or 'tf32', got %r" % (math,))
    if direction not in _lib.DIRECTIONS:
        raise ValueError("direction must be 'fwd', 'bwd_data' or 'bwd_filter', got %r" % (direction,))
    pad_h, pad_w = (k - 1) // 2 * dil_h, (k - 1) // 2 * dil_w
    return (n, c, h, w, c, k, k, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, groups,
            _lib.DTYPE_F32, _lib.LAYOUT_NCHW, _lib.DIRECTIONS[direction], _lib.MATH[math],
            _lib.EPILOGUE_NONE, int(bool(deterministic)), _lib.OP_DYNAMIC, _lib.FILTER_DEFAULT)
