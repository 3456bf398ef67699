"""convtune.conv2d as a drop-in for torch.nn.functional.conv2d: padding "same"
and "valid", unbatched (C, H, W) input, a batch of 0, stride / padding /
dilation as an int or 1 or 2 ints, and F.conv2d's errors (same exception
types, PyTorch's words); then PyTorch's own Conv2d test cases
(torch.testing._internal: common_nn's module_tests and new module tests,
common_modules' module_db) through convtune.conv2d against the module's
forward (issue 58, item 4).

The geometry tests need neither torch nor a GPU; the error tests need torch
only (CPU tensors: every argument is checked before any device work); the
rest skip without a CUDA GPU.  Inputs are fresh random numbers each run (the
seed is in every failure message; CONVTUNE_TEST_SEED replays it); plans are
tuned with policy "fast" (conftest.py's ctx).
"""
import json
import os
import subprocess
import sys
import warnings

import pytest

import convtune
from convtune import _problem

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # the geometry tests still run
    torch = F = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")
gpu = pytest.mark.skipif(torch is None or not torch.cuda.is_available(), reason="no CUDA GPU visible to torch")
SEED = int(os.environ["CONVTUNE_TEST_SEED"])
STRICT_BOUND = 1e-5  # relative L2 error, against float64 or PyTorch's fp32 (TF32 off)


def rel_l2(y, ref):
    ref = ref.double()
    return ((y.double() - ref).norm() / ref.norm()).item()


# ---------------------------------------------------------------- geometry (no torch, no GPU)


@pytest.mark.parametrize("x_hw,kernel,dilation,pad,extra", [
    ((8, 8), (3, 3), 1, (1, 1), (0, 0)),      # odd kernel: symmetric
    ((8, 8), (4, 4), 1, (1, 1), (1, 1)),      # even: one more below / right
    ((8, 9), (2, 5), 1, (0, 2), (1, 0)),
    ((8, 8), (4, 3), (2, 1), (3, 1), (0, 0)),  # dilation 2 makes the even total 6
    ((9, 7), (4, 4), 3, (4, 4), (1, 1)),      # odd dilation, even kernel: total 9
    ((1, 1), (5, 5), 1, (2, 2), (0, 0)),      # the window wider than the image
])
def test_same_padding_is_pytorchs(x_hw, kernel, dilation, pad, extra):
    stride, got_pad, dil, got_extra, out = _problem._conv_geometry(x_hw, kernel, 1, "same", dilation)
    assert (got_pad, got_extra) == (pad, extra) and out == x_hw and stride == (1, 1)
    assert _problem._same_padding(kernel, dil) == (pad, extra)


def test_valid_and_numeric_forms():
    geometry = _problem._conv_geometry
    assert geometry((7, 5), (3, 2), 1, "valid", 1)[1:] == ((0, 0), (1, 1), (0, 0), (5, 4))
    for form in (2, (2,), (2, 2), [2, 2]):
        assert geometry((9, 9), (3, 3), form, form, form) == ((2, 2), (2, 2), (2, 2), (0, 0), (5, 5))
    assert geometry((7, 5), (3, 2), (2, 1), (1, 0), (1, 2))[4] == (4, 3)


@pytest.mark.parametrize("args,error,words", [
    (((8, 8), (3, 3), 2, "same", 1), ValueError, "padding='same' is not supported for strided convolutions"),
    (((8, 8), (3, 3), (1, 2), "same", 1), RuntimeError, "not supported for strided"),
    (((8, 8), (3, 3), 1, "full", 1), RuntimeError, "Invalid padding string: 'full'"),
    (((8, 8), (3, 3), (1, 1, 1), 0, 1), ValueError,
     r"expected stride to be a single integer value or a list of 2 values .* stride=\[1, 1, 1\]"),
    (((8, 8), (3, 3), 1, (), 1), RuntimeError, "expected padding to be a single integer value"),
    (((8, 8), (3, 3), 0, 0, 1), convtune.ConvtuneError, "non-positive stride is not supported"),
    (((8, 8), (3, 3), 1, (0, -1), 1), convtune.ConvtuneError, "negative padding is not supported"),
    (((8, 8), (3, 3), 1, 0, -1), convtune.ConvtuneError, "dilation should be greater than zero"),
    (((4, 4), (3, 3), 1, 0, 3), convtune.ConvtuneError,
     r"Calculated padded input size per channel: \(4 x 4\). Kernel size: \(7 x 7\). Kernel size can't"),
    (((8, 8), (3, 3), 1.5, 0, 1), TypeError, "stride"),
])
def test_geometry_errors(args, error, words):
    with pytest.raises(error, match=words) as e:
        _problem._conv_geometry(*args)
    assert isinstance(e.value, RuntimeError) or error is TypeError  # as PyTorch's


# ---------------------------------------------------------------- errors as F.conv2d's (torch, CPU)


def _bad_calls():
    """(what, x, w, bias, keyword arguments, words in both messages): each a call
    F.conv2d refuses, on CPU tensors."""
    x, w, b = torch.randn(2, 4, 8, 8), torch.randn(6, 4, 3, 3), torch.randn(6)
    return [
        ("2-D input", x[0, 0], w, None, {}, "Expected 3D (unbatched) or 4D (batched) input to conv2d"),
        ("padding string", x, w, None, dict(padding="full"), "Invalid padding string"),
        ("same, strided", x, w, None, dict(padding="same", stride=2),
         "padding='same' is not supported for strided convolutions"),
        ("3 strides", x, w, None, dict(stride=(1, 1, 1)),
         "expected stride to be a single integer value or a list of 2 values"),
        ("stride 0", x, w, None, dict(stride=0), "non-positive stride is not supported"),
        ("padding -1", x, w, None, dict(padding=-1), "negative padding is not supported"),
        ("dilation -1", x, w, None, dict(dilation=-1), "dilation should be greater than zero"),
        ("channels", x, torch.randn(6, 2, 3, 3), None, dict(groups=3),
         "to have 6 channels, but got 4 channels instead"),
        ("groups and K", x, torch.randn(5, 2, 3, 3), None, dict(groups=2),
         "expected weight to be divisible by 2 at dimension 0"),
        ("bias", x, w, torch.randn(5), {}, "expected bias to be 1-dimensional with 6 elements"),
        ("kernel > input", x[..., :2, :2], w, b, {}, "Kernel size can't be greater than actual input size"),
        ("dtypes", x, w.double(), None, {}, "should be the same"),
    ]


@needs_torch
def test_refusals_are_pytorchs():
    """Each call F.conv2d refuses is refused by convtune.conv2d with an exception
    of PyTorch's type (RuntimeError), in PyTorch's words, before any device work
    (CPU tensors: convtune would refuse them only after these checks)."""
    contexts = dict(convtune._default_contexts)
    for what, x, w, b, kw, words in _bad_calls():
        with pytest.raises(Exception) as theirs:
            F.conv2d(x, w, b, **kw)
        with pytest.raises(Exception) as ours:
            convtune.conv2d(x, w, b, **kw)
        assert isinstance(ours.value, type(theirs.value)), (what, ours.value, theirs.value)
        if what != "dtypes":  # PyTorch's CPU backends word this one differently
            assert words in str(theirs.value), (what, "PyTorch's message changed", str(theirs.value))
        assert words in str(ours.value), (what, str(ours.value))
    assert convtune._default_contexts == contexts  # nothing was planned


@needs_torch
def test_old_exception_types_still_catch():
    """convtune.conv2d raised ValueError (shapes) and TypeError (dtypes) before it
    took F.conv2d's arguments; those except clauses still catch its errors."""
    x, w = torch.randn(2, 4, 8, 8), torch.randn(6, 4, 3, 3)
    with pytest.raises(ValueError, match="Expected 3D"):
        convtune.conv2d(x[0, 0], w)
    with pytest.raises(ValueError, match="to have 6 channels"):
        convtune.conv2d(x, torch.randn(6, 2, 3, 3), groups=3)
    with pytest.raises(TypeError, match="should be the same"):
        convtune.conv2d(x, w.double())
    with pytest.raises(ValueError, match="x is on cpu"):  # a valid call: the device is what is wrong
        convtune.conv2d(x, w, padding="same")
    with pytest.raises(ValueError, match="x is on cpu"):
        convtune.conv2d(x[0], w, padding="valid")


# ---------------------------------------------------------------- GPU: the forms F.conv2d takes


def reference(x, w, b=None, **kw):
    """F.conv2d in float64 (padding strings included)."""
    return F.conv2d(x.double(), w.double(), None if b is None else b.double(), **kw)


@gpu
@pytest.mark.parametrize("padding", ["same", "valid"])
@pytest.mark.parametrize("kernel,dilation", [
    ((3, 3), 1), ((4, 4), 1), ((2, 5), 1), ((3, 3), 2), ((4, 4), 3), ((4, 3), (2, 1)), ((1, 1), 1)])
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
def test_padding_strings(ctx, cuda, padding, kernel, dilation, channels_last):
    """padding="same" / "valid" with odd and even kernels and dilations: the output,
    its memory format, and the three gradients against F.conv2d in float64."""
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x = torch.randn(2, 6, 13, 11, device=cuda).contiguous(memory_format=fmt).requires_grad_()
    w = torch.randn(8, 6, *kernel, device=cuda).requires_grad_()
    b = torch.randn(8, device=cuda).requires_grad_()
    kw = dict(padding=padding, dilation=dilation)
    y = convtune.conv2d(x, w, b, math="strict", context=ctx, **kw)
    dy = torch.randn_like(y)
    grads = torch.autograd.grad(y, (x, w, b), dy)
    xd, wd, bd = (t.detach().double().requires_grad_() for t in (x, w, b))
    ref = reference(xd, wd, bd, **kw)
    ref_grads = torch.autograd.grad(ref, (xd, wd, bd), dy.double())
    what = "seed %d, %s, kernel %s, dilation %s, %s" % (SEED, padding, kernel, dilation, fmt)
    assert y.shape == ref.shape, what
    if padding == "same":
        assert y.shape[2:] == x.shape[2:], what
    assert y.is_contiguous(memory_format=fmt), what
    assert rel_l2(y, ref) < STRICT_BOUND, what
    for name, got, want in zip(("dx", "dw", "db"), grads, ref_grads):
        assert got.shape == want.shape and rel_l2(got, want) < STRICT_BOUND, (name, what)


@gpu
def test_padding_strings_take_the_numeric_plans(ctx, cuda):
    """'valid' is padding 0 and an odd kernel's 'same' is (k-1)/2 * d: the same plans."""
    x, w = torch.randn(1, 4, 9, 9, device=cuda), torch.randn(4, 4, 3, 3, device=cuda)
    for text, number in (("valid", 0), ("same", 2)):
        convtune.conv2d(x, w, padding=number, dilation=2, context=ctx)
        plans = len(ctx._plans)
        y = convtune.conv2d(x, w, padding=text, dilation=2, context=ctx)
        assert len(ctx._plans) == plans, text
        assert rel_l2(y, reference(x, w, padding=number, dilation=2)) < STRICT_BOUND, (SEED, text)


@gpu
def test_same_padding_of_patches(ctx, cuda):
    """A 5-D (B, P, C, H, W) input with padding="same" and an even kernel."""
    x = torch.randn(2, 3, 4, 6, 6, device=cuda)
    w, b = torch.randn(5, 4, 2, 2, device=cuda), torch.randn(5, device=cuda)
    y = convtune.conv2d(x, w, b, padding="same", context=ctx)
    ref = reference(x.view(6, 4, 6, 6), w, b, padding="same").view(2, 3, 5, 6, 6)
    assert y.shape == (2, 3, 5, 6, 6) and rel_l2(y, ref) < STRICT_BOUND, SEED


@gpu
@pytest.mark.parametrize("channels_last", [False, True], ids=["chw", "hwc"])
def test_unbatched(ctx, cuda, channels_last):
    """(C, H, W) in, (K, P, Q) out, as F.conv2d: forward, gradients, out=, and a
    channels-last image (channels innermost) giving a channels-last output."""
    if channels_last:
        x = torch.randn(9, 10, 6, device=cuda).permute(2, 0, 1)  # (6, 9, 10), channels innermost
    else:
        x = torch.randn(6, 9, 10, device=cuda)
    x.requires_grad_()
    w = torch.randn(4, 3, 3, 3, device=cuda).requires_grad_()
    b = torch.randn(4, device=cuda).requires_grad_()
    kw = dict(stride=(2, 1), padding=1, groups=2)
    y = convtune.conv2d(x, w, b, context=ctx, **kw)
    xd, wd, bd = (t.detach().double().requires_grad_() for t in (x, w, b))
    ref = reference(xd, wd, bd, **kw)
    what = "seed %d, %s" % (SEED, "hwc" if channels_last else "chw")
    assert y.dim() == 3 and y.shape == ref.shape == (4, 5, 10), what
    assert rel_l2(y, ref) < STRICT_BOUND, what
    if channels_last:
        assert y.stride(0) == 1, (y.stride(), what)  # as PyTorch's: channels innermost
    dy = torch.randn_like(y)
    for got, want in zip(torch.autograd.grad(y, (x, w, b), dy),
                         torch.autograd.grad(ref, (xd, wd, bd), dy.double())):
        assert got.shape == want.shape and rel_l2(got, want) < STRICT_BOUND, what
    with torch.no_grad():
        out = torch.full((4, 5, 10), float("nan"), device=cuda)
        if channels_last:
            out = out.permute(1, 2, 0).contiguous().permute(2, 0, 1)
        assert convtune.conv2d(x, w, b, activation="relu", context=ctx, out=out, **kw) is out
        assert rel_l2(out, ref.relu()) < STRICT_BOUND, what
        with pytest.raises(ValueError, match=r"unbatched input \(C, H, W\), out must be"):
            convtune.conv2d(x, w, b, context=ctx, out=torch.empty(1, 4, 5, 10, device=cuda), **kw)
        # padding "same" on an image: the even kernel's extra column, right
        w2 = torch.randn(3, 6, 2, 2, device=cuda)
        assert rel_l2(convtune.conv2d(x, w2, padding="same", context=ctx),
                      reference(x, w2, padding="same")) < STRICT_BOUND, what


@gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
def test_batch_of_zero(ctx, cuda, dtype, channels_last):
    """A batch of 0: an empty output of F.conv2d's shape, x's dtype and memory
    format, no plan; a backward through it gives w and bias zero gradients."""
    dtype = getattr(torch, dtype)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x = torch.empty(0, 6, 9, 7, device=cuda, dtype=dtype).contiguous(memory_format=fmt)
    assert (x.stride(1) == 1) == channels_last  # empty: its strides alone say its format
    w = torch.randn(4, 6, 3, 2, device=cuda, dtype=dtype).requires_grad_()
    b = torch.randn(4, device=cuda).requires_grad_()  # float32 with any dtype, as convtune takes it
    plans = len(ctx._plans)
    for kw in (dict(), dict(padding="same"), dict(stride=2, padding=(1, 0), dilation=(1, 2))):
        y = convtune.conv2d(x, w, b, context=ctx, **kw)
        want = F.conv2d(x, w.detach(), b.detach().to(dtype), **kw)
        assert y.shape == want.shape and y.dtype == dtype and y.device == x.device, kw
        if channels_last:
            assert y.stride(1) == 1, (y.stride(), kw)
        else:
            assert y.stride()[1:] == (y.shape[2] * y.shape[3], y.shape[3], 1), (y.stride(), kw)
        dw, db = torch.autograd.grad(y.sum(), (w, b))
        assert dw.shape == w.shape and not dw.any() and db.shape == b.shape and not db.any(), kw
    with torch.no_grad():
        out = torch.empty(0, 4, 9, 7, device=cuda, dtype=dtype)
        assert convtune.conv2d(x, w, b, padding="same", context=ctx, out=out) is out
        with pytest.raises(ValueError, match="out has shape"):
            convtune.conv2d(x, w, b, context=ctx, out=out)
        # (B, P, C, H, W) patches with no patch
        y5 = convtune.conv2d(torch.empty(3, 0, 6, 9, 7, device=cuda, dtype=dtype), w, b, context=ctx)
        assert y5.shape == (3, 0, 4, 7, 6) and y5.dtype == dtype
    assert len(ctx._plans) == plans  # nothing planned
    # What F.conv2d refuses it refuses with a batch of 0 too.
    with pytest.raises(RuntimeError, match="Kernel size can't be greater"):
        convtune.conv2d(x[..., :1], w, context=ctx)
    with pytest.raises(RuntimeError, match="to have 12 channels"):
        convtune.conv2d(x, w, groups=2, context=ctx)


@gpu
def test_argument_forms(ctx, cuda):
    """stride, padding and dilation as an int, 1 or 2 ints (tuple, list,
    torch.Size): one plan, one result."""
    x, w = torch.randn(2, 4, 12, 12, device=cuda), torch.randn(5, 4, 3, 3, device=cuda)
    ref = reference(x, w, stride=2, padding=2, dilation=2)
    first = convtune.conv2d(x, w, stride=2, padding=2, dilation=2, context=ctx)
    plans = len(ctx._plans)
    assert rel_l2(first, ref) < STRICT_BOUND, SEED
    for form in ((2,), (2, 2), [2], [2, 2], torch.Size([2, 2])):
        y = convtune.conv2d(x, w, stride=form, padding=form, dilation=form, context=ctx)
        assert y.shape == ref.shape and rel_l2(y, ref) < STRICT_BOUND, (SEED, form)
    assert len(ctx._plans) == plans


# ---------------------------------------------------------------- GPU: PyTorch's own Conv2d cases

# Run in a subprocess: importing torch.testing._internal calls
# torch.backends.disable_global_flags(), after which setting
# torch.backends.cudnn.allow_tf32 raises, and parses sys.argv; neither may
# reach this pytest process.  CUDA is hidden from it: only the cases'
# arguments and shapes come back, as JSON.
_CASES_MARK = "CONVTUNE_PYTORCH_CASES "
_CASES_SCRIPT = r'''
import json, sys
import torch

report = {"torch": torch.__version__, "cases": [], "errors": [], "missing": None}


def describe(m):
    return dict(in_channels=m.in_channels, out_channels=m.out_channels, kernel_size=list(m.kernel_size),
                stride=list(m.stride), dilation=list(m.dilation), groups=m.groups, bias=m.bias is not None,
                padding=m.padding if isinstance(m.padding, str) else list(m.padding),
                padding_mode=m.padding_mode)


def add(source, name, m, x):
    case = dict(source=source, name=name)
    if type(m) is not torch.nn.Conv2d:
        case["skip"] = "the module is a %s, not torch.nn.Conv2d" % type(m).__name__
    elif not isinstance(x, torch.Tensor):
        case["skip"] = "the forward input is not one tensor: %r" % (type(x).__name__,)
    else:
        case.update(module=describe(m), input_shape=list(x.shape))
    report["cases"].append(case)


def missing(e):
    """A package torch.testing._internal needs and this Python lacks (expecttest...)."""
    name = getattr(e, "name", None) or ""
    if isinstance(e, ModuleNotFoundError) and name and not name.startswith("torch"):
        report["missing"] = name
        return True
    return False


try:
    from torch.testing._internal import common_nn
except Exception as e:
    if not missing(e):
        report["errors"].append("import torch.testing._internal.common_nn: %r" % (e,))
    common_nn = None
if common_nn is not None:
    tests = list(getattr(common_nn, "module_tests", None) or [])
    if hasattr(common_nn, "get_new_module_tests"):
        tests += list(common_nn.get_new_module_tests())
    elif hasattr(common_nn, "new_module_tests"):
        tests += list(common_nn.new_module_tests)
    else:
        report["errors"].append("common_nn has neither get_new_module_tests() nor new_module_tests")
    for d in tests:
        if not isinstance(d, dict):
            continue
        name = d.get("fullname") or "%s%s" % (d.get("module_name", "?"), "_" + d["desc"] if d.get("desc") else "")
        if not (d.get("module_name") == "Conv2d" or name.startswith("Conv2d")):
            continue
        try:
            if "constructor" in d:
                m = d["constructor"]()
            else:
                m = getattr(torch.nn, d["module_name"])(*d.get("constructor_args", ()),
                                                        **d.get("constructor_kwargs", {}))
            if "input_size" in d:
                x = torch.empty(d["input_size"])
            elif "input_fn" in d:
                x = d["input_fn"]()
            else:
                x = None
        except Exception as e:
            report["errors"].append("common_nn %s: %r" % (name, e))
            continue
        add("common_nn", name, m, x)

try:
    from torch.testing._internal.common_modules import module_db
except Exception as e:
    if not missing(e):
        report["errors"].append("import torch.testing._internal.common_modules.module_db: %r" % (e,))
    module_db = None
if module_db is not None:
    infos = [info for info in module_db if getattr(info, "module_cls", None) is torch.nn.Conv2d]
    if not infos:
        report["errors"].append("module_db has no ModuleInfo whose module_cls is torch.nn.Conv2d")
    for info in infos:
        try:
            inputs = list(info.module_inputs_func(info, device="cpu", dtype=torch.float32,
                                                  requires_grad=False, training=False))
        except Exception as e:
            report["errors"].append("module_db Conv2d module_inputs_func: %r" % (e,))
            continue
        for i, mi in enumerate(inputs):
            name = "Conv2d_%s" % (getattr(mi, "desc", "") or "case%d" % i)
            try:
                ci, fi = mi.constructor_input, mi.forward_input
                m = info.module_cls(*ci.args, **ci.kwargs)
                args = list(fi.args) + list(fi.kwargs.values())
                x = args[0] if len(args) == 1 else None
            except Exception as e:
                report["errors"].append("module_db %s: %r" % (name, e))
                continue
            add("module_db", name, m, x)

sys.stdout.write("\n" + MARK + json.dumps(report) + "\n")
'''.replace("MARK", repr(_CASES_MARK))


def pytorch_conv2d_cases():
    """PyTorch's Conv2d cases as the subprocess reads them: its report dict."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    done = subprocess.run([sys.executable, "-c", _CASES_SCRIPT], env=env, capture_output=True, text=True,
                          timeout=900)
    lines = [line for line in done.stdout.splitlines() if line.startswith(_CASES_MARK)]
    if done.returncode or not lines:
        pytest.fail("reading PyTorch's Conv2d test cases failed (exit %d):\n%s"
                    % (done.returncode, (done.stderr or done.stdout)[-4000:]))
    return json.loads(lines[-1][len(_CASES_MARK):])


def conv2d_module(spec, device):
    """The nn.Conv2d a case's description makes (fresh weights: the default init)."""
    pair = tuple
    padding = spec["padding"] if isinstance(spec["padding"], str) else pair(spec["padding"])
    return torch.nn.Conv2d(spec["in_channels"], spec["out_channels"], pair(spec["kernel_size"]),
                           stride=pair(spec["stride"]), padding=padding, dilation=pair(spec["dilation"]),
                           groups=spec["groups"], bias=spec["bias"], padding_mode=spec["padding_mode"],
                           device=device)


@gpu
def test_pytorch_conv2d_cases(ctx, cuda, strict_math):
    """Every Conv2d case of common_nn (module_tests, the new module tests) and of
    module_db's Conv2d ModuleInfo: convtune.conv2d with the module's weight and
    bias against the module's forward, fp32 with TF32 off, rel L2 < 1e-5.
    padding_mode zeros is F.conv2d's own call; the other modes are nn.Conv2d's
    F.pad (as its forward does) and then conv2d with padding 0.  All must
    agree and none be refused; more than 10 must run (fewer: PyTorch's test
    modules moved, and this test must be taught where).  The summary line is
    printed (pytest -s shows it; -rA too)."""
    report = pytorch_conv2d_cases()
    if report["missing"]:
        pytest.skip("PyTorch's test modules (torch.testing._internal) need the %r package, not installed "
                    "here: pip install %s" % (report["missing"], report["missing"]))
    assert not report["errors"], "PyTorch %s's test modules moved or failed: %s" % (
        report["torch"], report["errors"])
    agreed, refused, wrong, skipped = [], [], [], []
    torch.manual_seed(SEED)
    for case in report["cases"]:
        what = "%s %s" % (case["source"], case["name"])
        if "skip" in case:
            skipped.append("%s: %s" % (what, case["skip"]))
            continue
        spec = case["module"]
        m = conv2d_module(spec, cuda)
        x = torch.randn(case["input_shape"], device=cuda)
        what += " %s, input %s" % ({k: v for k, v in spec.items() if k not in ("in_channels",)},
                                   case["input_shape"])
        with torch.no_grad():
            ref = m(x)
            try:
                if spec["padding_mode"] == "zeros":
                    y = convtune.conv2d(x, m.weight, m.bias, m.stride, m.padding, m.dilation, m.groups,
                                        math="strict", context=ctx)
                else:
                    xp = F.pad(x, m._reversed_padding_repeated_twice, mode=m.padding_mode)
                    y = convtune.conv2d(xp, m.weight, m.bias, m.stride, 0, m.dilation, m.groups,
                                        math="strict", context=ctx)
            except Exception as e:  # a refusal: reported with its reason
                refused.append("%s: %s: %s" % (what, type(e).__name__, e))
                continue
        if y.shape != ref.shape or y.dtype != ref.dtype:
            wrong.append("%s: %s %s, module %s %s" % (what, tuple(y.shape), y.dtype, tuple(ref.shape), ref.dtype))
        elif ref.numel() and not rel_l2(y, ref) < STRICT_BOUND:
            wrong.append("%s: rel L2 %.3g" % (what, rel_l2(y, ref)))
        else:
            agreed.append(what)
    summary = ("PyTorch %s's Conv2d cases through convtune.conv2d (seed %d): %d agree, %d refused, "
               "%d disagree, %d skipped" % (report["torch"], SEED, len(agreed), len(refused), len(wrong),
                                            len(skipped)))
    details = "\n".join(["refused: " + r for r in refused] + ["disagree: " + r for r in wrong]
                        + ["skipped: " + r for r in skipped])
    print(summary + ("\n" + details if details else ""))
    for line in skipped:
        warnings.warn("PyTorch Conv2d case skipped: " + line)
    assert not refused and not wrong, summary + "\n" + details
    assert len(agreed) > 10, ("only %d cases ran: PyTorch's test modules moved? " % len(agreed)) + summary
    for source in ("common_nn", "module_db"):  # PyTorch moves common_nn's tests to module_db over time
        if not any(case["source"] == source for case in report["cases"]):
            warnings.warn("PyTorch %s's %s has no Conv2d case any more" % (report["torch"], source))
