"""Tests of the per-pixel dynamic convolution from Python: convtune.dynamic_conv2d
(forward and both gradients), Context.dynamic_plan's three passes and
convtune.nn.Involution, against PyTorch's F.unfold formulation computed here
in float64 on fresh random inputs (the seed is in every failure message;
CONVTUNE_TEST_SEED replays it); and the checks that refuse bad inputs before
any plan or device work.

The problem-key and shape tests need neither torch nor a GPU; the bad-input
tests on CPU tensors need torch only; the rest skip without a CUDA GPU.
Plans are tuned with policy "fast" (conftest.py's ctx).
"""
import copy
import ctypes
import math
import os
import random

import pytest

import convtune
from convtune import _lib

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # the key and shape tests still run
    torch = F = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")
gpu = pytest.mark.skipif(torch is None or not torch.cuda.is_available(), reason="no CUDA GPU visible to torch")
SEED = int(os.environ["CONVTUNE_TEST_SEED"])
NAN = float("nan")
# Relative L2 error against float64.  Strict: each output is a sum of k*k
# products (each weight gradient of C/G), a few fp32 roundings.  TF32: inputs
# rounded to 10-bit mantissas (the unfold GEMM family uses tensor cores).
BOUND = {"strict": 1e-5, "tf32": 5e-3}
# Below this many non-zero reference values a relative L2 error is one or
# two sums' own, and a sum of a few products can cancel: check_case then
# measures against the sums of absolute values.
TINY_OUTPUT = 16
# Involution: two 1x1 convolutions and BatchNorm before the dynamic op, and a
# ReLU whose inputs within rounding of zero may fall on either side in fp32.
MODULE_BOUND = 1e-4

# B, C, H, W, k, stride, dilation, G: every k in {1, 3, 5, 7}, both strides and
# dilations, G in {1, 2, 4}, odd (and some even) sizes, windows wider than the image.
CASES = [
    (2, 3, 13, 9, 5, 1, 1, 1),    # the seed's form: 3 channels share a 5x5 filter
    (2, 16, 11, 9, 7, 1, 1, 4),   # involution: 4 groups of 4 channels, 7x7
    (1, 8, 9, 13, 3, 2, 2, 2),    # dilated, strided
    (3, 4, 7, 5, 7, 1, 2, 4),     # the window wider than the image: all border
    (2, 6, 15, 11, 1, 2, 1, 2),   # k = 1, stride 2
    (1, 4, 9, 9, 1, 1, 2, 4),     # k = 1, dilation 2 (no effect)
    (2, 8, 17, 7, 5, 2, 2, 4),
    (1, 12, 5, 19, 3, 1, 1, 1),   # 12 channels sharing one filter
    (2, 4, 10, 12, 7, 2, 1, 2),   # even sizes, stride 2
    (1, 2, 1, 1, 5, 1, 1, 1),     # one pixel
]


def random_cases(rng, count):
    cases = []
    for _ in range(count):
        g = rng.choice((1, 2, 4))
        cases.append((rng.randint(1, 3), g * rng.randint(1, 4), rng.randint(1, 21), rng.randint(1, 21),
                      rng.choice((1, 3, 5, 7)), rng.choice((1, 2)), rng.choice((1, 2)), g))
    return cases


def out_hw(h, w, stride):
    return -(-h // stride), -(-w // stride)


def rel_l2(y, ref):
    ref = ref.double()
    return ((y.double() - ref).norm() / ref.norm()).item()


def plan_keys(ctx):
    return {p.key for p in ctx._plans.values()}


def unfold_reference(x, weights, stride, dilation):
    """The dynamic convolution as PyTorch's unfold computes it (involution_naive's formula)."""
    b, c = x.shape[:2]
    _, g, kk, p, q = weights.shape
    k = math.isqrt(kk)
    u = F.unfold(x, k, dilation=dilation, padding=(k - 1) // 2 * dilation, stride=stride)
    u = u.view(b, g, c // g, kk, p, q)
    return (u * weights.unsqueeze(2)).sum(3).view(b, c, p, q)


def loop_reference(x, weights, stride, dilation):
    """The defining sum, element by element (small shapes only): checks unfold_reference."""
    b_, c_, h_, w_ = x.shape
    _, g_, kk, p_, q_ = weights.shape
    k = math.isqrt(kk)
    y = torch.zeros(b_, c_, p_, q_, dtype=x.dtype)
    for b in range(b_):
        for c in range(c_):
            for p in range(p_):
                for q in range(q_):
                    for i in range(k):
                        for j in range(k):
                            hi = p * stride + (i - k // 2) * dilation
                            wj = q * stride + (j - k // 2) * dilation
                            if 0 <= hi < h_ and 0 <= wj < w_:
                                y[b, c, p, q] += weights[b, c // (c_ // g_), i * k + j, p, q] * x[b, c, hi, wj]
    return y


def make_inputs(case, device, requires_grad=False):
    b, c, h, w, k, stride, dil, g = case
    x = torch.randn(b, c, h, w, device=device, requires_grad=requires_grad)
    weights = torch.randn(b, g, k * k, *out_hw(h, w, stride), device=device, requires_grad=requires_grad)
    return x, weights


# ---------------------------------------------------------------- problem keys (no torch, no GPU)


def problem_of(key):
    p = _lib.Problem()
    _lib.load().conv_problem_init_sized(ctypes.byref(p), ctypes.sizeof(p))
    for field, value in zip(_lib.PROBLEM_FIELDS, key):
        setattr(p, field, value)
    return p


def test_dynamic_key_is_the_library_reading():
    """_dynamic_key fills the fields as a spec with op=dynamic does, and the
    library reads it as a dynamic problem: its key, P = ceil(H / stride)."""
    lib = _lib.load()
    key = convtune._dynamic_key((2, 16, 23, 19), 7, 2, 1, 4, "tf32", "bwd_filter")
    parsed, message = _lib.Problem(), ctypes.create_string_buffer(_lib.MESSAGE_SIZE)
    spec = b"op=dynamic n=2 c=16 h=23 w=19 r=7 g=4 stride=2 math=tf32 dir=bwd_filter"
    assert lib.conv_problem_parse_sized(spec, ctypes.byref(parsed), ctypes.sizeof(parsed), message,
                                        len(message)) == _lib.OK, message.value
    assert tuple(getattr(parsed, f) for f in _lib.PROBLEM_FIELDS) == key
    text = ctypes.create_string_buffer(_lib.PROBLEM_KEY_SIZE)
    assert lib.conv_problem_key(ctypes.byref(problem_of(key)), text, len(text)) == _lib.OK
    assert text.value.decode() == ("dyn bwd_filter f32 nchw tf32 none n2 c16 h23 w19 k16 r7 s7 pad3,3 "
                                   "str2,2 dil1,1 g4")
    p, q = ctypes.c_int64(), ctypes.c_int64()
    assert lib.conv_problem_output_dims(ctypes.byref(problem_of(key)), ctypes.byref(p), ctypes.byref(q)) == _lib.OK
    assert (p.value, q.value) == (12, 10)


def test_dynamic_and_convolution_keys_differ():
    # The same numbers as a grouped convolution: only `op` tells them apart,
    # so a Context's plan dict must not return one for the other.
    conv = convtune._problem_key((2, 16, 9, 9), (16, 4, 5, 5), 1, 2, 1, 4, False, None, "strict")
    dyn = convtune._dynamic_key((2, 16, 9, 9), 5, 1, 1, 4)
    op = _lib.PROBLEM_FIELDS.index("op")
    assert conv[:op] == dyn[:op] and conv[op + 1:] == dyn[op + 1:]
    assert (conv[op], dyn[op]) == (_lib.OP_CONVOLUTION, _lib.OP_DYNAMIC)
    assert len(_lib.PROBLEM_FIELDS) == len(dyn) == len(conv)


def test_library_rules_on_what_it_runs():
    # Stride 3 and unequal dilations are this library version's limits, not
    # the binding's: the key is made, and validation refuses it.
    lib = _lib.load()
    message = ctypes.create_string_buffer(_lib.MESSAGE_SIZE)
    for key, words in ((convtune._dynamic_key((1, 4, 9, 9), 3, 3), "stride 3,3"),
                       (convtune._dynamic_key((1, 4, 9, 9), 3, 1, (1, 2)), "dilation 1,2")):
        status = lib.conv_problem_validate(ctypes.byref(problem_of(key)), message, len(message))
        assert _lib.status_name(status) == "UNSUPPORTED" and words in message.value.decode(), message.value


@pytest.mark.parametrize("w_shape,kw,error,words", [
    ((2, 4, 16, 9, 11), {}, ValueError, "even k = 4"),
    ((2, 4, 10, 9, 11), {}, ValueError, "not k\\*k"),
    ((2, 4, 0, 9, 11), {}, ValueError, "not k\\*k"),
    ((2, 3, 9, 9, 11), {}, ValueError, "must divide x's 8 channels"),
    ((2, 4, 9, 9, 11), dict(stride=2), ValueError, r"needs .* = \[2, 4, 9, 5, 6\]"),
    ((2, 4, 9, 5, 6), {}, ValueError, r"needs .* = \[2, 4, 9, 9, 11\]"),
    ((3, 4, 9, 9, 11), {}, ValueError, r"needs .* = \[2, 4, 9, 9, 11\]"),
    ((2, 4, 9, 9, 11), dict(groups=2), ValueError, "groups=2, but the weights"),
    ((2, 4, 9, 99), {}, ValueError, "5 dimensions"),
    ((2, 4, 9, 9, 11), dict(stride=0), ValueError, "stride must be positive"),
    ((2, 4, 9, 9, 11), dict(dilation=-1), ValueError, "dilation must be positive"),
    ((2, 4, 9, 9, 11), dict(stride=1.5), TypeError, "stride"),
])
def test_dynamic_shape_errors(w_shape, kw, error, words):
    with pytest.raises(error, match=words):
        convtune._dynamic_shapes((2, 8, 9, 11), w_shape, **kw)


def test_dynamic_shapes_accept():
    assert convtune._dynamic_shapes((2, 8, 9, 11), (2, 4, 9, 5, 6), stride=2) == (3, 4)
    assert convtune._dynamic_shapes((2, 8, 9, 11), (2, 1, 1, 9, 11), groups=1, dilation=2) == (1, 1)
    with pytest.raises(ValueError, match="odd"):
        convtune._dynamic_key((1, 4, 8, 8), 4)
    with pytest.raises(ValueError, match="math"):
        convtune._dynamic_key((1, 4, 8, 8), 3, math="fp16")


@pytest.mark.parametrize("w_shape,kw,words", [
    ((16, 2, 4, 9, 11), {}, r"weights.shape\[0\] = 16 is k\*k for an even k = 4"),
    ((10, 2, 4, 9, 11), {}, r"weights.shape\[0\] = 10 is not k\*k.*\(k\*k, B, G, P, Q\)"),
    ((9, 2, 3, 9, 11), {}, r"G = 3 \(dimension 2\) must divide"),
    ((9, 2, 4, 9, 11), dict(stride=2), r"needs \(k\*k, B, G, P, Q\) = \[9, 2, 4, 5, 6\]"),
    ((9, 3, 4, 9, 11), {}, r"needs \(k\*k, B, G, P, Q\) = \[9, 2, 4, 9, 11\]"),  # B = 3
    ((9, 2, 4, 9, 11), dict(groups=2), r"groups=2, but the weights .* \(dimension 2\)"),
    ((9, 2, 4, 99), {}, r"5 dimensions \(k\*k, B, G, P, Q\)"),
])
def test_dynamic_shape_errors_in_the_seed_layout(w_shape, kw, words):
    with pytest.raises(ValueError, match=words):
        convtune._dynamic_shapes((2, 8, 9, 11), w_shape, weights_layout="kbghw", **kw)


def test_dynamic_shapes_in_the_seed_layout():
    """(k*k, B, G, P, Q): the seed's (k*k, B, 1, H, W) is G = 1; the layout is
    named, never guessed: the same shape reads differently in the other."""
    assert convtune._dynamic_shapes((2, 8, 9, 11), (9, 2, 4, 5, 6), stride=2, weights_layout="kbghw") == (3, 4)
    assert convtune._dynamic_shapes((2, 3, 7, 7), (25, 2, 1, 7, 7), weights_layout="kbghw") == (5, 1)
    # (1, 1, 1, 7, 7) holds 1 tap, 1 image, 1 group either way
    assert convtune._dynamic_shapes((1, 3, 7, 7), (1, 1, 1, 7, 7), weights_layout="kbghw") == (1, 1)
    assert convtune._dynamic_shapes((1, 3, 7, 7), (1, 1, 1, 7, 7)) == (1, 1)
    with pytest.raises(ValueError, match="needs"):  # (9, 1, 1, 7, 7) is no (B, G, k*k, P, Q) of x
        convtune._dynamic_shapes((1, 3, 7, 7), (9, 1, 1, 7, 7))
    for layout in ("BGKHW", "kb1hw", None, 0):
        with pytest.raises(ValueError, match="weights_layout must be 'bgkhw' or 'kbghw'"):
            convtune._dynamic_shapes((1, 3, 7, 7), (9, 1, 1, 7, 7), weights_layout=layout)


# ---------------------------------------------------------------- bad inputs (torch, no GPU)


@needs_torch
def test_bad_inputs_are_refused_before_any_work():
    """Each is refused with its reason before a context, plan or device is touched."""
    x = torch.randn(2, 8, 9, 11)
    weights = torch.randn(2, 4, 9, 9, 11)
    contexts = dict(convtune._default_contexts)
    cases = [
        ((x.tolist(), weights), {}, TypeError, "x must be a torch.Tensor"),
        ((x[0], weights), {}, ValueError, "4-D"),
        ((x, weights[:, :, :4]), {}, ValueError, "even k = 2"),
        ((x, weights[..., :5]), {}, ValueError, "needs"),
        ((x, weights), dict(groups=2), ValueError, "groups=2"),
        ((x.double(), weights.double()), {}, TypeError, "float32 only: pass x.float()"),
        ((x, weights.half()), {}, TypeError, "weights has dtype torch.float16"),
        ((x, weights), {}, ValueError, "x is on cpu"),
    ]
    seed_layout = weights.permute(2, 0, 1, 3, 4)  # (k*k, B, G, P, Q): any strides are taken
    cases += [
        # each read in the other layout: (2, 4, 9, 9, 11) as k*k = 2, B = 4, G = 9;
        # (9, 2, 4, 9, 11) as B = 9, G = 2, k*k = 4
        ((x, weights), dict(weights_layout="kbghw"), ValueError, r"G = 9 \(dimension 2\) must divide"),
        ((x, seed_layout), {}, ValueError, r"weights.shape\[2\] = 4 is k\*k for an even k = 2"),
        ((x, seed_layout[:, :, :, :5, :6]), dict(weights_layout="kbghw"), ValueError,
         r"needs \(k\*k, B, G, P, Q\) = \[9, 2, 4, 9, 11\]"),
        ((x, seed_layout), dict(weights_layout="kb1hw"), ValueError, "weights_layout must be"),
        ((x, seed_layout.double()), dict(weights_layout="kbghw"), TypeError, "weights has dtype torch.float64"),
        ((x, seed_layout), dict(weights_layout="kbghw"), ValueError, "x is on cpu"),  # valid but for the device
    ]
    for args, kw, error, words in cases:
        with pytest.raises(error, match=words):
            convtune.dynamic_conv2d(*args, **kw)
    assert convtune._default_contexts == contexts


@needs_torch
def test_references_agree():
    """The test's unfold reference is the defining sum (so the GPU tests can trust it)."""
    gen = torch.Generator().manual_seed(SEED)
    for b, c, h, w, k, stride, dil, g in [(2, 4, 5, 7, 3, 1, 2, 2), (1, 3, 6, 5, 5, 2, 1, 1),
                                          (1, 4, 3, 4, 7, 2, 2, 4)]:
        x = torch.randn(b, c, h, w, dtype=torch.float64, generator=gen)
        weights = torch.randn(b, g, k * k, *out_hw(h, w, stride), dtype=torch.float64, generator=gen)
        ref = loop_reference(x, weights, stride, dil)
        assert torch.allclose(unfold_reference(x, weights, stride, dil), ref, rtol=1e-12, atol=1e-12), SEED


@needs_torch
def test_involution_on_cpu_is_the_unfold_formula():
    """Off CUDA the layer runs PyTorch's unfold: its filters have the shape the
    op needs for odd sizes too, and the output is the reference's."""
    torch.manual_seed(SEED)
    layer = convtune.nn.Involution(32, 7, stride=2).double()
    assert layer.groups == 2 and layer.conv2.conv.out_channels == 2 * 49
    x = torch.randn(2, 32, 9, 11, dtype=torch.float64)
    weights = layer.kernel_weights(x)
    assert weights.shape == (2, 2, 49, 5, 6) and weights.is_contiguous()
    y = layer(x)
    assert y.shape == (2, 32, 5, 6)
    assert torch.allclose(y, unfold_reference(x, layer.kernel_weights(x), 2, 1), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="odd"):
        convtune.nn.Involution(16, 4)
    with pytest.raises(ValueError, match="divide"):
        convtune.nn.Involution(16, 3, groups=3)


# ---------------------------------------------------------------- GPU: against the unfold reference


def library_order(weights, weights_layout):
    """Weights of either layout as (B, G, k*k, P, Q) (a view)."""
    return weights if weights_layout == "bgkhw" else weights.permute(1, 2, 0, 3, 4)


def check_case(case, math_mode, ctx, cuda, weights_layout="bgkhw"):
    """dynamic_conv2d's y and both gradients against unfold_reference in float64;
    with weights_layout "kbghw" the weights are made (k*k, B, G, P, Q) contiguous,
    the seed's layout, and their gradient must come back in it."""
    b, c, h, w, k, stride, dil, g = case
    x, weights = make_inputs(case, cuda, requires_grad=True)
    if weights_layout == "kbghw":
        weights = weights.detach().permute(2, 0, 1, 3, 4).contiguous().requires_grad_()
    y = convtune.dynamic_conv2d(x, weights, stride, dil, math=math_mode, weights_layout=weights_layout,
                                context=ctx)
    dy = torch.randn_like(y)
    dx, dweights = torch.autograd.grad(y, (x, weights), dy)
    xd, wd = x.detach().double().requires_grad_(), weights.detach().double().requires_grad_()
    ref = unfold_reference(xd, library_order(wd, weights_layout), stride, dil)
    ref_dx, ref_dweights = torch.autograd.grad(ref, (xd, wd), dy.double())
    # The same sums of absolute values: what rounding errors scale with.
    xa, wa = xd.detach().abs().requires_grad_(), wd.detach().abs().requires_grad_()
    ref_abs = unfold_reference(xa, library_order(wa, weights_layout), stride, dil)
    abs_dx, abs_dweights = torch.autograd.grad(ref_abs, (xa, wa), dy.double().abs())
    what = "seed %d, case %s, %s, %s" % (SEED, case, math_mode, weights_layout)
    assert y.shape == ref.shape and y.dtype == torch.float32 and y.device == x.device, what
    assert dx.shape == x.shape and dweights.shape == weights.shape, what
    bound = BOUND[math_mode]
    for name, got, want, scale in (("y", y, ref, ref_abs), ("dx", dx, ref_dx, abs_dx),
                                   ("dweights", dweights, ref_dweights, abs_dweights)):
        err = rel_l2(got, want)
        if err >= bound and torch.count_nonzero(want) < TINY_OUTPUT:
            # A handful of short sums (a 1x1 image: each weight gradient one
            # sum of C/G products) may cancel, and no average over many
            # outputs hides it: measured against the absolute sums instead.
            err = ((got.double() - want).norm() / scale.norm()).item()
        assert err < bound, "%s: rel L2 %.3g >= %g (%s)" % (name, err, bound, what)


@gpu
@pytest.mark.parametrize("math_mode", ["strict", "tf32"])
def test_dynamic_conv2d_matches_unfold(ctx, cuda, math_mode):
    rng = random.Random(SEED)
    for case in CASES + random_cases(rng, 4):
        check_case(case, math_mode, ctx, cuda)


@gpu
@pytest.mark.parametrize("math_mode", ["strict", "tf32"])
def test_seed_layout_matches_unfold(ctx, cuda, math_mode):
    """weights_layout="kbghw": forward and both gradients (the weights' in their
    (k*k, B, G, P, Q) layout), B = G = 1 (no copy) and the others (the binding's copy)."""
    rng = random.Random(SEED + 58)
    cases = [(2, 3, 13, 9, 5, 1, 1, 1),   # the seed's form: (25, 2, 1, 13, 9)
             (1, 3, 13, 9, 5, 1, 1, 1),   # B = G = 1: the two orders hold the same bytes
             (1, 16, 11, 9, 7, 2, 2, 4),
             (3, 8, 9, 13, 3, 2, 1, 2)]
    for case in cases + random_cases(rng, 3):
        check_case(case, math_mode, ctx, cuda, weights_layout="kbghw")


@gpu
def test_seed_layout_is_the_same_problem(ctx, cuda):
    """Both layouts of the same weights: one plan, the same y; weights "kbghw"
    of any strides (here a permuted view of (B, G, k*k, P, Q) storage, which the
    binding reads without a copy); the gradient's shape and values in the
    caller's layout, also through .backward() into .grad."""
    case = (2, 8, 11, 13, 5, 1, 1, 2)
    x, weights = make_inputs(case, cuda)
    y = convtune.dynamic_conv2d(x, weights, math="strict", context=ctx)
    plans = len(ctx._plans)
    seed = weights.permute(2, 0, 1, 3, 4)  # a view: (25, 2, 2, 11, 13), not contiguous
    assert not seed.is_contiguous()
    y_view = convtune.dynamic_conv2d(x, seed, math="strict", weights_layout="kbghw", context=ctx)
    y_dense = convtune.dynamic_conv2d(x, seed.contiguous(), math="strict", weights_layout="kbghw", context=ctx)
    assert len(ctx._plans) == plans  # the same problem, the same plan
    assert rel_l2(y_view, y) < 1e-6 and rel_l2(y_dense, y) < 1e-6, SEED
    out = torch.full_like(y, NAN)
    assert convtune.dynamic_conv2d(x, seed.contiguous(), math="strict", weights_layout="kbghw",
                                   context=ctx, out=out) is out
    assert rel_l2(out, y) < 1e-6, SEED
    # Gradients: the seed layout's is the library layout's, permuted.
    w_lib = weights.clone().requires_grad_()
    w_seed = seed.contiguous().requires_grad_()
    dy = torch.randn_like(y)
    convtune.dynamic_conv2d(x, w_lib, math="strict", context=ctx).backward(dy)
    convtune.dynamic_conv2d(x, w_seed, math="strict", weights_layout="kbghw", context=ctx).backward(dy)
    assert w_seed.grad.shape == w_seed.shape == (25, 2, 2, 11, 13)
    assert rel_l2(w_seed.grad, w_lib.grad.permute(2, 0, 1, 3, 4)) < 1e-6, SEED


@gpu
def test_plans_write_poisoned_outputs(ctx, cuda):
    """The three passes through Context.dynamic_plan, each into a NaN-filled out=."""
    case = (2, 8, 11, 13, 5, 2, 1, 2)
    b, c, h, w, k, stride, dil, g = case
    x, weights = make_inputs(case, cuda)
    args = ((b, c, h, w), k, stride, dil, g)
    fwd = ctx.dynamic_plan(*args, math="strict")
    data = ctx.dynamic_plan(*args, math="strict", direction="bwd_data")
    filt = ctx.dynamic_plan(*args, math="strict", direction="bwd_filter")
    p, q = out_hw(h, w, stride)
    assert fwd.output_shape == (b, c, p, q) and data.output_shape == x.shape and filt.output_shape == weights.shape
    assert fwd.key.startswith("dyn fwd ") and data.key.startswith("dyn bwd_data ")
    assert filt.info["direction"] == "bwd_filter"
    xd, wd = x.double().requires_grad_(), weights.double().requires_grad_()
    ref = unfold_reference(xd, wd, stride, dil)
    dy = torch.randn(fwd.output_shape, device=cuda)
    ref_dx, ref_dweights = torch.autograd.grad(ref, (xd, wd), dy.double())
    for call, want in ((lambda out: fwd(x, weights, out=out), ref),
                       (lambda out: data.backward_data(dy, weights, out=out), ref_dx),
                       (lambda out: filt.backward_filter(x, dy, out=out), ref_dweights)):
        out = torch.full(want.shape, NAN, device=cuda)
        assert call(out) is out
        assert not torch.isnan(out).any(), "NaN left in the output (seed %d)" % SEED
        assert rel_l2(out, want) < BOUND["strict"], SEED
    out = torch.full(fwd.output_shape, NAN, device=cuda)
    assert convtune.dynamic_conv2d(x, weights, stride, math="strict", context=ctx, out=out) is out
    assert rel_l2(out, ref) < BOUND["strict"], SEED
    with pytest.raises(ValueError, match="weights has shape"):
        fwd(x, weights[:, :1].contiguous())
    with pytest.raises(ValueError, match="takes no bias"):
        fwd(x, weights, torch.zeros(c, device=cuda))


@gpu
def test_plans_are_shared_and_distinct(ctx, cuda):
    """A dynamic problem and the grouped convolution with the same numbers get
    two plans; the same dynamic problem gets the same plan again."""
    x = torch.randn(1, 8, 9, 9, device=cuda)
    dyn = ctx.dynamic_plan(x.shape, 3, groups=2, math="strict")
    conv = ctx.plan(x.shape, (8, 4, 3, 3), padding=1, groups=2, math="strict")
    assert dyn is not conv and dyn.key.startswith("dyn ") and not conv.key.startswith("dyn ")
    assert ctx.dynamic_plan(tuple(x.shape), 3, 1, 1, 2, "strict") is dyn


@gpu
def test_bad_inputs_on_the_gpu(ctx, cuda):
    x, weights = make_inputs((2, 8, 9, 11, 3, 1, 1, 4), cuda)
    plans = len(ctx._plans)
    wide = torch.randn(2, 8, 9, 22, device=cuda)
    with pytest.raises(ValueError, match=r"x is not contiguous.*x.contiguous\(\)"):
        convtune.dynamic_conv2d(wide[..., ::2], weights, context=ctx)
    with pytest.raises(ValueError, match="weights is not contiguous"):
        convtune.dynamic_conv2d(x, weights.transpose(3, 4).contiguous().transpose(3, 4), context=ctx)
    with pytest.raises(TypeError, match="float32 only"):
        convtune.dynamic_conv2d(x.double(), weights, context=ctx)
    with pytest.raises(ValueError, match="weights are on cpu"):
        convtune.dynamic_conv2d(x, weights.cpu(), context=ctx)
    with pytest.raises(ValueError, match="even k"):
        convtune.dynamic_conv2d(x, weights[:, :, :4].contiguous(), context=ctx)
    assert len(ctx._plans) == plans  # nothing was planned
    with pytest.raises(RuntimeError, match="out="):
        convtune.dynamic_conv2d(x.requires_grad_(), weights, context=ctx, out=torch.empty_like(x))
    # Stride 3 is this version's limit, said by the library.
    x3 = torch.randn(1, 4, 9, 9, device=cuda)
    with pytest.raises(convtune.ConvtuneError, match="stride 3") as e:
        convtune.dynamic_conv2d(x3, torch.randn(1, 1, 9, 3, 3, device=cuda), stride=3, context=ctx)
    assert e.value.status_name == "UNSUPPORTED"


@gpu
def test_gradcheck_through_fp32(ctx, cuda):
    """torch.autograd.gradcheck on a tiny case: y is linear in each input
    element, so float32 central differences with a large step are exact but
    for rounding."""
    torch.manual_seed(SEED)
    x = torch.randn(1, 4, 5, 6, device=cuda, requires_grad=True)
    weights = torch.randn(1, 2, 9, 3, 3, device=cuda, requires_grad=True)

    def fn(x, weights):
        return convtune.dynamic_conv2d(x, weights, stride=2, dilation=2, math="strict", context=ctx)

    with pytest.warns(UserWarning):  # float32 inputs: gradcheck warns, and checks anyway
        assert torch.autograd.gradcheck(fn, (x, weights), eps=1e-2, atol=1e-2, rtol=1e-2)


@gpu
def test_math_follows_cudnn_flag(ctx, cuda):
    """math=None plans with TF32 exactly where torch.backends.cudnn.allow_tf32 is on."""
    x, weights = make_inputs((1, 4, 9, 9, 3, 1, 1, 2), cuda)
    old = torch.backends.cudnn.allow_tf32
    try:
        for flag, mode in ((False, "strict"), (True, "tf32")):
            torch.backends.cudnn.allow_tf32 = flag
            before = plan_keys(ctx)
            convtune.dynamic_conv2d(x, weights, context=ctx)
            assert plan_keys(ctx) - before == {
                "dyn fwd f32 nchw %s none n1 c4 h9 w9 k4 r3 s3 pad1,1 str1,1 dil1,1 g2" % mode}
    finally:
        torch.backends.cudnn.allow_tf32 = old


# ---------------------------------------------------------------- GPU: the Involution layer


@gpu
@pytest.mark.parametrize("channels,k,stride,groups,size", [
    (32, 7, 1, None, (9, 11)),
    (16, 3, 2, 4, (13, 7)),
    (3, 5, 1, 1, (10, 9)),
])
def test_involution_trains_like_the_unfold_layer(ctx, cuda, strict_math, channels, k, stride, groups, size):
    """The layer's output, input gradient and parameter gradients against the
    same layer in float64 with the unfold reference in place of convtune."""
    torch.manual_seed(SEED)
    layer = convtune.nn.Involution(channels, k, stride, groups, math="strict", context=ctx).to(cuda)
    ref_layer = copy.deepcopy(layer).double()
    x = torch.randn(3, channels, *size, device=cuda, requires_grad=True)
    before = plan_keys(ctx)
    y = layer(x)
    dy = torch.randn_like(y)
    (y * dy).sum().backward()
    xd = x.detach().double().requires_grad_()
    ref = unfold_reference(xd, ref_layer.kernel_weights(xd), stride, 1)
    (ref * dy.double()).sum().backward()
    what = "seed %d, %s" % (SEED, (channels, k, stride, groups, size))
    assert y.shape == (3, channels) + out_hw(*size, stride), what
    assert rel_l2(y, ref) < MODULE_BOUND, what
    assert rel_l2(x.grad, xd.grad) < MODULE_BOUND, what
    for (name, p), q in zip(layer.named_parameters(), ref_layer.parameters()):
        assert rel_l2(p.grad, q.grad) < MODULE_BOUND, (name, what)
    # convtune ran the dynamic op's three passes (the 1x1 convolutions are PyTorch's).
    assert sorted(key.split()[1] for key in plan_keys(ctx) - before) == ["bwd_data", "bwd_filter", "fwd"], what
